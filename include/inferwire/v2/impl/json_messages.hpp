// SPDX-License-Identifier: Apache-2.0
// Boost.JSON conversions (value_from / value_to) of the v2 messages other than infer.
// Part of the implementation of inferwire/v2/json.hpp. Include that header, not this one.
#ifndef INFERWIRE_V2_IMPL_JSON_MESSAGES_HPP
#define INFERWIRE_V2_IMPL_JSON_MESSAGES_HPP

#include <inferwire/v2/impl/json_parse.hpp>

#include <boost/json/value_from.hpp>
#include <boost/json/value_to.hpp>

namespace inferwire::v2 {
// ---------------------------------------------------------------------------------------------
// Conversions

INFERWIRE_DECL boost::json::value to_json(const parameter_value& v) {
  return std::visit([](const auto& x) -> boost::json::value {
    if constexpr (std::is_same_v<std::decay_t<decltype(x)>, std::string>)
      return boost::json::string(x);
    else
      return x;
  }, v);
}

INFERWIRE_DECL boost::json::object to_json(const parameter_map& m) {
  boost::json::object o;
  for (const auto& [k, v] : m) o[k] = to_json(v);
  return o;
}

namespace detail {
// Member readers for value_to: throw inferwire::error with the JSON layer's texts, wrapped in
// "Unable to parse '<name>': " like Triton's field readers.
struct reader {
  const boost::json::object& o;

