// SPDX-License-Identifier: Apache-2.0
// inferwire-gms-weights: publishes a block of "weights" through a GMS server, or imports and
// verifies what another process published; the smallest GMS workload, used by the example pod
// of deploy/gms/ and by the tests.
//
// It asks for the rw_or_ro lock, as inference engines sharing weights do: the first process on
// a GPU is granted RW, allocates --mib MiB, fills them with a known pattern, records their size
// and checksum in the metadata store (key inferwire.example/weights) and commits; every later
// process is granted RO, imports the same allocation into its address space and checks it.
// With --hold the process keeps its read-only mapping until SIGTERM or SIGINT.
#include <inferwire/gms/cuda_vmm_mapper.hpp>
#include <inferwire/gms/memory_manager.hpp>
#include <inferwire/gms/mmap_mapper.hpp>

#include "socket_path.hpp"

#include <boost/json/parse.hpp>
#include <boost/json/serialize.hpp>
#include <boost/program_options.hpp>

#include <chrono>
#include <csignal>
#include <cstdint>
#include <cstring>
#include <iostream>
#include <string>
#include <vector>

namespace gms = inferwire::gms;
namespace po = boost::program_options;

namespace {

constexpr const char* key = "inferwire.example/weights";
constexpr std::size_t chunk = std::size_t{8} << 20;

struct options {
  int device = 0;
  std::string tag = "weights";
  std::string socket_path;
  std::string backend = "cuda";
  std::int64_t mib = 64;
  std::int64_t timeout_ms = 60000;
  bool hold = false;
};

/// The pattern's 64-bit word at `index`.
std::uint64_t word(std::uint64_t index) { return (index + 1) * 0x9E3779B97F4A7C15ull; }

/// FNV-1a over 64-bit words, continued from `h`.
std::uint64_t mix(std::uint64_t h, const std::uint64_t* w, std::size_t n) {
  for (std::size_t i = 0; i < n; ++i) h = (h ^ w[i]) * 0x100000001B3ull;
  return h;
}

/// Where the bytes live: host memory (memfd server) or device memory (CUDA VMM).
struct host_memory {
  static void write(std::uintptr_t dst, const void* src, std::size_t n) {
    std::memcpy(reinterpret_cast<void*>(dst), src, n);
  }
  static void read(void* dst, std::uintptr_t src, std::size_t n) {
    std::memcpy(dst, reinterpret_cast<const void*>(src), n);
  }
};
struct device_memory {
  static void write(std::uintptr_t dst, const void* src, std::size_t n) {
    inferwire::cuda::check(cudaMemcpy(reinterpret_cast<void*>(dst), src, n, cudaMemcpyHostToDevice), "cudaMemcpy");
  }
  static void read(void* dst, std::uintptr_t src, std::size_t n) {
    inferwire::cuda::check(cudaMemcpy(dst, reinterpret_cast<const void*>(src), n, cudaMemcpyDeviceToHost),
                           "cudaMemcpy");
  }
};

/// One pass over [va, va + bytes) in chunks: writes the pattern first (`write`) or reads what
/// is there, and returns the checksum of the bytes.
template <class Memory>
std::uint64_t pass(std::uintptr_t va, std::size_t bytes, bool write) {
  std::vector<std::uint64_t> buf(chunk / 8);
  std::uint64_t h = 0xCBF29CE484222325ull;
  for (std::size_t off = 0; off < bytes; off += chunk) {
    const std::size_t n = std::min(chunk, bytes - off);
    if (write) {
      for (std::size_t i = 0; i < n / 8; ++i) buf[i] = word(off / 8 + i);
      Memory::write(va + off, buf.data(), n);
    } else {
      Memory::read(buf.data(), va + off, n);
    }
    h = mix(h, buf.data(), n / 8);
  }
  return h;
}

/// SIGTERM and SIGINT, which --hold waits for.
const sigset_t& hold_signals() {
  static const sigset_t set = [] {
    sigset_t s;
    sigemptyset(&s);
    sigaddset(&s, SIGTERM);
    sigaddset(&s, SIGINT);
    return s;
  }();
  return set;
}

double ms_since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
}

