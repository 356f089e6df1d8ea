// SPDX-License-Identifier: Apache-2.0
// The host side of Triton's backend API, shared by libtritonserver.so (which exports the C
// functions of <inferwire/triton/backend_api.h>) and inferwire-server (which loads backend
// libraries and hands them requests). The opaque handles of the C API are the structures below;
// both sides are built together, so they share these C++ definitions.
//
// Lifetimes. A backend library stays loaded while a model uses it. A model (one version) owns
// its instances. A request's state is shared by the request handle, its response factories and
// its responses, so a backend that answers or releases late (after the server stopped waiting)
// touches live memory; what it sends then is dropped.
#pragma once

#include <inferwire/triton/backend_api.h>

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>
#include <vector>

/// The C++ pieces of libtritonserver.so the server uses besides the C API.
#define IW_HOST_API __attribute__((__visibility__("default")))

// --- plain values ------------------------------------------------------------------------------

struct TRITONSERVER_Error {
  TRITONSERVER_Error_Code code = TRITONSERVER_ERROR_UNKNOWN;
  std::string message;
};

struct TRITONSERVER_Message {
  std::string json;
};

struct TRITONSERVER_Parameter {
  std::string name;
  TRITONSERVER_ParameterType type = TRITONSERVER_PARAMETER_STRING;
  std::string text;  ///< STRING (NUL-terminated through c_str()) and BYTES
  std::int64_t integer = 0;
  bool boolean = false;
  double number = 0;
  /// What TRITONBACKEND_RequestParameter hands out as the value pointer.
  IW_HOST_API const void* value() const noexcept;
};

struct TRITONSERVER_BufferAttributes {
  std::size_t byte_size = 0;
  TRITONSERVER_MemoryType memory_type = TRITONSERVER_MEMORY_CPU;
  std::int64_t memory_type_id = 0;
  void* cuda_ipc_handle = nullptr;
};

struct TRITONSERVER_ResponseAllocator {
  TRITONSERVER_ResponseAllocatorAllocFn_t alloc = nullptr;
  TRITONSERVER_ResponseAllocatorReleaseFn_t release = nullptr;
  TRITONSERVER_ResponseAllocatorStartFn_t start = nullptr;
  TRITONSERVER_ResponseAllocatorBufferAttributesFn_t attributes = nullptr;
  TRITONSERVER_ResponseAllocatorQueryFn_t query = nullptr;
};

/// The server handle a model hands out (TRITONBACKEND_ModelServer): what a backend names to
/// run an inference on another model in the process (TRITONSERVER_ServerInferAsync).
struct TRITONSERVER_Server {};

/// An in-process inference request a backend builds (BLS: a model that calls another).
struct TRITONSERVER_InferenceRequest {
  struct chunk {
    const void* base = nullptr;
    std::size_t size = 0;
    TRITONSERVER_MemoryType memory_type = TRITONSERVER_MEMORY_CPU;
    std::int64_t memory_type_id = 0;
  };
  struct input {
    std::string name;
    TRITONSERVER_DataType datatype = TRITONSERVER_TYPE_INVALID;
    std::vector<std::int64_t> shape;
    std::vector<chunk> chunks;  ///< the data, in order, as the backend appended it
  };
  std::string model;
  std::int64_t version = -1;  ///< -1: the server's choice
  std::string id;
  std::uint32_t flags = 0;
  std::uint64_t correlation_id = 0;
  std::string correlation_id_string;
  bool string_correlation_id = false;
  std::uint64_t priority = 0;
  std::uint64_t timeout_us = 0;
  std::vector<input> inputs;
  std::vector<std::string> outputs;
  std::vector<TRITONSERVER_Parameter> parameters;
  TRITONSERVER_InferenceRequestReleaseFn_t release_fn = nullptr;
  void* release_userp = nullptr;
  TRITONSERVER_ResponseAllocator* allocator = nullptr;
  void* allocator_userp = nullptr;
  TRITONSERVER_InferenceResponseCompleteFn_t response_fn = nullptr;
  void* response_userp = nullptr;
  std::atomic<bool> cancelled{false};
};

