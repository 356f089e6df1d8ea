// SPDX-License-Identifier: Apache-2.0
// The one bounded reply queue both streamed frontends drain: its bound, its push that waits,
// its stall and end rules, and the consumer's wake.
#include "reply_queue.hpp"

#include <catch2/catch.hpp>

#include <atomic>
#include <future>
#include <string>
#include <thread>

namespace srv = inferwire::server;
using namespace std::chrono_literals;
using queue = srv::reply_queue<std::string>;

TEST_CASE("reply_queue: the consumer takes what waits, in order, at most `most` at a time", "[reply_queue]") {
  queue q(10s);
  REQUIRE(q.push("a"));
  REQUIRE(q.push("b"));
  REQUIRE(q.put("c"));
  std::vector<std::string> out;
  bool ended = true;
  CHECK(q.take(out, 2, ended, {}) == queue::taken::replies);
  CHECK(out == std::vector<std::string>{"a", "b"});
  CHECK_FALSE(ended);
  CHECK(q.size() == 1);
  q.end();
  CHECK(q.take(out, 8, ended, {}) == queue::taken::replies);
  CHECK(out.back() == "c");
  CHECK(ended);  // nothing left after the end
  CHECK_FALSE(q.push("late"));  // after the end nobody receives it
}

TEST_CASE("reply_queue: a consumer with nothing to take is woken by a push, the end or a break",
          "[reply_queue]") {
  std::vector<std::string> out;
  bool ended = false;
  int woken = 0;
  SECTION("push") {
    queue q(10s);
    CHECK(q.take(out, 8, ended, [&] { ++woken; }) == queue::taken::waiting);
    CHECK(woken == 0);
    REQUIRE(q.push("a"));
    CHECK(woken == 1);
    REQUIRE(q.push("b"));
    CHECK(woken == 1);  // once
  }
  SECTION("end") {
    queue q(10s);
    CHECK(q.take(out, 8, ended, [&] { ++woken; }) == queue::taken::waiting);
    q.end();
    CHECK(woken == 1);
    CHECK(q.take(out, 8, ended, {}) == queue::taken::replies);
    CHECK(out.empty());
    CHECK(ended);
  }
  SECTION("break") {
    queue q(10s);
    CHECK(q.take(out, 8, ended, [&] { ++woken; }) == queue::taken::waiting);
    q.broken();
    CHECK(woken == 1);
    CHECK(q.take(out, 8, ended, {}) == queue::taken::broken);
    CHECK_FALSE(q.push("a"));
    CHECK_FALSE(q.put("a"));
  }
}

TEST_CASE("reply_queue: push waits while max_queued replies wait; put does not", "[reply_queue]") {
  queue q(10s);
  for (std::size_t i = 0; i < queue::max_queued; ++i) REQUIRE(q.push(std::to_string(i)));
  REQUIRE(q.put("last"));  // a call's last reply never waits
  CHECK(q.size() == queue::max_queued + 1);
  std::atomic<bool> pushed{false};
  auto producer = std::async(std::launch::async, [&] {
    const bool ok = q.push("more");
    pushed = true;
    return ok;
  });
  // The producer cannot finish before the consumer makes room (no timing assumption here:
  // this only holds if it is still waiting, which it must be).
  CHECK(producer.wait_for(50ms) == std::future_status::timeout);
  CHECK_FALSE(pushed);
  std::vector<std::string> out;
  bool ended = false;
  CHECK(q.take(out, 4, ended, {}) == queue::taken::replies);
  CHECK(producer.get());
  CHECK(q.size() == queue::max_queued - 4 + 2);
}

TEST_CASE("reply_queue: a consumer that stops taking breaks a waiting push after the stall timeout",
          "[reply_queue]") {
  int stalls = 0;
  queue q(200ms, [&] { ++stalls; });
  for (std::size_t i = 0; i < queue::max_queued; ++i) REQUIRE(q.push("x"));
  const auto start = std::chrono::steady_clock::now();
  CHECK_FALSE(q.push("one too many"));  // returns once the stall rule ended the queue
  CHECK(std::chrono::steady_clock::now() - start >= 150ms);
  CHECK(stalls == 1);
  std::vector<std::string> out;
  bool ended = false;
  CHECK(q.take(out, 8, ended, {}) == queue::taken::broken);
  CHECK(out.empty());
}

TEST_CASE("reply_queue: a break releases a waiting producer", "[reply_queue]") {
  queue q(60s);
  for (std::size_t i = 0; i < queue::max_queued; ++i) REQUIRE(q.push("x"));
  auto producer = std::async(std::launch::async, [&] { return q.push("waits"); });
  CHECK(producer.wait_for(20ms) == std::future_status::timeout);
  q.broken();
  CHECK_FALSE(producer.get());
}
