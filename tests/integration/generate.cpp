// SPDX-License-Identifier: Apache-2.0
// Triton's generate extension: /generate and /generate_stream over the bundled models, a
// decoupled model's responses as Server-Sent Events, and the refusals.
#include "common.hpp"

#include <boost/json/parse.hpp>

#include <array>
#include <fstream>

#include <poll.h>

#include <atomic>
#include <thread>

using namespace iwtest;
namespace json = boost::json;

namespace {

// One server with the decoupled models too, shared by this file's cases.
server_process& generate_server() {
  static server_process s({"--model-repository", std::string(INFERWIRE_SOURCE_DIR) + "/reference_server/models_decoupled"});
  return s;
}
reply generate(std::string_view target, std::string_view body,
               const std::vector<std::pair<std::string, std::string>>& headers = {}) {
  return request(generate_server().http_port(), "POST", target, body, headers);
}

const std::string simple_body =
    R"({"INPUT0":[0,1,2,3,4,5,6,7,8,9,10,11,12,13,14,15],"INPUT1":[1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1])";

// The JSON objects of the `data:` events of a Server-Sent Events body, which must hold nothing else.
std::vector<json::value> events_of(const std::string& body) {
  std::vector<json::value> out;
  std::size_t at = 0;
  while (at < body.size()) {
    REQUIRE(body.compare(at, 6, "data: ") == 0);
    const auto end = body.find("\n\n", at);
    REQUIRE(end != std::string::npos);
    out.push_back(json::parse(body.substr(at + 6, end - at - 6)));
    at = end + 2;
  }
  return out;
}

std::uint64_t successes(const std::string& model) {
  auto r = request(generate_server().http_port(), "GET", "/v2/models/" + model + "/stats");
  REQUIRE(r.status == 200);
  return json::parse(r.body).at("model_stats").at(0).at("inference_stats").at("success").at("count").to_number<std::uint64_t>();
}

}  // namespace

TEST_CASE("generate: top-level keys and parameters become inputs and request parameters", "[generate]") {
  const auto before = successes("simple");
  auto r = generate("/v2/models/simple/generate",
                    simple_body + R"(,"id":"g-1","temperature":0.5,"parameters":{"stream":false}})");
  REQUIRE(r.status == 200);
  CHECK(r.header("content-type") == "application/json");
  CHECK(r.body ==
        R"({"id":"g-1","model_name":"simple","model_version":"1",)"
        R"("OUTPUT0":[1,2,3,4,5,6,7,8,9,10,11,12,13,14,15,16],"OUTPUT1":[-1,0,1,2,3,4,5,6,7,8,9,10,11,12,13,14]})");
  CHECK(successes("simple") == before + 1);
  // An input inside `parameters` is an input too; a version in the URL is honoured.
  r = generate("/v2/models/simple/versions/1/generate",
               R"({"INPUT0":[0,1,2,3,4,5,6,7,8,9,10,11,12,13,14,15],"parameters":{"INPUT1":[2,2,2,2,2,2,2,2,2,2,2,2,2,2,2,2]}})");
  REQUIRE(r.status == 200);
  CHECK(json::parse(r.body).at("OUTPUT0").at(15).to_number<int>() == 17);
  // BYTES inputs take strings.
  r = generate("/v2/models/simple_string/generate",
               R"({"INPUT0":["1","2","3","4","5","6","7","8","9","10","11","12","13","14","15","16"],)"
               R"("INPUT1":["1","1","1","1","1","1","1","1","1","1","1","1","1","1","1","1"]})");
  REQUIRE(r.status == 200);
  CHECK(json::parse(r.body).at("OUTPUT0").at(15) == "17");
}

TEST_CASE("generate: one response of a decoupled model is a scalar object; more are refused", "[generate]") {
  auto r = generate("/v2/models/repeat_int32/generate", R"({"IN":[5],"DELAY":[0],"WAIT":0})");
  REQUIRE(r.status == 200);
  CHECK(r.body == R"({"model_name":"repeat_int32","model_version":"1","OUT":5,"IDX":0})");
  r = generate("/v2/models/repeat_int32/generate", R"({"IN":[5,6,7],"DELAY":[0,0,0],"WAIT":0})");
  CHECK(r.status == 400);
  CHECK(error_of(r) ==
        "model 'repeat_int32' sent more than one response; /generate returns exactly one, /generate_stream "
        "returns them all");
  r = generate("/v2/models/repeat_int32/generate", R"({"IN":[],"DELAY":[],"WAIT":0})");
  CHECK(r.status == 500);
  CHECK(error_of(r) == "model 'repeat_int32' sent no response");
}