/// A response to an in-process request. Output buffers came from the request's allocator (or,
/// without one, `storage`); deleting the response gives them back to it.
struct TRITONSERVER_InferenceResponse {
  struct output {
    std::string name;
    TRITONSERVER_DataType datatype = TRITONSERVER_TYPE_INVALID;
    std::vector<std::int64_t> shape;
    void* base = nullptr;
    std::size_t size = 0;
    TRITONSERVER_MemoryType memory_type = TRITONSERVER_MEMORY_CPU;
    std::int64_t memory_type_id = 0;
    void* buffer_userp = nullptr;
    std::string storage;  ///< the bytes, when no allocator gave a buffer
  };
  bool has_error = false;
  TRITONSERVER_Error error;
  std::string model;
  std::int64_t version = 0;
  std::string id;
  std::vector<output> outputs;
  std::vector<TRITONSERVER_Parameter> parameters;
  TRITONSERVER_ResponseAllocator* allocator = nullptr;  ///< releases the buffers (may be null)
  IW_HOST_API ~TRITONSERVER_InferenceResponse();
};

struct TRITONBACKEND_MemoryManager {};

// --- backend, model, instance ----------------------------------------------------------------

namespace inferwire::triton_host {

/// The functions a backend library defines, looked up once when it loads.
struct backend_entry_points {
  using backend_fn = TRITONSERVER_Error* (*)(TRITONBACKEND_Backend*);
  using model_fn = TRITONSERVER_Error* (*)(TRITONBACKEND_Model*);
  using instance_fn = TRITONSERVER_Error* (*)(TRITONBACKEND_ModelInstance*);
  using execute_fn = TRITONSERVER_Error* (*)(TRITONBACKEND_ModelInstance*, TRITONBACKEND_Request**, const uint32_t);
  using attribute_fn = TRITONSERVER_Error* (*)(TRITONBACKEND_Backend*, TRITONBACKEND_BackendAttribute*);
  backend_fn initialize = nullptr, finalize = nullptr;
  model_fn model_initialize = nullptr, model_finalize = nullptr;
  instance_fn instance_initialize = nullptr, instance_finalize = nullptr;
  execute_fn execute = nullptr;
  attribute_fn attributes = nullptr;
};

/// Where a log line of a backend goes (TRITONSERVER_LogMessage), and which levels are on.
struct log_sink {
  std::function<void(TRITONSERVER_LogLevel, std::string_view file, int line, std::string_view message)> write;
  std::function<bool(TRITONSERVER_LogLevel)> enabled;
};
/// Sets the process's log sink; without one, backend log lines go to stderr.
IW_HOST_API void set_log_sink(log_sink sink);

/// What the TRITONSERVER_Server* functions a backend calls do, set by the server while it runs
/// (a function left empty, and every one before and after: UNAVAILABLE). `version` -1 or 0:
/// the server's choice. JSON is what the server's HTTP endpoint of the same name answers.
struct server_calls {
  /// TRITONSERVER_ServerInferAsync: runs the request as any other inference and answers through
  /// its callbacks; an error means it did not start (the caller keeps the request).
  std::function<TRITONSERVER_Error*(TRITONSERVER_InferenceRequest*)> infer;
  std::function<TRITONSERVER_Error*(bool& live, bool& ready)> health;
  std::function<TRITONSERVER_Error*(const std::string& model, std::int64_t version, bool& ready)> model_ready;
  std::function<TRITONSERVER_Error*(const std::string& model, std::int64_t version, bool& decoupled, bool& batching)>
      model_properties;
  std::function<TRITONSERVER_Error*(std::string& json)> server_metadata;
  std::function<TRITONSERVER_Error*(const std::string& model, std::int64_t version, std::string& json)> model_metadata;
  std::function<TRITONSERVER_Error*(const std::string& model, std::int64_t version, std::string& json)> model_config;
  std::function<TRITONSERVER_Error*(const std::string& model, std::int64_t version, std::string& json)> model_statistics;
  std::function<TRITONSERVER_Error*(bool ready_only, std::string& json)> model_index;
  /// Loads `model`, with a configuration override and `file:` contents (key without "file:").
  std::function<TRITONSERVER_Error*(const std::string& model, const std::string* config,
                                    const std::vector<std::pair<std::string, std::string>>& files)>
      load;
  std::function<TRITONSERVER_Error*(const std::string& model, bool dependents)> unload;
};
IW_HOST_API void set_server_calls(server_calls calls);

/// The custom metrics backends created (TRITONSERVER_MetricFamilyNew ...), in Prometheus'
/// text format, for the server's /metrics.
IW_HOST_API std::string custom_metrics_text();

/// Times a backend reported for one request (TRITONBACKEND_ModelInstanceReportStatistics).
struct reported_times {
  bool set = false;
  bool success = false;
  std::uint64_t exec_start_ns = 0, compute_start_ns = 0, compute_end_ns = 0, exec_end_ns = 0;
};

}  // namespace inferwire::triton_host

struct TRITONBACKEND_BackendAttribute {
  struct group {
    TRITONSERVER_InstanceGroupKind kind;
    std::uint64_t count;
    std::vector<std::uint64_t> devices;
  };
  std::vector<group> preferred_groups;
  bool parallel_instance_loading = false;
};

