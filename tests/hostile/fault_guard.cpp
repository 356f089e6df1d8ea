// SPDX-License-Identifier: Apache-2.0
// The SIGBUS guard of the server's system shared memory: a region shrunk while it is being
// read or written faults into a zero page and flags the region; any other SIGBUS keeps its
// default effect.
#include "fault_guard.hpp"

#include <catch2/catch.hpp>

#include <csignal>
#include <cstring>

#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

using namespace inferwire::server;

namespace {

// A shared mapping of a 4-page memfd.
struct shrinkable {
  static constexpr std::size_t size = 4 * 4096;
  int fd = ::memfd_create("iw-fault-guard", MFD_CLOEXEC);
  char* data = nullptr;
  shrinkable() {
    REQUIRE(fd >= 0);
    REQUIRE(::ftruncate(fd, size) == 0);
    void* p = ::mmap(nullptr, size, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    REQUIRE(p != MAP_FAILED);
    data = static_cast<char*>(p);
    std::memset(data, 7, size);
  }
  ~shrinkable() {
    ::munmap(data, size);
    ::close(fd);
  }
};

}  // namespace

TEST_CASE("fault guard: a watched region shrunk under a reader and a writer", "[hostile][shm]") {
  shrinkable r;
  fault_flag flag;
  flag.region = "shrunk";
  fault_watch watch(r.data, shrinkable::size, flag);
  REQUIRE(watch.active());
  CHECK_FALSE(flag.check());
  REQUIRE(::ftruncate(r.fd, 4096) == 0);  // the owner takes three pages away
  volatile char* p = r.data;
  CHECK(p[0] == 7);  // still backed
  CHECK(p[2 * 4096] == 0);  // faulted: a zero page now
  p[3 * 4096] = 1;          // a write past the end faults too, and goes nowhere visible
  CHECK(flag.hit.load());
  auto st = flag.check();
  CHECK(st.code() == inferwire::errc::internal);
  CHECK(st.message().find("'shrunk' was truncated") != std::string::npos);
}

TEST_CASE("fault guard: SIGBUS outside watched ranges still ends the process", "[hostile][shm]") {
  install_fault_guard();
  const pid_t pid = ::fork();
  REQUIRE(pid >= 0);
  if (pid == 0) {
    shrinkable r;
    if (::ftruncate(r.fd, 0) != 0) ::_exit(2);
    volatile char c = r.data[0];
    (void)c;
    ::_exit(0);
  }
  int status = 0;
  ::waitpid(pid, &status, 0);
  CHECK(WIFSIGNALED(status));
  CHECK(WTERMSIG(status) == SIGBUS);
}
