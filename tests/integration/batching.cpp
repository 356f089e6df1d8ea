// SPDX-License-Identifier: Apache-2.0
// The dynamic batcher over HTTP: requests gathered into shared executions under concurrency,
// each answered with its own rows; priority order and queue limits inside the batcher; clients
// that go away while queued.
#include "common.hpp"

#include <boost/json/parse.hpp>
#include <boost/json/serialize.hpp>

#include <chrono>
#include <random>
#include <thread>

using namespace iwtest;

namespace {

// One request to batch_identity: `rows` x `len` INT32 values and strings derived from `seed`.
struct mixed_request {
  int seed = 0;
  int rows = 1;
  int len = 2;
  int priority = 0;  ///< 0: none given

  std::vector<int> ints() const {
    std::vector<int> v;
    for (int i = 0; i < rows * len; ++i) v.push_back(seed * 1000 + i);
    return v;
  }
  std::vector<std::string> strings() const {
    std::vector<std::string> v;
    for (int i = 0; i < rows * len; ++i) v.push_back("s" + std::to_string(seed) + "_" + std::string(static_cast<std::size_t>(i % 5), 'x'));
    return v;
  }
  std::string body() const {
    const std::string shape = "[" + std::to_string(rows) + "," + std::to_string(len) + "]";
    std::string strs = "[";
    for (const auto& s : strings()) strs += (strs.size() > 1 ? ",\"" : "\"") + s + "\"";
    strs += "]";
    std::string b = R"({"inputs":[{"name":"INPUT0","datatype":"INT32","shape":)" + shape + R"(,"data":)" +
                    json_array(ints()) + R"(},{"name":"INPUT1","datatype":"BYTES","shape":)" + shape +
                    R"(,"data":)" + strs + "}]";
    if (priority) b += R"(,"parameters":{"priority":)" + std::to_string(priority) + "}";
    return b + "}";
  }
};

const boost::json::object& output_of(const boost::json::value& response, std::string_view name) {
  for (const auto& o : response.at("outputs").as_array())
    if (o.at("name").as_string() == name) return o.as_object();
  throw std::runtime_error("no output " + std::string(name));
}

std::vector<std::int64_t> ints_of(const boost::json::value& v) {
  std::vector<std::int64_t> out;
  for (const auto& x : v.as_array()) out.push_back(x.to_number<std::int64_t>());
  return out;
}

boost::json::object stats_of(const std::string& model) {
  auto r = get("/v2/models/" + model + "/stats");
  REQUIRE(r.status == 200);
  return boost::json::parse(r.body).at("model_stats").at(0).as_object();
}

std::uint64_t count_of(const boost::json::object& stats, const char* key) {
  return stats.at(key).to_number<std::uint64_t>();
}

std::string ids_body(int value, int rows = 1) {
  std::vector<int> v(static_cast<std::size_t>(rows), value);
  return R"({"inputs":[{"name":"INPUT0","datatype":"INT32","shape":[)" + std::to_string(rows) +
         R"(,1],"data":)" + json_array(v) + "}]" +
         (value >= 100 ? R"(,"parameters":{"priority":1})" : "") + "}";
}

}  // namespace