template <class Memory, class Mapper>
int run(const options& o, const std::string& path, Mapper mapper) {
  gms::memory_manager<Mapper> m(path, std::move(mapper));
  auto t0 = std::chrono::steady_clock::now();
  m.connect(gms::requested_lock_type::rw_or_ro, o.timeout_ms);
  if (m.is_rw()) {
    const auto bytes = static_cast<std::size_t>(o.mib) << 20;
    const std::uintptr_t va = m.create_mapping({}, static_cast<std::int64_t>(bytes), o.tag);
    const std::uint64_t h = pass<Memory>(va, bytes, true);
    boost::json::object meta{{"bytes", bytes}, {"fnv1a64", std::to_string(h)}};
    m.metadata_put(key, m.find(va)->allocation_id, 0, boost::json::serialize(meta));
    m.commit();
    std::cout << "published " << o.mib << " MiB at " << path << " in " << ms_since(t0) << " ms\n" << std::flush;
    t0 = std::chrono::steady_clock::now();
    m.connect(gms::requested_lock_type::ro, o.timeout_ms);
    m.remap_all_vas();  // the same addresses, read-only now
  }
  const auto md = m.metadata_get(key);
  if (!md.found || !md.allocation_id || !md.value) {
    std::cerr << "inferwire-gms-weights: " << path << " holds no " << key << " (published by another program?)\n";
    return 1;
  }
  const auto meta = boost::json::parse(md.value->data).as_object();
  const auto bytes = static_cast<std::size_t>(meta.at("bytes").template to_number<std::uint64_t>());
  const std::uintptr_t va = m.create_mapping(*md.allocation_id) + static_cast<std::uintptr_t>(md.offset_bytes.value_or(0));
  const double import_ms = ms_since(t0);
  const std::uint64_t h = pass<Memory>(va, bytes, false);
  if (std::to_string(h) != meta.at("fnv1a64").as_string()) {
    std::cerr << "inferwire-gms-weights: checksum mismatch in the imported " << bytes << " bytes\n";
    return 1;
  }
  std::cout << "imported " << (bytes >> 20) << " MiB read-only at 0x" << std::hex << va << std::dec << " in "
            << import_ms << " ms; checksum ok\n"
            << std::flush;
  if (o.hold) {
    // Blocked since the start (main), so a signal sent as soon as the line above appears
    // waits here instead of killing the process.
    int sig = 0;
    sigwait(&hold_signals(), &sig);
  }
  m.close();
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  options o;
  po::options_description desc(
      "inferwire-gms-weights: publish weights through a GMS server (first process: RW), or import\n"
      "and verify them (later processes: RO)\n\nOptions");
  desc.add_options()
    ("help,h", "show this help and exit")
    ("device", po::value<int>(&o.device)->default_value(0), "CUDA device ordinal (names the default socket)")
    ("tag", po::value<std::string>(&o.tag)->default_value("weights"), "server tag (names the default socket)")
    ("socket-path", po::value<std::string>(&o.socket_path),
     "the server's socket (default: as inferwire-gms-server's, from $GMS_SOCKET_DIR)")
    ("backend", po::value<std::string>(&o.backend)->default_value("cuda"),
     "the server's backend: cuda (map device memory) or memfd (map host memory)")
    ("mib", po::value<std::int64_t>(&o.mib)->default_value(64), "MiB to publish when granted RW (> 0)")
    ("timeout-ms", po::value<std::int64_t>(&o.timeout_ms)->default_value(60000), "wait for the lock this long")
    ("hold", po::bool_switch(&o.hold), "keep the read-only mapping until SIGTERM or SIGINT");
  po::variables_map vm;
  try {
    po::store(po::parse_command_line(argc, argv, desc), vm);
    po::notify(vm);
  } catch (const std::exception& e) {
    std::cerr << "inferwire-gms-weights: " << e.what() << "\n" << desc << "\n";
    return 2;
  }
  if (vm.count("help")) {
    std::cout << desc << "\n";
    return 0;
  }
  if ((o.backend != "cuda" && o.backend != "memfd") || o.mib <= 0 || o.device < 0) {
    std::cerr << "inferwire-gms-weights: --backend must be cuda or memfd, --mib > 0, --device >= 0\n";
    return 2;
  }
  if (o.hold) pthread_sigmask(SIG_BLOCK, &hold_signals(), nullptr);
  try {
    const std::string path = !o.socket_path.empty()
                                 ? o.socket_path
                                 : gms::programs::default_socket_path(o.backend, o.device, o.tag);
    if (o.backend == "memfd") return run<host_memory>(o, path, gms::mmap_mapper());
    return run<device_memory>(o, path, gms::cuda_vmm_mapper(o.device));
  } catch (const std::exception& e) {
    std::cerr << "inferwire-gms-weights: " << e.what() << "\n";
    return 1;
  }
}
