// SPDX-License-Identifier: Apache-2.0
// inferwire/grpc/client.hpp
//
// The gRPC client: every RPC of inference.GRPCInferenceService with inferwire's v2 value types
// (the same as the HTTP client's; no generated protobuf type in this API), blocking calls in a
// throwing and an error_code form, asynchronous inference with a callback, and bidirectional
// streaming with a handler that receives every response and every error.
//
//   inferwire::grpc::client c({.target = "localhost:8001"});
//   v2::infer_request req;
//   req.inputs.push_back(v2::make_input("INPUT0", std::span<const int32_t>(a), {1, 16}));
//   req.inputs.push_back(v2::make_input("INPUT1", std::span<const int32_t>(b), {1, 16}));
//   auto result = c.infer("simple", req);
//   auto sum = result.response.output("OUTPUT0")->as<int32_t>();
//
// Errors: the error_code forms set a code in grpc_category() whose value holds the gRPC status
// code (`status_code(ec)`) and whose message() is the server's text; the throwing forms throw
// rpc_error (a std::system_error with that code and text).
#ifndef INFERWIRE_GRPC_CLIENT_HPP
#define INFERWIRE_GRPC_CLIENT_HPP

#include <inferwire/core/message_table.hpp>
#include <inferwire/grpc/convert.hpp>
#include <inferwire/v2/tensor.hpp>
#include <inferwire/v2/types.hpp>

#include "grpc_service.grpc.pb.h"
#include "health.grpc.pb.h"

#include <google/protobuf/util/json_util.h>
#include <grpcpp/grpcpp.h>

#include <algorithm>
#include <chrono>
#include <climits>
#include <condition_variable>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <system_error>
#include <thread>
#include <vector>

namespace inferwire::grpc {

// --- errors -----------------------------------------------------------------------------------

using error_code = std::error_code;

namespace detail {
class grpc_category_impl final : public std::error_category {
 public:
  const char* name() const noexcept override { return "inferwire.grpc"; }
  std::string message(int ev) const override {
    const auto value = static_cast<std::uint32_t>(ev);
    std::string text;
    if (inferwire::detail::message_table::instance().lookup(value & inferwire::detail::message_table::id_mask, text))
      return text;
    return "gRPC status " + std::to_string(value >> inferwire::detail::message_table::id_bits);
  }
};
}  // namespace detail

/// The category of failed calls.
inline const std::error_category& grpc_category() noexcept {
  static const detail::grpc_category_impl instance;
  return instance;
}

/// A code for gRPC status `code` (a grpc::StatusCode value) with `message`.
inline error_code make_error(int code, std::string_view message) {
  using table = inferwire::detail::message_table;
  const std::uint32_t id = message.empty() ? 0 : table::instance().intern(message);
  return {static_cast<int>((static_cast<std::uint32_t>(code) << table::id_bits) | id), grpc_category()};
}
inline error_code make_error(const ::grpc::Status& s) {
  return s.ok() ? error_code{} : make_error(static_cast<int>(s.error_code()), s.error_message());
}

/// The gRPC status code of `ec` (0 when it is not in grpc_category()).
inline int status_code(const error_code& ec) noexcept {
  if (ec.category() != grpc_category()) return 0;
  return static_cast<int>(static_cast<std::uint32_t>(ec.value()) >> inferwire::detail::message_table::id_bits);
}

/// Thrown by the throwing forms: code() as from the error_code forms, what() the server's text.
class rpc_error : public std::system_error {
 public:
  explicit rpc_error(const error_code& ec) : std::system_error(ec), text_(ec.message()) {}
  const char* what() const noexcept override { return text_.c_str(); }
  int grpc_code() const noexcept { return status_code(code()); }

