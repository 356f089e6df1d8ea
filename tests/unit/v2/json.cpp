// SPDX-License-Identifier: Apache-2.0
#include <inferwire/v2/json.hpp>

#include <catch2/catch.hpp>

#include <boost/json/serialize.hpp>
#include <boost/json/value_from.hpp>
#include <boost/json/value_to.hpp>

#include <cmath>
#include <cstring>
#include <limits>
#include <string>
#include <vector>

using namespace inferwire;
using namespace inferwire::v2;
using namespace std::string_literals;
namespace json = boost::json;

namespace {
status parse_status(std::string_view text) {
  status st;
  parse_json(text, st);
  return st;
}
std::string nested(int depth) { return std::string(depth, '[') + std::string(depth, ']'); }

template <class T>
std::vector<T> values_of(const std::string& bytes) {
  std::vector<T> v(bytes.size() / sizeof(T));
  std::memcpy(v.data(), bytes.data(), bytes.size());
  return v;
}

std::string decode(std::string_view data_json, data_type t, std::int64_t count, status& st) {
  std::string out;
  st = decode_json_tensor_data(parse_json(data_json), t, count, "INPUT0", out);
  return out;
}

std::string print(double d) {
  std::string s;
  append_json_double(s, d);
  return s;
}
}  // namespace

TEST_CASE("json: UTF-8 validation of BYTES elements", "[v2][json]") {
  using inferwire::valid_utf8;
  CHECK(valid_utf8(""));
  CHECK(valid_utf8("plain ascii"));
  CHECK(valid_utf8("\xc3\xa9\xe2\x82\xac\xf0\x9f\x98\x80"));  // é € 😀
  CHECK_FALSE(valid_utf8("\xc0\xa7"));          // overlong
  CHECK_FALSE(valid_utf8("\xed\xa0\x80"));      // surrogate
  CHECK_FALSE(valid_utf8("\xf4\x90\x80\x80"));  // past U+10FFFF
  CHECK_FALSE(valid_utf8("\xe2\x82"));          // cut short
  CHECK_FALSE(valid_utf8("\x80"));               // stray continuation
}

TEST_CASE("json: syntax errors read as RapidJSON's, with status 500", "[v2][json]") {
  status empty = parse_status("");
  CHECK(empty.code() == errc::internal);
  CHECK(empty.http_status() == 500);
  CHECK(empty.message() == "failed to parse the request JSON buffer: The document is empty. at 0");
  CHECK(parse_status("   ").message() ==
        "failed to parse the request JSON buffer: The document is empty. at 3");
  CHECK(parse_status("x").message() == "failed to parse the request JSON buffer: Invalid value. at 0");
  CHECK(parse_status("{} {}").message() ==
        "failed to parse the request JSON buffer: The document root must not be followed by "
        "other values. at 3");
  CHECK(parse_status("{\"a\":1 \"b\":2}").message().find("Missing a comma or '}' after an object "
                                                          "member.") != std::string::npos);
  CHECK(parse_status("{\"a\" 1}").message().find("Missing a colon after a name of object member.") !=
        std::string::npos);
  CHECK(parse_status("{1:2}").message().find("Missing a name for object member.") !=
        std::string::npos);
  CHECK(parse_status("[1 2]").message().find("Missing a comma or ']' after an array element.") !=
        std::string::npos);
  CHECK(parse_status("\"abc").message().find("Missing a closing quotation mark in string.") !=
        std::string::npos);
  CHECK(parse_status("{} ").is_ok());
}

TEST_CASE("json: nesting limit of 100 is a 400", "[v2][json]") {
  CHECK(parse_status(nested(50)).is_ok());
  CHECK(parse_status(nested(100)).is_ok());
  status deep = parse_status(nested(120));
  CHECK(deep.code() == errc::invalid_arg);
  CHECK(deep.http_status() == 400);
  CHECK(deep.message() == "JSON nesting depth exceeds maximum allowed limit (100)");
}

