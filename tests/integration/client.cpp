// SPDX-License-Identifier: Apache-2.0
// The HTTP client SDK against the real inferwire-server (and against small scripted servers
// for the failure cases a real server does not produce on demand).
#include <inferwire/http/client.hpp>
#include <inferwire/http/tls_client.hpp>

#include "common.hpp"

#include <boost/asio/bind_cancellation_slot.hpp>
#include <boost/asio/cancellation_signal.hpp>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/deferred.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/read_until.hpp>
#include <boost/asio/ssl/stream.hpp>
#include <boost/asio/streambuf.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <boost/asio/use_future.hpp>
#include <boost/beast/core/error.hpp>
#include <boost/beast/http/error.hpp>

#include <atomic>
#include <filesystem>
#include <fstream>
#include <functional>
#include <future>
#include <optional>
#include <sstream>
#include <thread>

using namespace iwtest;
namespace v2 = inferwire::v2;
namespace ih = inferwire::http;
using inferwire::data_type;
using namespace std::chrono_literals;

namespace {

std::string port_of(const server_process& s) { return std::to_string(s.http_port()); }

ih::client blocking_client(const server_process& s = shared_server(), ih::client_options o = {}) {
  return ih::client("127.0.0.1", port_of(s), std::move(o));
}

/// The `simple` request with binary inputs (views of the vectors, which must outlive it).
struct simple_inputs {
  std::vector<std::int32_t> a = std::vector<std::int32_t>(16), b = std::vector<std::int32_t>(16, 1);
  simple_inputs() {
    for (int i = 0; i < 16; ++i) a[i] = i;
  }
  v2::infer_request request(v2::tensor_encoding e = v2::tensor_encoding::binary) const {
    v2::infer_request r;
    r.inputs.push_back(v2::make_input("INPUT0", a, {1, 16}, e));
    r.inputs.push_back(v2::make_input("INPUT1", b, {1, 16}, e));
    return r;
  }
};

void check_simple(const ih::infer_result& r) {
  auto sum = r.as<std::int32_t>("OUTPUT0");
  auto diff = r.as<std::int32_t>("OUTPUT1");
  REQUIRE(sum.size() == 16);
  REQUIRE(diff.size() == 16);
  for (int i = 0; i < 16; ++i) {
    CHECK(sum[i] == i + 1);
    CHECK(diff[i] == i - 1);
  }
}

/// A scripted TCP server on a free loopback port: each accepted connection is handed to
/// `script` on the server's own thread, one connection after the other.
class scripted_server {
 public:
  using script_fn = std::function<void(tcp::socket&, int index)>;
  scripted_server(int connections, script_fn script)
      : acceptor_(ioc_, tcp::endpoint(net::ip::make_address("127.0.0.1"), 0)) {
    port_ = acceptor_.local_endpoint().port();
    thread_ = std::thread([this, connections, script = std::move(script)] {
      for (int i = 0; i < connections; ++i) {
        tcp::socket s(ioc_);
        boost::system::error_code ec;
        acceptor_.accept(s, ec);
        if (ec) return;
        ++accepted_;
        script(s, i);
      }
    });
  }
  ~scripted_server() {
    boost::system::error_code ec;
    acceptor_.close(ec);
    thread_.join();
  }
  std::string port() const { return std::to_string(port_); }
  int accepted() const { return accepted_; }

  /// Reads one request (headers and a Content-Length body); false at end of stream.
  static bool read_request(tcp::socket& s, net::streambuf& buf) {
    boost::system::error_code ec;
    std::size_t n = net::read_until(s, buf, "\r\n\r\n", ec);
    if (ec) return false;
    std::string head(net::buffers_begin(buf.data()), net::buffers_begin(buf.data()) + n);
    buf.consume(n);
    std::size_t length = 0;
    if (auto p = head.find("\r\nContent-Length: "); p != std::string::npos)
      length = std::stoul(head.substr(p + 18));
    if (buf.size() < length) net::read(s, buf, net::transfer_exactly(length - buf.size()), ec);
    buf.consume(length);
    return !ec;
  }

 private:
  net::io_context ioc_;
  tcp::acceptor acceptor_;
  unsigned short port_ = 0;
  std::atomic<int> accepted_{0};
  std::thread thread_;
};

const std::string live_reply = "HTTP/1.1 200 OK\r\nContent-Length: 0\r\n\r\n";

}  // namespace

TEST_CASE("client: health, metadata and config", "[client]") {
  auto c = blocking_client();
  CHECK(c.server_live());
  CHECK(c.server_ready());
  CHECK(c.model_ready("simple"));
  CHECK(c.model_ready({"simple", "1"}));
  CHECK_FALSE(c.model_ready("no_such_model"));
  CHECK_FALSE(c.model_ready({"simple", "7"}));

  auto sm = c.server_metadata();
  CHECK(sm.name == "triton");
  CHECK_FALSE(sm.extensions.empty());

  auto mm = c.model_metadata("simple");
  CHECK(is_simple_metadata(mm));
  CHECK(c.model_metadata({"simple", "1"}) == mm);

  auto cfg = c.model_config("simple");
  CHECK(cfg.at("name").as_string() == "simple");
  CHECK(cfg.at("max_batch_size").to_number<int>() == 8);

  // A name with characters a URL path cannot carry is percent-encoded into one segment (the
  // server, like Triton, does not decode it).
  ih::error_code ec;
  c.model_metadata("a b/c", ec);
  CHECK(ih::server_status(ec) == 404);
  CHECK(ec.message() == "Request for unknown model: 'a%20b%2Fc' is not found");
}

