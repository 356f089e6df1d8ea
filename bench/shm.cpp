// SPDX-License-Identifier: Apache-2.0
// bench_shm: inference through shared memory against the cost of the data movement itself.
//
// (a) System shared memory: a 64 MiB FP32 `identity_fp32` round trip (input region in, output
//     region out, over HTTP) against one memcpy of 64 MiB in the same run.
//     Target: shm time <= 1.5 x memcpy time + 100 us.
// (b) On a GPU: `simple_gpu` (add and sub, a KIND_GPU instance) on 64M-element INT32 tensors in
//     CUDA regions, against the bare kernel on the same device buffers in the same run, and the
//     server's host-copy counter before and after. Target: <= 1.2 x kernel time + 200 us, zero
//     host copies. Then the fixed cost of a GPU request: the same request on 16 elements
//     against a 16-element HTTP request (binary data) on the CPU model `simple`, in alternating
//     blocks. Target: <= 1.3x.
// (c) On a GPU: the same 64M-element request with its inputs and outputs in a CUDA region
//     registered from VMM chunks (docs/shared-memory.md, "CUDA VMM regions") against the legacy
//     IPC regions of (b), in alternating blocks. Target: ratio <= 1.05, zero host copies.
//
//   bench_shm [--rounds N] [--server PATH]
#include <inferwire/http/client.hpp>
#include <inferwire/shm/system_region.hpp>
#if INFERWIRE_BENCH_CUDA
#include <inferwire/shm/cuda_region.hpp>
#include <inferwire/shm/cuda_vmm_region.hpp>

#include "kernels.hpp"
#endif

#include "bench_process.hpp"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <regex>
#include <string>
#include <thread>
#include <vector>

#include <unistd.h>

