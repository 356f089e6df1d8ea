// SPDX-License-Identifier: Apache-2.0
#include <inferwire/v2/fast_request.hpp>

#include <catch2/catch.hpp>

#include <boost/json/basic_parser_impl.hpp>

#include <algorithm>
#include <cstdio>
#include <optional>
#include <random>
#include <string>
#include <vector>

using namespace inferwire;
using namespace inferwire::v2;
namespace reader = inferwire::v2::detail;

namespace {

struct outcome {
  bool fast = false;  ///< the fast path decoded it
  bool same = false;  ///< and the full decoder agrees (succeeds with an equal request)
  bool plain = false;  ///< the plain reader read it (else Boost.JSON's parser did, or none)
};

// The fast path, and each of its two readers alone, against the full decoder: whatever one of
// them decodes, the full decoder decodes the same; where the plain reader decides (accepts or
// refuses), Boost.JSON's parser decides the same.
outcome compare(const std::string& header, std::size_t binary_bytes, const codec_limits& limits = {}) {
  std::string body = header;
  for (std::size_t i = 0; i < binary_bytes; ++i) body += static_cast<char>('a' + i % 26);
  infer_request fast, plain, sax;
  outcome o;
  o.fast = try_decode_infer_request_fast(body, header.size(), limits, fast);
  const auto read = reader::decode_fast_plain(body, header.size(), limits, plain);
  const bool by_sax = reader::decode_fast_boost(body, header.size(), limits, sax);
  o.plain = read == reader::json_reading::accepted;
  status st;
  infer_request full = decode_infer_request(body, header.size(), "m", st, limits);
  o.same = !st && fast == full;
  if (read != reader::json_reading::unsupported) {
    CHECK(by_sax == o.plain);
    if (o.plain) CHECK(plain == full);
  }
  if (by_sax) CHECK((!st && sax == full));
  CHECK(o.fast == (o.plain || by_sax));
  return o;
}

// Every event a reader reports, as text, to compare the plain reader with Boost.JSON's parser.
struct recorder : reader::sax_handler_base {
  std::string log;
  /// Refuse the event with this number (counted from 1), 0 for none.
  int refuse_at = 0;
  int events = 0;
  bool note(const std::string& what) {
    log += what + ";";
    return ++events != refuse_at;
  }
  bool on_document_begin(ec_t&) { return note("doc"); }
  bool on_document_end(ec_t&) { return note("/doc"); }
  bool on_object_begin(ec_t&) { return note("{"); }
  bool on_object_end(std::size_t n, ec_t&) { return note("}" + std::to_string(n)); }
  bool on_array_begin(ec_t&) { return note("["); }
  bool on_array_end(std::size_t n, ec_t&) { return note("]" + std::to_string(n)); }
  bool on_key_part(sv s, std::size_t, ec_t&) { return note("keypart " + std::string(s)); }
  bool on_key(sv s, std::size_t n, ec_t&) { return note("key " + std::string(s) + " " + std::to_string(n)); }
  bool on_string_part(sv s, std::size_t, ec_t&) { return note("strpart " + std::string(s)); }
  bool on_string(sv s, std::size_t n, ec_t&) { return note("str " + std::string(s) + " " + std::to_string(n)); }
  bool on_number_part(sv s, ec_t&) { return note("numpart " + std::string(s)); }
  bool on_int64(std::int64_t v, sv s, ec_t&) { return note("i " + std::to_string(v) + " " + std::string(s)); }
  bool on_uint64(std::uint64_t v, sv s, ec_t&) { return note("u " + std::to_string(v) + " " + std::string(s)); }
  bool on_double(double v, sv s, ec_t&) {
    char bits[64];
    std::snprintf(bits, sizeof bits, "%a", v);  // every bit of it
    return note("d " + std::string(bits) + " " + std::string(s));
  }
  bool on_bool(bool b, ec_t&) { return note(b ? "true" : "false"); }
  bool on_null(ec_t&) { return note("null"); }
  bool on_comment_part(sv, ec_t&) { return note("comment"); }
  bool on_comment(sv, ec_t&) { return note("comment"); }
};

// The plain reader's verdict and events for `text`, and Boost.JSON's parser's, with the
// recorder refusing event `refuse_at`.
struct two_readings {
  reader::json_reading plain;
  std::string plain_log;
  bool sax_ok;
  std::string sax_log;
};
two_readings read_both(std::string_view text, int refuse_at = 0) {
  two_readings r;
  recorder a;
  a.refuse_at = refuse_at;
  r.plain = reader::read_plain_json(text, a);
  r.plain_log = a.log;
  boost::json::parse_options options;
  options.max_depth = 32;
  boost::json::basic_parser<recorder> p(options);
  p.handler().refuse_at = refuse_at;
  boost::json::error_code ec;
  const std::size_t n = p.write_some(false, text.data(), text.size(), ec);
  r.sax_ok = !ec && n == text.size() && p.done();
  r.sax_log = p.handler().log;
  return r;
}

const std::string in0 = R"({"name":"INPUT0","shape":[1,16],"datatype":"INT32","parameters":{"binary_data_size":64}})";
const std::string in1 = R"({"name":"INPUT1","shape":[1,16],"datatype":"INT32","parameters":{"binary_data_size":64}})";
const std::string outs = R"("outputs":[{"name":"OUTPUT0","parameters":{"binary_data":true}},{"name":"OUTPUT1"}])";

}  // namespace

