// SPDX-License-Identifier: Apache-2.0
// Hostile and malformed input against inferwire-server: one table of cases, each an attack
// with the reply it must get. After every case the server must still answer a health check and
// a correct inference, and its resident memory must stay bounded.
#include "../integration/harness.hpp"
#include "proc.hpp"

#include <inferwire/http/compression.hpp>
#include <inferwire/shm/system_region.hpp>
#include <inferwire/shm/vmm_channel.hpp>

#include <boost/json/parse.hpp>
#include <boost/json/serialize.hpp>

#include <catch2/catch.hpp>

#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>
#include <thread>

#include <fcntl.h>
#include <poll.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

using namespace iwtest;
namespace fs = std::filesystem;
namespace json = boost::json;

namespace {

const fs::path source(INFERWIRE_SOURCE_DIR);

/// A private repository: the bundled models, a labelled model, and a config.pbtxt that is not
/// UTF-8.
struct hostile_repo {
  fs::path dir;
  hostile_repo() {
    dir = fs::temp_directory_path() / ("iw-hostile-" + std::to_string(::getpid()));
    fs::remove_all(dir);
    fs::create_directories(dir);
    fs::copy(source / "reference_server/models/simple", dir / "simple", fs::copy_options::recursive);
    fs::copy(source / "tests/integration/models/identity_labeled", dir / "identity_labeled",
             fs::copy_options::recursive);
    // A backend directory with a python backend (a test backend under that name): what a
    // model.py that came in a load request would run on.
    fs::create_directories(dir / "backends/python");
    fs::copy_file(fs::path(INFERWIRE_TEST_BACKEND_DIR) / "iwtest/libtriton_iwtest.so",
                  dir / "backends/python/libtriton_python.so");
    fs::create_directories(dir / "bad_utf8/1");
    std::ofstream(dir / "bad_utf8/config.pbtxt") << "name: \"bad_utf8\"\nbackend: \"m\xc0\xa7\"\n";
    // Two ensembles on disk that use each other.
    for (const auto& [name, step] : {std::pair{"disk_cycle_a", "disk_cycle_b"}, std::pair{"disk_cycle_b", "disk_cycle_a"}}) {
      fs::create_directories(dir / name / "1");
      std::ofstream(dir / name / "config.pbtxt")
          << "name: \"" << name << "\"\nplatform: \"ensemble\"\nmax_batch_size: 8\n"
          << "input [ { name: \"INPUT0\" data_type: TYPE_INT32 dims: [ 16 ] } ]\n"
          << "output [ { name: \"OUTPUT0\" data_type: TYPE_INT32 dims: [ 16 ] } ]\n"
          << "ensemble_scheduling { step [ { model_name: \"" << step << "\" model_version: -1 "
          << "input_map { key: \"INPUT0\" value: \"INPUT0\" } output_map { key: \"OUTPUT0\" value: \"OUTPUT0\" } } ] }\n";
    }
  }
  ~hostile_repo() {
    std::error_code ec;
    fs::remove_all(dir, ec);
  }
};

std::string simple_body(const std::string& inputs_extra = "") {
  std::string a = "[", b = "[";
  for (int i = 0; i < 16; ++i) {
    a += (i ? "," : "") + std::to_string(i);
    b += (i ? "," : "") + std::string("1");
  }
  return R"({"inputs":[{"name":"INPUT0","datatype":"INT32","shape":[1,16],"data":)" + a +
         R"(]},{"name":"INPUT1","datatype":"INT32","shape":[1,16],"data":)" + b + "]}" +
         inputs_extra + "]}";
}

/// The server answers health and a correct 'simple' inference.
void still_serving(int port) {
  auto ready = request(port, "GET", "/v2/health/ready");
  REQUIRE(ready.status == 200);
  auto r = request(port, "POST", "/v2/models/simple/infer", simple_body());
  REQUIRE(r.status == 200);
  auto out = json::parse(r.body).at("outputs").as_array();
  for (const auto& o : out)
    if (o.at("name").as_string() == "OUTPUT0") CHECK(o.at("data").as_array().at(15).to_number<int>() == 16);
}

std::string labeled_config(const std::string& label_file) {
  return json::serialize(json::object{
      {"name", "identity_labeled"},
      {"backend", "identity"},
      {"max_batch_size", 0},
      {"input", json::array{json::object{{"name", "INPUT0"}, {"data_type", "TYPE_FP32"}, {"dims", {4}}}}},
      {"output", json::array{json::object{{"name", "OUTPUT0"},
                                          {"data_type", "TYPE_FP32"},
                                          {"dims", {4}},
                                          {"label_filename", label_file}}}}});
}

std::string load_with_config(const std::string& config) {
  return json::serialize(json::object{{"parameters", json::object{{"config", config}}}});
}

struct hostile_case {
  const char* name;
  std::function<void(server_process&)> attack;
};

}  // namespace

