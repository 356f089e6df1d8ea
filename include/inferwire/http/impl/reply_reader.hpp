// SPDX-License-Identifier: Apache-2.0
// inferwire/http/impl/reply_reader.hpp — the reply side of a call: infer_result's decoding, the
// call's request data, the reply parsers, the Server-Sent Events splitter and the HTTP/1.1
// reply reader.
// Part of the bodies of client.hpp (impl/client.hpp includes it).
#ifndef INFERWIRE_HTTP_IMPL_REPLY_READER_HPP
#define INFERWIRE_HTTP_IMPL_REPLY_READER_HPP

#include <inferwire/v2/detail/header_memo.hpp>

#include <boost/asio/ip/tcp.hpp>
#include <boost/beast/core/error.hpp>
#include <boost/beast/core/flat_buffer.hpp>
#include <boost/beast/core/string.hpp>
#include <boost/beast/http/basic_parser.hpp>
#include <boost/beast/http/error.hpp>
#include <boost/json/value_from.hpp>
#include <boost/json/value_to.hpp>

#include <algorithm>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <new>
#include <optional>
#include <span>
#include <stdexcept>
#include <utility>
#include <vector>

namespace inferwire::http {

// ---------------------------------------------------------------------------------------------
// infer_result

INFERWIRE_DECL infer_result infer_result::decode(std::string body,
                                         std::optional<std::size_t> header_length,
                                         status& st) {
  infer_result r;
  auto owned = std::make_shared<const std::string>(std::move(body));
  st = {};
  // Replies repeat their header: the last one a thread decoded is not parsed again.
  static thread_local v2::detail::header_memo<v2::infer_response, &v2::infer_response::outputs> memo;
  std::optional<v2::infer_response> known;
  if (header_length) known = memo.recall(*owned, *header_length);
  if (known) {
    r.response_ = std::move(*known);
  } else {
    r.response_ = v2::decode_infer_response(*owned, header_length, st);
    if (header_length && !st) memo.remember(std::string_view(*owned).substr(0, *header_length), r.response_);
  }
  r.body_ = std::move(owned);
  return r;
}

namespace detail {

namespace beast = boost::beast;
namespace bhttp = boost::beast::http;
using tcp = net::ip::tcp;
using clock = std::chrono::steady_clock;

// ---------------------------------------------------------------------------------------------
// One call, ready to send: the header block and the body pieces.

struct call_data {
  static constexpr std::size_t small_request = 4096;  // bytes, sent from one buffer
  std::string head;                         // request line and header fields (and a small body)
  std::string owned_body;                   // JSON bodies, compressed bodies
  v2::encoded_body infer_body;              // infer: JSON header + tensor views
  bool use_infer_body = false;
  std::vector<net::const_buffer> buffers;   // built once the strings are in place
  std::optional<std::chrono::milliseconds> timeout;
  std::optional<content_coding> request_coding, response_coding;
  error_code error;                         // a request that cannot be sent
  // Where a 200 reply's body goes as it arrives, instead of into the reply (generate_stream
  // event by event): the bytes, then once an empty view with `end`; false: malformed.
  std::function<bool(std::string_view bytes, bool end)> body_sink;
  // A 200 reply's body is Server-Sent Events, parsed into reply::events as they arrive (the
  // collecting generate_stream), not kept.
  bool collect_events = false;