TEST_CASE("fast request path: the common shapes decode as the full decoder decodes them", "[v2][binary]") {
  const std::vector<std::pair<std::string, std::size_t>> accepted = {
      {R"({"inputs":[)" + in0 + "," + in1 + "]," + outs + "}", 128},
      {R"({"id":"req-1",)" + outs + R"(,"inputs":[)" + in1 + "," + in0 + "]}", 128},
      {R"({"inputs":[)" + in0 + "]}", 64},
      {R"({"inputs":[]})", 0},
      {R"({"model_name":{"x":[1,2,{"y":null}]},"inputs":[)" + in0 + R"(],"z":-1.5,"w":"s"})", 64},
      {R"({"inputs":[{"parameters":{"binary_data_size":3},"shape":[3],"unknown":[true],"datatype":"UINT8","name":"A"}]})", 3},
      {R"({"inputs":[{"name":"Aqé","shape":[18446744073709551615,0],"datatype":"NOPE","parameters":{"binary_data_size":0}}]})", 0},
      {R"({"parameters":{"binary_data_output":true},"inputs":[)" + in0 + "," + in1 + "]}", 128},
      {R"({"parameters":{"sequence_id":"s-1","sequence_start":true,"sequence_end":false,"priority":3,)"
       R"("timeout":0,"c1":"v","c2":-4,"c3":18446744073709551615,"c4":2.5,"c5":false},"inputs":[]})", 0},
      {R"({"parameters":{"sequence_id":42},"inputs":[]})", 0},
      {R"( { "inputs" : [ ] , "outputs" : [ { "name" : "O" , "parameters" : { "binary_data" : false } } ] } )", 0},
      // tensors in JSON, flat and nested, at every width they are read at
      {R"({"inputs":[{"name":"A","shape":[1,4],"datatype":"INT32","data":[1,-2,2147483647,-2147483648]},)"
       R"({"name":"B","datatype":"FP32","shape":[2,2],"data":[[1.5,-2],[3e38,18446744073709551615]]}]})", 0},
      {R"({"inputs":[{"name":"A","shape":[2],"datatype":"UINT8","data":[0,255]},)"
       R"({"name":"B","shape":[2],"datatype":"INT8","data":[-128,127]},)"
       R"({"name":"C","shape":[2],"datatype":"UINT16","data":[[0],[65535]]},)"
       R"({"name":"D","shape":[2],"datatype":"INT16","data":[-32768,32767]},)"
       R"({"name":"E","shape":[1],"datatype":"UINT32","data":[4294967295]},)"
       R"({"name":"F","shape":[2],"datatype":"UINT64","data":[18446744073709551615,0]},)"
       R"({"name":"G","shape":[2],"datatype":"INT64","data":[-9223372036854775808,9223372036854775807]},)"
       R"({"name":"H","shape":[3],"datatype":"FP64","data":[0.1,-0.0,1e308]}],"outputs":[{"name":"O"}]})", 0},
      {R"({"inputs":[{"name":"A","shape":[2],"datatype":"INT32","data":[1,2],"parameters":{}},)" + in0 + "]}", 64},
  };
  int fast = 0, same = 0;
  for (const auto& [header, bytes] : accepted) {
    auto o = compare(header, bytes);
    fast += o.fast;
    same += o.fast && o.same;
  }
  CHECK(fast == static_cast<int>(accepted.size()));
  CHECK(same == fast);

  // Escapes: the parser may hand such text over in pieces (declined) or whole; whole, it must
  // come out decoded, as the full decoder decodes it.
  for (const std::string header : {R"({"parameters":{"\u0061b":"\u0063d","x\ty":1},"inputs":[]})",
                                   R"({"parameters":{"\u0061b":1,"\u0063":true},"inputs":[]})",
                                   R"({"id":"\u0041\n","inputs":[{"name":"\u0049N","shape":[1],"datatype":"INT8","parameters":{"binary_data_size":1}}]})"}) {
    auto o = compare(header, header.find("INT8") == std::string::npos ? 0 : 1);
    CHECK((!o.fast || o.same));
  }
}

