// gRPC frontend on gRPC's callback (asynchronous) server: every RPC of
// inference.GRPCInferenceService and grpc.health.v1.Health. No thread belongs to a call or a
// stream: short RPCs are answered on the gRPC thread that received them, model load and unload
// and queued inferences run on the execution pool and finish their call from there. Requests
// are decoded into the same v2 value types as HTTP and run through the same inference path.
#include "grpc.hpp"

#include "inference.hpp"

#include <inferwire/grpc/convert.hpp>
#include <inferwire/version.hpp>

#include "grpc_service.grpc.pb.h"
#include "health.grpc.pb.h"

#include <boost/asio/post.hpp>

#include <grpcpp/grpcpp.h>
#include <grpcpp/resource_quota.h>

#include <chrono>
#include <climits>
#include <condition_variable>
#include <deque>
#include <mutex>
#include <optional>

namespace inferwire::server {

namespace pb = ::inference;
namespace conv = inferwire::grpc;
using ::grpc::CallbackServerContext;

namespace {

// The longest status message sent. gRPC carries it percent-encoded in a trailer (up to 3
// bytes per byte), and clients refuse trailers past 8 KiB by default (RESOURCE_EXHAUSTED in
// place of the real error), so the text is cut well below that.
constexpr std::size_t max_grpc_error_text = 2048;

::grpc::Status to_grpc(const status& st) {
  if (!st) return ::grpc::Status::OK;
  return {static_cast<::grpc::StatusCode>(st.grpc_code()), quote_input(st.message(), max_grpc_error_text)};
}

std::uint64_t ns_since(clock::time_point t) {
  return static_cast<std::uint64_t>(
      std::chrono::duration_cast<std::chrono::nanoseconds>(clock::now() - t).count());
}

void to_proto(const v2::statistic_duration& d, pb::StatisticDuration& out) {
  out.set_count(d.count);
  out.set_ns(d.ns);
}

void to_proto(const v2::model_statistics& m, pb::ModelStatistics& out) {
  out.set_name(m.name);
  out.set_version(m.version);
  out.set_last_inference(m.last_inference);
  out.set_inference_count(m.inference_count);
  out.set_execution_count(m.execution_count);
  auto* is = out.mutable_inference_stats();
  const auto& s = m.inference_stats;
  to_proto(s.success, *is->mutable_success());
  to_proto(s.fail, *is->mutable_fail());
  to_proto(s.queue, *is->mutable_queue());
  to_proto(s.compute_input, *is->mutable_compute_input());
  to_proto(s.compute_infer, *is->mutable_compute_infer());
  to_proto(s.compute_output, *is->mutable_compute_output());
  to_proto(s.cache_hit, *is->mutable_cache_hit());
  to_proto(s.cache_miss, *is->mutable_cache_miss());
  for (const auto& b : m.batch_stats) {
    auto* pbs = out.add_batch_stats();
    pbs->set_batch_size(b.batch_size);
    to_proto(b.compute_input, *pbs->mutable_compute_input());
    to_proto(b.compute_infer, *pbs->mutable_compute_infer());
    to_proto(b.compute_output, *pbs->mutable_compute_output());
  }
  for (const auto& u : m.memory_usage) {
    auto* mu = out.add_memory_usage();
    mu->set_type(u.type);
    mu->set_id(u.id);
    mu->set_byte_size(u.byte_size);
  }
  for (const auto& [k, r] : m.response_stats) {
    auto& rs = (*out.mutable_response_stats())[k];
    to_proto(r.compute_infer, *rs.mutable_compute_infer());
    to_proto(r.compute_output, *rs.mutable_compute_output());
    to_proto(r.success, *rs.mutable_success());
    to_proto(r.fail, *rs.mutable_fail());
    to_proto(r.empty_response, *rs.mutable_empty_response());
    to_proto(r.cancel, *rs.mutable_cancel());
  }
}

// One inference: decoded, validated and executed, with its response (or the failure).
struct infer_call {
  std::shared_ptr<model_version> model;
  v2::infer_request request;
  tensor_places places;
  std::int64_t batch_size = 1;
  request_clock times;
  v2::infer_response response;
  bool model_known = false;  ///< failures after the lookup name the model in stream errors
};

class inference_service final : public pb::GRPCInferenceService::CallbackService {
 public:
  explicit inference_service(server_state& s) : s_(s) {}

