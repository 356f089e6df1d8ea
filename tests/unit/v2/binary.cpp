// SPDX-License-Identifier: Apache-2.0
#include <inferwire/v2/binary.hpp>

#include <catch2/catch.hpp>

#include <cstring>
#include <numeric>

using namespace inferwire;
using namespace inferwire::v2;
using namespace std::string_literals;

namespace {

std::string le32(std::int32_t v) {
  std::string s(4, '\0');
  std::memcpy(s.data(), &v, 4);
  return s;
}

// A request body: JSON header followed by `binary`; returns the body and sets header length.
std::string body_of(std::string_view header, std::string_view binary, std::size_t& hl) {
  hl = header.size();
  return std::string(header) + std::string(binary);
}

status decode_error(std::string_view header, std::string_view binary = {},
                    const codec_limits& limits = {}) {
  std::size_t hl = 0;
  std::string body = body_of(header, binary, hl);
  status st;
  decode_infer_request(body, hl, "simple", st, limits);
  return st;
}

const std::string simple_header =
    R"({"id":"42","inputs":[)"
    R"({"name":"INPUT0","shape":[1,16],"datatype":"INT32","parameters":{"binary_data_size":64}},)"
    R"({"name":"INPUT1","shape":[1,16],"datatype":"INT32","parameters":{"binary_data_size":64}}],)"
    R"("outputs":[{"name":"OUTPUT0","parameters":{"binary_data":true}},{"name":"OUTPUT1"}]})";

std::string simple_binary() {
  std::string b;
  for (int i = 0; i < 16; ++i) b += le32(i);
  for (int i = 0; i < 16; ++i) b += le32(1);
  return b;
}

}  // namespace

TEST_CASE("binary: the simple request decodes into views of the body", "[v2][binary]") {
  std::size_t hl = 0;
  std::string body = body_of(simple_header, simple_binary(), hl);
  infer_request q = decode_infer_request(body, hl, "simple");
  CHECK(q.id == "42");
  REQUIRE(q.inputs.size() == 2);
  const infer_input& in0 = q.inputs[0];
  CHECK(in0.name == "INPUT0");
  CHECK(in0.datatype == data_type::int32);
  CHECK(in0.shape == shape_t{1, 16});
  CHECK(in0.encoding == tensor_encoding::binary);
  CHECK_FALSE(in0.data.owns());
  // Zero copy: the input's bytes are the body's bytes.
  CHECK(reinterpret_cast<const char*>(in0.data.bytes().data()) == body.data() + hl);
  CHECK(in0.as<std::int32_t>().at(15) == 15);
  CHECK(q.inputs[1].as<std::int32_t>().at(0) == 1);
  REQUIRE(q.outputs.size() == 2);
  CHECK(q.outputs[0].binary_data == true);
  CHECK_FALSE(q.outputs[1].binary_data);
  CHECK(output_encoding(q, "OUTPUT0") == tensor_encoding::binary);
  CHECK(output_encoding(q, "OUTPUT1") == tensor_encoding::json);
}

TEST_CASE("binary: request encode is the golden simple request", "[v2][binary]") {
  std::vector<std::int32_t> a(16), b(16, 1);
  std::iota(a.begin(), a.end(), 0);
  infer_request q;
  q.id = "42";
  for (auto [name, data] : {std::pair{"INPUT0", &a}, std::pair{"INPUT1", &b}}) {
    infer_input in;
    in.name = name;
    in.datatype = data_type::int32;
    in.shape = {1, 16};
    in.data = tensor_data::view(std::as_bytes(std::span(*data)));
    q.inputs.push_back(in);
  }
  requested_output o0;
  o0.name = "OUTPUT0";
  o0.binary_data = true;
  requested_output o1;
  o1.name = "OUTPUT1";
  q.outputs = {o0, o1};

  encoded_body body = encode_infer_request(q);
  CHECK(body.header == simple_header);
  REQUIRE(body.segments.size() == 2);
  CHECK(body.segments[0].data() == reinterpret_cast<const std::byte*>(a.data()));  // no copy
  CHECK(body.binary_size() == 128);
  CHECK(body.flatten() == simple_header + simple_binary());
  CHECK(decode_infer_request(body.flatten(), body.header_length(), "simple") == [&] {
    infer_request expect = q;
    return expect;
  }());
}

