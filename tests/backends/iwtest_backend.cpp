// SPDX-License-Identifier: Apache-2.0
// A Triton backend for inferwire-server's tests, written against <inferwire/triton/backend_api.h>
// only. What each model does is its config parameter `mode`:
//   identity      OUTPUT<i> = INPUT<i> for every input (any type); COUNT (INT32, one per
//                 batch row) = how many requests the execution got; PARAMS (BYTES, one per
//                 row) = the request's parameters as "key=value;..." sorted by key
//   late          identity, answered and released from another thread 20 ms after Execute
//   error         each request answered with the error "iwtest: the model failed"
//   fail          TRITONBACKEND_ModelInstanceExecute itself fails
//   twice         identity sent twice; the second send must be refused (logged)
//   silent        releases each request without answering it
//   repeat        decoupled: for IN (INT32 [n]) sends n responses OUT = [IN[i]] from another
//                 thread, then the final flag; the request is released at once
//   wait_cancel   decoupled: waits (up to 20 s) until the request is cancelled, then answers
//                 "iwtest: cancelled" and the final flag
//   hang          keeps every request, never answers (shutdown must still finish)
//   bls           runs its INPUT0 through model iw_identity in the server (in-process
//                 inference with a response allocator) and answers with that model's OUTPUT0;
//                 a request parameter "target" names another model to call instead
// Built three more ways: IWTEST_NEEDS_MINOR (a backend that needs a newer API and refuses to
// initialize), IWTEST_NO_EXECUTE (no TRITONBACKEND_ModelInstanceExecute) and
// IWTEST_UNDEFINED (a library that names a function no library defines).
#include <inferwire/triton/backend_api.h>

#include <algorithm>
#include <atomic>
#include <condition_variable>
#include <cstdlib>
#include <future>
#include <chrono>
#include <cstring>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#ifdef IWTEST_UNDEFINED
extern "C" int iwtest_function_no_library_defines();
#endif

