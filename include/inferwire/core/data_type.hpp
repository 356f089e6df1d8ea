// SPDX-License-Identifier: Apache-2.0
// inferwire/core/data_type.hpp
//
// The 14 tensor data types of the protocol: wire names ("INT32", "BYTES"), model-config enum
// names ("TYPE_INT32", "TYPE_STRING"), element sizes, and the C++ element types that typed
// views use. Enumerator values equal model_config.proto's DataType numbers.
#ifndef INFERWIRE_CORE_DATA_TYPE_HPP
#define INFERWIRE_CORE_DATA_TYPE_HPP

#include <array>
#include <bit>
#include <cstddef>
#include <cstdint>
#include <string_view>
#include <type_traits>

namespace inferwire {

enum class data_type : std::uint8_t {
  invalid = 0,
  bool_ = 1,
  uint8 = 2,
  uint16 = 3,
  uint32 = 4,
  uint64 = 5,
  int8 = 6,
  int16 = 7,
  int32 = 8,
  int64 = 9,
  fp16 = 10,
  fp32 = 11,
  fp64 = 12,
  bytes = 13,  ///< TYPE_STRING in model configurations
  bf16 = 14,
};

/// Storage for one IEEE-754 half-precision element (bit pattern only).
struct float16 {
  std::uint16_t bits = 0;
  friend bool operator==(float16, float16) = default;
};
/// Storage for one bfloat16 element (bit pattern only).
struct bfloat16 {
  std::uint16_t bits = 0;
  friend bool operator==(bfloat16, bfloat16) = default;
  /// bfloat16 is the upper half of an IEEE-754 single; widening is exact.
  float to_float() const noexcept;
};

namespace detail {
struct data_type_info {
  std::string_view wire;
  std::string_view config;
  std::size_t size;  // 0 for BYTES (variable) and INVALID
};
inline constexpr std::array<data_type_info, 15> data_type_table{{
    {"<invalid>", "TYPE_INVALID", 0},
    {"BOOL", "TYPE_BOOL", 1},
    {"UINT8", "TYPE_UINT8", 1},
    {"UINT16", "TYPE_UINT16", 2},
    {"UINT32", "TYPE_UINT32", 4},
    {"UINT64", "TYPE_UINT64", 8},
    {"INT8", "TYPE_INT8", 1},
    {"INT16", "TYPE_INT16", 2},
    {"INT32", "TYPE_INT32", 4},
    {"INT64", "TYPE_INT64", 8},
    {"FP16", "TYPE_FP16", 2},
    {"FP32", "TYPE_FP32", 4},
    {"FP64", "TYPE_FP64", 8},
    {"BYTES", "TYPE_STRING", 0},
    {"BF16", "TYPE_BF16", 2},
}};
constexpr const data_type_info& info(data_type t) noexcept {
  auto i = static_cast<std::size_t>(t);
  return data_type_table[i < data_type_table.size() ? i : 0];
}
}  // namespace detail

/// Every valid data type, in model-config enum order.
inline constexpr std::array<data_type, 14> all_data_types{
    data_type::bool_, data_type::uint8, data_type::uint16, data_type::uint32,
    data_type::uint64, data_type::int8, data_type::int16, data_type::int32,
    data_type::int64, data_type::fp16, data_type::fp32, data_type::fp64,
    data_type::bytes, data_type::bf16};

/// Protocol name: "INT32", "BYTES"; `<invalid>` for data_type::invalid.
constexpr std::string_view wire_name(data_type t) noexcept { return detail::info(t).wire; }

/// Model-config enum name: "TYPE_INT32", "TYPE_STRING" for BYTES, "TYPE_INVALID".
constexpr std::string_view config_name(data_type t) noexcept { return detail::info(t).config; }

/// Bytes per element; 0 for BYTES (variable-sized elements) and for invalid.
constexpr std::size_t element_size(data_type t) noexcept { return detail::info(t).size; }

/// True for every type whose elements have a fixed size (all but BYTES and invalid).
constexpr bool is_fixed_size(data_type t) noexcept { return element_size(t) != 0; }

/// Parses a protocol name; unknown strings give data_type::invalid (as Triton does).
constexpr data_type parse_data_type(std::string_view name) noexcept {
  for (data_type t : all_data_types)
    if (detail::info(t).wire == name) return t;
  return data_type::invalid;
}

/// Parses a model-config enum name ("TYPE_FP32"); unknown strings give data_type::invalid.
constexpr data_type parse_config_data_type(std::string_view name) noexcept {
  for (data_type t : all_data_types)
    if (detail::info(t).config == name) return t;
  return data_type::invalid;
}

/// The data type of a C++ element type, for typed tensor views and builders.
template <class T>
struct data_type_of;
template <> struct data_type_of<bool> { static constexpr data_type value = data_type::bool_; };
template <> struct data_type_of<std::uint8_t> { static constexpr data_type value = data_type::uint8; };
template <> struct data_type_of<std::uint16_t> { static constexpr data_type value = data_type::uint16; };
template <> struct data_type_of<std::uint32_t> { static constexpr data_type value = data_type::uint32; };
template <> struct data_type_of<std::uint64_t> { static constexpr data_type value = data_type::uint64; };
template <> struct data_type_of<std::int8_t> { static constexpr data_type value = data_type::int8; };
template <> struct data_type_of<std::int16_t> { static constexpr data_type value = data_type::int16; };
template <> struct data_type_of<std::int32_t> { static constexpr data_type value = data_type::int32; };
template <> struct data_type_of<std::int64_t> { static constexpr data_type value = data_type::int64; };
template <> struct data_type_of<float16> { static constexpr data_type value = data_type::fp16; };
template <> struct data_type_of<float> { static constexpr data_type value = data_type::fp32; };
template <> struct data_type_of<double> { static constexpr data_type value = data_type::fp64; };
template <> struct data_type_of<bfloat16> { static constexpr data_type value = data_type::bf16; };

template <class T>
inline constexpr data_type data_type_of_v = data_type_of<std::remove_cv_t<T>>::value;

/// Satisfied by the element types of fixed-size tensors.
template <class T>
concept tensor_element = requires { data_type_of<std::remove_cv_t<T>>::value; };

inline float bfloat16::to_float() const noexcept {
  return std::bit_cast<float>(static_cast<std::uint32_t>(bits) << 16);
}

}  // namespace inferwire

#endif
