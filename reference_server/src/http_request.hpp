// SPDX-License-Identifier: Apache-2.0
// A request as the HTTP frontend reads it, and the parser that fills it. Beast's basic_parser
// does all the reading: the grammar of RFC 9112, framing (Content-Length, chunked), the header
// and body limits. What it reports goes into one string instead of Beast's fields container,
// which allocated each field and linked it into a tree and a list: with the three fields of a
// small POST that was a fifth of what parsing a request cost. A connection's http_header_memo
// reads a header equal to its last one without the parser.
#pragma once

#include "spare_blocks.hpp"

#include <boost/beast/core/error.hpp>
#include <boost/beast/core/string.hpp>
#include <boost/beast/http/basic_parser.hpp>
#include <boost/beast/http/field.hpp>
#include <boost/beast/http/verb.hpp>
#include <boost/optional/optional.hpp>

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <functional>
#include <string>
#include <string_view>
#include <vector>

namespace inferwire::server::rest {

namespace bhttp = boost::beast::http;

/// A parsed request: start line, the fields of its header block (a chunked body's trailer
/// fields are not among them), and its body when the parser read it. The method, target,
/// names and values live in one string taken from the thread's spare strings, where each field
/// is found by offsets.
class http_request {
 public:
  /// A field as the client wrote it: the known name Beast recognised (or `unknown`), the name's
  /// own spelling, and the value.
  class field_view {
   public:
    field_view(bhttp::field id, std::string_view name, std::string_view value) noexcept
        : id_(id), name_(name), value_(value) {}
    bhttp::field name() const noexcept { return id_; }
    std::string_view name_string() const noexcept { return name_; }
    std::string_view value() const noexcept { return value_; }

   private:
    bhttp::field id_;
    std::string_view name_, value_;
  };

  class iterator {
   public:
    struct arrow {
      field_view v;
      const field_view* operator->() const noexcept { return &v; }
    };
    iterator(const http_request* r, std::size_t i) noexcept : r_(r), i_(i) {}
    field_view operator*() const noexcept { return r_->at(i_); }
    arrow operator->() const noexcept { return {r_->at(i_)}; }
    iterator& operator++() noexcept {
      ++i_;
      return *this;
    }
    bool operator==(const iterator& o) const noexcept { return i_ == o.i_; }

   private:
    const http_request* r_;
    std::size_t i_;
  };

  http_request() = default;
  http_request(http_request&&) noexcept = default;
  http_request& operator=(http_request&&) noexcept = default;
  ~http_request() {
    spare_strings::give(std::move(text_));
    spare_strings::give(std::move(body_));
  }

  bhttp::verb method() const noexcept { return method_; }
  std::string_view method_string() const noexcept { return slice(method_at_, method_length_); }
  std::string_view target() const noexcept { return slice(target_at_, target_length_); }
  unsigned version() const noexcept { return version_; }
  /// The connection's semantics after this request (RFC 9112 §9.3), as the parser found them.
  bool keep_alive() const noexcept { return keep_alive_; }

  std::string& body() noexcept { return body_; }
  const std::string& body() const noexcept { return body_; }

  /// How many fields the header has.
  std::size_t field_count() const noexcept { return fields_.size(); }
  iterator begin() const noexcept { return {this, 0}; }
  iterator end() const noexcept { return {this, fields_.size()}; }
  /// The first field with this known name.
  iterator find(bhttp::field id) const noexcept {
    std::size_t i = 0;
    while (i < fields_.size() && fields_[i].id != id) ++i;
    return {this, i};
  }
  /// The first field with this name (compared without regard to case).
  iterator find(std::string_view name) const noexcept {
    std::size_t i = 0;
    while (i < fields_.size() && !boost::beast::iequals(slice(fields_[i].name_at, fields_[i].name_length), name)) ++i;
    return {this, i};
  }
  /// The first value of a field, or empty.
  std::string_view operator[](bhttp::field id) const noexcept { return value_of(find(id)); }
  std::string_view operator[](std::string_view name) const noexcept { return value_of(find(name)); }

