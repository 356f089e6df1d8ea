// SPDX-License-Identifier: Apache-2.0
// Inference over HTTP: JSON, binary, mixed and raw requests, output selection, classification
// and every error of v2-protocol §1.4 and §1.5.
#include "common.hpp"

#include <inferwire/core/bytes.hpp>

using namespace iwtest;
using namespace inferwire;

namespace {
const char* simple_infer = "/v2/models/simple/infer";

std::vector<int> ints(const v2::infer_output& o) {
  auto v = o.as<std::int32_t>();
  return std::vector<int>(v.begin(), v.end());
}
std::vector<int> expected_sum() {
  std::vector<int> v(16);
  std::iota(v.begin(), v.end(), 1);
  return v;
}
std::vector<int> expected_diff() {
  std::vector<int> v(16);
  std::iota(v.begin(), v.end(), -1);
  return v;
}
}  // namespace

TEST_CASE("infer: JSON in, JSON out", "[infer]") {
  auto r = post(simple_infer, simple_json());
  REQUIRE(r.status == 200);
  CHECK(r.header("content-type") == "application/json");
  CHECK_FALSE(r.has("inference-header-content-length"));
  CHECK(r.body ==
        R"({"model_name":"simple","model_version":"1","outputs":[{"name":"OUTPUT0","datatype":"INT32",)"
        R"("shape":[1,16],"data":[1,2,3,4,5,6,7,8,9,10,11,12,13,14,15,16]},{"name":"OUTPUT1",)"
        R"("datatype":"INT32","shape":[1,16],"data":[-1,0,1,2,3,4,5,6,7,8,9,10,11,12,13,14]}]})");
  // The id is echoed; the explicit version route works.
  r = post("/v2/models/simple/versions/1/infer", "{\"id\":\"abc\"," + simple_json().substr(1));
  REQUIRE(r.status == 200);
  CHECK(r.body.starts_with(R"({"id":"abc","model_name":"simple","model_version":"1",)"));
}

TEST_CASE("infer: binary in, binary out, as the C++ client sends it", "[infer]") {
  v2::infer_request req;
  std::vector<std::int32_t> a(16), b(16, 1);
  std::iota(a.begin(), a.end(), 0);
  req.inputs.push_back(int32_input("INPUT0", a, {1, 16}));
  req.inputs.push_back(int32_input("INPUT1", b, {1, 16}));
  req.parameters.set("binary_data_output", true);
  auto r = post_binary(simple_infer, req, {{"Expect", ""}});
  REQUIRE(r.status == 200);
  CHECK(r.header("content-type") == "application/octet-stream");
  auto res = decode(r);
  REQUIRE(res.outputs.size() == 2);
  CHECK(res.outputs[0].encoding == v2::tensor_encoding::binary);
  CHECK(res.outputs[0].data.size() == 64);
  CHECK(ints(res.outputs[0]) == expected_sum());
  CHECK(ints(res.outputs[1]) == expected_diff());
  // IHCL equal to the content length: a pure JSON body.
  std::string body = simple_json();
  r = post(simple_infer, body, {{"Inference-Header-Content-Length", std::to_string(body.size())}});
  CHECK(r.status == 200);
}