 private:
  std::string text_;
};

inline void throw_if(const error_code& ec) {
  if (ec) throw rpc_error(ec);
}

namespace detail {
// The throwing form of an error_code form.
template <class F>
auto throwing(F f) {
  error_code ec;
  auto v = f(ec);
  throw_if(ec);
  return v;
}
}  // namespace detail

// --- options ----------------------------------------------------------------------------------

enum class compression { none, deflate, gzip };

struct channel_options {
  std::string target = "localhost:8001";  ///< host:port
  bool tls = false;
  std::string root_certificates;  ///< PEM; empty: the system's roots
  std::string private_key;        ///< PEM, for client authentication
  std::string certificate_chain;  ///< PEM, for client authentication
  compression default_compression = compression::none;  ///< for requests
  int max_message_size = INT_MAX;                       ///< both directions
  std::optional<std::chrono::milliseconds> keepalive_time;
  std::optional<std::chrono::milliseconds> keepalive_timeout;
  bool keepalive_without_calls = false;
  std::map<std::string, int> int_args;          ///< any other channel argument
  std::map<std::string, std::string> string_args;
};

struct call_options {
  std::optional<std::chrono::milliseconds> timeout;  ///< the call's deadline from now
  std::map<std::string, std::string> headers;          ///< request metadata
  std::optional<compression> request_compression;      ///< overrides the channel's default
};

struct infer_options {
  std::string version;       ///< model version ("" = the server's choice)
  bool typed_contents = false;  ///< send inputs as typed `contents` instead of raw bytes
};

/// An inference result: `response` views outputs stored in this object (move it, keep it).
struct infer_result {
  v2::infer_response response;
  std::shared_ptr<const void> storage;
};

// --- client -----------------------------------------------------------------------------------

class client {
 public:
  explicit client(const channel_options& o = {}) : opts_(o) {
    ::grpc::ChannelArguments args;
    args.SetMaxReceiveMessageSize(o.max_message_size);
    args.SetMaxSendMessageSize(o.max_message_size);
    if (o.keepalive_time) args.SetInt(GRPC_ARG_KEEPALIVE_TIME_MS, static_cast<int>(o.keepalive_time->count()));
    if (o.keepalive_timeout)
      args.SetInt(GRPC_ARG_KEEPALIVE_TIMEOUT_MS, static_cast<int>(o.keepalive_timeout->count()));
    if (o.keepalive_without_calls) args.SetInt(GRPC_ARG_KEEPALIVE_PERMIT_WITHOUT_CALLS, 1);
    if (o.default_compression != compression::none) args.SetCompressionAlgorithm(algorithm(o.default_compression));
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
    channel_ = ::grpc::CreateCustomChannel(o.target, creds, args);
    stub_ = pb::GRPCInferenceService::NewStub(channel_);
    health_ = ::grpc::health::v1::Health::NewStub(channel_);
  }
  client(client&&) = default;
  client& operator=(client&&) = default;
  /// Waits for asynchronous calls still in flight.
  ~client() {
    if (pending_) pending_->wait();
  }

  // --- health and metadata ----------------------------------------------------------------

  bool server_live(error_code& ec, const call_options& co = {}) {
    pb::ServerLiveResponse r;
    unary(&stub_type::ServerLive, pb::ServerLiveRequest{}, r, ec, co);
    return !ec && r.live();
  }
  bool server_live(const call_options& co = {}) { return detail::throwing([&](error_code& ec) { return server_live(ec, co); }); }

  bool server_ready(error_code& ec, const call_options& co = {}) {
    pb::ServerReadyResponse r;
    unary(&stub_type::ServerReady, pb::ServerReadyRequest{}, r, ec, co);
    return !ec && r.ready();
  }
  bool server_ready(const call_options& co = {}) { return detail::throwing([&](error_code& ec) { return server_ready(ec, co); }); }

  bool model_ready(const std::string& model, const std::string& version, error_code& ec, const call_options& co = {}) {
    pb::ModelReadyRequest q;
    q.set_name(model);
    q.set_version(version);
    pb::ModelReadyResponse r;
    unary(&stub_type::ModelReady, q, r, ec, co);
    return !ec && r.ready();
  }
  bool model_ready(const std::string& model, const std::string& version = "", const call_options& co = {}) {
    return detail::throwing([&](error_code& ec) { return model_ready(model, version, ec, co); });
  }

  /// grpc.health.v1 Check: true when the server reports SERVING.
  bool health_check(error_code& ec, const call_options& co = {}) {
    ::grpc::ClientContext ctx;
    prepare(ctx, co);
    ::grpc::health::v1::HealthCheckResponse r;
    ec = make_error(health_->Check(&ctx, {}, &r));
    return !ec && r.status() == ::grpc::health::v1::HealthCheckResponse::SERVING;
  }
  bool health_check(const call_options& co = {}) { return detail::throwing([&](error_code& ec) { return health_check(ec, co); }); }