  ::grpc::ServerUnaryReactor* ServerLive(CallbackServerContext* ctx, const pb::ServerLiveRequest*, pb::ServerLiveResponse* r) override {
    return now(ctx, [=, this]() -> ::grpc::Status {
      if (s_.exiting) return {::grpc::StatusCode::UNAVAILABLE, "Server exiting"};
      r->set_live(true);
      return ::grpc::Status::OK;
    });
  }
  ::grpc::ServerUnaryReactor* ServerReady(CallbackServerContext* ctx, const pb::ServerReadyRequest*, pb::ServerReadyResponse* r) override {
    return now(ctx, [=, this]() -> ::grpc::Status {
      r->set_ready(s_.ready());
      return ::grpc::Status::OK;
    });
  }
  ::grpc::ServerUnaryReactor* ModelReady(CallbackServerContext* ctx, const pb::ModelReadyRequest* q, pb::ModelReadyResponse* r) override {
    return now(ctx, [=, this]() -> ::grpc::Status {
      if (s_.exiting) return {::grpc::StatusCode::UNAVAILABLE, "Server not ready"};
      r->set_ready(s_.repository.ready(q->name(), q->version()));
      return ::grpc::Status::OK;
    });
  }
  ::grpc::ServerUnaryReactor* ServerMetadata(CallbackServerContext* ctx, const pb::ServerMetadataRequest*,
                                pb::ServerMetadataResponse* r) override {
    return now(ctx, [=, this]() -> ::grpc::Status {
      r->set_name(s_.opts.server_id);
      r->set_version(INFERWIRE_VERSION_STRING);
      for (const auto& e : server_extensions()) r->add_extensions(e);
      return ::grpc::Status::OK;
    });
  }
  ::grpc::ServerUnaryReactor* ModelMetadata(CallbackServerContext* ctx, const pb::ModelMetadataRequest* q,
                               pb::ModelMetadataResponse* r) override {
    return now(ctx, [=, this]() -> ::grpc::Status {
      status st;
      auto m = s_.repository.find(q->name(), q->version(), st);
      if (!m) return to_grpc(st);
      const v2::model_metadata md = describe_model(s_, *m, !q->version().empty());
      r->set_name(md.name);
      for (const auto& v : md.versions) r->add_versions(v);
      r->set_platform(md.platform);
      auto add = [](const std::vector<v2::tensor_metadata>& from, auto* to) {
        for (const auto& t : from) {
          auto* x = to->Add();
          x->set_name(t.name);
          x->set_datatype(std::string(wire_name(t.datatype)));
          for (auto d : t.shape) x->add_shape(d);
        }
      };
      add(md.inputs, r->mutable_inputs());
      add(md.outputs, r->mutable_outputs());
      return ::grpc::Status::OK;
    });
  }
  ::grpc::ServerUnaryReactor* ModelConfig(CallbackServerContext* ctx, const pb::ModelConfigRequest* q, pb::ModelConfigResponse* r) override {
    return now(ctx, [=, this]() -> ::grpc::Status {
      status st;
      auto m = s_.repository.find(q->name(), q->version(), st);
      if (!m) return to_grpc(st);
      *r->mutable_config() = m->config->proto;
      return ::grpc::Status::OK;
    });
  }
  ::grpc::ServerUnaryReactor* ModelStatistics(CallbackServerContext* ctx, const pb::ModelStatisticsRequest* q,
                                 pb::ModelStatisticsResponse* r) override {
    return now(ctx, [=, this]() -> ::grpc::Status {
      std::vector<std::shared_ptr<model_version>> versions;
      if (q->name().empty()) {
        versions = s_.repository.ready_versions();
      } else {
        status st;
        versions = s_.repository.stats_versions(q->name(), q->version(), st);
        if (st) return to_grpc(st);
      }
      for (const auto& v : versions) to_proto(v->stats.snapshot(v->name, v->version), *r->add_model_stats());
      return ::grpc::Status::OK;
    });
  }

