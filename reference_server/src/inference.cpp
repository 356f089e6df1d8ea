// SPDX-License-Identifier: Apache-2.0
#include "inference.hpp"
#include "gpu.hpp"
#include "trace.hpp"

#include <inferwire/core/bytes.hpp>
#include <inferwire/core/shape.hpp>
#include <inferwire/v2/binary.hpp>

#include <algorithm>
#include <array>
#include <optional>
#include <cstring>
#include <numeric>
#include <unordered_set>

namespace inferwire::server {

namespace {

std::string prefix_of(const v2::infer_request& r) { return v2::request_prefix(r.id); }

// Client-given names in a message: each quoted short, the list cut after a few KiB.
std::string name_list(const std::vector<std::string>& names) {
  constexpr std::size_t max_list = 4096;
  std::string s = "[";
  for (std::size_t i = 0; i < names.size(); ++i) {
    if (s.size() > max_list) {
      s += ",...";
      break;
    }
    if (i) s += ',';
    s += "'" + quote_input(names[i]) + "'";
  }
  return s + "]";
}

bool shape_matches(std::span<const std::int64_t> got, std::span<const std::int64_t> want) {
  if (got.size() != want.size()) return false;
  for (std::size_t i = 0; i < got.size(); ++i)
    if (want[i] != -1 && want[i] != got[i]) return false;
  return true;
}

// The "[request id: <id>] " prefix, formatted only when an error message needs it.
struct lazy_prefix {
  const v2::infer_request& r;
  explicit operator std::string() const { return prefix_of(r); }
};
std::string operator+(const lazy_prefix& p, const std::string& s) { return prefix_of(p.r) + s; }
std::string operator+(const lazy_prefix& p, const char* s) { return prefix_of(p.r) + s; }

const char* const batch_note =
    "NOTE: Setting a non-zero max_batch_size in the model config requires a batch dimension to "
    "be prepended to each input shape. If you want to specify the full shape including the "
    "batch dim in your input dims config, try setting max_batch_size to zero. See the model "
    "configuration docs for more info on max_batch_size.";

}  // namespace

status validate_request(const model_config& c, const v2::infer_request& r,
                        std::int64_t& batch_size) {
  const std::string& m = c.name;
  const lazy_prefix pfx{r};  // built only on the error paths
  // Each input's configuration, looked up once (null: the model has no such input).
  constexpr std::size_t few = 16;
  std::array<const tensor_config*, few> found_few{};
  std::vector<const tensor_config*> found_many;
  const std::size_t k = r.inputs.size();
  const tensor_config** found = found_few.data();
  if (k > few) {
    found_many.resize(k);
    found = found_many.data();
  }
  for (std::size_t i = 0; i < k; ++i) found[i] = c.input(r.inputs[i].name);

  // Names are unique among the inputs and among the outputs (the core's texts, for both
  // transports; hash sets keep it linear).
  {
    auto duplicate = [&](std::string_view kind, std::string_view name) {
      return status{errc::invalid_arg, prefix_of(r) + std::string(kind) + " '" + quote_input(name) +
                                           "' already exists in request"};
    };
    // The first repeated name of `list`, if any: a pairwise scan for the usual handful of
    // tensors (no allocation), a hash set beyond that. Two inputs the model has share a name
    // exactly when they share a configuration; names are compared only between inputs it has not.
    auto repeated = [](const auto& list, const tensor_config* const* configs) -> const std::string* {
      if (list.size() <= few) {
        for (std::size_t i = 1; i < list.size(); ++i)
          for (std::size_t j = 0; j < i; ++j) {
            const bool same = configs ? (configs[i] ? configs[i] == configs[j]
                                                    : !configs[j] && list[i].name == list[j].name)
                                      : list[i].name == list[j].name;
            if (same) return &list[i].name;
          }
        return nullptr;
      }
      std::unordered_set<std::string_view> seen;
      seen.reserve(list.size());
      for (const auto& t : list)
        if (!seen.insert(t.name).second) return &t.name;
      return nullptr;
    };
    if (const auto* name = repeated(r.inputs, found)) return duplicate("input", *name);
    if (const auto* name = repeated(r.outputs, nullptr)) return duplicate("output", *name);
  }
  for (const auto& o : r.outputs)
    if (!c.output(o.name))
      return {errc::invalid_arg, "unexpected inference output '" + o.name + "' for model '" + m + "'"};

  // Input count, then names.
  const std::size_t required = c.required_inputs();
  const std::size_t total = c.inputs.size();
  // For the messages of the two count errors: the request's input names, and the required
  // inputs it lacks.
  auto input_names = [&] {
    std::vector<std::string> got;
    for (const auto& in : r.inputs) got.push_back(in.name);
    return got;
  };
  auto missing_required = [&] {
    std::vector<std::string> missing;
    for (const auto& t : c.inputs)
      if (!t.optional && std::none_of(r.inputs.begin(), r.inputs.end(),
                                      [&](const auto& in) { return in.name == t.name; }))
        missing.push_back(t.name);
    return missing;
  };
  if (k < required || k > total) {
    std::string head = required == total
                           ? "expected " + std::to_string(total) + " inputs but got "
                           : "expected number of inputs between " + std::to_string(required) +
                                 " and " + std::to_string(total) + " but got ";
    return {errc::invalid_arg, pfx + head + std::to_string(k) + " inputs for model '" + m +
                                   "'. Got input(s) " + name_list(input_names()) +
                                   ", but missing required input(s) " + name_list(missing_required()) +
                                   ". Please provide all required input(s)."};
  }
  std::size_t required_present = 0;  // distinct, as no name repeats
  for (std::size_t i = 0; i < k; ++i) {
    if (!found[i])
      return {errc::invalid_arg, "unexpected inference input '" + r.inputs[i].name + "' for model '" + m + "'"};
    if (!found[i]->optional) ++required_present;
  }
  // Optional inputs make the count check pass with a required input missing (fewer distinct
  // required inputs present than the model has: at least one is missing).
  if (required_present < required)
    return {errc::invalid_arg,
            pfx + "expected number of inputs between " + std::to_string(required) + " and " +
                std::to_string(total) + " but got " + std::to_string(k) + " inputs for model '" + m +
                "'. Got input(s) " + name_list(input_names()) + ", but missing required input(s) ['" +
                missing_required().front() + "']. Please provide all required input(s)."};

  batch_size = 1;
  bool have_batch = false;
  for (std::size_t i = 0; i < k; ++i) {
    const v2::infer_input& in = r.inputs[i];
    const tensor_config& t = *found[i];
    if (in.datatype != t.datatype)
      return {errc::invalid_arg, pfx + "inference input '" + in.name + "' data-type is '" +
                                     std::string(wire_name(in.datatype)) + "', but model '" + m +
                                     "' expects '" + std::string(wire_name(t.datatype)) + "'"};
    std::span<const std::int64_t> dims(in.shape);
    if (c.batching()) {
      if (dims.empty())
        return {errc::invalid_arg, pfx + "input '" + in.name +
                                       "' has no shape but model requires batch dimension for '" +
                                       m + "'"};
      if (!have_batch) {
        batch_size = dims[0];
        have_batch = true;
      } else if (dims[0] != batch_size) {
        return {errc::invalid_arg, pfx + "input '" + in.name +
                                       "' batch size does not match other inputs for '" + m + "'"};
      }
      dims = dims.subspan(1);
    }
    if (has_variable_dimension(in.shape))
      return {errc::invalid_arg, pfx + "All input dimensions should be specified for input '" +
                                     in.name + "' for model '" + m + "', got " +
                                     to_string(in.shape)};
    if (!shape_matches(dims, t.dims)) {
      shape_t expected = t.dims;
      if (c.batching()) expected.insert(expected.begin(), -1);
      std::string msg = pfx + "unexpected shape for input '" + in.name + "' for model '" + m +
                        "'. Expected " + to_string(expected) + ", got " + to_string(in.shape) + ". ";
      if (c.batching()) msg += batch_note;
      return {errc::invalid_arg, std::move(msg)};
    }
  }
  if (c.batching() && batch_size > c.max_batch_size)
    return {errc::invalid_arg, pfx + "inference request batch-size must be <= " +
                                   std::to_string(c.max_batch_size) + " for '" + m + "'"};

  for (const auto& in : r.inputs) {
    const auto count = element_count(in.shape);
    if (in.datatype == data_type::bytes) {
      if (auto st = validate_bytes_input(in.data.bytes(), count.value, in.name, m, std::string(pfx))) return st;
      continue;
    }
    const auto need = byte_size(in.shape, in.datatype);
    if (need && static_cast<std::uint64_t>(need.value) != in.data.size())
      return {errc::invalid_arg, pfx + "input byte size mismatch for input '" + in.name +
                                     "' for model '" + m + "'. Expected " +
                                     std::to_string(need.value) + ", got " +
                                     std::to_string(in.data.size())};
  }
  return {};
}

// --- shared memory -------------------------------------------------------------------------

status resolve_shared_memory(shm_registry& registry, v2::infer_request& r, tensor_places& places) {
  places.inputs.clear();
  places.outputs.clear();
  places.faults.clear();
  for (std::size_t i = 0; i < r.inputs.size(); ++i) {
    auto& in = r.inputs[i];
    if (in.encoding != v2::tensor_encoding::shared_memory || !in.shm) continue;
    placement p;
    if (auto st = registry.resolve(*in.shm, p, places.leases)) return st;
    if (p.fault) places.faults.push_back(p.fault);
    if (!p.on_device()) {
      in.data = v2::tensor_data::view({p.data, p.size});
      continue;
    }
    if (in.datatype == data_type::bytes) {
      // BYTES elements are parsed on the host.
      std::string host(p.size, '\0');
      if (auto st = gpu_copy({reinterpret_cast<std::byte*>(host.data()), p.size, -1}, p, p.size))
        return st;
      in.data = v2::tensor_data::own(std::move(host));
      continue;
    }
    if (places.inputs.size() <= i) places.inputs.resize(i + 1);
    places.inputs[i] = p;
    in.data = v2::tensor_data::view({p.data, p.size});  // device memory: only its size is read
  }
  for (const auto& o : r.outputs) {
    if (!o.shm) continue;
    placement p;
    if (auto st = registry.resolve(*o.shm, p, places.leases)) return st;
    if (p.fault) places.faults.push_back(p.fault);
    places.outputs.emplace_back(o.name, p);
  }
  return {};
}

// --- classification ------------------------------------------------------------------------

namespace {
template <class T>
std::vector<T> load_all(std::span<const std::byte> b) {
  std::vector<T> v(b.size() / sizeof(T));
  if (!v.empty()) std::memcpy(v.data(), b.data(), v.size() * sizeof(T));
  return v;
}
}  // namespace

status classify(v2::infer_output& o, std::uint64_t k, const tensor_config& t, bool batching) {
  const auto total = static_cast<std::int64_t>(element_count(o.shape).value);
  std::int64_t batch = batching && !o.shape.empty() ? o.shape[0] : 1;
  if (batch <= 0) batch = 1;
  bool supported = false;
  std::vector<std::string> values;  // std::to_string of each element
  std::vector<double> keys;
  auto collect = [&]<class T>(T) {
    supported = true;
    if (total > 1'000'000) return;
    for (T x : load_all<T>(o.data.bytes())) {
      values.push_back(std::to_string(x));
      keys.push_back(static_cast<double>(x));
    }
  };
  switch (o.datatype) {
    case data_type::uint8: collect(std::uint8_t{}); break;
    case data_type::uint16: collect(std::uint16_t{}); break;
    case data_type::uint32: collect(std::uint32_t{}); break;
    case data_type::uint64: collect(std::uint64_t{}); break;
    case data_type::int8: collect(std::int8_t{}); break;
    case data_type::int16: collect(std::int16_t{}); break;
    case data_type::int32: collect(std::int32_t{}); break;
    case data_type::int64: collect(std::int64_t{}); break;
    case data_type::fp32: collect(float{}); break;
    case data_type::fp64: collect(double{}); break;
    default: break;
  }
  if (!supported)
    return {errc::invalid_arg, "class result not available for output due to unsupported type '" +
                                   std::string(wire_name(o.datatype)) + "'"};
  if (total > 1'000'000) return {errc::invalid_arg, "classification output tensor too large"};
  const std::int64_t per = total / batch;
  const auto top = static_cast<std::int64_t>(std::min<std::uint64_t>(k, static_cast<std::uint64_t>(per)));
  bytes_builder out;
  std::vector<std::int64_t> idx(static_cast<std::size_t>(per));
  for (std::int64_t b = 0; b < batch; ++b) {
    std::iota(idx.begin(), idx.end(), 0);
    const std::int64_t base = b * per;
    std::stable_sort(idx.begin(), idx.end(), [&](std::int64_t x, std::int64_t y) {
      return keys[static_cast<std::size_t>(base + x)] > keys[static_cast<std::size_t>(base + y)];
    });
    for (std::int64_t i = 0; i < top; ++i) {
      std::int64_t j = idx[static_cast<std::size_t>(i)];
      std::string s = values[static_cast<std::size_t>(base + j)] + ":" + std::to_string(j);
      if (static_cast<std::size_t>(j) < t.labels.size()) s += ":" + t.labels[static_cast<std::size_t>(j)];
      out.append(s);
    }
  }
  o.datatype = data_type::bytes;
  o.shape = batching ? shape_t{batch, top} : shape_t{top};
  o.data = v2::tensor_data::own(out.release());
  return {};
}

// --- execution -----------------------------------------------------------------------------

namespace {

std::uint64_t ns_between(clock::time_point a, clock::time_point b) {
  return b > a ? static_cast<std::uint64_t>(
                     std::chrono::duration_cast<std::chrono::nanoseconds>(b - a).count())
               : 0;
}

// A control tensor as the sequence batcher injects it: shape [1] (+ batch dim), one element.
v2::infer_input control_tensor(const sequence_control& sc, double value, std::string_view id_text,
                               std::uint64_t id_number, bool batching, std::int64_t batch) {
  v2::infer_input in;
  in.name = sc.input;
  in.datatype = sc.datatype;
  in.shape = batching ? shape_t{batch, 1} : shape_t{1};
  in.encoding = v2::tensor_encoding::binary;
  std::string data;
  for (std::int64_t b = 0; b < batch; ++b) {
    if (sc.kind == control_kind::corrid) {
      switch (sc.datatype) {
        case data_type::bytes: append_bytes_element(data, id_text); break;
        case data_type::uint64:
        case data_type::int64: {
          char buf[8];
          std::memcpy(buf, &id_number, 8);
          data.append(buf, 8);
          break;
        }
        default: {
          auto v = static_cast<std::uint32_t>(id_number);
          char buf[4];
          std::memcpy(buf, &v, 4);
          data.append(buf, 4);
        }
      }
      continue;
    }
    switch (sc.datatype) {
      case data_type::fp32: {
        auto v = static_cast<float>(value);
        char buf[4];
        std::memcpy(buf, &v, 4);
        data.append(buf, 4);
        break;
      }
      case data_type::bool_: data.push_back(value != 0 ? 1 : 0); break;
      default: {
        auto v = static_cast<std::int32_t>(value);
        char buf[4];
        std::memcpy(buf, &v, 4);
        data.append(buf, 4);
      }
    }
  }
  in.data = v2::tensor_data::own(std::move(data));
  return in;
}

// The longest string correlation ID a sequence may have.
constexpr std::size_t max_sequence_id_bytes = 1024;

// One request's way through its model version, a helper per step of execute_request.
class request_run {
 public:
  request_run(model_version& model, const v2::infer_request& r, std::int64_t batch_size,
              const tensor_places* places)
      : model_(model), c_(*model.config), r_(r), places_(places),
        e_{c_, r.inputs, batch_size, nullptr, {}, {}, {}, {}, {}, {}, nullptr, {}, nullptr, nullptr, {}} {
    e_.request = &r;
    e_.outputs = spare_outputs::take();  // given back with the call that takes the response
  }

