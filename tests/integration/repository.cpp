// SPDX-License-Identifier: Apache-2.0
// Model repository control (v2-protocol §6): modes, index, load with overrides and files,
// unload with dependents, ensembles, polling, and lifecycle under concurrent inference.
#include "common.hpp"

#include <inferwire/v2/json.hpp>

#include <boost/json/parse.hpp>
#include <boost/json/serialize.hpp>

#include <atomic>
#include <filesystem>
#include <fstream>
#include <thread>

#include <unistd.h>

using namespace iwtest;
namespace fs = std::filesystem;
namespace json = boost::json;

namespace {

const fs::path source(INFERWIRE_SOURCE_DIR);

/// A private model repository, removed at the end of the test.
struct temp_repo {
  fs::path dir;
  temp_repo() {
    static int n = 0;
    dir = fs::temp_directory_path() / ("iw-repo-" + std::to_string(getpid()) + "-" + std::to_string(n++));
    fs::create_directories(dir);
  }
  ~temp_repo() {
    std::error_code ec;
    fs::remove_all(dir, ec);
  }
  void copy(const fs::path& model) {
    fs::copy(model, dir / model.filename(), fs::copy_options::recursive);
  }
  std::string str() const { return dir.string(); }
};

server_process explicit_server(std::vector<std::string> extra, const std::vector<std::string>& repos) {
  for (const auto& r : repos) {
    extra.emplace_back("--model-repository");
    extra.push_back(r);
  }
  extra.emplace_back("--model-control-mode=explicit");
  return server_process(std::move(extra), false);
}

std::string bundled() { return (source / "reference_server/models").string(); }
std::string test_models() { return (source / "tests/integration/models").string(); }

json::array index(int port, std::string_view body = "") {
  auto r = request(port, "POST", "/v2/repository/index", body);
  REQUIRE(r.status == 200);
  return json::parse(r.body).as_array();
}

const json::object* entry(const json::array& idx, std::string_view name) {
  for (const auto& e : idx)
    if (e.as_object().at("name").as_string() == name) return &e.as_object();
  return nullptr;
}

std::string simple_config_json(int max_batch_size_as_string) {
  return R"({"name":"simple","backend":"simple","max_batch_size":")" +
         std::to_string(max_batch_size_as_string) +
         R"(","input":[{"name":"INPUT0","data_type":"TYPE_INT32","dims":["16"]},)"
         R"({"name":"INPUT1","data_type":"TYPE_INT32","dims":[16]}],)"
         R"("output":[{"name":"OUTPUT0","data_type":"TYPE_INT32","dims":[16]},)"
         R"({"name":"OUTPUT1","data_type":"TYPE_INT32","dims":[16]}]})";
}

std::string load_body(const std::string& config,
                      const std::vector<std::pair<std::string, std::string>>& params = {}) {
  json::object p;
  if (!config.empty()) p["config"] = config;
  for (const auto& [k, v] : params) p[k] = v;
  return json::serialize(json::object{{"parameters", p}});
}

}  // namespace

TEST_CASE("repository: control mode none refuses load and unload", "[repository]") {
  auto r = post("/v2/repository/models/simple/load", "");
  CHECK(r.status == 503);
  CHECK(error_of(r) == "explicit model load / unload is not allowed if polling is enabled");
  r = post("/v2/repository/models/simple/unload", "");
  CHECK(r.status == 503);
  CHECK(get("/v2/models/simple/ready").status == 200);
  r = post("/v2/repository/myrepo/models/simple/load", "");
  CHECK(r.status == 501);
  CHECK(error_of(r) == "'repository_name' specification is not supported");
  CHECK(get("/v2/repository/index").status == 405);
}