TEST_CASE("generate_stream: each response is an event, sent as it is made", "[generate]") {
  auto r = generate("/v2/models/simple/generate_stream", simple_body + "}");
  REQUIRE(r.status == 200);
  CHECK(r.header("content-type") == "text/event-stream; charset=utf-8");
  CHECK(r.header("transfer-encoding") == "chunked");
  auto events = events_of(r.body);
  REQUIRE(events.size() == 1);
  CHECK(events[0].at("OUTPUT1").at(0).to_number<int>() == -1);

  r = generate("/v2/models/repeat_int32/generate_stream", R"({"id":"s","IN":[5,6,7],"DELAY":[0,0,0],"WAIT":0})");
  REQUIRE(r.status == 200);
  events = events_of(r.body);
  REQUIRE(events.size() == 3);
  for (int i = 0; i < 3; ++i) {
    CHECK(events[i].at("id") == "s");
    CHECK(events[i].at("OUT").to_number<int>() == 5 + i);
    CHECK(events[i].at("IDX").to_number<int>() == i);
  }
  // No response: 200 and no event.
  r = generate("/v2/models/repeat_int32/generate_stream", R"({"IN":[],"DELAY":[],"WAIT":0})");
  CHECK(r.status == 200);
  CHECK(r.body.empty());

  // The first event is on the wire while the model still waits 1.5 s for the second; the
  // connection then serves the next request.
  connection c(generate_server().http_port());
  c.send(request_text("POST", "/v2/models/repeat_int32/generate_stream", R"({"IN":[1,2],"DELAY":[0,1500],"WAIT":0})"));
  pollfd pfd{c.socket().native_handle(), POLLIN, 0};
  CHECK(::poll(&pfd, 1, 1000) == 1);
  auto whole = c.read();
  REQUIRE(whole);
  CHECK(events_of(whole->body).size() == 2);
  c.send(request_text("POST", "/v2/models/simple/generate", simple_body + "}"));
  auto next = c.read();
  REQUIRE(next);
  CHECK(next->status == 200);
}

TEST_CASE("generate: malformed requests get 4xx with a reason", "[generate]") {
  struct bad {
    std::string target, body;
    unsigned status;
    std::string error;
  };
  const std::vector<bad> cases = {
      {"/v2/models/simple/generate", "[1]", 400, "the generate request must be a JSON object"},
      {"/v2/models/simple/generate_stream", "{", 500, ""},
      {"/v2/models/simple/generate", R"({"INPUT0":[1,2]})", 400,
       "input 'INPUT0' of model 'simple' has shape [16]: 2 elements do not fit it"},
      {"/v2/models/simple/generate", R"({"INPUT0":[[1]]})", 400,
       "input 'INPUT0' must be a scalar or a flat array of scalars"},
      {"/v2/models/simple/generate", simple_body + R"(,"x":{"a":1}})", 400,
       "parameter 'x' of the generate request must be a string, number or boolean"},
      {"/v2/models/simple/generate", simple_body + R"(,"triton_x":1})", 400,
       "parameter keys starting with 'triton_' are reserved for Triton usage and should not be specified."},
      {"/v2/models/simple/generate", simple_body + R"(,"parameters":{"INPUT0":[1]}})", 400,
       "input 'INPUT0' is given more than once"},
      {"/v2/models/simple/generate", R"({"id":7})", 400, "the generate request's 'id' must be a string"},
      {"/v2/models/simple/generate", R"({"INPUT0":[0,1,2,3,4,5,6,7,8,9,10,11,12,13,14,15]})", 400, ""},
      {"/v2/models/simple_string/generate", R"({"INPUT0":[1]})", 400, ""},
      {"/v2/models/nope/generate_stream", "{}", 404, "Request for unknown model: 'nope' is not found"},
  };
  for (const auto& c : cases) {
    INFO(c.target << " " << c.body);
    auto r = generate(c.target, c.body);
    CHECK(r.status == c.status);
    CHECK(r.header("content-type") == "application/json");
    if (!c.error.empty()) CHECK(error_of(r) == c.error);
  }
  auto r = generate("/v2/models/simple/generate", simple_body + "}", {{"Content-Encoding", "gzip"}});
  CHECK(r.status == 400);
  CHECK(error_of(r) == "generate requests take no Content-Encoding but identity");
  r = request(generate_server().http_port(), "GET", "/v2/models/simple/generate");
  CHECK(r.status == 405);
}

