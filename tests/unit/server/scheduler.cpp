// SPDX-License-Identifier: Apache-2.0
// The scheduler's rules without sockets or timing luck: batch formation, priorities, queue
// limits and timeouts through batch_queue with explicit times; the gate's instance limit,
// expiry and inline decision through a fake runner; sequence slots with explicit times.
#include "scheduler.hpp"

#include <catch2/catch.hpp>

#include <condition_variable>
#include <mutex>
#include <thread>

namespace srv = inferwire::server;
using namespace std::chrono_literals;

namespace {

srv::model_config config_of(const std::string& extra, int max_batch = 8) {
  const std::string text = "name: \"m\"\nbackend: \"identity\"\nmax_batch_size: " + std::to_string(max_batch) +
                           "\ninput [{ name: \"INPUT0\" data_type: TYPE_FP32 dims: [ 4 ] }]\n"
                           "output [{ name: \"OUTPUT0\" data_type: TYPE_FP32 dims: [ 4 ] }]\n" +
                           extra;
  inference::ModelConfig proto;
  const auto parsed = srv::parse_config_text(text, proto);
  INFO(parsed.message());
  REQUIRE_FALSE(parsed);
  srv::model_config c;
  const auto st = srv::finalize_config(proto, "m", {}, c);
  INFO(st.message());
  REQUIRE_FALSE(st);
  return c;
}

srv::call_ptr call_of(std::int64_t rows = 1) {
  auto c = std::make_shared<srv::infer_call>();
  c->batch_size = rows;
  return c;
}

const srv::clock::time_point t0 = srv::clock::time_point{} + 1000s;

// Pushes a call with the default ticket at `now`.
srv::call_ptr push(srv::batch_queue& q, srv::clock::time_point now, std::int64_t rows = 1, std::string key = "k",
                   std::uint64_t priority = 0, std::uint64_t timeout_us = 0, std::string group = {}) {
  auto c = call_of(rows);
  REQUIRE(q.push(q.ticket(priority, timeout_us, now), c, rows, std::move(key), std::move(group), now));
  return c;
}

struct taken {
  std::vector<srv::call_ptr> batch, rejected;
  srv::clock::time_point wake{};
};
taken take(srv::batch_queue& q, srv::clock::time_point now, bool flushed = false, const srv::batch_pacing& pace = {}) {
  taken t;
  q.take(now, flushed, t.batch, t.rejected, t.wake, pace);
  return t;
}

// The one call of a batch of one taken at `now`; null when the batch is not one call.
srv::call_ptr take_one(srv::batch_queue& q, srv::clock::time_point now) {
  auto t = take(q, now);
  return t.batch.size() == 1 ? t.batch[0] : nullptr;
}

}  // namespace

TEST_CASE("batch_queue: a model without dynamic batching runs one request per batch", "[scheduler]") {
  srv::batch_queue q;
  q.configure(config_of(""));
  CHECK_FALSE(q.gathers());
  auto a = push(q, t0), b = push(q, t0);
  CHECK(take_one(q, t0) == a);
  CHECK(take_one(q, t0) == b);
  CHECK(take(q, t0).batch.empty());
  CHECK(q.size() == 0);
}

TEST_CASE("batch_queue: compatible requests fill a batch up to max_batch_size", "[scheduler]") {
  srv::batch_queue q;
  q.configure(config_of("dynamic_batching { }", 4));
  REQUIRE(q.gathers());
  std::vector<srv::call_ptr> calls;
  for (int i = 0; i < 5; ++i) calls.push_back(push(q, t0));
  auto t = take(q, t0);
  REQUIRE(t.batch.size() == 4);
  for (int i = 0; i < 4; ++i) CHECK(t.batch[static_cast<std::size_t>(i)] == calls[static_cast<std::size_t>(i)]);
  // No delay configured: the last one goes alone at once.
  t = take(q, t0);
  REQUIRE(t.batch.size() == 1);
  CHECK(t.batch[0] == calls[4]);
}

TEST_CASE("batch_queue: a request that would pass max_batch_size closes the batch", "[scheduler]") {
  srv::batch_queue q;
  q.configure(config_of("dynamic_batching { max_queue_delay_microseconds: 1000000 }", 4));
  auto a = push(q, t0, 3), b = push(q, t0, 2);
  auto t = take(q, t0);
  REQUIRE(t.batch.size() == 1);
  CHECK(t.batch[0] == a);
  // b waits for company until its own delay passes.
  t = take(q, t0);
  CHECK(t.batch.empty());
  CHECK(t.wake == t0 + 1s);
  t = take(q, t0 + 1s);
  REQUIRE(t.batch.size() == 1);
  CHECK(t.batch[0] == b);
}

