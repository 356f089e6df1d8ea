// SPDX-License-Identifier: Apache-2.0
// bench_gms: the GMS control plane and imports against inferwire-gms-server.
//
// (a) round trips per second of handshake, allocate, export (with the fd) and metadata
//     put/get against the memfd daemon, each compared in the same run with a bare frame echo
//     over a Unix socket (the floor any GMS implementation pays per round trip);
// (b) import of 1,000 allocations by a reader (export + reserve + map; one by one, and with the
//     export requests pipelined) with the mmap mapper, compared with the limit: the same
//     descriptors imported and mapped by one process with no socket, in one reservation
//     (target for the pipelined import: <= 2x);
// (c) on a GPU: import and map 8 GiB in 512 allocations with the CUDA VMM mapper, compared
//     with cudaMemcpy of the same bytes from pinned host memory (target: >= 10x faster) and
//     with the limit as in (b), handles from cuMemCreate in this process (target: <= 1.5x).
#include "bench_process.hpp"

#include <inferwire/gms/cuda_vmm.hpp>
#include <inferwire/gms/cuda_vmm_backend.hpp>
#include <inferwire/gms/memory_manager.hpp>
#include <inferwire/gms/mmap_mapper.hpp>

#include <chrono>
#include <cstdio>
#include <filesystem>
#include <functional>
#include <thread>

#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/un.h>

