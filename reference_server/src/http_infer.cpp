// SPDX-License-Identifier: Apache-2.0
// The inference endpoints over HTTP: infer (v2-protocol §4: Content-Encoding, the lengths, the
// JSON header and binary tensor data, then the reply in binary or JSON as `binary_data` asks,
// with Accept-Encoding) and Triton's generate extension (generate and generate_stream, whose
// events go through a reply_stream). The inference call itself is the service's start_infer;
// what stays here is HTTP's alone.
#include "http.hpp"

#include "generate.hpp"

#include <inferwire/http/compression.hpp>
#include <inferwire/v2/binary.hpp>
#include <inferwire/v2/detail/header_memo.hpp>
#include <inferwire/v2/fast_request.hpp>
#include <inferwire/v2/json.hpp>

#include <boost/asio/buffer.hpp>
#include <boost/asio/post.hpp>
#include <boost/beast/core/string.hpp>

#include <limits>
#include <optional>
#include <utility>

namespace inferwire::server::rest {

using inferwire::http::route;

/// An infer request in flight: the service's call (its shared-memory places hold their regions
/// until the reply is sent) and the HTTP request that owns the bytes every view points into.
/// Its completion holds only a pointer to it (small enough for std::function to keep without
/// allocating): the service calls it while it holds the call, and the reply takes a reference.
struct endpoints::infer_job : infer_call, std::enable_shared_from_this<infer_job> {
  ~infer_job();
  http_request req;
  std::shared_ptr<body_buffer> big_body;
  std::string inflated;
  v2::encoded_body encoded;
  std::shared_ptr<responder> out;  ///< where the reply goes (taken when it is sent)
  std::string_view accept;         ///< the request's Accept-Encoding (in `req`)
  bool recalled = false;           ///< `request` came from the thread's request memo
};

// --- infer (v2-protocol §4) --------------------------------------------------------------------

namespace {
// The fields an inference reads, in one pass over the request's fields, the first of each (what
// find() gives): each lookup by name is a search with case-insensitive comparisons.
struct infer_fields {
  std::string_view accept_encoding, content_encoding;
  std::optional<std::string_view> content_length, header_length;

  explicit infer_fields(const http_request& req) {
    bool accept = false, coding = false;
    for (const auto& f : req) {
      switch (f.name()) {
        case bhttp::field::accept_encoding:
          if (!std::exchange(accept, true)) accept_encoding = f.value();
          break;
        case bhttp::field::content_encoding:
          if (!std::exchange(coding, true)) content_encoding = f.value();
          break;
        case bhttp::field::content_length:
          if (!content_length) content_length = f.value();
          break;
        case bhttp::field::unknown:
          // Clients write the name as the protocol spells it: that is one comparison of bytes.
          if (!header_length && (f.name_string() == v2::header_length_field ||
                                 boost::beast::iequals(f.name_string(), v2::header_length_field)))
            header_length = f.value();
          break;
        default:
          break;
      }
    }
  }
};

// The last request header an I/O thread decoded, under the limits it was decoded with (a
// request may pass under one server's limits and not another's; tests run several servers),
// and the requests of finished jobs it filled, kept so that the next recall reuses their
// storage: a client repeating its request costs no allocation for the decoded header.
class request_memo {
 public:
  /// A request equal to the full decoder's result for `message`, or false.
  bool recall(std::string_view message, std::size_t header_length, const v2::codec_limits& limits,
              v2::infer_request& into) {
    if (limits != limits_) return false;
    const bool spare = !spares_.empty();
    if (spare) {
      into = std::move(spares_.back());
      spares_.pop_back();
    }
    if (memo_.recall(message, header_length, into)) return true;
    if (spare) spares_.push_back(std::move(into));  // still a spare: its storage is kept
    into = {};
    return false;
  }
  void remember(std::string_view header, const v2::infer_request& decoded, const v2::codec_limits& limits) {
    limits_ = limits;
    memo_.remember(header, decoded);
  }
  /// Keeps a recalled request whose job is over (its views dangle; recall overwrites them).
  /// It owns nothing but what the header held, at most max_header bytes.
  void recycle(v2::infer_request&& r) {
    if (spares_.size() >= max_spares || r.raw_input.owns()) return;
    for (const auto& t : r.inputs)
      if (t.data.owns()) return;
    spares_.push_back(std::move(r));
  }

