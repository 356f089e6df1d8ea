// SPDX-License-Identifier: Apache-2.0
// Trace records in Triton's mode: --trace-config and the trace settings endpoint choose what
// is traced (level, rate, count), trace files are Triton's JSON with its timestamp names, and
// log_frequency splits them into numbered files.
#include "common.hpp"

#include <boost/json/parse.hpp>

#include <filesystem>
#include <fstream>
#include <set>
#include <sstream>

#include <unistd.h>

using namespace iwtest;
namespace fs = std::filesystem;

namespace {


fs::path fresh_dir(const char* name) {
  auto dir = fs::temp_directory_path() / (std::string(name) + "-" + std::to_string(::getpid()));
  fs::remove_all(dir);
  fs::create_directories(dir);
  return dir;
}

boost::json::array read_traces(const fs::path& file) {
  std::ifstream in(file);
  std::stringstream text;
  text << in.rdbuf();
  INFO(file.string() << ": " << text.str());
  REQUIRE(in.good());
  return boost::json::parse(text.str()).as_array();
}

std::vector<std::string> names_of(const boost::json::object& trace) {
  std::vector<std::string> out;
  std::uint64_t last = 0;
  for (const auto& t : trace.at("timestamps").as_array()) {
    out.emplace_back(t.at("name").as_string());
    const auto ns = t.at("ns").to_number<std::uint64_t>();
    CHECK(ns >= last);  // in time order
    last = ns;
  }
  return out;
}

const std::vector<std::string> http_names = {
    "HTTP_RECV_START",      "HTTP_RECV_END", "REQUEST_START", "QUEUE_START",     "COMPUTE_START", "COMPUTE_INPUT_END",
    "COMPUTE_OUTPUT_START", "COMPUTE_END",   "REQUEST_END",   "HTTP_SEND_START", "HTTP_SEND_END"};

}  // namespace

TEST_CASE("trace: --trace-config writes one record per traced request", "[trace]") {
  const auto dir = fresh_dir("iw-trace");
  const auto file = dir / "trace.json";
  {
    server_process s({"--model-repository", bundled_models(), "--trace-config", "triton,file=" + file.string(),
                      "--trace-config", "level=TIMESTAMPS", "--trace-config", "rate=1"},
                     false);
    for (int i = 0; i < 3; ++i) {
      auto r = request(s.http_port(), "POST", "/v2/models/simple/infer",
                       simple_json(R"(,"id":"req-)" + std::to_string(i) + "\""));
      REQUIRE(r.status == 200);
    }
    // A request that fails validation is not traced.
    CHECK(request(s.http_port(), "POST", "/v2/models/simple/infer", R"({"inputs":[]})").status == 400);
    auto settings = boost::json::parse(request(s.http_port(), "GET", "/v2/trace/setting").body).as_object();
    CHECK(settings.at("trace_file").as_string() == file.string());
    CHECK(settings.at("trace_level").as_array().at(0).as_string() == "TIMESTAMPS");
    CHECK(settings.at("trace_rate").as_string() == "1");
    CHECK(s.stop() == 0);
  }
  const auto traces = read_traces(file);
  REQUIRE(traces.size() == 3);
  std::set<std::int64_t> ids;
  for (std::size_t i = 0; i < traces.size(); ++i) {
    const auto& t = traces[i].as_object();
    ids.insert(t.at("id").to_number<std::int64_t>());
    CHECK(t.at("model_name").as_string() == "simple");
    CHECK(t.at("model_version").to_number<std::int64_t>() == 1);
    CHECK(t.at("request_id").as_string() == "req-" + std::to_string(i));
    CHECK(names_of(t) == http_names);
    CHECK_FALSE(t.contains("tensors"));
  }
  CHECK(ids.size() == 3);
  fs::remove_all(dir);
}