TEST_CASE("binary: mixed JSON and binary inputs and outputs (v2-protocol 10.3)", "[v2][binary]") {
  const std::string header =
      R"({"inputs":[{"name":"INPUT0","shape":[1,16],"datatype":"INT32","data":[[0,1,2,3,4,5,6,7,8,9,10,11,12,13,14,15]]},)"
      R"({"name":"INPUT1","shape":[1,16],"datatype":"INT32","parameters":{"binary_data_size":64}}],)"
      R"("parameters":{"binary_data_output":true},"outputs":[{"name":"OUTPUT0","parameters":{"binary_data":true}},{"name":"OUTPUT1"}]})";
  std::string ones;
  for (int i = 0; i < 16; ++i) ones += le32(1);
  std::size_t hl = 0;
  std::string body = body_of(header, ones, hl);
  infer_request q = decode_infer_request(body, hl, "simple");
  CHECK(q.inputs[0].encoding == tensor_encoding::json);
  CHECK(q.inputs[0].data.owns());
  CHECK(q.inputs[0].as<std::int32_t>().at(15) == 15);
  CHECK(q.inputs[1].encoding == tensor_encoding::binary);
  CHECK(q.binary_data_output());
  // A listed output without binary_data is JSON even with binary_data_output (section 4.1).
  CHECK(output_encoding(q, "OUTPUT1") == tensor_encoding::json);
  CHECK(output_encoding(q, "OUTPUT0") == tensor_encoding::binary);

  infer_request unlisted;
  unlisted.parameters.set("binary_data_output", true);
  CHECK(output_encoding(unlisted, "OUTPUT1") == tensor_encoding::binary);
  unlisted.parameters.set("binary_data_output", false);
  CHECK(output_encoding(unlisted, "OUTPUT1") == tensor_encoding::json);
}

TEST_CASE("binary: response encode and decode round trip", "[v2][binary]") {
  std::vector<std::int32_t> sum(16), diff(16);
  for (int i = 0; i < 16; ++i) {
    sum[static_cast<std::size_t>(i)] = i + 1;
    diff[static_cast<std::size_t>(i)] = i - 1;
  }
  infer_response r;
  r.id = "42";
  r.model_name = "simple";
  r.model_version = "1";
  infer_output o0{"OUTPUT0", data_type::int32, {1, 16}, tensor_encoding::binary,
                  tensor_data::view(std::as_bytes(std::span(sum))), {}};
  infer_output o1{"OUTPUT1", data_type::int32, {1, 16}, tensor_encoding::json,
                  tensor_data::view(std::as_bytes(std::span(diff))), {}};
  infer_output o2{"OUTPUT2", data_type::fp32, {2}, tensor_encoding::shared_memory, {}, {}};
  r.outputs = {o0, o1, o2};

  encoded_body body = encode_infer_response(r);
  CHECK(body.header ==
        R"({"id":"42","model_name":"simple","model_version":"1","outputs":[)"
        R"({"name":"OUTPUT0","datatype":"INT32","shape":[1,16],"parameters":{"binary_data_size":64}},)"
        R"({"name":"OUTPUT1","datatype":"INT32","shape":[1,16],"data":[-1,0,1,2,3,4,5,6,7,8,9,10,11,12,13,14]},)"
        R"({"name":"OUTPUT2","datatype":"FP32","shape":[2]}]})");
  CHECK(body.has_binary_data());

  std::string wire = body.flatten();
  infer_response back = decode_infer_response(wire, body.header_length());
  CHECK(back.id == "42");
  CHECK(back.model_version == "1");
  REQUIRE(back.outputs.size() == 3);
  CHECK(back.outputs[0].as<std::int32_t>().to_vector() == sum);
  CHECK(back.outputs[1].as<std::int32_t>().to_vector() == diff);
  CHECK(back.outputs[2].encoding == tensor_encoding::shared_memory);
  CHECK(back.outputs[2].data.empty());
}

