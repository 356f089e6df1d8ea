// SPDX-License-Identifier: Apache-2.0
// inferwire/grpc/impl/client.hpp — bodies of client.hpp: the generated stubs, the conversions,
// gRPC's synchronous API for the blocking forms and its completion-queue API, on one thread
// shared by all clients, for the asynchronous unary ones (streams: see stream.hpp).
#ifndef INFERWIRE_GRPC_IMPL_CLIENT_HPP
#define INFERWIRE_GRPC_IMPL_CLIENT_HPP

#include <inferwire/core/config.hpp>
#include <inferwire/grpc/convert_messages.hpp>
#include <inferwire/grpc/impl/error.hpp>

#include "grpc_service.grpc.pb.h"
#include "health.grpc.pb.h"

#include <boost/asio/dispatch.hpp>
#include <boost/asio/error.hpp>  // net::error::eof, the end of a stream (impl/stream.hpp)
#include <boost/asio/system_executor.hpp>
#include <boost/json/parse.hpp>
#include <google/protobuf/util/json_util.h>
#include <grpcpp/alarm.h>
#include <grpcpp/channel.h>
#include <grpcpp/client_context.h>
#include <grpcpp/completion_queue.h>
#include <grpcpp/create_channel.h>
#include <grpcpp/security/credentials.h>
#include <grpcpp/support/channel_arguments.h>

#include <atomic>
#include <condition_variable>
#include <deque>
#include <functional>
#include <mutex>
#include <optional>
#include <thread>
#include <tuple>
#include <utility>
#include <vector>

#include <pthread.h>

namespace inferwire::grpc {
namespace detail {

using stub_type = pb::GRPCInferenceService::Stub;
using health_stub_type = ::grpc::health::v1::Health::Stub;

/// What a completion-queue tag points to: one asynchronous call, told that it finished, or the
/// completion thread's wake-up.
struct completion {
  void (*done)(completion*);
};

/// One unary call: its context and messages, and how to run it either way.
struct call_data {
  ::grpc::ClientContext ctx;
  ::grpc::Status status;  // of an asynchronous call
  virtual ~call_data() = default;
  virtual ::grpc::Status run_sync() = 0;
  /// Makes the asynchronous call on `queue`, its request serialized (on the caller's thread).
  virtual void prepare_async(::grpc::CompletionQueue* queue) = 0;
  /// Starts the prepared call; its end comes out of the queue as `tag`, which may come before
  /// this returns: the call is not touched after it is handed over.
  virtual void start_async(void* tag) = 0;
};

/// The completion queue of the asynchronous unary calls of every client in the process and the
/// one thread that waits on it, alive while any client that made such a call is. One thread
/// that both polls the network and completes the calls is what a hand-written completion-queue
/// client does; gRPC's callback API wakes two of its threads per call instead. One for all
/// clients, not one each, because gRPC (epoll1) lets whichever thread waits on any queue poll
/// for all of them: idle threads of other clients would take events and pass them on.
///
/// Calls started on other threads while calls are in flight are handed to this thread too:
/// two threads working on one HTTP/2 connection at once make gRPC pass the transport's work
/// to its executor thread (at 16 calls in flight, more than half the process's CPU time went
/// to that). The hand-over is a list: the thread starts what it finds after each event, and
/// an alarm wakes it only when the list was empty and no wake-up is already on its way, so
/// the calls that a burst of handlers starts cost one wake-up. With no call in flight the
/// caller starts its call itself: the thread is then waiting on the network, not working on
/// it, and a wake-up would only add latency.
class completion_thread {
  static constexpr std::size_t max_batch = 64;

  struct core {
    ::grpc::CompletionQueue queue;
    std::mutex mu;
    std::vector<std::pair<call_data*, completion*>> starts;  // to start on the thread
    bool waking = false;                                     // the alarm is set
    std::atomic<long> in_flight{0};                          // started and not finished
    ::grpc::Alarm alarm;  // declared after the queue, so destroyed before it
    struct waker : completion {
      core* owner;
    } wake{{&on_wake}, this};
    std::thread::id thread;