TEST_CASE("json: NaN and Infinity literals are numbers, strings stay strings", "[v2][json]") {
  auto doc = parse_json(R"({"a":[NaN,Infinity,-Infinity,1],"s":"NaN Infinity"})");
  const auto& a = doc.at("a").as_array();
  status st;
  double d = 0;
  REQUIRE(json_access::as_double(a[0], d, st));
  CHECK(std::isnan(d));
  REQUIRE(json_access::as_double(a[1], d, st));
  CHECK(d == std::numeric_limits<double>::infinity());
  REQUIRE(json_access::as_double(a[2], d, st));
  CHECK(d == -std::numeric_limits<double>::infinity());
  CHECK(doc.at("s").as_string() == "NaN Infinity");
  std::string_view s;
  CHECK_FALSE(json_access::as_string(a[0], s, st));
  CHECK(st.message() == "attempt to access JSON non-string as string");
}

TEST_CASE("json: typed access carries Triton's texts", "[v2][json]") {
  auto doc = parse_json(R"({"s":"x","n":-5,"u":18446744073709551615,"f":1.0,"b":true})");
  const auto& o = doc.as_object();
  status st;
  std::int64_t i = 0;
  std::uint64_t u = 0;
  bool b = false;
  CHECK_FALSE(json_access::as_uint64(o.at("n"), u, st));
  CHECK(st.message() == "attempt to access JSON non-unsigned-integer as unsigned-integer");
  CHECK_FALSE(json_access::as_int64(o.at("u"), i, st));
  CHECK(st.message() == "attempt to access JSON non-signed-integer as signed-integer");
  CHECK_FALSE(json_access::as_int64(o.at("f"), i, st));
  CHECK_FALSE(json_access::as_bool(o.at("s"), b, st));
  CHECK(st.message() == "attempt to access JSON non-boolean as boolean");
  CHECK_FALSE(json_access::as_array(o.at("s"), st));
  CHECK(st.message() == "attempt to access JSON non-array as array");
  CHECK_FALSE(json_access::as_object(o.at("s"), st));
  CHECK(st.message() == "attempt to access JSON non-object as object");
  double d = 0;
  CHECK_FALSE(json_access::as_double(o.at("b"), d, st));
  CHECK(st.message() == "attempt to access JSON non-number as double");
  CHECK_FALSE(json_access::member(o, "zz", st));
  CHECK(st.message() == "attempt to access non-existing object member 'zz'");
  CHECK(st.code() == errc::internal);
  CHECK(json_access::as_uint64(o.at("u"), u, st));
  CHECK(u == std::numeric_limits<std::uint64_t>::max());
}

TEST_CASE("json: tensor data is flattened regardless of nesting", "[v2][json]") {
  status st;
  CHECK(values_of<std::int32_t>(decode("[[1,2],[3,4]]", data_type::int32, 4, st)) ==
        std::vector<std::int32_t>{1, 2, 3, 4});
  CHECK(st.is_ok());
  CHECK(values_of<std::int32_t>(decode("[1,[2,[3]],4]", data_type::int32, 4, st)) ==
        std::vector<std::int32_t>{1, 2, 3, 4});  // ragged nesting is accepted
  CHECK(decode("[true,false]", data_type::bool_, 2, st) == "\x01\x00"s);
  CHECK(values_of<float>(decode("[0.5,1,-2]", data_type::fp32, 3, st)) ==
        std::vector<float>{0.5f, 1.f, -2.f});
  auto nan = values_of<double>(decode("[NaN,-Infinity]", data_type::fp64, 2, st));
  CHECK(std::isnan(nan[0]));
  CHECK(std::isinf(nan[1]));
  CHECK(decode("\"not read\"", data_type::int32, 0, st).empty());  // zero elements: data unread
  CHECK(st.is_ok());
}