TEST_CASE("hostile: inferwire-server survives every case of the table", "[hostile]") {
  hostile_repo repo;
  server_process s({"--model-repository", repo.dir.string(), "--model-control-mode=explicit",
                    "--load-model", "simple", "--load-model", "identity_labeled",
                    "--allow-client-shm=true", "--http-max-inflight-bytes=8388608",
                    "--strict-readiness=false", "--backend-directory", (repo.dir / "backends").string()},
                   false);
  const int port = s.http_port();
  const pid_t pid = s.pid();
  still_serving(port);
  const auto base_rss = hostile::rss_mib(pid);

  const std::vector<hostile_case> table = {
      {"an announced 1 GiB body that never comes pins nothing",
       [&](server_process&) {
         std::vector<std::unique_ptr<connection>> held;
         for (int i = 0; i < 4; ++i) {
           held.push_back(std::make_unique<connection>(port));
           held.back()->send("POST /v2/models/any/infer HTTP/1.1\r\nHost: x\r\n"
                             "Content-Length: 1073741824\r\n\r\n");
         }
         std::this_thread::sleep_for(std::chrono::milliseconds(300));
         CHECK(hostile::rss_mib(pid) < base_rss + 32);
         const auto t0 = std::chrono::steady_clock::now();
         CHECK(request(port, "GET", "/v2/health/live").status == 200);
         CHECK(std::chrono::steady_clock::now() - t0 < std::chrono::seconds(1));
       }},
      {"an announced body on any endpoint pins nothing",
       [&](server_process&) {
         connection c(port);
         c.send("POST /v2/repository/index HTTP/1.1\r\nHost: x\r\nContent-Length: 1000000000\r\n\r\n{");
         std::this_thread::sleep_for(std::chrono::milliseconds(200));
         CHECK(hostile::rss_mib(pid) < base_rss + 32);
       }},
      {"bodies past the in-flight budget are refused with 413",
       [&](server_process&) {
         connection c(port);
         c.send("POST /v2/models/simple/infer HTTP/1.1\r\nHost: x\r\nContent-Length: 16777216\r\n\r\n");
         std::string chunk(1 << 20, ' ');
         boost::system::error_code ec;
         for (int i = 0; i < 12 && !ec; ++i) net::write(c.socket(), net::buffer(chunk), ec);
         auto r = c.read();
         REQUIRE(r);
         CHECK(r->status == 413);
         CHECK(error_of(*r).find("--http-max-inflight-bytes") != std::string::npos);
       }},
      {"a chunked body past the in-flight budget is refused with 413",
       [&](server_process&) {
         connection c(port);
         c.send("POST /v2/models/simple/infer HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n");
         std::string chunk = "100000\r\n" + std::string(0x100000, ' ') + "\r\n";
         boost::system::error_code ec;
         for (int i = 0; i < 12 && !ec; ++i) net::write(c.socket(), net::buffer(chunk), ec);
         auto r = c.read();
         REQUIRE(r);
         CHECK(r->status == 413);
       }},
      {"large chunked bodies in small chunks reuse their memory",
       [&](server_process&) {
         // 4 MiB in 16 KiB chunks, three times on one connection (each read after the previous
         // reply, so each body's budget charge is gone): each body's string (in the I/O thread's
         // heap) is freed when its request is done and reused by the next, not added to it.
         const std::string body = simple_body("") + std::string(std::size_t{4} << 20, ' ');
         std::string framed = "POST /v2/models/simple/infer HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n";
         for (std::size_t at = 0; at < body.size(); at += 16384) {
           const std::string part = body.substr(at, 16384);
           char size[16];
           std::snprintf(size, sizeof size, "%zx\r\n", part.size());
           framed += size + part + "\r\n";
         }
         framed += "0\r\n\r\n";
         connection c(port);
         std::uint64_t first = 0;
         for (int i = 0; i < 3; ++i) {
           c.send(framed);
           auto r = c.read();
           REQUIRE(r);
           CHECK(r->status == 200);
           if (i == 0) first = hostile::rss_mib(pid);
         }
         INFO("server RSS " << first << " MiB after the first, " << hostile::rss_mib(pid) << " MiB after the third");
         CHECK(hostile::rss_mib(pid) <= first + 3);
       }},
      {"a compressed body that inflates past the in-flight budget is refused with 413",
       [&](server_process&) {
         // 12 KiB of gzip that inflates to 12 MiB of JSON: the inflated bytes count, as the
         // body's do, for as long as the request lives (a queued request keeps them).
         std::string inflated = simple_body("") + std::string(std::size_t{12} << 20, ' ');
         std::string gz;
         REQUIRE(inferwire::http::compress(inflated, inferwire::http::content_coding::gzip, gz));
         REQUIRE(gz.size() < (std::size_t{1} << 20));
         auto r = request(port, "POST", "/v2/models/simple/infer", gz, {{"Content-Encoding", "gzip"}});
         CHECK(r.status == 413);
         CHECK(error_of(r).find("--http-max-inflight-bytes") != std::string::npos);
         // Within the budget, the same coding is served.
         REQUIRE(inferwire::http::compress(simple_body(""), inferwire::http::content_coding::gzip, gz));
         CHECK(request(port, "POST", "/v2/models/simple/infer", gz, {{"Content-Encoding", "gzip"}}).status == 200);
       }},
      {"JSON tensors that decode past the in-flight budget are refused with 413",
       [&](server_process&) {
         // 2 MiB of `0,` decode to 8 MiB of INT64, four times the body the connection charged.
         std::string data;
         data.reserve(std::size_t{2} << 20);
         for (int i = 0; i < (1 << 20); ++i) data += i ? ",0" : "0";
         auto r = request(port, "POST", "/v2/models/simple/infer",
                          R"({"inputs":[{"name":"INPUT0","datatype":"INT64","shape":[1048576],"data":[)" + data + "]}]}");
         CHECK(r.status == 413);
         CHECK(error_of(r).find("--http-max-inflight-bytes") != std::string::npos);
       }},
      {"label files outside the model folder are refused with one text",
       [&](server_process&) {
         std::vector<std::string> texts;
         for (const char* f : {"/etc/passwd", "../../../../etc/passwd", "/dev/zero",
                               "/no/such/file", "../simple/config.pbtxt", "1"}) {
           auto r = request(port, "POST", "/v2/repository/models/identity_labeled/load",
                            load_with_config(labeled_config(f)));
           CHECK(r.status == 400);
           std::string e = error_of(r);
           CHECK(e.find("root:") == std::string::npos);
           const auto at = e.find(f);
           REQUIRE(at != std::string::npos);
           texts.push_back(e.erase(at, std::strlen(f)));
         }
         for (const auto& t : texts) CHECK(t == texts.front());  // nothing tells what exists
         // The model's own label file still loads and classifies with its labels.
         auto r = request(port, "POST", "/v2/repository/models/identity_labeled/load",
                          load_with_config(labeled_config("labels.txt")));
         REQUIRE(r.status == 200);
         r = request(port, "POST", "/v2/models/identity_labeled/infer",
                     R"({"inputs":[{"name":"INPUT0","datatype":"FP32","shape":[4],"data":[1,4,2,3]}],)"
                     R"("outputs":[{"name":"OUTPUT0","parameters":{"classification":1}}]})");
         REQUIRE(r.status == 200);
         CHECK(r.body.find("4.000000:1:") != std::string::npos);
       }},
      {"a label file that links out of the model folder is refused",
       [&](server_process&) {
         fs::create_symlink("/etc/passwd", repo.dir / "identity_labeled/passwd_link");
         auto r = request(port, "POST", "/v2/repository/models/identity_labeled/load",
                          load_with_config(labeled_config("passwd_link")));
         fs::remove(repo.dir / "identity_labeled/passwd_link");
         CHECK(r.status == 400);
         CHECK(error_of(r).find("inside the model's folder") != std::string::npos);
       }},
      {"code in a load request's file: parameters is never run",
       [&](server_process&) {
         // A backend library in the model's folder, and a model.py for the python backend: both
         // would run the client's code in the server.
         for (const auto& [backend, file] : {std::pair{"iwtest", "file:1/libtriton_iwtest.so"},
                                             std::pair{"python", "file:1/model.py"}}) {
           const std::string config = json::serialize(json::object{
               {"backend", backend},
               {"max_batch_size", 0},
               {"input", json::array{json::object{{"name", "INPUT0"}, {"data_type", "TYPE_INT32"}, {"dims", {1}}}}},
               {"output", json::array{json::object{{"name", "OUTPUT0"}, {"data_type", "TYPE_INT32"}, {"dims", {1}}}}}});
           auto r = request(port, "POST", "/v2/repository/models/carried_code/load",
                            json::serialize(json::object{{"parameters", json::object{{"config", config}, {file, "eA=="}}}}));
           CHECK(r.status == 400);
           CHECK(error_of(r).find("--allow-model-file-code=true") != std::string::npos);
           CHECK(request(port, "GET", "/v2/models/carried_code/ready").status != 200);
         }
       }},
      {"an index 'ready' nested 250,000 deep is an invalid value, read without a tree",
       [&](server_process&) {
         // Triton's QA case: its text, not a nesting error, and no stack for the depth.
         const std::size_t depth = 250000;
         const std::string nested = std::string(depth, '[') + "true" + std::string(depth, ']');
         auto r = request(port, "POST", "/v2/repository/index", "{\"ready\":" + nested + "}");
         CHECK(r.status == 400);
         CHECK(error_of(r) == "Invalid value for 'ready': expected a boolean");
         r = request(port, "POST", "/v2/repository/index", "{\"ready\":[[[true]]]}");
         CHECK(r.status == 400);
         CHECK(error_of(r) == "Invalid value for 'ready': expected a boolean");
         // Depth elsewhere in the body is no error (RapidJSON has no limit either).
         r = request(port, "POST", "/v2/repository/index", "{\"x\":" + std::string(depth, '[') + std::string(depth, ']') + ",\"ready\":true}");
         CHECK(r.status == 200);
         r = request(port, "POST", "/v2/repository/index", "{\"ready\" : false }");
         CHECK(r.status == 200);
         CHECK(r.body.find("\"name\"") != std::string::npos);
       }},
      {"a config.pbtxt that is not UTF-8 fails that model only",
       [&](server_process&) {
         auto r = request(port, "POST", "/v2/repository/models/bad_utf8/load", "");
         CHECK(r.status == 400);
         CHECK(error_of(r).find("failed to load 'bad_utf8'") != std::string::npos);
         auto idx = request(port, "POST", "/v2/repository/index", "");
         CHECK(idx.body.find("bad_utf8") != std::string::npos);
       }},
      {"failed loads under ever new names leave nothing behind",
       [&](server_process&) {
         // A model that exists only through its file: parameters and fails its first load is
         // not kept: else each new name a client tried would stay in the index for good.
         const std::string body = json::serialize(json::object{
             {"parameters", json::object{{"config", R"({"bogus":1})"}, {"file:1/model.txt", "aGVsbG8="}}}});
         for (int i = 0; i < 200; ++i) {
           auto r = request(port, "POST", "/v2/repository/models/tried_" + std::to_string(i) + "/load", body);
           REQUIRE(r.status == 400);
         }
         auto idx = request(port, "POST", "/v2/repository/index", "");
         CHECK(idx.status == 200);
         CHECK(idx.body.find("tried_") == std::string::npos);
         // A model on disk keeps its failure in the index, as before.
         auto r = request(port, "POST", "/v2/repository/models/bad_utf8/load", "");
         CHECK(r.status == 400);
         idx = request(port, "POST", "/v2/repository/index", "");
         CHECK(idx.body.find("bad_utf8") != std::string::npos);
       }},
      {"names in a URL that are not UTF-8 never make a reply unreadable",
       [&](server_process&) {
         auto strict = [](const std::string& body) {
           boost::system::error_code ec;
           (void)json::parse(body, ec);  // validates UTF-8, as Python's json does
           return !ec;
         };
         auto r = request(port, "POST", "/v2/models/sim\xC4\xC4ple/infer", "{}");
         CHECK(r.status == 404);
         CHECK(strict(r.body));
         CHECK(error_of(r) == "Request for unknown model: 'sim\xEF\xBF\xBD\xEF\xBF\xBDple' is not found");
         r = request(port, "POST", "/v2/repository/models/x\xC4/load", load_with_config(R"({"backend":"identity"})"));
         CHECK(r.status == 400);
         CHECK(strict(r.body));
         CHECK(error_of(r) == "invalid model name 'x\xEF\xBF\xBD', model name must be UTF-8");
         r = request(port, "POST", "/v2/repository/index", "");
         CHECK(r.status == 200);
         CHECK(strict(r.body));
         r = request(port, "POST", "/v2/systemsharedmemory/region/r\xFF/register",
                     R"({"key":"/iw-hostile-utf8","offset":0,"byte_size":8})");
         CHECK(r.status == 400);
         CHECK(strict(r.body));
         CHECK(error_of(r) == "cannot register shared memory region 'r\xEF\xBF\xBD' - the region name must be UTF-8");
         r = request(port, "GET", "/v2/systemsharedmemory/status", "");
         CHECK(strict(r.body));
       }},
      {"a system region shrunk by its owner is an error reply, not SIGBUS",
       [&](server_process&) {
         const std::string key = "/iw-hostile-shrink-" + std::to_string(::getpid());
         auto region = inferwire::shm::system_region::create(key, 128);
         auto r = request(port, "POST", "/v2/systemsharedmemory/region/shrink/register",
                          R"({"key":")" + key + R"(","offset":0,"byte_size":128})");
         REQUIRE(r.status == 200);
         const int fd = ::shm_open(key.c_str(), O_RDWR, 0);
         REQUIRE(fd >= 0);
         REQUIRE(::ftruncate(fd, 0) == 0);
         ::close(fd);
         const std::string body =
             R"({"inputs":[{"name":"INPUT0","datatype":"INT32","shape":[1,16],"parameters":{"shared_memory_region":"shrink","shared_memory_byte_size":64}},)"
             R"({"name":"INPUT1","datatype":"INT32","shape":[1,16],"parameters":{"shared_memory_region":"shrink","shared_memory_byte_size":64,"shared_memory_offset":64}}]})";
         r = request(port, "POST", "/v2/models/simple/infer", body);
         CHECK(r.status == 400);
         CHECK(error_of(r).find("smaller than when it was registered") != std::string::npos);
         request(port, "POST", "/v2/systemsharedmemory/region/shrink/unregister", "");
       }},
      {"100,000 inputs are refused at once",
       [&](server_process&) {
         std::string extra;
         for (int i = 0; i < 100000; ++i)
           extra += R"(,{"name":"X)" + std::to_string(i) + R"(","datatype":"INT32","shape":[1],"data":[1]})";
         const auto t0 = std::chrono::steady_clock::now();
         auto r = request(port, "POST", "/v2/models/simple/infer", simple_body(extra));
         CHECK(std::chrono::steady_clock::now() - t0 < std::chrono::seconds(3));
         CHECK(r.status == 400);
         CHECK(error_of(r) == "request has 100002 inputs, more than the 1024 allowed");
       }},
      {"1,000 inputs decode in linear time; a duplicate name is found",
       [&](server_process&) {
         std::string extra;
         for (int i = 0; i < 1000; ++i)
           extra += R"(,{"name":"X)" + std::to_string(i) + R"(","datatype":"INT32","shape":[1],"data":[1]})";
         extra += R"(,{"name":"X7","datatype":"INT32","shape":[1],"data":[1]})";
         auto r = request(port, "POST", "/v2/models/simple/infer", simple_body(extra));
         CHECK(r.status == 400);
         CHECK(error_of(r) == "[request id: <id_unknown>] input 'X7' already exists in request");
       }},
      {"65 dimensions and 257 parameters are refused",
       [&](server_process&) {
         std::string shape = "[1";
         for (int i = 0; i < 64; ++i) shape += ",1";
         auto r = request(port, "POST", "/v2/models/simple/infer",
                          R"({"inputs":[{"name":"INPUT0","datatype":"INT32","shape":)" + shape + R"(],"data":[1]}]})");
         CHECK(error_of(r) == "request has 65 dimensions in a shape, more than the 64 allowed");
         std::string params;
         for (int i = 0; i < 257; ++i) params += (i ? "," : "") + std::string("\"p") + std::to_string(i) + "\":1";
         r = request(port, "POST", "/v2/models/simple/infer",
                     R"({"parameters":{)" + params + R"(},"inputs":[]})");
         CHECK(error_of(r) == "request has 257 parameters, more than the 256 allowed");
       }},
      {"error texts do not echo unbounded input",
       [&](server_process&) {
         const std::string name(1 << 20, 'N');
         auto r = request(port, "POST", "/v2/models/simple/infer",
                          simple_body(R"(,{"name":")" + name + R"(","datatype":"INT32","shape":[1],"data":[1]})"));
         CHECK(r.status == 400);
         CHECK(r.body.size() < 10000);
       }},
      {"ensembles nested past 32 are refused, not run into the stack",
       [&](server_process&) {
         // chain1 calls chain2 ... chain40 calls simple. Each level ran on the caller's stack:
         // 20,000 levels loaded by a client ended the server.
         auto chain = [](int i) { return "chain" + std::to_string(i); };
         auto tensors = [](const char* name) {
           return json::array{json::object{{"name", std::string(name) + "0"}, {"data_type", "TYPE_INT32"}, {"dims", {16}}},
                              json::object{{"name", std::string(name) + "1"}, {"data_type", "TYPE_INT32"}, {"dims", {16}}}};
         };
         for (int i = 40; i >= 1; --i) {
           const json::object step{{"model_name", i == 40 ? std::string("simple") : chain(i + 1)},
                                   {"model_version", -1},
                                   {"input_map", json::object{{"INPUT0", "INPUT0"}, {"INPUT1", "INPUT1"}}},
                                   {"output_map", json::object{{"OUTPUT0", "OUTPUT0"}, {"OUTPUT1", "OUTPUT1"}}}};
           const json::object config{{"name", chain(i)},
                                     {"platform", "ensemble"},
                                     {"max_batch_size", 8},
                                     {"input", tensors("INPUT")},
                                     {"output", tensors("OUTPUT")},
                                     {"ensemble_scheduling", json::object{{"step", json::array{step}}}}};
           const auto body = json::serialize(json::object{
               {"parameters", json::object{{"config", json::serialize(config)}, {"file:1/empty", "eA=="}}}});
           REQUIRE(request(port, "POST", "/v2/repository/models/" + chain(i) + "/load", body).status == 200);
         }
         auto top = request(port, "POST", "/v2/models/chain1/infer", simple_body());
         CHECK(top.status == 500);
         CHECK(error_of(top) == "ensemble 'chain33' is nested deeper than 32 ensembles");
         CHECK(request(port, "POST", "/v2/models/chain8/infer", simple_body()).status == 500);
         auto within = request(port, "POST", "/v2/models/chain9/infer", simple_body());  // 32 levels
         REQUIRE(within.status == 200);
         const json::value outputs = json::parse(within.body).at("outputs");
         for (const auto& o : outputs.as_array())
           if (o.at("name").as_string() == "OUTPUT0") CHECK(o.at("data").as_array().at(15).to_number<int>() == 16);
         for (int i = 1; i <= 40; ++i)
           CHECK(request(port, "POST", "/v2/repository/models/" + chain(i) + "/unload", "").status == 200);
       }},
      {"an ensemble of 20,000 steps listed last to first runs in linear time",
       [&](server_process&) {
         // Step j adds INPUT1 to tensor c<j>; the config lists them in reverse. The order was
         // found per request, pass by pass over every step: 20,000 steps cost ~2*10^8 lookups.
         constexpr int n = 20000;
         auto tensors = [](const char* name) {
           return json::array{json::object{{"name", std::string(name) + "0"}, {"data_type", "TYPE_INT32"}, {"dims", {16}}},
                              json::object{{"name", std::string(name) + "1"}, {"data_type", "TYPE_INT32"}, {"dims", {16}}}};
         };
         auto c = [](int j) { return j == 0 ? std::string("INPUT0") : "c" + std::to_string(j); };
         json::array steps;
         for (int j = n - 1; j >= 0; --j) {
           json::object out{{"OUTPUT0", j == n - 1 ? std::string("OUTPUT0") : c(j + 1)}};
           if (j == n - 1) out["OUTPUT1"] = "OUTPUT1";
           steps.push_back(json::object{{"model_name", "simple"},
                                        {"model_version", -1},
                                        {"input_map", json::object{{"INPUT0", c(j)}, {"INPUT1", "INPUT1"}}},
                                        {"output_map", std::move(out)}});
         }
         const json::object config{{"name", "long_ensemble"},
                                   {"platform", "ensemble"},
                                   {"max_batch_size", 8},
                                   {"input", tensors("INPUT")},
                                   {"output", tensors("OUTPUT")},
                                   {"ensemble_scheduling", json::object{{"step", std::move(steps)}}}};
         const auto body = json::serialize(
             json::object{{"parameters", json::object{{"config", json::serialize(config)}, {"file:1/empty", "eA=="}}}});
         REQUIRE(request(port, "POST", "/v2/repository/models/long_ensemble/load", body).status == 200);
         const auto t0 = std::chrono::steady_clock::now();
         auto r = request(port, "POST", "/v2/models/long_ensemble/infer", simple_body());
         const auto took = std::chrono::steady_clock::now() - t0;
         INFO("the request took " << std::chrono::duration_cast<std::chrono::milliseconds>(took).count() << " ms");
         REQUIRE(r.status == 200);
         CHECK(took < std::chrono::seconds(5));
         const json::value reply = json::parse(r.body);
         for (const auto& o : reply.at("outputs").as_array())
           if (o.at("name").as_string() == "OUTPUT0") CHECK(o.at("data").as_array().at(15).to_number<int>() == 15 + n);
         CHECK(request(port, "POST", "/v2/repository/models/long_ensemble/unload", "").status == 200);
       }},
      {"an ensemble whose step reads a tensor nothing provides is refused at load",
       [&](server_process&) {
         const std::string config =
             R"({"name":"orphan_ensemble","platform":"ensemble","max_batch_size":8,)"
             R"("input":[{"name":"INPUT0","data_type":"TYPE_INT32","dims":[16]},{"name":"INPUT1","data_type":"TYPE_INT32","dims":[16]}],)"
             R"("output":[{"name":"OUTPUT0","data_type":"TYPE_INT32","dims":[16]}],)"
             R"("ensemble_scheduling":{"step":[{"model_name":"simple","model_version":-1,)"
             R"("input_map":{"INPUT0":"INPUT0","INPUT1":"nowhere"},"output_map":{"OUTPUT0":"OUTPUT0"}}]}})";
         auto r = request(port, "POST", "/v2/repository/models/orphan_ensemble/load",
                          json::serialize(json::object{{"parameters", json::object{{"config", config}, {"file:1/empty", "eA=="}}}}));
         CHECK(r.status == 400);
         CHECK(error_of(r) == "load failed for model 'orphan_ensemble': version 1 is at UNAVAILABLE state: ensemble "
                              "'orphan_ensemble' cannot run: step 0 ('simple') reads tensor 'nowhere', which no "
                              "ensemble input or earlier step provides;\n");
       }},
      {"two ensembles on disk that use each other are refused, not loaded around the cycle",
       [&](server_process&) {
         // Each loaded the other as a missing step, within its own load, until the stack ran out.
         auto r = request(port, "POST", "/v2/repository/models/disk_cycle_a/load", "");
         CHECK(r.status == 400);
         CHECK_THAT(error_of(r), Catch::Matchers::Contains("would form a cycle through its step"));
         CHECK(request(port, "GET", "/v2/models/disk_cycle_a/ready").status == 400);
       }},
      {"sequences: IDs of at most 1 KiB, at most 65,536 live per model",
       [&](server_process&) {
         // A live sequence keeps its ID until it ends or idles out: 300 sequences started with
         // 4 MiB IDs held 1 GiB. And a model loaded with a long idle time kept every START.
         // simple_sequence's configuration with a 600 s idle time.
         const std::string config =
             R"({"name":"long_sequence","backend":"sequence","max_batch_size":8,)"
             R"("sequence_batching":{"max_sequence_idle_microseconds":600000000,"control_input":[)"
             R"({"name":"START","control":[{"kind":"CONTROL_SEQUENCE_START","int32_false_true":[0,1]}]},)"
             R"({"name":"READY","control":[{"kind":"CONTROL_SEQUENCE_READY","int32_false_true":[0,1]}]}]},)"
             R"("input":[{"name":"INPUT","data_type":"TYPE_INT32","dims":[1]}],)"
             R"("output":[{"name":"OUTPUT","data_type":"TYPE_INT32","dims":[1]}],"instance_group":[{"kind":"KIND_CPU"}]})";
         const auto body = json::serialize(
             json::object{{"parameters", json::object{{"config", config}, {"file:1/empty", "eA=="}}}});
         REQUIRE(request(port, "POST", "/v2/repository/models/long_sequence/load", body).status == 200);
         auto start = [](const std::string& id_json, bool end = false) {
           return R"({"parameters":{"sequence_id":)" + id_json + R"(,"sequence_start":true)" +
                  (end ? R"(,"sequence_end":true)" : "") +
                  R"(},"inputs":[{"name":"INPUT","datatype":"INT32","shape":[1,1],"data":[1]}]})";
         };
         auto r = request(port, "POST", "/v2/models/long_sequence/infer", start('"' + std::string(1025, 'q') + '"'));
         CHECK(r.status == 400);
         CHECK(error_of(r) == "[request id: <id_unknown>] sequence ID has 1025 bytes, more than the 1024 allowed");
         CHECK(request(port, "POST", "/v2/models/long_sequence/infer", start('"' + std::string(1024, 'q') + '"', true)).status == 200);
         // 65,536 sequences started (pipelined, a thousand at a time), then one more.
         connection c(port);
         int refused = 0;
         for (int first = 1; first <= 65536; first += 1000) {
           const int last = std::min(first + 999, 65536);
           std::string batch;
           for (int id = first; id <= last; ++id) {
             const std::string b = start(std::to_string(id));
             batch += "POST /v2/models/long_sequence/infer HTTP/1.1\r\nHost: x\r\nContent-Length: " +
                      std::to_string(b.size()) + "\r\n\r\n" + b;
           }
           c.send(batch);
           for (int id = first; id <= last; ++id) {
             auto reply = c.read();
             REQUIRE(reply);
             refused += reply->status == 200 ? 0 : 1;
           }
         }
         CHECK(refused == 0);
         auto over = request(port, "POST", "/v2/models/long_sequence/infer", start("70000"));
         CHECK(over.status == 503);
         CHECK(error_of(over) ==
               "[request id: <id_unknown>] model 'long_sequence' has 65536 live sequences, the most it keeps; end "
               "sequences or let idle ones expire");
         // Ending one makes room; the sequences that live go on.
         CHECK(request(port, "POST", "/v2/models/long_sequence/infer",
                       R"({"parameters":{"sequence_id":7,"sequence_end":true},"inputs":[{"name":"INPUT","datatype":"INT32","shape":[1,1],"data":[1]}]})")
                   .status == 200);
         CHECK(request(port, "POST", "/v2/models/long_sequence/infer", start("70000")).status == 200);
         CHECK(request(port, "POST", "/v2/repository/models/long_sequence/unload", "").status == 200);
       }},
      {"a reload that would close a cycle of ensembles is refused",
       [&](server_process&) {
         // cycle_a -> simple, cycle_b -> cycle_a, then cycle_a reloaded as cycle_a -> cycle_b:
         // every request to either would have run around the cycle.
         auto load = [&](const std::string& name, const std::string& step) {
           const json::object config{
               {"name", name},
               {"platform", "ensemble"},
               {"max_batch_size", 8},
               {"input", json::array{json::object{{"name", "INPUT0"}, {"data_type", "TYPE_INT32"}, {"dims", {16}}},
                                     json::object{{"name", "INPUT1"}, {"data_type", "TYPE_INT32"}, {"dims", {16}}}}},
               {"output", json::array{json::object{{"name", "OUTPUT0"}, {"data_type", "TYPE_INT32"}, {"dims", {16}}},
                                      json::object{{"name", "OUTPUT1"}, {"data_type", "TYPE_INT32"}, {"dims", {16}}}}},
               {"ensemble_scheduling",
                json::object{{"step", json::array{json::object{
                                          {"model_name", step},
                                          {"model_version", -1},
                                          {"input_map", json::object{{"INPUT0", "INPUT0"}, {"INPUT1", "INPUT1"}}},
                                          {"output_map", json::object{{"OUTPUT0", "OUTPUT0"}, {"OUTPUT1", "OUTPUT1"}}}}}}}}};
           return request(port, "POST", "/v2/repository/models/" + name + "/load",
                          json::serialize(json::object{{"parameters", json::object{{"config", json::serialize(config)},
                                                                                   {"file:1/empty", "eA=="}}}}));
         };
         REQUIRE(load("cycle_a", "simple").status == 200);
         REQUIRE(load("cycle_b", "cycle_a").status == 200);
         CHECK(request(port, "POST", "/v2/models/cycle_b/infer", simple_body()).status == 200);
         auto closing = load("cycle_a", "cycle_b");
         CHECK(closing.status == 400);
         CHECK_THAT(error_of(closing), Catch::Matchers::Contains(
                                           "ensemble 'cycle_a' would form a cycle through its step 'cycle_b'"));
         // The refused reload leaves cycle_a as it was (cycle_a -> simple): no cycle, and cycle_b
         // still serves through it.
         CHECK(request(port, "POST", "/v2/models/cycle_b/infer", simple_body()).status == 200);
         request(port, "POST", "/v2/repository/models/cycle_b/unload", "");
         request(port, "POST", "/v2/repository/models/cycle_a/unload", "");
       }},
      {"a JSON tensor is not sized by its announced shape",
       [&](server_process&) {
         REQUIRE(hostile::reset_peak(pid));
         const auto before = hostile::peak_rss_mib(pid);
         for (int i = 0; i < 4; ++i) {
           auto r = request(port, "POST", "/v2/models/simple/infer",
                            R"({"inputs":[{"name":"INPUT0","datatype":"INT32","shape":[16777216],"data":[1]}]})");
           CHECK(r.status == 500);  // Triton's status for a data/shape mismatch
           CHECK(error_of(r) == "Failed to parse 'data' field: shape does not match true shape");
         }
         CHECK(hostile::peak_rss_mib(pid) < before + 16);
       }},
  };

  for (const auto& c : table) {
    INFO("case: " << c.name);
    c.attack(s);
    REQUIRE(s.running());
    still_serving(port);
    CHECK(hostile::settled_rss_mib(pid, base_rss + 96) < base_rss + 96);
  }
}