  // --- repository ----------------------------------------------------------------------------

  ::grpc::ServerUnaryReactor* RepositoryIndex(CallbackServerContext* ctx, const pb::RepositoryIndexRequest* q,
                                 pb::RepositoryIndexResponse* r) override {
    return now(ctx, [=, this]() -> ::grpc::Status {
      if (!q->repository_name().empty())
        return {::grpc::StatusCode::UNIMPLEMENTED, "'repository_name' specification is not supported"};
      if (s_.exiting) return {::grpc::StatusCode::UNAVAILABLE, "Server not ready"};
      for (const auto& e : s_.repository.index(q->ready())) {
        auto* m = r->add_models();
        m->set_name(e.name);
        m->set_version(e.version);
        m->set_state(e.state);
        m->set_reason(e.reason);
      }
      return ::grpc::Status::OK;
    });
  }
  ::grpc::ServerUnaryReactor* RepositoryModelLoad(CallbackServerContext* ctx, const pb::RepositoryModelLoadRequest* q,
                                     pb::RepositoryModelLoadResponse*) override {
    return later(ctx, [=, this]() -> ::grpc::Status {
      if (!q->repository_name().empty())
        return {::grpc::StatusCode::UNIMPLEMENTED, "'repository_name' specification is not supported"};
      if (s_.exiting) return {::grpc::StatusCode::UNAVAILABLE, "Server not ready"};
      v2::repository_load_request load;
      for (const auto& [k, p] : q->parameters()) {
        if (k == "config") {
          if (p.parameter_choice_case() != pb::ModelRepositoryParameter::kStringParam)
            return {::grpc::StatusCode::INVALID_ARGUMENT, "invalid value type for load parameter 'config', expected string_param."};
          load.config = p.string_param();
        } else if (k.rfind("file:", 0) == 0) {
          if (p.parameter_choice_case() != pb::ModelRepositoryParameter::kBytesParam)
            return {::grpc::StatusCode::INVALID_ARGUMENT,
                    "invalid value type for load parameter '" + k + "', expected bytes_param."};
          load.files.emplace_back(k.substr(5), p.bytes_param());
        }
      }
      return to_grpc(s_.repository.load(q->model_name(), load));
    });
  }
  ::grpc::ServerUnaryReactor* RepositoryModelUnload(CallbackServerContext* ctx, const pb::RepositoryModelUnloadRequest* q,
                                       pb::RepositoryModelUnloadResponse*) override {
    return later(ctx, [=, this]() -> ::grpc::Status {
      if (!q->repository_name().empty())
        return {::grpc::StatusCode::UNIMPLEMENTED, "'repository_name' specification is not supported"};
      if (s_.exiting) return {::grpc::StatusCode::UNAVAILABLE, "Server not ready"};
      bool dependents = false;
      if (auto it = q->parameters().find("unload_dependents"); it != q->parameters().end() &&
          it->second.parameter_choice_case() == pb::ModelRepositoryParameter::kBoolParam)
        dependents = it->second.bool_param();
      return to_grpc(s_.repository.unload(q->model_name(), dependents));
    });
  }

  // --- shared memory ---------------------------------------------------------------------------