TEST_CASE("dynamic batching: a random mix of shapes and priorities, each answered with its own rows",
          "[batching]") {
  // batch_identity: up to 8 rows per execution, 20 ms batching delay, 40 ms per execution.
  // Requests of two shapes (rows of 2 or 3 elements) cannot share an execution; each is
  // answered with exactly its own inputs.
  const int port = shared_server().http_port();
  std::mt19937 rng(20261123);
  std::vector<mixed_request> reqs;
  for (int i = 0; i < 32; ++i)
    reqs.push_back({i + 1, 1 + static_cast<int>(rng() % 3), 2 + static_cast<int>(rng() % 2), static_cast<int>(rng() % 3)});
  std::vector<std::unique_ptr<connection>> conns;
  for (const auto& q : reqs) {
    conns.push_back(std::make_unique<connection>(port));
    conns.back()->send(request_text("POST", "/v2/models/batch_identity/infer", q.body()));
  }
  std::uint64_t rows = 0;
  for (std::size_t i = 0; i < reqs.size(); ++i) {
    auto r = conns[i]->read();
    REQUIRE(r);
    REQUIRE(r->status == 200);
    const auto v = boost::json::parse(r->body);
    const auto& q = reqs[i];
    const auto& o0 = output_of(v, "OUTPUT0");
    CHECK(ints_of(o0.at("shape")) == std::vector<std::int64_t>{q.rows, q.len});
    const auto want = q.ints();
    CHECK(ints_of(o0.at("data")) == std::vector<std::int64_t>(want.begin(), want.end()));
    const auto& o1 = output_of(v, "OUTPUT1");
    std::vector<std::string> got;
    for (const auto& s : o1.at("data").as_array()) got.emplace_back(s.as_string());
    CHECK(got == q.strings());
    rows += static_cast<std::uint64_t>(q.rows);
  }
  // Executions were shared: fewer executions than requests; every row is counted once, in a
  // batch of at most 8.
  const auto s = stats_of("batch_identity");
  CHECK(count_of(s, "inference_count") == rows);
  CHECK(count_of(s, "execution_count") < reqs.size());
  std::uint64_t batched_rows = 0, executions = 0;
  for (const auto& b : s.at("batch_stats").as_array()) {
    const auto size = b.at("batch_size").to_number<std::uint64_t>();
    const auto n = b.at("compute_infer").at("count").to_number<std::uint64_t>();
    CHECK(size <= 8);
    batched_rows += size * n;
    executions += n;
  }
  CHECK(batched_rows == rows);
  CHECK(executions == count_of(s, "execution_count"));
  CHECK(s.at("inference_stats").at("success").at("count").to_number<std::uint64_t>() == reqs.size());
}

TEST_CASE("dynamic batching: queued requests that reach a preferred size go at once", "[batching]") {
  // batch_preferred: preferred sizes 4 and 8, max_batch_size 32, a 10 s queue delay. Two
  // requests of 2 rows make 4, a preferred size: they run together at once, as in Triton, and
  // do not wait out the delay for 8 or 32 rows.
  const int port = shared_server().http_port();
  const std::string body =
      R"({"inputs":[{"name":"INPUT0","datatype":"INT32","shape":[2,4],"data":[1,2,3,4,5,6,7,8]}]})";
  const auto start = std::chrono::steady_clock::now();
  connection a(port), b(port);
  a.send(request_text("POST", "/v2/models/batch_preferred/infer", body));
  std::this_thread::sleep_for(std::chrono::milliseconds(50));  // A waits alone (2 rows)
  b.send(request_text("POST", "/v2/models/batch_preferred/infer", body));
  for (auto* c : {&a, &b}) {
    auto r = c->read();
    REQUIRE(r);
    CHECK(r->status == 200);
  }
  // Far below the 10 s delay the old rule waited for.
  CHECK(std::chrono::steady_clock::now() - start < std::chrono::seconds(5));
  const auto s = stats_of("batch_preferred");
  CHECK(count_of(s, "execution_count") == 1);
  const auto& batches = s.at("batch_stats").as_array();
  REQUIRE(batches.size() == 1);
  CHECK(batches[0].at("batch_size").to_number<std::uint64_t>() == 4);
}

TEST_CASE("ensembles: each step is a request to its model's scheduler (queue limit, batching, pending)",
          "[batching][ensemble]") {
  // ensemble_queue's one step is batch_slow: one instance, 600 ms per execution, batches of up
  // to 8, a queue of 4. Ten requests at once to the ensemble: one runs, four wait in
  // batch_slow's queue (and run together as one batch), the other five are refused with the
  // queue's text, as in Triton. (When an ensemble ran its steps itself, on its one instance,
  // all ten were accepted and ran one at a time, six seconds in all, never batched.)
  const int port = shared_server().http_port();
  const std::string body = R"({"inputs":[{"name":"IN","datatype":"INT32","shape":[1,1],"data":[7]}]})";
  const auto before = stats_of("batch_slow");
  const auto start = std::chrono::steady_clock::now();
  std::vector<std::unique_ptr<connection>> clients;
  for (int i = 0; i < 10; ++i) {
    clients.push_back(std::make_unique<connection>(port));
    clients.back()->send(request_text("POST", "/v2/models/ensemble_queue/infer", body));
  }
  // While the first runs, the others wait in batch_slow's own queue.
  std::this_thread::sleep_for(std::chrono::milliseconds(300));
  const std::string metrics = request(shared_server().metrics_port(), "GET", "/metrics").body;
  const std::string pending = R"(nv_inference_pending_request_count{model="batch_slow",version="1"} )";
  const auto at = metrics.find(pending);
  REQUIRE(at != std::string::npos);
  CHECK(std::stoi(metrics.substr(at + pending.size())) >= 1);
  int ok = 0, refused = 0;
  for (auto& c : clients) {
    auto r = c->read();
    REQUIRE(r);
    if (r->status == 200) {
      ++ok;
      CHECK(r->body.find(R"("name":"OUT","datatype":"INT32","shape":[1,1],"data":[7])") != std::string::npos);
    } else {
      CHECK(r->status == 503);
      CHECK(error_of(*r) == "Exceeds maximum queue size");
      ++refused;
    }
  }
  CHECK(ok + refused == 10);
  CHECK(refused >= 3);
  CHECK(std::chrono::steady_clock::now() - start < std::chrono::milliseconds(2500));  // two executions, not ten
  const auto after = stats_of("batch_slow");
  CHECK(count_of(after, "execution_count") - count_of(before, "execution_count") <= 3);
  bool batched = false;
  for (const auto& b : after.at("batch_stats").as_array())
    batched |= b.at("batch_size").to_number<std::uint64_t>() >= 3;
  CHECK(batched);
}

