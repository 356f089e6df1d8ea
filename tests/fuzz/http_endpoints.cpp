// SPDX-License-Identifier: Apache-2.0
// libFuzzer target: what a client sends the server over HTTP, as far as the server's endpoint
// layer (reference_server/src/http_endpoints.cpp) and everything under it: the routes, the
// method checks, every endpoint's body (infer in JSON and binary, compressed or not, generate
// and its streamed events, the shared-memory, repository, trace and logging requests), the service, the models and the
// encoders of every reply. The connection's framing (keep-alive, chunked bodies, Expect, the
// in-flight budget) is http_connection's; here Beast's request parser cuts the input into up
// to eight requests, answered in turn by one server built once over the bundled repositories,
// so that one input can register a shared-memory region and then infer from it.
//
// Findings, beyond the sanitizers': an exception out of the endpoint layer other than an
// allocation failure, a reply that never comes or comes twice, a status outside 200-599, a
// JSON reply (or the JSON header of a binary one) that does not parse, a binary header length
// past the reply's bytes.
//
// Between inputs the server is put back: every shared-memory region unregistered, the log
// levels restored, the bundled models loaded again and every other model unloaded.
#include "http.hpp"
#include "server.hpp"

#include <inferwire/http/compression.hpp>

#include <boost/beast/http/parser.hpp>
#include <boost/json/parse.hpp>

#include <chrono>
#include <condition_variable>
#include <cstddef>
#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <memory>
#include <limits>
#include <mutex>
#include <new>
#include <optional>
#include <set>
#include <string>
#include <string_view>
#include <vector>

#include <fcntl.h>
#include <sys/mman.h>
#include <unistd.h>

namespace {

namespace rest = inferwire::server::rest;
namespace srv = inferwire::server;
namespace bhttp = boost::beast::http;

/// A region the fuzzer may register (its key is in the seed corpus and the dictionary).
constexpr const char* region_key = "/inferwire-fuzz-region";
constexpr std::size_t region_size = 64 * 1024;

srv::options endpoints_options() {
  srv::options o;
  o.model_repositories = {INFERWIRE_SOURCE_DIR "/reference_server/models",
                          INFERWIRE_SOURCE_DIR "/reference_server/models_ensemble",
                          INFERWIRE_SOURCE_DIR "/reference_server/models_decoupled"};
  o.model_control_mode = "explicit";
  o.load_models = {"*"};
  o.allow_client_shm = true;
  o.http_max_input_size = std::size_t{1} << 20;
  o.execution_thread_count = 2;
  o.model_load_thread_count = 1;
  o.log_info = o.log_warning = o.log_error = false;
  return o;
}

struct endpoints_fixture {
  srv::server_state s{endpoints_options()};
  rest::endpoints endpoints{s};
  std::set<std::string> bundled;  ///< the models ready after start-up

  endpoints_fixture() {
    const int fd = ::shm_open(region_key, O_RDWR | O_CREAT, 0600);
    if (fd < 0 || ::ftruncate(fd, region_size) != 0) __builtin_trap();
    ::close(fd);
    s.repository.startup(s.opts.load_models, 1);
    for (const auto& e : s.repository.index(true)) bundled.insert(e.name);
    if (bundled.empty()) __builtin_trap();
  }

  void restore(bool repository) {
    (void)s.shm.unregister(srv::region_kind::system, "");
    (void)s.shm.unregister(srv::region_kind::cuda, "");
    s.log.info = s.opts.log_info;
    s.log.warning = s.opts.log_warning;
    s.log.error = s.opts.log_error;
    s.log.verbose = s.opts.log_verbose;
    s.log.format = srv::log_format::standard;
    if (!repository) return;
    std::set<std::string> ready;
    for (const auto& e : s.repository.index(true)) ready.insert(e.name);
    for (const auto& name : ready)
      if (!bundled.count(name)) (void)s.repository.unload(name, false);
    for (const auto& name : bundled)
      if (!ready.count(name)) (void)s.repository.load(name, {});
  }
};

/// Catches a reply that comes after handle() returned (work on the execution pool).
class catcher final : public rest::responder {
 public:
  void respond(rest::reply r) override {
    std::lock_guard lock(mu_);
    if (reply_) __builtin_trap();  // answered twice
    reply_ = std::move(r);
    cv_.notify_all();
  }
  rest::reply wait() {
    std::unique_lock lock(mu_);
    if (!cv_.wait_for(lock, std::chrono::seconds(5), [&] { return reply_.has_value(); }))
      __builtin_trap();  // never answered
    return std::move(*reply_);
  }

