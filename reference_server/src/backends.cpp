// SPDX-License-Identifier: Apache-2.0
#include "backends.hpp"
#include "gpu.hpp"
#include "spare_blocks.hpp"

#include <inferwire/core/bytes.hpp>

#include <algorithm>
#include <array>
#include <atomic>
#include <charconv>
#include <chrono>
#include <cstring>
#include <deque>
#include <map>
#include <mutex>
#include <thread>

namespace inferwire::server {

namespace {

template <class T>
T load(const std::byte* p) noexcept {
  T v;
  std::memcpy(&v, p, sizeof(T));
  return v;
}
template <class T>
void store(char* p, T v) noexcept {
  std::memcpy(p, &v, sizeof(T));
}

/// Calls f(T{}) with the C++ element type of a numeric data type; false for the others.
template <class F>
bool visit_numeric(data_type t, F&& f) {
  switch (t) {
    case data_type::uint8: f(std::uint8_t{}); return true;
    case data_type::uint16: f(std::uint16_t{}); return true;
    case data_type::uint32: f(std::uint32_t{}); return true;
    case data_type::uint64: f(std::uint64_t{}); return true;
    case data_type::int8: f(std::int8_t{}); return true;
    case data_type::int16: f(std::int16_t{}); return true;
    case data_type::int32: f(std::int32_t{}); return true;
    case data_type::int64: f(std::int64_t{}); return true;
    case data_type::fp32: f(float{}); return true;
    case data_type::fp64: f(double{}); return true;
    default: return false;
  }
}

std::atomic<bool> waits_interrupted{false};

// The config's execute_delay_ms, waited through pause().
status apply_delay(const execution& e) {
  auto it = e.config.parameters.find("execute_delay_ms");
  if (it == e.config.parameters.end()) return {};
  std::int64_t ms = 0;
  std::from_chars(it->second.data(), it->second.data() + it->second.size(), ms);
  return ms > 0 ? pause(e, std::chrono::milliseconds(ms)) : status{};
}

status missing_input(const execution& e, std::string_view name) {
  return {errc::internal, "model '" + e.config.name + "' did not receive input '" +
                              std::string(name) + "'"};
}

// The two inputs of the `simple` family, checked against a config of two inputs and two
// outputs.
status two_inputs(const execution& e, std::string_view backend, const v2::infer_input*& a,
                  const v2::infer_input*& b) {
  const auto& c = e.config;
  if (c.inputs.size() != 2 || c.outputs.size() != 2)
    return {errc::internal, "backend '" + std::string(backend) + "' needs two inputs and two outputs"};
  a = e.input(c.inputs[0].name);
  b = e.input(c.inputs[1].name);
  if (!a) return missing_input(e, c.inputs[0].name);
  if (!b) return missing_input(e, c.inputs[1].name);
  return {};
}

v2::infer_output make_output(const tensor_config& t, const shape_t& shape, v2::tensor_data data) {
  v2::infer_output o;
  o.name = t.name;
  o.datatype = t.datatype;
  o.shape = spare_shapes::take();  // given back with the call
  o.shape.assign(shape.begin(), shape.end());
  o.data = std::move(data);
  return o;
}
v2::infer_output make_output(const tensor_config& t, const shape_t& shape, std::string data) {
  return make_output(t, shape, v2::tensor_data::own(std::move(data)));
}

// OUTPUT0 = INPUT0 + INPUT1, OUTPUT1 = INPUT0 - INPUT1.
class simple_backend final : public backend {
 public:
  status execute(execution& e) override {
    const auto& c = e.config;
    const v2::infer_input *a = nullptr, *b = nullptr;
    if (auto st = two_inputs(e, "simple", a, b)) return st;
    if (a->datatype != b->datatype || a->data.size() != b->data.size())
      return {errc::invalid_arg, "inputs of model '" + c.name + "' must have the same shape"};
    // Results go straight into host shared-memory destinations that can hold them.
    const std::size_t bytes = a->data.size();
    std::string sum_own, diff_own;
    auto target = [&](const tensor_config& t, std::string& own) -> char* {
      if (const placement* p = e.output_place(t.name); p && !p->on_device() && p->size >= bytes)
        return reinterpret_cast<char*>(p->data);
      if (bytes <= spare_strings::max_capacity) own = spare_strings::take();  // given back with the call
      own.assign(bytes, '\0');
      return own.data();
    };
    char* sum = target(c.outputs[0], sum_own);
    char* diff = target(c.outputs[1], diff_own);
    bool ok = visit_numeric(a->datatype, [&]<class T>(T) {
      const std::size_t n = bytes / sizeof(T);
      const std::byte* pa = a->data.bytes().data();
      const std::byte* pb = b->data.bytes().data();
      for (std::size_t i = 0; i < n; ++i) {
        T x = load<T>(pa + i * sizeof(T)), y = load<T>(pb + i * sizeof(T));
        if constexpr (std::is_integral_v<T>) {
          // Wrap to the element width, as int32 arithmetic narrowed back would.
          using U = std::make_unsigned_t<T>;
          store(sum + i * sizeof(T), static_cast<T>(static_cast<U>(static_cast<U>(x) + static_cast<U>(y))));
          store(diff + i * sizeof(T), static_cast<T>(static_cast<U>(static_cast<U>(x) - static_cast<U>(y))));
        } else {
          store(sum + i * sizeof(T), static_cast<T>(x + y));
          store(diff + i * sizeof(T), static_cast<T>(x - y));
        }
      }
    });
    if (!ok)
      return {errc::invalid_arg, "backend 'simple' does not support data type " +
                                     std::string(wire_name(a->datatype))};
    if (auto st = apply_delay(e)) return st;
    auto result = [&](const tensor_config& t, char* p, std::string& own) {
      if (p != own.data() || own.empty())
        return make_output(t, a->shape,
                           v2::tensor_data::view({reinterpret_cast<const std::byte*>(p), bytes}));
      return make_output(t, a->shape, v2::tensor_data::own(std::move(own)));
    };
    e.outputs.reserve(e.outputs.size() + 2);
    e.outputs.push_back(result(c.outputs[0], sum, sum_own));
    e.outputs.push_back(result(c.outputs[1], diff, diff_own));
    return {};
  }
};

std::int32_t parse_int32(std::string_view s) {
  // Like atoi: leading whitespace, optional sign, digits; anything else ends the number.
  std::size_t i = 0;
  while (i < s.size() && (s[i] == ' ' || s[i] == '\t' || s[i] == '\n')) ++i;
  if (i < s.size() && s[i] == '+') ++i;
  std::int64_t v = 0;
  auto [p, ec] = std::from_chars(s.data() + i, s.data() + s.size(), v);
  (void)p;
  if (ec != std::errc{}) return 0;
  return static_cast<std::int32_t>(v);
}

// simple on BYTES elements holding decimal integers.
class simple_string_backend final : public backend {
 public:
  status execute(execution& e) override {
    const auto& c = e.config;
    const v2::infer_input *a = nullptr, *b = nullptr;
    if (auto st = two_inputs(e, "simple_string", a, b)) return st;
    std::vector<std::string_view> xa, xb;
    if (!bytes_view(a->data.bytes()).decode(xa) || !bytes_view(b->data.bytes()).decode(xb))
      return {errc::invalid_arg, "malformed BYTES input for model '" + c.name + "'"};
    if (xa.size() != xb.size())
      return {errc::invalid_arg, "inputs of model '" + c.name + "' must have the same shape"};
    bytes_builder sum, diff;
    for (std::size_t i = 0; i < xa.size(); ++i) {
      std::int32_t x = parse_int32(xa[i]), y = parse_int32(xb[i]);
      auto s = static_cast<std::int32_t>(static_cast<std::uint32_t>(x) + static_cast<std::uint32_t>(y));
      auto d = static_cast<std::int32_t>(static_cast<std::uint32_t>(x) - static_cast<std::uint32_t>(y));
      sum.append(std::to_string(s));
      diff.append(std::to_string(d));
    }
    if (auto st = apply_delay(e)) return st;
    e.outputs.push_back(make_output(c.outputs[0], a->shape, sum.release()));
    e.outputs.push_back(make_output(c.outputs[1], a->shape, diff.release()));
    return {};
  }
};

// OUTPUT<i> = INPUT<i>; the output views the input's bytes (no copy).
// The walk of both identity backends: each input present with the output it becomes, after
// the config check and the artificial delay; absent optional inputs are skipped.
template <class F>
status for_each_identity_pair(execution& e, F f) {
  const auto& c = e.config;
  if (c.inputs.size() != c.outputs.size())
    return {errc::internal, "backend 'identity' needs as many outputs as inputs"};
  if (auto st = apply_delay(e)) return st;
  for (std::size_t i = 0; i < c.inputs.size(); ++i) {
    const auto* in = e.input(c.inputs[i].name);
    if (!in) {
      if (c.inputs[i].optional) continue;
      return missing_input(e, c.inputs[i].name);
    }
    if (auto st = f(*in, c.outputs[i])) return st;
  }
  return {};
}

class identity_backend final : public backend {
 public:
  bool size_free() const noexcept override { return true; }
  status execute(execution& e) override {
    return for_each_identity_pair(e, [&e](const v2::infer_input& in, const tensor_config& out) -> status {
      e.outputs.push_back({out.name, in.datatype, in.shape, v2::tensor_encoding::binary,
                           v2::tensor_data::view(in.data.bytes()), {}});
      return {};
    });
  }
};

// The value of a control input for batch row `row` (the sequence batcher injects one element
// per row; rows of an `oldest` batch belong to different sequences).
double control_value(const execution& e, control_kind k, double fallback, std::int64_t row = 0) {
  if (!e.config.sequence) return fallback;
  const auto* c = e.config.sequence->find(k);
  if (!c) return fallback;
  const auto* in = e.input(c->input);
  if (!in || in->data.empty()) return fallback;
  const std::size_t width = in->datatype == data_type::bool_ ? 1 : (in->datatype == data_type::uint64 || in->datatype == data_type::int64) ? 8 : 4;
  const auto at = static_cast<std::size_t>(row) * width;
  if (in->data.size() < at + width) return fallback;
  const std::byte* p = in->data.bytes().data() + at;
  switch (in->datatype) {
    case data_type::int32: return load<std::int32_t>(p);
    case data_type::fp32: return load<float>(p);
    case data_type::bool_: return load<std::uint8_t>(p) ? 1 : 0;
    case data_type::uint64: return static_cast<double>(load<std::uint64_t>(p));
    case data_type::int64: return static_cast<double>(load<std::int64_t>(p));
    case data_type::uint32: return load<std::uint32_t>(p);
    default: return fallback;
  }
}

// The sequence models of the example repository (v2-protocol §9).
class sequence_backend final : public backend {
 public:
  enum class mode { plain, dyna, accumulate };
  explicit sequence_backend(mode m) : mode_(m) {}