TEST_CASE("hostile: a model whose config is not UTF-8 does not stop start-up", "[hostile]") {
  hostile_repo repo;
  server_process s({"--model-repository", repo.dir.string(), "--exit-on-error=false",
                    "--strict-readiness=false"},
                   false);
  REQUIRE(s.http_port() > 0);
  still_serving(s.http_port());
  auto idx = request(s.http_port(), "POST", "/v2/repository/index", "");
  CHECK(idx.body.find(R"("name":"bad_utf8")") != std::string::npos);
}

TEST_CASE("hostile: a restricted API takes its key from the header block alone", "[hostile][restricted]") {
  hostile_repo repo;
  server_process s({"--model-repository", repo.dir.string(), "--strict-readiness=false", "--exit-on-error=false",
                    "--http-restricted-api=model-repository:admin-key=admin"},
                   false);
  const int port = s.http_port();
  auto exchange = [port](const std::string& bytes) {
    connection c(port);
    c.send(bytes);
    auto r = c.read();
    REQUIRE(r);
    return *r;
  };
  // The key in a chunked body's trailer does not count.
  auto r = exchange("POST /v2/repository/index HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n"
                    "2\r\n{}\r\n0\r\nadmin-key: admin\r\n\r\n");
  CHECK(r.status == 403);
  CHECK(error_of(r) == "This API is restricted, expecting header 'admin-key'");
  // In the header block it does, chunked or not.
  r = exchange("POST /v2/repository/index HTTP/1.1\r\nHost: x\r\nadmin-key: admin\r\nTransfer-Encoding: chunked\r\n\r\n"
               "2\r\n{}\r\n0\r\n\r\n");
  CHECK(r.status == 200);
  // A header folded over two lines (obs-fold) is refused, whatever it carries.
  for (const std::string folded : {"admin-key:\r\n admin\r\n", "X-Other: a\r\n\tb\r\n"}) {
    CAPTURE(folded);
    r = exchange("POST /v2/repository/index HTTP/1.1\r\nHost: x\r\n" + folded + "Content-Length: 0\r\n\r\n");
    CHECK(r.status == 400);
    CHECK(error_of(r).find("obs-fold") != std::string::npos);
  }
  still_serving(port);
  CHECK(request(port, "POST", "/v2/repository/index", "", {{"admin-key", "admin"}}).status == 200);
}