  ::grpc::ServerUnaryReactor* SystemSharedMemoryStatus(CallbackServerContext* ctx, const pb::SystemSharedMemoryStatusRequest* q,
                                          pb::SystemSharedMemoryStatusResponse* r) override {
    return now(ctx, [=, this]() -> ::grpc::Status {
      std::vector<v2::system_shm_status> v;
      if (auto st = s_.shm.system_status(q->name(), v)) return to_grpc(st);
      for (const auto& x : v) {
        auto& e = (*r->mutable_regions())[x.name];
        e.set_name(x.name);
        e.set_key(x.key);
        e.set_offset(x.offset);
        e.set_byte_size(x.byte_size);
      }
      return ::grpc::Status::OK;
    });
  }
  ::grpc::ServerUnaryReactor* SystemSharedMemoryRegister(CallbackServerContext* ctx, const pb::SystemSharedMemoryRegisterRequest* q,
                                            pb::SystemSharedMemoryRegisterResponse*) override {
    return now(ctx, [=, this]() -> ::grpc::Status {
      return to_grpc(s_.shm.register_system({q->name(), q->key(), q->offset(), q->byte_size()}));
    });
  }
  ::grpc::ServerUnaryReactor* SystemSharedMemoryUnregister(CallbackServerContext* ctx, const pb::SystemSharedMemoryUnregisterRequest* q,
                                              pb::SystemSharedMemoryUnregisterResponse*) override {
    return now(ctx, [=, this]() -> ::grpc::Status {
      if (auto st = s_.shm.check_allowed()) return to_grpc(st);
      return to_grpc(s_.shm.unregister(region_kind::system, q->name()));
    });
  }
  ::grpc::ServerUnaryReactor* CudaSharedMemoryStatus(CallbackServerContext* ctx, const pb::CudaSharedMemoryStatusRequest* q,
                                        pb::CudaSharedMemoryStatusResponse* r) override {
    return now(ctx, [=, this]() -> ::grpc::Status {
      std::vector<v2::cuda_shm_status> v;
      if (auto st = s_.shm.cuda_status(q->name(), v)) return to_grpc(st);
      for (const auto& x : v) {
        auto& e = (*r->mutable_regions())[x.name];
        e.set_name(x.name);
        e.set_device_id(x.device_id);
        e.set_byte_size(x.byte_size);
      }
      return ::grpc::Status::OK;
    });
  }
  ::grpc::ServerUnaryReactor* CudaSharedMemoryRegister(CallbackServerContext* ctx, const pb::CudaSharedMemoryRegisterRequest* q,
                                          pb::CudaSharedMemoryRegisterResponse*) override {
    return now(ctx, [=, this]() -> ::grpc::Status {
      if (auto st = s_.shm.check_allowed()) return to_grpc(st);
      if (q->device_id() < 0)
        return {::grpc::StatusCode::INVALID_ARGUMENT, "invalid device id " + std::to_string(q->device_id())};
      return to_grpc(s_.shm.register_cuda(
          {q->name(), q->raw_handle(), static_cast<std::uint64_t>(q->device_id()), q->byte_size()}));
    });
  }
  ::grpc::ServerUnaryReactor* CudaSharedMemoryUnregister(CallbackServerContext* ctx, const pb::CudaSharedMemoryUnregisterRequest* q,
                                            pb::CudaSharedMemoryUnregisterResponse*) override {
    return now(ctx, [=, this]() -> ::grpc::Status {
      if (auto st = s_.shm.check_allowed()) return to_grpc(st);
      return to_grpc(s_.shm.unregister(region_kind::cuda, q->name()));
    });
  }

  // --- trace and log settings ------------------------------------------------------------------

