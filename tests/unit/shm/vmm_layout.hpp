// SPDX-License-Identifier: Apache-2.0
// A CUDA VMM region's layout in one expression, for the tests of the socket's two sides.
#pragma once

#include <inferwire/shm/vmm_channel.hpp>

#include <cstdint>
#include <utility>
#include <vector>

namespace iwtest {

inline inferwire::shm::vmm_layout layout_of(std::vector<std::uint64_t> chunks, std::uint64_t offset,
                                            std::uint64_t size, int device = 0) {
  inferwire::shm::vmm_layout l;
  l.device = device;
  l.offset = offset;
  l.byte_size = size;
  l.chunk_sizes = std::move(chunks);
  return l;
}

}  // namespace iwtest
