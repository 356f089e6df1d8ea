// SPDX-License-Identifier: Apache-2.0
// libtritonserver.so, part 2: the TRITONBACKEND_* functions a backend calls on its backend,
// models, instances, requests and responses. What a request's functions read was filled by the
// server before the backend ran (reference_server/src/triton_backend.cpp); what the response
// functions produce goes back through the request's `deliver`.
#include "host.hpp"

#include <cstdlib>
#include <cstring>
#include <limits>

using inferwire::triton_host::make_error;
using inferwire::triton_host::null_argument;
using inferwire::triton_host::out_of_bounds;
using inferwire::triton_host::output_buffer;
using inferwire::triton_host::request_state;
using inferwire::triton_host::sent_response;

namespace {

// The size of a tensor's data when its type has a fixed size; nullopt for BYTES.
bool element_bytes(TRITONSERVER_DataType t, const std::vector<int64_t>& shape, uint64_t& out) {
  const uint32_t each = TRITONSERVER_DataTypeByteSize(t);
  if (each == 0) return false;
  uint64_t n = each;
  for (auto d : shape) {
    if (d < 0 || (d > 0 && n > std::numeric_limits<uint64_t>::max() / static_cast<uint64_t>(d))) return false;
    n *= static_cast<uint64_t>(d);
  }
  out = n;
  return true;
}

// A response or factory is one more thing that may still answer its request.
void add_pending(request_state& s) {
  std::lock_guard lock(s.mu);
  ++s.pending;
}
void drop_pending(request_state& s) {
  std::lock_guard lock(s.mu);
  if (s.pending) --s.pending;
  s.changed.notify_all();
}

// Hands a response to the server (or drops it when the server stopped listening). Returns the
// error to give the backend.
TRITONSERVER_Error* deliver(request_state& s, sent_response&& r) {
  std::lock_guard lock(s.mu);
  if (s.answered)
    return make_error(TRITONSERVER_ERROR_INVALID_ARG,
                      s.decoupled ? "the request's final response was already sent"
                                  : "a response was already sent for this request; a model that sends "
                                    "several needs the decoupled transaction policy");
  if (!s.decoupled || r.final) s.answered = true;
  s.changed.notify_all();
  if (!s.listening || !s.deliver) return nullptr;  // the client is gone; the response is dropped
  std::string why = s.deliver(std::move(r));
  return why.empty() ? nullptr : make_error(TRITONSERVER_ERROR_INTERNAL, std::move(why));
}

TRITONBACKEND_Response* new_response(const std::shared_ptr<request_state>& s) {
  auto* r = new TRITONBACKEND_Response{};
  r->state = s;
  add_pending(*s);
  return r;
}

void set_parameter(TRITONBACKEND_Response* r, const char* name, TRITONSERVER_Parameter p) {
  p.name = name;
  for (auto& q : r->parameters)
    if (q.name == p.name) {
      q = std::move(p);
      return;
    }
  r->parameters.push_back(std::move(p));
}

}  // namespace

