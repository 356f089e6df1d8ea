// SPDX-License-Identifier: Apache-2.0
// libFuzzer target: the Server-Sent Events body of generate_stream as a server sends it. The
// first byte chooses how the rest is cut into reads (1 to 256 bytes each); the client's SSE
// splitter (64 KiB event limit) must deliver exactly what it delivers for the body in one read,
// and agree on success.
#include <inferwire/http/client.hpp>

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#if !INFERWIRE_HEADER_ONLY
#error "the fuzz target compiles the client's bodies (header-only mode)"
#endif

namespace {

bool split(std::string_view body, std::size_t piece, std::vector<std::string>& events) {
  inferwire::http::detail::sse_splitter s(
      [&events](boost::json::object&& o) { events.push_back(boost::json::serialize(o)); }, std::size_t{1} << 16);
  for (std::size_t at = 0; at < body.size(); at += piece)
    if (!s(body.substr(at, std::min(piece, body.size() - at)), false)) return false;
  return s({}, true);
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  if (size < 1) return 0;
  const std::size_t piece = std::size_t{data[0]} + 1;
  const std::string_view body(reinterpret_cast<const char*>(data + 1), size - 1);
  std::vector<std::string> whole, pieces;
  const bool ok_whole = split(body, body.size() ? body.size() : 1, whole);
  const bool ok_pieces = split(body, piece, pieces);
  // The event limit is past the longest input the smoke run makes (-max_len=65536), so how the
  // body is cut may change nothing.
  if (ok_whole != ok_pieces) __builtin_trap();
  if (ok_whole && whole != pieces) __builtin_trap();
  return 0;
}
