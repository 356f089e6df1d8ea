// SPDX-License-Identifier: Apache-2.0
// bench_grpc_client: the gRPC client SDK against a minimal completion-queue client of the same
// gRPC library, both sending `simple` (two INT32 [1,16] inputs as raw contents) to the same
// inferwire-server, with 1 and 16 requests outstanding, in 5 interleaved rounds of 1 s each. Client CPU per request
// comes from getrusage(RUSAGE_SELF) (the server is another process).
//
// The baseline builds each ModelInferRequest from the input bytes and keeps N calls in flight
// on one CompletionQueue polled by one thread. The SDK keeps N async_infer calls in flight,
// each started again from its completion handler: once with handlers run by an io_context on
// one thread, once with handlers run where the call completes (on the SDK's completion
// thread, as a hand-written completion-queue client and Triton's client run their callbacks).
// Each measurement makes its own clients and destroys them before the next one starts, and
// connecting and warming up stay outside the clock.
// Targets: SDK >= 0.95x the baseline's rate and <= 1.2x its CPU per request.
//
// A second, reference-only baseline is the same hand-written client with its completions
// posted to an io_context whose thread checks them and starts the next calls: the hop to
// another thread that any client with handlers on an io_context makes. The SDK's io_context
// form is compared with it too.
//
//   bench_grpc_client [--outstanding N] [--only baseline|baseline_on_ioc|io_context|inline]
//                     [--seconds S] [--rounds R]
// --only measures one form alone (for a profiler) and prints its figures without ratios.
#include "bench_process.hpp"

#include <inferwire/grpc/client.hpp>
#include <inferwire/v2/tensor.hpp>

#include "grpc_service.grpc.pb.h"

#include <boost/asio/bind_executor.hpp>
#include <boost/asio/executor_work_guard.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/system_executor.hpp>
#include <grpcpp/grpcpp.h>

#include <algorithm>
#include <atomic>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <future>
#include <numeric>
#include <thread>
#include <vector>

// Every benchmark's code is one translation unit (CMakeLists.txt): its names stay in its own
// namespace, and bench_grpc_client's main() calls run().
namespace bench_grpc_client {


namespace ig = inferwire::grpc;
namespace v2 = inferwire::v2;
namespace net = boost::asio;
using clock_type = std::chrono::steady_clock;

namespace {

struct result {
  double rps = 0;
  double cpu_us_per_request = 0;
};

double seconds = 1.0;
int rounds = 5;


// The clock and the CPU time of one measurement, started and stopped by the code measured so
// that making, warming up and destroying its clients stay outside it.
struct meter {
  double cpu0 = 0, cpu = 0, wall = 0;
  clock_type::time_point t0, deadline;
  clock_type::time_point start() {
    cpu0 = bench::self_cpu_seconds();
    t0 = clock_type::now();
    return deadline = t0 + std::chrono::duration_cast<clock_type::duration>(std::chrono::duration<double>(seconds));
  }
  void stop() {
    wall = std::chrono::duration<double>(clock_type::now() - t0).count();
    cpu = bench::self_cpu_seconds() - cpu0;
  }
};

// Measures `run(meter)`, which returns the number of completed requests.
template <class F>
result measure(F run) {
  meter m;
  const long n = run(m);
  return {static_cast<double>(n) / m.wall, n ? m.cpu / static_cast<double>(n) * 1e6 : 0};
}

// --- the baseline: generated stub, one completion queue, one polling thread

/// What both baselines share: the stub (connected), the queue, and starting one call.
struct raw_client {
  struct call {
    grpc::ClientContext ctx;
    inference::ModelInferResponse response;
    grpc::Status status;
    std::unique_ptr<grpc::ClientAsyncResponseReader<inference::ModelInferResponse>> reader;
    bool good(bool ok) const { return ok && status.ok() && response.raw_output_contents_size() == 2; }
  };
  std::unique_ptr<inference::GRPCInferenceService::Stub> stub;
  grpc::CompletionQueue cq;
  const std::vector<std::int32_t>& a;
  const std::vector<std::int32_t>& b;
  std::vector<std::unique_ptr<call>> calls;

