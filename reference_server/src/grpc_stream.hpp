// SPDX-License-Identifier: Apache-2.0
// One ModelStreamInfer stream of the gRPC frontend (v2-protocol §2, Triton's streaming
// extension): requests read one after the other, each run through the service, its responses
// (a decoupled model's many, or one) written in order through the stream's reply queue.
#pragma once

#include "grpc_queue.hpp"
#include "reply_queue.hpp"
#include "service.hpp"

#include "grpc_service.grpc.pb.h"

#include <atomic>
#include <memory>
#include <mutex>
#include <optional>
#include <vector>

namespace inferwire::server::grpc_detail {

/// What an inference request message takes: its bytes as received, and what protobuf made of
/// its typed contents beyond them (each element at its full width: an INT64 zero that came as
/// one byte takes eight). A queued call keeps both, and the copy a conversion makes
/// (narrowing, BYTES), so the typed part counts against the in-flight budget as an HTTP
/// request's JSON tensors do; raw contents are what arrived.
struct message_size {
  std::uint64_t wire = 0, typed = 0;
  std::uint64_t total() const noexcept { return wire + typed; }
};
/// The typed part of a message's size (message_size's `typed`).
std::uint64_t typed_bytes(const ::inference::ModelInferRequest& q);

/// The decoding step of an inference request message (ModelInfer's and the stream's): the
/// request into the call, its read stamps for a trace (the message was read before its
/// handler ran: both are its arrival), and the typed contents' bytes for the budget.
decoded decode_message(const ::inference::ModelInferRequest& q, const message_size& size, infer_call& call);

/// The inference service as the frontend registers it: ModelInfer and ModelStreamInfer are raw
/// (the server parses their requests and serialises their replies), every other method typed.
using raw_inference_service = ::inference::GRPCInferenceService::WithRawMethod_ModelStreamInfer<
    ::inference::GRPCInferenceService::WithRawMethod_ModelInfer<::inference::GRPCInferenceService::AsyncService>>;

/// A reply of ModelInfer, or of a stream, as gRPC sends it, serialised by the server; `bytes`:
/// its size. A small one is one buffer, as gRPC makes it. In one with a raw_output_contents entry
/// of 64 KiB or more, each such entry goes to gRPC as a slice of its own string (moved out of
/// the message, freed once sent) where gRPC would have copied the whole message into a buffer
/// of its size: a 64 MiB identity reply into 64 MiB more of fresh memory. Once sent, a string
/// that large goes to `heap` (when not null) to keep for the next request. The bytes are those
/// protobuf writes. Throws std::bad_alloc.
::grpc::ByteBuffer serialize_reply(::inference::ModelInferResponse& r, std::uint64_t& bytes, heap_trimmer* heap);
::grpc::ByteBuffer serialize_reply(::inference::ModelStreamInferResponse& r, std::uint64_t& bytes,
                                   heap_trimmer* heap);

/// One ModelStreamInfer stream. Requests of a stream run one after the other, so responses keep
/// the stream's order: the next request is read when the previous one is answered. No thread
/// is held while a stream is idle or its request runs; responses go through the stream's
/// reply_queue (its bound, stall and exit rules) and are written one at a time. A client that
/// does not read its responses stops the stream from reading requests once `max_queued`
/// responses wait, and a decoupled model that produces faster than its client reads waits (on
/// the execution pool) at that point too. The method is raw: requests are parsed here from the
/// bytes read, and responses serialised here (serialize_reply).
///
/// On the completion-queue API: every operation started (read, write, finish), the request
/// running and the end-of-call notice each hold the object (`holds_`); it deletes itself when
/// the last of them is over. Operations start through the gate, so none starts once the queues
/// are shut down.
class stream_call final : public rpc {
 public:
  using response = ::inference::ModelStreamInferResponse;
  static constexpr std::size_t max_queued = reply_queue<response>::max_queued;
  /// The largest request whose allocations request_ keeps for the next one.
  static constexpr std::size_t kept_request_bytes = 16 * 1024;

  /// Asks `cq` for the next stream of `async`, whose requests `svc` runs.
  static void listen(raw_inference_service& async, service& svc, ::grpc::ServerCompletionQueue* cq,
                     std::shared_ptr<queue_gate> gate);

  void on(int what, bool ok) override;

 private:
  enum : int { arrived, read, wrote, finished, over };

  stream_call(raw_inference_service& async, service& svc, ::grpc::ServerCompletionQueue* cq,
              std::shared_ptr<queue_gate> gate);

  void on_arrived(bool ok);
  void on_read(bool ok);
  void on_wrote(bool ok);
  /// The request finished (or failed before running): its final response or its error, then
  /// the next request.
  void answered(const infer_call& call, status st);
  /// Reads the next request unless the client is not reading its responses: then reading
  /// resumes once the queue drains, and HTTP/2 flow control holds the client back meanwhile.
  void read_next();
  /// Queues a response: `wait`, as a decoupled model's responses do, or not (the last one).
  bool send(const v2::infer_response& resp, bool final, bool wait);
  /// The consumer: writes the next queued response, or finishes the stream once the producers
  /// are done and every response is written, or waits for the next (the queue's wake).
  void write_next();
  /// Ends the stream with `st` once every queued response is written.
  void finish(::grpc::Status st);

  void start_read();
  /// Serialises `m` (a large one loses its raw outputs to the slices) and writes it.
  void start_write(response& m);
  void start_finish(const ::grpc::Status& st);
  void hold() { holds_.fetch_add(1, std::memory_order_relaxed); }
  void release() {
    if (holds_.fetch_sub(1, std::memory_order_acq_rel) == 1) delete this;
  }

  raw_inference_service& async_;
  service& svc_;
  ::grpc::ServerCompletionQueue* cq_;
  std::shared_ptr<queue_gate> gate_;
  ::grpc::ServerContext ctx_;
  ::grpc::ServerAsyncReaderWriter<::grpc::ByteBuffer, ::grpc::ByteBuffer> stream_;
  ::grpc::ByteBuffer received_;  ///< the request's bytes as read, until request_ is parsed from them
  event arrived_ev_{this, arrived}, read_ev_{this, read}, wrote_ev_{this, wrote}, finished_ev_{this, finished},
      over_ev_{this, over};
  std::atomic<int> holds_{0};
  ::inference::ModelInferRequest request_;
  bool renew_request_ = false;  ///< request_ held a large request: start the next read afresh
  response_sink sink_;
  bool close_on_error_ = false;
  bool decoupled_ = false;
  bool empty_final_ = false;
  reply_queue<response> replies_;
  std::vector<response> writing_;  ///< the response being written (at most one)
  std::uint64_t writing_bytes_ = 0;  ///< its size as serialised
  std::mutex mu_;                  ///< guards what follows
  /// A small response already written, cleared: the next response is built in it, reusing its
  /// strings and fields instead of a dozen allocations.
  std::optional<response> spare_;
  bool read_held_ = false;         ///< the next read waits for the queue to drain
  bool finishing_ = false;         ///< finish() was called: final_ is the stream's status
  bool finish_started_ = false;
  bool idle_broken_ = false;       ///< the consumer stopped: the queue broke, no write is in flight
  ::grpc::Status final_;
};

}  // namespace inferwire::server::grpc_detail