  void traced_by(trace_record* t) noexcept { e_.trace = t; }
  void cancelled_by(const std::function<bool()>* c) noexcept { e_.cancelled = c; }
  /// The outputs of this request computed elsewhere (its rows of a batch's execution).
  void adopt_outputs(std::vector<v2::infer_output>&& outs) { e_.outputs = std::move(outs); }

  // Shared-memory places; a CPU instance gets inputs in device memory copied to the host.
  status stage_inputs() {
    if (!places_) return {};
    e_.output_places = places_->outputs;
    if (model_.impl->on_gpu()) {
      e_.input_places = places_->inputs;
      return {};
    }
    if (places_->inputs.empty()) return {};
    staged_.reserve(r_.inputs.size());
    for (std::size_t i = 0; i < r_.inputs.size(); ++i) {
      const auto& in = r_.inputs[i];
      auto& v = staged_.emplace_back();
      v.name = in.name;
      v.datatype = in.datatype;
      v.shape = in.shape;
      v.encoding = in.encoding;
      if (i < places_->inputs.size() && places_->inputs[i].data) {
        const placement& p = places_->inputs[i];
        std::string host(p.size, '\0');
        if (auto st = gpu_copy({reinterpret_cast<std::byte*>(host.data()), p.size, -1}, p, p.size)) return st;
        v.data = v2::tensor_data::own(std::move(host));
      } else {
        v.data = v2::tensor_data::view(in.data.bytes());
      }
    }
    inputs_ = &staged_;
    e_.inputs = staged_;
    return {};
  }

