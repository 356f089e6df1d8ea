// SPDX-License-Identifier: Apache-2.0
// Built against an installed inferwire; exits 0 when the headers work as documented.
#include <inferwire/core.hpp>
#ifdef CONSUMER_USES_V2
#include <inferwire/v2.hpp>
#endif
#ifdef CONSUMER_USES_GRPC
#include <inferwire/grpc/client.hpp>
#endif

#include <cstdint>
#include <cstdio>
#include <vector>

int main() {
  using namespace inferwire;
  if (wire_name(data_type::bytes) != "BYTES" || config_name(data_type::bytes) != "TYPE_STRING")
    return 1;
  std::vector<std::int64_t> shape{1, 16};
  if (byte_size(shape, data_type::int32).value != 64) return 2;
  if (http_status(errc::unavailable) != 503) return 3;
#ifdef CONSUMER_USES_V2
  std::vector<std::int32_t> data(16, 7);
  v2::infer_request q;
  q.inputs.push_back({"INPUT0", data_type::int32, shape, v2::tensor_encoding::binary,
                      v2::tensor_data::view(std::as_bytes(std::span(data))), {}, {}});
  std::string body = v2::encode_infer_request(q).flatten();
  auto header = body.find("}]}") + 3;
  auto back = v2::decode_infer_request(body, header, "simple");
  if (back.inputs.at(0).as<std::int32_t>().at(15) != 7) return 4;
#endif
#ifdef CONSUMER_USES_GRPC
  // The protos were generated and compiled in this build; a call to a closed port fails fast.
  inferwire::grpc::channel_options o;
  o.target = "127.0.0.1:1";
  inferwire::grpc::client c(o);
  inferwire::grpc::call_options co;
  co.timeout = std::chrono::milliseconds(500);
  std::error_code ec;
  c.server_live(ec, co);
  if (!ec || inferwire::grpc::status_code(ec) == 0) return 5;
#endif
  std::puts("consumer: ok");
  return 0;
}
