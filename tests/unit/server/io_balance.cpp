// SPDX-License-Identifier: Apache-2.0
// The HTTP I/O threads' balance: how many threads the rule keeps active for a period's load and
// free cores, where new connections go, and which connections move between two requests.
#include "io_balance.hpp"

#include <catch2/catch.hpp>

#include <vector>

namespace srv = inferwire::server;

namespace {
srv::io_load load(std::vector<double> busy, double available) { return {std::move(busy), available}; }
}  // namespace

TEST_CASE("io_balance: one thread while one keeps up, more once the active ones are busy and cores are free", "[io_balance]") {
  // One thread at 60 %: stays one.
  CHECK(srv::active_io_threads(1, load({0.6, 0, 0, 0}, 16)) == 1);
  // One thread at 90 % with free cores: at least one more.
  CHECK(srv::active_io_threads(1, load({0.9, 0, 0, 0}, 16)) == 2);
  // Four saturated threads grow past five (the load over 70 % each).
  CHECK(srv::active_io_threads(4, load({1, 1, 1, 1, 0, 0, 0, 0}, 16)) == 6);
  // Never more threads than there are.
  CHECK(srv::active_io_threads(4, load({1, 1, 1, 1}, 16)) == 4);
  // A busy thread and another that is not: the active ones are not all busy, no growth.
  CHECK(srv::active_io_threads(2, load({0.95, 0.7, 0, 0}, 16)) == 2);
}

TEST_CASE("io_balance: no more active threads than free cores", "[io_balance]") {
  // Two cores, one taken by another process (a load generator): one I/O thread, however busy.
  CHECK(srv::active_io_threads(1, load({1.0, 0}, 1.0)) == 1);
  CHECK(srv::active_io_threads(2, load({0.6, 0.6}, 1.1)) == 1);
  // A core counts as free from three quarters.
  CHECK(srv::active_io_threads(1, load({0.95, 0}, 1.8)) == 2);
  CHECK(srv::active_io_threads(1, load({0.95, 0}, 1.7)) == 1);
  // A thread already active stays while half a core is free for it; another needs three quarters.
  CHECK(srv::active_io_threads(2, load({0.5, 0.5}, 1.6)) == 2);
  CHECK(srv::active_io_threads(2, load({0.5, 0.5}, 1.4)) == 1);
  CHECK(srv::active_io_threads(2, load({0.9, 0.9, 0}, 2.6)) == 2);
  CHECK(srv::active_io_threads(2, load({0.9, 0.9, 0}, 2.8)) == 3);
  // Nothing free at all: still one.
  CHECK(srv::active_io_threads(3, load({1, 1, 1, 0}, 0)) == 1);
}

TEST_CASE("io_balance: one fewer thread once the load fits in it at 60 % each", "[io_balance]") {
  CHECK(srv::active_io_threads(3, load({0.3, 0.4, 0.4, 0}, 16)) == 2);  // 1.1 <= 1.2
  CHECK(srv::active_io_threads(3, load({0.5, 0.4, 0.4, 0}, 16)) == 3);  // 1.3 > 1.2
  CHECK(srv::active_io_threads(2, load({0.5, 0.0}, 16)) == 1);
  // An idle server: one.
  CHECK(srv::active_io_threads(2, load({0, 0}, 16)) == 1);
  // Out-of-range figures are clamped, a single thread is always one.
  CHECK(srv::active_io_threads(9, load({0, 0}, 16)) == 1);
  CHECK(srv::active_io_threads(0, load({1.0}, 16)) == 1);
}

TEST_CASE("io_balance: new connections on the first thread, moves only when a thread is inactive or fuller", "[io_balance]") {
  srv::io_balance b(4, true);
  REQUIRE(b.adaptive());
  CHECK(b.active() == 1);
  for (int i = 0; i < 5; ++i) {
    const auto t = b.choose();
    CHECK(t == 0);
    b.opened(t);
  }
  CHECK(b.connections(0) == 5);
  // One active thread: a connection on it stays.
  CHECK(b.rehome(0) == 0);
  CHECK(b.moves() == 0);
  b.closed(0);
  CHECK(b.connections(0) == 4);
}

TEST_CASE("io_balance: spread keeps every thread in use, round robin, and never moves a connection", "[io_balance]") {
  srv::io_balance b(3, false);
  CHECK_FALSE(b.adaptive());
  CHECK(b.active() == 3);
  std::vector<std::size_t> got;
  for (int i = 0; i < 6; ++i) got.push_back(b.choose());
  CHECK(got == std::vector<std::size_t>{0, 1, 2, 0, 1, 2});
  b.opened(2);
  CHECK(b.rehome(2) == 2);
  b.sample();
  CHECK(b.active() == 3);
  // One thread is never adaptive.
  CHECK_FALSE(srv::io_balance(1, true).adaptive());
}

TEST_CASE("io_balance: more active threads spread the connections; fewer gather them again", "[io_balance]") {
  srv::io_balance b(3, true);
  for (int i = 0; i < 6; ++i) b.opened(b.choose());
  REQUIRE(b.connections(0) == 6);
  // Thread 0 saturated, cores free: two threads.
  b.apply(load({0.95, 0, 0}, 8));
  REQUIRE(b.active() == 2);
  // Connections of thread 0 move, one at each request's end, until the two differ by one.
  std::size_t moved = 0;
  for (int i = 0; i < 6; ++i)
    if (b.rehome(0) != 0) ++moved;
  CHECK(moved == 3);
  CHECK(b.connections(0) == 3);
  CHECK(b.connections(1) == 3);
  CHECK(b.moves() == 3);
  // New connections go to the emptier active thread.
  b.closed(1);
  CHECK(b.choose() == 1);
  // Load gone: back to one thread; thread 1's connections come home as their requests end.
  b.apply(load({0.1, 0.1, 0}, 8));
  REQUIRE(b.active() == 1);
  CHECK(b.rehome(1) == 0);
  CHECK(b.rehome(1) == 0);
  CHECK(b.connections(1) == 0);
  CHECK(b.connections(0) == 5);
  CHECK(b.rehome(0) == 0);
  CHECK(b.moves() == 5);
  // A thread that is not active never gets new connections.
  CHECK(b.choose() == 0);
}
