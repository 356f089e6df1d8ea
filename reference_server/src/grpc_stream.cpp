// SPDX-License-Identifier: Apache-2.0
#include "grpc_stream.hpp"

#include "raw_entries.hpp"

#include <inferwire/core/config.hpp>
#include <inferwire/grpc/convert.hpp>

#include <google/protobuf/io/coded_stream.h>
#include <google/protobuf/wire_format_lite.h>

#include <chrono>
#include <limits>
#include <optional>

namespace inferwire::server::grpc_detail {

namespace pb = ::inference;
namespace conv = inferwire::grpc;

namespace {

// The parameter every stream response carries (v2-protocol §2.4). (A string, not a literal: see
// to_proto of log settings on GCC 12's -Warray-bounds.)
const std::string& final_key() {
  static const std::string key = "triton_final_response";
  return key;
}

// Empties a written response for the next one. Its parameters map is kept while it holds only
// triton_final_response, which the next response sets again: clearing and inserting that entry
// cost a node, its 21-byte key (both allocated and freed) and a hash, per response.
void recycle(pb::ModelInferResponse& r) {
  if (r.parameters_size() != 1 || r.parameters().begin()->first != final_key()) return r.Clear();
  r.clear_model_name();
  r.clear_model_version();
  r.clear_id();
  r.clear_outputs();
  r.clear_raw_output_contents();
}

// Entries of raw_output_contents this large go to gRPC as slices of their own strings.
constexpr std::size_t handed_over = 64 * 1024;

bool has_large_output(const pb::ModelInferResponse& r) {
  for (const auto& c : r.raw_output_contents())
    if (c.size() >= handed_over) return true;
  return false;
}

// A length-delimited field's key and length, as protobuf writes them.
void append_key(std::string& out, int field, std::uint64_t length) {
  namespace io = ::google::protobuf::io;
  using wire = ::google::protobuf::internal::WireFormatLite;
  std::uint8_t head[16];
  std::uint8_t* end = io::CodedOutputStream::WriteTagToArray(wire::MakeTag(field, wire::WIRETYPE_LENGTH_DELIMITED), head);
  end = io::CodedOutputStream::WriteVarint64ToArray(length, end);
  out.append(reinterpret_cast<const char*>(head), static_cast<std::size_t>(end - head));
}

// The whole message in one buffer: its size computed once (gRPC computes it twice).
::grpc::ByteBuffer one_buffer(const ::google::protobuf::MessageLite& m, std::uint64_t& bytes) {
  const std::size_t n = m.ByteSizeLong();
  ::grpc::Slice slice(n);
  m.SerializeWithCachedSizesToArray(const_cast<std::uint8_t*>(slice.begin()));
  bytes = n;
  return ::grpc::ByteBuffer(&slice, 1);
}

// An entry handed to gRPC: freed once sent, its buffer kept by `heap` for the next request
// when it is large.
struct sent_entry {
  std::string bytes;
  heap_trimmer* heap;
  static void done(void* p) {
    auto* e = static_cast<sent_entry*>(p);
    if (e->heap) e->heap->keep_buffer(e->bytes);
    delete e;
  }
};

// `head` (what precedes the response: nothing, or a stream response's fields before it), then
// the response's fields but raw_output_contents, then each entry in order: field 6 is the
// message's last, so these are the bytes protobuf writes. The entries move out of the message.
::grpc::ByteBuffer sliced(pb::ModelInferResponse& r, std::string head, std::uint64_t& bytes, heap_trimmer* heap) {
  std::vector<std::unique_ptr<sent_entry>> entries;
  entries.reserve(static_cast<std::size_t>(r.raw_output_contents_size()));
  for (auto& c : *r.mutable_raw_output_contents())
    entries.push_back(std::make_unique<sent_entry>(sent_entry{std::move(c), heap}));
  r.clear_raw_output_contents();
  std::string pending = std::move(head);
  r.AppendToString(&pending);  // every field before 6
  bytes = pending.size();
  std::vector<::grpc::Slice> slices;
  slices.reserve(2 * entries.size() + 1);
  for (auto& e : entries) {
    const std::size_t before = pending.size();
    std::string& b = e->bytes;
    append_key(pending, pb::ModelInferResponse::kRawOutputContentsFieldNumber, b.size());
    bytes += pending.size() - before + b.size();
    if (b.size() < handed_over) {
      pending += b;
      continue;
    }
    slices.emplace_back(pending);
    pending.clear();
    slices.emplace_back(b.data(), b.size(), &sent_entry::done, e.get());
    e.release();  // the slice owns it now
  }
  if (!pending.empty()) slices.emplace_back(pending);
  return ::grpc::ByteBuffer(slices.data(), slices.size());
}

}  // namespace

bool parse_received(::grpc::ByteBuffer& received, pb::ModelInferRequest& into, heap_trimmer* heap) {
  const std::uint64_t total = received.Length();
  if (total > protobuf_reserves_at_most || (heap && total >= heap_trimmer::kept_buffer_bytes)) {
    ::grpc::ProtoBufferReader reader(&received);
    if (reader.status().ok())
      (void)reserve_large_entries(reader, total, into, protobuf_reserves_at_most,
                                  [heap](std::string& s, std::size_t n) { return heap && heap->make_room(s, n); });
  }
  return parse_received(received, static_cast<::google::protobuf::MessageLite&>(into));
}

void keep_large_entries(pb::ModelInferRequest& q, heap_trimmer& heap) noexcept {
  for (auto& s : *q.mutable_raw_input_contents()) heap.keep_buffer(s);
}

::grpc::ByteBuffer serialize_reply(pb::ModelInferResponse& r, std::uint64_t& bytes, heap_trimmer* heap) {
  return has_large_output(r) ? sliced(r, {}, bytes, heap) : one_buffer(r, bytes);
}

::grpc::ByteBuffer serialize_reply(pb::ModelStreamInferResponse& r, std::uint64_t& bytes, heap_trimmer* heap) {
  if (!r.has_infer_response() || !has_large_output(r.infer_response())) return one_buffer(r, bytes);
  // error_message (field 1), then infer_response's key and length (field 2) before its bytes.
  pb::ModelInferResponse& ir = *r.mutable_infer_response();
  std::string head;
  if (!r.error_message().empty()) {
    append_key(head, pb::ModelStreamInferResponse::kErrorMessageFieldNumber, r.error_message().size());
    head += r.error_message();
  }
  append_key(head, pb::ModelStreamInferResponse::kInferResponseFieldNumber, ir.ByteSizeLong());
  return sliced(ir, std::move(head), bytes, heap);
}

std::uint64_t typed_bytes(const pb::ModelInferRequest& q) {
  std::uint64_t typed = 0;
  for (const auto& t : q.inputs()) {
    if (!t.has_contents()) continue;
    const pb::InferTensorContents& c = t.contents();
    auto count = [](int k) { return static_cast<std::uint64_t>(k); };
    typed += count(c.bool_contents_size()) +
             4 * (count(c.int_contents_size()) + count(c.uint_contents_size()) + count(c.fp32_contents_size())) +
             8 * (count(c.int64_contents_size()) + count(c.uint64_contents_size()) + count(c.fp64_contents_size()));
    for (const auto& b : c.bytes_contents()) typed += sizeof b + b.size();
  }
  return typed;
}

decoded decode_message(const pb::ModelInferRequest& q, const message_size& size, infer_call& call) {
  call.received = {receive_stamp{"GRPC_WAITREAD_START", call.times.received},
                   receive_stamp{"GRPC_WAITREAD_END", call.times.received}};
  return {conv::decode_infer_request(q, call.model->config->name, call.request), size.typed};
}

void stream_call::listen(raw_inference_service& async, service& svc, ::grpc::ServerCompletionQueue* cq,
                         std::shared_ptr<queue_gate> gate) {
  auto* c = new stream_call(async, svc, cq, std::move(gate));
  c->ctx_.AsyncNotifyWhenDone(&c->over_ev_);
  if (!c->gate_->start([&] { async.RequestModelStreamInfer(&c->ctx_, &c->stream_, cq, cq, &c->arrived_ev_); }))
    delete c;
}

// A client that takes no response for --stall-timeout-secs has its stream cancelled: the
// producer gets false and its model stops, instead of holding the model's instance and an
// execution thread for as long as the client keeps the connection open.
stream_call::stream_call(raw_inference_service& async, service& svc, ::grpc::ServerCompletionQueue* cq,
                         std::shared_ptr<queue_gate> gate)
    : async_(async), svc_(svc), cq_(cq), gate_(std::move(gate)), stream_(&ctx_),
      replies_(std::chrono::seconds(svc.state().opts.stall_timeout_secs), [this] { ctx_.TryCancel(); }) {}

void stream_call::on(int what, bool ok) {
  switch (what) {
    case arrived: return on_arrived(ok);
    case read: return on_read(ok);
    case wrote: return on_wrote(ok);
    case finished: return release();
    case over:
      replies_.broken();  // the call is over: producers stop, a waiting consumer learns it
      return release();
  }
}

void stream_call::on_arrived(bool ok) {
  if (!ok) {  // the server is shutting down: no call, no other event
    delete this;
    return;
  }
  listen(async_, svc_, cq_, gate_);
  holds_.store(1, std::memory_order_relaxed);  // the end-of-call notice
  write_next();                                // nothing queued yet: waits for the first response
  if (auto it = ctx_.client_metadata().find("triton_grpc_error"); it != ctx_.client_metadata().end())
    close_on_error_ = std::string_view(it->second.data(), it->second.size()) == "true";
  // A restricted stream ends before any request is read.
  if (auto st = restricted(svc_.state().opts, &ctx_, api_category::inference)) return finish(to_grpc(st));
  start_read();
}

void stream_call::on_read(bool ok) {
  INFERWIRE_TAKEN_BACK(this);
  const std::uint64_t wire = received_.Length();
  // A message that does not parse fails the read, as it fails a typed stream's in gRPC (what
  // its parse took goes back to the heap with the stream: a large one is noted for the trim).
  if (ok && !parse_received(received_, request_, &svc_.state().heap)) {
    svc_.state().heap.note(wire);
    ok = false;
  }
  if (!ok) {  // the client closed its side, or went away
    finish(::grpc::Status::OK);
    return release();
  }
  // The request runs with its own hold on the stream, released once it is answered.
  auto call = make_call();
  // What protobuf allocated for a large request stays with the message when it is reused
  // (cleared strings and repeated fields keep their capacity), outside the in-flight budget:
  // 128 MiB sent once stayed for the stream's life. Such a message is let go before the next
  // read.
  const message_size size{wire, typed_bytes(request_)};
  renew_request_ = size.total() > kept_request_bytes;
  // A large message leaves the heap larger once answered, whether or not it was valid.
  svc_.state().heap.note(size.total());
  sink_ = [this](v2::infer_response&& resp) { return send(resp, false, true); };
  auto decode = [&](infer_call& c) -> decoded {
    decoupled_ = c.model->config->decoupled;
    if (decoupled_) c.hooks.sink = &sink_;
    decoded d = decode_message(request_, size, c);
    empty_final_ = c.request.parameters.get<bool>("triton_enable_empty_final_response").value_or(false);
    return d;
  };
  // Once shutdown began, a request on an open stream is refused as Triton refuses it (the
  // stream goes on, for the answers of its requests in flight).
  if (svc_.state().exiting.load()) {
    answered(*call, shutting_down_status());
    return release();
  }
  // The read's hold passes to the running request (which counts as in flight until its
  // responses are queued), released once it is answered.
  infer_hooks hooks{nullptr, [this] { return ctx_.IsCancelled(); }};
  // The completion holds the call by pointer, as the scheduler holds it until it is called: two
  // pointers fit in std::function's own storage, where a shared_ptr beside `this` was allocated.
  const infer_start started = svc_.start_infer(call, request_.model_name(), request_.model_version(), decode,
                                               std::move(hooks), [this, c = call.get()](status done) {
                                                 answered(*c, std::move(done));
                                                 release();
                                               });
  if (started) {
    answered(*call, started.error);
    release();
  }
}

void stream_call::on_wrote(bool ok) {
  if (!ok) replies_.broken();  // the client is gone: nothing more is delivered
  write_next();
  release();
}

void stream_call::answered(const infer_call& call, status st) {
  // A traced request is written once its final response or error is queued.
  struct trace_done {
    trace_registry& traces;
    trace_record* trace;
    ~trace_done() {
      if (!trace) return;
      trace->stamp_now("GRPC_SEND_END");
      traces.finish(*trace);
    }
  } traced{svc_.state().traces, call.trace.get()};
  if (call.trace) call.trace->stamp_now("GRPC_SEND_START");
  if (!st) {
    if (!decoupled_ || empty_final_) send(call.response, true, false);
    return read_next();
  }
  if (close_on_error_) return finish(to_grpc(st));
  response out;
  out.set_error_message(quote_input(st.message(), max_error_text));  // a message field, not a trailer
  auto* ir = out.mutable_infer_response();
  ir->set_id(request_.id());
  if (call.model) {
    ir->set_model_name(request_.model_name());
    ir->set_model_version(request_.model_version());
  }
  replies_.put(std::move(out));
  read_next();
}

void stream_call::read_next() {
  {
    std::lock_guard lock(mu_);
    if (replies_.size() >= max_queued) {
      read_held_ = true;
      return;
    }
  }
  start_read();
}

bool stream_call::send(const v2::infer_response& resp, bool final, bool wait) {
  response out;
  {
    std::lock_guard lock(mu_);
    if (spare_) {
      out = std::move(*spare_);
      spare_.reset();
    }
  }
  pb::ModelInferResponse& ir = *out.mutable_infer_response();
  conv::encode_infer_response(resp, ir);
  auto& params = *ir.mutable_parameters();
  auto kept = params.find(final_key());  // a recycled response's entry (recycle)
  (kept != params.end() ? kept->second : params[final_key()]).set_bool_param(final);
  return wait ? replies_.push(std::move(out)) : replies_.put(std::move(out));
}

void stream_call::write_next() {
  // The response just written: a small one is kept for the next (a large one would keep its
  // buffers for the stream's life); a large one goes back to the heap here, and the quiet-time
  // trim must come after.
  if (!writing_.empty()) {
    response& written = writing_.front();
    const std::uint64_t size = writing_bytes_;
    svc_.state().heap.note(size);
    if (size <= kept_request_bytes) {
      // Field by field: the message's own Clear() would delete its infer_response.
      written.clear_error_message();
      recycle(*written.mutable_infer_response());
      std::lock_guard lock(mu_);
      if (!spare_) spare_ = std::move(written);
    }
  }
  writing_.clear();
  bool ended = false;
  const auto got = replies_.take(writing_, 1, ended, [this] { write_next(); });
  if (got == reply_queue<response>::taken::waiting) return;
  bool resume_read = false, finish_now = false;
  {
    std::lock_guard lock(mu_);
    if (got == reply_queue<response>::taken::broken) {
      idle_broken_ = true;
      finish_now = finishing_ && !finish_started_;
    } else {
      if (read_held_ && replies_.size() < max_queued) {
        read_held_ = false;
        resume_read = true;
      }
      finish_now = writing_.empty() && ended && !finish_started_;
    }
    if (finish_now) finish_started_ = true;
  }
  if (resume_read) start_read();
  if (!writing_.empty()) start_write(writing_.front());
  else if (finish_now) start_finish(final_);
}

void stream_call::finish(::grpc::Status st) {
  bool now = false;
  {
    std::lock_guard lock(mu_);
    final_ = std::move(st);
    finishing_ = true;
    now = idle_broken_ && !finish_started_;
    if (now) finish_started_ = true;
  }
  if (now) start_finish(final_);
  else replies_.end();  // the consumer finishes once every queued response is written
}

// Each operation holds the stream until its completion comes back.
void stream_call::start_read() {
  if (std::exchange(renew_request_, false)) {
    keep_large_entries(request_, svc_.state().heap);
    request_ = pb::ModelInferRequest();
  }
  hold();
  INFERWIRE_HANDED_OVER(this);
  if (!gate_->start([&] { stream_.Read(&received_, &read_ev_); })) release();
}
void stream_call::start_write(response& m) {
  ::grpc::ByteBuffer bytes;
  try {
    // Swapped in: ByteBuffer has no move assignment, and its copy takes a reference to every
    // slice and a new buffer (then destroys the temporary's).
    serialize_reply(m, writing_bytes_, &svc_.state().heap).Swap(&bytes);
  } catch (...) {  // no memory for its buffers: the stream ends INTERNAL, as a unary reply would
    writing_bytes_ = std::numeric_limits<std::uint64_t>::max();  // not kept for the next
    finish(::grpc::Status(::grpc::StatusCode::INTERNAL, "failed to allocate memory for the response"));
    replies_.broken();
    return write_next();
  }
  hold();
  if (!gate_->start([&] { stream_.Write(bytes, &wrote_ev_); })) release();
}
void stream_call::start_finish(const ::grpc::Status& st) {
  hold();
  if (!gate_->start([&] { stream_.Finish(st, &finished_ev_); })) release();
}

}  // namespace inferwire::server::grpc_detail
