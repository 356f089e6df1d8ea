// SPDX-License-Identifier: Apache-2.0
// bench_http_infer: inferwire-server over HTTP, against baselines measured in the same run.
//
//   (a) the `simple` model, binary tensors and JSON tensors, at 1, 16, 64 and 256 keep-alive
//       connections, a fixed number of requests each: requests/s, p50 and p99 latency, and the
//       server's CPU time per request (user + system time of every thread, from its CPU-time
//       clock, over the measured run). The same load generator drives nginx answering a POST of
//       the same body with 200 and 64 bytes (`return 200`), and its workers' CPU per request is
//       the baseline. Targets: CPU per request <= 1.2x nginx's (binary), <= 1.3x (JSON) at
//       every level; rate at 256 connections >= 0.9x nginx's. Then the kernel's share of each
//       server's CPU over all rounds (user and system clock ticks): how much of the difference
//       user-space work could still remove.
//   (b) a 64 MiB FP32 `identity_fp32` round trip (raw binary request, binary response), against
//       a plain loopback TCP echo of the same bytes both ways. Target: >= 0.5x its bandwidth.
//
//   Each figure is the median of `--rounds` rounds (3), each ratio the median of the rounds'.
//
//   bench_http_infer [--requests N] [--rounds R] [--server PATH] [--nginx PATH] [--concurrency 1|16|64|256]
//                    [--kind binary|JSON]
#include "bench_process.hpp"
#include "http_load.hpp"

#include <inferwire/v2/binary.hpp>

#include <boost/asio/connect.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/read.hpp>
#include <boost/asio/write.hpp>
#include <boost/beast/core/flat_buffer.hpp>
#include <boost/beast/http/read.hpp>
#include <boost/beast/http/string_body.hpp>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <limits>
#include <numeric>
#include <regex>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include <fcntl.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

extern char** environ;