    static void on_wake(completion* c);
    /// Starts the calls handed over (on the thread).
    void start_handed_over() {
      std::vector<std::pair<call_data*, completion*>> mine;
      {
        std::lock_guard lock(mu);
        if (starts.empty()) return;
        mine.swap(starts);
      }
      for (auto [call, tag] : mine) call->start_async(tag);
    }
  };

 public:
  completion_thread() : core_(std::make_shared<core>()) {
    // The thread keeps the queue alive while it runs, so the last client may go away on it (a
    // handler that runs inline and drops it): the thread is then left to finish on its own.
    thread_ = std::thread([c = core_] {
      ::pthread_setname_np(::pthread_self(), "inferwire-grpc");
      void* tag = nullptr;
      bool ok = false;
      std::vector<completion*> ready;
      // Finish's event always comes with ok == true; the call's status says how it went.
      while (c->queue.Next(&tag, &ok)) {
        ready.push_back(static_cast<completion*>(tag));
        // With other calls in flight, the events already there are taken too and completed in
        // one go: handlers bound to another thread's executor are then queued together, and
        // that thread wakes once for all of them instead of once each.
        if (c->in_flight.load(std::memory_order_relaxed) > 1)
          while (ready.size() < max_batch &&
                 c->queue.AsyncNext(&tag, &ok, gpr_time_0(GPR_CLOCK_MONOTONIC)) ==
                     ::grpc::CompletionQueue::GOT_EVENT)
            ready.push_back(static_cast<completion*>(tag));
        for (auto* done : ready) {
          INFERWIRE_TAKEN_BACK(done);
          done->done(done);
        }
        ready.clear();
        c->start_handed_over();
      }
    });
    core_->thread = thread_.get_id();
  }
  /// Runs when no client holds the thread any more, so no call is left on the queue.
  ~completion_thread() {
    core_->queue.Shutdown();
    if (thread_.get_id() == std::this_thread::get_id()) thread_.detach();
    else thread_.join();
  }
  completion_thread(const completion_thread&) = delete;
  completion_thread& operator=(const completion_thread&) = delete;

  ::grpc::CompletionQueue* queue() noexcept { return &core_->queue; }

  /// Starts `call`, whose end comes out of the queue as `tag`: here, or on the thread. Its
  /// request is serialized here either way, so a large one does not hold up the thread.
  void start(call_data& call, completion* tag) {
    auto& c = *core_;
    call.prepare_async(&c.queue);
    const bool others = c.in_flight.fetch_add(1, std::memory_order_relaxed) > 0;
    if (!others || std::this_thread::get_id() == c.thread) return call.start_async(tag);
    bool wake = false;
    {
      std::lock_guard lock(c.mu);
      wake = c.starts.empty() && !c.waking;
      c.waking = c.waking || wake;
      c.starts.emplace_back(&call, tag);
    }
    // Due at once; its event is the wake-up. Set outside the lock: the thread clears `waking`
    // only when that event comes, so the alarm is never set twice at a time.
    if (wake) c.alarm.Set(&c.queue, gpr_time_0(GPR_CLOCK_MONOTONIC), &c.wake);
  }
  /// A call started by start() has finished (on the thread).
  void finished() noexcept { core_->in_flight.fetch_sub(1, std::memory_order_relaxed); }

  /// The process's thread, started if none runs.
  static std::shared_ptr<completion_thread> get() {
    // Never destroyed: a client may be destroyed during the process's exit.
    static auto* mu = new std::mutex;
    static auto* current = new std::weak_ptr<completion_thread>;
    std::lock_guard lock(*mu);
    auto t = current->lock();
    if (!t) *current = t = std::make_shared<completion_thread>();
    return t;
  }

