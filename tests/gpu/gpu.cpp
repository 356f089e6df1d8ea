// SPDX-License-Identifier: Apache-2.0
// GPU tests: CUDA shared-memory regions in the SDK, CUDA IPC across two processes, and the
// server's GPU path (CUDA regions in and out of kernels, staging for mixed placements, zero
// host copies on the direct path), checked against the CPU backend. Without a usable GPU the
// program prints why and exits 77, which ctest reports as skipped.
#include <catch2/catch.hpp>

#include <inferwire/http/client.hpp>
#include <inferwire/shm/cuda_region.hpp>
#include <inferwire/shm/cuda_vmm_region.hpp>
#include <inferwire/shm/system_region.hpp>
#ifdef INFERWIRE_GMS_SERVER_PATH
#include <inferwire/gms/cuda_vmm.hpp>
#include <inferwire/gms/cuda_vmm_region.hpp>
#include <inferwire/gms/memory_manager.hpp>
#endif

#include "../integration/harness.hpp"
#include "../unit/catch_run.hpp"

#include <boost/algorithm/hex.hpp>
#include <boost/json/parse.hpp>

#include <cstdio>
#include <chrono>
#include <cstring>
#include <future>
#include <thread>
#include <numeric>
#include <regex>

#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

extern char** environ;

using namespace iwtest;
namespace v2 = inferwire::v2;
namespace ih = inferwire::http;
namespace shm = inferwire::shm;
namespace cuda = inferwire::cuda;
#ifdef INFERWIRE_GMS_SERVER_PATH
namespace gms = inferwire::gms;
#endif
using inferwire::data_type;

namespace {

std::string self_path;

/// The peer process of the IPC test: opens the handle, adds 1000 to 16 INT32s, exits.
int ipc_peer(const char* handle_hex) {
  try {
    std::string handle = boost::algorithm::unhex(std::string(handle_hex));
    auto m = shm::cuda_ipc_mapping::open(std::as_bytes(std::span(handle)), 0);
    std::vector<std::int32_t> v(16);
    cuda::check(cudaMemcpy(v.data(), m.data(), 64, cudaMemcpyDeviceToHost), "peer read");
    for (auto& x : v) x += 1000;
    cuda::check(cudaMemcpy(m.data(), v.data(), 64, cudaMemcpyHostToDevice), "peer write");
    return 0;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "ipc peer: %s\n", e.what());
    return 1;
  }
}

server_process& gpu_server() {
  static server_process s({"--allow-client-shm=true", "--model-repository",
                           std::string(INFERWIRE_SOURCE_DIR) + "/tests/gpu/models"});
  return s;
}

ih::client client_of(const server_process& s) {
  return ih::client("127.0.0.1", std::to_string(s.http_port()));
}

std::uint64_t host_copies(const server_process& s) {
  auto r = request(s.metrics_port(), "GET", "/metrics");
  std::smatch m;
  REQUIRE(std::regex_search(r.body, m, std::regex("\ninferwire_gpu_host_copies ([0-9]+)")));
  return std::stoull(m[1]);
}

template <class T>
std::vector<T> read_device(const shm::cuda_region& r, std::size_t offset, std::size_t count) {
  std::vector<T> v(count);
  r.copy_to_host(offset, std::as_writable_bytes(std::span(v)));
  return v;
}

/// OUTPUT0/OUTPUT1 of the CPU `simple` model for two [1,16] INT32 inputs, as reference.
std::pair<std::vector<std::int32_t>, std::vector<std::int32_t>> cpu_simple(
    ih::client& c, const std::vector<std::int32_t>& a, const std::vector<std::int32_t>& b) {
  v2::infer_request q;
  q.inputs.push_back(v2::make_input("INPUT0", a, {1, 16}));
  q.inputs.push_back(v2::make_input("INPUT1", b, {1, 16}));
  auto r = c.infer("simple", q);
  auto s = r.as<std::int32_t>("OUTPUT0");
  auto d = r.as<std::int32_t>("OUTPUT1");
  return {{s.begin(), s.end()}, {d.begin(), d.end()}};
}

}  // namespace

