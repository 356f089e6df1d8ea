// SPDX-License-Identifier: Apache-2.0
// inferwire/grpc/convert.hpp
//
// Every conversion between inferwire's v2 value types and the generated protobuf messages of
// proto/grpc_service.proto (package `inference`), shared by the server and the client. The
// server decodes ModelInferRequest with Triton's rules and texts (v2-protocol §2.3) and answers
// in raw_output_contents; the client encodes with raw_input_contents and reads outputs as views
// of the response's bytes. Statistics, metadata, repository, shared-memory, trace and log
// messages convert in both directions (those, and the client's side of ModelInfer, live in
// <inferwire/grpc/convert_messages.hpp>, which the client includes alone).
// Needs the generated code of the `grpc` component (target inferwire_grpc_proto).
#ifndef INFERWIRE_GRPC_CONVERT_HPP
#define INFERWIRE_GRPC_CONVERT_HPP

#include <inferwire/core/error.hpp>
#include <inferwire/grpc/convert_messages.hpp>
#include <inferwire/v2/binary.hpp>
#include <inferwire/v2/types.hpp>

#include "grpc_service.pb.h"

#include <bit>
#include <cstring>
#include <optional>
#include <span>
#include <string>
#include <string_view>

namespace inferwire::grpc {

namespace detail {


// The shared-memory parameters of a tensor, if any (int64 or uint64 offsets and sizes).
inline status shm_of(const google::protobuf::Map<std::string, pb::InferParameter>& params,
                     std::optional<v2::shm_ref>& out) {
  // Most tensors carry no parameters: no key to build and hash for them.
  if (params.empty()) return {};
  auto it = params.find("shared_memory_region");
  if (it == params.end()) return {};
  if (it->second.parameter_choice_case() != pb::InferParameter::kStringParam)
    return invalid("invalid value type for 'shared_memory_region' parameter, expected string_param.");
  v2::shm_ref ref;
  ref.region = it->second.string_param();
  auto number = [&](const char* key, std::uint64_t& value, bool required) -> status {
    auto f = params.find(key);
    if (f == params.end()) {
      if (required)
        return invalid(std::string("'") + key + "' parameter is required when using shared memory");
      return {};
    }
    if (f->second.parameter_choice_case() == pb::InferParameter::kInt64Param && f->second.int64_param() >= 0)
      value = static_cast<std::uint64_t>(f->second.int64_param());
    else if (f->second.parameter_choice_case() == pb::InferParameter::kUint64Param)
      value = f->second.uint64_param();
    else
      return invalid(std::string("invalid value type for '") + key + "' parameter, expected int64_param.");
    return {};
  };
  if (auto st = number("shared_memory_byte_size", ref.byte_size, true)) return st;
  if (auto st = number("shared_memory_offset", ref.offset, false)) return st;
  out = std::move(ref);
  return {};
}

inline bool is_shm_key(std::string_view k) {
  return k == "shared_memory_region" || k == "shared_memory_offset" || k == "shared_memory_byte_size";
}

// Typed contents of one input, serialised as raw little-endian bytes (BYTES: length-prefixed).
inline status typed_contents(const pb::ModelInferRequest::InferInputTensor& in, data_type dt,
                             std::string_view model, std::string& out) {
  const pb::InferTensorContents& c = in.contents();
  bool taken = false;
  status result;
  auto take = [&](int count, data_type field_type, auto append) -> bool {
    if (count == 0) return true;
    bool allowed = field_type == dt;
    if (field_type == data_type::int32) allowed = dt == data_type::int32 || dt == data_type::int16 || dt == data_type::int8;
    if (field_type == data_type::uint32)
      allowed = dt == data_type::uint32 || dt == data_type::uint16 || dt == data_type::uint8;
    if (!allowed) {
      result = invalid("unexpected explicit tensor data for input tensor '" + in.name() + "' for model '" +
                       std::string(model) + "' of type '" + std::string(wire_name(field_type)) +
                       "', expected datatype '" + in.datatype() + "'");
      return false;
    }
    if (taken) {
      result = invalid("unexpected explicit tensor data for input tensor '" + in.name() + "' for model '" +
                       std::string(model) + "', binary data was already supplied.");
      return false;
    }
    taken = true;
    if (dt != data_type::bytes) out.reserve(static_cast<std::size_t>(count) * element_size(dt));
    append();
    return true;
  };
  auto put = [&out](const void* p, std::size_t n) { out.append(static_cast<const char*>(p), n); };
  const std::size_t width = element_size(dt);
  if (!take(c.bool_contents_size(), data_type::bool_, [&] {
        for (bool b : c.bool_contents()) out.push_back(b ? '\1' : '\0');
      }))
    return result;
  if (!take(c.int_contents_size(), data_type::int32, [&] {
        for (std::int32_t v : c.int_contents()) put(&v, width);  // narrowed: the low bytes
      }))
    return result;
  if (!take(c.int64_contents_size(), data_type::int64, [&] {
        for (std::int64_t v : c.int64_contents()) put(&v, 8);
      }))
    return result;
  if (!take(c.uint_contents_size(), data_type::uint32, [&] {
        for (std::uint32_t v : c.uint_contents()) put(&v, width);
      }))
    return result;
  if (!take(c.uint64_contents_size(), data_type::uint64, [&] {
        for (std::uint64_t v : c.uint64_contents()) put(&v, 8);
      }))
    return result;
  if (!take(c.fp32_contents_size(), data_type::fp32, [&] {
        for (float v : c.fp32_contents()) put(&v, 4);
      }))
    return result;
  if (!take(c.fp64_contents_size(), data_type::fp64, [&] {
        for (double v : c.fp64_contents()) put(&v, 8);
      }))
    return result;
  if (!take(c.bytes_contents_size(), data_type::bytes, [&] {
        for (const auto& s : c.bytes_contents()) {
          const auto n = static_cast<std::uint32_t>(s.size());
          put(&n, 4);
          out += s;
        }
      }))
    return result;
  return {};
}

// The typed contents of one input as the tensor's bytes, without a copy, where protobuf already
// holds them so: one field set, of the datatype's own width (INT64 in int64_contents, FP32 in
// fp32_contents, BOOL in bool_contents, ...), on a little-endian host. Anything else (narrowing,
// BYTES, a second field) is converted by typed_contents, which also has every refusal.
inline std::optional<std::span<const std::byte>> typed_view(const pb::InferTensorContents& c, data_type dt) {
  if constexpr (std::endian::native != std::endian::little) return std::nullopt;
  const int set = (c.bool_contents_size() > 0) + (c.int_contents_size() > 0) + (c.int64_contents_size() > 0) +
                  (c.uint_contents_size() > 0) + (c.uint64_contents_size() > 0) + (c.fp32_contents_size() > 0) +
                  (c.fp64_contents_size() > 0) + (c.bytes_contents_size() > 0);
  if (set != 1) return std::nullopt;
  auto bytes = [](const auto& field) -> std::optional<std::span<const std::byte>> {
    if (field.empty()) return std::nullopt;
    return std::as_bytes(std::span(field.data(), static_cast<std::size_t>(field.size())));
  };
  switch (dt) {
    case data_type::bool_:  // protobuf keeps each as a one-byte bool, 0 or 1, as BOOL tensors are
      if constexpr (sizeof(bool) != 1) return std::nullopt;
      return bytes(c.bool_contents());
    case data_type::int32: return bytes(c.int_contents());
    case data_type::uint32: return bytes(c.uint_contents());
    case data_type::int64: return bytes(c.int64_contents());
    case data_type::uint64: return bytes(c.uint64_contents());
    case data_type::fp32: return bytes(c.fp32_contents());
    case data_type::fp64: return bytes(c.fp64_contents());
    default: return std::nullopt;
  }
}

}  // namespace detail

// --- server side ------------------------------------------------------------------------------

/// Decodes `in` for model `model` with Triton's gRPC rules (v2-protocol §2.3). Input data
/// from raw_input_contents, and typed contents already in the datatype's width, are views of
/// `in`, which must outlive `out`; other typed contents are converted to raw bytes. Every
/// output is requested binary (gRPC answers raw).
inline status decode_infer_request(const pb::ModelInferRequest& in, std::string_view model,
                                   v2::infer_request& out, const v2::codec_limits& limits = {}) {
  out.id = in.id();
  if (auto st = v2::check_count("parameters", static_cast<std::size_t>(in.parameters_size()),
                                limits.max_parameters))
    return st;
  if (auto st = v2::check_count("inputs", static_cast<std::size_t>(in.inputs_size()), limits.max_tensors))
    return st;
  if (auto st = v2::check_count("outputs", static_cast<std::size_t>(in.outputs_size()), limits.max_tensors))
    return st;
  for (const auto& [key, p] : in.parameters()) {
    const auto kind = p.parameter_choice_case();
    if (key == "sequence_id") {
      if (kind == pb::InferParameter::kInt64Param)
        out.parameters.set(key, static_cast<std::uint64_t>(p.int64_param()));
      else if (kind == pb::InferParameter::kUint64Param)
        out.parameters.set(key, p.uint64_param());
      else if (kind == pb::InferParameter::kStringParam)
        out.parameters.set(key, p.string_param());
      else
        return detail::invalid("invalid value type for 'sequence_id' parameter, expected int64_param or string_param.");
    } else if (key == "sequence_start" || key == "sequence_end") {
      if (kind != pb::InferParameter::kBoolParam)
        return detail::invalid("invalid value type for '" + key + "' parameter, expected bool_param.");
      out.parameters.set(key, p.bool_param());
    } else if (key == "priority") {
      if (kind == pb::InferParameter::kInt64Param) {
        if (p.int64_param() < 0) return detail::invalid("invalid value for 'priority', expected value >= 0.");
        out.parameters.set(key, static_cast<std::uint64_t>(p.int64_param()));
      } else if (kind == pb::InferParameter::kUint64Param) {
        out.parameters.set(key, p.uint64_param());
      } else {
        return detail::invalid("invalid value type for 'priority' parameter, expected int64_param or uint64_param.");
      }
    } else if (key == "timeout") {
      if (kind != pb::InferParameter::kInt64Param)
        return detail::invalid("invalid value type for 'timeout' parameter, expected int64_param.");
      out.parameters.set(key, static_cast<std::uint64_t>(std::max<std::int64_t>(0, p.int64_param())));
    } else if (key.rfind("triton_", 0) == 0) {
      if (key != "triton_enable_empty_final_response")
        return detail::invalid(
            "parameter keys starting with 'triton_' are reserved for Triton usage. Only the following keys "
            "starting with 'triton_' are allowed: triton_enable_empty_final_response");
      if (kind != pb::InferParameter::kBoolParam)
        return detail::invalid("invalid value type for '" + key + "' parameter, expected bool_param.");
      out.parameters.set(key, p.bool_param());
    } else {
      switch (kind) {
        case pb::InferParameter::kInt64Param: out.parameters.set(key, p.int64_param()); break;
        case pb::InferParameter::kBoolParam: out.parameters.set(key, p.bool_param()); break;
        case pb::InferParameter::kStringParam: out.parameters.set(key, p.string_param()); break;
        case pb::InferParameter::kDoubleParam: out.parameters.set(key, p.double_param()); break;
        default:
          return detail::invalid("invalid value type for '" + key +
                                 "' parameter, expected int64_param, bool_param, or string_param.");
      }
    }
  }

  int next_raw = 0;
  out.inputs.reserve(static_cast<std::size_t>(in.inputs_size()));
  for (const auto& t : in.inputs()) {
    if (auto st = v2::check_count("dimensions in a shape", static_cast<std::size_t>(t.shape_size()),
                                  limits.max_dims))
      return st;
    if (auto st = v2::check_count("parameters", static_cast<std::size_t>(t.parameters_size()),
                                  limits.max_parameters))
      return st;
    v2::infer_input& i = out.inputs.emplace_back();
    i.name = t.name();
    i.datatype = parse_data_type(t.datatype());
    i.shape.assign(t.shape().begin(), t.shape().end());
    for (const auto& [k, p] : t.parameters()) {
      if (detail::is_shm_key(k)) continue;
      parameter_value v;
      if (from_proto(p, v)) i.parameters.set(k, std::move(v));
    }
    if (auto st = detail::shm_of(t.parameters(), i.shm)) return st;
    if (i.shm) {
      if (t.has_contents())
        return detail::invalid("unexpected 'content' provided when using shared memory for input tensor '" +
                               t.name() + "' for model '" + std::string(model) + "'");
      i.encoding = v2::tensor_encoding::shared_memory;
      continue;
    }
    if (t.has_contents() && in.raw_input_contents_size() > 0)
      return detail::invalid("contents field must not be specified when using raw_input_contents for '" +
                             t.name() + "' for model '" + std::string(model) + "'");
    if (t.has_contents()) {
      i.encoding = v2::tensor_encoding::json;
      if (auto view = detail::typed_view(t.contents(), i.datatype)) {
        i.data = v2::tensor_data::view(*view);
        continue;
      }
      std::string bytes;
      if (auto st = detail::typed_contents(t, i.datatype, model, bytes)) return st;
      i.data = v2::tensor_data::own(std::move(bytes));
      continue;
    }
    if (next_raw >= in.raw_input_contents_size())
      return detail::invalid("unable to find data for input tensor '" + t.name() + "' for model '" +
                             std::string(model) + "' in request.");
    i.encoding = v2::tensor_encoding::binary;
    i.data = v2::tensor_data::view(std::string_view(in.raw_input_contents(next_raw++)));
  }

  for (const auto& t : in.outputs()) {
    if (auto st = v2::check_count("parameters", static_cast<std::size_t>(t.parameters_size()),
                                  limits.max_parameters))
      return st;
    v2::requested_output& o = out.outputs.emplace_back();
    o.name = t.name();
    o.binary_data = true;
    if (auto st = detail::shm_of(t.parameters(), o.shm)) return st;
    for (const auto& [k, p] : t.parameters()) {
      if (detail::is_shm_key(k)) continue;
      if (k == "classification") {
        if (p.parameter_choice_case() != pb::InferParameter::kInt64Param)
          return detail::invalid("invalid value type for 'classification' parameter, expected int64_param");
        if (p.int64_param() < 0)
          return detail::invalid("invalid value for 'classification' parameter, expected >= 0");
        o.classification = static_cast<std::uint64_t>(p.int64_param());
        continue;
      }
      parameter_value v;
      if (from_proto(p, v)) o.parameters.set(k, std::move(v));
    }
    if (o.shm && o.classification)
      return detail::invalid("output can't set both 'shared_memory_region' and 'classification'");
  }
  return {};
}

/// Encodes a response: one InferOutputTensor and one raw_output_contents entry per output, in
/// order, the entry empty for outputs placed in shared memory. Output data is copied, except
/// that with `inputs` (the request the response answers), an output whose bytes are exactly one
/// of its raw_input_contents entries (a model that passes an input through) takes that entry's
/// string, swapped instead of copied: the entry is left empty and views of it dangle.
inline void encode_infer_response(const v2::infer_response& r, pb::ModelInferResponse& out,
                                  pb::ModelInferRequest* inputs = nullptr) {
  // Strings short enough to be stored inline would swap by copying: only larger ones are taken.
  constexpr std::size_t least_taken = 4096;
  auto take = [&](std::string_view bytes) -> std::string* {
    if (!inputs || bytes.size() < least_taken) return nullptr;
    for (int i = 0; i < inputs->raw_input_contents_size(); ++i) {
      const std::string& raw = inputs->raw_input_contents(i);
      if (raw.data() == bytes.data() && raw.size() == bytes.size()) return inputs->mutable_raw_input_contents(i);
    }
    return nullptr;
  };
  out.set_model_name(r.model_name);
  out.set_model_version(r.model_version);
  out.set_id(r.id);
  to_proto(r.parameters, *out.mutable_parameters());
  for (const auto& o : r.outputs) {
    auto* t = out.add_outputs();
    t->set_name(o.name);
    t->set_datatype(std::string(wire_name(o.datatype)));
    for (auto d : o.shape) t->add_shape(d);
    to_proto(o.parameters, *t->mutable_parameters());
    if (o.encoding == v2::tensor_encoding::shared_memory) {
      out.add_raw_output_contents();
    } else if (std::string* whole_input = take(o.data.str())) {
      out.add_raw_output_contents()->swap(*whole_input);
    } else {
      out.add_raw_output_contents()->assign(o.data.str());
    }
  }
}

}  // namespace inferwire::grpc

#endif