TEST_CASE("batch_queue: a partial batch waits for the oldest request's queue delay", "[scheduler]") {
  srv::batch_queue q;
  q.configure(config_of("dynamic_batching { max_queue_delay_microseconds: 1000 }", 8));
  auto a = push(q, t0), b = push(q, t0 + 500us);
  auto t = take(q, t0 + 999us);
  CHECK(t.batch.empty());
  CHECK(t.wake == t0 + 1ms);  // the oldest's deadline, not the newest's
  t = take(q, t0 + 1ms);
  REQUIRE(t.batch.size() == 2);
  CHECK(t.batch[0] == a);
  CHECK(t.batch[1] == b);
  // Flushed (the version is leaving): nothing waits.
  auto c = push(q, t0 + 2ms);
  t = take(q, t0 + 2ms, true);
  REQUIRE(t.batch.size() == 1);
  CHECK(t.batch[0] == c);
}

TEST_CASE("batch_queue: requests that waited for a busy instance wait the delay for the answered clients",
          "[scheduler]") {
  // A wave of requests answered together comes back together: the first of the next wave must
  // not leave alone, with the rest of it queued behind its execution (the wave split in two).
  srv::batch_queue q;
  q.configure(config_of("dynamic_batching { max_queue_delay_microseconds: 100 }", 8));
  auto a = push(q, t0);  // waited behind the busy instance
  srv::batch_pacing pace;
  pace.free_since = t0 + 5ms;     // the instance came free
  pace.answered = t0 + 5200us;    // the batch that ran there was answered
  pace.stretch = 5ms;
  // Before the delay after the answers, the batch waits, although its request waited 5 ms.
  auto t = take(q, t0 + 5250us, false, pace);
  CHECK(t.batch.empty());
  CHECK(t.wake == t0 + 5300us);
  auto b = push(q, t0 + 5280us);
  t = take(q, t0 + 5300us, false, pace);
  CHECK(t.batch.empty());
  CHECK(t.wake == t0 + 5380us);  // b came less than the delay after the one before: more may come
  t = take(q, t0 + 5380us, false, pace);
  REQUIRE(t.batch.size() == 2);
  CHECK(t.batch[0] == a);
  CHECK(t.batch[1] == b);
  // Without the pacing (an instance free all along), the oldest's delay alone counts.
  auto c = push(q, t0);
  CHECK(take(q, t0 + 100us).batch.size() == 1);
  CHECK(c);
}

TEST_CASE("batch_queue: a wave slower than the delay goes as one batch, for at most an execution",
          "[scheduler]") {
  srv::batch_queue q;
  q.configure(config_of("dynamic_batching { max_queue_delay_microseconds: 100 }", 64));
  srv::batch_pacing pace;
  pace.stretch = 1ms;
  // One request every 80 µs: each came within the delay of the one before, so the batch waits on.
  auto now = t0;
  for (int i = 0; i < 13; ++i, now += 80us) {
    push(q, now);
    auto t = take(q, now, false, pace);
    CHECK(t.batch.empty());
    CHECK(t.wake == std::min(now + 100us, t0 + 1ms));
  }
  // It goes at the first request's arrival + one execution, whatever keeps coming.
  CHECK(take(q, t0 + 999us, false, pace).batch.empty());
  CHECK(take(q, t0 + 1ms, false, pace).batch.size() == 13);
  // A pause longer than the delay ends the wave.
  srv::batch_queue r;
  r.configure(config_of("dynamic_batching { max_queue_delay_microseconds: 100 }", 64));
  push(r, t0);
  push(r, t0 + 80us);
  auto t = take(r, t0 + 180us, false, pace);
  CHECK(t.batch.size() == 2);
  // Without a measured execution the delay is the whole wait, as Triton's.
  push(r, t0 + 1s);
  push(r, t0 + 1s + 80us);
  t = take(r, t0 + 1s + 100us);
  CHECK(t.batch.size() == 2);
}