TEST_CASE("client: generate and generate_stream", "[client][generate]") {
  auto c = blocking_client();
  const boost::json::object request{{"INPUT0", boost::json::array{0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15}},
                                    {"INPUT1", boost::json::array{1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1}},
                                    {"id", "g"}};
  const auto reply = c.generate("simple", request);
  CHECK(reply.at("id") == "g");
  CHECK(reply.at("model_name") == "simple");
  CHECK(reply.at("OUTPUT0").as_array().at(15).to_number<int>() == 16);
  const auto events = c.generate_stream({"simple", "1"}, request);
  REQUIRE(events.size() == 1);
  CHECK(events[0].at("OUTPUT1").as_array().at(0).to_number<int>() == -1);
  // A decoupled model's one response.
  const auto one = c.generate_stream("decoupled_identity", {{"INPUT0", boost::json::array{4, 5}}});
  REQUIRE(one.size() == 1);
  CHECK(one[0].at("OUTPUT0").as_array().at(1).to_number<int>() == 5);
  // Event by event, as they arrive (one element: a scalar).
  std::vector<int> seen;
  c.generate_stream("decoupled_identity", {{"INPUT0", boost::json::array{7}}},
                    [&](boost::json::object&& e) { seen.push_back(e.at("OUTPUT0").to_number<int>()); });
  CHECK(seen == std::vector<int>{7});
  // An exception out of the callback fails the call.
  ih::error_code thrown;
  c.generate_stream("decoupled_identity", {{"INPUT0", boost::json::array{7}}},
                    [](boost::json::object&& e) { (void)e.at("no such key"); }, thrown);
  CHECK(thrown == ih::client_errc::bad_response);
  ih::error_code ec;
  c.generate_stream("nope", request, ec);
  CHECK(ih::server_status(ec) == 404);
  c.generate_stream("nope", request, [](boost::json::object&&) {}, ec);
  CHECK(ih::server_status(ec) == 404);
  CHECK(ec.message() == "Request for unknown model: 'nope' is not found");
  c.generate("simple", {{"INPUT0", 1}}, ec);
  CHECK(ih::server_status(ec) == 400);
  CHECK(ec.message() == "input 'INPUT0' of model 'simple' has shape [16]: 1 element does not fit it");
}

TEST_CASE("client: generate_stream reads every event of a chunked reply, an error event included", "[client][generate]") {
  scripted_server fake(1, [](tcp::socket& s, int) {
    net::streambuf buf;
    if (!scripted_server::read_request(s, buf)) return;
    const std::string events[] = {"data: {\"OUT\":1}\n\n", "data: {\"OUT\":2}\n\n", "data: {\"error\":\"it broke\"}\n\n"};
    std::string reply = "HTTP/1.1 200 OK\r\nContent-Type: text/event-stream; charset=utf-8\r\nTransfer-Encoding: chunked\r\n\r\n";
    for (const auto& e : events) {
      char size[16];
      std::snprintf(size, sizeof size, "%zx\r\n", e.size());
      reply += size + e + "\r\n";
    }
    reply += "0\r\n\r\n";
    net::write(s, net::buffer(reply));
  });
  ih::client c("127.0.0.1", fake.port());
  const auto events = c.generate_stream("m", {{"x", 1}});
  REQUIRE(events.size() == 3);
  CHECK(events[0].at("OUT").to_number<int>() == 1);
  CHECK(events[1].at("OUT").to_number<int>() == 2);
  CHECK(events[2].at("error") == "it broke");
}

TEST_CASE("client: generate_stream hands over each event as it arrives", "[client][generate]") {
  // The server sends one event, waits until the client has seen it, then sends the next and
  // ends the stream; a client that waited for the whole body would deadlock (and time out).
  std::promise<void> first_seen;
  auto seen_future = first_seen.get_future();
  scripted_server fake(1, [&seen_future](tcp::socket& s, int) {
    net::streambuf buf;
    if (!scripted_server::read_request(s, buf)) return;
    auto chunk = [](std::string_view e) {
      char size[16];
      std::snprintf(size, sizeof size, "%zx\r\n", e.size());
      return size + std::string(e) + "\r\n";
    };
    net::write(s, net::buffer(std::string("HTTP/1.1 200 OK\r\nContent-Type: text/event-stream; charset=utf-8\r\n"
                                          "Transfer-Encoding: chunked\r\n\r\n") +
                              chunk("data: {\"OUT\":1}\n") + chunk("\ndata: {\"OUT\"")));
    if (seen_future.wait_for(std::chrono::seconds(5)) != std::future_status::ready) return;
    net::write(s, net::buffer(chunk(":2}\n\n") + "0\r\n\r\n"));
  });
  ih::client_options o;
  o.timeout = std::chrono::seconds(10);
  ih::client c("127.0.0.1", fake.port(), o);
  std::vector<int> seen;
  c.generate_stream("m", {{"x", 1}}, [&](boost::json::object&& e) {
    seen.push_back(e.at("OUT").to_number<int>());
    if (seen.size() == 1) first_seen.set_value();
  });
  CHECK(seen == std::vector<int>{1, 2});

  // An event that is not JSON fails the call.
  scripted_server bad(1, [](tcp::socket& s, int) {
    net::streambuf buf;
    if (!scripted_server::read_request(s, buf)) return;
    net::write(s, net::buffer(std::string("HTTP/1.1 200 OK\r\nContent-Type: text/event-stream; charset=utf-8\r\n"
                                          "Content-Length: 12\r\n\r\ndata: {oops\n\n")));
  });
  ih::client c2("127.0.0.1", bad.port());
  ih::error_code ec;
  c2.generate_stream("m", {{"x", 1}}, [](boost::json::object&&) {}, ec);
  CHECK(ec == ih::client_errc::bad_response);
}

