// Implementation of inferwire/v2/json.hpp. Include that header, not this one.
#ifndef INFERWIRE_V2_IMPL_JSON_HPP
#define INFERWIRE_V2_IMPL_JSON_HPP

#include <boost/json/parser.hpp>
#include <boost/json/serializer.hpp>
#include <boost/json/value_from.hpp>
#include <boost/json/value_to.hpp>

#include <openssl/evp.h>

#include <algorithm>
#include <array>
#include <bit>
#include <charconv>
#include <cmath>
#include <cstring>
#include <limits>

namespace inferwire::v2 {

namespace detail {

// The NaN/Infinity literals are rewritten to strings carrying these payloads before Boost.JSON
// (which only reads standard JSON) sees the text. The leading NUL keeps them apart from text a
// client would plausibly send.
inline constexpr std::string_view nan_literal{"\0inferwire:NaN", 14};
inline constexpr std::string_view inf_literal{"\0inferwire:Infinity", 19};
inline constexpr std::string_view ninf_literal{"\0inferwire:-Infinity", 20};

// Rewrites NaN, Infinity and -Infinity outside strings to the quoted payloads above. Returns
// false (and leaves `out` untouched) when the text has none, the common case.
inline bool rewrite_nonfinite(std::string_view in, std::string& out) {
  bool in_string = false, escaped = false, found = false;
  std::size_t copied = 0;
  auto emit = [&](std::size_t at, std::size_t len, std::string_view payload) {
    if (!found) out.reserve(in.size() + 64);
    found = true;
    out.append(in.substr(copied, at - copied));
    out += "\"\\u0000";
    out.append(payload.substr(1));
    out += '"';
    copied = at + len;
  };
  for (std::size_t i = 0; i < in.size(); ++i) {
    char c = in[i];
    if (in_string) {
      if (escaped) escaped = false;
      else if (c == '\\') escaped = true;
      else if (c == '"') in_string = false;
      continue;
    }
    if (c == '"') {
      in_string = true;
    } else if (c == 'N' && in.substr(i, 3) == "NaN") {
      emit(i, 3, nan_literal);
      i += 2;
    } else if (c == 'I' && in.substr(i, 8) == "Infinity") {
      emit(i, 8, inf_literal);
      i += 7;
    } else if (c == '-' && in.substr(i, 9) == "-Infinity") {
      emit(i, 9, ninf_literal);
      i += 8;
    }
  }
  if (found) out.append(in.substr(copied));
  return found;
}

inline bool is_ws(char c) noexcept { return c == ' ' || c == '\t' || c == '\n' || c == '\r'; }

// Names a syntax error the way RapidJSON does, from the structure of the text before the
// point where parsing stopped. Boost.JSON reports where, RapidJSON's wording says what.
inline std::string_view rapidjson_message(std::string_view text, std::size_t at, bool at_end) {
  enum class expect { value, key, colon, comma };
  std::string stack;  // '{' or '['
  expect e = expect::value;
  bool in_string = false, escaped = false;
  std::size_t end = std::min(at, text.size());
  for (std::size_t i = 0; i < end; ++i) {
    char c = text[i];
    if (in_string) {
      if (escaped) escaped = false;
      else if (c == '\\') escaped = true;
      else if (c == '"') {
        in_string = false;
        e = (e == expect::key) ? expect::colon : expect::comma;
      }
      continue;
    }
    if (is_ws(c)) continue;
    switch (c) {
      case '"': in_string = true; break;
      case '{': stack.push_back('{'); e = expect::key; break;
      case '[': stack.push_back('['); e = expect::value; break;
      case '}': case ']': if (!stack.empty()) stack.pop_back(); e = expect::comma; break;
      case ':': e = expect::value; break;
      case ',': e = (!stack.empty() && stack.back() == '{') ? expect::key : expect::value; break;
      default:
        // Inside a scalar (number or literal): it completes a value.
        e = expect::comma;
        break;
    }
  }
  if (in_string) {
    if (at_end) return "Missing a closing quotation mark in string.";
    char c = at < text.size() ? text[at] : '\0';
    if (escaped || (at > 0 && text[at - 1] == '\\') || c == '\\')
      return "Invalid escape character in string.";
    if (static_cast<unsigned char>(c) < 0x20) return "Invalid encoding in string.";
    return "Invalid escape character in string.";
  }
  if (stack.empty()) return "Invalid value.";
  if (stack.back() == '{') {
    if (e == expect::key) return "Missing a name for object member.";
    if (e == expect::colon) return "Missing a colon after a name of object member.";
    if (e == expect::comma) return "Missing a comma or '}' after an object member.";
    return "Invalid value.";
  }
  if (e == expect::comma) return "Missing a comma or ']' after an array element.";
  return "Invalid value.";
}

inline status parse_error(std::string_view message, std::size_t offset) {
  return {errc::internal, "failed to parse the request JSON buffer: " + std::string(message) +
                              " at " + std::to_string(offset)};
}

inline status type_error(std::string_view what) {
  return {errc::internal, "attempt to access JSON " + std::string(what)};
}

}  // namespace detail

inline boost::json::value parse_json(std::string_view text, status& st, std::size_t max_depth,
                                     boost::json::storage_ptr sp) {
  namespace json = boost::json;
  std::string rewritten;
  if (detail::rewrite_nonfinite(text, rewritten)) text = rewritten;

  json::parse_options opt;
  opt.max_depth = max_depth;
  json::parser p(json::storage_ptr(), opt);
  p.reset(std::move(sp));
  json::error_code ec;
  std::size_t n = p.write_some(text.data(), text.size(), ec);
  if (!ec && n < text.size()) {
    // A complete value followed by something else: RapidJSON reports the first non-space.
    std::size_t at = n;
    while (at < text.size() && detail::is_ws(text[at])) ++at;
    if (at < text.size()) {
      st = detail::parse_error("The document root must not be followed by other values.", at);
      return nullptr;
    }
  }
  if (ec) {
    if (ec == json::error::too_deep) {
      st = {errc::invalid_arg, "JSON nesting depth exceeds maximum allowed limit (" +
                                   std::to_string(max_depth) + ")"};
      return nullptr;
    }
    std::size_t first = 0;
    while (first < text.size() && detail::is_ws(text[first])) ++first;
    if (first == text.size()) {
      st = detail::parse_error("The document is empty.", first);
      return nullptr;
    }
    bool at_end = ec == json::error::incomplete || n >= text.size();
    std::size_t at = std::min(n, text.size());
    st = detail::parse_error(detail::rapidjson_message(text, at, at_end), at);
    return nullptr;
  }
  st = {};
  return p.release();
}

inline boost::json::value parse_json(std::string_view text, std::size_t max_depth) {
  status st;
  auto v = parse_json(text, st, max_depth);
  throw_if(st);
  return v;
}

namespace json_access {

inline bool is_nonfinite_literal(const boost::json::value& v) noexcept {
  if (!v.is_string()) return false;
  std::string_view s = v.get_string();
  return s == detail::nan_literal || s == detail::inf_literal || s == detail::ninf_literal;
}

inline const boost::json::object* as_object(const boost::json::value& v, status& st) {
  if (auto* o = v.if_object()) return o;
  st = detail::type_error("non-object as object");
  return nullptr;
}
inline const boost::json::array* as_array(const boost::json::value& v, status& st) {
  if (auto* a = v.if_array()) return a;
  st = detail::type_error("non-array as array");
  return nullptr;
}
inline bool as_string(const boost::json::value& v, std::string_view& out, status& st) {
  if (auto* s = v.if_string(); s && !is_nonfinite_literal(v)) {
    out = *s;
    return true;
  }
  st = detail::type_error("non-string as string");
  return false;
}
inline bool as_bool(const boost::json::value& v, bool& out, status& st) {
  if (auto* b = v.if_bool()) {
    out = *b;
    return true;
  }
  st = detail::type_error("non-boolean as boolean");
  return false;
}
inline bool as_int64(const boost::json::value& v, std::int64_t& out, status& st) {
  if (auto* i = v.if_int64()) {
    out = *i;
    return true;
  }
  st = detail::type_error("non-signed-integer as signed-integer");
  return false;
}
inline bool as_uint64(const boost::json::value& v, std::uint64_t& out, status& st) {
  if (auto* u = v.if_uint64()) {
    out = *u;
    return true;
  }
  if (auto* i = v.if_int64(); i && *i >= 0) {
    out = static_cast<std::uint64_t>(*i);
    return true;
  }
  st = detail::type_error("non-unsigned-integer as unsigned-integer");
  return false;
}
inline bool as_double(const boost::json::value& v, double& out, status& st) {
  switch (v.kind()) {
    case boost::json::kind::double_: out = v.get_double(); return true;
    case boost::json::kind::int64: out = static_cast<double>(v.get_int64()); return true;
    case boost::json::kind::uint64: out = static_cast<double>(v.get_uint64()); return true;
    case boost::json::kind::string: {
      std::string_view s = v.get_string();
      if (s == detail::nan_literal) { out = std::numeric_limits<double>::quiet_NaN(); return true; }
      if (s == detail::inf_literal) { out = std::numeric_limits<double>::infinity(); return true; }
      if (s == detail::ninf_literal) { out = -std::numeric_limits<double>::infinity(); return true; }
      break;
    }
    default: break;
  }
  st = detail::type_error("non-number as double");
  return false;
}
inline const boost::json::value* member(const boost::json::object& o, std::string_view name,
                                        status& st) {
  if (auto* v = o.if_contains(name)) return v;
  st = {errc::internal,
        "attempt to access non-existing object member '" + std::string(name) + "'"};
  return nullptr;
}

}  // namespace json_access

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
status decode_fixed(const boost::json::array& a, std::int64_t count, std::string& out) {
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
      std::int64_t i = {};
      if (!json_access::as_int64(v, i, st)) return false;
      x = static_cast<T>(i);  // truncation to the target width, as upstream
    } else {
      std::uint64_t u = {};
      if (!json_access::as_uint64(v, u, st)) return false;
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

inline status decode_bytes_elements(const boost::json::array& a, std::string& out) {
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

inline status decode_json_tensor_data(const boost::json::value& data, data_type type,
                                      std::int64_t element_count, std::string_view name,
                                      std::string& out) {
  if (element_count == 0) return {};
  status st;
  const boost::json::array* a = json_access::as_array(data, st);
  if (!a) return st.prefix("Unable to parse 'data': ");
  switch (type) {
    case data_type::bool_: return detail::decode_fixed<bool>(*a, element_count, out);
    case data_type::uint8: return detail::decode_fixed<std::uint8_t>(*a, element_count, out);
    case data_type::uint16: return detail::decode_fixed<std::uint16_t>(*a, element_count, out);
    case data_type::uint32: return detail::decode_fixed<std::uint32_t>(*a, element_count, out);
    case data_type::uint64: return detail::decode_fixed<std::uint64_t>(*a, element_count, out);
    case data_type::int8: return detail::decode_fixed<std::int8_t>(*a, element_count, out);
    case data_type::int16: return detail::decode_fixed<std::int16_t>(*a, element_count, out);
    case data_type::int32: return detail::decode_fixed<std::int32_t>(*a, element_count, out);
    case data_type::int64: return detail::decode_fixed<std::int64_t>(*a, element_count, out);
    case data_type::fp32: return detail::decode_fixed<float>(*a, element_count, out);
    case data_type::fp64: return detail::decode_fixed<double>(*a, element_count, out);
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

inline void append_json_double(std::string& out, double d) {
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

inline void append_json_string(std::string& out, std::string_view s) {
  boost::json::serializer sr;
  sr.reset(s);
  char buf[512];
  while (!sr.done()) out.append(sr.read(buf, sizeof buf));
}

namespace detail {
/// Whether `s` is well-formed UTF-8 (no overlong forms, surrogates or code points past
/// U+10FFFF).
inline bool valid_utf8(std::string_view s) noexcept {
  const auto* p = reinterpret_cast<const unsigned char*>(s.data());
  const auto* end = p + s.size();
  while (p < end) {
    const unsigned c = *p;
    if (c < 0x80) {
      ++p;
      continue;
    }
    std::size_t n = 0;
    unsigned lo = 0x80, hi = 0xBF;  // the allowed range of the second byte
    if (c >= 0xC2 && c <= 0xDF) n = 1;
    else if (c == 0xE0) n = 2, lo = 0xA0;
    else if (c == 0xED) n = 2, hi = 0x9F;
    else if (c >= 0xE1 && c <= 0xEF) n = 2;
    else if (c == 0xF0) n = 3, lo = 0x90;
    else if (c == 0xF4) n = 3, hi = 0x8F;
    else if (c >= 0xF1 && c <= 0xF3) n = 3;
    else return false;
    if (static_cast<std::size_t>(end - p) <= n || p[1] < lo || p[1] > hi) return false;
    for (std::size_t k = 2; k <= n; ++k)
      if ((p[k] & 0xC0) != 0x80) return false;
    p += n + 1;
  }
  return true;
}

template <class T>
void append_json_number(std::string& out, T v) {
  if constexpr (std::is_same_v<T, bool>) {
    out += v ? "true" : "false";
  } else if constexpr (std::is_floating_point_v<T>) {
    append_json_double(out, static_cast<double>(v));
  } else {
    char buf[24];
    auto r = std::to_chars(buf, buf + sizeof buf, v);
    out.append(buf, r.ptr);
  }
}

template <class T>
void append_fixed_array(std::string& out, std::span<const std::byte> bytes, std::size_t n) {
  out += '[';
  const std::byte* p = bytes.data();
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

inline status append_json_tensor_data(std::string& out, data_type type,
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
      if (!detail::valid_utf8(e))
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

inline std::string base64_encode(std::string_view bytes) {
  std::string out(4 * ((bytes.size() + 2) / 3), '\0');
  int n = EVP_EncodeBlock(reinterpret_cast<unsigned char*>(out.data()),
                          reinterpret_cast<const unsigned char*>(bytes.data()),
                          static_cast<int>(bytes.size()));
  out.resize(static_cast<std::size_t>(n));
  return out;
}

inline bool base64_decode(std::string_view text, std::string& out) {
  // Line breaks and other ASCII whitespace are skipped, as Triton's decoder (libb64) does:
  // its C++ client sends the CUDA IPC handle broken into lines.
  std::string compact;
  if (text.find_first_of(" \t\r\n\v\f") != std::string_view::npos) {
    compact.reserve(text.size());
    for (char c : text)
      if (c != ' ' && c != '\t' && c != '\r' && c != '\n' && c != '\v' && c != '\f') compact += c;
    text = compact;
  }
  if (text.size() % 4 != 0) return false;
  out.assign(3 * (text.size() / 4), '\0');
  int n = EVP_DecodeBlock(reinterpret_cast<unsigned char*>(out.data()),
                          reinterpret_cast<const unsigned char*>(text.data()),
                          static_cast<int>(text.size()));
  if (n < 0) return false;
  // EVP_DecodeBlock counts padding as zero bytes; drop them.
  std::size_t pad = 0;
  if (!text.empty() && text.back() == '=') ++pad;
  if (text.size() > 1 && text[text.size() - 2] == '=') ++pad;
  out.resize(static_cast<std::size_t>(n) - pad);
  return true;
}

// ---------------------------------------------------------------------------------------------
// Conversions

inline boost::json::value to_json(const parameter_value& v) {
  return std::visit([](const auto& x) -> boost::json::value {
    if constexpr (std::is_same_v<std::decay_t<decltype(x)>, std::string>)
      return boost::json::string(x);
    else
      return x;
  }, v);
}

inline boost::json::object to_json(const parameter_map& m) {
  boost::json::object o;
  for (const auto& [k, v] : m) o[k] = to_json(v);
  return o;
}

namespace detail {
// Member readers for value_to: throw inferwire::error with the JSON layer's texts, wrapped in
// "Unable to parse '<name>': " like Triton's field readers.
struct reader {
  const boost::json::object& o;

  static const boost::json::object& object_of(const boost::json::value& v) {
    status st;
    auto* o = json_access::as_object(v, st);
    throw_if(st);
    return *o;
  }
  const boost::json::value* find(std::string_view k) const { return o.if_contains(k); }
  const boost::json::value& need(std::string_view k) const {
    status st;
    auto* v = json_access::member(o, k, st);
    if (!v) throw error(st.prefix("Unable to parse '" + std::string(k) + "': "));
    return *v;
  }
  static void fail(status& st, std::string_view k) {
    throw error(st.prefix("Unable to parse '" + std::string(k) + "': "));
  }
  std::string str(std::string_view k) const { return to_str(need(k), k); }
  static std::string to_str(const boost::json::value& v, std::string_view k) {
    status st;
    std::string_view s;
    if (!json_access::as_string(v, s, st)) fail(st, k);
    return std::string(s);
  }
  std::uint64_t u64(std::string_view k) const { return to_u64(need(k), k); }
  static std::uint64_t to_u64(const boost::json::value& v, std::string_view k) {
    status st;
    std::uint64_t u = {};
    if (!json_access::as_uint64(v, u, st)) fail(st, k);
    return u;
  }
  std::int64_t i64(std::string_view k) const {
    status st;
    std::int64_t i = {};
    if (!json_access::as_int64(need(k), i, st)) fail(st, k);
    return i;
  }
  static bool to_bool(const boost::json::value& v, std::string_view k) {
    status st;
    bool b = {};
    if (!json_access::as_bool(v, b, st)) fail(st, k);
    return b;
  }
  const boost::json::array& arr(std::string_view k) const {
    status st;
    auto* a = json_access::as_array(need(k), st);
    if (!a) fail(st, k);
    return *a;
  }
};

inline boost::json::value duration_json(const statistic_duration& d) {
  return {{"count", d.count}, {"ns", d.ns}};
}
}  // namespace detail

inline void tag_invoke(boost::json::value_from_tag, boost::json::value& jv,
                       const server_metadata& v) {
  boost::json::array ext;
  for (const auto& e : v.extensions) ext.emplace_back(e);
  jv = {{"name", v.name}, {"version", v.version}, {"extensions", std::move(ext)}};
}
inline server_metadata tag_invoke(boost::json::value_to_tag<server_metadata>,
                                  const boost::json::value& jv) {
  detail::reader r{detail::reader::object_of(jv)};
  server_metadata m{r.str("name"), r.str("version"), {}};
  if (r.find("extensions"))
    for (const auto& e : r.arr("extensions"))
      m.extensions.push_back(detail::reader::to_str(e, "extensions"));
  return m;
}

inline void tag_invoke(boost::json::value_from_tag, boost::json::value& jv,
                       const tensor_metadata& v) {
  boost::json::array shape(v.shape.begin(), v.shape.end());
  jv = {{"name", v.name}, {"datatype", wire_name(v.datatype)}, {"shape", std::move(shape)}};
}
inline tensor_metadata tag_invoke(boost::json::value_to_tag<tensor_metadata>,
                                  const boost::json::value& jv) {
  detail::reader r{detail::reader::object_of(jv)};
  tensor_metadata t{r.str("name"), parse_data_type(r.str("datatype")), {}};
  for (const auto& d : r.arr("shape")) {
    status st;
    std::int64_t i = {};
    if (!json_access::as_int64(d, i, st)) detail::reader::fail(st, "shape");
    t.shape.push_back(i);
  }
  return t;
}

inline void tag_invoke(boost::json::value_from_tag, boost::json::value& jv,
                       const model_metadata& v) {
  boost::json::array versions, inputs, outputs;
  for (const auto& s : v.versions) versions.emplace_back(s);
  for (const auto& t : v.inputs) inputs.push_back(boost::json::value_from(t));
  for (const auto& t : v.outputs) outputs.push_back(boost::json::value_from(t));
  jv = {{"name", v.name},          {"versions", std::move(versions)},
        {"platform", v.platform},  {"inputs", std::move(inputs)},
        {"outputs", std::move(outputs)}};
}
inline model_metadata tag_invoke(boost::json::value_to_tag<model_metadata>,
                                 const boost::json::value& jv) {
  detail::reader r{detail::reader::object_of(jv)};
  model_metadata m;
  m.name = r.str("name");
  if (r.find("versions"))
    for (const auto& s : r.arr("versions")) m.versions.push_back(detail::reader::to_str(s, "versions"));
  if (r.find("platform")) m.platform = r.str("platform");
  if (r.find("inputs"))
    for (const auto& t : r.arr("inputs")) m.inputs.push_back(boost::json::value_to<tensor_metadata>(t));
  if (r.find("outputs"))
    for (const auto& t : r.arr("outputs")) m.outputs.push_back(boost::json::value_to<tensor_metadata>(t));
  return m;
}

inline void tag_invoke(boost::json::value_from_tag, boost::json::value& jv,
                       const repository_index_request& v) {
  boost::json::object o;
  if (v.ready) o["ready"] = *v.ready;
  jv = std::move(o);
}
inline repository_index_request tag_invoke(boost::json::value_to_tag<repository_index_request>,
                                           const boost::json::value& jv) {
  detail::reader r{detail::reader::object_of(jv)};
  repository_index_request q;
  if (auto* ready = r.find("ready")) {
    if (!ready->is_bool())
      throw error(errc::invalid_arg, "Invalid value for 'ready': expected a boolean");
    q.ready = ready->get_bool();
  }
  return q;
}

inline void tag_invoke(boost::json::value_from_tag, boost::json::value& jv,
                       const repository_index_entry& v) {
  boost::json::object o;
  o["name"] = v.name;
  if (!v.version.empty()) o["version"] = v.version;
  if (!v.state.empty()) o["state"] = v.state;
  if (!v.reason.empty()) o["reason"] = v.reason;
  jv = std::move(o);
}
inline repository_index_entry tag_invoke(boost::json::value_to_tag<repository_index_entry>,
                                         const boost::json::value& jv) {
  detail::reader r{detail::reader::object_of(jv)};
  repository_index_entry e;
  e.name = r.str("name");
  if (r.find("version")) e.version = r.str("version");
  if (r.find("state")) e.state = r.str("state");
  if (r.find("reason")) e.reason = r.str("reason");
  return e;
}

inline void tag_invoke(boost::json::value_from_tag, boost::json::value& jv,
                       const repository_load_request& v) {
  boost::json::object params;
  if (v.config) params["config"] = *v.config;
  for (const auto& [path, contents] : v.files) params["file:" + path] = base64_encode(contents);
  boost::json::object o;
  if (!params.empty()) o["parameters"] = std::move(params);
  jv = std::move(o);
}
inline repository_load_request tag_invoke(boost::json::value_to_tag<repository_load_request>,
                                          const boost::json::value& jv) {
  detail::reader r{detail::reader::object_of(jv)};
  repository_load_request q;
  const auto* params = r.find("parameters");
  if (!params) return q;
  const auto& po = detail::reader::object_of(*params);
  for (const auto& kv : po) {
    std::string_view key = kv.key();
    std::string value = detail::reader::to_str(kv.value(), key);
    if (key == "config") {
      q.config = std::move(value);
    } else if (key.starts_with("file:")) {
      std::string decoded;
      if (!base64_decode(value, decoded))
        throw error(errc::invalid_arg,
                    "failed to decode base64 content of '" + std::string(key) + "'");
      q.files.emplace_back(std::string(key.substr(5)), std::move(decoded));
    } else {
      throw error(errc::internal, "unexpected error on creating Triton parameter");
    }
  }
  return q;
}

inline void tag_invoke(boost::json::value_from_tag, boost::json::value& jv,
                       const repository_unload_request& v) {
  jv = {{"parameters", {{"unload_dependents", v.unload_dependents}}}};
}
inline repository_unload_request tag_invoke(boost::json::value_to_tag<repository_unload_request>,
                                            const boost::json::value& jv) {
  // Upstream quirk (v2-protocol §6.4): a non-bool unload_dependents is ignored.
  repository_unload_request q;
  if (const auto* o = jv.if_object())
    if (const auto* p = o->if_contains("parameters"))
      if (const auto* po = p->if_object())
        if (const auto* u = po->if_contains("unload_dependents"); u && u->is_bool())
          q.unload_dependents = u->get_bool();
  return q;
}

inline void tag_invoke(boost::json::value_from_tag, boost::json::value& jv,
                       const system_shm_register_request& v) {
  jv = {{"key", v.key}, {"offset", v.offset}, {"byte_size", v.byte_size}};
}
inline system_shm_register_request tag_invoke(
    boost::json::value_to_tag<system_shm_register_request>, const boost::json::value& jv) {
  detail::reader r{detail::reader::object_of(jv)};
  system_shm_register_request q;
  if (!r.find("key"))
    throw error(errc::invalid_arg, "Shared memory register request has no 'key' field");
  q.key = r.str("key");
  if (r.find("offset")) q.offset = r.u64("offset");
  if (!r.find("byte_size"))
    throw error(errc::invalid_arg, "Shared memory register request has no 'byte_size' field");
  q.byte_size = r.u64("byte_size");
  return q;
}

inline void tag_invoke(boost::json::value_from_tag, boost::json::value& jv,
                       const system_shm_status& v) {
  jv = {{"name", v.name}, {"key", v.key}, {"offset", v.offset}, {"byte_size", v.byte_size}};
}
inline system_shm_status tag_invoke(boost::json::value_to_tag<system_shm_status>,
                                    const boost::json::value& jv) {
  detail::reader r{detail::reader::object_of(jv)};
  return {r.str("name"), r.str("key"), r.u64("offset"), r.u64("byte_size")};
}

inline void tag_invoke(boost::json::value_from_tag, boost::json::value& jv,
                       const cuda_shm_register_request& v) {
  jv = {{"raw_handle", {{"b64", base64_encode(v.raw_handle)}}},
        {"device_id", v.device_id},
        {"byte_size", v.byte_size}};
}
inline cuda_shm_register_request tag_invoke(boost::json::value_to_tag<cuda_shm_register_request>,
                                            const boost::json::value& jv) {
  detail::reader r{detail::reader::object_of(jv)};
  if (!r.find("raw_handle"))
    throw error(errc::invalid_arg, "Shared memory register request has no 'raw_handle' field");
  detail::reader h{detail::reader::object_of(r.need("raw_handle"))};
  cuda_shm_register_request q;
  std::string b64 = h.str("b64");
  if (!base64_decode(b64, q.raw_handle) || q.raw_handle.size() != 64)
    throw error(errc::invalid_arg,
                "'raw_handle' must be a valid base64 encoded cudaIpcMemHandle_t");
  q.device_id = r.u64("device_id");
  q.byte_size = r.u64("byte_size");
  return q;
}

inline void tag_invoke(boost::json::value_from_tag, boost::json::value& jv,
                       const cuda_shm_status& v) {
  jv = {{"name", v.name}, {"device_id", v.device_id}, {"byte_size", v.byte_size}};
}
inline cuda_shm_status tag_invoke(boost::json::value_to_tag<cuda_shm_status>,
                                  const boost::json::value& jv) {
  detail::reader r{detail::reader::object_of(jv)};
  return {r.str("name"), r.u64("device_id"), r.u64("byte_size")};
}

inline void tag_invoke(boost::json::value_from_tag, boost::json::value& jv,
                       const statistic_duration& v) {
  jv = detail::duration_json(v);
}
inline statistic_duration tag_invoke(boost::json::value_to_tag<statistic_duration>,
                                     const boost::json::value& jv) {
  detail::reader r{detail::reader::object_of(jv)};
  return {r.u64("count"), r.u64("ns")};
}

namespace detail {
// The statistics messages are lists of named durations; one table per message keeps the JSON
// key order (the order of spec §7) and both directions in one place.
template <class T>
struct duration_fields;
template <>
struct duration_fields<infer_statistics> {
  static constexpr std::pair<const char*, statistic_duration infer_statistics::*> fields[] = {
      {"success", &infer_statistics::success},
      {"fail", &infer_statistics::fail},
      {"queue", &infer_statistics::queue},
      {"compute_input", &infer_statistics::compute_input},
      {"compute_infer", &infer_statistics::compute_infer},
      {"compute_output", &infer_statistics::compute_output},
      {"cache_hit", &infer_statistics::cache_hit},
      {"cache_miss", &infer_statistics::cache_miss}};
};
template <>
struct duration_fields<response_statistics> {
  static constexpr std::pair<const char*, statistic_duration response_statistics::*> fields[] = {
      {"compute_infer", &response_statistics::compute_infer},
      {"compute_output", &response_statistics::compute_output},
      {"success", &response_statistics::success},
      {"fail", &response_statistics::fail},
      {"empty_response", &response_statistics::empty_response},
      {"cancel", &response_statistics::cancel}};
};
template <>
struct duration_fields<batch_statistics> {
  static constexpr std::pair<const char*, statistic_duration batch_statistics::*> fields[] = {
      {"compute_input", &batch_statistics::compute_input},
      {"compute_infer", &batch_statistics::compute_infer},
      {"compute_output", &batch_statistics::compute_output}};
};

template <class T>
void durations_to_json(boost::json::object& o, const T& v) {
  for (const auto& [name, field] : duration_fields<T>::fields) o[name] = duration_json(v.*field);
}
template <class T>
void durations_from_json(const reader& r, T& v) {
  for (const auto& [name, field] : duration_fields<T>::fields)
    if (const auto* d = r.find(name)) v.*field = boost::json::value_to<statistic_duration>(*d);
}
}  // namespace detail

#define INFERWIRE_V2_DURATIONS_CONVERSION(T)                                               \
  inline void tag_invoke(boost::json::value_from_tag, boost::json::value& jv, const T& v) { \
    boost::json::object o;                                                                 \
    detail::durations_to_json(o, v);                                                       \
    jv = std::move(o);                                                                     \
  }                                                                                        \
  inline T tag_invoke(boost::json::value_to_tag<T>, const boost::json::value& jv) {         \
    T v;                                                                                   \
    detail::durations_from_json(detail::reader{detail::reader::object_of(jv)}, v);         \
    return v;                                                                              \
  }
INFERWIRE_V2_DURATIONS_CONVERSION(infer_statistics)
INFERWIRE_V2_DURATIONS_CONVERSION(response_statistics)
#undef INFERWIRE_V2_DURATIONS_CONVERSION

inline void tag_invoke(boost::json::value_from_tag, boost::json::value& jv,
                       const batch_statistics& v) {
  boost::json::object o;
  o["batch_size"] = v.batch_size;
  detail::durations_to_json(o, v);
  jv = std::move(o);
}
inline batch_statistics tag_invoke(boost::json::value_to_tag<batch_statistics>,
                                   const boost::json::value& jv) {
  detail::reader r{detail::reader::object_of(jv)};
  batch_statistics b;
  b.batch_size = r.u64("batch_size");
  detail::durations_from_json(r, b);
  return b;
}

inline void tag_invoke(boost::json::value_from_tag, boost::json::value& jv,
                       const memory_usage& v) {
  jv = {{"type", v.type}, {"id", v.id}, {"byte_size", v.byte_size}};
}
inline memory_usage tag_invoke(boost::json::value_to_tag<memory_usage>,
                               const boost::json::value& jv) {
  detail::reader r{detail::reader::object_of(jv)};
  return {r.str("type"), r.i64("id"), r.u64("byte_size")};
}

inline void tag_invoke(boost::json::value_from_tag, boost::json::value& jv,
                       const model_statistics& v) {
  boost::json::object o;
  o["name"] = v.name;
  o["version"] = v.version;
  o["last_inference"] = v.last_inference;
  o["inference_count"] = v.inference_count;
  o["execution_count"] = v.execution_count;
  o["inference_stats"] = boost::json::value_from(v.inference_stats);
  boost::json::object rs;
  for (const auto& [k, s] : v.response_stats) rs[k] = boost::json::value_from(s);
  o["response_stats"] = std::move(rs);
  boost::json::array bs, mu;
  for (const auto& b : v.batch_stats) bs.push_back(boost::json::value_from(b));
  for (const auto& m : v.memory_usage) mu.push_back(boost::json::value_from(m));
  o["batch_stats"] = std::move(bs);
  o["memory_usage"] = std::move(mu);
  jv = std::move(o);
}
inline model_statistics tag_invoke(boost::json::value_to_tag<model_statistics>,
                                   const boost::json::value& jv) {
  detail::reader r{detail::reader::object_of(jv)};
  model_statistics m;
  m.name = r.str("name");
  m.version = r.str("version");
  m.last_inference = r.u64("last_inference");
  m.inference_count = r.u64("inference_count");
  m.execution_count = r.u64("execution_count");
  if (const auto* s = r.find("inference_stats"))
    m.inference_stats = boost::json::value_to<infer_statistics>(*s);
  if (const auto* s = r.find("response_stats"))
    for (const auto& kv : detail::reader::object_of(*s))
      m.response_stats[std::string(kv.key())] =
          boost::json::value_to<response_statistics>(kv.value());
  if (r.find("batch_stats"))
    for (const auto& b : r.arr("batch_stats"))
      m.batch_stats.push_back(boost::json::value_to<batch_statistics>(b));
  if (r.find("memory_usage"))
    for (const auto& u : r.arr("memory_usage"))
      m.memory_usage.push_back(boost::json::value_to<memory_usage>(u));
  return m;
}

inline void tag_invoke(boost::json::value_from_tag, boost::json::value& jv,
                       const statistics_response& v) {
  boost::json::array a;
  for (const auto& m : v.model_stats) a.push_back(boost::json::value_from(m));
  jv = {{"model_stats", std::move(a)}};
}
inline statistics_response tag_invoke(boost::json::value_to_tag<statistics_response>,
                                      const boost::json::value& jv) {
  detail::reader r{detail::reader::object_of(jv)};
  statistics_response s;
  for (const auto& m : r.arr("model_stats"))
    s.model_stats.push_back(boost::json::value_to<model_statistics>(m));
  return s;
}

inline void tag_invoke(boost::json::value_from_tag, boost::json::value& jv,
                       const trace_settings& v) {
  boost::json::object o;
  auto put = [&o](const std::string& k, const std::optional<std::vector<std::string>>& values) {
    if (!values) {
      o[k] = nullptr;
    } else if (k == "trace_level") {
      o[k] = boost::json::array(values->begin(), values->end());
    } else {
      o[k] = values->empty() ? std::string() : values->front();
    }
  };
  // Triton's order of the known settings, then any others.
  static constexpr std::array<const char*, 6> order{"trace_level",   "trace_rate", "trace_count",
                                                    "log_frequency", "trace_file", "trace_mode"};
  for (const char* k : order)
    if (auto it = v.settings.find(k); it != v.settings.end()) put(it->first, it->second);
  for (const auto& [k, values] : v.settings)
    if (std::find(order.begin(), order.end(), std::string_view(k)) == order.end()) put(k, values);
  jv = std::move(o);
}
inline trace_settings tag_invoke(boost::json::value_to_tag<trace_settings>,
                                 const boost::json::value& jv) {
  trace_settings t;
  for (const auto& kv : detail::reader::object_of(jv)) {
    std::string key(kv.key());
    const auto& v = kv.value();
    if (v.is_null()) {
      t.settings[key] = std::nullopt;
    } else if (const auto* a = v.if_array()) {
      std::vector<std::string> values;
      for (const auto& e : *a) values.push_back(detail::reader::to_str(e, key));
      t.settings[key] = std::move(values);
    } else {
      t.settings[key] = std::vector<std::string>{detail::reader::to_str(v, key)};
    }
  }
  return t;
}

inline void tag_invoke(boost::json::value_from_tag, boost::json::value& jv,
                       const log_settings& v) {
  boost::json::object o;
  if (v.log_file) o["log_file"] = *v.log_file;
  if (v.log_info) o["log_info"] = *v.log_info;
  if (v.log_warning) o["log_warning"] = *v.log_warning;
  if (v.log_error) o["log_error"] = *v.log_error;
  if (v.log_verbose_level) o["log_verbose_level"] = *v.log_verbose_level;
  if (v.log_format) o["log_format"] = *v.log_format;
  jv = std::move(o);
}
inline log_settings tag_invoke(boost::json::value_to_tag<log_settings>,
                               const boost::json::value& jv) {
  detail::reader r{detail::reader::object_of(jv)};
  log_settings s;
  if (const auto* v = r.find("log_file"); v && !v->is_null())
    s.log_file = detail::reader::to_str(*v, "log_file");
  if (const auto* v = r.find("log_info")) s.log_info = detail::reader::to_bool(*v, "log_info");
  if (const auto* v = r.find("log_warning"))
    s.log_warning = detail::reader::to_bool(*v, "log_warning");
  if (const auto* v = r.find("log_error")) s.log_error = detail::reader::to_bool(*v, "log_error");
  if (const auto* v = r.find("log_verbose_level")) {
    std::uint64_t level = detail::reader::to_u64(*v, "log_verbose_level");
    if (level > std::numeric_limits<std::uint32_t>::max())
      throw error(errc::invalid_arg, "log_verbose_level out of range");
    s.log_verbose_level = static_cast<std::uint32_t>(level);
  }
  if (const auto* v = r.find("log_format"))
    s.log_format = detail::reader::to_str(*v, "log_format");
  return s;
}

}  // namespace inferwire::v2

#endif