TEST_CASE("fast request path: everything else is left to the full decoder", "[v2][binary]") {
  const std::vector<std::pair<std::string, std::size_t>> declined = {
      // what the full decoder accepts, in forms the fast path does not read
      {R"({"inputs":[)" + in0 + R"(],"parameters":{"c":null}})", 64},
      {R"({"inputs":[)" + in0 + R"(],"parameters":{"c":[1]}})", 64},
      {R"({"inputs":[)" + in0 + R"(],"parameters":{"c":{"d":1}}})", 64},
      {R"({"inputs":[{"name":"A","data":[1,2],"shape":[2],"datatype":"INT32"}]})", 0},  // data before its type
      {R"({"inputs":[{"name":"A","shape":[2],"datatype":"BOOL","data":[true,false]}]})", 0},
      {R"({"inputs":[{"name":"A","shape":[1],"datatype":"BYTES","data":["x"]}]})", 0},
      {R"({"inputs":[{"name":"A","shape":[2],"datatype":"FP32","data":[1,"NaN"]}]})", 0},
      {R"({"inputs":[{"name":"A","shape":[0],"datatype":"INT32","data":[]}]})", 0},  // data not read
      {R"({"inputs":[{"name":"A","shape":[2],"datatype":"INT32","parameters":{"binary_data_size":8,"k":"v"}}]})", 8},
      {R"({"inputs":[{"name":"A","shape":[2],"datatype":"INT32","parameters":{"shared_memory_region":"r","shared_memory_byte_size":8}}]})", 0},
      {R"({"inputs":[)" + in0 + R"(],"outputs":[{"name":"O","parameters":{"classification":2}}]})", 64},
      {R"({"inputs":[)" + in0 + R"(],"x":NaN})", 64},
      {R"({"inputs":[{"name":"A\"q\u00e9","shape":[1],"datatype":"INT32","parameters":{"binary_data_size":0}}]})", 0},
      // errors, each with its own text from the full decoder
      {R"({"parameters":{"triton_x":1},"inputs":[]})", 0},
      {R"({"parameters":{"priority":-1},"inputs":[]})", 0},
      {R"({"parameters":{"priority":1.5},"inputs":[]})", 0},
      {R"({"parameters":{"timeout":"1"},"inputs":[]})", 0},
      {R"({"parameters":{"binary_data_output":1},"inputs":[]})", 0},
      {R"({"parameters":{"sequence_start":"true"},"inputs":[]})", 0},
      {R"({"parameters":{"sequence_id":true},"inputs":[]})", 0},
      {R"({"parameters":{"a":1,"a":2},"inputs":[]})", 0},
      {R"({"parameters":{},"parameters":{},"inputs":[]})", 0},
      {R"({"inputs":[)" + in0 + "]}", 63},
      {R"({"inputs":[)" + in0 + "]}", 65},
      {R"({"inputs":[{"name":"A","shape":[-1],"datatype":"INT32","parameters":{"binary_data_size":0}}]})", 0},
      {R"({"inputs":[{"name":"A","shape":[1.0],"datatype":"INT32","parameters":{"binary_data_size":0}}]})", 0},
      {R"({"inputs":[{"name":"A","shape":[1],"datatype":"INT32","parameters":{"binary_data_size":0},"name":"B"}]})", 0},
      {R"({"inputs":[{"shape":[1],"datatype":"INT32","parameters":{"binary_data_size":0}}]})", 0},
      {R"({"inputs":[{"name":1,"shape":[1],"datatype":"INT32","parameters":{"binary_data_size":0}}]})", 0},
      {R"({"inputs":[)" + in0 + R"(],"outputs":[{"name":"O","parameters":{"binary_data":1}}]})", 64},
      {R"({"outputs":[]})", 0},
      {R"({"inputs":{}})", 0},
      {R"([])", 0},
      {R"({"inputs":[]} x)", 0},
      {R"({"inputs":[])", 0},
      // JSON tensors the decoder refuses: a count off the shape, values out of range or of the
      // wrong kind, data with a binary size, an unknown type
      {R"({"inputs":[{"name":"A","shape":[3],"datatype":"INT32","data":[1,2]}]})", 0},
      {R"({"inputs":[{"name":"A","shape":[1],"datatype":"INT32","data":[1,2]}]})", 0},
      // a shape far larger than its data (what is reserved for the data is bounded by the
      // header's text, not by the shape), and one whose size overflows
      {R"({"inputs":[{"name":"A","shape":[1000000000],"datatype":"FP64","data":[1,2]}]})", 0},
      {R"({"inputs":[{"name":"A","shape":[4611686018427387904,4],"datatype":"INT64","data":[1]}]})", 0},
      {R"({"inputs":[{"name":"A","shape":[1],"datatype":"INT8","data":[128]}]})", 0},
      {R"({"inputs":[{"name":"A","shape":[1],"datatype":"INT16","data":[-32769]}]})", 0},
      {R"({"inputs":[{"name":"A","shape":[1],"datatype":"UINT8","data":[-1]}]})", 0},
      {R"({"inputs":[{"name":"A","shape":[1],"datatype":"UINT32","data":[4294967296]}]})", 0},
      {R"({"inputs":[{"name":"A","shape":[1],"datatype":"INT64","data":[9223372036854775808]}]})", 0},
      {R"({"inputs":[{"name":"A","shape":[1],"datatype":"INT32","data":[1.0]}]})", 0},
      {R"({"inputs":[{"name":"A","shape":[1],"datatype":"INT32","data":[true]}]})", 0},
      {R"({"inputs":[{"name":"A","shape":[1],"datatype":"INT32","data":[{"a":1}]}]})", 0},
      {R"({"inputs":[{"name":"A","shape":[1],"datatype":"INT32","data":1}]})", 0},
      {R"({"inputs":[{"name":"A","shape":[1],"datatype":"NOPE","data":[1]}]})", 0},
      {R"({"inputs":[{"name":"A","shape":[-1],"datatype":"INT32","data":[1]}]})", 0},
      {R"({"inputs":[{"name":"A","shape":[1],"datatype":"INT32","data":[1],"data":[2]}]})", 0},
      {R"({"inputs":[{"name":"A","shape":[1],"datatype":"INT32","data":[1],"parameters":{"binary_data_size":4}}]})", 4},
  };
  int fast = 0;
  for (const auto& [header, bytes] : declined) fast += compare(header, bytes).fast;
  CHECK(fast == 0);

  // The limits: more tensors or dimensions than allowed are the full decoder's errors.
  codec_limits few;
  few.max_tensors = 1;
  few.max_dims = 1;
  CHECK_FALSE(compare(R"({"inputs":[)" + in0 + "," + in1 + "]}", 128, few).fast);
  CHECK_FALSE(compare(R"({"inputs":[)" + in0 + "]}", 64, few).fast);
  few.max_dims = 2;
  CHECK(compare(R"({"inputs":[)" + in0 + "]}", 64, few).fast);
  few.max_parameters = 1;
  CHECK(compare(R"({"parameters":{"a":1},"inputs":[]})", 0, few).fast);
  CHECK_FALSE(compare(R"({"parameters":{"a":1,"b":2},"inputs":[]})", 0, few).fast);
}