TEST_CASE("dynamic batching: add/sub over batches, two instances at once", "[batching]") {
  // batch_simple: preferred sizes 4 and 8, up to 200 ms of delay, two instances.
  const int port = shared_server().http_port();
  std::vector<std::unique_ptr<connection>> conns;
  auto body = [](int k) {
    std::vector<int> a(16), b(16);
    for (int i = 0; i < 16; ++i) {
      a[static_cast<std::size_t>(i)] = k * 100 + i;
      b[static_cast<std::size_t>(i)] = k;
    }
    return R"({"inputs":[{"name":"INPUT0","datatype":"INT32","shape":[1,16],"data":)" + json_array(a) +
           R"(},{"name":"INPUT1","datatype":"INT32","shape":[1,16],"data":)" + json_array(b) + "}]}";
  };
  constexpr int n = 16;
  for (int k = 0; k < n; ++k) {
    conns.push_back(std::make_unique<connection>(port));
    conns.back()->send(request_text("POST", "/v2/models/batch_simple/infer", body(k)));
  }
  for (int k = 0; k < n; ++k) {
    auto r = conns[static_cast<std::size_t>(k)]->read();
    REQUIRE(r);
    REQUIRE(r->status == 200);
    const auto v = boost::json::parse(r->body);
    std::vector<std::int64_t> sum, diff;
    for (int i = 0; i < 16; ++i) {
      sum.push_back(k * 100 + i + k);
      diff.push_back(k * 100 + i - k);
    }
    CHECK(ints_of(output_of(v, "OUTPUT0").at("data")) == sum);
    CHECK(ints_of(output_of(v, "OUTPUT1").at("data")) == diff);
  }
  const auto s = stats_of("batch_simple");
  CHECK(count_of(s, "inference_count") == n);
  CHECK(count_of(s, "execution_count") < n);
}

TEST_CASE("dynamic batching: higher priority requests form the next batch and the queue limit holds",
          "[batching][schedule]") {
  // batch_priority: one instance, 300 ms per execution, up to 4 rows, no batching delay; the
  // default level (2) queues at most 6 requests.
  const int port = shared_server().http_port();
  connection a(port);
  a.send(request_text("POST", "/v2/models/batch_priority/infer", ids_body(1)));
  std::this_thread::sleep_for(std::chrono::milliseconds(100));  // A runs, the rest queue
  std::vector<std::unique_ptr<connection>> low, high;
  for (int i = 0; i < 6; ++i) {
    low.push_back(std::make_unique<connection>(port));
    low.back()->send(request_text("POST", "/v2/models/batch_priority/infer", ids_body(10 + i)));
  }
  for (int i = 0; i < 4; ++i) {
    high.push_back(std::make_unique<connection>(port));
    high.back()->send(request_text("POST", "/v2/models/batch_priority/infer", ids_body(100 + i)));
  }
  std::this_thread::sleep_for(std::chrono::milliseconds(50));
  // The default level is full: a seventh request there is refused at once.
  auto full = post("/v2/models/batch_priority/infer", ids_body(20));
  CHECK(full.status == 503);
  CHECK(error_of(full) == "Exceeds maximum queue size");
  auto ra = a.read();
  REQUIRE(ra);
  CHECK(ra->status == 200);
  // The four high-priority requests make the next batch (they came after the low ones).
  for (int i = 0; i < 4; ++i) {
    auto r = high[static_cast<std::size_t>(i)]->read();
    REQUIRE(r);
    CHECK(r->status == 200);
    CHECK(ints_of(output_of(boost::json::parse(r->body), "OUTPUT0").at("data")) == std::vector<std::int64_t>{100 + i});
  }
  CHECK_FALSE(low.front()->readable_now());
  for (int i = 0; i < 6; ++i) {
    auto r = low[static_cast<std::size_t>(i)]->read();
    REQUIRE(r);
    CHECK(r->status == 200);
    CHECK(ints_of(output_of(boost::json::parse(r->body), "OUTPUT0").at("data")) == std::vector<std::int64_t>{10 + i});
  }
  // A, the high batch, then the low ones in two batches (4 and 2).
  const auto s = stats_of("batch_priority");
  CHECK(count_of(s, "inference_count") == 11);
  CHECK(count_of(s, "execution_count") == 4);
}