TEST_CASE("batch_queue: preferred batch sizes", "[scheduler]") {
  srv::batch_queue q;
  q.configure(config_of("dynamic_batching { preferred_batch_size: [ 2, 4 ] max_queue_delay_microseconds: 1000 }", 8));
  SECTION("the largest preferred size goes at once") {
    for (int i = 0; i < 4; ++i) push(q, t0);
    CHECK(take(q, t0).batch.size() == 4);
  }
  SECTION("queued requests that reach a smaller preferred size go at once, cut there") {
    std::vector<srv::call_ptr> calls;
    for (int i = 0; i < 3; ++i) calls.push_back(push(q, t0));
    auto t = take(q, t0);
    REQUIRE(t.batch.size() == 2);
    CHECK(t.batch[0] == calls[0]);
    CHECK(t.batch[1] == calls[1]);
    CHECK(q.size() == 1);
    // The rest reaches no preferred size: it waits for the delay, then goes.
    t = take(q, t0);
    CHECK(t.batch.empty());
    CHECK(t.wake == t0 + 1ms);
    t = take(q, t0 + 1ms);
    REQUIRE(t.batch.size() == 1);
    CHECK(t.batch[0] == calls[2]);
  }
  SECTION("two requests of batch size 2 form preferred size 4 and do not wait 10 s") {
    srv::batch_queue big;
    big.configure(config_of("dynamic_batching { preferred_batch_size: [ 4, 8 ] max_queue_delay_microseconds: 10000000 }",
                            32));
    auto a = push(big, t0, 2), b = push(big, t0 + 1ms, 2);
    auto t = take(big, t0 + 1ms);
    REQUIRE(t.batch.size() == 2);
    CHECK(t.batch[0] == a);
    CHECK(t.batch[1] == b);
  }
  SECTION("a batch between preferred sizes is cut at the largest it reaches") {
    for (int i = 0; i < 6; ++i) push(q, t0);  // 6: reaches 2 and 4, not 8
    CHECK(take(q, t0).batch.size() == 4);
  }
  SECTION("preferred sizes past max_batch_size are ignored") {
    srv::batch_queue small;
    small.configure(config_of("dynamic_batching { preferred_batch_size: [ 16 ] }", 4));
    for (int i = 0; i < 4; ++i) push(small, t0);
    CHECK(take(small, t0).batch.size() == 4);
  }
}

TEST_CASE("batch_queue: only requests with the batch key of the first share its batch", "[scheduler]") {
  srv::batch_queue q;
  q.configure(config_of("dynamic_batching { }", 8));
  auto a = push(q, t0, 1, "shape-a"), b = push(q, t0, 1, "shape-b"), c = push(q, t0, 1, "shape-a");
  // The run stops at the first incompatible request (FIFO order is kept).
  CHECK(take_one(q, t0) == a);
  CHECK(take_one(q, t0) == b);
  CHECK(take_one(q, t0) == c);
}

TEST_CASE("batch_queue: higher priority levels are served first", "[scheduler]") {
  srv::batch_queue q;
  q.configure(config_of("dynamic_batching { priority_levels: 3 default_priority_level: 2 }", 1));
  auto low = push(q, t0, 1, "k", 3);
  auto mid = push(q, t0, 1, "k", 0);  // 0: the default level (2)
  auto high = push(q, t0, 1, "k", 1);
  auto beyond = push(q, t0, 1, "k", 9);  // past the levels: the default level
  CHECK(take(q, t0).batch.at(0) == high);
  CHECK(take(q, t0).batch.at(0) == mid);
  CHECK(take(q, t0).batch.at(0) == beyond);
  CHECK(take(q, t0).batch.at(0) == low);
}

TEST_CASE("batch_queue: each level's queue is bounded by its max_queue_size", "[scheduler]") {
  srv::batch_queue q;
  q.configure(config_of("dynamic_batching { priority_levels: 2 default_queue_policy { max_queue_size: 2 } "
                        "priority_queue_policy { key: 1 value: { max_queue_size: 1 } } }",
                        1));
  push(q, t0, 1, "k", 2);
  push(q, t0, 1, "k", 2);
  CHECK_FALSE(q.push(q.ticket(2, 0, t0), call_of(), 1, "k", {}, t0));
  push(q, t0, 1, "k", 1);
  CHECK_FALSE(q.push(q.ticket(1, 0, t0), call_of(), 1, "k", {}, t0));
  CHECK(q.size() == 3);
  take(q, t0);  // the level-1 request
  CHECK(q.push(q.ticket(1, 0, t0), call_of(), 1, "k", {}, t0));
}