 private:
  std::shared_ptr<core> core_;
  std::thread thread_;
};

inline void completion_thread::core::on_wake(completion* w) {
  auto* c = static_cast<core::waker*>(w)->owner;
  std::lock_guard lock(c->mu);
  c->waking = false;  // the thread looks at the list right after this
}

struct client_state {
  /// The private io_context of a client made without an executor (goes last). It is made when
  /// something first needs the executor (an asynchronous call, a stream, get_executor()): a
  /// program that makes only blocking calls never builds one, and does not compile one either
  /// (about a tenth of such a translation unit's compile time).
  std::shared_ptr<void> own_ioc;
  std::once_flag own_ioc_once;
  bool lazy_executor = false;  // made without an executor
  net::any_io_executor executor_;  // set at construction, or with own_ioc
  std::string target;
  client_options options;
  std::shared_ptr<::grpc::Channel> channel;
  std::unique_ptr<stub_type> stub;
  std::unique_ptr<health_stub_type> health;
  /// Taken with the first asynchronous unary call. Every call holds the state, so the state
  /// lets go of the thread only when none of its calls is left on the queue.
  std::shared_ptr<completion_thread> completions;
  std::once_flag completions_once;

  completion_thread& completion() {
    std::call_once(completions_once, [this] { completions = completion_thread::get(); });
    return *completions;
  }

  /// The executor of completions: the client's, or its private io_context's.
  const net::any_io_executor& executor() {
    if (lazy_executor) {
      std::call_once(own_ioc_once, [this] {
        auto ioc = std::make_shared<net::io_context>(1);
        executor_ = ioc->get_executor();
        own_ioc = std::move(ioc);
      });
    }
    return executor_;
  }
};

// --- where a client's channel may go --------------------------------------------------------
//
// gRPC 1.51 runs callback-API reactions on the threads of a process-wide completion queue that
// lives while any channel uses it. Destroying the last such channel on one of those threads makes
// the queue join the thread it runs on; the join fails, the queue is freed under the running
// thread and the process aborts (`assertion failed: prior > 0` in grpc_cq_internal_unref). So a
// client's state, which owns its channel, is never destroyed on a reaction thread: a release
// there parks the state, and the next release, construction or destruction of a client on any
// other thread destroys what is parked. Operations also carry their reference to the state along
// with their completion, so with an io_context executor the last reference normally goes on the
// application's thread anyway.

/// True while the current thread runs one of our gRPC reactions.
inline thread_local bool in_reaction = false;

/// Marks the current thread as running a reaction for the scope's lifetime.
class reaction_scope {
 public:
  reaction_scope() noexcept : outer_(in_reaction) { in_reaction = true; }
  ~reaction_scope() { in_reaction = outer_; }
  reaction_scope(const reaction_scope&) = delete;
  reaction_scope& operator=(const reaction_scope&) = delete;

 private:
  bool outer_;
};

/// Client states released on reaction threads, waiting for another thread to destroy them.
struct parked_states {
  std::mutex mu;
  std::vector<client_state*> states;

  /// Never destroyed: a reaction thread may still park a state while the process exits.
  static parked_states& get() {
    static auto* p = new parked_states;
    return *p;
  }
};

/// Destroys the parked states, unless called on a reaction thread.
inline void destroy_parked() {
  if (in_reaction) return;
  auto& p = parked_states::get();
  std::vector<client_state*> mine;
  {
    std::lock_guard lock(p.mu);
    mine.swap(p.states);
  }
  for (auto* s : mine) delete s;
}

/// The deleter of every client_state.
inline void release_client_state(client_state* s) {
  if (in_reaction) {
    auto& p = parked_states::get();
    std::lock_guard lock(p.mu);
    p.states.push_back(s);
    return;
  }
  delete s;
  destroy_parked();
}

struct result_access {
  static infer_result make(std::shared_ptr<pb::ModelInferResponse> m) {
    infer_result r;
    if (m) decode_infer_response(*m, r.response_);
    r.message_ = std::move(m);
    return r;
  }
};

inline ::grpc_compression_algorithm algorithm(compression c) {
  switch (c) {
    case compression::gzip: return GRPC_COMPRESS_GZIP;
    case compression::deflate: return GRPC_COMPRESS_DEFLATE;
    default: return GRPC_COMPRESS_NONE;
  }
}

inline error_code to_error(const ::grpc::Status& s) {
  return s.ok() ? error_code{} : make_error(static_cast<int>(s.error_code()), s.error_message());
}

/// The call's deadline, metadata and compression: the call's options over the client's.
inline void prepare_context(::grpc::ClientContext& ctx, const client_options& c, const call_options& o) {
  const auto timeout = o.timeout.value_or(c.timeout);
  if (timeout.count() > 0) ctx.set_deadline(std::chrono::system_clock::now() + timeout);
  for (const auto& [k, v] : c.headers) ctx.AddMetadata(k, v);
  for (const auto& [k, v] : o.headers) ctx.AddMetadata(k, v);
  const auto comp = o.request_compression.value_or(c.request_compression);
  if (comp != compression::none) ctx.set_compression_algorithm(algorithm(comp));
}

template <class Stub, class Req, class Resp>
struct unary_call final : call_data {
  using sync_fn = ::grpc::Status (*)(Stub&, ::grpc::ClientContext*, const Req&, Resp*);
  using reader_type = std::unique_ptr<::grpc::ClientAsyncResponseReader<Resp>>;
  using async_fn = reader_type (*)(Stub&, ::grpc::ClientContext*, const Req&, ::grpc::CompletionQueue*);
  Stub* stub = nullptr;
  sync_fn sync = nullptr;
  async_fn async = nullptr;
  Req request;
  Resp response;
  reader_type reader;