  v2::server_metadata server_metadata(error_code& ec, const call_options& co = {}) {
    pb::ServerMetadataResponse r;
    unary(&stub_type::ServerMetadata, pb::ServerMetadataRequest{}, r, ec, co);
    return from_proto(r);
  }
  v2::server_metadata server_metadata(const call_options& co = {}) {
    return detail::throwing([&](error_code& ec) { return server_metadata(ec, co); });
  }

  v2::model_metadata model_metadata(const std::string& model, const std::string& version, error_code& ec,
                                    const call_options& co = {}) {
    pb::ModelMetadataRequest q;
    q.set_name(model);
    q.set_version(version);
    pb::ModelMetadataResponse r;
    unary(&stub_type::ModelMetadata, q, r, ec, co);
    return from_proto(r);
  }
  v2::model_metadata model_metadata(const std::string& model, const std::string& version = "",
                                    const call_options& co = {}) {
    return detail::throwing([&](error_code& ec) { return model_metadata(model, version, ec, co); });
  }

  /// The model's configuration as protobuf JSON (snake_case field names).
  std::string model_config(const std::string& model, const std::string& version, error_code& ec,
                           const call_options& co = {}) {
    pb::ModelConfigRequest q;
    q.set_name(model);
    q.set_version(version);
    pb::ModelConfigResponse r;
    unary(&stub_type::ModelConfig, q, r, ec, co);
    std::string json;
    if (ec) return json;
    google::protobuf::util::JsonPrintOptions p;
    p.preserve_proto_field_names = true;
    (void)google::protobuf::util::MessageToJsonString(r.config(), &json, p);
    return json;
  }
  std::string model_config(const std::string& model, const std::string& version = "", const call_options& co = {}) {
    return detail::throwing([&](error_code& ec) { return model_config(model, version, ec, co); });
  }

  v2::statistics_response model_statistics(const std::string& model, const std::string& version, error_code& ec,
                                           const call_options& co = {}) {
    pb::ModelStatisticsRequest q;
    q.set_name(model);
    q.set_version(version);
    pb::ModelStatisticsResponse r;
    unary(&stub_type::ModelStatistics, q, r, ec, co);
    return from_proto(r);
  }
  v2::statistics_response model_statistics(const std::string& model = "", const std::string& version = "",
                                           const call_options& co = {}) {
    return detail::throwing([&](error_code& ec) { return model_statistics(model, version, ec, co); });
  }

  // --- model repository --------------------------------------------------------------------

  std::vector<v2::repository_index_entry> repository_index(bool ready_only, error_code& ec, const call_options& co = {}) {
    pb::RepositoryIndexRequest q;
    q.set_ready(ready_only);
    pb::RepositoryIndexResponse r;
    unary(&stub_type::RepositoryIndex, q, r, ec, co);
    return from_proto(r);
  }
  std::vector<v2::repository_index_entry> repository_index(bool ready_only = false, const call_options& co = {}) {
    return detail::throwing([&](error_code& ec) { return repository_index(ready_only, ec, co); });
  }

  /// Loads (or reloads) `model`, optionally with a config override and `file:` contents.
  void load_model(const std::string& model, const v2::repository_load_request& load, error_code& ec,
                  const call_options& co = {}) {
    pb::RepositoryModelLoadRequest q;
    q.set_model_name(model);
    to_proto(load, q);
    pb::RepositoryModelLoadResponse r;
    unary(&stub_type::RepositoryModelLoad, q, r, ec, co);
  }
  void load_model(const std::string& model, const v2::repository_load_request& load = {}, const call_options& co = {}) {
    detail::throwing([&](error_code& ec) { return load_model(model, load, ec, co), true; });
  }
  void unload_model(const std::string& model, bool unload_dependents, error_code& ec, const call_options& co = {}) {
    pb::RepositoryModelUnloadRequest q;
    q.set_model_name(model);
    to_proto(v2::repository_unload_request{unload_dependents}, q);
    pb::RepositoryModelUnloadResponse r;
    unary(&stub_type::RepositoryModelUnload, q, r, ec, co);
  }
  void unload_model(const std::string& model, bool unload_dependents = false, const call_options& co = {}) {
    detail::throwing([&](error_code& ec) { return unload_model(model, unload_dependents, ec, co), true; });
  }

