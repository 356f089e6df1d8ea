// SPDX-License-Identifier: Apache-2.0
// libFuzzer target: binary tensor framing. The first two bytes choose the JSON header's length
// (Inference-Header-Content-Length); the rest is the body, decoded as a request and as a
// response. What the request fast path accepts, and what the memo of the last header recalls,
// must decode the same with the full decoder.
#include <inferwire/v2/binary.hpp>
#include <inferwire/v2/detail/header_memo.hpp>
#include <inferwire/v2/fast_request.hpp>

#include "same_request.hpp"

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  if (size < 2) return 0;
  const std::size_t announced = (std::size_t{data[0]} << 8) | data[1];
  const std::string_view body(reinterpret_cast<const char*>(data + 2), size - 2);
  inferwire::status st;
  const std::string header_value = std::to_string(announced);
  const std::size_t header_length = inferwire::v2::parse_header_length(header_value, body.size(), st);
  if (!st) {
    inferwire::v2::codec_limits limits;
    limits.max_input_size = 1 << 20;
    auto request = inferwire::v2::decode_infer_request(body, header_length, "model", st, limits);
    inferwire::v2::infer_request fast;
    if (inferwire::v2::try_decode_infer_request_fast(body, header_length, limits, fast) &&
        (st || !fuzz::same(fast, request)))
      __builtin_trap();
    // The server's memo of the last header: what it recalls for this body (a header seen
    // before) must be what the full decoder gives, and a request that decoded is recalled as it is.
    static inferwire::v2::detail::header_memo<inferwire::v2::infer_request, &inferwire::v2::infer_request::inputs> memo;
    if (auto known = memo.recall(body, header_length); known && (st || !fuzz::same(*known, request))) __builtin_trap();
    if (!st) {
      memo.remember(body.substr(0, header_length), request);
      if (auto again = memo.recall(body, header_length); again && !fuzz::same(*again, request)) __builtin_trap();
    }
    if (!st && request.raw_binary) {
      const inferwire::v2::tensor_metadata input{"INPUT0", inferwire::data_type::bytes, {-1}};
      (void)inferwire::v2::deduce_raw_input(request, "model", {&input, 1}, false, limits);
    }
  }
  inferwire::status rs;
  (void)inferwire::v2::decode_infer_response(body, announced <= body.size() ? std::optional(announced) : std::nullopt, rs);
  return 0;
}
