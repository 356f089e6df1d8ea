// SPDX-License-Identifier: Apache-2.0
// inferwire/gms/codec.hpp
//
// The MessagePack codec of the GMS protocol v2, byte-compatible with Dynamo's msgspec encoding
// (gms-protocol §1.1): every message is a map whose first key is "type" (the tag), then every
// field in declaration order, optionals as nil, bytes as bin, integers in their smallest form.
// Decoding accepts any key order and ignores unknown keys, but checks every type strictly (str
// vs bin, int vs float or bool, enum values) and reports msgspec-like texts.
//
//   std::string payload = gms::encode(gms::handshake_request{gms::requested_lock_type::ro, 5000});
//   gms::message m = gms::decode(payload);          // throws gms::decode_error
#ifndef INFERWIRE_GMS_CODEC_HPP
#define INFERWIRE_GMS_CODEC_HPP

#include <inferwire/gms/error.hpp>
#include <inferwire/gms/messages.hpp>

// The packer's primitives and the unpacker only: <msgpack.hpp> adds every type adaptor, which
// the codec does not use (its own pack_value and unpack_value map the fields).
#include <msgpack/object.hpp>
#include <msgpack/pack.hpp>
#include <msgpack/unpack.hpp>

#include <cstdint>
#include <limits>
#include <stdexcept>
#include <string>
#include <string_view>
#include <type_traits>
#include <utility>