TEST_CASE("binary: empty binary outputs need no header length (quirk of 4.1)", "[v2][binary]") {
  infer_response r;
  r.model_name = "m";
  r.model_version = "1";
  r.outputs.push_back({"O", data_type::int32, {0}, tensor_encoding::binary, {}, {}});
  encoded_body body = encode_infer_response(r);
  CHECK_FALSE(body.has_binary_data());
  CHECK(body.header.find(R"("parameters":{"binary_data_size":0})") != std::string::npos);
  CHECK(body.header.find(R"("id")") == std::string::npos);  // empty id is omitted
  CHECK(decode_infer_response(body.flatten(), std::nullopt).outputs[0].data.empty());
}

TEST_CASE("binary: BYTES round trip with embedded NULs, binary and JSON", "[v2][binary]") {
  const std::vector<std::string> elements{"he\0llo"s, "\x00\x01\x02\x03"s, ""};
  std::string serialized = encode_bytes(elements);
  for (auto enc : {tensor_encoding::binary, tensor_encoding::json}) {
    infer_request q;
    q.inputs.push_back({"INPUT0", data_type::bytes, {1, 3}, enc, tensor_data::view(serialized), {}, {}});
    encoded_body body = encode_infer_request(q);
    std::string wire = body.flatten();
    infer_request back = decode_infer_request(wire, body.header_length(), "simple_identity");
    CHECK(back.inputs[0].data.str() == serialized);

    infer_response r;
    r.model_name = "simple_identity";
    r.model_version = "1";
    r.outputs.push_back({"OUTPUT0", data_type::bytes, {1, 3}, enc, tensor_data::view(serialized), {}});
    encoded_body rb = encode_infer_response(r);
    std::string rwire = rb.flatten();
    CHECK(decode_infer_response(rwire, rb.header_length()).outputs[0].data.str() == serialized);
  }
}

TEST_CASE("binary: raw binary request (header length 0)", "[v2][binary]") {
  std::string data = simple_binary().substr(0, 64);
  infer_request q = decode_infer_request(data, 0, "m");
  CHECK(q.raw_binary);
  CHECK(q.inputs.empty());
  CHECK(q.raw_input.size() == 64);

  std::vector<tensor_metadata> one{{"IN", data_type::int32, {-1}}};
  REQUIRE(deduce_raw_input(q, "m", one, true).is_ok());
  CHECK(q.inputs[0].shape == shape_t{1, 16});
  CHECK(q.inputs[0].as<std::int32_t>().at(3) == 3);
  CHECK(output_encoding(q, "anything") == tensor_encoding::binary);

  infer_request s = decode_infer_request("hello", 0, "m");
  std::vector<tensor_metadata> str{{"TEXT", data_type::bytes, {1}}};
  REQUIRE(deduce_raw_input(s, "m", str, false).is_ok());
  CHECK(s.inputs[0].shape == shape_t{1});
  CHECK(s.inputs[0].data.str() == "\x05\x00\x00\x00hello"s);

  // The quirk of step 4: an empty body without IHCL is a raw request.
  status st;
  CHECK(parse_header_length(std::nullopt, 0, st) == 0);
  CHECK(decode_infer_request("", 0, "m").raw_binary);

  // Encoding a raw request gives header length 0.
  encoded_body raw = encode_infer_request(q);
  CHECK(raw.header_length() == 0);
  CHECK(raw.flatten() == data);
}

TEST_CASE("binary: raw binary errors", "[v2][binary]") {
  infer_request q = decode_infer_request("abcd", 0, "m");
  std::vector<tensor_metadata> two{{"A", data_type::int32, {1}}, {"B", data_type::int32, {1}}};
  CHECK(deduce_raw_input(q, "m", two, false).message() ==
        "Raw request must only have 1 input (found 1) to be deduced but got 2 inputs in 'm' "
        "model configuration");
  std::vector<tensor_metadata> vars{{"A", data_type::int32, {-1, -1}}};
  CHECK(deduce_raw_input(q, "m", vars, false).message() ==
        "The shape of the raw input 'A' can not be deduced because there are more than one "
        "variable-sized dimension");
  std::vector<tensor_metadata> str{{"S", data_type::bytes, {2}}};
  CHECK(deduce_raw_input(q, "m", str, false).message() ==
        "For BYTE datatype raw input 'S', the model must have input shape [1]");
  status st;
  decode_infer_request(std::string(65, 'x'), 0, "m", st, codec_limits{64});
  CHECK(st.http_status() == 400);
  CHECK(st.message() == "Raw input has a byte_size (65 bytes) that exceeds the maximum allowed "
                        "value of 64 bytes. Use --http-max-input-size to increase the limit.");
}

