// SPDX-License-Identifier: Apache-2.0
// inferwire/v2/fast_request.hpp
//
// A fast path for decoding the infer requests most clients send: `decode_infer_request` builds
// a JSON document and then walks it; this reads the header's tokens once straight into the
// `infer_request` (a reader of plain JSON of its own, Boost.JSON's SAX parser for the rest; see
// "Reading the header" below), for the common shape only:
//
//   {"id": "...", "parameters": {"binary_data_output": true, ...},
//    "inputs": [{"name": "...", "datatype": "...", "shape": [...],
//                             "parameters": {"binary_data_size": N}}, ...],
//    "outputs": [{"name": "...", "parameters": {"binary_data": true|false}}, ...]}
//
// in any member order, with members the decoder ignores anywhere they are ignored there; and
// inputs with their tensor in JSON, `"data": [...]` (flat or nested) of a fixed-width integer
// or floating-point type given before it, whose numbers are written into the tensor's bytes as
// they are read instead of through a document.
// Request parameters are read with the full decoder's types (sequence_id, sequence_start/end,
// binary_data_output, priority, timeout, custom strings, numbers and bools).
// Everything else (BOOL, BYTES and FP16 data, data before its datatype, shared-memory inputs,
// other tensor parameters,
// escapes that split a string, a repeated member, any error at all) makes it decline, and the
// caller decodes with `decode_infer_request`, which gives the result or the exact error. What
// it accepts, it decodes exactly as `decode_infer_request` does (a test and a fuzz target
// compare the two).
//
// Kept out of binary.hpp: the parser's template costs every translation unit that includes the
// codec compile time, and only a server's request path needs it.
#ifndef INFERWIRE_V2_FAST_REQUEST_HPP
#define INFERWIRE_V2_FAST_REQUEST_HPP

#include <inferwire/core/shape.hpp>
#include <inferwire/v2/binary.hpp>
#include <inferwire/v2/detail/sax_handler.hpp>

#include <boost/json/basic_parser_impl.hpp>

#include <algorithm>
#include <array>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <functional>
#include <limits>
#include <type_traits>
#include <string>
#include <span>
#include <string_view>
#include <utility>
#include <vector>

namespace inferwire::v2 {

namespace detail {

/// A JSON input's elements, written into its tensor's bytes as they are read, with the full
/// decoder's rules: signed integer types take what fits in int64 and in their width, unsigned
/// types what is not negative and fits, floating types any number, integer types no fraction.
/// The request handler below and the request memo's reader of data arrays share it.
class json_elements {
 public:
  /// The types whose JSON elements are numbers written at their width (decode_json_tensor_data's
  /// fixed-width cases but BOOL).
  static bool number_type(data_type t) noexcept {
    return is_fixed_size(t) && t != data_type::bool_ && t != data_type::fp16 && t != data_type::bf16;
  }

  /// Starts a tensor of `type` (a number_type) with room for `bytes` (0: unknown; the bytes
  /// double when more come).
  void start(data_type type, std::size_t bytes) {
    type_ = type;
    count_ = 0;
    bytes_.clear();
    if (bytes) bytes_.resize(bytes);
  }
  /// The elements so far.
  std::uint64_t count() const noexcept { return count_; }
  /// The tensor's bytes, cut to `bytes` (its count times its element size, as the caller checked).
  std::string take(std::size_t bytes) {
    bytes_.resize(bytes);
    return std::exchange(bytes_, std::string());
  }

  // A tensor's elements are most of a JSON header's numbers: INT32 and FP32 (the commonest)
  // take a short path, inline.
  [[gnu::always_inline]] bool on_int64(std::int64_t v) {
    if (type_ == data_type::int32 && v >= std::numeric_limits<std::int32_t>::min() &&
        v <= std::numeric_limits<std::int32_t>::max()) [[likely]]
      return append(static_cast<std::int32_t>(v));
    return integer(v);
  }
  bool on_uint64(std::uint64_t v) { return integer(v); }

  /// An INT32 tensor's element at p, read and stored here where it is a plain integer of at
  /// most 9 digits followed by a byte that ends a number: -?(0|[1-9][0-9]{0,8}), what
  /// read_number reads to the same on_int64. Anything else (a fraction, an exponent, a leading
  /// zero, more digits, the text's end) returns false with p unmoved, for read_number.
  [[gnu::always_inline]] bool read_int32(const char*& p, const char* end) {
    const char* q = p;
    const bool negative = q != end && *q == '-';
    q += negative;
    if (q == end) return false;
    auto d = static_cast<unsigned char>(*q - '0');
    if (d >= 10) return false;
    std::uint32_t v = d;
    ++q;
    if (v != 0)
      for (int digits = 1; q != end; ++q, ++digits) {
        d = static_cast<unsigned char>(*q - '0');
        if (d >= 10) break;
        if (digits == 9) return false;
        v = v * 10 + d;
      }
    if (q == end) return false;
    if (static_cast<unsigned char>(*q - '0') < 10 || *q == '.' || *q == 'e' || *q == 'E') return false;
    append(negative ? -static_cast<std::int32_t>(v) : static_cast<std::int32_t>(v));
    p = q;
    return true;
  }
  [[gnu::always_inline]] bool on_double(double d) {
    if (type_ == data_type::fp32) [[likely]]
      return append(static_cast<float>(d));
    if (type_ == data_type::fp64) return append(d);
    return false;  // an integer type refuses a fraction
  }