 private:
  friend class request_parser;
  friend class http_header_memo;
  struct entry {
    bhttp::field id;
    std::uint32_t name_at, name_length, value_at, value_length;
  };

  std::string_view slice(std::uint32_t at, std::uint32_t length) const noexcept {
    return {text_.data() + at, length};
  }
  std::string_view value_of(iterator it) const noexcept { return it == end() ? std::string_view{} : (*it).value(); }
  field_view at(std::size_t i) const noexcept {
    const entry& e = fields_[i];
    return {e.id, slice(e.name_at, e.name_length), slice(e.value_at, e.value_length)};
  }
  /// The start line and fields (no body), the text in a spare string.
  http_request header_copy() const {
    http_request r;
    r.text_ = spare_strings::take();
    r.text_.assign(text_);
    r.fields_ = fields_;
    r.method_at_ = method_at_;
    r.method_length_ = method_length_;
    r.target_at_ = target_at_;
    r.target_length_ = target_length_;
    r.method_ = method_;
    r.version_ = version_;
    r.keep_alive_ = keep_alive_;
    return r;
  }
  /// Readies the body for `length` announced bytes: a small body goes into a string an earlier
  /// request gave back; room is reserved for at most 64 KiB, so that a client that sends
  /// nothing cannot make the server allocate what it announced.
  void prepare_body(std::uint64_t length) {
    constexpr std::uint64_t first = 64 * 1024;
    if (length <= spare_strings::max_capacity && body_.capacity() < length) body_ = spare_strings::take();
    body_.reserve(static_cast<std::size_t>(std::min(length, first)));
  }
  /// Appends `s` to the text; where it starts. The header limit keeps the text far below 4 GiB.
  std::uint32_t keep(std::string_view s) {
    const auto at = static_cast<std::uint32_t>(text_.size());
    text_.append(s);
    return at;
  }

  std::string text_;
  std::vector<entry, spare_allocator<entry>> fields_;  ///< a block of the thread's spares
  std::string body_;
  std::uint32_t method_at_ = 0, method_length_ = 0, target_at_ = 0, target_length_ = 0;
  bhttp::verb method_ = bhttp::verb::unknown;
  unsigned version_ = 11;
  bool keep_alive_ = true;
};

/// Reads one request (Beast's basic_parser) into an `http_request`. A body the parser reads grows as
/// bytes arrive: a Content-Length announced is never reserved beyond 64 KiB up front, so a client
/// that sends nothing cannot make the server allocate what it announced.
class request_parser final : public bhttp::basic_parser<true> {
 public:
  /// Called for each chunk header of a chunked body (size, extensions); may set an error.
  using chunk_callback = std::function<void(std::uint64_t, std::string_view, boost::beast::error_code&)>;

  request_parser() = default;
  http_request& get() noexcept { return req_; }
  const http_request& get() const noexcept { return req_; }
  http_request release() noexcept { return std::move(req_); }
  /// `cb` must outlive the parser.
  void on_chunk_header(chunk_callback& cb) noexcept { chunk_cb_ = &cb; }