TEST_CASE("client: server errors carry status and message in every form", "[client]") {
  auto c = blocking_client();
  ih::error_code ec;
  auto md = c.model_metadata("nope", ec);
  CHECK(md.name.empty());
  CHECK(ec.category() == ih::server_category());
  CHECK(ih::server_status(ec) == 404);
  CHECK(ih::server_errc(ec) == inferwire::errc::not_found);
  CHECK(ec.message() == "Request for unknown model: 'nope' is not found");

  try {
    c.model_config("nope");
    FAIL("no exception");
  } catch (const ih::server_error& e) {
    CHECK(e.http_status() == 404);
    CHECK(std::string(e.what()) == "Request for unknown model: 'nope' is not found");
  }

  // Version 7 of simple: not found; an INVALID_ARG from validation: 400.
  c.model_metadata({"simple", "7"}, ec);
  CHECK(ec.message() == "Request for unknown model: 'simple' version 7 is not found");
  v2::infer_request bad;
  bad.inputs.push_back(v2::make_input("INPUT0", std::vector<std::int32_t>(16), {1, 16}));
  c.infer("simple", bad, ec);
  CHECK(ih::server_status(ec) == 400);
  CHECK(ih::server_errc(ec) == inferwire::errc::invalid_arg);
  CHECK(ec.message().find("expected 2 inputs but got 1 inputs for model 'simple'") !=
        std::string::npos);

  // Transport errors keep Asio's codes: nothing listens on the port.
  net::io_context probe;
  tcp::acceptor a(probe, tcp::endpoint(net::ip::make_address("127.0.0.1"), 0));
  auto dead_port = std::to_string(a.local_endpoint().port());
  a.close();
  ih::client dead("127.0.0.1", dead_port);
  dead.server_live(ec);
  CHECK(ec == net::error::connection_refused);
  CHECK_THROWS_AS(dead.server_live(), boost::system::system_error);
}

TEST_CASE("client: infer in every encoding", "[client]") {
  auto c = blocking_client();
  simple_inputs in;

  SECTION("binary inputs, all outputs binary") {
    auto r = c.infer("simple", in.request());
    CHECK(r.model_name() == "simple");
    CHECK(r.model_version() == "1");
    check_simple(r);
    CHECK(r.response().output("OUTPUT0")->encoding == v2::tensor_encoding::binary);
  }
  SECTION("JSON inputs, requested outputs in JSON and binary, id echoed") {
    auto q = in.request(v2::tensor_encoding::json);
    q.id = "req-7";
    q.outputs.push_back(v2::make_output("OUTPUT0", false));
    q.outputs.push_back(v2::make_output("OUTPUT1", true));
    auto r = c.infer({"simple", "1"}, q);
    CHECK(r.id() == "req-7");
    check_simple(r);
    CHECK(r.response().output("OUTPUT0")->encoding == v2::tensor_encoding::json);
    CHECK(r.response().output("OUTPUT1")->encoding == v2::tensor_encoding::binary);
  }
  SECTION("mixed inputs, one output") {
    auto q = in.request();
    q.inputs[0].encoding = v2::tensor_encoding::json;
    q.outputs.push_back(v2::make_output("OUTPUT1"));
    auto r = c.infer("simple", q);
    REQUIRE(r.outputs().size() == 1);
    CHECK(r.as<std::int32_t>("OUTPUT1")[15] == 14);
    CHECK_THROWS_AS(r.output("OUTPUT0"), std::out_of_range);
  }
  SECTION("raw binary request") {
    std::vector<float> x{1.5f, -2.0f, 3.25f};
    v2::infer_request q;
    q.raw_binary = true;
    q.raw_input = v2::tensor_data::view(std::as_bytes(std::span(x)));
    auto r = c.infer("identity_fp32", q);
    auto out = r.as<float>("OUTPUT0");
    REQUIRE(out.size() == 3);
    CHECK(out[2] == 3.25f);
  }
  SECTION("BYTES tensors both ways, with NULs") {
    std::vector<std::string> strings;
    for (int i = 0; i < 16; ++i) strings.push_back(std::to_string(i));
    std::vector<std::string> ones(16, "1");
    v2::infer_request q;
    q.inputs.push_back(v2::make_bytes_input("INPUT0", strings, {1, 16}));
    q.inputs.push_back(v2::make_bytes_input("INPUT1", ones, {1, 16}, v2::tensor_encoding::json));
    auto r = c.infer("simple_string", q);
    auto sum = r.strings("OUTPUT0");
    REQUIRE(sum.size() == 16);
    CHECK(sum[0] == "1");
    CHECK(sum[15] == "16");
    CHECK(r.strings("OUTPUT1")[0] == "-1");

    using namespace std::string_literals;
    std::vector<std::string> odd{"a\0b"s, "\x01\x1f\""s};
    v2::infer_request id;
    id.inputs.push_back(v2::make_bytes_input("INPUT0", odd, {1, 2}, v2::tensor_encoding::json));
    auto back = c.infer("simple_identity", id).strings("OUTPUT0");
    REQUIRE(back.size() == 2);
    CHECK(back[0] == odd[0]);
    CHECK(back[1] == odd[1]);
  }
  SECTION("classification") {
    std::vector<float> x{0.1f, 0.9f, 0.5f, 0.2f};
    v2::infer_request q;
    q.inputs.push_back(v2::make_input("INPUT0", x, {4}));
    q.outputs.push_back(v2::make_output("OUTPUT0", false, 2));
    auto r = c.infer("identity_labeled", q);
    auto labels = r.strings("OUTPUT0");
    REQUIRE(labels.size() == 2);
    CHECK(labels[0].starts_with("0.9"));
  }
  SECTION("request parameters (a sequence)") {
    std::int32_t value = 5;
    v2::infer_request q;
    q.inputs.push_back(v2::make_input("INPUT", std::span(&value, 1), {1, 1}));
    q.parameters.set("sequence_id", std::uint64_t{4242});
    q.parameters.set("sequence_start", true);
    q.parameters.set("sequence_end", true);
    auto r = c.infer("simple_sequence", q);
    CHECK(r.as<std::int32_t>("OUTPUT")[0] == 6);  // (INPUT + START) x READY
  }
  SECTION("typed helpers refuse mismatched sizes") {
    std::vector<std::int32_t> eight(8);
    CHECK_THROWS_AS(v2::make_input("INPUT0", eight, {1, 16}), std::invalid_argument);
    std::vector<std::string> one{"x"};
    CHECK_THROWS_AS(v2::make_bytes_input("INPUT0", one, {2}), std::invalid_argument);
  }
}

