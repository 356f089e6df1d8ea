// SPDX-License-Identifier: Apache-2.0
// The HTTP frontend's request and its parser: Beast's basic_parser reads, http_request keeps
// what it reported (start line, the header's fields in order, the body) in one string.
#include "http_request.hpp"

#include <catch2/catch.hpp>

#include <boost/asio/buffer.hpp>
#include <boost/beast/http/error.hpp>

#include <string>
#include <thread>
#include <vector>

namespace rest = inferwire::server::rest;
namespace bhttp = boost::beast::http;

namespace {

// Feeds `text` to `parser` in pieces of at most `step` bytes, as reads would bring it.
boost::beast::error_code feed(rest::request_parser& parser, std::string_view text, std::size_t step = 1 << 20) {
  parser.eager(true);
  boost::beast::error_code ec;
  std::string pending;
  std::size_t given = 0;
  while (!parser.is_done()) {
    if (given < text.size()) {
      const std::size_t n = std::min(step, text.size() - given);
      pending.append(text.substr(given, n));
      given += n;
    }
    const std::size_t used = parser.put(boost::asio::buffer(pending), ec);
    pending.erase(0, used);
    if (ec == bhttp::error::need_more) {
      ec = {};
      if (given == text.size()) return bhttp::error::partial_message;
      continue;
    }
    if (ec) return ec;
  }
  return ec;
}

}  // namespace

TEST_CASE("http_request: the start line, the fields in order and the body", "[http_request]") {
  std::string text = "POST /v2/models/simple/infer?x=1 HTTP/1.1\r\nHost: 127.0.0.1\r\n"
                     "inference-header-content-length: 3\r\n";
  for (int i = 0; i < 40; ++i)  // more fields than the request keeps inline
    text += "X-Field-" + std::to_string(i) + ": " + std::string(static_cast<std::size_t>(i) * 5, 'v') + "\r\n";
  text += "Content-Length: 5\r\n\r\nhello";
  for (std::size_t step : {std::size_t{1} << 20, std::size_t{7}, std::size_t{1}}) {
    rest::request_parser parser;
    REQUIRE_FALSE(feed(parser, text, step));
    rest::http_request req = parser.release();
    CHECK(req.method() == bhttp::verb::post);
    CHECK(req.method_string() == "POST");
    CHECK(req.target() == "/v2/models/simple/infer?x=1");
    CHECK(req.version() == 11);
    CHECK(req.keep_alive());
    CHECK(req[bhttp::field::host] == "127.0.0.1");
    CHECK(req["Inference-Header-Content-Length"] == "3");  // names compare without case
    CHECK(req.find("inference-header-content-length")->name() == bhttp::field::unknown);
    CHECK(req.find("inference-header-content-length")->name_string() == "inference-header-content-length");
    CHECK(req["X-Field-39"] == std::string(195, 'v'));
    CHECK(req["X-Field-40"].empty());
    CHECK(req.find("X-Field-40") == req.end());
    CHECK(req[bhttp::field::content_length] == "5");
    CHECK(req[bhttp::field::expect].empty());
    CHECK(req.body() == "hello");
    std::vector<std::string> names;
    for (const auto& f : req) names.emplace_back(f.name_string());
    REQUIRE(names.size() == 43);
    CHECK(req.field_count() == 43);
    CHECK(names.front() == "Host");
    CHECK(names[1] == "inference-header-content-length");
    CHECK(names[2] == "X-Field-0");
    CHECK(names.back() == "Content-Length");
    // A move keeps every view right, also of a text short enough to live in the string itself.
    rest::http_request moved = std::move(req);
    CHECK(moved.target() == "/v2/models/simple/infer?x=1");
    CHECK(moved["X-Field-20"] == std::string(100, 'v'));
  }
  rest::request_parser small;
  REQUIRE_FALSE(feed(small, "GET / HTTP/1.1\r\nA: b\r\n\r\n"));
  rest::http_request tiny = small.release();
  rest::http_request moved = std::move(tiny);
  CHECK(moved.target() == "/");
  CHECK(moved.method_string() == "GET");
  CHECK(moved["a"] == "b");
  CHECK(moved.body().empty());
}