 private:
  template <class T>
  [[gnu::always_inline]] bool append(T x) {
    const std::size_t at = static_cast<std::size_t>(count_) * sizeof(T);
    if (bytes_.size() - at < sizeof(T)) [[unlikely]] bytes_.resize(std::max(2 * bytes_.size(), at + sizeof(T)));
    std::memcpy(bytes_.data() + at, &x, sizeof(T));
    ++count_;
    return true;
  }
  template <class I>
  [[gnu::noinline]] bool integer(I v) {
    auto as = [&]<class T>(T*) -> bool {
      if constexpr (std::is_floating_point_v<T>) {
        return append(static_cast<T>(static_cast<double>(v)));
      } else if constexpr (std::is_signed_v<T>) {
        if constexpr (std::is_unsigned_v<I>) return false;  // past INT64_MAX: not an int64
        else if (v < std::numeric_limits<T>::min() || v > std::numeric_limits<T>::max()) return false;
        else return append(static_cast<T>(v));
      } else {
        if constexpr (std::is_signed_v<I>) {
          if (v < 0) return false;
        }
        if (static_cast<std::uint64_t>(v) > std::numeric_limits<T>::max()) return false;
        return append(static_cast<T>(v));
      }
    };
    switch (type_) {
      case data_type::uint8: return as(static_cast<std::uint8_t*>(nullptr));
      case data_type::uint16: return as(static_cast<std::uint16_t*>(nullptr));
      case data_type::uint32: return as(static_cast<std::uint32_t*>(nullptr));
      case data_type::uint64: return as(static_cast<std::uint64_t*>(nullptr));
      case data_type::int8: return as(static_cast<std::int8_t*>(nullptr));
      case data_type::int16: return as(static_cast<std::int16_t*>(nullptr));
      case data_type::int32: return as(static_cast<std::int32_t*>(nullptr));
      case data_type::int64: return as(static_cast<std::int64_t*>(nullptr));
      case data_type::fp32: return as(static_cast<float*>(nullptr));
      case data_type::fp64: return as(static_cast<double*>(nullptr));
      default: return false;
    }
  }

  data_type type_ = data_type::invalid;
  std::string bytes_;
  std::uint64_t count_ = 0;
};

class fast_request_handler : public sax_handler_base {
 public:

  fast_request_handler(std::string_view body, std::size_t header_length, const codec_limits& limits,
                       infer_request& out)
      : body_(body), header_length_(header_length), next_binary_(header_length), limits_(limits), req_(out) {}

  /// After a successful parse: whether the request is complete and consistent.
  bool finished() const noexcept { return have_inputs_ && next_binary_ == body_.size(); }

  /// Where an input's data array lies in the header: the offsets of its '[' and just past its
  /// ']'. The plain reader reports its position before each array's events (at_position); the
  /// request memo keeps these.
  struct data_array {
    std::size_t begin = 0, end = 0;
    std::size_t input = 0;  ///< the input whose data it is
    bool flat = true;       ///< no array inside it
  };
  static constexpr std::size_t max_data_arrays = 8;
  void at_position(const char* p) noexcept { here_ = p; }
  /// The data arrays in text order; false when they are not known (Boost.JSON's parser read the
  /// header, or there were more than max_data_arrays).
  bool data_arrays(std::span<const data_array>& out) const noexcept {
    if (!here_ || arrays_unknown_) return false;
    out = std::span<const data_array>(arrays_, arrays_count_);
    return true;
  }

  bool on_document_begin(ec_t&) { return true; }
  bool on_document_end(ec_t&) { return true; }

  bool on_object_begin(ec_t&) {
    if (skip_ > 0 || awaiting_ == slot::ignored) return skip_value_begin();
    switch (frame_) {
      case frame::none:
        if (awaiting_ != slot::none) return false;
        return enter(frame::root);
      case frame::root:
        if (awaiting_ != slot::request_parameters) return false;
        awaiting_ = slot::none;
        return enter(frame::request_parameters);
      case frame::inputs:
        if (++tensors_ > limits_.max_tensors) return false;
        req_.inputs.emplace_back();
        seen_ = 0;
        return enter(frame::input);
      case frame::outputs:
        if (++tensors_ > limits_.max_tensors) return false;
        req_.outputs.emplace_back();
        seen_ = 0;
        return enter(frame::output);
      case frame::input:
        if (awaiting_ != slot::tensor_parameters || limits_.max_parameters < 1) return false;
        awaiting_ = slot::none;
        return enter(frame::input_parameters);
      case frame::output:
        if (awaiting_ != slot::tensor_parameters || limits_.max_parameters < 1) return false;
        awaiting_ = slot::none;
        return enter(frame::output_parameters);
      default:
        return false;
    }
  }

  bool on_object_end(std::size_t, ec_t&) {
    if (skip_ > 0) return skip_value_end();
    if (frame_ == frame::input && !finish_input()) return false;
    if (frame_ == frame::output && !(seen_ & bit(slot::name))) return false;
    return leave();
  }

