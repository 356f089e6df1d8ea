// SPDX-License-Identifier: Apache-2.0
// libFuzzer target: the BYTES element codec (4-byte little-endian lengths, then the bytes).
#include <inferwire/core/bytes.hpp>

#include <cstddef>
#include <cstdint>
#include <span>
#include <string_view>
#include <vector>

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::span<const std::byte> buf(reinterpret_cast<const std::byte*>(data), size);
  std::vector<std::string_view> elements;
  const inferwire::bytes_view view(buf);
  if (view.decode(elements)) {
    // Re-encoding what decoded gives the same bytes back.
    inferwire::bytes_builder b;
    for (auto e : elements) b.append(e);
    auto again = b.release();
    if (again.size() != size) __builtin_trap();
  }
  const std::int64_t expected = size ? data[0] : 0;
  (void)inferwire::validate_bytes_input(buf, expected, "INPUT0", "model", "");
  return 0;
}