  ::grpc::ServerUnaryReactor* TraceSetting(CallbackServerContext* ctx, const pb::TraceSettingRequest* q, pb::TraceSettingResponse* r) override {
    return now(ctx, [=, this]() -> ::grpc::Status {
      if (auto st = check_trace_model(s_, q->model_name())) return to_grpc(st);
      v2::trace_settings result;
      if (q->settings().empty()) {
        result = s_.traces.get(q->model_name());
      } else {
        v2::trace_settings update;
        for (const auto& [k, v] : q->settings()) {
          if (v.value().empty()) update.settings[k] = std::nullopt;  // clears a model's override
          else update.settings[k] = std::vector<std::string>(v.value().begin(), v.value().end());
        }
        if (auto st = s_.traces.update(q->model_name(), update, result)) return to_grpc(st);
      }
      for (const auto& [k, v] : result.settings) {
        auto& out = (*r->mutable_settings())[k];
        if (v)
          for (const auto& x : *v) out.add_value(x);
      }
      return ::grpc::Status::OK;
    });
  }
  ::grpc::ServerUnaryReactor* LogSettings(CallbackServerContext* ctx, const pb::LogSettingsRequest* q, pb::LogSettingsResponse* r) override {
    return now(ctx, [=, this]() -> ::grpc::Status {
      if (!q->settings().empty()) {
        v2::log_settings u;
        using V = pb::LogSettingsRequest::SettingValue;
        for (const auto& [k, v] : q->settings()) {
          auto wrong = [&k](const char* expected) {
            return ::grpc::Status(::grpc::StatusCode::INVALID_ARGUMENT,
                                  "expect " + std::string(expected) + " for '" + k + "'");
          };
          if (k == "log_file" || k == "log_format") {
            if (v.parameter_choice_case() != V::kStringParam) return wrong("string_param");
            (k == "log_file" ? u.log_file : u.log_format) = v.string_param();
          } else if (k == "log_info" || k == "log_warning" || k == "log_error") {
            if (v.parameter_choice_case() != V::kBoolParam) return wrong("bool_param");
            (k == "log_info" ? u.log_info : k == "log_warning" ? u.log_warning : u.log_error) = v.bool_param();
          } else if (k == "log_verbose_level") {
            if (v.parameter_choice_case() != V::kUint32Param) return wrong("uint32_param");
            u.log_verbose_level = v.uint32_param();
          } else {
            return {::grpc::StatusCode::INVALID_ARGUMENT, "Unsupported log setting: '" + k + "'"};
          }
        }
        if (auto st = update_log_settings(s_, u)) return to_grpc(st);
      }
      const v2::log_settings cur = current_log_settings(s_);
      auto& m = *r->mutable_settings();
      m["log_file"].set_string_param(cur.log_file.value_or(""));
      m["log_info"].set_bool_param(cur.log_info.value_or(false));
      m["log_warning"].set_bool_param(cur.log_warning.value_or(false));
      m["log_error"].set_bool_param(cur.log_error.value_or(false));
      m["log_verbose_level"].set_uint32_param(cur.log_verbose_level.value_or(0));
      m["log_format"].set_string_param(cur.log_format.value_or("default"));
      return ::grpc::Status::OK;
    });
  }

  // --- inference -------------------------------------------------------------------------------

  ::grpc::ServerUnaryReactor* ModelInfer(CallbackServerContext* ctx, const pb::ModelInferRequest* q,
                                         pb::ModelInferResponse* r) override {
    auto* reactor = ctx->DefaultReactor();
    auto call = std::make_shared<infer_call>();
    if (auto st = guarded([&] { return prepare(*q, *call, true); })) {
      reactor->Finish(to_grpc(st));
      return reactor;
    }
    // `q` and `r` live until Finish; the decoded request may view q's bytes.
    execute(call, ctx, nullptr, [reactor, call, r](status st) {
      if (!st) st = guarded([&] {
        conv::encode_infer_response(call->response, *r);
        return status{};
      });
      reactor->Finish(to_grpc(st));
    });
    return reactor;
  }

  ::grpc::ServerBidiReactor<pb::ModelInferRequest, pb::ModelStreamInferResponse>* ModelStreamInfer(
      CallbackServerContext* ctx) override {
    return new stream_reactor(*this, ctx);
  }

 private:
  // Runs `f` (returning a status) and turns whatever it throws into an error status.
  template <class F>
  static status guarded(F&& f) noexcept {
    try {
      return f();
    } catch (const std::bad_alloc&) {
      return {errc::internal, "failed to allocate memory for the request"};
    } catch (const std::exception& e) {
      return {errc::internal, quote_input(e.what())};
    }
  }
  template <class F>
  static ::grpc::Status guarded_grpc(F& f) noexcept {
    ::grpc::Status out;
    if (auto st = guarded([&] {
          out = f();
          return status{};
        }))
      return to_grpc(st);
    return out;
  }