TEST_CASE("batch_queue: queue timeouts", "[scheduler]") {
  SECTION("REJECT: a request past its timeout leaves with the next take") {
    srv::batch_queue q;
    q.configure(config_of("dynamic_batching { max_queue_delay_microseconds: 10000000 "
                          "default_queue_policy { default_timeout_microseconds: 1000 } }"));
    auto a = push(q, t0);
    auto t = take(q, t0 + 999us);
    CHECK(t.rejected.empty());
    CHECK(t.batch.empty());
    t = take(q, t0 + 1ms);
    REQUIRE(t.rejected.size() == 1);
    CHECK(t.rejected[0] == a);
    CHECK(t.batch.empty());
    CHECK(q.size() == 0);
  }
  SECTION("DELAY: a request past its timeout is served after those still in time") {
    srv::batch_queue q;
    q.configure(config_of("dynamic_batching { default_queue_policy { timeout_action: DELAY "
                          "default_timeout_microseconds: 1000 allow_timeout_override: true } }",
                          1));
    auto late = push(q, t0);
    auto in_time = push(q, t0 + 900us, 1, "k", 0, 5000);  // an override may only shorten: stays 1000
    auto t = take(q, t0 + 1500us);
    CHECK(t.rejected.empty());
    REQUIRE(t.batch.size() == 1);
    CHECK(t.batch[0] == in_time);
    CHECK(take(q, t0 + 1500us).batch.at(0) == late);
  }
}

TEST_CASE("batch_queue: the next REJECT deadline is the earliest of the waiting requests", "[scheduler]") {
  srv::batch_queue q;
  q.configure(config_of("dynamic_batching { priority_levels: 2 default_queue_policy { allow_timeout_override: true } "
                        "priority_queue_policy { key: 2 value: { timeout_action: DELAY default_timeout_microseconds: 100 } } }",
                        1));
  CHECK(q.next_deadline() == srv::clock::time_point{});
  push(q, t0, 1, "k", 1, 0);         // no timeout
  push(q, t0, 1, "k", 2, 0);         // DELAY: never rejected, no deadline to answer at
  auto soon = push(q, t0, 1, "k", 1, 5000);
  push(q, t0, 1, "k", 1, 9000);
  CHECK(q.next_deadline() == t0 + 5ms);
  std::vector<srv::call_ptr> rejected;
  q.expire(t0 + 5ms, rejected);
  REQUIRE(rejected.size() == 1);
  CHECK(rejected[0] == soon);
  CHECK(q.next_deadline() == t0 + 9ms);
  CHECK(q.size() == 3);
  // Requests that leave in a batch take their deadlines with them.
  while (q.size() != 0) take(q, t0 + 6ms);
  CHECK(q.next_deadline() == srv::clock::time_point{});
}

TEST_CASE("batch_queue: a request's timeout overrides its level's only where allowed, and only shortens it",
          "[scheduler]") {
  srv::batch_queue q;
  q.configure(config_of("dynamic_batching { priority_levels: 2 "
                        "default_queue_policy { default_timeout_microseconds: 1000 allow_timeout_override: true } "
                        "priority_queue_policy { key: 1 value: { default_timeout_microseconds: 1000 } } }"));
  CHECK(q.ticket(2, 500, t0).deadline == t0 + 500us);
  CHECK(q.ticket(2, 5000, t0).deadline == t0 + 1ms);
  CHECK(q.ticket(2, 0, t0).deadline == t0 + 1ms);
  CHECK(q.ticket(1, 500, t0).deadline == t0 + 1ms);  // level 1 allows no override
  CHECK(q.ticket(1, 500, t0).level == 0);
  srv::batch_queue none;
  none.configure(config_of("dynamic_batching { default_queue_policy { allow_timeout_override: true } }"));
  CHECK(none.ticket(0, 700, t0).deadline == t0 + 700us);
  CHECK(none.ticket(0, 0, t0).deadline == srv::clock::time_point{});
}

TEST_CASE("batch_queue: the oldest strategy puts one request of a sequence in a batch", "[scheduler]") {
  srv::batch_queue q;
  q.configure(config_of("sequence_batching { oldest { max_candidate_sequences: 4 } }", 8));
  REQUIRE(q.gathers());
  auto a1 = push(q, t0, 1, "k", 0, 0, "u:1");
  auto a2 = push(q, t0, 1, "k", 0, 0, "u:1");
  auto b1 = push(q, t0, 1, "k", 0, 0, "u:2");
  auto t = take(q, t0);
  REQUIRE(t.batch.size() == 2);
  CHECK(t.batch[0] == a1);
  CHECK(t.batch[1] == b1);  // a2 is passed over, not the end of the batch
  // a2 waits until a1 ran, although another instance could take it.
  CHECK(take(q, t0).batch.empty());
  q.ran("u:2");
  CHECK(take(q, t0).batch.empty());
  q.ran("u:1");
  CHECK(take(q, t0).batch.at(0) == a2);
}

