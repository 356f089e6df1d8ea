// SPDX-License-Identifier: Apache-2.0
// The handlers of the gRPC frontend: every RPC of inference.GRPCInferenceService and
// grpc.health.v1.Health, each decoding its message into the v2 value types, calling the
// service, and encoding the reply (ModelStreamInfer's streams are grpc_stream's). Short RPCs
// are answered on the queue's thread that received them; model load and unload and queued
// inferences run on the execution pool and finish their call from there.
#include "grpc_endpoints.hpp"

#include "grpc_stream.hpp"
#include "service.hpp"

#include <inferwire/grpc/convert.hpp>

#include "grpc_service.grpc.pb.h"
#include "health.grpc.pb.h"

#include <boost/asio/post.hpp>

namespace inferwire::server::grpc_detail {

namespace pb = ::inference;
namespace conv = inferwire::grpc;

namespace {

class inference_service final : public raw_inference_service {
 public:
  explicit inference_service(server_state& s) : svc_(s) {}
  service& svc() noexcept { return svc_; }

  // --- health and metadata ---------------------------------------------------------------------

  void ServerLive(unary_context* ctx, const pb::ServerLiveRequest*,
                                         pb::ServerLiveResponse* r) {
    return now(ctx, api_category::health, [&] {
      bool live = false;
      if (auto st = svc_.live(live)) return to_grpc(st);
      r->set_live(live);
      return ::grpc::Status::OK;
    });
  }
  void ServerReady(unary_context* ctx, const pb::ServerReadyRequest*,
                                          pb::ServerReadyResponse* r) {
    return now(ctx, api_category::health, [&] {
      r->set_ready(svc_.ready());
      return ::grpc::Status::OK;
    });
  }
  void ModelReady(unary_context* ctx, const pb::ModelReadyRequest* q,
                                         pb::ModelReadyResponse* r) {
    return now(ctx, api_category::health, [&] {
      bool ready = false;
      if (auto st = svc_.model_ready(q->name(), q->version(), ready)) return to_grpc(st);
      r->set_ready(ready);
      return ::grpc::Status::OK;
    });
  }
  void ServerMetadata(unary_context* ctx, const pb::ServerMetadataRequest*,
                                             pb::ServerMetadataResponse* r) {
    return now(ctx, api_category::metadata, [&] {
      conv::to_proto(svc_.server_metadata(), *r);
      return ::grpc::Status::OK;
    });
  }
  void ModelMetadata(unary_context* ctx, const pb::ModelMetadataRequest* q,
                                            pb::ModelMetadataResponse* r) {
    return now(ctx, api_category::metadata, [&] {
      v2::model_metadata md;
      if (auto st = svc_.model_metadata(q->name(), q->version(), md)) return to_grpc(st);
      conv::to_proto(md, *r);
      return ::grpc::Status::OK;
    });
  }
  void ModelConfig(unary_context* ctx, const pb::ModelConfigRequest* q,
                                          pb::ModelConfigResponse* r) {
    return now(ctx, api_category::model_config, [&] {
      std::shared_ptr<const model_config> c;
      if (auto st = svc_.model_configuration(q->name(), q->version(), c)) return to_grpc(st);
      *r->mutable_config() = c->proto;
      return ::grpc::Status::OK;
    });
  }
  void ModelStatistics(unary_context* ctx, const pb::ModelStatisticsRequest* q,
                                              pb::ModelStatisticsResponse* r) {
    return now(ctx, api_category::statistics, [&] {
      v2::statistics_response out;
      if (auto st = svc_.statistics(q->name(), q->version(), out)) return to_grpc(st);
      conv::to_proto(out, *r);
      return ::grpc::Status::OK;
    });
  }

  // --- repository ------------------------------------------------------------------------------

