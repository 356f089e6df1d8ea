// SPDX-License-Identifier: Apache-2.0
// gRPC frontend on gRPC's callback (asynchronous) server: every RPC of
// inference.GRPCInferenceService and grpc.health.v1.Health. No thread belongs to a call or a
// stream: short RPCs are answered on the gRPC thread that received them, model load and unload
// and queued inferences run on the execution pool and finish their call from there. Requests
// are decoded into the same v2 value types as HTTP and run through the same inference path.
#include "grpc.hpp"

#include "service.hpp"

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
#include <fstream>
#include <sstream>
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


class inference_service final : public pb::GRPCInferenceService::CallbackService {
 public:
  explicit inference_service(server_state& s) : svc_(s) {}

  // --- health and metadata ---------------------------------------------------------------------

  ::grpc::ServerUnaryReactor* ServerLive(CallbackServerContext* ctx, const pb::ServerLiveRequest*,
                                         pb::ServerLiveResponse* r) override {
    return now(ctx, api_category::health, [&] {
      bool live = false;
      if (auto st = svc_.live(live)) return to_grpc(st);
      r->set_live(live);
      return ::grpc::Status::OK;
    });
  }
  ::grpc::ServerUnaryReactor* ServerReady(CallbackServerContext* ctx, const pb::ServerReadyRequest*,
                                          pb::ServerReadyResponse* r) override {
    return now(ctx, api_category::health, [&] {
      r->set_ready(svc_.ready());
      return ::grpc::Status::OK;
    });
  }
  ::grpc::ServerUnaryReactor* ModelReady(CallbackServerContext* ctx, const pb::ModelReadyRequest* q,
                                         pb::ModelReadyResponse* r) override {
    return now(ctx, api_category::health, [&] {
      bool ready = false;
      if (auto st = svc_.model_ready(q->name(), q->version(), ready)) return to_grpc(st);
      r->set_ready(ready);
      return ::grpc::Status::OK;
    });
  }
  ::grpc::ServerUnaryReactor* ServerMetadata(CallbackServerContext* ctx, const pb::ServerMetadataRequest*,
                                             pb::ServerMetadataResponse* r) override {
    return now(ctx, api_category::metadata, [&] {
      conv::to_proto(svc_.server_metadata(), *r);
      return ::grpc::Status::OK;
    });
  }
  ::grpc::ServerUnaryReactor* ModelMetadata(CallbackServerContext* ctx, const pb::ModelMetadataRequest* q,
                                            pb::ModelMetadataResponse* r) override {
    return now(ctx, api_category::metadata, [&] {
      v2::model_metadata md;
      if (auto st = svc_.model_metadata(q->name(), q->version(), md)) return to_grpc(st);
      conv::to_proto(md, *r);
      return ::grpc::Status::OK;
    });
  }
  ::grpc::ServerUnaryReactor* ModelConfig(CallbackServerContext* ctx, const pb::ModelConfigRequest* q,
                                          pb::ModelConfigResponse* r) override {
    return now(ctx, api_category::model_config, [&] {
      std::shared_ptr<const model_config> c;
      if (auto st = svc_.model_configuration(q->name(), q->version(), c)) return to_grpc(st);
      *r->mutable_config() = c->proto;
      return ::grpc::Status::OK;
    });
  }
  ::grpc::ServerUnaryReactor* ModelStatistics(CallbackServerContext* ctx, const pb::ModelStatisticsRequest* q,
                                              pb::ModelStatisticsResponse* r) override {
    return now(ctx, api_category::statistics, [&] {
      v2::statistics_response out;
      if (auto st = svc_.statistics(q->name(), q->version(), out)) return to_grpc(st);
      conv::to_proto(out, *r);
      return ::grpc::Status::OK;
    });
  }

  // --- repository ------------------------------------------------------------------------------

