// SPDX-License-Identifier: Apache-2.0
#include "measure.hpp"

#include <algorithm>
#include <cmath>
#include <iomanip>
#include <numeric>

namespace inferwire::perf {

server_side server_side::between(const v2::model_statistics& a, const v2::model_statistics& b) {
  auto d = [](std::uint64_t x, std::uint64_t y) { return y >= x ? y - x : 0; };
  server_side s;
  s.inference_count = d(a.inference_count, b.inference_count);
  s.execution_count = d(a.execution_count, b.execution_count);
  s.success_count = d(a.inference_stats.success.count, b.inference_stats.success.count);
  s.request_ns = d(a.inference_stats.success.ns, b.inference_stats.success.ns);
  s.queue_ns = d(a.inference_stats.queue.ns, b.inference_stats.queue.ns);
  s.compute_input_ns = d(a.inference_stats.compute_input.ns, b.inference_stats.compute_input.ns);
  s.compute_infer_ns = d(a.inference_stats.compute_infer.ns, b.inference_stats.compute_infer.ns);
  s.compute_output_ns = d(a.inference_stats.compute_output.ns, b.inference_stats.compute_output.ns);
  return s;
}

server_side& server_side::operator+=(const server_side& o) {
  inference_count += o.inference_count;
  execution_count += o.execution_count;
  success_count += o.success_count;
  request_ns += o.request_ns;
  queue_ns += o.queue_ns;
  compute_input_ns += o.compute_input_ns;
  compute_infer_ns += o.compute_infer_ns;
  compute_output_ns += o.compute_output_ns;
  return *this;
}

double window::throughput() const {
  const double s = std::chrono::duration<double>(duration).count();
  return s > 0 ? static_cast<double>(requests()) * static_cast<double>(batch_size) / s : 0;
}

double window::avg_latency_us() const {
  if (latencies_ns.empty()) return 0;
  const long double sum = std::accumulate(latencies_ns.begin(), latencies_ns.end(), 0.0L);
  return static_cast<double>(sum / latencies_ns.size() / 1e3L);
}

double window::stddev_latency_us() const {
  if (latencies_ns.size() < 2) return 0;
  const double mean = avg_latency_us();
  long double acc = 0;
  for (auto ns : latencies_ns) {
    const long double d = ns / 1e3L - mean;
    acc += d * d;
  }
  return static_cast<double>(std::sqrt(acc / (latencies_ns.size() - 1)));
}

double window::percentile_us(int p) const {
  if (latencies_ns.empty()) return 0;
  // The smallest latency with at least p percent of the requests at or below it.
  const auto n = latencies_ns.size();
  auto rank = static_cast<std::size_t>(std::ceil(p / 100.0 * static_cast<double>(n)));
  rank = std::clamp<std::size_t>(rank, 1, n);
  return static_cast<double>(latencies_ns[rank - 1]) / 1e3;
}

window window::merge(const std::vector<window>& ws) {
  window m;
  for (const auto& w : ws) {
    m.duration += w.duration;
    m.latencies_ns.insert(m.latencies_ns.end(), w.latencies_ns.begin(), w.latencies_ns.end());
    m.failures += w.failures;
    if (m.first_error.empty()) m.first_error = w.first_error;
    m.server += w.server;
    m.batch_size = w.batch_size;
  }
  std::sort(m.latencies_ns.begin(), m.latencies_ns.end());
  return m;
}

bool stable(const std::vector<window>& ws, double percentage, int percentile) {
  if (ws.size() < 3) return false;
  const auto last = ws.end() - 3;
  auto within = [&](auto value_of) {
    double sum = 0;
    for (auto it = last; it != ws.end(); ++it) sum += value_of(*it);
    const double avg = sum / 3;
    if (!(avg > 0)) return false;
    for (auto it = last; it != ws.end(); ++it)
      if (std::abs(value_of(*it) - avg) > avg * percentage / 100) return false;
    return true;
  };
  for (auto it = last; it != ws.end(); ++it)
    if (it->requests() == 0) return false;
  return within([](const window& w) { return w.throughput(); }) &&
         within([&](const window& w) { return w.stability_latency_us(percentile); });
}

namespace {

std::string level_name(const options& o) { return o.request_rate ? "Request Rate" : "Concurrency"; }

long us(double v) { return std::lround(v); }

}  // namespace

void print_settings(std::ostream& out, const options& o) {
  out << "*** Measurement Settings ***\n"
      << "  Batch size: " << o.batch_size << "\n"
      << "  Service Kind: Triton (" << (o.proto == protocol::grpc ? "gRPC" : "HTTP") << " at " << o.url << ")\n"
      << "  Using \"time_windows\" mode for stabilization\n"
      << "  Measurement window: " << o.measurement_interval_ms << " msec\n";
  if (o.request_rate)
    out << "  Using " << (o.request_distribution == distribution::poisson ? "poisson" : "uniform")
        << " distribution on request generation\n";
  out << "  Using " << (o.streaming ? "streaming" : o.async ? "asynchronous" : "synchronous") << " calls for inference\n";
  if (o.shm != shared_memory::none)
    out << "  Using " << (o.shm == shared_memory::cuda ? "CUDA" : "system") << " shared memory for inputs and outputs\n";
  if (o.percentile)
    out << "  Stabilizing using p" << o.percentile << " latency\n";
  else
    out << "  Stabilizing using average latency\n";
  out << "\n";
}

void print_level(std::ostream& out, const options& o, const result& r) {
  const auto& w = r.w;
  out << std::fixed << std::setprecision(2);
  if (o.request_rate)
    out << "Request Rate: " << r.level << " inference requests per seconds\n";
  else
    out << "Request concurrency: " << static_cast<long>(r.level) << "\n";
  if (!r.stable)
    out << "  Failed to obtain stable measurement within " << o.max_trials << " measurement windows for "
        << level_name(o) << " " << r.level << ". Please try to increase the --measurement-interval.\n"
        << "  (reporting the last three windows)\n";
  out << "  Client: \n"
      << "    Request count: " << w.requests() << "\n"
      << "    Throughput: " << w.throughput() << " infer/sec\n";
  if (w.failures) out << "    Failed requests: " << w.failures << " (first: " << w.first_error << ")\n";
  out << "    Avg latency: " << us(w.avg_latency_us()) << " usec (standard deviation " << us(w.stddev_latency_us())
      << " usec)\n";
  for (int p : {50, 90, 95, 99}) out << "    p" << p << " latency: " << us(w.percentile_us(p)) << " usec\n";
  if (o.percentile && o.percentile != 50 && o.percentile != 90 && o.percentile != 95 && o.percentile != 99)
    out << "    p" << o.percentile << " latency: " << us(w.percentile_us(o.percentile)) << " usec\n";
  const double avg = w.avg_latency_us(), codec = r.client_send_us + r.client_recv_us;
  out << "    Avg " << (o.proto == protocol::grpc ? "gRPC" : "HTTP") << " time: " << us(avg) << " usec ("
      << (o.proto == protocol::grpc ? "(un)marshal request/response " : "send/recv ") << us(codec)
      << " usec + response wait " << us(std::max(0.0, avg - codec)) << " usec)\n";
  const auto& s = w.server;
  const double request = s.avg_us(s.request_ns), queue = s.avg_us(s.queue_ns), cin = s.avg_us(s.compute_input_ns),
               cinf = s.avg_us(s.compute_infer_ns), cout = s.avg_us(s.compute_output_ns);
  out << "  Server: \n"
      << "    Inference count: " << s.inference_count << "\n"
      << "    Execution count: " << s.execution_count << "\n"
      << "    Successful request count: " << s.success_count << "\n"
      << "    Avg request latency: " << us(request) << " usec (overhead "
      << us(std::max(0.0, request - queue - cin - cinf - cout)) << " usec + queue " << us(queue)
      << " usec + compute input " << us(cin) << " usec + compute infer " << us(cinf) << " usec + compute output "
      << us(cout) << " usec)\n\n";
}

void print_summary(std::ostream& out, const options& o, const std::vector<result>& results) {
  out << "Inferences/Second vs. Client Average Batch Latency\n" << std::fixed << std::setprecision(2);
  for (const auto& r : results) {
    out << level_name(o) << ": ";
    if (o.request_rate)
      out << r.level;
    else
      out << static_cast<long>(r.level);
    out << ", throughput: " << r.w.throughput() << " infer/sec, latency " << us(r.w.avg_latency_us()) << " usec\n";
  }
}

void write_csv(std::ostream& out, const options& o, const std::vector<result>& results) {
  out << level_name(o)
      << ",Inferences/Second,Client Send,Network+Server Send/Recv,Server Queue,Server Compute Input,"
         "Server Compute Infer,Server Compute Output,Client Recv,p50 latency,p90 latency,p95 latency,p99 latency\n";
  for (const auto& r : results) {
    const auto& w = r.w;
    const auto& s = w.server;
    const double queue = s.avg_us(s.queue_ns), cin = s.avg_us(s.compute_input_ns), cinf = s.avg_us(s.compute_infer_ns),
                 cout = s.avg_us(s.compute_output_ns);
    const double network =
        std::max(0.0, w.avg_latency_us() - r.client_send_us - r.client_recv_us - queue - cin - cinf - cout);
    if (o.request_rate)
      out << r.level;
    else
      out << static_cast<long>(r.level);
    out << std::fixed << std::setprecision(2) << "," << w.throughput() << "," << us(r.client_send_us) << "," << us(network)
        << "," << us(queue) << "," << us(cin) << "," << us(cinf) << "," << us(cout) << "," << us(r.client_recv_us);
    for (int p : {50, 90, 95, 99}) out << "," << us(w.percentile_us(p));
    out << "\n";
  }
}

}  // namespace inferwire::perf