// Every benchmark's code is one translation unit (CMakeLists.txt): its names stay in its own
// namespace, and bench_gms's main() calls run().
namespace bench_gms {

namespace gms = inferwire::gms;
using clock_type = std::chrono::steady_clock;
using gms::requested_lock_type;

namespace {

double seconds_of(const std::function<void()>& f) {
  const auto t0 = clock_type::now();
  f();
  return std::chrono::duration<double>(clock_type::now() - t0).count();
}

bool wait_for_socket(const std::string& path) {
  for (int i = 0; i < 500; ++i) {
    try {
      gms::session::runtime_state(path);
      return true;
    } catch (const gms::error&) {
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
  }
  return false;
}

/// A Unix-socket server process that echoes every frame back; the baseline round trip (a
/// process of its own, as the GMS server is).
class echo_server {
 public:
  explicit echo_server(std::string path) : path_(std::move(path)) {
    std::filesystem::remove(path_);
    fd_ = ::socket(AF_UNIX, SOCK_STREAM, 0);
    sockaddr_un a{};
    a.sun_family = AF_UNIX;
    std::memcpy(a.sun_path, path_.c_str(), path_.size() + 1);
    ::bind(fd_, reinterpret_cast<sockaddr*>(&a), sizeof a);
    ::listen(fd_, 64);
    pid_ = ::fork();
    if (pid_ == 0) {
      for (;;) {
        int c = ::accept(fd_, nullptr, nullptr);
        if (c < 0) ::_exit(0);
        char buf[65536];
        for (;;) {
          ssize_t n = ::recv(c, buf, sizeof buf, 0);
          if (n <= 0) break;
          ::send(c, buf, static_cast<std::size_t>(n), MSG_NOSIGNAL);
        }
        ::close(c);
      }
    }
    ::close(fd_);
  }
  ~echo_server() {
    bench::stop(pid_);
    std::filesystem::remove(path_);
  }
  /// Connects, sends `frame` and reads it back `n` times on one connection (connect_each:
  /// a new connection per round trip).
  double round_trips_per_second(const std::string& frame, int n, bool connect_each) const {
    int c = -1;
    auto open = [&] {
      c = ::socket(AF_UNIX, SOCK_STREAM, 0);
      sockaddr_un a{};
      a.sun_family = AF_UNIX;
      std::memcpy(a.sun_path, path_.c_str(), path_.size() + 1);
      ::connect(c, reinterpret_cast<sockaddr*>(&a), sizeof a);
    };
    std::string back(frame.size(), '\0');
    const double s = seconds_of([&] {
      if (!connect_each) open();
      for (int i = 0; i < n; ++i) {
        if (connect_each) open();
        ::send(c, frame.data(), frame.size(), MSG_NOSIGNAL);
        std::size_t got = 0;
        while (got < back.size()) {
          ssize_t k = ::recv(c, back.data() + got, back.size() - got, 0);
          if (k <= 0) break;
          got += static_cast<std::size_t>(k);
        }
        if (connect_each) ::close(c);
      }
      if (!connect_each) ::close(c);
    });
    return n / s;
  }

 private:
  std::string path_;
  int fd_ = -1;
  pid_t pid_ = -1;
};

/// The limit of an import: `fds` (consumed), each of `each` bytes, imported and mapped read-only
/// by this process with no protocol: imported one by one, one reservation for all, mapped side
/// by side, access set per mapping or, where the mapper can, once for the range (what
/// memory_manager::create_mappings does after the replies).
template <class Mapper>
double local_import_seconds(Mapper& m, const std::vector<int>& fds, std::size_t each) {
  std::vector<typename Mapper::handle> hs;
  hs.reserve(fds.size());
  std::uintptr_t base = 0;
  const std::size_t total = each * fds.size();
  const double s = seconds_of([&] {
    for (int fd : fds) hs.push_back(m.import(gms::unique_fd(fd), each));
    base = m.reserve(total);
    for (std::size_t i = 0; i < hs.size(); ++i) {
      if constexpr (gms::range_access_mapper<Mapper>)
        m.map_without_access(base + i * each, each, hs[i]);
      else
        m.map(base + i * each, each, hs[i], false);
    }
    if constexpr (gms::range_access_mapper<Mapper>) m.set_access(base, total, false);
    m.synchronize();
  });
  for (std::size_t i = 0; i < hs.size(); ++i) m.unmap(base + i * each, each, hs[i]);
  m.free_va(base, total);
  return s;
}

void report(const char* what, int n, double seconds, double baseline_per_s) {
  const double per_s = n / seconds;
  std::printf("  %-34s %9.0f /s  (%6.1f us)   echo baseline %9.0f /s   ratio %.2f\n", what, per_s,
              1e6 / per_s, baseline_per_s, per_s / baseline_per_s);
}

void control_plane(const std::string& path, const echo_server& echo) {
  std::printf("(a) control-plane round trips, memfd backend\n");
  {  // a committed layout, so rw_or_ro handshakes are readers and leave it alone
    gms::session w(path, requested_lock_type::rw);
    w.commit();
  }
  const std::string hs_frame = gms::encode_frame(gms::handshake_request{requested_lock_type::rw_or_ro, 1000});
  const int n_hs = 2000;
  const double t_hs = seconds_of([&] {
    for (int i = 0; i < n_hs; ++i) gms::session r(path, requested_lock_type::rw_or_ro, 1000);
  });
  report("handshake (connect+RO grant+close)", n_hs, t_hs, echo.round_trips_per_second(hs_frame, n_hs, true));

  gms::session w(path, requested_lock_type::rw);
  const int n_alloc = 2000;
  std::vector<std::string> ids;
  const double t_alloc = seconds_of([&] {
    for (int i = 0; i < n_alloc; ++i) ids.push_back(w.allocate(std::int64_t{2} << 20, "weights").allocation_id);
  });
  report("allocate (2 MiB)", n_alloc, t_alloc,
         echo.round_trips_per_second(gms::encode_frame(gms::allocate_request{2 << 20, "weights"}), n_alloc, false));

  const int n_export = 5000;
  const double t_export = seconds_of([&] {
    for (int i = 0; i < n_export; ++i) w.export_allocation(ids[static_cast<std::size_t>(i) % ids.size()]);
  });
  report("export (+fd, closed)", n_export, t_export,
         echo.round_trips_per_second(gms::encode_frame(gms::export_allocation_request{ids[0]}), n_export, false));

  const int n_md = 5000;
  const std::string value(96, 'v');
  const double t_put = seconds_of([&] {
    for (int i = 0; i < n_md; ++i)
      w.metadata_put("model.layers." + std::to_string(i) + ".weight", ids[static_cast<std::size_t>(i) % ids.size()], 64, value);
  });
  report("metadata put (96-byte value)", n_md, t_put,
         echo.round_trips_per_second(
             gms::encode_frame(gms::metadata_put_request{"model.layers.0.weight", ids[0], 64, gms::bytes{value}}), n_md, false));
  const double t_get = seconds_of([&] {
    for (int i = 0; i < n_md; ++i) w.metadata_get("model.layers." + std::to_string(i) + ".weight");
  });
  report("metadata get", n_md, t_get,
         echo.round_trips_per_second(gms::encode_frame(gms::metadata_get_request{"model.layers.0.weight"}), n_md, false));
  w.close();
}

void import_cpu(const std::string& path) {
  std::printf("(b) import of 1,000 allocations (2 MiB each), mmap mapper\n");
  const int n = 1000;
  {
    gms::session w(path, requested_lock_type::rw);
    for (int i = 0; i < n; ++i) w.metadata_put("t" + std::to_string(i), w.allocate(2 << 20).allocation_id, 0, "");
    w.commit();
  }
  std::vector<std::string> ids;
  double t_one_by_one = 0;
  {
    gms::memory_manager<gms::mmap_mapper> r(path);
    r.connect(requested_lock_type::ro);
    for (const auto& a : r.list_handles()) ids.push_back(a.allocation_id);
    t_one_by_one = seconds_of([&] {
      for (const auto& id : ids) r.create_mapping(id);
    });
  }
  // The same import with the export requests pipelined (memory_manager::create_mappings),
  // against two local baselines made from memfds of this process (descriptors ready before
  // the clock starts): the limit (one reservation, as create_mappings does), and a reservation
  // and a dup per allocation (the baseline this bench first printed, when the import reserved
  // per allocation). Five interleaved rounds; medians of the per-round figures.
  const std::size_t each = std::size_t{2} << 20;
  std::vector<int> memfds;
  for (int i = 0; i < n; ++i) {
    int fd = ::memfd_create("bench", MFD_CLOEXEC);
    ::ftruncate(fd, static_cast<off_t>(each));
    memfds.push_back(fd);
  }
  std::vector<double> t_import, t_limit, t_each, r_limit, r_each;
  for (int round = 0; round < 5; ++round) {
    {
      gms::memory_manager<gms::mmap_mapper> r(path);
      r.connect(requested_lock_type::ro);
      t_import.push_back(seconds_of([&] { r.create_mappings(ids); }));
    }
    std::vector<int> fds;
    for (int fd : memfds) fds.push_back(::dup(fd));
    gms::mmap_mapper local;
    t_limit.push_back(local_import_seconds(local, fds, each));
    std::vector<std::pair<std::uintptr_t, gms::mmap_mapper::handle>> maps;
    t_each.push_back(seconds_of([&] {
      for (int fd : memfds) {
        auto va = local.reserve(each);
        auto h = local.import(gms::unique_fd(::dup(fd)), each);
        local.map(va, each, h, false);
        maps.emplace_back(va, std::move(h));
      }
    }));
    for (auto& [va, h] : maps) {
      local.unmap(va, each, h);
      local.free_va(va, each);
    }
    r_limit.push_back(t_import.back() / t_limit.back());
    r_each.push_back(t_import.back() / t_each.back());
  }
  for (int fd : memfds) ::close(fd);
  const double import_ms = bench::median(t_import) * 1e3, limit_ms = bench::median(t_limit) * 1e3;
  std::printf("  one by one: %8.2f ms (%6.1f us each)   ratio %.2f to the local limit\n", t_one_by_one * 1e3,
              t_one_by_one * 1e6 / n, t_one_by_one * 1e3 / limit_ms);
  std::printf("  GMS import (pipelined): %8.2f ms (%6.1f us each)   local limit (one reservation): %6.2f ms"
              "   ratio %.2f (target <= 2)\n",
              import_ms, import_ms * 1e3 / n, limit_ms, bench::median(r_limit));
  std::printf("  %57s local, a reservation and a dup each: %6.2f ms   ratio %.2f\n", "",
              bench::median(t_each) * 1e3, bench::median(r_each));
}

/// Where the GPU limit's time goes: each phase of local_import_seconds timed alone, then the
/// imports and the mappings spread over threads (does the driver overlap them?). `handles` are
/// this process's allocations; each phase gets fresh descriptors.
void gpu_phases(gms::cuda_vmm_backend& memory, const std::vector<gms::cuda_vmm_backend::handle>& handles,
                gms::cuda_vmm_mapper& m, std::size_t each) {
  using mapper_handle = gms::cuda_vmm_mapper::handle;
  const std::size_t n = handles.size(), total = each * n;
  auto fresh_fds = [&] {
    std::vector<int> fds;
    for (const auto& h : handles) fds.push_back(memory.export_fd(h));
    return fds;
  };
  CUcontext ctx = nullptr;
  gms::detail::vmm().ctx_get_current(&ctx);
  // Runs f(i) for i in [0, n) on `threads` threads (this one included), each with the context.
  auto spread = [&](int threads, const std::function<void(std::size_t)>& f) {
    std::vector<std::thread> ts;
    for (int t = 1; t < threads; ++t)
      ts.emplace_back([&, t] {
        gms::detail::vmm().ctx_set_current(ctx);
        for (std::size_t i = static_cast<std::size_t>(t); i < n; i += static_cast<std::size_t>(threads)) f(i);
      });
    for (std::size_t i = 0; i < n; i += static_cast<std::size_t>(threads)) f(i);
    for (auto& t : ts) t.join();
  };
  for (int threads : {1, 4, 8}) {
    auto fds = fresh_fds();
    std::vector<mapper_handle> hs(n);
    std::uintptr_t base = 0;
    const double t_import = seconds_of([&] { spread(threads, [&](std::size_t i) { hs[i] = m.import(gms::unique_fd(fds[i]), each); }); });
    const double t_map = seconds_of([&] {
      base = m.reserve(total);
      spread(threads, [&](std::size_t i) { m.map_without_access(base + i * each, each, hs[i]); });
    });
    const double t_access = seconds_of([&] {
      const std::size_t parts = static_cast<std::size_t>(threads), slice = n / parts * each;
      std::vector<std::thread> ts;
      for (std::size_t p = 1; p < parts; ++p)
        ts.emplace_back([&, p] {
          gms::detail::vmm().ctx_set_current(ctx);
          m.set_access(base + p * slice, p + 1 == parts ? total - p * slice : slice, false);
        });
      m.set_access(base, parts == 1 ? total : slice, false);
      for (auto& t : ts) t.join();
      m.synchronize();
    });
    const double t_unmap = seconds_of([&] {
      spread(threads, [&](std::size_t i) { m.unmap(base + i * each, each, hs[i]); });
      m.free_va(base, total);
    });
    std::printf("  phases on %d thread(s): import %6.2f ms, reserve+map %6.2f ms, set access %6.2f ms (%d range(s)),"
                " total %6.2f ms; unmap+release %6.2f ms\n",
                threads, t_import * 1e3, t_map * 1e3, t_access * 1e3, threads, (t_import + t_map + t_access) * 1e3,
                t_unmap * 1e3);
  }
  {  // access set per allocation, right after its mapping (what one-by-one imports do)
    auto fds = fresh_fds();
    std::vector<mapper_handle> hs(n);
    std::uintptr_t base = 0;
    const double t = seconds_of([&] {
      for (std::size_t i = 0; i < n; ++i) hs[i] = m.import(gms::unique_fd(fds[i]), each);
      base = m.reserve(total);
      for (std::size_t i = 0; i < n; ++i) m.map(base + i * each, each, hs[i], false);
      m.synchronize();
    });
    for (std::size_t i = 0; i < n; ++i) m.unmap(base + i * each, each, hs[i]);
    m.free_va(base, total);
    std::printf("  access set per allocation instead of once: total %6.2f ms\n", t * 1e3);
  }
}

void import_gpu(const std::string& server_binary, const std::string& dir) {
  std::printf("(c) GPU: import and map 8 GiB in 512 allocations vs cudaMemcpy from pinned memory\n");
  if (!inferwire::cuda::available()) {
    std::printf("  skipped: %s\n", inferwire::cuda::unavailable_reason().c_str());
    return;
  }
  const std::string path = dir + "/gms_bench_gpu.sock";
  pid_t pid = bench::spawn({server_binary, "--device", "0", "--socket-path", path}, dir + "/gms_gpu.log");
  if (!wait_for_socket(path)) {
    std::printf("  skipped: the CUDA backend did not start:\n%s\n", bench::read_file(dir + "/gms_gpu.log").c_str());
    bench::stop(pid);
    return;
  }
  const std::size_t each = std::size_t{16} << 20, count = 512, total = each * count;
  try {
    {
      gms::memory_manager<gms::cuda_vmm_mapper> w(path, gms::cuda_vmm_mapper(0));
      w.connect(requested_lock_type::rw);
      for (std::size_t i = 0; i < count; ++i) w.create_mapping({}, static_cast<std::int64_t>(each), "weights");
      w.commit();
    }
    gms::memory_manager<gms::cuda_vmm_mapper> r(path, gms::cuda_vmm_mapper(0));
    const double t_import = seconds_of([&] {
      r.connect(requested_lock_type::ro);
      std::vector<std::string> ids;
      for (const auto& a : r.list_handles()) ids.push_back(a.allocation_id);
      r.create_mappings(ids);  // pipelined exports
      r.mapper().synchronize();
    });
    // The limit: the same number of handles of the same size, made and exported here.
    double t_local = 0;
    {
      gms::cuda_vmm_backend local_memory(0);
      std::vector<gms::cuda_vmm_backend::handle> handles(count);
      std::vector<int> fds;
      for (auto& h : handles) {
        if (local_memory.allocate(each, h) != gms::alloc_status::ok) throw std::runtime_error("cuMemCreate: out of memory");
        fds.push_back(local_memory.export_fd(h));
      }
      t_local = local_import_seconds(r.mapper(), fds, each);
      gpu_phases(local_memory, handles, r.mapper(), each);
      for (auto& h : handles) local_memory.release(h);
    }
    void* host = nullptr;
    void* dev = nullptr;
    inferwire::cuda::check(cudaMallocHost(&host, total), "cudaMallocHost");
    inferwire::cuda::check(cudaMalloc(&dev, total), "cudaMalloc");
    std::memset(host, 1, total);
    inferwire::cuda::check(cudaMemcpy(dev, host, each, cudaMemcpyHostToDevice), "warm-up");
    const double t_copy = seconds_of([&] {
      inferwire::cuda::check(cudaMemcpy(dev, host, total, cudaMemcpyHostToDevice), "cudaMemcpy");
    });
    cudaFree(dev);
    cudaFreeHost(host);
    std::printf("  import+map: %8.2f ms   cudaMemcpy H2D: %8.2f ms (%.1f GB/s)   speed-up %.1fx (target >= 10x)\n",
                t_import * 1e3, t_copy * 1e3, total / t_copy / 1e9, t_copy / t_import);
    std::printf("  local limit (same handles, one process): %8.2f ms   ratio %.2f (target <= 1.5)\n", t_local * 1e3,
                t_import / t_local);
  } catch (const std::exception& e) {
    std::printf("  failed: %s\n", e.what());
  }
  bench::stop(pid);
}

}  // namespace

int run(int, char**) {
  const std::string dir = std::filesystem::temp_directory_path().string() + "/inferwire-bench-gms-" + std::to_string(::getpid());
  std::filesystem::create_directories(dir);
  const std::string path = dir + "/gms.sock";
  pid_t pid = bench::spawn({INFERWIRE_GMS_SERVER_PATH, "--device", "0", "--backend", "memfd", "--socket-path", path},
                           dir + "/gms.log");
  if (!wait_for_socket(path)) {
    std::fprintf(stderr, "inferwire-gms-server did not start:\n%s\n", bench::read_file(dir + "/gms.log").c_str());
    bench::stop(pid);
    return 1;
  }
  int rc = 0;
  try {
    echo_server echo(dir + "/echo.sock");
    control_plane(path, echo);
    import_cpu(path);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "bench_gms: %s\n", e.what());
    rc = 1;
  }
  bench::stop(pid);
  import_gpu(INFERWIRE_GMS_SERVER_PATH, dir);
  std::filesystem::remove_all(dir);
  return rc;
}

}  // namespace bench_gms
