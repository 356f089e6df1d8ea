// SPDX-License-Identifier: Apache-2.0
#include <inferwire/http/compression.hpp>

#include <catch2/catch.hpp>

#include <random>

using namespace inferwire;
using namespace inferwire::http;

TEST_CASE("compression: Content-Encoding values", "[http][compression]") {
  CHECK(parse_content_encoding("") == content_coding::identity);
  CHECK(parse_content_encoding("identity") == content_coding::identity);
  CHECK(parse_content_encoding("gzip") == content_coding::gzip);
  CHECK(parse_content_encoding("deflate") == content_coding::deflate);
  CHECK_FALSE(parse_content_encoding("br"));
  CHECK_FALSE(parse_content_encoding("gzip, deflate"));
}

TEST_CASE("compression: Accept-Encoding negotiation", "[http][compression]") {
  CHECK(negotiate_accept_encoding("") == content_coding::identity);
  CHECK(negotiate_accept_encoding("gzip") == content_coding::gzip);
  CHECK(negotiate_accept_encoding("deflate, gzip") == content_coding::deflate);  // tie: first
  CHECK(negotiate_accept_encoding("deflate;q=0.5, gzip") == content_coding::gzip);
  CHECK(negotiate_accept_encoding("gzip;q=0, deflate;q=0.1") == content_coding::deflate);
  CHECK(negotiate_accept_encoding("br, *") == content_coding::identity);
  CHECK(negotiate_accept_encoding("gzip;q=0") == content_coding::identity);
  CHECK(negotiate_accept_encoding(" identity ; q=0.9 , gzip;q=0.8") == content_coding::identity);
}

TEST_CASE("compression: round trips through both wrappers", "[http][compression]") {
  std::string data(200000, '\0');
  std::mt19937 rng(7);
  for (auto& c : data) c = static_cast<char>('a' + rng() % 4);
  for (auto coding : {content_coding::gzip, content_coding::deflate}) {
    std::string z, back;
    REQUIRE(compress(data, coding, z));
    CHECK(z.size() < data.size());
    if (coding == content_coding::gzip) {
      CHECK(static_cast<unsigned char>(z[0]) == 0x1f);
      CHECK(static_cast<unsigned char>(z[1]) == 0x8b);
    } else {
      CHECK(static_cast<unsigned char>(z[0]) == 0x78);
    }
    REQUIRE_FALSE(decompress(z, data.size(), back));
    CHECK(back == data);
  }
  // Several parts compress as their concatenation.
  std::string_view parts[] = {"hello ", "", "world"};
  std::string z, back;
  REQUIRE(compress(std::span<const std::string_view>(parts), content_coding::gzip, z));
  REQUIRE_FALSE(decompress(z, 100, back));
  CHECK(back == "hello world");
}

TEST_CASE("compression: decompression errors have Triton's texts", "[http][compression]") {
  std::string out;
  auto st = decompress("", 10, out);
  CHECK(st.code() == errc::invalid_arg);
  CHECK(st.message() == "nothing to be decompressed");

  std::string big(5000, 'x'), z;
  REQUIRE(compress(big, content_coding::deflate, z));
  st = decompress(z, 4096, out);
  CHECK(st.code() == errc::invalid_arg);
  CHECK(st.message() ==
        "Decompressed data size exceeds the maximum allowed value of 4096 bytes. Use "
        "--http-max-input-size to increase the limit.");
  CHECK_FALSE(decompress(z, 5000, out));
  CHECK(out == big);

  // Corrupt data is not an error: what inflated before the damage is kept.
  std::string good;
  REQUIRE(compress(std::string(100, 'y'), content_coding::gzip, good));
  good.resize(good.size() - 6);  // truncated trailer
  CHECK_FALSE(decompress(good, 1000, out));
  CHECK(out.size() <= 100);
  CHECK_FALSE(decompress("not compressed at all", 1000, out));
  CHECK(out.empty());
}
