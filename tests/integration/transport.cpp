// SPDX-License-Identifier: Apache-2.0
// HTTP transport: keep-alive, pipelining, Expect, chunked bodies, compression, size limits,
// malformed traffic, slow clients and models, and clean shutdown.
#include "common.hpp"

#include <inferwire/http/compression.hpp>

#include <boost/asio/read_until.hpp>
#include <boost/json/parse.hpp>

#include <memory>
#include <random>
#include <thread>
#include <vector>

#include <sys/socket.h>

using namespace iwtest;
using namespace inferwire;

TEST_CASE("keep-alive and pipelined requests are answered in order", "[transport]") {
  connection c(shared_server().http_port());
  for (int i = 0; i < 3; ++i) {
    c.send(request_text("GET", "/v2/health/live", ""));
    auto r = c.read();
    REQUIRE(r);
    CHECK(r->status == 200);
    CHECK(r->keep_alive);
  }
  // Three requests in one write: metadata, an infer and a 404.
  std::string batch = request_text("GET", "/v2", "") +
                      request_text("POST", "/v2/models/simple/infer", simple_json()) +
                      request_text("GET", "/nope", "");
  c.send(batch);
  auto a = c.read(), b = c.read(), d = c.read();
  REQUIRE(a);
  REQUIRE(b);
  REQUIRE(d);
  CHECK(a->body.starts_with(R"({"name":"triton")"));
  CHECK(b->status == 200);
  CHECK(b->body.starts_with(R"({"model_name":"simple")"));
  CHECK(d->status == 404);
  // Connection: close is honoured.
  c.send(request_text("GET", "/v2/health/live", "", {{"Connection", "close"}}));
  auto e = c.read();
  REQUIRE(e);
  CHECK_FALSE(e->keep_alive);
  CHECK(c.closed_by_server());
}