TEST_CASE("repository: index of the bundled repository", "[repository]") {
  server_process s({"--model-repository", bundled()}, false);
  auto idx = index(s.http_port());
  REQUIRE(idx.size() == 7);  // what HTTP model-control clients expect (spec §9)
  CHECK(json::serialize(idx[0]) == R"({"name":"simple","version":"1","state":"READY"})");
  CHECK(idx.size() == index(s.http_port(), R"({"ready":true})").size());
  auto r = request(s.http_port(), "POST", "/v2/repository/index", R"({"ready":"yes"})");
  CHECK(r.status == 400);
  CHECK(error_of(r) == "Invalid value for 'ready': expected a boolean");
  r = request(s.http_port(), "POST", "/v2/repository/other/index", "");
  CHECK(r.status == 200);  // the repository name is ignored on HTTP
}

TEST_CASE("repository: explicit mode, load and unload", "[repository]") {
  auto s = explicit_server({"--load-model", "simple"}, {bundled()});
  const int port = s.http_port();
  auto idx = index(port);
  REQUIRE(idx.size() == 7);
  CHECK(json::serialize(*entry(idx, "simple")) == R"({"name":"simple","version":"1","state":"READY"})");
  CHECK(json::serialize(*entry(idx, "simple_int8")) == R"({"name":"simple_int8"})");
  CHECK(index(port, R"({"ready":true})").size() == 1);
  CHECK(request(port, "GET", "/v2/health/ready").status == 200);

  auto r = request(port, "POST", "/v2/repository/models/simple_int8/load", "");
  CHECK(r.status == 200);
  CHECK(r.body.empty());
  CHECK(request(port, "GET", "/v2/models/simple_int8/ready").status == 200);
  r = request(port, "POST", "/v2/repository/models/simple_int8/unload", "");
  CHECK(r.status == 200);
  CHECK(json::serialize(*entry(index(port), "simple_int8")) ==
        R"({"name":"simple_int8","version":"1","state":"UNAVAILABLE","reason":"unloaded"})");
  CHECK(request(port, "GET", "/v2/models/simple_int8/ready").status == 400);
  r = request(port, "POST", "/v2/models/simple_int8/infer", "{}");
  CHECK(r.status == 404);
  CHECK(error_of(r) == "Request for unknown model: 'simple_int8' has no available versions");
  r = request(port, "GET", "/v2/models/simple_int8/versions/1");
  CHECK(r.status == 503);
  CHECK(error_of(r) == "Request for unknown model: 'simple_int8' version 1 is not at ready state");
  CHECK(request(port, "GET", "/v2/health/ready").status == 200);  // unloaded counts as ready

  // Errors of §6.4.
  r = request(port, "POST", "/v2/repository/models/wrong_model_name/load", "");
  CHECK(r.status == 500);
  CHECK(error_of(r) == "failed to load 'wrong_model_name', failed to poll from model repository");
  r = request(port, "POST", "/v2/repository/models/../load", "");
  CHECK(r.status == 400);
  CHECK(error_of(r) == "invalid model name '..', model name must not contain path traversal characters");
  r = request(port, "POST", "/v2/repository/models/a..b/unload", "");
  CHECK(r.status == 400);
  CHECK(request(port, "POST", "/v2/repository/models/never_heard_of/unload", "").status == 200);
  r = request(port, "POST", "/v2/repository/models/simple/load", R"({"parameters":{"other":"x"}})");
  CHECK(r.status == 500);
  CHECK(error_of(r) == "unexpected error on creating Triton parameter");
  r = request(port, "POST", "/v2/repository/models/simple/load", "{");
  CHECK(r.status == 500);
  // A non-bool unload_dependents is ignored, as upstream.
  CHECK(request(port, "POST", "/v2/repository/models/simple/unload",
                R"({"parameters":{"unload_dependents":"yes"}})").status == 200);
  CHECK(request(port, "POST", "/v2/repository/models/simple/load", "").status == 200);
}