namespace inferwire::gms {

/// A payload that is not a valid v2 message.
class decode_error : public error {
 public:
  explicit decode_error(const std::string& what) : error(what, errc::decode_error) {}
};

namespace detail {

/// msgpack-cxx's packer writes into this.
struct string_sink {
  std::string& out;
  void write(const char* p, std::size_t n) { out.append(p, n); }
};
using packer = msgpack::packer<string_sink>;

template <class T>
concept tagged = requires { T::type_tag; };

template <class T>
struct is_optional : std::false_type {};
template <class T>
struct is_optional<std::optional<T>> : std::true_type {};
template <class T>
struct is_vector : std::false_type {};
template <class T>
struct is_vector<std::vector<T>> : std::true_type {};

inline void pack_string(packer& p, std::string_view s) {
  p.pack_str(static_cast<std::uint32_t>(s.size()));
  p.pack_str_body(s.data(), static_cast<std::uint32_t>(s.size()));
}

template <class T>
void pack_struct(packer& p, const T& value);

template <class T>
void pack_value(packer& p, const T& v) {
  if constexpr (std::is_same_v<T, std::string>) {
    pack_string(p, v);
  } else if constexpr (std::is_same_v<T, bytes>) {
    p.pack_bin(static_cast<std::uint32_t>(v.data.size()));
    p.pack_bin_body(v.data.data(), static_cast<std::uint32_t>(v.data.size()));
  } else if constexpr (std::is_same_v<T, bool>) {
    v ? p.pack_true() : p.pack_false();
  } else if constexpr (std::is_same_v<T, std::int64_t>) {
    p.pack_int64(v);  // the smallest form, as msgspec writes it
  } else if constexpr (std::is_enum_v<T>) {
    pack_string(p, to_string(v));
  } else if constexpr (is_optional<T>::value) {
    if (v) pack_value(p, *v);
    else p.pack_nil();
  } else if constexpr (is_vector<T>::value) {
    p.pack_array(static_cast<std::uint32_t>(v.size()));
    for (const auto& e : v) pack_value(p, e);
  } else {
    pack_struct(p, v);
  }
}

template <class T>
void pack_struct(packer& p, const T& value) {
  // fields() only reads through the visitor here.
  T& m = const_cast<T&>(value);
  std::uint32_t n = tagged<T> ? 1 : 0;
  m.fields([&n](std::string_view, auto&, bool = false) { ++n; });
  p.pack_map(n);
  if constexpr (tagged<T>) {
    pack_string(p, "type");
    pack_string(p, T::type_tag);
  }
  m.fields([&p](std::string_view name, auto& field, bool = false) {
    pack_string(p, name);
    pack_value(p, field);
  });
}

// --- decoding --------------------------------------------------------------------------------

inline const char* type_name(const msgpack::object& o) noexcept {
  switch (o.type) {
    case msgpack::type::NIL: return "null";
    case msgpack::type::BOOLEAN: return "bool";
    case msgpack::type::POSITIVE_INTEGER:
    case msgpack::type::NEGATIVE_INTEGER: return "int";
    case msgpack::type::FLOAT32:
    case msgpack::type::FLOAT64: return "float";
    case msgpack::type::STR: return "str";
    case msgpack::type::BIN: return "bytes";
    case msgpack::type::ARRAY: return "array";
    case msgpack::type::MAP: return "object";
    case msgpack::type::EXT: return "ext";
  }
  return "unknown";
}

[[noreturn]] inline void type_mismatch(const char* expected, const msgpack::object& got,
                                       const std::string& path) {
  throw decode_error(std::string("Expected `") + expected + "`, got `" + type_name(got) +
                     "` - at `" + path + "`");
}

inline std::string_view as_str(const msgpack::object& o, const std::string& path) {
  if (o.type != msgpack::type::STR) type_mismatch("str", o, path);
  return {o.via.str.ptr, o.via.str.size};
}

template <class T>
void unpack_struct(const msgpack::object& o, T& out, const std::string& path);

template <class E>
E parse_enum(std::string_view s, const std::string& path) {
  if constexpr (std::is_same_v<E, requested_lock_type>) {
    for (auto e : {requested_lock_type::rw, requested_lock_type::ro, requested_lock_type::rw_or_ro})
      if (to_string(e) == s) return e;
  } else {
    for (auto e : {granted_lock_type::rw, granted_lock_type::ro})
      if (to_string(e) == s) return e;
  }
  throw decode_error("Invalid enum value '" + std::string(s) + "' - at `" + path + "`");
}

template <class T>
void unpack_value(const msgpack::object& o, T& out, const std::string& path) {
  if constexpr (std::is_same_v<T, std::string>) {
    out = std::string(as_str(o, path));
  } else if constexpr (std::is_same_v<T, bytes>) {
    if (o.type != msgpack::type::BIN) type_mismatch("bytes", o, path);
    out.data.assign(o.via.bin.ptr, o.via.bin.size);
  } else if constexpr (std::is_same_v<T, bool>) {
    if (o.type != msgpack::type::BOOLEAN) type_mismatch("bool", o, path);
    out = o.via.boolean;
  } else if constexpr (std::is_same_v<T, std::int64_t>) {
    if (o.type == msgpack::type::POSITIVE_INTEGER) {
      if (o.via.u64 > static_cast<std::uint64_t>(std::numeric_limits<std::int64_t>::max()))
        throw decode_error("Integer value out of range - at `" + path + "`");
      out = static_cast<std::int64_t>(o.via.u64);
    } else if (o.type == msgpack::type::NEGATIVE_INTEGER) {
      out = o.via.i64;
    } else {
      type_mismatch("int", o, path);
    }
  } else if constexpr (std::is_enum_v<T>) {
    out = parse_enum<T>(as_str(o, path), path);
  } else if constexpr (is_optional<T>::value) {
    if (o.type == msgpack::type::NIL) {
      out.reset();
    } else {
      typename T::value_type v{};
      unpack_value(o, v, path);
      out = std::move(v);
    }
  } else if constexpr (is_vector<T>::value) {
    if (o.type != msgpack::type::ARRAY) type_mismatch("array", o, path);
    out.clear();
    out.resize(o.via.array.size);
    for (std::uint32_t i = 0; i < o.via.array.size; ++i)
      unpack_value(o.via.array.ptr[i], out[i], path + "[" + std::to_string(i) + "]");
  } else {
    unpack_struct(o, out, path);
  }
}

inline const msgpack::object* find_key(const msgpack::object_map& m, std::string_view key) {
  const msgpack::object* found = nullptr;
  for (std::uint32_t i = 0; i < m.size; ++i) {
    const auto& k = m.ptr[i].key;
    if (k.type == msgpack::type::STR && std::string_view(k.via.str.ptr, k.via.str.size) == key)
      found = &m.ptr[i].val;  // the last occurrence wins, as in msgspec
  }
  return found;
}

template <class T>
void unpack_struct(const msgpack::object& o, T& out, const std::string& path) {
  if (o.type != msgpack::type::MAP) type_mismatch("object", o, path);
  const auto& m = o.via.map;
  for (std::uint32_t i = 0; i < m.size; ++i)
    if (m.ptr[i].key.type != msgpack::type::STR) type_mismatch("str", m.ptr[i].key, path + "[...]");
  if constexpr (tagged<T>) {
    // A nested tagged struct: "type" is optional, but must match when present.
    if (const auto* t = find_key(m, "type"); t && as_str(*t, path + ".type") != T::type_tag)
      throw decode_error("Invalid value '" + std::string(as_str(*t, path + ".type")) + "' - at `" +
                         path + ".type`");
  }
  out.fields([&](std::string_view name, auto& field, bool has_default = false) {
    const std::string at = path + "." + std::string(name);
    if (const auto* v = find_key(m, name)) unpack_value(*v, field, at);
    else if (!has_default)
      throw decode_error("Object missing required field `" + std::string(name) + "` - at `" +
                         path + "`");
  });
}

template <std::size_t I = 0>
bool decode_alternative(std::string_view tag, const msgpack::object& o, message& out) {
  if constexpr (I == std::variant_size_v<message>) {
    return false;
  } else {
    using T = std::variant_alternative_t<I, message>;
    if (tag != T::type_tag) return decode_alternative<I + 1>(tag, o, out);
    T value;
    unpack_struct(o, value, "$");
    out = std::move(value);
    return true;
  }
}

}  // namespace detail

/// The MessagePack payload of one message.
template <class T>
  requires detail::tagged<T>
std::string encode(const T& m) {
  std::string out;
  out.reserve(64);
  detail::string_sink sink{out};
  detail::packer p(sink);
  detail::pack_struct(p, m);
  return out;
}

inline std::string encode(const message& m) {
  return std::visit([](const auto& x) { return encode(x); }, m);
}

/// The deepest nesting a payload may have (GMS messages use three levels).
inline constexpr std::size_t max_decode_depth = 32;

/// Decodes one payload (exactly one MessagePack value). Throws decode_error.
inline message decode(std::string_view payload) {
  msgpack::object_handle oh;
  try {
    std::size_t offset = 0;
    // Every element takes at least one byte of the payload: counts and lengths beyond the
    // payload's size are lies, refused before msgpack sizes anything by them (a 5-byte frame
    // must not ask for 128 GiB). GMS messages nest a few levels deep.
    const std::size_t n = payload.size();
    const msgpack::unpack_limit limit(n, n / 2, n, n, n, max_decode_depth);
    oh = msgpack::unpack(payload.data(), payload.size(), offset, nullptr, nullptr, limit);
    if (offset != payload.size())
      throw decode_error("MessagePack data is malformed: trailing characters (byte " +
                         std::to_string(offset) + ")");
  } catch (const decode_error&) {
    throw;
  } catch (const std::exception& e) {
    throw decode_error(std::string("MessagePack data is malformed: ") + e.what());
  }
  const msgpack::object& o = oh.get();
  if (o.type != msgpack::type::MAP) detail::type_mismatch("object", o, "$");
  const auto* t = detail::find_key(o.via.map, "type");
  if (!t) throw decode_error("Object missing required field `type`");
  const std::string_view tag = detail::as_str(*t, "$.type");
  message out;
  if (!detail::decode_alternative(tag, o, out))
    throw decode_error("Invalid value '" + std::string(tag) + "' - at `$.type`");
  return out;
}

/// decode() without exceptions: false and `error` set for an invalid payload.
inline bool try_decode(std::string_view payload, message& out, std::string& error) noexcept {
  try {
    out = decode(payload);
    return true;
  } catch (const std::exception& e) {
    error = e.what();
    return false;
  }
}

}  // namespace inferwire::gms

#endif