struct TRITONBACKEND_Backend {
  std::string name;
  std::string directory;    ///< the folder of the library (TRITONBACKEND_BackendArtifacts)
  std::string config_json;  ///< {"cmdline": {...}}
  TRITONBACKEND_ExecutionPolicy policy = TRITONBACKEND_EXECUTION_BLOCKING;
  void* state = nullptr;
  inferwire::triton_host::backend_entry_points fn;
  TRITONBACKEND_BackendAttribute attributes;
};

struct TRITONBACKEND_Model {
  std::string name;
  std::uint64_t version = 0;
  std::string repository;   ///< the model's folder
  std::string config_json;  ///< the configuration as Triton hands it to backends
  TRITONBACKEND_Backend* backend = nullptr;
  void* state = nullptr;
  TRITONSERVER_Server server;
  /// Batch statistics a backend reports: executions and their sizes.
  std::function<void(std::uint64_t batch_size, std::uint64_t exec_start_ns, std::uint64_t compute_start_ns,
                     std::uint64_t compute_end_ns, std::uint64_t exec_end_ns)>
      on_batch_statistics;
};

struct TRITONBACKEND_ModelInstance {
  std::string name;
  TRITONSERVER_InstanceGroupKind kind = TRITONSERVER_INSTANCEGROUPKIND_CPU;
  std::int32_t device_id = 0;
  bool passive = false;
  std::vector<std::string> profiles;
  std::string host_policy_json;  ///< {"<policy name>": {}}
  TRITONBACKEND_Model* model = nullptr;
  void* state = nullptr;
};

// --- requests and responses --------------------------------------------------------------------

struct TRITONBACKEND_Input {
  TRITONSERVER_BufferAttributes attributes;  ///< TRITONBACKEND_InputBufferAttributes
  std::string name;
  TRITONSERVER_DataType datatype = TRITONSERVER_TYPE_INVALID;
  std::vector<std::int64_t> shape;
  const void* data = nullptr;
  std::uint64_t byte_size = 0;
  TRITONSERVER_MemoryType memory_type = TRITONSERVER_MEMORY_CPU;
  std::int64_t memory_type_id = 0;
};

namespace inferwire::triton_host {

/// One output of a response as the backend filled it. `storage` holds a host buffer the host
/// allocated (its data never moves); a buffer in a destination region leaves it empty.
struct output_buffer {
  std::string name;
  TRITONSERVER_DataType datatype = TRITONSERVER_TYPE_INVALID;
  std::vector<std::int64_t> shape;
  std::string storage;
  void* data = nullptr;
  std::uint64_t byte_size = 0;
  bool allocated = false;
  TRITONSERVER_BufferAttributes attributes;  ///< TRITONBACKEND_OutputBufferAttributes
};

/// A response the backend sent: its outputs (or error) and parameters.
struct sent_response {
  std::vector<output_buffer> outputs;
  std::vector<TRITONSERVER_Parameter> parameters;
  bool has_error = false;
  TRITONSERVER_Error error;
  bool final = false;
};

/// A host memory destination for an output (a registered shared-memory region).
struct output_destination {
  std::string name;
  void* data = nullptr;
  std::size_t byte_size = 0;
};

struct request_state;

}  // namespace inferwire::triton_host

struct TRITONBACKEND_Request {
  inferwire::triton_host::request_state* state = nullptr;
};

namespace inferwire::triton_host {

/// A request as a backend sees it, shared by the server (while it waits), the backend (from
/// execute until release), response factories and unsent responses.
struct request_state {
  TRITONBACKEND_Request handle{this};
  /// The backend's share, from execute until TRITONBACKEND_RequestRelease.
  std::shared_ptr<request_state> held_by_backend;

  // What the server fills before the backend runs; read-only afterwards.
  std::string id;
  std::uint64_t correlation_id = 0;
  std::string correlation_id_string;
  bool string_correlation_id = false;
  std::uint32_t flags = 0;
  std::uint64_t timeout_us = 0;
  bool decoupled = false;
  std::vector<TRITONSERVER_Parameter> parameters;
  std::vector<TRITONBACKEND_Input> inputs;
  std::vector<std::string> requested_outputs;  ///< as the client named them
  /// The model's outputs, the requested ones when the client named none (owned by the server).
  const std::vector<std::string>* every_output = nullptr;
  /// The outputs the backend is asked for.
  const std::vector<std::string>& outputs() const noexcept {
    return requested_outputs.empty() && every_output ? *every_output : requested_outputs;
  }
  std::vector<output_destination> destinations;

