// SPDX-License-Identifier: Apache-2.0
#include <inferwire/v2/tensor.hpp>

#include <catch2/catch.hpp>

#include <array>
#include <cstring>
#include <numeric>
#include <vector>

namespace v2 = inferwire::v2;

TEST_CASE("make_input views a container that outlives the request", "[v2][tensor]") {
  std::vector<std::int32_t> a(16);
  std::iota(a.begin(), a.end(), 0);
  const auto in = v2::make_input("INPUT0", a, {1, 16});
  CHECK(in.datatype == inferwire::data_type::int32);
  CHECK(in.shape == inferwire::shape_t{1, 16});
  CHECK_FALSE(in.data.owns());
  CHECK(in.data.bytes().data() == reinterpret_cast<const std::byte*>(a.data()));
  const auto from_span = v2::make_input("INPUT0", std::span<const std::int32_t>(a), {16});
  CHECK_FALSE(from_span.data.owns());
  CHECK(from_span.data.bytes().data() == reinterpret_cast<const std::byte*>(a.data()));
}

TEST_CASE("make_input owns a copy of a temporary container", "[v2][tensor]") {
  // A view of the temporary would dangle once the full expression ends.
  const auto in = v2::make_input("INPUT0", std::vector<std::int32_t>{7, 8, 9, 10}, {4});
  REQUIRE(in.data.owns());
  REQUIRE(in.data.size() == 16);
  std::int32_t back[4];
  std::memcpy(back, in.data.bytes().data(), sizeof back);
  CHECK(back[0] == 7);
  CHECK(back[3] == 10);
  const auto from_array = v2::make_input("X", std::array<float, 2>{1.5f, -2.0f}, {2});
  CHECK(from_array.data.owns());
  CHECK(from_array.datatype == inferwire::data_type::fp32);
  CHECK_THROWS_AS(v2::make_input("X", std::vector<std::int32_t>(3), {4}), std::invalid_argument);
}

TEST_CASE("make_input refuses data that does not match the shape", "[v2][tensor]") {
  std::vector<std::int32_t> a(15);
  CHECK_THROWS_WITH(v2::make_input("INPUT0", a, {1, 16}),
                    "tensor 'INPUT0' has 60 bytes, which does not match its INT32 shape [1,16]");
}