TEST_CASE("trace: rate, count, log_frequency and TENSORS through the settings endpoint", "[trace]") {
  const auto dir = fresh_dir("iw-trace-settings");
  const auto file = dir / "trace.json";
  {
    server_process s({"--model-repository", bundled_models(), "--trace-config", "triton,file=" + file.string()}, false);
    const int port = s.http_port();
    // Level OFF at start-up: nothing is traced.
    REQUIRE(request(port, "POST", "/v2/models/simple/infer", simple_json()).status == 200);
    // Every second request, two at most, written two per numbered file.
    auto r = request(port, "POST", "/v2/trace/setting",
                     R"({"trace_level":["TIMESTAMPS"],"trace_rate":"2","trace_count":"2","log_frequency":"2"})");
    REQUIRE(r.status == 200);
    for (int i = 0; i < 6; ++i)
      REQUIRE(request(port, "POST", "/v2/models/simple/infer", simple_json(R"(,"id":")" + std::to_string(i) + "\"")).status ==
              200);
    // The model's own settings: every request of simple, with tensors, to the next file.
    r = request(port, "POST", "/v2/models/simple/trace/setting",
                R"({"trace_level":["TENSORS"],"trace_rate":"1","trace_count":"-1","log_frequency":"1"})");
    REQUIRE(r.status == 200);
    REQUIRE(request(port, "POST", "/v2/models/simple/infer", simple_json(R"(,"id":"t")")).status == 200);
    CHECK(s.stop() == 0);
  }
  CHECK_FALSE(fs::exists(file));  // every trace went to numbered files
  auto first = read_traces(dir / "trace.json.0");
  REQUIRE(first.size() == 2);
  CHECK(first[0].at("request_id").as_string() == "1");  // the 2nd and 4th requests
  CHECK(first[1].at("request_id").as_string() == "3");
  auto second = read_traces(dir / "trace.json.1");
  REQUIRE(second.size() == 1);
  const auto& t = second[0].as_object();
  CHECK(t.at("request_id").as_string() == "t");
  CHECK(names_of(t) == http_names);
  const auto& tensors = t.at("tensors").as_array();
  REQUIRE(tensors.size() == 4);  // INPUT0, INPUT1 queued; OUTPUT0, OUTPUT1 from the backend
  const auto& in0 = tensors[0].as_object();
  CHECK(in0.at("activity").as_string() == "TENSOR_QUEUE_INPUT");
  CHECK(in0.at("tensor").at("name").as_string() == "INPUT0");
  CHECK(in0.at("tensor").at("shape").as_string() == "1,16");
  CHECK(in0.at("tensor").at("dtype").as_string() == "INT32");
  CHECK(in0.at("tensor").at("data").as_array().size() == 16);
  CHECK(tensors[2].at("activity").as_string() == "TENSOR_BACKEND_OUTPUT");
  CHECK(tensors[2].at("tensor").at("name").as_string() == "OUTPUT0");
  CHECK_FALSE(fs::exists(dir / "trace.json.2"));
  fs::remove_all(dir);
}

TEST_CASE("trace: --trace-config refusals", "[trace][cli]") {
  std::string out;
  const std::vector<std::pair<std::vector<std::string>, std::string>> table = {
      {{"--trace-config", "level=LOUD"}, "invalid value for trace level option: LOUD"},
      {{"--trace-config", "rate=x"}, "Unable to parse 'trace_rate', got: x"},
      {{"--trace-config", "count=-2"}, "Unable to parse 'trace_count', got: -2"},
      {{"--trace-config", "colour=blue"}, "unknown --trace-config setting 'colour'"},
      {{"--trace-config", "zipkin,url=x"}, "--trace-config option format is '[<mode>,]<setting>=<value>'. Got zipkin,url=x"},
      {{"--trace-config", "level"}, "--trace-config option format is '[<mode>,]<setting>=<value>'. Got level"},
  };
  for (const auto& [flags, message] : table) {
    CAPTURE(flags);
    std::vector<std::string> args = {"--model-repository", bundled_models(), "--http-port", "0", "--metrics-port", "0",
                                     "--allow-grpc=false"};
    args.insert(args.end(), flags.begin(), flags.end());
    CHECK(run_server_once(args, out) == 2);
    CHECK(out.find(message) != std::string::npos);
  }
}

TEST_CASE("trace: an ensemble's steps are traced as its children", "[trace]") {
  const auto dir = fresh_dir("iw-trace-ensemble");
  const auto file = dir / "trace.json";
  {
    server_process s({"--model-repository", bundled_models(), "--model-repository",
                      INFERWIRE_SOURCE_DIR "/reference_server/models_ensemble", "--trace-config",
                      "triton,file=" + file.string(), "--trace-config", "level=TIMESTAMPS", "--trace-config", "rate=1"},
                     false);
    auto r = request(s.http_port(), "POST", "/v2/models/simple_ensemble/infer", simple_json(R"(,"id":"e1")"));
    REQUIRE(r.status == 200);
    CHECK(s.stop() == 0);
  }
  const auto traces = read_traces(file);
  const boost::json::object* parent = nullptr;
  std::vector<const boost::json::object*> children;
  for (const auto& t : traces) {
    const auto& o = t.as_object();
    if (o.contains("parent_id")) children.push_back(&o);
    else parent = &o;
  }
  REQUIRE(parent);
  CHECK(parent->at("model_name").as_string() == "simple_ensemble");
  CHECK(names_of(*parent) == http_names);
  REQUIRE(children.size() == 2);  // simple, twice
  for (const auto* c : children) {
    CHECK(c->at("parent_id") == parent->at("id"));
    CHECK(c->at("id") != parent->at("id"));
    CHECK(c->at("model_name").as_string() == "simple");
    CHECK(c->at("request_id").as_string() == "e1");
    CHECK(names_of(*c) == std::vector<std::string>{"REQUEST_START", "QUEUE_START", "COMPUTE_START", "COMPUTE_INPUT_END",
                                                   "COMPUTE_OUTPUT_START", "COMPUTE_END", "REQUEST_END"});
  }
  fs::remove_all(dir);
}
