// SPDX-License-Identifier: Apache-2.0
// inferwire/core/shape.hpp
//
// Tensor shapes and the arithmetic on them that must never overflow: element counts and byte
// sizes are computed in int64 with every multiplication checked, because both come straight
// from untrusted requests.
#ifndef INFERWIRE_CORE_SHAPE_HPP
#define INFERWIRE_CORE_SHAPE_HPP

#include <inferwire/core/data_type.hpp>

#include <cstdint>
#include <limits>
#include <span>
#include <string>
#include <vector>

namespace inferwire {

/// A tensor shape as it travels on the wire (int64 dims; -1 marks a variable dimension in
/// model metadata and configurations).
using shape_t = std::vector<std::int64_t>;

/// Why a shape computation failed.
enum class shape_errc {
  ok = 0,
  invalid_dimension,   ///< a dimension is negative (including -1)
  count_overflow,      ///< the element count does not fit in int64
  byte_size_overflow,  ///< element count * element size does not fit in int64
  variable_size_type,  ///< byte size asked of BYTES or an invalid type
};

/// The result of a checked shape computation: a value, or the reason there is none.
struct shape_result {
  std::int64_t value = 0;
  shape_errc error = shape_errc::ok;
  constexpr explicit operator bool() const noexcept { return error == shape_errc::ok; }
};

namespace detail {
/// a * b for a, b >= 0, or true when it does not fit in int64. With GCC and Clang a multiply
/// and an overflow flag: a division, as the portable check needs, takes tens of cycles.
constexpr bool multiply_overflows(std::int64_t a, std::int64_t b, std::int64_t& out) noexcept {
#if defined(__GNUC__) || defined(__clang__)
  return __builtin_mul_overflow(a, b, &out);
#else
  if (b != 0 && a > std::numeric_limits<std::int64_t>::max() / b) return true;
  out = a * b;
  return false;
#endif
}
}  // namespace detail

/// Product of the dimensions; an empty shape (a scalar) has one element.
constexpr shape_result element_count(std::span<const std::int64_t> dims) noexcept {
  std::int64_t count = 1;
  bool overflow = false;
  for (std::int64_t d : dims) {
    if (d < 0) return {0, shape_errc::invalid_dimension};
    if (!overflow) overflow = detail::multiply_overflows(count, d, count);  // a later negative dim still counts
  }
  if (!overflow) return {count, shape_errc::ok};
  // A zero dimension makes the product zero no matter what else overflowed.
  for (std::int64_t d : dims)
    if (d == 0) return {0, shape_errc::ok};
  return {0, shape_errc::count_overflow};
}

/// element_count * element_size for fixed-size types.
constexpr shape_result byte_size(std::span<const std::int64_t> dims, data_type t) noexcept {
  if (!is_fixed_size(t)) return {0, shape_errc::variable_size_type};
  shape_result n = element_count(dims);
  if (!n) return n;
  std::int64_t bytes = 0;
  if (detail::multiply_overflows(n.value, static_cast<std::int64_t>(element_size(t)), bytes))
    return {0, shape_errc::byte_size_overflow};
  return {bytes, shape_errc::ok};
}

/// True when some dimension is -1 (or any negative value).
constexpr bool has_variable_dimension(std::span<const std::int64_t> dims) noexcept {
  for (std::int64_t d : dims)
    if (d < 0) return true;
  return false;
}

/// "[1,16]" — the form Triton prints shapes in its messages.
inline std::string to_string(std::span<const std::int64_t> dims) {
  std::string s = "[";
  for (std::size_t i = 0; i < dims.size(); ++i) {
    if (i) s += ',';
    s += std::to_string(dims[i]);
  }
  s += ']';
  return s;
}

}  // namespace inferwire

#endif