TEST_CASE("dynamic batching: clients that leave while queued lose nothing for the others",
          "[batching]") {
  const int port = shared_server().http_port();
  // The shared server may have served this model before (the whole binary in one process).
  auto successes = [] {
    return stats_of("batch_identity").at("inference_stats").at("success").at("count").to_number<std::uint64_t>();
  };
  const std::uint64_t before = successes();
  std::vector<mixed_request> reqs;
  for (int i = 0; i < 12; ++i) reqs.push_back({i + 1, 1, 2, 0});
  std::vector<std::unique_ptr<connection>> conns;
  for (const auto& q : reqs) {
    conns.push_back(std::make_unique<connection>(port));
    conns.back()->send(request_text("POST", "/v2/models/batch_identity/infer", q.body()));
  }
  // Every other client goes away before its answer.
  for (std::size_t i = 0; i < conns.size(); i += 2) conns[i].reset();
  for (std::size_t i = 1; i < conns.size(); i += 2) {
    auto r = conns[i]->read();
    REQUIRE(r);
    REQUIRE(r->status == 200);
    const auto want = reqs[i].ints();
    CHECK(ints_of(output_of(boost::json::parse(r->body), "OUTPUT0").at("data")) ==
          std::vector<std::int64_t>(want.begin(), want.end()));
  }
  // Answered once: nothing more arrives on the connections that stayed.
  std::this_thread::sleep_for(std::chrono::milliseconds(200));
  for (std::size_t i = 1; i < conns.size(); i += 2) CHECK_FALSE(conns[i]->readable_now());
  // The model still serves, and every request is accounted for once: executed or not.
  CHECK(post("/v2/models/batch_identity/infer", reqs[0].body()).status == 200);
  const auto ok = successes() - before;
  CHECK(ok >= 7);
  CHECK(ok <= 13);
}

namespace {

std::string sequence_body(std::uint64_t id, int x, bool start, bool end) {
  return R"({"parameters":{"sequence_id":)" + std::to_string(id) + R"(,"sequence_start":)" +
         (start ? "true" : "false") + R"(,"sequence_end":)" + (end ? "true" : "false") +
         R"(},"inputs":[{"name":"INPUT","datatype":"INT32","shape":[1,1],"data":[)" + std::to_string(x) + "]}]}";
}

std::int64_t sequence_output(const reply& r) {
  const auto v = ints_of(output_of(boost::json::parse(r.body), "OUTPUT").at("data"));
  return v.empty() ? -1 : v.front();
}

}  // namespace

