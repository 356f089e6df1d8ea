// SPDX-License-Identifier: Apache-2.0
// libFuzzer target: the JSON infer request decoder (the whole input is the JSON header).
#include <inferwire/v2/binary.hpp>

#include <cstddef>
#include <cstdint>
#include <string_view>

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string_view body(reinterpret_cast<const char*>(data), size);
  inferwire::status st;
  auto request = inferwire::v2::decode_infer_request(body, size, "model", st);
  if (!st) {
    // What decoded must encode again (the client side of the same codec).
    inferwire::v2::encoded_body out;
    (void)inferwire::v2::encode_infer_request(request, out);
  }
  return 0;
}