  bool on_array_begin(ec_t&) {
    if (skip_ > 0 || awaiting_ == slot::ignored) return skip_value_begin();
    const slot s = std::exchange(awaiting_, slot::none);
    // The sizes are not known yet: room for what requests usually carry, in one allocation.
    if (frame_ == frame::root && s == slot::inputs) {
      have_inputs_ = true;
      tensors_ = 0;
      req_.inputs.reserve(4);
      return enter(frame::inputs);
    }
    if (frame_ == frame::root && s == slot::outputs) {
      tensors_ = 0;
      req_.outputs.reserve(4);
      return enter(frame::outputs);
    }
    if (frame_ == frame::input && s == slot::shape) {
      req_.inputs.back().shape.reserve(4);
      return enter(frame::shape);
    }
    if (frame_ == frame::input && s == slot::data) {
      // A shape given before the data tells its size: one allocation instead of doublings. No
      // more than the header's text can hold (an element takes at least a digit and a comma),
      // so a shape cannot make the server reserve what the client did not send.
      const infer_input& in = req_.inputs.back();
      std::size_t expected = 0;
      if (seen_ & bit(slot::shape)) {
        const shape_result bytes = byte_size(in.shape, in.datatype);
        const std::uint64_t most = (header_length_ / 2 + 1) * element_size(in.datatype);
        if (bytes && static_cast<std::uint64_t>(bytes.value) <= most) expected = static_cast<std::size_t>(bytes.value);
      }
      elements_.start(in.datatype, expected);
      data_depth_ = 1;
      array_opened();
      return enter(frame::data);
    }
    if (frame_ == frame::data && s == slot::none) {  // nested: the elements in row-major order
      ++data_depth_;
      nested_ = true;
      return true;
    }
    return false;
  }

  bool on_array_end(std::size_t, ec_t&) {
    if (skip_ > 0) return skip_value_end();
    if (frame_ == frame::data) {
      if (--data_depth_ > 0) return true;
      array_closed();
    }
    return leave();
  }

  bool on_key_part(sv, std::size_t, ec_t&) { return skip_ > 0; }
  bool on_key(sv text, std::size_t, ec_t&) {
    if (skip_ > 0) return true;
    const std::string_view key(text.data(), text.size());  // compared with literals of known length
    slot s = slot::ignored;
    switch (frame_) {
      case frame::root:
        if (is(key, "id")) s = slot::id;
        else if (is(key, "inputs")) s = slot::inputs;
        else if (is(key, "outputs")) s = slot::outputs;
        else if (is(key, "parameters")) s = slot::request_parameters;
        break;
      case frame::request_parameters: {
        // Reserved names and a name given twice are the full decoder's business.
        const std::string_view name = key;
        if (name.starts_with("triton_") || req_.parameters.contains(name) ||
            req_.parameters.size() >= limits_.max_parameters)
          return false;
        param_ = parameter_kind_of(name);
        // A name that lies in the header's text stays valid until its value comes; one the parser
        // put together elsewhere (escapes) is copied.
        const std::less_equal<const char*> le;  // a total order, also for unrelated pointers
        if (le(body_.data(), name.data()) && le(name.data() + name.size(), body_.data() + body_.size())) {
          param_name_ = name;
        } else {
          param_name_copy_.assign(name.data(), name.size());
          param_name_ = param_name_copy_;
        }
        awaiting_ = slot::parameter_value;
        return true;
      }
      case frame::input:
        if (is(key, "name")) s = slot::name;
        else if (is(key, "datatype")) s = slot::datatype;
        else if (is(key, "shape")) s = slot::shape;
        else if (is(key, "parameters")) s = slot::tensor_parameters;
        else if (is(key, "data")) {
          if (!(seen_ & bit(slot::datatype)) || !json_elements::number_type(req_.inputs.back().datatype)) return false;
          s = slot::data;
        }
        break;
      case frame::output:
        if (is(key, "name")) s = slot::name;
        else if (is(key, "parameters")) s = slot::tensor_parameters;
        break;
      case frame::input_parameters:
        if (!is(key, "binary_data_size")) return false;
        s = slot::binary_data_size;
        break;
      case frame::output_parameters:
        if (!is(key, "binary_data")) return false;
        s = slot::binary_data;
        break;
      default:
        return false;
    }
    if (s != slot::ignored) {
      // A member named twice: the document decides which one counts; leave it to the decoder.
      unsigned& seen = frame_ == frame::root ? root_seen_ : seen_;
      if (seen & bit(s)) return false;
      seen |= bit(s);
    }
    awaiting_ = s;
    return true;
  }

  bool on_string_part(sv, std::size_t, ec_t&) { return skip_ > 0 || awaiting_ == slot::ignored; }
  bool on_string(sv text, std::size_t, ec_t&) {
    if (skip_ > 0) return true;
    if (awaiting_ == slot::parameter_value) {
      if (param_ != parameter_kind::custom && param_ != parameter_kind::sequence_id) return false;
      return set_parameter(std::string(text.data(), text.size()));
    }
    switch (std::exchange(awaiting_, slot::none)) {
      case slot::ignored: return true;
      case slot::id: req_.id.assign(text.data(), text.size()); return true;
      case slot::name:
        if (frame_ == frame::input) req_.inputs.back().name.assign(text.data(), text.size());
        else req_.outputs.back().name.assign(text.data(), text.size());
        return true;
      case slot::datatype:
        req_.inputs.back().datatype = parse_data_type(std::string_view(text.data(), text.size()));
        return true;
      default: return false;
    }
  }