  // Sequence models (v2-protocol §7): the correlation ID, the sequence's slot, and the
  // control tensors the sequence batcher injects. Holds the model's sequence lock until the
  // execution is over.
  status begin_sequence(bool lock = true) {
    if (!c_.sequence) return {};
    if (lock) sequence_lock_ = std::unique_lock(model_.sequence_mu);
    std::string id_text;
    std::uint64_t id_number = 0;
    bool string_id = false;
    read_sequence_id(r_, id_text, id_number, string_id);
    const std::string pfx = prefix_of(r_);
    if (id_text.empty() || (!string_id && id_number == 0))
      return {errc::invalid_arg, pfx + "inference request to model '" + c_.name +
                                     "' must specify a non-zero or non-empty correlation ID"};
    // A live sequence keeps its ID until it ends or idles out, long after the request that
    // brought it: 300 sequences started with 4 MiB IDs held 1 GiB.
    if (id_text.size() > max_sequence_id_bytes)
      return {errc::invalid_arg, pfx + "sequence ID has " + std::to_string(id_text.size()) + " bytes, more than the " +
                                     std::to_string(max_sequence_id_bytes) + " allowed"};
    const auto* corrid = c_.sequence->find(control_kind::corrid);
    if (corrid && string_id && corrid->datatype != data_type::bytes)
      return {errc::invalid_arg, pfx + "sequence batching control '" + corrid->input + "' of model '" +
                                     c_.name + "' expects a " + std::string(wire_name(corrid->datatype)) +
                                     " correlation ID, but the request's correlation ID '" + id_text +
                                     "' is a string"};
    const bool seq_start = r_.parameters.get<bool>("sequence_start").value_or(false);
    sequence_end_ = r_.parameters.get<bool>("sequence_end").value_or(false);
    sequence_key_ = (string_id ? "s:" : "u:") + id_text;
    bool found = false, full = false;
    e_.sequence = model_.sequences.begin(sequence_key_, seq_start,
                                         std::chrono::microseconds(c_.sequence->max_idle_us), found, full);
    if (full)
      return {errc::unavailable, pfx + "model '" + c_.name + "' has " + std::to_string(sequence_table::max_live) +
                                     " live sequences, the most it keeps; end sequences or let idle ones expire"};
    if (!e_.sequence)
      return {errc::invalid_arg, pfx + "inference request for sequence " + id_text + " to model '" + c_.name +
                                     "' must specify the START flag on the first request of the sequence"};
    e_.correlation_id = id_text;
    // The request's inputs as views (no copies of their data), then the control tensors.
    with_controls_.reserve(inputs_->size() + c_.sequence->controls.size());
    for (const auto& in : *inputs_) {
      auto& v = with_controls_.emplace_back();
      v.name = in.name;
      v.datatype = in.datatype;
      v.shape = in.shape;
      v.encoding = in.encoding;
      v.data = v2::tensor_data::view(in.data.bytes());
    }
    for (const auto& sc : c_.sequence->controls) {
      double v = 0;
      switch (sc.kind) {
        case control_kind::start: v = seq_start ? sc.true_value : sc.false_value; break;
        case control_kind::end: v = sequence_end_ ? sc.true_value : sc.false_value; break;
        case control_kind::ready: v = sc.true_value; break;
        case control_kind::corrid: break;
      }
      with_controls_.push_back(control_tensor(sc, v, id_text, id_number, c_.batching(), e_.batch_size));
    }
    e_.inputs = with_controls_;
    return {};
  }

