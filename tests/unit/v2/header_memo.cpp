// SPDX-License-Identifier: Apache-2.0
// v2::detail::header_memo: a request header decoded once is recalled for the next body with the
// same header bytes, equal to the full decoder's result and with views into that body.
#include <inferwire/v2/binary.hpp>
#include <inferwire/v2/detail/header_memo.hpp>

#include <catch2/catch.hpp>

#include <cstdint>
#include <string>

namespace v2 = inferwire::v2;

namespace {

using request_memo = v2::detail::header_memo<v2::infer_request, &v2::infer_request::inputs>;

const std::string header =
    R"({"inputs":[{"name":"INPUT0","shape":[1,2],"datatype":"INT32","parameters":{"binary_data_size":8}},)"
    R"({"name":"INPUT1","shape":[1,2],"datatype":"INT32","parameters":{"shared_memory_region":"r",)"
    R"("shared_memory_byte_size":8}},{"name":"INPUT2","shape":[1,1],"datatype":"INT32",)"
    R"("parameters":{"binary_data_size":4}}],"outputs":[{"name":"OUTPUT0"}]})";

std::string body_of(std::int32_t a, std::int32_t b, std::int32_t c) {
  std::string s = header;
  for (std::int32_t v : {a, b, c}) s.append(reinterpret_cast<const char*>(&v), sizeof v);
  return s;
}

v2::infer_request decode(const std::string& body) {
  return v2::decode_infer_request(body, header.size(), "m");
}

}  // namespace

TEST_CASE("header_memo: the same header recalls the full decoder's request, in the new body", "[v2]") {
  request_memo memo;
  const std::string first = body_of(1, 2, 3);
  CHECK_FALSE(memo.recall(first, header.size()));  // nothing remembered yet
  memo.remember(std::string_view(first).substr(0, header.size()), decode(first));
  const std::string second = body_of(7, 8, 9);
  const auto known = memo.recall(second, header.size());
  REQUIRE(known);
  CHECK(*known == decode(second));
  CHECK(known->inputs[0].as<std::int32_t>()[1] == 8);
  CHECK(known->inputs[2].as<std::int32_t>()[0] == 9);
  CHECK(reinterpret_cast<const char*>(known->inputs[2].data.bytes().data()) == second.data() + header.size() + 8);
  REQUIRE(known->inputs[1].shm);
  CHECK(known->inputs[1].shm->region == "r");
  CHECK(known->outputs.size() == 1);
}

TEST_CASE("header_memo: another header or another body length is not recalled", "[v2]") {
  request_memo memo;
  const std::string body = body_of(1, 2, 3);
  memo.remember(std::string_view(body).substr(0, header.size()), decode(body));
  CHECK_FALSE(memo.recall(body + "x", header.size()));
  CHECK_FALSE(memo.recall(body.substr(0, body.size() - 1), header.size()));
  std::string other = body;
  other[header.find("INPUT0") + 5] = '9';  // INPUT9: same length, other bytes
  CHECK_FALSE(memo.recall(other, header.size()));
  CHECK_FALSE(memo.recall(body, 0));  // a raw body has no header
}

TEST_CASE("header_memo: inputs in JSON, and long headers, are not remembered", "[v2]") {
  request_memo memo;
  const std::string json = R"({"inputs":[{"name":"X","shape":[2],"datatype":"INT32","data":[1,2]}]})";
  memo.remember(json, v2::decode_infer_request(json, json.size(), "m"));
  CHECK_FALSE(memo.recall(json, json.size()));
  const std::string body = body_of(1, 2, 3);
  const auto decoded = decode(body);
  memo.remember(std::string(request_memo::max_header + 1, ' '), decoded);
  CHECK_FALSE(memo.recall(body, header.size()));
}