TEST_CASE("infer: repeated headers with other data, ids and output choices each get their own reply", "[infer]") {
  // Requests that repeat a header are recalled from the last one decoded, into the storage of
  // finished ones, and replies that repeat a header take the one last written: every reply
  // must still be this request's own, whatever came before it.
  auto request = [](int seed, std::string id, bool binary_out, bool only_output1) {
    v2::infer_request req;
    std::vector<std::int32_t> a(16), b(16);
    for (int i = 0; i < 16; ++i) {
      a[i] = seed * 100 + i;
      b[i] = seed - i;
    }
    req.id = std::move(id);
    req.inputs.push_back(int32_input("INPUT0", a, {1, 16}));
    req.inputs.push_back(int32_input("INPUT1", b, {1, 16}));
    if (binary_out) req.parameters.set("binary_data_output", true);
    if (only_output1) {
      v2::requested_output o;
      o.name = "OUTPUT1";
      o.binary_data = binary_out;
      req.outputs.push_back(std::move(o));
    }
    return std::pair{req, std::pair{a, b}};
  };
  for (int round = 0; round < 40; ++round) {
    INFO("round " << round);
    const bool binary_out = round % 5 != 3;
    const bool only_output1 = round % 7 == 6;
    const std::string id = round % 4 == 2 ? "id-" + std::to_string(round) : "";
    auto [req, ab] = request(round, id, binary_out, only_output1);
    auto r = post_binary(simple_infer, req);
    REQUIRE(r.status == 200);
    auto res = decode(r);
    CHECK(res.id == id);
    REQUIRE(res.outputs.size() == (only_output1 ? 1u : 2u));
    std::vector<int> sum(16), diff(16);
    for (int i = 0; i < 16; ++i) {
      sum[i] = ab.first[i] + ab.second[i];
      diff[i] = ab.first[i] - ab.second[i];
    }
    if (!only_output1) {
      CHECK(res.outputs[0].name == "OUTPUT0");
      CHECK(ints(res.outputs[0]) == sum);
    }
    const auto& last = res.outputs.back();
    CHECK(last.name == "OUTPUT1");
    CHECK(last.shape == shape_t{1, 16});
    CHECK(last.encoding == (binary_out ? v2::tensor_encoding::binary : v2::tensor_encoding::json));
    CHECK(ints(last) == diff);
  }
}

TEST_CASE("infer: mixed encodings and output selection", "[infer]") {
  // JSON INPUT0, binary INPUT1; OUTPUT0 binary, OUTPUT1 JSON.
  std::string header =
      R"({"inputs":[{"name":"INPUT0","datatype":"INT32","shape":[1,16],"data":)" +
      json_array(iota16()) +
      R"(},{"name":"INPUT1","datatype":"INT32","shape":[1,16],"parameters":{"binary_data_size":64}}],)"
      R"("outputs":[{"name":"OUTPUT0","parameters":{"binary_data":true}},{"name":"OUTPUT1"}],)"
      R"("parameters":{"binary_data_output":true}})";
  std::string body = header + le_bytes(std::vector<std::int32_t>(16, 1));
  auto r = post(simple_infer, body, {{"Inference-Header-Content-Length", std::to_string(header.size())}});
  REQUIRE(r.status == 200);
  auto res = decode(r);
  REQUIRE(res.outputs.size() == 2);
  CHECK(res.outputs[0].encoding == v2::tensor_encoding::binary);
  // A listed output without binary_data is JSON even with binary_data_output (§4.1).
  CHECK(res.outputs[1].encoding == v2::tensor_encoding::json);
  CHECK(ints(res.outputs[0]) == expected_sum());
  CHECK(ints(res.outputs[1]) == expected_diff());

  // Only the listed outputs come back, in the listed order.
  r = post(simple_infer, simple_json(R"(,"outputs":[{"name":"OUTPUT1"}])"));
  REQUIRE(r.status == 200);
  res = decode(r);
  REQUIRE(res.outputs.size() == 1);
  CHECK(res.outputs[0].name == "OUTPUT1");
}

