// SPDX-License-Identifier: Apache-2.0
#include <inferwire/shm/system_region.hpp>

#include <catch2/catch.hpp>

#include <cstring>
#include <string>

#include <unistd.h>

namespace shm = inferwire::shm;

namespace {
std::string key(const char* name) { return "/iwunit_" + std::to_string(::getpid()) + "_" + name; }
}  // namespace

TEST_CASE("shm::valid_key", "[shm]") {
  CHECK(shm::valid_key("/a"));
  CHECK(shm::valid_key("/input_simple"));
  CHECK_FALSE(shm::valid_key("/"));
  CHECK_FALSE(shm::valid_key("a"));
  CHECK_FALSE(shm::valid_key("/a/b"));
  CHECK_FALSE(shm::valid_key("/" + std::string(255, 'x')));
}

TEST_CASE("shm::system_region create, open, write, unlink", "[shm]") {
  auto r = shm::system_region::create(key("u1"), 4096);
  REQUIRE(r);
  CHECK(r.size() == 4096);
  CHECK(r.bytes().size() == 4096);
  CHECK(static_cast<unsigned char>(r.data()[100]) == 0);  // zero-filled
  const char text[] = "hello";
  r.write(10, std::as_bytes(std::span(text)));
  auto o = shm::system_region::open(key("u1"));
  CHECK(std::memcmp(o.data() + 10, "hello", 6) == 0);
  CHECK_THROWS_AS(r.write(4094, std::as_bytes(std::span(text))), std::out_of_range);
  auto req = r.register_request("region", 0, 64);
  CHECK(req.name == "region");
  CHECK(req.key == key("u1"));
  CHECK(req.byte_size == 64);
  CHECK(r.register_request("all").byte_size == 4096);
  r.release_ownership();
  CHECK_FALSE(r.owner());
  o.unlink();
  CHECK_THROWS_AS(shm::system_region::open(key("u1")), std::system_error);
}

TEST_CASE("shm::system_region errors name the cause", "[shm]") {
  auto r = shm::system_region::create(key("u2"), 8);
  try {
    shm::system_region::create(key("u2"), 8);
    FAIL("created twice");
  } catch (const std::system_error& e) {
    CHECK(e.code() == std::errc::file_exists);
    CHECK(std::string(e.what()).find("exists") != std::string::npos);
  }
  CHECK_THROWS_AS(shm::system_region::create("/bad/key", 8), std::invalid_argument);
}