extern "C" {

TRITONSERVER_Error* TRITONBACKEND_ApiVersion(uint32_t* major, uint32_t* minor) {
  IW_REQUIRE(major && minor);
  *major = TRITONBACKEND_API_VERSION_MAJOR;
  *minor = TRITONBACKEND_API_VERSION_MINOR;
  return nullptr;
}

// --- memory manager: host memory only -----------------------------------------------------------

TRITONSERVER_Error* TRITONBACKEND_MemoryManagerAllocate(TRITONBACKEND_MemoryManager*, void** buffer,
                                                        const TRITONSERVER_MemoryType memory_type, const int64_t,
                                                        const uint64_t byte_size) {
  IW_REQUIRE(buffer);
  if (memory_type == TRITONSERVER_MEMORY_GPU)
    return make_error(TRITONSERVER_ERROR_UNSUPPORTED, "the backend memory manager of inferwire-server allocates host memory only");
  *buffer = std::malloc(byte_size ? byte_size : 1);
  if (!*buffer)
    return make_error(TRITONSERVER_ERROR_UNAVAILABLE, "failed to allocate " + std::to_string(byte_size) + " bytes");
  return nullptr;
}

TRITONSERVER_Error* TRITONBACKEND_MemoryManagerFree(TRITONBACKEND_MemoryManager*, void* buffer,
                                                    const TRITONSERVER_MemoryType memory_type, const int64_t) {
  if (memory_type == TRITONSERVER_MEMORY_GPU)
    return make_error(TRITONSERVER_ERROR_UNSUPPORTED, "the backend memory manager of inferwire-server allocates host memory only");
  std::free(buffer);
  return nullptr;
}

// --- inputs -----------------------------------------------------------------------------------

TRITONSERVER_Error* TRITONBACKEND_InputProperties(TRITONBACKEND_Input* input, const char** name,
                                                  TRITONSERVER_DataType* datatype, const int64_t** shape,
                                                  uint32_t* dims_count, uint64_t* byte_size, uint32_t* buffer_count) {
  IW_REQUIRE(input);
  if (name) *name = input->name.c_str();
  if (datatype) *datatype = input->datatype;
  if (shape) *shape = input->shape.data();
  if (dims_count) *dims_count = static_cast<uint32_t>(input->shape.size());
  if (byte_size) *byte_size = input->byte_size;
  if (buffer_count) *buffer_count = 1;
  return nullptr;
}

TRITONSERVER_Error* TRITONBACKEND_InputPropertiesForHostPolicy(TRITONBACKEND_Input* input, const char*,
                                                               const char** name, TRITONSERVER_DataType* datatype,
                                                               const int64_t** shape, uint32_t* dims_count,
                                                               uint64_t* byte_size, uint32_t* buffer_count) {
  return TRITONBACKEND_InputProperties(input, name, datatype, shape, dims_count, byte_size, buffer_count);
}

TRITONSERVER_Error* TRITONBACKEND_InputBuffer(TRITONBACKEND_Input* input, const uint32_t index, const void** buffer,
                                              uint64_t* buffer_byte_size, TRITONSERVER_MemoryType* memory_type,
                                              int64_t* memory_type_id) {
  IW_REQUIRE(input && buffer && buffer_byte_size && memory_type && memory_type_id);
  if (index != 0)
    return make_error(TRITONSERVER_ERROR_INVALID_ARG, "input '" + input->name + "' has one buffer; index " +
                                                          std::to_string(index) + " is out of range");
  *buffer = input->data;
  *buffer_byte_size = input->byte_size;
  *memory_type = input->memory_type;
  *memory_type_id = input->memory_type_id;
  return nullptr;
}

TRITONSERVER_Error* TRITONBACKEND_InputBufferForHostPolicy(TRITONBACKEND_Input* input, const char*,
                                                           const uint32_t index, const void** buffer,
                                                           uint64_t* buffer_byte_size,
                                                           TRITONSERVER_MemoryType* memory_type,
                                                           int64_t* memory_type_id) {
  return TRITONBACKEND_InputBuffer(input, index, buffer, buffer_byte_size, memory_type, memory_type_id);
}

TRITONSERVER_Error* TRITONBACKEND_InputBufferAttributes(TRITONBACKEND_Input* input, const uint32_t index,
                                                        const void** buffer,
                                                        TRITONSERVER_BufferAttributes** buffer_attributes) {
  IW_REQUIRE(input && buffer && buffer_attributes);
  if (index != 0)
    return make_error(TRITONSERVER_ERROR_INVALID_ARG, "input '" + input->name + "' has one buffer; index " +
                                                          std::to_string(index) + " is out of range");
  input->attributes = {input->byte_size, input->memory_type, input->memory_type_id, nullptr};
  *buffer = input->data;
  *buffer_attributes = &input->attributes;
  return nullptr;
}

// --- outputs ----------------------------------------------------------------------------------

TRITONSERVER_Error* TRITONBACKEND_OutputBuffer(TRITONBACKEND_Output* output, void** buffer,
                                               const uint64_t buffer_byte_size, TRITONSERVER_MemoryType* memory_type,
                                               int64_t* memory_type_id) {
  IW_REQUIRE(output && output->buffer && buffer && memory_type && memory_type_id);
  output_buffer& o = *output->buffer;
  if (o.allocated)
    return make_error(TRITONSERVER_ERROR_INVALID_ARG, "output '" + o.name + "' already has a buffer");
  uint64_t expected = 0;
  if (element_bytes(o.datatype, o.shape, expected) && expected != buffer_byte_size)
    return make_error(TRITONSERVER_ERROR_INVALID_ARG,
                      "output '" + o.name + "' of type " + inferwire::triton_host::datatype_name(o.datatype) +
                          " and its shape needs " + std::to_string(expected) + " bytes, not " +
                          std::to_string(buffer_byte_size));
  // A host destination the client registered for this output takes the bytes directly.
  void* place = nullptr;
  if (const auto* s = output->state)
    for (const auto& d : s->destinations)
      if (d.name == o.name && d.byte_size >= buffer_byte_size) place = d.data;
  if (place) {
    o.data = place;
  } else {
    try {
      // Capacity past the small-string buffer: the bytes stay where they are when the string
      // moves into the server's response.
      o.storage.reserve(std::max<uint64_t>(buffer_byte_size, 2 * sizeof(std::string)));
      o.storage.resize(buffer_byte_size);
    } catch (const std::exception&) {
      return make_error(TRITONSERVER_ERROR_UNAVAILABLE,
                        "failed to allocate " + std::to_string(buffer_byte_size) + " bytes for output '" + o.name + "'");
    }
    o.data = o.storage.data();
  }
  o.byte_size = buffer_byte_size;
  o.allocated = true;
  o.attributes = {buffer_byte_size, TRITONSERVER_MEMORY_CPU, 0, nullptr};
  *buffer = o.data;
  *memory_type = TRITONSERVER_MEMORY_CPU;  // a backend asking for GPU memory gets host memory
  *memory_type_id = 0;
  return nullptr;
}

TRITONSERVER_Error* TRITONBACKEND_OutputBufferAttributes(TRITONBACKEND_Output* output,
                                                         TRITONSERVER_BufferAttributes** buffer_attributes) {
  IW_REQUIRE(output && output->buffer && buffer_attributes);
  *buffer_attributes = &output->buffer->attributes;
  return nullptr;
}

// --- requests ---------------------------------------------------------------------------------

TRITONSERVER_Error* TRITONBACKEND_RequestId(TRITONBACKEND_Request* request, const char** id) {
  IW_REQUIRE(request && id);
  *id = request->state->id.c_str();
  return nullptr;
}

TRITONSERVER_Error* TRITONBACKEND_RequestIsCancelled(TRITONBACKEND_Request* request, bool* is_cancelled) {
  IW_REQUIRE(request && is_cancelled);
  request_state& s = *request->state;
  std::lock_guard lock(s.mu);
  *is_cancelled = !s.listening || (s.cancelled && *s.cancelled && (*s.cancelled)());
  return nullptr;
}

TRITONSERVER_Error* TRITONBACKEND_ResponseFactoryIsCancelled(TRITONBACKEND_ResponseFactory* factory,
                                                             bool* is_cancelled) {
  IW_REQUIRE(factory && is_cancelled);
  return TRITONBACKEND_RequestIsCancelled(&factory->state->handle, is_cancelled);
}

TRITONSERVER_Error* TRITONBACKEND_RequestCorrelationId(TRITONBACKEND_Request* request, uint64_t* id) {
  IW_REQUIRE(request && id);
  if (request->state->string_correlation_id)
    return make_error(TRITONSERVER_ERROR_INVALID_ARG, "correlation ID in request is not an unsigned int");
  *id = request->state->correlation_id;
  return nullptr;
}

TRITONSERVER_Error* TRITONBACKEND_RequestCorrelationIdString(TRITONBACKEND_Request* request, const char** id) {
  IW_REQUIRE(request && id);
  if (!request->state->string_correlation_id)
    return make_error(TRITONSERVER_ERROR_INVALID_ARG, "correlation ID in request is not a string");
  *id = request->state->correlation_id_string.c_str();
  return nullptr;
}

TRITONSERVER_Error* TRITONBACKEND_InferenceRequestTimeoutMicroseconds(TRITONBACKEND_Request* request,
                                                                      uint64_t* timeout) {
  IW_REQUIRE(request && timeout);
  *timeout = request->state->timeout_us;
  return nullptr;
}

TRITONSERVER_Error* TRITONBACKEND_RequestFlags(TRITONBACKEND_Request* request, uint32_t* flags) {
  IW_REQUIRE(request && flags);
  *flags = request->state->flags;
  return nullptr;
}

TRITONSERVER_Error* TRITONBACKEND_RequestParameterCount(TRITONBACKEND_Request* request, uint32_t* count) {
  IW_REQUIRE(request && count);
  *count = static_cast<uint32_t>(request->state->parameters.size());
  return nullptr;
}

TRITONSERVER_Error* TRITONBACKEND_RequestParameter(TRITONBACKEND_Request* request, const uint32_t index,
                                                   const char** key, TRITONSERVER_ParameterType* type,
                                                   const void** vvalue) {
  IW_REQUIRE(request && key && type && vvalue);
  return inferwire::triton_host::parameter_at(request->state->parameters, index, "request", key, type, vvalue);
}

TRITONSERVER_Error* TRITONBACKEND_RequestInputCount(TRITONBACKEND_Request* request, uint32_t* count) {
  IW_REQUIRE(request && count);
  *count = static_cast<uint32_t>(request->state->inputs.size());
  return nullptr;
}

TRITONSERVER_Error* TRITONBACKEND_RequestInputName(TRITONBACKEND_Request* request, const uint32_t index,
                                                   const char** input_name) {
  IW_REQUIRE(request && input_name);
  const auto& in = request->state->inputs;
  if (index >= in.size())
    return out_of_bounds(index, "request", in.size(), "inputs");
  *input_name = in[index].name.c_str();
  return nullptr;
}

TRITONSERVER_Error* TRITONBACKEND_RequestInput(TRITONBACKEND_Request* request, const char* name,
                                               TRITONBACKEND_Input** input) {
  IW_REQUIRE(request && name && input);
  for (auto& in : request->state->inputs)
    if (in.name == name) {
      *input = &in;
      return nullptr;
    }
  return make_error(TRITONSERVER_ERROR_INVALID_ARG, std::string("unknown request input '") + name + "'");
}

TRITONSERVER_Error* TRITONBACKEND_RequestInputByIndex(TRITONBACKEND_Request* request, const uint32_t index,
                                                      TRITONBACKEND_Input** input) {
  IW_REQUIRE(request && input);
  auto& in = request->state->inputs;
  if (index >= in.size())
    return out_of_bounds(index, "request", in.size(), "inputs");
  *input = &in[index];
  return nullptr;
}

TRITONSERVER_Error* TRITONBACKEND_RequestOutputCount(TRITONBACKEND_Request* request, uint32_t* count) {
  IW_REQUIRE(request && count);
  *count = static_cast<uint32_t>(request->state->outputs().size());
  return nullptr;
}

TRITONSERVER_Error* TRITONBACKEND_RequestOutputName(TRITONBACKEND_Request* request, const uint32_t index,
                                                    const char** output_name) {
  IW_REQUIRE(request && output_name);
  const auto& out = request->state->outputs();
  if (index >= out.size())
    return out_of_bounds(index, "request", out.size(), "requested outputs");
  *output_name = out[index].c_str();
  return nullptr;
}

TRITONSERVER_Error* TRITONBACKEND_RequestOutputBufferProperties(TRITONBACKEND_Request* request, const char* name,
                                                                size_t* byte_size,
                                                                TRITONSERVER_MemoryType* memory_type,
                                                                int64_t* memory_type_id) {
  IW_REQUIRE(request && name);
  for (const auto& d : request->state->destinations)
    if (d.name == name) {
      if (byte_size) *byte_size = d.byte_size;
      if (memory_type) *memory_type = TRITONSERVER_MEMORY_CPU;
      if (memory_type_id) *memory_type_id = 0;
      return nullptr;
    }
  return make_error(TRITONSERVER_ERROR_UNAVAILABLE,
                    std::string("output '") + name + "' has no buffer the client provided");
}

TRITONSERVER_Error* TRITONBACKEND_RequestRelease(TRITONBACKEND_Request* request, uint32_t release_flags) {
  IW_REQUIRE(request);
  if (release_flags & TRITONSERVER_REQUEST_RELEASE_RESCHEDULE)
    return make_error(TRITONSERVER_ERROR_UNSUPPORTED, "inferwire-server does not reschedule released requests");
  request_state& s = *request->state;
  std::shared_ptr<request_state> backends_share;
  {
    std::lock_guard lock(s.mu);
    if (s.released) return make_error(TRITONSERVER_ERROR_INVALID_ARG, "the request was already released");
    s.released = true;
    backends_share = std::move(s.held_by_backend);
    s.changed.notify_all();
  }
  return nullptr;  // the state may go with `backends_share`, after the lock
}

TRITONSERVER_Error* TRITONBACKEND_RequestTrace(TRITONBACKEND_Request* request, TRITONSERVER_InferenceTrace** trace) {
  IW_REQUIRE(request && trace);
  *trace = nullptr;  // the server traces requests itself; backends get no trace handle
  return nullptr;
}

// --- response factories and responses ----------------------------------------------------------

TRITONSERVER_Error* TRITONBACKEND_ResponseFactoryNew(TRITONBACKEND_ResponseFactory** factory,
                                                     TRITONBACKEND_Request* request) {
  IW_REQUIRE(factory && request);
  request_state& s = *request->state;
  std::shared_ptr<request_state> share;
  {
    std::lock_guard lock(s.mu);
    if (s.released) return make_error(TRITONSERVER_ERROR_INVALID_ARG, "the request was already released");
    share = s.held_by_backend;
    ++s.pending;
  }
  *factory = new TRITONBACKEND_ResponseFactory{std::move(share)};
  return nullptr;
}

TRITONSERVER_Error* TRITONBACKEND_ResponseFactoryDelete(TRITONBACKEND_ResponseFactory* factory) {
  if (!factory) return nullptr;
  drop_pending(*factory->state);
  delete factory;
  return nullptr;
}

TRITONSERVER_Error* TRITONBACKEND_ResponseFactorySendFlags(TRITONBACKEND_ResponseFactory* factory,
                                                           const uint32_t send_flags) {
  IW_REQUIRE(factory);
  sent_response r;
  r.final = (send_flags & TRITONSERVER_RESPONSE_COMPLETE_FINAL) != 0;
  if (!r.final) return nullptr;  // flags without FINAL carry nothing
  return deliver(*factory->state, std::move(r));
}

TRITONSERVER_Error* TRITONBACKEND_ResponseNew(TRITONBACKEND_Response** response, TRITONBACKEND_Request* request) {
  IW_REQUIRE(response && request);
  request_state& s = *request->state;
  std::shared_ptr<request_state> share;
  {
    std::lock_guard lock(s.mu);
    if (s.released) return make_error(TRITONSERVER_ERROR_INVALID_ARG, "the request was already released");
    share = s.held_by_backend;
  }
  *response = new_response(share);
  return nullptr;
}

TRITONSERVER_Error* TRITONBACKEND_ResponseNewFromFactory(TRITONBACKEND_Response** response,
                                                         TRITONBACKEND_ResponseFactory* factory) {
  IW_REQUIRE(response && factory);
  *response = new_response(factory->state);
  return nullptr;
}

TRITONSERVER_Error* TRITONBACKEND_ResponseDelete(TRITONBACKEND_Response* response) {
  if (!response) return nullptr;
  drop_pending(*response->state);
  delete response;
  return nullptr;
}

TRITONSERVER_Error* TRITONBACKEND_ResponseSetStringParameter(TRITONBACKEND_Response* response, const char* name,
                                                             const char* value) {
  IW_REQUIRE(response && name && value);
  set_parameter(response, name, inferwire::triton_host::string_parameter(value));
  return nullptr;
}

TRITONSERVER_Error* TRITONBACKEND_ResponseSetIntParameter(TRITONBACKEND_Response* response, const char* name,
                                                          const int64_t value) {
  IW_REQUIRE(response && name);
  set_parameter(response, name, inferwire::triton_host::int_parameter(value));
  return nullptr;
}

TRITONSERVER_Error* TRITONBACKEND_ResponseSetBoolParameter(TRITONBACKEND_Response* response, const char* name,
                                                           const bool value) {
  IW_REQUIRE(response && name);
  set_parameter(response, name, inferwire::triton_host::bool_parameter(value));
  return nullptr;
}

TRITONSERVER_Error* TRITONBACKEND_ResponseSetDoubleParameter(TRITONBACKEND_Response* response, const char* name,
                                                             const double value) {
  IW_REQUIRE(response && name);
  set_parameter(response, name, inferwire::triton_host::double_parameter(value));
  return nullptr;
}

TRITONSERVER_Error* TRITONBACKEND_ResponseOutput(TRITONBACKEND_Response* response, TRITONBACKEND_Output** output,
                                                 const char* name, const TRITONSERVER_DataType datatype,
                                                 const int64_t* shape, const uint32_t dims_count) {
  IW_REQUIRE(response && output && name && (shape || dims_count == 0));
  for (const auto& o : response->outputs)
    if (o->name == name)
      return make_error(TRITONSERVER_ERROR_INVALID_ARG, std::string("the response already has output '") + name + "'");
  if (datatype <= TRITONSERVER_TYPE_INVALID || datatype > TRITONSERVER_TYPE_BF16)
    return make_error(TRITONSERVER_ERROR_INVALID_ARG, std::string("output '") + name + "' has an invalid data type");
  auto o = std::make_unique<output_buffer>();
  o->name = name;
  o->datatype = datatype;
  o->shape.assign(shape, shape + dims_count);
  for (auto d : o->shape)
    if (d < 0)
      return make_error(TRITONSERVER_ERROR_INVALID_ARG, std::string("output '") + name + "' has a negative dimension");
  auto h = std::make_unique<TRITONBACKEND_Output>();
  h->buffer = o.get();
  h->state = response->state.get();
  *output = h.get();
  response->outputs.push_back(std::move(o));
  response->handles.push_back(std::move(h));
  return nullptr;
}

TRITONSERVER_Error* TRITONBACKEND_ResponseSend(TRITONBACKEND_Response* response, const uint32_t send_flags,
                                               TRITONSERVER_Error* error) {
  IW_REQUIRE(response);
  std::unique_ptr<TRITONBACKEND_Response> owned(response);  // sending gives the response to the server
  sent_response r;
  r.final = (send_flags & TRITONSERVER_RESPONSE_COMPLETE_FINAL) != 0;
  r.parameters = std::move(response->parameters);
  if (error) {
    r.has_error = true;
    r.error = *error;
  } else {
    r.outputs.reserve(response->outputs.size());
    for (auto& o : response->outputs) {
      if (!o->allocated)
        return drop_pending(*response->state), make_error(TRITONSERVER_ERROR_INVALID_ARG, "output '" + o->name + "' has no buffer");
      r.outputs.push_back(std::move(*o));
    }
  }
  request_state& s = *response->state;
  TRITONSERVER_Error* result = deliver(s, std::move(r));
  drop_pending(s);
  return result;
}

TRITONSERVER_Error* TRITONBACKEND_InferenceResponseOutput(TRITONBACKEND_Response* response, const uint32_t index,
                                                          const char** name, TRITONSERVER_DataType* datatype,
                                                          const int64_t** shape, uint64_t* dim_count) {
  IW_REQUIRE(response && name && datatype && shape && dim_count);
  if (index >= response->outputs.size())
    return out_of_bounds(index, "response", response->outputs.size(), "outputs");
  const auto& o = *response->outputs[index];
  *name = o.name.c_str();
  *datatype = o.datatype;
  *shape = o.shape.data();
  *dim_count = o.shape.size();
  return nullptr;
}

TRITONSERVER_Error* TRITONBACKEND_InferenceResponseOutputByName(TRITONBACKEND_Response* response, const char* name,
                                                                TRITONSERVER_DataType* datatype,
                                                                const int64_t** shape, uint64_t* dim_count) {
  IW_REQUIRE(response && name && datatype && shape && dim_count);
  for (const auto& o : response->outputs)
    if (o->name == name) {
      *datatype = o->datatype;
      *shape = o->shape.data();
      *dim_count = o->shape.size();
      return nullptr;
    }
  return make_error(TRITONSERVER_ERROR_NOT_FOUND, std::string("output name '") + name + "' not found");
}

}  // extern "C"
