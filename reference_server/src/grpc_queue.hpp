// SPDX-License-Identifier: Apache-2.0
// The gRPC frontend's completion-queue machinery: the gate that says whether operations may
// still start, the objects with operations in flight and their events, the unary call, the
// loop of a queue's thread, and the translations every handler needs (status, restriction).
//
// Every RPC runs on gRPC's completion-queue API: a fixed set of threads, one per queue, each
// waits on its queue and handles what completes there. (gRPC's callback API would add its own
// threads, which poll the network and hand each call to another thread: on a 2-core machine
// that hand-off cost more CPU than the whole of a small inference.)
#pragma once

#include "server.hpp"

#include <grpcpp/grpcpp.h>
#include <grpcpp/support/proto_buffer_reader.h>
#include <google/protobuf/arena.h>

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <shared_mutex>
#include <string>
#include <type_traits>

namespace inference {
class ModelInferRequest;
}

namespace inferwire::server::grpc_detail {

/// The longest status message sent. gRPC carries it percent-encoded in a trailer (up to 3
/// bytes per byte), and clients refuse trailers past 8 KiB by default (RESOURCE_EXHAUSTED in
/// place of the real error), so the text is cut well below that.
inline constexpr std::size_t max_grpc_error_text = 2048;

/// The first arena block of a unary call: room for the messages of a small call.
inline constexpr std::size_t arena_block_bytes = 4096;

inline ::grpc::Status to_grpc(const status& st) {
  if (!st) return ::grpc::Status::OK;
  return {static_cast<::grpc::StatusCode>(st.grpc_code()), quote_input(st.message(), max_grpc_error_text)};
}

/// The refusal of a new inference once shutdown began (Triton's gRPC frontend, its text).
inline status shutting_down_status() {
  return {errc::unavailable, "GRPC server is shutting down and has stopped accepting new requests."};
}

/// --grpc-restricted-protocol: the header an RPC of category `c` must carry, when restricted.
inline status restricted(const options& o, const ::grpc::ServerContextBase* ctx, api_category c) {
  const restriction* r = o.grpc_restricted.find(c);
  if (!r) return {};
  const std::string header = "triton-grpc-protocol-" + r->key;
  const auto it = ctx->client_metadata().find(header);
  if (it != ctx->client_metadata().end() && std::string_view(it->second.data(), it->second.size()) == r->value)
    return {};
  return {errc::unavailable, "This protocol is restricted, expecting header '" + header + "'"};
}

/// What calls share with work still running elsewhere (the execution pool): whether operations
/// may still start on the queues, and how many unary calls are between arrival and reply.
/// Operations start under a shared lock (a write serialises its message meanwhile, so threads
/// must not wait on each other for that); closing takes it exclusively.
struct queue_gate {
  std::shared_mutex mu;
  bool closed = false;
  std::atomic<int> running{0};
  /// Told when a call lets go of a large message: its bytes go back to the heap only then (a
  /// 64 MiB reply is still being sent when its request stops counting as in flight), and the
  /// quiet-time trim must come after that.
  heap_trimmer* heap = nullptr;

