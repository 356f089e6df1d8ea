// SPDX-License-Identifier: Apache-2.0
// v2::detail::header_memo: a request header decoded once is recalled for the next body with the
// same header bytes, equal to the full decoder's result and with views into that body.
#include <inferwire/v2/binary.hpp>
#include <inferwire/v2/detail/header_memo.hpp>

#include <catch2/catch.hpp>

#include <cstdint>
#include <string>
#include <vector>

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

TEST_CASE("header_memo: recalled into a used request it equals the full decoder's result", "[v2]") {
  request_memo memo;
  const std::string first = body_of(1, 2, 3);
  memo.remember(std::string_view(first).substr(0, header.size()), decode(first));
  // A request of another layout, with owned data and parameters, as a recycled one could be.
  const std::string json =
      R"({"id":"x","parameters":{"priority":1},"inputs":[{"name":"A","shape":[1],"datatype":"FP32","data":[1.5]},)"
      R"({"name":"B","shape":[1],"datatype":"FP32","data":[2.5]},{"name":"C","shape":[1],"datatype":"FP32","data":[3]},)"
      R"({"name":"D","shape":[1],"datatype":"FP32","data":[4]}]})";
  v2::infer_request used = v2::decode_infer_request(json, json.size(), "m");
  const std::string second = body_of(4, 5, 6);
  REQUIRE(memo.recall(second, header.size(), used));
  CHECK(used == decode(second));
  CHECK(used.inputs[2].as<std::int32_t>()[0] == 6);
  // And again into the result (the same layout: its storage is reused).
  const std::string third = body_of(7, 8, 9);
  REQUIRE(memo.recall(third, header.size(), used));
  CHECK(used == decode(third));
  CHECK_FALSE(memo.recall(third + "x", header.size(), used));
}

namespace {

v2::infer_output output(std::string name, std::string_view data, v2::tensor_encoding e) {
  v2::infer_output o;
  o.name = std::move(name);
  o.datatype = inferwire::data_type::int32;
  o.shape = {1, static_cast<std::int64_t>(data.size() / 4)};
  o.encoding = e;
  o.data = v2::tensor_data::view(data);
  return o;
}

bool same(const v2::encoded_body& a, const v2::encoded_body& b) {
  if (a.header != b.header || a.segments.size() != b.segments.size()) return false;
  for (std::size_t i = 0; i < a.segments.size(); ++i)
    if (a.segments[i].data() != b.segments[i].data() || a.segments[i].size() != b.segments[i].size()) return false;
  return true;
}

}  // namespace

TEST_CASE("response_header_memo: a response that differs only in data bytes takes the header remembered", "[v2]") {
  const std::string d1(8, 'a'), d2(8, 'b'), d3(4, 'c');
  v2::infer_response r;
  r.model_name = "simple";
  r.model_version = "1";
  r.outputs.push_back(output("OUTPUT0", d1, v2::tensor_encoding::binary));
  r.outputs.push_back(output("OUTPUT1", d3, v2::tensor_encoding::binary));
  r.outputs.push_back(output("OUTPUT2", "", v2::tensor_encoding::shared_memory));
  r.outputs.back().parameters.set("shared_memory_region", std::string("out"));
  v2::detail::response_header_memo memo;
  v2::encoded_body out;
  CHECK_FALSE(memo.recall(r, out));  // nothing remembered yet
  memo.remember(r, v2::encode_infer_response(r).header);
  r.outputs[0].data = v2::tensor_data::view(d2);
  REQUIRE(memo.recall(r, out));
  CHECK(same(out, v2::encode_infer_response(r)));
  CHECK(out.segments[0].data() == reinterpret_cast<const std::byte*>(d2.data()));

  // Any change the header shows is not recalled; whatever is recalled is the encoder's.
  const auto base = r;
  const std::vector<void (*)(v2::infer_response&)> changes = {
      [](v2::infer_response& x) { x.id = "7"; },
      [](v2::infer_response& x) { x.model_name = "simplf"; },
      [](v2::infer_response& x) { x.model_version = "2"; },
      [](v2::infer_response& x) { x.parameters.set("sequence_id", std::uint64_t{3}); },
      [](v2::infer_response& x) { x.outputs[1].name = "OUTPUT9"; },
      [](v2::infer_response& x) { x.outputs[1].datatype = inferwire::data_type::fp32; },
      [](v2::infer_response& x) { x.outputs[1].shape = {1, 1, 1}; },
      [](v2::infer_response& x) { x.outputs[1].encoding = v2::tensor_encoding::shared_memory; },
      [](v2::infer_response& x) { x.outputs[1].parameters.set("classification", true); },
      [](v2::infer_response& x) { x.outputs[1].data = v2::tensor_data::view(std::string_view("zz")); },
      [](v2::infer_response& x) { x.outputs[2].parameters.set("shared_memory_region", std::string("ou")); },
      [](v2::infer_response& x) { x.outputs.pop_back(); },
      [](v2::infer_response& x) { x.outputs.push_back(x.outputs[0]); },
  };
  for (std::size_t i = 0; i < changes.size(); ++i) {
    INFO("change " << i);
    auto changed = base;
    changes[i](changed);
    v2::encoded_body o;
    CHECK_FALSE(memo.recall(changed, o));
  }
}

