// SPDX-License-Identifier: Apache-2.0
// libFuzzer target: what the server's CUDA VMM socket reads from a client (a deposit payload)
// and what its CUDA register call takes from any client (a 64-byte handle). A deposit that
// decodes must pass its own checks and encode back to the same bytes; so must a handle.
#include <inferwire/shm/vmm_channel.hpp>

#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string>
#include <string_view>

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  namespace shm = inferwire::shm;
  const std::string_view in(reinterpret_cast<const char*>(data), size);
  shm::vmm_layout layout;
  std::string why;
  if (shm::decode_deposit(in, layout, why)) {
    if (!layout.check().empty() || shm::encode_deposit(layout) != in) std::abort();
  } else if (why.empty()) {
    std::abort();
  }
  if (auto h = shm::vmm_handle::decode(in)) {
    if (h->encode() != in) std::abort();
  }
  return 0;
}