  // A unary RPC whose work is short and never waits: done on the gRPC thread that received it.
  template <class F>
  static ::grpc::ServerUnaryReactor* now(CallbackServerContext* ctx, F f) {
    auto* reactor = ctx->DefaultReactor();
    reactor->Finish(guarded_grpc(f));
    return reactor;
  }
  // A unary RPC that may take long (model load and unload): done on the execution pool, so no
  // gRPC thread waits for it; the reply comes when it finished.
  template <class F>
  ::grpc::ServerUnaryReactor* later(CallbackServerContext* ctx, F f) {
    auto* reactor = ctx->DefaultReactor();
    boost::asio::post(s_.execution, [reactor, f = std::move(f)]() mutable { reactor->Finish(guarded_grpc(f)); });
    return reactor;
  }

  // One ModelStreamInfer stream. Requests of a stream run one after the other, so responses
  // keep the stream's order: the next request is read when the previous one is answered. No
  // thread is held while a stream is idle or its request runs; responses queue for the stream
  // and are written one at a time. A client that does not read its responses stops the stream
  // from reading requests once `max_queued` responses wait, and a decoupled model that
  // produces faster than its client reads waits (on the execution pool) at that point too.
  class stream_reactor final : public ::grpc::ServerBidiReactor<pb::ModelInferRequest, pb::ModelStreamInferResponse> {
   public:
    static constexpr std::size_t max_queued = 16;

    stream_reactor(inference_service& svc, CallbackServerContext* ctx) : svc_(svc), ctx_(ctx) {
      if (auto it = ctx->client_metadata().find("triton_grpc_error"); it != ctx->client_metadata().end())
        close_on_error_ = std::string_view(it->second.data(), it->second.size()) == "true";
      StartRead(&request_);
    }

    void OnReadDone(bool ok) override {
      if (!ok) return finish(::grpc::Status::OK);  // the client closed its side, or went away
      auto call = std::make_shared<infer_call>();
      status st = guarded([&] { return svc_.prepare(request_, *call); });
      empty_final_ = call->request.parameters.get<bool>("triton_enable_empty_final_response").value_or(false);
      if (st) return answered(*call, std::move(st));
      decoupled_ = call->model->config->decoupled;
      sink_ = [this](v2::infer_response&& resp) { return send(resp, false, true); };
      svc_.execute(call, ctx_, decoupled_ ? &sink_ : nullptr,
                   [this, call](status done) { answered(*call, std::move(done)); });
    }

    void OnWriteDone(bool ok) override {
      const pb::ModelStreamInferResponse* next = nullptr;
      std::optional<::grpc::Status> final_status;
      bool resume_read = false;
      {
        std::lock_guard lock(mu_);
        queue_.pop_front();
        if (!ok) {
          broken_ = true;
          queue_.clear();
        }
        if (!queue_.empty()) {
          next = &queue_.front();
        } else {
          writing_ = false;
          final_status = std::exchange(pending_finish_, std::nullopt);
        }
        if (read_held_ && (broken_ || queue_.size() < max_queued)) {
          read_held_ = false;
          resume_read = true;
        }
      }
      room_.notify_all();
      // gRPC calls are made outside the lock: a completion may run inline on this thread.
      if (resume_read) StartRead(&request_);
      if (next) StartWrite(next);
      else if (final_status) Finish(*final_status);  // the last touch of this object
    }

    void OnCancel() override {
      {
        std::lock_guard lock(mu_);
        broken_ = true;
      }
      room_.notify_all();
    }

    void OnDone() override { delete this; }

   private:
    // The request finished (or failed before running): its final response or its error, then
    // the next request.
    void answered(const infer_call& call, status st) {
      if (!st) {
        if (!decoupled_ || empty_final_) send(call.response, true, false);
        return read_next();
      }
      if (close_on_error_) return finish(to_grpc(st));
      pb::ModelStreamInferResponse out;
      out.set_error_message(quote_input(st.message(), max_error_text));  // a message field, not a trailer
      auto* ir = out.mutable_infer_response();
      ir->set_id(request_.id());
      if (call.model_known) {
        ir->set_model_name(request_.model_name());
        ir->set_model_version(request_.model_version());
      }
      enqueue(std::move(out), false);
      read_next();
    }

