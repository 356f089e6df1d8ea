// SPDX-License-Identifier: Apache-2.0
// bench_grpc_infer: the `simple` model over gRPC (inferwire-server, our gRPC client) at 1, 16
// and 64 concurrent unary calls and over 1 and 16 ModelStreamInfer streams (requests
// pipelined), requests/s and server CPU per request (all threads, from its CPU-time clock),
// compared in the same run with two bare echo services built on the same gRPC library, each
// answering every request with a response of the same size: the best baseline, a one-thread
// completion-queue (asynchronous) echo, and a synchronous echo (gRPC's thread pool) as a second
// line. Targets: >= 0.9x the completion-queue echo's rate and <= 1.2x its server CPU per
// request at every level. Each level runs three interleaved rounds: figures are medians, ratios
// the median of each round's ratio.
// Then FP32 tensors of 64 B to 64 MiB through identity_fp32 and back, one call at a time,
// against the completion-queue echo answering with the real response of each size: time per
// call and server CPU per byte, target <= 1.1x; and the server's resident memory 3 s after the
// large calls against just before them, target <= 1.1x (and against its start).
#include "bench_process.hpp"

#include <inferwire/core/allocator.hpp>
#include <inferwire/grpc/client.hpp>
#include <inferwire/grpc/convert.hpp>

#include "grpc_service.grpc.pb.h"

#include <grpcpp/grpcpp.h>

#include <boost/asio/bind_executor.hpp>
#include <boost/asio/system_executor.hpp>

#include <algorithm>
#include <future>
#include <filesystem>
#include <fstream>
#include <atomic>
#include <cstdio>
#include <limits>
#include <memory>
#include <numeric>
#include <thread>

// Every benchmark's code is one translation unit (CMakeLists.txt): its names stay in its own
// namespace, and bench_grpc_infer's main() calls run().
namespace bench_grpc_infer {

namespace ig = inferwire::grpc;
namespace v2 = inferwire::v2;
using clock_type = std::chrono::steady_clock;

namespace {

// The baseline: ModelInfer echoes a canned response of the real response's size; streams
// answer each request with it.
class echo_service final : public inference::GRPCInferenceService::Service {
 public:
  explicit echo_service(inference::ModelInferResponse canned) : canned_(std::move(canned)) {}
  ::grpc::Status ModelInfer(::grpc::ServerContext*, const inference::ModelInferRequest* q,
                            inference::ModelInferResponse* r) override {
    *r = canned_;
    r->set_id(q->id());
    return ::grpc::Status::OK;
  }
  ::grpc::Status ModelStreamInfer(
      ::grpc::ServerContext*,
      ::grpc::ServerReaderWriter<inference::ModelStreamInferResponse, inference::ModelInferRequest>* s) override {
    inference::ModelInferRequest q;
    inference::ModelStreamInferResponse out;
    while (s->Read(&q)) {
      *out.mutable_infer_response() = canned_;
      out.mutable_infer_response()->set_id(q.id());
      if (!s->Write(out)) break;
    }
    return ::grpc::Status::OK;
  }

 private:
  inference::ModelInferResponse canned_;
};

// The best baseline: the asynchronous API on one completion queue and one thread, calls and
// streams as state machines on it (each stream answers a request before reading the next, as
// the synchronous echo does).
class cq_echo {
 public:
  cq_echo(inference::GRPCInferenceService::AsyncService& svc, ::grpc::ServerCompletionQueue& cq,
          const inference::ModelInferResponse& canned)
      : svc_(svc), cq_(cq), canned_(canned) {}
  void run(int unary_slots, int stream_slots) {
    for (int i = 0; i < unary_slots; ++i) (new unary(*this))->start();
    for (int i = 0; i < stream_slots; ++i) (new stream(*this))->start();
    void* tag = nullptr;
    bool ok = false;
    while (cq_.Next(&tag, &ok)) static_cast<step*>(tag)->proceed(ok);
  }

