// SPDX-License-Identifier: Apache-2.0
// gRPC frontend on gRPC's completion-queue (asynchronous) server: every RPC of
// inference.GRPCInferenceService and grpc.health.v1.Health. No thread belongs to a call or a
// stream: short RPCs are answered on the queue's thread that received them, model load and
// unload and queued inferences run on the execution pool and finish their call from there.
// Requests are decoded into the same v2 value types as HTTP and run through the same inference
// path.
#include "grpc.hpp"

#include "service.hpp"

#include <inferwire/grpc/convert.hpp>
#include <inferwire/version.hpp>

#include "grpc_service.grpc.pb.h"
#include "health.grpc.pb.h"

#include <boost/asio/post.hpp>

#include <grpcpp/grpcpp.h>
#include <grpcpp/resource_quota.h>

#include <atomic>
#include <chrono>
#include <climits>
#include <condition_variable>
#include <deque>
#include <fstream>
#include <sstream>
#include <mutex>
#include <optional>
#include <shared_mutex>
#include <thread>
#include <vector>

namespace inferwire::server {

namespace pb = ::inference;
namespace conv = inferwire::grpc;

namespace {

// The longest status message sent. gRPC carries it percent-encoded in a trailer (up to 3
// bytes per byte), and clients refuse trailers past 8 KiB by default (RESOURCE_EXHAUSTED in
// place of the real error), so the text is cut well below that.
constexpr std::size_t max_grpc_error_text = 2048;

::grpc::Status to_grpc(const status& st) {
  if (!st) return ::grpc::Status::OK;
  return {static_cast<::grpc::StatusCode>(st.grpc_code()), quote_input(st.message(), max_grpc_error_text)};
}


// --- The completion-queue machinery ---------------------------------------------------------
//
// Every RPC runs on gRPC's completion-queue API: a fixed set of threads, one per queue, each
// waits on its queue and handles what completes there. (gRPC's callback API would add its own
// threads, which poll the network and hand each call to another thread: on a 2-core machine
// that hand-off cost more CPU than the whole of a small inference.)

// What calls share with work still running elsewhere (the execution pool): whether operations
// may still start on the queues, and how many unary calls are between arrival and reply.
// Operations start under a shared lock (a write serialises its message meanwhile, so threads
// must not wait on each other for that); closing takes it exclusively.
struct queue_gate {
  std::shared_mutex mu;
  bool closed = false;
  std::atomic<int> running{0};

  /// Starts a gRPC operation unless the queues are shut down (then false, nothing started).
  template <class F>
  bool start(F&& op) {
    std::shared_lock lock(mu);
    if (closed) return false;
    op();
    return true;
  }
};

// An object with operations in flight on a queue. Each operation's tag is an `event` naming the
// object and what completed.
class rpc {
 public:
  virtual ~rpc() = default;
  virtual void on(int what, bool ok) = 0;
};
struct event {
  rpc* target;
  int what;
};

// What a unary handler sees of its call: the server context (metadata, cancellation) and the
// one reply, which any thread may send. The call may be gone as soon as finish() is called.
class unary_context {
 public:
  virtual ::grpc::ServerContext& context() = 0;
  virtual void finish(const ::grpc::Status& st) = 0;

 protected:
  ~unary_context() = default;
};

class inference_service final : public pb::GRPCInferenceService::AsyncService {
 public:
  explicit inference_service(server_state& s) : svc_(s) {}

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

