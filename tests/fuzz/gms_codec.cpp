// SPDX-License-Identifier: Apache-2.0
// libFuzzer target: GMS framing and the msgpack message codec (what a GMS server reads from a
// client). Every decoded message must encode again.
#include <inferwire/gms/codec.hpp>
#include <inferwire/gms/framing.hpp>

#include <cstddef>
#include <cstdint>
#include <string>

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  inferwire::gms::frame_reader reader(1 << 20);
  reader.append(reinterpret_cast<const char*>(data), size);
  std::string payload;
  while (reader.next(payload) == inferwire::gms::frame_reader::result::frame) {
    inferwire::gms::message m;
    std::string error;
    if (inferwire::gms::try_decode(payload, m, error)) (void)inferwire::gms::encode(m);
  }
  // The whole input as one payload, too.
  inferwire::gms::message m;
  std::string error;
  if (inferwire::gms::try_decode(std::string_view(reinterpret_cast<const char*>(data), size), m, error))
    (void)inferwire::gms::encode(m);
  return 0;
}