TEST_CASE("client: compression, headers and query parameters", "[client]") {
  simple_inputs in;
  for (auto coding : {ih::content_coding::gzip, ih::content_coding::deflate}) {
    ih::client_options o;
    o.request_compression = coding;
    o.response_compression = coding;
    o.headers = {{"test", "1"}};
    auto c = blocking_client(shared_server(), o);
    check_simple(c.infer("simple", in.request()));
    // Per call: back to identity, with a query string and an extra header.
    ih::call_options co;
    co.request_compression = ih::content_coding::identity;
    co.response_compression = ih::content_coding::identity;
    co.query = {{"test_1", "1"}, {"a b", "c&d"}};
    co.headers = {{"dummy", "2"}};
    check_simple(c.infer("simple", in.request(), co));
    CHECK(c.server_live(co));
  }
  // A header that would split the request is refused before anything is sent.
  auto c = blocking_client();
  ih::call_options evil;
  evil.headers = {{"x", "1\r\nX-Injected: 2"}};
  ih::error_code ec;
  c.server_live(ec, evil);
  CHECK(ec == net::error::invalid_argument);
  CHECK(c.server_live());
}

TEST_CASE("client: statistics, trace and log settings", "[client]") {
  auto c = blocking_client();
  simple_inputs in;
  auto before = c.model_statistics("simple");
  REQUIRE(before.model_stats.size() == 1);
  c.infer("simple", in.request());
  auto after = c.model_statistics({"simple", "1"});
  REQUIRE(after.model_stats.size() == 1);
  CHECK(after.model_stats[0].inference_count == before.model_stats[0].inference_count + 1);
  CHECK(c.model_statistics().model_stats.size() >= 7);

  auto trace = c.trace_settings();
  CHECK(trace.settings.count("trace_level") == 1);
  v2::trace_settings update;
  update.settings["trace_rate"] = std::vector<std::string>{"7"};
  auto model_trace = c.update_trace_settings(update, "simple");
  CHECK(model_trace.settings["trace_rate"] == std::vector<std::string>{"7"});
  CHECK(c.trace_settings("simple").settings["trace_rate"] == std::vector<std::string>{"7"});
  update.settings["trace_rate"] = std::nullopt;  // clears the model's override
  c.update_trace_settings(update, "simple");
  CHECK(c.trace_settings("simple").settings["trace_rate"] == trace.settings["trace_rate"]);

  auto log = c.log_settings();
  REQUIRE(log.log_verbose_level);
  v2::log_settings lu;
  lu.log_verbose_level = *log.log_verbose_level + 1;
  CHECK(c.update_log_settings(lu).log_verbose_level == *log.log_verbose_level + 1);
  lu.log_verbose_level = *log.log_verbose_level;
  c.update_log_settings(lu);
  ih::error_code ec;
  v2::log_settings bad;
  bad.log_format = "no_such_format";
  c.update_log_settings(bad, ec);
  CHECK(ih::server_status(ec) != 0);
  CHECK(ec.message().find("invalid argument for --log_format") != std::string::npos);
}

TEST_CASE("client: shared-memory calls reach the server", "[client]") {
  auto c = blocking_client();
  // Status works without client shared memory enabled; register and unregister are refused
  // with the server's message (the shared-memory issue adds the server side).
  ih::error_code ec;
  auto sys = c.system_shared_memory_status(ec);
  auto cuda = c.cuda_shared_memory_status(ec);
  v2::system_shm_register_request reg{"region0", "/inferwire_none", 0, 64};
  c.register_system_shared_memory(reg, ec);
  CHECK(ec);
  CHECK(ih::server_status(ec) >= 400);
  c.unregister_system_shared_memory("region0", ec);
  c.unregister_cuda_shared_memory(ec);
  v2::cuda_shm_register_request creg{"cuda0", std::string(64, '\0'), 0, 64};
  c.register_cuda_shared_memory(creg, ec);
  CHECK(ih::server_status(ec) >= 400);
  // A registration without a region name is refused by the client.
  reg.name.clear();
  c.register_system_shared_memory(reg, ec);
  CHECK(ec == net::error::invalid_argument);
}