    // Reads the next request unless the client is not reading its responses: then reading
    // resumes once the queue drains, and HTTP/2 flow control holds the client back meanwhile.
    void read_next() {
      {
        std::lock_guard lock(mu_);
        if (!broken_ && queue_.size() >= max_queued) {
          read_held_ = true;
          return;
        }
      }
      StartRead(&request_);
    }

    bool send(const v2::infer_response& resp, bool final, bool wait) {
      pb::ModelStreamInferResponse out;
      conv::encode_infer_response(resp, *out.mutable_infer_response());
      (*out.mutable_infer_response()->mutable_parameters())["triton_final_response"].set_bool_param(final);
      return enqueue(std::move(out), wait);
    }

    // Queues a response; `wait`: block while the queue is full (decoupled producers only, on
    // the execution pool). False once the stream cannot deliver any more.
    bool enqueue(pb::ModelStreamInferResponse&& out, bool wait) {
      std::unique_lock lock(mu_);
      if (wait) room_.wait(lock, [&] { return broken_ || queue_.size() < max_queued; });
      if (broken_) return false;
      queue_.push_back(std::move(out));  // a deque keeps its elements in place
      if (writing_) return true;
      writing_ = true;
      const auto* first = &queue_.front();  // only OnWriteDone of this write pops it
      lock.unlock();
      StartWrite(first);
      return true;
    }

    // Ends the stream once every queued response is written.
    void finish(::grpc::Status st) {
      {
        std::lock_guard lock(mu_);
        if (writing_) {
          pending_finish_ = std::move(st);
          return;
        }
      }
      Finish(st);
    }

    inference_service& svc_;
    CallbackServerContext* ctx_;
    pb::ModelInferRequest request_;
    response_sink sink_;
    bool close_on_error_ = false;
    bool decoupled_ = false;
    bool empty_final_ = false;
    std::mutex mu_;
    std::condition_variable room_;
    std::deque<pb::ModelStreamInferResponse> queue_;
    bool writing_ = false;
    bool broken_ = false;
    bool read_held_ = false;  ///< the next read waits for the queue to drain
    std::optional<::grpc::Status> pending_finish_;
  };

  // Lookup, decoding, shared memory and validation. Failures after the lookup count in the
  // model's statistics.
  status prepare(const pb::ModelInferRequest& q, infer_call& call, bool refuse_decoupled = false) {
    call.times.received = clock::now();
    status st;
    call.model = s_.repository.find(q.model_name(), q.model_version(), st);
    if (!call.model) return st;
    call.model_known = true;
    const model_config& c = *call.model->config;
    if (refuse_decoupled && c.decoupled)
      return {errc::unsupported, "ModelInfer RPC doesn't support models with decoupled transaction policy"};
    auto fail = [&](status e) {
      call.model->stats.record_failure(ns_since(call.times.received), false);
      return e;
    };
    if (auto e = conv::decode_infer_request(q, c.name, call.request)) return fail(std::move(e));
    if (auto e = resolve_shared_memory(s_.shm, call.request, call.places)) return fail(std::move(e));
    if (auto e = validate_request(c, call.request, call.batch_size)) return fail(std::move(e));
    return {};
  }