TEST_CASE("hostile: the accept loop backs off when descriptors run out", "[hostile]") {
  // The server inherits a small descriptor limit; the test opens more connections than it may
  // hold and checks that it neither spins nor stops serving once they are gone.
  rlimit saved{};
  ::getrlimit(RLIMIT_NOFILE, &saved);
  rlimit small = saved;
  small.rlim_cur = 96;
  ::setrlimit(RLIMIT_NOFILE, &small);
  std::unique_ptr<server_process> s;
  try {
    s = std::make_unique<server_process>(std::vector<std::string>{
        "--model-repository", (source / "reference_server/models").string(), "--load-model", "simple",
        "--model-control-mode=explicit"}, false);
  } catch (...) {
    ::setrlimit(RLIMIT_NOFILE, &saved);
    throw;
  }
  ::setrlimit(RLIMIT_NOFILE, &saved);
  const int port = s->http_port();
  std::vector<std::unique_ptr<connection>> held;
  for (int i = 0; i < 150; ++i) held.push_back(std::make_unique<connection>(port));
  std::this_thread::sleep_for(std::chrono::milliseconds(300));
  const auto cpu0 = hostile::cpu_time(s->pid());
  std::this_thread::sleep_for(std::chrono::seconds(1));
  const auto cpu1 = hostile::cpu_time(s->pid());
  CHECK(cpu1 - cpu0 < std::chrono::milliseconds(300));  // a busy loop burns ~1000 ms
  held.clear();
  std::this_thread::sleep_for(std::chrono::milliseconds(300));
  REQUIRE(s->running());
  still_serving(port);
}