  ::grpc::ServerUnaryReactor* RepositoryIndex(CallbackServerContext* ctx, const pb::RepositoryIndexRequest* q,
                                              pb::RepositoryIndexResponse* r) override {
    return now(ctx, api_category::model_repository, [&] {
      std::vector<v2::repository_index_entry> index;
      if (auto st = svc_.repository_index(q->repository_name(), q->ready(), index)) return to_grpc(st);
      conv::to_proto(index, *r);
      return ::grpc::Status::OK;
    });
  }
  ::grpc::ServerUnaryReactor* RepositoryModelLoad(CallbackServerContext* ctx, const pb::RepositoryModelLoadRequest* q,
                                                  pb::RepositoryModelLoadResponse*) override {
    return later(ctx, api_category::model_repository, [this, q] {
      v2::repository_load_request load;
      if (auto st = conv::from_proto(*q, load)) return to_grpc(st);
      return to_grpc(svc_.repository_load(q->repository_name(), q->model_name(), load));
    });
  }
  ::grpc::ServerUnaryReactor* RepositoryModelUnload(CallbackServerContext* ctx,
                                                    const pb::RepositoryModelUnloadRequest* q,
                                                    pb::RepositoryModelUnloadResponse*) override {
    return later(ctx, api_category::model_repository, [this, q] {
      return to_grpc(svc_.repository_unload(q->repository_name(), q->model_name(),
                                            conv::from_proto(*q).unload_dependents));
    });
  }

  // --- shared memory ---------------------------------------------------------------------------

  ::grpc::ServerUnaryReactor* SystemSharedMemoryStatus(CallbackServerContext* ctx,
                                                       const pb::SystemSharedMemoryStatusRequest* q,
                                                       pb::SystemSharedMemoryStatusResponse* r) override {
    return now(ctx, api_category::shared_memory, [&] {
      std::vector<v2::system_shm_status> v;
      if (auto st = svc_.system_shm_status(q->name(), v)) return to_grpc(st);
      conv::to_proto(v, *r);
      return ::grpc::Status::OK;
    });
  }
  ::grpc::ServerUnaryReactor* SystemSharedMemoryRegister(CallbackServerContext* ctx,
                                                         const pb::SystemSharedMemoryRegisterRequest* q,
                                                         pb::SystemSharedMemoryRegisterResponse*) override {
    return now(ctx, api_category::shared_memory, [&] { return to_grpc(svc_.register_system_shm(conv::from_proto(*q))); });
  }
  ::grpc::ServerUnaryReactor* SystemSharedMemoryUnregister(CallbackServerContext* ctx,
                                                           const pb::SystemSharedMemoryUnregisterRequest* q,
                                                           pb::SystemSharedMemoryUnregisterResponse*) override {
    return now(ctx, api_category::shared_memory, [&] { return to_grpc(svc_.unregister_shm(region_kind::system, q->name())); });
  }
  ::grpc::ServerUnaryReactor* CudaSharedMemoryStatus(CallbackServerContext* ctx,
                                                     const pb::CudaSharedMemoryStatusRequest* q,
                                                     pb::CudaSharedMemoryStatusResponse* r) override {
    return now(ctx, api_category::shared_memory, [&] {
      std::vector<v2::cuda_shm_status> v;
      if (auto st = svc_.cuda_shm_status(q->name(), v)) return to_grpc(st);
      conv::to_proto(v, *r);
      return ::grpc::Status::OK;
    });
  }
  ::grpc::ServerUnaryReactor* CudaSharedMemoryRegister(CallbackServerContext* ctx,
                                                       const pb::CudaSharedMemoryRegisterRequest* q,
                                                       pb::CudaSharedMemoryRegisterResponse*) override {
    return now(ctx, api_category::shared_memory, [&] {
      v2::cuda_shm_register_request reg;
      if (auto st = conv::from_proto(*q, reg)) return to_grpc(st);
      return to_grpc(svc_.register_cuda_shm(reg));
    });
  }
  ::grpc::ServerUnaryReactor* CudaSharedMemoryUnregister(CallbackServerContext* ctx,
                                                         const pb::CudaSharedMemoryUnregisterRequest* q,
                                                         pb::CudaSharedMemoryUnregisterResponse*) override {
    return now(ctx, api_category::shared_memory, [&] { return to_grpc(svc_.unregister_shm(region_kind::cuda, q->name())); });
  }

  // --- trace and log settings ------------------------------------------------------------------