TEST_CASE("infer: header field names in any case, the first of a repeated one", "[infer]") {
  std::string header =
      R"({"inputs":[{"name":"INPUT0","datatype":"INT32","shape":[1,16],"parameters":{"binary_data_size":64}},)"
      R"({"name":"INPUT1","datatype":"INT32","shape":[1,16],"parameters":{"binary_data_size":64}}],)"
      R"("parameters":{"binary_data_output":true}})";
  std::string body = header + le_bytes(iota16()) + le_bytes(std::vector<std::int32_t>(16, 1));
  const std::string hl = std::to_string(header.size());
  for (const char* name : {"inference-header-content-length", "INFERENCE-HEADER-CONTENT-LENGTH"}) {
    auto r = post(simple_infer, body, {{name, hl}, {"Inference-Header-Content-Length", "3"}});
    REQUIRE(r.status == 200);
    auto res = decode(r);
    REQUIRE(res.outputs.size() == 2);
    CHECK(ints(res.outputs[0]) == expected_sum());
  }
  // The first Content-Encoding counts: identity, then one we do not know.
  auto r = post(simple_infer, body,
                {{"Inference-Header-Content-Length", hl}, {"content-encoding", "identity"}, {"Content-Encoding", "br"}});
  CHECK(r.status == 200);
  r = post(simple_infer, body, {{"Inference-Header-Content-Length", hl}, {"Content-Encoding", "br"}});
  CHECK(r.status == 501);
}

TEST_CASE("infer: raw binary request", "[infer]") {
  std::vector<float> v{1.5f, -2.f, 3.25f};
  auto r = post("/v2/models/identity_fp32/infer", le_bytes(v), {{"Inference-Header-Content-Length", "0"}});
  REQUIRE(r.status == 200);
  auto res = decode(r);
  REQUIRE(res.outputs.size() == 1);
  CHECK(res.outputs[0].encoding == v2::tensor_encoding::binary);
  CHECK(res.outputs[0].shape == shape_t{3});
  CHECK(res.outputs[0].data.str() == le_bytes(v));
  // A raw request to a two-input model.
  r = post(simple_infer, std::string(64, '\0'), {{"Inference-Header-Content-Length", "0"}});
  CHECK(r.status == 400);
  CHECK(error_of(r) ==
        "Raw request must only have 1 input (found 1) to be deduced but got 2 inputs in 'simple' "
        "model configuration");
}

TEST_CASE("infer: BYTES round trip embedded NULs over JSON and binary", "[infer]") {
  auto r = post("/v2/models/simple_identity/infer",
                R"({"inputs":[{"name":"INPUT0","datatype":"BYTES","shape":[1,3],)"
                R"("data":["he\u0000llo","\u0000\u0001\u0002\u0003","plain"]}]})");
  REQUIRE(r.status == 200);
  CHECK(r.body.find(R"("data":["he\u0000llo","\u0000\u0001\u0002\u0003","plain"])") !=
        std::string::npos);
  v2::infer_request req;
  v2::infer_input in;
  in.name = "INPUT0";
  in.datatype = data_type::bytes;
  in.shape = {1, 2};
  in.data = v2::tensor_data::own(encode_bytes(std::vector<std::string>{std::string("he\0llo", 6), "x"}));
  req.inputs.push_back(in);
  req.parameters.set("binary_data_output", true);
  r = post_binary("/v2/models/simple_identity/infer", req);
  REQUIRE(r.status == 200);
  auto res = decode(r);
  CHECK(res.outputs[0].data.str() == in.data.str());

  // simple_string: decimal strings in, decimal strings out.
  std::string a = "[", b = "[";
  for (int i = 0; i < 16; ++i) {
    a += (i ? ",\"" : "\"") + std::to_string(i) + "\"";
    b += (i ? ",\"" : "\"") + std::string("1") + "\"";
  }
  r = post("/v2/models/simple_string/infer",
           R"({"inputs":[{"name":"INPUT0","datatype":"BYTES","shape":[1,16],"data":)" + a +
               R"(]},{"name":"INPUT1","datatype":"BYTES","shape":[1,16],"data":)" + b + "]}]}");
  REQUIRE(r.status == 200);
  CHECK(r.body.find(R"("data":["1","2","3","4","5","6","7","8","9","10","11","12","13","14","15","16"])") !=
        std::string::npos);
  CHECK(r.body.find(R"("data":["-1","0","1",)") != std::string::npos);
}