TEST_CASE("binary: Inference-Header-Content-Length parsing (step 4)", "[v2][binary]") {
  status st;
  CHECK(parse_header_length("120", 200, st) == 120);
  CHECK(parse_header_length("200", 200, st) == 200);  // equal to the content length is fine
  CHECK(st.is_ok());
  parse_header_length("abc", 200, st);
  CHECK(st.http_status() == 400);
  CHECK(st.message() == "Unable to parse Inference-Header-Content-Length, got: abc");
  st = {};
  parse_header_length("4294967296", 200, st);
  CHECK(st.message() == "Unable to parse Inference-Header-Content-Length, value is out of range "
                        "[ -2147483648, 2147483647 ], got: 4294967296");
  st = {};
  parse_header_length("99999999999999999999999", 200, st);
  CHECK(st.message().find("value is out of range") != std::string::npos);
  st = {};
  parse_header_length("-1", 200, st);
  CHECK(st.message() == "inference header size should be in range (0, 200), got: -1");
  st = {};
  parse_header_length("201", 200, st);
  CHECK(st.message() == "inference header size should be in range (0, 200), got: 201");
  st = {};
  CHECK(parse_content_length("512", st) == 512);
  parse_content_length("12x", st);
  CHECK(st.message() == "Unable to parse Content-Length, got: 12x");
}

TEST_CASE("binary: header size limits and JSON errors", "[v2][binary]") {
  status big = decode_error(simple_header, simple_binary(), codec_limits{100});
  CHECK(big.http_status() == 400);
  CHECK(big.message() == "request JSON size of " + std::to_string(simple_header.size()) +
                             " bytes exceeds the maximum allowed input size of 100 bytes. Use "
                             "--http-max-input-size to increase the limit.");
  CHECK(decode_error("{\"inputs\":[").http_status() == 500);
  CHECK(decode_error("[1]").message() == "attempt to access JSON non-object as object");
  CHECK(decode_error(std::string(120, '[') + std::string(120, ']')).message() ==
        "JSON nesting depth exceeds maximum allowed limit (100)");
  // A header length that cuts the JSON short is a parse error, not a crash.
  std::string body = simple_header + simple_binary();
  status st;
  decode_infer_request(body, 10, "simple", st);
  CHECK(st.http_status() == 500);
  decode_infer_request(body, body.size() + 1, "simple", st);
  CHECK(st.http_status() == 400);
}

TEST_CASE("binary: request-level field and parameter errors (steps 5 and 6)", "[v2][binary]") {
  CHECK(decode_error(R"({"id":5,"inputs":[]})").message() ==
        "Unable to parse 'id': attempt to access JSON non-string as string");
  CHECK(decode_error(R"({})").message() ==
        "Unable to parse 'inputs': attempt to access non-existing object member 'inputs'");
  CHECK(decode_error(R"({"inputs":{}})").message() ==
        "Unable to parse 'inputs': attempt to access JSON non-array as array");
  CHECK(decode_error(R"({"inputs":[],"parameters":{"sequence_id":-1}})").message() ==
        "Unable to parse 'sequence_id': attempt to access JSON non-unsigned-integer as unsigned-integer");
  CHECK(decode_error(R"({"inputs":[],"parameters":{"sequence_start":1}})").message() ==
        "Unable to parse 'sequence_start': attempt to access JSON non-boolean as boolean");
  CHECK(decode_error(R"({"inputs":[],"parameters":{"priority":"high"}})").http_status() == 500);
  status reserved = decode_error(R"({"inputs":[],"parameters":{"triton_x":1}})");
  CHECK(reserved.http_status() == 400);
  CHECK(reserved.message() == "parameter keys starting with 'triton_' are reserved for Triton "
                              "usage and should not be specified.");
  for (auto bad : {"{}", "[]", "null"}) {
    status st = decode_error(R"({"inputs":[],"parameters":{"custom":)" + std::string(bad) + "}}");
    CHECK(st.http_status() == 400);
    CHECK(st.message() ==
          "parameter 'custom' has invalid type. It should be either 'int', 'bool', or 'string'.");
  }
  std::size_t hl = 0;
  std::string body = body_of(
      R"({"inputs":[],"parameters":{"sequence_id":"SEQ-3","k":"v","n":-2,"b":true,"d":0.5,"big":18446744073709551615,"seq2":1}})",
      "", hl);
  infer_request q = decode_infer_request(body, hl, "m");
  CHECK(q.parameters.get<std::string>("sequence_id") == "SEQ-3");
  CHECK(q.parameters.get<std::int64_t>("n") == -2);
  CHECK(q.parameters.get<bool>("b") == true);
  CHECK(q.parameters.get<double>("d") == 0.5);
  CHECK(q.parameters.get<double>("big") == 18446744073709551615.0);  // above INT64_MAX: double
  body = body_of(R"({"inputs":[],"parameters":{"sequence_id":18446744073709551615}})", "", hl);
  CHECK(decode_infer_request(body, hl, "m").parameters.get<std::uint64_t>("sequence_id") ==
        18446744073709551615u);
}