  bool on_number_part(sv, ec_t&) { return true; }
  // A tensor's elements are most of a JSON header's numbers: their path is short and inline,
  // for INT32 (the commonest) shorter still.
  [[gnu::always_inline]] bool on_int64(std::int64_t v, sv, ec_t&) {
    if (frame_ == frame::data && skip_ == 0) [[likely]] return elements_.on_int64(v);
    return other_int64(v);
  }

  bool on_uint64(std::uint64_t v, sv, ec_t&) {
    if (skip_ == 0 && frame_ == frame::data) return elements_.on_uint64(v);
    if (skip_ == 0 && awaiting_ == slot::parameter_value) {
      // Above INT64_MAX: a custom parameter reads it as a double, as the full decoder does.
      if (param_ == parameter_kind::custom) return set_parameter(static_cast<double>(v));
      if (param_ == parameter_kind::flag) return false;
      return set_parameter(v);
    }
    return on_unsigned(v);
  }
  [[gnu::always_inline]] bool on_double(double d, sv, ec_t&) {
    if (frame_ == frame::data && skip_ == 0) [[likely]] return elements_.on_double(d);
    return other_double(d);
  }

  bool on_bool(bool b, ec_t&) {
    if (skip_ == 0 && awaiting_ == slot::parameter_value)
      return (param_ == parameter_kind::custom || param_ == parameter_kind::flag) && set_parameter(b);
    if (skip_ == 0 && awaiting_ == slot::binary_data) {
      awaiting_ = slot::none;
      req_.outputs.back().binary_data = b;
      return true;
    }
    return scalar_ignored();
  }
  bool on_null(ec_t&) { return scalar_ignored(); }
  bool on_comment_part(sv, ec_t&) { return false; }
  bool on_comment(sv, ec_t&) { return false; }

 private:
  // The events off the elements' paths above.
  [[gnu::noinline]] bool other_int64(std::int64_t v) {
    if (skip_ == 0 && awaiting_ == slot::parameter_value) {
      if (param_ == parameter_kind::custom) return set_parameter(v);
      if (param_ == parameter_kind::flag || v < 0) return false;
      return set_parameter(static_cast<std::uint64_t>(v));
    }
    if (v < 0) return scalar_ignored();
    return on_unsigned(static_cast<std::uint64_t>(v));
  }
  [[gnu::noinline]] bool other_double(double d) {
    if (skip_ == 0 && awaiting_ == slot::parameter_value)
      return param_ == parameter_kind::custom && set_parameter(d);
    return scalar_ignored();
  }

  enum class frame : std::uint8_t {
    none, root, request_parameters, inputs, input, shape, data, input_parameters, outputs, output, output_parameters
  };
  enum class slot : std::uint8_t {
    none, ignored, id, request_parameters, parameter_value, inputs, outputs, name, datatype, shape,
    tensor_parameters, binary_data_size, binary_data, data
  };
  // The request parameters the full decoder types: sequence_id (string or unsigned), the
  // flags (bool) and priority/timeout (unsigned); any other name is a custom parameter.
  enum class parameter_kind : std::uint8_t { custom, sequence_id, flag, unsigned_ };
  static parameter_kind parameter_kind_of(std::string_view name) noexcept {
    if (name == "sequence_id") return parameter_kind::sequence_id;
    if (name == "sequence_start" || name == "sequence_end" || name == "binary_data_output")
      return parameter_kind::flag;
    if (name == "priority" || name == "timeout") return parameter_kind::unsigned_;
    return parameter_kind::custom;
  }
  template <class V>
  bool set_parameter(V&& value) {
    awaiting_ = slot::none;
    req_.parameters.set(param_name_, std::forward<V>(value));
    return true;
  }
  static unsigned bit(slot s) noexcept { return 1u << static_cast<unsigned>(s); }
  // A key against a literal: a comparison of known length, which the compiler writes inline.
  template <std::size_t N>
  static bool is(std::string_view key, const char (&literal)[N]) noexcept {
    return key.size() == N - 1 && std::memcmp(key.data(), literal, N - 1) == 0;
  }