TEST_CASE("repository: config overrides and reload semantics", "[repository]") {
  auto s = explicit_server({"--load-model", "simple"}, {bundled()});
  const int port = s.http_port();
  CHECK(request(port, "POST", "/v2/models/simple/infer", simple_json()).status == 200);
  auto count = [&] {
    auto v = json::parse(request(port, "GET", "/v2/models/simple/stats").body);
    return v.at("model_stats").at(0).at("inference_count").to_number<int>();
  };
  CHECK(count() == 1);
  // Unchanged: a no-op (the same version object keeps its statistics).
  CHECK(request(port, "POST", "/v2/repository/models/simple/load", "").status == 200);
  CHECK(count() == 1);
  // An override always reloads; integers given as strings are accepted.
  auto r = request(port, "POST", "/v2/repository/models/simple/load", load_body(simple_config_json(16)));
  REQUIRE(r.status == 200);
  auto cfg = request(port, "GET", "/v2/models/simple/config").body;
  CHECK(cfg.find(R"("max_batch_size":16,)") != std::string::npos);
  CHECK(cfg.find(R"("dims":[16])") != std::string::npos);
  CHECK(count() == 0);
  // Invalid overrides fail with "failed to load"; the loaded model stays.
  r = request(port, "POST", "/v2/repository/models/simple/load", load_body("{\"max_batch_size\":"));
  CHECK(r.status == 400);
  CHECK(error_of(r).starts_with("failed to load 'simple', Invalid config override: "));
  // The refusal is in the server's log too, as in Triton's.
  CHECK(s.log().find("failed to load 'simple', Invalid config override: ") != std::string::npos);
  r = request(port, "POST", "/v2/repository/models/simple/load", load_body(R"({"no_such_field":1})"));
  CHECK(r.status == 400);
  CHECK(error_of(r).find("failed to load") != std::string::npos);
  r = request(port, "POST", "/v2/repository/models/simple/load",
              load_body(R"({"backend":"no_such_backend","input":[],"output":[]})"));
  CHECK(r.status == 400);
  CHECK(error_of(r) ==
        "load failed for model 'simple': version 1 is at UNAVAILABLE state: unable to find "
        "backend library for backend 'no_such_backend', try specifying runtime on the model "
        "configuration.;\n");
  // A reload that fails leaves the loaded model as it was, serving (as Triton does), and the
  // log says so.
  CHECK(json::serialize(*entry(index(port), "simple")).find(R"("state":"READY")") != std::string::npos);
  CHECK(request(port, "POST", "/v2/models/simple/infer", simple_json()).status == 200);
  CHECK(request(port, "GET", "/v2/models/simple/config").body.find(R"("max_batch_size":16,)") != std::string::npos);
  CHECK(s.log().find("the reload of 'simple' failed; the versions loaded before keep serving") != std::string::npos);
  CHECK(request(port, "POST", "/v2/repository/models/simple/load", "").status == 200);
  CHECK(request(port, "POST", "/v2/models/simple/infer", simple_json()).status == 200);
  // An override without backend or platform (Triton's model-control example sends only
  // max_batch_size) takes them from the model's config.pbtxt.
  r = request(port, "POST", "/v2/repository/models/simple/load", load_body(R"({"max_batch_size":"16"})"));
  INFO(r.body);
  CHECK(r.status == 200);
  CHECK(request(port, "GET", "/v2/models/simple/config").body.find(R"("backend":"simple")") != std::string::npos);
  // ... and its inputs and outputs, which it lists none of: the model still serves.
  r = request(port, "POST", "/v2/models/simple/infer", simple_json());
  INFO(r.body);
  CHECK(r.status == 200);
}

