// SPDX-License-Identifier: Apache-2.0
// libtritonserver.so, part 1: the TRITONSERVER_* functions backends call: versions, data
// types, parameters, errors, messages, logging, buffer attributes and response allocators.
// Embedding a server (TRITONSERVER_Server*Options*, TRITONSERVER_ServerNew ...), in-process
// inference, traces and custom metrics answer TRITONSERVER_ERROR_UNSUPPORTED with the
// function's name (docs/backends.md says why for each group).
#include "host.hpp"

#include <boost/json/parse.hpp>

#include <cstdio>
#include <cstring>
#include <mutex>

namespace inferwire::triton_host {

TRITONSERVER_Error* make_error(TRITONSERVER_Error_Code code, std::string message) {
  return new TRITONSERVER_Error{code, std::move(message)};
}

const char* datatype_name(TRITONSERVER_DataType t) noexcept {
  switch (t) {
    case TRITONSERVER_TYPE_BOOL: return "BOOL";
    case TRITONSERVER_TYPE_UINT8: return "UINT8";
    case TRITONSERVER_TYPE_UINT16: return "UINT16";
    case TRITONSERVER_TYPE_UINT32: return "UINT32";
    case TRITONSERVER_TYPE_UINT64: return "UINT64";
    case TRITONSERVER_TYPE_INT8: return "INT8";
    case TRITONSERVER_TYPE_INT16: return "INT16";
    case TRITONSERVER_TYPE_INT32: return "INT32";
    case TRITONSERVER_TYPE_INT64: return "INT64";
    case TRITONSERVER_TYPE_FP16: return "FP16";
    case TRITONSERVER_TYPE_FP32: return "FP32";
    case TRITONSERVER_TYPE_FP64: return "FP64";
    case TRITONSERVER_TYPE_BYTES: return "BYTES";
    case TRITONSERVER_TYPE_BF16: return "BF16";
    default: return "<invalid>";
  }
}

TRITONSERVER_Error* null_argument(const char* what) {
  return make_error(TRITONSERVER_ERROR_INVALID_ARG, std::string(what) + " must not be null");
}

TRITONSERVER_Error* out_of_bounds(std::uint64_t index, const char* owner, std::size_t count, const char* things) {
  return make_error(TRITONSERVER_ERROR_INVALID_ARG, "out of bounds index " + std::to_string(index) + ": " + owner +
                                                        " has " + std::to_string(count) + " " + things);
}

TRITONSERVER_Error* parameter_at(const std::vector<TRITONSERVER_Parameter>& ps, std::uint32_t index, const char* owner,
                                 const char** key, TRITONSERVER_ParameterType* type, const void** value) {
  if (index >= ps.size()) return out_of_bounds(index, owner, ps.size(), "parameters");
  *key = ps[index].name.c_str();
  *type = ps[index].type;
  *value = ps[index].value();
  return nullptr;
}

TRITONSERVER_Parameter string_parameter(std::string value) {
  TRITONSERVER_Parameter p;
  p.type = TRITONSERVER_PARAMETER_STRING;
  p.text = std::move(value);
  return p;
}
TRITONSERVER_Parameter int_parameter(std::int64_t value) {
  TRITONSERVER_Parameter p;
  p.type = TRITONSERVER_PARAMETER_INT;
  p.integer = value;
  return p;
}
TRITONSERVER_Parameter bool_parameter(bool value) {
  TRITONSERVER_Parameter p;
  p.type = TRITONSERVER_PARAMETER_BOOL;
  p.boolean = value;
  return p;
}
TRITONSERVER_Parameter double_parameter(double value) {
  TRITONSERVER_Parameter p;
  p.type = TRITONSERVER_PARAMETER_DOUBLE;
  p.number = value;
  return p;
}

namespace {

std::mutex log_mu;
log_sink& sink() {
  static log_sink s;
  return s;
}

}  // namespace

void set_log_sink(log_sink s) {
  std::lock_guard lock(log_mu);
  sink() = std::move(s);
}

void request_state::close() {
  std::lock_guard lock(mu);
  listening = false;
  deliver = nullptr;
  cancelled = nullptr;
  every_output = nullptr;
  changed.notify_all();
}

}  // namespace inferwire::triton_host