  bool enter(frame f) {
    frame_ = f;
    return true;
  }
  // Back to the enclosing value (the parser matches brackets, so the kinds always fit).
  bool leave() {
    switch (frame_) {
      case frame::none: return false;
      case frame::root: frame_ = frame::none; break;
      case frame::request_parameters:
      case frame::inputs:
      case frame::outputs: frame_ = frame::root; break;
      case frame::input: frame_ = frame::inputs; break;
      case frame::shape:
      case frame::data:
      case frame::input_parameters: frame_ = frame::input; break;
      case frame::output: frame_ = frame::outputs; break;
      case frame::output_parameters: frame_ = frame::output; break;
    }
    return true;
  }
  void array_opened() noexcept {
    nested_ = false;
    if (!here_ || arrays_count_ == max_data_arrays) {
      arrays_unknown_ = true;
      return;
    }
    arrays_[arrays_count_] = {static_cast<std::size_t>(here_ - body_.data()), 0, req_.inputs.size() - 1, true};
  }
  void array_closed() noexcept {
    if (arrays_unknown_) return;
    data_array& a = arrays_[arrays_count_++];
    a.end = static_cast<std::size_t>(here_ - body_.data());
    a.flat = !nested_;
  }
  // An input with its tensor in JSON: exactly as many elements as a valid, non-empty shape
  // has (an empty one's data the decoder does not read), within the input size limit.
  bool finish_json_input() {
    constexpr unsigned required = (1u << static_cast<unsigned>(slot::name)) |
                                  (1u << static_cast<unsigned>(slot::datatype)) |
                                  (1u << static_cast<unsigned>(slot::shape));
    if ((seen_ & required) != required || (seen_ & bit(slot::binary_data_size))) return false;
    infer_input& in = req_.inputs.back();
    const shape_result count = element_count(in.shape);
    const shape_result bytes = byte_size(in.shape, in.datatype);
    if (!count || count.value == 0 || static_cast<std::uint64_t>(count.value) != elements_.count() || !bytes ||
        static_cast<std::uint64_t>(bytes.value) > limits_.max_input_size)
      return false;
    in.encoding = tensor_encoding::json;
    in.data = tensor_data::own(elements_.take(static_cast<std::size_t>(bytes.value)));
    return true;
  }
  // An input is complete: name, datatype, shape and binary_data_size (each once, as on_key saw
  // to); its data is the next binary_data_size bytes after the header.
  bool finish_input() {
    if (seen_ & bit(slot::data)) return finish_json_input();
    constexpr unsigned required = (1u << static_cast<unsigned>(slot::name)) |
                                  (1u << static_cast<unsigned>(slot::datatype)) |
                                  (1u << static_cast<unsigned>(slot::shape)) |
                                  (1u << static_cast<unsigned>(slot::binary_data_size));
    if ((seen_ & required) != required || binary_size_ > body_.size() - next_binary_) return false;
    infer_input& in = req_.inputs.back();
    in.encoding = tensor_encoding::binary;
    in.data = tensor_data::view(body_.substr(next_binary_, binary_size_));
    next_binary_ += binary_size_;
    return true;
  }
  // A value the decoder does not look at: objects and arrays are skipped whole.
  bool skip_value_begin() {
    awaiting_ = slot::none;
    ++skip_;
    return true;
  }
  bool skip_value_end() {
    --skip_;
    return true;
  }
  bool scalar_ignored() {
    if (skip_ > 0) return true;
    return std::exchange(awaiting_, slot::none) == slot::ignored;
  }
  bool on_unsigned(std::uint64_t v) {
    if (skip_ > 0) return true;
    if (frame_ == frame::shape && awaiting_ == slot::none) {
      auto& shape = req_.inputs.back().shape;
      if (shape.size() >= limits_.max_dims) return false;
      shape.push_back(static_cast<std::int64_t>(v));  // > INT64_MAX reads as invalid, as there
      return true;
    }
    switch (std::exchange(awaiting_, slot::none)) {
      case slot::ignored: return true;
      case slot::binary_data_size: binary_size_ = v; return true;
      default: return false;
    }
  }