 private:
  static constexpr std::size_t max_spares = 16;
  v2::codec_limits limits_;
  v2::detail::header_memo<v2::infer_request, &v2::infer_request::inputs> memo_;
  std::vector<v2::infer_request> spares_;
};

// Each thread's memo. A job may end on any thread, also while that thread exits: `memo_gone`,
// trivially destructible, stays readable after the memo is destroyed.
thread_local bool memo_gone = false;
struct thread_memo {
  request_memo requests;
  v2::detail::json_request_memo json_requests;
  v2::detail::response_header_memo responses;
  std::vector<std::size_t> json_data;  ///< where the last response encoded has its JSON data
  ~thread_memo() { memo_gone = true; }
};
thread_local thread_memo memo_of_thread;
}  // namespace

namespace {
// A body whose decoding is work of its own is decoded on the execution pool: its I/O thread, and
// every connection that thread carries, would otherwise wait for it. That is a compressed body of
// more than 4 KiB (deflate inflates up to about a thousandfold: 58 KiB of gzip can be 40 MB of
// JSON) and a body whose JSON part is more than 64 KiB (JSON tensors). A binary body needs no
// such work: its tensors are views of it.
constexpr std::size_t costly_compressed_bytes = 4 * 1024;
constexpr std::size_t costly_json_bytes = 64 * 1024;

bool costly_to_decode(const http_request& req, const body_buffer* big) {
  const std::size_t size = big ? big->view().size() : req.body().size();
  if (size <= costly_compressed_bytes) return false;
  const infer_fields f(req);
  const auto coding = inferwire::http::parse_content_encoding(f.content_encoding);
  if (coding && *coding != inferwire::http::content_coding::identity) return true;
  if (size <= costly_json_bytes) return false;
  // The JSON part's length as decoding reads it (a malformed field fails at once, here).
  status st;
  const std::size_t json = v2::parse_header_length(f.header_length, size, st);
  return !st && json > costly_json_bytes;
}
}  // namespace

endpoints::infer_job::~infer_job() {
  if (recalled && !memo_gone) memo_of_thread.requests.recycle(std::move(request));
}

std::optional<reply> endpoints::infer(const route& r, http_request&& req, std::shared_ptr<body_buffer> big,
                                      const std::shared_ptr<responder>& out, const receive_times& received) {
  if (!costly_to_decode(req, big.get())) return infer_here(r, std::move(req), std::move(big), out, received);
  // The reply comes through `out`, which keeps the connection (and these endpoints) alive.
  boost::asio::post(s_.execution, [this, req = std::move(req), big = std::move(big), out, received]() mutable {
    std::optional<reply> rep;
    try {
      const route again = inferwire::http::match_route(req.target());
      rep = infer_here(again, std::move(req), std::move(big), out, received);
    } catch (...) {
      rep = error_reply(exception_status());
    }
    if (rep) out->respond(std::move(*rep));
  });
  return std::nullopt;
}

std::optional<reply> endpoints::infer_here(const route& r, http_request&& req, std::shared_ptr<body_buffer> big,
                                           const std::shared_ptr<responder>& out, const receive_times& received) {
  auto job = make_call<infer_job>();
  job->times.received = received.body;  // the read that completed the request
  // A request whose client hangs up while it waits in the queue is not executed (the flag is
  // the connection's, which `out`, held by the completion, keeps alive).
  infer_hooks hooks;
  if (const std::atomic<bool>* gone = out->gone())
    hooks.cancelled = [gone] { return gone->load(std::memory_order_relaxed); };
  job->out = out;
  std::optional<reply> refusal;  // a reply that is not an inference failure
  // Steps 2 to 9: the body (the service does step 1 before, steps 10 and 11 and the run
  // after: inline for small requests, `done` then called before start_infer returns, on this
  // I/O thread; otherwise on the execution pool).
  auto decode = [&](infer_call&) -> decoded {
    // Upstream's HTTP frontend refuses decoupled models with this text (gRPC's ModelInfer has
    // its own; ModelStreamInfer serves them).
    if (job->model->config->decoupled)
      return decoded::refuse({errc::unsupported, "HTTP end point doesn't support models with decoupled transaction policy"});
    job->req = std::move(req);
    job->big_body = std::move(big);
    const infer_fields fields(job->req);
    job->accept = fields.accept_encoding;
    job->received = {receive_stamp{"HTTP_RECV_START", received.header}, receive_stamp{"HTTP_RECV_END", received.body}};
    status st = decode_body(*job, fields.content_encoding, fields.content_length, fields.header_length, refusal);
    if (refusal) return decoded::refuse();
    return st;
  };
  const infer_start started = svc_.start_infer(job, r.model, r.version, decode, std::move(hooks), [this, j = job.get()](status done) {
    reply rep = respond(*j, done);
    rep.owner = j->shared_from_this();
    rep.trace = j->trace;
    // The job, which the reply keeps, no longer holds the connection that holds the reply.
    const std::shared_ptr<responder> to = std::move(j->out);
    to->respond(std::move(rep));
  });
  if (!started) return std::nullopt;
  if (refusal) return refusal;
  return started.why == infer_start::budget ? budget_reply(s_.body_budget) : error_reply(started.error);
}

// --- generate (Triton's generate extension) ------------------------------------------------------

// One generate request. A decoupled model's responses arrive through the sink on an execution
// thread, and the completion follows on that thread, so nothing here runs concurrently.
struct endpoints::generate_job : infer_call, std::enable_shared_from_this<endpoints::generate_job> {
  std::shared_ptr<responder> out;        ///< where the reply goes
  bool streaming = false;                ///< generate_stream
  std::shared_ptr<reply_stream> stream;  ///< generate_stream, once its reply started
  std::size_t responses = 0;             ///< a decoupled model's responses so far
  std::string only;                      ///< generate of a decoupled model: its one response
  std::chrono::seconds stall{};          ///< --stall-timeout-secs, the stream's stall rule

