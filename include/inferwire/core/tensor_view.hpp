// SPDX-License-Identifier: Apache-2.0
// inferwire/core/tensor_view.hpp
//
// Typed, read-only views of fixed-size tensor data. The bytes usually come straight from a
// request or response body, where nothing guarantees alignment; element access therefore goes
// through memcpy (which compiles to a plain load) and never reinterprets a misaligned pointer.
// `aligned_span()` hands out a real std::span<const T> when the data happens to be aligned.
#ifndef INFERWIRE_CORE_TENSOR_VIEW_HPP
#define INFERWIRE_CORE_TENSOR_VIEW_HPP

#include <inferwire/core/data_type.hpp>
#include <inferwire/core/shape.hpp>

#include <cstddef>
#include <cstring>
#include <iterator>
#include <optional>
#include <span>
#include <stdexcept>
#include <string>
#include <vector>

namespace inferwire {

template <tensor_element T>
class tensor_view {
 public:
  using value_type = std::remove_cv_t<T>;

  class iterator {
   public:
    using iterator_category = std::random_access_iterator_tag;
    using iterator_concept = std::random_access_iterator_tag;
    using value_type = tensor_view::value_type;
    using difference_type = std::ptrdiff_t;
    using reference = value_type;
    using pointer = void;

    iterator() = default;
    value_type operator*() const noexcept { return load(p_); }
    value_type operator[](difference_type n) const noexcept {
      return load(p_ + n * difference_type(sizeof(value_type)));
    }
    iterator& operator++() noexcept { p_ += sizeof(value_type); return *this; }
    iterator operator++(int) noexcept { auto t = *this; ++*this; return t; }
    iterator& operator--() noexcept { p_ -= sizeof(value_type); return *this; }
    iterator operator--(int) noexcept { auto t = *this; --*this; return t; }
    iterator& operator+=(difference_type n) noexcept {
      p_ += n * difference_type(sizeof(value_type));
      return *this;
    }
    iterator& operator-=(difference_type n) noexcept { return *this += -n; }
    friend iterator operator+(iterator i, difference_type n) noexcept { return i += n; }
    friend iterator operator+(difference_type n, iterator i) noexcept { return i += n; }
    friend iterator operator-(iterator i, difference_type n) noexcept { return i -= n; }
    friend difference_type operator-(iterator a, iterator b) noexcept {
      return (a.p_ - b.p_) / difference_type(sizeof(value_type));
    }
    friend auto operator<=>(iterator a, iterator b) noexcept = default;

   private:
    friend class tensor_view;
    explicit iterator(const std::byte* p) noexcept : p_(p) {}
    const std::byte* p_ = nullptr;
  };

  tensor_view() = default;

  /// A view of `bytes` as a tensor of `shape`. Throws std::invalid_argument when the shape is
  /// invalid or its byte size differs from bytes.size(). `shape` must outlive the view.
  tensor_view(std::span<const std::byte> bytes, std::span<const std::int64_t> shape)
      : bytes_(bytes), shape_(shape) {
    auto need = byte_size(shape, data_type_of_v<value_type>);
    if (!need || static_cast<std::uint64_t>(need.value) != bytes.size())
      throw std::invalid_argument("tensor_view: " + std::to_string(bytes.size()) +
                                  " bytes do not hold a " +
                                  std::string(wire_name(data_type_of_v<value_type>)) +
                                  " tensor of shape " + to_string(shape));
  }

  /// A 1-D view of typed data.
  explicit tensor_view(std::span<const value_type> data) noexcept
      : bytes_(std::as_bytes(data)), flat_{static_cast<std::int64_t>(data.size())},
        shape_(flat_) {}

  /// Like the constructor, without throwing.
  static std::optional<tensor_view> make(std::span<const std::byte> bytes,
                                         std::span<const std::int64_t> shape) noexcept {
    auto need = byte_size(shape, data_type_of_v<value_type>);
    if (!need || static_cast<std::uint64_t>(need.value) != bytes.size()) return std::nullopt;
    tensor_view v;
    v.bytes_ = bytes;
    v.shape_ = shape;
    return v;
  }

  tensor_view(const tensor_view& o) noexcept { *this = o; }
  tensor_view& operator=(const tensor_view& o) noexcept {
    bytes_ = o.bytes_;
    flat_ = o.flat_;
    shape_ = o.shape_.data() == o.flat_.data() ? std::span<const std::int64_t>(flat_) : o.shape_;
    return *this;
  }

  static constexpr data_type type = data_type_of_v<value_type>;

  std::size_t size() const noexcept { return bytes_.size() / sizeof(value_type); }
  bool empty() const noexcept { return bytes_.empty(); }
  std::span<const std::int64_t> shape() const noexcept { return shape_; }
  std::span<const std::byte> bytes() const noexcept { return bytes_; }

  value_type operator[](std::size_t i) const noexcept {
    return load(bytes_.data() + i * sizeof(value_type));
  }
  /// Bounds-checked element access; throws std::out_of_range.
  value_type at(std::size_t i) const {
    if (i >= size())
      throw std::out_of_range("tensor_view::at: index " + std::to_string(i) + " >= size " +
                              std::to_string(size()));
    return (*this)[i];
  }

  iterator begin() const noexcept { return iterator(bytes_.data()); }
  iterator end() const noexcept { return iterator(bytes_.data() + size() * sizeof(value_type)); }

  /// The data as a std::span when it is suitably aligned (bool is excluded: a byte other than
  /// 0 or 1 is not a valid bool object).
  std::optional<std::span<const value_type>> aligned_span() const noexcept {
    if constexpr (std::is_same_v<value_type, bool>) {
      return std::nullopt;
    } else {
      if (reinterpret_cast<std::uintptr_t>(bytes_.data()) % alignof(value_type) != 0)
        return std::nullopt;
      return std::span<const value_type>(reinterpret_cast<const value_type*>(bytes_.data()),
                                         size());
    }
  }

  std::vector<value_type> to_vector() const { return std::vector<value_type>(begin(), end()); }

 private:
  static value_type load(const std::byte* p) noexcept {
    if constexpr (std::is_same_v<value_type, bool>) {
      return *p != std::byte{0};
    } else {
      value_type v;
      std::memcpy(&v, p, sizeof v);
      return v;
    }
  }

  std::span<const std::byte> bytes_;
  std::array<std::int64_t, 1> flat_{};
  std::span<const std::int64_t> shape_;
};

}  // namespace inferwire

#endif