  // --- shared memory -------------------------------------------------------------------------

  void register_system_shared_memory(const v2::system_shm_register_request& q, error_code& ec,
                                     const call_options& co = {}) {
    pb::SystemSharedMemoryRegisterRequest m;
    to_proto(q, m);
    pb::SystemSharedMemoryRegisterResponse r;
    unary(&stub_type::SystemSharedMemoryRegister, m, r, ec, co);
  }
  void register_system_shared_memory(const v2::system_shm_register_request& q, const call_options& co = {}) {
    detail::throwing([&](error_code& ec) { return register_system_shared_memory(q, ec, co), true; });
  }
  /// Unregisters region `name`, or every system region when `name` is empty.
  void unregister_system_shared_memory(const std::string& name, error_code& ec, const call_options& co = {}) {
    pb::SystemSharedMemoryUnregisterRequest m;
    m.set_name(name);
    pb::SystemSharedMemoryUnregisterResponse r;
    unary(&stub_type::SystemSharedMemoryUnregister, m, r, ec, co);
  }
  void unregister_system_shared_memory(const std::string& name = "", const call_options& co = {}) {
    detail::throwing([&](error_code& ec) { return unregister_system_shared_memory(name, ec, co), true; });
  }
  std::vector<v2::system_shm_status> system_shared_memory_status(const std::string& name, error_code& ec,
                                                                 const call_options& co = {}) {
    pb::SystemSharedMemoryStatusRequest m;
    m.set_name(name);
    pb::SystemSharedMemoryStatusResponse r;
    unary(&stub_type::SystemSharedMemoryStatus, m, r, ec, co);
    return from_proto(r);
  }
  std::vector<v2::system_shm_status> system_shared_memory_status(const std::string& name = "",
                                                                 const call_options& co = {}) {
    return detail::throwing([&](error_code& ec) { return system_shared_memory_status(name, ec, co); });
  }
  /// `q.raw_handle` holds the 64 raw bytes of a cudaIpcMemHandle_t.
  void register_cuda_shared_memory(const v2::cuda_shm_register_request& q, error_code& ec, const call_options& co = {}) {
    pb::CudaSharedMemoryRegisterRequest m;
    to_proto(q, m);
    pb::CudaSharedMemoryRegisterResponse r;
    unary(&stub_type::CudaSharedMemoryRegister, m, r, ec, co);
  }
  void register_cuda_shared_memory(const v2::cuda_shm_register_request& q, const call_options& co = {}) {
    detail::throwing([&](error_code& ec) { return register_cuda_shared_memory(q, ec, co), true; });
  }
  void unregister_cuda_shared_memory(const std::string& name, error_code& ec, const call_options& co = {}) {
    pb::CudaSharedMemoryUnregisterRequest m;
    m.set_name(name);
    pb::CudaSharedMemoryUnregisterResponse r;
    unary(&stub_type::CudaSharedMemoryUnregister, m, r, ec, co);
  }
  void unregister_cuda_shared_memory(const std::string& name = "", const call_options& co = {}) {
    detail::throwing([&](error_code& ec) { return unregister_cuda_shared_memory(name, ec, co), true; });
  }
  std::vector<v2::cuda_shm_status> cuda_shared_memory_status(const std::string& name, error_code& ec,
                                                             const call_options& co = {}) {
    pb::CudaSharedMemoryStatusRequest m;
    m.set_name(name);
    pb::CudaSharedMemoryStatusResponse r;
    unary(&stub_type::CudaSharedMemoryStatus, m, r, ec, co);
    return from_proto(r);
  }
  std::vector<v2::cuda_shm_status> cuda_shared_memory_status(const std::string& name = "", const call_options& co = {}) {
    return detail::throwing([&](error_code& ec) { return cuda_shared_memory_status(name, ec, co); });
  }

  // --- trace and log settings ----------------------------------------------------------------