  raw_client(const std::string& target, const std::vector<std::int32_t>& in0, const std::vector<std::int32_t>& in1,
             int outstanding)
      : stub(inference::GRPCInferenceService::NewStub(grpc::CreateChannel(target, grpc::InsecureChannelCredentials()))),
        a(in0), b(in1), calls(static_cast<std::size_t>(outstanding)) {
    for (int i = 0; i < 20; ++i) {  // connects
      grpc::ClientContext ctx;
      inference::ServerLiveResponse r;
      (void)stub->ServerLive(&ctx, inference::ServerLiveRequest{}, &r);
    }
  }
  /// Builds the request from the input bytes and starts it in a fresh slot; the slot is its tag.
  void start(std::unique_ptr<call>& c) {
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
  }
  std::unique_ptr<call>& slot_of(void* tag) {
    return *std::find_if(calls.begin(), calls.end(), [&](const auto& c) { return c.get() == tag; });
  }
};

long baseline(const std::string& target, const std::vector<std::int32_t>& a, const std::vector<std::int32_t>& b,
              int outstanding, meter& m) {
  raw_client rc(target, a, b, outstanding);
  const auto deadline = m.start();
  for (auto& c : rc.calls) rc.start(c);
  long done = 0, errors = 0;
  int in_flight = outstanding;
  void* tag = nullptr;
  bool ok = false;
  while (in_flight > 0 && rc.cq.Next(&tag, &ok)) {
    auto& slot = rc.slot_of(tag);
    if (!slot->good(ok)) ++errors;
    ++done;
    if (clock_type::now() < deadline) rc.start(slot);
    else --in_flight;
  }
  m.stop();
  if (errors) std::printf("  (baseline: %ld errors)\n", errors);
  return done;
}

// --- the same client with its handlers on an io_context: what any client whose handlers run
// on an io_context's thread pays (a hop to that thread per completion). For reference only,
// no target: the polling thread posts each completion to the io_context, whose thread checks
// it and starts the next call itself, as a hand-written client would.

long baseline_on_ioc(const std::string& target, const std::vector<std::int32_t>& a,
                     const std::vector<std::int32_t>& b, int outstanding, meter& m) {
  raw_client rc(target, a, b, outstanding);
  net::io_context ioc;
  auto work = net::make_work_guard(ioc);
  long done = 0, errors = 0;
  int in_flight = outstanding;
  std::thread poller([&] {
    void* tag = nullptr;
    bool ok = false;
    while (rc.cq.Next(&tag, &ok)) {
      net::post(ioc, [&, tag, ok] {
        auto& slot = rc.slot_of(tag);
        if (!slot->good(ok)) ++errors;
        ++done;
        if (clock_type::now() < m.deadline) rc.start(slot);
        else if (--in_flight == 0) work.reset();
      });
    }
  });
  m.start();
  net::post(ioc, [&] {
    for (auto& c : rc.calls) rc.start(c);
  });
  ioc.run();
  m.stop();
  rc.cq.Shutdown();
  poller.join();
  if (errors) std::printf("  (baseline on io_context: %ld errors)\n", errors);
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

long sdk(ig::client& c, net::io_context* ioc, const v2::infer_request& req, int outstanding, meter& m) {
  for (int i = 0; i < 200; ++i) c.infer("simple", req);  // connects, warms up
  std::atomic<long> done{0}, errors{0};
  std::atomic<int> in_flight{outstanding};
  std::promise<void> finished;
  const auto deadline = m.start();
  for (int i = 0; i < outstanding; ++i)
    sdk_loop{&c, &req, deadline, &done, &errors, &in_flight, &finished, ioc == nullptr}.start();
  if (ioc) {
    ioc->run();
    ioc->restart();
  }
  finished.get_future().wait();
  m.stop();
  if (errors) std::printf("  (sdk: %ld errors)\n", errors.load());
  return done.load();
}

}  // namespace

int run(int argc, char** argv) {
  // For profiling: one level, one form, longer rounds.
  int only_outstanding = 0;
  std::string only;  // baseline | baseline_on_ioc | io_context | inline
  for (int i = 1; i + 1 < argc; i += 2) {
    const std::string a = argv[i];
    if (a == "--outstanding") only_outstanding = std::stoi(argv[i + 1]);
    else if (a == "--only") only = argv[i + 1];
    else if (a == "--seconds") seconds = std::stod(argv[i + 1]);
    else if (a == "--rounds") rounds = std::max(1, std::stoi(argv[i + 1]));
    else {
      std::fprintf(stderr, "usage: bench_grpc_client [--outstanding N] [--only baseline|baseline_on_ioc|io_context|inline] [--seconds S] [--rounds R]\n");
      return 2;
    }
  }

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

  // Each measurement has the process to itself: the SDK's clients are made for it and destroyed
  // after it. gRPC lets a thread waiting on any completion queue poll for all of them, so a
  // thread left waiting by another measurement would take part of the measured one's events.
  auto sdk_with_ioc = [&](int n, meter& m) {
    net::io_context ioc;
    ig::client c(ioc.get_executor(), target);
    return sdk(c, &ioc, req, n, m);
  };
  auto sdk_inline = [&](int n, meter& m) {
    ig::client c(target);
    return sdk(c, nullptr, req, n, m);
  };
  {
    meter m;
    baseline(target, a, b, 1, m);  // warms up the server
  }

  if (!only.empty()) {  // one form alone, for a profiler: no ratios
    const int n = only_outstanding ? only_outstanding : 16;
    for (int r = 0; r < rounds; ++r) {
      const result x = only == "baseline"     ? measure([&](meter& m) { return baseline(target, a, b, n, m); })
                       : only == "baseline_on_ioc"
                           ? measure([&](meter& m) { return baseline_on_ioc(target, a, b, n, m); })
                       : only == "io_context" ? measure([&](meter& m) { return sdk_with_ioc(n, m); })
                                              : measure([&](meter& m) { return sdk_inline(n, m); });
      std::printf("%s, outstanding %d: %8.0f req/s %6.1f us CPU/req\n", only.c_str(), n, x.rps,
                  x.cpu_us_per_request);
    }
    bench::stop(server_pid);
    std::filesystem::remove_all(dir);
    return 0;
  }
  std::printf("bench_grpc_client: simple over gRPC, %d interleaved rounds of %.0f s per measurement, client CPU "
              "from getrusage; figures are medians over the rounds, ratios the medians of each round's ratio\n",
              rounds, seconds);
  for (int n : {1, 16}) {
    if (only_outstanding && n != only_outstanding) continue;
    std::vector<double> base_rps, base_cpu, hop_rps, hop_cpu, hop_rate, hop_cpu_ratio, sdk_vs_hop;
    std::vector<double> rps[2], cpu[2], rate_ratio[2], cpu_ratio[2];
    for (int r = 0; r < rounds; ++r) {
      const result base = measure([&](meter& m) { return baseline(target, a, b, n, m); });
      const result hop = measure([&](meter& m) { return baseline_on_ioc(target, a, b, n, m); });
      const result sdk_results[2] = {measure([&](meter& m) { return sdk_with_ioc(n, m); }),
                                     measure([&](meter& m) { return sdk_inline(n, m); })};
      base_rps.push_back(base.rps);
      base_cpu.push_back(base.cpu_us_per_request);
      hop_rps.push_back(hop.rps);
      hop_cpu.push_back(hop.cpu_us_per_request);
      hop_rate.push_back(hop.rps / base.rps);
      hop_cpu_ratio.push_back(hop.cpu_us_per_request / base.cpu_us_per_request);
      sdk_vs_hop.push_back(sdk_results[0].rps / hop.rps);
      for (int k = 0; k < 2; ++k) {
        rps[k].push_back(sdk_results[k].rps);
        cpu[k].push_back(sdk_results[k].cpu_us_per_request);
        rate_ratio[k].push_back(sdk_results[k].rps / base.rps);
        cpu_ratio[k].push_back(sdk_results[k].cpu_us_per_request / base.cpu_us_per_request);
      }
    }
    std::printf("outstanding %2d: completion-queue baseline %8.0f req/s %6.1f us CPU/req\n", n, bench::median(base_rps),
                bench::median(base_cpu));
    std::printf("                the same, handlers posted to an io_context %8.0f req/s %6.1f us CPU/req   rate %.2fx   "
                "CPU %.2fx (reference: the cost of the hop)\n",
                bench::median(hop_rps), bench::median(hop_cpu), bench::median(hop_rate), bench::median(hop_cpu_ratio));
    const char* what[2] = {"handlers on io_context", "handlers inline"};
    for (int k = 0; k < 2; ++k) {
      const double rate = bench::median(rate_ratio[k]), c = bench::median(cpu_ratio[k]);
      std::printf("                SDK, %-22s %8.0f req/s %6.1f us CPU/req   rate %.2fx (>= 0.95: %s)   CPU %.2fx "
                  "(<= 1.2: %s)",
                  what[k], bench::median(rps[k]), bench::median(cpu[k]), rate, rate >= 0.95 ? "met" : "NOT met", c,
                  c <= 1.2 ? "met" : "NOT met");
      if (k == 0) std::printf("   %.2fx the baseline on an io_context", bench::median(sdk_vs_hop));
      std::printf("\n");
    }
  }
  bench::stop(server_pid);
  std::filesystem::remove_all(dir);
  return 0;
}

}  // namespace bench_grpc_client
