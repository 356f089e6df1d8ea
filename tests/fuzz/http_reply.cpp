// SPDX-License-Identifier: Apache-2.0
// libFuzzer target: what a server sends the HTTP client. The first byte chooses how the rest is
// cut into reads (1 to 128 bytes each) and whether a 200 body is collected as Server-Sent
// Events (generate_stream); the bytes go through the client's reply reader (Beast's
// HTTP/1.1 parser keeping the status, Content-Encoding, Inference-Header-Content-Length and the
// body, with a 1 MiB body limit) by the same parse_some/parse_eof the client's reads use; a
// complete reply is then decompressed when it says so and decoded as an infer response, as the
// client does, twice: the second decoding, which may come from the client's memo of the last
// header, must equal the full decoder's.
#include <inferwire/http/client.hpp>
#include <inferwire/v2/detail/header_memo.hpp>

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

#if !INFERWIRE_HEADER_ONLY
#error "the fuzz target compiles the client's bodies (header-only mode)"
#endif

namespace {
// The server's memo of the last response header, on what the client decoded: the response
// encoded and remembered, then recalled with the data of its outputs in JSON changed (bytes
// reversed), must encode as the encoder writes it.
void check_response_memo(const inferwire::v2::infer_response& decoded) {
  namespace v2 = inferwire::v2;
  v2::infer_response r = decoded;
  v2::encoded_body first;
  std::vector<std::size_t> json_data;
  if (v2::encode_infer_response(r, first, &json_data)) return;
  v2::detail::response_header_memo memo;
  memo.remember(r, first.header, json_data);
  std::vector<std::string> changed;
  changed.reserve(r.outputs.size());
  for (auto& o : r.outputs) {
    if (o.encoding != v2::tensor_encoding::json) continue;
    const auto b = o.data.str();
    changed.emplace_back(b.rbegin(), b.rend());
    o.data = v2::tensor_data::view(changed.back());
  }
  for (const v2::infer_response* x : {&decoded, static_cast<const v2::infer_response*>(&r)}) {
    v2::encoded_body recalled, encoded;
    if (!memo.recall(*x, recalled)) continue;
    if (v2::encode_infer_response(*x, encoded) || recalled.header != encoded.header ||
        recalled.segments.size() != encoded.segments.size())
      __builtin_trap();
  }
}
}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  namespace detail = inferwire::http::detail;
  if (size < 1) return 0;
  // The first byte: how the rest is cut (low 7 bits) and whether the body is collected as a
  // generate_stream's events (high bit) instead of kept.
  const std::size_t piece = std::size_t{data[0] & 0x7fu} + 1;
  const bool collect = (data[0] & 0x80u) != 0;
  const char* bytes = reinterpret_cast<const char*>(data + 1);
  const std::size_t n = size - 1;
  constexpr std::size_t limit = std::size_t{1} << 20;

  detail::reply_reader parser(limit, nullptr, collect);
  boost::beast::flat_buffer buffer;  // read and not yet parsed, as the connection's buffer
  boost::system::error_code ec;
  std::size_t fed = 0;
  while (detail::parse_some(parser, buffer, ec)) {
    if (fed == n) {  // the server closed
      detail::parse_eof(parser, ec);
      break;
    }
    const std::size_t take = std::min(piece, n - fed);
    std::memcpy(buffer.prepare(take).data(), bytes + fed, take);
    buffer.commit(take);
    fed += take;
  }
  if (ec || !parser.is_done() || parser.bad_header_length()) return 0;

  (void)parser.keep_alive();
  detail::reply r = std::move(parser.get());
  if (r.events_collected) {  // the events, as generate_stream hands them over
    boost::system::error_code parse_ec;
    const auto events = detail::parse_generate_events(r, parse_ec);
    if (!events.empty() && r.status != 200) __builtin_trap();
    return 0;
  }
  if (auto coding = parser.content_coding(); !coding.empty() && coding != "identity") {
    std::string plain;
    if (inferwire::http::decompress(r.body, limit, plain)) return 0;
    r.body = std::move(plain);
  }
  // Decoded twice: the second time a header seen before may be taken from the client's memo
  // of the last header, which must give exactly what the full decoder gives.
  const std::string body = r.body;
  inferwire::status first, second, full;
  (void)inferwire::http::infer_result::decode(body, r.header_length, first);
  const auto again = inferwire::http::infer_result::decode(body, r.header_length, second);
  const auto reference = inferwire::v2::decode_infer_response(again.body(), r.header_length, full);
  if (bool(first) != bool(second) || bool(second) != bool(full)) __builtin_trap();
  if (!second && !(again.response() == reference)) __builtin_trap();
  if (!full) check_response_memo(reference);
  (void)detail::parse_infer(r, ec);
  return 0;
}