TEST_CASE("infer: BYTES output that is not UTF-8 is refused as JSON, never sent invalid", "[infer]") {
  // Binary input with an invalid UTF-8 element; the output asked for as JSON.
  v2::infer_request req;
  v2::infer_input in;
  in.name = "INPUT0";
  in.datatype = data_type::bytes;
  in.shape = {1, 2};
  in.data = v2::tensor_data::own(encode_bytes(std::vector<std::string>{"ok", "\xc0\xa7"}));
  req.inputs.push_back(in);
  auto r = post_binary("/v2/models/simple_identity/infer", req);
  CHECK(r.status == 400);
  CHECK(error_of(r) == "output 'OUTPUT0' has BYTES elements that are not valid UTF-8 and cannot be "
                       "returned as JSON; request it with binary_data");
  // The same output as binary data comes back byte for byte.
  req.parameters.set("binary_data_output", true);
  r = post_binary("/v2/models/simple_identity/infer", req);
  REQUIRE(r.status == 200);
  CHECK(decode(r).outputs[0].data.str() == encode_bytes(std::vector<std::string>{"ok", "\xc0\xa7"}));
}

TEST_CASE("infer: every data type through the identity backend", "[infer]") {
  struct tcase {
    const char* model;
    data_type type;
    std::string bytes;
  };
  std::vector<tcase> cases{
      {"identity_fp16", data_type::fp16, std::string("\x00\x3c\x00\xc0", 4)},
      {"identity_bf16", data_type::bf16, std::string("\x80\x3f\x00\x40", 4)},
      {"identity_bool", data_type::bool_, std::string("\x01\x00\x01", 3)},
      {"identity_int64", data_type::int64, le_bytes(std::vector<std::int64_t>{-5, 1ll << 40})},
  };
  for (const auto& c : cases) {
    v2::infer_request req;
    v2::infer_input in;
    in.name = "INPUT0";
    in.datatype = c.type;
    in.shape = {static_cast<std::int64_t>(c.bytes.size() / element_size(c.type))};
    in.data = v2::tensor_data::own(c.bytes);
    req.inputs.push_back(in);
    req.outputs.push_back({"OUTPUT0", true, 0, std::nullopt, {}});
    auto r = post_binary(std::string("/v2/models/") + c.model + "/infer", req);
    REQUIRE(r.status == 200);
    auto res = decode(r);
    CHECK(res.outputs[0].datatype == c.type);
    CHECK(res.outputs[0].data.str() == c.bytes);
  }
  // BOOL and INT64 in JSON too.
  auto r = post("/v2/models/identity_bool/infer",
                R"({"inputs":[{"name":"INPUT0","datatype":"BOOL","shape":[2],"data":[true,false]}]})");
  CHECK(r.body.find(R"("data":[true,false])") != std::string::npos);
  // FP16 cannot travel as JSON, in either direction.
  r = post("/v2/models/identity_fp16/infer",
           R"({"inputs":[{"name":"INPUT0","datatype":"FP16","shape":[1],"data":[1.0]}]})");
  CHECK(r.status == 400);
  CHECK(error_of(r) ==
        "receiving FP16 data via JSON is not supported. Please use the binary data format for input INPUT0");
  v2::infer_request req;
  v2::infer_input in;
  in.name = "INPUT0";
  in.datatype = data_type::fp16;
  in.shape = {1};
  in.data = v2::tensor_data::own(std::string("\x00\x3c", 2));
  req.inputs.push_back(in);
  r = post_binary("/v2/models/identity_fp16/infer", req);
  CHECK(r.status == 400);
  CHECK(error_of(r) ==
        "sending FP16 data via JSON is not supported. Please use the binary data format for output");
}