TEST_CASE("batch_queue: the direct strategy goes at its minimum slot utilization", "[scheduler][sequence]") {
  srv::batch_queue q;
  q.configure(config_of("sequence_batching { direct { max_queue_delay_microseconds: 1000 "
                        "minimum_slot_utilization: 0.5 } }",
                        4));
  REQUIRE(q.gathers());
  auto a = push(q, t0, 1, "k", 0, 0, "u:1");
  push(q, t0, 1, "k", 0, 0, "u:1");  // the same sequence fills no second slot
  auto t = take(q, t0);
  CHECK(t.batch.empty());
  CHECK(t.wake == t0 + 1ms);
  auto b = push(q, t0 + 10us, 1, "k", 0, 0, "u:2");
  t = take(q, t0 + 10us);  // 2 of 4 slots ready: half
  REQUIRE(t.batch.size() == 2);
  CHECK(t.batch[0] == a);
  CHECK(t.batch[1] == b);
  q.ran("u:1");
  q.ran("u:2");
  // Below the utilization the batch goes at the delay.
  t = take(q, t0 + 20us);
  CHECK(t.batch.empty());
  CHECK(take(q, t0 + 1ms).batch.size() == 1);

  // By default a batch goes as soon as one slot is ready.
  srv::batch_queue plain;
  plain.configure(config_of("sequence_batching { }", 4));
  REQUIRE(plain.gathers());
  push(plain, t0, 1, "k", 0, 0, "u:1");
  CHECK(take(plain, t0).batch.size() == 1);
}

TEST_CASE("runs_inline, batch_key and sequence_group read the request", "[scheduler]") {
  const auto plain = config_of("");
  inferwire::v2::infer_request r;
  r.inputs.resize(1);
  r.inputs[0].name = "INPUT0";
  r.inputs[0].shape = {1, 4};
  std::string bytes(16, '\0');
  r.inputs[0].data = inferwire::v2::tensor_data::view(std::string_view(bytes));
  srv::tensor_places places;
  CHECK(srv::runs_inline(plain, false, r, places));
  CHECK_FALSE(srv::runs_inline(config_of("dynamic_batching { }"), false, r, places));
  CHECK_FALSE(srv::runs_inline(config_of("parameters { key: \"execute_delay_ms\" value: { string_value: \"1\" } }"),
                               false, r, places));
  std::string big(64 * 1024 + 1, '\0');
  r.inputs[0].data = inferwire::v2::tensor_data::view(std::string_view(big));
  CHECK_FALSE(srv::runs_inline(plain, false, r, places));
  // A backend whose work does not grow with the inputs (identity) runs inline at any size,
  // unless an input is in device memory (copied to the host first) or the model batches.
  CHECK(srv::runs_inline(plain, false, r, places, true));
  CHECK_FALSE(srv::runs_inline(config_of("dynamic_batching { }"), false, r, places, true));
  std::byte device_byte{};
  places.inputs.resize(1);
  places.inputs[0].data = &device_byte;
  places.inputs[0].device = 0;
  CHECK_FALSE(srv::runs_inline(plain, false, r, places, true));
  places.inputs.clear();

  inferwire::v2::infer_request a, b;
  a.inputs.resize(2);
  a.inputs[0].name = "X";
  a.inputs[0].shape = {3, 4};
  a.inputs[1].name = "Y";
  a.inputs[1].shape = {3, 2};
  b.inputs = {a.inputs[1], a.inputs[0]};  // another order, another batch size
  b.inputs[0].shape[0] = 7;
  CHECK(srv::batch_key(a) == srv::batch_key(b));
  b.inputs[1].shape[1] = 5;
  CHECK(srv::batch_key(a) != srv::batch_key(b));

  CHECK(srv::sequence_group(a).empty());
  a.parameters.set("sequence_id", std::uint64_t{42});
  CHECK(srv::sequence_group(a) == "u:42");
  a.parameters.set("sequence_id", std::string("42"));
  CHECK(srv::sequence_group(a) == "s:42");
}

TEST_CASE("sequence_table: slots start, continue, idle out and are bounded", "[scheduler]") {
  srv::sequence_table seqs;
  bool found = false, full = false;
  CHECK(seqs.begin("u:1", false, 1s, found, full, t0) == nullptr);  // never started
  CHECK_FALSE(found);
  auto* s = seqs.begin("u:1", true, 1s, found, full, t0);
  REQUIRE(s);
  CHECK(s->started);
  s->accumulator = 5;
  CHECK(seqs.begin("u:1", false, 1s, found, full, t0 + 900ms) == s);
  CHECK(s->accumulator == 5);
  // Idle for longer than max_idle since its last request: released.
  CHECK(seqs.begin("u:1", false, 1s, found, full, t0 + 2s) == nullptr);
  CHECK_FALSE(found);
  CHECK(seqs.size() == 0);
  // A START restarts the state.
  s = seqs.begin("u:2", true, 1s, found, full, t0);
  s->accumulator = 9;
  s = seqs.begin("u:2", true, 1s, found, full, t0);
  CHECK(s->accumulator == 0);
  seqs.end("u:2");
  CHECK(seqs.size() == 0);
}