TEST_CASE("json: integers outside the data type's range are refused", "[v2][json]") {
  // Triton truncates them in silence (INT8 300 -> 44); a value the type cannot hold is an
  // invalid request here.
  status st;
  CHECK(decode("[300]", data_type::int8, 1, st).empty());
  CHECK(st.http_status() == 400);
  CHECK(st.message() == "Unable to parse 'data': value 300 is out of range for data type INT8");
  decode("[1,-129]", data_type::int8, 2, st);
  CHECK(st.message() == "Unable to parse 'data': value -129 is out of range for data type INT8");
  decode("[2147483648]", data_type::int32, 1, st);
  CHECK(st.message() == "Unable to parse 'data': value 2147483648 is out of range for data type INT32");
  decode("[1099511627776]", data_type::int32, 1, st);
  CHECK(st.message() == "Unable to parse 'data': value 1099511627776 is out of range for data type INT32");
  decode("[65536]", data_type::uint16, 1, st);
  CHECK(st.message() == "Unable to parse 'data': value 65536 is out of range for data type UINT16");
  decode("[4294967301]", data_type::uint32, 1, st);
  CHECK(st.message() == "Unable to parse 'data': value 4294967301 is out of range for data type UINT32");
  // The limits themselves are values.
  CHECK(values_of<std::int8_t>(decode("[127,-128]", data_type::int8, 2, st)) == std::vector<std::int8_t>{127, -128});
  CHECK(st.is_ok());
  CHECK(values_of<std::int32_t>(decode("[2147483647,-2147483648]", data_type::int32, 2, st)) ==
        std::vector<std::int32_t>{2147483647, -2147483647 - 1});
  CHECK(values_of<std::uint64_t>(decode("[18446744073709551615]", data_type::uint64, 1, st)) ==
        std::vector<std::uint64_t>{std::numeric_limits<std::uint64_t>::max()});
}

TEST_CASE("json: tensor data errors", "[v2][json]") {
  status st;
  decode("[1,2,3]", data_type::int32, 2, st);
  CHECK(st.http_status() == 500);
  CHECK(st.message() == "Unable to parse 'data': Shape does not match true shape of 'data' field");
  decode("[1]", data_type::int32, 2, st);
  CHECK(st.message() == "Failed to parse 'data' field: shape does not match true shape");
  decode("[1.0]", data_type::int32, 1, st);
  CHECK(st.message() == "Unable to parse 'data': attempt to access JSON non-signed-integer as signed-integer");
  decode("[-1]", data_type::uint8, 1, st);
  CHECK(st.message() ==
        "Unable to parse 'data': attempt to access JSON non-unsigned-integer as unsigned-integer");
  decode("[1]", data_type::bool_, 1, st);
  CHECK(st.message() == "Unable to parse 'data': attempt to access JSON non-boolean as boolean");
  decode("[\"1\"]", data_type::fp32, 1, st);
  CHECK(st.message() == "Unable to parse 'data': attempt to access JSON non-number as double");
  decode("[1]", data_type::bytes, 1, st);
  CHECK(st.message() ==
        "Unable to parse JSON bytes array: attempt to access JSON non-string as string");
  decode("[NaN]", data_type::bytes, 1, st);
  CHECK(st.message() ==
        "Unable to parse JSON bytes array: attempt to access JSON non-string as string");
  decode("{}", data_type::int32, 1, st);
  CHECK(st.message() == "Unable to parse 'data': attempt to access JSON non-array as array");
  decode("[1]", data_type::fp16, 1, st);
  CHECK(st.http_status() == 400);
  CHECK(st.message() == "receiving FP16 data via JSON is not supported. Please use the binary "
                        "data format for input INPUT0");
  decode("[1]", data_type::bf16, 1, st);
  CHECK(st.message() == "receiving BF16 data via JSON is not supported. Please use the binary "
                        "data format for input INPUT0");
  decode("[1]", data_type::invalid, 1, st);
  CHECK(st.message() == "invalid datatype for input INPUT0");
}

TEST_CASE("json: BYTES data keeps embedded NULs and control bytes", "[v2][json]") {
  status st;
  std::string bytes = decode(R"(["he\u0000llo","",["\u0001\u0002"]])", data_type::bytes, 3, st);
  REQUIRE(st.is_ok());
  CHECK(bytes == "\x06\x00\x00\x00he\0llo\x00\x00\x00\x00\x02\x00\x00\x00\x01\x02"s);

  std::string out;
  REQUIRE(append_json_tensor_data(out, data_type::bytes, std::as_bytes(std::span(bytes)), 3, "o")
              .is_ok());
  CHECK(out == R"(["he\u0000llo","","\u0001\u0002"])");
}