  status execute(execution& e) override {
    const auto& c = e.config;
    if (c.inputs.size() != 1 || c.outputs.size() != 1 || c.inputs[0].datatype != data_type::int32 ||
        c.outputs[0].datatype != data_type::int32)
      return {errc::internal, "sequence backends need one INT32 input and one INT32 output"};
    const auto* in = e.input(c.inputs[0].name);
    if (!in) return missing_input(e, c.inputs[0].name);
    // Row by row: in an `oldest` batch each row is its own sequence, with its own controls and
    // state (e.row_sequences); otherwise every row is the request's sequence.
    const std::int64_t rows = std::max<std::int64_t>(e.batch_size, 1);
    const std::size_t n = in->data.size() / 4;
    const std::size_t per_row = n / static_cast<std::size_t>(rows);
    const auto* cc = c.sequence ? c.sequence->find(control_kind::corrid) : nullptr;
    std::string out(n * 4, '\0');
    for (std::int64_t row = 0; row < rows; ++row) {
      const auto start = static_cast<std::int64_t>(control_value(e, control_kind::start, 0, row));
      const auto ready = static_cast<std::int64_t>(control_value(e, control_kind::ready, 1, row));
      const auto end = static_cast<std::int64_t>(control_value(e, control_kind::end, 0, row));
      const auto r_index = static_cast<std::size_t>(row);
      std::int64_t corrid = 0;
      if (cc && cc->datatype != data_type::bytes)
        corrid = static_cast<std::int64_t>(control_value(e, control_kind::corrid, 0, row));
      else
        corrid = parse_int32(r_index < e.row_correlation_ids.size() ? e.row_correlation_ids[r_index] : e.correlation_id);
      sequence_state* seq = r_index < e.row_sequences.size() ? e.row_sequences[r_index] : e.sequence;
      for (std::size_t i = r_index * per_row; i < (r_index + 1) * per_row; ++i) {
        std::int64_t x = load<std::int32_t>(in->data.bytes().data() + i * 4);
        std::int64_t r = 0;
        switch (mode_) {
          case mode::plain: r = (x + start) * ready; break;
          case mode::dyna: r = (x + start + end * static_cast<std::int32_t>(corrid)) * ready; break;
          case mode::accumulate: {
            if (!seq) return {errc::internal, "accumulator model without a sequence"};
            if (!ready) break;
            std::int64_t acc = start ? x : seq->accumulator + x;
            if (end) acc += corrid;
            seq->accumulator = acc;
            r = acc;
            break;
          }
        }
        store(out.data() + i * 4, static_cast<std::int32_t>(r));
      }
    }
    if (auto st = apply_delay(e)) return st;
    e.outputs.push_back(make_output(c.outputs[0], in->shape, std::move(out)));
    return {};
  }