int main(int argc, char** argv) {
  if (argc == 3 && std::string(argv[1]) == "--ipc-peer") return ipc_peer(argv[2]);
  if (!cuda::available()) {
    std::printf("GPU tests skipped: %s\n", cuda::unavailable_reason().c_str());
    return 77;
  }
  self_path = argv[0];
  cudaDeviceProp p{};
  cudaGetDeviceProperties(&p, 0);
  std::printf("GPU tests on %s (%d device(s))\n", p.name, cuda::device_count());
  return inferwire::test::run_catch(argc, argv);
}

TEST_CASE("gpu: cuda_region allocates, copies and exports", "[gpu]") {
  auto r = shm::cuda_region::allocate(1 << 20);
  CHECK(r.size() == (1u << 20));
  CHECK(r.device() == 0);
  CHECK(cuda::device_of(r.data()) == 0);
  std::vector<std::int32_t> v(256);
  std::iota(v.begin(), v.end(), -7);
  r.copy_from_host(4096, std::as_bytes(std::span(v)));
  CHECK(read_device<std::int32_t>(r, 4096, 256) == v);
  CHECK(r.ipc_handle().size() == 64);
  auto q = r.register_request("x");
  CHECK(q.raw_handle.size() == 64);
  CHECK(q.byte_size == r.size());
  CHECK_THROWS_AS(r.copy_from_host(r.size() - 2, std::as_bytes(std::span(v))), std::out_of_range);
  auto adopted = shm::cuda_region::adopt(r.data(), r.size());
  CHECK(adopted.device() == 0);
  int host = 0;
  CHECK_THROWS_AS(shm::cuda_region::adopt(&host, 4), std::invalid_argument);
  std::string bad(64, '\0');
  CHECK_THROWS_AS(shm::cuda_ipc_mapping::open(std::as_bytes(std::span(bad)), 0), cuda::error);
  CHECK_THROWS_AS(shm::cuda_ipc_mapping::open(std::as_bytes(std::span(bad)), 99), cuda::error);
}

TEST_CASE("gpu: CUDA IPC across two processes", "[gpu]") {
  auto r = shm::cuda_region::allocate(64);
  std::vector<std::int32_t> v(16);
  std::iota(v.begin(), v.end(), 0);
  r.copy_from_host(0, std::as_bytes(std::span(v)));
  std::string h = boost::algorithm::hex(r.ipc_handle());
  std::vector<char*> args{self_path.data(), const_cast<char*>("--ipc-peer"), h.data(), nullptr};
  pid_t pid = 0;
  REQUIRE(posix_spawn(&pid, self_path.c_str(), nullptr, nullptr, args.data(), environ) == 0);
  int status = 0;
  waitpid(pid, &status, 0);
  REQUIRE(WIFEXITED(status));
  CHECK(WEXITSTATUS(status) == 0);
  auto after = read_device<std::int32_t>(r, 0, 16);
  CHECK(after[0] == 1000);
  CHECK(after[15] == 1015);
}

