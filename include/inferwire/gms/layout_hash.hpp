// SPDX-License-Identifier: Apache-2.0
// inferwire/gms/layout_hash.hpp
//
// The memory layout hash of GMS protocol v2 (gms-protocol §5.1): SHA-256 (OpenSSL) over, first,
// "<layout_slot>:<size>:<aligned_size>:<tag>" for each allocation in slot order, then
// "<key>:<layout_slot>:<offset_bytes>:" followed by the raw value for each metadata entry in key
// order (bytewise). Allocation ids do not enter it, so layouts of the same structure published
// by different writers hash alike. Lower-case hex.
#ifndef INFERWIRE_GMS_LAYOUT_HASH_HPP
#define INFERWIRE_GMS_LAYOUT_HASH_HPP

#include <boost/algorithm/hex.hpp>
#include <openssl/evp.h>

#include <algorithm>
#include <iterator>
#include <cstdint>
#include <memory>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

namespace inferwire::gms {

/// One allocation as the hash sees it.
struct layout_allocation {
  std::int64_t layout_slot = 0;
  std::int64_t size = 0;          ///< as requested by the writer
  std::int64_t aligned_size = 0;
  std::string tag;
};

/// One metadata entry as the hash sees it (the slot of the allocation it refers to).
struct layout_metadata {
  std::string key;
  std::int64_t layout_slot = 0;
  std::int64_t offset_bytes = 0;
  std::string value;
};

/// The hash of a layout; the inputs need not be sorted.
inline std::string layout_hash(std::vector<layout_allocation> allocations,
                               std::vector<layout_metadata> metadata) {
  std::sort(allocations.begin(), allocations.end(),
            [](const auto& a, const auto& b) { return a.layout_slot < b.layout_slot; });
  std::sort(metadata.begin(), metadata.end(),
            [](const auto& a, const auto& b) { return a.key < b.key; });  // bytewise = code points
  std::unique_ptr<EVP_MD_CTX, decltype(&EVP_MD_CTX_free)> ctx(EVP_MD_CTX_new(), EVP_MD_CTX_free);
  if (!ctx || EVP_DigestInit_ex(ctx.get(), EVP_sha256(), nullptr) != 1)
    throw std::runtime_error("SHA-256 is not available");
  auto feed = [&](std::string_view s) { EVP_DigestUpdate(ctx.get(), s.data(), s.size()); };
  for (const auto& a : allocations)
    feed(std::to_string(a.layout_slot) + ":" + std::to_string(a.size) + ":" +
         std::to_string(a.aligned_size) + ":" + a.tag);
  for (const auto& m : metadata) {
    feed(m.key + ":" + std::to_string(m.layout_slot) + ":" + std::to_string(m.offset_bytes) + ":");
    feed(m.value);
  }
  unsigned char digest[EVP_MAX_MD_SIZE];
  unsigned int n = 0;
  EVP_DigestFinal_ex(ctx.get(), digest, &n);
  std::string out;
  boost::algorithm::hex_lower(digest, digest + n, std::back_inserter(out));
  return out;
}

}  // namespace inferwire::gms

#endif