TEST_CASE("sequence_table: a sequence with a request queued or running is not idle", "[scheduler]") {
  srv::sequence_table seqs;
  bool found = false, full = false;
  REQUIRE(seqs.begin("u:7", true, 1s, found, full, t0));
  // A continuation waits in the queue for 5 s, five times max_idle: the sequence stays.
  const auto h = seqs.hold("u:7", 1s, t0 + 500ms);
  REQUIRE(h != 0);
  CHECK(seqs.begin("u:7", false, 1s, found, full, t0 + 5s) != nullptr);
  seqs.release("u:7", h, t0 + 5s);
  // Its idle time starts again when the request is done.
  CHECK(seqs.begin("u:7", false, 1s, found, full, t0 + 5500ms) != nullptr);
  CHECK(seqs.begin("u:7", false, 1s, found, full, t0 + 7s) == nullptr);
  // A sequence that idled out before its request was queued is not held, and stays gone.
  REQUIRE(seqs.begin("u:8", true, 1s, found, full, t0));
  CHECK(seqs.hold("u:8", 1s, t0 + 2s) == 0);
  CHECK(seqs.begin("u:8", false, 1s, found, full, t0 + 2s) == nullptr);
  CHECK(seqs.hold("u:9", 1s, t0) == 0);  // never started
  // A hold of an ended sequence does not count for a new one of the same ID.
  REQUIRE(seqs.begin("u:10", true, 1s, found, full, t0));
  const auto old = seqs.hold("u:10", 1s, t0);
  seqs.end("u:10");
  REQUIRE(seqs.begin("u:10", true, 1s, found, full, t0));
  const auto fresh = seqs.hold("u:10", 1s, t0);
  seqs.release("u:10", old, t0);  // nothing
  CHECK(seqs.begin("u:10", false, 1s, found, full, t0 + 3s) != nullptr);  // still held by `fresh`
  seqs.release("u:10", fresh, t0 + 3s);
  CHECK(seqs.begin("u:10", false, 1s, found, full, t0 + 5s) == nullptr);
}

// --- the gate, with a fake runner --------------------------------------------------------------

namespace {

// What the fake runner saw; batches are held until the test releases them.
struct recorder {
  std::mutex mu;
  std::condition_variable cv;
  std::vector<std::size_t> batches;  ///< sizes, in the order they ran
  std::size_t inline_runs = 0;
  std::size_t expired = 0;
  std::thread::id inline_thread;
  std::size_t holding = 0;     ///< batches running now
  std::size_t max_holding = 0;
  bool hold = true;
  std::vector<srv::instance_gate*> to_release;

  template <class P>
  void wait(P p) {
    std::unique_lock lock(mu);
    REQUIRE(cv.wait_for(lock, 30s, p));
  }
};
recorder* rec = nullptr;

void fake_one(srv::infer_call& call) {
  {
    std::lock_guard lock(rec->mu);
    ++rec->inline_runs;
    rec->inline_thread = std::this_thread::get_id();
  }
  call.finish({});
}
void fake_run(std::vector<srv::call_ptr>&& batch, srv::instance_gate& gate) {
  std::unique_lock lock(rec->mu);
  rec->batches.push_back(batch.size());
  rec->max_holding = std::max(rec->max_holding, ++rec->holding);
  rec->cv.notify_all();
  rec->cv.wait(lock, [] { return !rec->hold; });
  --rec->holding;
  lock.unlock();
  gate.release(batch);
  for (auto& c : batch) c->finish({});
  gate.answered();
}
void fake_expire(srv::call_ptr call) {
  {
    std::lock_guard lock(rec->mu);
    ++rec->expired;
    rec->cv.notify_all();
  }
  call->finish({inferwire::errc::unavailable, "Request timeout expired"});
}
const srv::batch_runner fake_runner{&fake_one, &fake_run, &fake_expire};

struct gate_fixture {
  recorder r;
  boost::asio::thread_pool pool{4};
  srv::version_stats stats;
  srv::model_config config;
  std::shared_ptr<srv::instance_gate> gate = std::make_shared<srv::instance_gate>();
  std::atomic<int> done{0};