TEST_CASE("repository: file overrides stay inside their folder", "[repository][security]") {
  auto s = explicit_server({}, {bundled()});
  const int port = s.http_port();
  const std::string cfg =
      R"({"backend":"identity","max_batch_size":0,"input":[{"name":"INPUT0","data_type":"TYPE_INT32","dims":[-1]}],)"
      R"("output":[{"name":"OUTPUT0","data_type":"TYPE_INT32","dims":[-1]}]})";
  const std::string b64 = inferwire::v2::base64_encode("weights");
  auto r = request(port, "POST", "/v2/repository/models/uploaded/load",
                   load_body(cfg, {{"file:1/model.bin", b64}, {"file:1/sub/dir/extra.txt", b64}}));
  REQUIRE(r.status == 200);
  r = request(port, "POST", "/v2/models/uploaded/infer",
              R"({"inputs":[{"name":"INPUT0","datatype":"INT32","shape":[2],"data":[8,9]}]})");
  CHECK(r.status == 200);
  CHECK(r.body.find(R"("data":[8,9])") != std::string::npos);
  CHECK(entry(index(port), "uploaded"));
  // Unloaded, a model that exists only through its files leaves the index (it cannot be loaded
  // again without them).
  r = request(port, "POST", "/v2/repository/models/uploaded/unload", "");
  CHECK(r.status == 200);
  CHECK_FALSE(entry(index(port), "uploaded"));
  r = request(port, "POST", "/v2/repository/models/uploaded/load", "");
  CHECK(r.status == 500);  // no folder of that name: a poll failure, as for any unknown model

  const std::string marker = "iw-escape-" + std::to_string(getpid());
  for (std::string bad : std::vector<std::string>{"file:../" + marker, "file:1/../../" + marker, "file:/tmp/" + marker,
                          "file:1/./x", "file:"}) {
    CAPTURE(bad);
    r = request(port, "POST", "/v2/repository/models/evil/load", load_body(cfg, {{bad, b64}}));
    CHECK(r.status == 400);
    CHECK(error_of(r).find("failed to load 'evil'") != std::string::npos);
  }
  CHECK_FALSE(fs::exists(fs::temp_directory_path() / marker));
  CHECK_FALSE(entry(index(port), "evil"));  // refused before anything was written or loaded
  // Files without a config.
  r = request(port, "POST", "/v2/repository/models/evil/load", load_body("", {{"file:1/m", b64}}));
  CHECK(r.status == 500);
  CHECK(error_of(r) == "failed to load 'evil', failed to poll from model repository");
  // Malformed base64, an oversized path component.
  r = request(port, "POST", "/v2/repository/models/evil/load", load_body(cfg, {{"file:1/m", "!!!notbase64"}}));
  CHECK(r.status == 400);
  // A path component longer than the file system allows is a poll failure (INTERNAL), as
  // upstream reports it.
  r = request(port, "POST", "/v2/repository/models/evil/load",
              load_body(cfg, {{"file:1/" + std::string(256, 'A'), b64}}));
  CHECK(r.status == 500);
  CHECK(error_of(r) == "failed to load 'evil', failed to poll from model repository");
  r = request(port, "POST", "/v2/repository/models/evil/load",
              load_body("{}", {{"file:" + std::string(256, 'A'), b64}}));
  CHECK(r.status == 500);
  CHECK(error_of(r) == "failed to load 'evil', failed to poll from model repository");
  CHECK(request(port, "GET", "/v2/health/live").status == 200);
}

