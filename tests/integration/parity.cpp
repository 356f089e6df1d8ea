// SPDX-License-Identifier: Apache-2.0
// One table, both transports: every endpoint's error cases (and a few successes) sent over HTTP
// and over gRPC to one server. Each row names the inferwire error code both must answer with
// (HTTP status and gRPC code follow from it) and the text, which must be the same on both
// unless the row documents an upstream difference. A rule written for one transport only shows
// up here as a failing row.
#include "harness.hpp"

#include <inferwire/core/error.hpp>

#include <grpc_service.grpc.pb.h>
#include <health.grpc.pb.h>
#include <grpcpp/grpcpp.h>

#include <catch2/catch.hpp>

#include <boost/json/parse.hpp>

#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>
#include <future>
#include <thread>
#include <optional>
#include <sstream>

#include <unistd.h>

using namespace iwtest;
using inferwire::errc;
using Stub = inference::GRPCInferenceService::Stub;

namespace {


server_process& parity_server() {
  static server_process s({"--allow-grpc", "true", "--grpc-port", "0", "--model-control-mode", "explicit",
                           "--load-model", "*", "--allow-client-shm=true", "--model-repository", source_path("reference_server/models_decoupled")});
  return s;
}

/// What one transport answered: a status (HTTP status, or gRPC code) and the error text.
struct answer {
  int code = 0;
  std::string text;
};

using headers = std::vector<std::pair<std::string, std::string>>;
using rpc_call = std::function<answer(Stub&, const headers&)>;

template <class Req, class Resp>
rpc_call rpc(grpc::Status (Stub::*method)(grpc::ClientContext*, const Req&, Resp*), Req request) {
  return [method, request](Stub& stub, const headers& metadata) {
    grpc::ClientContext ctx;
    for (const auto& [k, v] : metadata) ctx.AddMetadata(k, v);
    Resp response;
    const grpc::Status st = (stub.*method)(&ctx, request, &response);
    return answer{static_cast<int>(st.error_code()), st.error_message()};
  };
}

struct http_call {
  std::string method;
  std::string target;
  std::string body;
};

// --- inference requests, built the same for both transports -----------------------------------

struct tensor_spec {
  std::string name;
  std::string datatype = "INT32";
  std::vector<std::int64_t> shape{1, 16};
  std::string region = {};  ///< its data in this shared-memory region instead
};

struct infer_spec {
  std::string model = "simple";
  std::vector<tensor_spec> inputs{{"INPUT0"}, {"INPUT1"}};
  std::vector<std::string> outputs;
  std::optional<std::uint64_t> sequence_id;
};

std::int64_t elements(const std::vector<std::int64_t>& shape) {
  std::int64_t n = 1;
  for (auto d : shape) n *= d;
  return n;
}

http_call infer_http(const infer_spec& s) {
  std::string body = R"({"inputs":[)";
  for (std::size_t i = 0; i < s.inputs.size(); ++i) {
    const auto& t = s.inputs[i];
    body += (i ? "," : "") + std::string(R"({"name":")") + t.name + R"(","datatype":")" + t.datatype +
            R"(","shape":[)";
    for (std::size_t d = 0; d < t.shape.size(); ++d) body += (d ? "," : "") + std::to_string(t.shape[d]);
    if (!t.region.empty()) {
      body += R"(],"parameters":{"shared_memory_region":")" + t.region + R"(","shared_memory_byte_size":64}})";
      continue;
    }
    body += R"(],"data":[)";
    for (std::int64_t e = 0; e < elements(t.shape); ++e) body += e ? ",1" : "1";
    body += "]}";
  }
  body += "]";
  if (!s.outputs.empty()) {
    body += R"(,"outputs":[)";
    for (std::size_t i = 0; i < s.outputs.size(); ++i)
      body += (i ? "," : "") + std::string(R"({"name":")") + s.outputs[i] + R"("})";
    body += "]";
  }
  if (s.sequence_id) body += R"(,"parameters":{"sequence_id":)" + std::to_string(*s.sequence_id) + "}";
  body += "}";
  return {"POST", "/v2/models/" + s.model + "/infer", body};
}

inference::ModelInferRequest infer_request_of(const infer_spec& s) {
  inference::ModelInferRequest q;
  q.set_model_name(s.model);
  for (const auto& t : s.inputs) {
    auto* in = q.add_inputs();
    in->set_name(t.name);
    in->set_datatype(t.datatype);
    for (auto d : t.shape) in->add_shape(d);
    if (!t.region.empty()) {
      (*in->mutable_parameters())["shared_memory_region"].set_string_param(t.region);
      (*in->mutable_parameters())["shared_memory_byte_size"].set_int64_param(64);
      continue;
    }
    std::string raw;
    for (std::int64_t e = 0; e < elements(t.shape); ++e) raw.append("\1\0\0\0", 4);
    q.add_raw_input_contents(raw);
  }
  for (const auto& o : s.outputs) q.add_outputs()->set_name(o);
  if (s.sequence_id) (*q.mutable_parameters())["sequence_id"].set_uint64_param(*s.sequence_id);
  return q;
}

rpc_call infer_grpc(const infer_spec& s) { return rpc(&Stub::ModelInfer, infer_request_of(s)); }

// --- the table -----------------------------------------------------------------------------------

struct parity_row {
  std::string what;
  std::optional<errc> code;  ///< nullopt: both succeed
  std::string text;          ///< the exact text ("" : both texts must only agree)
  http_call http;
  rpc_call grpc;
  /// Where upstream's HTTP frontend answers otherwise: its status and text.
  std::optional<answer> http_differs = {};
};

template <class Req>
Req named(std::string name) {
  Req r;
  r.set_name(std::move(name));
  return r;
}

inference::ModelMetadataRequest metadata_of(std::string name, std::string version = "") {
  auto r = named<inference::ModelMetadataRequest>(std::move(name));
  r.set_version(std::move(version));
  return r;
}

inference::ModelConfigRequest config_of(std::string name, std::string version = "") {
  auto r = named<inference::ModelConfigRequest>(std::move(name));
  r.set_version(std::move(version));
  return r;
}

inference::RepositoryModelLoadRequest load_of(std::string model, std::string repository = "") {
  inference::RepositoryModelLoadRequest r;
  r.set_model_name(std::move(model));
  r.set_repository_name(std::move(repository));
  return r;
}

inference::RepositoryModelUnloadRequest unload_of(std::string model, std::string repository = "") {
  inference::RepositoryModelUnloadRequest r;
  r.set_model_name(std::move(model));
  r.set_repository_name(std::move(repository));
  return r;
}

std::vector<parity_row> table() {
  std::vector<parity_row> rows;
  const std::string unknown = "Request for unknown model: 'nope' is not found";
  // Health and metadata.
  rows.push_back({"live", std::nullopt, "", {"GET", "/v2/health/live", ""},
                  rpc(&Stub::ServerLive, inference::ServerLiveRequest{})});
  rows.push_back({"model ready, unknown model", std::nullopt, "", {"GET", "/v2/models/nope/ready", ""},
                  rpc(&Stub::ModelReady, named<inference::ModelReadyRequest>("nope")),
                  // Released Triton: HTTP answers 400 with this text, gRPC OK with ready=false.
                  answer{400, "Model version not ready"}});
  rows.push_back({"metadata, unknown model", errc::not_found, unknown, {"GET", "/v2/models/nope", ""},
                  rpc(&Stub::ModelMetadata, metadata_of("nope"))});
  rows.push_back({"metadata, unknown version", errc::not_found,
                  "Request for unknown model: 'simple' version 9 is not found",
                  {"GET", "/v2/models/simple/versions/9", ""}, rpc(&Stub::ModelMetadata, metadata_of("simple", "9"))});
  rows.push_back({"metadata, version not a number", errc::invalid_arg, "",
                  {"GET", "/v2/models/simple/versions/x1", ""}, rpc(&Stub::ModelMetadata, metadata_of("simple", "x1")),
                  // Upstream's HTTP routes take digits only as a version: anything else is no route.
                  answer{404, "Not Found"}});
  rows.push_back({"config, unknown model", errc::not_found, unknown, {"GET", "/v2/models/nope/config", ""},
                  rpc(&Stub::ModelConfig, config_of("nope"))});
  rows.push_back({"config, unknown version", errc::not_found,
                  "Request for unknown model: 'simple' version 9 is not found",
                  {"GET", "/v2/models/simple/versions/9/config", ""}, rpc(&Stub::ModelConfig, config_of("simple", "9"))});
  // Statistics.
  {
    inference::ModelStatisticsRequest q;
    q.set_name("nope");
    rows.push_back({"statistics, unknown model", errc::invalid_arg, "", {"GET", "/v2/models/nope/stats", ""},
                    rpc(&Stub::ModelStatistics, q)});
    q.set_name("simple");
    q.set_version("9");
    rows.push_back({"statistics, unknown version", errc::invalid_arg, "",
                    {"GET", "/v2/models/simple/versions/9/stats", ""}, rpc(&Stub::ModelStatistics, q)});
  }
  // Inference.
  {
    infer_spec s;
    s.model = "nope";
    rows.push_back({"infer, unknown model", errc::not_found, unknown, infer_http(s), infer_grpc(s)});
  }
  {
    infer_spec s;
    s.inputs = {{"INPUT0"}, {"INPUT0"}};
    rows.push_back({"infer, duplicate input", errc::invalid_arg,
                    "[request id: <id_unknown>] input 'INPUT0' already exists in request", infer_http(s), infer_grpc(s)});
  }
  {
    infer_spec s;
    s.outputs = {"OUTPUT0", "OUTPUT0"};
    rows.push_back({"infer, duplicate output", errc::invalid_arg,
                    "[request id: <id_unknown>] output 'OUTPUT0' already exists in request", infer_http(s), infer_grpc(s)});
  }
  {
    infer_spec s;
    s.inputs = {{"INPUT0"}};
    rows.push_back({"infer, missing input", errc::invalid_arg, "", infer_http(s), infer_grpc(s)});
  }
  {
    infer_spec s;
    s.inputs = {{"INPUT0"}, {"INPUTX"}};
    rows.push_back({"infer, unknown input", errc::invalid_arg, "unexpected inference input 'INPUTX' for model 'simple'",
                    infer_http(s), infer_grpc(s)});
  }
  {
    infer_spec s;
    s.inputs = {{"INPUTX"}, {"INPUTX"}};  // a name the model does not have, twice: repeated first
    rows.push_back({"infer, duplicate unknown input", errc::invalid_arg,
                    "[request id: <id_unknown>] input 'INPUTX' already exists in request", infer_http(s), infer_grpc(s)});
  }
  {
    infer_spec s;
    s.inputs = {{"INPUTX"}, {"INPUT0"}};
    rows.push_back({"infer, unknown input first", errc::invalid_arg, "unexpected inference input 'INPUTX' for model 'simple'",
                    infer_http(s), infer_grpc(s)});
  }
  {
    infer_spec s;
    s.outputs = {"OUTPUTX"};
    rows.push_back({"infer, unknown output", errc::invalid_arg, "unexpected inference output 'OUTPUTX' for model 'simple'",
                    infer_http(s), infer_grpc(s)});
  }
  {
    infer_spec s;
    s.inputs = {{"INPUT0", "UINT32"}, {"INPUT1"}};
    rows.push_back({"infer, wrong datatype", errc::invalid_arg,
                    "[request id: <id_unknown>] inference input 'INPUT0' data-type is 'UINT32', but model 'simple' "
                    "expects 'INT32'",
                    infer_http(s), infer_grpc(s)});
  }
  {
    infer_spec s;
    s.inputs = {{"INPUT0", "INT32", {1, 15}}, {"INPUT1", "INT32", {1, 15}}};
    rows.push_back({"infer, wrong shape", errc::invalid_arg, "", infer_http(s), infer_grpc(s)});
  }
  {
    infer_spec s;
    s.inputs = {{"INPUT0", "INT32", {9, 16}}, {"INPUT1", "INT32", {9, 16}}};
    rows.push_back({"infer, batch too large", errc::invalid_arg, "", infer_http(s), infer_grpc(s)});
  }
  {
    infer_spec s;
    s.model = "simple_sequence";
    s.inputs = {{"INPUT", "INT32", {1, 1}}};
    rows.push_back({"infer, sequence without correlation ID", errc::invalid_arg, "", infer_http(s), infer_grpc(s)});
    s.sequence_id = 4242;
    rows.push_back({"infer, sequence without START", errc::invalid_arg,
                    "[request id: <id_unknown>] inference request for sequence 4242 to model 'simple_sequence' must "
                    "specify the START flag on the first request of the sequence",
                    infer_http(s), infer_grpc(s)});
  }
  {
    infer_spec s;
    s.inputs = {{"INPUT0", "INT32", {1, 16}, "nope"}, {"INPUT1", "INT32", {1, 16}, "nope"}};
    rows.push_back({"infer, input in an unknown shm region", errc::not_found,
                    "Unable to find shared memory region: 'nope'", infer_http(s), infer_grpc(s)});
  }
  {
    infer_spec s;
    rows.push_back({"infer, valid", std::nullopt, "", infer_http(s), infer_grpc(s)});
  }
  // Repository.
  const std::string no_repo = "'repository_name' specification is not supported";
  rows.push_back({"load, repository name", errc::unsupported, no_repo, {"POST", "/v2/repository/r/models/simple/load", ""},
                  rpc(&Stub::RepositoryModelLoad, load_of("simple", "r"))});
  rows.push_back({"unload, repository name", errc::unsupported, no_repo,
                  {"POST", "/v2/repository/r/models/simple/unload", ""},
                  rpc(&Stub::RepositoryModelUnload, unload_of("simple", "r"))});
  rows.push_back({"load, unknown model", errc::internal, "failed to load 'nope', failed to poll from model repository", {"POST", "/v2/repository/models/nope/load", ""},
                  rpc(&Stub::RepositoryModelLoad, load_of("nope"))});
  rows.push_back({"unload, unknown model", std::nullopt, "", {"POST", "/v2/repository/models/nope/unload", ""},
                  rpc(&Stub::RepositoryModelUnload, unload_of("nope"))});
  {
    inference::RepositoryIndexRequest q;
    rows.push_back({"index", std::nullopt, "", {"POST", "/v2/repository/index", ""}, rpc(&Stub::RepositoryIndex, q)});
  }
  // Shared memory.
  {
    inference::SystemSharedMemoryStatusRequest q;
    q.set_name("nope");
    rows.push_back({"system shm status, unknown region", errc::not_found,
                    "Unable to find system shared memory region: 'nope'",
                    {"GET", "/v2/systemsharedmemory/region/nope/status", ""}, rpc(&Stub::SystemSharedMemoryStatus, q)});
    inference::CudaSharedMemoryStatusRequest c;
    c.set_name("nope");
    rows.push_back({"cuda shm status, unknown region", errc::not_found, "Unable to find cuda shared memory region: 'nope'",
                    {"GET", "/v2/cudasharedmemory/region/nope/status", ""}, rpc(&Stub::CudaSharedMemoryStatus, c)});
    inference::SystemSharedMemoryUnregisterRequest u;
    u.set_name("nope");
    rows.push_back({"system shm unregister, unknown region", std::nullopt, "",
                    {"POST", "/v2/systemsharedmemory/region/nope/unregister", ""},
                    rpc(&Stub::SystemSharedMemoryUnregister, u)});
    inference::SystemSharedMemoryRegisterRequest r;
    r.set_name("parity");
    r.set_key("/inferwire-parity-no-such-key");
    r.set_byte_size(64);
    rows.push_back({"system shm register, key that does not exist", errc::internal, "",
                    {"POST", "/v2/systemsharedmemory/region/parity/register",
                     R"({"key":"/inferwire-parity-no-such-key","offset":0,"byte_size":64})"},
                    rpc(&Stub::SystemSharedMemoryRegister, r)});
    // A region without a name: HTTP's route has none to give; both refuse it.
    inference::SystemSharedMemoryRegisterRequest unnamed;
    unnamed.set_key("/inferwire-parity-no-such-key");
    unnamed.set_byte_size(64);
    rows.push_back({"system shm register, no region name", errc::invalid_arg,
                    "'region name' is necessary to register system shared memory region",
                    {"POST", "/v2/systemsharedmemory/register", R"({"key":"/inferwire-parity-no-such-key","offset":0,"byte_size":64})"},
                    rpc(&Stub::SystemSharedMemoryRegister, unnamed)});
    inference::CudaSharedMemoryRegisterRequest unnamed_cuda;
    unnamed_cuda.set_raw_handle(std::string(64, 'x'));
    unnamed_cuda.set_byte_size(64);
    rows.push_back({"cuda shm register, no region name", errc::invalid_arg,
                    "'region name' is necessary to register cuda shared memory region",
                    {"POST", "/v2/cudasharedmemory/register", R"({"raw_handle":{"b64":"eA=="},"device_id":0,"byte_size":64})"},
                    rpc(&Stub::CudaSharedMemoryRegister, unnamed_cuda)});
  }
  // Trace and log settings.
  {
    inference::TraceSettingRequest q;
    q.set_model_name("nope");
    rows.push_back({"trace settings, unknown model", errc::invalid_arg, "Request for unknown model : nope", {"GET", "/v2/models/nope/trace/setting", ""},
                    rpc(&Stub::TraceSetting, q)});
    inference::TraceSettingRequest rate;
    (*rate.mutable_settings())["trace_rate"].add_value("x");
    rows.push_back({"trace settings, invalid rate", errc::invalid_arg, "", {"POST", "/v2/trace/setting", R"({"trace_rate":"x"})"},
                    rpc(&Stub::TraceSetting, rate)});
    inference::LogSettingsRequest log;
    (*log.mutable_settings())["log_format"].set_string_param("xml");
    rows.push_back({"log settings, unknown format", errc::unavailable, "invalid argument for --log_format, got: xml",
                    {"POST", "/v2/logging", R"({"log_format":"xml"})"}, rpc(&Stub::LogSettings, log)});
  }
  return rows;
}

}  // namespace

TEST_CASE("parity: every endpoint's errors are the same over HTTP and gRPC", "[parity][grpc]") {
  server_process& s = parity_server();
  auto stub = inference::GRPCInferenceService::NewStub(
      grpc::CreateChannel("127.0.0.1:" + std::to_string(s.grpc_port()), grpc::InsecureChannelCredentials()));
  for (const parity_row& r : table()) {
    CAPTURE(r.what, r.http.target);
    const reply h = request(s.http_port(), r.http.method, r.http.target, r.http.body);
    const answer g = r.grpc(*stub, {});
    const answer http{static_cast<int>(h.status), h.status == 200 ? std::string() : error_of(h)};
    CAPTURE(http.code, http.text, g.code, g.text);
    const int want_grpc = r.code ? static_cast<int>(inferwire::grpc_code(*r.code)) : 0;
    CHECK(g.code == want_grpc);
    if (r.http_differs) {
      CHECK(http.code == r.http_differs->code);
      CHECK(http.text == r.http_differs->text);
      continue;
    }
    CHECK(http.code == (r.code ? inferwire::http_status(*r.code) : 200));
    if (!r.code) continue;
    CHECK(http.text == g.text);
    if (!r.text.empty()) CHECK(g.text == r.text);
  }
}

TEST_CASE("parity: restricted APIs over HTTP and gRPC from one table", "[parity][grpc][restricted]") {
  server_process s({"--allow-grpc", "true", "--grpc-port", "0",
                    "--http-restricted-api=inference,model-repository,statistics:iw-key=v1",
                    "--grpc-restricted-protocol=inference,model-repository,statistics:iw-key=v1",
                    "--http-restricted-api=trace,logging,shared-memory,model-config,metadata,health:admin=v2",
                    "--grpc-restricted-protocol=trace,logging,shared-memory,model-config,metadata,health:admin=v2"});
  auto stub = inference::GRPCInferenceService::NewStub(
      grpc::CreateChannel("127.0.0.1:" + std::to_string(s.grpc_port()), grpc::InsecureChannelCredentials()));
  struct probe {
    std::string category;
    http_call http;
    rpc_call grpc;
    std::string key, value;
  };
  inference::ModelStatisticsRequest stats;
  stats.set_name("simple");
  inference::TraceSettingRequest trace;
  inference::LogSettingsRequest log;
  inference::SystemSharedMemoryStatusRequest shm;
  const std::vector<probe> probes = {
      {"health", {"GET", "/v2/health/live", ""}, rpc(&Stub::ServerLive, inference::ServerLiveRequest{}), "admin", "v2"},
      {"health", {"GET", "/v2/models/simple/ready", ""}, rpc(&Stub::ModelReady, named<inference::ModelReadyRequest>("simple")),
       "admin", "v2"},
      {"metadata", {"GET", "/v2", ""}, rpc(&Stub::ServerMetadata, inference::ServerMetadataRequest{}), "admin", "v2"},
      {"metadata", {"GET", "/v2/models/simple", ""}, rpc(&Stub::ModelMetadata, metadata_of("simple")), "admin", "v2"},
      {"model-config", {"GET", "/v2/models/simple/config", ""}, rpc(&Stub::ModelConfig, config_of("simple")), "admin",
       "v2"},
      {"inference", infer_http(infer_spec{}), infer_grpc(infer_spec{}), "iw-key", "v1"},
      {"statistics", {"GET", "/v2/models/simple/stats", ""}, rpc(&Stub::ModelStatistics, stats), "iw-key", "v1"},
      {"model-repository", {"POST", "/v2/repository/index", ""},
       rpc(&Stub::RepositoryIndex, inference::RepositoryIndexRequest{}), "iw-key", "v1"},
      {"shared-memory", {"GET", "/v2/systemsharedmemory/status", ""}, rpc(&Stub::SystemSharedMemoryStatus, shm), "admin",
       "v2"},
      {"trace", {"GET", "/v2/trace/setting", ""}, rpc(&Stub::TraceSetting, trace), "admin", "v2"},
      {"logging", {"GET", "/v2/logging", ""}, rpc(&Stub::LogSettings, log), "admin", "v2"},
  };
  for (const auto& p : probes) {
    CAPTURE(p.category, p.http.target);
    // Without the header, with a wrong value, with the right one.
    const reply h = request(s.http_port(), p.http.method, p.http.target, p.http.body);
    CHECK(h.status == 403);
    CHECK(error_of(h) == "This API is restricted, expecting header '" + p.key + "'");
    const answer g = p.grpc(*stub, {});
    CHECK(g.code == static_cast<int>(grpc::StatusCode::UNAVAILABLE));
    CHECK(g.text == "This protocol is restricted, expecting header 'triton-grpc-protocol-" + p.key + "'");
    CHECK(request(s.http_port(), p.http.method, p.http.target, p.http.body, {{p.key, p.value + "0"}}).status == 403);
    CHECK(p.grpc(*stub, {{"triton-grpc-protocol-" + p.key, p.value + "0"}}).code ==
          static_cast<int>(grpc::StatusCode::UNAVAILABLE));
    CHECK(request(s.http_port(), p.http.method, p.http.target, p.http.body, {{p.key, p.value}}).status == 200);
    CHECK(p.grpc(*stub, {{"triton-grpc-protocol-" + p.key, p.value}}).code == 0);
  }
  // A stream of a restricted category ends before any request is read.
  grpc::ClientContext ctx;
  auto stream = stub->ModelStreamInfer(&ctx);
  inference::ModelStreamInferResponse response;
  CHECK_FALSE(stream->Read(&response));
  const grpc::Status st = stream->Finish();
  CHECK(st.error_code() == grpc::StatusCode::UNAVAILABLE);
  CHECK(st.error_message() == "This protocol is restricted, expecting header 'triton-grpc-protocol-iw-key'");
  // The standard grpc.health.v1 check is in the `health` category too, as in Triton.
  auto health = grpc::health::v1::Health::NewStub(
      grpc::CreateChannel("127.0.0.1:" + std::to_string(s.grpc_port()), grpc::InsecureChannelCredentials()));
  {
    grpc::ClientContext hctx;
    grpc::health::v1::HealthCheckResponse hr;
    const grpc::Status hs = health->Check(&hctx, grpc::health::v1::HealthCheckRequest{}, &hr);
    CHECK(hs.error_code() == grpc::StatusCode::UNAVAILABLE);
    CHECK(hs.error_message() == "This protocol is restricted, expecting header 'triton-grpc-protocol-admin'");
  }
  {
    grpc::ClientContext hctx;
    hctx.AddMetadata("triton-grpc-protocol-admin", "v2");
    grpc::health::v1::HealthCheckResponse hr;
    CHECK(health->Check(&hctx, grpc::health::v1::HealthCheckRequest{}, &hr).ok());
    CHECK(hr.status() == grpc::health::v1::HealthCheckResponse::SERVING);
  }
}

TEST_CASE("parity: a server that failed to initialise is not live over HTTP and gRPC", "[parity][grpc][launch]") {
  server_process s({"--allow-grpc", "true", "--grpc-port", "0", "--model-repository", "/no/such/repository",
                    "--exit-on-error=false"},
                   false);
  auto stub = inference::GRPCInferenceService::NewStub(
      grpc::CreateChannel("127.0.0.1:" + std::to_string(s.grpc_port()), grpc::InsecureChannelCredentials()));
  CHECK(request(s.http_port(), "GET", "/v2/health/live").status == 400);
  CHECK(request(s.http_port(), "GET", "/v2/health/ready").status == 400);
  grpc::ClientContext live_ctx;
  inference::ServerLiveResponse live;
  REQUIRE(stub->ServerLive(&live_ctx, {}, &live).ok());
  CHECK_FALSE(live.live());
  grpc::ClientContext ready_ctx;
  inference::ServerReadyResponse ready;
  REQUIRE(stub->ServerReady(&ready_ctx, {}, &ready).ok());
  CHECK_FALSE(ready.ready());
  grpc::ClientContext md_ctx;
  inference::ServerMetadataResponse md;
  CHECK(stub->ServerMetadata(&md_ctx, {}, &md).ok());
  CHECK(md.name() == "triton");
  const answer index = rpc(&Stub::RepositoryIndex, inference::RepositoryIndexRequest{})(*stub, {});
  CHECK(index.code == static_cast<int>(grpc::StatusCode::UNAVAILABLE));
  CHECK(index.text == "Server not ready");
}

TEST_CASE("parity: gRPC inferences are traced with gRPC's timestamp names", "[parity][grpc][trace]") {
  const auto dir = std::filesystem::temp_directory_path() / ("iw-grpc-trace-" + std::to_string(::getpid()));
  std::filesystem::remove_all(dir);
  std::filesystem::create_directories(dir);
  const auto file = dir / "trace.json";
  {
    server_process s({"--allow-grpc", "true", "--grpc-port", "0", "--trace-config", "triton,file=" + file.string(),
                      "--trace-config", "level=TIMESTAMPS", "--trace-config", "rate=1"});
    auto stub = inference::GRPCInferenceService::NewStub(
        grpc::CreateChannel("127.0.0.1:" + std::to_string(s.grpc_port()), grpc::InsecureChannelCredentials()));
    for (int i = 0; i < 2; ++i) CHECK(infer_grpc(infer_spec{})(*stub, {}).code == 0);
    {
      // And a request on a stream.
      grpc::ClientContext ctx;
      auto stream = stub->ModelStreamInfer(&ctx);
      REQUIRE(stream->Write(infer_request_of(infer_spec{})));
      inference::ModelStreamInferResponse response;
      REQUIRE(stream->Read(&response));
      CHECK(response.error_message().empty());
      stream->WritesDone();
      CHECK(stream->Finish().ok());
    }
    stub.reset();  // no open channel for the shutdown to wait for
    CHECK(s.stop() == 0);
  }
  std::ifstream in(file);
  std::stringstream text;
  text << in.rdbuf();
  const auto traces = boost::json::parse(text.str()).as_array();
  REQUIRE(traces.size() == 3);
  for (const auto& t : traces) {
    std::vector<std::string> names;
    for (const auto& ts : t.at("timestamps").as_array()) names.emplace_back(ts.at("name").as_string());
    CHECK(names == std::vector<std::string>{"GRPC_WAITREAD_START", "GRPC_WAITREAD_END", "REQUEST_START",
                                            "QUEUE_START", "COMPUTE_START", "COMPUTE_INPUT_END",
                                            "COMPUTE_OUTPUT_START", "COMPUTE_END", "REQUEST_END",
                                            "GRPC_SEND_START", "GRPC_SEND_END"});
    CHECK(t.at("model_name").as_string() == "simple");
  }
  std::filesystem::remove_all(dir);
}

TEST_CASE("parity: a request timeout in the queue over gRPC", "[parity][grpc][schedule]") {
  server_process s({"--allow-grpc", "true", "--grpc-port", "0"});
  auto stub = inference::GRPCInferenceService::NewStub(
      grpc::CreateChannel("127.0.0.1:" + std::to_string(s.grpc_port()), grpc::InsecureChannelCredentials()));
  infer_spec spec;
  spec.model = "identity_policy";
  spec.inputs = {{"INPUT0", "INT32", {1}}};
  auto first = std::async(std::launch::async, [&] { return infer_grpc(spec)(*stub, {}); });
  std::this_thread::sleep_for(std::chrono::milliseconds(150));
  auto q = infer_request_of(spec);
  (*q.mutable_parameters())["timeout"].set_int64_param(100000);
  const answer late = rpc(&Stub::ModelInfer, q)(*stub, {});
  CHECK(late.code == static_cast<int>(grpc::StatusCode::UNAVAILABLE));
  CHECK(late.text == "Request timeout expired");
  // Answered at its deadline, while the first request (400 ms) still runs.
  CHECK(first.wait_for(std::chrono::seconds(0)) == std::future_status::timeout);
  CHECK(first.get().code == 0);
  // The same over HTTP gives 503 with the same text (tests/integration/transport.cpp).
}

TEST_CASE("parity: dynamic batching and its queue limit over gRPC", "[parity][grpc][batching]") {
  server_process s({"--allow-grpc", "true", "--grpc-port", "0"});
  auto stub = inference::GRPCInferenceService::NewStub(
      grpc::CreateChannel("127.0.0.1:" + std::to_string(s.grpc_port()), grpc::InsecureChannelCredentials()));
  // batch_simple over gRPC: concurrent requests share executions, each gets its own sums.
  auto add_sub = [&](int k) {
    inference::ModelInferRequest q;
    q.set_model_name("batch_simple");
    std::vector<std::int32_t> a(16), b(16, k);
    for (int i = 0; i < 16; ++i) a[static_cast<std::size_t>(i)] = k * 100 + i;
    for (const char* name : {"INPUT0", "INPUT1"}) {
      auto* in = q.add_inputs();
      in->set_name(name);
      in->set_datatype("INT32");
      in->add_shape(1);
      in->add_shape(16);
    }
    q.add_raw_input_contents(le_bytes(a));
    q.add_raw_input_contents(le_bytes(b));
    grpc::ClientContext ctx;
    inference::ModelInferResponse r;
    const grpc::Status st = stub->ModelInfer(&ctx, q, &r);
    bool right = st.ok() && r.raw_output_contents_size() == 2;
    for (int i = 0; right && i < 16; ++i) {
      std::int32_t sum = 0, diff = 0;
      std::memcpy(&sum, r.raw_output_contents(0).data() + 4 * i, 4);
      std::memcpy(&diff, r.raw_output_contents(1).data() + 4 * i, 4);
      right = sum == k * 100 + i + k && diff == k * 100 + i - k;
    }
    return right;
  };
  std::vector<std::future<bool>> calls;
  for (int k = 0; k < 12; ++k) calls.push_back(std::async(std::launch::async, add_sub, k));
  for (auto& c : calls) CHECK(c.get());
  {
    grpc::ClientContext ctx;
    inference::ModelStatisticsRequest q;
    q.set_name("batch_simple");
    inference::ModelStatisticsResponse r;
    REQUIRE(stub->ModelStatistics(&ctx, q, &r).ok());
    CHECK(r.model_stats(0).inference_count() == 12);
    CHECK(r.model_stats(0).execution_count() < 12);
  }
  // batch_priority: one instance busy for 300 ms, batches of 4, at most 6 queued per level.
  infer_spec spec;
  spec.model = "batch_priority";
  spec.inputs = {{"INPUT0", "INT32", {1, 1}}};
  auto first = std::async(std::launch::async, [&] { return infer_grpc(spec)(*stub, {}); });
  std::this_thread::sleep_for(std::chrono::milliseconds(100));
  std::vector<std::future<answer>> queued;
  for (int i = 0; i < 6; ++i) queued.push_back(std::async(std::launch::async, [&] { return infer_grpc(spec)(*stub, {}); }));
  std::this_thread::sleep_for(std::chrono::milliseconds(100));
  const answer full = infer_grpc(spec)(*stub, {});
  CHECK(full.code == static_cast<int>(grpc::StatusCode::UNAVAILABLE));
  CHECK(full.text == "Exceeds maximum queue size");
  CHECK(first.get().code == 0);
  for (auto& q : queued) CHECK(q.get().code == 0);
}