  std::string_view body_;
  std::size_t header_length_;
  std::size_t next_binary_;
  const codec_limits& limits_;
  infer_request& req_;
  frame frame_ = frame::none;
  slot awaiting_ = slot::none;
  unsigned root_seen_ = 0, seen_ = 0;
  std::size_t skip_ = 0, tensors_ = 0;
  std::uint64_t binary_size_ = 0;
  parameter_kind param_ = parameter_kind::custom;
  std::string_view param_name_;
  std::string param_name_copy_;
  bool have_inputs_ = false;
  const char* here_ = nullptr;  ///< the plain reader's position at the last array event
  data_array arrays_[max_data_arrays];
  std::size_t arrays_count_ = 0;
  bool arrays_unknown_ = false, nested_ = false;
  json_elements elements_;      ///< the JSON input being read
  std::size_t data_depth_ = 0;  ///< its arrays open
};

// --- Reading the header ---------------------------------------------------------------------
//
// Two readers drive the handler above with the same events. The first, read_plain_json, reads
// the plain JSON requests carry almost always, faster than Boost.JSON's parser: strings of
// printable ASCII without escapes, the numbers read_number describes, literals, nesting to
// plain_json_depth. Anything else (an escape, a byte past ASCII, a longer number, any syntax
// error) it leaves to the second, Boost.JSON's SAX parser, which reads all of JSON. What the
// plain reader accepts is valid JSON, and it reports exactly the events Boost.JSON's parser
// reports for it (a test and the fuzz target compare the two).

enum class json_reading {
  accepted,     ///< the whole text read, every event taken by the handler
  refused,      ///< the handler refused an event (the other reader would refuse it too)
  unsupported,  ///< the text is not plain JSON, or not JSON at all: the other reader decides
};

/// Deeper than this the plain reader leaves the text to Boost.JSON (whose limit here is 32).
inline constexpr int plain_json_depth = 24;

// A number at p, reported as Boost.JSON's parser reports it, or p set to null (unsupported):
// - an integer, -?(0|[1-9][0-9]*), of at most 18 digits: exactly an int64 (on_int64; "-0" too);
// - a number with a fraction or an exponent, of at most 15 digits whose power of ten ends up
//   within 1e-22..1e22: on_double with the digits as an integer m, negated for a minus sign,
//   then divided by 10^-e or multiplied by 10^e, the powers exact, as that parser computes it
//   (its mantissa holds up to 16 digits without dropping any; beyond 1e22 its powers are not
//   exact, and they are left to it).
// A leading zero followed by a digit, or anything else, is unsupported.
template <class Handler>
[[gnu::always_inline]] inline bool read_number(const char*& p, const char* end, Handler& h,
                                               boost::json::error_code& ec) {
  using sv = sax_handler_base::sv;
  static constexpr double exact_powers[] = {1e0,  1e1,  1e2,  1e3,  1e4,  1e5,  1e6,  1e7,  1e8,  1e9,  1e10, 1e11,
                                            1e12, 1e13, 1e14, 1e15, 1e16, 1e17, 1e18, 1e19, 1e20, 1e21, 1e22};
  auto digit = [&] { return p != end && static_cast<unsigned char>(*p - '0') < 10; };
  // The digits at p into m (wrapping past 19 digits, which the callers refuse); how many.
  auto run_of_digits = [&](std::uint64_t& m) {
    const char* const from = p;
    for (; p != end; ++p) {
      const auto d = static_cast<unsigned char>(*p - '0');
      if (d >= 10) break;
      m = m * 10 + d;
    }
    return static_cast<std::size_t>(p - from);
  };
  const char* const first = p;
  const bool negative = *p == '-';
  if (negative) ++p;
  if (!digit()) return p = nullptr, false;
  std::uint64_t m = 0;
  std::size_t digits = 0;
  if (*p == '0') {
    ++p;
    if (digit()) return p = nullptr, false;
  } else {
    digits = run_of_digits(m);
    if (digits > 18) return p = nullptr, false;
  }
  if (p == end || (*p != '.' && *p != 'e' && *p != 'E')) {
    const auto magnitude = static_cast<std::int64_t>(m);
    return h.on_int64(negative ? -magnitude : magnitude, sv(first, static_cast<std::size_t>(p - first)), ec);
  }
  int e = 0;
  if (*p == '.') {
    ++p;
    if (!digit()) return p = nullptr, false;
    const std::size_t fraction = run_of_digits(m);
    if (fraction > 15) return p = nullptr, false;
    digits += fraction;
    e = -static_cast<int>(fraction);
  }
  if (digits > 15) return p = nullptr, false;
  if (p != end && (*p == 'e' || *p == 'E')) {
    ++p;
    bool minus = false;
    if (p != end && (*p == '+' || *p == '-')) minus = *p++ == '-';
    if (!digit()) return p = nullptr, false;
    int x = 0;
    for (int n = 0; digit(); ++p) {
      if (++n > 3) return p = nullptr, false;
      x = x * 10 + (*p - '0');
    }
    e += minus ? -x : x;
  }
  if (e < -22 || e > 22) return p = nullptr, false;
  double d = static_cast<double>(m);
  if (negative) d = -d;
  d = e < 0 ? d / exact_powers[-e] : d * exact_powers[e];
  return h.on_double(d, sv(first, static_cast<std::size_t>(p - first)), ec);
}

/// Past the space between JSON tokens (most places have none: one comparison tells).
[[gnu::always_inline]] inline const char* skip_json_space(const char* p, const char* end) noexcept {
  while (p != end && static_cast<unsigned char>(*p) <= ' ' && (*p == ' ' || *p == '\n' || *p == '\r' || *p == '\t'))
    ++p;
  return p;
}

/// The bytes a plain string holds: printable ASCII but the quote and the backslash.
inline constexpr auto plain_string_byte = [] {
  std::array<bool, 256> plain{};
  for (int c = 0x20; c < 0x80; ++c) plain[static_cast<std::size_t>(c)] = c != '"' && c != '\\';
  return plain;
}();

template <class Handler>
json_reading read_plain_json(std::string_view text, Handler& h) {
  using sv = sax_handler_base::sv;
  const char* p = text.data();
  const char* const end = p + text.size();
  boost::json::error_code ec;
  struct open_container {
    bool object;
    std::size_t count;
  };
  open_container stack[plain_json_depth];
  int depth = 0;
  auto skip_space = [&] { p = skip_json_space(p, end); };
  // A string at p (its opening quote): printable ASCII up to the closing quote, no escapes.
  auto read_string = [&](sv& out) {
    const char* const first = ++p;
    while (p != end && plain_string_byte[static_cast<unsigned char>(*p)]) ++p;
    if (p == end || *p != '"') return false;
    out = sv(first, static_cast<std::size_t>(p - first));
    ++p;
    return true;
  };
  // Tells a handler that wants it where the reader is (before an array's begin and end).
  auto position = [&] {
    if constexpr (requires { h.at_position(p); }) h.at_position(p);
  };
  auto number_start = [](char c) { return c == '-' || static_cast<unsigned char>(c - '0') < 10; };
  auto literal = [&](std::string_view word) {
    if (static_cast<std::size_t>(end - p) < word.size() || std::string_view(p, word.size()) != word) return false;
    p += word.size();
    return true;
  };
  if (!h.on_document_begin(ec)) return json_reading::refused;
  skip_space();
  for (;;) {
    // A value at p.
    if (p == end) return json_reading::unsupported;
    bool ok = true;
    switch (*p) {
      case '{':
      case '[': {
        const bool object = *p == '{';
        if (depth == plain_json_depth) return json_reading::unsupported;
        if (!object) position();
        if (!(object ? h.on_object_begin(ec) : h.on_array_begin(ec))) return json_reading::refused;
        ++p;
        skip_space();
        if (p != end && *p == (object ? '}' : ']')) {
          ++p;
          if (!object) position();
          if (!(object ? h.on_object_end(0, ec) : h.on_array_end(0, ec))) return json_reading::refused;
          break;
        }
        stack[depth++] = {object, 0};
        if (!object) continue;  // the first element
        goto key;
      }
      case '"': {
        sv str;
        if (!read_string(str)) return json_reading::unsupported;
        ok = h.on_string(str, str.size(), ec);
        break;
      }
      case 't': if (!literal("true")) return json_reading::unsupported; ok = h.on_bool(true, ec); break;
      case 'f': if (!literal("false")) return json_reading::unsupported; ok = h.on_bool(false, ec); break;
      case 'n': if (!literal("null")) return json_reading::unsupported; ok = h.on_null(ec); break;
      default: {
        ok = read_number(p, end, h, ec);
        if (!p) return json_reading::unsupported;
        break;
      }
    }
    if (!ok) return json_reading::refused;
    // After a value: the next element, the end of its container, or the end of the text.
  after_value:
    for (;;) {
      skip_space();
      if (depth == 0) {
        if (p != end) return json_reading::unsupported;
        return h.on_document_end(ec) ? json_reading::accepted : json_reading::refused;
      }
      if (p == end) return json_reading::unsupported;
      open_container& top = stack[depth - 1];
      if (*p == ',') {
        ++p;
        ++top.count;
        skip_space();
        if (top.object) goto key;
        // A run of numbers (a tensor's data) is read here, without the general path's tests: a
        // number, a comma, at most one space (Python's json.dumps writes ", "), the next one.
        while (p != end && number_start(*p)) {
          const bool ok_number = read_number(p, end, h, ec);
          if (!p) return json_reading::unsupported;
          if (!ok_number) return json_reading::refused;
          if (p == end || *p != ',') goto after_value;  // the end of the run: the general path
          ++p;
          ++top.count;
          if (p != end && *p == ' ') ++p;
        }
        skip_space();
        break;  // the next element
      }
      if (*p != (top.object ? '}' : ']')) return json_reading::unsupported;
      ++p;
      const std::size_t n = top.count + 1;
      --depth;
      if (!top.object) position();
      if (!(top.object ? h.on_object_end(n, ec) : h.on_array_end(n, ec))) return json_reading::refused;
    }
    continue;
  key:
    // A member's key and its colon; its value is next.
    {
      if (p == end || *p != '"') return json_reading::unsupported;
      sv key;
      if (!read_string(key)) return json_reading::unsupported;
      if (!h.on_key(key, key.size(), ec)) return json_reading::refused;
      skip_space();
      if (p == end || *p != ':') return json_reading::unsupported;
      ++p;
      skip_space();
    }
  }
}

/// A header both readers may read: present, inside the body, within the JSON size limit.
inline bool header_in_bounds(std::string_view body, std::size_t header_length, const codec_limits& limits) {
  return header_length != 0 && header_length <= body.size() && !check_json_size(header_length, limits);
}

// --- The request memo -------------------------------------------------------------------
//
// A client's requests to a model repeat their header but for the tensors' data: names, types,
// shapes, parameters, even the spacing, come again call after call, with new numbers in the
// data arrays. The memo keeps the last header with tensors in JSON that the plain reader read,
// and its decoding; a header that equals it outside its data arrays has only those arrays
// read, each as the plain reader reads an array of numbers (read_number, the same element
// rules, exactly the count its shape gives), and takes the rest from the decoding. Anything
// else (another header, a nested array, a number the plain reader leaves to Boost.JSON) is
// left to the fast path, which decides as before. The JSON fuzz target holds what the memo
// gives to the full decoder's result.

class json_request_memo {
 public:
  /// Headers longer than this are not remembered.
  static constexpr std::size_t max_header = 16 * 1024;