// Every benchmark's code is one translation unit (CMakeLists.txt): its names stay in its own
// namespace, and bench_http_infer's main() calls run().
namespace bench_http_infer {

namespace net = boost::asio;
namespace beast = boost::beast;
namespace bhttp = boost::beast::http;
using tcp = net::ip::tcp;
using clock_type = std::chrono::steady_clock;

using namespace bench;

namespace {

std::size_t unbounded(const boost::system::error_code& ec, std::size_t);

// One 64 MiB round trip through the server; returns seconds. `body` is the receive buffer,
// allocated (and its pages touched) before the clock starts, as the TCP baseline's is.
double identity_round_trip(int port, const std::string& payload, std::string& body) {
  net::io_context io;
  tcp::socket s(io);
  s.connect(tcp::endpoint(net::ip::make_address("127.0.0.1"), static_cast<unsigned short>(port)));
  std::string head = "POST /v2/models/identity_fp32/infer HTTP/1.1\r\nHost: x\r\n"
                     "Inference-Header-Content-Length: 0\r\nContent-Length: " +
                     std::to_string(payload.size()) + "\r\n\r\n";
  auto t0 = clock_type::now();
  std::vector<net::const_buffer> bufs{net::buffer(head), net::buffer(payload)};
  net::write(s, bufs, unbounded);
  // Header through Beast, then the body straight into its buffer (large reads).
  beast::flat_buffer buf;
  bhttp::response_parser<bhttp::string_body> p;
  p.body_limit(std::uint64_t{1} << 32);
  bhttp::read_header(s, buf, p);
  body.resize(static_cast<std::size_t>(p.content_length().value_or(0)));
  std::size_t have = std::min(buf.size(), body.size());
  net::buffer_copy(net::buffer(body.data(), have), buf.data());
  net::read(s, net::buffer(body.data() + have, body.size() - have), unbounded);
  double secs = std::chrono::duration<double>(clock_type::now() - t0).count();
  auto& res = p.get();
  std::size_t hl = std::stoul(std::string(res["Inference-Header-Content-Length"]));
  if (res.result_int() != 200 || body.size() - hl != payload.size() ||
      std::memcmp(body.data() + hl, payload.data(), payload.size()) != 0)
    std::fprintf(stderr, "identity round trip returned unexpected data\n");
  return secs;
}

// The same bytes over plain loopback TCP, both ways, as fast as plain sockets go: an echo
// thread with a ready (pre-touched) buffer reads everything, then writes it back; blocking
// calls with unbounded transfer sizes on both sides.
std::size_t unbounded(const boost::system::error_code& ec, std::size_t) {
  return ec ? 0 : std::numeric_limits<std::size_t>::max();
}

double tcp_round_trip(const std::string& payload, std::string& echo_buf, std::string& back) {
  net::io_context io;
  tcp::acceptor acc(io, tcp::endpoint(net::ip::make_address("127.0.0.1"), 0));
  tcp::socket s(io);
  s.connect(acc.local_endpoint());
  tcp::socket peer = acc.accept();
  s.set_option(tcp::no_delay(true));
  peer.set_option(tcp::no_delay(true));
  auto t0 = clock_type::now();
  std::thread echo([&] {
    net::read(peer, net::buffer(echo_buf.data(), payload.size()), unbounded);
    net::write(peer, net::buffer(echo_buf.data(), payload.size()), unbounded);
  });
  net::write(s, net::buffer(payload), unbounded);
  net::read(s, net::buffer(back.data(), payload.size()), unbounded);
  double secs = std::chrono::duration<double>(clock_type::now() - t0).count();
  echo.join();
  return secs;
}

// The rounds of one measurement: each warms the connections up, then measures; figures are
// the medians over the rounds.
struct series {
  std::vector<load_result> runs;
  std::size_t errors = 0;
  const load_result& measure(int port, const std::string& request, int conc, std::size_t requests) {
    load_generator(port, request, conc, requests / 10).run();  // warm-up
    runs.push_back(load_generator(port, request, conc, requests).run());
    errors += runs.back().errors;
    return runs.back();
  }
  double median_of(double load_result::*field) const {
    std::vector<double> v;
    for (const auto& r : runs) v.push_back(r.*field);
    return median(std::move(v));
  }
  std::string summary() const {
    char line[160];
    std::snprintf(line, sizeof line, "%9.0f req/s  p50 %7.1f us  p99 %7.1f us  errors %zu",
                  median_of(&load_result::rate), median_of(&load_result::p50_us),
                  median_of(&load_result::p99_us), errors);
    return line;
  }
};

}  // namespace

int run(int argc, char** argv) {
  std::size_t requests = 20000;
  std::string server = INFERWIRE_SERVER_PATH;
  std::string nginx = "/usr/sbin/nginx";
  std::vector<std::string> server_args;
  int only_conc = 0;
  std::string only_kind;
  int rounds = 3;
  for (int i = 1; i + 1 < argc; i += 2) {
    std::string a = argv[i];
    if (a == "--requests") requests = std::stoul(argv[i + 1]);
    else if (a == "--server") server = argv[i + 1];
    else if (a == "--nginx") nginx = argv[i + 1];
    else if (a == "--rounds") rounds = std::max(1, std::stoi(argv[i + 1]));
    else if (a == "--concurrency") only_conc = std::stoi(argv[i + 1]);  // one level only (for profiling)
    else if (a == "--kind") only_kind = argv[i + 1];  // binary or JSON only (for profiling)
    else if (a == "--server-arg") server_args.emplace_back(argv[i + 1]);  // passed to inferwire-server
  }
  signal(SIGPIPE, SIG_IGN);
  auto tmp = std::filesystem::temp_directory_path() / ("iw-bench-" + std::to_string(getpid()));
  std::filesystem::create_directories(tmp);

  // inferwire-server
  std::string slog = (tmp / "server.log").string();
  pid_t spid = -1;
  int sport = start_reference_server(server, slog, spid, server_args);
  if (!sport) {
    std::fprintf(stderr, "inferwire-server did not start:\n%s\n", read_file(slog).c_str());
    return 1;
  }

  // nginx with a static 64-byte response.
  int nport = free_port();
  std::string conf = (tmp / "nginx.conf").string();
  {
    std::ofstream c(conf);
    c << "daemon off;\nworker_processes auto;\npid " << (tmp / "nginx.pid").string() << ";\n"
      << "error_log " << (tmp / "nginx.err").string() << ";\n"
      << "events { worker_connections 1024; }\n"
      << "http {\n  access_log off;\n  client_body_temp_path " << tmp.string() << ";\n"
      << "  proxy_temp_path " << tmp.string() << ";\n  fastcgi_temp_path " << tmp.string() << ";\n"
      << "  uwsgi_temp_path " << tmp.string() << ";\n  scgi_temp_path " << tmp.string() << ";\n"
      << "  keepalive_requests 1000000;\n"
      << "  server {\n    listen 127.0.0.1:" << nport << ";\n"
      << "    location / { default_type application/octet-stream; return 200 \""
      << std::string(64, 'x') << "\"; }\n"
      << "    location /post { client_body_buffer_size 64k; default_type application/octet-stream; return 200 \""
      << std::string(64, 'x') << "\"; }\n  }\n}\n";
  }
  pid_t npid = spawn({nginx, "-c", conf, "-p", tmp.string()}, (tmp / "nginx.out").string());
  bool have_nginx = npid > 0 && wait_for_port(nport);
  if (!have_nginx)
    std::fprintf(stderr, "nginx did not start (install nginx-light); baseline skipped\n%s\n",
                 read_file((tmp / "nginx.out").string()).c_str());

  // The simple request: binary inputs, binary outputs.
  inferwire::v2::infer_request req;
  for (const char* name : {"INPUT0", "INPUT1"}) {
    inferwire::v2::infer_input in;
    in.name = name;
    in.datatype = inferwire::data_type::int32;
    in.shape = {1, 16};
    std::vector<std::int32_t> v(16, 3);
    in.data = inferwire::v2::tensor_data::own(std::string(reinterpret_cast<char*>(v.data()), 64));
    req.inputs.push_back(in);
  }
  req.parameters.set("binary_data_output", true);
  auto body = inferwire::v2::encode_infer_request(req);
  std::string infer_req = http_request("POST", "/v2/models/simple/infer", body.flatten(),
                                       "Inference-Header-Content-Length: " +
                                           std::to_string(body.header_length()) + "\r\n");
  // The same inference with JSON tensors both ways.
  std::string json_body = R"({"inputs":[)";
  for (const char* name : {"INPUT0", "INPUT1"}) {
    json_body += std::string(name == std::string("INPUT0") ? "" : ",") + R"({"name":")" + name +
                 R"(","datatype":"INT32","shape":[1,16],"data":[)";
    for (int i = 0; i < 16; ++i) json_body += (i ? "," : "") + std::to_string(i * 7 + 3);
    json_body += "]}";
  }
  json_body += "]}";
  std::string json_req = http_request("POST", "/v2/models/simple/infer", json_body);
  struct kind {
    const char* name;
    std::string infer, post;  // the inference, and nginx's POST of the same body
    double cpu_target;
  };
  const kind kinds[] = {
      {"binary", infer_req,
       http_request("POST", "/post", body.flatten(),
                    "Inference-Header-Content-Length: " + std::to_string(body.header_length()) + "\r\n"),
       1.2},
      {"JSON", json_req, http_request("POST", "/post", json_body), 1.3}};