TEST_CASE("fast request path: the plain reader reports what Boost.JSON's parser reports", "[v2][binary]") {
  // Plain JSON: read by the plain reader, with the same events in the same order.
  const std::vector<std::string> plain = {
      R"({"inputs":[{"name":"INPUT0","datatype":"INT32","shape":[1,16],"data":[0,1,-2,3]}]})",
      " \t\r\n{ \"a\" : [ 1 , -0 , 0 , 123456789012345678 , -123456789012345678 ] , \"b\" : { } , \"c\" : [ ] } \n",
      R"({"a":true,"b":false,"c":null,"d":"","e":"x y~!","f":[[[]],[{}],{"g":[{"h":[]}]}]})",
      R"([1,2,3])", R"("just a string")", "0", "-7", "true", "null",
      R"({"a":{"a":{"a":{"a":{"a":{"a":{"a":{"a":{"a":{"a":{"a":{"a":[[[[[[[[[[[1]]]]]]]]]]]}}}}}}}}}}}})",
      // fractions and exponents, near the end of the text and far from it (the parser reads
      // numbers two ways), up to 15 digits and powers of ten within 1e-22..1e22
      R"({"a":1.5})", R"({"a":1e3})", R"({"a":1E3})", R"({"a":-0.0})", "-0e5", "0.25", "[0.1,0.2,0.3,-1.75,3.4028234]",
      R"([123456789.012345,-0.00000000000001,1.5e-7,2E+22,-9e-22,0.1e1,12345678901234.5e-20,7e0,1.0,100.0e-2])",
      "[0.1,0.2,0.3,0.4,0.5,0.6,0.7,0.8,0.9,1.1,1.2,1.3,1.4,1.5,1.6,1.7,1.8,1.9,2.1,2.2,2.3,2.4,2.5,2.6,2.7,"
      "3.14159265358979,2.71828182845904,1.41421356237309,0.333333333333333,6.02214076e-14]",
      // runs of numbers (read apart from the general path): compact, with json.dumps' ", ",
      // with other space, ended by another value, nested, and as the last member
      "[1,2,3]", "[1, 2, 3]", "[1,  2 ,3 ,\n-4,\t5]", R"([1, "a", 2, true, 3, [4, 5], 6, {}, 7])",
      R"({"data": [[1, 2], [3, 4]], "x": [0.5, -1e3, 0, -0]})", "[ -1 , 2 ]", "[7]",
  };
  for (const auto& text : plain) {
    INFO(text);
    const auto r = read_both(text);
    CHECK(r.plain == reader::json_reading::accepted);
    CHECK(r.sax_ok);
    CHECK(r.plain_log == r.sax_log);
    // A refusal anywhere stops both readers at the same event (but the document's end, whose
    // answer Boost.JSON's parser does not look at; the request handler never refuses it).
    const int events = static_cast<int>(std::count(r.plain_log.begin(), r.plain_log.end(), ';'));
    for (int k = 1; k < events; ++k) {
      const auto refused = read_both(text, k);
      CHECK(refused.plain == reader::json_reading::refused);
      CHECK_FALSE(refused.sax_ok);
      CHECK(refused.plain_log == refused.sax_log);
    }
  }
  // Valid JSON that is not plain, and text that is not JSON: left to Boost.JSON's parser.
  const std::vector<std::string> other = {
      "0.1234567890123456", "1234567890123456.0", "1234567890123456e1", "1e23", "1e-23", "1.5e300", "1e0001",
      "1234567890123456789", "-1234567890123456789",
      "18446744073709551615", R"({"a\"b":1})", R"({"a":"\u0041"})", "{\"\xc3\xa9\":1}",
      std::string(reader::plain_json_depth + 1, '[') + std::string(reader::plain_json_depth + 1, ']'),
      // not JSON
      "", " ", "{", "}", "[", "[1,]", "[,1]", "{\"a\"}", "{\"a\":}", "{\"a\" 1}", "{\"a\":1,}", "{,}", "{1:2}",
      "01", "-", "-a", "1-", "1.", ".5", "+1", "tru", "truex", "nul", "[1 2]", "\"abc", "\"a\nb\"", "[1]]", "[1]x",
      "{\"a\":1}{}", "NaN", "[true false]", "\"\x01\"",
      // broken inside a run of numbers
      "[1,2", "[1,2,", "[1, 2,]", "[1,-]", "[1,2 3]", "[1,02]", "[1,2.]", "[1,2]x", "[1, 2, 3",
  };
  for (const auto& text : other) {
    INFO(text);
    recorder a;
    CHECK(reader::read_plain_json(text, a) == reader::json_reading::unsupported);
  }
}