 private:
  mode mode_;
};


// --- GPU instances -------------------------------------------------------------------------
// Inputs already on the instance's GPU (CUDA shared memory) are read in place; outputs whose
// destination is device memory of that GPU are written in place. Everything else is staged:
// device scratch from the pool, host data through the thread's pinned buffer. Copies and
// kernels are queued on the thread's stream, and a request waits for the GPU once.

/// The device address of an input on GPU `device`, staging it into `scratch` when needed (the
/// copy is queued on `io`).
status device_input(const execution& e, const v2::infer_input& in, int device, gpu_transfers& io,
                    device_buffer& scratch, const std::byte*& out) {
  const placement p = e.place_of(in);
  if (p.on_device() && p.device == device) {
    out = p.data;
    return {};
  }
  status st;
  scratch = device_buffer(p.size, device, st);
  if (st) return st;
  if (auto c = io.to_device(scratch.data(), p)) return c;
  out = scratch.data();
  return {};
}

/// Where a `bytes`-byte output computed on GPU `device` is written: its destination when that
/// is device memory of the GPU, otherwise `scratch`.
std::byte* device_output(const execution& e, std::string_view name, std::size_t bytes, int device,
                         device_buffer& scratch, status& st) {
  if (const placement* p = e.output_place(name);
      p && p->on_device() && p->device == device && p->size >= bytes)
    return p->data;
  scratch = device_buffer(bytes, device, st);
  return scratch.data();
}

/// Outputs computed on one GPU: each is a view of its device destination, or is copied (on
/// `io`) to its host destination when that holds it, or to new host memory. They join the
/// execution's outputs in finish(), after the request's one wait.
class device_results {
 public:
  explicit device_results(gpu_transfers& io) : io_(io) {}

