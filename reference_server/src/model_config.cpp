// SPDX-License-Identifier: Apache-2.0
#include "model_config.hpp"
#include "gpu.hpp"

#include <boost/json/parse.hpp>
#include <boost/json/serialize.hpp>
#include <boost/json/value.hpp>
#include <google/protobuf/text_format.h>
#include <google/protobuf/util/json_util.h>
#include <google/protobuf/io/tokenizer.h>

#include <algorithm>
#include <cerrno>
#include <charconv>
#include <fstream>
#include <sstream>

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

namespace inferwire::server {

namespace fs = std::filesystem;
namespace json = boost::json;

const tensor_config* model_config::input(std::string_view n) const noexcept {
  for (const auto& t : inputs)
    if (t.name == n) return &t;
  return nullptr;
}
const tensor_config* model_config::output(std::string_view n) const noexcept {
  for (const auto& t : outputs)
    if (t.name == n) return &t;
  return nullptr;
}
std::size_t model_config::required_inputs() const noexcept {
  std::size_t n = 0;
  for (const auto& t : inputs) n += t.optional ? 0 : 1;
  return n;
}

namespace {

// Collects the text-format parser's complaints instead of printing them to stderr.
class collecting_error_collector : public google::protobuf::io::ErrorCollector {
 public:
  void AddError(int line, int column, const std::string& message) override {
    if (!text.empty()) text += "; ";
    text += std::to_string(line + 1) + ":" + std::to_string(column + 1) + ": " + message;
  }
  void AddWarning(int, int, const std::string&) override {}
  std::string text;
};

data_type to_data_type(inference::DataType t) {
  auto v = static_cast<int>(t);
  if (v < 1 || v > 14) return data_type::invalid;
  return static_cast<data_type>(v);
}

}  // namespace

bool read_model_file(const fs::path& model_dir, std::string_view relative, std::string& out) {
  out.clear();
  const fs::path rel(relative);
  if (relative.empty() || rel.is_absolute() || relative.find('\0') != std::string_view::npos)
    return false;
  for (const auto& part : rel)
    if (part == "..") return false;
  // Symbolic links may point anywhere: the file's real location must be inside the real
  // model folder.
  std::error_code ec;
  const fs::path root = fs::canonical(model_dir, ec);
  if (ec) return false;
  const fs::path real = fs::canonical(root / rel, ec);
  if (ec) return false;
  auto [r, f] = std::mismatch(root.begin(), root.end(), real.begin(), real.end());
  if (r != root.end() || f == real.end()) return false;
  // O_NONBLOCK: a FIFO must not block the loader; only regular files are read.
  const int fd = ::open(real.c_str(), O_RDONLY | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK);
  if (fd < 0) return false;
  struct stat st {};
  bool ok = ::fstat(fd, &st) == 0 && S_ISREG(st.st_mode) &&
            static_cast<std::uint64_t>(st.st_size) <= max_model_file_size;
  if (ok) {
    out.resize(static_cast<std::size_t>(st.st_size));
    std::size_t done = 0;
    while (done < out.size()) {
      const ssize_t n = ::read(fd, out.data() + done, out.size() - done);
      if (n < 0 && errno == EINTR) continue;
      if (n <= 0) break;
      done += static_cast<std::size_t>(n);
    }
    out.resize(done);  // a file that shrank while read yields what was there
  }
  ::close(fd);
  if (!ok) out.clear();
  return ok;
}

namespace {

// Protobuf prints 64-bit integers as strings; Triton turns the ones below back into numbers.
void numberize(json::value& v) {
  if (v.is_string()) {
    const auto& s = v.as_string();
    std::int64_t i = 0;
    auto [p, ec] = std::from_chars(s.data(), s.data() + s.size(), i);
    if (ec == std::errc{} && p == s.data() + s.size()) v = i;
    return;
  }
  if (v.is_array())
    for (auto& e : v.as_array()) numberize(e);
}

json::value* child(json::value& v, std::string_view key) {
  auto* o = v.if_object();
  if (!o) return nullptr;
  return o->if_contains(key);
}

void numberize_at(json::value& v, std::initializer_list<std::string_view> path) {
  json::value* cur = &v;
  for (auto k : path) {
    cur = child(*cur, k);
    if (!cur) return;
  }
  numberize(*cur);
}

void numberize_tensors(json::value& root, std::string_view key) {
  json::value* list = child(root, key);
  if (!list || !list->is_array()) return;
  for (auto& t : list->as_array()) {
    numberize_at(t, {"dims"});
    numberize_at(t, {"reshape", "shape"});
  }
}

}  // namespace

std::string config_to_json(const inference::ModelConfig& config) {
  google::protobuf::util::JsonPrintOptions options;
  options.always_print_primitive_fields = true;
  options.preserve_proto_field_names = true;
  std::string text;
  if (!google::protobuf::util::MessageToJsonString(config, &text, options).ok()) return {};
  if (text == "{}") return {};
  boost::system::error_code ec;
  json::value root = json::parse(text, ec);
  if (ec) throw std::invalid_argument("the model configuration cannot be printed as JSON (" + ec.message() + ")");
  numberize_tensors(root, "input");
  numberize_tensors(root, "output");
  numberize_at(root, {"version_policy", "specific", "versions"});
  for (auto k : {"max_queue_delay_microseconds", "priority_levels", "default_priority_level"})
    numberize_at(root, {"dynamic_batching", k});
  numberize_at(root, {"dynamic_batching", "default_queue_policy", "default_timeout_microseconds"});
  if (auto* pq = child(root, "dynamic_batching"); pq && (pq = child(*pq, "priority_queue_policy")))
    if (auto* o = pq->if_object())
      for (auto& kv : *o) numberize_at(kv.value(), {"default_timeout_microseconds"});
  numberize_at(root, {"sequence_batching", "max_sequence_idle_microseconds"});
  numberize_at(root, {"sequence_batching", "direct", "max_queue_delay_microseconds"});
  numberize_at(root, {"sequence_batching", "oldest", "max_queue_delay_microseconds"});
  if (auto* sb = child(root, "sequence_batching"); sb && (sb = child(*sb, "state")) &&
                                                    sb->is_array())
    for (auto& s : sb->as_array()) {
      numberize_at(s, {"dims"});
      if (auto* init = child(s, "initial_state"); init && init->is_array())
        for (auto& i : init->as_array()) numberize_at(i, {"dims"});
    }
  if (auto* es = child(root, "ensemble_scheduling"); es && (es = child(*es, "step")) &&
                                                      es->is_array())
    for (auto& s : es->as_array()) numberize_at(s, {"model_version"});
  if (auto* mw = child(root, "model_warmup"); mw && mw->is_array())
    for (auto& w : mw->as_array())
      if (auto* ins = child(w, "inputs"); ins && ins->is_object())
        for (auto& kv : ins->as_object()) numberize_at(kv.value(), {"dims"});
  return json::serialize(root);
}

status parse_config_text(std::string_view text, inference::ModelConfig& out) {
  google::protobuf::TextFormat::Parser parser;
  collecting_error_collector errors;
  parser.RecordErrorsTo(&errors);
  out.Clear();
  if (!parser.ParseFromString(std::string(text), &out))
    return {errc::invalid_arg, "failed to parse model configuration: " + errors.text};
  return {};
}

namespace {

status compile_tensor(const std::string& model, std::string_view what, const std::string& name,
                      inference::DataType dt, const google::protobuf::RepeatedField<std::int64_t>& dims,
                      tensor_config& t) {
  t.name = name;
  t.datatype = to_data_type(dt);
  if (t.name.empty())
    return {errc::invalid_arg, "model '" + model + "' has an " + std::string(what) +
                                   " with an empty name"};
  if (t.datatype == data_type::invalid)
    return {errc::invalid_arg, "model '" + model + "' " + std::string(what) + " '" + name +
                                   "' has an invalid data type"};
  for (auto d : dims) {
    if (d < -1 || d == 0)
      return {errc::invalid_arg, "model '" + model + "' " + std::string(what) + " '" + name +
                                     "' dimension must be integer >= 1, or -1 to indicate a "
                                     "variable-size dimension"};
    t.dims.push_back(d);
  }
  return {};
}

status compile_controls(const model_config& cfg, const inference::ModelSequenceBatching& sb,
                        sequence_config& out) {
  out.max_idle_us = sb.max_sequence_idle_microseconds();
  for (const auto& ci : sb.control_input()) {
    for (const auto& c : ci.control()) {
      sequence_control sc;
      sc.input = ci.name();
      switch (c.kind()) {
        case inference::ModelSequenceBatching::Control::CONTROL_SEQUENCE_START:
          sc.kind = control_kind::start; break;
        case inference::ModelSequenceBatching::Control::CONTROL_SEQUENCE_READY:
          sc.kind = control_kind::ready; break;
        case inference::ModelSequenceBatching::Control::CONTROL_SEQUENCE_END:
          sc.kind = control_kind::end; break;
        case inference::ModelSequenceBatching::Control::CONTROL_SEQUENCE_CORRID:
          sc.kind = control_kind::corrid; break;
        default:
          return {errc::invalid_arg, "unknown sequence control kind for '" + ci.name() + "'"};
      }
      if (sc.kind == control_kind::corrid) {
        sc.datatype = to_data_type(c.data_type());
        if (sc.datatype != data_type::uint64 && sc.datatype != data_type::int64 &&
            sc.datatype != data_type::uint32 && sc.datatype != data_type::int32 &&
            sc.datatype != data_type::bytes)
          return {errc::invalid_arg, "sequence batching control '" + ci.name() +
                                         "' for model '" + cfg.name +
                                         "' must specify a 32/64-bit integer or STRING data type"};
      } else if (c.int32_false_true_size() == 2) {
        sc.datatype = data_type::int32;
        sc.false_value = c.int32_false_true(0);
        sc.true_value = c.int32_false_true(1);
      } else if (c.fp32_false_true_size() == 2) {
        sc.datatype = data_type::fp32;
        sc.false_value = c.fp32_false_true(0);
        sc.true_value = c.fp32_false_true(1);
      } else if (c.bool_false_true_size() == 2) {
        sc.datatype = data_type::bool_;
        sc.false_value = c.bool_false_true(0) ? 1 : 0;
        sc.true_value = c.bool_false_true(1) ? 1 : 0;
      } else {
        return {errc::invalid_arg, "sequence batching control '" + ci.name() + "' for model '" +
                                       cfg.name +
                                       "' must specify exactly 2 values in int32_false_true, "
                                       "fp32_false_true or bool_false_true"};
      }
      out.controls.push_back(std::move(sc));
    }
  }
  return {};
}

}  // namespace

status finalize_config(inference::ModelConfig proto, std::string_view name,
                       const fs::path& model_dir, model_config& out) {
  out = {};
  const std::string model(name);
  if (proto.name().empty()) proto.set_name(model);
  if (proto.name() != model)
    return {errc::invalid_arg, "unexpected 'name' in model configuration: '" + proto.name() +
                                   "', expecting '" + model + "'"};
  if (proto.max_batch_size() < 0)
    return {errc::invalid_arg, "'max_batch_size' must be non-negative value for " + model};

  // Normalisation (v2-protocol §2.6).
  if (!proto.has_version_policy()) proto.mutable_version_policy()->mutable_latest()->set_num_versions(1);
  if (proto.has_version_policy() && proto.version_policy().has_latest() &&
      proto.version_policy().latest().num_versions() == 0)
    return {errc::invalid_arg, "latest policy must specify a positive number of versions for " + model};
  if (proto.has_dynamic_batching() && proto.dynamic_batching().preferred_batch_size_size() == 0 &&
      proto.max_batch_size() > 0)
    proto.mutable_dynamic_batching()->add_preferred_batch_size(proto.max_batch_size());
  if (proto.has_sequence_batching()) {
    auto* sb = proto.mutable_sequence_batching();
    if (sb->max_sequence_idle_microseconds() == 0) sb->set_max_sequence_idle_microseconds(1'000'000);
    if (!sb->has_direct() && !sb->has_oldest()) sb->mutable_direct();
  }
  if (!proto.has_ensemble_scheduling()) {
    auto* opt = proto.mutable_optimization();
    if (!opt->has_input_pinned_memory()) opt->mutable_input_pinned_memory()->set_enable(true);
    if (!opt->has_output_pinned_memory()) opt->mutable_output_pinned_memory()->set_enable(true);
  }
  if (proto.instance_group_size() == 0) proto.add_instance_group();
  for (int i = 0; i < proto.instance_group_size(); ++i) {
    auto* g = proto.mutable_instance_group(i);
    if (g->name().empty()) g->set_name(model + "_" + std::to_string(i));
    // Built-in backends execute on the CPU; KIND_AUTO resolves accordingly.
    if (g->kind() == inference::ModelInstanceGroup::KIND_AUTO)
      g->set_kind(inference::ModelInstanceGroup::KIND_CPU);
    if (g->count() == 0) g->set_count(1);
    if (g->count() < 0)
      return {errc::invalid_arg, "instance group " + g->name() + " of model " + model +
                                     " must specify a positive count"};
    if (g->kind() == inference::ModelInstanceGroup::KIND_GPU) {
      // Instances run on the group's first GPU (GPU 0 when none is listed).
      const int devices = gpu_device_count();
      if (devices == 0)
        return {errc::invalid_arg, "instance group " + g->name() + " of model " + model +
                                       " has kind KIND_GPU but server does not support GPUs"};
      if (g->gpus_size() == 0)
        for (int d = 0; d < devices; ++d) g->add_gpus(d);
      for (int id : g->gpus())
        if (id < 0 || id >= devices)
          return {errc::invalid_arg, "instance group " + g->name() + " of model " + model +
                                         " specifies invalid or unsupported gpu id " +
                                         std::to_string(id)};
      if (out.gpu_device < 0) out.gpu_device = g->gpus(0);
    }
  }

  out.name = model;
  out.backend = proto.backend();
  out.platform = proto.platform().empty() ? proto.backend() : proto.platform();
  out.max_batch_size = proto.max_batch_size();
  out.decoupled = proto.model_transaction_policy().decoupled();
  for (const auto& kv : proto.parameters()) out.parameters[kv.first] = kv.second.string_value();

  for (const auto& in : proto.input()) {
    tensor_config t;
    if (auto st = compile_tensor(model, "input", in.name(), in.data_type(), in.dims(), t)) return st;
    t.optional = in.optional();
    if (out.input(t.name))
      return {errc::invalid_arg, "input '" + t.name + "' appears more than once in model '" + model + "'"};
    out.inputs.push_back(std::move(t));
  }
  for (const auto& o : proto.output()) {
    tensor_config t;
    if (auto st = compile_tensor(model, "output", o.name(), o.data_type(), o.dims(), t)) return st;
    if (out.output(t.name))
      return {errc::invalid_arg, "output '" + t.name + "' appears more than once in model '" + model + "'"};
    if (!o.label_filename().empty()) {
      // One text for every refusal: it never tells what exists outside the model folder.
      std::string text;
      if (!read_model_file(model_dir, o.label_filename(), text))
        return {errc::invalid_arg,
                "unable to read label file '" + quote_input(o.label_filename()) + "' of model '" +
                    model + "': label files are regular files of at most " +
                    std::to_string(max_model_file_size) + " bytes inside the model's folder"};
      std::istringstream lines(text);
      for (std::string line; std::getline(lines, line);) t.labels.push_back(line);
    }
    out.outputs.push_back(std::move(t));
  }
  if (proto.has_sequence_batching()) {
    out.sequence.emplace();
    if (auto st = compile_controls(out, proto.sequence_batching(), *out.sequence)) return st;
  }
  try {
    out.json = config_to_json(proto);
  } catch (const std::exception& e) {
    // Text format lets bytes through that are not UTF-8 (an overlong sequence, say).
    return {errc::invalid_arg, "model '" + model + "': " + e.what()};
  }
  out.proto = std::move(proto);
  return {};
}

status load_model_config(const fs::path& model_dir, std::string_view name, model_config& out) {
  std::string text;
  if (!read_model_file(model_dir, "config.pbtxt", text))
    return {errc::invalid_arg, "failed to read model configuration '" +
                                   (model_dir / "config.pbtxt").string() + "'"};
  inference::ModelConfig proto;
  if (auto st = parse_config_text(text, proto)) return st;
  return finalize_config(std::move(proto), name, model_dir, out);
}

}  // namespace inferwire::server