  // Decoupled models send their responses as they go, through `on_response`.
  status connect_responses(const response_sink* on_response) {
    if (!c_.decoupled) return {};
    if (!on_response)
      return {errc::unsupported, "this frontend does not support models with decoupled transaction policy"};
    e_.respond = [this, on_response](std::vector<v2::infer_output>&& outs) -> status {
      v2::infer_response resp;
      if (auto st = build(outs, resp)) return st;
      if (!(*on_response)(std::move(resp))) return cancelled_status();
      if (first_response_ == clock::time_point{}) first_response_ = clock::now();
      return {};
    };
    return {};
  }

  /// The execution the backend gets.
  execution& exec() noexcept { return e_; }
  /// Decoupled models: the request's first response time in `d` (none when it sent none);
  /// the others answer once, at the end.
  void first_response(const request_clock& times, version_stats::durations& d) const {
    if (!c_.decoupled) return;
    d.responded = first_response_ != clock::time_point{};
    if (d.responded) d.first_response_ns = ns_between(times.received, first_response_);
  }
  /// The inputs the backend gets (with a sequence's control tensors).
  std::span<const v2::infer_input> inputs() const noexcept { return e_.inputs; }
  sequence_state* sequence() const noexcept { return e_.sequence; }
  const std::string& correlation_id() const noexcept { return e_.correlation_id; }
  /// After a batch ran: a sequence's last request ends the sequence.
  void end_sequence() {
    if (c_.sequence && sequence_end_) model_.sequences.end(sequence_key_);
  }

  // The backend's run; a sequence's last request ends the sequence either way.
  status execute() {
    status st = model_.impl->execute(e_);
    if (c_.sequence && sequence_end_) model_.sequences.end(sequence_key_);
    if (sequence_lock_.owns_lock()) sequence_lock_.unlock();
    return st;
  }