  gate_fixture(const std::string& extra, std::size_t instances, int max_batch = 8) : config(config_of(extra, max_batch)) {
    rec = &r;
    gate->configure(instances, config, false, stats, {&pool, &fake_runner}, gate);
  }
  ~gate_fixture() {
    {
      std::lock_guard lock(r.mu);
      r.hold = false;
    }
    r.cv.notify_all();
    pool.join();
    rec = nullptr;
  }
  srv::call_ptr call(std::int64_t rows = 1) {
    auto c = call_of(rows);
    c->request.inputs.resize(1);
    c->request.inputs[0].name = "INPUT0";
    c->request.inputs[0].shape = {rows, 4};
    c->done = [this](inferwire::status) { ++done; };
    return c;
  }
  void let_go() {
    {
      std::lock_guard lock(r.mu);
      r.hold = false;
    }
    r.cv.notify_all();
  }
};

}  // namespace

TEST_CASE("instance_gate: at most `instances` batches run at once; a release starts the next", "[scheduler]") {
  gate_fixture f("dynamic_batching { }", 2, 1);
  for (int i = 0; i < 5; ++i) REQUIRE(f.gate->schedule(f.call()));
  f.r.wait([&] { return f.r.batches.size() == 2; });
  CHECK(f.stats.pending() == 3);
  {
    std::lock_guard lock(f.r.mu);
    CHECK(f.r.holding == 2);
  }
  f.let_go();
  f.r.wait([&] { return f.r.batches.size() == 5; });
  f.pool.join();
  CHECK(f.r.max_holding <= 2);
  CHECK(f.done == 5);
  CHECK(f.stats.pending() == 0);
  CHECK(f.r.inline_runs == 0);
}

TEST_CASE("instance_gate: requests queued behind a busy instance form one batch", "[scheduler]") {
  gate_fixture f("dynamic_batching { }", 1, 8);
  REQUIRE(f.gate->schedule(f.call()));
  f.r.wait([&] { return f.r.batches.size() == 1; });
  for (int i = 0; i < 3; ++i) REQUIRE(f.gate->schedule(f.call(2)));
  f.let_go();
  f.r.wait([&] { return f.r.batches.size() == 2; });
  f.pool.join();
  CHECK(f.r.batches == std::vector<std::size_t>{1, 3});
  CHECK(f.done == 4);
}

TEST_CASE("instance_gate: a full queue refuses, and nothing is done with the call", "[scheduler]") {
  gate_fixture f("dynamic_batching { default_queue_policy { max_queue_size: 1 } }", 1, 1);
  REQUIRE(f.gate->schedule(f.call()));
  f.r.wait([&] { return f.r.batches.size() == 1; });
  REQUIRE(f.gate->schedule(f.call()));   // waits
  CHECK_FALSE(f.gate->schedule(f.call()));  // the queue holds one
  CHECK(f.stats.pending() == 1);
  f.let_go();
  f.pool.join();
  CHECK(f.done == 2);
}

TEST_CASE("instance_gate: a request behind a busy instance is answered at its REJECT deadline", "[scheduler]") {
  gate_fixture f("dynamic_batching { default_queue_policy { allow_timeout_override: true } }", 1, 1);
  REQUIRE(f.gate->schedule(f.call()));
  f.r.wait([&] { return f.r.batches.size() == 1; });
  auto late = f.call();
  late->request.parameters.set("timeout", std::uint64_t{20000});  // 20 ms
  REQUIRE(f.gate->schedule(late));
  // The instance stays busy: the gate's own timer answers the request.
  f.r.wait([&] { return f.r.expired == 1; });
  {
    std::lock_guard lock(f.r.mu);
    CHECK(f.r.holding == 1);
    CHECK(f.r.batches.size() == 1);
  }
  CHECK(f.stats.pending() == 0);
  f.let_go();
  f.pool.join();
  CHECK(f.done == 2);
}

TEST_CASE("instance_gate: a small call of a plain model runs on the scheduling thread", "[scheduler]") {
  gate_fixture f("", 1);
  REQUIRE(f.gate->schedule(f.call()));
  CHECK(f.done == 1);  // before schedule returned
  CHECK(f.r.inline_runs == 1);
  CHECK(f.r.inline_thread == std::this_thread::get_id());
  // A call that takes decoupled responses never runs inline.
  auto c = f.call();
  const srv::response_sink sink = [](inferwire::v2::infer_response&&) { return true; };
  c->hooks.sink = &sink;
  REQUIRE(f.gate->schedule(c));
  f.r.wait([&] { return f.r.batches.size() == 1; });
  f.let_go();
  f.pool.join();
  CHECK(f.done == 2);
  CHECK(f.r.inline_runs == 1);
}