// Every benchmark's code is one translation unit (CMakeLists.txt): its names stay in its own
// namespace, and bench_shm's main() calls run().
namespace bench_shm {

using namespace bench;
namespace http = inferwire::http;
namespace v2 = inferwire::v2;
namespace shm = inferwire::shm;
using clock_type = std::chrono::steady_clock;

namespace {

template <class F>
double time_us(F&& f) {
  auto t0 = clock_type::now();
  f();
  return std::chrono::duration<double, std::micro>(clock_type::now() - t0).count();
}

int system_shm(const std::string& server, int rounds) {
  constexpr std::size_t bytes = std::size_t{64} << 20;
  pid_t pid = 0;
  const std::string log = "/tmp/bench_shm_server_" + std::to_string(::getpid()) + ".log";
  int port = start_reference_server(server, log, pid, {"--allow-client-shm=true"});
  if (!port) {
    std::fprintf(stderr, "server did not start:\n%s\n", read_file(log).c_str());
    return 1;
  }
  http::client c("127.0.0.1", std::to_string(port));
  const std::string tag = std::to_string(::getpid());
  auto in = shm::system_region::create("/bench_shm_in_" + tag, bytes);
  auto out = shm::system_region::create("/bench_shm_out_" + tag, bytes);
  auto x = in.as<float>(0, bytes / 4);
  for (std::size_t i = 0; i < x.size(); ++i) x[i] = static_cast<float>(i % 1000) * 0.25f;
  std::memset(out.data(), 0, bytes);  // touch every page before timing
  c.register_system_shared_memory(in.register_request("in"));
  c.register_system_shared_memory(out.register_request("out"));
  v2::infer_request q;
  q.inputs.push_back(v2::make_shm_input("INPUT0", inferwire::data_type::fp32,
                                        {static_cast<std::int64_t>(bytes / 4)}, {"in", 0, bytes}));
  q.outputs.push_back(v2::make_shm_output("OUTPUT0", {"out", 0, bytes}));
  c.infer("identity_fp32", q);  // warm up
  int errors = std::memcmp(in.data(), out.data(), bytes) != 0;

  std::vector<char> dst(bytes, 1);
  std::vector<double> t_shm, t_memcpy;
  for (int r = 0; r < rounds; ++r) {
    t_memcpy.push_back(time_us([&] { std::memcpy(dst.data(), in.data(), bytes); }));
    t_shm.push_back(time_us([&] { c.infer("identity_fp32", q); }));
  }
  errors += std::memcmp(dst.data(), out.data(), bytes) != 0;
  const double s = median(t_shm), m = median(t_memcpy);
  std::printf("(a) system shm, 64 MiB FP32 identity round trip (median of %d)\n", rounds);
  std::printf("    identity through shm : %9.1f us\n", s);
  std::printf("    memcpy of 64 MiB     : %9.1f us  (%.1f GB/s)\n", m, bytes / m / 1e3);
  std::printf("    ratio %.2fx memcpy; target <= 1.5 x memcpy + 100 us = %.1f us: %s; errors %d\n",
              s / m, 1.5 * m + 100, s <= 1.5 * m + 100 ? "met" : "NOT met", errors);
  c.unregister_system_shared_memory();
  stop(pid);
  return errors;
}

#if INFERWIRE_BENCH_CUDA
std::uint64_t host_copies(int metrics_port) {
  namespace net = boost::asio;
  net::io_context ioc;
  net::ip::tcp::socket sock(ioc);
  sock.connect({net::ip::make_address("127.0.0.1"), static_cast<unsigned short>(metrics_port)});
  std::string req = "GET /metrics HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n";
  net::write(sock, net::buffer(req));
  std::string text;
  boost::system::error_code ec;
  char buf[65536];
  for (;;) {
    std::size_t n = sock.read_some(net::buffer(buf), ec);
    text.append(buf, n);
    if (ec) break;
  }
  std::smatch m;
  if (!std::regex_search(text, m, std::regex("\ninferwire_gpu_host_copies ([0-9]+)"))) return ~0ull;
  return std::stoull(m[1]);
}

int gpu_shm(const std::string& server, int rounds) {
  if (!inferwire::cuda::available()) {
    std::printf("(b) CUDA shm: skipped, %s\n", inferwire::cuda::unavailable_reason().c_str());
    std::printf("(c) CUDA VMM region: skipped, %s\n", inferwire::cuda::unavailable_reason().c_str());
    return 0;
  }
  constexpr std::size_t count = std::size_t{64} << 20;  // 64M INT32 elements
  constexpr std::size_t bytes = count * 4;
  pid_t pid = 0;
  const std::string log = "/tmp/bench_shm_gpu_server_" + std::to_string(::getpid()) + ".log";
  const std::string vmm_socket = "/tmp/bench_shm_vmm_" + std::to_string(::getpid()) + ".sock";
  const int metrics = free_port();
  int port = start_reference_server(
      server, log, pid,
      {"--allow-client-shm=true", "--allow-metrics=true", "--metrics-port", std::to_string(metrics),
       "--cuda-vmm-socket", vmm_socket, "--model-repository", std::string(INFERWIRE_SOURCE_DIR) + "/tests/gpu/models"});
  if (!port) {
    std::fprintf(stderr, "server did not start:\n%s\n", read_file(log).c_str());
    return 1;
  }
  http::client c("127.0.0.1", std::to_string(port));
  auto in = shm::cuda_region::allocate(2 * bytes);
  auto out = shm::cuda_region::allocate(2 * bytes);
  std::vector<std::int32_t> a(count), b(count);
  for (std::size_t i = 0; i < count; ++i) {
    a[i] = static_cast<std::int32_t>(i);
    b[i] = static_cast<std::int32_t>(i % 7);
  }
  in.copy_from_host(0, std::as_bytes(std::span(a)));
  in.copy_from_host(bytes, std::as_bytes(std::span(b)));
  c.register_cuda_shared_memory(in.register_request("gin"));
  c.register_cuda_shared_memory(out.register_request("gout"));
  v2::infer_request q;
  const std::int64_t n = static_cast<std::int64_t>(count);
  q.inputs.push_back(v2::make_shm_input("INPUT0", inferwire::data_type::int32, {n}, {"gin", 0, bytes}));
  q.inputs.push_back(v2::make_shm_input("INPUT1", inferwire::data_type::int32, {n}, {"gin", bytes, bytes}));
  q.outputs.push_back(v2::make_shm_output("OUTPUT0", {"gout", 0, bytes}));
  q.outputs.push_back(v2::make_shm_output("OUTPUT1", {"gout", bytes, bytes}));
  c.infer("simple_gpu", q);  // warm up (module load, first launch)

  auto* base_in = static_cast<std::byte*>(in.data());
  auto* base_out = static_cast<std::byte*>(out.data());
  // The model's kernel on `elements` of the same buffers, launched from here and waited for.
  auto bare_kernel = [&](std::size_t elements) {
    inferwire::cuda::check(inferwire::server::kernels::add_sub(
                               inferwire::server::kernels::element::i32, base_in, base_in + bytes,
                               base_out, base_out + bytes, elements, cudaStreamPerThread),
                           "kernel");
    inferwire::cuda::check(cudaStreamSynchronize(cudaStreamPerThread), "sync");
  };
  auto bare = [&] { bare_kernel(count); };
  bare();
  const std::uint64_t copies_before = host_copies(metrics);
  const auto stats_before = c.model_statistics("simple_gpu").model_stats.at(0).inference_stats;
  // Blocks of kernels and blocks of requests, alternating: one process at a time uses the GPU
  // within a block, as a serving process would.
  std::vector<double> t_server, t_kernel;
  for (int block = 0; block < 3; ++block) {
    for (int r = 0; r < rounds; ++r) t_kernel.push_back(time_us(bare));
    for (int r = 0; r < rounds; ++r) t_server.push_back(time_us([&] { c.infer("simple_gpu", q); }));
  }
  const std::uint64_t copies = host_copies(metrics) - copies_before;
  const auto stats_after = c.model_statistics("simple_gpu").model_stats.at(0).inference_stats;
  // The same request with 16 elements: the fixed cost of a request through CUDA regions.
  v2::infer_request small = q;
  for (auto& t : small.inputs) {
    t.shape = {16};
    t.shm->byte_size = 64;
  }
  for (auto& o : small.outputs) o.shm->byte_size = 64;
  // Against: an HTTP request of the same size on the CPU `simple` model (binary tensor data),
  // in alternating blocks.
  std::vector<std::int32_t> x16(16, 3), y16(16, 1);
  v2::infer_request cpu;
  cpu.inputs.push_back(v2::make_input("INPUT0", std::span<const std::int32_t>(x16), {1, 16}));
  cpu.inputs.push_back(v2::make_input("INPUT1", std::span<const std::int32_t>(y16), {1, 16}));
  c.infer("simple", cpu);  // warm up
  c.infer("simple_gpu", small);
  auto bare_small = [&] { bare_kernel(16); };
  // The same 16 elements sent as binary data to the GPU model: staged through device scratch
  // (two copies in, the kernel, two copies out, one wait).
  v2::infer_request staged;
  staged.inputs.push_back(v2::make_input("INPUT0", std::span<const std::int32_t>(x16), {16}));
  staged.inputs.push_back(v2::make_input("INPUT1", std::span<const std::int32_t>(y16), {16}));
  c.infer("simple_gpu", staged);
  const auto small_before = c.model_statistics("simple_gpu").model_stats.at(0).inference_stats;
  std::vector<double> t_small, t_cpu, t_bare_small, t_bare_idle;
  for (int block = 0; block < 3; ++block) {
    for (int r = 0; r < rounds; ++r) t_small.push_back(time_us([&] { c.infer("simple_gpu", small); }));
    for (int r = 0; r < rounds; ++r) t_cpu.push_back(time_us([&] { c.infer("simple", cpu); }));
    for (int r = 0; r < rounds; ++r) t_bare_small.push_back(time_us(bare_small));
    for (int r = 0; r < rounds; ++r) {  // as the server sees it: the GPU idle between requests
      std::this_thread::sleep_for(std::chrono::microseconds(30));
      t_bare_idle.push_back(time_us(bare_small));
    }
  }
  const auto small_after = c.model_statistics("simple_gpu").model_stats.at(0).inference_stats;
  std::vector<double> t_staged;
  for (int r = 0; r < 3 * rounds; ++r) t_staged.push_back(time_us([&] { c.infer("simple_gpu", staged); }));
  // Checks the last 1024 sums and differences the model wrote at `sum_out` and `diff_out`.
  auto wrong_results = [&](const std::byte* sum_out, const std::byte* diff_out) {
    std::vector<std::int32_t> sum(1024), diff(1024);
    inferwire::cuda::check(cudaMemcpy(sum.data(), sum_out + bytes - 4096, 4096, cudaMemcpyDeviceToHost), "read");
    inferwire::cuda::check(cudaMemcpy(diff.data(), diff_out + bytes - 4096, 4096, cudaMemcpyDeviceToHost), "read");
    int wrong = 0;
    for (std::size_t i = 0; i < 1024; ++i) {
      const std::size_t e = count - 1024 + i;
      wrong += (sum[i] != a[e] + b[e]) + (diff[i] != a[e] - b[e]);
    }
    return wrong;
  };
  const int errors = wrong_results(base_out, base_out + bytes);
  const double s = median(t_server), k = median(t_kernel);
  cudaDeviceProp p{};
  cudaGetDeviceProperties(&p, 0);
  std::printf("(b) CUDA shm, simple_gpu add/sub on 64M INT32 elements, %s (median of 3 x %d)\n", p.name, rounds);
  std::printf("    request through CUDA regions: %9.1f us\n", s);
  std::printf("    bare kernel, same buffers   : %9.1f us  (%.0f GB/s moved)\n", k, 4.0 * bytes / k / 1e3);
  std::printf("    ratio %.2fx kernel; target <= 1.2 x kernel + 200 us = %.1f us: %s\n", s / k,
              1.2 * k + 200, s <= 1.2 * k + 200 ? "met" : "NOT met");
  // The server's own split of the requests between two readings of its statistics.
  auto split = [](const auto& x, const auto& y) {
    auto per = [](const v2::statistic_duration& from, const v2::statistic_duration& to) {
      return to.count > from.count ? double(to.ns - from.ns) / double(to.count - from.count) / 1e3 : 0.0;
    };
    char text[160];
    std::snprintf(text, sizeof text, "queue %.1f us, input %.1f us, infer %.1f us, output %.1f us, whole request %.1f us",
                  per(x.queue, y.queue), per(x.compute_input, y.compute_input), per(x.compute_infer, y.compute_infer),
                  per(x.compute_output, y.compute_output), per(x.success, y.success));
    return std::string(text);
  };
  std::printf("    inside the server per request: %s\n", split(stats_before, stats_after).c_str());
  const double fixed = median(t_small), cpu_16 = median(t_cpu);
  std::printf("    the same request on 16 elements: %.1f us (the fixed cost of a request)\n", fixed);
  std::printf("    16-element HTTP request on the CPU model 'simple': %.1f us; ratio %.2fx (target <= 1.3: %s)\n",
              cpu_16, fixed / cpu_16, fixed <= 1.3 * cpu_16 ? "met" : "NOT met");
  std::printf("    of which inside the server: %s; bare 16-element kernel + sync %.1f us\n",
              split(small_before, small_after).c_str(), median(t_bare_small));
  std::printf("    bare 16-element kernel + sync after 30 us idle: %.1f us\n", median(t_bare_idle));
  std::printf("    16 elements as binary data to the GPU model (staged: 2 copies in, kernel, 2 out): %.1f us,"
              " %.2fx the CPU model\n", median(t_staged), median(t_staged) / cpu_16);
  std::printf("    host copies during %d requests: %llu (target 0); errors %d\n", 3 * rounds,
              static_cast<unsigned long long>(copies), errors);
  // (c) The same request from a VMM region: the inputs and outputs in four chunks of one
  // cuMemCreate range, registered through the server's socket, against the IPC regions above.
  auto vmm = shm::cuda_vmm_memory::allocate(bytes, 4);
  auto* vbase = static_cast<std::byte*>(vmm.data());
  inferwire::cuda::check(cudaMemcpy(vbase, in.data(), 2 * bytes, cudaMemcpyDeviceToDevice), "copy inputs");
  auto registration = shm::register_cuda_vmm(c, "vmm", vbase, 4 * bytes, vmm_socket);
  v2::infer_request qv;
  qv.inputs.push_back(v2::make_shm_input("INPUT0", inferwire::data_type::int32, {n}, {"vmm", 0, bytes}));
  qv.inputs.push_back(v2::make_shm_input("INPUT1", inferwire::data_type::int32, {n}, {"vmm", bytes, bytes}));
  qv.outputs.push_back(v2::make_shm_output("OUTPUT0", {"vmm", 2 * bytes, bytes}));
  qv.outputs.push_back(v2::make_shm_output("OUTPUT1", {"vmm", 3 * bytes, bytes}));
  c.infer("simple_gpu", qv);  // warm up
  const std::uint64_t vmm_copies_before = host_copies(metrics);
  std::vector<double> t_vmm, t_ipc;
  for (int block = 0; block < 3; ++block) {
    for (int r = 0; r < rounds; ++r) t_ipc.push_back(time_us([&] { c.infer("simple_gpu", q); }));
    for (int r = 0; r < rounds; ++r) t_vmm.push_back(time_us([&] { c.infer("simple_gpu", qv); }));
  }
  const std::uint64_t vmm_copies = host_copies(metrics) - vmm_copies_before;
  const int vmm_errors = wrong_results(vbase + 2 * bytes, vbase + 3 * bytes);
  const double tv = median(t_vmm), ti = median(t_ipc);
  std::printf("(c) the same request from a CUDA VMM region (%zu chunks of %zu MiB, registered through the socket)\n",
              vmm.chunks(), vmm.chunk_size() >> 20);
  std::printf("    VMM region: %9.1f us; legacy IPC regions: %9.1f us; ratio %.3fx (target <= 1.05: %s)\n", tv, ti,
              tv / ti, tv <= 1.05 * ti ? "met" : "NOT met");
  std::printf("    host copies during %d requests: %llu (target 0); errors %d\n", 6 * rounds,
              static_cast<unsigned long long>(vmm_copies), vmm_errors);
  registration.release();
  c.unregister_cuda_shared_memory();
  stop(pid);
  return errors + (copies != 0) + vmm_errors + (vmm_copies != 0);
}
#endif

}  // namespace

int run(int argc, char** argv) {
  int rounds = 20;
  std::string server = INFERWIRE_SERVER_PATH;
  for (int i = 1; i + 1 < argc; i += 2) {
    std::string a = argv[i];
    if (a == "--rounds") rounds = std::stoi(argv[i + 1]);
    else if (a == "--server") server = argv[i + 1];
  }
  int bad = system_shm(server, rounds);
#if INFERWIRE_BENCH_CUDA
  bad += gpu_shm(server, rounds);
#else
  std::printf("(b) CUDA shm: skipped, built without CUDA\n(c) CUDA VMM region: skipped, built without CUDA\n");
#endif
  return bad ? 1 : 0;
}

}  // namespace bench_shm
