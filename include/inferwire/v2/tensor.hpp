// SPDX-License-Identifier: Apache-2.0
// inferwire/v2/tensor.hpp
//
// Typed helpers that build request tensors and read response tensors, for every transport.
//
//   std::vector<std::int32_t> a(16), b(16, 1);
//   v2::infer_request r;
//   r.inputs.push_back(v2::make_input("INPUT0", std::span(a), {1, 16}));  // a view, no copy
//   r.inputs.push_back(v2::make_input("INPUT1", std::span(b), {1, 16}));
//   r.outputs.push_back(v2::make_output("OUTPUT0"));
//   ...
//   for (std::int32_t x : response.output("OUTPUT0")->as<std::int32_t>()) ...
//
// Fixed-size inputs made from spans or containers refer to the caller's memory, which must stay
// valid until the request has been sent (the clients write it straight from there); one made
// from a temporary container owns a copy. BYTES inputs are serialised (4-byte little-endian
// length before each element) into storage the input owns.
#ifndef INFERWIRE_V2_TENSOR_HPP
#define INFERWIRE_V2_TENSOR_HPP

#include <inferwire/core/bytes.hpp>
#include <inferwire/core/data_type.hpp>
#include <inferwire/core/shape.hpp>
#include <inferwire/v2/types.hpp>

#include <cstdint>
#include <ranges>
#include <span>
#include <stdexcept>
#include <string>
#include <type_traits>
#include <utility>

namespace inferwire::v2 {

namespace detail {
inline void check_tensor_size(std::string_view name, data_type type, const shape_t& shape,
                              std::size_t bytes) {
  auto expected = byte_size(shape, type);
  if (!expected || std::uint64_t(expected.value) != bytes)
    throw std::invalid_argument("tensor '" + std::string(name) + "' has " +
                                std::to_string(bytes) + " bytes, which does not match its " +
                                std::string(wire_name(type)) + " shape " + inferwire::to_string(std::span<const std::int64_t>(shape)));
}
}  // namespace detail

/// An input whose data is a view of `data` (no copy). Throws std::invalid_argument when the
/// element count does not match `shape`.
template <tensor_element T>
infer_input make_input(std::string name, std::span<const T> data, shape_t shape,
                       tensor_encoding encoding = tensor_encoding::binary) {
  constexpr data_type type = data_type_of<std::remove_cv_t<T>>::value;
  detail::check_tensor_size(name, type, shape, data.size_bytes());
  infer_input in;
  in.name = std::move(name);
  in.datatype = type;
  in.shape = std::move(shape);
  in.encoding = encoding;
  in.data = tensor_data::view(std::as_bytes(data));
  return in;
}

/// The same for any contiguous range of a fixed-size element type (a std::vector, std::array).
template <std::ranges::contiguous_range R>
  requires tensor_element<std::ranges::range_value_t<R>>
infer_input make_input(std::string name, const R& data, shape_t shape,
                       tensor_encoding encoding = tensor_encoding::binary) {
  using T = std::ranges::range_value_t<R>;
  return make_input(std::move(name), std::span<const T>(std::ranges::data(data),
                                                        std::ranges::size(data)),
                    std::move(shape), encoding);
}

/// The same for a temporary container (`make_input("X", std::vector<float>(16), {16})`): its
/// elements are copied into storage the input owns, since a view of them would dangle once the
/// expression ends.
template <std::ranges::contiguous_range R>
  requires tensor_element<std::ranges::range_value_t<R>> && (!std::is_lvalue_reference_v<R>) &&
           (!std::ranges::borrowed_range<R>)
infer_input make_input(std::string name, R&& data, shape_t shape,
                       tensor_encoding encoding = tensor_encoding::binary) {
  using T = std::ranges::range_value_t<R>;
  const std::span<const T> elements(std::ranges::data(data), std::ranges::size(data));
  infer_input in = make_input(std::move(name), elements, std::move(shape), encoding);
  in.data = tensor_data::own(std::string(reinterpret_cast<const char*>(elements.data()), elements.size_bytes()));
  return in;
}

/// A BYTES input from a range of strings (anything convertible to std::string_view).
template <std::ranges::input_range R>
  requires std::convertible_to<std::ranges::range_reference_t<R>, std::string_view>
infer_input make_bytes_input(std::string name, const R& elements, shape_t shape,
                             tensor_encoding encoding = tensor_encoding::binary) {
  bytes_builder b;
  b.append_range(elements);
  auto count = element_count(shape);
  if (!count || std::uint64_t(count.value) != b.count())
    throw std::invalid_argument("tensor '" + name + "' has " + std::to_string(b.count()) +
                                " strings, which does not match its shape " +
                                inferwire::to_string(std::span<const std::int64_t>(shape)));
  infer_input in;
  in.name = std::move(name);
  in.datatype = data_type::bytes;
  in.shape = std::move(shape);
  in.encoding = encoding;
  in.data = tensor_data::own(b.release());
  return in;
}

/// An input whose data already lies in a registered shared-memory region.
inline infer_input make_shm_input(std::string name, data_type type, shape_t shape, shm_ref where) {
  infer_input in;
  in.name = std::move(name);
  in.datatype = type;
  in.shape = std::move(shape);
  in.encoding = tensor_encoding::shared_memory;
  in.shm = std::move(where);
  return in;
}

/// A requested output; `binary` asks for binary data (HTTP), `classification` for top-k labels.
inline requested_output make_output(std::string name, bool binary = true,
                                    std::uint64_t classification = 0) {
  requested_output out;
  out.name = std::move(name);
  out.binary_data = binary;
  out.classification = classification;
  return out;
}

/// An output the server writes into a registered shared-memory region.
inline requested_output make_shm_output(std::string name, shm_ref where) {
  requested_output out;
  out.name = std::move(name);
  out.shm = std::move(where);
  return out;
}

/// The elements of a BYTES output (views into the response). Throws std::invalid_argument for a
/// tensor that is not BYTES or whose serialised form is malformed.
inline std::vector<std::string_view> strings(const infer_output& out) {
  if (out.datatype != data_type::bytes)
    throw std::invalid_argument("output '" + out.name + "' is " +
                                std::string(wire_name(out.datatype)) + ", not BYTES");
  return bytes_view(out.data.bytes()).elements();
}

}  // namespace inferwire::v2

#endif
