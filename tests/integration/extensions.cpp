// SPDX-License-Identifier: Apache-2.0
// Statistics, metrics, sequences, trace and logging settings, and the command line.
#include "common.hpp"

#include <boost/json/parse.hpp>
#include <boost/json/serialize.hpp>

#include <filesystem>
#include <fstream>

#include <unistd.h>

#include <regex>
#include <thread>

using namespace iwtest;
namespace json = boost::json;

namespace {
std::uint64_t success_count(const std::string& model) {
  auto r = get("/v2/models/" + model + "/stats");
  REQUIRE(r.status == 200);
  auto v = json::parse(r.body);
  return v.at("model_stats").at(0).at("inference_stats").at("success").at("count").to_number<std::uint64_t>();
}
std::uint64_t metric(const std::string& text, const std::string& series) {
  auto pos = text.find(series + " ");
  if (pos == std::string::npos) return ~std::uint64_t{0};
  return std::stoull(text.substr(pos + series.size() + 1));
}
}  // namespace

TEST_CASE("statistics count successes, failures and durations", "[statistics]") {
  auto before = success_count("simple_int8");
  std::string body = R"({"inputs":[{"name":"INPUT0","datatype":"INT8","shape":[2,16],"data":)" +
                     json_array(std::vector<int>(32, 100)) +
                     R"(},{"name":"INPUT1","datatype":"INT8","shape":[2,16],"data":)" +
                     json_array(std::vector<int>(32, 100)) + "}]}";
  auto r = post("/v2/models/simple_int8/infer", body);
  REQUIRE(r.status == 200);
  CHECK(r.body.find(R"("data":[-56,-56,)") != std::string::npos);  // 200 wraps in int8
  CHECK(post("/v2/models/simple_int8/infer", "{").status == 500);
  CHECK(success_count("simple_int8") == before + 1);
  auto v = json::parse(get("/v2/models/simple_int8/stats").body).at("model_stats").at(0);
  CHECK(v.at("name") == "simple_int8");
  CHECK(v.at("version") == "1");
  CHECK(v.at("inference_count").to_number<int>() >= 2);  // batch of 2
  CHECK(v.at("inference_stats").at("fail").at("count").to_number<int>() >= 1);
  CHECK(v.at("inference_stats").at("compute_infer").at("ns").to_number<std::uint64_t>() > 0);
  CHECK(v.at("batch_stats").at(0).at("batch_size") == 2);
  CHECK(v.at("last_inference").to_number<std::uint64_t>() > 1'700'000'000'000ull);

  auto all = json::parse(get("/v2/models/stats").body).at("model_stats").as_array();
  CHECK(all.size() >= 7);
  r = get("/v2/models/nope/stats");
  CHECK(r.status == 400);
  CHECK(error_of(r) == "requested model 'nope' is not available");
  r = get("/v2/models/simple/versions/5/stats");
  CHECK(r.status == 400);
  CHECK(error_of(r) == "requested model version is not available for model 'simple'");
}

TEST_CASE("Prometheus metrics move with inference", "[statistics][metrics]") {
  const int mport = shared_server().metrics_port();
  auto m0 = request(mport, "GET", "/metrics");
  REQUIRE(m0.status == 200);
  CHECK(m0.header("content-type") == "text/plain; charset=utf-8");
  const std::string ok = R"(nv_inference_request_success{model="simple",version="1"})";
  // An invalid request fails for a reason Triton labels OTHER; every reason is listed.
  const std::string bad = R"(nv_inference_request_failure{model="simple",reason="OTHER",version="1"})";
  for (const char* reason : {"REJECTED", "CANCELED", "BACKEND"})
    CHECK(metric(m0.body, std::string(R"(nv_inference_request_failure{model="simple",reason=")") + reason +
                              R"(",version="1"})") != ~std::uint64_t{0});
  auto s0 = metric(m0.body, ok), f0 = metric(m0.body, bad);
  REQUIRE(s0 != ~std::uint64_t{0});
  REQUIRE(f0 != ~std::uint64_t{0});
  CHECK(post("/v2/models/simple/infer", simple_json()).status == 200);
  CHECK(post("/v2/models/simple/infer", simple_json()).status == 200);
  CHECK(post("/v2/models/simple/infer", R"({"inputs":[]})").status == 400);
  auto m1 = request(mport, "GET", "/metrics/").body;
  CHECK(metric(m1, ok) == s0 + 2);
  CHECK(metric(m1, bad) == f0 + 1);
  CHECK(metric(m1, R"(nv_inference_exec_count{model="simple",version="1"})") >= 2);
  CHECK(m1.find("# TYPE nv_inference_request_duration_us counter") != std::string::npos);
  CHECK(m1.find(R"(nv_inference_compute_infer_duration_us{model="simple",version="1"})") != std::string::npos);
  CHECK(request(mport, "POST", "/metrics", "").status == 405);
  auto other = request(mport, "GET", "/other");
  CHECK(other.status == 200);
  CHECK(other.body.empty());
}