TEST_CASE("instance_gate: sequences run on every instance, each sequence one request at a time",
          "[scheduler][sequence]") {
  auto strategy = GENERATE(std::string("oldest { max_candidate_sequences: 4 }"), std::string("direct { }"));
  INFO(strategy);
  gate_fixture f("sequence_batching { " + strategy + " }", 4, 1);
  // Sequences 1, 2, 3, then a second request of sequence 1.
  for (int i : {1, 2, 3, 1}) {
    auto c = f.call();
    c->request.parameters.set("sequence_id", std::uint64_t(i));
    REQUIRE(f.gate->schedule(c));
  }
  // Three instances run the three sequences at once; sequence 1's second request waits for its
  // first, although a fourth instance is free.
  f.r.wait([&] { return f.r.batches.size() == 3; });
  {
    std::lock_guard lock(f.r.mu);
    CHECK(f.r.holding == 3);
  }
  CHECK(f.stats.pending() == 1);
  f.let_go();
  f.r.wait([&] { return f.r.batches.size() == 4; });
  f.pool.join();
  CHECK(f.r.max_holding == 3);
  CHECK(f.done == 4);
  CHECK(f.r.inline_runs == 0);
}

TEST_CASE("batch_queue: a sequence model rejects a waiting request at its own timeout", "[scheduler][sequence]") {
  // The sequence batcher takes the request's `timeout` (Triton: a backlogged sequence is
  // rejected at it); a model without a queue policy ignores it.
  srv::batch_queue seq;
  seq.configure(config_of("sequence_batching { control_input [ { name: \"START\" control [ { kind: "
                          "CONTROL_SEQUENCE_START int32_false_true: [ 0, 1 ] } ] } ] }",
                          0));
  const auto t = seq.ticket(0, 250'000, t0);
  CHECK(t.deadline == t0 + 250ms);
  CHECK_FALSE(t.delay);
  CHECK(seq.ticket(0, 0, t0).deadline == srv::clock::time_point{});
  auto a = call_of();
  REQUIRE(seq.push(t, a, 1, "", "", t0));
  CHECK(seq.next_deadline() == t0 + 250ms);  // the gate's timer wakes for it
  taken late = take(seq, t0 + 300ms);
  REQUIRE(late.rejected.size() == 1);
  CHECK(late.rejected[0] == a);

  srv::batch_queue plain;
  plain.configure(config_of(""));
  CHECK(plain.ticket(0, 250'000, t0).deadline == srv::clock::time_point{});
}

TEST_CASE("completion_order: completions run in queue order, whatever order they come in", "[scheduler]") {
  srv::completion_order order;
  std::vector<int> ran;
  const auto a = order.take(), b = order.take(), c = order.take(), d = order.take();
  order.complete(c, [&] { ran.push_back(2); });
  order.complete(b, [&] { ran.push_back(1); });
  CHECK(ran.empty());  // a is not done
  CHECK(order.waiting() == 2);
  order.complete(a, [&] { ran.push_back(0); });
  CHECK(ran == std::vector<int>{0, 1, 2});
  // A number that never completes (its request was refused) does not hold the later ones.
  const auto e = order.take();
  order.complete(e, [&] { ran.push_back(4); });
  order.skip(d);
  CHECK(ran == std::vector<int>{0, 1, 2, 4});
  CHECK(order.waiting() == 0);
}

TEST_CASE("instance_gate: preserve_ordering answers in arrival order; a refused request holds nothing",
          "[scheduler]") {
  gate_fixture f("dynamic_batching { preserve_ordering: true default_queue_policy { max_queue_size: 2 } }", 2, 1);
  std::mutex mu;
  std::vector<int> answered;
  auto numbered = [&](int n) {
    auto c = f.call();
    c->done = [&, n](inferwire::status) {
      std::lock_guard lock(mu);
      answered.push_back(n);
      ++f.done;
    };
    return c;
  };
  // Two run (two instances), two wait, the fifth is refused with its completion untouched.
  for (int n = 0; n < 4; ++n) REQUIRE(f.gate->schedule(numbered(n)));
  f.r.wait([&] { return f.r.batches.size() == 2; });
  auto refused = numbered(99);
  CHECK_FALSE(f.gate->schedule(refused));
  REQUIRE(refused->done);
  refused->finish({});  // the service answers it at once: it waits for nobody
  {
    std::lock_guard lock(mu);
    CHECK(answered == std::vector<int>{99});
  }
  f.let_go();
  f.r.wait([&] { return f.r.batches.size() == 4; });
  f.pool.join();
  CHECK(f.done == 5);
  CHECK(answered == std::vector<int>{99, 0, 1, 2, 3});
}
