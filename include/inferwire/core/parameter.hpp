// SPDX-License-Identifier: Apache-2.0
// inferwire/core/parameter.hpp
//
// Request, response and tensor parameters: a value is a bool, int64, uint64, double or string
// (the InferParameter oneof), and a parameter_map keeps them in insertion order, so what a
// client sends is what it reads back and what the server echoes.
#ifndef INFERWIRE_CORE_PARAMETER_HPP
#define INFERWIRE_CORE_PARAMETER_HPP

#include <algorithm>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <type_traits>
#include <utility>
#include <variant>
#include <vector>

namespace inferwire {

using parameter_value = std::variant<bool, std::int64_t, std::uint64_t, double, std::string>;

/// Name of the held alternative: "bool", "int64", "uint64", "double", "string".
inline std::string_view type_name(const parameter_value& v) noexcept {
  constexpr std::string_view names[] = {"bool", "int64", "uint64", "double", "string"};
  return names[v.index()];
}

/// An insertion-ordered map from parameter names to values. Small and flat: requests carry a
/// handful of parameters, for which a vector beats a tree or a hash table.
class parameter_map {
 public:
  using value_type = std::pair<std::string, parameter_value>;
  using const_iterator = std::vector<value_type>::const_iterator;

  parameter_map() = default;
  parameter_map(std::initializer_list<value_type> init) {
    for (const auto& kv : init) set(kv.first, kv.second);
  }

  /// Sets `key` to `value`, replacing an existing value in place (order is kept).
  template <class V>
  void set(std::string_view key, V&& value) {
    parameter_value v = to_value(std::forward<V>(value));
    if (auto* slot = find_slot(key)) slot->second = std::move(v);
    else {
      auto& added = items_.emplace_back();
      added.first.assign(key.data(), key.size());
      added.second = std::move(v);
    }
  }

  /// The value of `key`, or nullptr.
  const parameter_value* find(std::string_view key) const noexcept {
    auto it = std::find_if(items_.begin(), items_.end(),
                           [&](const value_type& kv) { return kv.first == key; });
    return it == items_.end() ? nullptr : &it->second;
  }
  bool contains(std::string_view key) const noexcept { return find(key) != nullptr; }

  /// The value of `key` when it holds a T; nullopt when absent or of another type.
  template <class T>
  std::optional<T> get(std::string_view key) const {
    const parameter_value* v = find(key);
    if (!v) return std::nullopt;
    if (const T* p = std::get_if<T>(v)) return *p;
    return std::nullopt;
  }

  bool erase(std::string_view key) {
    auto it = std::find_if(items_.begin(), items_.end(),
                           [&](const value_type& kv) { return kv.first == key; });
    if (it == items_.end()) return false;
    items_.erase(it);
    return true;
  }

  std::size_t size() const noexcept { return items_.size(); }
  bool empty() const noexcept { return items_.empty(); }
  void clear() noexcept { items_.clear(); }
  void reserve(std::size_t n) { items_.reserve(n); }
  const_iterator begin() const noexcept { return items_.begin(); }
  const_iterator end() const noexcept { return items_.end(); }

  friend bool operator==(const parameter_map&, const parameter_map&) = default;

 private:
  value_type* find_slot(std::string_view key) noexcept {
    for (auto& kv : items_)
      if (kv.first == key) return &kv;
    return nullptr;
  }

  // Maps the argument types people write to the alternative they mean: int -> int64,
  // unsigned -> uint64, const char* -> string, float -> double.
  template <class V>
  static parameter_value to_value(V&& v) {
    using D = std::remove_cvref_t<V>;
    if constexpr (std::is_same_v<D, parameter_value>) return std::forward<V>(v);
    else if constexpr (std::is_same_v<D, bool>) return v;
    else if constexpr (std::is_integral_v<D> && std::is_signed_v<D>)
      return static_cast<std::int64_t>(v);
    else if constexpr (std::is_integral_v<D>) return static_cast<std::uint64_t>(v);
    else if constexpr (std::is_floating_point_v<D>) return static_cast<double>(v);
    else return std::string(std::string_view(v));
  }

  std::vector<value_type> items_;
};

}  // namespace inferwire

#endif