TEST_CASE("json: doubles print as RapidJSON prints them", "[v2][json]") {
  CHECK(print(1.0) == "1.0");
  CHECK(print(-2.0) == "-2.0");
  CHECK(print(0.0) == "0.0");
  CHECK(print(-0.0) == "-0.0");
  CHECK(print(static_cast<double>(0.1f)) == "0.10000000149011612");
  CHECK(print(0.1) == "0.1");
  CHECK(print(123.456) == "123.456");
  CHECK(print(1e21) == "1e21");
  CHECK(print(1e20) == "100000000000000000000.0");
  CHECK(print(1.5e-7) == "1.5e-7");
  CHECK(print(0.000001) == "0.000001");
  CHECK(print(1.2345e300) == "1.2345e300");
  CHECK(print(std::numeric_limits<double>::quiet_NaN()) == "NaN");
  CHECK(print(std::numeric_limits<double>::infinity()) == "Infinity");
  CHECK(print(-std::numeric_limits<double>::infinity()) == "-Infinity");
  // Every printed value reads back to the same double.
  for (double d : {3.141592653589793, 1e-300, 5e-324, 1.7976931348623157e308, 2.5e15}) {
    std::string s = print(d);
    CHECK(parse_json(s).to_number<double>() == d);
  }
}

TEST_CASE("json: long integer arrays at their widest, appended to what is there", "[v2][json]") {
  // Integers are written a block at a time: thousands of the widest values cross many blocks,
  // and the result must equal an element-by-element rendering, after the text already there.
  auto check = [](auto lowest, auto highest, data_type type) {
    using T = decltype(lowest);
    std::vector<T> values;
    for (std::size_t i = 0; i < 3000; ++i) values.push_back(i % 3 == 0 ? lowest : i % 3 == 1 ? highest : T(i % 7));
    std::string expected = "{\"data\":[";
    for (std::size_t i = 0; i < values.size(); ++i) {
      if (i) expected += ',';
      expected += std::to_string(values[i]);
    }
    expected += ']';
    std::string out = "{\"data\":";
    REQUIRE(append_json_tensor_data(out, type, std::as_bytes(std::span(values)),
                                    static_cast<std::int64_t>(values.size()), "O").is_ok());
    CHECK(out == expected);
    std::string empty;
    REQUIRE(append_json_tensor_data(empty, type, {}, 0, "O").is_ok());
    CHECK(empty == "[]");
  };
  check(std::numeric_limits<std::int8_t>::lowest(), std::numeric_limits<std::int8_t>::max(), data_type::int8);
  check(std::numeric_limits<std::int32_t>::lowest(), std::numeric_limits<std::int32_t>::max(), data_type::int32);
  check(std::numeric_limits<std::int64_t>::lowest(), std::numeric_limits<std::int64_t>::max(), data_type::int64);
  check(std::uint64_t{0}, std::numeric_limits<std::uint64_t>::max(), data_type::uint64);
  check(std::uint16_t{0}, std::numeric_limits<std::uint16_t>::max(), data_type::uint16);
}

TEST_CASE("json: output data of every fixed type", "[v2][json]") {
  const std::int32_t ints[] = {1, -2, 3};
  std::string out;
  REQUIRE(append_json_tensor_data(out, data_type::int32, std::as_bytes(std::span(ints)), 3, "O")
              .is_ok());
  CHECK(out == "[1,-2,3]");
  const std::uint8_t flags[] = {0, 1};
  out.clear();
  REQUIRE(append_json_tensor_data(out, data_type::bool_, std::as_bytes(std::span(flags)), 2, "O")
              .is_ok());
  CHECK(out == "[false,true]");
  const float f[] = {0.1f, std::numeric_limits<float>::infinity()};
  out.clear();
  REQUIRE(append_json_tensor_data(out, data_type::fp32, std::as_bytes(std::span(f)), 2, "O").is_ok());
  CHECK(out == "[0.10000000149011612,Infinity]");

  status fp16 = append_json_tensor_data(out, data_type::fp16, {}, 0, "O");
  CHECK(fp16.http_status() == 400);
  CHECK(fp16.message() ==
        "sending FP16 data via JSON is not supported. Please use the binary data format for output");
  status size = append_json_tensor_data(out, data_type::int32, std::as_bytes(std::span(ints)), 4, "O");
  CHECK(size.http_status() == 500);
  CHECK(size.message() == "Failed to write 'data' field: output tensor shape does not match size "
                          "of output for 'O'");
  std::string bad = "\x05\x00\x00\x00" "ab"s;
  status bytes = append_json_tensor_data(out, data_type::bytes, std::as_bytes(std::span(bad)), 1, "O");
  CHECK(bytes.message() == "output tensor shape does not match size of output for 'O'");
}

