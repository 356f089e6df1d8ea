// SPDX-License-Identifier: Apache-2.0
// libtritonserver.so, part 6: in-process inference, what a backend uses to call another model
// (Triton's BLS): TRITONSERVER_InferenceRequest* to build a request, ServerInferAsync to hand
// it to the server (reference_server/src/inprocess.cpp runs it as any inference), and
// TRITONSERVER_InferenceResponse* to read the answers.
#include "host.hpp"

#include <algorithm>
#include <mutex>
#include <optional>

using inferwire::triton_host::make_error;
using inferwire::triton_host::null_argument;
using inferwire::triton_host::out_of_bounds;

namespace {

std::mutex calls_mu;
inferwire::triton_host::server_calls& calls() {
  static inferwire::triton_host::server_calls c;
  return c;
}

// The server's function `member` now, or null when it does not take such calls.
template <class M>
auto server_function(M inferwire::triton_host::server_calls::*member) {
  std::lock_guard lock(calls_mu);
  return calls().*member;
}

TRITONSERVER_Error* not_now() {
  return make_error(TRITONSERVER_ERROR_UNAVAILABLE, "the server does not take this call now");
}

TRITONSERVER_InferenceRequest::input* find_input(TRITONSERVER_InferenceRequest* r, const char* name) {
  for (auto& in : r->inputs)
    if (in.name == name) return &in;
  return nullptr;
}

TRITONSERVER_Error* no_input(const char* name) {
  return make_error(TRITONSERVER_ERROR_INVALID_ARG, std::string("input '") + name + "' does not exist");
}

TRITONSERVER_Error* set_parameter(TRITONSERVER_InferenceRequest* r, const char* key, TRITONSERVER_Parameter p) {
  IW_REQUIRE(r && key);
  p.name = key;
  for (auto& q : r->parameters)
    if (q.name == p.name) {
      q = std::move(p);
      return nullptr;
    }
  r->parameters.push_back(std::move(p));
  return nullptr;
}

TRITONSERVER_Error* append(TRITONSERVER_InferenceRequest* r, const char* name, const void* base, size_t byte_size,
                           TRITONSERVER_MemoryType memory_type, int64_t memory_type_id) {
  IW_REQUIRE(r && name && (base || byte_size == 0));
  auto* in = find_input(r, name);
  if (!in) return no_input(name);
  in->chunks.push_back({base, byte_size, memory_type, memory_type_id});
  return nullptr;
}

}  // namespace

TRITONSERVER_InferenceResponse::~TRITONSERVER_InferenceResponse() {
  if (!allocator || !allocator->release) return;
  for (auto& o : outputs)
    if (o.storage.empty() && (o.base || o.buffer_userp))
      if (TRITONSERVER_Error* e = allocator->release(allocator, o.base, o.buffer_userp, o.size, o.memory_type,
                                                     o.memory_type_id))
        TRITONSERVER_ErrorDelete(e);
}

namespace inferwire::triton_host {

void set_server_calls(server_calls c) {
  std::lock_guard lock(calls_mu);
  calls() = std::move(c);
}

}  // namespace inferwire::triton_host

namespace {

// Whether a model is decoupled and batches, for the two property calls.
TRITONSERVER_Error* model_properties(const char* model, int64_t version, bool& decoupled, bool& batching) {
  auto f = server_function(&inferwire::triton_host::server_calls::model_properties);
  return f ? f(model, version, decoupled, batching) : not_now();
}

template <class F, class... A>
TRITONSERVER_Error* json_message(F f, TRITONSERVER_Message** out, A&&... args) {
  if (!out) return null_argument("message");
  if (!f) return not_now();
  std::string json;
  if (TRITONSERVER_Error* e = f(std::forward<A>(args)..., json)) return e;
  *out = new TRITONSERVER_Message{std::move(json)};
  return nullptr;
}

}  // namespace