namespace {

TRITONSERVER_Error* fail(TRITONSERVER_Error_Code code, const std::string& m) { return TRITONSERVER_ErrorNew(code, m.c_str()); }

#define CHECKED(x)                                 \
  do {                                             \
    if (TRITONSERVER_Error* e__ = (x)) return e__; \
  } while (false)

void log_error(TRITONSERVER_Error* e, const char* what) {
  if (!e) return;
  const std::string m = std::string("iwtest: ") + what + ": " + TRITONSERVER_ErrorMessage(e);
  TRITONSERVER_LogMessage(TRITONSERVER_LOG_ERROR, __FILE__, __LINE__, m.c_str());
  TRITONSERVER_ErrorDelete(e);
}

// The value of config parameter `mode`, read with a plain search of the JSON text (the test
// configurations are ours): "mode":{"string_value":"<mode>"}.
std::string mode_of(const std::string& json) {
  const std::string key = "\"mode\":{\"string_value\":\"";
  const auto at = json.find(key);
  if (at == std::string::npos) return "identity";
  const auto end = json.find('"', at + key.size());
  return json.substr(at + key.size(), end - at - key.size());
}

struct model_state {
  std::string mode;
  std::mutex mu;
  std::vector<std::thread> threads;  // joined when the model finalizes
  std::vector<TRITONBACKEND_Request*> kept;  // mode hang
  std::atomic<bool> stopping{false};
};

model_state* state_of(TRITONBACKEND_ModelInstance* instance) {
  TRITONBACKEND_Model* model = nullptr;
  void* vstate = nullptr;
  if (TRITONBACKEND_ModelInstanceModel(instance, &model) || TRITONBACKEND_ModelState(model, &vstate)) return nullptr;
  return static_cast<model_state*>(vstate);
}

std::string parameters_text(TRITONBACKEND_Request* request) {
  uint32_t n = 0;
  TRITONBACKEND_RequestParameterCount(request, &n);
  std::map<std::string, std::string> sorted;
  for (uint32_t i = 0; i < n; ++i) {
    const char* key = nullptr;
    TRITONSERVER_ParameterType type;
    const void* value = nullptr;
    if (TRITONSERVER_Error* e = TRITONBACKEND_RequestParameter(request, i, &key, &type, &value)) {
      log_error(e, "parameter");
      continue;
    }
    std::string v;
    switch (type) {
      case TRITONSERVER_PARAMETER_STRING: v = static_cast<const char*>(value); break;
      case TRITONSERVER_PARAMETER_INT: v = std::to_string(*static_cast<const int64_t*>(value)); break;
      case TRITONSERVER_PARAMETER_BOOL: v = *static_cast<const bool*>(value) ? "true" : "false"; break;
      case TRITONSERVER_PARAMETER_DOUBLE: v = std::to_string(*static_cast<const double*>(value)); break;
      default: v = "?";
    }
    sorted[key] = v;
  }
  std::string out;
  for (const auto& [k, v] : sorted) out += k + "=" + v + ";";
  return out;
}

// Adds output `name` of `type` and `shape` holding `bytes`.
TRITONSERVER_Error* add_output(TRITONBACKEND_Response* response, const char* name, TRITONSERVER_DataType type,
                               const std::vector<int64_t>& shape, const void* bytes, uint64_t size) {
  TRITONBACKEND_Output* out = nullptr;
  CHECKED(TRITONBACKEND_ResponseOutput(response, &out, name, type, shape.data(), static_cast<uint32_t>(shape.size())));
  void* buffer = nullptr;
  TRITONSERVER_MemoryType mt = TRITONSERVER_MEMORY_CPU;
  int64_t mt_id = 0;
  CHECKED(TRITONBACKEND_OutputBuffer(out, &buffer, size, &mt, &mt_id));
  if (mt == TRITONSERVER_MEMORY_GPU) return fail(TRITONSERVER_ERROR_INTERNAL, "got GPU memory");
  TRITONSERVER_BufferAttributes* attributes = nullptr;
  CHECKED(TRITONBACKEND_OutputBufferAttributes(out, &attributes));
  if (size) std::memcpy(buffer, bytes, size);
  return nullptr;
}

bool requested(TRITONBACKEND_Request* request, const char* name) {
  uint32_t n = 0;
  TRITONBACKEND_RequestOutputCount(request, &n);
  for (uint32_t i = 0; i < n; ++i) {
    const char* o = nullptr;
    if (!TRITONBACKEND_RequestOutputName(request, i, &o) && std::strcmp(o, name) == 0) return true;
  }
  return false;
}

// The identity response of `request`, with COUNT = `count` and PARAMS when asked for.
TRITONSERVER_Error* identity_response(TRITONBACKEND_Request* request, TRITONBACKEND_Response* response, int32_t count) {
  uint32_t inputs = 0;
  CHECKED(TRITONBACKEND_RequestInputCount(request, &inputs));
  int64_t rows = 1;
  bool batched = false;
  for (uint32_t i = 0; i < inputs; ++i) {
    TRITONBACKEND_Input* in = nullptr;
    CHECKED(TRITONBACKEND_RequestInputByIndex(request, i, &in));
    const char* name = nullptr;
    TRITONSERVER_DataType type;
    const int64_t* shape = nullptr;
    uint32_t dims = 0;
    uint64_t size = 0;
    uint32_t buffers = 0;
    CHECKED(TRITONBACKEND_InputProperties(in, &name, &type, &shape, &dims, &size, &buffers));
    const void* data = nullptr;
    uint64_t got = 0;
    TRITONSERVER_MemoryType mt;
    int64_t mt_id;
    CHECKED(TRITONBACKEND_InputBuffer(in, 0, &data, &got, &mt, &mt_id));
    std::string in_name = name;
    if (in_name.rfind("INPUT", 0) != 0) continue;  // control tensors of sequence models
    if (dims > 1) {
      rows = shape[0];
      batched = true;
    }
    const std::string out_name = "OUTPUT" + in_name.substr(5);
    CHECKED(add_output(response, out_name.c_str(), type, std::vector<int64_t>(shape, shape + dims), data, got));
  }
  if (requested(request, "COUNT") || requested(request, "PARAMS")) {
    const std::vector<int64_t> shape = batched ? std::vector<int64_t>{rows, 1} : std::vector<int64_t>{1};
    if (requested(request, "COUNT")) {
      std::vector<int32_t> c(static_cast<std::size_t>(rows), count);
      CHECKED(add_output(response, "COUNT", TRITONSERVER_TYPE_INT32, shape, c.data(), c.size() * 4));
    }
    if (requested(request, "PARAMS")) {
      const std::string text = parameters_text(request);
      std::string bytes;
      for (int64_t r = 0; r < rows; ++r) {
        const auto len = static_cast<uint32_t>(text.size());
        bytes.append(reinterpret_cast<const char*>(&len), 4).append(text);
      }
      CHECKED(add_output(response, "PARAMS", TRITONSERVER_TYPE_BYTES, shape, bytes.data(), bytes.size()));
    }
  }
  return nullptr;
}

void answer_identity(TRITONBACKEND_Request* request, int32_t count, bool twice = false) {
  TRITONBACKEND_Response* response = nullptr;
  if (TRITONSERVER_Error* e = TRITONBACKEND_ResponseNew(&response, request)) return log_error(e, "response");
  TRITONSERVER_Error* built = identity_response(request, response, count);
  log_error(TRITONBACKEND_ResponseSend(response, TRITONSERVER_RESPONSE_COMPLETE_FINAL, built), "send");
  if (built) TRITONSERVER_ErrorDelete(built);
  if (twice) {
    TRITONBACKEND_Response* again = nullptr;
    if (!TRITONBACKEND_ResponseNew(&again, request)) {
      TRITONSERVER_Error* refused = TRITONBACKEND_ResponseSend(again, TRITONSERVER_RESPONSE_COMPLETE_FINAL, nullptr);
      // The host must refuse a second response of a model that is not decoupled.
      if (!refused) TRITONSERVER_LogMessage(TRITONSERVER_LOG_ERROR, __FILE__, __LINE__, "iwtest: a second response was accepted");
      else log_error(refused, "second response refused as it should be");
    }
  }
}

void release(TRITONBACKEND_Request* request) { log_error(TRITONBACKEND_RequestRelease(request, TRITONSERVER_REQUEST_RELEASE_ALL), "release"); }

void report(TRITONBACKEND_ModelInstance* instance, TRITONBACKEND_Request* request, uint64_t start, uint64_t end) {
  log_error(TRITONBACKEND_ModelInstanceReportStatistics(instance, request, true, start, start + 1000, end - 1000, end), "statistics");
}

uint64_t now_ns() {
  return static_cast<uint64_t>(std::chrono::duration_cast<std::chrono::nanoseconds>(
                                   std::chrono::steady_clock::now().time_since_epoch()).count());
}

// mode repeat: the decoupled responses, from this thread.
void repeat_responses(TRITONBACKEND_ResponseFactory* factory, std::vector<int32_t> values) {
  for (int32_t v : values) {
    TRITONBACKEND_Response* r = nullptr;
    if (TRITONSERVER_Error* e = TRITONBACKEND_ResponseNewFromFactory(&r, factory)) {
      log_error(e, "response");
      break;
    }
    TRITONSERVER_Error* built = add_output(r, "OUT", TRITONSERVER_TYPE_INT32, {1}, &v, 4);
    log_error(TRITONBACKEND_ResponseSend(r, 0, built), "send");
    if (built) TRITONSERVER_ErrorDelete(built);
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  log_error(TRITONBACKEND_ResponseFactorySendFlags(factory, TRITONSERVER_RESPONSE_COMPLETE_FINAL), "final");
  TRITONBACKEND_ResponseFactoryDelete(factory);
}

void wait_for_cancel(TRITONBACKEND_ResponseFactory* factory, model_state* m) {
  const auto until = std::chrono::steady_clock::now() + std::chrono::seconds(20);
  bool cancelled = false;
  while (!cancelled && !m->stopping && std::chrono::steady_clock::now() < until) {
    log_error(TRITONBACKEND_ResponseFactoryIsCancelled(factory, &cancelled), "is cancelled");
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  TRITONBACKEND_Response* r = nullptr;
  if (!TRITONBACKEND_ResponseNewFromFactory(&r, factory)) {
    TRITONSERVER_Error* e = fail(cancelled ? TRITONSERVER_ERROR_CANCELLED : TRITONSERVER_ERROR_INTERNAL,
                                 cancelled ? "iwtest: cancelled" : "iwtest: never cancelled");
    log_error(TRITONBACKEND_ResponseSend(r, TRITONSERVER_RESPONSE_COMPLETE_FINAL, e), "send");
    TRITONSERVER_ErrorDelete(e);
  }
  TRITONBACKEND_ResponseFactoryDelete(factory);
}

// --- mode bls: an in-process inference on another model -------------------------------------

TRITONSERVER_Error* host_alloc(TRITONSERVER_ResponseAllocator*, const char*, size_t byte_size, TRITONSERVER_MemoryType,
                               int64_t, void*, void** buffer, void** buffer_userp, TRITONSERVER_MemoryType* actual_type,
                               int64_t* actual_id) {
  *buffer = std::malloc(byte_size ? byte_size : 1);
  *buffer_userp = nullptr;
  *actual_type = TRITONSERVER_MEMORY_CPU;
  *actual_id = 0;
  return *buffer ? nullptr : fail(TRITONSERVER_ERROR_UNAVAILABLE, "out of memory");
}

TRITONSERVER_Error* host_release(TRITONSERVER_ResponseAllocator*, void* buffer, void*, size_t, TRITONSERVER_MemoryType,
                                 int64_t) {
  std::free(buffer);
  return nullptr;
}

struct bls_wait {
  std::promise<TRITONSERVER_InferenceResponse*> response;
  std::promise<void> released;
};

void on_bls_release(TRITONSERVER_InferenceRequest*, const uint32_t, void* userp) {
  static_cast<bls_wait*>(userp)->released.set_value();
}

void on_bls_response(TRITONSERVER_InferenceResponse* response, const uint32_t, void* userp) {
  static_cast<bls_wait*>(userp)->response.set_value(response);
}

// Calls `target` with the request's INPUT0 and answers the request with the target's OUTPUT0.
TRITONSERVER_Error* answer_through(TRITONBACKEND_ModelInstance* instance, TRITONBACKEND_Request* request,
                                   const std::string& target) {
  TRITONBACKEND_Model* model = nullptr;
  TRITONSERVER_Server* server = nullptr;
  CHECKED(TRITONBACKEND_ModelInstanceModel(instance, &model));
  CHECKED(TRITONBACKEND_ModelServer(model, &server));
  bool ready = false;
  CHECKED(TRITONSERVER_ServerModelIsReady(server, target.c_str(), -1, &ready));
  if (!ready) return fail(TRITONSERVER_ERROR_UNAVAILABLE, "iwtest: model '" + target + "' is not ready");
  TRITONBACKEND_Input* in = nullptr;
  CHECKED(TRITONBACKEND_RequestInput(request, "INPUT0", &in));
  TRITONSERVER_DataType type;
  const int64_t* shape = nullptr;
  uint32_t dims = 0;
  CHECKED(TRITONBACKEND_InputProperties(in, nullptr, &type, &shape, &dims, nullptr, nullptr));
  const void* data = nullptr;
  uint64_t size = 0;
  TRITONSERVER_MemoryType mt;
  int64_t mt_id;
  CHECKED(TRITONBACKEND_InputBuffer(in, 0, &data, &size, &mt, &mt_id));

  TRITONSERVER_ResponseAllocator* allocator = nullptr;
  CHECKED(TRITONSERVER_ResponseAllocatorNew(&allocator, host_alloc, host_release, nullptr));
  TRITONSERVER_InferenceRequest* call = nullptr;
  CHECKED(TRITONSERVER_InferenceRequestNew(&call, server, target.c_str(), -1));
  bls_wait wait;
  auto response = wait.response.get_future();
  auto released = wait.released.get_future();
  CHECKED(TRITONSERVER_InferenceRequestSetId(call, "bls"));
  CHECKED(TRITONSERVER_InferenceRequestAddInput(call, "INPUT0", type, shape, dims));
  CHECKED(TRITONSERVER_InferenceRequestAppendInputData(call, "INPUT0", data, size, mt, mt_id));
  CHECKED(TRITONSERVER_InferenceRequestAddRequestedOutput(call, "OUTPUT0"));
  CHECKED(TRITONSERVER_InferenceRequestSetReleaseCallback(call, on_bls_release, &wait));
  CHECKED(TRITONSERVER_InferenceRequestSetResponseCallback(call, allocator, nullptr, on_bls_response, &wait));
  if (TRITONSERVER_Error* e = TRITONSERVER_ServerInferAsync(server, call, nullptr)) {
    TRITONSERVER_InferenceRequestDelete(call);
    TRITONSERVER_ResponseAllocatorDelete(allocator);
    return e;
  }
  TRITONSERVER_InferenceResponse* answer = response.get();
  released.wait();
  TRITONSERVER_InferenceRequestDelete(call);
  TRITONSERVER_Error* result = TRITONSERVER_InferenceResponseError(answer);
  TRITONBACKEND_Response* mine = nullptr;
  if (!result) result = TRITONBACKEND_ResponseNew(&mine, request);
  uint32_t outputs = 0;
  if (!result) result = TRITONSERVER_InferenceResponseOutputCount(answer, &outputs);
  for (uint32_t i = 0; !result && i < outputs; ++i) {
    const char* name = nullptr;
    TRITONSERVER_DataType otype;
    const int64_t* oshape = nullptr;
    uint64_t odims = 0;
    const void* base = nullptr;
    size_t bytes = 0;
    TRITONSERVER_MemoryType omt;
    int64_t omt_id;
    void* userp = nullptr;
    result = TRITONSERVER_InferenceResponseOutput(answer, i, &name, &otype, &oshape, &odims, &base, &bytes, &omt, &omt_id, &userp);
    if (!result)
      result = add_output(mine, name, otype, std::vector<int64_t>(oshape, oshape + odims), base, bytes);
  }
  TRITONSERVER_InferenceResponseDelete(answer);  // gives the output buffers back to host_release
  TRITONSERVER_ResponseAllocatorDelete(allocator);
  if (!mine) return result;  // not answered: the caller answers with the error
  log_error(TRITONBACKEND_ResponseSend(mine, TRITONSERVER_RESPONSE_COMPLETE_FINAL, result), "send");
  if (result) TRITONSERVER_ErrorDelete(result);
  return nullptr;
}

}  // namespace

extern "C" {

TRITONSERVER_Error* TRITONBACKEND_Initialize(TRITONBACKEND_Backend* backend) {
  uint32_t major = 0, minor = 0;
  CHECKED(TRITONBACKEND_ApiVersion(&major, &minor));
#ifdef IWTEST_NEEDS_MINOR
  const uint32_t needed = IWTEST_NEEDS_MINOR;
#else
  const uint32_t needed = TRITONBACKEND_API_VERSION_MINOR;
#endif
  if (major != TRITONBACKEND_API_VERSION_MAJOR || minor < needed)
    return fail(TRITONSERVER_ERROR_UNSUPPORTED, "triton backend API version does not support this backend");
  TRITONSERVER_Message* config = nullptr;
  CHECKED(TRITONBACKEND_BackendConfig(backend, &config));
  const char* json = nullptr;
  size_t size = 0;
  CHECKED(TRITONSERVER_MessageSerializeToJson(config, &json, &size));
  const std::string m = "iwtest: backend configuration " + std::string(json, size);
  TRITONSERVER_LogMessage(TRITONSERVER_LOG_INFO, __FILE__, __LINE__, m.c_str());
  TRITONSERVER_MessageDelete(config);
#ifdef IWTEST_UNDEFINED
  iwtest_function_no_library_defines();
#endif
  return nullptr;
}

TRITONSERVER_Error* TRITONBACKEND_ModelInitialize(TRITONBACKEND_Model* model) {
  TRITONSERVER_Message* config = nullptr;
  CHECKED(TRITONBACKEND_ModelConfig(model, 1, &config));
  const char* json = nullptr;
  size_t size = 0;
  CHECKED(TRITONSERVER_MessageSerializeToJson(config, &json, &size));
  auto* state = new model_state;
  state->mode = mode_of(std::string(json, size));
  TRITONSERVER_MessageDelete(config);
  return TRITONBACKEND_ModelSetState(model, state);
}

TRITONSERVER_Error* TRITONBACKEND_ModelFinalize(TRITONBACKEND_Model* model) {
  void* vstate = nullptr;
  CHECKED(TRITONBACKEND_ModelState(model, &vstate));
  auto* state = static_cast<model_state*>(vstate);
  state->stopping = true;
  for (auto& t : state->threads) t.join();
  delete state;
  return nullptr;
}

#ifndef IWTEST_NO_EXECUTE
TRITONSERVER_Error* TRITONBACKEND_ModelInstanceExecute(TRITONBACKEND_ModelInstance* instance,
                                                       TRITONBACKEND_Request** requests, const uint32_t count) {
  model_state* m = state_of(instance);
  if (!m) return fail(TRITONSERVER_ERROR_INTERNAL, "no model state");
  const std::string& mode = m->mode;
  if (mode == "fail") return fail(TRITONSERVER_ERROR_UNAVAILABLE, "iwtest: execute failed");
  const uint64_t start = now_ns();
  for (uint32_t i = 0; i < count; ++i) {
    TRITONBACKEND_Request* request = requests[i];
    if (mode == "identity" || mode == "twice") {
      answer_identity(request, static_cast<int32_t>(count), mode == "twice");
      report(instance, request, start, now_ns() + 2000);
      release(request);
    } else if (mode == "late") {
      std::lock_guard lock(m->mu);
      m->threads.emplace_back([request, count] {
        std::this_thread::sleep_for(std::chrono::milliseconds(20));
        answer_identity(request, static_cast<int32_t>(count));
        release(request);
      });
    } else if (mode == "error") {
      TRITONBACKEND_Response* r = nullptr;
      if (!TRITONBACKEND_ResponseNew(&r, request)) {
        TRITONSERVER_Error* e = fail(TRITONSERVER_ERROR_INVALID_ARG, "iwtest: the model failed");
        log_error(TRITONBACKEND_ResponseSend(r, TRITONSERVER_RESPONSE_COMPLETE_FINAL, e), "send");
        TRITONSERVER_ErrorDelete(e);
      }
      release(request);
    } else if (mode == "silent") {
      release(request);
    } else if (mode == "repeat" || mode == "wait_cancel") {
      TRITONBACKEND_ResponseFactory* factory = nullptr;
      CHECKED(TRITONBACKEND_ResponseFactoryNew(&factory, request));
      std::vector<int32_t> values;
      TRITONBACKEND_Input* in = nullptr;
      if (mode == "repeat" && !TRITONBACKEND_RequestInput(request, "IN", &in)) {
        const void* data = nullptr;
        uint64_t size = 0;
        TRITONSERVER_MemoryType mt;
        int64_t id;
        if (!TRITONBACKEND_InputBuffer(in, 0, &data, &size, &mt, &id)) {
          values.resize(size / 4);
          std::memcpy(values.data(), data, values.size() * 4);
        }
      }
      release(request);
      std::lock_guard lock(m->mu);
      if (mode == "repeat") m->threads.emplace_back(repeat_responses, factory, std::move(values));
      else m->threads.emplace_back(wait_for_cancel, factory, m);
    } else if (mode == "bls") {
      std::string target = "iw_identity";
      uint32_t n = 0;
      TRITONBACKEND_RequestParameterCount(request, &n);
      for (uint32_t k = 0; k < n; ++k) {
        const char* key = nullptr;
        TRITONSERVER_ParameterType type;
        const void* value = nullptr;
        if (!TRITONBACKEND_RequestParameter(request, k, &key, &type, &value) && std::strcmp(key, "target") == 0 &&
            type == TRITONSERVER_PARAMETER_STRING)
          target = static_cast<const char*>(value);
      }
      if (TRITONSERVER_Error* e = answer_through(instance, request, target)) {
        // Not answered yet (the call failed before the response was sent): answer with the error.
        TRITONBACKEND_Response* r = nullptr;
        if (!TRITONBACKEND_ResponseNew(&r, request))
          log_error(TRITONBACKEND_ResponseSend(r, TRITONSERVER_RESPONSE_COMPLETE_FINAL, e), "send");
        TRITONSERVER_ErrorDelete(e);
      }
      release(request);
    } else if (mode == "hang") {
      std::lock_guard lock(m->mu);
      m->kept.push_back(request);
    } else {
      return fail(TRITONSERVER_ERROR_INVALID_ARG, "iwtest: unknown mode '" + mode + "'");
    }
  }
  log_error(TRITONBACKEND_ModelInstanceReportBatchStatistics(instance, count, start, start + 1000, now_ns(), now_ns() + 1000),
            "batch statistics");
  return nullptr;
}
#endif

}  // extern "C"