  void RepositoryIndex(unary_context* ctx, const pb::RepositoryIndexRequest* q,
                                              pb::RepositoryIndexResponse* r) {
    return now(ctx, api_category::model_repository, [&] {
      std::vector<v2::repository_index_entry> index;
      if (auto st = svc_.repository_index(q->repository_name(), q->ready(), index)) return to_grpc(st);
      conv::to_proto(index, *r);
      return ::grpc::Status::OK;
    });
  }
  void RepositoryModelLoad(unary_context* ctx, const pb::RepositoryModelLoadRequest* q,
                                                  pb::RepositoryModelLoadResponse*) {
    return later(ctx, api_category::model_repository, [this, q] {
      v2::repository_load_request load;
      if (auto st = conv::from_proto(*q, load)) return to_grpc(st);
      return to_grpc(svc_.repository_load(q->repository_name(), q->model_name(), load));
    });
  }
  void RepositoryModelUnload(unary_context* ctx,
                                                    const pb::RepositoryModelUnloadRequest* q,
                                                    pb::RepositoryModelUnloadResponse*) {
    return later(ctx, api_category::model_repository, [this, q] {
      return to_grpc(svc_.repository_unload(q->repository_name(), q->model_name(),
                                            conv::from_proto(*q).unload_dependents));
    });
  }

  // --- shared memory ---------------------------------------------------------------------------

  void SystemSharedMemoryStatus(unary_context* ctx,
                                                       const pb::SystemSharedMemoryStatusRequest* q,
                                                       pb::SystemSharedMemoryStatusResponse* r) {
    return now(ctx, api_category::shared_memory, [&] {
      std::vector<v2::system_shm_status> v;
      if (auto st = svc_.system_shm_status(q->name(), v)) return to_grpc(st);
      conv::to_proto(v, *r);
      return ::grpc::Status::OK;
    });
  }
  void SystemSharedMemoryRegister(unary_context* ctx,
                                                         const pb::SystemSharedMemoryRegisterRequest* q,
                                                         pb::SystemSharedMemoryRegisterResponse*) {
    return now(ctx, api_category::shared_memory, [&] { return to_grpc(svc_.register_system_shm(conv::from_proto(*q))); });
  }
  void SystemSharedMemoryUnregister(unary_context* ctx,
                                                           const pb::SystemSharedMemoryUnregisterRequest* q,
                                                           pb::SystemSharedMemoryUnregisterResponse*) {
    return now(ctx, api_category::shared_memory, [&] { return to_grpc(svc_.unregister_shm(region_kind::system, q->name())); });
  }
  void CudaSharedMemoryStatus(unary_context* ctx,
                                                     const pb::CudaSharedMemoryStatusRequest* q,
                                                     pb::CudaSharedMemoryStatusResponse* r) {
    return now(ctx, api_category::shared_memory, [&] {
      std::vector<v2::cuda_shm_status> v;
      if (auto st = svc_.cuda_shm_status(q->name(), v)) return to_grpc(st);
      conv::to_proto(v, *r);
      return ::grpc::Status::OK;
    });
  }
  void CudaSharedMemoryRegister(unary_context* ctx,
                                                       const pb::CudaSharedMemoryRegisterRequest* q,
                                                       pb::CudaSharedMemoryRegisterResponse*) {
    return now(ctx, api_category::shared_memory, [&] {
      v2::cuda_shm_register_request reg;
      if (auto st = conv::from_proto(*q, reg)) return to_grpc(st);
      return to_grpc(svc_.register_cuda_shm(reg));
    });
  }
  void CudaSharedMemoryUnregister(unary_context* ctx,
                                                         const pb::CudaSharedMemoryUnregisterRequest* q,
                                                         pb::CudaSharedMemoryUnregisterResponse*) {
    return now(ctx, api_category::shared_memory, [&] { return to_grpc(svc_.unregister_shm(region_kind::cuda, q->name())); });
  }

  // --- trace and log settings ------------------------------------------------------------------

  void TraceSetting(unary_context* ctx, const pb::TraceSettingRequest* q,
                                           pb::TraceSettingResponse* r) {
    return now(ctx, api_category::trace, [&] {
      v2::trace_settings result;
      const v2::trace_settings update = conv::trace_settings_from_proto(q->settings(), true);
      if (auto st = svc_.trace_settings(q->model_name(), q->settings().empty() ? nullptr : &update, result))
        return to_grpc(st);
      conv::to_proto(result, *r->mutable_settings());
      return ::grpc::Status::OK;
    });
  }
  void LogSettings(unary_context* ctx, const pb::LogSettingsRequest* q,
                                          pb::LogSettingsResponse* r) {
    return now(ctx, api_category::logging, [&] {
      v2::log_settings update, current;
      if (auto st = conv::log_settings_from_proto(q->settings(), update)) return to_grpc(st);
      if (auto st = svc_.log_settings(q->settings().empty() ? nullptr : &update, current)) return to_grpc(st);
      conv::to_proto(current, *r->mutable_settings());
      return ::grpc::Status::OK;
    });
  }

