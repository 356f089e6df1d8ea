// SPDX-License-Identifier: Apache-2.0
// inferwire/v2/types.hpp
//
// KServe v2 / Triton messages as plain C++ value types, shared by the HTTP and gRPC codecs,
// the clients and the reference server ("one internal form"). No I/O and no JSON here.
//
// Tensor data is held by `tensor_data`: either a view into memory someone else owns (a
// received body, a user's buffer, a shared-memory mapping) or bytes the value owns (data that
// had to be decoded, e.g. from JSON). Views are never copied behind the user's back.
#ifndef INFERWIRE_V2_TYPES_HPP
#define INFERWIRE_V2_TYPES_HPP

#include <inferwire/core/data_type.hpp>
#include <inferwire/core/parameter.hpp>
#include <inferwire/core/shape.hpp>
#include <inferwire/core/tensor_view.hpp>

#include <cstddef>
#include <cstdint>
#include <map>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <variant>
#include <vector>

namespace inferwire::v2 {

// ---------------------------------------------------------------------------------------------
// Health and metadata

struct server_metadata {
  std::string name;
  std::string version;
  std::vector<std::string> extensions;
  friend bool operator==(const server_metadata&, const server_metadata&) = default;
};

struct tensor_metadata {
  std::string name;
  data_type datatype = data_type::invalid;
  shape_t shape;
  friend bool operator==(const tensor_metadata&, const tensor_metadata&) = default;
};

struct model_metadata {
  std::string name;
  std::vector<std::string> versions;
  std::string platform;
  std::vector<tensor_metadata> inputs;
  std::vector<tensor_metadata> outputs;
  friend bool operator==(const model_metadata&, const model_metadata&) = default;
};

// ---------------------------------------------------------------------------------------------
// Inference

/// Bytes of one tensor: a borrowed view or owned storage.
class tensor_data {
 public:
  tensor_data() = default;
  /// A view of memory that must outlive this value (and every copy of it).
  static tensor_data view(std::span<const std::byte> bytes) noexcept {
    tensor_data d;
    d.v_ = bytes;
    return d;
  }
  static tensor_data view(std::string_view bytes) noexcept {
    return view(std::as_bytes(std::span(bytes.data(), bytes.size())));
  }
  /// Takes ownership of `bytes`.
  static tensor_data own(std::string bytes) noexcept {
    tensor_data d;
    d.v_ = std::move(bytes);
    return d;
  }

  std::span<const std::byte> bytes() const noexcept {
    if (auto* s = std::get_if<std::string>(&v_)) return std::as_bytes(std::span(*s));
    return std::get<std::span<const std::byte>>(v_);
  }
  std::string_view str() const noexcept {
    auto b = bytes();
    return {reinterpret_cast<const char*>(b.data()), b.size()};
  }
  std::size_t size() const noexcept { return bytes().size(); }
  bool empty() const noexcept { return size() == 0; }
  bool owns() const noexcept { return std::holds_alternative<std::string>(v_); }
  /// The storage this owns, moved out (an empty string for a view); this becomes empty.
  std::string release() noexcept {
    std::string out;
    if (auto* s = std::get_if<std::string>(&v_)) out = std::move(*s);
    v_ = std::span<const std::byte>{};
    return out;
  }

  friend bool operator==(const tensor_data& a, const tensor_data& b) noexcept {
    return a.str() == b.str();
  }

 private:
  std::variant<std::span<const std::byte>, std::string> v_;
};

/// How a tensor's data travels.
enum class tensor_encoding : std::uint8_t {
  json,           ///< as a JSON "data" array (HTTP) or typed contents (gRPC)
  binary,         ///< as raw bytes after the JSON header (HTTP) or raw_*_contents (gRPC)
  shared_memory,  ///< in a registered shared-memory region
};

/// A place in a registered shared-memory region.
struct shm_ref {
  std::string region;
  std::uint64_t offset = 0;
  std::uint64_t byte_size = 0;
  friend bool operator==(const shm_ref&, const shm_ref&) = default;
};

struct infer_input {
  std::string name;
  data_type datatype = data_type::invalid;
  shape_t shape;
  tensor_encoding encoding = tensor_encoding::binary;
  tensor_data data;          ///< json and binary encodings
  std::optional<shm_ref> shm;  ///< shared_memory encoding
  /// Parameters other than binary_data_size and shared_memory_* (which are the fields above).
  parameter_map parameters;

