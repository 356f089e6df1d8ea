// SPDX-License-Identifier: Apache-2.0
// Hostile local clients against the GMS server: one table of cases, each an abuse with the
// outcome it must have. After every case the published layout must be intact (a new reader
// gets the same hash and allocation), and the server's descriptors must be back near where
// they started.
#include "../gms/fixture.hpp"
#include "proc.hpp"

#include <catch2/catch.hpp>

#include <algorithm>
#include <functional>
#include <thread>

#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>

// One program holds every hostile test file as one translation unit: this file's names stay
// in its own namespace.
namespace hostile_gms_server {

using namespace gms_test;
using gms::requested_lock_type;

namespace {

struct gms_case {
  const char* name;
  std::function<void(test_server&)> attack;
};

std::string export_request_frame(const std::string& id) {
  return gms::encode_frame(gms::export_allocation_request{id});
}

std::string handshake_frame(requested_lock_type t, std::optional<std::int64_t> timeout_ms = {}) {
  gms::handshake_request h;
  h.lock_type = t;
  h.timeout_ms = timeout_ms;
  return gms::encode_frame(h);
}

}  // namespace

TEST_CASE("hostile: the GMS server survives every case of the table", "[hostile][gms]") {
  server_config cfg;
  cfg.adjust = [](gms::server_options& o) {
    o.max_pending_fds = 16;
    o.max_connections = 32;
    o.first_frame_timeout = std::chrono::milliseconds(300);
  };
  test_server s(cfg);
  // A published layout the cases must not lose.
  std::string hash, id;
  {
    gms::session w(s.path(), requested_lock_type::rw);
    id = w.allocate(4096, "weights").allocation_id;
    w.metadata_put("w.0", id, 0, "meta");
    w.commit();
  }
  hash = gms::session::runtime_state(s.path()).memory_layout_hash;
  REQUIRE_FALSE(hash.empty());
  const pid_t self = ::getpid();
  const auto base_fds = hostile::open_fds(self);

  const std::vector<gms_case> table = {
      {"a reader that never reads its export replies is dropped, not the server",
       [&](test_server&) {
         raw_socket r(s.path());
         r.send(handshake_frame(requested_lock_type::ro));
         r.read_frame();
         std::string flood;
         for (int i = 0; i < 2000; ++i) flood += export_request_frame(id);
         try {
           r.send(flood);  // replies pile up unread, each with a descriptor
         } catch (const std::runtime_error&) {
           // the server may hang up before the flood is sent
         }
         std::this_thread::sleep_for(std::chrono::milliseconds(200));
         // Read what came (its descriptors are closed) until the server's hang-up shows.
         int frames = 0;
         while (frames < 5000 && !r.read_frame(nullptr, 1000).empty()) ++frames;
         CHECK(frames < 2000);  // not every export was served
         CHECK(r.closed_within(1000));
         // The operator sees why, without --verbose.
         const auto lines = s.log();
         CHECK(std::any_of(lines.begin(), lines.end(), [](const std::string& l) {
           return l.find("too many exported descriptors not read by the client") != std::string::npos;
         }));
       }},
      {"reader descriptors are read-only and the object cannot shrink",
       [&](test_server&) {
         gms::session r(s.path(), requested_lock_type::ro);
         auto e = r.export_allocation(id);
         const int fd = e.fd.get();
         CHECK((::fcntl(fd, F_GETFL) & O_ACCMODE) == O_RDONLY);
         CHECK(::ftruncate(fd, 0) != 0);
         CHECK(::mmap(nullptr, 4096, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0) == MAP_FAILED);
         void* p = ::mmap(nullptr, 4096, PROT_READ, MAP_SHARED, fd, 0);
         REQUIRE(p != MAP_FAILED);
         ::munmap(p, 4096);
         // Even a read-write reopen cannot truncate, map writable or write: the object is sealed
         // (against writes since the commit).
         const std::string path = "/proc/self/fd/" + std::to_string(fd);
         const int rw = ::open(path.c_str(), O_RDWR);
         if (rw >= 0) {
           CHECK(::ftruncate(rw, 0) != 0);
           CHECK(::mmap(nullptr, 4096, PROT_READ | PROT_WRITE, MAP_SHARED, rw, 0) == MAP_FAILED);
           CHECK(::pwrite(rw, "x", 1, 0) != 1);
           ::close(rw);
         }
       }},
      {"a 5-byte frame that announces a huge array asks for nothing",
       [&](test_server&) {
         raw_socket r(s.path());
         r.send(std::string("\x00\x00\x00\x05\xdd\xff\xff\xff\xff", 9));
         CHECK(r.closed_within(3000));
         raw_socket m(s.path());
         m.send(std::string("\x00\x00\x00\x05\xdf\x7f\xff\xff\xff", 9));  // a map of 2^31 pairs
         CHECK(m.closed_within(3000));
       }},
      {"an overflowing handshake timeout waits like a long one",
       [&](test_server&) {
         gms::session w(s.path(), requested_lock_type::rw);  // holds the lock (clears the layout!)
         raw_socket waiter(s.path());
         waiter.send(handshake_frame(requested_lock_type::rw, std::int64_t{1} << 62));
         std::this_thread::sleep_for(std::chrono::milliseconds(100));
         CHECK(gms::session::runtime_state(s.path()).waiting_writers == 1);
         // Put the layout back before the writer leaves, so the case ends as it began.
         id = w.allocate(4096, "weights").allocation_id;
         w.metadata_put("w.0", id, 0, "meta");
         w.commit();
         auto granted = waiter.read_frame();  // the waiting writer is granted after the commit
         CHECK_FALSE(granted.empty());
         waiter.send(gms::encode_frame(gms::commit_request{}));
         waiter.read_frame();
         // The second writer committed an empty layout; publish the one the table expects.
         gms::session w2(s.path(), requested_lock_type::rw);
         id = w2.allocate(4096, "weights").allocation_id;
         w2.metadata_put("w.0", id, 0, "meta");
         w2.commit();
       }},
      {"a connection that sends no first frame is closed",
       [&](test_server&) {
         raw_socket idle(s.path());
         CHECK(idle.closed_within(3000));
       }},
      {"connections past the bound are closed at once",
       [&](test_server&) {
         std::vector<std::unique_ptr<raw_socket>> many;
         for (int i = 0; i < 40; ++i) many.push_back(std::make_unique<raw_socket>(s.path()));
         std::this_thread::sleep_for(std::chrono::milliseconds(100));  // < the first-frame timeout
         std::size_t closed = 0;
         for (auto& c : many) closed += c->closed_within(1) ? 1 : 0;
         CHECK(closed >= 8);   // those past the bound of 32
         CHECK(closed < 40);   // not the others, not yet
       }},
      {"garbage frames are dropped",
       [&](test_server&) {
         raw_socket r(s.path());
         r.send(std::string("\x00\x00\x00\x03\xc1\xc1\xc1", 7));
         CHECK(r.closed_within(3000));
       }},
  };

  for (const auto& c : table) {
    INFO("case: " << c.name);
    c.attack(s);
    const auto st = gms::session::runtime_state(s.path());
    CHECK(st.memory_layout_hash == hash);
    CHECK(st.allocation_count == 1);
    gms::session r(s.path(), requested_lock_type::ro);
    CHECK(r.metadata_get("w.0").found);
    r.close();
    CHECK(eventually([&] { return hostile::open_fds(self) <= base_fds + 4; }));
  }
}

#ifdef INFERWIRE_GMS_SERVER_PATH
TEST_CASE("hostile: a writer allocating past the descriptor limit gets errors, the daemon lives",
          "[hostile][gms]") {
  const std::string path = fresh_socket_path();
  const pid_t pid = ::fork();
  REQUIRE(pid >= 0);
  if (pid == 0) {
    rlimit small{48, 48};
    ::setrlimit(RLIMIT_NOFILE, &small);
    ::execl(INFERWIRE_GMS_SERVER_PATH, INFERWIRE_GMS_SERVER_PATH, "--backend", "memfd", "--device", "0",
            "--socket-path", path.c_str(), nullptr);
    ::_exit(127);
  }
  child_guard daemon(pid);
  REQUIRE(eventually([&] { return std::filesystem::exists(path); }, std::chrono::seconds(10)));
  std::string error;
  {
    gms::session w(path, requested_lock_type::rw);
    for (int i = 0; i < 100 && error.empty(); ++i) {
      try {
        w.allocate(4096);
      } catch (const gms::server_error& e) {
        error = e.text();
      }
    }
  }
  CHECK(error.find("Allocation failed") != std::string::npos);
  int status = 0;
  CHECK(::waitpid(pid, &status, WNOHANG) == 0);  // still running
  auto st = gms::session::runtime_state(path);
  CHECK(st.allocation_count == 0);  // the writer left without committing: its layout is gone
  CHECK(WIFEXITED(daemon.stop(SIGTERM)));
}
#endif

}  // namespace hostile_gms_server