  /// Reads (empty `update`) or updates the trace settings, globally or of `model`. An update
  /// value of nullopt clears a model's override of that setting.
  v2::trace_settings trace_settings(const v2::trace_settings& update, const std::string& model, error_code& ec,
                                    const call_options& co = {}) {
    pb::TraceSettingRequest q;
    q.set_model_name(model);
    to_proto(update, *q.mutable_settings());
    pb::TraceSettingResponse r;
    unary(&stub_type::TraceSetting, q, r, ec, co);
    return trace_settings_from_proto(r.settings(), false);
  }
  v2::trace_settings trace_settings(const v2::trace_settings& update = {}, const std::string& model = "",
                                    const call_options& co = {}) {
    return detail::throwing([&](error_code& ec) { return trace_settings(update, model, ec, co); });
  }

  /// Reads (no member set) or updates the log settings.
  v2::log_settings log_settings(const v2::log_settings& update, error_code& ec, const call_options& co = {}) {
    pb::LogSettingsRequest q;
    to_proto(update, *q.mutable_settings());
    pb::LogSettingsResponse r;
    unary(&stub_type::LogSettings, q, r, ec, co);
    return log_settings_from_proto(r.settings());
  }
  v2::log_settings log_settings(const v2::log_settings& update = {}, const call_options& co = {}) {
    return detail::throwing([&](error_code& ec) { return log_settings(update, ec, co); });
  }

  // --- inference -----------------------------------------------------------------------------

  infer_result infer(const std::string& model, const v2::infer_request& request, error_code& ec,
                     const infer_options& io = {}, const call_options& co = {}) {
    pb::ModelInferRequest q;
    encode_infer_request(request, model, io.version, q, io.typed_contents);
    auto r = std::make_shared<pb::ModelInferResponse>();
    unary(&stub_type::ModelInfer, q, *r, ec, co);
    return result_of(std::move(r), ec);
  }
  infer_result infer(const std::string& model, const v2::infer_request& request, const infer_options& io = {},
                     const call_options& co = {}) {
    return detail::throwing([&](error_code& ec) { return infer(model, request, ec, io, co); });
  }

  using infer_callback = std::function<void(error_code, infer_result)>;

  /// Starts an inference and returns at once; `done` runs on a gRPC thread with the result or
  /// the error. The request is encoded before this returns (its data may then go away). The
  /// client's destructor waits for calls in flight.
  void async_infer(const std::string& model, const v2::infer_request& request, infer_callback done,
                   const infer_options& io = {}, const call_options& co = {}) {
    struct call {
      ::grpc::ClientContext ctx;
      pb::ModelInferRequest request;
      std::shared_ptr<pb::ModelInferResponse> response = std::make_shared<pb::ModelInferResponse>();
      infer_callback done;
    };
    auto c = std::make_shared<call>();
    c->done = std::move(done);
    prepare(c->ctx, co);
    encode_infer_request(request, model, io.version, c->request, io.typed_contents);
    pending_->begin();
    stub_->async()->ModelInfer(&c->ctx, &c->request, c->response.get(),
                               [c, pending = pending_](::grpc::Status s) mutable {
                                 error_code ec = make_error(s);
                                 auto callback = std::move(c->done);
                                 auto response = c->response;
                                 c.reset();  // the call's context goes before we say we are done
                                 callback(ec, result_of(std::move(response), ec));
                                 pending->end();
                               });
  }

  // --- streaming -----------------------------------------------------------------------------

  /// A bidirectional ModelStreamInfer call. Every response goes to the handler in order; so
  /// does every error: an in-stream error_message (the stream goes on) and a failure of the
  /// stream itself (then it is over). Handlers run on the stream's reader thread.
  class stream {
   public:
    using handler = std::function<void(error_code, infer_result)>;

    stream(const stream&) = delete;
    stream& operator=(const stream&) = delete;
    ~stream() { finish(); }

    /// Sends one request; false when the stream is closed.
    bool send(const std::string& model, const v2::infer_request& request, const infer_options& io = {}) {
      pb::ModelInferRequest q;
      encode_infer_request(request, model, io.version, q, io.typed_contents);
      std::lock_guard lock(write_mu_);
      if (writes_done_) return false;
      return rw_->Write(q);
    }
    /// Half-closes: no more requests; responses still arrive.
    void writes_done() {
      std::lock_guard lock(write_mu_);
      if (!writes_done_) rw_->WritesDone();
      writes_done_ = true;
    }
    /// Cancels the call (the handler gets CANCELLED).
    void cancel() { ctx_.TryCancel(); }
    /// Half-closes, waits for the remaining responses and returns the stream's final status.
    error_code finish() {
      writes_done();
      if (reader_.joinable()) reader_.join();
      return final_;
    }

