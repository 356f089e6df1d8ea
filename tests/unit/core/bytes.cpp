// SPDX-License-Identifier: Apache-2.0
#include <inferwire/core/bytes.hpp>

#include <catch2/catch.hpp>

#include <string>
#include <vector>

using namespace inferwire;
using namespace std::string_literals;

namespace {
std::span<const std::byte> as_span(const std::string& s) { return std::as_bytes(std::span(s)); }
}  // namespace

TEST_CASE("bytes: round trip with embedded NULs and empty elements", "[core][bytes]") {
  const std::vector<std::string> elements{"he\0llo"s, ""s, "\x00\x01\x02\x03"s, "z"};
  std::string wire = encode_bytes(elements);
  CHECK(wire.size() == 4 * 4 + 6 + 0 + 4 + 1);
  CHECK(wire.substr(0, 4) == "\x06\x00\x00\x00"s);

  std::vector<std::string> back;
  for (std::string_view e : bytes_view(wire)) back.emplace_back(e);
  CHECK(back == elements);
  CHECK_FALSE(bytes_view(wire).malformed());
  CHECK(bytes_view(wire).elements().size() == 4);
}

TEST_CASE("bytes: builder counts and sizes", "[core][bytes]") {
  bytes_builder b;
  b.reserve(2, 3);
  b.append("abc").append(std::string_view("", 0));
  CHECK(b.count() == 2);
  CHECK(b.size() == 4 + 3 + 4);
  std::string s = b.release();
  CHECK(s == "\x03\x00\x00\x00" "abc" "\x00\x00\x00\x00"s);
  CHECK(b.count() == 0);
}

TEST_CASE("bytes: empty buffer has no elements", "[core][bytes]") {
  bytes_view v{std::string_view{}};
  CHECK(v.begin() == v.end());
  CHECK_FALSE(v.malformed());
}

TEST_CASE("bytes: malformed buffers never read past the end", "[core][bytes]") {
  // A length prefix cut short.
  std::string cut = "\x01\x00\x00\x00" "a" "\x05\x00"s;
  std::vector<std::string_view> out;
  CHECK_FALSE(bytes_view(cut).decode(out));
  CHECK(out == std::vector<std::string_view>{"a"});
  int n = 0;
  for (auto e : bytes_view(cut)) {
    (void)e;
    ++n;
  }
  CHECK(n == 1);
  // A declared length running past the end.
  std::string over = "\xff\x00\x00\x00" "abc"s;
  CHECK(bytes_view(over).malformed());
  CHECK(bytes_view(over).begin() == bytes_view(over).end());
  CHECK_THROWS_AS(bytes_view(over).elements(), std::invalid_argument);
}

TEST_CASE("bytes: core validation messages of v2-protocol section 1.4", "[core][bytes]") {
  std::string two = encode_bytes(std::vector<std::string>{"1", "2"});
  CHECK(validate_bytes_input(as_span(two), 2, "INPUT0", "simple_string").is_ok());

  status more = validate_bytes_input(as_span(two), 1, "INPUT0", "simple_string", "[request id: 7] ");
  CHECK(more.code() == errc::invalid_arg);
  CHECK(more.message() ==
        "[request id: 7] unexpected number of string elements 2 for inference input 'INPUT0' "
        "for model 'simple_string', expecting 1");

  status fewer = validate_bytes_input(as_span(two), 3, "INPUT0", "simple_string");
  CHECK(fewer.message() ==
        "expected 3 string elements for inference input 'INPUT0' for model 'simple_string', "
        "got 2");

  std::string partial = two + "\x01\x00"s;
  status incomplete = validate_bytes_input(as_span(partial), 3, "INPUT0", "simple_string");
  CHECK(incomplete.message() ==
        "incomplete string length indicator for inference input 'INPUT0' for model "
        "'simple_string', expecting 4 bytes but only 2 bytes available. Please make sure the "
        "string length indicator is in one buffer.");

  // Upstream quirk: a final element whose length runs past the end is counted, not refused.
  std::string overlong = "\x01\x00\x00\x00" "a" "\x09\x00\x00\x00" "bc"s;
  CHECK(validate_bytes_input(as_span(overlong), 2, "INPUT0", "m").is_ok());
}