 private:
  void on_request_impl(bhttp::verb method, boost::beast::string_view method_string,
                       boost::beast::string_view target, int version, boost::beast::error_code& ec) override {
    req_.text_ = spare_strings::take();
    req_.fields_.reserve(8);
    req_.method_ = method;
    req_.method_at_ = req_.keep(method_string);
    req_.method_length_ = static_cast<std::uint32_t>(method_string.size());
    req_.target_at_ = req_.keep(target);
    req_.target_length_ = static_cast<std::uint32_t>(target.size());
    req_.version_ = static_cast<unsigned>(version);
    ec = {};
  }
  void on_response_impl(int, boost::beast::string_view, int, boost::beast::error_code& ec) override {
    ec = bhttp::error::bad_version;  // never called: this parser reads requests
  }
  void on_field_impl(bhttp::field id, boost::beast::string_view name, boost::beast::string_view value,
                     boost::beast::error_code& ec) override {
    ec = {};
    if (header_done_) return;  // a chunked body's trailer: the request is judged by its header
    http_request::entry e{id, 0, static_cast<std::uint32_t>(name.size()), 0, static_cast<std::uint32_t>(value.size())};
    e.name_at = req_.keep(name);
    e.value_at = req_.keep(value);
    req_.fields_.push_back(e);
  }
  void on_header_impl(boost::beast::error_code& ec) override {
    header_done_ = true;
    req_.keep_alive_ = keep_alive();
    ec = {};
  }
  void on_body_init_impl(const boost::optional<std::uint64_t>& length, boost::beast::error_code& ec) override {
    if (length) req_.prepare_body(*length);
    ec = {};
  }
  std::size_t on_body_impl(boost::beast::string_view part, boost::beast::error_code& ec) override {
    req_.body_.append(part.data(), part.size());  // geometric growth
    ec = {};
    return part.size();
  }
  void on_chunk_header_impl(std::uint64_t size, boost::beast::string_view extensions,
                            boost::beast::error_code& ec) override {
    ec = {};
    if (chunk_cb_) (*chunk_cb_)(size, extensions, ec);
  }
  std::size_t on_chunk_body_impl(std::uint64_t, boost::beast::string_view part, boost::beast::error_code& ec) override {
    return on_body_impl(part, ec);
  }
  void on_finish_impl(boost::beast::error_code& ec) override { ec = {}; }

  http_request req_;
  chunk_callback* chunk_cb_ = nullptr;
  bool header_done_ = false;
};

/// A connection's last plain header, to read its next request without the parser. A client
/// sends the same header again and again but for its body, whose length it usually keeps too:
/// where the bytes buffered begin with exactly the header the parser last read on this
/// connection and hold its whole body, the request is the one the parser made of that header,
/// with the bytes that follow as its body. The parser's outcome depends on a header's bytes
/// alone, so recalling it gives what parsing it again would; anything else (another header, a
/// body still arriving, a chunked one) goes to the parser as before.
///
/// Only a plain header is remembered: the whole of it at most `max_header` bytes, its body
/// framed by a Content-Length of at most `max_body` bytes (or none), and neither Expect (whose
/// interim reply the connection owes before the body) nor Upgrade among its fields.
class http_header_memo {
 public:
  static constexpr std::size_t max_header = 1024;
  static constexpr std::uint64_t max_body = 64 * 1024;

  http_header_memo() = default;
  http_header_memo(const http_header_memo&) = delete;
  http_header_memo& operator=(const http_header_memo&) = delete;

  /// `parser` has just read a whole header, whose bytes are `header` (up to and including the
  /// empty line): remembers it if it is plain, else forgets what it held.
  void remember(std::string_view header, const request_parser& parser) {
    // Forgotten first: a header that is not plain, or a copy that fails on memory, leaves
    // nothing remembered, never a header with another's request.
    forget();
    const auto length = parser.content_length();
    const http_request& req = parser.get();
    if (header.size() > max_header || parser.chunked() || parser.upgrade() || (length && *length > max_body) ||
        req.find(bhttp::field::expect) != req.end() || req.find(bhttp::field::upgrade) != req.end())
      return;
    request_ = req.header_copy();
    body_length_ = length.value_or(0);
    header_.assign(header);  // (the connection's own: its capacity stays for the next)
  }

  void forget() noexcept { header_.clear(); }

  /// When `buffered` begins with the remembered header and holds its whole body: that request,
  /// its body copied, in `out`, and how many bytes of `buffered` it took; else 0.
  std::size_t recall(std::string_view buffered, http_request& out) const {
    const std::size_t header = header_.size();
    if (header == 0 || buffered.size() < header || buffered.size() - header < body_length_ ||
        std::memcmp(buffered.data(), header_.data(), header) != 0)
      return 0;
    out = request_.header_copy();
    if (body_length_ != 0) {
      out.prepare_body(body_length_);
      out.body_.assign(buffered.data() + header, static_cast<std::size_t>(body_length_));
    }
    return header + static_cast<std::size_t>(body_length_);
  }

 private:
  std::string header_;    ///< empty: nothing remembered
  http_request request_;  ///< what the parser made of it, without a body
  std::uint64_t body_length_ = 0;
};

}  // namespace inferwire::server::rest