  /// The decoding of `body` (a header of `header_length` bytes and nothing after it) when it
  /// equals the header remembered outside the data arrays, under the same limits; otherwise
  /// false, and `out` untouched.
  bool recall(std::string_view body, std::size_t header_length, const codec_limits& limits, infer_request& out) {
    if (!valid_ || limits != limits_ || header_length != body.size() || !header_in_bounds(body, header_length, limits))
      return false;
    const char* p = body.data();
    const char* const end = p + body.size();
    auto same = [&](std::size_t from, std::size_t to) {  // header_[from, to) next in the body
      const std::size_t n = to - from;
      if (static_cast<std::size_t>(end - p) < n || std::memcmp(p, header_.data() + from, n) != 0) return false;
      p += n;
      return true;
    };
    // The arrays are read first; the decoding is copied only for a header that is recalled.
    taken_.resize(arrays_.size());
    std::size_t from = 0;
    for (std::size_t k = 0; k < arrays_.size(); ++k) {
      const array& a = arrays_[k];
      if (!same(from, a.begin) || p == end || *p != '[') return false;
      p = skip_json_space(p + 1, end);
      elements_.start(a.type, a.bytes);
      element_events events{elements_};
      const bool int32 = a.type == data_type::int32;
      for (;;) {
        boost::json::error_code ec;
        if (int32 && elements_.read_int32(p, end)) {
          // (the number read, and stored: the same as read_number and on_int64 below)
        } else if (p == end || !read_number(p, end, events, ec)) {
          return false;  // (p null: not plain)
        }
        if (p != end && *p == ',') {  // the common case: a comma, then the next number
          p = skip_json_space(p + 1, end);
          continue;
        }
        p = skip_json_space(p, end);
        if (p == end) return false;
        if (*p == ']') break;
        if (*p != ',') return false;
        p = skip_json_space(p + 1, end);
      }
      ++p;
      if (elements_.count() != a.count) return false;
      taken_[k] = elements_.take(a.bytes);
      from = a.end;
    }
    if (!same(from, header_.size()) || p != end) return false;
    out = skeleton_;
    for (std::size_t k = 0; k < arrays_.size(); ++k)
      out.inputs[arrays_[k].input].data = tensor_data::own(std::move(taken_[k]));
    return true;
  }