TEST_CASE("sequence batching, oldest: sequences share executions, each row with its own state",
          "[batching][sequence]") {
  // oldest_accumulator: running sums per sequence (END adds the correlation ID); up to 4
  // sequences per execution, 30 ms of batching delay.
  const int port = shared_server().http_port();
  const std::vector<std::uint64_t> ids{11, 12, 13, 14};
  std::map<std::uint64_t, std::int64_t> sum;
  for (int step = 0; step < 3; ++step) {
    std::vector<std::unique_ptr<connection>> conns;
    for (auto id : ids) {
      conns.push_back(std::make_unique<connection>(port));
      const int x = static_cast<int>(id) * 10 + step;
      conns.back()->send(request_text("POST", "/v2/models/oldest_accumulator/infer",
                                      sequence_body(id, x, step == 0, step == 2)));
      sum[id] = (step == 0 ? 0 : sum[id]) + x + (step == 2 ? static_cast<std::int64_t>(id) : 0);
    }
    for (std::size_t i = 0; i < ids.size(); ++i) {
      auto r = conns[i]->read();
      REQUIRE(r);
      REQUIRE(r->status == 200);
      CHECK(sequence_output(*r) == sum[ids[i]]);
    }
  }
  auto s = stats_of("oldest_accumulator");
  CHECK(count_of(s, "inference_count") == 12);
  CHECK(count_of(s, "execution_count") < 12);
  const auto executions_before = count_of(s, "execution_count");

  // Two requests of one sequence never share an execution: the second runs after the first.
  connection a(port), b(port);
  a.send(request_text("POST", "/v2/models/oldest_accumulator/infer", sequence_body(21, 5, true, false)));
  std::this_thread::sleep_for(std::chrono::milliseconds(10));
  b.send(request_text("POST", "/v2/models/oldest_accumulator/infer", sequence_body(21, 7, false, true)));
  auto ra = a.read(), rb = b.read();
  REQUIRE(ra);
  REQUIRE(rb);
  CHECK(sequence_output(*ra) == 5);
  CHECK(sequence_output(*rb) == 5 + 7 + 21);
  s = stats_of("oldest_accumulator");
  CHECK(count_of(s, "execution_count") == executions_before + 2);
  // A continuation of an unknown sequence is refused alone.
  auto lost = post("/v2/models/oldest_accumulator/infer", sequence_body(99, 1, false, false));
  CHECK(lost.status == 400);
  CHECK(error_of(lost).find("must specify the START flag") != std::string::npos);
}

TEST_CASE("sequence batching: a sequence whose request waits in the queue is not idle", "[batching][sequence]") {
  // sequence_queued: idle after 100 ms, 400 ms per execution, one instance. The START runs;
  // the next request of the sequence waits behind it for longer than the idle time, and is
  // still served as the sequence's (Triton counts a sequence idle only when nothing of it is
  // queued or running).
  const int port = shared_server().http_port();
  connection a(port), b(port);
  a.send(request_text("POST", "/v2/models/sequence_queued/infer", sequence_body(31, 5, true, false)));
  std::this_thread::sleep_for(std::chrono::milliseconds(50));  // A runs
  b.send(request_text("POST", "/v2/models/sequence_queued/infer", sequence_body(31, 7, false, true)));
  auto ra = a.read(), rb = b.read();
  REQUIRE(ra);
  REQUIRE(rb);
  CHECK(ra->status == 200);
  INFO(rb->body);
  REQUIRE(rb->status == 200);
  CHECK(sequence_output(*ra) == 5);
  CHECK(sequence_output(*rb) == 5 + 7 + 31);
  // Once nothing of it is queued or running, it idles out as before.
  CHECK(post("/v2/models/sequence_queued/infer", sequence_body(32, 1, true, false)).status == 200);
  std::this_thread::sleep_for(std::chrono::milliseconds(300));
  auto lost = post("/v2/models/sequence_queued/infer", sequence_body(32, 1, false, true));
  CHECK(lost.status == 400);
  CHECK(error_of(lost).find("must specify the START flag") != std::string::npos);
}

namespace {

// batch_identity with the longest queue delay there is (2^40 us, about 12 days): a lone
// request waits for seven more.
void load_long_delay(int port) {
  const std::string config =
      R"({"name":"batch_identity","backend":"identity","max_batch_size":8,)"
      R"("input":[{"name":"INPUT0","data_type":"TYPE_INT32","dims":[-1]},{"name":"INPUT1","data_type":"TYPE_STRING","dims":[-1]}],)"
      R"("output":[{"name":"OUTPUT0","data_type":"TYPE_INT32","dims":[-1]},{"name":"OUTPUT1","data_type":"TYPE_STRING","dims":[-1]}],)"
      R"("dynamic_batching":{"max_queue_delay_microseconds":"9000000000000000000"}})";
  REQUIRE(request(port, "POST", "/v2/repository/models/batch_identity/load",
                  boost::json::serialize(boost::json::object{{"parameters", {{"config", config}}}}))
              .status == 200);
}

/// A lone request's reply carries its own rows.
void check_lone_reply(const std::optional<reply>& r, int seed) {
  REQUIRE(r);
  CHECK(r->status == 200);
  const auto want = mixed_request{seed}.ints();
  CHECK(ints_of(output_of(boost::json::parse(r->body), "OUTPUT0").at("data")) ==
        std::vector<std::int64_t>(want.begin(), want.end()));
}

}  // namespace