TEST_CASE("client: repository index, load and unload", "[client]") {
  server_process s({"--model-control-mode=explicit", "--load-model", "simple"});
  auto c = blocking_client(s);
  auto idx = c.repository_index();
  auto find = [](const std::vector<v2::repository_index_entry>& v, std::string_view name) {
    for (const auto& e : v)
      if (e.name == name) return e;
    return v2::repository_index_entry{};
  };
  CHECK(find(idx, "simple").state == "READY");
  CHECK(find(idx, "identity_fp32").state.empty());
  CHECK(c.repository_index(v2::repository_index_request{true}).size() == 1);

  c.load_model("identity_fp32");
  CHECK(c.model_ready("identity_fp32"));
  c.unload_model("identity_fp32");
  CHECK_FALSE(c.model_ready("identity_fp32"));
  CHECK(find(c.repository_index(), "identity_fp32").reason == "unloaded");

  // A config override and a file: override in one load.
  v2::repository_load_request load;
  load.config = R"({"name":"simple","backend":"simple","max_batch_size":4,)"
                R"("input":[{"name":"INPUT0","data_type":"TYPE_INT32","dims":[16]},)"
                R"({"name":"INPUT1","data_type":"TYPE_INT32","dims":[16]}],)"
                R"("output":[{"name":"OUTPUT0","data_type":"TYPE_INT32","dims":[16]},)"
                R"({"name":"OUTPUT1","data_type":"TYPE_INT32","dims":[16]}]})";
  load.files.emplace_back("1/notes.txt", "not a model file");
  c.load_model("simple", load);
  CHECK(c.model_config("simple").at("max_batch_size").to_number<int>() == 4);

  ih::error_code ec;
  c.load_model("wrong_model_name", ec);
  CHECK(ec.message().find("failed to load") != std::string::npos);
  c.unload_model("simple", v2::repository_unload_request{true});
  CHECK_FALSE(c.model_ready("simple"));
}

TEST_CASE("client: asynchronous forms with every kind of completion token", "[client]") {
  net::io_context ioc;
  ih::client c(ioc.get_executor(), "127.0.0.1", port_of(shared_server()));
  simple_inputs in;
  auto request = in.request();

  // Callback.
  int callbacks = 0;
  c.async_infer("simple", request, [&](ih::error_code ec, ih::infer_result r) {
    REQUIRE_FALSE(ec);
    check_simple(r);
    ++callbacks;
  });
  c.async_unload_model("x", [&](ih::error_code ec) {
    CHECK(ih::server_status(ec) != 0);  // none mode: refused by the server
    ++callbacks;
  });
  ioc.run();
  CHECK(callbacks == 2);

  // use_future, with the io_context run on another thread; blocking calls work there too.
  ioc.restart();
  auto guard = net::make_work_guard(ioc);
  std::thread runner([&] { ioc.run(); });
  auto fut = c.async_server_metadata(net::use_future);
  CHECK(fut.get().name == "triton");
  CHECK(c.server_live());
  auto failed = c.async_model_metadata("nope", net::use_future);
  CHECK_THROWS_AS(failed.get(), boost::system::system_error);
  guard.reset();
  runner.join();

  // C++20 coroutines.
  ioc.restart();
  bool done = false;
  net::co_spawn(
      ioc,
      [&]() -> net::awaitable<void> {
        auto r = co_await c.async_infer("simple", request, net::use_awaitable);
        check_simple(r);
        bool ready = co_await c.async_model_ready("simple", net::use_awaitable);
        CHECK(ready);
        // Blocking calls from the executor's own thread are refused, not deadlocked.
        ih::error_code ec;
        c.server_live(ec);
        CHECK(ec == ih::client_errc::sync_on_own_executor);
        done = true;
      },
      net::detached);
  ioc.run();
  CHECK(done);

  // deferred: nothing is sent until the deferred operation is started.
  ioc.restart();
  auto op = c.async_server_ready(net::deferred);
  bool ready = false;
  std::move(op)([&](ih::error_code ec, bool r) {
    CHECK_FALSE(ec);
    ready = r;
  });
  ioc.run();
  CHECK(ready);
}

TEST_CASE("client: timeouts and cancellation", "[client]") {
  std::vector<std::int32_t> x{1, 2, 3};
  v2::infer_request slow;
  slow.inputs.push_back(v2::make_input("INPUT0", x, {3}));

  auto c = blocking_client();
  ih::call_options quick;
  quick.timeout = 200ms;
  ih::error_code ec;
  auto t0 = std::chrono::steady_clock::now();
  c.infer("identity_slow", slow, ec, quick);
  CHECK(ec == boost::beast::error::timeout);
  CHECK(std::chrono::steady_clock::now() - t0 < 1200ms);
  CHECK(c.server_live());  // a new connection replaces the timed-out one

  // The client-wide timeout applies to every call.
  ih::client_options o;
  o.timeout = 100ms;
  auto impatient = blocking_client(shared_server(), o);
  impatient.infer("identity_slow", slow, ec);
  CHECK(ec == boost::beast::error::timeout);

  // Cancellation through a bound cancellation slot.
  net::io_context ioc;
  ih::client ac(ioc.get_executor(), "127.0.0.1", port_of(shared_server()));
  net::cancellation_signal signal;
  ih::error_code got;
  bool completed = false;
  ac.async_infer("identity_slow", slow,
                 net::bind_cancellation_slot(signal.slot(), [&](ih::error_code e, ih::infer_result) {
                   got = e;
                   completed = true;
                 }));
  net::steady_timer t(ioc, 100ms);
  t.async_wait([&](boost::system::error_code) { signal.emit(net::cancellation_type::terminal); });
  t0 = std::chrono::steady_clock::now();
  ioc.run();
  CHECK(completed);
  CHECK(got == net::error::operation_aborted);
  CHECK(std::chrono::steady_clock::now() - t0 < 1200ms);

  // A call waiting for a pooled connection times out, and can be cancelled, too.
  ioc.restart();
  std::vector<ih::error_code> results;
  ac.async_infer("identity_slow", slow, [&](ih::error_code e, ih::infer_result) {
    results.push_back(e);
  });
  ih::call_options wait_briefly;
  wait_briefly.timeout = 100ms;
  ac.async_server_live(wait_briefly, [&](ih::error_code e, bool) { results.push_back(e); });
  ioc.run();
  REQUIRE(results.size() == 2);
  CHECK(results[0] == boost::beast::error::timeout);  // the live call, queued behind the slow one
  CHECK_FALSE(results[1]);
}