TEST_CASE("repository: ensembles load and unload their composing models", "[repository][ensemble]") {
  auto s = explicit_server({}, {bundled(), (source / "reference_server/models_ensemble").string()});
  const int port = s.http_port();
  auto r = request(port, "POST", "/v2/repository/models/simple_ensemble/load", "");
  REQUIRE(r.status == 200);
  CHECK(request(port, "GET", "/v2/models/simple/ready").status == 200);  // loaded as a dependency
  r = request(port, "POST", "/v2/models/simple_ensemble/infer", simple_json());
  REQUIRE(r.status == 200);
  CHECK(r.body.find(R"("name":"OUTPUT0","datatype":"INT32","shape":[1,16],"data":[0,2,4,6,8,10,12,14,16,18,20,22,24,26,28,30]})") != std::string::npos);
  CHECK(r.body.find(R"("data":[2,2,2,2,2,2,2,2,2,2,2,2,2,2,2,2])") != std::string::npos);
  CHECK(request(port, "GET", "/v2/models/simple_ensemble").body.find(R"("platform":"ensemble")") != std::string::npos);
  // The composing model ran twice.
  auto stats = json::parse(request(port, "GET", "/v2/models/simple/stats").body);
  CHECK(stats.at("model_stats").at(0).at("execution_count") == 2);

  // Without unload_dependents the composing model stays.
  CHECK(request(port, "POST", "/v2/repository/models/simple_ensemble/unload", "").status == 200);
  CHECK(request(port, "GET", "/v2/models/simple/ready").status == 200);
  // With it, the composing model goes too.
  CHECK(request(port, "POST", "/v2/repository/models/simple/unload", "").status == 200);
  CHECK(request(port, "POST", "/v2/repository/models/simple_ensemble/load", "").status == 200);
  CHECK(request(port, "POST", "/v2/repository/models/simple_ensemble/unload",
                R"({"parameters":{"unload_dependents":true}})").status == 200);
  CHECK(request(port, "GET", "/v2/models/simple/ready").status == 400);
  CHECK(request(port, "GET", "/v2/models/simple_ensemble/ready").status == 400);
  // A dependency the user then loads explicitly becomes the user's own.
  CHECK(request(port, "POST", "/v2/repository/models/simple_ensemble/load", "").status == 200);
  CHECK(request(port, "POST", "/v2/repository/models/simple/load", "").status == 200);
  CHECK(request(port, "POST", "/v2/repository/models/simple_ensemble/unload",
                R"({"parameters":{"unload_dependents":true}})").status == 200);
  CHECK(request(port, "GET", "/v2/models/simple/ready").status == 200);
  CHECK(request(port, "POST", "/v2/repository/models/simple/unload", "").status == 200);
  // A model loaded explicitly is not a dependency to unload.
  CHECK(request(port, "POST", "/v2/repository/models/simple/load", "").status == 200);
  CHECK(request(port, "POST", "/v2/repository/models/simple_ensemble/load", "").status == 200);
  CHECK(request(port, "POST", "/v2/repository/models/simple_ensemble/unload",
                R"({"parameters":{"unload_dependents":true}})").status == 200);
  CHECK(request(port, "GET", "/v2/models/simple/ready").status == 200);
}

TEST_CASE("repository: poll mode follows the repository", "[repository][poll]") {
  temp_repo repo;
  repo.copy(source / "reference_server/models/simple");
  server_process s({"--model-repository", repo.str(), "--model-control-mode", "poll",
                    "--repository-poll-secs", "1"},
                   false);
  const int port = s.http_port();
  CHECK(request(port, "POST", "/v2/repository/models/simple/load", "").status == 503);
  auto wait_for = [&](auto pred) {
    for (int i = 0; i < 100; ++i) {
      if (pred()) return true;
      std::this_thread::sleep_for(std::chrono::milliseconds(100));
    }
    return false;
  };
  repo.copy(source / "reference_server/models/simple_int8");
  CHECK(wait_for([&] { return request(port, "GET", "/v2/models/simple_int8/ready").status == 200; }));
  {
    std::ifstream in(repo.dir / "simple/config.pbtxt");
    std::string text((std::istreambuf_iterator<char>(in)), {});
    text.replace(text.find("max_batch_size: 8"), 17, "max_batch_size: 4");
    std::ofstream(repo.dir / "simple/config.pbtxt") << text;
  }
  CHECK(wait_for([&] {
    return request(port, "GET", "/v2/models/simple/config").body.find(R"("max_batch_size":4,)") != std::string::npos;
  }));
  fs::remove_all(repo.dir / "simple_int8");
  CHECK(wait_for([&] { return request(port, "GET", "/v2/models/simple_int8/ready").status == 400; }));
  CHECK(request(port, "POST", "/v2/models/simple/infer", simple_json()).status == 200);
}

TEST_CASE("repository: duplicates and startup rules", "[repository]") {
  temp_repo a, b;
  a.copy(source / "reference_server/models/simple");
  b.copy(source / "reference_server/models/simple");
  b.copy(source / "reference_server/models/simple_int8");
  server_process s({"--model-repository", a.str(), "--model-repository", b.str(),
                    "--exit-on-error=false"},
                   false);
  auto idx = index(s.http_port());
  REQUIRE(idx.size() == 2);
  CHECK(json::serialize(idx[0]) ==
        R"({"name":"simple","state":"UNAVAILABLE","reason":"model appears in two or more repositories"})");
  CHECK(request(s.http_port(), "GET", "/v2/models/simple_int8/ready").status == 200);
  CHECK(request(s.http_port(), "GET", "/v2/health/ready").status == 400);

  std::string out;
  CHECK(run_server_once({"--model-repository", a.str(), "--model-control-mode", "explicit",
                         "--load-model", "*", "--load-model", "simple"},
                        out) == 2);
  CHECK(out.find("Wildcard model name '*' must be the ONLY startup model if specified at all.") !=
        std::string::npos);
  // --load-model=* loads everything.
  auto e = explicit_server({"--load-model", "*"}, {bundled()});
  CHECK(index(e.http_port(), R"({"ready":true})").size() == 7);
}