  status add(execution& e, const tensor_config& t, const shape_t& shape, std::byte* data, std::size_t bytes,
             int device, data_type type) {
    const placement* p = e.output_place(t.name);
    auto& r = pending_.emplace_back();  // (a deque: earlier entries, and their buffers, stay put)
    r.out.name = t.name;
    r.out.datatype = type;
    r.out.shape = shape;
    if (p && p->data == data) {
      r.out.data = v2::tensor_data::view({data, bytes});
    } else if (p && !p->on_device() && p->size >= bytes) {
      r.out.data = v2::tensor_data::view({p->data, bytes});
      return io_.to_host(p->data, {data, bytes, device});
    } else {
      r.owns = true;
      r.host.assign(bytes, '\0');
      return io_.to_host(reinterpret_cast<std::byte*>(r.host.data()), {data, bytes, device});
    }
    return {};
  }

  status finish(execution& e) {
    if (auto st = io_.finish()) return st;
    for (auto& r : pending_) {
      if (r.owns) r.out.data = v2::tensor_data::own(std::move(r.host));
      e.outputs.push_back(std::move(r.out));
    }
    pending_.clear();
    return {};
  }

 private:
  struct result {
    v2::infer_output out;
    std::string host;
    bool owns = false;
  };
  gpu_transfers& io_;
  std::deque<result> pending_;
};

// `simple` on the GPU: one kernel computes both outputs.
class gpu_simple_backend final : public backend {
 public:
  bool on_gpu() const noexcept override { return true; }
  status execute(execution& e) override {
    const auto& c = e.config;
    const int device = c.gpu_device;
    const v2::infer_input *a = nullptr, *b = nullptr;
    if (auto st = two_inputs(e, "simple", a, b)) return st;
    if (a->datatype != b->datatype || a->data.size() != b->data.size())
      return {errc::invalid_arg, "inputs of model '" + c.name + "' must have the same shape"};
    const std::size_t bytes = a->data.size();
    const std::size_t width = element_size(a->datatype);
    if (width == 0)
      return {errc::invalid_arg, "backend 'simple' does not support data type " +
                                     std::string(wire_name(a->datatype))};
    gpu_transfers io(device);  // on an early return its destructor waits for what it queued
    device_buffer sa, sb, ssum, sdiff;
    const std::byte *pa = nullptr, *pb = nullptr;
    if (auto st = device_input(e, *a, device, io, sa, pa)) return st;
    if (auto st = device_input(e, *b, device, io, sb, pb)) return st;
    status st;
    std::byte* sum = device_output(e, c.outputs[0].name, bytes, device, ssum, st);
    if (st) return st;
    std::byte* diff = device_output(e, c.outputs[1].name, bytes, device, sdiff, st);
    if (st) return st;
    if (auto k = gpu_add_sub(device, a->datatype, pa, pb, sum, diff, bytes / width, gpu_completion::queue))
      return k;
    device_results results(io);
    if (auto f = results.add(e, c.outputs[0], a->shape, sum, bytes, device, a->datatype)) return f;
    if (auto f = results.add(e, c.outputs[1], a->shape, diff, bytes, device, a->datatype)) return f;
    if (auto f = results.finish(e)) return f;
    return apply_delay(e);
  }
};

// `identity` on the GPU: device-to-device copies into device destinations; inputs on the GPU
// that go back to host memory are copied out once. One wait per tensor (on the GPU its data or
// destination is on).
class gpu_identity_backend final : public backend {
 public:
  bool on_gpu() const noexcept override { return true; }
  status execute(execution& e) override {
    return for_each_identity_pair(e, [&e](const v2::infer_input& in, const tensor_config& out) -> status {
      const placement src = e.place_of(in);
      const placement* dst = e.output_place(out.name);
      const bool to_device = dst && dst->on_device() && dst->size >= src.size;
      if (src.on_device() && !to_device) {
        gpu_transfers io(src.device);
        device_results results(io);
        if (auto st = results.add(e, out, in.shape, src.data, src.size, src.device, in.datatype)) return st;
        return results.finish(e);
      }
      v2::infer_output o{out.name, in.datatype, in.shape, v2::tensor_encoding::binary, {}, {}};
      if (to_device) {
        gpu_transfers io(dst->device);
        if (auto st = io.to_device(dst->data, src)) return st;
        if (auto st = io.finish()) return st;
        o.data = v2::tensor_data::view({dst->data, src.size});
      } else {
        o.data = v2::tensor_data::view(in.data.bytes());
      }
      e.outputs.push_back(std::move(o));
      return {};
    });
  }
};

// repeat_int32's backend (decoupled): IN (INT32 [-1]), DELAY (UINT32 [-1]), WAIT (UINT32 [1]);
// for each element i, sleeps DELAY[i] ms (DELAY may be shorter than IN: missing delays are 0)
// and sends OUT = [IN[i]], IDX = [i]. WAIT is accepted and not used.
class repeat_backend final : public backend {
 public:
  status execute(execution& e) override {
    if (!e.respond) return {errc::internal, "backend 'repeat' needs a decoupled model"};
    const auto* in = e.input("IN");
    if (!in) return missing_input(e, "IN");
    if (in->datatype != data_type::int32) return {errc::invalid_arg, "input 'IN' of backend 'repeat' must be INT32"};
    const auto* delay = e.input("DELAY");
    if (delay && delay->datatype != data_type::uint32)
      return {errc::invalid_arg, "input 'DELAY' of backend 'repeat' must be UINT32"};
    if (auto st = apply_delay(e)) return st;
    const auto values = in->as<std::int32_t>();
    const std::size_t delays = delay ? delay->data.size() / 4 : 0;
    for (std::size_t i = 0; i < values.size(); ++i) {
      if (i < delays) {
        std::uint32_t ms = 0;
        std::memcpy(&ms, delay->data.bytes().data() + 4 * i, 4);
        if (ms)
          if (auto st = pause(e, std::chrono::milliseconds(ms))) return st;
      }
      std::vector<v2::infer_output> outs(2);
      const std::int32_t v = values[i];
      const auto idx = static_cast<std::uint32_t>(i);
      outs[0] = {"OUT", data_type::int32, {1}, v2::tensor_encoding::binary,
                 v2::tensor_data::own(std::string(reinterpret_cast<const char*>(&v), 4)), {}};
      outs[1] = {"IDX", data_type::uint32, {1}, v2::tensor_encoding::binary,
                 v2::tensor_data::own(std::string(reinterpret_cast<const char*>(&idx), 4)), {}};
      if (auto st = e.respond(std::move(outs))) return st;
    }
    return {};
  }
};

constexpr std::array<std::string_view, 7> backend_names{
    "simple", "simple_string", "identity", "sequence", "dyna_sequence", "accumulator", "repeat"};

}  // namespace

std::span<const std::string_view> builtin_backends() noexcept { return backend_names; }

status pause(const execution& e, std::chrono::milliseconds d) {
  // In steps short enough that a client that left or the end of the exit timeout is noticed
  // within them; a client-given delay of days then holds an instance only while it is wanted.
  constexpr auto step = std::chrono::milliseconds(20);
  const auto until = std::chrono::steady_clock::now() + d;
  for (;;) {
    if (waits_interrupted.load(std::memory_order_relaxed))
      return {errc::unavailable, "the server's exit timeout expired while model '" + e.config.name + "' waited"};
    if (e.cancelled && *e.cancelled && (*e.cancelled)()) return cancelled_status();
    const auto now = std::chrono::steady_clock::now();
    if (now >= until) return {};
    std::this_thread::sleep_for(std::min<std::chrono::steady_clock::duration>(until - now, step));
  }
}

void interrupt_waits() noexcept { waits_interrupted.store(true, std::memory_order_relaxed); }

namespace {
std::atomic<std::int64_t> executions_running{0};
}  // namespace
execution_count::execution_count() noexcept { executions_running.fetch_add(1, std::memory_order_relaxed); }
execution_count::~execution_count() { executions_running.fetch_sub(1, std::memory_order_relaxed); }
std::int64_t execution_count::running() noexcept { return executions_running.load(std::memory_order_relaxed); }
bool waits_are_interrupted() noexcept { return waits_interrupted.load(std::memory_order_relaxed); }

namespace {

struct backend_table {
  std::mutex mu;
  std::map<std::string, backend_factory, std::less<>> made;
};
backend_table& registered() {
  static backend_table t;
  return t;
}

library_loader& loader() {
  static library_loader l;
  return l;
}

}  // namespace

void set_library_loader(library_loader load) {
  backend_table& t = registered();
  std::lock_guard lock(t.mu);
  loader() = std::move(load);
}

void register_backend(std::string name, backend_factory make) {
  backend_table& t = registered();
  std::lock_guard lock(t.mu);
  t.made[std::move(name)] = std::move(make);
}

std::unique_ptr<backend> make_backend(const model_config& config, const model_location& where, status& st) {
  const std::string& b = config.backend;
  {
    backend_table& t = registered();
    backend_factory make;
    library_loader load;
    {
      std::lock_guard lock(t.mu);
      if (auto it = t.made.find(b); it != t.made.end()) make = it->second;
      load = loader();
    }
    if (make) return make(config, st);
    if (load) {
      bool found = false;
      auto library = load(config, where, st, found);
      if (found || st) return library;
    }
  }
  if (config.gpu_device >= 0) {
    if (b == "simple") return std::make_unique<gpu_simple_backend>();
    if (b == "identity") return std::make_unique<gpu_identity_backend>();
  }
  if (b == "simple") return std::make_unique<simple_backend>();
  if (b == "simple_string") return std::make_unique<simple_string_backend>();
  if (b == "identity") return std::make_unique<identity_backend>();
  if (b == "sequence") return std::make_unique<sequence_backend>(sequence_backend::mode::plain);
  if (b == "dyna_sequence") return std::make_unique<sequence_backend>(sequence_backend::mode::dyna);
  if (b == "accumulator")
    return std::make_unique<sequence_backend>(sequence_backend::mode::accumulate);
  if (b == "repeat") return std::make_unique<repeat_backend>();
  st = {errc::invalid_arg, "unable to find backend library for backend '" + b +
                               "', try specifying runtime on the model configuration."};
  return nullptr;
}

}  // namespace inferwire::server
