// SPDX-License-Identifier: Apache-2.0
// bench_grpc_client: the gRPC client SDK against a minimal completion-queue client of the same
// gRPC library, both sending `simple` (two INT32 [1,16] inputs as raw contents) to the same
// inferwire-server, with 1 and 16 requests outstanding for 3 s each. Client CPU per request
// comes from getrusage(RUSAGE_SELF) (the server is another process).
//
// The baseline builds each ModelInferRequest from the input bytes and keeps N calls in flight
// on one CompletionQueue polled by one thread. The SDK keeps N async_infer calls in flight,
// each started again from its completion handler: once with handlers run by an io_context on
// one thread (the usual program), once with handlers run where gRPC completes them.
// Targets: SDK >= 0.95x the baseline's rate and <= 1.2x its CPU per request.
#include "bench_process.hpp"

#include <inferwire/grpc/client.hpp>
#include <inferwire/v2/tensor.hpp>

#include "grpc_service.grpc.pb.h"

#include <boost/asio/bind_executor.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/system_executor.hpp>
#include <grpcpp/grpcpp.h>

#include <atomic>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <future>
#include <numeric>
#include <vector>

#include <sys/resource.h>

namespace ig = inferwire::grpc;
namespace v2 = inferwire::v2;
namespace net = boost::asio;
using clock_type = std::chrono::steady_clock;

namespace {

struct result {
  double rps = 0;
  double cpu_us_per_request = 0;
};

double cpu_seconds() {
  rusage u{};
  ::getrusage(RUSAGE_SELF, &u);
  return static_cast<double>(u.ru_utime.tv_sec + u.ru_stime.tv_sec) +
         static_cast<double>(u.ru_utime.tv_usec + u.ru_stime.tv_usec) / 1e6;
}

constexpr double seconds = 3.0;

// Measures `run(deadline)`, which returns the number of completed requests.
template <class F>
result measure(F run) {
  const double cpu0 = cpu_seconds();
  const auto t0 = clock_type::now();
  const long n = run(t0 + std::chrono::duration_cast<clock_type::duration>(std::chrono::duration<double>(seconds)));
  const double wall = std::chrono::duration<double>(clock_type::now() - t0).count();
  const double cpu = cpu_seconds() - cpu0;
  return {static_cast<double>(n) / wall, n ? cpu / static_cast<double>(n) * 1e6 : 0};
}

// --- the baseline: generated stub, one completion queue, one polling thread

long baseline(const std::string& target, const std::vector<std::int32_t>& a, const std::vector<std::int32_t>& b,
              int outstanding, clock_type::time_point deadline) {
  auto stub = inference::GRPCInferenceService::NewStub(grpc::CreateChannel(target, grpc::InsecureChannelCredentials()));
  grpc::CompletionQueue cq;
  struct call {
    grpc::ClientContext ctx;
    inference::ModelInferResponse response;
    grpc::Status status;
    std::unique_ptr<grpc::ClientAsyncResponseReader<inference::ModelInferResponse>> reader;
  };
  auto start = [&](std::unique_ptr<call>& c) {
    c = std::make_unique<call>();
    inference::ModelInferRequest q;
    q.set_model_name("simple");
    for (const char* name : {"INPUT0", "INPUT1"}) {
      auto* in = q.add_inputs();
      in->set_name(name);
      in->set_datatype("INT32");
      in->add_shape(1);
      in->add_shape(16);
    }
    q.add_raw_input_contents()->assign(reinterpret_cast<const char*>(a.data()), a.size() * 4);
    q.add_raw_input_contents()->assign(reinterpret_cast<const char*>(b.data()), b.size() * 4);
    c->reader = stub->AsyncModelInfer(&c->ctx, q, &cq);
    c->reader->Finish(&c->response, &c->status, c.get());
  };
  std::vector<std::unique_ptr<call>> calls(static_cast<std::size_t>(outstanding));
  for (auto& c : calls) start(c);
  long done = 0, errors = 0;
  int in_flight = outstanding;
  void* tag = nullptr;
  bool ok = false;
  while (in_flight > 0 && cq.Next(&tag, &ok)) {
    auto it = std::find_if(calls.begin(), calls.end(), [&](const auto& c) { return c.get() == tag; });
    if (!ok || !(*it)->status.ok() || (*it)->response.raw_output_contents_size() != 2) ++errors;
    ++done;
    if (clock_type::now() < deadline) start(*it);
    else --in_flight;
  }
  if (errors) std::printf("  (baseline: %ld errors)\n", errors);
  return done;
}

// --- the SDK: async_infer restarted from its handler

struct sdk_loop {
  ig::client* c;
  const v2::infer_request* req;
  clock_type::time_point deadline;
  std::atomic<long>* done;
  std::atomic<long>* errors;
  std::atomic<int>* in_flight;
  std::promise<void>* finished;
  bool inline_handlers;

