// SPDX-License-Identifier: Apache-2.0
#include <inferwire/v2/fast_request.hpp>

#include <catch2/catch.hpp>

#include <string>
#include <vector>

using namespace inferwire;
using namespace inferwire::v2;

namespace {

struct outcome {
  bool fast = false;  ///< the fast path decoded it
  bool same = false;  ///< and the full decoder agrees (succeeds with an equal request)
};

outcome compare(const std::string& header, std::size_t binary_bytes, const codec_limits& limits = {}) {
  std::string body = header;
  for (std::size_t i = 0; i < binary_bytes; ++i) body += static_cast<char>('a' + i % 26);
  infer_request fast;
  outcome o;
  o.fast = try_decode_infer_request_fast(body, header.size(), limits, fast);
  status st;
  infer_request full = decode_infer_request(body, header.size(), "m", st, limits);
  o.same = !st && fast == full;
  return o;
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
