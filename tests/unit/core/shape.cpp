// SPDX-License-Identifier: Apache-2.0
#include <inferwire/core/shape.hpp>

#include <catch2/catch.hpp>

#include <array>
#include <limits>

using namespace inferwire;

TEST_CASE("shape: element counts", "[core][shape]") {
  CHECK(element_count(shape_t{}).value == 1);
  CHECK(element_count(shape_t{1, 16}).value == 16);
  CHECK(element_count(shape_t{3, 0, 5}).value == 0);
  CHECK(element_count(shape_t{-1, 16}).error == shape_errc::invalid_dimension);
  CHECK(element_count(shape_t{2, -5}).error == shape_errc::invalid_dimension);
}

TEST_CASE("shape: overflow is detected, never wrapped", "[core][shape]") {
  constexpr auto max = std::numeric_limits<std::int64_t>::max();
  CHECK(element_count(shape_t{max}).value == max);
  CHECK(element_count(shape_t{max, 2}).error == shape_errc::count_overflow);
  CHECK(element_count(shape_t{1LL << 32, 1LL << 32}).error == shape_errc::count_overflow);
  // A zero dimension makes any product zero, even one that would overflow.
  CHECK(element_count(shape_t{max, 2, 0}).value == 0);
  // A negative dimension wins over overflow.
  CHECK(element_count(shape_t{max, 2, -1}).error == shape_errc::invalid_dimension);

  CHECK(byte_size(shape_t{1, 16}, data_type::int32).value == 64);
  CHECK(byte_size(shape_t{max / 4}, data_type::fp32).value == (max / 4) * 4);
  CHECK(byte_size(shape_t{max / 4 + 1}, data_type::fp32).error == shape_errc::byte_size_overflow);
  CHECK(byte_size(shape_t{4}, data_type::bytes).error == shape_errc::variable_size_type);
  CHECK(byte_size(shape_t{4}, data_type::invalid).error == shape_errc::variable_size_type);
  CHECK(element_count(shape_t{0, max, 2}).value == 0);
  CHECK(element_count(shape_t{3037000500, 3037000500}).error == shape_errc::count_overflow);  // just past
  CHECK(element_count(shape_t{3037000499, 3037000499}).value == 3037000499LL * 3037000499LL);

  // The same in constant expressions.
  static constexpr std::array<std::int64_t, 2> too_many{max, 2}, fits{1, 16};
  static_assert(element_count(too_many).error == shape_errc::count_overflow);
  static_assert(byte_size(fits, data_type::int64).value == 128);
}

TEST_CASE("shape: printing and variable dims", "[core][shape]") {
  CHECK(to_string(shape_t{-1, 16}) == "[-1,16]");
  CHECK(to_string(shape_t{}) == "[]");
  CHECK(has_variable_dimension(shape_t{-1}));
  CHECK_FALSE(has_variable_dimension(shape_t{1, 2}));
}