TEST_CASE("thousands of pipelined requests in one write are answered in order", "[transport]") {
  // Requests split across reads at every offset, replies sent at once or queued behind a full
  // socket while the client is still writing: every reply comes, in order.
  connection c(shared_server().http_port());
  timeval tv{20, 0};
  ::setsockopt(c.socket().native_handle(), SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
  constexpr int n = 3000;
  std::string batch;
  for (int i = 0; i < n; ++i)
    batch += i % 3 == 1 ? request_text("POST", "/v2/models/simple/infer", simple_json())
                        : request_text("GET", i % 3 ? "/nope" : "/v2/health/live", "");
  std::thread writer([&] {  // while this thread reads the replies
    const int fd = c.socket().native_handle();
    for (std::size_t off = 0; off < batch.size();) {
      const ssize_t k = ::send(fd, batch.data() + off, batch.size() - off, MSG_NOSIGNAL);
      if (k <= 0) break;
      off += static_cast<std::size_t>(k);
    }
  });
  int in_order = 0;
  for (int i = 0; i < n; ++i) {
    auto r = c.read();
    if (!r) break;
    const unsigned want = i % 3 == 1 ? 200 : i % 3 ? 404 : 200;
    in_order += r->status == want && (i % 3 != 1 || r->body.starts_with(R"({"model_name":"simple")"));
  }
  writer.join();
  CHECK(in_order == n);
  connection again(shared_server().http_port());
  again.send(request_text("GET", "/v2/health/live", ""));
  auto r = again.read();
  REQUIRE(r);
  CHECK(r->status == 200);
}

TEST_CASE("many keep-alive connections wait for their next request without losing one", "[transport]") {
  // With several connections on an I/O thread, a connection whose socket is empty after its
  // reply waits for its next request in the thread's epoll set (ready_set) rather than in a
  // read. Requests that come whole, in two parts, pipelined, right after the reply or later,
  // and clients that hang up or half-close while their connection waits: every reply comes,
  // and the server lets go of every connection.
  const auto fds_before = open_fds_of(shared_server().pid());
  constexpr int n = 12;
  std::vector<std::unique_ptr<connection>> conns;
  for (int i = 0; i < n; ++i) {
    conns.push_back(std::make_unique<connection>(shared_server().http_port()));
    timeval tv{10, 0};  // a lost wake-up fails the read instead of hanging the test
    ::setsockopt(conns.back()->socket().native_handle(), SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
  }
  const std::string infer = request_text("POST", "/v2/models/simple/infer", simple_json());
  int answered = 0, expected = 0;
  auto read_ok = [&](connection& c) {
    auto r = c.read();
    answered += r && r->status == 200 && r->keep_alive;
  };
  for (int round = 0; round < 40; ++round) {
    for (int i = 0; i < n; ++i) {
      connection& c = *conns[static_cast<std::size_t>(i)];
      switch ((i + round) % 4) {
        case 0:  // whole
          c.send(infer);
          ++expected;
          break;
        case 1:  // in two parts, the second after the server has read the first
          c.send(std::string_view(infer).substr(0, infer.size() / 2));
          std::this_thread::sleep_for(std::chrono::milliseconds(2));
          c.send(std::string_view(infer).substr(infer.size() / 2));
          ++expected;
          break;
        case 2:  // two pipelined
          c.send(infer + request_text("GET", "/v2/health/live", ""));
          expected += 2;
          break;
        default:  // after a pause, while the connection waits
          break;
      }
    }
    for (int i = 0; i < n; ++i) {
      connection& c = *conns[static_cast<std::size_t>(i)];
      switch ((i + round) % 4) {
        case 0:
        case 1: read_ok(c); break;
        case 2: read_ok(c); read_ok(c); break;
        default: break;
      }
    }
    if (round % 8 == 7) {
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
      for (int i = 0; i < n; ++i) {
        conns[static_cast<std::size_t>(i)]->send(request_text("GET", "/v2/health/ready", ""));
        ++expected;
      }
      for (int i = 0; i < n; ++i) read_ok(*conns[static_cast<std::size_t>(i)]);
    }
  }
  CHECK(answered == expected);
  // Clients that hang up, half-close or reset while their connections wait: the server closes
  // its side, and the others go on.
  ::shutdown(conns[0]->socket().native_handle(), SHUT_WR);
  CHECK(conns[0]->closed_by_server());
  conns[1].reset();
  linger hard{1, 0};
  ::setsockopt(conns[2]->socket().native_handle(), SOL_SOCKET, SO_LINGER, &hard, sizeof hard);
  conns[2].reset();
  for (int i = 3; i < n; ++i) {
    conns[static_cast<std::size_t>(i)]->send(infer);
    auto r = conns[static_cast<std::size_t>(i)]->read();
    REQUIRE(r);
    CHECK(r->status == 200);
  }
  conns.clear();
  // Every connection's descriptor goes once its client has gone.
  auto settled = [&] {
    for (int i = 0; i < 300; ++i) {
      if (open_fds_of(shared_server().pid()).size() <= fds_before.size()) return true;
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
    return false;
  };
  CHECK(settled());
}

TEST_CASE("HEAD gets headers only, also when it is refused", "[transport]") {
  // HEAD on a GET endpoint is 405; a body after the headers would be read as the start of the
  // next response. HEAD and a GET pipelined: the GET's status line must follow the headers.
  connection c(shared_server().http_port());
  timeval tv{5, 0};
  ::setsockopt(c.socket().native_handle(), SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
  c.send(request_text("HEAD", "/v2/health/ready", "") + request_text("GET", "/v2/health/live", ""));
  std::string got;
  boost::system::error_code ec;
  net::read_until(c.socket(), net::dynamic_buffer(got), "\r\n\r\nHTTP/1.1 200", ec);
  REQUIRE_FALSE(ec);
  CHECK(got.starts_with("HTTP/1.1 405"));
  CHECK(got.find("\r\n\r\n") + 4 == got.find("HTTP/1.1 200"));
}

TEST_CASE("Expect: 100-continue and chunked bodies", "[transport]") {
  connection c(shared_server().http_port());
  std::string body = simple_json();
  c.send("POST /v2/models/simple/infer HTTP/1.1\r\nHost: x\r\nExpect: 100-continue\r\n"
         "Content-Length: " + std::to_string(body.size()) + "\r\n\r\n");
  auto interim = c.read();
  REQUIRE(interim);
  CHECK(interim->status == 100);
  c.send(body);
  auto r = c.read();
  REQUIRE(r);
  CHECK(r->status == 200);

  // Chunked, in uneven pieces.
  std::string chunked = "POST /v2/models/simple/infer HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n";
  for (std::size_t pos = 0; pos < body.size(); pos += 37) {
    std::string piece = body.substr(pos, 37);
    char len[16];
    std::snprintf(len, sizeof len, "%zx", piece.size());
    chunked += std::string(len) + "\r\n" + piece + "\r\n";
  }
  chunked += "0\r\n\r\n";
  c.send(chunked);
  r = c.read();
  REQUIRE(r);
  CHECK(r->status == 200);
  CHECK(r->body.find(R"("data":[1,2,3,4,)") != std::string::npos);
}

TEST_CASE("Transfer-Encoding with Content-Length is read by the transfer coding, then closes", "[transport]") {
  // RFC 9112 §6.3: the chunked coding wins over Content-Length, in either order of the two
  // fields, and the connection closes after the reply.
  const std::string body = simple_json();
  char len[16];
  std::snprintf(len, sizeof len, "%zx", body.size());
  const std::string chunks = std::string(len) + "\r\n" + body + "\r\n0\r\n\r\n";
  for (const char* fields : {"Transfer-Encoding: chunked\r\nContent-Length: 7\r\n",
                             "Content-Length: 7\r\nTransfer-Encoding: chunked\r\n",
                             "Content-Length: 7\r\nX-A: 1\r\nTransfer-Encoding: chunked\r\nContent-Length: 9\r\n"}) {
    CAPTURE(fields);
    connection c(shared_server().http_port());
    c.send(std::string("POST /v2/models/simple/infer HTTP/1.1\r\nHost: x\r\n") + fields + "\r\n" + chunks);
    auto r = c.read();
    REQUIRE(r);
    CHECK(r->status == 200);
    CHECK(r->body.find(R"("data":[1,2,3,4,)") != std::string::npos);
    CHECK_FALSE(r->keep_alive);
    CHECK(c.closed_by_server());
  }
  // Transfer-Encoding that does not end in chunked, with Content-Length: refused as before.
  connection c(shared_server().http_port());
  c.send("POST /v2/models/simple/infer HTTP/1.1\r\nHost: x\r\nContent-Length: 5\r\nTransfer-Encoding: gzip\r\n\r\nhello");
  auto r = c.read();
  REQUIRE(r);
  CHECK(r->status == 400);
  // The server goes on serving.
  CHECK(get("/v2/health/live").status == 200);
}

TEST_CASE("compression of requests and responses", "[transport]") {
  std::string body = simple_json();
  for (auto coding : {http::content_coding::gzip, http::content_coding::deflate}) {
    std::string z;
    REQUIRE(http::compress(body, coding, z));
    auto r = post("/v2/models/simple/infer", z,
                  {{"Content-Encoding", std::string(http::coding_name(coding))},
                   {"Accept-Encoding", "deflate;q=0.5, gzip;q=0.9"}});
    REQUIRE(r.status == 200);
    CHECK(r.header("content-encoding") == "gzip");
    std::string plain;
    REQUIRE_FALSE(http::decompress(r.body, 1 << 20, plain));
    CHECK(plain.find(R"("data":[1,2,3,4,)") != std::string::npos);
  }
  // Binary response, deflated: IHCL is the uncompressed JSON length.
  auto r = post("/v2/models/simple/infer", simple_json(R"(,"parameters":{"binary_data_output":true})"),
                {{"Accept-Encoding", "deflate"}});
  REQUIRE(r.status == 200);
  CHECK(r.header("content-encoding") == "deflate");
  std::string plain;
  REQUIRE_FALSE(http::decompress(r.body, 1 << 20, plain));
  reply unz = r;
  unz.body = plain;
  auto res = decode(unz);
  CHECK(res.outputs[0].data.size() == 64);

  r = post("/v2/models/simple/infer", body, {{"Content-Encoding", "br"}});
  CHECK(r.status == 501);
  CHECK(error_of(r) == "Unsupported compression type");
  CHECK(r.header("accept-encoding") == "gzip, deflate");
  r = post("/v2/models/simple/infer", "", {{"Content-Encoding", "gzip"}});
  CHECK(r.status == 400);
  CHECK(error_of(r) == "nothing to be decompressed");
  // Corrupt data is not reported by zlib: the JSON parser fails on what was inflated.
  std::string z;
  REQUIRE(http::compress(body, http::content_coding::gzip, z));
  z.resize(z.size() / 2);
  r = post("/v2/models/simple/infer", z, {{"Content-Encoding", "gzip"}});
  CHECK(r.status == 500);
  CHECK(error_of(r).starts_with("failed to parse the request JSON buffer: "));
}

TEST_CASE("http-max-input-size limits", "[transport]") {
  server_process s({"--http-max-input-size", "1024"});
  int port = s.http_port();
  std::string big = simple_json(R"(,"id":")" + std::string(1100, 'x') + "\"");
  auto r = request(port, "POST", "/v2/models/simple/infer", big);
  CHECK(r.status == 400);
  CHECK(error_of(r) == "request JSON size of " + std::to_string(big.size()) +
                           " bytes exceeds the maximum allowed input size of 1024 bytes. Use "
                           "--http-max-input-size to increase the limit.");
  std::string z;
  REQUIRE(http::compress(std::string(4096, ' ') + simple_json(), http::content_coding::gzip, z));
  r = request(port, "POST", "/v2/models/simple/infer", z, {{"Content-Encoding", "gzip"}});
  CHECK(r.status == 400);
  CHECK(error_of(r) ==
        "Decompressed data size exceeds the maximum allowed value of 1024 bytes. Use "
        "--http-max-input-size to increase the limit.");
  r = request(port, "POST", "/v2/models/identity_fp32/infer", std::string(2048, '\0'),
              {{"Inference-Header-Content-Length", "0"}});
  CHECK(r.status == 400);
  CHECK(error_of(r) ==
        "Raw input has a byte_size (2048 bytes) that exceeds the maximum allowed value of 1024 "
        "bytes. Use --http-max-input-size to increase the limit.");
  CHECK(request(port, "POST", "/v2/models/simple/infer", simple_json()).status == 200);
}

TEST_CASE("malformed traffic: the server answers or closes, and keeps serving", "[transport][fuzz]") {
  const int port = shared_server().http_port();
  {
    connection c(port);
    c.send("THIS IS NOT HTTP\r\n\r\n");
    auto r = c.read();
    if (r) CHECK(r->status == 400);
    CHECK(c.closed_by_server());
  }
  {
    connection c(port);
    c.send("GET /v2 HTTP/1.1\r\nX-Big: " + std::string(100 * 1024, 'a') + "\r\n\r\n");
    auto r = c.read();
    if (r) CHECK(r->status == 431);
    CHECK(c.closed_by_server());
  }
  {
    connection c(port);
    c.send(std::string("\x00\x01\x02\xff\r\n\r\n", 8));
    auto r = c.read();
    if (r) CHECK(r->status == 400);
  }
  {
    // Body shorter than declared, then the client goes away.
    connection c(port);
    c.send("POST /v2/models/simple/infer HTTP/1.1\r\nContent-Length: 500\r\n\r\n{\"inputs\":");
  }
  {
    // Body longer than declared: the rest reads as a (bad) next request.
    connection c(port);
    c.send("POST /v2/models/simple/infer HTTP/1.1\r\nContent-Length: 2\r\n\r\n{}garbage\r\n\r\n");
    auto r = c.read();
    REQUIRE(r);
    CHECK(r->status == 500);
    auto r2 = c.read();
    if (r2) CHECK(r2->status == 400);
  }
  {
    connection c(port);
    c.send("POST /v2/models/simple/infer HTTP/1.1\r\nContent-Length: nope\r\n\r\n");
    auto r = c.read();
    if (r) CHECK(r->status == 400);
  }
  {
    // Too many chunks.
    connection c(port);
    std::string req = "POST /v2/models/simple/infer HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n";
    for (int i = 0; i < 65537; ++i) req += "1\r\n \r\n";
    req += "0\r\n\r\n";
    std::thread writer([&] {
      try {
        c.send(req);
      } catch (...) {
      }
    });
    auto r = c.read();
    writer.join();
    REQUIRE(r);
    CHECK(r->status == 400);
    CHECK(error_of(*r) ==
          "Chunked request body exceeds maximum of 65536 non-empty chunks. Send fewer or larger "
          "HTTP chunks.");
  }
  // A slow client that sent half a request does not hold up anybody else.
  connection slow(port);
  slow.send("POST /v2/models/simple/infer HTTP/1.1\r\nContent-Length: 100\r\n\r\n{");
  for (int i = 0; i < 5; ++i) CHECK(post("/v2/models/simple/infer", simple_json()).status == 200);
  CHECK(get("/v2/health/ready").status == 200);
}

TEST_CASE("a slow model does not stall other connections", "[transport]") {
  const int port = shared_server().http_port();
  connection slow(port);
  slow.send(request_text("POST", "/v2/models/identity_slow/infer",
                         R"({"inputs":[{"name":"INPUT0","datatype":"INT32","shape":[1],"data":[7]}]})"));
  // While the slow model sleeps, other requests (also to other models) complete.
  for (int i = 0; i < 10; ++i) CHECK(post("/v2/models/simple/infer", simple_json()).status == 200);
  CHECK_FALSE(slow.readable_now());
  auto r = slow.read();
  REQUIRE(r);
  CHECK(r->status == 200);
  CHECK(r->body.find(R"("data":[7])") != std::string::npos);
}

TEST_CASE("a body that takes long to decode does not stall other connections", "[transport]") {
  // 100 KiB of gzip that inflates to 40 MB of JSON numbers: decoding takes a good fraction of a
  // second, on the execution pool; health checks on other connections are answered meanwhile.
  const int port = shared_server().http_port();
  const std::size_t n = 8000000;
  std::string json = R"({"inputs":[{"name":"INPUT0","datatype":"FP32","shape":[)" + std::to_string(n) + R"(],"data":[)";
  json.reserve(json.size() + 5 * n + 8);
  for (std::size_t i = 0; i < n; ++i) json += i ? ",1.25" : "1.25";
  json += "]}]}";
  std::string z;
  REQUIRE(http::compress(json, http::content_coding::gzip, z));
  json = std::string();
  connection big(port);
  big.send(request_text("POST", "/v2/models/identity_fp32/infer", z, {{"Content-Encoding", "gzip"}}));
  for (int i = 0; i < 3; ++i) CHECK(get("/v2/health/live").status == 200);
  CHECK_FALSE(big.readable_now());  // still decoding (or running) while the others were answered
  auto r = big.read();
  REQUIRE(r);
  CHECK(r->status == 200);
}

TEST_CASE("SIGTERM: in-flight requests finish, then exit 0", "[transport]") {
  server_process s({"--log-verbose", "1"});
  connection slow(s.http_port());
  slow.send(request_text("POST", "/v2/models/identity_slow/infer",
                         R"({"inputs":[{"name":"INPUT0","datatype":"INT32","shape":[1],"data":[3]}]})"));
  // The verbose log shows when the request has been read.
  for (int i = 0; i < 500; ++i) {
    if (s.log().find("HTTP request: POST /v2/models/identity_slow/infer") != std::string::npos) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  int status = -1;
  std::thread stopper([&] { status = s.stop(); });
  auto r = slow.read();
  stopper.join();
  CHECK(status == 0);
  REQUIRE(r);
  CHECK(r->status == 200);
  CHECK(r->body.find(R"("data":[3])") != std::string::npos);
}

TEST_CASE("large bodies are read directly, and pipelining after them still works", "[transport]") {
  connection c(shared_server().http_port());
  std::vector<float> v(200000);
  for (std::size_t i = 0; i < v.size(); ++i) v[i] = static_cast<float>(i) * 0.5f;
  const std::string header = R"({"inputs":[{"name":"INPUT0","datatype":"FP32","shape":[200000],)"
                             R"("parameters":{"binary_data_size":800000}}],"outputs":[{"name":"OUTPUT0",)"
                             R"("parameters":{"binary_data":true}}]})";
  std::string req = request_text("POST", "/v2/models/identity_fp32/infer", header + le_bytes(v),
                                 {{"Inference-Header-Content-Length", std::to_string(header.size())}});
  c.send(req + request_text("GET", "/v2/health/live", ""));
  auto r = c.read();
  REQUIRE(r);
  REQUIRE(r->status == 200);
  auto res = decode(*r);
  CHECK(res.outputs[0].data.str() == le_bytes(v));
  auto h = c.read();
  REQUIRE(h);
  CHECK(h->status == 200);
  // A large declared body that never fully arrives: the server waits, the client leaves,
  // and others are served.
  {
    connection partial(shared_server().http_port());
    partial.send("POST /v2/models/identity_fp32/infer HTTP/1.1\r\nContent-Length: 1000000\r\n"
                 "Inference-Header-Content-Length: 0\r\n\r\n" + std::string(1000, '\0'));
  }
  CHECK(get("/v2/health/ready").status == 200);
}

TEST_CASE("large bodies that are costly to decode (JSON tensors, compressed) are answered like any other", "[transport]") {
  // Decoded on the execution pool (docs/server.md): the replies are the same, errors included,
  // and pipelined requests behind them are answered in order.
  const int port = shared_server().http_port();
  std::vector<float> v(60000);
  std::string data;
  for (std::size_t i = 0; i < v.size(); ++i) {
    v[i] = static_cast<float>(i % 1000) * 0.25f;
    data += (i ? "," : "") + std::to_string(v[i]);
  }
  const std::string json = R"({"inputs":[{"name":"INPUT0","datatype":"FP32","shape":[60000],"data":[)" + data +
                           R"(]}],"outputs":[{"name":"OUTPUT0","parameters":{"binary_data":true}}]})";
  REQUIRE(json.size() > 256 * 1024);
  connection c(port);
  c.send(request_text("POST", "/v2/models/identity_fp32/infer", json) + request_text("GET", "/v2/health/live", ""));
  auto r = c.read();
  REQUIRE(r);
  REQUIRE(r->status == 200);
  CHECK(decode(*r).outputs[0].data.str() == le_bytes(v));
  auto h = c.read();
  REQUIRE(h);
  CHECK(h->status == 200);
  // The same body gzipped, and a binary body deflated to more than 256 KiB.
  std::string z;
  REQUIRE(http::compress(json, http::content_coding::gzip, z));
  auto rz = post("/v2/models/identity_fp32/infer", z, {{"Content-Encoding", "gzip"}});
  REQUIRE(rz.status == 200);
  CHECK(decode(rz).outputs[0].data.str() == le_bytes(v));
  std::vector<float> noise(200000);
  for (std::size_t i = 0; i < noise.size(); ++i) noise[i] = static_cast<float>((i * 2654435761u) % 100003);
  const std::string header = R"({"inputs":[{"name":"INPUT0","datatype":"FP32","shape":[200000],)"
                             R"("parameters":{"binary_data_size":800000}}],"outputs":[{"name":"OUTPUT0",)"
                             R"("parameters":{"binary_data":true}}]})";
  std::string zb;
  REQUIRE(http::compress(header + le_bytes(noise), http::content_coding::deflate, zb));
  REQUIRE(zb.size() > 256 * 1024);
  auto rb = post("/v2/models/identity_fp32/infer", zb,
                 {{"Content-Encoding", "deflate"}, {"Inference-Header-Content-Length", std::to_string(header.size())}});
  REQUIRE(rb.status == 200);
  CHECK(decode(rb).outputs[0].data.str() == le_bytes(noise));
  // A costly body with an error gets the error a small body gets.
  const std::string bad = R"({"inputs":[{"name":"INPUT0","datatype":"FP32","shape":[60001],"data":[)" + data + "]}]}";
  auto rbad = post("/v2/models/identity_fp32/infer", bad);
  auto rsmall = post("/v2/models/identity_fp32/infer", R"({"inputs":[{"name":"INPUT0","datatype":"FP32","shape":[3],"data":[1,2]}]})");
  CHECK(rbad.status == rsmall.status);
  CHECK(rbad.body == rsmall.body);
  CHECK(rbad.body.find("shape does not match true shape") != std::string::npos);
  CHECK(get("/v2/health/ready").status == 200);
}

TEST_CASE("instance count and max_queue_size: a full queue answers 503", "[transport]") {
  // One instance, a queue of one, 1 s per execution: the first request runs, the second
  // waits, the third is refused at once.
  const int port = shared_server().http_port();
  const std::string body =
      R"({"inputs":[{"name":"INPUT0","datatype":"INT32","shape":[1],"data":[5]}]})";
  const auto rejected = failure_metric(shared_server(), "identity_queue", "REJECTED");
  connection a(port), b(port), c(port);
  a.send(request_text("POST", "/v2/models/identity_queue/infer", body));
  std::this_thread::sleep_for(std::chrono::milliseconds(200));
  b.send(request_text("POST", "/v2/models/identity_queue/infer", body));
  std::this_thread::sleep_for(std::chrono::milliseconds(200));
  c.send(request_text("POST", "/v2/models/identity_queue/infer", body));
  auto rc = c.read();
  REQUIRE(rc);
  CHECK(rc->status == 503);
  CHECK(error_of(*rc) == "Exceeds maximum queue size");
  CHECK(failure_metric(shared_server(), "identity_queue", "REJECTED") == rejected + 1);
  CHECK_FALSE(b.readable_now());  // still queued behind the first
  auto ra = a.read(), rb = b.read();
  REQUIRE(ra);
  REQUIRE(rb);
  CHECK(ra->status == 200);
  CHECK(rb->status == 200);
  // The queued request's wait shows in the statistics.
  auto st = get("/v2/models/identity_queue/stats");
  CHECK(st.body.find(R"("queue":{"count":2,)") != std::string::npos);
}

TEST_CASE("a request whose client hangs up while it is queued is not executed", "[transport]") {
  // identity_queue: one instance, 1 s per execution, a queue of one.
  const int port = shared_server().http_port();
  const std::string body =
      R"({"inputs":[{"name":"INPUT0","datatype":"INT32","shape":[1],"data":[5]}]})";
  auto stats = [] {
    auto r = get("/v2/models/identity_queue/stats");
    REQUIRE(r.status == 200);
    const auto s = boost::json::parse(r.body).at("model_stats").at(0).as_object();
    return std::pair{s.at("execution_count").to_number<std::uint64_t>(),
                     s.at("inference_stats").at("success").at("count").to_number<std::uint64_t>()};
  };
  const auto [executions, successes] = stats();
  const auto canceled = failure_metric(shared_server(), "identity_queue", "CANCELED");
  connection a(port);
  a.send(request_text("POST", "/v2/models/identity_queue/infer", body));
  std::this_thread::sleep_for(std::chrono::milliseconds(200));  // A runs
  {
    connection b(port);
    b.send(request_text("POST", "/v2/models/identity_queue/infer", body));
    std::this_thread::sleep_for(std::chrono::milliseconds(200));  // B waits behind A
  }  // B's client hangs up
  auto ra = a.read();
  REQUIRE(ra);
  CHECK(ra->status == 200);
  // B's turn came as A finished; had it run, it would have finished within this wait.
  std::this_thread::sleep_for(std::chrono::milliseconds(1400));
  CHECK(stats() == std::pair{executions + 1, successes + 1});
  CHECK(failure_metric(shared_server(), "identity_queue", "CANCELED") == canceled + 1);  // Triton's reason
  // The queue and the instance serve the next request as usual.
  connection c(port);
  c.send(request_text("POST", "/v2/models/identity_queue/infer", body));
  auto rc = c.read();
  REQUIRE(rc);
  CHECK(rc->status == 200);
  CHECK(stats() == std::pair{executions + 2, successes + 2});
}

TEST_CASE("schedule policy: priorities and request timeouts in the queue", "[transport][schedule]") {
  // identity_policy: one instance, 400 ms per execution, levels 1 (high) and 2 (default); the
  // default level has no timeout of its own but lets a request set one.
  const int port = shared_server().http_port();
  auto body = [](const std::string& params) {
    return R"({"inputs":[{"name":"INPUT0","datatype":"INT32","shape":[1],"data":[5]}])" +
           (params.empty() ? std::string() : R"(,"parameters":{)" + params + "}") + "}";
  };
  const auto rejected = failure_metric(shared_server(), "identity_policy", "REJECTED");
  connection a(port), b(port), d(port), e(port);
  a.send(request_text("POST", "/v2/models/identity_policy/infer", body("")));
  std::this_thread::sleep_for(std::chrono::milliseconds(150));  // A runs, the rest queue
  b.send(request_text("POST", "/v2/models/identity_policy/infer", body(R"("timeout":100000)")));
  d.send(request_text("POST", "/v2/models/identity_policy/infer", body("")));
  std::this_thread::sleep_for(std::chrono::milliseconds(50));
  e.send(request_text("POST", "/v2/models/identity_policy/infer", body(R"("priority":1)")));
  // B's 100 ms pass while A still runs (400 ms): B is answered at its deadline, before A.
  auto rb = b.read();
  REQUIRE(rb);
  CHECK(rb->status == 503);
  CHECK(error_of(*rb) == "Request timeout expired");
  CHECK(failure_metric(shared_server(), "identity_policy", "REJECTED") == rejected + 1);
  CHECK_FALSE(a.readable_now());
  auto ra = a.read();
  REQUIRE(ra);
  CHECK(ra->status == 200);
  // E (priority 1) came after D (default level 2) but runs first.
  auto re = e.read();
  REQUIRE(re);
  CHECK(re->status == 200);
  CHECK_FALSE(d.readable_now());
  auto rd = d.read();
  REQUIRE(rd);
  CHECK(rd->status == 200);
  // A priority past the model's levels takes the default level; it is served as usual.
  CHECK(post("/v2/models/identity_policy/infer", body(R"("priority":99)")).status == 200);
}

TEST_CASE("randomised malformed requests never take the server down", "[transport][fuzz]") {
  // Mutations of valid requests (truncations, byte flips, random headers and bodies) on many
  // connections; afterwards the server must still answer correctly.
  const int port = shared_server().http_port();
  std::mt19937 rng(20261122);
  const std::string header =
      R"({"inputs":[{"name":"INPUT0","datatype":"INT32","shape":[1,16],"parameters":{"binary_data_size":64}},)"
      R"({"name":"INPUT1","datatype":"INT32","shape":[1,16],"data":)" + json_array(iota16()) + "}]}";
  const std::vector<std::string> seeds{
      request_text("POST", "/v2/models/simple/infer", simple_json()),
      request_text("POST", "/v2/models/simple/infer", header + std::string(64, '\1'),
                   {{"Inference-Header-Content-Length", std::to_string(header.size())}}),
      request_text("POST", "/v2/models/simple_string_dyna_sequence/infer",
                   R"({"parameters":{"sequence_id":"7","sequence_start":true},"inputs":[{"name":"INPUT","datatype":"INT32","shape":[1,1],"data":[1]}]})"),
      request_text("POST", "/v2/trace/setting", R"({"trace_rate":"7"})"),
      request_text("GET", "/v2/models/simple/config", ""),
  };
  int replies = 0;
  for (int i = 0; i < 300; ++i) {
    std::string msg = seeds[rng() % seeds.size()];
    switch (rng() % 4) {
      case 0: msg.resize(rng() % (msg.size() + 1)); break;                      // truncate
      case 1:
        for (int k = 0; k < 8; ++k) msg[rng() % msg.size()] = static_cast<char>(rng());  // flip
        break;
      case 2: {                                                                  // body bytes only
        auto body = msg.find("\r\n\r\n");
        if (body != std::string::npos)
          for (std::size_t k = body + 4; k < msg.size(); ++k)
            if (rng() % 5 == 0) msg[k] = static_cast<char>(rng());
        break;
      }
      default: {                                                                 // random tail
        std::string tail(rng() % 200, '\0');
        for (auto& c : tail) c = static_cast<char>(rng());
        msg += tail;
      }
    }
    connection c(port);
    try {
      c.send(msg);
      // Shut our side down so a waiting server sees the end; any reply (or none) is fine.
      boost::system::error_code ec;
      c.socket().shutdown(tcp::socket::shutdown_send, ec);
      auto r = c.read();
      if (r) {
        CHECK(r->status >= 200);
        ++replies;
      }
    } catch (const std::exception&) {
      // The server may reset a connection it refused; that is an acceptable answer.
    }
  }
  CAPTURE(replies);
  CHECK(replies > 100);  // most mutations still reach a handler and get an error reply
  auto r = post("/v2/models/simple/infer", simple_json());
  REQUIRE(r.status == 200);
  CHECK(r.body.find(R"("data":[1,2,3,4,)") != std::string::npos);
  CHECK(get("/v2/health/ready").status == 200);
}