  void start() {
    if (inline_handlers) c->async_infer("simple", *req, net::bind_executor(net::system_executor(), *this));
    else c->async_infer("simple", *req, *this);
  }
  void operator()(ig::error_code ec, ig::infer_result r) {
    if (ec || r.outputs().size() != 2) ++*errors;
    ++*done;
    if (clock_type::now() < deadline) return start();
    if (--*in_flight == 0) finished->set_value();
  }
};

long sdk(ig::client& c, net::io_context* ioc, const v2::infer_request& req, int outstanding,
         clock_type::time_point deadline) {
  std::atomic<long> done{0}, errors{0};
  std::atomic<int> in_flight{outstanding};
  std::promise<void> finished;
  for (int i = 0; i < outstanding; ++i)
    sdk_loop{&c, &req, deadline, &done, &errors, &in_flight, &finished, ioc == nullptr}.start();
  if (ioc) {
    ioc->run();
    ioc->restart();
  }
  finished.get_future().wait();
  if (errors) std::printf("  (sdk: %ld errors)\n", errors.load());
  return done.load();
}

}  // namespace

int main() {
  const std::string dir = "/tmp/inferwire-bench-grpc-client-" + std::to_string(::getpid());
  std::filesystem::create_directories(dir);
  const int grpc_port = bench::free_port();
  pid_t server_pid = -1;
  const int http_port = bench::start_reference_server(INFERWIRE_SERVER_PATH, dir + "/server.log", server_pid,
                                                      {"--allow-grpc=true", "--grpc-port", std::to_string(grpc_port)});
  if (!http_port || !bench::wait_for_port(grpc_port)) {
    std::fprintf(stderr, "inferwire-server did not start:\n%s\n", bench::read_file(dir + "/server.log").c_str());
    bench::stop(server_pid);
    return 1;
  }
  const std::string target = "127.0.0.1:" + std::to_string(grpc_port);
  std::vector<std::int32_t> a(16), b(16, 1);
  std::iota(a.begin(), a.end(), 0);
  v2::infer_request req;
  req.inputs.push_back(v2::make_input("INPUT0", std::span<const std::int32_t>(a), {1, 16}));
  req.inputs.push_back(v2::make_input("INPUT1", std::span<const std::int32_t>(b), {1, 16}));

  net::io_context ioc;
  ig::client with_ioc(ioc.get_executor(), target);
  ig::client inline_client(target);
  // Warm up every channel.
  for (int i = 0; i < 200; ++i) {
    with_ioc.infer("simple", req);
    inline_client.infer("simple", req);
  }
  baseline(target, a, b, 1, clock_type::now() + std::chrono::milliseconds(300));

  std::printf("bench_grpc_client: simple over gRPC, %.0f s per measurement, client CPU from getrusage\n", seconds);
  for (int n : {1, 16}) {
    const result base = measure([&](auto deadline) { return baseline(target, a, b, n, deadline); });
    const result io = measure([&](auto deadline) { return sdk(with_ioc, &ioc, req, n, deadline); });
    const result in = measure([&](auto deadline) { return sdk(inline_client, nullptr, req, n, deadline); });
    std::printf("outstanding %2d: completion-queue baseline %8.0f req/s %6.1f us CPU/req\n", n, base.rps,
                base.cpu_us_per_request);
    auto line = [&](const char* what, const result& r) {
      const double rate = r.rps / base.rps, cpu = r.cpu_us_per_request / base.cpu_us_per_request;
      std::printf("                SDK, %-22s %8.0f req/s %6.1f us CPU/req   rate %.2fx (>= 0.95: %s)   CPU %.2fx "
                  "(<= 1.2: %s)\n",
                  what, r.rps, r.cpu_us_per_request, rate, rate >= 0.95 ? "met" : "NOT met", cpu,
                  cpu <= 1.2 ? "met" : "NOT met");
    };
    line("handlers on io_context", io);
    line("handlers inline", in);
  }
  bench::stop(server_pid);
  std::filesystem::remove_all(dir);
  return 0;
}