  ::grpc::ServerUnaryReactor* TraceSetting(CallbackServerContext* ctx, const pb::TraceSettingRequest* q,
                                           pb::TraceSettingResponse* r) override {
    return now(ctx, api_category::trace, [&] {
      v2::trace_settings result;
      const v2::trace_settings update = conv::trace_settings_from_proto(q->settings(), true);
      if (auto st = svc_.trace_settings(q->model_name(), q->settings().empty() ? nullptr : &update, result))
        return to_grpc(st);
      conv::to_proto(result, *r->mutable_settings());
      return ::grpc::Status::OK;
    });
  }
  ::grpc::ServerUnaryReactor* LogSettings(CallbackServerContext* ctx, const pb::LogSettingsRequest* q,
                                          pb::LogSettingsResponse* r) override {
    return now(ctx, api_category::logging, [&] {
      v2::log_settings update, current;
      if (auto st = conv::log_settings_from_proto(q->settings(), update)) return to_grpc(st);
      if (auto st = svc_.log_settings(q->settings().empty() ? nullptr : &update, current)) return to_grpc(st);
      conv::to_proto(current, *r->mutable_settings());
      return ::grpc::Status::OK;
    });
  }

  // --- inference -------------------------------------------------------------------------------

  ::grpc::ServerUnaryReactor* ModelInfer(CallbackServerContext* ctx, const pb::ModelInferRequest* q,
                                         pb::ModelInferResponse* r) override {
    auto* reactor = ctx->DefaultReactor();
    if (auto st = restricted(ctx, api_category::inference)) {
      reactor->Finish(to_grpc(st));
      return reactor;
    }
    auto call = std::make_shared<infer_call>();
    if (auto st = guarded([&] { return prepare(*q, *call, true); })) {
      reactor->Finish(to_grpc(st));
      return reactor;
    }
    // The message was read before this handler ran: both read stamps are its arrival.
    if (call->trace) {
      call->trace->stamp("GRPC_WAITREAD_START", call->times.received);
      call->trace->stamp("GRPC_WAITREAD_END", call->times.received);
    }
    // `q` and `r` live until Finish; the decoded request may view q's bytes.
    execute(call, ctx, nullptr, [this, reactor, call, r](status st) {
      if (!st) st = guarded([&] {
        conv::encode_infer_response(call->response, *r);
        return status{};
      });
      if (call->trace) call->trace->stamp_now("GRPC_SEND_START");
      reactor->Finish(to_grpc(st));
      if (call->trace) {
        call->trace->stamp_now("GRPC_SEND_END");
        svc_.state().traces.finish(*call->trace);
      }
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

  // --grpc-restricted-protocol: the header an RPC of a restricted category must carry.
  status restricted(const CallbackServerContext* ctx, api_category c) const {
    const restriction* r = svc_.state().opts.grpc_restricted.find(c);
    if (!r) return {};
    const std::string header = "triton-grpc-protocol-" + r->key;
    const auto it = ctx->client_metadata().find(header);
    if (it != ctx->client_metadata().end() && std::string_view(it->second.data(), it->second.size()) == r->value)
      return {};
    return {errc::unavailable, "This protocol is restricted, expecting header '" + header + "'"};
  }

  // A unary RPC whose work is short and never waits: done on the gRPC thread that received it.
  template <class F>
  ::grpc::ServerUnaryReactor* now(CallbackServerContext* ctx, api_category c, F f) {
    auto* reactor = ctx->DefaultReactor();
    if (auto st = restricted(ctx, c)) reactor->Finish(to_grpc(st));
    else reactor->Finish(guarded_grpc(f));
    return reactor;
  }
  // A unary RPC that may take long (model load and unload): done on the execution pool, so no
  // gRPC thread waits for it; the reply comes when it finished.
  template <class F>
  ::grpc::ServerUnaryReactor* later(CallbackServerContext* ctx, api_category c, F f) {
    auto* reactor = ctx->DefaultReactor();
    if (auto st = restricted(ctx, c)) {
      reactor->Finish(to_grpc(st));
      return reactor;
    }
    boost::asio::post(svc_.state().execution, [reactor, f = std::move(f)]() mutable { reactor->Finish(guarded_grpc(f)); });
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
      // A restricted stream ends before any request is read.
      if (auto st = svc_.restricted(ctx, api_category::inference)) {
        Finish(to_grpc(st));
        return;
      }
      StartRead(&request_);
    }

    void OnReadDone(bool ok) override {
      if (!ok) return finish(::grpc::Status::OK);  // the client closed its side, or went away
      auto call = std::make_shared<infer_call>();
      status st = guarded([&] { return svc_.prepare(request_, *call); });
      empty_final_ = call->request.parameters.get<bool>("triton_enable_empty_final_response").value_or(false);
      if (st) return answered(*call, std::move(st));
      if (call->trace) {
        call->trace->stamp("GRPC_WAITREAD_START", call->times.received);
        call->trace->stamp("GRPC_WAITREAD_END", call->times.received);
      }
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
      // A traced request is written once its final response or error is queued.
      struct trace_done {
        trace_registry& traces;
        trace_record* trace;
        ~trace_done() {
          if (!trace) return;
          trace->stamp_now("GRPC_SEND_END");
          traces.finish(*trace);
        }
      } traced{svc_.svc_.state().traces, call.trace.get()};
      if (call.trace) call.trace->stamp_now("GRPC_SEND_START");
      if (!st) {
        if (!decoupled_ || empty_final_) send(call.response, true, false);
        return read_next();
      }
      if (close_on_error_) return finish(to_grpc(st));
      pb::ModelStreamInferResponse out;
      out.set_error_message(quote_input(st.message(), max_error_text));  // a message field, not a trailer
      auto* ir = out.mutable_infer_response();
      ir->set_id(request_.id());
      if (call.model) {
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

  // Lookup, decoding, shared memory and validation (a failure after the lookup counts in the
  // model's statistics).
  status prepare(const pb::ModelInferRequest& q, infer_call& call, bool refuse_decoupled = false) {
    if (auto st = svc_.find_model(q.model_name(), q.model_version(), call)) return st;
    const model_config& c = *call.model->config;
    // Upstream's ModelInfer handler refuses decoupled models with this text (HTTP has its own).
    if (refuse_decoupled && c.decoupled)
      return {errc::unsupported, "ModelInfer RPC doesn't support models with decoupled transaction policy"};
    if (auto st = conv::decode_infer_request(q, c.name, call.request)) return svc_.failed(call, std::move(st));
    return svc_.admit(call);
  }

  // Runs the call through the service; `done` gets the result on whichever thread ran it.
  void execute(const std::shared_ptr<infer_call>& call, CallbackServerContext* ctx, const response_sink* sink,
               std::function<void(status)> done) {
    svc_.infer(call, {sink, [ctx] { return ctx->IsCancelled(); }}, std::move(done));
  }

  service svc_;
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

namespace {

status read_pem(const std::string& path, const char* flag, std::string& out) {
  std::ifstream in(path, std::ios::binary);
  std::ostringstream text;
  if (in) text << in.rdbuf();
  if (!in || text.str().empty()) return {errc::invalid_arg, "cannot read " + std::string(flag) + " '" + path + "'"};
  out = text.str();
  return {};
}

// --grpc-use-ssl / --grpc-use-ssl-mutual: TLS with the given PEM files, else plaintext.
status credentials(const options& o, std::shared_ptr<::grpc::ServerCredentials>& out) {
  if (!o.grpc_use_ssl && !o.grpc_use_ssl_mutual) {
    out = ::grpc::InsecureServerCredentials();
    return {};
  }
  ::grpc::SslServerCredentialsOptions ssl;
  ::grpc::SslServerCredentialsOptions::PemKeyCertPair pair;
  if (auto st = read_pem(o.grpc_server_key, "--grpc-server-key", pair.private_key)) return st;
  if (auto st = read_pem(o.grpc_server_cert, "--grpc-server-cert", pair.cert_chain)) return st;
  ssl.pem_key_cert_pairs.push_back(std::move(pair));
  if (!o.grpc_root_cert.empty())
    if (auto st = read_pem(o.grpc_root_cert, "--grpc-root-cert", ssl.pem_root_certs)) return st;
  if (o.grpc_use_ssl_mutual) ssl.client_certificate_request = GRPC_SSL_REQUEST_AND_REQUIRE_CLIENT_CERTIFICATE_AND_VERIFY;
  out = ::grpc::SslServerCredentials(ssl);
  return {};
}

}  // namespace

std::shared_ptr<grpc_frontend> start_grpc(server_state& s, const std::string& address, int port,
                                          status& st, int& bound_port) {
  const options& o = s.opts;
  auto f = std::make_shared<grpc_frontend>(s);
  ::grpc::ServerBuilder b;
  const std::string host = address.find(':') != std::string::npos ? "[" + address + "]" : address;
  std::shared_ptr<::grpc::ServerCredentials> creds;
  if ((st = credentials(o, creds))) return nullptr;
  b.AddListeningPort(host + ":" + std::to_string(port), creds, &bound_port);
  // Messages as large as an HTTP body may be; gRPC core assembles a message from the bytes as
  // they arrive, and the quota bounds the memory all calls together may hold: past it, new
  // calls get RESOURCE_EXHAUSTED instead of the process exhausting memory.
  b.SetMaxReceiveMessageSize(static_cast<int>(std::min<std::uint64_t>(INT_MAX, s.max_body_size())));
  b.SetMaxSendMessageSize(INT_MAX);
  ::grpc::ResourceQuota quota("inferwire-grpc");
  quota.Resize(static_cast<std::size_t>(s.body_budget.limit()));
  b.SetResourceQuota(quota);
  // Unless the flags say otherwise, clients' keepalive pings are welcome, with or without
  // calls in flight.
  b.AddChannelArgument(GRPC_ARG_KEEPALIVE_PERMIT_WITHOUT_CALLS, o.grpc_keepalive_permit_without_calls.value_or(true) ? 1 : 0);
  b.AddChannelArgument(GRPC_ARG_HTTP2_MIN_RECV_PING_INTERVAL_WITHOUT_DATA_MS,
                       o.grpc_http2_min_recv_ping_interval_without_data_ms.value_or(1000));
  b.AddChannelArgument(GRPC_ARG_HTTP2_MAX_PING_STRIKES, o.grpc_http2_max_ping_strikes.value_or(0));
  if (o.grpc_keepalive_time_ms) b.AddChannelArgument(GRPC_ARG_KEEPALIVE_TIME_MS, *o.grpc_keepalive_time_ms);
  if (o.grpc_keepalive_timeout_ms) b.AddChannelArgument(GRPC_ARG_KEEPALIVE_TIMEOUT_MS, *o.grpc_keepalive_timeout_ms);
  if (o.grpc_http2_max_pings_without_data)
    b.AddChannelArgument(GRPC_ARG_HTTP2_MAX_PINGS_WITHOUT_DATA, *o.grpc_http2_max_pings_without_data);
  if (o.grpc_max_connection_age_ms) b.AddChannelArgument(GRPC_ARG_MAX_CONNECTION_AGE_MS, *o.grpc_max_connection_age_ms);
  if (o.grpc_max_connection_age_grace_ms)
    b.AddChannelArgument(GRPC_ARG_MAX_CONNECTION_AGE_GRACE_MS, *o.grpc_max_connection_age_grace_ms);
  b.AddChannelArgument(GRPC_ARG_ALLOW_REUSEPORT, o.reuse_grpc_port ? 1 : 0);
  const auto& level = o.grpc_infer_response_compression_level;
  if (level != "none")
    b.SetDefaultCompressionLevel(level == "low" ? GRPC_COMPRESS_LEVEL_LOW
                                 : level == "medium" ? GRPC_COMPRESS_LEVEL_MED
                                                     : GRPC_COMPRESS_LEVEL_HIGH);
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
  // Called after main's drain: in-flight requests have finished (or --exit-timeout-secs ran out).
  // gRPC's shutdown waits for every call and connection until its deadline, idle ones included,
  // so what is left (idle streams, idle client connections) gets one second, then is cancelled.
  if (f.server) f.server->Shutdown(std::chrono::system_clock::now() + std::chrono::seconds(1));
}

}  // namespace inferwire::server