TEST_CASE("gpu: CUDA region registration, status and errors", "[gpu]") {
  auto& s = gpu_server();
  auto c = client_of(s);
  c.unregister_cuda_shared_memory();
  auto r = shm::cuda_region::allocate(4096);
  c.register_cuda_shared_memory(r.register_request("cuda_a"));
  auto st = c.cuda_shared_memory_status();
  REQUIRE(st.size() == 1);
  CHECK(st[0] == v2::cuda_shm_status{"cuda_a", 0, 4096});
  ih::error_code ec;
  c.register_cuda_shared_memory(r.register_request("cuda_a"), ec);
  CHECK(ec.message() == "shared memory region 'cuda_a' already in manager");
  auto big = r.register_request("cuda_big");
  big.byte_size = 8192;
  c.register_cuda_shared_memory(big, ec);
  CHECK(ih::server_status(ec) == 400);
  CHECK(ec.message() == "failed to register shared memory region 'cuda_big': invalid args");
  c.register_cuda_shared_memory(v2::cuda_shm_register_request{"cuda_bad", std::string(64, 'x'), 0, 64}, ec);
  CHECK(ih::server_status(ec) == 400);
  CHECK(ec.message() == "failed to register shared memory region: invalid args");
  c.system_shared_memory_status("cuda_a", ec);
  CHECK(ih::server_status(ec) == 404);
  CHECK(ec.message() == "The region named 'cuda_a' is registered as CUDA shared memory, not system shared memory");
  c.unregister_system_shared_memory("cuda_a");  // the other kind: a no-op
  CHECK(c.cuda_shared_memory_status().size() == 1);
  c.unregister_cuda_shared_memory("cuda_a");
  CHECK(c.cuda_shared_memory_status().empty());
}

TEST_CASE("gpu: simple on the GPU reads and writes CUDA regions directly", "[gpu]") {
  auto& s = gpu_server();
  auto c = client_of(s);
  c.unregister_cuda_shared_memory();
  std::vector<std::int32_t> a(16), b(16);
  for (int i = 0; i < 16; ++i) {
    a[i] = i * 1000003;
    b[i] = 2147483647 - i;  // sums wrap
  }
  auto [want_sum, want_diff] = cpu_simple(c, a, b);

  auto in = shm::cuda_region::allocate(128);
  auto out = shm::cuda_region::allocate(128);
  in.copy_from_host(0, std::as_bytes(std::span(a)));
  in.copy_from_host(64, std::as_bytes(std::span(b)));
  c.register_cuda_shared_memory(in.register_request("gin"));
  c.register_cuda_shared_memory(out.register_request("gout"));
  v2::infer_request q;
  q.inputs.push_back(v2::make_shm_input("INPUT0", data_type::int32, {16}, {"gin", 0, 64}));
  q.inputs.push_back(v2::make_shm_input("INPUT1", data_type::int32, {16}, {"gin", 64, 64}));
  q.outputs.push_back(v2::make_shm_output("OUTPUT0", {"gout", 0, 64}));
  q.outputs.push_back(v2::make_shm_output("OUTPUT1", {"gout", 64, 64}));

  const auto copies_before = host_copies(s);
  auto result = c.infer("simple_gpu", q);
  CHECK(host_copies(s) == copies_before);  // zero host copies
  REQUIRE(result.outputs().size() == 2);
  CHECK(result.outputs()[0].data.empty());
  CHECK(read_device<std::int32_t>(out, 0, 16) == want_sum);
  CHECK(read_device<std::int32_t>(out, 64, 16) == want_diff);

  SECTION("a CPU instance with CUDA regions stages through host memory") {
    std::vector<std::int32_t> zero(32, 0);
    out.copy_from_host(0, std::as_bytes(std::span(zero)));
    v2::infer_request qc = q;
    for (auto& i : qc.inputs) i.shape = {1, 16};
    c.infer("simple", qc);
    CHECK(host_copies(s) > copies_before);
    CHECK(read_device<std::int32_t>(out, 0, 16) == want_sum);
    CHECK(read_device<std::int32_t>(out, 64, 16) == want_diff);
  }
  SECTION("a GPU instance with ordinary binary tensors stages to and from the GPU") {
    v2::infer_request qb;
    qb.inputs.push_back(v2::make_input("INPUT0", a, {16}));
    qb.inputs.push_back(v2::make_input("INPUT1", b, {16}));
    auto rb = c.infer("simple_gpu", qb);
    auto sum = rb.as<std::int32_t>("OUTPUT0");
    CHECK(std::vector<std::int32_t>(sum.begin(), sum.end()) == want_sum);
    auto diff = rb.as<std::int32_t>("OUTPUT1");
    CHECK(std::vector<std::int32_t>(diff.begin(), diff.end()) == want_diff);
  }
  SECTION("device inputs, host outputs") {
    v2::infer_request qh;
    qh.inputs = q.inputs;
    auto rh = c.infer("simple_gpu", qh);
    auto sum = rh.as<std::int32_t>("OUTPUT0");
    CHECK(std::vector<std::int32_t>(sum.begin(), sum.end()) == want_sum);
  }
  SECTION("an output region too small") {
    v2::infer_request qs = q;
    qs.outputs[1].shm->byte_size = 32;
    ih::error_code ec;
    c.infer("simple_gpu", qs, ec);
    CHECK(ih::server_status(ec) == 500);
    CHECK(ec.message() == "shared memory size specified with the request for output 'OUTPUT1' "
                          "(32 bytes) should be at least 64 bytes to hold the results");
  }
  c.unregister_cuda_shared_memory();
  ih::error_code ec;
  c.infer("simple_gpu", q, ec);
  CHECK(ih::server_status(ec) == 404);
  CHECK(ec.message() == "Unable to find shared memory region: 'gin'");
}