TEST_CASE("fast request path: requests of plain JSON take the plain reader", "[v2][binary]") {
  CHECK(compare(R"({"inputs":[)" + in0 + "," + in1 + "]," + outs + "}", 128).plain);
  CHECK(compare(R"({"inputs":[{"name":"INPUT0","datatype":"INT32","shape":[1,4],"data":[1,-2,3,4]}]})", 0).plain);
  CHECK(compare(R"({"parameters":{"sequence_id":"s","sequence_start":true,"priority":2,"c":-3},"inputs":[]})", 0).plain);
  CHECK(compare(R"({"inputs":[{"name":"A","datatype":"FP32","shape":[2],"data":[1.5,-2e-3]}]})", 0).plain);
  // More digits, a larger power or a byte past ASCII: Boost.JSON's parser reads it, with the same result.
  for (const std::string header : {R"({"inputs":[{"name":"A","datatype":"FP64","shape":[2],"data":[1.5,0.1234567890123456]}]})",
                                   R"({"id":"x","inputs":[],"z":1e30})", R"({"id":"é","inputs":[]})"}) {
    INFO(header);
    const auto o = compare(header, 0);
    CHECK_FALSE(o.plain);
    CHECK(o.fast);
    CHECK(o.same);
  }
}

namespace {
// What the memo gives for `next` after the plain reader read `first` into it: nothing, or a
// request, which must then be the full decoder's result for `next`.
std::optional<infer_request> recall_after(const std::string& first, const std::string& next,
                                          const codec_limits& limits = {}) {
  reader::json_request_memo memo;
  infer_request seen;
  REQUIRE(try_decode_infer_request_fast(first, first.size(), limits, seen, &memo));
  status first_st;  // (remembering lends the data out and takes it back)
  CHECK(seen == decode_infer_request(first, first.size(), "m", first_st, limits));
  infer_request got;
  if (!memo.recall(next, next.size(), limits, got)) return std::nullopt;
  status st;
  const infer_request full = decode_infer_request(next, next.size(), "m", st, limits);
  CHECK_FALSE(st);
  CHECK(got == full);
  return got;
}

std::string two_inputs(const std::string& data0, const std::string& data1, const std::string& type = "INT32",
                       const std::string& shape = "[1,4]") {
  return R"({"id":"a","inputs":[{"name":"INPUT0","datatype":")" + type + R"(","shape":)" + shape +
         R"(,"data":)" + data0 + R"(},{"name":"INPUT1","datatype":")" + type + R"(","shape":)" + shape +
         R"(,"data":)" + data1 + R"(}],"outputs":[{"name":"OUTPUT0","parameters":{"binary_data":true}}]})";
}
}  // namespace

