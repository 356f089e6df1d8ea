// SPDX-License-Identifier: Apache-2.0
// inferwire/v2/detail/header_memo.hpp — the last binary message header decoded, and its
// decoding, for the next message with the same header bytes.
//
// Requests of one client to one model, and that model's replies, repeat their JSON header byte
// for byte (names, types, shapes, binary sizes) call after call. Identical bytes decode
// identically, so a message whose header is the one remembered takes the remembered decoding
// and only has its tensors' views placed in its own body: no JSON is parsed. Both clients'
// and the server's decoders stay the reference: a memo remembers only what one of them
// decoded without error, and any message it cannot place exactly (another header, a body of
// another length) goes to them, errors included.
#ifndef INFERWIRE_V2_DETAIL_HEADER_MEMO_HPP
#define INFERWIRE_V2_DETAIL_HEADER_MEMO_HPP

#include <inferwire/v2/types.hpp>

#include <cstddef>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace inferwire::v2::detail {

/// `Message` is infer_request or infer_response; `Tensors` names its member that holds the
/// tensors whose binary data follow the header in order (inputs, outputs).
template <class Message, auto Tensors>
class header_memo {
 public:
  /// Headers longer than this are not remembered.
  static constexpr std::size_t max_header = 4096;

  /// The decoding of `body` when its first `header_length` bytes are the header remembered and
  /// the binary data after it have exactly the sizes that header gave; otherwise nothing.
  std::optional<Message> recall(std::string_view body, std::size_t header_length) const {
    if (!valid_ || header_length == 0 || header_length > body.size() ||
        body.substr(0, header_length) != header_)
      return std::nullopt;
    std::optional<Message> m(skeleton_);
    std::size_t next = header_length;
    auto size = sizes_.begin();
    for (auto& t : (*m).*Tensors) {
      if (t.encoding != tensor_encoding::binary) continue;
      if (*size > body.size() - next) return std::nullopt;
      t.data = tensor_data::view(body.substr(next, *size));
      next += *size++;
    }
    if (next != body.size()) return std::nullopt;
    return m;
  }

  /// Remembers `header` and `decoded`, its decoding without error, when every tensor is binary
  /// or in shared memory (tensors in JSON own their data) and the header is not too long.
  void remember(std::string_view header, const Message& decoded) {
    valid_ = false;
    if (header.empty() || header.size() > max_header) return;
    sizes_.clear();
    for (const auto& t : decoded.*Tensors) {
      if (t.encoding == tensor_encoding::json) return;
      if (t.encoding == tensor_encoding::binary) sizes_.push_back(t.data.size());
    }
    header_.assign(header);
    skeleton_ = decoded;
    for (auto& t : skeleton_.*Tensors) t.data = {};
    valid_ = true;
  }

 private:
  bool valid_ = false;
  std::string header_;
  Message skeleton_;
  std::vector<std::size_t> sizes_;  ///< the binary tensors' sizes, in order
};

}  // namespace inferwire::v2::detail

#endif