  // generate_stream: the first event starts the reply (200, text/event-stream); later ones
  // wait for the client while 16 are queued. False once the client is gone.
  bool send(std::string event) {
    if (stream) return stream->push(std::move(event));
    stream = std::make_shared<reply_stream>(stall);
    if (!event.empty()) stream->push(std::move(event));  // an empty queue: never waits
    reply rep;
    rep.content_type = "text/event-stream; charset=utf-8";
    rep.stream = stream;
    rep.trace = trace;
    out->respond(std::move(rep));
    return true;
  }
};

std::optional<reply> endpoints::generate(const route& r, http_request&& req, bool streaming,
                                         const std::shared_ptr<responder>& out) {
  auto job = make_call<generate_job>();
  job->streaming = streaming;
  job->stall = std::chrono::seconds(s_.opts.stall_timeout_secs);
  job->out = out;
  infer_hooks hooks;
  if (const std::atomic<bool>* gone = out->gone())
    hooks.cancelled = [gone] { return gone->load(std::memory_order_relaxed); };
  // A decoupled model's responses: events of the stream, or the one response of /generate (a
  // second one stops the model: /generate returns exactly one).
  auto sink = std::make_shared<response_sink>([j = job.get()](v2::infer_response&& resp) {
    ++j->responses;
    if (!j->streaming) {
      if (j->responses > 1) return false;
      if (auto st = encode_generate_response(resp, j->only)) j->only = v2::error_body(st.message());
      return true;
    }
    std::string json;
    if (auto st = encode_generate_response(resp, json)) json = v2::error_body(st.message());
    return j->send(sse_event(json));
  });
  auto decode = [&](infer_call& c) -> decoded {
    if (auto it = req.find(bhttp::field::content_encoding); it != req.end()) {
      const auto coding = inferwire::http::parse_content_encoding(it->value());
      if (!coding || *coding != inferwire::http::content_coding::identity)
        return decoded::refuse({errc::invalid_arg, "generate requests take no Content-Encoding but identity"});
    }
    if (c.model->config->decoupled) c.hooks.sink = sink.get();
    const v2::codec_limits limits{static_cast<std::size_t>(s_.opts.http_max_input_size)};
    return decode_generate_request(req.body(), *c.model->config, limits, c.request);
  };
  const infer_start started = svc_.start_infer(job, r.model, r.version, decode, std::move(hooks), [this, j = job.get(), sink](status done) {
    // The job, which the reply keeps, no longer holds the connection that holds the reply.
    const auto keep = j->shared_from_this();
    const bool decoupled = j->model->config->decoupled;
    std::string json;
    if (!done && !decoupled) done = encode_generate_response(j->response, json);
    if (j->streaming) {
      if (!j->stream) {
        // Nothing sent yet: a failure is a plain error reply; a success starts the stream
        // (with no event when a decoupled model sent no response).
        if (done) return std::exchange(j->out, nullptr)->respond(error_reply(done));
        j->send(decoupled ? std::string() : sse_event(json));
      } else if (done) {
        j->stream->put(sse_event(v2::error_body(done.message())));
      } else if (!decoupled) {
        j->stream->put(sse_event(json));
      }
      j->stream->end();
      j->out = nullptr;
      return;
    }
    // (A second response stopped the model: the request ends cancelled, for this reason.)
    if (decoupled && j->responses > 1)
      done = {errc::invalid_arg, "model '" + j->model->name +
                                     "' sent more than one response; /generate returns exactly one, "
                                     "/generate_stream returns them all"};
    else if (!done && decoupled && j->responses == 0)
      done = {errc::internal, "model '" + j->model->name + "' sent no response"};
    reply rep = done ? error_reply(done) : json_reply(decoupled ? std::move(j->only) : std::move(json));
    rep.trace = j->trace;
    rep.owner = keep;
    std::exchange(j->out, nullptr)->respond(std::move(rep));
  });
  if (!started) return std::nullopt;
  return started.why == infer_start::budget ? budget_reply(s_.body_budget) : error_reply(started.error);
}

// Steps 2 to 9 of the HTTP infer pipeline: Content-Encoding, the lengths, then the JSON header
// and binary tensor data. A failure is the request's error (counted as a failed inference);
// `refusal` is a reply that is not an inference failure (an unsupported coding).
status endpoints::decode_body(infer_job& job, std::string_view content_encoding,
                              std::optional<std::string_view> content_length_field,
                              std::optional<std::string_view> header_length_field,
                              std::optional<reply>& refusal) {
  const server::model_config& c = *job.model->config;
  const v2::codec_limits limits{static_cast<std::size_t>(s_.opts.http_max_input_size)};
  // Step 2: Content-Encoding.
  std::string_view body = job.big_body ? job.big_body->view() : std::string_view(job.req.body());
  const auto coding = inferwire::http::parse_content_encoding(content_encoding);
  if (!coding) {
    refusal = error_reply(501, "Unsupported compression type");
    refusal->fields.emplace_back("Accept-Encoding", "gzip, deflate");
    return {};
  }
  if (*coding != inferwire::http::content_coding::identity) {
    if (auto e = inferwire::http::decompress(body, limits.max_input_size, job.inflated)) return e;
    if (!svc_.hold(job, job.inflated.capacity())) {
      job.inflated = std::string();
      refusal = budget_reply(s_.body_budget);
      return {};
    }
    body = job.inflated;
  }
  // Steps 3 and 4: lengths.
  status st;
  std::size_t content_length = body.size();
  if (*coding == inferwire::http::content_coding::identity) {
    if (content_length_field) {
      content_length = v2::parse_content_length(*content_length_field, st);
      if (st) return st;
      content_length = std::min(content_length, body.size());
    }
  }
  const std::size_t header_length = v2::parse_header_length(header_length_field, content_length, st);
  if (st) return st;
  // Steps 5 to 9: the JSON header and the binary data after it (the common shapes in one pass
  // over the header; the rest, and every error, by the full decoder).
  const std::string_view message = body.substr(0, content_length);
  // A client's requests to a model repeat their header: the last one this I/O thread decoded
  // (under the same limits) is not parsed again.
  // With tensors in JSON, only the data arrays of a header that repeats the last one are read.
  request_memo& memo = memo_of_thread.requests;
  v2::detail::json_request_memo& json_memo = memo_of_thread.json_requests;
  if (memo.recall(message, header_length, limits, job.request)) {
    job.recalled = true;
  } else if (!json_memo.recall(message, header_length, limits, job.request)) {
    if (!v2::try_decode_infer_request_fast(message, header_length, limits, job.request, &json_memo)) {
      job.request = v2::decode_infer_request(message, header_length, c.name, st, limits);
      if (st) return st;
    }
    memo.remember(message.substr(0, header_length), job.request, limits);
  }
  // (JSON tensor data decodes to up to 4 times its text, `0,` is 8 bytes as INT64: the service
  // charges what decoding made to the in-flight budget.)
  if (job.request.raw_binary) {
    std::vector<v2::tensor_metadata> inputs;
    for (const auto& t : c.inputs) inputs.push_back({t.name, t.datatype, t.dims});
    return v2::deduce_raw_input(job.request, c.name, inputs, c.batching(), limits);
  }
  return {};
}

// The reply of a finished inference, where nothing may escape: a failure is its reply.
reply endpoints::respond(infer_job& job, const status& done) noexcept {
  try {
    if (done) return error_reply(done);
    return encode(job);
  } catch (...) {
    return error_reply(exception_status());
  }
}

// The HTTP form of a response: each output in binary or JSON as the request's binary_data
// parameters ask (outputs in shared memory stay there), then Accept-Encoding.
reply endpoints::encode(infer_job& job) {
  for (auto& o : job.response.outputs)
    if (o.encoding != v2::tensor_encoding::shared_memory) o.encoding = v2::output_encoding(job.request, o.name);
  // A model's responses to a client repeat their header: the last one this thread encoded
  // is not written again (but for the data arrays of outputs in JSON).
  v2::detail::response_header_memo& memo = memo_of_thread.responses;
  // The header goes into a string an earlier reply gave back (the connection's, once sent).
  job.encoded.header = spare_strings::take();
  if (!memo.recall(job.response, job.encoded)) {
    std::vector<std::size_t>& json_data = memo_of_thread.json_data;
    if (auto st = v2::encode_infer_response(job.response, job.encoded, &json_data)) return error_reply(st);
    memo.remember(job.response, job.encoded.header, json_data);
  }
  reply rep;
  const bool binary = job.encoded.has_binary_data();
  rep.content_type = binary ? "application/octet-stream" : "application/json";
  if (binary)
    rep.header_length = job.encoded.header_length();
  const auto coding = inferwire::http::negotiate_accept_encoding(job.accept);
  if (coding != inferwire::http::content_coding::identity) {
    std::vector<std::string_view> parts;
    parts.push_back(job.encoded.header);
    for (auto seg : job.encoded.segments) parts.emplace_back(reinterpret_cast<const char*>(seg.data()), seg.size());
    if (inferwire::http::compress(parts, coding, rep.body)) {
      rep.fields.emplace_back("Content-Encoding", std::string(inferwire::http::coding_name(coding)));
      return rep;
    }
  }
  rep.body = std::move(job.encoded.header);
  rep.extra = std::move(job.encoded.segments);
  return rep;
}

}  // namespace inferwire::server::rest
