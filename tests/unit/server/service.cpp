// SPDX-License-Identifier: Apache-2.0
// The service's inference call, start_infer, against a fake backend on a model repository in a
// temporary folder: no sockets, no frontend. Each step's outcome is checked with what it counts.
#include "service.hpp"

#include <catch2/catch.hpp>

#include <condition_variable>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <mutex>
#include <new>
#include <stdexcept>
#include <thread>

namespace srv = inferwire::server;
namespace v2 = inferwire::v2;
namespace fs = std::filesystem;
using namespace std::chrono_literals;

namespace {

// OUTPUT0 = INPUT0, counted; executions wait while `gate_closed` (the queue cases).
struct fake_state {
  std::mutex mu;
  std::condition_variable cv;
  int executions = 0;
  bool gate_closed = false;
};
fake_state fake;

class fake_backend final : public srv::backend {
 public:
  inferwire::status execute(srv::execution& e) override {
    std::unique_lock lock(fake.mu);
    ++fake.executions;
    fake.cv.notify_all();
    fake.cv.wait(lock, [] { return !fake.gate_closed; });
    const v2::infer_input* in = e.input("INPUT0");
    if (!in) return {inferwire::errc::internal, "no INPUT0"};
    v2::infer_output out;
    out.name = "OUTPUT0";
    out.datatype = in->datatype;
    out.shape = in->shape;
    out.data = v2::tensor_data::view(in->data.bytes());
    e.outputs.push_back(std::move(out));
    return {};
  }
};

void write_model(const fs::path& root, const std::string& name, const std::string& extra) {
  fs::create_directories(root / name / "1");
  std::ofstream(root / name / "config.pbtxt")
      << "name: \"" << name << "\"\nbackend: \"unit_fake\"\nmax_batch_size: 0\n"
      << "input [{ name: \"INPUT0\" data_type: TYPE_FP32 dims: [ 4 ] }]\n"
      << "output [{ name: \"OUTPUT0\" data_type: TYPE_FP32 dims: [ 4 ] }]\n"
      << extra;
}

srv::options options_for(const fs::path& root) {
  srv::options o;
  o.model_repositories = {root.string()};
  o.model_control_mode = "none";
  o.execution_thread_count = 2;
  o.model_load_thread_count = 1;
  o.http_max_inflight_bytes = 4096;
  o.log_info = o.log_warning = o.log_error = false;
  return o;
}

struct fixture {
  fs::path root;
  std::unique_ptr<srv::server_state> s;
  std::unique_ptr<srv::service> svc;
  const float values[4] = {1, 2, 3, 4};

  fixture() {
    srv::register_backend("unit_fake", [](const srv::model_config&, inferwire::status&) {
      return std::make_unique<fake_backend>();
    });
    root = fs::temp_directory_path() / ("inferwire_service_test_" + std::to_string(::getpid()));
    fs::remove_all(root);
    write_model(root, "plain", "");
    write_model(root, "queued", "parameters { key: \"execute_delay_ms\" value: { string_value: \"0\" } }\n"
                                "instance_group [{ count: 1 kind: KIND_CPU }]\n");
    write_model(root, "bounded", "dynamic_batching { default_queue_policy { max_queue_size: 1 } }\n");
    s = std::make_unique<srv::server_state>(options_for(root));
    REQUIRE(s->repository.startup({}, 1));
    svc = std::make_unique<srv::service>(*s);
    std::lock_guard lock(fake.mu);
    fake.executions = 0;
    fake.gate_closed = false;
  }
  ~fixture() {
    open();
    svc.reset();
    s->execution.join();
    s.reset();
    fs::remove_all(root);
  }
  void open() {
    {
      std::lock_guard lock(fake.mu);
      fake.gate_closed = false;
    }
    fake.cv.notify_all();
  }
  v2::infer_statistics stats(const std::string& model) {
    v2::statistics_response out;
    REQUIRE_FALSE(svc->statistics(model, "", out));
    REQUIRE(out.model_stats.size() == 1);
    return out.model_stats[0].inference_stats;
  }
  // A decoder giving INPUT0 [4] FP32 as a view of `values`.
  srv::decoded good(srv::infer_call& c) {
    c.request.inputs.resize(1);
    auto& in = c.request.inputs[0];
    in.name = "INPUT0";
    in.datatype = inferwire::data_type::fp32;
    in.shape = {4};
    in.data = v2::tensor_data::view(std::as_bytes(std::span(values)));
    return {};
  }
};

// The completions a test saw.
struct completions {
  std::mutex mu;
  std::condition_variable cv;
  std::vector<inferwire::status> seen;
  std::function<void(inferwire::status)> done() {
    return [this](inferwire::status st) {
      std::lock_guard lock(mu);
      seen.push_back(std::move(st));
      cv.notify_all();
    };
  }
  void wait_for(std::size_t n) {
    std::unique_lock lock(mu);
    REQUIRE(cv.wait_for(lock, 30s, [&] { return seen.size() >= n; }));
  }
};

}  // namespace