  // --- inference -------------------------------------------------------------------------------

  void ModelInfer(unary_context* ctx, pb::ModelInferRequest* q, pb::ModelInferResponse* r) {
    if (auto st = restricted(&ctx->context(), api_category::inference)) return ctx->finish(to_grpc(st));
    // Once shutdown began, new inferences are refused, on open connections too; those in flight
    // finish within --exit-timeout-secs (Triton's gRPC frontend, its text).
    if (svc_.state().exiting.load()) return ctx->finish(to_grpc(shutting_down_status()));
    auto call = make_call();
    const message_size size{ctx->received_bytes(), typed_bytes(*q)};
    // A large message leaves the heap larger once answered, whether or not it was valid.
    svc_.state().heap.note(size.total());
    auto decode = [&](infer_call& c) -> decoded {
      // Upstream's ModelInfer handler refuses decoupled models with this text (HTTP has its own).
      if (c.model->config->decoupled)
        return decoded::refuse({errc::unsupported, "ModelInfer RPC doesn't support models with decoupled transaction policy"});
      return decode_message(*q, size, c);
    };
    // `q` and `r` live until the reply is sent; the decoded request may view q's bytes. An output
    // that is a whole input (identity, pass-through models) takes q's string instead of a copy;
    // nothing reads the request after its reply is encoded.
    const infer_start started = svc_.start_infer(call, q->model_name(), q->model_version(), decode, cancellable(&ctx->context()),
                                                 [this, ctx, call, q, r](status st) {
      if (!st) st = guarded([&] {
        conv::encode_infer_response(call->response, *r, q);
        return status{};
      });
      if (call->trace) call->trace->stamp_now("GRPC_SEND_START");
      // After finish() the call may be gone: the trace is the infer_call's.
      ctx->finish(to_grpc(st));
      if (call->trace) {
        call->trace->stamp_now("GRPC_SEND_END");
        svc_.state().traces.finish(*call->trace);
      }
    });
    if (started) ctx->finish(to_grpc(started.error));
  }

 private:
  // The hooks of a call: it is cancelled once its client went away.
  static infer_hooks cancellable(::grpc::ServerContextBase* ctx) { return {nullptr, [ctx] { return ctx->IsCancelled(); }}; }
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

  status restricted(const ::grpc::ServerContextBase* ctx, api_category c) const {
    return grpc_detail::restricted(svc_.state().opts, ctx, c);
  }

  // A unary RPC whose work is short and never waits: done on the queue's thread that received it.
  template <class F>
  void now(unary_context* ctx, api_category c, F f) {
    if (auto st = restricted(&ctx->context(), c)) ctx->finish(to_grpc(st));
    else ctx->finish(guarded_grpc(f));
  }
  // A unary RPC that may take long (model load and unload): done on the execution pool, so no
  // queue thread waits for it; the reply comes when it finished.
  template <class F>
  void later(unary_context* ctx, api_category c, F f) {
    if (auto st = restricted(&ctx->context(), c)) return ctx->finish(to_grpc(st));
    boost::asio::post(svc_.state().execution, [ctx, f = std::move(f)]() mutable { ctx->finish(guarded_grpc(f)); });
  }

  service svc_;
};

class health_service final : public ::grpc::health::v1::Health::AsyncService {
 public:
  explicit health_service(server_state& s) : s_(s) {}
  void Check(unary_context* ctx, const ::grpc::health::v1::HealthCheckRequest*,
             ::grpc::health::v1::HealthCheckResponse* r) {
    // Triton restricts the standard health check with the `health` category too.
    if (auto st = grpc_detail::restricted(s_.opts, &ctx->context(), api_category::health))
      return ctx->finish(to_grpc(st));
    r->set_status(s_.ready() ? ::grpc::health::v1::HealthCheckResponse::SERVING
                             : ::grpc::health::v1::HealthCheckResponse::NOT_SERVING);
    ctx->finish(::grpc::Status::OK);
  }

