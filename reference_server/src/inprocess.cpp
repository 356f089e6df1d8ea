// SPDX-License-Identifier: Apache-2.0
#include "inprocess.hpp"

#include "gpu.hpp"
#include "host.hpp"
#include "server.hpp"
#include "service.hpp"
#include "triton_backend.hpp"

#include <inferwire/v2/json.hpp>

#include <boost/json/serialize.hpp>

#include <cstring>

namespace inferwire::server {

namespace {


// The request as the server's value type. Input data stays where the backend has it (it keeps
// it until the release callback) when it is one host buffer; pieces or device memory are
// gathered into host memory.
status to_request(const TRITONSERVER_InferenceRequest& r, v2::infer_request& out) {
  out.id = r.id;
  for (const auto& in : r.inputs) {
    auto& t = out.inputs.emplace_back();
    t.name = in.name;
    t.datatype = static_cast<data_type>(in.datatype);
    t.shape.assign(in.shape.begin(), in.shape.end());
    t.encoding = v2::tensor_encoding::binary;
    if (in.chunks.size() == 1 && in.chunks[0].memory_type != TRITONSERVER_MEMORY_GPU) {
      t.data = v2::tensor_data::view(
          std::span<const std::byte>(static_cast<const std::byte*>(in.chunks[0].base), in.chunks[0].size));
      continue;
    }
    std::size_t total = 0;
    for (const auto& c : in.chunks) total += c.size;
    std::string bytes(total, '\0');
    std::size_t at = 0;
    for (const auto& c : in.chunks) {
      auto* dst = reinterpret_cast<std::byte*>(bytes.data()) + at;
      if (c.memory_type == TRITONSERVER_MEMORY_GPU) {
        const placement src{const_cast<std::byte*>(static_cast<const std::byte*>(c.base)), c.size,
                            static_cast<int>(c.memory_type_id)};
        if (auto st = gpu_copy({dst, c.size, -1}, src, c.size)) return st;
      } else if (c.size) {
        std::memcpy(dst, c.base, c.size);
      }
      at += c.size;
    }
    t.data = v2::tensor_data::own(std::move(bytes));
  }
  for (const auto& o : r.outputs) out.outputs.emplace_back().name = o;
  for (const auto& p : r.parameters) switch (p.type) {
      case TRITONSERVER_PARAMETER_STRING: out.parameters.set(p.name, p.text); break;
      case TRITONSERVER_PARAMETER_INT: out.parameters.set(p.name, p.integer); break;
      case TRITONSERVER_PARAMETER_BOOL: out.parameters.set(p.name, p.boolean); break;
      case TRITONSERVER_PARAMETER_DOUBLE: out.parameters.set(p.name, p.number); break;
      default: return {errc::invalid_arg, "parameter '" + p.name + "' has a type requests cannot carry"};
    }
  // Sequence, priority and timeout as the network protocols carry them.
  if (r.string_correlation_id) out.parameters.set("sequence_id", r.correlation_id_string);
  else if (r.correlation_id) out.parameters.set("sequence_id", r.correlation_id);
  if (r.flags & TRITONSERVER_REQUEST_FLAG_SEQUENCE_START) out.parameters.set("sequence_start", true);
  if (r.flags & TRITONSERVER_REQUEST_FLAG_SEQUENCE_END) out.parameters.set("sequence_end", true);
  if (r.priority) out.parameters.set("priority", r.priority);
  if (r.timeout_us) out.parameters.set("timeout", r.timeout_us);
  return {};
}

// A response in the backend's hands: outputs in buffers from its allocator.
TRITONSERVER_InferenceResponse* to_response(const TRITONSERVER_InferenceRequest& r, const v2::infer_response& v,
                                            const status& st) {
  auto resp = std::make_unique<TRITONSERVER_InferenceResponse>();
  resp->model = r.model;
  resp->version = v.model_version.empty() ? std::max<std::int64_t>(r.version, 0) : std::stoll(v.model_version);
  resp->id = r.id;
  auto fail = [&](status e) {
    resp->outputs.clear();
    resp->has_error = true;
    resp->error = {code_of(e.code()), e.message()};
    return resp.release();
  };
  if (st) return fail(st);
  TRITONSERVER_ResponseAllocator* a = r.allocator;
  resp->allocator = a;
  if (a && a->start)
    if (TRITONSERVER_Error* e = a->start(a, r.allocator_userp)) {
      status why{errc::internal, e->message};
      TRITONSERVER_ErrorDelete(e);
      return fail(why);
    }
  for (const auto& o : v.outputs) {
    const auto bytes = o.data.bytes();
    auto& out = resp->outputs.emplace_back();
    out.name = o.name;
    out.datatype = static_cast<TRITONSERVER_DataType>(o.datatype);
    out.shape.assign(o.shape.begin(), o.shape.end());
    out.size = bytes.size();
    if (!a || !a->alloc) {
      out.storage.assign(reinterpret_cast<const char*>(bytes.data()), bytes.size());
      out.base = out.storage.data();
      continue;
    }
    void* buffer = nullptr;
    TRITONSERVER_MemoryType type = TRITONSERVER_MEMORY_CPU;
    std::int64_t type_id = 0;
    if (TRITONSERVER_Error* e = a->alloc(a, o.name.c_str(), bytes.size(), TRITONSERVER_MEMORY_CPU, 0, r.allocator_userp,
                                         &buffer, &out.buffer_userp, &type, &type_id)) {
      status why{errc::internal, "the response allocator failed for output '" + o.name + "': " + e->message};
      TRITONSERVER_ErrorDelete(e);
      return fail(why);
    }
    out.base = buffer;
    out.memory_type = type;
    out.memory_type_id = type_id;
    if (bytes.empty()) continue;
    if (!buffer) return fail({errc::internal, "the response allocator gave no buffer for output '" + o.name + "'"});
    if (type == TRITONSERVER_MEMORY_GPU) {
      if (auto e = gpu_copy({static_cast<std::byte*>(buffer), bytes.size(), static_cast<int>(type_id)},
                            {const_cast<std::byte*>(bytes.data()), bytes.size(), -1}, bytes.size()))
        return fail(e);
    } else {
      std::memcpy(buffer, bytes.data(), bytes.size());
    }
  }
  return resp.release();
}

// One in-process call: what its hooks and completion share.
struct bls_call {
  TRITONSERVER_InferenceRequest* request = nullptr;
  response_sink sink;  // decoupled models' responses
};

TRITONSERVER_Error* start(server_state& s, TRITONSERVER_InferenceRequest* r) {
  auto call = make_call();
  auto shared = std::make_shared<bls_call>();
  shared->request = r;
  shared->sink = [r](v2::infer_response&& v) {
    r->response_fn(to_response(*r, v, {}), 0, r->response_userp);
    return true;
  };
  auto decode = [&](infer_call& c) -> decoded {
    if (auto st = to_request(*r, c.request)) return decoded(st);
    if (c.model->config->decoupled) c.hooks.sink = &shared->sink;
    return {};
  };
  infer_hooks hooks{nullptr, [r] { return r->cancelled.load(std::memory_order_relaxed); }};
  service svc(s);
  const std::string version = r->version > 0 ? std::to_string(r->version) : "";
  const infer_start started = svc.start_infer(
      call, r->model, version, decode, std::move(hooks), [call, shared](status st) {
        TRITONSERVER_InferenceRequest* req = shared->request;
        const bool decoupled = call->model && call->model->config->decoupled;
        if (decoupled && !st) req->response_fn(nullptr, TRITONSERVER_RESPONSE_COMPLETE_FINAL, req->response_userp);
        else req->response_fn(to_response(*req, call->response, st), TRITONSERVER_RESPONSE_COMPLETE_FINAL, req->response_userp);
        // The request is the backend's again, with everything it lent (input buffers).
        req->release_fn(req, TRITONSERVER_REQUEST_RELEASE_ALL, req->release_userp);
      });
  if (!started) return nullptr;
  const status& why = started.error;
  return triton_host::make_error(why ? code_of(why.code()) : TRITONSERVER_ERROR_UNAVAILABLE,
                                 why ? why.message() : "the inference was refused");
}

TRITONSERVER_Error* error_of(const status& st) {
  return st ? triton_host::make_error(code_of(st.code()), st.message()) : nullptr;
}

std::string version_text(std::int64_t v) { return v > 0 ? std::to_string(v) : ""; }

template <class T>
std::string json_of(const T& value) {
  return boost::json::serialize(boost::json::value_from(value));
}

}  // namespace

void enable_inprocess_inference(server_state& s) {
  triton_host::server_calls c;
  c.infer = [&s](TRITONSERVER_InferenceRequest* r) { return start(s, r); };
  c.health = [&s](bool& live, bool& ready) {
    service svc(s);
    ready = svc.ready();
    return error_of(svc.live(live));
  };
  c.model_ready = [&s](const std::string& m, std::int64_t v, bool& ready) {
    return error_of(service(s).model_ready(m, version_text(v), ready));
  };
  c.model_properties = [&s](const std::string& m, std::int64_t v, bool& decoupled, bool& batching) {
    std::shared_ptr<const model_config> config;
    if (auto st = service(s).model_configuration(m, version_text(v), config)) return error_of(st);
    decoupled = config->decoupled;
    batching = config->batching();
    return static_cast<TRITONSERVER_Error*>(nullptr);
  };
  c.server_metadata = [&s](std::string& json) {
    json = s.metadata_json;
    return static_cast<TRITONSERVER_Error*>(nullptr);
  };
  c.model_metadata = [&s](const std::string& m, std::int64_t v, std::string& json) {
    v2::model_metadata md;
    if (auto st = service(s).model_metadata(m, version_text(v), md)) return error_of(st);
    json = json_of(md);
    return static_cast<TRITONSERVER_Error*>(nullptr);
  };
  c.model_config = [&s](const std::string& m, std::int64_t v, std::string& json) {
    std::shared_ptr<const model_config> config;
    if (auto st = service(s).model_configuration(m, version_text(v), config)) return error_of(st);
    json = config->json;
    return static_cast<TRITONSERVER_Error*>(nullptr);
  };
  c.model_statistics = [&s](const std::string& m, std::int64_t v, std::string& json) {
    v2::statistics_response out;
    if (auto st = service(s).statistics(m, version_text(v), out)) return error_of(st);
    json = json_of(out);
    return static_cast<TRITONSERVER_Error*>(nullptr);
  };
  c.model_index = [&s](bool ready_only, std::string& json) {
    std::vector<v2::repository_index_entry> index;
    if (auto st = service(s).repository_index("", ready_only, index)) return error_of(st);
    boost::json::array a;
    for (const auto& e : index) a.push_back(boost::json::value_from(e));
    json = boost::json::serialize(a);
    return static_cast<TRITONSERVER_Error*>(nullptr);
  };
  c.load = [&s](const std::string& m, const std::string* config,
                const std::vector<std::pair<std::string, std::string>>& files) {
    v2::repository_load_request q;
    if (config) q.config = *config;
    q.files = files;
    return error_of(service(s).repository_load("", m, q));
  };
  c.unload = [&s](const std::string& m, bool dependents) {
    return error_of(service(s).repository_unload("", m, dependents));
  };
  triton_host::set_server_calls(std::move(c));
}

void disable_inprocess_inference() { triton_host::set_server_calls({}); }

}  // namespace inferwire::server