const void* TRITONSERVER_Parameter::value() const noexcept {
  switch (type) {
    case TRITONSERVER_PARAMETER_STRING: return text.c_str();
    case TRITONSERVER_PARAMETER_INT: return &integer;
    case TRITONSERVER_PARAMETER_BOOL: return &boolean;
    case TRITONSERVER_PARAMETER_DOUBLE: return &number;
    case TRITONSERVER_PARAMETER_BYTES: return text.data();
  }
  return nullptr;
}

using inferwire::triton_host::make_error;

#define IW_UNSUPPORTED(name) \
  return make_error(TRITONSERVER_ERROR_UNSUPPORTED, #name " is not supported by inferwire-server")

extern "C" {

// --- versions, types --------------------------------------------------------------------------

TRITONSERVER_Error* TRITONSERVER_ApiVersion(uint32_t* major, uint32_t* minor) {
  *major = TRITONSERVER_API_VERSION_MAJOR;
  *minor = TRITONSERVER_API_VERSION_MINOR;
  return nullptr;
}

const char* TRITONSERVER_DataTypeString(TRITONSERVER_DataType datatype) {
  return inferwire::triton_host::datatype_name(datatype);
}

TRITONSERVER_DataType TRITONSERVER_StringToDataType(const char* dtype) {
  if (!dtype) return TRITONSERVER_TYPE_INVALID;
  for (int t = TRITONSERVER_TYPE_BOOL; t <= TRITONSERVER_TYPE_BF16; ++t)
    if (std::strcmp(dtype, inferwire::triton_host::datatype_name(static_cast<TRITONSERVER_DataType>(t))) == 0)
      return static_cast<TRITONSERVER_DataType>(t);
  return TRITONSERVER_TYPE_INVALID;
}

uint32_t TRITONSERVER_DataTypeByteSize(TRITONSERVER_DataType datatype) {
  switch (datatype) {
    case TRITONSERVER_TYPE_BOOL:
    case TRITONSERVER_TYPE_UINT8:
    case TRITONSERVER_TYPE_INT8: return 1;
    case TRITONSERVER_TYPE_UINT16:
    case TRITONSERVER_TYPE_INT16:
    case TRITONSERVER_TYPE_FP16:
    case TRITONSERVER_TYPE_BF16: return 2;
    case TRITONSERVER_TYPE_UINT32:
    case TRITONSERVER_TYPE_INT32:
    case TRITONSERVER_TYPE_FP32: return 4;
    case TRITONSERVER_TYPE_UINT64:
    case TRITONSERVER_TYPE_INT64:
    case TRITONSERVER_TYPE_FP64: return 8;
    default: return 0;  // BYTES has no fixed size
  }
}

const char* TRITONSERVER_MemoryTypeString(TRITONSERVER_MemoryType memtype) {
  switch (memtype) {
    case TRITONSERVER_MEMORY_CPU: return "CPU";
    case TRITONSERVER_MEMORY_CPU_PINNED: return "CPU_PINNED";
    case TRITONSERVER_MEMORY_GPU: return "GPU";
  }
  return "<invalid>";
}

const char* TRITONSERVER_ParameterTypeString(TRITONSERVER_ParameterType paramtype) {
  switch (paramtype) {
    case TRITONSERVER_PARAMETER_STRING: return "STRING";
    case TRITONSERVER_PARAMETER_INT: return "INT";
    case TRITONSERVER_PARAMETER_BOOL: return "BOOL";
    case TRITONSERVER_PARAMETER_DOUBLE: return "DOUBLE";
    case TRITONSERVER_PARAMETER_BYTES: return "BYTES";
  }
  return "<invalid>";
}

const char* TRITONSERVER_InstanceGroupKindString(TRITONSERVER_InstanceGroupKind kind) {
  switch (kind) {
    case TRITONSERVER_INSTANCEGROUPKIND_AUTO: return "AUTO";
    case TRITONSERVER_INSTANCEGROUPKIND_CPU: return "CPU";
    case TRITONSERVER_INSTANCEGROUPKIND_GPU: return "GPU";
    case TRITONSERVER_INSTANCEGROUPKIND_MODEL: return "MODEL";
  }
  return "<invalid>";
}

// --- parameters -------------------------------------------------------------------------------

TRITONSERVER_Parameter* TRITONSERVER_ParameterNew(const char* name, const TRITONSERVER_ParameterType type,
                                                  const void* value) {
  if (!name || !value) return nullptr;
  auto* p = new TRITONSERVER_Parameter{};
  p->name = name;
  p->type = type;
  switch (type) {
    case TRITONSERVER_PARAMETER_STRING: p->text = static_cast<const char*>(value); break;
    case TRITONSERVER_PARAMETER_INT: p->integer = *static_cast<const int64_t*>(value); break;
    case TRITONSERVER_PARAMETER_BOOL: p->boolean = *static_cast<const bool*>(value); break;
    case TRITONSERVER_PARAMETER_DOUBLE: p->number = *static_cast<const double*>(value); break;
    default:  // BYTES need their size: TRITONSERVER_ParameterBytesNew
      delete p;
      return nullptr;
  }
  return p;
}

TRITONSERVER_Parameter* TRITONSERVER_ParameterBytesNew(const char* name, const void* byte_ptr, const uint64_t size) {
  if (!name || (!byte_ptr && size)) return nullptr;
  auto* p = new TRITONSERVER_Parameter{};
  p->name = name;
  p->type = TRITONSERVER_PARAMETER_BYTES;
  p->text.assign(static_cast<const char*>(byte_ptr), size);
  return p;
}

void TRITONSERVER_ParameterDelete(TRITONSERVER_Parameter* parameter) { delete parameter; }

// --- logging ----------------------------------------------------------------------------------

bool TRITONSERVER_LogIsEnabled(TRITONSERVER_LogLevel level) {
  std::lock_guard lock(inferwire::triton_host::log_mu);
  const auto& s = inferwire::triton_host::sink();
  return s.enabled ? s.enabled(level) : level != TRITONSERVER_LOG_VERBOSE;
}

TRITONSERVER_Error* TRITONSERVER_LogMessage(TRITONSERVER_LogLevel level, const char* filename, const int line,
                                            const char* msg) {
  std::lock_guard lock(inferwire::triton_host::log_mu);
  const auto& s = inferwire::triton_host::sink();
  const std::string_view file = filename ? filename : "", text = msg ? msg : "";
  if (s.write) s.write(level, file, line, text);
  else std::fprintf(stderr, "%.*s:%d] %.*s\n", static_cast<int>(file.size()), file.data(), line,
                    static_cast<int>(text.size()), text.data());
  return nullptr;
}

// --- errors -----------------------------------------------------------------------------------

TRITONSERVER_Error* TRITONSERVER_ErrorNew(TRITONSERVER_Error_Code code, const char* msg) {
  return make_error(code, msg ? msg : "");
}

void TRITONSERVER_ErrorDelete(TRITONSERVER_Error* error) { delete error; }

TRITONSERVER_Error_Code TRITONSERVER_ErrorCode(TRITONSERVER_Error* error) {
  return error ? error->code : TRITONSERVER_ERROR_UNKNOWN;
}

const char* TRITONSERVER_ErrorCodeString(TRITONSERVER_Error* error) {
  switch (error ? error->code : TRITONSERVER_ERROR_UNKNOWN) {
    case TRITONSERVER_ERROR_INTERNAL: return "Internal";
    case TRITONSERVER_ERROR_NOT_FOUND: return "Not found";
    case TRITONSERVER_ERROR_INVALID_ARG: return "Invalid argument";
    case TRITONSERVER_ERROR_UNAVAILABLE: return "Unavailable";
    case TRITONSERVER_ERROR_UNSUPPORTED: return "Unsupported";
    case TRITONSERVER_ERROR_ALREADY_EXISTS: return "Already exists";
    case TRITONSERVER_ERROR_CANCELLED: return "Cancelled";
    default: return "Unknown";
  }
}

const char* TRITONSERVER_ErrorMessage(TRITONSERVER_Error* error) { return error ? error->message.c_str() : ""; }

// --- response allocators (kept for in-process inference; backends create them at start) -------

TRITONSERVER_Error* TRITONSERVER_ResponseAllocatorNew(TRITONSERVER_ResponseAllocator** allocator,
                                                      TRITONSERVER_ResponseAllocatorAllocFn_t alloc_fn,
                                                      TRITONSERVER_ResponseAllocatorReleaseFn_t release_fn,
                                                      TRITONSERVER_ResponseAllocatorStartFn_t start_fn) {
  if (!allocator) return make_error(TRITONSERVER_ERROR_INVALID_ARG, "allocator must not be null");
  *allocator = new TRITONSERVER_ResponseAllocator{alloc_fn, release_fn, start_fn, nullptr, nullptr};
  return nullptr;
}

TRITONSERVER_Error* TRITONSERVER_ResponseAllocatorSetBufferAttributesFunction(
    TRITONSERVER_ResponseAllocator* allocator, TRITONSERVER_ResponseAllocatorBufferAttributesFn_t fn) {
  if (!allocator) return make_error(TRITONSERVER_ERROR_INVALID_ARG, "allocator must not be null");
  allocator->attributes = fn;
  return nullptr;
}

TRITONSERVER_Error* TRITONSERVER_ResponseAllocatorSetQueryFunction(TRITONSERVER_ResponseAllocator* allocator,
                                                                   TRITONSERVER_ResponseAllocatorQueryFn_t fn) {
  if (!allocator) return make_error(TRITONSERVER_ERROR_INVALID_ARG, "allocator must not be null");
  allocator->query = fn;
  return nullptr;
}

TRITONSERVER_Error* TRITONSERVER_ResponseAllocatorDelete(TRITONSERVER_ResponseAllocator* allocator) {
  delete allocator;
  return nullptr;
}

// --- messages (JSON) --------------------------------------------------------------------------

TRITONSERVER_Error* TRITONSERVER_MessageNewFromSerializedJson(TRITONSERVER_Message** message, const char* base,
                                                              size_t byte_size) {
  if (!message || (!base && byte_size)) return make_error(TRITONSERVER_ERROR_INVALID_ARG, "message must not be null");
  std::string json(base ? base : "", byte_size);
  boost::system::error_code ec;
  (void)boost::json::parse(json, ec);
  if (ec) return make_error(TRITONSERVER_ERROR_INVALID_ARG, "failed to parse the message as JSON: " + ec.message());
  *message = new TRITONSERVER_Message{std::move(json)};
  return nullptr;
}

TRITONSERVER_Error* TRITONSERVER_MessageDelete(TRITONSERVER_Message* message) {
  delete message;
  return nullptr;
}

TRITONSERVER_Error* TRITONSERVER_MessageSerializeToJson(TRITONSERVER_Message* message, const char** base,
                                                        size_t* byte_size) {
  if (!message || !base || !byte_size) return make_error(TRITONSERVER_ERROR_INVALID_ARG, "message must not be null");
  *base = message->json.c_str();
  *byte_size = message->json.size();
  return nullptr;
}

// --- buffer attributes ------------------------------------------------------------------------

TRITONSERVER_Error* TRITONSERVER_BufferAttributesNew(TRITONSERVER_BufferAttributes** a) {
  if (!a) return make_error(TRITONSERVER_ERROR_INVALID_ARG, "buffer attributes must not be null");
  *a = new TRITONSERVER_BufferAttributes{};
  return nullptr;
}
TRITONSERVER_Error* TRITONSERVER_BufferAttributesDelete(TRITONSERVER_BufferAttributes* a) {
  delete a;
  return nullptr;
}
TRITONSERVER_Error* TRITONSERVER_BufferAttributesSetMemoryTypeId(TRITONSERVER_BufferAttributes* a, int64_t id) {
  a->memory_type_id = id;
  return nullptr;
}
TRITONSERVER_Error* TRITONSERVER_BufferAttributesSetMemoryType(TRITONSERVER_BufferAttributes* a,
                                                               TRITONSERVER_MemoryType t) {
  a->memory_type = t;
  return nullptr;
}
TRITONSERVER_Error* TRITONSERVER_BufferAttributesSetCudaIpcHandle(TRITONSERVER_BufferAttributes* a, void* h) {
  a->cuda_ipc_handle = h;
  return nullptr;
}
TRITONSERVER_Error* TRITONSERVER_BufferAttributesSetByteSize(TRITONSERVER_BufferAttributes* a, size_t n) {
  a->byte_size = n;
  return nullptr;
}
TRITONSERVER_Error* TRITONSERVER_BufferAttributesMemoryTypeId(TRITONSERVER_BufferAttributes* a, int64_t* id) {
  *id = a->memory_type_id;
  return nullptr;
}
TRITONSERVER_Error* TRITONSERVER_BufferAttributesMemoryType(TRITONSERVER_BufferAttributes* a,
                                                            TRITONSERVER_MemoryType* t) {
  *t = a->memory_type;
  return nullptr;
}
TRITONSERVER_Error* TRITONSERVER_BufferAttributesCudaIpcHandle(TRITONSERVER_BufferAttributes* a, void** h) {
  *h = a->cuda_ipc_handle;
  return nullptr;
}
TRITONSERVER_Error* TRITONSERVER_BufferAttributesByteSize(TRITONSERVER_BufferAttributes* a, size_t* n) {
  *n = a->byte_size;
  return nullptr;
}

// --- traces: requests are traced by the server itself; a backend gets no trace handle ---------

const char* TRITONSERVER_InferenceTraceLevelString(TRITONSERVER_InferenceTraceLevel level) {
  switch (level) {
    case TRITONSERVER_TRACE_LEVEL_DISABLED: return "DISABLED";
    case TRITONSERVER_TRACE_LEVEL_MIN: return "MIN";
    case TRITONSERVER_TRACE_LEVEL_MAX: return "MAX";
    case TRITONSERVER_TRACE_LEVEL_TIMESTAMPS: return "TIMESTAMPS";
    case TRITONSERVER_TRACE_LEVEL_TENSORS: return "TENSORS";
  }
  return "<unknown>";
}

const char* TRITONSERVER_InferenceTraceActivityString(TRITONSERVER_InferenceTraceActivity activity) {
  switch (activity) {
    case TRITONSERVER_TRACE_REQUEST_START: return "REQUEST_START";
    case TRITONSERVER_TRACE_QUEUE_START: return "QUEUE_START";
    case TRITONSERVER_TRACE_COMPUTE_START: return "COMPUTE_START";
    case TRITONSERVER_TRACE_COMPUTE_INPUT_END: return "COMPUTE_INPUT_END";
    case TRITONSERVER_TRACE_COMPUTE_OUTPUT_START: return "COMPUTE_OUTPUT_START";
    case TRITONSERVER_TRACE_COMPUTE_END: return "COMPUTE_END";
    case TRITONSERVER_TRACE_REQUEST_END: return "REQUEST_END";
    case TRITONSERVER_TRACE_TENSOR_QUEUE_INPUT: return "TENSOR_QUEUE_INPUT";
    case TRITONSERVER_TRACE_TENSOR_BACKEND_INPUT: return "TENSOR_BACKEND_INPUT";
    case TRITONSERVER_TRACE_TENSOR_BACKEND_OUTPUT: return "TENSOR_BACKEND_OUTPUT";
    case TRITONSERVER_TRACE_CUSTOM_ACTIVITY: return "CUSTOM_ACTIVITY";
  }
  return "<unknown>";
}

TRITONSERVER_Error* TRITONSERVER_InferenceTraceNew(TRITONSERVER_InferenceTrace**, TRITONSERVER_InferenceTraceLevel,
                                                   uint64_t, TRITONSERVER_InferenceTraceActivityFn_t,
                                                   TRITONSERVER_InferenceTraceReleaseFn_t, void*) {
  IW_UNSUPPORTED(TRITONSERVER_InferenceTraceNew);
}
TRITONSERVER_Error* TRITONSERVER_InferenceTraceTensorNew(TRITONSERVER_InferenceTrace**,
                                                         TRITONSERVER_InferenceTraceLevel, uint64_t,
                                                         TRITONSERVER_InferenceTraceActivityFn_t,
                                                         TRITONSERVER_InferenceTraceTensorActivityFn_t,
                                                         TRITONSERVER_InferenceTraceReleaseFn_t, void*) {
  IW_UNSUPPORTED(TRITONSERVER_InferenceTraceTensorNew);
}
TRITONSERVER_Error* TRITONSERVER_InferenceTraceReportActivity(TRITONSERVER_InferenceTrace*, uint64_t, const char*) {
  IW_UNSUPPORTED(TRITONSERVER_InferenceTraceReportActivity);
}
TRITONSERVER_Error* TRITONSERVER_InferenceTraceDelete(TRITONSERVER_InferenceTrace*) {
  IW_UNSUPPORTED(TRITONSERVER_InferenceTraceDelete);
}
TRITONSERVER_Error* TRITONSERVER_InferenceTraceId(TRITONSERVER_InferenceTrace*, uint64_t*) {
  IW_UNSUPPORTED(TRITONSERVER_InferenceTraceId);
}
TRITONSERVER_Error* TRITONSERVER_InferenceTraceParentId(TRITONSERVER_InferenceTrace*, uint64_t*) {
  IW_UNSUPPORTED(TRITONSERVER_InferenceTraceParentId);
}
TRITONSERVER_Error* TRITONSERVER_InferenceTraceModelName(TRITONSERVER_InferenceTrace*, const char**) {
  IW_UNSUPPORTED(TRITONSERVER_InferenceTraceModelName);
}
TRITONSERVER_Error* TRITONSERVER_InferenceTraceModelVersion(TRITONSERVER_InferenceTrace*, int64_t*) {
  IW_UNSUPPORTED(TRITONSERVER_InferenceTraceModelVersion);
}
TRITONSERVER_Error* TRITONSERVER_InferenceTraceRequestId(TRITONSERVER_InferenceTrace*, const char**) {
  IW_UNSUPPORTED(TRITONSERVER_InferenceTraceRequestId);
}
TRITONSERVER_Error* TRITONSERVER_InferenceTraceSpawnChildTrace(TRITONSERVER_InferenceTrace*,
                                                               TRITONSERVER_InferenceTrace**) {
  IW_UNSUPPORTED(TRITONSERVER_InferenceTraceSpawnChildTrace);
}
TRITONSERVER_Error* TRITONSERVER_InferenceTraceSetContext(TRITONSERVER_InferenceTrace*, const char*) {
  IW_UNSUPPORTED(TRITONSERVER_InferenceTraceSetContext);
}
TRITONSERVER_Error* TRITONSERVER_InferenceTraceContext(TRITONSERVER_InferenceTrace*, const char**) {
  IW_UNSUPPORTED(TRITONSERVER_InferenceTraceContext);
}

}  // extern "C"