   private:
    friend class client;
    stream(pb::GRPCInferenceService::Stub& stub, handler h, const call_options& co) : handler_(std::move(h)) {
      prepare(ctx_, co);
      rw_ = stub.ModelStreamInfer(&ctx_);
      reader_ = std::thread([this] {
        pb::ModelStreamInferResponse m;
        while (rw_->Read(&m)) {
          auto r = std::shared_ptr<pb::ModelInferResponse>(m.release_infer_response());
          if (!r) r = std::make_shared<pb::ModelInferResponse>();
          error_code ec;
          if (!m.error_message().empty()) ec = make_error(static_cast<int>(::grpc::StatusCode::UNKNOWN), m.error_message());
          handler_(ec, result_of(std::move(r), {}));
          m.Clear();
        }
        final_ = make_error(rw_->Finish());
        if (final_) handler_(final_, {});
      });
    }

    ::grpc::ClientContext ctx_;
    handler handler_;
    std::unique_ptr<::grpc::ClientReaderWriter<pb::ModelInferRequest, pb::ModelStreamInferResponse>> rw_;
    std::mutex write_mu_;
    bool writes_done_ = false;
    error_code final_;
    std::thread reader_;
  };

  /// Opens a stream; `co.timeout` bounds the whole stream; header `triton_grpc_error: true`
  /// makes the server end the stream at the first error instead.
  std::unique_ptr<stream> start_stream(stream::handler h, const call_options& co = {}) {
    return std::unique_ptr<stream>(new stream(*stub_, std::move(h), co));
  }

  const channel_options& options() const noexcept { return opts_; }

 private:
  using stub_type = pb::GRPCInferenceService::Stub;

  static ::grpc_compression_algorithm algorithm(compression c) {
    switch (c) {
      case compression::gzip: return GRPC_COMPRESS_GZIP;
      case compression::deflate: return GRPC_COMPRESS_DEFLATE;
      default: return GRPC_COMPRESS_NONE;
    }
  }

  static void prepare(::grpc::ClientContext& ctx, const call_options& co) {
    if (co.timeout) ctx.set_deadline(std::chrono::system_clock::now() + *co.timeout);
    for (const auto& [k, v] : co.headers) ctx.AddMetadata(k, v);
    if (co.request_compression) ctx.set_compression_algorithm(algorithm(*co.request_compression));
  }

  template <class Req, class Resp>
  void unary(::grpc::Status (stub_type::*rpc)(::grpc::ClientContext*, const Req&, Resp*), const Req& q, Resp& r,
             error_code& ec, const call_options& co) {
    ::grpc::ClientContext ctx;
    prepare(ctx, co);
    ec = make_error(((*stub_).*rpc)(&ctx, q, &r));
  }

  static infer_result result_of(std::shared_ptr<pb::ModelInferResponse> r, const error_code& ec) {
    infer_result out;
    if (!ec) decode_infer_response(*r, out.response);
    out.storage = std::move(r);
    return out;
  }

  // Asynchronous calls in flight: the destructor waits for them (a gRPC thread must not run a
  // callback of a client that is gone).
  struct pending_calls {
    std::mutex mu;
    std::condition_variable cv;
    int count = 0;
    void begin() {
      std::lock_guard lock(mu);
      ++count;
    }
    void end() {
      std::lock_guard lock(mu);
      if (--count == 0) cv.notify_all();
    }
    void wait() {
      std::unique_lock lock(mu);
      cv.wait(lock, [this] { return count == 0; });
    }
  };

  channel_options opts_;
  std::shared_ptr<pending_calls> pending_ = std::make_shared<pending_calls>();
  std::shared_ptr<::grpc::Channel> channel_;
  std::unique_ptr<stub_type> stub_;
  std::unique_ptr<::grpc::health::v1::Health::Stub> health_;
};

}  // namespace inferwire::grpc

#endif
