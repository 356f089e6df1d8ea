// Copyright (c) inferwire contributors. SPDX-License-Identifier: Apache-2.0
#ifndef INFERWIRE_HTTP_IMPL_COMPRESSION_HPP
#define INFERWIRE_HTTP_IMPL_COMPRESSION_HPP

#include <zlib.h>

#include <algorithm>
#include <charconv>
#include <limits>

namespace inferwire::http {

namespace detail {
constexpr std::string_view trim(std::string_view s) noexcept {
  while (!s.empty() && (s.front() == ' ' || s.front() == '\t')) s.remove_prefix(1);
  while (!s.empty() && (s.back() == ' ' || s.back() == '\t')) s.remove_suffix(1);
  return s;
}
}  // namespace detail

INFERWIRE_DECL content_coding negotiate_accept_encoding(std::string_view value) {
  content_coding best = content_coding::identity;
  double best_q = 0;
  bool found = false;
  while (!value.empty()) {
    std::size_t comma = value.find(',');
    std::string_view item = value.substr(0, comma);
    value = comma == std::string_view::npos ? std::string_view{} : value.substr(comma + 1);
    std::string_view name = item.substr(0, item.find(';'));
    double q = 1;
    if (std::size_t semi = item.find(';'); semi != std::string_view::npos) {
      std::string_view param = detail::trim(item.substr(semi + 1));
      if (!param.starts_with("q=")) continue;
      std::string_view num = param.substr(2);
      auto [p, ec] = std::from_chars(num.data(), num.data() + num.size(), q);
      if (ec != std::errc{}) continue;
    }
    name = detail::trim(name);
    std::optional<content_coding> c;
    if (name == "identity") c = content_coding::identity;
    else if (name == "gzip") c = content_coding::gzip;
    else if (name == "deflate") c = content_coding::deflate;
    if (!c || !(q > 0)) continue;
    if (!found || q > best_q) {
      best = *c;
      best_q = q;
      found = true;
    }
  }
  return best;
}

INFERWIRE_DECL bool compress(std::span<const std::string_view> parts, content_coding coding,
                     std::string& out) {
  out.clear();
  if (coding == content_coding::identity) {
    for (auto p : parts) out.append(p);
    return true;
  }
  z_stream zs{};
  int window = coding == content_coding::gzip ? 15 | 16 : 15;
  if (deflateInit2(&zs, Z_DEFAULT_COMPRESSION, Z_DEFLATED, window, 8, Z_DEFAULT_STRATEGY) != Z_OK)
    return false;
  std::size_t total = 0;
  for (auto p : parts) total += p.size();
  out.resize(deflateBound(&zs, static_cast<uLong>(std::min<std::size_t>(total, 1u << 30))) + 64);
  std::size_t written = 0;
  bool ok = true;
  for (std::size_t i = 0; ok && i < parts.size(); ++i) {
    std::string_view p = parts[i];
    bool last = i + 1 == parts.size();
    do {
      constexpr std::size_t max_in = std::numeric_limits<uInt>::max();
      std::size_t chunk = std::min(p.size(), max_in);
      zs.next_in = reinterpret_cast<Bytef*>(const_cast<char*>(p.data()));
      zs.avail_in = static_cast<uInt>(chunk);
      int flush = last && chunk == p.size() ? Z_FINISH : Z_NO_FLUSH;
      int rc = Z_OK;
      do {
        if (written == out.size()) out.resize(out.size() * 2);
        std::size_t room = std::min<std::size_t>(out.size() - written, max_in);
        zs.next_out = reinterpret_cast<Bytef*>(out.data() + written);
        zs.avail_out = static_cast<uInt>(room);
        rc = deflate(&zs, flush);
        written += room - zs.avail_out;
        if (rc == Z_STREAM_ERROR) ok = false;
      } while (ok && (zs.avail_out == 0 || (flush == Z_FINISH && rc != Z_STREAM_END)));
      p.remove_prefix(chunk);
    } while (ok && !p.empty());
  }
  if (parts.empty() && ok) {  // an empty body still gets a valid (empty) stream
    zs.next_in = nullptr;
    zs.avail_in = 0;
    zs.next_out = reinterpret_cast<Bytef*>(out.data());
    zs.avail_out = static_cast<uInt>(out.size());
    ok = deflate(&zs, Z_FINISH) == Z_STREAM_END;
    written = out.size() - zs.avail_out;
  }
  deflateEnd(&zs);
  out.resize(ok ? written : 0);
  return ok;
}

INFERWIRE_DECL status decompress(std::string_view data, std::size_t limit, std::string& out) {
  out.clear();
  if (data.empty()) return {errc::invalid_arg, "nothing to be decompressed"};
  z_stream zs{};
  if (inflateInit2(&zs, 15 | 32) != Z_OK)  // 32: detect the gzip or zlib wrapper
    return {errc::internal, "failed to initialize the decompression stream"};
  auto too_big = [&] {
    return status{errc::invalid_arg,
                  "Decompressed data size exceeds the maximum allowed value of " +
                      std::to_string(limit) +
                      " bytes. Use --http-max-input-size to increase the limit."};
  };
  status st;
  constexpr std::size_t max_chunk = std::numeric_limits<uInt>::max();
  // Inflated into blocks, joined at the end: the output takes about its own size in memory,
  // and a bomb stops one block past the limit.
  detail::block_bytes blocks;
  zs.next_in = reinterpret_cast<Bytef*>(const_cast<char*>(data.data()));
  std::string_view pending = data;
  for (;;) {
    if (zs.avail_in == 0 && !pending.empty()) {
      std::size_t chunk = std::min(pending.size(), max_chunk);
      zs.next_in = reinterpret_cast<Bytef*>(const_cast<char*>(pending.data()));
      zs.avail_in = static_cast<uInt>(chunk);
      pending.remove_prefix(chunk);
    }
    const std::span<char> space = blocks.space();
    zs.next_out = reinterpret_cast<Bytef*>(space.data());
    zs.avail_out = static_cast<uInt>(space.size());
    int rc = inflate(&zs, Z_NO_FLUSH);
    blocks.commit(space.size() - zs.avail_out);
    if (rc == Z_STREAM_END) break;
    if (rc == Z_STREAM_ERROR) {
      st = {errc::internal, "encountered inconsistent stream state during decompression"};
      break;
    }
    // Corrupt or truncated data: keep what was inflated (v2-protocol §4.4).
    if (rc == Z_DATA_ERROR || rc == Z_NEED_DICT || rc == Z_MEM_ERROR) break;
    if (rc == Z_BUF_ERROR && zs.avail_in == 0 && pending.empty()) break;
    if (blocks.size() > limit) break;
  }
  inflateEnd(&zs);
  if (!st && blocks.size() > limit) st = too_big();
  if (st) return st;
  blocks.join(out);
  return st;
}

}  // namespace inferwire::http

#endif