TEST_CASE("response_header_memo: outputs in JSON without their places, and long headers, are not remembered", "[v2]") {
  const std::string d(8, 'a');
  v2::infer_response r;
  r.model_name = "m";
  r.model_version = "1";
  r.outputs.push_back(output("OUT", d, v2::tensor_encoding::json));
  v2::detail::response_header_memo memo;
  v2::encoded_body out;
  memo.remember(r, v2::encode_infer_response(r).header);
  CHECK_FALSE(memo.recall(r, out));
  r.outputs[0].encoding = v2::tensor_encoding::binary;
  memo.remember(r, std::string(v2::detail::response_header_memo::max_header + 1, ' '));
  CHECK_FALSE(memo.recall(r, out));
  memo.remember(r, v2::encode_infer_response(r).header);
  CHECK(memo.recall(r, out));
}

TEST_CASE("response_header_memo: outputs in JSON have their data written anew in the header remembered", "[v2]") {
  auto ints = [](std::vector<std::int32_t> v) {
    return std::string(reinterpret_cast<const char*>(v.data()), v.size() * sizeof(std::int32_t));
  };
  const std::string a = ints({1, 2, 3, 4}), b = ints({-2147483647 - 1, 0, 2147483647, 17}), bin(8, 'x');
  v2::infer_response r;
  r.id = "7";
  r.model_name = "simple";
  r.model_version = "1";
  r.outputs.push_back(output("OUTPUT0", a, v2::tensor_encoding::json));
  r.outputs.push_back(output("OUTPUT1", bin, v2::tensor_encoding::binary));
  r.outputs.push_back(output("OUTPUT2", a, v2::tensor_encoding::json));
  r.outputs[0].shape = r.outputs[2].shape = {1, 4};
  r.outputs[0].datatype = r.outputs[2].datatype = inferwire::data_type::int32;
  r.outputs[2].parameters.set("classification", false);
  v2::detail::response_header_memo memo;
  v2::encoded_body first;
  std::vector<std::size_t> json_data;
  REQUIRE_FALSE(v2::encode_infer_response(r, first, &json_data));
  REQUIRE(json_data.size() == 4);
  CHECK(first.header.substr(json_data[0], json_data[1] - json_data[0]) == "[1,2,3,4]");
  memo.remember(r, first.header, json_data);
  for (const auto& [x, y] : {std::pair{b, a}, std::pair{a, b}, std::pair{b, b}, std::pair{a, a}}) {
    r.outputs[0].data = v2::tensor_data::view(x);
    r.outputs[2].data = v2::tensor_data::view(y);
    v2::encoded_body out;
    REQUIRE(memo.recall(r, out));
    CHECK(same(out, v2::encode_infer_response(r)));
  }
  // Floating types, whose text changes length with the values.
  r.outputs[0].datatype = inferwire::data_type::fp32;
  REQUIRE_FALSE(v2::encode_infer_response(r, first, &json_data));
  memo.remember(r, first.header, json_data);
  const std::vector<float> f = {0.1f, -1e30f, 3.0f, 1.0f / 3};
  const std::string fb(reinterpret_cast<const char*>(f.data()), 16);
  r.outputs[0].data = v2::tensor_data::view(fb);
  v2::encoded_body out;
  REQUIRE(memo.recall(r, out));
  CHECK(same(out, v2::encode_infer_response(r)));
  // What the header shows besides the data is still compared; BYTES the encoder refuses go
  // back to it for its error.
  auto other = r;
  other.outputs[2].name = "OUTPUT3";
  CHECK_FALSE(memo.recall(other, out));
  v2::infer_response words;
  words.model_name = "m";
  words.model_version = "1";
  std::string word;
  inferwire::append_bytes_element(word, "ok");
  words.outputs.push_back(output("W", word, v2::tensor_encoding::json));
  words.outputs[0].datatype = inferwire::data_type::bytes;
  words.outputs[0].shape = {1};
  REQUIRE_FALSE(v2::encode_infer_response(words, first, &json_data));
  memo.remember(words, first.header, json_data);
  std::string bad;
  inferwire::append_bytes_element(bad, "\xff\xfe");
  words.outputs[0].data = v2::tensor_data::view(bad);
  CHECK_FALSE(memo.recall(words, out));
  CHECK(v2::encode_infer_response(words, first));
}