TEST_CASE("client: blocking calls on the pool with deadlines and large bodies",
          "[client]") {
  std::vector<std::int32_t> x{1, 2, 3};
  v2::infer_request slow;
  slow.inputs.push_back(v2::make_input("INPUT0", x, {3}));
  ih::client_options one;
  one.max_connections = 1;

  SECTION("a call waiting for the only connection times out, or gets it once free") {
    auto c = blocking_client(shared_server(), one);
    std::int32_t slow_last = 0;  // Catch's assertions are for the test's own thread
    std::thread busy([&] { slow_last = c.infer("identity_slow", slow).as<std::int32_t>("OUTPUT0")[2]; });
    std::this_thread::sleep_for(300ms);  // the slow call holds the connection
    ih::call_options brief;
    brief.timeout = 100ms;
    ih::error_code ec;
    auto t0 = std::chrono::steady_clock::now();
    c.server_live(ec, brief);
    CHECK(ec == boost::beast::error::timeout);
    CHECK(std::chrono::steady_clock::now() - t0 < 1000ms);
    CHECK(c.server_live());  // waits for the slow call, then takes its connection
    busy.join();
    CHECK(slow_last == 3);
    CHECK(c.open_connections() == 1);
  }
  SECTION("close() wakes a blocking call waiting for a connection") {
    auto c = blocking_client(shared_server(), one);
    std::thread busy([&] {
      ih::error_code ignored;
      c.infer("identity_slow", slow, ignored);
    });
    std::this_thread::sleep_for(300ms);
    std::thread closer([&] {
      std::this_thread::sleep_for(100ms);
      c.close();
    });
    ih::error_code ec;
    c.server_live(ec);
    CHECK(ec == ih::client_errc::client_closed);
    closer.join();
    busy.join();
  }
  SECTION("a 16 MiB body goes out in pieces and comes back whole") {
    std::vector<float> big(std::size_t{4} << 20);
    for (std::size_t i = 0; i < big.size(); ++i) big[i] = static_cast<float>(i % 1000);
    v2::infer_request q;
    q.inputs.push_back(
        v2::make_input("INPUT0", big, {static_cast<std::int64_t>(big.size())}));
    auto c = blocking_client();
    auto r = c.infer("identity_fp32", q);
    auto out = r.as<float>("OUTPUT0");
    REQUIRE(out.size() == big.size());
    CHECK(std::equal(out.begin(), out.end(), big.begin()));
  }
  SECTION("blocking and asynchronous calls take turns on one connection") {
    net::io_context ioc;
    ih::client c(ioc.get_executor(), "127.0.0.1", port_of(shared_server()), one);
    simple_inputs in;
    auto request = in.request();
    for (int i = 0; i < 3; ++i) {
      CHECK(c.infer("simple", request).as<std::int32_t>("OUTPUT0")[15] == 16);  // blocking
      ih::error_code got = net::error::would_block;
      c.async_server_live([&](ih::error_code e, bool live) {
        got = e;
        CHECK(live);
      });
      ioc.restart();
      ioc.run();
      CHECK_FALSE(got);
    }
    CHECK(c.open_connections() == 1);
  }
  SECTION("a client without an executor makes its io_context when asked, and it can be run") {
    std::optional<ih::client> c;
    c.emplace("127.0.0.1", port_of(shared_server()), one);
    simple_inputs in;
    auto request = in.request();
    CHECK(c->infer("simple", request).as<std::int32_t>("OUTPUT0")[15] == 16);  // raw socket
    {
      auto ex = c->get_executor();
      auto* ioc = ex.target<net::io_context::executor_type>();
      REQUIRE(ioc != nullptr);
      CHECK(c->get_executor() == ex);  // made once
      // An asynchronous call takes over the connection the blocking call opened.
      ih::error_code got = net::error::would_block;
      c->async_infer("simple", request, [&](ih::error_code e, ih::infer_result r) {
        got = e;
        if (!e) CHECK(r.as<std::int32_t>("OUTPUT0")[15] == 16);
      });
      ioc->context().run();
      CHECK_FALSE(got);
    }
    CHECK(c->open_connections() == 1);
    CHECK(c->server_live());  // blocking again, on the descriptor of the asynchronous stream
    // One more asynchronous call left pending when the client goes: it ends, nothing leaks.
    c->async_server_live([](ih::error_code, bool) {});
    c.reset();
  }
  SECTION("a host that does not resolve fails with the resolver's error") {
    ih::client c("no-such-host.invalid", "8000");
    ih::error_code ec;
    c.server_live(ec);
    CHECK((ec == net::error::host_not_found || ec == net::error::host_not_found_try_again));
  }
  SECTION("a refused connection fails at once") {
    net::io_context ioc;
    tcp::acceptor probe(ioc, tcp::endpoint(net::ip::address_v4::loopback(), 0));
    auto port = std::to_string(probe.local_endpoint().port());
    probe.close();  // nothing listens there now
    ih::client c("127.0.0.1", port);
    ih::error_code ec;
    c.server_live(ec);
    CHECK(ec == net::error::connection_refused);
  }
}