  // The response: the built outputs, or (decoupled) the last outputs sent and an empty final
  // response. A shared-memory region its owner shrank meanwhile fails the request.
  status finish(v2::infer_response& response) {
    if (c_.decoupled) {
      // A backend that is not decoupled-aware answers once, with its outputs.
      if (!e_.outputs.empty())
        if (auto st = e_.respond(std::move(e_.outputs))) return st;
      response = {};
      response.id = r_.id;
      response.model_name = c_.name;
      response.model_version = std::to_string(model_.version);
    } else if (auto st = build(e_.outputs, response)) {
      return st;
    }
    return places_ ? places_->check_faults() : status{};
  }

 private:
  // The response of a set of outputs: the requested ones (all when none are listed), with
  // their encodings, shared-memory destinations and classification.
  status build(std::vector<v2::infer_output>& outs, v2::infer_response& resp) const {
    resp.id = r_.id;
    resp.model_name = c_.name;
    resp.model_version = std::to_string(model_.version);
    resp.outputs.clear();
    if (r_.outputs.empty() && in_config_order(outs)) {
      // Every output, as the backend made them: they become the response's as they are.
      for (auto& o : outs) o.encoding = v2::tensor_encoding::binary;
      resp.outputs = std::move(outs);
      return {};
    }
    resp.outputs.reserve(r_.outputs.empty() ? c_.outputs.size() : r_.outputs.size());
    if (!r_.outputs.empty()) {
      for (const auto& ro : r_.outputs)
        if (auto st = emit(outs, ro.name, ro.classification, resp)) return st;
    } else {
      for (const auto& t : c_.outputs)
        if (auto st = emit(outs, t.name, 0, resp)) return st;
    }
    return {};
  }

  // The backend made exactly the config's outputs, in its order (what emit would pick).
  bool in_config_order(const std::vector<v2::infer_output>& outs) const {
    if (outs.size() != c_.outputs.size()) return false;
    for (std::size_t i = 0; i < outs.size(); ++i)
      if (outs[i].name != c_.outputs[i].name) return false;
    return true;
  }

  // One output into the response: moved out of `outs`, written to its shared-memory
  // destination if it has one, classified if asked.
  status emit(std::vector<v2::infer_output>& outs, std::string_view name, std::uint64_t k,
              v2::infer_response& resp) const {
    auto it = std::find_if(outs.begin(), outs.end(), [&](const auto& o) { return o.name == name; });
    if (it == outs.end()) return {};  // the backend did not produce it (e.g. from an absent optional input)
    v2::infer_output out = std::move(*it);
    // Shared memory is the transport-independent destination; binary or JSON is the HTTP
    // frontend's choice (binary_data), made when it encodes the response.
    out.encoding = v2::tensor_encoding::binary;
    for (const auto& ro : r_.outputs)
      if (ro.name == name && ro.shm) out.encoding = v2::tensor_encoding::shared_memory;
    if (out.encoding == v2::tensor_encoding::shared_memory && places_) {
      if (auto st = write_to_place(out, name)) return st;
      out.data = {};
      out.parameters.clear();
    }
    if (k > 0)
      if (auto st = classify(out, k, *c_.output(name), c_.batching())) return st;
    resp.outputs.push_back(std::move(out));
    return {};
  }

  // Copies an output into its shared-memory destination, unless the backend wrote it there.
  status write_to_place(const v2::infer_output& out, std::string_view name) const {
    for (const auto& [n, p] : places_->outputs) {
      if (n != name) continue;
      const auto bytes = out.data.bytes();
      if (bytes.size() > p.size)
        return {errc::internal, "shared memory size specified with the request for output '" +
                                    std::string(name) + "' (" + std::to_string(p.size) +
                                    " bytes) should be at least " + std::to_string(bytes.size()) +
                                    " bytes to hold the results"};
      if (bytes.data() != p.data)
        return gpu_copy(p, {const_cast<std::byte*>(bytes.data()), bytes.size(), -1}, bytes.size());
      return {};
    }
    return {};
  }

