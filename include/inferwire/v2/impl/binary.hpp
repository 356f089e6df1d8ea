// SPDX-License-Identifier: Apache-2.0
// Implementation of inferwire/v2/binary.hpp. Include that header, not this one.
#ifndef INFERWIRE_V2_IMPL_BINARY_HPP
#define INFERWIRE_V2_IMPL_BINARY_HPP

#include <boost/json/monotonic_resource.hpp>

#include <array>
#include <cctype>
#include <charconv>
#include <limits>

namespace inferwire::v2 {

INFERWIRE_DECL std::size_t encoded_body::binary_size() const noexcept {
  std::size_t n = 0;
  for (const auto& s : segments) n += s.size();
  return n;
}

INFERWIRE_DECL std::size_t encoded_body::size() const noexcept { return header.size() + binary_size(); }

INFERWIRE_DECL void encoded_body::append_to(std::string& out) const {
  out.reserve(out.size() + size());
  out += header;
  for (const auto& s : segments) out.append(reinterpret_cast<const char*>(s.data()), s.size());
}

INFERWIRE_DECL std::string encoded_body::flatten() const {
  std::string body;
  append_to(body);
  return body;
}

INFERWIRE_DECL std::string request_prefix(std::string_view id) {
  return "[request id: " + (id.empty() ? std::string("<id_unknown>") : std::string(id)) + "] ";
}

namespace detail {

INFERWIRE_DECL status unable_to_parse(status st, std::string_view field) {
  return st.prefix("Unable to parse '" + std::string(field) + "': ");
}

INFERWIRE_DECL std::string limit_hint() { return " bytes. Use --http-max-input-size to increase the limit."; }

// A custom parameter from JSON: string, int, bool or double, checked in that order; an
// unsigned value above INT64_MAX becomes a double (v2-protocol §1.4 step 6).
INFERWIRE_DECL bool json_to_parameter(const boost::json::value& v, parameter_value& out) {
  switch (v.kind()) {
    case boost::json::kind::string:
      if (json_access::is_nonfinite_literal(v)) {
        double d = {};
        status ignored;
        json_access::as_double(v, d, ignored);
        out = d;
      } else {
        out = std::string(v.get_string());
      }
      return true;
    case boost::json::kind::int64: out = v.get_int64(); return true;
    case boost::json::kind::uint64: out = static_cast<double>(v.get_uint64()); return true;
    case boost::json::kind::bool_: out = v.get_bool(); return true;
    case boost::json::kind::double_: out = v.get_double(); return true;
    default: return false;
  }
}

// Appends the decimal digits of `v`.
template <class Integer>
void append_integer(std::string& h, Integer v) {
  char digits[24];
  h.append(digits, std::to_chars(digits, digits + sizeof digits, v).ptr);
}

INFERWIRE_DECL void append_parameter(std::string& h, const parameter_value& v) {
  std::visit([&](const auto& x) {
    using T = std::decay_t<decltype(x)>;
    if constexpr (std::is_same_v<T, std::string>) append_json_string(h, x);
    else if constexpr (std::is_same_v<T, bool>) h += x ? "true" : "false";
    else if constexpr (std::is_same_v<T, double>) append_json_double(h, x);
    else append_integer(h, x);
  }, v);
}

// Appends `"key":value` members of `m` (without braces), comma-separated; returns whether any
// member was written.
INFERWIRE_DECL bool append_parameter_members(std::string& h, const parameter_map& m, bool comma) {
  for (const auto& [k, v] : m) {
    if (comma) h += ',';
    comma = true;
    append_json_string(h, k);
    h += ':';
    append_parameter(h, v);
  }
  return comma;
}

// The members of `o` with the given names, in one pass over its members (a parsed document
// holds each key once); a member that is absent stays null.
template <std::size_t N>
std::array<const boost::json::value*, N> find_members(const boost::json::object& o,
                                                      const std::array<std::string_view, N>& names) {
  std::array<const boost::json::value*, N> found{};
  for (const auto& kv : o) {
    const std::string_view key = kv.key();
    for (std::size_t i = 0; i < N; ++i)
      if (key == names[i]) {
        found[i] = &kv.value();
        break;
      }
  }
  return found;
}

// Appends a literal of our own (keys with their punctuation) with its length known at compile
// time: the encoders below write `,"shape":` as one piece instead of four.
template <std::size_t N>
inline void append_literal(std::string& h, const char (&text)[N]) {
  h.append(text, N - 1);
}

// Appends `,"parameters":{...}` with the members of `m`, followed by `extra` (pre-formatted
// members such as `"binary_data_size":64`, or empty).
INFERWIRE_DECL void append_parameters_object(std::string& h, const parameter_map& m,
                                     std::string_view extra = {}) {
  append_literal(h, ",\"parameters\":{");
  bool comma = append_parameter_members(h, m, false);
  if (!extra.empty()) {
    if (comma) h += ',';
    h += extra;
  }
  h += '}';
}

INFERWIRE_DECL void append_shape(std::string& h, std::span<const std::int64_t> shape) {
  // As an INT64 tensor's JSON data is written: a block at a time (once, for most shapes).
  append_fixed_array<std::int64_t>(h, std::as_bytes(shape), shape.size());
}

// The members of an input or output parameters object that are consumed as typed fields.
INFERWIRE_DECL bool is_data_parameter(std::string_view key) {
  return key == "binary_data_size" || key == "shared_memory_region" ||
         key == "shared_memory_offset" || key == "shared_memory_byte_size" ||
         key == "binary_data" || key == "classification";
}

INFERWIRE_DECL void copy_other_parameters(const boost::json::object* params, parameter_map& out) {
  if (!params) return;
  for (const auto& kv : *params) {
    if (is_data_parameter(kv.key())) continue;
    parameter_value v;
    if (json_to_parameter(kv.value(), v)) out.set(kv.key(), std::move(v));
  }
}

// Reads shared_memory_region/offset/byte_size from a tensor's parameters.
INFERWIRE_DECL bool read_shm_ref(const boost::json::object& params, shm_ref& ref, status& st) {
  std::string_view region;
  if (!json_access::as_string(params.at("shared_memory_region"), region, st)) {
    st = unable_to_parse(std::move(st), "shared_memory_region");
    return false;
  }
  ref.region = region;
  if (const auto* v = params.if_contains("shared_memory_offset"))
    if (!json_access::as_uint64(*v, ref.offset, st)) {
      st = unable_to_parse(std::move(st), "shared_memory_offset");
      return false;
    }
  if (const auto* v = params.if_contains("shared_memory_byte_size"))
    if (!json_access::as_uint64(*v, ref.byte_size, st)) {
      st = unable_to_parse(std::move(st), "shared_memory_byte_size");
      return false;
    }
  return true;
}

// Like std::stoi: leading spaces, a sign, digits, anything after the digits ignored.
// Returns false when no digits are found; `overflow` when the value leaves int64.
INFERWIRE_DECL bool parse_leading_integer(std::string_view s, std::int64_t& out, bool& overflow) {
  std::size_t i = 0;
  while (i < s.size() && std::isspace(static_cast<unsigned char>(s[i]))) ++i;
  if (i < s.size() && s[i] == '+') ++i;
  auto r = std::from_chars(s.data() + i, s.data() + s.size(), out);
  overflow = r.ec == std::errc::result_out_of_range;
  return r.ec == std::errc{} || overflow;
}

}  // namespace detail

INFERWIRE_DECL status detail::count_exceeded(std::string_view what, std::size_t n, std::size_t max) {
  return {errc::invalid_arg, "request has " + std::to_string(n) + " " + std::string(what) +
                                 ", more than the " + std::to_string(max) + " allowed"};
}


INFERWIRE_DECL status check_json_size(std::size_t size, const codec_limits& limits) {
  if (size <= limits.max_input_size) return {};
  return {errc::invalid_arg, "request JSON size of " + std::to_string(size) +
                                 " bytes exceeds the maximum allowed input size of " +
                                 std::to_string(limits.max_input_size) + detail::limit_hint()};
}

INFERWIRE_DECL std::size_t parse_content_length(std::string_view value, status& st) {
  std::size_t n = 0;
  auto r = std::from_chars(value.data(), value.data() + value.size(), n);
  if (r.ec != std::errc{} || r.ptr != value.data() + value.size()) {
    st = {errc::invalid_arg, "Unable to parse Content-Length, got: " + std::string(value)};
    return 0;
  }
  return n;
}

INFERWIRE_DECL std::size_t parse_header_length(std::optional<std::string_view> value,
                                       std::size_t content_length, status& st) {
  if (!value) return content_length;
  std::int64_t n = 0;
  bool overflow = false;
  if (!detail::parse_leading_integer(*value, n, overflow)) {
    st = {errc::invalid_arg,
          "Unable to parse Inference-Header-Content-Length, got: " + std::string(*value)};
    return 0;
  }
  if (overflow || n < std::numeric_limits<std::int32_t>::min() ||
      n > std::numeric_limits<std::int32_t>::max()) {
    st = {errc::invalid_arg,
          "Unable to parse Inference-Header-Content-Length, value is out of range [ "
          "-2147483648, 2147483647 ], got: " + std::string(*value)};
    return 0;
  }
  if (n < 0 || static_cast<std::uint64_t>(n) > content_length) {
    st = {errc::invalid_arg, "inference header size should be in range (0, " +
                                 std::to_string(content_length) + "), got: " +
                                 std::string(*value)};
    return 0;
  }
  return static_cast<std::size_t>(n);
}

namespace detail {

// The steps of decode_infer_request (v2-protocol §4.2), one helper each. Every helper returns
// the request's error with Triton's text, or success.

// Step 6: the request's parameters (Triton's typed keys, reserved 'triton_' keys refused).
INFERWIRE_DECL status decode_request_parameters(const boost::json::value& v, parameter_map& out,
                                        const codec_limits& limits) {
  using namespace json_access;
  status st;
  const boost::json::object* params = as_object(v, st);
  if (!params) return unable_to_parse(st, "parameters");
  if (auto e = check_count("parameters", params->size(), limits.max_parameters)) return e;
  out.reserve(params->size());
  for (const auto& kv : *params) {
    const std::string_view key = kv.key();
    const boost::json::value& val = kv.value();
    if (key == "sequence_id") {
      if (val.is_string() && !is_nonfinite_literal(val)) {
        out.set(key, std::string(val.get_string()));
      } else {
        std::uint64_t id = {};
        if (!as_uint64(val, id, st)) return unable_to_parse(st, key);
        out.set(key, id);
      }
    } else if (key == "sequence_start" || key == "sequence_end" || key == "binary_data_output") {
      bool b = {};
      if (!as_bool(val, b, st)) return unable_to_parse(st, key);
      out.set(key, b);
    } else if (key == "priority" || key == "timeout") {
      std::uint64_t u = {};
      if (!as_uint64(val, u, st)) return unable_to_parse(st, key);
      out.set(key, u);
    } else if (key.starts_with("triton_")) {
      return {errc::invalid_arg,
              "parameter keys starting with 'triton_' are reserved for Triton usage and should "
              "not be specified."};
    } else {
      parameter_value pv;
      if (!json_to_parameter(val, pv))
        return {errc::invalid_arg, "parameter '" + std::string(key) +
                                       "' has invalid type. It should be either 'int', 'bool', or 'string'."};
      out.set(key, std::move(pv));
    }
  }
  return {};
}

// The 'parameters' object of a tensor, if any, within the parameter count limit.
INFERWIRE_DECL status tensor_parameters(const boost::json::object& tensor, const codec_limits& limits,
                                const boost::json::object*& params) {
  params = nullptr;
  const auto* p = tensor.if_contains("parameters");
  if (!p) return {};
  status st;
  params = json_access::as_object(*p, st);
  if (!params) return unable_to_parse(st, "parameters");
  return check_count("parameters", params->size(), limits.max_parameters);
}

// Step 7a: an input names exactly one place for its data.
INFERWIRE_DECL status check_one_data_source(bool has_data, bool has_binary, bool has_shm) {
  if (int(has_data) + int(has_binary) + int(has_shm) == 1) return {};
  std::string msg =
      "Input must set only one of the following fields: 'data', 'binary_data_size' in "
      "'parameters', 'shared_memory_region' in 'parameters'. But";
  if (!has_data && !has_binary && !has_shm) {
    msg += " no field is set";
  } else {
    msg += " set";
    if (has_data) msg += " 'data'";
    if (has_binary) msg += " 'binary_data_size'";
    if (has_shm) msg += " 'shared_memory_region'";
  }
  return {errc::invalid_arg, std::move(msg)};
}

// Step 7b: name, datatype and shape of an input.
INFERWIRE_DECL status decode_input_header(const boost::json::object& in, const codec_limits& limits,
                                  infer_input& input) {
  using namespace json_access;
  status st;
  std::string_view s;
  const boost::json::value* f = member(in, "name", st);
  if (!f || !as_string(*f, s, st)) return unable_to_parse(st, "name");
  input.name = s;
  f = member(in, "datatype", st);
  if (!f || !as_string(*f, s, st)) return unable_to_parse(st, "datatype");
  input.datatype = parse_data_type(s);
  f = member(in, "shape", st);
  const boost::json::array* shape = f ? as_array(*f, st) : nullptr;
  if (!shape) return unable_to_parse(st, "shape");
  if (auto e = check_count("dimensions in a shape", shape->size(), limits.max_dims)) return e;
  input.shape.reserve(shape->size());
  for (const auto& d : *shape) {
    std::uint64_t u = {};
    if (!as_uint64(d, u, st)) return unable_to_parse(st, "shape");
    input.shape.push_back(static_cast<std::int64_t>(u));  // > INT64_MAX reads as invalid
  }
  return {};
}

// Step 7c: the 'data' of a JSON input, checked against its shape and the size limit.
INFERWIRE_DECL status decode_json_input(const boost::json::value& data, const codec_limits& limits,
                                infer_input& input) {
  const shape_result count = element_count(input.shape);
  if (count.error == shape_errc::invalid_dimension)
    return {errc::invalid_arg, "invalid shape for input '" + input.name + "': shape " +
                                   to_string(input.shape) + " contains one or more invalid dimensions"};
  if (count.error == shape_errc::count_overflow)
    return {errc::invalid_arg, "invalid shape for input '" + input.name + "': shape " +
                                   to_string(input.shape) +
                                   " causes total element count to exceed maximum size of "
                                   "9223372036854775807"};
  if (is_fixed_size(input.datatype)) {
    const shape_result bytes = byte_size(input.shape, input.datatype);
    if (!bytes)
      return {errc::invalid_arg, "byte size overflow for input '" + input.name + "': element count (" +
                                     std::to_string(count.value) + ") * data type size (" +
                                     std::to_string(element_size(input.datatype)) +
                                     ") exceeds maximum allowed size (9223372036854775807)"};
    if (static_cast<std::uint64_t>(bytes.value) > limits.max_input_size)
      return {errc::invalid_arg, "JSON input '" + input.name + "' has a byte_size (" +
                                     std::to_string(bytes.value) +
                                     " bytes) that exceeds the maximum allowed value of " +
                                     std::to_string(limits.max_input_size) + limit_hint()};
  }
  std::string decoded;
  if (auto e = decode_json_tensor_data(data, input.datatype, count.value, input.name, decoded)) return e;
  input.encoding = tensor_encoding::json;
  input.data = tensor_data::own(std::move(decoded));
  return {};
}

// Step 7: one input, its data in JSON, in the binary part of `body` (from `next_binary`,
// which advances past it) or in shared memory.
INFERWIRE_DECL status decode_input(const boost::json::value& v, std::string_view body, std::size_t& next_binary,
                           const std::string& model, const codec_limits& limits, infer_input& input) {
  status st;
  const boost::json::object* in = json_access::as_object(v, st);
  if (!in) return unable_to_parse(st, "inputs");
  const boost::json::object* params = nullptr;
  if (auto e = tensor_parameters(*in, limits, params)) return e;
  const bool has_binary = params && params->contains("binary_data_size");
  const bool has_shm = params && params->contains("shared_memory_region");
  if (auto e = check_one_data_source(in->contains("data"), has_binary, has_shm)) return e;
  if (auto e = decode_input_header(*in, limits, input)) return e;
  copy_other_parameters(params, input.parameters);
  if (has_shm) {
    shm_ref ref;
    if (!read_shm_ref(*params, ref, st)) return st;
    input.encoding = tensor_encoding::shared_memory;
    input.shm = std::move(ref);
    return {};
  }
  if (!has_binary) return decode_json_input(in->at("data"), limits, input);
  std::uint64_t size = {};
  if (!json_access::as_uint64(params->at("binary_data_size"), size, st))
    return unable_to_parse(st, "binary_data_size");
  if (size > body.size() - next_binary)
    return {errc::invalid_arg, "unexpected size for input '" + input.name + "', expecting " +
                                   std::to_string(size) + " additional bytes for model '" + model + "'"};
  input.encoding = tensor_encoding::binary;
  input.data = tensor_data::view(body.substr(next_binary, size));
  next_binary += size;
  return {};
}

// Step 9: one requested output and its parameters (binary_data, classification, shared memory).
INFERWIRE_DECL status decode_requested_output(const boost::json::value& v, const codec_limits& limits,
                                      requested_output& ro) {
  using namespace json_access;
  status st;
  const boost::json::object* out = as_object(v, st);
  if (!out) return unable_to_parse(st, "outputs");
  std::string_view s;
  const boost::json::value* f = member(*out, "name", st);
  if (!f || !as_string(*f, s, st)) return unable_to_parse(st, "name");
  ro.name = s;
  const boost::json::object* params = nullptr;
  if (auto e = tensor_parameters(*out, limits, params)) return e;
  if (!params) return {};
  if (const auto* b = params->if_contains("binary_data")) {
    bool flag = {};
    if (!as_bool(*b, flag, st)) return unable_to_parse(st, "binary_data");
    ro.binary_data = flag;
  }
  if (const auto* c = params->if_contains("classification"))
    if (!as_uint64(*c, ro.classification, st)) return st.prefix("Unable to set 'classification': ");
  if (params->contains("shared_memory_region")) {
    if (ro.classification != 0 || params->contains("classification"))
      return {errc::invalid_arg, "Output can't set both 'shared_memory_region' and 'classification'"};
    if (ro.binary_data.value_or(false))
      return {errc::invalid_arg, "Output can't set both 'shared_memory_region' and 'binary_data'"};
    shm_ref ref;
    if (!read_shm_ref(*params, ref, st)) return st;
    ro.shm = std::move(ref);
  }
  copy_other_parameters(params, ro.parameters);
  return {};
}

// A body without a JSON header (header length 0): one raw input, its shape from the model.
INFERWIRE_DECL status decode_raw_body(std::string_view body, const codec_limits& limits, infer_request& req) {
  if (body.size() > limits.max_input_size)
    return {errc::invalid_arg, "Raw input has a byte_size (" + std::to_string(body.size()) +
                                   " bytes) that exceeds the maximum allowed value of " +
                                   std::to_string(limits.max_input_size) + limit_hint()};
  req.raw_binary = true;
  req.raw_input = tensor_data::view(body);
  return {};
}

// Steps 5 to 9 over a parsed header.
INFERWIRE_DECL status decode_infer_header(const boost::json::value& doc, std::string_view body,
                                  std::size_t header_length, const std::string& model,
                                  const codec_limits& limits, infer_request& req) {
  using namespace json_access;
  status st;
  const boost::json::object* root = as_object(doc, st);
  if (!root) return st;
  if (const auto* v = root->if_contains("id")) {
    std::string_view id;
    if (!as_string(*v, id, st)) return unable_to_parse(st, "id");
    req.id = id;
  }
  // Step 6: request parameters.
  if (const auto* v = root->if_contains("parameters"))
    if (auto e = decode_request_parameters(*v, req.parameters, limits)) return e;
  // Step 7: inputs.
  const boost::json::value* inputs_v = member(*root, "inputs", st);
  if (!inputs_v) return unable_to_parse(st, "inputs");
  const boost::json::array* inputs = as_array(*inputs_v, st);
  if (!inputs) return unable_to_parse(st, "inputs");
  if (auto e = check_count("inputs", inputs->size(), limits.max_tensors)) return e;
  std::size_t next_binary = header_length;
  req.inputs.reserve(inputs->size());
  for (const auto& iv : *inputs) {
    if (auto e = decode_input(iv, body, next_binary, model, limits, req.inputs.emplace_back())) return e;
  }
  // Step 8: every binary byte must belong to an input.
  if (next_binary != body.size())
    return {errc::invalid_arg, "unexpected additional input data for model '" + model + "'"};
  // Step 9: requested outputs.
  if (const auto* ov = root->if_contains("outputs")) {
    const boost::json::array* outputs = as_array(*ov, st);
    if (!outputs) return unable_to_parse(st, "outputs");
    if (auto e = check_count("outputs", outputs->size(), limits.max_tensors)) return e;
    req.outputs.reserve(outputs->size());
    for (const auto& o : *outputs)
      if (auto e = decode_requested_output(o, limits, req.outputs.emplace_back())) return e;
  }
  return {};
}

/// Storage for a JSON document that lives only for one call: a stack buffer serves small
/// headers without touching the heap; larger ones take blocks from the heap, all freed at once.
struct call_scoped_json {
  unsigned char arena[8192];
  boost::json::monotonic_resource resource{arena, sizeof arena};
  boost::json::storage_ptr storage() noexcept { return &resource; }
};

}  // namespace detail

INFERWIRE_DECL infer_request decode_infer_request(std::string_view body, std::size_t header_length,
                                          std::string_view model, status& st,
                                          const codec_limits& limits) {
  infer_request req;
  if (header_length == 0) {
    st = detail::decode_raw_body(body, limits, req);
    if (st) return {};
    return req;  // moved, not copied (a conditional expression would copy it)
  }
  if (header_length > body.size()) {
    st = {errc::invalid_arg, "inference header size should be in range (0, " +
                                 std::to_string(body.size()) + "), got: " + std::to_string(header_length)};
    return {};
  }
  if ((st = check_json_size(header_length, limits))) return {};
  detail::call_scoped_json scratch;
  const boost::json::value doc = parse_json(body.substr(0, header_length), st, max_json_depth, scratch.storage());
  if (st) return {};
  st = detail::decode_infer_header(doc, body, header_length, std::string(model), limits, req);
  if (st) return {};
  return req;
}

INFERWIRE_DECL infer_request decode_infer_request(std::string_view body, std::size_t header_length,
                                          std::string_view model, const codec_limits& limits) {
  status st;
  auto r = decode_infer_request(body, header_length, model, st, limits);
  throw_if(st);
  return r;
}

INFERWIRE_DECL status deduce_raw_input(infer_request& request, std::string_view model,
                               std::span<const tensor_metadata> inputs, bool batching,
                               const codec_limits& limits) {
  if (inputs.size() != 1)
    return {errc::invalid_arg, "Raw request must only have 1 input (found 1) to be deduced but "
                               "got " + std::to_string(inputs.size()) + " inputs in '" +
                                   std::string(model) + "' model configuration"};
  const tensor_metadata& cfg = inputs[0];
  std::span<const std::byte> body = request.raw_input.bytes();
  if (body.size() > limits.max_input_size)
    return {errc::invalid_arg, "Raw input has a byte_size (" + std::to_string(body.size()) +
                                   " bytes) that exceeds the maximum allowed value of " +
                                   std::to_string(limits.max_input_size) + detail::limit_hint()};
  int variable = 0;
  for (auto d : cfg.shape) variable += d < 0;
  if (variable > 1)
    return {errc::invalid_arg, "The shape of the raw input '" + cfg.name +
                                   "' can not be deduced because there are more than one "
                                   "variable-sized dimension"};
  infer_input in;
  in.name = cfg.name;
  in.datatype = cfg.datatype;
  in.encoding = tensor_encoding::binary;
  if (cfg.datatype == data_type::bytes) {
    if (cfg.shape != shape_t{1})
      return {errc::invalid_arg, "For BYTE datatype raw input '" + cfg.name +
                                     "', the model must have input shape [1]"};
    std::string element;
    append_bytes_element(element, request.raw_input.str());
    in.data = tensor_data::own(std::move(element));
    in.shape = {1};
  } else {
    std::uint64_t fixed = element_size(cfg.datatype);
    for (auto d : cfg.shape)
      if (d >= 0) fixed *= static_cast<std::uint64_t>(d);
    in.shape = cfg.shape;
    for (auto& d : in.shape)
      if (d < 0) d = fixed == 0 ? 0 : static_cast<std::int64_t>(body.size() / fixed);
    in.data = request.raw_input;
  }
  if (batching) in.shape.insert(in.shape.begin(), 1);
  request.inputs.clear();
  request.inputs.push_back(std::move(in));
  return {};
}

INFERWIRE_DECL tensor_encoding output_encoding(const infer_request& request, std::string_view name) {
  if (request.raw_binary) return tensor_encoding::binary;
  for (const auto& o : request.outputs)
    if (o.name == name) {
      if (o.shm) return tensor_encoding::shared_memory;
      return o.binary_data.value_or(false) ? tensor_encoding::binary : tensor_encoding::json;
    }
  return request.binary_data_output() ? tensor_encoding::binary : tensor_encoding::json;
}

INFERWIRE_DECL status encode_infer_response(const infer_response& r, encoded_body& out,
                                            std::vector<std::size_t>* json_data) {
  std::string& h = out.header;
  h.clear();
  out.segments.clear();
  if (json_data) json_data->clear();
  h.reserve(128 + 96 * r.outputs.size());
  out.segments.reserve(r.outputs.size());
  using detail::append_literal;
  if (!r.id.empty()) {
    append_literal(h, "{\"id\":");
    append_json_string(h, r.id);
    append_literal(h, ",\"model_name\":");
  } else {
    append_literal(h, "{\"model_name\":");
  }
  append_json_string(h, r.model_name);
  append_literal(h, ",\"model_version\":");
  append_json_string(h, r.model_version);
  if (!r.parameters.empty()) detail::append_parameters_object(h, r.parameters);
  append_literal(h, ",\"outputs\":[");
  for (std::size_t i = 0; i < r.outputs.size(); ++i) {
    const infer_output& o = r.outputs[i];
    if (i) h += ',';
    append_literal(h, "{\"name\":");
    append_json_string(h, o.name);
    append_literal(h, ",\"datatype\":");
    append_json_string(h, wire_name(o.datatype));
    append_literal(h, ",\"shape\":");
    detail::append_shape(h, o.shape);
    if (o.encoding == tensor_encoding::binary) {
      constexpr std::string_view key = "\"binary_data_size\":";
      char member[key.size() + 24];
      key.copy(member, key.size());
      const char* end = std::to_chars(member + key.size(), member + sizeof member, o.data.size()).ptr;
      detail::append_parameters_object(h, o.parameters, std::string_view(member, end));
      if (!o.data.empty()) out.segments.push_back(o.data.bytes());
    } else {
      if (!o.parameters.empty()) detail::append_parameters_object(h, o.parameters);
      if (o.encoding == tensor_encoding::json) {
        shape_result count = element_count(o.shape);
        if (!count)
          return {errc::internal, "Failed to write 'data' field: output tensor shape does not "
                                  "match size of output for '" + o.name + "'"};
        append_literal(h, ",\"data\":");
        const std::size_t data_begin = h.size();
        status st = append_json_tensor_data(h, o.datatype, o.data.bytes(), count.value, o.name);
        if (st) return st;
        if (json_data) {
          json_data->push_back(data_begin);
          json_data->push_back(h.size());
        }
      }
    }
    h += '}';
  }
  append_literal(h, "]}");
  return {};
}

INFERWIRE_DECL encoded_body encode_infer_response(const infer_response& response) {
  encoded_body b;
  throw_if(encode_infer_response(response, b));
  return b;
}

INFERWIRE_DECL infer_response decode_infer_response(std::string_view body,
                                            std::optional<std::size_t> header_length,
                                            status& st) {
  namespace json = boost::json;
  using namespace json_access;
  st = {};
  const std::size_t hl = header_length.value_or(body.size());
  auto fail = [&](status s) {
    st = std::move(s);
    return infer_response{};
  };
  if (hl > body.size())
    return fail({errc::internal, "Inference-Header-Content-Length " + std::to_string(hl) +
                                     " exceeds the body size " + std::to_string(body.size())});
  detail::call_scoped_json scratch;
  json::value doc = parse_json(body.substr(0, hl), st, max_json_depth, scratch.storage());
  if (st) return {};
  const json::object* root = as_object(doc, st);
  if (!root) return {};

  infer_response r;
  std::string_view s;
  static constexpr std::array<std::string_view, 5> top_names{"id", "model_name", "model_version",
                                                             "parameters", "outputs"};
  const auto [id, model_name, model_version, parameters, outputs_value] =
      detail::find_members(*root, top_names);
  if (id) {
    if (!as_string(*id, s, st)) return fail(detail::unable_to_parse(st, "id"));
    r.id = s;
  }
  if (!required(model_name, "model_name", st) || !as_string(*model_name, s, st))
    return fail(detail::unable_to_parse(st, "model_name"));
  r.model_name = s;
  if (model_version) {
    if (!as_string(*model_version, s, st)) return fail(detail::unable_to_parse(st, "model_version"));
    r.model_version = s;
  }
  if (parameters) {
    const json::object* po = as_object(*parameters, st);
    if (!po) return fail(detail::unable_to_parse(st, "parameters"));
    detail::copy_other_parameters(po, r.parameters);
  }
  std::size_t next_binary = hl;
  if (outputs_value) {
    const json::array* outputs = as_array(*outputs_value, st);
    if (!outputs) return fail(detail::unable_to_parse(st, "outputs"));
    r.outputs.reserve(outputs->size());
    static constexpr std::array<std::string_view, 5> output_names{"name", "datatype", "shape",
                                                                  "parameters", "data"};
    for (const auto& o : *outputs) {
      const json::object* out = as_object(o, st);
      if (!out) return fail(detail::unable_to_parse(st, "outputs"));
      infer_output io;
      const auto [name, datatype, shape_value, params_value, data] =
          detail::find_members(*out, output_names);
      if (!required(name, "name", st) || !as_string(*name, s, st))
        return fail(detail::unable_to_parse(st, "name"));
      io.name = s;
      if (!required(datatype, "datatype", st) || !as_string(*datatype, s, st))
        return fail(detail::unable_to_parse(st, "datatype"));
      io.datatype = parse_data_type(s);
      const json::array* shape =
          required(shape_value, "shape", st) ? as_array(*shape_value, st) : nullptr;
      if (!shape) return fail(detail::unable_to_parse(st, "shape"));
      io.shape.reserve(shape->size());
      for (const auto& d : *shape) {
        std::int64_t i = {};
        if (!as_int64(d, i, st)) return fail(detail::unable_to_parse(st, "shape"));
        io.shape.push_back(i);
      }
      const json::object* params = nullptr;
      if (params_value) {
        params = as_object(*params_value, st);
        if (!params) return fail(detail::unable_to_parse(st, "parameters"));
      }
      detail::copy_other_parameters(params, io.parameters);
      const json::value* binary_size = params ? params->if_contains("binary_data_size") : nullptr;
      if (binary_size) {
        std::uint64_t size = {};
        if (!as_uint64(*binary_size, size, st))
          return fail(detail::unable_to_parse(st, "binary_data_size"));
        if (size > body.size() - next_binary)
          return fail({errc::internal, "output '" + io.name + "' declares " +
                                           std::to_string(size) + " bytes but only " +
                                           std::to_string(body.size() - next_binary) +
                                           " remain in the response"});
        io.encoding = tensor_encoding::binary;
        io.data = tensor_data::view(body.substr(next_binary, size));
        next_binary += size;
      } else if (data) {
        shape_result count = element_count(io.shape);
        if (!count)
          return fail({errc::internal, "invalid shape " + to_string(io.shape) +
                                           " for output '" + io.name + "'"});
        std::string decoded;
        status ds = decode_json_tensor_data(*data, io.datatype, count.value, io.name, decoded);
        if (ds) return fail(std::move(ds));
        io.encoding = tensor_encoding::json;
        io.data = tensor_data::own(std::move(decoded));
      } else {
        io.encoding = tensor_encoding::shared_memory;
      }
      r.outputs.push_back(std::move(io));
    }
  }
  if (next_binary != body.size())
    return fail({errc::internal, std::to_string(body.size() - next_binary) +
                                     " bytes of the response belong to no output"});
  return r;
}

INFERWIRE_DECL infer_response decode_infer_response(std::string_view body,
                                            std::optional<std::size_t> header_length) {
  status st;
  auto r = decode_infer_response(body, header_length, st);
  throw_if(st);
  return r;
}

INFERWIRE_DECL status encode_infer_request(const infer_request& q, encoded_body& out) {
  return encode_infer_request(q, q.parameters, out);
}

INFERWIRE_DECL status encode_infer_request(const infer_request& q, const parameter_map& parameters,
                                   encoded_body& out) {
  std::string& h = out.header;
  h.clear();
  out.segments.clear();
  if (q.raw_binary) {
    if (!q.raw_input.empty()) out.segments.push_back(q.raw_input.bytes());
    return {};
  }
  h.reserve(96 + 128 * q.inputs.size() + 64 * q.outputs.size());
  out.segments.reserve(q.inputs.size());
  using detail::append_literal;
  h += '{';
  if (!q.id.empty()) {
    append_literal(h, "\"id\":");
    append_json_string(h, q.id);
    h += ',';
  }
  if (!parameters.empty()) {
    append_literal(h, "\"parameters\":{");
    detail::append_parameter_members(h, parameters, false);
    append_literal(h, "},");
  }
  append_literal(h, "\"inputs\":[");
  for (std::size_t i = 0; i < q.inputs.size(); ++i) {
    const infer_input& in = q.inputs[i];
    if (i) h += ',';
    append_literal(h, "{\"name\":");
    append_json_string(h, in.name);
    append_literal(h, ",\"shape\":");
    detail::append_shape(h, in.shape);
    append_literal(h, ",\"datatype\":");
    append_json_string(h, wire_name(in.datatype));
    const bool extra = in.encoding != tensor_encoding::json || !in.parameters.empty();
    if (extra) {
      append_literal(h, ",\"parameters\":{");
      bool comma = detail::append_parameter_members(h, in.parameters, false);
      if (in.encoding == tensor_encoding::binary) {
        if (comma) h += ',';
        append_literal(h, "\"binary_data_size\":");
        detail::append_integer(h, in.data.size());
        if (!in.data.empty()) out.segments.push_back(in.data.bytes());
      } else if (in.encoding == tensor_encoding::shared_memory) {
        if (!in.shm)
          return {errc::invalid_arg,
                  "input '" + in.name + "' uses shared memory but names no region"};
        if (comma) h += ',';
        append_literal(h, "\"shared_memory_region\":");
        append_json_string(h, in.shm->region);
        append_literal(h, ",\"shared_memory_byte_size\":");
        detail::append_integer(h, in.shm->byte_size);
        if (in.shm->offset != 0) {
          append_literal(h, ",\"shared_memory_offset\":");
          detail::append_integer(h, in.shm->offset);
        }
      }
      h += '}';
    }
    if (in.encoding == tensor_encoding::json) {
      if (in.datatype == data_type::fp16 || in.datatype == data_type::bf16)
        return {errc::invalid_arg, "input '" + in.name + "' is " +
                                       std::string(wire_name(in.datatype)) +
                                       ", which cannot travel as JSON; use binary data"};
      shape_result count = element_count(in.shape);
      if (!count)
        return {errc::invalid_arg,
                "invalid shape " + to_string(in.shape) + " for input '" + in.name + "'"};
      append_literal(h, ",\"data\":");
      status st = append_json_tensor_data(h, in.datatype, in.data.bytes(), count.value, in.name);
      if (st)
        return {errc::invalid_arg, "the data of input '" + in.name +
                                       "' does not match its shape " + to_string(in.shape)};
    }
    h += '}';
  }
  h += ']';
  if (!q.outputs.empty()) {
    append_literal(h, ",\"outputs\":[");
    for (std::size_t i = 0; i < q.outputs.size(); ++i) {
      const requested_output& o = q.outputs[i];
      if (i) h += ',';
      append_literal(h, "{\"name\":");
      append_json_string(h, o.name);
      parameter_map p = o.parameters;
      if (o.binary_data) p.set("binary_data", *o.binary_data);
      if (o.classification) p.set("classification", o.classification);
      if (o.shm) {
        p.set("shared_memory_region", o.shm->region);
        p.set("shared_memory_byte_size", o.shm->byte_size);
        if (o.shm->offset) p.set("shared_memory_offset", o.shm->offset);
      }
      if (!p.empty()) detail::append_parameters_object(h, p);
      h += '}';
    }
    h += ']';
  }
  h += '}';
  return {};
}

INFERWIRE_DECL encoded_body encode_infer_request(const infer_request& request) {
  encoded_body b;
  throw_if(encode_infer_request(request, b));
  return b;
}

INFERWIRE_DECL std::string error_body(std::string_view message) {
  std::string body = "{\"error\":";
  append_json_string(body, message);
  body += '}';
  return body;
}

INFERWIRE_DECL std::string parse_error_body(std::string_view body) {
  status st;
  auto doc = parse_json(body, st);
  if (!st)
    if (const auto* o = doc.if_object())
      if (const auto* e = o->if_contains("error"); e && e->is_string())
        return std::string(e->get_string());
  return std::string(body);
}

}  // namespace inferwire::v2

#endif