  void ModelInfer(unary_context* ctx, const pb::ModelInferRequest* q,
                                         pb::ModelInferResponse* r) {
    if (auto st = restricted(&ctx->context(), api_category::inference)) return ctx->finish(to_grpc(st));
    auto call = std::make_shared<infer_call>();
    const message_size size = size_of(*q);
    // A large message leaves the heap larger once answered, whether or not it was valid.
    svc_.state().heap.note(size.total());
    auto decode = [&](infer_call& c) -> decoded {
      // Upstream's ModelInfer handler refuses decoupled models with this text (HTTP has its own).
      if (c.model->config->decoupled)
        return decoded::refuse({errc::unsupported, "ModelInfer RPC doesn't support models with decoupled transaction policy"});
      // The message was read before this handler ran: both read stamps are its arrival.
      c.received = {receive_stamp{"GRPC_WAITREAD_START", c.times.received},
                    receive_stamp{"GRPC_WAITREAD_END", c.times.received}};
      return {conv::decode_infer_request(*q, c.model->config->name, c.request), size.typed};
    };
    // `q` and `r` live until the reply is sent; the decoded request may view q's bytes.
    const infer_start started = svc_.start_infer(call, q->model_name(), q->model_version(), decode, cancellable(&ctx->context()),
                                                 [this, ctx, call, r](status st) {
      if (!st) st = guarded([&] {
        conv::encode_infer_response(call->response, *r);
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

  // --grpc-restricted-protocol: the header an RPC of a restricted category must carry.
  status restricted(const ::grpc::ServerContextBase* ctx, api_category c) const {
    const restriction* r = svc_.state().opts.grpc_restricted.find(c);
    if (!r) return {};
    const std::string header = "triton-grpc-protocol-" + r->key;
    const auto it = ctx->client_metadata().find(header);
    if (it != ctx->client_metadata().end() && std::string_view(it->second.data(), it->second.size()) == r->value)
      return {};
    return {errc::unavailable, "This protocol is restricted, expecting header '" + header + "'"};
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

  // One ModelStreamInfer stream. Requests of a stream run one after the other, so responses
  // keep the stream's order: the next request is read when the previous one is answered. No
  // thread is held while a stream is idle or its request runs; responses queue for the stream
  // and are written one at a time. A client that does not read its responses stops the stream
  // from reading requests once `max_queued` responses wait, and a decoupled model that
  // produces faster than its client reads waits (on the execution pool) at that point too.
  //
  // On the completion-queue API: every operation started (read, write, finish), the request
  // running and the end-of-call notice each hold the object (`holds_`); it deletes itself when
  // the last of them is over. Operations start through the gate, so none starts once the
  // queues are shut down.
 public:
  class stream_call final : public rpc {
   public:
    static constexpr std::size_t max_queued = 16;
    /// The largest request whose allocations request_ keeps for the next one.
    static constexpr std::size_t kept_request_bytes = 16 * 1024;

    static void listen(inference_service& svc, ::grpc::ServerCompletionQueue* cq, std::shared_ptr<queue_gate> gate) {
      auto* c = new stream_call(svc, cq, std::move(gate));
      c->ctx_.AsyncNotifyWhenDone(&c->over_ev_);
      if (!c->gate_->start([&] { svc.RequestModelStreamInfer(&c->ctx_, &c->stream_, cq, cq, &c->arrived_ev_); }))
        delete c;
    }

    void on(int what, bool ok) override {
      switch (what) {
        case arrived: return on_arrived(ok);
        case read: return on_read(ok);
        case wrote: return on_wrote(ok);
        case finished: return release();
        case over: {
          {
            std::lock_guard lock(mu_);
            broken_ = true;
          }
          room_.notify_all();
          return release();
        }
      }
    }

   private:
    enum : int { arrived, read, wrote, finished, over };

    stream_call(inference_service& svc, ::grpc::ServerCompletionQueue* cq, std::shared_ptr<queue_gate> gate)
        : svc_(svc), cq_(cq), gate_(std::move(gate)), stream_(&ctx_) {}

    void on_arrived(bool ok) {
      if (!ok) {  // the server is shutting down: no call, no other event
        delete this;
        return;
      }
      listen(svc_, cq_, gate_);
      holds_.store(1, std::memory_order_relaxed);  // the end-of-call notice
      if (auto it = ctx_.client_metadata().find("triton_grpc_error"); it != ctx_.client_metadata().end())
        close_on_error_ = std::string_view(it->second.data(), it->second.size()) == "true";
      // A restricted stream ends before any request is read.
      if (auto st = svc_.restricted(&ctx_, api_category::inference)) return finish(to_grpc(st));
      start_read();
    }

    void on_read(bool ok) {
      INFERWIRE_TAKEN_BACK(this);
      if (!ok) {  // the client closed its side, or went away
        finish(::grpc::Status::OK);
        return release();
      }
      // The request runs with its own hold on the stream, released once it is answered.
      auto call = std::make_shared<infer_call>();
      // What protobuf allocated for a large request stays with the message when it is reused
      // (cleared strings and repeated fields keep their capacity), outside the in-flight
      // budget: 128 MiB sent once stayed for the stream's life. Such a message is let go before
      // the next read.
      const message_size size = size_of(request_);
      renew_request_ = size.total() > kept_request_bytes;
      svc_.svc_.state().heap.note(size.total());
      sink_ = [this](v2::infer_response&& resp) { return send(resp, false, true); };
      auto decode = [&](infer_call& c) -> decoded {
        decoupled_ = c.model->config->decoupled;
        if (decoupled_) c.hooks.sink = &sink_;
        c.received = {receive_stamp{"GRPC_WAITREAD_START", c.times.received},
                      receive_stamp{"GRPC_WAITREAD_END", c.times.received}};
        decoded d{conv::decode_infer_request(request_, c.model->config->name, c.request), size.typed};
        empty_final_ = c.request.parameters.get<bool>("triton_enable_empty_final_response").value_or(false);
        return d;
      };
      // The read's hold passes to the running request (which counts as in flight until its
      // responses are queued), released once it is answered.
      const infer_start started = svc_.svc_.start_infer(call, request_.model_name(), request_.model_version(), decode,
                                                        cancellable(&ctx_), [this, call](status done) {
        answered(*call, std::move(done));
        release();
      });
      if (started) {
        answered(*call, started.error);
        release();
      }
    }

    void on_wrote(bool ok) {
      const pb::ModelStreamInferResponse* next = nullptr;
      std::optional<::grpc::Status> final_status;
      bool resume_read = false;
      {
        std::lock_guard lock(mu_);
        queue_.pop_front();
        progress_ = std::chrono::steady_clock::now();
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
      if (resume_read) start_read();
      if (next) start_write(next);
      else if (final_status) start_finish(*final_status);
      release();
    }

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
      start_read();
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
      if (wait) wait_for_room(lock);
      if (broken_) return false;
      queue_.push_back(std::move(out));  // a deque keeps its elements in place
      if (writing_) return true;
      writing_ = true;
      progress_ = std::chrono::steady_clock::now();
      const auto* first = &queue_.front();  // only on_wrote of this write pops it
      lock.unlock();
      start_write(first);
      return true;
    }

    // While the queue is full. A client that takes no response for --stall-timeout-secs has
    // its stream cancelled: the producer gets false and its model stops, instead of holding
    // the model's instance and an execution thread for as long as the client keeps the
    // connection open.
    void wait_for_room(std::unique_lock<std::mutex>& lock) {
      const auto stall = std::chrono::seconds(svc_.svc_.state().opts.stall_timeout_secs);
      const auto room = [&] { return broken_ || queue_.size() < max_queued; };
      while (!room_.wait_until(lock, progress_ + stall, room))
        if (std::chrono::steady_clock::now() - progress_ >= stall) {
          broken_ = true;
          lock.unlock();
          ctx_.TryCancel();
          lock.lock();
          return;
        }
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
      start_finish(st);
    }

    // Each operation holds the stream until its completion comes back.
    void start_read() {
      if (std::exchange(renew_request_, false)) request_ = pb::ModelInferRequest();
      hold();
      INFERWIRE_HANDED_OVER(this);
      if (!gate_->start([&] { stream_.Read(&request_, &read_ev_); })) release();
    }
    void start_write(const pb::ModelStreamInferResponse* m) {
      hold();
      if (!gate_->start([&] { stream_.Write(*m, &wrote_ev_); })) release();
    }
    void start_finish(const ::grpc::Status& st) {
      hold();
      if (!gate_->start([&] { stream_.Finish(st, &finished_ev_); })) release();
    }
    void hold() { holds_.fetch_add(1, std::memory_order_relaxed); }
    void release() {
      if (holds_.fetch_sub(1, std::memory_order_acq_rel) == 1) delete this;
    }

    inference_service& svc_;
    ::grpc::ServerCompletionQueue* cq_;
    std::shared_ptr<queue_gate> gate_;
    ::grpc::ServerContext ctx_;
    ::grpc::ServerAsyncReaderWriter<pb::ModelStreamInferResponse, pb::ModelInferRequest> stream_;
    event arrived_ev_{this, arrived}, read_ev_{this, read}, wrote_ev_{this, wrote}, finished_ev_{this, finished},
        over_ev_{this, over};
    std::atomic<int> holds_{0};
    pb::ModelInferRequest request_;
    bool renew_request_ = false;  ///< request_ held a large request: start the next read afresh
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
    /// The last write started from an empty queue or completed: when the client last made
    /// progress on its responses.
    std::chrono::steady_clock::time_point progress_;
    std::optional<::grpc::Status> pending_finish_;
  };

 private:

  // What a request message takes: its bytes as received, and what protobuf made of its typed
  // contents beyond them.
  struct message_size {
    std::uint64_t wire = 0, typed = 0;
    std::uint64_t total() const noexcept { return wire + typed; }
  };
  static message_size size_of(const pb::ModelInferRequest& q) { return {q.ByteSizeLong(), parsed_typed_bytes(q)}; }

  // What typed contents take once protobuf parsed them: each element at its full width (an
  // INT64 zero that came as one byte takes eight). A queued call keeps them, and the copy a
  // conversion makes (narrowing, BYTES), so both count against the in-flight budget as an HTTP
  // request's JSON tensors do; raw contents are what arrived.
  static std::uint64_t parsed_typed_bytes(const pb::ModelInferRequest& q) {
    std::uint64_t n = 0;
    for (const auto& t : q.inputs()) {
      if (!t.has_contents()) continue;
      const pb::InferTensorContents& c = t.contents();
      auto count = [](int k) { return static_cast<std::uint64_t>(k); };
      n += count(c.bool_contents_size()) +
           4 * (count(c.int_contents_size()) + count(c.uint_contents_size()) + count(c.fp32_contents_size())) +
           8 * (count(c.int64_contents_size()) + count(c.uint64_contents_size()) + count(c.fp64_contents_size()));
      for (const auto& b : c.bytes_contents()) n += sizeof b + b.size();
    }
    return n;
  }

  service svc_;
};

class health_service final : public ::grpc::health::v1::Health::AsyncService {
 public:
  explicit health_service(server_state& s) : s_(s) {}
  void Check(unary_context* ctx, const ::grpc::health::v1::HealthCheckRequest*,
             ::grpc::health::v1::HealthCheckResponse* r) {
    r->set_status(s_.ready() ? ::grpc::health::v1::HealthCheckResponse::SERVING
                             : ::grpc::health::v1::HealthCheckResponse::NOT_SERVING);
    ctx->finish(::grpc::Status::OK);
  }

 private:
  server_state& s_;
};

// One unary call of the method that `Ask` (the generated Request<Method>) asks for, handled by
// `Handle` (the service's member function of the same name). When it arrives, the next call of
// the method is asked for at once. `NotifyDone`: ask for gRPC's end-of-call notice, which
// ServerContext::IsCancelled needs on this API (ModelInfer: a request whose client went away
// while it queued is dropped); the call is then deleted after both the reply and the notice.
template <class Service, class Req, class Resp, auto Ask, auto Handle, bool NotifyDone = false>
class unary_call final : public rpc, public unary_context {
 public:
  static void listen(Service& svc, ::grpc::ServerCompletionQueue* cq, std::shared_ptr<queue_gate> gate) {
    auto* c = new unary_call(svc, cq, std::move(gate));
    if constexpr (NotifyDone) c->ctx_.AsyncNotifyWhenDone(&c->over_);
    if (!c->gate_->start([&] { (svc.*Ask)(&c->ctx_, &c->request_, &c->writer_, cq, cq, &c->arrived_); })) delete c;
  }

  void on(int what, bool ok) override {
    if (what == arrived) {
      if (!ok) {  // the server is shutting down: no call, no other event
        delete this;
        return;
      }
      listen(svc_, cq_, gate_);
      gate_->running.fetch_add(1, std::memory_order_relaxed);
      (svc_.*Handle)(this, &request_, &response_);
      return;
    }
    if (what == sent) sent_seen_ = true;
    else over_seen_ = true;
    if (sent_seen_ && (over_seen_ || !NotifyDone)) delete this;
  }

  ::grpc::ServerContext& context() override { return ctx_; }

  void finish(const ::grpc::Status& st) override {
    auto gate = gate_;  // `this` may be deleted as soon as the reply is sent
    gate->start([&] {
      if (st.ok()) writer_.Finish(response_, st, &sent_);
      else writer_.FinishWithError(st, &sent_);
    });
    // (A reply that comes after the queues were shut down is not sent; the call is left to the
    // process's end.)
    gate->running.fetch_sub(1, std::memory_order_release);
  }

 private:
  enum : int { arrived, sent, over };

  unary_call(Service& svc, ::grpc::ServerCompletionQueue* cq, std::shared_ptr<queue_gate> gate)
      : svc_(svc), cq_(cq), gate_(std::move(gate)), writer_(&ctx_) {}

  Service& svc_;
  ::grpc::ServerCompletionQueue* cq_;
  std::shared_ptr<queue_gate> gate_;
  ::grpc::ServerContext ctx_;
  Req request_;
  Resp response_;
  ::grpc::ServerAsyncResponseWriter<Resp> writer_;
  event arrived_{this, arrived}, sent_{this, sent}, over_{this, over};
  bool sent_seen_ = false;
  bool over_seen_ = false;
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
    INFERWIRE_UNARY(ModelInfer, true)::listen(inference, cq, gate);
    inference_service::stream_call::listen(inference, cq, gate);
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

}  // namespace

class grpc_frontend {
 public:
  explicit grpc_frontend(server_state& s) : inference(s), health(s) {}
  ~grpc_frontend() { close_queues(); }

  // Shuts the queues down (after the server: gRPC's order; no operation starts after this) and
  // waits for their threads, which drain them; each call deletes itself on its last event.
  void close_queues() {
    {
      std::unique_lock lock(gate->mu);
      if (gate->closed) return;
      gate->closed = true;
    }
    if (server) server->Shutdown(std::chrono::system_clock::now());  // at once if already done
    for (auto& q : queues) q->Shutdown();
    for (auto& t : threads)
      if (t.joinable()) t.join();
  }

  // Destroyed in reverse: the threads, the server, then its queues and the services.
  inference_service inference;
  health_service health;
  std::vector<std::unique_ptr<::grpc::ServerCompletionQueue>> queues;
  std::unique_ptr<::grpc::Server> server;
  std::vector<std::thread> threads;  ///< one per queue
  std::shared_ptr<queue_gate> gate = std::make_shared<queue_gate>();
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
  // Every open call costs the server 12-16 KiB (gRPC's call and stream, and a stream's state
  // here) for a HEADERS frame of a few bytes, whether or not a message follows; HTTP/2's own
  // default lets a connection open 2^31 of them.
  b.AddChannelArgument(GRPC_ARG_MAX_CONCURRENT_STREAMS, static_cast<int>(o.grpc_max_concurrent_streams));
  // gRPC inflates a compressed message before any of the server's code sees it, and neither the
  // quota nor the in-flight budget counts what it inflates: ~1 MB of gzip becomes a 900 MiB
  // message. Operators facing untrusted clients can turn compression off; calls that use it
  // then end with UNIMPLEMENTED before their message is read.
  if (!o.grpc_compression)
    for (auto algorithm : {GRPC_COMPRESS_DEFLATE, GRPC_COMPRESS_GZIP}) b.SetCompressionAlgorithmSupportStatus(algorithm, false);
  const auto& level = o.grpc_infer_response_compression_level;
  if (level != "none" && o.grpc_compression)
    b.SetDefaultCompressionLevel(level == "low" ? GRPC_COMPRESS_LEVEL_LOW
                                 : level == "medium" ? GRPC_COMPRESS_LEVEL_MED
                                                     : GRPC_COMPRESS_LEVEL_HIGH);
  b.RegisterService(&f->inference);
  b.RegisterService(&f->health);
  // One completion queue per thread, each thread the only one polling its queue. Few threads:
  // every thread beyond the first is another poller, and gRPC then often reads a call on one
  // thread and completes it on another's queue; on a 2-core machine two pollers doubled the CPU
  // a small ModelInfer costs (docs/benchmarks.md). Inferences that do not run inline go to the
  // execution pool, so a slow model never holds these threads.
  const unsigned thread_count =
      o.grpc_thread_count ? o.grpc_thread_count : std::max(1u, std::thread::hardware_concurrency() / 8);
  for (unsigned i = 0; i < thread_count; ++i) f->queues.push_back(b.AddCompletionQueue());
  f->server = b.BuildAndStart();
  if (!f->server || bound_port == 0) {
    st = {errc::internal, "failed to start the gRPC frontend on " + host + ":" + std::to_string(port)};
    f->close_queues();
    return nullptr;
  }
  // A few calls of the busy methods are asked for ahead on each queue, so that arriving calls
  // never wait for one.
  for (auto& q : f->queues) {
    listen_all(f->inference, f->health, q.get(), f->gate, 8);
    f->threads.emplace_back([cq = q.get()] {
      void* tag = nullptr;
      bool ok = false;
      while (cq->Next(&tag, &ok)) {
        auto* e = static_cast<event*>(tag);
        e->target->on(e->what, ok);
      }
    });
  }
  return f;
}

void stop_grpc(grpc_frontend& f) {
  // Called after main's drain: in-flight requests have finished (or --exit-timeout-secs ran out).
  // gRPC's shutdown waits for every call and connection until its deadline, idle ones included,
  // so what is left (idle streams, idle client connections) gets one second, then is cancelled.
  if (f.server) f.server->Shutdown(std::chrono::system_clock::now() + std::chrono::seconds(1));
  // Unary calls still running on the execution pool get a little longer to send their reply
  // (the queues' threads keep serving meanwhile), then the queues close.
  const auto until = std::chrono::steady_clock::now() + std::chrono::seconds(2);
  while (f.gate->running.load(std::memory_order_acquire) > 0 && std::chrono::steady_clock::now() < until)
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  f.close_queues();
}

}  // namespace inferwire::server
