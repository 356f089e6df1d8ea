// SPDX-License-Identifier: Apache-2.0
// The client's Server-Sent Events splitter (generate_stream): events split across reads, a
// blank line split across two reads, an event longer than the reply limit, and a long event
// fed in small reads.
#include <inferwire/http/client.hpp>

#include <catch2/catch.hpp>

#include <string>
#include <vector>

namespace http_detail = inferwire::http::detail;

namespace {

struct collected {
  std::vector<std::string> texts;
  http_detail::sse_splitter splitter(std::size_t max_event = std::string::npos) {
    return http_detail::sse_splitter([this](boost::json::object&& o) { texts.push_back(boost::json::serialize(o)); },
                                     max_event);
  }
};

}  // namespace

TEST_CASE("sse_splitter: events in pieces, a blank line across two reads", "[http][sse]") {
  collected c;
  auto split = c.splitter();
  CHECK(split("data: {\"a\":1}\n", false));
  CHECK(c.texts.empty());
  CHECK(split("\ndata: {\"b\"", false));  // the blank line ends in this read
  REQUIRE(c.texts.size() == 1);
  CHECK(c.texts[0] == R"({"a":1})");
  CHECK(split(":2}\n", false));
  CHECK(split("\n", true));
  REQUIRE(c.texts.size() == 2);
  CHECK(c.texts[1] == R"({"b":2})");
}

TEST_CASE("sse_splitter: an unfinished or non-object event is an error", "[http][sse]") {
  collected c;
  auto split = c.splitter();
  CHECK_FALSE(split("data: {\"a\":1}\n", true));
  collected d;
  auto split2 = d.splitter();
  CHECK_FALSE(split2("data: [1]\n\n", false));
}

TEST_CASE("sse_splitter: one event may not pass the reply limit", "[http][sse]") {
  collected c;
  auto split = c.splitter(1024);
  CHECK(split("data: {\"a\":1}\n\n", false));  // small events pass
  std::string chunk(512, 'x');
  CHECK(split("data: \"" + chunk, false));
  CHECK_FALSE(split(chunk, false));  // 1,031 bytes without a blank line
  CHECK(c.texts.size() == 1);
}

TEST_CASE("sse_splitter: a read that takes it past the limit but ends the event is accepted", "[http][sse]") {
  // The splitter refuses an unfinished event before it grows past the limit; a read that holds
  // the event's blank line, or its second half across the previous read's end, is not refused.
  collected c;
  auto split = c.splitter(1024);
  const std::string text(990, 'x');
  CHECK(split("data: {\"a\":\"" + text + "\"}", false));  // 1,008 bytes, unfinished
  CHECK(split("\n\ndata: {\"b\":2}\n\n", false));          // over 1,024 together: two events end
  CHECK(split("data: {\"c\":\"" + text + "\"}\n", false));
  CHECK(split("\ndata: {\"d\":4}\n\n", false));  // the blank line across the reads' boundary
  CHECK(split({}, true));
  REQUIRE(c.texts.size() == 4);
  CHECK(c.texts[1] == "{\"b\":2}");
  CHECK(c.texts[3] == "{\"d\":4}");
  // And an unfinished one that a read would take past the limit is refused at that read.
  collected d;
  auto split2 = d.splitter(1024);
  CHECK(split2("data: {\"a\":\"" + text, false));
  CHECK_FALSE(split2(std::string(40, 'y') + "\n", false));
  CHECK(d.texts.empty());
}

TEST_CASE("sse_splitter: a long event read in small pieces is searched once", "[http][sse]") {
  // 8 MiB in 4 KiB reads: with a search from the start after every read this took seconds;
  // here it is one pass.
  collected c;
  auto split = c.splitter();
  REQUIRE(split("data: {\"long\":\"", false));
  const std::string piece(4096, 'y');
  for (int i = 0; i < 2048; ++i) REQUIRE(split(piece, false));
  REQUIRE(split("\"}\n\n", true));
  REQUIRE(c.texts.size() == 1);
  CHECK(c.texts[0].size() == 8u * 1024 * 1024 + 11);
}