TEST_CASE("gpu: the reply to a GPU request comes after its kernel finished", "[gpu]") {
  // 64M elements keep the kernel busy for hundreds of microseconds, far longer than a reply
  // takes: a server that answered before its wait would leave the ends of the outputs unwritten
  // when the client reads them.
  auto& s = gpu_server();
  auto c = client_of(s);
  c.unregister_cuda_shared_memory();
  const std::size_t count = std::size_t{64} << 20, bytes = count * 4, tail = 1024;
  auto in = shm::cuda_region::allocate(2 * bytes);
  auto out = shm::cuda_region::allocate(2 * bytes);
  cuda::check(cudaMemset(in.data(), 0x01, bytes), "memset INPUT0");  // each element 0x01010101
  cuda::check(cudaMemset(static_cast<std::byte*>(in.data()) + bytes, 0, bytes), "memset INPUT1");
  c.register_cuda_shared_memory(in.register_request("big_in"));
  c.register_cuda_shared_memory(out.register_request("big_out"));
  const auto n = static_cast<std::int64_t>(count), size = static_cast<std::int64_t>(bytes);
  v2::infer_request q;
  q.inputs.push_back(v2::make_shm_input("INPUT0", data_type::int32, {n}, {"big_in", 0, size}));
  q.inputs.push_back(v2::make_shm_input("INPUT1", data_type::int32, {n}, {"big_in", size, size}));
  q.outputs.push_back(v2::make_shm_output("OUTPUT0", {"big_out", 0, size}));
  q.outputs.push_back(v2::make_shm_output("OUTPUT1", {"big_out", size, size}));
  const std::vector<std::int32_t> want(tail, 0x01010101);
  for (int round = 0; round < 5; ++round) {
    cuda::check(cudaMemset(out.data(), 0xff, 2 * bytes), "memset outputs");
    cuda::check(cudaDeviceSynchronize(), "sync");
    c.infer("simple_gpu", q);
    CHECK(read_device<std::int32_t>(out, bytes - 4 * tail, tail) == want);
    CHECK(read_device<std::int32_t>(out, 2 * bytes - 4 * tail, tail) == want);
  }
  c.unregister_cuda_shared_memory();
}