namespace {
reply seq(const std::string& model, const std::string& id, const std::string& flags, int value) {
  return post("/v2/models/" + model + "/infer",
              R"({"parameters":{"sequence_id":)" + id + flags +
                  R"(},"inputs":[{"name":"INPUT","datatype":"INT32","shape":[1,1],"data":[)" +
                  std::to_string(value) + "]}]}");
}
int out(const reply& r) {
  auto v = json::parse(r.body);
  return v.at("outputs").at(0).at("data").at(0).to_number<int>();
}
}  // namespace

TEST_CASE("sequences: controls, correlation IDs and errors", "[sequence]") {
  // simple_sequence: OUTPUT = (INPUT + START) * READY.
  auto r = seq("simple_sequence", "1000", R"(,"sequence_start":true)", 0);
  REQUIRE(r.status == 200);
  CHECK(out(r) == 1);
  CHECK(out(seq("simple_sequence", "1000", "", 11)) == 11);
  CHECK(out(seq("simple_sequence", "1000", R"(,"sequence_end":true)", 7)) == 7);
  // The sequence ended: the next request must start again.
  r = seq("simple_sequence", "1000", "", 5);
  CHECK(r.status == 400);
  CHECK(error_of(r) ==
        "[request id: <id_unknown>] inference request for sequence 1000 to model "
        "'simple_sequence' must specify the START flag on the first request of the sequence");
  // String correlation IDs work too.
  CHECK(out(seq("simple_sequence", R"("SEQ-3")", R"(,"sequence_start":true)", 20)) == 21);
  CHECK(out(seq("simple_sequence", R"("SEQ-3")", "", -11)) == -11);
  r = seq("simple_sequence", "0", R"(,"sequence_start":true)", 1);
  CHECK(r.status == 400);
  CHECK(error_of(r) ==
        "[request id: <id_unknown>] inference request to model 'simple_sequence' must specify "
        "a non-zero or non-empty correlation ID");
  r = post("/v2/models/simple_sequence/infer",
           R"({"inputs":[{"name":"INPUT","datatype":"INT32","shape":[1,1],"data":[1]}]})");
  CHECK(r.status == 400);

  // simple_dyna_sequence: OUTPUT = (INPUT + START + END * CORRID) * READY.
  CHECK(out(seq("simple_dyna_sequence", "1001", R"(,"sequence_start":true)", 0)) == 1);
  CHECK(out(seq("simple_dyna_sequence", "1001", "", 11)) == 11);
  CHECK(out(seq("simple_dyna_sequence", "1001", R"(,"sequence_end":true)", 2)) == 1003);

  // simple_string_dyna_sequence: an accumulator; END adds the numeric correlation ID.
  CHECK(out(seq("simple_string_dyna_sequence", R"("1002")", R"(,"sequence_start":true)", 0)) == 0);
  CHECK(out(seq("simple_string_dyna_sequence", R"("1002")", "", 11)) == 11);
  CHECK(out(seq("simple_string_dyna_sequence", R"("1002")", "", 7)) == 18);
  CHECK(out(seq("simple_string_dyna_sequence", R"("1002")", R"(,"sequence_end":true)", 5)) == 1025);
  // Interleaved sequences keep separate state.
  CHECK(out(seq("simple_string_dyna_sequence", R"("a")", R"(,"sequence_start":true)", 1)) == 1);
  CHECK(out(seq("simple_string_dyna_sequence", R"("b")", R"(,"sequence_start":true)", 100)) == 100);
  CHECK(out(seq("simple_string_dyna_sequence", R"("a")", "", 2)) == 3);
  CHECK(out(seq("simple_string_dyna_sequence", R"("b")", "", 2)) == 102);
  // Output is exactly 4 bytes when asked for in binary.
  r = post("/v2/models/simple_sequence/infer",
           R"({"parameters":{"sequence_id":9,"sequence_start":true,"binary_data_output":true},)"
           R"("inputs":[{"name":"INPUT","datatype":"INT32","shape":[1,1],"data":[4]}]})");
  REQUIRE(r.status == 200);
  auto res = decode(r);
  CHECK(res.outputs[0].data.size() == 4);
}