  ::grpc::Status run_sync() override { return sync(*stub, &ctx, request, &response); }
  void prepare_async(::grpc::CompletionQueue* queue) override { reader = async(*stub, &ctx, request, queue); }
  void start_async(void* tag) override {
    auto* r = reader.get();
    r->StartCall();
    INFERWIRE_HANDED_OVER(tag);  // Finish hands the call over: its tag may come back at once
    r->Finish(&response, &status, tag);
  }
};

}  // namespace detail

INFERWIRE_DECL void detail::call_data_deleter::operator()(call_data* p) const noexcept { delete p; }

namespace detail {

/// A prepared unary call of `Stub` with `request`; `Parse` turns the response into the value.
template <class Resp, auto Parse, class Stub, class Req>
auto make_unary(Stub& stub, Req request, const client_options& c, const call_options& o,
                typename unary_call<Stub, Req, Resp>::sync_fn sync,
                typename unary_call<Stub, Req, Resp>::async_fn async) {
  using call_type = unary_call<Stub, Req, Resp>;
  using T = decltype(Parse(std::declval<Resp&>(), std::declval<error_code&>()));
  auto* call = new call_type();
  prepared_call<T> out{call_ptr(call), [](call_data& d, error_code& ec) -> T {
                         return Parse(static_cast<call_type&>(d).response, ec);
                       }};
  call->stub = &stub;
  call->sync = sync;
  call->async = async;
  call->request = std::move(request);
  prepare_context(call->ctx, c, o);
  return out;
}

// The synchronous and the completion-queue entry points of RPC `Method`, for make_unary.
#define INFERWIRE_GRPC_METHOD(Method)                                                         \
  [](auto& stub_, ::grpc::ClientContext* ctx_, const auto& req_, auto* resp_) {               \
    return stub_.Method(ctx_, req_, resp_);                                                   \
  },                                                                                          \
      [](auto& stub_, ::grpc::ClientContext* ctx_, const auto& req_, ::grpc::CompletionQueue* cq_) { \
        return stub_.PrepareAsync##Method(ctx_, req_, cq_);                                   \
      }

// How each response becomes the call's value.
inline bool parse_live(pb::ServerLiveResponse& r, error_code&) { return r.live(); }
inline bool parse_server_ready(pb::ServerReadyResponse& r, error_code&) { return r.ready(); }
inline bool parse_model_ready(pb::ModelReadyResponse& r, error_code&) { return r.ready(); }
inline bool parse_health(::grpc::health::v1::HealthCheckResponse& r, error_code&) {
  return r.status() == ::grpc::health::v1::HealthCheckResponse::SERVING;
}
template <class Resp>
auto parse_from_proto(Resp& r, error_code&) {
  return grpc::from_proto(r);
}
inline boost::json::value parse_config(pb::ModelConfigResponse& r, error_code&) {
  std::string json;
  google::protobuf::util::JsonPrintOptions p;
  p.preserve_proto_field_names = true;
  (void)google::protobuf::util::MessageToJsonString(r.config(), &json, p);
  boost::system::error_code parse_ec;
  auto v = boost::json::parse(json, parse_ec);
  return parse_ec ? boost::json::value(boost::json::object()) : v;
}
inline infer_result parse_infer(pb::ModelInferResponse& r, error_code&) {
  // The result keeps the message its output views point into: take it over without a copy.
  auto owned = std::make_shared<pb::ModelInferResponse>();
  owned->Swap(&r);
  return result_access::make(std::move(owned));
}
template <class Resp>
void parse_nothing(Resp&, error_code&) {}
template <class Resp>
v2::trace_settings parse_trace(Resp& r, error_code&) {
  return trace_settings_from_proto(r.settings(), false);
}
inline v2::log_settings parse_log(pb::LogSettingsResponse& r, error_code&) {
  return log_settings_from_proto(r.settings());
}

/// Whether a request's inputs travel as typed contents: when every input with data asks for
/// the json encoding.
inline bool wants_typed_contents(const v2::infer_request& r) {
  bool any = false;
  for (const auto& i : r.inputs) {
    if (i.shm) continue;
    if (i.encoding != v2::tensor_encoding::json) return false;
    any = true;
  }
  return any;
}

inline pb::ModelInferRequest encode_request(model_id model, const v2::infer_request& request) {
  pb::ModelInferRequest q;
  encode_infer_request(request, model.name, model.version, q, wants_typed_contents(request));
  return q;
}

/// Hands a completion to its handler's executor (the client's by default); `carry` is released
/// where the handler runs, after it.
template <class Handler, class... Args>
void complete_on_executor(Handler h, const net::any_io_executor& fallback, std::shared_ptr<void> carry,
                          Args... args) {
  auto ex = net::get_associated_executor(h, fallback);
  net::dispatch(ex, [h = std::move(h), carry = std::move(carry), ... args = std::move(args)]() mutable {
    std::move(h)(std::move(args)...);
  });
}

}  // namespace detail

// --- client ------------------------------------------------------------------------------------

namespace detail {
/// A client's state; without `ex`, the client's io_context is made on first use.
inline std::shared_ptr<client_state> make_client_state(std::optional<net::any_io_executor> ex,
                                                       std::string target, client_options o) {
  destroy_parked();
  std::shared_ptr<client_state> st(new client_state, &release_client_state);
  ::grpc::ChannelArguments args;
  args.SetMaxReceiveMessageSize(o.max_message_size);
  args.SetMaxSendMessageSize(o.max_send_message_size);
  if (o.keepalive_time) args.SetInt(GRPC_ARG_KEEPALIVE_TIME_MS, static_cast<int>(o.keepalive_time->count()));
  if (o.keepalive_timeout)
    args.SetInt(GRPC_ARG_KEEPALIVE_TIMEOUT_MS, static_cast<int>(o.keepalive_timeout->count()));
  if (o.keepalive_without_calls) args.SetInt(GRPC_ARG_KEEPALIVE_PERMIT_WITHOUT_CALLS, 1);
  for (const auto& [k, v] : o.int_args) args.SetInt(k, v);
  for (const auto& [k, v] : o.string_args) args.SetString(k, v);
  std::shared_ptr<::grpc::ChannelCredentials> creds;
  if (o.tls) {
    ::grpc::SslCredentialsOptions ssl;
    ssl.pem_root_certs = o.root_certificates;
    ssl.pem_private_key = o.private_key;
    ssl.pem_cert_chain = o.certificate_chain;
    creds = ::grpc::SslCredentials(ssl);
  } else {
    creds = ::grpc::InsecureChannelCredentials();
  }
  st->channel = ::grpc::CreateCustomChannel(target, creds, args);
  st->stub = pb::GRPCInferenceService::NewStub(st->channel);
  st->health = ::grpc::health::v1::Health::NewStub(st->channel);
  st->lazy_executor = !ex;
  if (ex) st->executor_ = std::move(*ex);
  st->target = std::move(target);
  st->options = std::move(o);
  return st;
}
}  // namespace detail

INFERWIRE_DECL client::client(executor_type ex, std::string target, client_options opts)
    : state_(detail::make_client_state(std::move(ex), std::move(target), std::move(opts))) {}

INFERWIRE_DECL client::client(std::string target, client_options opts)
    : state_(detail::make_client_state(std::nullopt, std::move(target), std::move(opts))) {}

INFERWIRE_DECL client::~client() {
  state_.reset();
  detail::destroy_parked();
}

INFERWIRE_DECL client::executor_type client::get_executor() const noexcept { return state_->executor(); }
INFERWIRE_DECL const client_options& client::options() const noexcept { return state_->options; }
INFERWIRE_DECL const std::string& client::target() const noexcept { return state_->target; }

INFERWIRE_DECL error_code client::run_sync(detail::call_data& call) { return detail::to_error(call.run_sync()); }

INFERWIRE_DECL void client::exchange(std::shared_ptr<detail::client_state> state, detail::call_ptr call,
                                     net::any_completion_handler<void(error_code, detail::call_ptr)> h) {
  // The handler, the call and the state travel together as the call's tag, and come back on
  // the handler's executor.
  struct pending final : detail::completion {
    std::shared_ptr<detail::client_state> state;
    detail::call_ptr call;
    net::any_completion_handler<void(error_code, detail::call_ptr)> handler;
    net::cancellation_slot slot;

    // On the completion thread.
    static void finished(detail::completion* c) {
      std::unique_ptr<pending> p(static_cast<pending*>(c));
      p->state->completions->finished();
      auto ex = net::get_associated_executor(p->handler, p->state->executor());
      net::dispatch(ex, [p = std::move(p)]() mutable {
        if (p->slot.is_connected()) p->slot.clear();  // on the executor that may emit it
        auto ec = detail::to_error(p->call->status);
        auto handler = std::move(p->handler);
        auto data = std::move(p->call);
        // The state goes after the handler: the handler (a composed operation's work guard,
        // for one) may refer to the client's io_context, which the state owns. Released first,
        // a client dropped as the handler completes would free the io_context under it.
        auto keep = std::move(p->state);
        p.reset();
        std::move(handler)(ec, std::move(data));
      });
    }
  };
  auto& thread = state->completion();
  // Built in place: moving into an any_completion_handler by assignment recurses in Asio 1.81.
  std::unique_ptr<pending> p(new pending{{&pending::finished}, std::move(state), std::move(call), std::move(h), {}});
  p->slot = net::get_associated_cancellation_slot(p->handler);
  if (p->slot.is_connected()) {
    auto* ctx = &p->call->ctx;
    p->slot.assign([ctx](net::cancellation_type) { ctx->TryCancel(); });
  }
  auto* raw = p.release();  // until the queue hands it back
  thread.start(*raw->call, raw);
}

#define INFERWIRE_GRPC_UNARY(Resp, parse, stub, request, Method)                                    \
  detail::make_unary<Resp, parse>(*state_->stub, request, state_->options, o,                      \
                                  INFERWIRE_GRPC_METHOD(Method))

namespace detail {
template <class Req>
Req named(model_id model) {
  Req q;
  q.set_name(std::string(model.name));
  q.set_version(std::string(model.version));
  return q;
}
template <class Req>
Req region(std::string_view name) {
  Req q;
  q.set_name(std::string(name));
  return q;
}
}  // namespace detail

INFERWIRE_DECL auto client::prepare_server_live(const call_options& o) -> prepared<bool> {
  return INFERWIRE_GRPC_UNARY(pb::ServerLiveResponse, detail::parse_live, stub, pb::ServerLiveRequest{},
                              ServerLive);
}
INFERWIRE_DECL auto client::prepare_server_ready(const call_options& o) -> prepared<bool> {
  return INFERWIRE_GRPC_UNARY(pb::ServerReadyResponse, detail::parse_server_ready, stub,
                              pb::ServerReadyRequest{}, ServerReady);
}
INFERWIRE_DECL auto client::prepare_model_ready(model_id model, const call_options& o) -> prepared<bool> {
  return INFERWIRE_GRPC_UNARY(pb::ModelReadyResponse, detail::parse_model_ready, stub,
                              detail::named<pb::ModelReadyRequest>(model), ModelReady);
}
INFERWIRE_DECL auto client::prepare_health_check(const call_options& o) -> prepared<bool> {
  return INFERWIRE_GRPC_UNARY(::grpc::health::v1::HealthCheckResponse, detail::parse_health, health,
                              ::grpc::health::v1::HealthCheckRequest{}, Check);
}
INFERWIRE_DECL auto client::prepare_server_metadata(const call_options& o) -> prepared<v2::server_metadata> {
  return INFERWIRE_GRPC_UNARY(pb::ServerMetadataResponse, detail::parse_from_proto<pb::ServerMetadataResponse>,
                              stub, pb::ServerMetadataRequest{}, ServerMetadata);
}
INFERWIRE_DECL auto client::prepare_model_metadata(model_id model, const call_options& o)
    -> prepared<v2::model_metadata> {
  return INFERWIRE_GRPC_UNARY(pb::ModelMetadataResponse, detail::parse_from_proto<pb::ModelMetadataResponse>,
                              stub, detail::named<pb::ModelMetadataRequest>(model), ModelMetadata);
}
INFERWIRE_DECL auto client::prepare_model_config(model_id model, const call_options& o)
    -> prepared<boost::json::value> {
  return INFERWIRE_GRPC_UNARY(pb::ModelConfigResponse, detail::parse_config, stub,
                              detail::named<pb::ModelConfigRequest>(model), ModelConfig);
}
INFERWIRE_DECL auto client::prepare_infer(model_id model, const v2::infer_request& request,
                                          const call_options& o) -> prepared<infer_result> {
  return INFERWIRE_GRPC_UNARY(pb::ModelInferResponse, detail::parse_infer, stub,
                              detail::encode_request(model, request), ModelInfer);
}
INFERWIRE_DECL auto client::prepare_model_statistics(model_id model, const call_options& o)
    -> prepared<v2::statistics_response> {
  return INFERWIRE_GRPC_UNARY(pb::ModelStatisticsResponse,
                              detail::parse_from_proto<pb::ModelStatisticsResponse>, stub,
                              detail::named<pb::ModelStatisticsRequest>(model), ModelStatistics);
}
INFERWIRE_DECL auto client::prepare_repository_index(const v2::repository_index_request& request,
                                                     const call_options& o)
    -> prepared<std::vector<v2::repository_index_entry>> {
  pb::RepositoryIndexRequest q;
  q.set_ready(request.ready.value_or(false));
  return INFERWIRE_GRPC_UNARY(pb::RepositoryIndexResponse, detail::parse_from_proto<pb::RepositoryIndexResponse>,
                              stub, std::move(q), RepositoryIndex);
}
INFERWIRE_DECL auto client::prepare_load_model(std::string_view model, const v2::repository_load_request& request,
                                               const call_options& o) -> prepared<void> {
  pb::RepositoryModelLoadRequest q;
  q.set_model_name(std::string(model));
  to_proto(request, q);
  return INFERWIRE_GRPC_UNARY(pb::RepositoryModelLoadResponse,
                              detail::parse_nothing<pb::RepositoryModelLoadResponse>, stub, std::move(q),
                              RepositoryModelLoad);
}
INFERWIRE_DECL auto client::prepare_unload_model(std::string_view model,
                                                 const v2::repository_unload_request& request,
                                                 const call_options& o) -> prepared<void> {
  pb::RepositoryModelUnloadRequest q;
  q.set_model_name(std::string(model));
  to_proto(request, q);
  return INFERWIRE_GRPC_UNARY(pb::RepositoryModelUnloadResponse,
                              detail::parse_nothing<pb::RepositoryModelUnloadResponse>, stub, std::move(q),
                              RepositoryModelUnload);
}
INFERWIRE_DECL auto client::prepare_register_system_shared_memory(const v2::system_shm_register_request& request,
                                                                  const call_options& o) -> prepared<void> {
  pb::SystemSharedMemoryRegisterRequest q;
  to_proto(request, q);
  return INFERWIRE_GRPC_UNARY(pb::SystemSharedMemoryRegisterResponse,
                              detail::parse_nothing<pb::SystemSharedMemoryRegisterResponse>, stub, std::move(q),
                              SystemSharedMemoryRegister);
}
INFERWIRE_DECL auto client::prepare_system_shared_memory_status(std::string_view name, const call_options& o)
    -> prepared<std::vector<v2::system_shm_status>> {
  return INFERWIRE_GRPC_UNARY(pb::SystemSharedMemoryStatusResponse,
                              detail::parse_from_proto<pb::SystemSharedMemoryStatusResponse>, stub,
                              detail::region<pb::SystemSharedMemoryStatusRequest>(name), SystemSharedMemoryStatus);
}
INFERWIRE_DECL auto client::prepare_unregister_system_shared_memory(std::string_view name, const call_options& o)
    -> prepared<void> {
  return INFERWIRE_GRPC_UNARY(pb::SystemSharedMemoryUnregisterResponse,
                              detail::parse_nothing<pb::SystemSharedMemoryUnregisterResponse>, stub,
                              detail::region<pb::SystemSharedMemoryUnregisterRequest>(name),
                              SystemSharedMemoryUnregister);
}
INFERWIRE_DECL auto client::prepare_register_cuda_shared_memory(const v2::cuda_shm_register_request& request,
                                                                const call_options& o) -> prepared<void> {
  pb::CudaSharedMemoryRegisterRequest q;
  to_proto(request, q);
  return INFERWIRE_GRPC_UNARY(pb::CudaSharedMemoryRegisterResponse,
                              detail::parse_nothing<pb::CudaSharedMemoryRegisterResponse>, stub, std::move(q),
                              CudaSharedMemoryRegister);
}
INFERWIRE_DECL auto client::prepare_cuda_shared_memory_status(std::string_view name, const call_options& o)
    -> prepared<std::vector<v2::cuda_shm_status>> {
  return INFERWIRE_GRPC_UNARY(pb::CudaSharedMemoryStatusResponse,
                              detail::parse_from_proto<pb::CudaSharedMemoryStatusResponse>, stub,
                              detail::region<pb::CudaSharedMemoryStatusRequest>(name), CudaSharedMemoryStatus);
}
INFERWIRE_DECL auto client::prepare_unregister_cuda_shared_memory(std::string_view name, const call_options& o)
    -> prepared<void> {
  return INFERWIRE_GRPC_UNARY(pb::CudaSharedMemoryUnregisterResponse,
                              detail::parse_nothing<pb::CudaSharedMemoryUnregisterResponse>, stub,
                              detail::region<pb::CudaSharedMemoryUnregisterRequest>(name),
                              CudaSharedMemoryUnregister);
}
INFERWIRE_DECL auto client::prepare_trace_settings(std::string_view model, const call_options& o)
    -> prepared<v2::trace_settings> {
  return prepare_update_trace_settings({}, model, o);
}
INFERWIRE_DECL auto client::prepare_update_trace_settings(const v2::trace_settings& update,
                                                          std::string_view model, const call_options& o)
    -> prepared<v2::trace_settings> {
  pb::TraceSettingRequest q;
  q.set_model_name(std::string(model));
  to_proto(update, *q.mutable_settings());
  return INFERWIRE_GRPC_UNARY(pb::TraceSettingResponse, detail::parse_trace<pb::TraceSettingResponse>, stub,
                              std::move(q), TraceSetting);
}
INFERWIRE_DECL auto client::prepare_log_settings(const call_options& o) -> prepared<v2::log_settings> {
  return prepare_update_log_settings({}, o);
}
INFERWIRE_DECL auto client::prepare_update_log_settings(const v2::log_settings& update, const call_options& o)
    -> prepared<v2::log_settings> {
  pb::LogSettingsRequest q;
  to_proto(update, *q.mutable_settings());
  return INFERWIRE_GRPC_UNARY(pb::LogSettingsResponse, detail::parse_log, stub, std::move(q), LogSettings);
}

#undef INFERWIRE_GRPC_UNARY
#undef INFERWIRE_GRPC_METHOD

}  // namespace inferwire::grpc

#include <inferwire/grpc/impl/stream.hpp>

#endif