TEST_CASE("gpu: a dynamic batch runs as one execution from CUDA regions and request bodies", "[gpu][batching]") {
  // simple_gpu_batched: up to 8 rows per execution, 200 ms of batching delay. Eight requests at
  // once, half with inputs in one CUDA region (a slice each), half with ordinary tensors.
  auto& s = gpu_server();
  auto c = client_of(s);
  constexpr int n = 8;
  auto in = shm::cuda_region::allocate(n * 128);
  std::vector<std::vector<std::int32_t>> a(n, std::vector<std::int32_t>(16)), b(n, std::vector<std::int32_t>(16));
  for (int k = 0; k < n; ++k)
    for (int i = 0; i < 16; ++i) {
      a[k][i] = k * 1000 + i;
      b[k][i] = k + 1;
    }
  for (int k = 0; k < n; ++k) {
    in.copy_from_host(static_cast<std::size_t>(k) * 128, std::as_bytes(std::span(a[k])));
    in.copy_from_host(static_cast<std::size_t>(k) * 128 + 64, std::as_bytes(std::span(b[k])));
  }
  c.register_cuda_shared_memory(in.register_request("gbatch"));
  std::vector<std::future<bool>> calls;
  for (int k = 0; k < n; ++k)
    calls.push_back(std::async(std::launch::async, [&, k] {
      auto ck = client_of(s);
      v2::infer_request q;
      if (k % 2 == 0) {
        const std::uint64_t at = static_cast<std::uint64_t>(k) * 128;
        q.inputs.push_back(v2::make_shm_input("INPUT0", data_type::int32, {1, 16}, {"gbatch", at, 64}));
        q.inputs.push_back(v2::make_shm_input("INPUT1", data_type::int32, {1, 16}, {"gbatch", at + 64, 64}));
      } else {
        q.inputs.push_back(v2::make_input("INPUT0", a[k], {1, 16}));
        q.inputs.push_back(v2::make_input("INPUT1", b[k], {1, 16}));
      }
      auto r = ck.infer("simple_gpu_batched", q);
      auto sum = r.as<std::int32_t>("OUTPUT0");
      auto diff = r.as<std::int32_t>("OUTPUT1");
      bool right = sum.size() == 16 && diff.size() == 16;
      for (std::size_t i = 0; right && i < 16; ++i)
        right = sum[i] == a[k][i] + b[k][i] && diff[i] == a[k][i] - b[k][i];
      return right;
    }));
  for (auto& f : calls) CHECK(f.get());
  const auto stats = boost::json::parse(request(s.http_port(), "GET", "/v2/models/simple_gpu_batched/stats").body);
  const auto& m = stats.at("model_stats").at(0);
  CHECK(m.at("inference_count").to_number<std::uint64_t>() == n);
  CHECK(m.at("execution_count").to_number<std::uint64_t>() < n);
  c.unregister_cuda_shared_memory();
}

TEST_CASE("gpu: identity on the GPU between system and CUDA regions", "[gpu]") {
  auto& s = gpu_server();
  auto c = client_of(s);
  c.unregister_cuda_shared_memory();
  c.unregister_system_shared_memory();
  std::vector<float> x(1024);
  for (std::size_t i = 0; i < x.size(); ++i) x[i] = static_cast<float>(i) * 0.5f - 3.f;
  const std::size_t bytes = x.size() * sizeof(float);
  auto din = shm::cuda_region::allocate(bytes);
  auto dout = shm::cuda_region::allocate(bytes);
  din.copy_from_host(0, std::as_bytes(std::span(x)));
  auto host = shm::system_region::create("/iwgpu_" + std::to_string(::getpid()), bytes);
  host.write(0, std::as_bytes(std::span(x)));
  c.register_cuda_shared_memory(din.register_request("din"));
  c.register_cuda_shared_memory(dout.register_request("dout"));
  c.register_system_shared_memory(host.register_request("hin"));
  auto make = [&](std::string in_region, std::optional<std::string> out_region) {
    v2::infer_request q;
    q.inputs.push_back(v2::make_shm_input("INPUT0", data_type::fp32,
                                          {static_cast<std::int64_t>(x.size())}, {in_region, 0, bytes}));
    if (out_region) q.outputs.push_back(v2::make_shm_output("OUTPUT0", {*out_region, 0, bytes}));
    return q;
  };
  const auto before = host_copies(s);
  c.infer("identity_gpu", make("din", "dout"));  // device to device
  CHECK(host_copies(s) == before);
  CHECK(read_device<float>(dout, 0, x.size()) == x);

  std::vector<float> zero(x.size(), 0.f);
  dout.copy_from_host(0, std::as_bytes(std::span(zero)));
  c.infer("identity_gpu", make("hin", "dout"));  // host region to device region
  CHECK(read_device<float>(dout, 0, x.size()) == x);

  auto r = c.infer("identity_gpu", make("din", std::nullopt));  // device region to the reply
  auto y = r.as<float>("OUTPUT0");
  CHECK(std::vector<float>(y.begin(), y.end()) == x);
  c.unregister_cuda_shared_memory();
  c.unregister_system_shared_memory();
}

