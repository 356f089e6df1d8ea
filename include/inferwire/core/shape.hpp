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
  explicit operator bool() const noexcept { return error == shape_errc::ok; }
};

/// Product of the dimensions; an empty shape (a scalar) has one element.
constexpr shape_result element_count(std::span<const std::int64_t> dims) noexcept {
  std::int64_t count = 1;
  bool overflow = false;
  for (std::int64_t d : dims) {
    if (d < 0) return {0, shape_errc::invalid_dimension};
    if (overflow) continue;  // a later negative dim still reports invalid_dimension
    if (d != 0 && count > std::numeric_limits<std::int64_t>::max() / d) overflow = true;
    else count *= d;
  }
  // A zero dimension makes the product zero no matter what else overflowed.
  for (std::int64_t d : dims)
    if (d == 0) return {0, shape_errc::ok};
  if (overflow) return {0, shape_errc::count_overflow};
  return {count, shape_errc::ok};
}

/// element_count * element_size for fixed-size types.
constexpr shape_result byte_size(std::span<const std::int64_t> dims, data_type t) noexcept {
  if (!is_fixed_size(t)) return {0, shape_errc::variable_size_type};
  shape_result n = element_count(dims);
  if (!n) return n;
  auto size = static_cast<std::int64_t>(element_size(t));
  if (n.value > std::numeric_limits<std::int64_t>::max() / size)
    return {0, shape_errc::byte_size_overflow};
  return {n.value * size, shape_errc::ok};
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
