// SPDX-License-Identifier: Apache-2.0
// Request builders shared by the integration tests.
#pragma once

#include "harness.hpp"

#include <inferwire/v2/binary.hpp>

#include <catch2/catch.hpp>

#include <numeric>

namespace iwtest {

inline std::string json_array(const std::vector<int>& v) {
  std::string s = "[";
  for (std::size_t i = 0; i < v.size(); ++i) s += (i ? "," : "") + std::to_string(v[i]);
  return s + "]";
}

inline std::vector<int> iota16() {
  std::vector<int> v(16);
  std::iota(v.begin(), v.end(), 0);
  return v;
}

/// The `simple` request of the examples: INPUT0 = 0..15, INPUT1 = 1s, as JSON.
inline std::string simple_json(std::string extra = "") {
  return R"({"inputs":[{"name":"INPUT0","datatype":"INT32","shape":[1,16],"data":)" +
         json_array(iota16()) +
         R"(},{"name":"INPUT1","datatype":"INT32","shape":[1,16],"data":)" +
         json_array(std::vector<int>(16, 1)) + "}]" + extra + "}";
}

/// A binary-encoded request built with the library's own request codec.
inline std::pair<std::string, std::size_t> encode(const inferwire::v2::infer_request& r) {
  auto body = inferwire::v2::encode_infer_request(r);
  return {body.flatten(), body.header_length()};
}

inline inferwire::v2::infer_input int32_input(std::string name, const std::vector<std::int32_t>& v,
                                              inferwire::shape_t shape) {
  inferwire::v2::infer_input in;
  in.name = std::move(name);
  in.datatype = inferwire::data_type::int32;
  in.shape = std::move(shape);
  in.encoding = inferwire::v2::tensor_encoding::binary;
  in.data = inferwire::v2::tensor_data::own(le_bytes(v));
  return in;
}

inline reply post_binary(std::string_view target, const inferwire::v2::infer_request& r,
                         std::vector<std::pair<std::string, std::string>> headers = {}) {
  auto [body, hl] = encode(r);
  headers.emplace_back("Inference-Header-Content-Length", std::to_string(hl));
  return post(target, body, headers);
}

inline inferwire::v2::infer_response decode(const reply& r) {
  std::optional<std::size_t> hl;
  if (r.has("inference-header-content-length"))
    hl = std::stoul(r.header("inference-header-content-length"));
  return inferwire::v2::decode_infer_response(r.body, hl);
}

}  // namespace iwtest