  static const boost::json::object& object_of(const boost::json::value& v) {
    status st;
    auto* o = json_access::as_object(v, st);
    throw_if(st);
    return *o;
  }
  const boost::json::value* find(std::string_view k) const { return o.if_contains(k); }
  const boost::json::value& need(std::string_view k) const {
    status st;
    auto* v = json_access::member(o, k, st);
    if (!v) throw error(st.prefix("Unable to parse '" + std::string(k) + "': "));
    return *v;
  }
  static void fail(status& st, std::string_view k) {
    throw error(st.prefix("Unable to parse '" + std::string(k) + "': "));
  }
  std::string str(std::string_view k) const { return to_str(need(k), k); }
  static std::string to_str(const boost::json::value& v, std::string_view k) {
    status st;
    std::string_view s;
    if (!json_access::as_string(v, s, st)) fail(st, k);
    return std::string(s);
  }
  std::uint64_t u64(std::string_view k) const { return to_u64(need(k), k); }
  static std::uint64_t to_u64(const boost::json::value& v, std::string_view k) {
    status st;
    std::uint64_t u = {};
    if (!json_access::as_uint64(v, u, st)) fail(st, k);
    return u;
  }
  std::int64_t i64(std::string_view k) const {
    status st;
    std::int64_t i = {};
    if (!json_access::as_int64(need(k), i, st)) fail(st, k);
    return i;
  }
  static bool to_bool(const boost::json::value& v, std::string_view k) {
    status st;
    bool b = {};
    if (!json_access::as_bool(v, b, st)) fail(st, k);
    return b;
  }
  const boost::json::array& arr(std::string_view k) const {
    status st;
    auto* a = json_access::as_array(need(k), st);
    if (!a) fail(st, k);
    return *a;
  }
};

INFERWIRE_DECL boost::json::value duration_json(const statistic_duration& d) {
  return {{"count", d.count}, {"ns", d.ns}};
}
}  // namespace detail

INFERWIRE_DECL void tag_invoke(boost::json::value_from_tag, boost::json::value& jv,
                       const server_metadata& v) {
  boost::json::array ext;
  for (const auto& e : v.extensions) ext.emplace_back(e);
  jv = {{"name", v.name}, {"version", v.version}, {"extensions", std::move(ext)}};
}
INFERWIRE_DECL server_metadata tag_invoke(boost::json::value_to_tag<server_metadata>,
                                  const boost::json::value& jv) {
  detail::reader r{detail::reader::object_of(jv)};
  server_metadata m{r.str("name"), r.str("version"), {}};
  if (r.find("extensions"))
    for (const auto& e : r.arr("extensions"))
      m.extensions.push_back(detail::reader::to_str(e, "extensions"));
  return m;
}

INFERWIRE_DECL void tag_invoke(boost::json::value_from_tag, boost::json::value& jv,
                       const tensor_metadata& v) {
  boost::json::array shape(v.shape.begin(), v.shape.end());
  jv = {{"name", v.name}, {"datatype", wire_name(v.datatype)}, {"shape", std::move(shape)}};
}
INFERWIRE_DECL tensor_metadata tag_invoke(boost::json::value_to_tag<tensor_metadata>,
                                  const boost::json::value& jv) {
  detail::reader r{detail::reader::object_of(jv)};
  tensor_metadata t{r.str("name"), parse_data_type(r.str("datatype")), {}};
  for (const auto& d : r.arr("shape")) {
    status st;
    std::int64_t i = {};
    if (!json_access::as_int64(d, i, st)) detail::reader::fail(st, "shape");
    t.shape.push_back(i);
  }
  return t;
}

INFERWIRE_DECL void tag_invoke(boost::json::value_from_tag, boost::json::value& jv,
                       const model_metadata& v) {
  boost::json::array versions, inputs, outputs;
  for (const auto& s : v.versions) versions.emplace_back(s);
  for (const auto& t : v.inputs) inputs.push_back(boost::json::value_from(t));
  for (const auto& t : v.outputs) outputs.push_back(boost::json::value_from(t));
  jv = {{"name", v.name},          {"versions", std::move(versions)},
        {"platform", v.platform},  {"inputs", std::move(inputs)},
        {"outputs", std::move(outputs)}};
}
INFERWIRE_DECL model_metadata tag_invoke(boost::json::value_to_tag<model_metadata>,
                                 const boost::json::value& jv) {
  detail::reader r{detail::reader::object_of(jv)};
  model_metadata m;
  m.name = r.str("name");
  if (r.find("versions"))
    for (const auto& s : r.arr("versions")) m.versions.push_back(detail::reader::to_str(s, "versions"));
  if (r.find("platform")) m.platform = r.str("platform");
  if (r.find("inputs"))
    for (const auto& t : r.arr("inputs")) m.inputs.push_back(boost::json::value_to<tensor_metadata>(t));
  if (r.find("outputs"))
    for (const auto& t : r.arr("outputs")) m.outputs.push_back(boost::json::value_to<tensor_metadata>(t));
  return m;
}

INFERWIRE_DECL void tag_invoke(boost::json::value_from_tag, boost::json::value& jv,
                       const repository_index_request& v) {
  boost::json::object o;
  if (v.ready) o["ready"] = *v.ready;
  jv = std::move(o);
}
INFERWIRE_DECL repository_index_request tag_invoke(boost::json::value_to_tag<repository_index_request>,
                                           const boost::json::value& jv) {
  detail::reader r{detail::reader::object_of(jv)};
  repository_index_request q;
  if (auto* ready = r.find("ready")) {
    if (!ready->is_bool())
      throw error(errc::invalid_arg, "Invalid value for 'ready': expected a boolean");
    q.ready = ready->get_bool();
  }
  return q;
}

INFERWIRE_DECL void tag_invoke(boost::json::value_from_tag, boost::json::value& jv,
                       const repository_index_entry& v) {
  boost::json::object o;
  o["name"] = v.name;
  if (!v.version.empty()) o["version"] = v.version;
  if (!v.state.empty()) o["state"] = v.state;
  if (!v.reason.empty()) o["reason"] = v.reason;
  jv = std::move(o);
}
INFERWIRE_DECL repository_index_entry tag_invoke(boost::json::value_to_tag<repository_index_entry>,
                                         const boost::json::value& jv) {
  detail::reader r{detail::reader::object_of(jv)};
  repository_index_entry e;
  e.name = r.str("name");
  if (r.find("version")) e.version = r.str("version");
  if (r.find("state")) e.state = r.str("state");
  if (r.find("reason")) e.reason = r.str("reason");
  return e;
}

INFERWIRE_DECL void tag_invoke(boost::json::value_from_tag, boost::json::value& jv,
                       const repository_load_request& v) {
  boost::json::object params;
  if (v.config) params["config"] = *v.config;
  for (const auto& [path, contents] : v.files) params["file:" + path] = base64_encode(contents);
  boost::json::object o;
  if (!params.empty()) o["parameters"] = std::move(params);
  jv = std::move(o);
}
INFERWIRE_DECL repository_load_request tag_invoke(boost::json::value_to_tag<repository_load_request>,
                                          const boost::json::value& jv) {
  detail::reader r{detail::reader::object_of(jv)};
  repository_load_request q;
  const auto* params = r.find("parameters");
  if (!params) return q;
  const auto& po = detail::reader::object_of(*params);
  for (const auto& kv : po) {
    std::string_view key = kv.key();
    std::string value = detail::reader::to_str(kv.value(), key);
    if (key == "config") {
      q.config = std::move(value);
    } else if (key.starts_with("file:")) {
      std::string decoded;
      if (!base64_decode(value, decoded))
        throw error(errc::invalid_arg,
                    "failed to decode base64 content of '" + std::string(key) + "'");
      q.files.emplace_back(std::string(key.substr(5)), std::move(decoded));
    } else {
      throw error(errc::internal, "unexpected error on creating Triton parameter");
    }
  }
  return q;
}

INFERWIRE_DECL void tag_invoke(boost::json::value_from_tag, boost::json::value& jv,
                       const repository_unload_request& v) {
  jv = {{"parameters", {{"unload_dependents", v.unload_dependents}}}};
}
INFERWIRE_DECL repository_unload_request tag_invoke(boost::json::value_to_tag<repository_unload_request>,
                                            const boost::json::value& jv) {
  // Upstream quirk (v2-protocol §6.4): a non-bool unload_dependents is ignored.
  repository_unload_request q;
  if (const auto* o = jv.if_object())
    if (const auto* p = o->if_contains("parameters"))
      if (const auto* po = p->if_object())
        if (const auto* u = po->if_contains("unload_dependents"); u && u->is_bool())
          q.unload_dependents = u->get_bool();
  return q;
}

INFERWIRE_DECL void tag_invoke(boost::json::value_from_tag, boost::json::value& jv,
                       const system_shm_register_request& v) {
  jv = {{"key", v.key}, {"offset", v.offset}, {"byte_size", v.byte_size}};
}
INFERWIRE_DECL system_shm_register_request tag_invoke(
    boost::json::value_to_tag<system_shm_register_request>, const boost::json::value& jv) {
  detail::reader r{detail::reader::object_of(jv)};
  system_shm_register_request q;
  if (!r.find("key"))
    throw error(errc::invalid_arg, "Shared memory register request has no 'key' field");
  q.key = r.str("key");
  if (r.find("offset")) q.offset = r.u64("offset");
  if (!r.find("byte_size"))
    throw error(errc::invalid_arg, "Shared memory register request has no 'byte_size' field");
  q.byte_size = r.u64("byte_size");
  return q;
}

INFERWIRE_DECL void tag_invoke(boost::json::value_from_tag, boost::json::value& jv,
                       const system_shm_status& v) {
  jv = {{"name", v.name}, {"key", v.key}, {"offset", v.offset}, {"byte_size", v.byte_size}};
}
INFERWIRE_DECL system_shm_status tag_invoke(boost::json::value_to_tag<system_shm_status>,
                                    const boost::json::value& jv) {
  detail::reader r{detail::reader::object_of(jv)};
  return {r.str("name"), r.str("key"), r.u64("offset"), r.u64("byte_size")};
}

INFERWIRE_DECL void tag_invoke(boost::json::value_from_tag, boost::json::value& jv,
                       const cuda_shm_register_request& v) {
  jv = {{"raw_handle", {{"b64", base64_encode(v.raw_handle)}}},
        {"device_id", v.device_id},
        {"byte_size", v.byte_size}};
}
INFERWIRE_DECL cuda_shm_register_request tag_invoke(boost::json::value_to_tag<cuda_shm_register_request>,
                                            const boost::json::value& jv) {
  detail::reader r{detail::reader::object_of(jv)};
  if (!r.find("raw_handle"))
    throw error(errc::invalid_arg, "Shared memory register request has no 'raw_handle' field");
  detail::reader h{detail::reader::object_of(r.need("raw_handle"))};
  cuda_shm_register_request q;
  std::string b64 = h.str("b64");
  if (!base64_decode(b64, q.raw_handle) || q.raw_handle.size() != 64)
    throw error(errc::invalid_arg,
                "'raw_handle' must be a valid base64 encoded cudaIpcMemHandle_t");
  q.device_id = r.u64("device_id");
  q.byte_size = r.u64("byte_size");
  return q;
}

INFERWIRE_DECL void tag_invoke(boost::json::value_from_tag, boost::json::value& jv,
                       const cuda_shm_status& v) {
  jv = {{"name", v.name}, {"device_id", v.device_id}, {"byte_size", v.byte_size}};
}
INFERWIRE_DECL cuda_shm_status tag_invoke(boost::json::value_to_tag<cuda_shm_status>,
                                  const boost::json::value& jv) {
  detail::reader r{detail::reader::object_of(jv)};
  return {r.str("name"), r.u64("device_id"), r.u64("byte_size")};
}

INFERWIRE_DECL void tag_invoke(boost::json::value_from_tag, boost::json::value& jv,
                       const statistic_duration& v) {
  jv = detail::duration_json(v);
}
INFERWIRE_DECL statistic_duration tag_invoke(boost::json::value_to_tag<statistic_duration>,
                                     const boost::json::value& jv) {
  detail::reader r{detail::reader::object_of(jv)};
  return {r.u64("count"), r.u64("ns")};
}

namespace detail {
// The statistics messages are lists of named durations; one table per message keeps the JSON
// key order (the order of spec §7) and both directions in one place.
template <class T>
struct duration_fields;
template <>
struct duration_fields<infer_statistics> {
  static constexpr std::pair<const char*, statistic_duration infer_statistics::*> fields[] = {
      {"success", &infer_statistics::success},
      {"fail", &infer_statistics::fail},
      {"queue", &infer_statistics::queue},
      {"compute_input", &infer_statistics::compute_input},
      {"compute_infer", &infer_statistics::compute_infer},
      {"compute_output", &infer_statistics::compute_output},
      {"cache_hit", &infer_statistics::cache_hit},
      {"cache_miss", &infer_statistics::cache_miss}};
};
template <>
struct duration_fields<response_statistics> {
  static constexpr std::pair<const char*, statistic_duration response_statistics::*> fields[] = {
      {"compute_infer", &response_statistics::compute_infer},
      {"compute_output", &response_statistics::compute_output},
      {"success", &response_statistics::success},
      {"fail", &response_statistics::fail},
      {"empty_response", &response_statistics::empty_response},
      {"cancel", &response_statistics::cancel}};
};
template <>
struct duration_fields<batch_statistics> {
  static constexpr std::pair<const char*, statistic_duration batch_statistics::*> fields[] = {
      {"compute_input", &batch_statistics::compute_input},
      {"compute_infer", &batch_statistics::compute_infer},
      {"compute_output", &batch_statistics::compute_output}};
};

template <class T>
void durations_to_json(boost::json::object& o, const T& v) {
  for (const auto& [name, field] : duration_fields<T>::fields) o[name] = duration_json(v.*field);
}
template <class T>
void durations_from_json(const reader& r, T& v) {
  for (const auto& [name, field] : duration_fields<T>::fields)
    if (const auto* d = r.find(name)) v.*field = boost::json::value_to<statistic_duration>(*d);
}
}  // namespace detail

#define INFERWIRE_V2_DURATIONS_CONVERSION(T)                                               \
  INFERWIRE_DECL void tag_invoke(boost::json::value_from_tag, boost::json::value& jv, const T& v) { \
    boost::json::object o;                                                                 \
    detail::durations_to_json(o, v);                                                       \
    jv = std::move(o);                                                                     \
  }                                                                                        \
  INFERWIRE_DECL T tag_invoke(boost::json::value_to_tag<T>, const boost::json::value& jv) {         \
    T v;                                                                                   \
    detail::durations_from_json(detail::reader{detail::reader::object_of(jv)}, v);         \
    return v;                                                                              \
  }
INFERWIRE_V2_DURATIONS_CONVERSION(infer_statistics)
INFERWIRE_V2_DURATIONS_CONVERSION(response_statistics)
#undef INFERWIRE_V2_DURATIONS_CONVERSION

INFERWIRE_DECL void tag_invoke(boost::json::value_from_tag, boost::json::value& jv,
                       const batch_statistics& v) {
  boost::json::object o;
  o["batch_size"] = v.batch_size;
  detail::durations_to_json(o, v);
  jv = std::move(o);
}
INFERWIRE_DECL batch_statistics tag_invoke(boost::json::value_to_tag<batch_statistics>,
                                   const boost::json::value& jv) {
  detail::reader r{detail::reader::object_of(jv)};
  batch_statistics b;
  b.batch_size = r.u64("batch_size");
  detail::durations_from_json(r, b);
  return b;
}

INFERWIRE_DECL void tag_invoke(boost::json::value_from_tag, boost::json::value& jv,
                       const memory_usage& v) {
  jv = {{"type", v.type}, {"id", v.id}, {"byte_size", v.byte_size}};
}
INFERWIRE_DECL memory_usage tag_invoke(boost::json::value_to_tag<memory_usage>,
                               const boost::json::value& jv) {
  detail::reader r{detail::reader::object_of(jv)};
  return {r.str("type"), r.i64("id"), r.u64("byte_size")};
}

INFERWIRE_DECL void tag_invoke(boost::json::value_from_tag, boost::json::value& jv,
                       const model_statistics& v) {
  boost::json::object o;
  o["name"] = v.name;
  o["version"] = v.version;
  o["last_inference"] = v.last_inference;
  o["inference_count"] = v.inference_count;
  o["execution_count"] = v.execution_count;
  o["inference_stats"] = boost::json::value_from(v.inference_stats);
  boost::json::object rs;
  for (const auto& [k, s] : v.response_stats) rs[k] = boost::json::value_from(s);
  o["response_stats"] = std::move(rs);
  boost::json::array bs, mu;
  for (const auto& b : v.batch_stats) bs.push_back(boost::json::value_from(b));
  for (const auto& m : v.memory_usage) mu.push_back(boost::json::value_from(m));
  o["batch_stats"] = std::move(bs);
  o["memory_usage"] = std::move(mu);
  jv = std::move(o);
}
INFERWIRE_DECL model_statistics tag_invoke(boost::json::value_to_tag<model_statistics>,
                                   const boost::json::value& jv) {
  detail::reader r{detail::reader::object_of(jv)};
  model_statistics m;
  m.name = r.str("name");
  m.version = r.str("version");
  m.last_inference = r.u64("last_inference");
  m.inference_count = r.u64("inference_count");
  m.execution_count = r.u64("execution_count");
  if (const auto* s = r.find("inference_stats"))
    m.inference_stats = boost::json::value_to<infer_statistics>(*s);
  if (const auto* s = r.find("response_stats"))
    for (const auto& kv : detail::reader::object_of(*s))
      m.response_stats[std::string(kv.key())] =
          boost::json::value_to<response_statistics>(kv.value());
  if (r.find("batch_stats"))
    for (const auto& b : r.arr("batch_stats"))
      m.batch_stats.push_back(boost::json::value_to<batch_statistics>(b));
  if (r.find("memory_usage"))
    for (const auto& u : r.arr("memory_usage"))
      m.memory_usage.push_back(boost::json::value_to<memory_usage>(u));
  return m;
}

INFERWIRE_DECL void tag_invoke(boost::json::value_from_tag, boost::json::value& jv,
                       const statistics_response& v) {
  boost::json::array a;
  for (const auto& m : v.model_stats) a.push_back(boost::json::value_from(m));
  jv = {{"model_stats", std::move(a)}};
}
INFERWIRE_DECL statistics_response tag_invoke(boost::json::value_to_tag<statistics_response>,
                                      const boost::json::value& jv) {
  detail::reader r{detail::reader::object_of(jv)};
  statistics_response s;
  for (const auto& m : r.arr("model_stats"))
    s.model_stats.push_back(boost::json::value_to<model_statistics>(m));
  return s;
}

INFERWIRE_DECL void tag_invoke(boost::json::value_from_tag, boost::json::value& jv,
                       const trace_settings& v) {
  boost::json::object o;
  auto put = [&o](const std::string& k, const std::optional<std::vector<std::string>>& values) {
    if (!values) {
      o[k] = nullptr;
    } else if (k == "trace_level") {
      o[k] = boost::json::array(values->begin(), values->end());
    } else {
      o[k] = values->empty() ? std::string() : values->front();
    }
  };
  // Triton's order of the known settings, then any others.
  static constexpr std::array<const char*, 6> order{"trace_level",   "trace_rate", "trace_count",
                                                    "log_frequency", "trace_file", "trace_mode"};
  for (const char* k : order)
    if (auto it = v.settings.find(k); it != v.settings.end()) put(it->first, it->second);
  for (const auto& [k, values] : v.settings)
    if (std::find(order.begin(), order.end(), std::string_view(k)) == order.end()) put(k, values);
  jv = std::move(o);
}
INFERWIRE_DECL trace_settings tag_invoke(boost::json::value_to_tag<trace_settings>,
                                 const boost::json::value& jv) {
  trace_settings t;
  for (const auto& kv : detail::reader::object_of(jv)) {
    std::string key(kv.key());
    const auto& v = kv.value();
    if (v.is_null()) {
      t.settings[key] = std::nullopt;
    } else if (const auto* a = v.if_array()) {
      std::vector<std::string> values;
      for (const auto& e : *a) values.push_back(detail::reader::to_str(e, key));
      t.settings[key] = std::move(values);
    } else {
      t.settings[key] = std::vector<std::string>{detail::reader::to_str(v, key)};
    }
  }
  return t;
}

INFERWIRE_DECL void tag_invoke(boost::json::value_from_tag, boost::json::value& jv,
                       const log_settings& v) {
  boost::json::object o;
  if (v.log_file) o["log_file"] = *v.log_file;
  if (v.log_info) o["log_info"] = *v.log_info;
  if (v.log_warning) o["log_warning"] = *v.log_warning;
  if (v.log_error) o["log_error"] = *v.log_error;
  if (v.log_verbose_level) o["log_verbose_level"] = *v.log_verbose_level;
  if (v.log_format) o["log_format"] = *v.log_format;
  jv = std::move(o);
}
INFERWIRE_DECL log_settings tag_invoke(boost::json::value_to_tag<log_settings>,
                               const boost::json::value& jv) {
  detail::reader r{detail::reader::object_of(jv)};
  log_settings s;
  if (const auto* v = r.find("log_file"); v && !v->is_null())
    s.log_file = detail::reader::to_str(*v, "log_file");
  if (const auto* v = r.find("log_info")) s.log_info = detail::reader::to_bool(*v, "log_info");
  if (const auto* v = r.find("log_warning"))
    s.log_warning = detail::reader::to_bool(*v, "log_warning");
  if (const auto* v = r.find("log_error")) s.log_error = detail::reader::to_bool(*v, "log_error");
  if (const auto* v = r.find("log_verbose_level")) {
    std::uint64_t level = detail::reader::to_u64(*v, "log_verbose_level");
    if (level > std::numeric_limits<std::uint32_t>::max())
      throw error(errc::invalid_arg, "log_verbose_level out of range");
    s.log_verbose_level = static_cast<std::uint32_t>(level);
  }
  if (const auto* v = r.find("log_format"))
    s.log_format = detail::reader::to_str(*v, "log_format");
  return s;
}

}  // namespace inferwire::v2

#endif  // INFERWIRE_V2_IMPL_JSON_MESSAGES_HPP
