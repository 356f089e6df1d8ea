// SPDX-License-Identifier: Apache-2.0
// The raw_input_contents entries of a ModelInferRequest's wire form, reserved before protobuf
// parses it (ModelInfer's and a stream's requests, grpc_stream.cpp). Protobuf only, no gRPC:
// tests/fuzz/grpc_messages.cpp checks it against a plain parse.
#pragma once

#include "grpc_service.pb.h"

#include <google/protobuf/io/coded_stream.h>
#include <google/protobuf/io/zero_copy_stream.h>
#include <google/protobuf/wire_format_lite.h>

#include <cstdint>
#include <string>

namespace inferwire::server::grpc_detail {

/// protobuf's safe string size: the most it reserves for a bytes field before parsing it.
inline constexpr std::uint64_t protobuf_reserves_at_most = 50'000'000;

/// protobuf reserves at most 50,000,000 bytes (its safe string size) for a bytes field it
/// parses and grows the string as it appends the rest: a 64 MiB entry took a 50 MB buffer, then
/// a 100 MB one and a copy of the first into it. This reads the top-level fields of `bytes` (a
/// message of `total` bytes; nothing is copied) and reserves, at its full size, each
/// raw_input_contents entry longer than `grown_past` in `q`, in order; the parse then reuses
/// them (a cleared repeated field keeps its strings) and fills each in one buffer. A length is
/// reserved only where the message holds that many bytes after it, so a hostile message
/// reserves no more than it sent; a malformed one stops the scan (its parse refuses it).
/// `take(entry, length)` is asked first for each entry: true when it gave the entry a buffer of
/// at least `length` bytes of its own (the server's kept buffers, heap_trim.hpp), which is then
/// not reserved. Returns the bytes reserved or taken.
struct take_nothing {
  bool operator()(std::string&, std::size_t) const noexcept { return false; }
};
template <class Take = take_nothing>
std::uint64_t reserve_large_entries(::google::protobuf::io::ZeroCopyInputStream& bytes, std::uint64_t total,
                                    ::inference::ModelInferRequest& q,
                                    std::uint64_t grown_past = protobuf_reserves_at_most, Take&& take = {}) {
  ::google::protobuf::io::CodedInputStream in(&bytes);
  using wire = ::google::protobuf::internal::WireFormatLite;
  std::uint64_t reserved = 0;
  int entry = 0;
  for (std::uint32_t tag; (tag = in.ReadTag()) != 0;) {
    std::uint64_t value = 0;
    std::uint32_t length = 0;
    switch (wire::GetTagWireType(tag)) {
      case wire::WIRETYPE_VARINT:
        if (!in.ReadVarint64(&value)) return reserved;
        break;
      case wire::WIRETYPE_FIXED64:
        if (!in.Skip(8)) return reserved;
        break;
      case wire::WIRETYPE_FIXED32:
        if (!in.Skip(4)) return reserved;
        break;
      case wire::WIRETYPE_LENGTH_DELIMITED:
        if (!in.ReadVarint32(&length) || length > total - static_cast<std::uint64_t>(in.CurrentPosition()))
          return reserved;
        if (wire::GetTagFieldNumber(tag) == ::inference::ModelInferRequest::kRawInputContentsFieldNumber) {
          std::string* s =
              entry < q.raw_input_contents_size() ? q.mutable_raw_input_contents(entry) : q.add_raw_input_contents();
          ++entry;
          if (take(*s, std::size_t{length})) {
            reserved += length;
          } else if (length > grown_past) {
            s->reserve(length);
            reserved += length;
          }
        }
        if (!in.Skip(static_cast<int>(length))) return reserved;
        break;
      default:
        return reserved;  // a group, or no wire type
    }
  }
  return reserved;
}

}  // namespace inferwire::server::grpc_detail