  // Runs the call inline when it is small, else on the execution pool behind the model's
  // instance gate; `done` gets the result (on whichever thread ran it). Nothing waits.
  template <class Done>
  void execute(const std::shared_ptr<infer_call>& call, CallbackServerContext* ctx, const response_sink* sink,
               Done done) {
    call->times.queued = clock::now();
    const status cancelled{errc::cancelled, "the client cancelled the request"};
    if (ctx->IsCancelled()) return done(cancelled);
    if (!sink && runs_inline(*call->model, call->request, call->places))
      return done(guarded([&] {
        return execute_request(*call->model, call->request, call->batch_size, call->times, call->response,
                               &call->places);
      }));
    auto& pool = s_.execution;
    auto launch = [&pool](instance_gate::job j) { boost::asio::post(pool, std::move(j)); };
    auto work = [call, ctx, sink, done, launch, cancelled]() mutable {
      // A request that waited in the queue while its client gave up is not executed.
      response_sink checked;
      if (sink) checked = [&](v2::infer_response&& r) { return !ctx->IsCancelled() && (*sink)(std::move(r)); };
      status st = ctx->IsCancelled() ? cancelled : guarded([&] {
        return execute_request(*call->model, call->request, call->batch_size, call->times, call->response,
                               &call->places, sink ? &checked : nullptr);
      });
      call->model->instances.release(launch);
      done(std::move(st));
    };
    if (!call->model->instances.submit(std::move(work), launch)) {
      call->model->stats.record_failure(ns_since(call->times.received), false);
      done(status{errc::unavailable, "Exceeds maximum queue size"});
    }
  }

  server_state& s_;
};

class health_service final : public ::grpc::health::v1::Health::CallbackService {
 public:
  explicit health_service(server_state& s) : s_(s) {}
  ::grpc::ServerUnaryReactor* Check(CallbackServerContext* ctx, const ::grpc::health::v1::HealthCheckRequest*,
                                    ::grpc::health::v1::HealthCheckResponse* r) override {
    r->set_status(s_.ready() ? ::grpc::health::v1::HealthCheckResponse::SERVING
                             : ::grpc::health::v1::HealthCheckResponse::NOT_SERVING);
    auto* reactor = ctx->DefaultReactor();
    reactor->Finish(::grpc::Status::OK);
    return reactor;
  }

 private:
  server_state& s_;
};

}  // namespace

class grpc_frontend {
 public:
  explicit grpc_frontend(server_state& s) : inference(s), health(s) {}
  inference_service inference;
  health_service health;
  std::unique_ptr<::grpc::Server> server;
};

std::shared_ptr<grpc_frontend> start_grpc(server_state& s, const std::string& address, int port,
                                          status& st, int& bound_port) {
  auto f = std::make_shared<grpc_frontend>(s);
  ::grpc::ServerBuilder b;
  const std::string host = address.find(':') != std::string::npos ? "[" + address + "]" : address;
  b.AddListeningPort(host + ":" + std::to_string(port), ::grpc::InsecureServerCredentials(), &bound_port);
  // Messages as large as an HTTP body may be; gRPC core assembles a message from the bytes as
  // they arrive, and the quota bounds the memory all calls together may hold: past it, new
  // calls get RESOURCE_EXHAUSTED instead of the process exhausting memory.
  b.SetMaxReceiveMessageSize(static_cast<int>(std::min<std::uint64_t>(INT_MAX, s.max_body_size())));
  b.SetMaxSendMessageSize(INT_MAX);
  ::grpc::ResourceQuota quota("inferwire-grpc");
  quota.Resize(static_cast<std::size_t>(s.body_budget.limit()));
  b.SetResourceQuota(quota);
  // Clients' keepalive pings are welcome, with or without calls in flight.
  b.AddChannelArgument(GRPC_ARG_KEEPALIVE_PERMIT_WITHOUT_CALLS, 1);
  b.AddChannelArgument(GRPC_ARG_HTTP2_MIN_RECV_PING_INTERVAL_WITHOUT_DATA_MS, 1000);
  b.AddChannelArgument(GRPC_ARG_HTTP2_MAX_PING_STRIKES, 0);
  b.RegisterService(&f->inference);
  b.RegisterService(&f->health);
  f->server = b.BuildAndStart();
  if (!f->server || bound_port == 0) {
    st = {errc::internal, "failed to start the gRPC frontend on " + host + ":" + std::to_string(port)};
    return nullptr;
  }
  return f;
}

void stop_grpc(grpc_frontend& f) {
  if (f.server) f.server->Shutdown(std::chrono::system_clock::now() + std::chrono::seconds(5));
}

}  // namespace inferwire::server