TEST_CASE("generate_stream: a client that stops reading holds back the model, not memory", "[generate]") {
  const pid_t pid = generate_server().pid();
  auto rss_mib = [pid] {
    std::ifstream in("/proc/" + std::to_string(pid) + "/status");
    for (std::string line; std::getline(in, line);)
      if (line.rfind("VmRSS:", 0) == 0) return std::stoull(line.substr(6)) / 1024;
    return 0ull;
  };
  const auto before = rss_mib();
  // 200,000 responses of about 70 bytes each: 14 MB of events, were they all kept.
  std::string in = "[", delay = "[";
  for (int i = 0; i < 200000; ++i) {
    in += (i ? ",7" : "7");
    delay += (i ? ",0" : "0");
  }
  auto c = std::make_unique<connection>(generate_server().http_port());
  ::setsockopt(c->socket().native_handle(), SOL_SOCKET, SO_RCVBUF, std::array<int, 1>{4096}.data(), sizeof(int));
  c->send(request_text("POST", "/v2/models/repeat_int32/generate_stream",
                       R"({"IN":)" + in + R"(],"DELAY":)" + delay + R"(],"WAIT":0})"));
  pollfd pfd{c->socket().native_handle(), POLLIN, 0};
  REQUIRE(::poll(&pfd, 1, 5000) == 1);  // the model runs: its first events are here
  std::this_thread::sleep_for(std::chrono::seconds(1));
  const auto held = rss_mib();
  // The model is held back at 16 waiting events: a request behind it on its one instance waits
  // (had the events been buffered, the model would have finished long ago).
  std::atomic<bool> answered{false};
  std::atomic<unsigned> status{0};
  std::thread behind([&] {
    status = generate("/v2/models/repeat_int32/generate", R"({"IN":[9],"DELAY":[0],"WAIT":0})").status;
    answered = true;
  });
  std::this_thread::sleep_for(std::chrono::seconds(1));
  CHECK_FALSE(answered);
  INFO("server RSS " << before << " MiB before, " << held << " MiB after 1 s, " << rss_mib() << " MiB after 2 s");
  CHECK(rss_mib() <= held + 4);  // nothing piles up (14 MB of events, were they kept)
  CHECK(held < before + 48);     // the request's own decoding (a 1.6 MB JSON body) included
  // The client goes away: the model stops, and the request behind it runs.
  const auto t0 = std::chrono::steady_clock::now();
  c.reset();
  behind.join();
  CHECK(status == 200);
  CHECK(std::chrono::steady_clock::now() - t0 < std::chrono::seconds(5));
}

TEST_CASE("generate_stream: a client that reads nothing for --stall-timeout-secs is closed, which stops the model",
          "[generate]") {
  server_process s({"--model-repository", std::string(INFERWIRE_SOURCE_DIR) + "/reference_server/models_decoupled",
                    "--stall-timeout-secs=2"});
  std::string in = "[", delay = "[";
  for (int i = 0; i < 200000; ++i) {
    in += (i ? ",7" : "7");
    delay += (i ? ",0" : "0");
  }
  connection c(s.http_port());
  ::setsockopt(c.socket().native_handle(), SOL_SOCKET, SO_RCVBUF, std::array<int, 1>{4096}.data(), sizeof(int));
  c.send(request_text("POST", "/v2/models/repeat_int32/generate_stream",
                      R"({"IN":)" + in + R"(],"DELAY":)" + delay + R"(],"WAIT":0})"));
  pollfd pfd{c.socket().native_handle(), POLLIN, 0};
  REQUIRE(::poll(&pfd, 1, 5000) == 1);  // the model runs: its first events are here
  // A request behind it on the model's one instance runs once the stalled client is closed:
  // after about 2 s, and at most the timeout plus the watchdog's period (1 s here) later.
  const auto t0 = std::chrono::steady_clock::now();
  auto r = request(s.http_port(), "POST", "/v2/models/repeat_int32/generate", R"({"IN":[9],"DELAY":[0],"WAIT":0})");
  const auto waited = std::chrono::steady_clock::now() - t0;
  INFO("the request behind waited " << std::chrono::duration_cast<std::chrono::milliseconds>(waited).count() << " ms");
  CHECK(r.status == 200);
  CHECK(waited > std::chrono::milliseconds(1500));
  CHECK(waited < std::chrono::seconds(8));
}

TEST_CASE("generate: an input given twice is refused, as /infer refuses it", "[generate]") {
  const std::string ones = "[1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1]";
  auto r = post("/v2/models/simple/generate",
                R"({"INPUT0":)" + ones + R"(,"INPUT1":)" + ones + R"(,"INPUT0":)" + ones + "}");
  CHECK(r.status == 400);
  CHECK(error_of(r) == "input 'INPUT0' already exists in request");
  // A repeated key that is not an input keeps the last value, as before.
  r = post("/v2/models/simple/generate",
           R"({"INPUT0":)" + ones + R"(,"INPUT1":)" + ones + R"(,"note":"a","note":"b"})");
  CHECK(r.status == 200);
}