  std::printf("bench_http_infer: %zu requests per measurement, %d rounds, loopback, %u cores; baseline: nginx "
              "answering a POST of the same body with 200 and 64 bytes\n",
              requests, rounds, std::thread::hardware_concurrency());
  // Each level runs `rounds` rounds of both measurements back to back; a figure is the median
  // over the rounds and a ratio the median of each round's ratio, so that a slow minute of this
  // shared VM falls on both sides of a ratio.
  for (int conc : {1, 16, 64, 256}) {
    if (only_conc && conc != only_conc) continue;
    for (const kind& k : kinds) {
      if (!only_kind.empty() && only_kind != k.name) continue;
      series ours, post;
      std::vector<double> cpu, nginx_cpu, rate_ratio, p99_ratio, cpu_ratio;
      cpu_ticks split, nginx_split;  // over all rounds
      for (int round = 0; round < rounds; ++round) {
        const double cpu0 = cpu_seconds(spid, false);
        const cpu_ticks t0 = cpu_split(spid, false);
        const load_result& o = ours.measure(sport, k.infer, conc, requests);
        cpu.push_back((cpu_seconds(spid, false) - cpu0) * 1e6 / static_cast<double>(requests));
        split += cpu_split(spid, false) - t0;
        if (!have_nginx) continue;
        const double ncpu0 = cpu_seconds(npid, true);
        const cpu_ticks n0 = cpu_split(npid, true);
        const load_result& n = post.measure(nport, k.post, conc, requests);
        nginx_cpu.push_back((cpu_seconds(npid, true) - ncpu0) * 1e6 / static_cast<double>(requests));
        nginx_split += cpu_split(npid, true) - n0;
        rate_ratio.push_back(o.rate / n.rate);
        p99_ratio.push_back(o.p99_us / n.p99_us);
        cpu_ratio.push_back(cpu.back() / nginx_cpu.back());
      }
      std::printf("  c=%-3d %-6s inferwire simple: %s  server CPU %5.1f us/req\n", conc, k.name,
                  ours.summary().c_str(), median(cpu));
      if (!have_nginx) continue;
      const double cr = median(cpu_ratio), rr = median(rate_ratio);
      std::printf("  c=%-3d %-6s nginx POST      : %s  server CPU %5.1f us/req\n", conc, k.name,
                  post.summary().c_str(), median(nginx_cpu));
      std::printf("  c=%-3d %-6s ratio           : CPU/req %.2fx (<= %.1f: %s), rate %.2fx%s, p99 %.2fx   rounds: CPU",
                  conc, k.name, cr, k.cpu_target, cr <= k.cpu_target ? "met" : "NOT met", rr,
                  conc == 256 ? (rr >= 0.9 ? " (>= 0.9: met)" : " (>= 0.9: NOT met)") : "", median(p99_ratio));
      for (double r : cpu_ratio) std::printf(" %.2fx", r);
      std::printf(", rate");
      for (double r : rate_ratio) std::printf(" %.2fx", r);
      std::printf("; kernel's share of CPU %.0f%% (nginx %.0f%%)\n", split.system_percent(),
                  nginx_split.system_percent());
    }
  }

