// SPDX-License-Identifier: Apache-2.0
// JSON text: parsing with Triton's limits and texts, typed member access, base64.
// Part of the implementation of inferwire/v2/json.hpp. Include that header, not this one.
#ifndef INFERWIRE_V2_IMPL_JSON_PARSE_HPP
#define INFERWIRE_V2_IMPL_JSON_PARSE_HPP

#include <boost/json/parser.hpp>

#include <openssl/evp.h>

#include <algorithm>
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
INFERWIRE_DECL bool rewrite_nonfinite(std::string_view in, std::string& out) {
  // Most texts contain neither word anywhere: two substring searches settle that faster than
  // the scan below, which has to follow string literals character by character.
  if (in.find("NaN") == std::string_view::npos && in.find("Infinity") == std::string_view::npos) return false;
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

INFERWIRE_DECL bool is_ws(char c) noexcept { return c == ' ' || c == '\t' || c == '\n' || c == '\r'; }

// Names a syntax error the way RapidJSON does, from the structure of the text before the
// point where parsing stopped. Boost.JSON reports where, RapidJSON's wording says what.
INFERWIRE_DECL std::string_view rapidjson_message(std::string_view text, std::size_t at, bool at_end) {
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

INFERWIRE_DECL status parse_error(std::string_view message, std::size_t offset) {
  return {errc::internal, "failed to parse the request JSON buffer: " + std::string(message) +
                              " at " + std::to_string(offset)};
}

INFERWIRE_DECL status type_error(std::string_view what) {
  return {errc::internal, "attempt to access JSON " + std::string(what)};
}

}  // namespace detail

INFERWIRE_DECL boost::json::value parse_json(std::string_view text, status& st, std::size_t max_depth,
                                     boost::json::storage_ptr sp) {
  namespace json = boost::json;
  std::string rewritten;
  if (detail::rewrite_nonfinite(text, rewritten)) text = rewritten;

  json::parse_options opt;
  opt.max_depth = max_depth;
  // The parser's own scratch space (its stack of unfinished values) starts on this stack.
  unsigned char temp[1024];
  json::parser p(json::storage_ptr(), opt, temp, sizeof temp);
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

INFERWIRE_DECL boost::json::value parse_json(std::string_view text, std::size_t max_depth) {
  status st;
  auto v = parse_json(text, st, max_depth);
  throw_if(st);
  return v;
}

namespace json_access {

INFERWIRE_DECL bool is_nonfinite_literal(const boost::json::value& v) noexcept {
  if (!v.is_string()) return false;
  std::string_view s = v.get_string();
  return s == detail::nan_literal || s == detail::inf_literal || s == detail::ninf_literal;
}

INFERWIRE_DECL const boost::json::object* as_object(const boost::json::value& v, status& st) {
  if (auto* o = v.if_object()) return o;
  st = detail::type_error("non-object as object");
  return nullptr;
}
INFERWIRE_DECL const boost::json::array* as_array(const boost::json::value& v, status& st) {
  if (auto* a = v.if_array()) return a;
  st = detail::type_error("non-array as array");
  return nullptr;
}
INFERWIRE_DECL bool as_string(const boost::json::value& v, std::string_view& out, status& st) {
  if (auto* s = v.if_string(); s && !is_nonfinite_literal(v)) {
    out = *s;
    return true;
  }
  st = detail::type_error("non-string as string");
  return false;
}
INFERWIRE_DECL bool as_bool(const boost::json::value& v, bool& out, status& st) {
  if (auto* b = v.if_bool()) {
    out = *b;
    return true;
  }
  st = detail::type_error("non-boolean as boolean");
  return false;
}
INFERWIRE_DECL bool as_int64(const boost::json::value& v, std::int64_t& out, status& st) {
  if (auto* i = v.if_int64()) {
    out = *i;
    return true;
  }
  st = detail::type_error("non-signed-integer as signed-integer");
  return false;
}
INFERWIRE_DECL bool as_uint64(const boost::json::value& v, std::uint64_t& out, status& st) {
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
INFERWIRE_DECL bool as_double(const boost::json::value& v, double& out, status& st) {
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
INFERWIRE_DECL const boost::json::value* required(const boost::json::value* v, std::string_view name,
                                          status& st) {
  if (v) return v;
  st = {errc::internal,
        "attempt to access non-existing object member '" + std::string(name) + "'"};
  return nullptr;
}
INFERWIRE_DECL const boost::json::value* member(const boost::json::object& o, std::string_view name,
                                        status& st) {
  return required(o.if_contains(name), name, st);
}

}  // namespace json_access

INFERWIRE_DECL std::string base64_encode(std::string_view bytes) {
  std::string out(4 * ((bytes.size() + 2) / 3), '\0');
  int n = EVP_EncodeBlock(reinterpret_cast<unsigned char*>(out.data()),
                          reinterpret_cast<const unsigned char*>(bytes.data()),
                          static_cast<int>(bytes.size()));
  out.resize(static_cast<std::size_t>(n));
  return out;
}

INFERWIRE_DECL bool base64_decode(std::string_view text, std::string& out) {
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

}  // namespace inferwire::v2

#endif  // INFERWIRE_V2_IMPL_JSON_PARSE_HPP