TEST_CASE("json: base64 of a CUDA IPC handle", "[v2][json]") {
  std::string handle(64, '\0');
  for (int i = 0; i < 64; ++i) handle[static_cast<std::size_t>(i)] = static_cast<char>(i * 3);
  std::string out;
  REQUIRE(base64_decode(base64_encode(handle), out));
  CHECK(out == handle);
  CHECK(base64_encode("ab") == "YWI=");
  REQUIRE(base64_decode("YWI=", out));
  CHECK(out == "ab");
  CHECK_FALSE(base64_decode("YWI", out));
  CHECK_FALSE(base64_decode("Y!I=", out));
}

namespace {
template <class T>
T round_trip(const T& v) {
  return json::value_to<T>(parse_json(json::serialize(json::value_from(v))));
}
}  // namespace

TEST_CASE("json: every message converts both ways", "[v2][json]") {
  server_metadata sm{"triton", "0.1.0", {"classification", "sequence"}};
  CHECK(round_trip(sm) == sm);
  CHECK(json::serialize(json::value_from(sm)) ==
        R"({"name":"triton","version":"0.1.0","extensions":["classification","sequence"]})");

  model_metadata mm{"simple", {"1"}, "simple",
                    {{"INPUT0", data_type::int32, {-1, 16}}},
                    {{"OUTPUT0", data_type::int32, {-1, 16}}}};
  CHECK(round_trip(mm) == mm);
  CHECK(json::serialize(json::value_from(mm.inputs[0])) ==
        R"({"name":"INPUT0","datatype":"INT32","shape":[-1,16]})");

  CHECK(round_trip(repository_index_request{true}) == repository_index_request{true});
  repository_index_entry never{"m", "", "", ""};
  CHECK(json::serialize(json::value_from(never)) == R"({"name":"m"})");
  repository_index_entry unloaded{"m", "1", "UNAVAILABLE", "unloaded"};
  CHECK(round_trip(unloaded) == unloaded);

  repository_load_request load{R"({"max_batch_size":"16"})", {{"1/model.onnx", "\0\x01\x02"s}}};
  CHECK(round_trip(load) == load);
  CHECK(round_trip(repository_unload_request{true}) == repository_unload_request{true});

  system_shm_register_request reg{"", "/input_simple", 0, 128};
  CHECK(round_trip(reg) == reg);
  system_shm_status sst{"input_data", "/input_simple", 0, 128};
  CHECK(round_trip(sst) == sst);
  cuda_shm_register_request creg{"", std::string(64, '\x7f'), 0, 256};
  CHECK(round_trip(creg) == creg);
  cuda_shm_status cst{"cuda_in", 0, 256};
  CHECK(round_trip(cst) == cst);

  model_statistics ms;
  ms.name = "simple";
  ms.version = "1";
  ms.last_inference = 1700000000000;
  ms.inference_count = 3;
  ms.execution_count = 2;
  ms.inference_stats.success = {3, 12345};
  ms.response_stats["0"].success = {1, 2};
  ms.batch_stats.push_back({1, {2, 3}, {4, 5}, {6, 7}});
  ms.memory_usage.push_back({"GPU", 0, 1024});
  statistics_response sr{{ms}};
  CHECK(round_trip(sr) == sr);
  std::string stats_json = json::serialize(json::value_from(ms));
  CHECK(stats_json.find(R"("inference_stats":{"success":{"count":3,"ns":12345},"fail":)") !=
        std::string::npos);

  trace_settings ts;
  ts.settings["trace_level"] = std::vector<std::string>{"TIMESTAMPS", "TENSORS"};
  ts.settings["trace_rate"] = std::vector<std::string>{"1000"};
  ts.settings["trace_count"] = std::nullopt;
  CHECK(round_trip(ts) == ts);
  CHECK(json::serialize(json::value_from(ts)) ==
        R"({"trace_level":["TIMESTAMPS","TENSORS"],"trace_rate":"1000","trace_count":null})");

  log_settings ls;
  ls.log_info = true;
  ls.log_verbose_level = 2;
  ls.log_format = "ISO8601";
  CHECK(round_trip(ls) == ls);
}