 private:
  std::mutex mu_;
  std::condition_variable cv_;
  std::optional<rest::reply> reply_;
};

bool parses(std::string_view json) {
  boost::system::error_code ec;
  (void)boost::json::parse(json, ec);
  return !ec;
}

/// A finding in a reply: says what and shows the reply before stopping.
[[noreturn]] void bad_reply(const char* what, const rest::reply& r, std::string_view body) {
  std::fprintf(stderr, "http_endpoints: %s: status %u, %zu bytes:\n%.*s\n", what, r.status, body.size(),
               static_cast<int>(std::min<std::size_t>(body.size(), 4096)), body.data());
  __builtin_trap();
}

// A streamed reply (generate_stream): its events, taken as the connection would, must each be
// `data: <JSON>\n\n`, and the stream must end.
void check_stream(const rest::reply& r) {
  std::mutex mu;
  std::condition_variable cv;
  bool woken = false;
  std::vector<std::string> events;
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(5);
  for (bool ended = false; !ended;) {
    events.clear();
    const auto got = r.stream->take(events, std::numeric_limits<std::size_t>::max(), ended, [&] {
      std::lock_guard lock(mu);
      woken = true;
      cv.notify_all();
    });
    if (got == rest::reply_stream::taken::broken) __builtin_trap();  // nobody broke it
    if (got == rest::reply_stream::taken::waiting) {
      std::unique_lock lock(mu);
      if (!cv.wait_until(lock, deadline, [&] { return woken; })) __builtin_trap();  // never ends
      woken = false;
      continue;
    }
    for (const auto& e : events)
      if (e.size() < 8 || e.compare(0, 6, "data: ") != 0 || e.compare(e.size() - 2, 2, "\n\n") != 0 ||
          !parses(std::string_view(e).substr(6, e.size() - 8)))
        bad_reply("an event of a streamed reply is not `data: <JSON>`", r, e);
  }
}

void check(const rest::reply& r) {
  if (r.status < 200 || r.status > 599) bad_reply("status out of range", r, r.body);
  if (r.stream) return check_stream(r);
  std::string_view body = r.body;
  std::size_t total = r.body.size();
  for (const auto& b : r.extra) total += b.size();
  std::string plain;
  for (const auto& [name, value] : r.fields) {
    if (name != "Content-Encoding") continue;
    // A compressed reply is the whole message (JSON header and tensors) in one stream.
    if (!r.extra.empty() || inferwire::http::decompress(r.body, std::size_t{1} << 26, plain))
      bad_reply("a compressed reply does not inflate", r, r.body);
    body = plain;
    total = plain.size();
  }
  if (r.header_length) {
    if (*r.header_length > body.size() || *r.header_length > total)
      bad_reply("header length past the reply", r, body);
    if (!parses(body.substr(0, *r.header_length))) bad_reply("binary reply's header is not JSON", r, body);
  } else if (r.content_type == "application/json" && !body.empty() && !parses(body)) {
    bad_reply("JSON reply does not parse", r, body);
  }
}

void answer(endpoints_fixture& f, rest::http_request&& req) {
  auto out = std::make_shared<catcher>();
  const auto now = srv::clock::now();
  std::optional<rest::reply> r;
  try {
    r = f.endpoints.handle(std::move(req), nullptr, out, rest::receive_times{now, now});
  } catch (const std::bad_alloc&) {
    return;  // the connection answers 500 (a hostile size is refused before allocating)
  } catch (...) {
    __builtin_trap();  // the connection would answer 500 with its text: not a protocol error
  }
  check(r ? *r : out->wait());
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  static endpoints_fixture f;
  std::string_view in(reinterpret_cast<const char*>(data), size);
  bool touched_repository = false;
  for (int n = 0; n < 8 && !in.empty(); ++n) {
    rest::request_parser parser;
    parser.header_limit(64 * 1024);
    parser.body_limit(std::uint64_t{1} << 20);
    parser.eager(true);
    boost::system::error_code ec;
    const std::size_t used = parser.put(boost::asio::buffer(in.data(), in.size()), ec);
    if (ec || !parser.is_done()) break;
    in.remove_prefix(used);
    rest::http_request req = parser.release();
    touched_repository |= req.target().find("repository") != boost::beast::string_view::npos;
    answer(f, std::move(req));
  }
  f.restore(touched_repository);
  return 0;
}
