// SPDX-License-Identifier: Apache-2.0
// HTTP connections moving between I/O threads: the balance is told to spread, then to gather,
// and real keep-alive connections (pipelined requests among them) are answered in order through
// every move; the counts follow the connections and go back to zero when they close.
#include "http.hpp"
#include "server.hpp"

#include <catch2/catch.hpp>

#include <boost/asio/connect.hpp>
#include <boost/asio/executor_work_guard.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/write.hpp>
#include <boost/beast/core/flat_buffer.hpp>
#include <boost/beast/http/read.hpp>
#include <boost/beast/http/string_body.hpp>

#include <chrono>
#include <filesystem>
#include <string>
#include <thread>
#include <vector>

#include <unistd.h>

namespace srv = inferwire::server;
namespace net = boost::asio;
namespace bhttp = boost::beast::http;
namespace fs = std::filesystem;
using tcp = net::ip::tcp;

namespace {

struct three_io_threads {
  fs::path root = fs::temp_directory_path() / ("inferwire_balance_test_" + std::to_string(::getpid()));
  std::unique_ptr<srv::server_state> s;
  std::shared_ptr<srv::listener> http;
  int port = 0;
  std::vector<net::executor_work_guard<net::io_context::executor_type>> work;
  std::vector<std::thread> threads;

  three_io_threads() {
    fs::create_directories(root);
    srv::options o;
    o.model_repositories = {root.string()};
    o.http_thread_count = 3;
    o.execution_thread_count = 1;
    o.log_info = o.log_warning = o.log_error = false;
    s = std::make_unique<srv::server_state>(std::move(o));
    REQUIRE(s->repository.startup({}, 1));
    inferwire::status st;
    http = srv::start_listener(*s, "127.0.0.1", 0, false, st, port);
    REQUIRE_FALSE(st);
    for (auto& io : s->ios) {
      work.push_back(net::make_work_guard(*io));
      threads.emplace_back([&io] { io->run(); });
    }
  }
  ~three_io_threads() {
    srv::stop_listener(*http);
    work.clear();
    s->stop_io();
    for (auto& t : threads) t.join();
    s->execution.join();
    fs::remove_all(root);
  }

  std::size_t total() const {
    std::size_t n = 0;
    for (std::size_t i = 0; i < s->io_threads->threads(); ++i) n += s->io_threads->connections(i);
    return n;
  }
};

struct client {
  net::io_context io;
  tcp::socket socket{io};
  boost::beast::flat_buffer buffer;

  explicit client(int port) { socket.connect(tcp::endpoint(net::ip::make_address("127.0.0.1"), static_cast<unsigned short>(port))); }

  /// `n` requests in one write (pipelined), then their `n` replies, in order.
  std::vector<std::string> ask(int n) {
    std::string requests;
    for (int i = 0; i < n; ++i) requests += "GET /v2 HTTP/1.1\r\nHost: x\r\n\r\n";
    net::write(socket, net::buffer(requests));
    std::vector<std::string> bodies;
    for (int i = 0; i < n; ++i) {
      bhttp::response<bhttp::string_body> res;
      bhttp::read(socket, buffer, res);
      CHECK(res.result_int() == 200);
      bodies.push_back(res.body());
    }
    return bodies;
  }
};

bool metadata(const std::string& body) { return body.find("\"extensions\":[") != std::string::npos; }

}  // namespace

TEST_CASE("HTTP I/O balance: connections spread over more threads and gather again, answered through every move", "[io_balance]") {
  three_io_threads f;
  auto& b = *f.s->io_threads;
  REQUIRE(b.adaptive());
  std::vector<std::unique_ptr<client>> clients;
  for (int i = 0; i < 6; ++i) {
    clients.push_back(std::make_unique<client>(f.port));
    for (const auto& body : clients.back()->ask(1)) CHECK(metadata(body));
  }
  CHECK(b.connections(0) == 6);
  CHECK(b.moves() == 0);

  // Thread 0 saturated and cores free: two active threads; the connections move as each
  // request ends, until the two threads hold three each.
  b.apply({{0.95, 0, 0}, 8});
  REQUIRE(b.active() == 2);
  for (int round = 0; round < 3; ++round)
    for (auto& c : clients)
      for (const auto& body : c->ask(round == 1 ? 3 : 1)) CHECK(metadata(body));
  CHECK(b.moves() == 3);
  CHECK(b.connections(0) == 3);
  CHECK(b.connections(1) == 3);
  CHECK(b.connections(2) == 0);

  // The load gone: one thread again; thread 1's connections come back.
  b.apply({{0.1, 0.1, 0}, 8});
  REQUIRE(b.active() == 1);
  for (int round = 0; round < 2; ++round)
    for (auto& c : clients)
      for (const auto& body : c->ask(2)) CHECK(metadata(body));
  CHECK(b.moves() == 6);
  CHECK(b.connections(0) == 6);

  // Closed connections leave the counts.
  clients.clear();
  const auto until = std::chrono::steady_clock::now() + std::chrono::seconds(5);
  while (f.total() != 0 && std::chrono::steady_clock::now() < until)
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  CHECK(f.total() == 0);
}