  std::size_t body_size() const {
    return use_infer_body ? infer_body.size() : owned_body.size();
  }
  void make_buffers() {
    buffers.clear();
    // A small request goes out as one piece: the kernel handles a single buffer noticeably
    // faster than a gather list of a few small ones (on both ends of a loopback connection).
    if (use_infer_body && head.size() + infer_body.size() <= small_request) {
      head.reserve(head.size() + infer_body.size());
      head += infer_body.header;
      for (auto seg : infer_body.segments) head.append(reinterpret_cast<const char*>(seg.data()), seg.size());
      buffers.emplace_back(head.data(), head.size());
      return;
    }
    buffers.reserve(2 + infer_body.segments.size());
    buffers.emplace_back(head.data(), head.size());
    if (!use_infer_body) {
      if (!owned_body.empty()) buffers.emplace_back(owned_body.data(), owned_body.size());
      return;
    }
    if (!infer_body.header.empty())
      buffers.emplace_back(infer_body.header.data(), infer_body.header.size());
    for (auto s : infer_body.segments)
      if (!s.empty()) buffers.emplace_back(s.data(), s.size());
  }
};

INFERWIRE_DECL void call_data_deleter::operator()(call_data* p) const noexcept { delete p; }

INFERWIRE_DECL error_code server_error_of(const reply& r) {
  return make_server_error(r.status, v2::parse_error_body(r.body));
}

// --- Reply parsers: one per kind of answer.

INFERWIRE_DECL bool parse_health(reply& r, error_code& ec) {
  if (r.status == 200) return true;
  if (r.status == 400) return false;
  ec = server_error_of(r);
  return false;
}

INFERWIRE_DECL void parse_empty(reply& r, error_code& ec) {
  if (r.status != 200) ec = server_error_of(r);
}

template <class T>
T parse_json_as(reply& r, error_code& ec) {
  if (r.status != 200) {
    ec = server_error_of(r);
    return T{};
  }
  status st;
  auto doc = v2::parse_json(r.body, st);
  if (st) {
    ec = client_errc::bad_response;
    return T{};
  }
  if constexpr (std::is_same_v<T, boost::json::value>) {
    return doc;
  } else {
    try {
      return boost::json::value_to<T>(doc);
    } catch (const std::exception&) {
      ec = client_errc::bad_response;
      return T{};
    }
  }
}

// generate_stream's body: Server-Sent Events, each `data: <JSON object>` followed by a blank
// line (other SSE fields, if a server sent them, are skipped). Fed bytes as they arrive; each
// complete event's object goes to `on_event`. False: an event that is not a JSON object, an
// unfinished event at the end, an event longer than `max_event` bytes, or an exception out of
// `on_event`. Each byte is searched once (the search for the blank line resumes where the last
// one stopped), so a long event costs time in proportion to its length.
class sse_splitter {
 public:
  explicit sse_splitter(std::function<void(boost::json::object&&)> on_event,
                        std::size_t max_event = std::string::npos)
      : on_event_(std::move(on_event)), max_event_(max_event) {}
  bool operator()(std::string_view bytes, bool end) {
    // An unfinished event that these bytes would take past the limit, with no blank line among
    // them (nor across the previous read's end) to finish it: refused before it grows.
    if (pending_.size() + bytes.size() > max_event_ && !bytes.empty() &&
        bytes.find("\n\n") == std::string_view::npos &&
        !(bytes.front() == '\n' && pending_.size() > 0 && pending_.back() == '\n'))
      return false;
    pending_.append(bytes);
    const std::string_view all = pending_.view();
    std::size_t at = 0;
    // A blank line may straddle the previous read's end: look again from its last byte.
    for (std::size_t blank; (blank = all.find("\n\n", std::max(at, scanned_))) != std::string_view::npos;
         at = blank + 2, scanned_ = at)
      if (!event(all.substr(at, blank - at))) return false;
    pending_.erase_front(at);
    scanned_ = pending_.size() > 0 ? pending_.size() - 1 : 0;
    if (pending_.size() > max_event_) return false;  // an event past the reply limit
    return !end || pending_.view().find_first_not_of("\r\n") == std::string_view::npos;
  }

 private:
  bool event(std::string_view lines) {
    while (!lines.empty()) {
      const std::size_t eol = lines.find('\n');
      const std::string_view line = lines.substr(0, eol);
      lines.remove_prefix(eol == std::string_view::npos ? lines.size() : eol + 1);
      if (!line.starts_with("data:")) continue;
      std::string_view data = line.substr(5);
      if (data.starts_with(' ')) data.remove_prefix(1);
      status st;
      auto doc = v2::parse_json(data, st);
      if (st || !doc.is_object()) return false;
      try {
        on_event_(std::move(doc.get_object()));
      } catch (...) {
        return false;
      }
    }
    return true;
  }