TEST_CASE("fast request path: a header that repeats the last one but for its data arrays reads only those",
          "[v2][binary]") {
  const std::string first = two_inputs("[1,2,3,4]", "[5,6,7,8]");
  // New numbers, of other widths, with space anywhere between tokens.
  for (const auto& [d0, d1] : std::vector<std::pair<std::string, std::string>>{
           {"[1,2,3,4]", "[5,6,7,8]"},
           {"[-2147483648,2147483647,0,-0]", "[10, 20, 30, 40]"},
           {"[ 1 ,\n2 ,\t3 , 4 ]", "[123456789,-1,7,0]"},
           // INT32's own reading takes up to 9 digits; 10 go through read_number.
           {"[999999999,-999999999,1000000000,-1000000000]", "[0,-0,9,-9]"}}) {
    INFO(d0 << " " << d1);
    const auto got = recall_after(first, two_inputs(d0, d1));
    REQUIRE(got);
    CHECK(got->inputs.size() == 2);
    CHECK(got->inputs[0].data.size() == 16);
  }
  // Floating types, as the plain reader reads their numbers.
  CHECK(recall_after(two_inputs("[1.5,2,3,4]", "[0,0,0,0]", "FP32"), two_inputs("[0.1,-2e-3,3E2,4]", "[1,1,1,1.25]", "FP32")));
  CHECK(recall_after(two_inputs("[1.5,2,3,4]", "[0,0,0,0]", "FP64"), two_inputs("[0.1,-2e-3,3E2,4]", "[1,1,1,1.25]", "FP64")));
  CHECK(recall_after(two_inputs("[1,2,3,4]", "[0,0,0,0]", "UINT8"), two_inputs("[255,0,1,2]", "[3,4,5,6]", "UINT8")));

  // Everything else is left to the fast path: another header outside the arrays, another
  // count, a nested array, a number out of range or of the wrong kind, a number the plain
  // reader leaves to Boost.JSON, text after the header, a broken array.
  for (const std::string& next : {
           two_inputs("[1,2,3]", "[5,6,7,8]"), two_inputs("[1,2,3,4,5]", "[5,6,7,8]"),
           two_inputs("[[1,2],[3,4]]", "[5,6,7,8]"), two_inputs("[1,2,3,2147483648]", "[5,6,7,8]"),
           two_inputs("[1,2,3,4.5]", "[5,6,7,8]"), two_inputs("[1,2,3,1e30]", "[5,6,7,8]"),
           two_inputs("[1,2,3,01]", "[5,6,7,8]"), two_inputs("[1,2,3,4,]", "[5,6,7,8]"),
           two_inputs("[1,2,3,-]", "[5,6,7,8]"), two_inputs("[1,2,3,00]", "[5,6,7,8]"),
           two_inputs("[1,2,3,-01]", "[5,6,7,8]"), two_inputs("[1,2,3,1E2]", "[5,6,7,8]"),
           two_inputs("[1,2,3,-1.0]", "[5,6,7,8]"), two_inputs("[1,2,3,-2147483649]", "[5,6,7,8]"),
           two_inputs("[1,2,3 4]", "[5,6,7,8]"), two_inputs("[1,2,3,4", "[5,6,7,8]"),
           two_inputs("[1,2,3,\"4\"]", "[5,6,7,8]"), two_inputs("[1,2,3,null]", "[5,6,7,8]"),
           two_inputs("[1,2,3,4]", "[5,6,7,8]", "INT64"), two_inputs("[1,2,3,4]", "[5,6,7,8]", "INT32", "[4,1]"),
           two_inputs("[1,2,3,4]", "[5,6,7,8]") + " ", two_inputs("[1,2,3,4]", "[5,6,7,8]").substr(1),
           std::string("{}"), std::string(""), std::string("[1,2,3,4]")}) {
    INFO(next);
    CHECK_FALSE(recall_after(first, next));
  }
  // Not remembered: a header with nested data, one with an input in binary, and under other
  // limits the memo gives nothing.
  {
    reader::json_request_memo memo;
    infer_request r;
    const std::string nested = two_inputs("[[1,2],[3,4]]", "[5,6,7,8]", "INT32", "[2,2]");
    REQUIRE(try_decode_infer_request_fast(nested, nested.size(), {}, r, &memo));
    CHECK_FALSE(memo.recall(nested, nested.size(), {}, r));
    const std::string mixed = R"({"inputs":[{"name":"A","datatype":"INT32","shape":[1],"data":[1]},)" + in0 + "]}";
    std::string body = mixed + std::string(64, 'x');
    REQUIRE(try_decode_infer_request_fast(body, mixed.size(), {}, r, &memo));
    CHECK_FALSE(memo.recall(body, mixed.size(), {}, r));
    REQUIRE(try_decode_infer_request_fast(first, first.size(), {}, r, &memo));
    CHECK(memo.recall(first, first.size(), {}, r));
    codec_limits other;
    other.max_input_size = 1000;
    CHECK_FALSE(memo.recall(first, first.size(), other, r));
    CHECK_FALSE(memo.recall(first + "  ", first.size(), {}, r));  // bytes after the header
  }
  // The values themselves: what the arrays say, in the tensor's bytes.
  const auto got = recall_after(first, two_inputs("[-1,0,1,2]", "[3,4,5,2147483647]"));
  REQUIRE(got);
  const auto* v = reinterpret_cast<const std::int32_t*>(got->inputs[1].data.bytes().data());
  CHECK(v[3] == 2147483647);
}