TEST_CASE("hostile: the CUDA VMM socket bounds connections and descriptors and keeps serving", "[hostile][vmm]") {
  const std::string path = "/tmp/iw_hostile_vmm_" + std::to_string(::getpid()) + ".sock";
  server_process s({"--allow-client-shm=true", "--cuda-vmm-socket", path});
  const std::size_t fds_before = hostile::open_fds(s.pid());
  auto connect_raw = [&] {
    int fd = ::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    sockaddr_un addr{};
    addr.sun_family = AF_UNIX;
    std::memcpy(addr.sun_path, path.c_str(), path.size() + 1);
    REQUIRE(::connect(fd, reinterpret_cast<const sockaddr*>(&addr), sizeof addr) == 0);
    return fd;
  };
  auto reply_of = [](int fd) {
    timeval tv{5, 0};
    ::setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
    char head[4];
    if (::recv(fd, head, 4, MSG_WAITALL) != 4) return std::string();
    const std::size_t n = std::size_t(std::uint8_t(head[0])) | std::size_t(std::uint8_t(head[1])) << 8;
    std::string text(n, '\0');
    if (::recv(fd, text.data(), n, MSG_WAITALL) != static_cast<ssize_t>(n)) return std::string();
    return text;
  };
  auto wait_reply = [&](int fd) {
    pollfd p{fd, POLLIN, 0};
    return ::poll(&p, 1, 300) > 0 ? reply_of(fd) : std::string();
  };
  // 70 idle connections: the server serves 64 and tells the others why it will not.
  std::vector<int> conns;
  for (int i = 0; i < 70; ++i) conns.push_back(connect_raw());
  int refused_connections = 0;
  for (int fd : conns) refused_connections += wait_reply(fd) == "Etoo many connections to the CUDA VMM socket (at most 64)";
  CHECK(refused_connections == 6);
  for (int fd : conns) ::close(fd);
  conns.clear();
  // 40 connections, each holding an unfinished deposit with 64 descriptors of one memfd: the
  // server holds 2,048 at most (a quarter of its descriptor limit when that is lower), and
  // refuses the deposits past them.
  rlimit limit{};
  REQUIRE(::getrlimit(RLIMIT_NOFILE, &limit) == 0);
  if (limit.rlim_cur < 8192) {
    WARN("descriptor limit " << limit.rlim_cur << " < 8192: the held-descriptor case is skipped");
    return;
  }
  const int memfd = ::memfd_create("iw_hostile_vmm", MFD_CLOEXEC);
  REQUIRE(memfd >= 0);
  for (int i = 0; i < 300 && hostile::open_fds(s.pid()) != fds_before; ++i) std::this_thread::sleep_for(std::chrono::milliseconds(10));
  int refused_deposits = 0;
  for (int i = 0; i < 40; ++i) {
    const int fd = connect_raw();
    conns.push_back(fd);
    // A frame header announcing 8,224 bytes, then 4 bytes with 64 descriptors attached.
    const char part[] = {'\x20', '\x20', '\0', '\0', 'D', '\x01', '\0', '\0'};
    inferwire::shm::detail::send_with_fds(fd, std::string_view(part, sizeof part), std::vector<int>(64, memfd));
    refused_deposits += wait_reply(fd) == "Ethe server holds too many descriptors of unfinished deposits; try again";
  }
  CHECK(refused_deposits == 8);
  // (the last refused connection closes just after its reply)
  for (int i = 0; i < 300 && hostile::open_fds(s.pid()) > fds_before + 2048 + 32; ++i)
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  CHECK(hostile::open_fds(s.pid()) <= fds_before + 2048 + 32);
  CHECK(request(s.http_port(), "GET", "/v2/health/live").status == 200);
  for (int fd : conns) ::close(fd);
  ::close(memfd);
  for (int i = 0; i < 300 && hostile::open_fds(s.pid()) != fds_before; ++i) std::this_thread::sleep_for(std::chrono::milliseconds(10));
  CHECK(hostile::open_fds(s.pid()) == fds_before);
  CHECK(request(s.http_port(), "GET", "/v2/health/live").status == 200);
}