extern "C" {

// --- requests ---------------------------------------------------------------------------------

TRITONSERVER_Error* TRITONSERVER_InferenceRequestNew(TRITONSERVER_InferenceRequest** request, TRITONSERVER_Server* server,
                                                     const char* model_name, const int64_t model_version) {
  IW_REQUIRE(request && server && model_name);
  auto* r = new TRITONSERVER_InferenceRequest;
  r->model = model_name;
  r->version = model_version;
  *request = r;
  return nullptr;
}

TRITONSERVER_Error* TRITONSERVER_InferenceRequestDelete(TRITONSERVER_InferenceRequest* request) {
  delete request;
  return nullptr;
}

TRITONSERVER_Error* TRITONSERVER_InferenceRequestId(TRITONSERVER_InferenceRequest* r, const char** id) {
  IW_REQUIRE(r && id);
  *id = r->id.c_str();
  return nullptr;
}
TRITONSERVER_Error* TRITONSERVER_InferenceRequestSetId(TRITONSERVER_InferenceRequest* r, const char* id) {
  IW_REQUIRE(r && id);
  r->id = id;
  return nullptr;
}
TRITONSERVER_Error* TRITONSERVER_InferenceRequestFlags(TRITONSERVER_InferenceRequest* r, uint32_t* flags) {
  return inferwire::triton_host::read_field(r, &TRITONSERVER_InferenceRequest::flags, flags);
}
TRITONSERVER_Error* TRITONSERVER_InferenceRequestSetFlags(TRITONSERVER_InferenceRequest* r, uint32_t flags) {
  return inferwire::triton_host::write_field(r, &TRITONSERVER_InferenceRequest::flags, flags);
}
TRITONSERVER_Error* TRITONSERVER_InferenceRequestCorrelationId(TRITONSERVER_InferenceRequest* r, uint64_t* id) {
  IW_REQUIRE(r && id);
  if (r->string_correlation_id)
    return make_error(TRITONSERVER_ERROR_INVALID_ARG, "given request's correlation id is not an unsigned int");
  *id = r->correlation_id;
  return nullptr;
}
TRITONSERVER_Error* TRITONSERVER_InferenceRequestCorrelationIdString(TRITONSERVER_InferenceRequest* r, const char** id) {
  IW_REQUIRE(r && id);
  if (!r->string_correlation_id)
    return make_error(TRITONSERVER_ERROR_INVALID_ARG, "given request's correlation id is not a string");
  *id = r->correlation_id_string.c_str();
  return nullptr;
}
TRITONSERVER_Error* TRITONSERVER_InferenceRequestSetCorrelationId(TRITONSERVER_InferenceRequest* r, uint64_t id) {
  IW_REQUIRE(r);
  r->string_correlation_id = false;
  r->correlation_id = id;
  return nullptr;
}
TRITONSERVER_Error* TRITONSERVER_InferenceRequestSetCorrelationIdString(TRITONSERVER_InferenceRequest* r, const char* id) {
  IW_REQUIRE(r && id);
  r->string_correlation_id = true;
  r->correlation_id_string = id;
  return nullptr;
}
TRITONSERVER_Error* TRITONSERVER_InferenceRequestCancel(TRITONSERVER_InferenceRequest* r) {
  return inferwire::triton_host::write_field(r, &TRITONSERVER_InferenceRequest::cancelled, true);
}
TRITONSERVER_Error* TRITONSERVER_InferenceRequestIsCancelled(TRITONSERVER_InferenceRequest* r, bool* is_cancelled) {
  return inferwire::triton_host::read_field(r, &TRITONSERVER_InferenceRequest::cancelled, is_cancelled);
}
TRITONSERVER_Error* TRITONSERVER_InferenceRequestPriority(TRITONSERVER_InferenceRequest* r, uint32_t* priority) {
  IW_REQUIRE(r && priority);
  *priority = static_cast<uint32_t>(std::min<uint64_t>(r->priority, UINT32_MAX));
  return nullptr;
}
TRITONSERVER_Error* TRITONSERVER_InferenceRequestPriorityUInt64(TRITONSERVER_InferenceRequest* r, uint64_t* priority) {
  return inferwire::triton_host::read_field(r, &TRITONSERVER_InferenceRequest::priority, priority);
}
TRITONSERVER_Error* TRITONSERVER_InferenceRequestSetPriority(TRITONSERVER_InferenceRequest* r, uint32_t priority) {
  return inferwire::triton_host::write_field(r, &TRITONSERVER_InferenceRequest::priority, priority);
}
TRITONSERVER_Error* TRITONSERVER_InferenceRequestSetPriorityUInt64(TRITONSERVER_InferenceRequest* r, uint64_t priority) {
  return inferwire::triton_host::write_field(r, &TRITONSERVER_InferenceRequest::priority, priority);
}
TRITONSERVER_Error* TRITONSERVER_InferenceRequestTimeoutMicroseconds(TRITONSERVER_InferenceRequest* r, uint64_t* timeout_us) {
  return inferwire::triton_host::read_field(r, &TRITONSERVER_InferenceRequest::timeout_us, timeout_us);
}
TRITONSERVER_Error* TRITONSERVER_InferenceRequestSetTimeoutMicroseconds(TRITONSERVER_InferenceRequest* r, uint64_t timeout_us) {
  return inferwire::triton_host::write_field(r, &TRITONSERVER_InferenceRequest::timeout_us, timeout_us);
}

TRITONSERVER_Error* TRITONSERVER_InferenceRequestAddInput(TRITONSERVER_InferenceRequest* r, const char* name,
                                                          const TRITONSERVER_DataType datatype, const int64_t* shape,
                                                          uint64_t dim_count) {
  IW_REQUIRE(r && name && (shape || dim_count == 0));
  if (find_input(r, name))
    return make_error(TRITONSERVER_ERROR_INVALID_ARG, std::string("input '") + name + "' already exists in request");
  TRITONSERVER_InferenceRequest::input in;
  in.name = name;
  in.datatype = datatype;
  in.shape.assign(shape, shape + dim_count);
  r->inputs.push_back(std::move(in));
  return nullptr;
}
TRITONSERVER_Error* TRITONSERVER_InferenceRequestAddRawInput(TRITONSERVER_InferenceRequest* r, const char*) {
  IW_REQUIRE(r);
  return make_error(TRITONSERVER_ERROR_UNSUPPORTED,
                    "TRITONSERVER_InferenceRequestAddRawInput is not supported by inferwire-server: add the input "
                    "with its data type and shape");
}
TRITONSERVER_Error* TRITONSERVER_InferenceRequestRemoveInput(TRITONSERVER_InferenceRequest* r, const char* name) {
  IW_REQUIRE(r && name);
  auto it = std::find_if(r->inputs.begin(), r->inputs.end(), [&](const auto& in) { return in.name == name; });
  if (it == r->inputs.end()) return no_input(name);
  r->inputs.erase(it);
  return nullptr;
}
TRITONSERVER_Error* TRITONSERVER_InferenceRequestRemoveAllInputs(TRITONSERVER_InferenceRequest* r) {
  IW_REQUIRE(r);
  r->inputs.clear();
  return nullptr;
}
TRITONSERVER_Error* TRITONSERVER_InferenceRequestAppendInputData(TRITONSERVER_InferenceRequest* r, const char* name,
                                                                 const void* base, size_t byte_size,
                                                                 TRITONSERVER_MemoryType memory_type, int64_t memory_type_id) {
  return append(r, name, base, byte_size, memory_type, memory_type_id);
}
TRITONSERVER_Error* TRITONSERVER_InferenceRequestAppendInputDataWithHostPolicy(
    TRITONSERVER_InferenceRequest* r, const char* name, const void* base, size_t byte_size,
    TRITONSERVER_MemoryType memory_type, int64_t memory_type_id, const char*) {
  return append(r, name, base, byte_size, memory_type, memory_type_id);
}
TRITONSERVER_Error* TRITONSERVER_InferenceRequestAppendInputDataWithBufferAttributes(
    TRITONSERVER_InferenceRequest* r, const char* name, const void* base, TRITONSERVER_BufferAttributes* a) {
  IW_REQUIRE(a);
  return append(r, name, base, a->byte_size, a->memory_type, a->memory_type_id);
}
TRITONSERVER_Error* TRITONSERVER_InferenceRequestRemoveAllInputData(TRITONSERVER_InferenceRequest* r, const char* name) {
  IW_REQUIRE(r && name);
  auto* in = find_input(r, name);
  if (!in) return no_input(name);
  in->chunks.clear();
  return nullptr;
}
TRITONSERVER_Error* TRITONSERVER_InferenceRequestAddRequestedOutput(TRITONSERVER_InferenceRequest* r, const char* name) {
  IW_REQUIRE(r && name);
  if (std::find(r->outputs.begin(), r->outputs.end(), name) == r->outputs.end()) r->outputs.emplace_back(name);
  return nullptr;
}
TRITONSERVER_Error* TRITONSERVER_InferenceRequestRemoveRequestedOutput(TRITONSERVER_InferenceRequest* r, const char* name) {
  IW_REQUIRE(r && name);
  auto it = std::find(r->outputs.begin(), r->outputs.end(), name);
  if (it == r->outputs.end())
    return make_error(TRITONSERVER_ERROR_INVALID_ARG, std::string("requested output '") + name + "' does not exist");
  r->outputs.erase(it);
  return nullptr;
}
TRITONSERVER_Error* TRITONSERVER_InferenceRequestRemoveAllRequestedOutputs(TRITONSERVER_InferenceRequest* r) {
  IW_REQUIRE(r);
  r->outputs.clear();
  return nullptr;
}
TRITONSERVER_Error* TRITONSERVER_InferenceRequestSetReleaseCallback(TRITONSERVER_InferenceRequest* r,
                                                                    TRITONSERVER_InferenceRequestReleaseFn_t fn,
                                                                    void* userp) {
  IW_REQUIRE(r && fn);
  r->release_fn = fn;
  r->release_userp = userp;
  return nullptr;
}
TRITONSERVER_Error* TRITONSERVER_InferenceRequestSetResponseCallback(TRITONSERVER_InferenceRequest* r,
                                                                     TRITONSERVER_ResponseAllocator* allocator,
                                                                     void* allocator_userp,
                                                                     TRITONSERVER_InferenceResponseCompleteFn_t fn,
                                                                     void* userp) {
  IW_REQUIRE(r && fn);
  r->allocator = allocator;
  r->allocator_userp = allocator_userp;
  r->response_fn = fn;
  r->response_userp = userp;
  return nullptr;
}
TRITONSERVER_Error* TRITONSERVER_InferenceRequestSetStringParameter(TRITONSERVER_InferenceRequest* r, const char* key,
                                                                    const char* value) {
  IW_REQUIRE(value);
  return set_parameter(r, key, inferwire::triton_host::string_parameter(value));
}
TRITONSERVER_Error* TRITONSERVER_InferenceRequestSetIntParameter(TRITONSERVER_InferenceRequest* r, const char* key,
                                                                 const int64_t value) {
  return set_parameter(r, key, inferwire::triton_host::int_parameter(value));
}
TRITONSERVER_Error* TRITONSERVER_InferenceRequestSetBoolParameter(TRITONSERVER_InferenceRequest* r, const char* key,
                                                                  const bool value) {
  return set_parameter(r, key, inferwire::triton_host::bool_parameter(value));
}
TRITONSERVER_Error* TRITONSERVER_InferenceRequestSetDoubleParameter(TRITONSERVER_InferenceRequest* r, const char* key,
                                                                    const double value) {
  return set_parameter(r, key, inferwire::triton_host::double_parameter(value));
}

TRITONSERVER_Error* TRITONSERVER_ServerInferAsync(TRITONSERVER_Server* server, TRITONSERVER_InferenceRequest* r,
                                                  TRITONSERVER_InferenceTrace*) {
  IW_REQUIRE(server && r);
  if (!r->response_fn)
    return make_error(TRITONSERVER_ERROR_INVALID_ARG, "the request has no response callback (TRITONSERVER_InferenceRequestSetResponseCallback)");
  if (!r->release_fn)
    return make_error(TRITONSERVER_ERROR_INVALID_ARG, "the request has no release callback (TRITONSERVER_InferenceRequestSetReleaseCallback)");
  auto infer = server_function(&inferwire::triton_host::server_calls::infer);
  if (!infer) return not_now();
  return infer(r);
}

// --- the server's state and model control -----------------------------------------------------

TRITONSERVER_Error* TRITONSERVER_ServerIsLive(TRITONSERVER_Server* server, bool* live) {
  IW_REQUIRE(server && live);
  auto f = server_function(&inferwire::triton_host::server_calls::health);
  bool ready = false;
  return f ? f(*live, ready) : not_now();
}
TRITONSERVER_Error* TRITONSERVER_ServerIsReady(TRITONSERVER_Server* server, bool* ready) {
  IW_REQUIRE(server && ready);
  auto f = server_function(&inferwire::triton_host::server_calls::health);
  bool live = false;
  return f ? f(live, *ready) : not_now();
}
TRITONSERVER_Error* TRITONSERVER_ServerModelIsReady(TRITONSERVER_Server* server, const char* model_name,
                                                    const int64_t model_version, bool* ready) {
  IW_REQUIRE(server && model_name && ready);
  auto f = server_function(&inferwire::triton_host::server_calls::model_ready);
  return f ? f(model_name, model_version, *ready) : not_now();
}
TRITONSERVER_Error* TRITONSERVER_ServerModelBatchProperties(TRITONSERVER_Server* server, const char* model_name,
                                                            const int64_t model_version, uint32_t* flags, void** voidp) {
  IW_REQUIRE(server && model_name && flags);
  bool decoupled = false, batching = false;
  if (TRITONSERVER_Error* e = model_properties(model_name, model_version, decoupled, batching)) return e;
  *flags = batching ? TRITONSERVER_BATCH_FIRST_DIM : TRITONSERVER_BATCH_UNKNOWN;
  if (voidp) *voidp = nullptr;
  return nullptr;
}
TRITONSERVER_Error* TRITONSERVER_ServerModelTransactionProperties(TRITONSERVER_Server* server, const char* model_name,
                                                                  const int64_t model_version, uint32_t* txn_flags,
                                                                  void** voidp) {
  IW_REQUIRE(server && model_name && txn_flags);
  bool decoupled = false, batching = false;
  if (TRITONSERVER_Error* e = model_properties(model_name, model_version, decoupled, batching)) return e;
  *txn_flags = decoupled ? TRITONSERVER_TXN_DECOUPLED : TRITONSERVER_TXN_ONE_TO_ONE;
  if (voidp) *voidp = nullptr;
  return nullptr;
}


TRITONSERVER_Error* TRITONSERVER_ServerMetadata(TRITONSERVER_Server* server, TRITONSERVER_Message** server_metadata) {
  IW_REQUIRE(server);
  return json_message(server_function(&inferwire::triton_host::server_calls::server_metadata), server_metadata);
}
TRITONSERVER_Error* TRITONSERVER_ServerModelMetadata(TRITONSERVER_Server* server, const char* model_name,
                                                     const int64_t model_version, TRITONSERVER_Message** model_metadata) {
  IW_REQUIRE(server && model_name);
  return json_message(server_function(&inferwire::triton_host::server_calls::model_metadata), model_metadata,
                      std::string(model_name), model_version);
}
TRITONSERVER_Error* TRITONSERVER_ServerModelStatistics(TRITONSERVER_Server* server, const char* model_name,
                                                       const int64_t model_version, TRITONSERVER_Message** model_stats) {
  IW_REQUIRE(server && model_name);
  return json_message(server_function(&inferwire::triton_host::server_calls::model_statistics), model_stats,
                      std::string(model_name), model_version);
}
TRITONSERVER_Error* TRITONSERVER_ServerModelConfig(TRITONSERVER_Server* server, const char* model_name,
                                                   const int64_t model_version, const uint32_t config_version,
                                                   TRITONSERVER_Message** model_config) {
  IW_REQUIRE(server && model_name);
  if (config_version != 1)
    return make_error(TRITONSERVER_ERROR_UNSUPPORTED, "model configuration version " + std::to_string(config_version) +
                                                          " is not supported, only version 1 is");
  return json_message(server_function(&inferwire::triton_host::server_calls::model_config), model_config,
                      std::string(model_name), model_version);
}
TRITONSERVER_Error* TRITONSERVER_ServerModelIndex(TRITONSERVER_Server* server, uint32_t flags,
                                                  TRITONSERVER_Message** model_index) {
  IW_REQUIRE(server);
  return json_message(server_function(&inferwire::triton_host::server_calls::model_index), model_index,
                      (flags & TRITONSERVER_INDEX_FLAG_READY) != 0);
}
TRITONSERVER_Error* TRITONSERVER_ServerLoadModelWithParameters(TRITONSERVER_Server* server, const char* model_name,
                                                               const TRITONSERVER_Parameter** parameters,
                                                               const uint64_t parameter_count) {
  IW_REQUIRE(server && model_name && (parameters || parameter_count == 0));
  auto f = server_function(&inferwire::triton_host::server_calls::load);
  if (!f) return not_now();
  std::optional<std::string> config;
  std::vector<std::pair<std::string, std::string>> files;
  for (uint64_t i = 0; i < parameter_count; ++i) {
    const TRITONSERVER_Parameter* p = parameters[i];
    if (!p) return null_argument("parameter");
    if (p->name == "config" && p->type == TRITONSERVER_PARAMETER_STRING) config = p->text;
    else if (p->name.rfind("file:", 0) == 0 && p->type == TRITONSERVER_PARAMETER_BYTES)
      files.emplace_back(p->name.substr(5), p->text);
    else
      return make_error(TRITONSERVER_ERROR_INVALID_ARG, "unexpected load parameter '" + p->name +
                                                            "': 'config' (a string) or 'file:<path>' (bytes) are taken");
  }
  return f(model_name, config ? &*config : nullptr, files);
}
TRITONSERVER_Error* TRITONSERVER_ServerLoadModel(TRITONSERVER_Server* server, const char* model_name) {
  return TRITONSERVER_ServerLoadModelWithParameters(server, model_name, nullptr, 0);
}
TRITONSERVER_Error* TRITONSERVER_ServerUnloadModel(TRITONSERVER_Server* server, const char* model_name) {
  IW_REQUIRE(server && model_name);
  auto f = server_function(&inferwire::triton_host::server_calls::unload);
  return f ? f(model_name, false) : not_now();
}
TRITONSERVER_Error* TRITONSERVER_ServerUnloadModelAndDependents(TRITONSERVER_Server* server, const char* model_name) {
  IW_REQUIRE(server && model_name);
  auto f = server_function(&inferwire::triton_host::server_calls::unload);
  return f ? f(model_name, true) : not_now();
}

// --- responses --------------------------------------------------------------------------------

TRITONSERVER_Error* TRITONSERVER_InferenceResponseDelete(TRITONSERVER_InferenceResponse* response) {
  delete response;
  return nullptr;
}
TRITONSERVER_Error* TRITONSERVER_InferenceResponseError(TRITONSERVER_InferenceResponse* response) {
  if (!response || !response->has_error) return nullptr;
  return make_error(response->error.code, response->error.message);  // the caller owns it
}
TRITONSERVER_Error* TRITONSERVER_InferenceResponseModel(TRITONSERVER_InferenceResponse* response, const char** model_name,
                                                        int64_t* model_version) {
  IW_REQUIRE(response && model_name && model_version);
  *model_name = response->model.c_str();
  *model_version = response->version;
  return nullptr;
}
TRITONSERVER_Error* TRITONSERVER_InferenceResponseId(TRITONSERVER_InferenceResponse* response, const char** request_id) {
  IW_REQUIRE(response && request_id);
  *request_id = response->id.c_str();
  return nullptr;
}
TRITONSERVER_Error* TRITONSERVER_InferenceResponseParameterCount(TRITONSERVER_InferenceResponse* response, uint32_t* count) {
  IW_REQUIRE(response && count);
  *count = static_cast<uint32_t>(response->parameters.size());
  return nullptr;
}
TRITONSERVER_Error* TRITONSERVER_InferenceResponseParameter(TRITONSERVER_InferenceResponse* response, const uint32_t index,
                                                            const char** name, TRITONSERVER_ParameterType* type,
                                                            const void** vvalue) {
  IW_REQUIRE(response && name && type && vvalue);
  return inferwire::triton_host::parameter_at(response->parameters, index, "response", name, type, vvalue);
}
TRITONSERVER_Error* TRITONSERVER_InferenceResponseOutputCount(TRITONSERVER_InferenceResponse* response, uint32_t* count) {
  IW_REQUIRE(response && count);
  *count = static_cast<uint32_t>(response->outputs.size());
  return nullptr;
}
TRITONSERVER_Error* TRITONSERVER_InferenceResponseOutput(TRITONSERVER_InferenceResponse* response, const uint32_t index,
                                                         const char** name, TRITONSERVER_DataType* datatype,
                                                         const int64_t** shape, uint64_t* dim_count, const void** base,
                                                         size_t* byte_size, TRITONSERVER_MemoryType* memory_type,
                                                         int64_t* memory_type_id, void** userp) {
  IW_REQUIRE(response && name && datatype && shape && dim_count && base && byte_size && memory_type && memory_type_id && userp);
  if (index >= response->outputs.size())
    return out_of_bounds(index, "response", response->outputs.size(), "outputs");
  const auto& o = response->outputs[index];
  *name = o.name.c_str();
  *datatype = o.datatype;
  *shape = o.shape.data();
  *dim_count = o.shape.size();
  *base = o.base;
  *byte_size = o.size;
  *memory_type = o.memory_type;
  *memory_type_id = o.memory_type_id;
  *userp = o.buffer_userp;
  return nullptr;
}
TRITONSERVER_Error* TRITONSERVER_InferenceResponseOutputClassificationLabel(TRITONSERVER_InferenceResponse* response,
                                                                            const uint32_t index, const size_t,
                                                                            const char** label) {
  IW_REQUIRE(response && label);
  if (index >= response->outputs.size())
    return out_of_bounds(index, "response", response->outputs.size(), "outputs");
  *label = nullptr;  // in-process responses carry no labels
  return nullptr;
}

}  // extern "C"
