// SPDX-License-Identifier: Apache-2.0
// Builds the request a client sends to the `simple` model with binary tensor data, prints the
// HTTP request it would send, then decodes it the way a server does and checks the round trip.
//
//   example_binary_request [--help]
#include <inferwire/v2.hpp>

#include <cstdint>
#include <cstdio>
#include <cstring>
#include <numeric>
#include <vector>

int main(int argc, char** argv) {
  if (argc > 1 && std::strcmp(argv[1], "--help") == 0) {
    std::puts("usage: example_binary_request\n"
              "Encodes an infer request for the 'simple' model (two INT32 [1,16] inputs) with\n"
              "binary tensor data, prints its HTTP form, and decodes it again.");
    return 0;
  }
  using namespace inferwire;

  std::vector<std::int32_t> input0(16), input1(16, 1);
  std::iota(input0.begin(), input0.end(), 0);

  v2::infer_request request;
  request.id = "example-1";
  for (auto [name, data] : {std::pair{"INPUT0", &input0}, std::pair{"INPUT1", &input1}}) {
    v2::infer_input in;
    in.name = name;
    in.datatype = data_type::int32;
    in.shape = {1, 16};
    in.encoding = v2::tensor_encoding::binary;  // the user's buffer is referenced, not copied
    in.data = v2::tensor_data::view(std::as_bytes(std::span(*data)));
    request.inputs.push_back(std::move(in));
  }
  v2::requested_output out;
  out.name = "OUTPUT0";
  out.binary_data = true;  // ask for OUTPUT0 as binary data too
  request.outputs.push_back(std::move(out));

  v2::encoded_body body = v2::encode_infer_request(request);
  std::printf("POST /v2/models/simple/infer HTTP/1.1\r\n"
              "Content-Type: application/octet-stream\r\n"
              "Inference-Header-Content-Length: %zu\r\n"
              "Content-Length: %zu\r\n\r\n%s<%zu bytes of tensor data>\n",
              body.header_length(), body.size(), body.header.c_str(), body.binary_size());

  std::string wire = body.flatten();
  inferwire::status st;
  v2::infer_request decoded = v2::decode_infer_request(wire, body.header_length(), "simple", st);
  if (st) {
    std::fprintf(stderr, "decode failed (%d): %s\n", st.http_status(), st.message().c_str());
    return 1;
  }
  auto view = decoded.inputs.at(0).as<std::int32_t>();
  std::printf("decoded %s: %zu elements, last = %d\n", decoded.inputs[0].name.c_str(),
              view.size(), view.at(15));
  return view.at(15) == 15 ? 0 : 1;
}