  /// Starts a gRPC operation unless the queues are shut down (then false, nothing started).
  template <class F>
  bool start(F&& op) {
    std::shared_lock lock(mu);
    if (closed) return false;
    op();
    return true;
  }
};

/// An object with operations in flight on a queue. Each operation's tag is an `event` naming
/// the object and what completed.
class rpc {
 public:
  virtual ~rpc() = default;
  virtual void on(int what, bool ok) = 0;
};
struct event {
  rpc* target;
  int what;
};

/// The loop of a queue's thread: hands each completion to its object until the queue is shut
/// down and drained.
inline void serve_queue(::grpc::ServerCompletionQueue* cq) {
  void* tag = nullptr;
  bool ok = false;
  while (cq->Next(&tag, &ok)) {
    auto* e = static_cast<event*>(tag);
    e->target->on(e->what, ok);
  }
}

/// A raw method's message (ModelInfer's request, a stream's), parsed from the bytes it arrived
/// in as gRPC parses a typed one; the bytes are let go after. False: they are not a message of
/// that type (gRPC then answers a unary call INTERNAL `Unable to parse request`, and fails a
/// stream's read).
inline bool parse_received(::grpc::ByteBuffer& received, ::google::protobuf::MessageLite& into) {
  if (!received.Valid()) return false;
  bool parsed = false;
  {
    ::grpc::ProtoBufferReader reader(&received);
    parsed = reader.status().ok() && into.ParseFromZeroCopyStream(&reader);
  }
  received.Clear();
  return parsed;
}
/// ModelInferRequest's (ModelInfer's and a stream's): the same, with each raw_input_contents
/// entry that protobuf would grow as it parses (grpc_stream.cpp) reserved at its size first,
/// and each one large enough given a buffer that `heap` kept (when not null).
bool parse_received(::grpc::ByteBuffer& received, ::inference::ModelInferRequest& into, heap_trimmer* heap);
/// Hands the buffers of `q`'s large raw_input_contents entries to `heap` to keep for the next
/// request (heap_trimmer::keep_buffer), before the message goes or is reused.
void keep_large_entries(::inference::ModelInferRequest& q, heap_trimmer& heap) noexcept;

/// What a unary handler sees of its call: the server context (metadata, cancellation) and the
/// one reply, which any thread may send. The call may be gone as soon as finish() is called.
class unary_context {
 public:
  virtual ::grpc::ServerContext& context() = 0;
  virtual void finish(const ::grpc::Status& st) = 0;
  /// The request message's size as it arrived (serialised).
  virtual std::uint64_t received_bytes() const = 0;

 protected:
  ~unary_context() = default;
};

/// One unary call of the method that `Ask` (the generated Request<Method>) asks for, handled by
/// `Handle` (the service's member function of the same name). When it arrives, the next call of
/// the method is asked for at once. `NotifyDone`: ask for gRPC's end-of-call notice, which
/// ServerContext::IsCancelled needs on this API (ModelInfer: a request whose client went away
/// while it queued is dropped); the call is then deleted after both the reply and the notice.
///
/// `Serialize` (raw methods, ModelInfer): the method is marked raw (the generated
/// WithRawMethod_<Method>, whose Request<Method> takes byte buffers). The call parses the request
/// itself, as gRPC would (a message that does not parse is refused as gRPC refuses it), and
/// `Serialize(reply, bytes)` makes the reply's byte buffer and says its size: a serialiser of
/// our own can hand large fields to gRPC as slices of their strings instead of copies.
template <class Service, class Req, class Resp, auto Ask, auto Handle, bool NotifyDone = false,
          auto Serialize = nullptr>
class unary_call final : public rpc, public unary_context {
  static constexpr bool raw = Serialize != nullptr;

 public:
  static void listen(Service& svc, ::grpc::ServerCompletionQueue* cq, std::shared_ptr<queue_gate> gate) {
    auto* c = new unary_call(svc, cq, std::move(gate));
    if constexpr (NotifyDone) c->ctx_.AsyncNotifyWhenDone(&c->over_);
    if (!c->gate_->start([&] {
          if constexpr (raw) (svc.*Ask)(&c->ctx_, &c->received_, &c->writer_, cq, cq, &c->arrived_);
          else (svc.*Ask)(&c->ctx_, c->request_, &c->writer_, cq, cq, &c->arrived_);
        }))
      delete c;
  }

  void on(int what, bool ok) override {
    if (what == arrived) {
      if (!ok) {  // the server is shutting down: no call, no other event
        delete this;
        return;
      }
      listen(svc_, cq_, gate_);
      gate_->running.fetch_add(1, std::memory_order_relaxed);
      if constexpr (raw) {
        if (!parse_request()) return finish(::grpc::Status(::grpc::StatusCode::INTERNAL, "Unable to parse request"));
      }
      (svc_.*Handle)(this, request_, response_);
      return;
    }
    if (what == sent) sent_seen_ = true;
    else over_seen_ = true;
    if (sent_seen_ && (over_seen_ || !NotifyDone)) delete this;
  }