TEST_CASE("client: a server that closes mid-reply, and transparent reconnect", "[client]") {
  SECTION("closing mid-reply is an error, and the next call reconnects") {
    scripted_server fake(2, [](tcp::socket& s, int i) {
      net::streambuf buf;
      if (!scripted_server::read_request(s, buf)) return;
      if (i == 0) {
        net::write(s, net::buffer(std::string(
                          "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\n"
                          "Content-Length: 100\r\n\r\n{\"name\":\"tri")));
        return;  // closes with 70 bytes missing
      }
      std::string body = R"({"name":"triton","version":"1","extensions":[]})";
      net::write(s, net::buffer("HTTP/1.1 200 OK\r\nContent-Length: " +
                                std::to_string(body.size()) + "\r\n\r\n" + body));
    });
    ih::client c("127.0.0.1", fake.port());
    ih::error_code ec;
    c.server_metadata(ec);
    CHECK(ec == boost::beast::http::error::partial_message);
    CHECK(c.server_metadata().name == "triton");
    CHECK(fake.accepted() == 2);
  }
  SECTION("an idle connection closed by the server is replaced without an error") {
    scripted_server fake(2, [](tcp::socket& s, int) {
      net::streambuf buf;
      if (!scripted_server::read_request(s, buf)) return;
      net::write(s, net::buffer(live_reply));  // keep-alive reply, then close anyway
    });
    ih::client c("127.0.0.1", fake.port());
    CHECK(c.server_live());
    std::this_thread::sleep_for(50ms);
    CHECK(c.server_live());  // sent once more on a fresh connection
    CHECK(fake.accepted() == 2);
  }
  SECTION("Connection: close is honoured") {
    scripted_server fake(2, [](tcp::socket& s, int) {
      net::streambuf buf;
      if (!scripted_server::read_request(s, buf)) return;
      net::write(s, net::buffer(std::string(
                        "HTTP/1.1 200 OK\r\nConnection: close\r\nContent-Length: 0\r\n\r\n")));
      std::this_thread::sleep_for(100ms);
    });
    ih::client c("127.0.0.1", fake.port());
    CHECK(c.server_live());
    CHECK(c.open_connections() == 0);
    CHECK(c.server_live());
  }
  SECTION("garbage replies are errors, not crashes") {
    scripted_server fake(3, [](tcp::socket& s, int i) {
      net::streambuf buf;
      if (!scripted_server::read_request(s, buf)) return;
      const char* replies[] = {
          "NOT HTTP AT ALL\r\n\r\n",
          "HTTP/1.1 200 OK\r\nContent-Length: 5\r\n\r\n{\"na}",
          "HTTP/1.1 200 OK\r\nInference-Header-Content-Length: 99\r\nContent-Length: 2\r\n\r\n{}"};
      net::write(s, net::buffer(std::string(replies[i])));
    });
    ih::client c("127.0.0.1", fake.port());
    ih::error_code ec;
    c.server_live(ec);
    CHECK(ec);
    c.server_metadata(ec);
    CHECK(ec == ih::client_errc::bad_response);
    v2::infer_request q;
    c.infer("m", q, ec);
    CHECK(ec == ih::client_errc::bad_response);
  }
  SECTION("chunked, close-delimited, trickled and oversized replies") {
    static const std::string body = R"({"name":"triton","version":"1","extensions":[]})";
    scripted_server fake(4, [](tcp::socket& s, int i) {
      net::streambuf buf;
      if (!scripted_server::read_request(s, buf)) return;
      std::string reply;
      if (i == 0) {  // chunked, in two chunks
        auto half = body.size() / 2;
        auto chunk = [](std::string_view part) {
          std::ostringstream o;
          o << std::hex << part.size() << "\r\n" << part << "\r\n";
          return o.str();
        };
        reply = "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n" +
                chunk(std::string_view(body).substr(0, half)) +
                chunk(std::string_view(body).substr(half)) + "0\r\n\r\n";
        net::write(s, net::buffer(reply));
      } else if (i == 1) {  // no length: the body ends when the server closes
        reply = "HTTP/1.1 200 OK\r\nConnection: close\r\n\r\n" + body;
        net::write(s, net::buffer(reply));
        s.shutdown(tcp::socket::shutdown_send);
      } else if (i == 2) {  // one byte per write
        reply = "HTTP/1.1 200 OK\r\nContent-Length: " + std::to_string(body.size()) +
                "\r\n\r\n" + body;
        for (char ch : reply) {
          net::write(s, net::buffer(&ch, 1));
          std::this_thread::sleep_for(200us);
        }
      } else {  // a body over the client's limit
        reply = "HTTP/1.1 200 OK\r\nContent-Length: 4096\r\n\r\n" + std::string(4096, 'x');
        boost::system::error_code ignored;
        net::write(s, net::buffer(reply), ignored);
      }
    });
    ih::client_options o;
    o.max_response_size = 1024;
    ih::client c("127.0.0.1", fake.port(), o);
    CHECK(c.server_metadata().name == "triton");
    CHECK(c.server_metadata().name == "triton");
    CHECK(c.open_connections() == 0);  // closed with the close-delimited reply
    CHECK(c.server_metadata().name == "triton");
    ih::error_code ec;
    c.server_metadata(ec);
    CHECK(ec == boost::beast::http::error::body_limit);
  }
}

TEST_CASE("client: reconnects after a server restart", "[client]") {
  auto first = std::make_unique<server_process>();
  std::string port = port_of(*first);
  ih::client c("127.0.0.1", port);
  simple_inputs in;
  check_simple(c.infer("simple", in.request()));
  first->stop();
  ih::error_code ec;
  c.server_live(ec);
  CHECK(ec);  // nobody listens now
  server_process second({"--http-port", port});
  check_simple(c.infer("simple", in.request()));
}