  /// Delivers a response while the server listens (called under `mu`); returns an error text
  /// to hand back to the backend, or empty.
  std::function<std::string(sent_response&&)> deliver;
  /// Whether the client gave up (may be null; called under `mu`, while the server listens).
  const std::function<bool()>* cancelled = nullptr;

  // Progress, under `mu`.
  std::mutex mu;
  std::condition_variable changed;
  bool released = false;
  bool answered = false;  ///< the final response (decoupled) or the response was sent
  unsigned pending = 0;   ///< live factories and unsent responses: more may still come
  bool listening = true;  ///< false once the server stopped waiting for this request
  inferwire::triton_host::reported_times times;

  /// True once nothing more can come: answered, or released with nothing left pending.
  bool complete() const noexcept { return answered || (released && pending == 0); }
  /// Stops listening: later responses are dropped, cancellation reads true.
  IW_HOST_API void close();
};

}  // namespace inferwire::triton_host

struct TRITONBACKEND_ResponseFactory {
  std::shared_ptr<inferwire::triton_host::request_state> state;
};

struct TRITONBACKEND_Output {
  inferwire::triton_host::output_buffer* buffer = nullptr;  ///< within its response
  inferwire::triton_host::request_state* state = nullptr;   ///< its response's request
};

struct TRITONBACKEND_Response {
  std::shared_ptr<inferwire::triton_host::request_state> state;
  /// Outputs by index; a deque-like list whose elements never move (handles point into it).
  std::vector<std::unique_ptr<inferwire::triton_host::output_buffer>> outputs;
  std::vector<std::unique_ptr<TRITONBACKEND_Output>> handles;
  std::vector<TRITONSERVER_Parameter> parameters;
};

namespace inferwire::triton_host {

/// Makes an error the way the API does (null for no error is the caller's business).
IW_HOST_API TRITONSERVER_Error* make_error(TRITONSERVER_Error_Code code, std::string message);

/// INVALID_ARG "<what> must not be null".
TRITONSERVER_Error* null_argument(const char* what);
/// INVALID_ARG "out of bounds index <index>: <owner> has <count> <things>".
TRITONSERVER_Error* out_of_bounds(std::uint64_t index, const char* owner, std::size_t count, const char* things);

/// Parameter `index` of `ps` as the API hands it out (key, type, value pointer), or
/// out_of_bounds naming `owner`.
TRITONSERVER_Error* parameter_at(const std::vector<TRITONSERVER_Parameter>& ps, std::uint32_t index, const char* owner,
                                 const char** key, TRITONSERVER_ParameterType* type, const void** value);

/// A typed parameter value (its name is set by whoever stores it).
TRITONSERVER_Parameter string_parameter(std::string value);
TRITONSERVER_Parameter int_parameter(std::int64_t value);
TRITONSERVER_Parameter bool_parameter(bool value);
TRITONSERVER_Parameter double_parameter(double value);

/// Triton's name of a data type ("FP32", "BYTES"), or "<invalid>".
IW_HOST_API const char* datatype_name(TRITONSERVER_DataType t) noexcept;

}  // namespace inferwire::triton_host

namespace inferwire::triton_host {

/// The API's plain getters and setters: `*out = handle->*field`, `handle->*field = value`, with
/// INVALID_ARG for a null argument.
template <class H, class F, class T>
TRITONSERVER_Error* read_field(H* handle, F H::*field, T* out) {
  if (!handle || !out) return null_argument(!handle ? "handle" : "out");
  *out = static_cast<T>(handle->*field);
  return nullptr;
}
template <class H, class F, class T>
TRITONSERVER_Error* read_field(H* handle, std::atomic<F> H::*field, T* out) {
  if (!handle || !out) return null_argument(!handle ? "handle" : "out");
  *out = static_cast<T>((handle->*field).load());
  return nullptr;
}
template <class H, class F, class T>
TRITONSERVER_Error* write_field(H* handle, F H::*field, T value) {
  if (!handle) return null_argument("handle");
  handle->*field = static_cast<F>(value);
  return nullptr;
}
template <class H, class F, class T>
TRITONSERVER_Error* write_field(H* handle, std::atomic<F> H::*field, T value) {
  if (!handle) return null_argument("handle");
  (handle->*field).store(static_cast<F>(value));
  return nullptr;
}

}  // namespace inferwire::triton_host

/// Returns INVALID_ARG from the calling API function when `p` is false (an argument is null).
#define IW_REQUIRE(p)                                                  \
  do {                                                                 \
    if (!(p)) return ::inferwire::triton_host::null_argument(#p);      \
  } while (false)