TEST_CASE("binary: per-input errors (step 7)", "[v2][binary]") {
  CHECK(decode_error(R"({"inputs":[{"name":"INPUT0","shape":[1],"datatype":"INT32"}]})").message() ==
        "Input must set only one of the following fields: 'data', 'binary_data_size' in "
        "'parameters', 'shared_memory_region' in 'parameters'. But no field is set");
  CHECK(decode_error(
            R"({"inputs":[{"name":"I","shape":[1],"datatype":"INT32","data":[1],"parameters":{"binary_data_size":4}}]})",
            le32(1))
            .message() ==
        "Input must set only one of the following fields: 'data', 'binary_data_size' in "
        "'parameters', 'shared_memory_region' in 'parameters'. But set 'data' 'binary_data_size'");
  CHECK(decode_error(R"({"inputs":[{"shape":[1],"datatype":"INT32","data":[1]}]})").message() ==
        "Unable to parse 'name': attempt to access non-existing object member 'name'");
  CHECK(decode_error(R"({"inputs":[{"name":"I","shape":[1],"datatype":7,"data":[1]}]})").message() ==
        "Unable to parse 'datatype': attempt to access JSON non-string as string");
  status negative = decode_error(R"({"inputs":[{"name":"I","shape":[2,-5],"datatype":"INT32","data":[1]}]})");
  CHECK(negative.http_status() == 500);
  CHECK(negative.message() ==
        "Unable to parse 'shape': attempt to access JSON non-unsigned-integer as unsigned-integer");
  CHECK(decode_error(
            R"({"inputs":[{"name":"I","shape":[18446744073709551615],"datatype":"INT32","data":[1]}]})")
            .message() ==
        "invalid shape for input 'I': shape [-1] contains one or more invalid dimensions");
  CHECK(decode_error(
            R"({"inputs":[{"name":"I","shape":[4294967296,4294967296],"datatype":"INT32","data":[1]}]})")
            .message() ==
        "invalid shape for input 'I': shape [4294967296,4294967296] causes total element count "
        "to exceed maximum size of 9223372036854775807");
  CHECK(decode_error(
            R"({"inputs":[{"name":"I","shape":[4611686018427387904],"datatype":"INT32","data":[1]}]})")
            .message() ==
        "byte size overflow for input 'I': element count (4611686018427387904) * data type size "
        "(4) exceeds maximum allowed size (9223372036854775807)");
  CHECK(decode_error(R"({"inputs":[{"name":"I","shape":[100],"datatype":"FP64","data":[1]}]})",
                     {}, codec_limits{1 << 20} /* big enough for the header */)
            .message() == "Failed to parse 'data' field: shape does not match true shape");
  CHECK(decode_error(R"({"inputs":[{"name":"I","shape":[1000],"datatype":"FP64","data":[1]}]})",
                     {}, codec_limits{4000})
            .message() ==
        "JSON input 'I' has a byte_size (8000 bytes) that exceeds the maximum allowed value of "
        "4000 bytes. Use --http-max-input-size to increase the limit.");
  CHECK(decode_error(R"({"inputs":[{"name":"I","shape":[1],"datatype":"FP16","data":[1]}]})").message() ==
        "receiving FP16 data via JSON is not supported. Please use the binary data format for input I");
  CHECK(decode_error(R"({"inputs":[{"name":"I","shape":[1],"datatype":"FLOAT","data":[1]}]})").message() ==
        "invalid datatype for input I");
  // Duplicate names are a validation rule of the server (one place for both transports), not
  // a decoding error: the decoder keeps both.
  CHECK_FALSE(decode_error(
      R"({"inputs":[{"name":"I","shape":[1],"datatype":"INT32","data":[1]},{"name":"I","shape":[1],"datatype":"INT32","data":[2]}]})"));
  // Zero elements: empty data, `data` not read.
  std::size_t hl = 0;
  std::string body = body_of(R"({"inputs":[{"name":"I","shape":[0],"datatype":"INT32","data":"x"}]})", "", hl);
  CHECK(decode_infer_request(body, hl, "m").inputs[0].data.empty());
}