TEST_CASE("http_request: the connection's semantics as RFC 9112 gives them", "[http_request]") {
  auto keep = [](std::string_view text) {
    rest::request_parser parser;
    REQUIRE_FALSE(feed(parser, text));
    return parser.release().keep_alive();
  };
  CHECK(keep("GET / HTTP/1.1\r\n\r\n"));
  CHECK_FALSE(keep("GET / HTTP/1.1\r\nConnection: close\r\n\r\n"));
  CHECK_FALSE(keep("GET / HTTP/1.0\r\n\r\n"));
  CHECK(keep("GET / HTTP/1.0\r\nConnection: keep-alive\r\n\r\n"));
}

TEST_CASE("http_request: a chunked body, its chunk headers reported, its trailer left out", "[http_request]") {
  rest::request_parser parser;
  std::vector<std::uint64_t> sizes;
  rest::request_parser::chunk_callback cb = [&](std::uint64_t size, std::string_view, boost::beast::error_code& ec) {
    sizes.push_back(size);
    ec = {};
  };
  parser.on_chunk_header(cb);
  const std::string text =
      "POST /v2/models/simple/infer HTTP/1.1\r\nHost: h\r\nTransfer-Encoding: chunked\r\n\r\n"
      "5\r\nhello\r\n6\r\n world\r\n0\r\nX-Restricted: key\r\n\r\n";
  REQUIRE_FALSE(feed(parser, text, 3));
  const rest::http_request req = parser.release();
  CHECK(req.body() == "hello world");
  CHECK(sizes == std::vector<std::uint64_t>{5, 6, 0});
  CHECK(req.find("X-Restricted") == req.end());  // a trailer is not a header field
  CHECK(req.field_count() == 2);

  // The callback's error ends the parse.
  rest::request_parser refused;
  rest::request_parser::chunk_callback no = [](std::uint64_t size, std::string_view, boost::beast::error_code& ec) {
    if (size > 4) ec = bhttp::error::body_limit;
  };
  refused.on_chunk_header(no);
  CHECK(feed(refused, text) == bhttp::error::body_limit);
}

TEST_CASE("http_request: a body grows with the bytes that come, not the length announced", "[http_request]") {
  rest::request_parser parser;
  parser.eager(true);
  const std::string head = "POST / HTTP/1.1\r\nContent-Length: 1000000000\r\n\r\n";
  boost::beast::error_code ec;
  parser.body_limit(std::uint64_t{2} << 30);
  parser.put(boost::asio::buffer(head), ec);
  REQUIRE((!ec || ec == bhttp::error::need_more));
  const std::string part(1000, 'x');
  ec = {};
  parser.put(boost::asio::buffer(part), ec);
  CHECK(parser.get().body().size() == 1000);
  CHECK(parser.get().body().capacity() <= 64 * 1024);
}

TEST_CASE("http_request: its strings go back to the thread's spares when it ends", "[http_request]") {
  std::thread([] {
    using strings = inferwire::server::spare_strings;
    {
      rest::request_parser parser;
      CHECK_FALSE(feed(parser, "POST /v2/models/simple/infer HTTP/1.1\r\nHost: 127.0.0.1\r\n"
                               "Content-Length: 20\r\n\r\n01234567890123456789"));
      rest::http_request req = parser.release();
      CHECK(strings::kept() == 0);
    }
    CHECK(strings::kept() == 2);  // the text and the body
  }).join();
}

namespace {

// Reads the header at the start of `text` as the connection does (the parser not eager: it
// stops after the header) and lets `memo` remember it; the header's length.
std::size_t remember_header(rest::http_header_memo& memo, std::string_view text) {
  rest::request_parser parser;
  boost::beast::error_code ec;
  const std::size_t used = parser.put(boost::asio::buffer(text.data(), text.size()), ec);
  REQUIRE_FALSE(ec);
  REQUIRE(parser.is_header_done());
  memo.remember(text.substr(0, used), parser);
  return used;
}

// Every part of two requests, compared.
void check_same(const rest::http_request& a, const rest::http_request& b) {
  CHECK(a.method() == b.method());
  CHECK(a.method_string() == b.method_string());
  CHECK(a.target() == b.target());
  CHECK(a.version() == b.version());
  CHECK(a.keep_alive() == b.keep_alive());
  CHECK(a.body() == b.body());
  REQUIRE(a.field_count() == b.field_count());
  for (auto i = a.begin(), j = b.begin(); i != a.end(); ++i, ++j) {
    CHECK(i->name() == j->name());
    CHECK(i->name_string() == j->name_string());
    CHECK(i->value() == j->value());
  }
}

}  // namespace

