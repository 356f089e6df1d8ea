// SPDX-License-Identifier: Apache-2.0
// The gRPC frontend's set-up: credentials, channel arguments and limits, the completion queues
// and their threads, start and stop. What each RPC does is grpc_endpoints.cpp's business, a
// stream's is grpc_stream.cpp's, the queue machinery grpc_queue.hpp's.
#include "grpc.hpp"

#include "grpc_endpoints.hpp"

#include <grpcpp/resource_quota.h>
#if INFERWIRE_HAVE_ABSL_SYNCHRONIZATION
#include <absl/synchronization/mutex.h>
#endif

#include <chrono>
#include <climits>
#include <fstream>
#include <sstream>
#include <thread>
#include <vector>

namespace inferwire::server {

using namespace grpc_detail;

class grpc_frontend {
 public:
  explicit grpc_frontend(server_state& s) : endpoints(make_services(s)) {}
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
  std::unique_ptr<services> endpoints;
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
#if INFERWIRE_HAVE_ABSL_SYNCHRONIZATION
  // An Abseil built without NDEBUG (Debian's, for one) checks every lock of every gRPC mutex
  // against a graph of lock orders: 3 % of the server's CPU over a stream of small requests.
  // Built with NDEBUG, the check is compiled out and this changes nothing.
  absl::SetMutexDeadlockDetectionMode(absl::OnDeadlockCycle::kIgnore);
#endif
  auto f = std::make_shared<grpc_frontend>(s);
  f->gate->heap = &s.heap;
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
  f->endpoints->add_to(b);
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
    f->endpoints->listen(q.get(), f->gate, 8);
    f->threads.emplace_back([cq = q.get()] { serve_queue(cq); });
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