TEST_CASE("infer: classification", "[infer]") {
  auto r = post(simple_infer,
                simple_json(R"(,"outputs":[{"name":"OUTPUT0","parameters":{"classification":3}}])"));
  REQUIRE(r.status == 200);
  CHECK(r.body.find(R"({"name":"OUTPUT0","datatype":"BYTES","shape":[1,3],"data":["16:15","15:14","14:13"]})") !=
        std::string::npos);
  r = post("/v2/models/identity_labeled/infer",
           R"({"inputs":[{"name":"INPUT0","datatype":"FP32","shape":[4],"data":[0.5,3.3,1,2]}],)"
           R"("outputs":[{"name":"OUTPUT0","parameters":{"classification":2}}]})");
  REQUIRE(r.status == 200);
  CHECK(r.body.find(R"("shape":[2],"data":["3.300000:1:dog","2.000000:3:fish"])") != std::string::npos);
  // Classification of an FP16 output is refused.
  const std::string fp16_header =
      R"({"inputs":[{"name":"INPUT0","datatype":"FP16","shape":[1],"parameters":{"binary_data_size":2}}],)"
      R"("outputs":[{"name":"OUTPUT0","parameters":{"classification":1,"binary_data":true}}]})";
  r = post("/v2/models/identity_fp16/infer", fp16_header + std::string("\x00\x3c", 2),
           {{"Inference-Header-Content-Length", std::to_string(fp16_header.size())}});
  CHECK(r.status == 400);
  CHECK(error_of(r) == "class result not available for output due to unsupported type 'FP16'");
}