TEST_CASE("start_infer: a valid call runs through the backend and completes once", "[service]") {
  fixture f;
  completions c;
  auto call = std::make_shared<srv::infer_call>();
  const auto started = f.svc->start_infer(call, "plain", "", [&](srv::infer_call& x) { return f.good(x); }, {}, c.done());
  REQUIRE_FALSE(started);
  // A small call of a plain model ran inline: complete before start_infer returned.
  REQUIRE(c.seen.size() == 1);
  CHECK_FALSE(c.seen[0]);
  REQUIRE(call->response.outputs.size() == 1);
  CHECK(call->response.outputs[0].name == "OUTPUT0");
  CHECK(std::memcmp(call->response.outputs[0].data.bytes().data(), f.values, sizeof f.values) == 0);
  CHECK(f.stats("plain").success.count == 1);
  CHECK(f.stats("plain").fail.count == 0);
  // The call counts as in flight while it lives.
  CHECK(f.s->in_flight.load() == 1);
  CHECK_FALSE(call->done);
  call.reset();
  CHECK(f.s->in_flight.load() == 0);
}

TEST_CASE("start_infer: failures before the run, and what each counts", "[service]") {
  fixture f;
  completions c;
  bool decoded = false;
  auto decode_flag = [&](srv::infer_call& x) {
    decoded = true;
    return f.good(x);
  };
  SECTION("an unknown model: not found, the decoder never runs, nothing counted") {
    const auto started = f.svc->start_infer(std::make_shared<srv::infer_call>(), "nothing", "", decode_flag, {}, c.done());
    CHECK(started.why == srv::infer_start::failed);
    CHECK(started.error);
    CHECK_FALSE(decoded);
  }
  SECTION("a decoding error is the request's failure, counted") {
    const auto started = f.svc->start_infer(std::make_shared<srv::infer_call>(), "plain", "", [](srv::infer_call&) {
      return srv::decoded({inferwire::errc::invalid_arg, "bad body"});
    }, {}, c.done());
    CHECK(started.why == srv::infer_start::failed);
    CHECK(started.error.message() == "bad body");
    CHECK(f.stats("plain").fail.count == 1);
  }
  SECTION("a frontend's refusal is its own answer, not counted") {
    const auto started = f.svc->start_infer(std::make_shared<srv::infer_call>(), "plain", "", [](srv::infer_call&) {
      return srv::decoded::refuse({inferwire::errc::unsupported, "not over this transport"});
    }, {}, c.done());
    CHECK(started.why == srv::infer_start::refused);
    CHECK(started.error.message() == "not over this transport");
    CHECK(f.stats("plain").fail.count == 0);
  }
  SECTION("what a decoder throws is the call's error") {
    auto started = f.svc->start_infer(std::make_shared<srv::infer_call>(), "plain", "", [](srv::infer_call&) -> srv::decoded {
      throw std::bad_alloc();
    }, {}, c.done());
    CHECK(started.why == srv::infer_start::failed);
    CHECK(started.error.message() == "failed to allocate memory for the request");
    started = f.svc->start_infer(std::make_shared<srv::infer_call>(), "plain", "", [](srv::infer_call&) -> srv::decoded {
      throw std::runtime_error("odd");
    }, {}, c.done());
    CHECK(started.error.message() == "odd");
    CHECK(f.stats("plain").fail.count == 2);
  }
  SECTION("tensors decoding made that pass the in-flight budget: refused, not counted") {
    const auto started = f.svc->start_infer(std::make_shared<srv::infer_call>(), "plain", "", [](srv::infer_call& x) {
      x.request.inputs.resize(1);
      x.request.inputs[0].name = "INPUT0";
      x.request.inputs[0].data = v2::tensor_data::own(std::string(8192, 'x'));
      return srv::decoded{};
    }, {}, c.done());
    CHECK(started.why == srv::infer_start::budget);
    CHECK(started.error.message().find("--http-max-inflight-bytes") != std::string::npos);
    CHECK(f.stats("plain").fail.count == 0);
    CHECK(f.s->body_budget.used() == 0);
  }
  SECTION("an invalid request (validation) is counted") {
    const auto started = f.svc->start_infer(std::make_shared<srv::infer_call>(), "plain", "", [&](srv::infer_call& x) {
      f.good(x);
      x.request.inputs[0].name = "WRONG";
      return srv::decoded{};
    }, {}, c.done());
    CHECK(started.why == srv::infer_start::failed);
    CHECK(started.error.code() == inferwire::errc::invalid_arg);
    CHECK(f.stats("plain").fail.count == 1);
  }
  CHECK(c.seen.empty());  // `done` is never called for a call that did not start
  CHECK(f.s->in_flight.load() == 0);
}