TEST_CASE("client: concurrent calls on one pool from many threads", "[client][concurrency]") {
  ih::client_options o;
  o.max_connections = 4;
  auto c = blocking_client(shared_server(), o);
  std::atomic<int> ok{0}, bad{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < 8; ++t)
    threads.emplace_back([&] {
      simple_inputs in;
      for (int i = 0; i < 40; ++i) {
        ih::error_code ec;
        auto r = c.infer("simple", in.request(), ec);
        if (!ec && r.as<std::int32_t>("OUTPUT0")[15] == 16) ++ok;
        else ++bad;
      }
    });
  for (auto& t : threads) t.join();
  CHECK(ok == 320);
  CHECK(bad == 0);
  CHECK(c.open_connections() <= 4);

  // The same with asynchronous calls on an io_context run by three threads.
  net::io_context ioc;
  ih::client ac(ioc.get_executor(), "127.0.0.1", port_of(shared_server()), o);
  simple_inputs in;
  auto request = in.request();
  std::atomic<int> done{0};
  for (int i = 0; i < 64; ++i)
    ac.async_infer("simple", request, [&](ih::error_code ec, ih::infer_result r) {
      if (!ec && r.as<std::int32_t>("OUTPUT1")[0] == -1) ++done;
    });
  std::vector<std::thread> runners;
  for (int t = 0; t < 3; ++t) runners.emplace_back([&] { ioc.run(); });
  for (auto& t : runners) t.join();
  CHECK(done == 64);
  CHECK(ac.open_connections() <= 4);
}

// ---------------------------------------------------------------------------------------------
// TLS: a TLS-terminating proxy in front of the server, with a certificate made for this test.

namespace {

class tls_proxy {
 public:
  tls_proxy(const test_certificate& cert, int target_port)
      : ssl_(net::ssl::context::tls_server),
        acceptor_(ioc_, tcp::endpoint(net::ip::make_address("127.0.0.1"), 0)),
        target_(net::ip::make_address("127.0.0.1"), static_cast<unsigned short>(target_port)) {
    ssl_.use_certificate_chain_file(cert.cert());
    ssl_.use_private_key_file(cert.key(), net::ssl::context::pem);
    accept();
    thread_ = std::thread([this] { ioc_.run(); });
  }
  ~tls_proxy() {
    net::post(ioc_, [this] { ioc_.stop(); });
    thread_.join();
  }
  std::string port() const { return std::to_string(acceptor_.local_endpoint().port()); }

 private:
  struct session : std::enable_shared_from_this<session> {
    session(tcp::socket s, net::ssl::context& ctx)
        : tls(std::move(s), ctx), plain(tls.get_executor()) {}
    net::ssl::stream<tcp::socket> tls;
    tcp::socket plain;
    std::array<char, 65536> up{}, down{};
    template <class From, class To>
    void pump(From& from, To& to, std::array<char, 65536>& buf) {
      from.async_read_some(net::buffer(buf), [self = shared_from_this(), &from, &to,
                                              &buf](boost::system::error_code ec, std::size_t n) {
        if (ec) return self->shut();
        net::async_write(to, net::buffer(buf.data(), n),
                         [self, &from, &to, &buf](boost::system::error_code e, std::size_t) {
                           if (e) return self->shut();
                           self->pump(from, to, buf);
                         });
      });
    }
    void shut() {
      boost::system::error_code ec;
      plain.close(ec);
      tls.lowest_layer().close(ec);
    }
  };

  void accept() {
    acceptor_.async_accept([this](boost::system::error_code ec, tcp::socket s) {
      if (ec) return;
      auto ss = std::make_shared<session>(std::move(s), ssl_);
      ss->tls.async_handshake(net::ssl::stream_base::server,
                              [this, ss](boost::system::error_code e) {
                                if (e) return;
                                ss->plain.async_connect(target_, [ss](boost::system::error_code e2) {
                                  if (e2) return ss->shut();
                                  ss->pump(ss->tls, ss->plain, ss->up);
                                  ss->pump(ss->plain, ss->tls, ss->down);
                                });
                              });
      accept();
    });
  }

  net::io_context ioc_;
  net::ssl::context ssl_;
  tcp::acceptor acceptor_;
  tcp::endpoint target_;
  std::thread thread_;
};

}  // namespace

TEST_CASE("client: TLS with a certificate made at test time", "[client][tls]") {
  test_certificate cert;
  tls_proxy proxy(cert, shared_server().http_port());

  net::ssl::context trusting(net::ssl::context::tls_client);
  trusting.load_verify_file(cert.cert());
  trusting.set_verify_mode(net::ssl::verify_peer);
  ih::tls_client c(trusting, "localhost", proxy.port());
  CHECK(c.server_live());
  simple_inputs in;
  check_simple(c.infer("simple", in.request()));
  CHECK(c.model_metadata("simple").name == "simple");

  // Asynchronous over TLS too.
  net::io_context ioc;
  ih::tls_client ac(ioc.get_executor(), trusting, "localhost", proxy.port());
  bool ok = false;
  ac.async_infer("simple", in.request(), [&](ih::error_code ec, ih::infer_result r) {
    REQUIRE_FALSE(ec);
    check_simple(r);
    ok = true;
  });
  ioc.run();
  CHECK(ok);

  // Without the certificate among the trusted ones, the handshake fails.
  net::ssl::context strict(net::ssl::context::tls_client);
  strict.set_verify_mode(net::ssl::verify_peer);
  ih::tls_client untrusted(strict, "localhost", proxy.port());
  ih::error_code ec;
  untrusted.server_live(ec);
  CHECK(ec);
  CHECK(ec.category() == net::error::get_ssl_category());

  // A certificate for another name fails host-name verification.
  ih::tls_client wrong_name(trusting, "127.0.0.1", proxy.port());
  wrong_name.server_live(ec);
  CHECK(ec);
}
