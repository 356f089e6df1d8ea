// SPDX-License-Identifier: Apache-2.0
#include "trace.hpp"

#include <inferwire/v2/json.hpp>

#include <algorithm>
#include <cctype>
#include <charconv>

namespace inferwire::server {

namespace {

std::int64_t integer_of(const std::vector<std::string>& v, std::int64_t fallback) {
  if (v.size() != 1) return fallback;
  std::int64_t n = 0;
  const auto [p, ec] = std::from_chars(v.front().data(), v.front().data() + v.front().size(), n);
  return ec == std::errc{} && p == v.front().data() + v.front().size() ? n : fallback;
}

std::string lower(std::string s) {
  for (auto& c : s) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return s;
}

std::string json_quoted(std::string_view s) {
  std::string out;
  v2::append_json_string(out, s);
  return out;
}

// The JSON of one finished trace: its identity, its timestamps, its tensors.
std::string trace_json(const trace_record& r) {
  std::string out = "{\"id\":" + std::to_string(r.id) + ",\"model_name\":" + json_quoted(r.model_name) +
                    ",\"model_version\":" + std::to_string(r.model_version) +
                    ",\"request_id\":" + json_quoted(r.request_id) +
                    (r.parent_id ? ",\"parent_id\":" + std::to_string(r.parent_id) : std::string()) +
                    ",\"timestamps\":[";
  for (std::size_t i = 0; i < r.timestamps.size(); ++i) {
    if (i) out += ',';
    out += "{\"name\":\"" + std::string(r.timestamps[i].first) + "\",\"ns\":" +
           std::to_string(r.timestamps[i].second) + "}";
  }
  out += "]";
  if (r.tensors) out += ",\"tensors\":[" + r.tensor_json + "]";
  out += "}";
  return out;
}

}  // namespace

void trace_record::add_tensor(const char* activity, const std::string& name, data_type type, const shape_t& shape,
                              std::span<const std::byte> data) {
  std::string dims;
  for (std::size_t i = 0; i < shape.size(); ++i) dims += (i ? "," : "") + std::to_string(shape[i]);
  std::int64_t count = 1;
  for (auto d : shape) count *= std::max<std::int64_t>(d, 0);
  std::string values;
  if (v2::append_json_tensor_data(values, type, data, count, name))
    values = "null";  // types without a JSON form (FP16, BF16) are named, not printed
  if (!tensor_json.empty()) tensor_json += ',';
  tensor_json += "{\"activity\":\"" + std::string(activity) + "\",\"tensor\":{\"name\":" + json_quoted(name) +
                 ",\"data\":" + values + ",\"shape\":\"" + dims + "\",\"dtype\":\"" +
                 std::string(wire_name(type)) + "\"}}";
}

trace_registry::trace_registry() {
  global_ = {{"trace_level", {"OFF"}}, {"trace_rate", {"1000"}}, {"trace_count", {"-1"}},
             {"log_frequency", {"0"}}, {"trace_file", {""}},     {"trace_mode", {"triton"}}};
  startup_ = global_;
}

trace_registry::~trace_registry() { flush(); }

// --trace-config: `[triton,]file=...`, `[triton,]log-frequency=N`, `level=...` (repeatable:
// TIMESTAMPS and TENSORS add up), `rate=N`, `count=N`, `mode=triton|opentelemetry`.
status trace_registry::configure(const std::vector<std::pair<std::string, std::string>>& settings) {
  std::lock_guard lock(mu_);
  std::vector<std::string> levels;
  for (const auto& [key, value] : settings) {
    std::string k;
    if (key == "max-bytes-per-minute" || key == "max-files-per-minute") {
      std::uint64_t n = 0;
      auto [p, ec] = std::from_chars(value.data(), value.data() + value.size(), n);
      if (ec != std::errc{} || p != value.data() + value.size())
        return {errc::invalid_arg, "invalid value for --trace-config " + key + ": " + value};
      (key == "max-bytes-per-minute" ? budget_.bytes_per_minute : budget_.files_per_minute) = n;
      continue;
    }
    if (key == "file") k = "trace_file";
    else if (key == "log-frequency") k = "log_frequency";
    else if (key == "rate") k = "trace_rate";
    else if (key == "count") k = "trace_count";
    else if (key == "mode") k = "trace_mode";
    if (key == "level") {
      const std::string l = lower(value);
      if (l == "off" || l == "false") levels.clear();
      else if (l == "timestamps" || l == "true" || l == "on" || l == "min" || l == "max")
        levels.push_back("TIMESTAMPS");
      else if (l == "tensors") levels.push_back("TENSORS");
      else return {errc::invalid_arg, "invalid value for trace level option: " + value};
      continue;
    }
    if (k.empty()) return {errc::invalid_arg, "unknown --trace-config setting '" + key + "'"};
    if (auto st = check(k, {value})) return st;
    global_[k] = {value};
  }
  std::sort(levels.begin(), levels.end());
  levels.erase(std::unique(levels.begin(), levels.end()), levels.end());
  global_["trace_level"] = levels.empty() ? std::vector<std::string>{"OFF"} : levels;
  startup_ = global_;
  reset_samplers_locked();
  return {};
}

v2::trace_settings trace_registry::get(const std::string& model) const {
  std::lock_guard lock(mu_);
  v2::trace_settings out;
  for (const auto& [k, v] : global_) out.settings[k] = v;
  if (!model.empty())
    if (auto it = models_.find(model); it != models_.end())
      for (const auto& [k, v] : it->second) out.settings[k] = v;
  return out;
}

status trace_registry::check(const std::string& key, const std::vector<std::string>& values) {
  if (key == "trace_level") {
    bool off = false;
    for (const auto& l : values) {
      if (l == "OFF") off = true;
      else if (l != "TIMESTAMPS" && l != "TENSORS") return {errc::invalid_arg, "Unable to parse 'trace_level', got: " + l};
    }
    if (off && values.size() > 1) return {errc::invalid_arg, "Expect only one trace level 'OFF' is specified"};
  } else if (key == "trace_rate" || key == "trace_count" || key == "log_frequency") {
    const std::string v = values.empty() ? std::string() : values.front();
    std::int64_t n = 0;
    auto [p, ec] = std::from_chars(v.data(), v.data() + v.size(), n);
    if (ec != std::errc{} || p != v.data() + v.size() || (key != "trace_count" && n < 0) ||
        (key == "trace_count" && n < -1) || values.size() != 1)
      return {errc::invalid_arg, "Unable to parse '" + key + "', got: " + v};
  } else if (key == "trace_mode") {
    // Only Triton-mode tracing exists here.
    if (values.size() != 1 || values.front() != "triton")
      return {errc::invalid_arg, "Unable to parse 'trace_mode', got: " + (values.empty() ? "" : values.front())};
  } else if (key != "trace_file") {
    return {errc::invalid_arg, "Unknown trace setting '" + key + "'"};
  }
  return {};
}

status trace_registry::update(const std::string& model, const v2::trace_settings& u, v2::trace_settings& out) {
  for (const auto& [key, values] : u.settings) {
    if (key == "trace_file" && values)
      return {errc::unsupported, "trace file location can not be updated through network protocol"};
    if (!values) continue;
    if (auto st = check(key, *values)) return st;
  }
  {
    std::lock_guard lock(mu_);
    for (const auto& [key, values] : u.settings) {
      if (model.empty()) {
        // As Triton: null restores a global setting's start-up value.
        if (values) global_[key] = *values;
        else if (auto it = startup_.find(key); it != startup_.end()) global_[key] = it->second;
      } else if (values) {
        models_[model][key] = *values;
      } else if (auto it = models_.find(model); it != models_.end()) {
        it->second.erase(key);  // null clears the model's override
        if (it->second.empty()) models_.erase(it);
      }
    }
    // New settings start counting afresh (rate and count), as Triton's new setting objects do.
    reset_samplers_locked();
  }
  out = get(model);
  return {};
}

void trace_registry::reset_samplers_locked() {
  samplers_.clear();
  bool on = global_["trace_level"] != std::vector<std::string>{"OFF"};
  for (const auto& [m, v] : models_)
    if (auto it = v.find("trace_level"); it != v.end() && it->second != std::vector<std::string>{"OFF"}) on = true;
  any_on_ = on;
}

std::shared_ptr<trace_record> trace_registry::begin(const std::string& model) {
  if (!any_on_.load(std::memory_order_relaxed)) return nullptr;  // tracing off costs one load
  std::lock_guard lock(mu_);
  const auto own = models_.find(model);
  auto setting = [&](const char* key) -> const std::vector<std::string>& {
    if (own != models_.end())
      if (auto it = own->second.find(key); it != own->second.end()) return it->second;
    return global_[key];
  };
  const auto& level = setting("trace_level");
  const auto& files = setting("trace_file");
  if (level.empty() || level.front() == "OFF" || files.empty() || files.front().empty()) return nullptr;
  const std::string& file = files.front();
  const std::int64_t rate = integer_of(setting("trace_rate"), 1000);
  sampler& s = samplers_.try_emplace(own != models_.end() ? model : std::string(), sampler{0, integer_of(setting("trace_count"), -1)})
                   .first->second;
  if (rate <= 0 || s.remaining == 0) return nullptr;
  if (++s.seen % static_cast<std::uint64_t>(rate) != 0) return nullptr;
  if (s.remaining > 0) --s.remaining;
  auto r = std::make_shared<trace_record>();
  r->id = next_id_++;
  r->model_name = model;
  r->tensors = std::find(level.begin(), level.end(), "TENSORS") != level.end();
  r->file = file;
  r->log_frequency = static_cast<std::uint64_t>(std::max<std::int64_t>(0, integer_of(setting("log_frequency"), 0)));
  r->timestamps.reserve(12);
  r->registry = this;
  return r;
}

std::shared_ptr<trace_record> trace_registry::child(const trace_record& parent, const std::string& model,
                                                    std::int64_t version) {
  auto r = std::make_shared<trace_record>();
  {
    std::lock_guard lock(mu_);
    r->id = next_id_++;
  }
  r->parent_id = parent.id;
  r->model_name = model;
  r->model_version = version;
  r->request_id = parent.request_id;
  r->tensors = parent.tensors;
  r->file = parent.file;
  r->log_frequency = parent.log_frequency;
  r->registry = this;
  return r;
}

void trace_registry::write_numbered_locked(const std::string& path, file_writer& w) {
  std::ofstream out(path + "." + std::to_string(w.index++), std::ios::trunc);
  out << "[";
  for (std::size_t i = 0; i < w.pending.size(); ++i) out << (i ? ",\n" : "\n") << w.pending[i];
  out << "\n]\n";
  w.pending.clear();
  w.pending_bytes = 0;
}

// log_frequency 0: every trace goes to the trace file, a JSON array closed at shutdown.
// log_frequency N: every N traces go to <file>.<index>, index counting from 0 (the rest at
// shutdown), as Triton names them. A client may set log_frequency over the network, so the
// traces held for the next file are bounded: past max_pending_bytes the file is written early.
constexpr std::size_t max_pending_bytes = std::size_t{16} << 20;

bool trace_registry::charge_locked(std::uint64_t bytes, std::uint64_t files) {
  const auto now = std::chrono::steady_clock::now();
  if (now - window_start_ >= std::chrono::minutes(1)) {
    if (window_dropped_ && warn)
      warn("tracing dropped " + std::to_string(window_dropped_) +
           " trace(s) in the last minute: past --trace-config max-bytes-per-minute=" +
           std::to_string(budget_.bytes_per_minute) + " or max-files-per-minute=" +
           std::to_string(budget_.files_per_minute));
    window_start_ = now;
    window_bytes_ = window_files_ = window_dropped_ = 0;
  }
  const bool bytes_ok = budget_.bytes_per_minute == 0 || window_bytes_ + bytes <= budget_.bytes_per_minute;
  const bool files_ok = budget_.files_per_minute == 0 || window_files_ + files <= budget_.files_per_minute;
  if (!bytes_ok || !files_ok) {
    if (window_dropped_++ == 0 && warn)
      warn("tracing is past its write budget for this minute (--trace-config max-bytes-per-minute=" +
           std::to_string(budget_.bytes_per_minute) + ", max-files-per-minute=" +
           std::to_string(budget_.files_per_minute) + "): traces are dropped until it ends");
    ++dropped_;
    return false;
  }
  window_bytes_ += bytes;
  window_files_ += files;
  return true;
}

std::uint64_t trace_registry::dropped() {
  std::lock_guard lock(files_mu_);
  return dropped_;
}

void trace_registry::finish(const trace_record& record) {
  std::string json = trace_json(record);
  std::lock_guard lock(files_mu_);
  file_writer& w = files_[record.file];
  if (record.log_frequency > 0) {
    // A trace that would start a numbered file counts as that file (bounding how many files a
    // client can make the server write), whichever trace ends up writing it.
    if (!charge_locked(json.size(), w.pending.empty() ? 1 : 0)) return;
    w.pending_bytes += json.size();
    w.pending.push_back(std::move(json));
    if (w.pending.size() >= record.log_frequency || w.pending_bytes >= max_pending_bytes)
      write_numbered_locked(record.file, w);
    return;
  }
  if (!charge_locked(json.size(), w.out.is_open() ? 0 : 1)) return;
  if (!w.out.is_open()) {
    w.out.open(record.file, std::ios::trunc);
    w.out << "[";
  }
  // Buffered: the file is complete (a closed JSON array) once the server shuts down, as
  // Triton's is.
  w.out << (w.first ? "\n" : ",\n") << json;
  w.first = false;
}

void trace_registry::flush() {
  std::lock_guard lock(files_mu_);
  for (auto& [path, w] : files_) {
    if (!w.pending.empty()) write_numbered_locked(path, w);
    if (w.out.is_open()) {
      w.out << "\n]\n";
      w.out.close();
    }
  }
  files_.clear();
}

}  // namespace inferwire::server