TEST_CASE("binary: binary data size errors (steps 7 and 8)", "[v2][binary]") {
  const std::string one =
      R"({"inputs":[{"name":"INPUT0","shape":[1,16],"datatype":"INT32","parameters":{"binary_data_size":64}}]})";
  status shortage = decode_error(one, std::string(60, 'x'));
  CHECK(shortage.http_status() == 400);
  CHECK(shortage.message() ==
        "unexpected size for input 'INPUT0', expecting 64 additional bytes for model 'simple'");
  status surplus = decode_error(one, std::string(65, 'x'));
  CHECK(surplus.message() == "unexpected additional input data for model 'simple'");
  CHECK(decode_error(
            R"({"inputs":[{"name":"I","shape":[1],"datatype":"INT32","parameters":{"binary_data_size":-4}}]})")
            .message() ==
        "Unable to parse 'binary_data_size': attempt to access JSON non-unsigned-integer as unsigned-integer");
  // binary_data_size 0 appends an empty buffer.
  std::size_t hl = 0;
  std::string body = body_of(
      R"({"inputs":[{"name":"I","shape":[0],"datatype":"INT32","parameters":{"binary_data_size":0}}]})", "", hl);
  CHECK(decode_infer_request(body, hl, "m").inputs[0].data.empty());
}

TEST_CASE("binary: shared-memory inputs and requested outputs (step 9)", "[v2][binary]") {
  std::size_t hl = 0;
  std::string body = body_of(
      R"({"inputs":[{"name":"I","shape":[1,16],"datatype":"INT32","parameters":{"shared_memory_region":"input_data","shared_memory_byte_size":64,"shared_memory_offset":64}}],)"
      R"("outputs":[{"name":"O","parameters":{"shared_memory_region":"output_data","shared_memory_byte_size":64,"binary_data":false}},{"name":"C","parameters":{"classification":3,"binary_data":true}}]})",
      "", hl);
  infer_request q = decode_infer_request(body, hl, "simple");
  CHECK(q.inputs[0].encoding == tensor_encoding::shared_memory);
  CHECK(q.inputs[0].shm == shm_ref{"input_data", 64, 64});
  CHECK(q.outputs[0].shm == shm_ref{"output_data", 0, 64});
  CHECK(output_encoding(q, "O") == tensor_encoding::shared_memory);
  CHECK(q.outputs[1].classification == 3);

  CHECK(decode_error(
            R"({"inputs":[{"name":"I","shape":[1],"datatype":"INT32","parameters":{"shared_memory_region":"r","shared_memory_offset":"0"}}]})")
            .message() ==
        "Unable to parse 'shared_memory_offset': attempt to access JSON non-unsigned-integer as unsigned-integer");
  CHECK(decode_error(R"({"inputs":[],"outputs":[{"name":"O","parameters":{"shared_memory_region":"r","classification":2}}]})")
            .message() == "Output can't set both 'shared_memory_region' and 'classification'");
  CHECK(decode_error(R"({"inputs":[],"outputs":[{"name":"O","parameters":{"shared_memory_region":"r","binary_data":true}}]})")
            .message() == "Output can't set both 'shared_memory_region' and 'binary_data'");
  CHECK(decode_error(R"({"inputs":[],"outputs":[{"name":"O","parameters":{"classification":-1}}]})")
            .message() ==
        "Unable to set 'classification': attempt to access JSON non-unsigned-integer as unsigned-integer");
  CHECK(decode_error(R"({"inputs":[],"outputs":[{"parameters":{}}]})").message() ==
        "Unable to parse 'name': attempt to access non-existing object member 'name'");
  CHECK_FALSE(decode_error(R"({"inputs":[],"outputs":[{"name":"O"},{"name":"O"}]})"));
}