// A batch that waits for its queue delay runs at once when the server drains: nothing more
// will come to fill it. Its delay timer, still pending after earlier batches filled up, does
// not hold the exit either.
TEST_CASE("dynamic batching: SIGTERM runs a batch that waits out a long queue delay, and exits at once",
          "[batching][launch]") {
  server_process s({"--model-control-mode=explicit", "--exit-timeout-secs=30"});
  const int port = s.http_port();
  load_long_delay(port);
  // Eight requests fill a batch and run; the delay timer the first one armed stays pending.
  {
    std::vector<std::unique_ptr<connection>> full;
    for (int i = 0; i < 8; ++i) {
      full.push_back(std::make_unique<connection>(port));
      full.back()->send(request_text("POST", "/v2/models/batch_identity/infer", mixed_request{i + 1}.body()));
    }
    for (auto& c : full) {
      auto r = c->read();
      REQUIRE(r);
      CHECK(r->status == 200);
    }
  }
  connection lone(port);
  lone.send(request_text("POST", "/v2/models/batch_identity/infer", mixed_request{42}.body()));
  std::this_thread::sleep_for(std::chrono::milliseconds(300));
  CHECK_FALSE(lone.readable_now());
  const auto t0 = std::chrono::steady_clock::now();
  int status = -1;
  std::thread stopper([&] { status = s.stop(); });
  auto r = lone.read();
  stopper.join();
  CHECK(status == 0);
  CHECK(std::chrono::steady_clock::now() - t0 < std::chrono::seconds(5));
  check_lone_reply(r, 42);
}

// The same for an unload (and so a reload): the leaving version gets no new request.
TEST_CASE("dynamic batching: an unload runs a batch that waits out a long queue delay", "[batching][repository]") {
  server_process s({"--model-control-mode=explicit"});
  const int port = s.http_port();
  load_long_delay(port);
  connection lone(port);
  lone.send(request_text("POST", "/v2/models/batch_identity/infer", mixed_request{7}.body()));
  std::this_thread::sleep_for(std::chrono::milliseconds(300));
  CHECK_FALSE(lone.readable_now());
  const auto t0 = std::chrono::steady_clock::now();
  CHECK(request(port, "POST", "/v2/repository/models/batch_identity/unload").status == 200);
  CHECK(std::chrono::steady_clock::now() - t0 < std::chrono::seconds(5));
  check_lone_reply(lone.read(), 7);
  CHECK(s.stop() == 0);
}

TEST_CASE("sequence batching: a request that waits past its timeout is rejected", "[batching][sequence]") {
  // sequence_queued: one instance, 400 ms per execution. Sequence 51 runs; sequence 52's START,
  // with a 100 ms timeout, waits behind it and is answered at its deadline with Triton's text.
  const int port = shared_server().http_port();
  connection a(port), b(port);
  a.send(request_text("POST", "/v2/models/sequence_queued/infer", sequence_body(51, 5, true, true)));
  std::this_thread::sleep_for(std::chrono::milliseconds(50));  // A runs
  const auto sent = std::chrono::steady_clock::now();
  b.send(request_text("POST", "/v2/models/sequence_queued/infer",
                      R"({"parameters":{"sequence_id":52,"sequence_start":true,"sequence_end":true,"timeout":100000},)"
                      R"("inputs":[{"name":"INPUT","datatype":"INT32","shape":[1,1],"data":[1]}]})"));
  auto rb = b.read();
  REQUIRE(rb);
  CHECK(rb->status == 503);
  CHECK(error_of(*rb) == "timeout of the corresponding sequence has been expired");
  CHECK(std::chrono::steady_clock::now() - sent < std::chrono::milliseconds(300));  // at its deadline, before A ends
  auto ra = a.read();
  REQUIRE(ra);
  CHECK(ra->status == 200);
}