 private:
  server_state& s_;
};

// The frontend's services: registered with the server, then listened for on each queue.
class frontend_services final : public services {
 public:
  explicit frontend_services(server_state& s) : inference_(s), health_(s) {}
  void add_to(::grpc::ServerBuilder& b) override {
    b.RegisterService(&inference_);
    b.RegisterService(&health_);
  }
  void listen(::grpc::ServerCompletionQueue* cq, const std::shared_ptr<queue_gate>& gate, int ahead) override;

 private:
  inference_service inference_;
  health_service health_;
};

using gen = pb::GRPCInferenceService;
namespace health_v1 = ::grpc::health::v1;

#define INFERWIRE_UNARY(Method, ...)                                                                          \
  unary_call<inference_service, pb::Method##Request, pb::Method##Response, &gen::AsyncService::Request##Method, \
             &inference_service::Method __VA_OPT__(, ) __VA_ARGS__>

// Asks for the next call of every method on `cq`: `ahead` calls of ModelInfer and streams, one of
// the rest.
void listen_all(inference_service& inference, health_service& health, ::grpc::ServerCompletionQueue* cq,
                const std::shared_ptr<queue_gate>& gate, int ahead) {
  for (int i = 0; i < ahead; ++i) {
    // Raw: its request parsed by the call, its reply serialised by serialize_reply.
    constexpr ::grpc::ByteBuffer (*serialize)(pb::ModelInferResponse&, std::uint64_t&, heap_trimmer*) =
        &serialize_reply;
    unary_call<inference_service, pb::ModelInferRequest, pb::ModelInferResponse, &inference_service::RequestModelInfer,
               &inference_service::ModelInfer, true, serialize>::listen(inference, cq, gate);
    stream_call::listen(inference, inference.svc(), cq, gate);
  }
  INFERWIRE_UNARY(ServerLive)::listen(inference, cq, gate);
  INFERWIRE_UNARY(ServerReady)::listen(inference, cq, gate);
  INFERWIRE_UNARY(ModelReady)::listen(inference, cq, gate);
  INFERWIRE_UNARY(ServerMetadata)::listen(inference, cq, gate);
  INFERWIRE_UNARY(ModelMetadata)::listen(inference, cq, gate);
  INFERWIRE_UNARY(ModelConfig)::listen(inference, cq, gate);
  INFERWIRE_UNARY(ModelStatistics)::listen(inference, cq, gate);
  INFERWIRE_UNARY(RepositoryIndex)::listen(inference, cq, gate);
  INFERWIRE_UNARY(RepositoryModelLoad)::listen(inference, cq, gate);
  INFERWIRE_UNARY(RepositoryModelUnload)::listen(inference, cq, gate);
  INFERWIRE_UNARY(SystemSharedMemoryStatus)::listen(inference, cq, gate);
  INFERWIRE_UNARY(SystemSharedMemoryRegister)::listen(inference, cq, gate);
  INFERWIRE_UNARY(SystemSharedMemoryUnregister)::listen(inference, cq, gate);
  INFERWIRE_UNARY(CudaSharedMemoryStatus)::listen(inference, cq, gate);
  INFERWIRE_UNARY(CudaSharedMemoryRegister)::listen(inference, cq, gate);
  INFERWIRE_UNARY(CudaSharedMemoryUnregister)::listen(inference, cq, gate);
  INFERWIRE_UNARY(TraceSetting)::listen(inference, cq, gate);
  INFERWIRE_UNARY(LogSettings)::listen(inference, cq, gate);
  unary_call<health_service, health_v1::HealthCheckRequest, health_v1::HealthCheckResponse,
             &health_v1::Health::AsyncService::RequestCheck, &health_service::Check>::listen(health, cq, gate);
}

#undef INFERWIRE_UNARY

void frontend_services::listen(::grpc::ServerCompletionQueue* cq, const std::shared_ptr<queue_gate>& gate, int ahead) {
  listen_all(inference_, health_, cq, gate, ahead);
}

}  // namespace

std::unique_ptr<services> make_services(server_state& s) { return std::make_unique<frontend_services>(s); }

}  // namespace inferwire::server::grpc_detail
