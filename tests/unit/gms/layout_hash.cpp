// SPDX-License-Identifier: Apache-2.0
#include <inferwire/gms/layout_hash.hpp>

#include <catch2/catch.hpp>

namespace gms = inferwire::gms;

TEST_CASE("gms layout hash matches the spec's vectors", "[gms]") {
  // Two allocations (given out of order: the hash sorts by slot) and one metadata entry.
  std::vector<gms::layout_allocation> allocations{{1, 3145728, 4194304, "default"},
                                                  {0, 4096, 2097152, "weights"}};
  std::vector<gms::layout_metadata> metadata{{"tensor.0", 0, 0, R"({"x":1})"}};
  CHECK(gms::layout_hash(allocations, metadata) ==
        "7abf180f8a031defd71f13aa7d3294d041c1955b635c32e37efbed148abd8c22");
  CHECK(gms::layout_hash({}, {}) ==
        "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855");
}

TEST_CASE("gms layout hash depends on structure, not on ids", "[gms]") {
  std::vector<gms::layout_allocation> a{{0, 4096, 2097152, "weights"}};
  const auto h = gms::layout_hash(a, {});
  CHECK(h.size() == 64);
  a[0].tag = "kv_cache";
  CHECK(gms::layout_hash(a, {}) != h);
  a[0].tag = "weights";
  CHECK(gms::layout_hash(a, {}) == h);
  // Metadata keys are ordered bytewise, values enter raw.
  std::vector<gms::layout_metadata> m1{{"b", 0, 0, "1"}, {"a", 0, 8, std::string("\0", 1)}};
  std::vector<gms::layout_metadata> m2{{"a", 0, 8, std::string("\0", 1)}, {"b", 0, 0, "1"}};
  CHECK(gms::layout_hash(a, m1) == gms::layout_hash(a, m2));
  m2[0].value = std::string("\0\0", 2);
  CHECK(gms::layout_hash(a, m1) != gms::layout_hash(a, m2));
}