  model_version& model_;
  const model_config& c_;
  const v2::infer_request& r_;
  const tensor_places* places_;
  execution e_;
  const std::vector<v2::infer_input>* inputs_ = &r_.inputs;
  std::vector<v2::infer_input> staged_;         ///< device inputs copied to the host
  std::vector<v2::infer_input> with_controls_;  ///< inputs plus a sequence's control tensors
  std::unique_lock<std::mutex> sequence_lock_;
  clock::time_point first_response_{};  ///< decoupled models: when the first response went
  std::string sequence_key_;
  bool sequence_end_ = false;
};

}  // namespace

status execute_request(model_version& model, const v2::infer_request& r, std::int64_t batch_size,
                       request_clock& times, v2::infer_response& response,
                       const tensor_places* places, const response_sink* on_response, trace_record* trace,
                       const std::function<bool()>* cancelled) {
  version_stats::durations d;
  const auto start = times.compute_start = clock::now();
  d.queue_ns = ns_between(times.queued, start);
  auto fail = [&](status st, bool backend) {
    model.stats.record_failure(ns_between(times.received, clock::now()), reason_of(st, backend));
    return st;
  };
  request_run run(model, r, batch_size, places);
  run.traced_by(trace);
  run.cancelled_by(cancelled);
  if (auto st = run.stage_inputs()) return fail(st, false);
  if (auto st = run.begin_sequence()) return fail(st, false);
  if (auto st = run.connect_responses(on_response)) return fail(st, false);
  const auto inputs_ready = times.compute_input_end = clock::now();
  d.input_ns = ns_between(start, inputs_ready);
  if (auto st = run.execute()) return fail(st, true);
  const auto executed = times.compute_output_start = clock::now();
  d.infer_ns = ns_between(inputs_ready, executed);
  if (auto st = run.finish(response)) return fail(st, false);
  const auto done = times.compute_end = clock::now();
  d.output_ns = ns_between(executed, done);
  if (const auto& split = run.exec().split; split.set) {
    // The backend's own account of its execution, within the time it took here.
    d.input_ns += split.input_ns;
    d.infer_ns = split.infer_ns;
    d.output_ns += split.output_ns;
  }
  d.request_ns = ns_between(times.received, done);
  run.first_response(times, d);
  model.stats.record_success(static_cast<std::uint64_t>(batch_size), d);
  return {};
}

// --- dynamic batches ---------------------------------------------------------------------

namespace {

// What a batch's responses view: the concatenated inputs (outputs may view them) and the
// outputs of the one execution.
struct batch_storage {
  std::vector<std::string> host_inputs;
  std::vector<device_buffer> device_inputs;
  std::vector<v2::infer_input> inputs;
  std::vector<placement> input_places;
  std::vector<v2::infer_output> outputs;
};

// The byte offsets of the rows of a batch output: rows + 1 entries.
status row_offsets(const v2::infer_output& o, std::int64_t rows, std::vector<std::size_t>& at) {
  const auto bytes = o.data.bytes();
  auto bad = [&] {
    return status{errc::internal, "output '" + o.name + "' of a batch of " + std::to_string(rows) +
                                      " has shape " + to_string(o.shape) + " and " +
                                      std::to_string(bytes.size()) + " bytes; it cannot be split by rows"};
  };
  if (o.shape.empty() || o.shape[0] != rows) return bad();
  at.assign(static_cast<std::size_t>(rows) + 1, 0);
  if (o.datatype != data_type::bytes) {
    if (bytes.size() % static_cast<std::size_t>(rows) != 0) return bad();
    const std::size_t row = bytes.size() / static_cast<std::size_t>(rows);
    for (std::size_t i = 0; i < at.size(); ++i) at[i] = i * row;
    return {};
  }
  const auto per_row = element_count(std::span(o.shape).subspan(1));
  if (!per_row) return bad();
  std::size_t pos = 0;
  for (std::int64_t r = 0; r < rows; ++r) {
    at[static_cast<std::size_t>(r)] = pos;
    for (std::int64_t k = 0; k < per_row.value; ++k) {
      if (bytes.size() - pos < 4) return bad();
      std::uint32_t len = 0;
      std::memcpy(&len, bytes.data() + pos, 4);
      if (bytes.size() - pos - 4 < len) return bad();
      pos += 4 + len;
    }
  }
  at.back() = pos;
  return pos == bytes.size() ? status{} : bad();
}

// A member of a batch being run: its request's run (sequence controls included) and its place.
struct batch_entry {
  batch_member* member;
  std::unique_ptr<request_run> run;
};

// Concatenates the members' inputs along the batch dimension: in host memory, or in device
// memory of the model's GPU when its backend runs there (one copy per member, straight from
// wherever the member's tensor is, CUDA shared memory included).
status gather_inputs(const model_version& model, std::span<const batch_entry> members, std::int64_t rows,
                     batch_storage& b) {
  const model_config& c = *model.config;
  const bool on_device = model.impl->on_gpu();
  // Every member has the same inputs (equal batch keys) and the same control tensors.
  for (const auto& proto : members.front().run->inputs()) {
    std::size_t total = 0;
    std::vector<placement> parts;
    parts.reserve(members.size());
    for (const auto& [mp, run] : members) {
      const batch_member& m = *mp;
      const auto in = run->inputs();
      const auto it = std::find_if(in.begin(), in.end(), [&](const auto& i) { return i.name == proto.name; });
      if (it == in.end()) return {errc::internal, "batched requests differ in their inputs"};
      const auto j = static_cast<std::size_t>(it - in.begin());
      placement p{const_cast<std::byte*>(it->data.bytes().data()), it->data.size(), -1};
      if (m.places && j < m.places->inputs.size() && m.places->inputs[j].data) p = m.places->inputs[j];
      parts.push_back(p);
      total += p.size;
    }
    auto& in = b.inputs.emplace_back();
    in.name = proto.name;
    in.datatype = proto.datatype;
    in.shape = proto.shape;
    in.shape[0] = rows;
    in.encoding = v2::tensor_encoding::binary;
    if (on_device) {
      status st;
      auto& buf = b.device_inputs.emplace_back(total, c.gpu_device, st);
      if (st) return st;
      std::size_t at = 0;
      gpu_transfers io(c.gpu_device);
      for (const auto& p : parts) {
        if (auto e = io.to_device(buf.data() + at, p)) return e;
        at += p.size;
      }
      if (auto w = io.finish()) return w;
      b.input_places.push_back({buf.data(), total, c.gpu_device});
      in.data = v2::tensor_data::view(std::span<const std::byte>(buf.data(), total));  // only its size is read
      continue;
    }
    std::string& host = b.host_inputs.emplace_back(total, '\0');  // reserved: never moves
    std::size_t at = 0;
    for (const auto& p : parts) {
      placement dst{reinterpret_cast<std::byte*>(host.data()) + at, p.size, -1};
      if (p.on_device()) {
        if (auto e = gpu_copy(dst, p, p.size)) return e;
      } else if (p.size) {
        std::memcpy(dst.data, p.data, p.size);
      }
      at += p.size;
    }
    b.input_places.push_back({});
    in.data = v2::tensor_data::view(std::span<const std::byte>(reinterpret_cast<const std::byte*>(host.data()), total));
  }
  return {};
}

}  // namespace

namespace {

// A batch for a backend that takes request lists: each member keeps its own inputs (views, no
// concatenation), sequence controls and responder; one backend call runs them all.
void execute_listed(model_version& model, std::span<batch_member> all) {
  const model_config& c = *model.config;
  const auto start = clock::now();
  std::vector<std::unique_ptr<request_run>> runs;
  std::vector<batch_member*> members;
  runs.reserve(all.size());
  members.reserve(all.size());
  {
    std::unique_lock<std::mutex> sequence_lock;
    if (c.sequence) sequence_lock = std::unique_lock(model.sequence_mu);
    for (auto& m : all) {
      m.times->compute_start = start;
      auto run = std::make_unique<request_run>(model, *m.request, m.batch_size, m.places);
      run->cancelled_by(m.cancelled);
      status st = run->stage_inputs();
      if (!st) st = run->begin_sequence(false);
      if (!st) st = run->connect_responses(m.sink);
      if (st) {
        model.stats.record_failure(ns_between(m.times->received, clock::now()), reason_of(st, false));
        m.result = st;
        continue;
      }
      runs.push_back(std::move(run));
      members.push_back(&m);
    }
  }
  if (members.empty()) return;
  std::vector<execution*> list;
  list.reserve(runs.size());
  for (auto& r : runs) list.push_back(&r->exec());
  std::vector<status> results(runs.size());
  const auto inputs_ready = clock::now();
  model.impl->execute_list(list, results);
  const auto executed = clock::now();
  std::int64_t rows = 0;
  std::uint64_t output_ns_total = 0;
  for (std::size_t k = 0; k < runs.size(); ++k) {
    batch_member& m = *members[k];
    runs[k]->end_sequence();
    m.times->compute_input_end = inputs_ready;
    const auto out_start = m.times->compute_output_start = clock::now();
    const bool backend_failed = static_cast<bool>(results[k]);
    m.result = backend_failed ? std::move(results[k]) : runs[k]->finish(*m.response);
    const auto done = m.times->compute_end = clock::now();
    output_ns_total += ns_between(out_start, done);
    if (m.result) {
      model.stats.record_failure(ns_between(m.times->received, done), reason_of(m.result, backend_failed));
      continue;
    }
    rows += m.batch_size;
    version_stats::durations d;
    d.queue_ns = ns_between(m.times->queued, start);
    d.input_ns = ns_between(start, inputs_ready);
    d.infer_ns = ns_between(inputs_ready, executed);
    d.output_ns = ns_between(executed, done);
    if (const auto& split = list[k]->split; split.set) {
      d.input_ns += split.input_ns;
      d.infer_ns = split.infer_ns;
      d.output_ns += split.output_ns;
    }
    d.request_ns = ns_between(m.times->received, done);
    runs[k]->first_response(*m.times, d);
    model.stats.record_request(static_cast<std::uint64_t>(m.batch_size), d);
  }
  if (rows > 0)
    model.stats.record_execution(static_cast<std::uint64_t>(rows), ns_between(start, inputs_ready),
                                 ns_between(inputs_ready, executed), output_ns_total);
}

}  // namespace

void execute_batch(model_version& model, std::span<batch_member> all, std::shared_ptr<const void>& keep) {
  if (model.impl->takes_request_lists()) return execute_listed(model, all);
  const model_config& c = *model.config;
  const auto start = clock::now();
  // Sequence models (`oldest`): each member's sequence is resolved under the model's sequence
  // lock, held until the batch ran; a member refused there fails alone.
  std::unique_lock<std::mutex> sequence_lock;
  if (c.sequence) sequence_lock = std::unique_lock(model.sequence_mu);
  std::vector<batch_entry> members;
  members.reserve(all.size());
  std::int64_t rows = 0;
  for (auto& m : all) {
    m.times->compute_start = start;
    auto run = std::make_unique<request_run>(model, *m.request, m.batch_size, m.places);
    if (auto st = run->begin_sequence(false)) {
      model.stats.record_failure(ns_between(m.times->received, clock::now()), reason_of(st, false));
      m.result = st;
      continue;
    }
    rows += m.batch_size;
    members.push_back({&m, std::move(run)});
  }
  if (members.empty()) return;
  auto fail_all = [&](const status& st, bool backend) {
    const auto now = clock::now();
    for (auto& [m, run] : members) {
      m->result = st;
      model.stats.record_failure(ns_between(m->times->received, now), reason_of(st, backend));
    }
  };
  // Each row's sequence and correlation ID.
  std::vector<sequence_state*> row_sequences;
  std::vector<std::string> row_ids;
  if (c.sequence)
    for (const auto& [m, run] : members)
      for (std::int64_t r = 0; r < m->batch_size; ++r) {
        row_sequences.push_back(run->sequence());
        row_ids.push_back(run->correlation_id());
      }
  auto b = std::make_shared<batch_storage>();
  // Inputs view these buffers (a short string's bytes live in the object): none may move.
  b->host_inputs.reserve(members.front().run->inputs().size());
  if (auto st = gather_inputs(model, members, rows, *b)) return fail_all(st, false);
  execution e{c, b->inputs, rows, nullptr, {}, row_sequences, row_ids, {}, b->input_places, {}, nullptr, {}, nullptr, nullptr, {}};
  const auto inputs_ready = clock::now();
  status executed_status = model.impl->execute(e);
  for (auto& [m, run] : members) run->end_sequence();
  if (sequence_lock.owns_lock()) sequence_lock.unlock();
  if (executed_status) return fail_all(executed_status, true);
  const auto executed = clock::now();
  b->outputs = std::move(e.outputs);
  // Each output's row boundaries, then each member's rows as views.
  std::vector<std::vector<std::size_t>> offsets(b->outputs.size());
  for (std::size_t k = 0; k < b->outputs.size(); ++k)
    if (auto st = row_offsets(b->outputs[k], rows, offsets[k])) return fail_all(st, true);
  const std::uint64_t input_ns = ns_between(start, inputs_ready), infer_ns = ns_between(inputs_ready, executed);
  std::int64_t row = 0;
  std::uint64_t output_ns_total = 0;
  for (auto& [mp, run] : members) {
    batch_member& m = *mp;
    std::vector<v2::infer_output> mine;
    mine.reserve(b->outputs.size());
    for (std::size_t k = 0; k < b->outputs.size(); ++k) {
      const auto& o = b->outputs[k];
      const auto bytes = o.data.bytes();
      const std::size_t from = offsets[k][static_cast<std::size_t>(row)];
      const std::size_t to = offsets[k][static_cast<std::size_t>(row + m.batch_size)];
      auto& v = mine.emplace_back();
      v.name = o.name;
      v.datatype = o.datatype;
      v.shape = o.shape;
      v.shape[0] = m.batch_size;
      v.parameters = o.parameters;
      v.data = v2::tensor_data::view(bytes.subspan(from, to - from));
    }
    row += m.batch_size;
    m.times->compute_input_end = inputs_ready;
    const auto out_start = m.times->compute_output_start = clock::now();
    run->adopt_outputs(std::move(mine));
    m.result = run->finish(*m.response);
    const auto done = m.times->compute_end = clock::now();
    output_ns_total += ns_between(out_start, done);
    if (m.result) {
      model.stats.record_failure(ns_between(m.times->received, done), reason_of(m.result, false));
      continue;
    }
    version_stats::durations d;
    d.queue_ns = ns_between(m.times->queued, start);
    d.input_ns = input_ns;
    d.infer_ns = infer_ns;
    d.output_ns = ns_between(executed, done);
    d.request_ns = ns_between(m.times->received, done);
    model.stats.record_request(static_cast<std::uint64_t>(m.batch_size), d);
  }
  model.stats.record_execution(static_cast<std::uint64_t>(rows), input_ns, infer_ns, output_ns_total);
  keep = std::move(b);
}

void stamp_core(trace_record& t, const request_clock& times) {
  t.stamp("REQUEST_START", times.received);
  t.stamp("QUEUE_START", times.queued);
  t.stamp("COMPUTE_START", times.compute_start);
  t.stamp("COMPUTE_INPUT_END", times.compute_input_end);
  t.stamp("COMPUTE_OUTPUT_START", times.compute_output_start);
  t.stamp("COMPUTE_END", times.compute_end);
  t.stamp_now("REQUEST_END");
}

// --- the runner ------------------------------------------------------------------------------

namespace {

// execute_request where nothing may escape: a failure (an allocation above all) is the call's.
status execute_guarded(infer_call& call, const response_sink* sink,
                       const std::function<bool()>& cancelled) noexcept {
  return guarded([&] {
    return execute_request(*call.model, call.request, call.batch_size, call.times, call.response,
                           &call.places, sink, call.trace.get(), cancelled ? &cancelled : nullptr);
  });
}

// A sequence model's call held its sequence while it waited and ran (instance_gate::schedule).
void release_sequence(infer_call& call) noexcept {
  if (call.sequence_hold)
    call.model->sequences.release(call.held_sequence, std::exchange(call.sequence_hold, 0));
}

void run_one(infer_call& call) {
  status st;
  {
    execution_count counted;
    st = execute_guarded(call, nullptr, call.hooks.cancelled);
  }
  release_sequence(call);
  call.finish(std::move(st));
}

void run_batch(std::vector<call_ptr>&& batch, instance_gate& gate) {
  const std::shared_ptr<model_version> model = batch.front()->model;
  std::optional<execution_count> counted(std::in_place);  // until the instance is released
  std::vector<status> results(batch.size());
  std::vector<std::size_t> live;
  live.reserve(batch.size());
  for (std::size_t i = 0; i < batch.size(); ++i) {
    const auto& hooks = batch[i]->hooks;
    if (hooks.cancelled && hooks.cancelled()) {
      // A client that gave up while its request waited (Triton: CANCELED).
      results[i] = cancelled_status();
      model->stats.record_failure(static_cast<std::uint64_t>(std::chrono::duration_cast<std::chrono::nanoseconds>(
                                      clock::now() - batch[i]->times.received).count()),
                                  failure_reason::canceled);
    }
    else live.push_back(i);
  }
  if (live.size() == 1) {
    infer_call& call = *batch[live.front()];
    if (const response_sink* sink = call.hooks.sink) {
      const auto& cancelled = call.hooks.cancelled;
      const response_sink checked = [&](v2::infer_response&& r) {
        return !(cancelled && cancelled()) && (*sink)(std::move(r));
      };
      results[live.front()] = execute_guarded(call, &checked, cancelled);
    } else {
      results[live.front()] = execute_guarded(call, nullptr, call.hooks.cancelled);
    }
  } else if (live.size() > 1) {
    std::vector<batch_member> members;
    members.reserve(live.size());
    for (auto i : live) {
      infer_call& c = *batch[i];
      members.push_back({&c.request, c.batch_size, &c.times, &c.response, &c.places, c.hooks.sink,
                         c.hooks.cancelled ? &c.hooks.cancelled : nullptr, {}});
    }
    std::shared_ptr<const void> keep;
    if (auto st = guarded([&] {
          execute_batch(*model, members, keep);
          return status{};
        }))
      for (auto& m : members) m.result = st;
    for (std::size_t k = 0; k < live.size(); ++k) {
      results[live[k]] = std::move(members[k].result);
      batch[live[k]]->batch_data = keep;
    }
  }
  for (auto& c : batch) release_sequence(*c);
  counted.reset();
  // The instance is free before the responses are encoded: the next batch does not wait.
  gate.release(batch);
  for (std::size_t i = 0; i < batch.size(); ++i) batch[i]->finish(std::move(results[i]));
  gate.answered();
}

void expire_call(call_ptr call) {
  release_sequence(*call);
  call->model->stats.record_failure(static_cast<std::uint64_t>(std::chrono::duration_cast<std::chrono::nanoseconds>(
                                        clock::now() - call->times.received).count()),
                                    failure_reason::rejected);
  call->finish({errc::unavailable, call->model->config->sequence ? "timeout of the corresponding sequence has been expired"
                                                                 : "Request timeout expired"});
}

constexpr batch_runner runner{&run_one, &run_batch, &expire_call};

}  // namespace

const batch_runner& inference_runner() noexcept { return runner; }

}  // namespace inferwire::server
