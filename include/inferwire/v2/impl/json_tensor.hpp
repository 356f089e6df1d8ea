// SPDX-License-Identifier: Apache-2.0
// Tensor data in JSON (v2-protocol §4.5): input elements decoded and checked, output elements
// printed as Triton prints them.
// Part of the implementation of inferwire/v2/json.hpp. Include that header, not this one.
#ifndef INFERWIRE_V2_IMPL_JSON_TENSOR_HPP
#define INFERWIRE_V2_IMPL_JSON_TENSOR_HPP

#include <inferwire/v2/impl/json_parse.hpp>

#include <boost/json/serializer.hpp>

#include <algorithm>
#include <array>
#include <bit>
#include <charconv>
#include <cmath>
#include <cstring>
#include <limits>

namespace inferwire::v2 {

namespace detail {

// Walks a nested array in row-major order, calling leaf(value) for every non-array element.
template <class Leaf>
bool walk_json_elements(const boost::json::array& a, Leaf& leaf) {
  for (const auto& e : a) {
    if (const auto* inner = e.if_array()) {
      if (!walk_json_elements(*inner, leaf)) return false;
    } else if (!leaf(e)) {
      return false;
    }
  }
  return true;
}

template <class T>
status decode_fixed(const boost::json::array& a, std::int64_t count, data_type type, std::string& out) {
  static_assert(std::endian::native == std::endian::little,
                "the wire format is little-endian; big-endian hosts are not supported");
  status st;
  const std::size_t base = out.size();
  // Memory follows the elements present, never the count the shape announces: a shape of
  // 16777216 with one element must not zero-fill 64 MiB first. (The top level's size is a
  // lower bound of the elements when arrays nest; appends grow the rest.)
  out.reserve(base + std::min(static_cast<std::size_t>(count), a.size()) * sizeof(T));
  std::int64_t n = 0;
  bool too_many = false;
  auto leaf = [&](const boost::json::value& v) {
    if (n == count) {
      too_many = true;
      return false;
    }
    T x;
    if constexpr (std::is_same_v<T, bool>) {
      bool b = {};
      if (!json_access::as_bool(v, b, st)) return false;
      x = b;
    } else if constexpr (std::is_floating_point_v<T>) {
      double d = {};
      if (!json_access::as_double(v, d, st)) return false;
      x = static_cast<T>(d);
    } else if constexpr (std::is_signed_v<T>) {
      // A value the data type cannot hold is refused (Triton truncates it to the width in
      // silence, a FIXME of its own: 2^31 as INT32 became -2^31).
      std::int64_t i = {};
      if (!json_access::as_int64(v, i, st)) return false;
      if (sizeof(T) < sizeof(i) && (i < std::int64_t{std::numeric_limits<T>::min()} ||
                                    i > std::int64_t{std::numeric_limits<T>::max()})) {
        st = {errc::invalid_arg, "value " + std::to_string(i) + " is out of range for data type " +
                                     std::string(wire_name(type))};
        return false;
      }
      x = static_cast<T>(i);
    } else {
      std::uint64_t u = {};
      if (!json_access::as_uint64(v, u, st)) return false;
      if (sizeof(T) < sizeof(u) && u > std::uint64_t{std::numeric_limits<T>::max()}) {
        st = {errc::invalid_arg, "value " + std::to_string(u) + " is out of range for data type " +
                                     std::string(wire_name(type))};
        return false;
      }
      x = static_cast<T>(u);
    }
    char raw[sizeof(T)];
    std::memcpy(raw, &x, sizeof(T));
    out.append(raw, sizeof(T));
    ++n;
    return true;
  };
  bool ok = walk_json_elements(a, leaf);
  if (too_many) {
    out.resize(base);
    return {errc::internal,
            "Unable to parse 'data': Shape does not match true shape of 'data' field"};
  }
  if (!ok) {
    out.resize(base);
    return st.prefix("Unable to parse 'data': ");
  }
  if (n != count) {
    out.resize(base);
    return {errc::internal, "Failed to parse 'data' field: shape does not match true shape"};
  }
  return {};
}

INFERWIRE_DECL status decode_bytes_elements(const boost::json::array& a, std::string& out) {
  status st;
  auto leaf = [&](const boost::json::value& v) {
    std::string_view s;
    if (!json_access::as_string(v, s, st)) return false;
    append_bytes_element(out, s);
    return true;
  };
  if (!walk_json_elements(a, leaf)) return st.prefix("Unable to parse JSON bytes array: ");
  return {};
}

}  // namespace detail

INFERWIRE_DECL status decode_json_tensor_data(const boost::json::value& data, data_type type,
                                      std::int64_t element_count, std::string_view name,
                                      std::string& out) {
  if (element_count == 0) return {};
  status st;
  const boost::json::array* a = json_access::as_array(data, st);
  if (!a) return st.prefix("Unable to parse 'data': ");
  switch (type) {
    case data_type::bool_: return detail::decode_fixed<bool>(*a, element_count, type, out);
    case data_type::uint8: return detail::decode_fixed<std::uint8_t>(*a, element_count, type, out);
    case data_type::uint16: return detail::decode_fixed<std::uint16_t>(*a, element_count, type, out);
    case data_type::uint32: return detail::decode_fixed<std::uint32_t>(*a, element_count, type, out);
    case data_type::uint64: return detail::decode_fixed<std::uint64_t>(*a, element_count, type, out);
    case data_type::int8: return detail::decode_fixed<std::int8_t>(*a, element_count, type, out);
    case data_type::int16: return detail::decode_fixed<std::int16_t>(*a, element_count, type, out);
    case data_type::int32: return detail::decode_fixed<std::int32_t>(*a, element_count, type, out);
    case data_type::int64: return detail::decode_fixed<std::int64_t>(*a, element_count, type, out);
    case data_type::fp32: return detail::decode_fixed<float>(*a, element_count, type, out);
    case data_type::fp64: return detail::decode_fixed<double>(*a, element_count, type, out);
    case data_type::bytes: return detail::decode_bytes_elements(*a, out);
    case data_type::fp16:
    case data_type::bf16:
      return {errc::invalid_arg, "receiving " + std::string(wire_name(type)) +
                                     " data via JSON is not supported. Please use the binary "
                                     "data format for input " + std::string(name)};
    case data_type::invalid: break;
  }
  return {errc::invalid_arg, "invalid datatype for input " + std::string(name)};
}

INFERWIRE_DECL void append_json_double(std::string& out, double d) {
  if (std::isnan(d)) {
    out += "NaN";
    return;
  }
  if (std::isinf(d)) {
    out += d < 0 ? "-Infinity" : "Infinity";
    return;
  }
  if (d == 0) {
    out += std::signbit(d) ? "-0.0" : "0.0";
    return;
  }
  // Shortest round-trip digits from to_chars, laid out with RapidJSON's Prettify rules.
  char buf[32];
  auto r = std::to_chars(buf, buf + sizeof buf, d, std::chars_format::scientific);
  std::string_view sci(buf, static_cast<std::size_t>(r.ptr - buf));
  if (sci.front() == '-') {
    out += '-';
    sci.remove_prefix(1);
  }
  std::size_t e_pos = sci.find('e');
  char digits[24];
  int length = 0;
  for (char c : sci.substr(0, e_pos))
    if (c != '.') digits[length++] = c;
  int exp10 = 0;
  std::from_chars(sci.data() + e_pos + 1 + (sci[e_pos + 1] == '+'), sci.data() + sci.size(),
                  exp10);
  const int k = exp10 - (length - 1);  // value = digits * 10^k
  const int kk = length + k;           // position of the decimal point
  auto exponent = [&](int x) {
    out += 'e';
    if (x < 0) {
      out += '-';
      x = -x;
    }
    out += std::to_string(x);
  };
  if (k >= 0 && kk <= 21) {
    out.append(digits, static_cast<std::size_t>(length));
    out.append(static_cast<std::size_t>(k), '0');
    out += ".0";
  } else if (kk > 0 && kk <= 21) {
    out.append(digits, static_cast<std::size_t>(kk));
    out += '.';
    out.append(digits + kk, static_cast<std::size_t>(length - kk));
  } else if (kk > -6 && kk <= 0) {
    out += "0.";
    out.append(static_cast<std::size_t>(-kk), '0');
    out.append(digits, static_cast<std::size_t>(length));
  } else if (length == 1) {
    out += digits[0];
    exponent(kk - 1);
  } else {
    out += digits[0];
    out += '.';
    out.append(digits + 1, static_cast<std::size_t>(length - 1));
    exponent(kk - 1);
  }
}

INFERWIRE_DECL void append_json_string(std::string& out, std::string_view s) {
  // Names and versions rarely need escaping: then the text goes out as it is, in quotes,
  // exactly as the serializer would write it (it escapes only '"', '\\' and bytes below 0x20).
  const bool plain = std::none_of(s.begin(), s.end(), [](char c) {
    return static_cast<unsigned char>(c) < 0x20 || c == '"' || c == '\\';
  });
  if (plain) {
    // A short one in one append (names, types, versions); a long one in three.
    char quoted[128];
    if (s.size() + 2 <= sizeof quoted) {
      quoted[0] = '"';
      std::memcpy(quoted + 1, s.data(), s.size());
      quoted[s.size() + 1] = '"';
      out.append(quoted, s.size() + 2);
      return;
    }
    out += '"';
    out += s;
    out += '"';
    return;
  }
  boost::json::serializer sr;
  sr.reset(s);
  char buf[512];
  while (!sr.done()) out.append(sr.read(buf, sizeof buf));
}

namespace detail {
template <class T>
void append_json_number(std::string& out, T v) {
  if constexpr (std::is_same_v<T, bool>) {
    out += v ? "true" : "false";
  } else if constexpr (std::is_floating_point_v<T>) {
    append_json_double(out, static_cast<double>(v));
  } else {
    char buf[24];
    auto r = std::to_chars(buf, buf + sizeof buf, v);
    out.append(buf, static_cast<std::size_t>(r.ptr - buf));
  }
}

template <class T>
void append_fixed_array(std::string& out, std::span<const std::byte> bytes, std::size_t n) {
  const std::byte* p = bytes.data();
  if constexpr (std::is_integral_v<T> && !std::is_same_v<T, bool>) {
    // Integers are written into a block on the stack and appended a block at a time.
    constexpr std::size_t widest = std::numeric_limits<T>::digits10 + 3;  // sign, digits, comma
    char block[1024];
    char* at = block;
    *at++ = '[';
    for (std::size_t i = 0; i < n; ++i) {
      if (at + widest + 1 > block + sizeof block) {  // an element, its comma and the ']'
        out.append(block, static_cast<std::size_t>(at - block));
        at = block;
      }
      if (i) *at++ = ',';
      T v;
      std::memcpy(&v, p + i * sizeof(T), sizeof(T));
      at = std::to_chars(at, block + sizeof block, v).ptr;
    }
    *at++ = ']';
    out.append(block, static_cast<std::size_t>(at - block));
    return;
  }
  out += '[';
  for (std::size_t i = 0; i < n; ++i) {
    if (i) out += ',';
    T v;
    if constexpr (std::is_same_v<T, bool>) v = p[i] != std::byte{0};
    else std::memcpy(&v, p + i * sizeof(T), sizeof(T));
    append_json_number(out, v);
  }
  out += ']';
}
}  // namespace detail

INFERWIRE_DECL status append_json_tensor_data(std::string& out, data_type type,
                                      std::span<const std::byte> bytes,
                                      std::int64_t element_count, std::string_view name) {
  if (type == data_type::fp16 || type == data_type::bf16)
    return {errc::invalid_arg, "sending " + std::string(wire_name(type)) +
                                   " data via JSON is not supported. Please use the binary "
                                   "data format for output"};
  const auto n = static_cast<std::size_t>(element_count);
  if (type == data_type::bytes) {
    std::vector<std::string_view> elements;
    if (!bytes_view(bytes).decode(elements) || elements.size() != n)
      return {errc::internal,
              "output tensor shape does not match size of output for '" + std::string(name) + "'"};
    // JSON text is UTF-8: an element that is not cannot be sent as a JSON string without
    // changing its bytes (Triton would write it raw and produce invalid JSON).
    for (const auto& e : elements)
      if (!valid_utf8(e))
        return {errc::invalid_arg, "output '" + quote_input(name) +
                                       "' has BYTES elements that are not valid UTF-8 and cannot be "
                                       "returned as JSON; request it with binary_data"};
    out += '[';
    for (std::size_t i = 0; i < n; ++i) {
      if (i) out += ',';
      append_json_string(out, elements[i]);
    }
    out += ']';
    return {};
  }
  if (type == data_type::invalid || element_count < 0 || bytes.size() != n * element_size(type))
    return {errc::internal,
            "Failed to write 'data' field: output tensor shape does not match size of output "
            "for '" + std::string(name) + "'"};
  switch (type) {
    case data_type::bool_: detail::append_fixed_array<bool>(out, bytes, n); break;
    case data_type::uint8: detail::append_fixed_array<std::uint8_t>(out, bytes, n); break;
    case data_type::uint16: detail::append_fixed_array<std::uint16_t>(out, bytes, n); break;
    case data_type::uint32: detail::append_fixed_array<std::uint32_t>(out, bytes, n); break;
    case data_type::uint64: detail::append_fixed_array<std::uint64_t>(out, bytes, n); break;
    case data_type::int8: detail::append_fixed_array<std::int8_t>(out, bytes, n); break;
    case data_type::int16: detail::append_fixed_array<std::int16_t>(out, bytes, n); break;
    case data_type::int32: detail::append_fixed_array<std::int32_t>(out, bytes, n); break;
    case data_type::int64: detail::append_fixed_array<std::int64_t>(out, bytes, n); break;
    case data_type::fp32: detail::append_fixed_array<float>(out, bytes, n); break;
    case data_type::fp64: detail::append_fixed_array<double>(out, bytes, n); break;
    default: break;
  }
  return {};
}

}  // namespace inferwire::v2

#endif  // INFERWIRE_V2_IMPL_JSON_TENSOR_HPP
