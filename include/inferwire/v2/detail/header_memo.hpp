// SPDX-License-Identifier: Apache-2.0
// inferwire/v2/detail/header_memo.hpp — the last binary message header decoded, and its
// decoding, for the next message with the same header bytes; the last response header
// encoded, for the next response that encodes to the same bytes but for the data arrays of
// its outputs in JSON. (Requests with tensors in JSON have a memo of their own:
// json_request_memo in fast_request.hpp.)
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

#include <inferwire/core/shape.hpp>
#include <inferwire/v2/binary.hpp>
#include <inferwire/v2/json_codec.hpp>
#include <inferwire/v2/types.hpp>

#include <cstddef>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <utility>
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
    std::optional<Message> m(std::in_place);
    if (!recall(body, header_length, *m)) return std::nullopt;
    return m;
  }

  /// As above, into `m`, whose storage is reused: a message of the same layout (a recycled
  /// one) takes the decoding without allocating. `m` is unspecified when this returns false.
  bool recall(std::string_view body, std::size_t header_length, Message& m) const {
    if (!valid_ || header_length == 0 || header_length > body.size() ||
        body.substr(0, header_length) != header_)
      return false;
    m = skeleton_;
    std::size_t next = header_length;
    auto size = sizes_.begin();
    for (auto& t : m.*Tensors) {
      if (t.encoding != tensor_encoding::binary) continue;
      if (*size > body.size() - next) return false;
      t.data = tensor_data::view(body.substr(next, *size));
      next += *size++;
    }
    return next == body.size();
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

/// The last infer response header encoded, for the next response that differs from it only in
/// its outputs' data bytes. A model's responses to one client repeat everything else (id,
/// names, types, shapes, sizes, parameters), and the header is a function of exactly those
/// and of the data of its outputs in JSON: such a response takes the header remembered, with
/// the data arrays of its outputs in JSON written anew in their places, and has its binary
/// segments listed.
class response_header_memo {
 public:
  /// Headers longer than this are not remembered.
  static constexpr std::size_t max_header = 4096;

  /// `out` as encode_infer_response would write it for `r`, when `r` encodes to the header
  /// remembered but for its JSON data; otherwise false, `out` unspecified.
  bool recall(const infer_response& r, encoded_body& out) const {
    if (!valid_ || !same_header(r)) return false;
    out.segments.clear();
    if (json_data_.empty()) {
      out.header.assign(header_);
    } else {
      out.header.clear();
      std::size_t from = 0, k = 0;
      for (const auto& o : r.outputs) {
        if (o.encoding != tensor_encoding::json) continue;
        out.header.append(header_, from, json_data_[k] - from);
        // The shape is the one the header was written for, so its count is valid; an element
        // the encoder refuses (BYTES that are not UTF-8) goes back to the encoder for its error.
        const shape_result count = element_count(o.shape);
        if (!count || append_json_tensor_data(out.header, o.datatype, o.data.bytes(), count.value, o.name)) return false;
        from = json_data_[k + 1];
        k += 2;
      }
      out.header.append(header_, from);
    }
    out.segments.reserve(r.outputs.size());  // one allocation, not one per doubling
    for (const auto& o : r.outputs)
      if (o.encoding == tensor_encoding::binary && !o.data.empty()) out.segments.push_back(o.data.bytes());
    return true;
  }

  /// Remembers `header`, what encode_infer_response wrote for `r`, with `json_data`, where it
  /// wrote the data arrays of the outputs in JSON (its `json_data`): a response with outputs in
  /// JSON is remembered only with them.
  void remember(const infer_response& r, std::string_view header, std::span<const std::size_t> json_data = {}) {
    valid_ = false;
    if (header.size() > max_header) return;
    std::size_t json = 0;
    for (const auto& o : r.outputs) json += o.encoding == tensor_encoding::json;
    if (json_data.size() != 2 * json) return;
    json_data_.assign(json_data.begin(), json_data.end());
    skeleton_.id = r.id;
    skeleton_.model_name = r.model_name;
    skeleton_.model_version = r.model_version;
    skeleton_.parameters = r.parameters;
    skeleton_.outputs.resize(r.outputs.size());
    sizes_.resize(r.outputs.size());
    for (std::size_t i = 0; i < r.outputs.size(); ++i) {
      const infer_output& o = r.outputs[i];
      infer_output& s = skeleton_.outputs[i];
      s.name = o.name;
      s.datatype = o.datatype;
      s.shape = o.shape;
      s.encoding = o.encoding;
      s.parameters = o.parameters;
      s.data = {};
      sizes_[i] = o.data.size();
    }
    header_.assign(header);
    valid_ = true;
  }

 private:
  // Every member of infer_response and infer_output that the header is written from (all but
  // the outputs' data, of which only the size is written). A member added to those types
  // that the encoder writes must be compared here too.
  bool same_header(const infer_response& r) const {
    if (r.outputs.size() != skeleton_.outputs.size() || r.id != skeleton_.id ||
        r.model_name != skeleton_.model_name || r.model_version != skeleton_.model_version ||
        r.parameters != skeleton_.parameters)
      return false;
    for (std::size_t i = 0; i < r.outputs.size(); ++i) {
      const infer_output& o = r.outputs[i];
      const infer_output& s = skeleton_.outputs[i];
      if (o.encoding != s.encoding || o.datatype != s.datatype || o.data.size() != sizes_[i] ||
          o.name != s.name || o.shape != s.shape || o.parameters != s.parameters)
        return false;
    }
    return true;
  }

  bool valid_ = false;
  std::string header_;
  infer_response skeleton_;  ///< outputs without data
  std::vector<std::size_t> sizes_;  ///< each output's data size
  std::vector<std::size_t> json_data_;  ///< the JSON outputs' data arrays in header_, [first, last) each
};

}  // namespace inferwire::v2::detail

#endif