TEST_CASE("binary: truncated and over-long response bodies are errors", "[v2][binary]") {
  infer_response r;
  r.model_name = "m";
  r.model_version = "1";
  std::vector<std::int32_t> v(4, 9);
  r.outputs.push_back({"O", data_type::int32, {4}, tensor_encoding::binary,
                       tensor_data::view(std::as_bytes(std::span(v))), {}});
  encoded_body b = encode_infer_response(r);
  std::string wire = b.flatten();
  status st;
  decode_infer_response(std::string_view(wire).substr(0, wire.size() - 1), b.header_length(), st);
  CHECK(st);
  decode_infer_response(wire + "x", b.header_length(), st);
  CHECK(st);
  decode_infer_response(wire, wire.size() + 5, st);
  CHECK(st);
  decode_infer_response("{\"model_name\":1}", std::nullopt, st);
  CHECK(st.message() == "Unable to parse 'model_name': attempt to access JSON non-string as string");
  CHECK(decode_infer_response(wire, b.header_length(), st).outputs[0].as<std::int32_t>().at(3) == 9);
}

TEST_CASE("binary: error bodies", "[v2][binary]") {
  CHECK(error_body("Request for unknown model: 'x' is not found") ==
        R"({"error":"Request for unknown model: 'x' is not found"})");
  CHECK(error_body("quote \" and \\") == R"({"error":"quote \" and \\"})");
  CHECK(parse_error_body(R"({"error":"Server not ready"})") == "Server not ready");
  CHECK(parse_error_body("plain") == "plain");
}

TEST_CASE("binary: client-side encode refuses what cannot travel", "[v2][binary]") {
  infer_request q;
  q.inputs.push_back({"H", data_type::fp16, {1}, tensor_encoding::json, tensor_data::own("\0\0"s), {}, {}});
  encoded_body b;
  CHECK(encode_infer_request(q, b).code() == errc::invalid_arg);
  q.inputs[0] = {"I", data_type::int32, {2}, tensor_encoding::json, tensor_data::own("\0\0\0\0"s), {}, {}};
  CHECK(encode_infer_request(q, b).code() == errc::invalid_arg);
  q.inputs[0] = {"S", data_type::int32, {1}, tensor_encoding::shared_memory, {}, std::nullopt, {}};
  CHECK(encode_infer_request(q, b).code() == errc::invalid_arg);
}

TEST_CASE("binary: request prefix and JSON size limit", "[v2][binary]") {
  CHECK(inferwire::v2::request_prefix("") == "[request id: <id_unknown>] ");
  CHECK(inferwire::v2::request_prefix("r1") == "[request id: r1] ");
  inferwire::v2::codec_limits limits{100};
  CHECK_FALSE(inferwire::v2::check_json_size(100, limits));
  auto st = inferwire::v2::check_json_size(101, limits);
  CHECK(st.code() == inferwire::errc::invalid_arg);
  CHECK(st.message() ==
        "request JSON size of 101 bytes exceeds the maximum allowed input size of 100 bytes. "
        "Use --http-max-input-size to increase the limit.");
}