TEST_CASE("gpu: NVML's GPU metrics on /metrics", "[gpu][metrics]") {
  // The driver that runs these tests ships libnvidia-ml.so.1: every GPU has its families.
  const auto& s = gpu_server();
  const std::string text = request(s.metrics_port(), "GET", "/metrics").body;
  CHECK(s.log().find("no GPU metrics") == std::string::npos);
  for (const char* family : {"nv_gpu_utilization{gpu_uuid=\"GPU-", "nv_gpu_memory_total_bytes{gpu_uuid=\"GPU-",
                             "nv_gpu_memory_used_bytes{gpu_uuid=\"GPU-", "nv_gpu_power_usage{gpu_uuid=\"GPU-",
                             "nv_gpu_power_limit{gpu_uuid=\"GPU-"}) {
    CAPTURE(family);
    CHECK(text.find(family) != std::string::npos);
  }
}

namespace {

server_process& vmm_server() {
  static const std::string socket = "/tmp/iwgpu_vmm_" + std::to_string(::getpid()) + ".sock";
  static server_process s({"--allow-client-shm=true", "--cuda-vmm-socket", socket, "--model-repository",
                           std::string(INFERWIRE_SOURCE_DIR) + "/tests/gpu/models"});
  return s;
}
std::string vmm_socket() { return "/tmp/iwgpu_vmm_" + std::to_string(::getpid()) + ".sock"; }

void to_device(void* dst, const void* src, std::size_t n) {
  cuda::check(cudaMemcpy(dst, src, n, cudaMemcpyHostToDevice), "cudaMemcpy to VMM memory");
}
std::vector<std::int32_t> from_device(const void* src, std::size_t count) {
  std::vector<std::int32_t> v(count);
  cuda::check(cudaMemcpy(v.data(), src, count * 4, cudaMemcpyDeviceToHost), "cudaMemcpy from VMM memory");
  return v;
}

/// Whether the server has no CUDA region within 2 s: a registration ends with its object, the
/// channel closing, and the server unregisters it when it sees the close.
bool no_cuda_regions(ih::client& c) {
  for (int i = 0; i < 200; ++i) {
    if (c.cuda_shared_memory_status().empty()) return true;
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  return false;
}

/// A `simple` request whose 16-element inputs and outputs lie at these offsets of `region`.
v2::infer_request simple_in(const std::string& region, std::uint64_t in0, std::uint64_t in1, std::uint64_t out0,
                            std::uint64_t out1) {
  v2::infer_request q;
  q.inputs.push_back(v2::make_shm_input("INPUT0", data_type::int32, {16}, {region, in0, 64}));
  q.inputs.push_back(v2::make_shm_input("INPUT1", data_type::int32, {16}, {region, in1, 64}));
  q.outputs.push_back(v2::make_shm_output("OUTPUT0", {region, out0, 64}));
  q.outputs.push_back(v2::make_shm_output("OUTPUT1", {region, out1, 64}));
  return q;
}

}  // namespace

TEST_CASE("gpu: simple reads and writes a multi-chunk VMM region registered through the socket", "[gpu][vmm]") {
  auto& s = vmm_server();
  auto c = client_of(s);
  c.unregister_cuda_shared_memory();
  std::vector<std::int32_t> a(16), b(16);
  for (int i = 0; i < 16; ++i) {
    a[i] = i * 7919 - 3;
    b[i] = 1000 - i;
  }
  auto [want_sum, want_diff] = cpu_simple(c, a, b);

  // Three chunks mapped one after the other; the region starts 4 KiB into the first, and every
  // tensor straddles a chunk boundary.
  auto mem = shm::cuda_vmm_memory::allocate(1, 3);
  const std::size_t chunk = mem.chunk_size();
  auto* base = static_cast<std::byte*>(mem.data());
  const std::size_t start = 4096, size = mem.size() - start;
  const std::size_t in0 = chunk - start - 32, in1 = in0 + 64;             // across chunks 0 | 1
  const std::size_t out0 = 2 * chunk - start - 40, out1 = out0 + 64;      // across chunks 1 | 2
  to_device(base + start + in0, a.data(), 64);
  to_device(base + start + in1, b.data(), 64);
  const std::vector<std::int32_t> zero(32, 0);

  auto exported = shm::export_cuda_vmm(base + start, size);
  CHECK(exported.layout.chunk_sizes == std::vector<std::uint64_t>(3, chunk));
  CHECK(exported.layout.offset == start);
  CHECK(exported.layout.device == mem.device());
  exported.fds.clear();

  // Register, run the GPU model and the CPU model through the region, and let the registration go.
  auto round_trip = [&] {
    to_device(base + start + out0, zero.data(), 128);
    to_device(base + start + out1, zero.data(), 128);
    auto reg = shm::register_cuda_vmm(c, "vmm", base + start, size, vmm_socket());
    auto status = c.cuda_shared_memory_status("vmm");
    REQUIRE(status.size() == 1);
    CHECK(status[0].byte_size == size);
    CHECK(status[0].device_id == static_cast<std::uint64_t>(mem.device()));
    v2::infer_request q = simple_in("vmm", in0, in1, out0, out1);
    const auto copies_before = host_copies(s);
    auto result = c.infer("simple_gpu", q);
    CHECK(host_copies(s) == copies_before);  // zero host copies
    CHECK(result.outputs()[0].data.empty());
    CHECK(from_device(base + start + out0, 16) == want_sum);
    CHECK(from_device(base + start + out1, 16) == want_diff);
    // A CPU instance stages the same region through host memory.
    to_device(base + start + out0, zero.data(), 128);
    for (auto& i : q.inputs) i.shape = {1, 16};
    c.infer("simple", q);
    CHECK(from_device(base + start + out0, 16) == want_sum);
  };
  // The server's first GPU work opens the driver's own descriptors for good (its context and
  // devices); what a registration holds is counted from after that.
  round_trip();
  CHECK(no_cuda_regions(c));
  const auto fds_before = open_fds_of(s.pid());
  round_trip();
  CHECK(no_cuda_regions(c));

  SECTION("unregister by name releases it while the channel stays open") {
    auto reg = shm::register_cuda_vmm(c, "vmm2", base, mem.size(), vmm_socket());
    c.unregister_cuda_shared_memory("vmm2");
    CHECK(c.cuda_shared_memory_status().empty());
    CHECK(static_cast<bool>(reg.channel()));
  }
  SECTION("refusals: cudaMalloc memory, another device, a size off the granularity") {
    auto legacy = shm::cuda_region::allocate(4096);
    try {
      shm::register_cuda_vmm(c, "bad", legacy.data(), 4096, vmm_socket());
      FAIL("registered cudaMalloc memory as VMM");
    } catch (const cuda::error& e) {
      CHECK(std::string(e.what()).find("is not a VMM mapping") != std::string::npos);
    }
    auto chunks = shm::export_cuda_vmm(base, chunk);
    auto raw = chunks.raw_fds();
    auto channel = shm::vmm_channel::connect(vmm_socket());
    shm::vmm_layout other = chunks.layout;
    other.device = mem.device() + 1;
    CHECK_THROWS_WITH(channel.deposit(other, raw), Catch::Contains("device"));
    shm::vmm_layout odd = chunks.layout;
    odd.chunk_sizes = {chunk / 2};
    odd.byte_size = chunk / 2;
    CHECK_THROWS_WITH(channel.deposit(odd, raw), Catch::Contains("granularity"));
    shm::vmm_layout larger = chunks.layout;
    larger.chunk_sizes = {2 * chunk};
    CHECK_THROWS_WITH(channel.deposit(larger, raw), Catch::Contains("cuMemMap"));
    // The channel still serves a good deposit after the refusals.
    CHECK(shm::is_vmm_handle(channel.deposit(chunks.layout, raw)));
  }
  // Nothing held beyond the count before (which may still include the closing channel's socket).
  for (int i = 0; i < 200 && open_fds_of(s.pid()).size() > fds_before.size(); ++i)
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  const auto fds_after = open_fds_of(s.pid());
  CAPTURE(added_fds(fds_before, fds_after));
  CHECK(fds_after.size() <= fds_before.size());
}

#ifdef INFERWIRE_GMS_SERVER_PATH
TEST_CASE("gpu: a GMS mapping registered as a CUDA VMM region", "[gpu][vmm][gms]") {
  // Memory that the GMS server allocated and this process mapped through GMS, registered with
  // descriptors the GMS server exports: the model reads and writes it in place.
  const std::string gms_socket = "/tmp/iwgpu_gms_" + std::to_string(::getpid()) + ".sock";
  child_process gms_server(INFERWIRE_GMS_SERVER_PATH, {"--device", "0", "--socket-path", gms_socket});
  for (int i = 0; i < 500 && ::access(gms_socket.c_str(), F_OK) != 0; ++i)
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  CAPTURE(gms_server.log());
  REQUIRE(::access(gms_socket.c_str(), F_OK) == 0);

  gms::memory_manager<gms::cuda_vmm_mapper> m(gms_socket, gms::cuda_vmm_mapper(0));
  m.connect(gms::requested_lock_type::rw);
  const std::size_t size = 4 << 20;
  const auto va = m.create_mapping({}, static_cast<std::int64_t>(size), "weights");
  auto* base = reinterpret_cast<std::byte*>(va);

  auto& s = vmm_server();
  auto c = client_of(s);
  c.unregister_cuda_shared_memory();
  std::vector<std::int32_t> a(16), b(16);
  std::iota(a.begin(), a.end(), -40);
  std::iota(b.begin(), b.end(), 7);
  auto [want_sum, want_diff] = cpu_simple(c, a, b);
  const std::size_t in0 = 2 << 20, in1 = in0 + 64, out0 = size - 128, out1 = size - 64;
  to_device(base + in0, a.data(), 64);
  to_device(base + in1, b.data(), 64);
  // The driver exports no allocation that was itself imported: the pointer's own export says
  // so and names the GMS call.
  CHECK_THROWS_WITH(shm::register_cuda_vmm(c, "gms", base, size, vmm_socket()),
                    Catch::Contains("gms::register_cuda_vmm"));
  {
    auto reg = gms::register_cuda_vmm(c, "gms", m, va, size, vmm_socket());
    const auto copies_before = host_copies(s);
    c.infer("simple_gpu", simple_in("gms", in0, in1, out0, out1));
    CHECK(host_copies(s) == copies_before);
    CHECK(from_device(base + out0, 16) == want_sum);
    CHECK(from_device(base + out1, 16) == want_diff);
  }
  CHECK(no_cuda_regions(c));
  // The server's mapping is gone; the GMS memory is still the writer's, with the outputs in it.
  CHECK(from_device(base + out0, 16) == want_sum);
}
#endif