TEST_CASE("start_infer: a client that gave up before the run gets cancelled", "[service]") {
  fixture f;
  completions c;
  srv::infer_hooks hooks;
  hooks.cancelled = [] { return true; };
  auto call = std::make_shared<srv::infer_call>();
  REQUIRE_FALSE(f.svc->start_infer(call, "queued", "", [&](srv::infer_call& x) { return f.good(x); }, hooks, c.done()));
  REQUIRE(c.seen.size() == 1);
  CHECK(c.seen[0].code() == inferwire::errc::cancelled);
  CHECK(fake.executions == 0);
}

TEST_CASE("start_infer: queued calls run on the pool, a full queue is refused and counted", "[service]") {
  fixture f;
  completions c;
  {
    std::lock_guard lock(fake.mu);
    fake.gate_closed = true;
  }
  auto start = [&] {
    return f.svc->start_infer(std::make_shared<srv::infer_call>(), "bounded", "", [&](srv::infer_call& x) { return f.good(x); },
                              {}, c.done());
  };
  REQUIRE_FALSE(start());  // runs (and waits in the backend)
  {
    std::unique_lock lock(fake.mu);
    REQUIRE(fake.cv.wait_for(lock, 30s, [] { return fake.executions == 1; }));
  }
  REQUIRE_FALSE(start());  // queued
  REQUIRE_FALSE(start());  // past max_queue_size: completed with the refusal
  c.wait_for(1);
  CHECK(c.seen[0].message() == "Exceeds maximum queue size");
  CHECK(f.stats("bounded").fail.count == 1);
  f.open();
  c.wait_for(3);
  CHECK_FALSE(c.seen[1]);
  CHECK_FALSE(c.seen[2]);
  CHECK(f.stats("bounded").success.count == 2);
}

TEST_CASE("model lookup: a thread's last lookup follows loads and unloads", "[service][repository]") {
  fixture f;  // (registers the fake backend and writes the models)
  srv::options o = options_for(f.root);
  o.model_control_mode = "explicit";
  auto s = std::make_unique<srv::server_state>(o);
  REQUIRE(s->repository.startup({}, 1));
  srv::model_repository& repo = s->repository;
  inferwire::status st;
  CHECK_FALSE(repo.find("plain", "", st));
  CHECK(st.code() == inferwire::errc::not_found);

  REQUIRE_FALSE(repo.load("plain", {}));
  std::weak_ptr<srv::model_version> first;
  {
    const auto a = repo.find("plain", "", st);
    REQUIRE(a);
    CHECK_FALSE(st);
    const auto b = repo.find("plain", "", st);  // the thread's last lookup
    CHECK(b == a);
    CHECK_FALSE(st);
    CHECK(repo.find("plain", "1", st) == a);
    CHECK_FALSE(repo.find("plain", "2", st));
    CHECK(st.code() == inferwire::errc::not_found);
    CHECK(repo.find("plain", "", st) == a);
    CHECK_FALSE(st);
    // The same name in another repository is that repository's model.
    CHECK(f.s->repository.find("plain", "", st) != a);
    CHECK(repo.find("plain", "", st) == a);
    first = a;
  }
  REQUIRE_FALSE(repo.unload("plain", false));
  CHECK_FALSE(repo.find("plain", "", st));
  CHECK(st.code() == inferwire::errc::not_found);
  // Nothing the thread remembers keeps the unloaded version alive.
  for (int i = 0; i < 500 && !first.expired(); ++i) std::this_thread::sleep_for(10ms);
  CHECK(first.expired());

  REQUIRE_FALSE(repo.load("plain", {}));
  {
    const auto again = repo.find("plain", "", st);
    REQUIRE(again);
    CHECK_FALSE(st);
    CHECK(repo.find("plain", "", st) == again);
  }
  // (An unload waits, up to a minute, for whoever still holds the version: hold none.)
  REQUIRE_FALSE(repo.unload("plain", false));
  s->execution.join();
}