TEST_CASE("binary: every member the request encoder writes, byte for byte", "[v2][binary]") {
  infer_request q;
  q.id = "r\"1";
  q.parameters.set("priority", std::int64_t{2});
  std::vector<std::int32_t> v{1, 2};
  infer_input bin_in;
  bin_in.name = "A";
  bin_in.datatype = data_type::int32;
  bin_in.shape = {2};
  bin_in.data = tensor_data::view(std::as_bytes(std::span(v)));
  q.inputs.push_back(bin_in);
  infer_input json_in;
  json_in.name = "B";
  json_in.datatype = data_type::int32;
  json_in.shape = {2};
  json_in.encoding = tensor_encoding::json;
  json_in.data = tensor_data::view(std::as_bytes(std::span(v)));
  q.inputs.push_back(json_in);
  infer_input shm_in;
  shm_in.name = "C";
  shm_in.datatype = data_type::fp32;
  shm_in.shape = {1, 4};
  shm_in.encoding = tensor_encoding::shared_memory;
  shm_in.shm = shm_ref{"region", 64, 16};
  q.inputs.push_back(shm_in);
  requested_output o1;
  o1.name = "X";
  o1.binary_data = true;
  requested_output o2;
  o2.name = "Y";
  o2.shm = shm_ref{"out", 0, 32};
  q.outputs = {o1, o2};
  encoded_body b;
  REQUIRE_FALSE(encode_infer_request(q, b));
  CHECK(b.header ==
        R"({"id":"r\"1","parameters":{"priority":2},"inputs":[)"
        R"({"name":"A","shape":[2],"datatype":"INT32","parameters":{"binary_data_size":8}},)"
        R"({"name":"B","shape":[2],"datatype":"INT32","data":[1,2]},)"
        R"({"name":"C","shape":[1,4],"datatype":"FP32","parameters":{"shared_memory_region":"region",)"
        R"("shared_memory_byte_size":16,"shared_memory_offset":64}}],)"
        R"("outputs":[{"name":"X","parameters":{"binary_data":true}},)"
        R"({"name":"Y","parameters":{"shared_memory_region":"out","shared_memory_byte_size":32}}]})");
  CHECK(b.segments.size() == 1);
  // And back: the server's decoder reads what the client's encoder wrote.
  std::string wire = b.flatten();
  infer_request back = decode_infer_request(wire, b.header_length(), "m");
  CHECK(back.id == q.id);
  CHECK(back.inputs.size() == 3);
  CHECK(back.inputs[2].shm == shm_in.shm);
  CHECK(back.outputs.size() == 2);
}

TEST_CASE("binary: a reply without a required member is refused with its name", "[v2][binary]") {
  auto error_of = [](std::string_view header) {
    status st;
    decode_infer_response(header, std::nullopt, st);
    return st.message();
  };
  CHECK(error_of(R"({"model_version":"1"})") ==
        "Unable to parse 'model_name': attempt to access non-existing object member 'model_name'");
  CHECK(error_of(R"({"model_name":"m","outputs":[{"datatype":"INT32","shape":[1]}]})") ==
        "Unable to parse 'name': attempt to access non-existing object member 'name'");
  CHECK(error_of(R"({"model_name":"m","outputs":[{"name":"O","shape":[1]}]})") ==
        "Unable to parse 'datatype': attempt to access non-existing object member 'datatype'");
  CHECK(error_of(R"({"model_name":"m","outputs":[{"name":"O","datatype":"INT32"}]})") ==
        "Unable to parse 'shape': attempt to access non-existing object member 'shape'");
  CHECK(error_of(R"({"model_name":"m","outputs":[{"name":"O","datatype":"INT32","shape":{}}]})") ==
        "Unable to parse 'shape': attempt to access JSON non-array as array");
  CHECK(error_of(R"({"model_name":"m","outputs":[{"name":"O","datatype":"INT32","shape":[1],)"
                 R"("parameters":{"binary_data_size":"8"}}]})") ==
        "Unable to parse 'binary_data_size': attempt to access JSON non-unsigned-integer as "
        "unsigned-integer");
  // Members in any order, unknown ones ignored; a JSON output is decoded from `data`.
  status st;
  infer_response r = decode_infer_response(
      R"({"outputs":[{"data":[7],"shape":[1],"extra":0,"datatype":"INT32","name":"O"}],"model_name":"m","x":{}})",
      std::nullopt, st);
  REQUIRE_FALSE(st);
  CHECK(r.model_name == "m");
  REQUIRE(r.outputs.size() == 1);
  CHECK(r.outputs[0].as<std::int32_t>().at(0) == 7);
}