// The sequence batcher releases a sequence idle for max_sequence_idle_microseconds; one that
// was continued meanwhile stays, whatever its place among those started before it.
TEST_CASE("sequences: idle ones are released, those continued stay", "[sequence]") {
  server_process s({"--model-repository", (std::filesystem::path(INFERWIRE_SOURCE_DIR) / "reference_server/models").string(),
                    "--model-control-mode=explicit", "--load-model", "simple_sequence"},
                   false);
  const int port = s.http_port();
  auto config = json::parse(request(port, "GET", "/v2/models/simple_sequence/config").body).as_object();
  config["sequence_batching"].as_object()["max_sequence_idle_microseconds"] = 1000000;
  const json::object load{{"parameters", json::object{{"config", json::serialize(config)}}}};
  REQUIRE(request(port, "POST", "/v2/repository/models/simple_sequence/load", json::serialize(load)).status == 200);
  auto call = [&](int id, const std::string& flags, int value) {
    return request(port, "POST", "/v2/models/simple_sequence/infer",
                   R"({"parameters":{"sequence_id":)" + std::to_string(id) + flags +
                       R"(},"inputs":[{"name":"INPUT","datatype":"INT32","shape":[1,1],"data":[)" +
                       std::to_string(value) + "]}]}");
  };
  // simple_sequence: OUTPUT = (INPUT + START) * READY.
  for (int id = 1; id <= 200; ++id) REQUIRE(out(call(id, R"(,"sequence_start":true)", 0)) == 1);
  std::this_thread::sleep_for(std::chrono::milliseconds(600));
  CHECK(out(call(100, "", 5)) == 5);  // continued: it stays
  std::this_thread::sleep_for(std::chrono::milliseconds(700));
  // 1.3 s after their start the others are gone, 0.7 s after its last request 100 is not.
  for (int id : {1, 99, 101, 200}) {
    const auto r = call(id, "", 5);
    CHECK(r.status == 400);
    CHECK(error_of(r).find("must specify the START flag on the first request of the sequence") != std::string::npos);
  }
  CHECK(out(call(100, R"(,"sequence_end":true)", 7)) == 7);
  CHECK(call(100, "", 5).status == 400);  // ended
  CHECK(out(call(1, R"(,"sequence_start":true)", 2)) == 3);  // an expired ID starts again
}

TEST_CASE("trace settings", "[trace]") {
  auto r = get("/v2/trace/setting");
  REQUIRE(r.status == 200);
  // Triton's key order.
  CHECK(r.body ==
        R"({"trace_level":["OFF"],"trace_rate":"1000","trace_count":"-1","log_frequency":"0","trace_file":"","trace_mode":"triton"})");
  auto v = json::parse(r.body);
  CHECK(v.at("trace_level") == json::array{"OFF"});
  CHECK(v.at("trace_rate") == "1000");
  CHECK(v.at("trace_count") == "-1");
  r = post("/v2/models/simple/trace/setting", R"({"trace_rate":"5","trace_level":["TIMESTAMPS"]})");
  REQUIRE(r.status == 200);
  v = json::parse(r.body);
  CHECK(v.at("trace_rate") == "5");
  CHECK(v.at("trace_level") == json::array{"TIMESTAMPS"});
  CHECK(json::parse(get("/v2/trace/setting").body).at("trace_rate") == "1000");
  r = post("/v2/models/simple/trace/setting", R"({"trace_rate":null})");
  CHECK(json::parse(r.body).at("trace_rate") == "1000");
  // Clearing a global setting restores its start-up value.
  r = post("/v2/trace/setting", R"({"trace_rate":"7","log_frequency":"3"})");
  CHECK(json::parse(r.body).at("trace_rate") == "7");
  r = post("/v2/trace/setting", R"({"trace_rate":null,"log_frequency":null})");
  CHECK(json::parse(r.body).at("trace_rate") == "1000");
  CHECK(json::parse(r.body).at("log_frequency") == "0");
  r = post("/v2/trace/setting", R"({"trace_file":"/tmp/x"})");
  CHECK(r.status == 501);
  CHECK(error_of(r) == "trace file location can not be updated through network protocol");
  r = post("/v2/trace/setting", R"({"trace_level":["OFF","TIMESTAMPS"]})");
  CHECK(r.status == 400);
  CHECK(error_of(r) == "Expect only one trace level 'OFF' is specified");
  r = post("/v2/trace/setting", R"({"trace_rate":"abc"})");
  CHECK(r.status == 400);
  CHECK(error_of(r) == "Unable to parse 'trace_rate', got: abc");
  r = get("/v2/models/nope/trace/setting");
  CHECK(r.status == 400);
  CHECK(error_of(r) == "Request for unknown model : nope");
  CHECK(get("/v2/models/simple/versions/1/trace/setting").status == 404);
}