TEST_CASE("http_header_memo: a repeated header is the request the parser made of it", "[http_request]") {
  const std::string post = "POST /v2/models/simple/infer HTTP/1.1\r\nHost: 127.0.0.1\r\n"
                           "Inference-Header-Content-Length: 3\r\nContent-Length: 5\r\n\r\n";
  rest::http_header_memo memo;
  const std::size_t header = remember_header(memo, post + "hello");
  CHECK(header == post.size());
  for (const std::string& body : std::vector<std::string>{"hello", "world", std::string("\r\n\r\n\0", 5)}) {
    const std::string text = post + body;
    rest::http_request recalled;
    REQUIRE(memo.recall(text, recalled) == text.size());
    rest::request_parser parser;
    REQUIRE_FALSE(feed(parser, text));
    check_same(recalled, parser.get());
    CHECK(recalled.body() == body);
  }
  // Pipelined: the next request's bytes stay where they are.
  rest::http_request recalled;
  CHECK(memo.recall(post + "hello" + post, recalled) == post.size() + 5);
  // The body not all here yet, or another header: the parser's business.
  CHECK(memo.recall(post + "hell", recalled) == 0);
  CHECK(memo.recall(post.substr(0, 20), recalled) == 0);
  std::string other = post;
  other[other.find("5\r\n")] = '6';
  CHECK(memo.recall(other + "hello!", recalled) == 0);
  other = post;
  other.replace(other.find("simple"), 6, "simplf");
  CHECK(memo.recall(other + "hello", recalled) == 0);
  CHECK(memo.recall("", recalled) == 0);
  // A request without a body, and one whose connection closes after it.
  for (const std::string& get : std::vector<std::string>{"GET /v2/health/ready HTTP/1.1\r\nHost: x\r\n\r\n",
                                "GET /v2 HTTP/1.1\r\nConnection: close\r\n\r\n", "GET /v2 HTTP/1.0\r\n\r\n"}) {
    rest::http_header_memo m;
    remember_header(m, get);
    rest::http_request r;
    REQUIRE(m.recall(get + "POST", r) == get.size());
    rest::request_parser parser;
    REQUIRE_FALSE(feed(parser, get));
    check_same(r, parser.get());
  }
}

TEST_CASE("http_header_memo: only a plain header is remembered", "[http_request]") {
  const std::string plain = "POST /p HTTP/1.1\r\nContent-Length: 2\r\n\r\nok";
  const std::string big_field = "X-Big: " + std::string(rest::http_header_memo::max_header, 'b') + "\r\n";
  const std::string big_body = std::to_string(rest::http_header_memo::max_body + 1);
  for (const std::string& text : std::vector<std::string>{
           "POST /p HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n2\r\nok\r\n0\r\n\r\n",
        "POST /p HTTP/1.1\r\nExpect: 100-continue\r\nContent-Length: 2\r\n\r\nok",
        "GET /p HTTP/1.1\r\nConnection: upgrade\r\nUpgrade: websocket\r\n\r\n",
        "POST /p HTTP/1.1\r\n" + big_field + "Content-Length: 2\r\n\r\nok",
        "POST /p HTTP/1.1\r\nContent-Length: " + big_body + "\r\n\r\n" + std::string(rest::http_header_memo::max_body + 1, 'x')}) {
    rest::http_header_memo memo;
    remember_header(memo, plain);
    rest::http_request r;
    REQUIRE(memo.recall(plain, r) == plain.size());
    remember_header(memo, text);  // not plain: forgets the one before too
    CHECK(memo.recall(text, r) == 0);
    CHECK(memo.recall(plain, r) == 0);
  }
}