TEST_CASE("infer: request parsing errors", "[infer][errors]") {
  struct ecase {
    std::string body;
    unsigned status;
    std::string message;
  };
  const std::string in1 = R"({"name":"INPUT1","datatype":"INT32","shape":[1,16],"data":)" +
                          json_array(std::vector<int>(16, 1)) + "}";
  const std::string in0 = R"({"name":"INPUT0","datatype":"INT32","shape":[1,16],"data":)" +
                          json_array(iota16()) + "}";
  std::vector<ecase> cases{
      {"{", 500, "failed to parse the request JSON buffer: Missing a name for object member. at 1"},
      {"", 400, ""},  // an empty body is a raw request (quirk), refused for a 2-input model
      {R"({"inputs":[{"name":"INPUT0","datatype":"INT32","shape":[2,-5],"data":[1]}]})", 500,
       "Unable to parse 'shape': attempt to access JSON non-unsigned-integer as unsigned-integer"},
      {R"({"inputs":[{"name":"INPUT0","datatype":"INT32","shape":[1,16]}]})", 400,
       "Input must set only one of the following fields: 'data', 'binary_data_size' in "
       "'parameters', 'shared_memory_region' in 'parameters'. But no field is set"},
      {R"({"inputs":[)" + in0 + "]}", 400,
       "[request id: <id_unknown>] expected 2 inputs but got 1 inputs for model 'simple'. Got "
       "input(s) ['INPUT0'], but missing required input(s) ['INPUT1']. Please provide all "
       "required input(s)."},
      {R"({"inputs":[)" + in0 + R"(,{"name":"INPUTX","datatype":"INT32","shape":[1,16],"data":)" +
           json_array(iota16()) + "}]}",
       400, "unexpected inference input 'INPUTX' for model 'simple'"},
      {R"({"inputs":[)" + in0 + "," + in1 + R"(],"outputs":[{"name":"OUTPUTX"}]})", 400,
       "unexpected inference output 'OUTPUTX' for model 'simple'"},
      {R"({"inputs":[)" + in0 + "," + in1 + R"(],"outputs":[{"name":"OUTPUT0"},{"name":"OUTPUT0"}]})",
       400, "[request id: <id_unknown>] output 'OUTPUT0' already exists in request"},
      {R"({"inputs":[{"name":"INPUT0","datatype":"FP32","shape":[1,16],"data":)" +
           json_array(iota16()) + "}," + in1 + "]}",
       400, "[request id: <id_unknown>] inference input 'INPUT0' data-type is 'FP32', but model 'simple' expects 'INT32'"},
      {R"({"inputs":[{"name":"INPUT0","datatype":"INT32","shape":[1,15],"data":)" +
           json_array(std::vector<int>(15, 0)) + "}," + in1 + "]}",
       400,
       "[request id: <id_unknown>] unexpected shape for input 'INPUT0' for model 'simple'. "
       "Expected [-1,16], got [1,15]. NOTE: Setting a non-zero max_batch_size in the model "
       "config requires a batch dimension to be prepended to each input shape. If you want to "
       "specify the full shape including the batch dim in your input dims config, try setting "
       "max_batch_size to zero. See the model configuration docs for more info on max_batch_size."},
      {R"({"inputs":[{"name":"INPUT0","datatype":"INT32","shape":[9,16],"data":)" +
           json_array(std::vector<int>(144, 0)) +
           R"(},{"name":"INPUT1","datatype":"INT32","shape":[9,16],"data":)" +
           json_array(std::vector<int>(144, 0)) + "}]}",
       400, "[request id: <id_unknown>] inference request batch-size must be <= 8 for 'simple'"},
      {R"({"inputs":[{"name":"INPUT0","datatype":"INT32","shape":[2,16],"data":)" +
           json_array(std::vector<int>(32, 0)) + "}," + in1 + "]}",
       400, "[request id: <id_unknown>] input 'INPUT1' batch size does not match other inputs for 'simple'"},
      {R"({"id":"r7","inputs":[{"name":"INPUT0","datatype":"INT32","shape":[16],"data":)" +
           json_array(iota16()) + "}," + in1 + "]}",
       400, ""},
      {R"({"parameters":{"triton_x":1},"inputs":[]})", 400,
       "parameter keys starting with 'triton_' are reserved for Triton usage and should not be specified."},
      {R"({"parameters":{"p":[1]},"inputs":[]})", 400,
       "parameter 'p' has invalid type. It should be either 'int', 'bool', or 'string'."},
      {R"({"inputs":[{"name":"INPUT0","datatype":"INT32","shape":[1,16],"data":[1,2]},)" + in1 + "]}",
       500, "Failed to parse 'data' field: shape does not match true shape"},
      {R"({"inputs":[{"name":"INPUT0","datatype":"INT32","shape":[1,16],"data":[1.5]},)" + in1 + "]}",
       500, "Unable to parse 'data': attempt to access JSON non-signed-integer as signed-integer"},
      {R"({"outputs":[]})", 500,
       "Unable to parse 'inputs': attempt to access non-existing object member 'inputs'"},
      {R"({"id":5,"inputs":[]})", 500, "Unable to parse 'id': attempt to access JSON non-string as string"},
  };
  for (const auto& c : cases) {
    CAPTURE(c.body);
    auto r = post(simple_infer, c.body);
    CHECK(r.status == c.status);
    if (!c.message.empty()) CHECK(error_of(r) == c.message);
  }
  // The request id appears in the prefix.
  auto r = post(simple_infer, cases[12].body);
  CHECK(error_of(r).starts_with("[request id: r7] unexpected shape for input 'INPUT0'"));
  // Nesting limit (§0.3).
  std::string deep(120, '[');
  r = post(simple_infer, R"({"inputs":)" + deep + std::string(120, ']') + "}");
  CHECK(r.status == 400);
  CHECK(error_of(r) == "JSON nesting depth exceeds maximum allowed limit (100)");
}