TEST_CASE("log settings change what is logged", "[logging]") {
  server_process s;
  const int port = s.http_port();
  auto r = request(port, "GET", "/v2/logging");
  REQUIRE(r.status == 200);
  CHECK(r.body ==
        R"({"log_file":"","log_info":true,"log_warning":true,"log_error":true,"log_verbose_level":0,"log_format":"default"})");
  request(port, "GET", "/v2/models/simple/config?first");
  CHECK(s.log().find("HTTP request: GET /v2/models/simple/config?first") == std::string::npos);
  r = request(port, "POST", "/v2/logging", R"({"log_verbose_level":1,"log_format":"ISO8601"})");
  REQUIRE(r.status == 200);
  CHECK(json::parse(r.body).at("log_verbose_level") == 1);
  request(port, "GET", "/v2/models/simple/config?second");
  auto log = s.log();
  CHECK(log.find("HTTP request: GET /v2/models/simple/config?second") != std::string::npos);
  CHECK(std::regex_search(log, std::regex(R"(\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ V \d+ inferwire\] HTTP request)")));
  r = request(port, "POST", "/v2/logging", R"({"log_file":"/tmp/elsewhere"})");
  CHECK(r.status == 501);
  CHECK(error_of(r) == "log file location can not be updated through network protocol");
  r = request(port, "POST", "/v2/logging", R"({"log_format":"xml"})");
  CHECK(r.status == 503);
  CHECK(error_of(r) == "invalid argument for --log_format, got: xml");
  r = request(port, "POST", "/v2/logging", R"({"log_info":"yes"})");
  CHECK(r.status >= 400);
}

TEST_CASE("command line", "[cli]") {
  std::string out;
  CHECK(run_server_once({"--help"}, out) == 0);
  CHECK(out.find("--model-repository") != std::string::npos);
  CHECK(out.find("--http-max-input-size") != std::string::npos);
  CHECK(run_server_once({"--version"}, out) == 0);
  CHECK(out == "inferwire-server 0.1.0\n");
  CHECK(run_server_once({"--no-such-flag"}, out) == 2);
  CHECK(run_server_once({"--model-repository", "/tmp", "--http-max-input-size", "0"}, out) == 2);
  CHECK(out.find("Error: --http-max-input-size must be greater than 0.") != std::string::npos);
  // Negative numbers are refused, never wrapped: this flag with Triton's text, the others with
  // the flag and the range.
  CHECK(run_server_once({"--model-repository", "/tmp", "--http-max-input-size=-1"}, out) == 2);
  CHECK(out.find("Error: --http-max-input-size must be greater than 0.") != std::string::npos);
  CHECK(run_server_once({"--model-repository", "/tmp", "--http-port", "70000"}, out) == 2);
  CHECK(out.find("invalid value '70000' for --http-port: expected an integer from 0 to 65535") !=
        std::string::npos);
  CHECK(run_server_once({"--model-repository", "/tmp", "--http-thread-count", "-2"}, out) == 2);
  CHECK(out.find("--http-thread-count") != std::string::npos);
  CHECK(run_server_once({"--model-repository", "/tmp", "--http-io-balance", "even"}, out) == 2);
  CHECK(out.find("invalid argument for --http-io-balance, got: even") != std::string::npos);
  CHECK(run_server_once({"--model-repository", "/tmp", "--exit-timeout-secs", "5s"}, out) == 2);
  CHECK(run_server_once({}, out) == 2);

  // --exit-on-error: a repository with a broken model stops startup.
  auto dir = std::filesystem::temp_directory_path() / ("iw-broken-" + std::to_string(getpid()));
  std::filesystem::create_directories(dir / "broken" / "1");
  { std::ofstream(dir / "broken" / "config.pbtxt") << "name: \"broken\" max_batch_size: \"x\"\n"; }
  CHECK(run_server_once({"--model-repository", dir.string(), "--http-port", "0", "--metrics-port",
                         "0", "--allow-grpc=false"},
                        out) == 1);
  CHECK(out.find("failed to load 'broken'") != std::string::npos);
  // With --exit-on-error=false the server starts, and is not ready.
  {
    server_process s({"--model-repository", dir.string(), "--exit-on-error=false"}, false);
    CHECK(request(s.http_port(), "GET", "/v2/health/live").status == 200);
    CHECK(request(s.http_port(), "GET", "/v2/health/ready").status == 400);
    auto r = request(s.http_port(), "GET", "/v2/models/broken");
    CHECK(r.status == 404);
  }
  {
    server_process s({"--model-repository", dir.string(), "--exit-on-error=false",
                      "--strict-readiness=false"},
                     false);
    CHECK(request(s.http_port(), "GET", "/v2/health/ready").status == 200);
  }
  std::filesystem::remove_all(dir);
}