  std::function<void(boost::json::object&&)> on_event_;
  std::size_t max_event_;
  // The unfinished event's bytes. Grown with realloc, which moves a large block's pages
  // (mremap) instead of copying them: an event of N bytes holds about N bytes, never the old
  // and the new block at once, as a vector's or a string's growth would (twice the limit).
  class growing_bytes {
   public:
    growing_bytes() = default;
    growing_bytes(growing_bytes&& other) noexcept
        : data_(std::move(other.data_)),
          size_(std::exchange(other.size_, 0)),
          capacity_(std::exchange(other.capacity_, 0)) {}
    growing_bytes& operator=(growing_bytes&& other) noexcept {
      data_ = std::move(other.data_);
      size_ = std::exchange(other.size_, 0);
      capacity_ = std::exchange(other.capacity_, 0);
      return *this;
    }
    growing_bytes(const growing_bytes& other) { append(other.view()); }  // std::function copies its target
    growing_bytes& operator=(const growing_bytes& other) {
      if (this != &other) {
        size_ = 0;
        append(other.view());
      }
      return *this;
    }
    std::size_t size() const { return size_; }
    char back() const { return data_.get()[size_ - 1]; }
    std::string_view view() const { return {data_.get(), size_}; }
    void append(std::string_view bytes) {
      if (bytes.empty()) return;
      if (size_ + bytes.size() > capacity_) {
        const std::size_t want = std::max(size_ + bytes.size(), capacity_ + capacity_ / 2);
        void* grown = std::realloc(data_.get(), want);
        if (grown == nullptr) throw std::bad_alloc();
        (void)data_.release();
        data_.reset(static_cast<char*>(grown));
        capacity_ = want;
      }
      std::memcpy(data_.get() + size_, bytes.data(), bytes.size());
      size_ += bytes.size();
    }
    void erase_front(std::size_t n) {
      if (n == 0) return;
      std::memmove(data_.get(), data_.get() + n, size_ - n);
      size_ -= n;
    }

   private:
    struct release {
      void operator()(char* p) const { std::free(p); }
    };
    std::unique_ptr<char, release> data_;
    std::size_t size_ = 0;
    std::size_t capacity_ = 0;
  };
  growing_bytes pending_;
  std::size_t scanned_ = 0;  ///< pending_ before this has no blank line starting in it
};

INFERWIRE_DECL std::vector<boost::json::object> parse_generate_events(reply& r, error_code& ec) {
  std::vector<boost::json::object> events;
  if (r.status != 200) {
    ec = server_error_of(r);
    return events;
  }
  if (r.events_collected) return std::move(r.events);
  sse_splitter split([&events](boost::json::object&& e) { events.push_back(std::move(e)); });
  if (!split(r.body, true)) {
    ec = client_errc::bad_response;
    events.clear();
  }
  return events;
}

INFERWIRE_DECL infer_result parse_infer(reply& r, error_code& ec) {
  if (r.status != 200) {
    ec = server_error_of(r);
    return {};
  }
  status st;
  auto result = infer_result::decode(std::move(r.body), r.header_length, st);
  if (st) {
    ec = client_errc::bad_response;
    return {};
  }
  return result;
}

// ---------------------------------------------------------------------------------------------
// The reply: Beast's HTTP/1.1 parser, keeping the status, the two header fields the client
// reads and the body (no field map, no message object).

class reply_reader final : public bhttp::basic_parser<false> {
 public:
  explicit reply_reader(std::size_t body_limit, const std::function<bool(std::string_view, bool)>* sink = nullptr,
                        bool collect_events = false)
      : limit_(body_limit), sink_(sink && *sink ? sink : nullptr), collect_(collect_events) {
    this->body_limit(body_limit);
    this->eager(true);
  }
  reply& get() noexcept { return reply_; }
  std::string_view content_coding() const noexcept { return coding_; }
  bool bad_header_length() const noexcept { return bad_length_; }

 private:

  void on_request_impl(bhttp::verb, beast::string_view, beast::string_view, int,
                       error_code&) override {}
  void on_response_impl(int code, beast::string_view, int, error_code&) override {
    reply_.status = static_cast<unsigned>(code);
  }
  void on_field_impl(bhttp::field name, beast::string_view name_string, beast::string_view value,
                     error_code&) override {
    std::string_view v(value.data(), value.size());
    if (name == bhttp::field::content_encoding) {
      if (!seen_coding_) coding_ = v;
      seen_coding_ = true;
    } else if (!seen_length_ && beast::iequals(name_string, v2::header_length_field)) {
      seen_length_ = true;
      status st;
      reply_.header_length = v2::parse_content_length(v, st);
      bad_length_ = static_cast<bool>(st);
    }
  }
  void on_header_impl(error_code&) override {
    if (sinking()) this->body_limit(boost::none);  // nothing is kept: a stream may run on
    if (collecting()) {
      reply_.events_collected = true;
      splitter_.emplace([this](boost::json::object&& e) { reply_.events.push_back(std::move(e)); }, limit_);
    }
  }
  void on_body_init_impl(const boost::optional<std::uint64_t>& length, error_code&) override {
    // A declared length is at most the limit (the parser refuses more): reserved whole, its
    // pages are only touched as the body fills them.
    if (length) reply_.body.reserve(static_cast<std::size_t>(*length));
    else blocks_.emplace();
  }
  std::size_t on_body_impl(beast::string_view body, error_code& ec) override {
    return append(body, ec);
  }
  void on_chunk_header_impl(std::uint64_t, beast::string_view, error_code&) override {}
  std::size_t on_chunk_body_impl(std::uint64_t, beast::string_view body,
                                 error_code& ec) override {
    return append(body, ec);
  }
  void on_finish_impl(error_code& ec) override {
    if (sinking() && !(*sink_)({}, true)) ec = client_errc::bad_response;
    if (splitter_ && !(*splitter_)({}, true)) ec = client_errc::bad_response;
    if (blocks_) {
      blocks_->join(reply_.body);
      blocks_.reset();
    }
  }

  // A 200 reply without a content coding goes to the sink, when there is one.
  bool sinking() const noexcept { return sink_ && reply_.status == 200 && !seen_coding_; }
  bool collecting() const noexcept { return collect_ && !sink_ && reply_.status == 200 && !seen_coding_; }

  std::size_t append(beast::string_view body, error_code& ec) {
    if (sinking()) {
      if (!(*sink_)(std::string_view(body.data(), body.size()), false)) ec = client_errc::bad_response;
      return body.size();
    }
    if (body.size() > limit_ - received_) {
      ec = bhttp::error::body_limit;
      return 0;
    }
    received_ += body.size();
    const std::string_view bytes(body.data(), body.size());
    if (splitter_) {
      if (!(*splitter_)(bytes, false)) ec = client_errc::bad_response;
      return body.size();
    }
    if (!blocks_) {
      reply_.body.append(bytes);
      return body.size();
    }
    blocks_->append(bytes);
    return body.size();
  }

  reply reply_;
  std::size_t received_ = 0;                       ///< body bytes so far
  /// A body of unknown length (chunked, or until the connection closes), so far: in blocks, not
  /// one string grown by doubling.
  std::optional<block_bytes> blocks_;
  std::optional<sse_splitter> splitter_;           ///< a collected event stream
  std::string coding_;
  std::size_t limit_;
  const std::function<bool(std::string_view, bool)>* sink_;
  bool collect_ = false;
  bool seen_coding_ = false;
  bool seen_length_ = false;
  bool bad_length_ = false;
};

// Parses what `buffer` holds (the parsed bytes leave it). True when the reply needs more
// bytes: read some, then call again. False when the reply is complete or `ec` is set. (After
// `need_more` the parser must next see more bytes than before, so it is never called twice on
// the same input.)
//
// In a chunked body, fewer than 5 bytes are never handed over: Beast 1.81 asserts that a
// final chunk it has begun ("0\r\n", kept in the buffer while the trailer is incomplete) comes
// back with at least 5 bytes, and replies trickling in byte by byte would otherwise return it
// 4. Waiting cannot stall a reply: from any point of a chunked body, at least the final chunk's
// 5 bytes ("0\r\n\r\n") are still to come, and the parser keeps the unfinished chunk header.
INFERWIRE_DECL bool parse_some(reply_reader& parser, beast::flat_buffer& buffer, error_code& ec) {
  constexpr std::size_t least_chunk_input = 5;
  if (buffer.size() == 0) return true;
  if (parser.is_header_done() && parser.chunked() && buffer.size() < least_chunk_input)
    return true;
  auto used = parser.put(buffer.data(), ec);
  buffer.consume(used);
  if (ec == bhttp::error::need_more) {
    ec = {};
    return true;
  }
  return !ec && !parser.is_done();  // eager: not done means every byte was taken
}

// The server closed the connection: the end of a reply without a length, or, before any byte
// of it, a connection that was already closed (end_of_stream).
INFERWIRE_DECL void parse_eof(reply_reader& parser, error_code& ec) {
  ec = {};
  if (!parser.got_some()) {
    ec = bhttp::error::end_of_stream;
    return;
  }
  parser.put_eof(ec);
}


}  // namespace detail
}  // namespace inferwire::http

#endif