  /// A typed view of the data (fixed-size types); throws std::invalid_argument on mismatch.
  template <tensor_element T>
  tensor_view<T> as() const {
    return tensor_view<T>(data.bytes(), shape);
  }
  friend bool operator==(const infer_input&, const infer_input&) = default;
};

struct requested_output {
  std::string name;
  /// The output's own `binary_data` parameter. Absent means JSON for a listed output, even
  /// when the request sets binary_data_output (v2-protocol §4.1).
  std::optional<bool> binary_data;
  std::uint64_t classification = 0;  ///< top-k classification, 0 = off
  std::optional<shm_ref> shm;
  parameter_map parameters;  ///< other parameters
  friend bool operator==(const requested_output&, const requested_output&) = default;
};

struct infer_request {
  std::string id;
  /// Request parameters, including sequence_id/sequence_start/sequence_end/priority/timeout
  /// and binary_data_output (type-checked by the decoders).
  parameter_map parameters;
  std::vector<infer_input> inputs;
  std::vector<requested_output> outputs;
  /// Raw binary request (Inference-Header-Content-Length: 0): the whole body is the data of
  /// the model's only input, and `inputs` is empty until `deduce_raw_input` fills it.
  bool raw_binary = false;
  tensor_data raw_input;

  /// The request-level binary_data_output flag (false when absent).
  bool binary_data_output() const {
    return parameters.get<bool>("binary_data_output").value_or(false);
  }
  friend bool operator==(const infer_request&, const infer_request&) = default;
};

struct infer_output {
  std::string name;
  data_type datatype = data_type::invalid;
  shape_t shape;
  tensor_encoding encoding = tensor_encoding::binary;
  tensor_data data;  ///< empty for shared_memory
  parameter_map parameters;  ///< other parameters

  template <tensor_element T>
  tensor_view<T> as() const {
    return tensor_view<T>(data.bytes(), shape);
  }
  friend bool operator==(const infer_output&, const infer_output&) = default;
};

struct infer_response {
  std::string id;
  std::string model_name;
  std::string model_version;
  parameter_map parameters;
  std::vector<infer_output> outputs;

