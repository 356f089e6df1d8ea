// SPDX-License-Identifier: Apache-2.0
// libFuzzer target: the JSON infer request decoder (the whole input is the JSON header), and
// its fast path: what the fast path accepts must decode the same with the full decoder, and
// its plain JSON reader must decide as Boost.JSON's parser decides.
#include <inferwire/v2/binary.hpp>
#include <inferwire/v2/fast_request.hpp>

#include "same_request.hpp"

#include <cstddef>
#include <cstdint>
#include <string_view>

namespace {
// The request memo: `first` read by the fast path into a memo, then `next` recalled from it:
// what it gives must be the full decoder's result for `next`.
void check_memo(std::string_view first, std::string_view next) {
  inferwire::v2::detail::json_request_memo memo;
  inferwire::v2::infer_request seen, recalled;
  if (!inferwire::v2::try_decode_infer_request_fast(first, first.size(), {}, seen, &memo)) return;
  inferwire::status first_st;  // remembering lends the data out and takes it back
  if (!fuzz::same(seen, inferwire::v2::decode_infer_request(first, first.size(), "model", first_st)) || first_st)
    __builtin_trap();
  for (std::string_view text : {first, next}) {
    if (!memo.recall(text, text.size(), {}, recalled)) continue;
    inferwire::status st;
    const auto full = inferwire::v2::decode_infer_request(text, text.size(), "model", st);
    if (st || !fuzz::same(recalled, full)) __builtin_trap();
  }
}
}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string_view input(reinterpret_cast<const char*>(data), size);
  // An input with a 0xFF byte (never in a plain header) is two headers for the request memo:
  // the first remembered, the second recalled; the decoders below read the second.
  const std::size_t split = input.find('\xff');
  const std::string_view body = split == std::string_view::npos ? input : input.substr(split + 1);
  check_memo(split == std::string_view::npos ? input : input.substr(0, split), body);
  size = body.size();
  inferwire::status st;
  auto request = inferwire::v2::decode_infer_request(body, size, "model", st);
  inferwire::v2::infer_request fast;
  if (inferwire::v2::try_decode_infer_request_fast(body, size, {}, fast) && (st || !fuzz::same(fast, request)))
    __builtin_trap();
  // Its two readers: where the plain one decides, Boost.JSON's parser decides the same, and
  // what either decodes, the full decoder decodes the same.
  namespace reader = inferwire::v2::detail;
  inferwire::v2::infer_request plain, sax;
  const auto read = reader::decode_fast_plain(body, size, {}, plain);
  const bool by_sax = reader::decode_fast_boost(body, size, {}, sax);
  if (read != reader::json_reading::unsupported && by_sax != (read == reader::json_reading::accepted))
    __builtin_trap();
  if (read == reader::json_reading::accepted && (st || !fuzz::same(plain, request))) __builtin_trap();
  if (by_sax && (st || !fuzz::same(sax, request))) __builtin_trap();
  if (!st) {
    // What decoded must encode again (the client side of the same codec).
    inferwire::v2::encoded_body out;
    (void)inferwire::v2::encode_infer_request(request, out);
  }
  return 0;
}