  /// Remembers `header`, which the plain reader read into `decoded` (a request without error)
  /// with its data arrays at `arrays`, when every input is in JSON with a flat array and the
  /// header is not too long; otherwise forgets. (`decoded` lends its tensors' data for the
  /// time of the copy, so that they are not copied; it has them back on return.)
  void remember(std::string_view header, infer_request& decoded,
                std::span<const fast_request_handler::data_array> arrays, const codec_limits& limits) {
    valid_ = false;
    if (header.size() > max_header || arrays.empty() || arrays.size() != decoded.inputs.size()) return;
    arrays_.clear();
    for (const auto& a : arrays) {
      const infer_input& in = decoded.inputs[a.input];
      if (!a.flat || in.encoding != tensor_encoding::json) return;
      const std::size_t bytes = in.data.size();
      arrays_.push_back({a.begin, a.end, a.input, in.datatype, bytes / element_size(in.datatype), bytes});
    }
    header_.assign(header);
    lent_.resize(decoded.inputs.size());
    auto swap_data = [&] {
      for (std::size_t i = 0; i < lent_.size(); ++i) std::swap(lent_[i], decoded.inputs[i].data);
    };
    swap_data();
    struct give_back {
      decltype(swap_data)& back;
      ~give_back() { back(); }  // also when the copy throws
    } guard{swap_data};
    skeleton_ = decoded;
    limits_ = limits;
    valid_ = true;
  }

 private:
  struct array {
    std::size_t begin, end;  ///< its '[' and just past its ']', in header_
    std::size_t input;
    data_type type;
    std::uint64_t count;  ///< elements
    std::size_t bytes;
  };
  // read_number's events, for an array of elements.
  struct element_events {
    json_elements& elements;
    bool on_int64(std::int64_t v, sax_handler_base::sv, boost::json::error_code&) { return elements.on_int64(v); }
    bool on_double(double d, sax_handler_base::sv, boost::json::error_code&) { return elements.on_double(d); }
  };

  bool valid_ = false;
  codec_limits limits_;
  std::string header_;
  std::vector<array> arrays_;
  infer_request skeleton_;  ///< the decoding, without the inputs' data
  std::vector<tensor_data> lent_;  ///< (empty between calls of remember)
  std::vector<std::string> taken_;  ///< the arrays read by recall, until the header is recalled
  json_elements elements_;
};

/// The fast path with the plain reader only: `unsupported` where the header is not plain JSON.
/// A request it decodes is remembered in `learn` when one is given.
inline json_reading decode_fast_plain(std::string_view body, std::size_t header_length, const codec_limits& limits,
                                      infer_request& out, json_request_memo* learn = nullptr) {
  if (!header_in_bounds(body, header_length, limits)) return json_reading::refused;
  out = {};
  fast_request_handler h(body, header_length, limits, out);
  const json_reading r = read_plain_json(body.substr(0, header_length), h);
  if (r == json_reading::accepted && !h.finished()) return json_reading::refused;
  std::span<const fast_request_handler::data_array> arrays;
  if (learn && r == json_reading::accepted && header_length == body.size() && h.data_arrays(arrays))
    learn->remember(body, out, arrays, limits);
  return r;
}

/// The fast path with Boost.JSON's parser only.
inline bool decode_fast_boost(std::string_view body, std::size_t header_length, const codec_limits& limits,
                              infer_request& out) {
  if (!header_in_bounds(body, header_length, limits)) return false;
  out = {};
  boost::json::parse_options options;
  options.max_depth = 32;  // deeper documents go to the decoder, whose limit is 100
  boost::json::basic_parser<fast_request_handler> p(options, body, header_length, limits, out);
  boost::json::error_code ec;
  const std::size_t n = p.write_some(false, body.data(), header_length, ec);
  return !ec && n == header_length && p.done() && p.handler().finished();
}

}  // namespace detail

/// Decodes `body` as decode_infer_request would when the header has the common shape above;
/// returns false (and leaves `out` unspecified) when it does not, or when anything is wrong.
/// With `memo`, a request with its tensors in JSON that the plain reader decodes is remembered
/// there for the next one (json_request_memo::recall).
inline bool try_decode_infer_request_fast(std::string_view body, std::size_t header_length,
                                          const codec_limits& limits, infer_request& out,
                                          detail::json_request_memo* memo = nullptr) {
  switch (detail::decode_fast_plain(body, header_length, limits, out, memo)) {
    case detail::json_reading::accepted: return true;
    case detail::json_reading::refused: return false;
    case detail::json_reading::unsupported: break;
  }
  return detail::decode_fast_boost(body, header_length, limits, out);
}

}  // namespace inferwire::v2

#endif