  /// The output named `name`, or nullptr.
  const infer_output* output(std::string_view name) const noexcept {
    for (const auto& o : outputs)
      if (o.name == name) return &o;
    return nullptr;
  }
  friend bool operator==(const infer_response&, const infer_response&) = default;
};

// ---------------------------------------------------------------------------------------------
// Model repository (v2-protocol §6)

struct repository_index_request {
  std::optional<bool> ready;
  friend bool operator==(const repository_index_request&,
                         const repository_index_request&) = default;
};

/// One entry of the index. Empty version/state/reason are omitted from the JSON form.
struct repository_index_entry {
  std::string name;
  std::string version;
  std::string state;
  std::string reason;
  friend bool operator==(const repository_index_entry&, const repository_index_entry&) = default;
};

struct repository_load_request {
  /// A ModelConfig in JSON that replaces config.pbtxt for this load.
  std::optional<std::string> config;
  /// `file:<version>/<path>` parameters: key without the "file:" prefix -> file contents.
  std::vector<std::pair<std::string, std::string>> files;
  friend bool operator==(const repository_load_request&,
                         const repository_load_request&) = default;
};

struct repository_unload_request {
  bool unload_dependents = false;
  friend bool operator==(const repository_unload_request&,
                         const repository_unload_request&) = default;
};

// ---------------------------------------------------------------------------------------------
// Shared memory (v2-protocol §5). The region name travels in the URL (HTTP) or the message
// (gRPC); it is a member here so one value describes one operation.

struct system_shm_register_request {
  std::string name;
  std::string key;
  std::uint64_t offset = 0;
  std::uint64_t byte_size = 0;
  friend bool operator==(const system_shm_register_request&,
                         const system_shm_register_request&) = default;
};

struct system_shm_status {
  std::string name;
  std::string key;
  std::uint64_t offset = 0;
  std::uint64_t byte_size = 0;
  friend bool operator==(const system_shm_status&, const system_shm_status&) = default;
};

struct cuda_shm_register_request {
  std::string name;
  std::string raw_handle;  ///< the 64 bytes of a cudaIpcMemHandle_t (not base64)
  std::uint64_t device_id = 0;
  std::uint64_t byte_size = 0;
  friend bool operator==(const cuda_shm_register_request&,
                         const cuda_shm_register_request&) = default;
};

struct cuda_shm_status {
  std::string name;
  std::uint64_t device_id = 0;
  std::uint64_t byte_size = 0;
  friend bool operator==(const cuda_shm_status&, const cuda_shm_status&) = default;
};

// ---------------------------------------------------------------------------------------------
// Statistics (v2-protocol §7, §2.2)

struct statistic_duration {
  std::uint64_t count = 0;
  std::uint64_t ns = 0;
  friend bool operator==(const statistic_duration&, const statistic_duration&) = default;
};

struct infer_statistics {
  statistic_duration success, fail, queue, compute_input, compute_infer, compute_output,
      cache_hit, cache_miss;
  friend bool operator==(const infer_statistics&, const infer_statistics&) = default;
};

struct response_statistics {
  statistic_duration compute_infer, compute_output, success, fail, empty_response, cancel;
  friend bool operator==(const response_statistics&, const response_statistics&) = default;
};

struct batch_statistics {
  std::uint64_t batch_size = 0;
  statistic_duration compute_input, compute_infer, compute_output;
  friend bool operator==(const batch_statistics&, const batch_statistics&) = default;
};

struct memory_usage {
  std::string type;
  std::int64_t id = 0;
  std::uint64_t byte_size = 0;
  friend bool operator==(const memory_usage&, const memory_usage&) = default;
};

struct model_statistics {
  std::string name;
  std::string version;
  std::uint64_t last_inference = 0;  ///< milliseconds since the epoch
  std::uint64_t inference_count = 0;
  std::uint64_t execution_count = 0;
  infer_statistics inference_stats;
  std::map<std::string, response_statistics> response_stats;
  std::vector<batch_statistics> batch_stats;
  std::vector<inferwire::v2::memory_usage> memory_usage;
  friend bool operator==(const model_statistics&, const model_statistics&) = default;
};

struct statistics_response {
  std::vector<model_statistics> model_stats;
  friend bool operator==(const statistics_response&, const statistics_response&) = default;
};

// ---------------------------------------------------------------------------------------------
// Trace and log settings (v2-protocol §7)

/// Trace settings: each key maps to a list of strings (`trace_level` is a list on the wire,
/// the others single strings), or to nullopt, which in an update clears a model's override.
struct trace_settings {
  std::map<std::string, std::optional<std::vector<std::string>>> settings;
  friend bool operator==(const trace_settings&, const trace_settings&) = default;
};

/// Log settings; in an update, only the members that are set change.
struct log_settings {
  std::optional<std::string> log_file;
  std::optional<bool> log_info;
  std::optional<bool> log_warning;
  std::optional<bool> log_error;
  std::optional<std::uint32_t> log_verbose_level;
  std::optional<std::string> log_format;
  friend bool operator==(const log_settings&, const log_settings&) = default;
};

}  // namespace inferwire::v2

#endif