TEST_CASE("infer: binary framing errors", "[infer][errors]") {
  const std::string header =
      R"({"inputs":[{"name":"INPUT0","datatype":"INT32","shape":[1,16],"parameters":{"binary_data_size":64}},)"
      R"({"name":"INPUT1","datatype":"INT32","shape":[1,16],"parameters":{"binary_data_size":128}}]})";
  auto hl = std::to_string(header.size());
  auto r = post(simple_infer, header + std::string(192, '\0'), {{"Inference-Header-Content-Length", hl}});
  CHECK(r.status == 400);
  CHECK(error_of(r) ==
        "[request id: <id_unknown>] input byte size mismatch for input 'INPUT1' for model 'simple'. Expected 64, got 128");
  r = post(simple_infer, header + std::string(100, '\0'), {{"Inference-Header-Content-Length", hl}});
  CHECK(r.status == 400);
  CHECK(error_of(r) ==
        "unexpected size for input 'INPUT1', expecting 128 additional bytes for model 'simple'");
  r = post(simple_infer, header + std::string(200, '\0'), {{"Inference-Header-Content-Length", hl}});
  CHECK(r.status == 400);
  CHECK(error_of(r) == "unexpected additional input data for model 'simple'");
  r = post(simple_infer, simple_json(), {{"Inference-Header-Content-Length", "abc"}});
  CHECK(r.status == 400);
  CHECK(error_of(r) == "Unable to parse Inference-Header-Content-Length, got: abc");
  r = post(simple_infer, simple_json(), {{"Inference-Header-Content-Length", "2147483648"}});
  CHECK(r.status == 400);
  CHECK(error_of(r) ==
        "Unable to parse Inference-Header-Content-Length, value is out of range [ -2147483648, "
        "2147483647 ], got: 2147483648");
  r = post(simple_infer, simple_json(), {{"Inference-Header-Content-Length", "100000"}});
  CHECK(r.status == 400);
  CHECK(error_of(r) == "inference header size should be in range (0, " +
                           std::to_string(simple_json().size()) + "), got: 100000");
}

TEST_CASE("infer: optional inputs and decoupled models", "[infer][errors]") {
  auto r = post("/v2/models/identity_optional/infer",
                R"({"inputs":[{"name":"INPUT0","datatype":"INT32","shape":[1,2],"data":[4,5]}]})");
  REQUIRE(r.status == 200);
  CHECK(r.body.find(R"("data":[4,5])") != std::string::npos);
  r = post("/v2/models/identity_optional/infer",
           R"({"inputs":[{"name":"INPUT1","datatype":"INT32","shape":[1,2],"data":[4,5]}]})");
  CHECK(r.status == 400);
  CHECK(error_of(r) ==
        "[request id: <id_unknown>] expected number of inputs between 1 and 2 but got 1 inputs "
        "for model 'identity_optional'. Got input(s) ['INPUT1'], but missing required input(s) "
        "['INPUT0']. Please provide all required input(s).");
  r = post("/v2/models/decoupled_identity/infer", "{}");
  CHECK(r.status == 501);
  CHECK(error_of(r) == "HTTP end point doesn't support models with decoupled transaction policy");
  // Shared-memory regions cannot be registered yet, so any region is unknown.
  r = post(simple_infer,
           R"({"inputs":[{"name":"INPUT0","datatype":"INT32","shape":[1,16],"parameters":)"
           R"({"shared_memory_region":"r0","shared_memory_byte_size":64}},)"
           R"({"name":"INPUT1","datatype":"INT32","shape":[1,16],"data":)" +
               json_array(iota16()) + "}]}");
  CHECK(r.status == 404);
  CHECK(error_of(r) == "Unable to find shared memory region: 'r0'");
}

TEST_CASE("JSON integers outside their data type's range are refused, in infer and generate", "[infer]") {
  // Triton truncates them in silence (2^31 as INT32 becomes -2^31, answered 200).
  std::string big = "[2147483648";
  for (int i = 1; i < 16; ++i) big += ",1";
  big += "]";
  const std::string ones = "[1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1]";
  auto r = post("/v2/models/simple/infer",
                R"({"inputs":[{"name":"INPUT0","datatype":"INT32","shape":[1,16],"data":)" + big +
                    R"(},{"name":"INPUT1","datatype":"INT32","shape":[1,16],"data":)" + ones + "}]}");
  CHECK(r.status == 400);
  CHECK(error_of(r) == "Unable to parse 'data': value 2147483648 is out of range for data type INT32");
  r = post("/v2/models/simple/generate", R"({"INPUT0":)" + big + R"(,"INPUT1":)" + ones + "}");
  CHECK(r.status == 400);
  CHECK(error_of(r) == "Unable to parse 'data': value 2147483648 is out of range for data type INT32");
}