  ~unary_call() {
    if (gate_->heap) {
      if constexpr (raw) {
        keep_large_entries(*request_, *gate_->heap);  // entries no output took
        gate_->heap->note(received_bytes_ + reply_bytes_);
      } else {
        gate_->heap->note(static_cast<std::uint64_t>(request_->GetCachedSize()) +
                          static_cast<std::uint64_t>(response_->GetCachedSize()));
      }
    }
  }

  ::grpc::ServerContext& context() override { return ctx_; }

  std::uint64_t received_bytes() const override {
    if constexpr (raw) return received_bytes_;
    else return request_->ByteSizeLong();
  }

  void finish(const ::grpc::Status& st) override {
    auto gate = gate_;  // `this` may be deleted as soon as the reply is sent
    if constexpr (raw) {
      ::grpc::ByteBuffer reply;
      ::grpc::Status out = st;
      if (out.ok()) {
        try {
          Serialize(*response_, reply_bytes_, gate->heap).Swap(&reply);  // no copy (grpc_stream.cpp)
        } catch (...) {  // no memory for the reply's buffers
          out = ::grpc::Status(::grpc::StatusCode::INTERNAL, "failed to allocate memory for the response");
        }
      }
      gate->start([&] {
        if (out.ok()) writer_.Finish(reply, out, &sent_);
        else writer_.FinishWithError(out, &sent_);
      });
    } else {
      gate->start([&] {
        if (st.ok()) writer_.Finish(*response_, st, &sent_);
        else writer_.FinishWithError(st, &sent_);
      });
    }
    // (A reply that comes after the queues were shut down is not sent; the call is left to the
    // process's end.)
    gate->running.fetch_sub(1, std::memory_order_release);
  }

 private:
  enum : int { arrived, sent, over };

  bool parse_request() {
    received_bytes_ = received_.Length();
    return parse_received(received_, *request_, gate_->heap);
  }

  unary_call(Service& svc, ::grpc::ServerCompletionQueue* cq, std::shared_ptr<queue_gate> gate)
      : svc_(svc), cq_(cq), gate_(std::move(gate)), writer_(&ctx_) {}

  static ::google::protobuf::ArenaOptions arena_options(char* block, std::size_t size) {
    ::google::protobuf::ArenaOptions o;
    o.initial_block = block;
    o.initial_block_size = size;
    return o;
  }

  Service& svc_;
  ::grpc::ServerCompletionQueue* cq_;
  std::shared_ptr<queue_gate> gate_;
  ::grpc::ServerContext ctx_;
  // The request and the reply live on an arena whose first block is part of the call: a small
  // call's messages take no allocation of their own (a ModelInfer's took about fifteen); a
  // large one's fields take theirs as before, all freed with the call.
  alignas(std::max_align_t) char block_[arena_block_bytes];
  ::google::protobuf::Arena arena_{arena_options(block_, sizeof block_)};
  Req* request_ = ::google::protobuf::Arena::CreateMessage<Req>(&arena_);
  Resp* response_ = ::google::protobuf::Arena::CreateMessage<Resp>(&arena_);
  /// Raw methods: the request's bytes as they arrived (released once parsed), and the sizes of
  /// the request and the reply.
  ::grpc::ByteBuffer received_;
  std::uint64_t received_bytes_ = 0, reply_bytes_ = 0;
  ::grpc::ServerAsyncResponseWriter<std::conditional_t<raw, ::grpc::ByteBuffer, Resp>> writer_;
  event arrived_{this, arrived}, sent_{this, sent}, over_{this, over};
  bool sent_seen_ = false;
  bool over_seen_ = false;
};

}  // namespace inferwire::server::grpc_detail
