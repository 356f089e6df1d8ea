// SPDX-License-Identifier: Apache-2.0
// inferwire/grpc/convert_messages.hpp
//
// The conversions between inferwire's v2 value types and the generated protobuf messages of
// proto/grpc_service.proto (package `inference`) that the client needs, and the server too:
// parameters, the client's side of ModelInfer (encode the request with raw_input_contents or
// typed contents, read outputs as views of the response's bytes), and the statistics,
// metadata, repository, shared-memory, trace and log messages in both directions.
// <inferwire/grpc/convert.hpp> adds the server's side of ModelInfer (Triton's decoding rules),
// which needs the HTTP codec's limits; a client does not parse it.
// Needs the generated code of the `grpc` component (target inferwire_grpc_proto).
#ifndef INFERWIRE_GRPC_CONVERT_MESSAGES_HPP
#define INFERWIRE_GRPC_CONVERT_MESSAGES_HPP

#include <inferwire/core/bytes.hpp>
#include <inferwire/core/error.hpp>
#include <inferwire/v2/types.hpp>

#include "grpc_service.pb.h"

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <limits>
#include <string>
#include <string_view>

namespace inferwire::grpc {

namespace pb = ::inference;

// --- parameters -------------------------------------------------------------------------------

inline void to_proto(const parameter_value& v, pb::InferParameter& out) {
  std::visit(
      [&out](const auto& x) {
        using T = std::decay_t<decltype(x)>;
        if constexpr (std::is_same_v<T, bool>) out.set_bool_param(x);
        else if constexpr (std::is_same_v<T, std::int64_t>) out.set_int64_param(x);
        else if constexpr (std::is_same_v<T, std::uint64_t>) out.set_uint64_param(x);
        else if constexpr (std::is_same_v<T, double>) out.set_double_param(x);
        else out.set_string_param(x);
      },
      v);
}

/// False for a parameter with no value set.
inline bool from_proto(const pb::InferParameter& p, parameter_value& out) {
  switch (p.parameter_choice_case()) {
    case pb::InferParameter::kBoolParam: out = p.bool_param(); return true;
    case pb::InferParameter::kInt64Param: out = p.int64_param(); return true;
    case pb::InferParameter::kStringParam: out = p.string_param(); return true;
    case pb::InferParameter::kDoubleParam: out = p.double_param(); return true;
    case pb::InferParameter::kUint64Param: out = p.uint64_param(); return true;
    default: return false;
  }
}

template <class Map>
void to_proto(const parameter_map& params, Map& out) {
  for (const auto& [k, v] : params) to_proto(v, out[k]);
}

namespace detail {
inline status invalid(std::string text) { return {errc::invalid_arg, std::move(text)}; }
}  // namespace detail

// --- client side ------------------------------------------------------------------------------

/// The typed contents of an input's raw bytes (INT8/INT16 widen into int_contents,
/// UINT8/UINT16 into uint_contents, BYTES elements into bytes_contents). False for FP16/BF16,
/// which have no contents field.
inline bool to_contents(const v2::infer_input& in, pb::InferTensorContents& out) {
  const auto bytes = in.data.bytes();
  const auto* p = reinterpret_cast<const unsigned char*>(bytes.data());
  const std::size_t w = element_size(in.datatype);
  auto each = [&](auto tag, auto add) {
    using T = decltype(tag);
    for (std::size_t i = 0; i + sizeof(T) <= bytes.size(); i += sizeof(T)) {
      T v;
      std::memcpy(&v, p + i, sizeof(T));
      add(v);
    }
  };
  switch (in.datatype) {
    case data_type::bool_: for (auto b : bytes) out.add_bool_contents(b != std::byte{0}); return true;
    case data_type::int8: each(std::int8_t{}, [&](auto v) { out.add_int_contents(v); }); return true;
    case data_type::int16: each(std::int16_t{}, [&](auto v) { out.add_int_contents(v); }); return true;
    case data_type::int32: each(std::int32_t{}, [&](auto v) { out.add_int_contents(v); }); return true;
    case data_type::int64: each(std::int64_t{}, [&](auto v) { out.add_int64_contents(v); }); return true;
    case data_type::uint8: each(std::uint8_t{}, [&](auto v) { out.add_uint_contents(v); }); return true;
    case data_type::uint16: each(std::uint16_t{}, [&](auto v) { out.add_uint_contents(v); }); return true;
    case data_type::uint32: each(std::uint32_t{}, [&](auto v) { out.add_uint_contents(v); }); return true;
    case data_type::uint64: each(std::uint64_t{}, [&](auto v) { out.add_uint64_contents(v); }); return true;
    case data_type::fp32: each(float{}, [&](auto v) { out.add_fp32_contents(v); }); return true;
    case data_type::fp64: each(double{}, [&](auto v) { out.add_fp64_contents(v); }); return true;
    case data_type::bytes:
      for (std::size_t i = 0; i + 4 <= bytes.size();) {
        std::uint32_t n = 0;
        std::memcpy(&n, p + i, 4);
        i += 4;
        const std::size_t len = std::min<std::size_t>(n, bytes.size() - i);
        out.add_bytes_contents(std::string(reinterpret_cast<const char*>(p + i), len));
        i += len;
      }
      return true;
    default: (void)w; return false;
  }
}

/// Encodes a request for the wire: inputs in raw_input_contents (shared-memory inputs as
/// parameters), outputs with their parameters. Input data is copied into the message.
/// With `typed`, inputs travel as typed `contents` instead (FP16/BF16 stay raw: they have no
/// contents field; a request must not mix the two, so typed then applies to none).
inline void encode_infer_request(const v2::infer_request& r, std::string_view model,
                                 std::string_view version, pb::ModelInferRequest& out,
                                 bool typed = false) {
  out.set_model_name(std::string(model));
  out.set_model_version(std::string(version));
  out.set_id(r.id);
  to_proto(r.parameters, *out.mutable_parameters());
  // Triton takes the `timeout` request parameter as int64_param only; one set as uint64 (as
  // the server's decoders keep it) goes out in the type the server accepts.
  if (const auto t = r.parameters.get<std::uint64_t>("timeout");
      t && *t <= static_cast<std::uint64_t>(std::numeric_limits<std::int64_t>::max()))
    (*out.mutable_parameters())["timeout"].set_int64_param(static_cast<std::int64_t>(*t));
  if (typed)  // typed contents and raw_input_contents cannot be mixed in one request
    for (const auto& i : r.inputs)
      if (!i.shm && (i.datatype == data_type::fp16 || i.datatype == data_type::bf16)) typed = false;
  auto put_shm = [](const v2::shm_ref& s, auto& params) {
    params["shared_memory_region"].set_string_param(s.region);
    params["shared_memory_offset"].set_int64_param(static_cast<std::int64_t>(s.offset));
    params["shared_memory_byte_size"].set_int64_param(static_cast<std::int64_t>(s.byte_size));
  };
  for (const auto& i : r.inputs) {
    auto* t = out.add_inputs();
    t->set_name(i.name);
    t->set_datatype(std::string(wire_name(i.datatype)));
    for (auto d : i.shape) t->add_shape(d);
    to_proto(i.parameters, *t->mutable_parameters());
    if (i.shm) put_shm(*i.shm, *t->mutable_parameters());
    else if (!typed || !to_contents(i, *t->mutable_contents())) out.add_raw_input_contents()->assign(i.data.str());
  }
  for (const auto& o : r.outputs) {
    auto* t = out.add_outputs();
    t->set_name(o.name);
    to_proto(o.parameters, *t->mutable_parameters());
    if (o.shm) put_shm(*o.shm, *t->mutable_parameters());
    if (o.classification)
      (*t->mutable_parameters())["classification"].set_int64_param(static_cast<std::int64_t>(o.classification));
  }
}

/// Decodes a response; output data are views of `in`'s raw_output_contents (keep `in`).
inline void decode_infer_response(const pb::ModelInferResponse& in, v2::infer_response& out) {
  out.id = in.id();
  out.model_name = in.model_name();
  out.model_version = in.model_version();
  for (const auto& [k, p] : in.parameters()) {
    parameter_value v;
    if (from_proto(p, v)) out.parameters.set(k, std::move(v));
  }
  for (int n = 0; n < in.outputs_size(); ++n) {
    const auto& t = in.outputs(n);
    v2::infer_output& o = out.outputs.emplace_back();
    o.name = t.name();
    o.datatype = parse_data_type(t.datatype());
    o.shape.assign(t.shape().begin(), t.shape().end());
    for (const auto& [k, p] : t.parameters()) {
      parameter_value v;
      if (from_proto(p, v)) o.parameters.set(k, std::move(v));
    }
    o.encoding = v2::tensor_encoding::binary;
    if (n < in.raw_output_contents_size())
      o.data = v2::tensor_data::view(std::string_view(in.raw_output_contents(n)));
  }
}

// --- the other messages --------------------------------------------------------------------------
// One conversion in each direction per message, used by both the server (decode the request,
// encode the reply) and the client (encode the request, decode the reply). The request
// decoders check the types of map parameters with Triton's texts.

// Server metadata.
inline void to_proto(const v2::server_metadata& m, pb::ServerMetadataResponse& out) {
  out.set_name(m.name);
  out.set_version(m.version);
  for (const auto& e : m.extensions) out.add_extensions(e);
}
inline v2::server_metadata from_proto(const pb::ServerMetadataResponse& r) {
  return {r.name(), r.version(), {r.extensions().begin(), r.extensions().end()}};
}

// Model metadata.
inline void to_proto(const v2::model_metadata& m, pb::ModelMetadataResponse& out) {
  out.set_name(m.name);
  for (const auto& v : m.versions) out.add_versions(v);
  out.set_platform(m.platform);
  auto add = [](const std::vector<v2::tensor_metadata>& from, auto* to) {
    for (const auto& t : from) {
      auto* x = to->Add();
      x->set_name(t.name);
      x->set_datatype(std::string(wire_name(t.datatype)));
      for (auto d : t.shape) x->add_shape(d);
    }
  };
  add(m.inputs, out.mutable_inputs());
  add(m.outputs, out.mutable_outputs());
}
inline v2::model_metadata from_proto(const pb::ModelMetadataResponse& r) {
  v2::model_metadata m;
  m.name = r.name();
  m.versions.assign(r.versions().begin(), r.versions().end());
  m.platform = r.platform();
  auto add = [](const auto& from, std::vector<v2::tensor_metadata>& to) {
    for (const auto& t : from)
      to.push_back({t.name(), parse_data_type(t.datatype()), shape_t(t.shape().begin(), t.shape().end())});
  };
  add(r.inputs(), m.inputs);
  add(r.outputs(), m.outputs);
  return m;
}

// Statistics.
namespace detail {
inline void to_proto(const v2::statistic_duration& d, pb::StatisticDuration& out) {
  out.set_count(d.count);
  out.set_ns(d.ns);
}
inline v2::statistic_duration from_proto(const pb::StatisticDuration& x) { return {x.count(), x.ns()}; }
}  // namespace detail

inline void to_proto(const v2::model_statistics& m, pb::ModelStatistics& out) {
  using detail::to_proto;
  out.set_name(m.name);
  out.set_version(m.version);
  out.set_last_inference(m.last_inference);
  out.set_inference_count(m.inference_count);
  out.set_execution_count(m.execution_count);
  auto* is = out.mutable_inference_stats();
  const auto& s = m.inference_stats;
  to_proto(s.success, *is->mutable_success());
  to_proto(s.fail, *is->mutable_fail());
  to_proto(s.queue, *is->mutable_queue());
  to_proto(s.compute_input, *is->mutable_compute_input());
  to_proto(s.compute_infer, *is->mutable_compute_infer());
  to_proto(s.compute_output, *is->mutable_compute_output());
  to_proto(s.cache_hit, *is->mutable_cache_hit());
  to_proto(s.cache_miss, *is->mutable_cache_miss());
  for (const auto& b : m.batch_stats) {
    auto* pbs = out.add_batch_stats();
    pbs->set_batch_size(b.batch_size);
    to_proto(b.compute_input, *pbs->mutable_compute_input());
    to_proto(b.compute_infer, *pbs->mutable_compute_infer());
    to_proto(b.compute_output, *pbs->mutable_compute_output());
  }
  for (const auto& u : m.memory_usage) {
    auto* mu = out.add_memory_usage();
    mu->set_type(u.type);
    mu->set_id(u.id);
    mu->set_byte_size(u.byte_size);
  }
  for (const auto& [k, r] : m.response_stats) {
    auto& rs = (*out.mutable_response_stats())[k];
    to_proto(r.compute_infer, *rs.mutable_compute_infer());
    to_proto(r.compute_output, *rs.mutable_compute_output());
    to_proto(r.success, *rs.mutable_success());
    to_proto(r.fail, *rs.mutable_fail());
    to_proto(r.empty_response, *rs.mutable_empty_response());
    to_proto(r.cancel, *rs.mutable_cancel());
  }
}
inline void to_proto(const v2::statistics_response& s, pb::ModelStatisticsResponse& out) {
  for (const auto& m : s.model_stats) to_proto(m, *out.add_model_stats());
}
inline v2::statistics_response from_proto(const pb::ModelStatisticsResponse& r) {
  using detail::from_proto;
  v2::statistics_response out;
  for (const auto& m : r.model_stats()) {
    v2::model_statistics s;
    s.name = m.name();
    s.version = m.version();
    s.last_inference = m.last_inference();
    s.inference_count = m.inference_count();
    s.execution_count = m.execution_count();
    const auto& i = m.inference_stats();
    s.inference_stats = {from_proto(i.success()),       from_proto(i.fail()),
                         from_proto(i.queue()),         from_proto(i.compute_input()),
                         from_proto(i.compute_infer()), from_proto(i.compute_output()),
                         from_proto(i.cache_hit()),     from_proto(i.cache_miss())};
    for (const auto& b : m.batch_stats())
      s.batch_stats.push_back({b.batch_size(), from_proto(b.compute_input()), from_proto(b.compute_infer()),
                               from_proto(b.compute_output())});
    for (const auto& u : m.memory_usage()) s.memory_usage.push_back({u.type(), u.id(), u.byte_size()});
    for (const auto& [k, x] : m.response_stats())
      s.response_stats[k] = {from_proto(x.compute_infer()), from_proto(x.compute_output()),
                             from_proto(x.success()),       from_proto(x.fail()),
                             from_proto(x.empty_response()), from_proto(x.cancel())};
    out.model_stats.push_back(std::move(s));
  }
  return out;
}

// Repository index, load and unload.
inline void to_proto(const std::vector<v2::repository_index_entry>& index, pb::RepositoryIndexResponse& out) {
  for (const auto& e : index) {
    auto* m = out.add_models();
    m->set_name(e.name);
    m->set_version(e.version);
    m->set_state(e.state);
    m->set_reason(e.reason);
  }
}
inline std::vector<v2::repository_index_entry> from_proto(const pb::RepositoryIndexResponse& r) {
  std::vector<v2::repository_index_entry> out;
  for (const auto& m : r.models()) out.push_back({m.name(), m.version(), m.state(), m.reason()});
  return out;
}

inline void to_proto(const v2::repository_load_request& load, pb::RepositoryModelLoadRequest& out) {
  if (load.config) (*out.mutable_parameters())["config"].set_string_param(*load.config);
  for (const auto& [path, bytes] : load.files) (*out.mutable_parameters())["file:" + path].set_bytes_param(bytes);
}
/// Triton's checks of the parameter types; other keys are ignored.
inline status from_proto(const pb::RepositoryModelLoadRequest& q, v2::repository_load_request& load) {
  for (const auto& [k, p] : q.parameters()) {
    if (k == "config") {
      if (p.parameter_choice_case() != pb::ModelRepositoryParameter::kStringParam)
        return {errc::invalid_arg, "invalid value type for load parameter 'config', expected string_param."};
      load.config = p.string_param();
    } else if (k.rfind("file:", 0) == 0) {
      if (p.parameter_choice_case() != pb::ModelRepositoryParameter::kBytesParam)
        return {errc::invalid_arg,
                "invalid value type for load parameter '" + quote_input(k) + "', expected bytes_param."};
      load.files.emplace_back(k.substr(5), p.bytes_param());
    }
  }
  return {};
}

inline void to_proto(const v2::repository_unload_request& unload, pb::RepositoryModelUnloadRequest& out) {
  if (unload.unload_dependents) (*out.mutable_parameters())["unload_dependents"].set_bool_param(true);
}
/// As Triton: a non-bool unload_dependents is ignored.
inline v2::repository_unload_request from_proto(const pb::RepositoryModelUnloadRequest& q) {
  v2::repository_unload_request out;
  if (auto it = q.parameters().find("unload_dependents");
      it != q.parameters().end() && it->second.parameter_choice_case() == pb::ModelRepositoryParameter::kBoolParam)
    out.unload_dependents = it->second.bool_param();
  return out;
}

// Shared memory.
inline void to_proto(const v2::system_shm_register_request& q, pb::SystemSharedMemoryRegisterRequest& out) {
  out.set_name(q.name);
  out.set_key(q.key);
  out.set_offset(q.offset);
  out.set_byte_size(q.byte_size);
}
inline v2::system_shm_register_request from_proto(const pb::SystemSharedMemoryRegisterRequest& q) {
  return {q.name(), q.key(), q.offset(), q.byte_size()};
}
inline void to_proto(const v2::cuda_shm_register_request& q, pb::CudaSharedMemoryRegisterRequest& out) {
  out.set_name(q.name);
  out.set_raw_handle(q.raw_handle);
  out.set_device_id(static_cast<std::int64_t>(q.device_id));
  out.set_byte_size(q.byte_size);
}
inline status from_proto(const pb::CudaSharedMemoryRegisterRequest& q, v2::cuda_shm_register_request& out) {
  if (q.device_id() < 0) return {errc::invalid_arg, "invalid device id " + std::to_string(q.device_id())};
  out = {q.name(), q.raw_handle(), static_cast<std::uint64_t>(q.device_id()), q.byte_size()};
  return {};
}
inline void to_proto(const std::vector<v2::system_shm_status>& v, pb::SystemSharedMemoryStatusResponse& out) {
  for (const auto& x : v) {
    auto& e = (*out.mutable_regions())[x.name];
    e.set_name(x.name);
    e.set_key(x.key);
    e.set_offset(x.offset);
    e.set_byte_size(x.byte_size);
  }
}
/// Sorted by name (the message holds a map).
inline std::vector<v2::system_shm_status> from_proto(const pb::SystemSharedMemoryStatusResponse& r) {
  std::vector<v2::system_shm_status> out;
  for (const auto& [k, s] : r.regions()) out.push_back({s.name(), s.key(), s.offset(), s.byte_size()});
  std::sort(out.begin(), out.end(), [](const auto& a, const auto& b) { return a.name < b.name; });
  return out;
}
inline void to_proto(const std::vector<v2::cuda_shm_status>& v, pb::CudaSharedMemoryStatusResponse& out) {
  for (const auto& x : v) {
    auto& e = (*out.mutable_regions())[x.name];
    e.set_name(x.name);
    e.set_device_id(x.device_id);
    e.set_byte_size(x.byte_size);
  }
}
inline std::vector<v2::cuda_shm_status> from_proto(const pb::CudaSharedMemoryStatusResponse& r) {
  std::vector<v2::cuda_shm_status> out;
  for (const auto& [k, s] : r.regions()) out.push_back({s.name(), s.device_id(), s.byte_size()});
  std::sort(out.begin(), out.end(), [](const auto& a, const auto& b) { return a.name < b.name; });
  return out;
}

// Trace settings: in a request, an empty value list clears a setting (nullopt); a request
// with no settings reads them.
template <class Map>
void to_proto(const v2::trace_settings& t, Map& out) {
  for (const auto& [k, v] : t.settings) {
    auto& s = out[k];
    if (v)
      for (const auto& x : *v) s.add_value(x);
  }
}
/// `request`: an empty value list is an update that clears the setting (nullopt); in a reply
/// it is an empty value.
template <class Map>
v2::trace_settings trace_settings_from_proto(const Map& settings, bool request) {
  v2::trace_settings out;
  for (const auto& [k, v] : settings) {
    if (request && v.value().empty()) out.settings[k] = std::nullopt;
    else out.settings[k] = std::vector<std::string>(v.value().begin(), v.value().end());
  }
  return out;
}

// Log settings: a request sets only the members given; a reply carries all six.
template <class Map>
void to_proto(const v2::log_settings& u, Map& m) {
  // Keys copied from a string rather than moved from a literal's temporary: GCC 12 warns
  // (-Warray-bounds) about the short-string branch of that move, which a long key never takes.
  const auto at = [&m](const std::string& key) -> auto& { return m[key]; };
  if (u.log_file) at("log_file").set_string_param(*u.log_file);
  if (u.log_info) at("log_info").set_bool_param(*u.log_info);
  if (u.log_warning) at("log_warning").set_bool_param(*u.log_warning);
  if (u.log_error) at("log_error").set_bool_param(*u.log_error);
  if (u.log_verbose_level) at("log_verbose_level").set_uint32_param(*u.log_verbose_level);
  if (u.log_format) at("log_format").set_string_param(*u.log_format);
}
/// A reply's settings, read leniently: unknown keys and other types are skipped.
template <class Map>
v2::log_settings log_settings_from_proto(const Map& settings) {
  v2::log_settings out;
  for (const auto& [k, v] : settings) {
    if (k == "log_file") out.log_file = v.string_param();
    else if (k == "log_format") out.log_format = v.string_param();
    else if (k == "log_info") out.log_info = v.bool_param();
    else if (k == "log_warning") out.log_warning = v.bool_param();
    else if (k == "log_error") out.log_error = v.bool_param();
    else if (k == "log_verbose_level") out.log_verbose_level = v.uint32_param();
  }
  return out;
}
/// A request's settings, with Triton's checks of each key's type and of unknown keys.
template <class Map>
status log_settings_from_proto(const Map& settings, v2::log_settings& u) {
  using V = typename Map::mapped_type;
  for (const auto& entry : settings) {
    const auto& k = entry.first;  // (a lambda may not capture a structured binding in clang 14)
    const auto& v = entry.second;
    auto wrong = [&k](const char* expected) {
      return status{errc::invalid_arg, "expect " + std::string(expected) + " for '" + quote_input(k) + "'"};
    };
    if (k == "log_file" || k == "log_format") {
      if (v.parameter_choice_case() != V::kStringParam) return wrong("string_param");
      (k == "log_file" ? u.log_file : u.log_format) = v.string_param();
    } else if (k == "log_info" || k == "log_warning" || k == "log_error") {
      if (v.parameter_choice_case() != V::kBoolParam) return wrong("bool_param");
      (k == "log_info" ? u.log_info : k == "log_warning" ? u.log_warning : u.log_error) = v.bool_param();
    } else if (k == "log_verbose_level") {
      if (v.parameter_choice_case() != V::kUint32Param) return wrong("uint32_param");
      u.log_verbose_level = v.uint32_param();
    } else {
      return {errc::invalid_arg, "Unsupported log setting: '" + quote_input(k) + "'"};
    }
  }
  return {};
}

}  // namespace inferwire::grpc

#endif