TEST_CASE("fast request path: the memo reads every data array as the plain reader would", "[v2][binary]") {
  // Headers of one skeleton with random numbers, spacing and types: the memo recalls a header
  // exactly when the plain reader accepts it, and gives what the full decoder gives.
  std::mt19937_64 rng(20261128);
  auto pick = [&](std::size_t n) { return static_cast<std::size_t>(rng() % n); };
  const std::vector<std::string> types = {"INT8", "INT16", "INT32", "INT64", "UINT8", "UINT16",
                                          "UINT32", "UINT64", "FP32", "FP64"};
  const std::vector<std::string> numbers = {
      "0", "-0", "1", "-1", "127", "128", "-129", "255", "256", "32767", "-32769", "65535", "65536",
      "2147483647", "2147483648", "-2147483649", "4294967295", "4294967296", "999999999999999999",
      "-999999999999999999", "1234567890123456789", "0.5", "-2.25", "1e3", "1E-3", "3.4028235e38", "1e22",
      "1e23", "0.1234567890123456", "01", "1.", "-", "\"1\"", "true"};
  const std::vector<std::string> spaces = {"", "", "", " ", "  ", "\n", "\t "};
  auto array = [&](std::size_t count) {
    std::string a = "[" + spaces[pick(spaces.size())];
    for (std::size_t i = 0; i < count; ++i) {
      if (i) a += spaces[pick(spaces.size())] + "," + spaces[pick(spaces.size())];
      a += pick(4) == 0 ? numbers[pick(numbers.size())] : std::to_string(static_cast<int>(pick(200)) - 100);
    }
    return a + spaces[pick(spaces.size())] + "]";
  };
  int recalled = 0;
  for (int round = 0; round < 300; ++round) {
    const std::string type0 = types[pick(types.size())], type1 = types[pick(types.size())];
    const std::size_t n0 = 1 + pick(6), n1 = 1 + pick(6);
    auto header = [&] {
      return R"({"inputs": [{"name": "A", "datatype": ")" + type0 + R"(", "shape": [)" + std::to_string(n0) +
             R"(], "data": )" + array(n0) + R"(}, {"name": "B", "datatype": ")" + type1 + R"(", "shape": [)" +
             std::to_string(n1) + R"(], "data": )" + array(n1) + "}]}";
    };
    reader::json_request_memo memo;
    infer_request seen;
    const std::string first = header();
    // (Remembered when the plain reader reads it; Boost.JSON's parser reads no positions.)
    if (reader::decode_fast_plain(first, first.size(), {}, seen, &memo) != reader::json_reading::accepted) continue;
    for (int k = 0; k < 20; ++k) {
      const std::string next = header();
      INFO(first << "\n" << next);
      infer_request got, plain;
      const bool hit = memo.recall(next, next.size(), {}, got);
      // The same skeleton (spacing outside the arrays included) with flat arrays: recalled
      // exactly where the plain reader accepts it. (Nested data the memo leaves to it.)
      const bool accepted = reader::decode_fast_plain(next, next.size(), {}, plain) == reader::json_reading::accepted;
      CHECK(hit == accepted);
      if (hit) {
        ++recalled;
        status st;
        const infer_request full = decode_infer_request(next, next.size(), "m", st);
        CHECK_FALSE(st);
        CHECK(got == full);
      }
    }
  }
  CHECK(recalled > 300);  // (432 with this seed: the test is not vacuous)
}