TEST_CASE("repository: in-flight requests finish before an unload completes", "[repository]") {
  auto s = explicit_server({"--load-model", "identity_slow"}, {test_models()});
  const int port = s.http_port();
  connection slow(port);
  slow.send(request_text("POST", "/v2/models/identity_slow/infer",
                         R"({"inputs":[{"name":"INPUT0","datatype":"INT32","shape":[1],"data":[4]}]})"));
  std::this_thread::sleep_for(std::chrono::milliseconds(300));
  auto u = request(port, "POST", "/v2/repository/models/identity_slow/unload", "");
  CHECK(u.status == 200);
  // The unload reply came after the request had its answer.
  CHECK(slow.readable_now());
  auto r = slow.read();
  REQUIRE(r);
  CHECK(r->status == 200);
  CHECK(r->body.find(R"("data":[4])") != std::string::npos);
}

TEST_CASE("repository: loads and unloads never fail inference elsewhere", "[repository][concurrency]") {
  auto s = explicit_server({"--load-model", "simple", "--load-model", "identity_int64",
                            "--load-model", "identity_fp32"},
                           {bundled(), test_models()});
  const int port = s.http_port();
  std::atomic<bool> stop{false};
  std::atomic<int> failures{0}, done{0};
  auto client = [&](std::string target, std::string body) {
    connection c(port);
    while (!stop) {
      c.send(request_text("POST", target, body));
      auto r = c.read();
      if (!r || r->status != 200) ++failures;
      ++done;
    }
  };
  std::thread a(client, "/v2/models/simple/infer", simple_json());
  std::thread b(client, "/v2/models/identity_fp32/infer",
                R"({"inputs":[{"name":"INPUT0","datatype":"FP32","shape":[2],"data":[1,2]}]})");
  const std::string fp32_cfg =
      R"({"backend":"identity","max_batch_size":0,"input":[{"name":"INPUT0","data_type":"TYPE_FP32","dims":[-1]}],)"
      R"("output":[{"name":"OUTPUT0","data_type":"TYPE_FP32","dims":[-1]}],"parameters":{"n":{"string_value":")";
  for (int i = 0; i < 15; ++i) {
    // Reloads of a model in use swap versions without failing its requests ...
    CHECK(request(port, "POST", "/v2/repository/models/identity_fp32/load",
                  load_body(fp32_cfg + std::to_string(i) + R"("}}})")).status == 200);
    // ... and other models come and go.
    CHECK(request(port, "POST", "/v2/repository/models/identity_int64/unload", "").status == 200);
    CHECK(request(port, "POST", "/v2/repository/models/identity_int64/load", "").status == 200);
  }
  stop = true;
  a.join();
  b.join();
  CHECK(done > 30);
  CHECK(failures == 0);
}

TEST_CASE("repository: oversized load requests are refused cleanly", "[repository][security]") {
  auto s = explicit_server({"--http-max-input-size", "4096"}, {bundled()});
  const int port = s.http_port();
  const std::string big = load_body("{}", {{"file:1/model.bin", std::string(8000, 'A')}});
  auto r = request(port, "POST", "/v2/repository/models/simple/load", big);
  CHECK(r.status == 400);
  CHECK(error_of(r) == "request JSON size of " + std::to_string(big.size()) +
                           " bytes exceeds the maximum allowed input size of 4096 bytes. Use "
                           "--http-max-input-size to increase the limit.");
  CHECK(request(port, "POST", "/v2/repository/models/simple/load", "").status == 200);
}