 private:
  struct step {
    virtual ~step() = default;
    virtual void proceed(bool ok) = 0;
  };
  struct unary final : step {
    explicit unary(cq_echo& e) : echo(e) {}
    void start() { echo.svc_.RequestModelInfer(&ctx, &q, &responder, &echo.cq_, &echo.cq_, this); }
    void proceed(bool ok) override {
      if (!ok || finishing) {
        delete this;
        return;
      }
      (new unary(echo))->start();  // the next call's slot
      r = echo.canned_;
      r.set_id(q.id());
      finishing = true;
      responder.Finish(r, ::grpc::Status::OK, this);
    }
    cq_echo& echo;
    ::grpc::ServerContext ctx;
    inference::ModelInferRequest q;
    inference::ModelInferResponse r;
    ::grpc::ServerAsyncResponseWriter<inference::ModelInferResponse> responder{&ctx};
    bool finishing = false;
  };
  struct stream final : step {
    explicit stream(cq_echo& e) : echo(e) {}
    void start() { echo.svc_.RequestModelStreamInfer(&ctx, &rw, &echo.cq_, &echo.cq_, this); }
    void proceed(bool ok) override {
      switch (state) {
        case 0:  // accepted
          if (!ok) return delete this;
          (new stream(echo))->start();
          state = 1;
          return rw.Read(&q, this);
        case 1:  // read
          if (!ok) {
            state = 3;
            return rw.Finish(::grpc::Status::OK, this);
          }
          *out.mutable_infer_response() = echo.canned_;
          out.mutable_infer_response()->set_id(q.id());
          state = 2;
          return rw.Write(out, this);
        case 2:  // written
          if (!ok) {
            state = 3;
            return rw.Finish(::grpc::Status::OK, this);
          }
          state = 1;
          return rw.Read(&q, this);
        default:
          delete this;
      }
    }
    cq_echo& echo;
    ::grpc::ServerContext ctx;
    ::grpc::ServerAsyncReaderWriter<inference::ModelStreamInferResponse, inference::ModelInferRequest> rw{&ctx};
    inference::ModelInferRequest q;
    inference::ModelStreamInferResponse out;
    int state = 0;
  };
  inference::GRPCInferenceService::AsyncService& svc_;
  ::grpc::ServerCompletionQueue& cq_;
  const inference::ModelInferResponse& canned_;
};

struct result {
  double rps = 0, p50_us = 0, p99_us = 0;
  std::size_t count = 0;  // requests answered
};

v2::infer_request simple_request(std::vector<std::int32_t>& a, std::vector<std::int32_t>& b) {
  v2::infer_request r;
  r.inputs.push_back(v2::make_input("INPUT0", std::span<const std::int32_t>(a), {1, 16}));
  r.inputs.push_back(v2::make_input("INPUT1", std::span<const std::int32_t>(b), {1, 16}));
  return r;
}

result run_unary(ig::client& c, const std::string& model, const v2::infer_request& req, int concurrency,
                 double seconds) {
  std::atomic<bool> stop{false};
  std::vector<std::vector<double>> lat(static_cast<std::size_t>(concurrency));
  std::atomic<long> errors{0};
  std::vector<std::thread> threads;
  const auto t0 = clock_type::now();
  for (int t = 0; t < concurrency; ++t)
    threads.emplace_back([&, t] {
      while (!stop.load(std::memory_order_relaxed)) {
        const auto s = clock_type::now();
        ig::error_code ec;
        c.infer(model, req, ec);
        if (ec) ++errors;
        lat[static_cast<std::size_t>(t)].push_back(std::chrono::duration<double, std::micro>(clock_type::now() - s).count());
      }
    });
  std::this_thread::sleep_for(std::chrono::duration<double>(seconds));
  stop = true;
  for (auto& th : threads) th.join();
  const double elapsed = std::chrono::duration<double>(clock_type::now() - t0).count();
  std::vector<double> all;
  for (auto& v : lat) all.insert(all.end(), v.begin(), v.end());
  std::sort(all.begin(), all.end());
  if (errors) std::printf("  (%ld errors)\n", errors.load());
  result r;
  r.rps = static_cast<double>(all.size()) / elapsed;
  r.count = all.size();
  r.p50_us = all.empty() ? 0 : all[all.size() / 2];
  r.p99_us = all.empty() ? 0 : all[all.size() * 99 / 100];
  return r;
}

// Handlers that run where the operation completes (gRPC's thread): no hand-off per message.
template <class F>
auto inline_handler(F f) {
  return boost::asio::bind_executor(boost::asio::system_executor(), std::move(f));
}

// Reads responses until the stream ends, each read started from the previous one's handler.
struct stream_reader {
  ig::stream* s;
  int* got;
  std::promise<void>* done;
  void operator()(ig::error_code ec, ig::infer_result) {
    if (ec && ig::status_code(ec) != 2) {  // the end (eof) or a failure of the stream
      done->set_value();
      return;
    }
    ++*got;
    s->async_read(inline_handler(*this));
  }
};

// `streams` streams at once, `n` pipelined requests each: responses per second, all streams.
double run_streams(ig::client& c, const v2::infer_request& req, int streams, int n) {
  std::vector<int> got(static_cast<std::size_t>(streams), 0);
  std::vector<std::promise<void>> done(static_cast<std::size_t>(streams));
  std::vector<ig::stream> open;
  open.reserve(got.size());
  const auto t0 = clock_type::now();
  for (std::size_t k = 0; k < got.size(); ++k) open.push_back(c.open_stream());
  for (std::size_t k = 0; k < got.size(); ++k) {
    ig::stream& s = open[k];
    s.async_read(inline_handler(stream_reader{&s, &got[k], &done[k]}));
    // Every request queued at once: the stream sends them in order, one after another.
    for (int i = 0; i < n; ++i) s.async_write("simple", req, inline_handler([](ig::error_code) {}));
    s.async_writes_done(inline_handler([](ig::error_code) {}));
  }
  for (auto& d : done) d.get_future().wait();
  for (auto& s : open) s.finish();
  const double elapsed = std::chrono::duration<double>(clock_type::now() - t0).count();
  return std::accumulate(got.begin(), got.end(), 0.0) / elapsed;
}

}  // namespace

// A baseline as its own process: bench_grpc_infer --echo|--cq-echo <port> <canned response file>.
int echo_main(bool cq, const char* port, const char* file) {
  inference::ModelInferResponse canned;
  if (!canned.ParseFromString(bench::read_file(file))) return 1;
  ::grpc::ServerBuilder sb;
  sb.AddListeningPort(std::string("127.0.0.1:") + port, ::grpc::InsecureServerCredentials());
  sb.SetMaxReceiveMessageSize(std::numeric_limits<int>::max());  // as inferwire-server
  if (cq) {
    inference::GRPCInferenceService::AsyncService svc;
    sb.RegisterService(&svc);
    auto queue = sb.AddCompletionQueue();
    auto server = sb.BuildAndStart();
    if (!server) return 1;
    cq_echo(svc, *queue, canned).run(64, 16);  // a slot per call and stream the bench makes
    return 0;
  }
  echo_service svc(canned);
  sb.RegisterService(&svc);
  auto server = sb.BuildAndStart();
  if (!server) return 1;
  server->Wait();
  return 0;
}

constexpr int stream_rounds = 3;  // interleaved rounds of each level

int run(int argc, char** argv) {
  // The server does this too; the client and the echo alike, so that large messages compare
  // the servers, not page faults (GLIBC_TUNABLES=glibc.malloc.check=0 runs all three with
  // glibc's defaults).
  inferwire::keep_large_blocks();
  if (argc == 4 && (std::string(argv[1]) == "--echo" || std::string(argv[1]) == "--cq-echo"))
    return echo_main(std::string(argv[1]) == "--cq-echo", argv[2], argv[3]);
  // --only unary|streams|sizes: one part (for profiling); --server PATH: another build of
  // inferwire-server (a before-and-after comparison); --stream-requests N: requests per stream
  // level and round (20000; more for a profile of the streams).
  std::string only, server = INFERWIRE_SERVER_PATH;
  int stream_requests = 20000;
  for (int i = 1; i + 1 < argc; i += 2) {
    if (std::string(argv[i]) == "--only") only = argv[i + 1];
    else if (std::string(argv[i]) == "--server") server = argv[i + 1];
    else if (std::string(argv[i]) == "--stream-requests") stream_requests = std::max(16, std::atoi(argv[i + 1]));
  }
  const std::string dir = "/tmp/inferwire-bench-grpc-" + std::to_string(::getpid());
  std::filesystem::create_directories(dir);
  const int grpc_port = bench::free_port();
  pid_t server_pid = -1;
  const int http_port = bench::start_reference_server(
      server, dir + "/server.log", server_pid,
      {"--allow-grpc=true", "--grpc-port", std::to_string(grpc_port)});
  if (!http_port || !bench::wait_for_port(grpc_port)) {
    std::fprintf(stderr, "inferwire-server did not start:\n%s\n", bench::read_file(dir + "/server.log").c_str());
    bench::stop(server_pid);
    return 1;
  }
  const std::size_t rss_start = bench::rss_bytes(server_pid);
  std::vector<std::int32_t> a(16), b(16, 1);
  std::iota(a.begin(), a.end(), 0);
  const v2::infer_request req = simple_request(a, b);

  auto ours_client = std::make_unique<ig::client>("127.0.0.1:" + std::to_string(grpc_port));
  ig::client& ours = *ours_client;
  // A real response, canned for the baseline (same size on the wire).
  inference::ModelInferResponse canned;
  {
    auto r = ours.infer("simple", req);
    ig::encode_infer_response(r.response(), canned);
  }
  // Starts an echo process answering every call with `response`; its pid, or -1.
  auto start_echo = [&](const inference::ModelInferResponse& response, const std::string& name, int& port,
                        const char* mode = "--echo") {
    port = bench::free_port();
    {
      std::ofstream f(dir + "/" + name + ".bin", std::ios::binary);
      f << response.SerializeAsString();
    }
    const pid_t pid = bench::spawn({argv[0], mode, std::to_string(port), dir + "/" + name + ".bin"},
                                   dir + "/" + name + ".log");
    if (bench::wait_for_port(port)) return pid;
    std::fprintf(stderr, "the echo baseline did not start\n");
    bench::stop(pid);
    return pid_t{-1};
  };
  int echo_port = 0, cq_port = 0;
  const pid_t echo_pid = start_echo(canned, "canned", echo_port);
  const pid_t cq_pid = start_echo(canned, "canned_cq", cq_port, "--cq-echo");
  if (echo_pid < 0 || cq_pid < 0) {
    bench::stop(server_pid);
    bench::stop(echo_pid);
    bench::stop(cq_pid);
    return 1;
  }
  // All three clients are closed before the sizes below: while a channel that has run a stream
  // (gRPC's callback API) is open, gRPC 1.51's process-wide callback queue keeps two threads
  // polling (a quarter of a core here), and the one-call-at-a-time measurements ran beside them.
  auto echo_client = std::make_unique<ig::client>("127.0.0.1:" + std::to_string(echo_port));
  auto cq_client = std::make_unique<ig::client>("127.0.0.1:" + std::to_string(cq_port));
  ig::client& echo = *echo_client;
  ig::client& cq = *cq_client;

  std::printf("bench_grpc_infer: simple (INT32 [1,16] x2 -> x2), request %zu bytes, response %zu bytes\n",
              [&] {
                inference::ModelInferRequest q;
                ig::encode_infer_request(req, "simple", "", q);
                return q.ByteSizeLong();
              }(),
              canned.ByteSizeLong());
  for (int i = 0; i < 200; ++i) {  // warm up all three
    ours.infer("simple", req);
    echo.infer("simple", req);
    cq.infer("simple", req);
  }
  // One level: each server's rate and CPU per request, ours against the completion-queue echo
  // (the target) and the synchronous one. Figures are medians over the rounds; a ratio is the
  // median of each round's ratio (as bench_http_infer's), so that a slow second of this VM
  // weighs on both sides of the ratio it falls in, and the rounds' ratios follow.
  struct figure {
    double rate = 0, cpu_us = 0;
  };
  auto line = [](const char* what, const figure& s, const figure& e, const figure& y, const std::vector<double>& rates,
                 const std::vector<double>& cpus) {
    const double rate = bench::median(rates), cpu = bench::median(cpus);
    std::printf("%-20s inferwire-server %8.0f req/s %6.1f us CPU   cq echo %8.0f req/s %6.1f us CPU   "
                "ratio %.2f rate (>= 0.9: %s), %.2f CPU (<= 1.2: %s)   sync echo %8.0f req/s %6.1f us CPU (%.2f)   "
                "rounds: rate",
                what, s.rate, s.cpu_us, e.rate, e.cpu_us, rate, rate >= 0.9 ? "met" : "NOT met", cpu,
                cpu <= 1.2 ? "met" : "NOT met", y.rate, y.cpu_us, s.rate / y.rate);
    for (double r : rates) std::printf(" %.2f", r);
    std::printf(", CPU");
    for (double c : cpus) std::printf(" %.2f", c);
    std::printf("\n");
  };
  auto measured = [](pid_t pid, auto&& run) {
    const double c0 = bench::cpu_seconds(pid, false);
    const auto [rate, count] = run();
    return figure{rate, (bench::cpu_seconds(pid, false) - c0) * 1e6 / count};
  };
  // A level moves by a fifth from run to run on a shared 2-core VM: three interleaved rounds of
  // a second each, medians (as the streams below).
  auto rounds_of = [&](auto&& run_one, const std::string& what) {
    std::vector<double> rate[3], cpu[3];
    for (int round = 0; round < stream_rounds; ++round) {
      int k = 0;
      for (auto [c, pid] : {std::pair{&cq, cq_pid}, std::pair{&echo, echo_pid}, std::pair{&ours, server_pid}}) {
        const figure f = measured(pid, [&, c = c] { return run_one(*c); });
        rate[k].push_back(f.rate);
        cpu[k++].push_back(f.cpu_us);
      }
    }
    auto median_of = [&](int k) { return figure{bench::median(rate[k]), bench::median(cpu[k])}; };
    // Each round's ratios, ours against the completion-queue echo.
    line(what.c_str(), median_of(2), median_of(0), median_of(1), bench::ratios(rate[2], rate[0]),
         bench::ratios(cpu[2], cpu[0]));
  };
  for (int conc : {1, 16, 64}) {
    if (!only.empty() && only != "unary") break;
    rounds_of(
        [&](ig::client& c) {
          const result r = run_unary(c, "simple", req, conc, 1.0);
          return std::pair{r.rps, static_cast<double>(r.count)};
        },
        "unary, " + std::to_string(conc) + " calls");
  }
  // Streams move by a third from run to run: the same interleaved rounds.
  for (int streams : {1, 16}) {
    if (!only.empty() && only != "streams") break;
    const int each = stream_requests / streams;
    rounds_of(
        [&](ig::client& c) {
          const double r = run_streams(c, req, streams, each);
          return std::pair{r, static_cast<double>(each) * streams};
        },
        "streams, " + std::to_string(streams) + " x " + std::to_string(each));
  }
  echo_client.reset();
  cq_client.reset();
  ours_client.reset();
  bench::stop(echo_pid);
  bench::stop(cq_pid);

  // Tensors of 64 B to 64 MiB through identity_fp32 and back, one call at a time, against the
  // completion-queue echo answering with the real response of each size: time per call and
  // server CPU per byte sent. Target: <= 1.1x at every size. Then the server's resident memory
  // a few seconds after the last large call, against its resident memory at start.
  const std::size_t rss_before = bench::rss_bytes(server_pid);
  for (std::size_t bytes : {std::size_t{64}, std::size_t{64} << 10, std::size_t{1} << 20, std::size_t{16} << 20,
                            std::size_t{64} << 20}) {
    if (!only.empty() && only != "sizes") break;
    std::vector<float> big(bytes / sizeof(float), 1.5f);
    v2::infer_request big_req;
    big_req.inputs.push_back(
        v2::make_input("INPUT0", std::span<const float>(big), {static_cast<std::int64_t>(big.size())}));
    // Each side on a connection of its own made for this size.
    ig::client big_ours("127.0.0.1:" + std::to_string(grpc_port));
    inference::ModelInferResponse big_canned;
    ig::encode_infer_response(big_ours.infer("identity_fp32", big_req).response(), big_canned);
    int big_echo_port = 0;
    const pid_t big_echo_pid = start_echo(big_canned, "canned_big", big_echo_port, "--cq-echo");
    big_canned.Clear();
    if (big_echo_pid < 0) break;
    ig::client big_echo("127.0.0.1:" + std::to_string(big_echo_port));
    for (int i = 0; i < 3; ++i) {
      big_ours.infer("identity_fp32", big_req);
      big_echo.infer("identity_fp32", big_req);
    }
    const double seconds = bytes >= (std::size_t{16} << 20) ? 2.0 : 0.8;
    std::vector<double> call_us[2], cpu_ns[2], faults[2];  // per call, per byte, per call; [0] echo, [1] ours
    for (int round = 0; round < 3; ++round) {
      int k = 0;
      for (auto [c, pid] : {std::pair{&big_echo, big_echo_pid}, std::pair{&big_ours, server_pid}}) {
        const double c0 = bench::cpu_seconds(pid, false), f0 = bench::minor_faults(pid);
        const result r = run_unary(*c, "identity_fp32", big_req, 1, seconds);
        const double n = static_cast<double>(std::max<std::size_t>(r.count, 1));
        call_us[k].push_back(1e6 / r.rps);
        faults[k].push_back((bench::minor_faults(pid) - f0) / n);
        cpu_ns[k++].push_back((bench::cpu_seconds(pid, false) - c0) * 1e9 / (n * static_cast<double>(bytes)));
      }
    }
    const double t_echo = bench::median(call_us[0]), t_ours = bench::median(call_us[1]);
    const double c_echo = bench::median(cpu_ns[0]), c_ours = bench::median(cpu_ns[1]);
    const double f_echo = bench::median(faults[0]), f_ours = bench::median(faults[1]);
    // The medians of each round's ratios (as the levels above).
    const double rt = bench::median(bench::ratios(call_us[1], call_us[0]));
    const double rc = bench::median(bench::ratios(cpu_ns[1], cpu_ns[0]));
    const std::string size = bytes < 1024 ? std::to_string(bytes) + " B"
                             : bytes < (std::size_t{1} << 20) ? std::to_string(bytes >> 10) + " KiB"
                                                               : std::to_string(bytes >> 20) + " MiB";
    std::printf("identity_fp32 %7s, one call at a time: inferwire-server %9.1f us/call %7.3f ns CPU/B   "
                "cq echo %9.1f us/call %7.3f ns CPU/B   ratio %.2f time (<= 1.1: %s), %.2f CPU (<= 1.1: %s)   "
                "page faults per call %.0f, echo %.0f\n",
                size.c_str(), t_ours, c_ours, t_echo, c_echo, rt, rt <= 1.1 ? "met" : "NOT met", rc,
                rc <= 1.1 ? "met" : "NOT met", f_ours, f_echo);
    bench::stop(big_echo_pid);
  }
  std::this_thread::sleep_for(std::chrono::seconds(3));
  const std::size_t rss_after = bench::rss_bytes(server_pid);
  // What the large calls left: against the resident memory just before them (the small calls
  // before grow the server by a few MiB of their own), and against the process's start.
  const double left = static_cast<double>(rss_after) / static_cast<double>(rss_before);
  std::printf("server resident memory: %.1f MiB at start, %.1f MiB before the large calls, %.1f MiB 3 s after "
              "them: %.2fx before them (<= 1.1: %s), %.2fx its start\n",
              static_cast<double>(rss_start) / 1048576.0, static_cast<double>(rss_before) / 1048576.0,
              static_cast<double>(rss_after) / 1048576.0, left, left <= 1.1 ? "met" : "NOT met",
              static_cast<double>(rss_after) / static_cast<double>(rss_start));
  bench::stop(server_pid);
  std::filesystem::remove_all(dir);
  return 0;
}

}  // namespace bench_grpc_infer
