// SPDX-License-Identifier: Apache-2.0
#include <inferwire/core/tensor_view.hpp>

#include <catch2/catch.hpp>

#include <cstring>
#include <numeric>

using namespace inferwire;

TEST_CASE("tensor_view: typed access over bytes", "[core][tensor_view]") {
  std::vector<std::int32_t> data(16);
  std::iota(data.begin(), data.end(), -3);
  shape_t shape{1, 16};
  tensor_view<std::int32_t> v(std::as_bytes(std::span(data)), shape);
  CHECK(v.size() == 16);
  CHECK(v[0] == -3);
  CHECK(v.at(15) == 12);
  CHECK_THROWS_AS(v.at(16), std::out_of_range);
  CHECK(v.to_vector() == data);
  CHECK(std::accumulate(v.begin(), v.end(), 0) == std::accumulate(data.begin(), data.end(), 0));
  CHECK(v.end() - v.begin() == 16);
  REQUIRE(v.aligned_span());
  CHECK(v.aligned_span()->data() == data.data());
}

TEST_CASE("tensor_view: size mismatches are refused", "[core][tensor_view]") {
  std::vector<float> data(3);
  shape_t shape{4};
  CHECK_THROWS_AS(tensor_view<float>(std::as_bytes(std::span(data)), shape),
                  std::invalid_argument);
  CHECK_FALSE(tensor_view<float>::make(std::as_bytes(std::span(data)), shape));
  shape_t bad{-1};
  CHECK_FALSE(tensor_view<float>::make(std::as_bytes(std::span(data)), bad));
}

TEST_CASE("tensor_view: misaligned data is read safely", "[core][tensor_view]") {
  // A tensor right after a JSON header of odd length is misaligned.
  std::vector<std::byte> buf(1 + 3 * sizeof(double));
  const double values[3] = {1.5, -2.25, 1e300};
  std::memcpy(buf.data() + 1, values, sizeof values);
  shape_t shape{3};
  tensor_view<double> v(std::span<const std::byte>(buf).subspan(1), shape);
  CHECK(v[0] == 1.5);
  CHECK(v[1] == -2.25);
  CHECK(v[2] == 1e300);
  CHECK_FALSE(v.aligned_span());
}

TEST_CASE("tensor_view: BOOL reads any non-zero byte as true", "[core][tensor_view]") {
  const std::byte raw[] = {std::byte{0}, std::byte{1}, std::byte{7}};
  shape_t shape{3};
  tensor_view<bool> v(raw, shape);
  CHECK(v.to_vector() == std::vector<bool>{false, true, true});
  CHECK_FALSE(v.aligned_span());
}

TEST_CASE("tensor_view: 1-D view of typed data survives copies", "[core][tensor_view]") {
  std::vector<std::uint16_t> data{1, 2, 3};
  tensor_view<std::uint16_t> a{std::span<const std::uint16_t>(data)};
  tensor_view<std::uint16_t> b = a;
  a = tensor_view<std::uint16_t>{};
  CHECK(b.shape().size() == 1);
  CHECK(b.shape()[0] == 3);
  CHECK(b.at(2) == 3);
}