TEST_CASE("json: message errors carry the spec's texts", "[v2][json]") {
  auto to_index = [](std::string_view s) {
    return json::value_to<repository_index_request>(parse_json(s));
  };
  try {
    to_index(R"({"ready":"yes"})");
    FAIL();
  } catch (const error& e) {
    CHECK(e.get_status().http_status() == 400);
    CHECK(std::string(e.what()) == "Invalid value for 'ready': expected a boolean");
  }
  auto reg = [](std::string_view s) {
    return json::value_to<system_shm_register_request>(parse_json(s));
  };
  CHECK_THROWS_WITH(reg(R"({"byte_size":1})"), "Shared memory register request has no 'key' field");
  CHECK_THROWS_WITH(reg(R"({"key":"/k"})"), "Shared memory register request has no 'byte_size' field");
  CHECK_THROWS_WITH(reg(R"({"key":1,"byte_size":1})"),
                    "Unable to parse 'key': attempt to access JSON non-string as string");
  auto creg = [](std::string_view s) {
    return json::value_to<cuda_shm_register_request>(parse_json(s));
  };
  CHECK_THROWS_WITH(creg(R"({"device_id":0,"byte_size":1})"),
                    "Shared memory register request has no 'raw_handle' field");
  CHECK_THROWS_WITH(creg(R"({"raw_handle":{"b64":"YWI="},"device_id":0,"byte_size":1})"),
                    "'raw_handle' must be a valid base64 encoded cudaIpcMemHandle_t");
  // Triton's C++ client (libb64) breaks the 64-byte handle's base64 into lines.
  const std::string handle(64, '\x5a');
  std::string wrapped = base64_encode(handle);
  wrapped.insert(72, "\n").insert(20, "\r\n").insert(4, " ");
  const auto got = creg(R"({"raw_handle":{"b64":")" + json::serialize(json::value(wrapped)).substr(1) +
                        R"(},"device_id":0,"byte_size":64})");
  CHECK(got.raw_handle == handle);
  std::string decoded;
  CHECK(base64_decode("YW\nJj\n", decoded));
  CHECK(decoded == "abc");
  CHECK_FALSE(base64_decode("YWJ", decoded));
  CHECK_THROWS_WITH(json::value_to<repository_load_request>(
                        parse_json(R"({"parameters":{"other":"x"}})")),
                    "unexpected error on creating Triton parameter");
  // Upstream quirk: a non-bool unload_dependents is ignored.
  CHECK_FALSE(json::value_to<repository_unload_request>(
                  parse_json(R"({"parameters":{"unload_dependents":"yes"}})"))
                  .unload_dependents);
}

TEST_CASE("json: strings are written as Boost.JSON's serializer writes them", "[v2][json]") {
  // Every byte value, alone and between plain text, plus a longer name with a quote late in it:
  // the shortcut for text that needs no escaping and the serializer agree byte for byte.
  std::vector<std::string> texts = {"", "OUTPUT0", "model_name", std::string(300, 'x') + "\"end",
                                    "caf\xc3\xa9", "\xff\xfe"};
  for (int c = 0; c < 256; ++c) {
    texts.emplace_back(1, static_cast<char>(c));
    texts.push_back("in" + std::string(1, static_cast<char>(c)) + "put");
  }
  int same = 0;
  for (const auto& t : texts) {
    std::string ours = "prefix:";
    append_json_string(ours, t);
    same += ours == "prefix:" + json::serialize(json::string_view(t.data(), t.size()));
  }
  CHECK(same == static_cast<int>(texts.size()));
  std::string escaped;
  append_json_string(escaped, "a\"b\\c\nd\x01");
  CHECK(escaped == R"("a\"b\\c\nd\u0001")");
}