  // 64 MiB FP32 identity round trip vs plain TCP.
  std::string payload(std::size_t{64} << 20, '\0');
  for (std::size_t i = 0; i < payload.size(); i += 4) {
    float f = static_cast<float>(i);
    std::memcpy(payload.data() + i, &f, 4);
  }
  double best_srv = 1e9, best_tcp = 1e9;
  std::string response(payload.size() + 4096, '\0');
  std::string echo_buf(payload.size(), '\0'), back(payload.size(), '\0');
  for (int i = 0; i < 5; ++i) {
    best_srv = std::min(best_srv, identity_round_trip(sport, payload, response));
    best_tcp = std::min(best_tcp, tcp_round_trip(payload, echo_buf, back));
  }
  const double gib = 2.0 * static_cast<double>(payload.size()) / (1024.0 * 1024 * 1024);
  std::printf("  64 MiB identity_fp32 round trip: %.1f ms (%.2f GiB/s both ways)\n", best_srv * 1e3, gib / best_srv);
  std::printf("  64 MiB plain TCP echo          : %.1f ms (%.2f GiB/s both ways)\n", best_tcp * 1e3, gib / best_tcp);
  std::printf("  ratio: %.2fx of plain TCP bandwidth (target >= 0.5)\n", best_tcp / best_srv);

  stop(npid);
  stop(spid);
  std::filesystem::remove_all(tmp);
  return 0;
}

}  // namespace bench_http_infer
