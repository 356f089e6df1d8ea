// SPDX-License-Identifier: Apache-2.0
// Triton backend libraries in inferwire-server: the test backends of tests/backends (built
// against include/inferwire/triton/backend_api.h only) loaded from a --backend-directory and
// driven over HTTP and gRPC from one table; batching as a list of requests, decoupled
// responses from another thread, cancellation, statistics, load failures and shutdown.
#include "harness.hpp"

#include <inferwire/core/error.hpp>

#include <grpc_service.grpc.pb.h>
#include <grpcpp/grpcpp.h>

#include <catch2/catch.hpp>

#include <boost/json/parse.hpp>
#include <boost/json/serialize.hpp>

#include <chrono>
#include <cstring>
#include <future>
#include <map>
#include <thread>

using namespace iwtest;
using inferwire::errc;
using Stub = inference::GRPCInferenceService::Stub;

namespace {

std::string models() { return std::string(INFERWIRE_SOURCE_DIR) + "/tests/backends/models"; }

std::vector<std::string> server_flags(std::vector<std::string> extra) {
  std::vector<std::string> f = {"--allow-grpc", "true", "--grpc-port", "0", "--model-control-mode", "explicit",
                                "--backend-directory", INFERWIRE_TEST_BACKEND_DIR,
                                "--backend-config=iwtest,answer=42", "--model-repository", models()};
  for (const char* m : {"iw_identity", "iw_bytes", "iw_batch", "iw_late", "iw_error", "iw_fail", "iw_twice",
                        "iw_silent", "iw_repeat", "iw_wait_cancel", "iw_bls"})
    f.insert(f.end(), {"--load-model", m});
  f.insert(f.end(), extra.begin(), extra.end());
  return f;
}

server_process& backend_server() {
  static server_process s(server_flags({}), false);
  return s;
}

std::unique_ptr<Stub> stub_of(server_process& s) {
  return inference::GRPCInferenceService::NewStub(
      grpc::CreateChannel("127.0.0.1:" + std::to_string(s.grpc_port()), grpc::InsecureChannelCredentials()));
}

/// One inference as the table gives it: INPUT0 of a type with its elements as text.
struct infer_case {
  std::string model;
  std::string datatype = "INT32";
  std::vector<std::string> elements{"1", "2", "3"};
  std::vector<std::string> outputs{"OUTPUT0"};
  std::vector<std::pair<std::string, std::string>> string_parameters = {};
  std::vector<std::pair<std::string, std::int64_t>> int_parameters = {};
};

/// What a transport answered: an error (its code as inferwire's errc) or each output's
/// elements as text.
struct outcome {
  errc code{};
  std::string error;
  std::map<std::string, std::vector<std::string>> outputs;
};

outcome infer_http(server_process& s, const infer_case& c) {
  boost::json::object body;
  boost::json::array data;
  for (const auto& e : c.elements)
    if (c.datatype == "BYTES") data.emplace_back(e);
    else data.emplace_back(std::stoll(e));
  body["inputs"] = boost::json::array{boost::json::object{
      {"name", "INPUT0"}, {"datatype", c.datatype}, {"shape", {static_cast<std::int64_t>(c.elements.size())}}, {"data", data}}};
  boost::json::array outs;
  for (const auto& o : c.outputs) outs.push_back(boost::json::object{{"name", o}});
  body["outputs"] = outs;
  boost::json::object params;
  for (const auto& [k, v] : c.string_parameters) params[k] = v;
  for (const auto& [k, v] : c.int_parameters) params[k] = v;
  if (!params.empty()) body["parameters"] = params;
  const reply r = request(s.http_port(), "POST", "/v2/models/" + c.model + "/infer", boost::json::serialize(body));
  outcome got;
  if (r.status != 200) {
    got.error = error_of(r);
    for (errc e : {errc::internal, errc::not_found, errc::unavailable, errc::unsupported, errc::invalid_arg})
      if (inferwire::http_status(e) == static_cast<int>(r.status)) {
        got.code = e;
        break;
      }
    return got;
  }
  const auto v = boost::json::parse(r.body);
  for (const auto& o : v.at("outputs").as_array()) {
    auto& list = got.outputs[std::string(o.at("name").as_string())];
    for (const auto& e : o.at("data").as_array())
      list.push_back(e.is_string() ? std::string(e.as_string()) : std::to_string(e.to_number<std::int64_t>()));
  }
  return got;
}

outcome infer_grpc(server_process& s, const infer_case& c) {
  inference::ModelInferRequest q;
  q.set_model_name(c.model);
  auto* in = q.add_inputs();
  in->set_name("INPUT0");
  in->set_datatype(c.datatype);
  in->add_shape(static_cast<std::int64_t>(c.elements.size()));
  std::string raw;
  for (const auto& e : c.elements) {
    if (c.datatype == "BYTES") {
      const auto len = static_cast<std::uint32_t>(e.size());
      raw.append(reinterpret_cast<const char*>(&len), 4).append(e);
    } else {
      const auto v = static_cast<std::int32_t>(std::stol(e));
      raw.append(reinterpret_cast<const char*>(&v), 4);
    }
  }
  q.add_raw_input_contents(raw);
  for (const auto& o : c.outputs) q.add_outputs()->set_name(o);
  for (const auto& [k, v] : c.string_parameters) (*q.mutable_parameters())[k].set_string_param(v);
  for (const auto& [k, v] : c.int_parameters) (*q.mutable_parameters())[k].set_int64_param(v);
  grpc::ClientContext ctx;
  inference::ModelInferResponse resp;
  const grpc::Status st = stub_of(s)->ModelInfer(&ctx, q, &resp);
  outcome got;
  if (!st.ok()) {
    got.error = st.error_message();
    for (errc e : {errc::internal, errc::not_found, errc::unavailable, errc::unsupported, errc::invalid_arg})
      if (static_cast<int>(inferwire::grpc_code(e)) == static_cast<int>(st.error_code())) {
        got.code = e;
        break;
      }
    return got;
  }
  for (int i = 0; i < resp.outputs_size(); ++i) {
    const auto& o = resp.outputs(i);
    const std::string& bytes = resp.raw_output_contents(i);
    auto& list = got.outputs[o.name()];
    for (std::size_t at = 0; at < bytes.size();) {
      if (o.datatype() == "BYTES") {
        std::uint32_t len = 0;
        std::memcpy(&len, bytes.data() + at, 4);
        list.push_back(bytes.substr(at + 4, len));
        at += 4 + len;
      } else {
        std::int32_t v = 0;
        std::memcpy(&v, bytes.data() + at, 4);
        list.push_back(std::to_string(v));
        at += 4;
      }
    }
  }
  return got;
}

struct row {
  const char* what;
  infer_case request;
  outcome expected;
};

}  // namespace

TEST_CASE("backend API: test backends over HTTP and gRPC from one table", "[backend_api][grpc]") {
  server_process& s = backend_server();
  const std::vector<row> rows = {
      {"identity on INT32", {"iw_identity"}, {{}, {}, {{"OUTPUT0", {"1", "2", "3"}}}}},
      {"identity on BYTES", {"iw_bytes", "BYTES", {"ab", "", "cde"}}, {{}, {}, {{"OUTPUT0", {"ab", "", "cde"}}}}},
      {"one request in its execution", {"iw_identity", "INT32", {"7"}, {"OUTPUT0", "COUNT"}},
       {{}, {}, {{"OUTPUT0", {"7"}}, {"COUNT", {"1"}}}}},
      {"request parameters reach the backend",
       {"iw_identity", "INT32", {"1"}, {"PARAMS"}, {{"color", "blue"}}, {{"n", 7}}},
       {{}, {}, {{"PARAMS", {"color=blue;n=7;"}}}}},
      {"answered and released from another thread after Execute returned", {"iw_late"},
       {{}, {}, {{"OUTPUT0", {"1", "2", "3"}}}}},
      {"an error response", {"iw_error"}, {errc::invalid_arg, "iwtest: the model failed", {}}},
      {"Execute fails", {"iw_fail"}, {errc::unavailable, "iwtest: execute failed", {}}},
      {"a second response is refused, the first one stands", {"iw_twice"}, {{}, {}, {{"OUTPUT0", {"1", "2", "3"}}}}},
      {"released without a response", {"iw_silent"},
       {errc::internal, "the backend released the request without sending a response", {}}},
      {"a backend that runs another model in the server (BLS)", {"iw_bls", "INT32", {"5", "6"}},
       {{}, {}, {{"OUTPUT0", {"5", "6"}}}}},
      {"BLS to a model that answers from its own thread", {"iw_bls", "INT32", {"8"}, {"OUTPUT0"}, {{"target", "iw_late"}}},
       {{}, {}, {{"OUTPUT0", {"8"}}}}},
      {"BLS to a model that is not there", {"iw_bls", "INT32", {"1"}, {"OUTPUT0"}, {{"target", "nowhere"}}},
       {errc::unavailable, "iwtest: model 'nowhere' is not ready", {}}},
      {"BLS to a model that answers an error", {"iw_bls", "INT32", {"1"}, {"OUTPUT0"}, {{"target", "iw_error"}}},
       {errc::invalid_arg, "iwtest: the model failed", {}}},
  };
  for (const auto& r : rows) {
    for (const bool grpc : {false, true}) {
      INFO(r.what << (grpc ? " over gRPC" : " over HTTP"));
      const outcome got = grpc ? infer_grpc(s, r.request) : infer_http(s, r.request);
      CHECK(got.code == r.expected.code);
      CHECK(got.error == r.expected.error);
      CHECK(got.outputs == r.expected.outputs);
    }
  }
  CHECK(s.log().find("iwtest: second response refused as it should be") != std::string::npos);
  CHECK(s.log().find("a second response was accepted") == std::string::npos);
}

TEST_CASE("backend API: the backend gets its configuration with --backend-config settings", "[backend_api]") {
  const std::string log = backend_server().log();
  CHECK(log.find("iwtest: backend configuration {\"cmdline\":{") != std::string::npos);
  CHECK(log.find("\"answer\":\"42\"") != std::string::npos);
  CHECK(log.find(std::string("\"backend-directory\":\"") + INFERWIRE_TEST_BACKEND_DIR + "\"") != std::string::npos);
}

TEST_CASE("backend API: the dynamic batcher hands the backend a list of requests", "[backend_api][grpc]") {
  server_process& s = backend_server();
  for (const bool grpc : {false, true}) {
    INFO((grpc ? "gRPC" : "HTTP"));
    // Four requests of one row each reach the preferred batch size: one execution of four.
    std::vector<std::future<outcome>> calls;
    for (int i = 0; i < 4; ++i)
      calls.push_back(std::async(std::launch::async, [&s, grpc, i] {
        // A batched model's inputs carry the batch dimension: [1, 1].
        inference::ModelInferRequest q;
        outcome got;
        if (!grpc) {
          const std::string body = R"({"inputs":[{"name":"INPUT0","datatype":"INT32","shape":[1,1],"data":[)" +
                                   std::to_string(i) + R"(]}],"outputs":[{"name":"OUTPUT0"},{"name":"COUNT"}]})";
          const reply r = request(s.http_port(), "POST", "/v2/models/iw_batch/infer", body);
          if (r.status != 200) return outcome{errc::internal, r.body, {}};
          const auto v = boost::json::parse(r.body);
          for (const auto& o : v.at("outputs").as_array())
            for (const auto& e : o.at("data").as_array())
              got.outputs[std::string(o.at("name").as_string())].push_back(std::to_string(e.to_number<std::int64_t>()));
          return got;
        }
        q.set_model_name("iw_batch");
        auto* in = q.add_inputs();
        in->set_name("INPUT0");
        in->set_datatype("INT32");
        in->add_shape(1);
        in->add_shape(1);
        const std::int32_t v = i;
        q.add_raw_input_contents(std::string(reinterpret_cast<const char*>(&v), 4));
        q.add_outputs()->set_name("OUTPUT0");
        q.add_outputs()->set_name("COUNT");
        grpc::ClientContext ctx;
        inference::ModelInferResponse resp;
        const auto st = stub_of(s)->ModelInfer(&ctx, q, &resp);
        if (!st.ok()) return outcome{errc::internal, st.error_message(), {}};
        for (int k = 0; k < resp.outputs_size(); ++k) {
          std::int32_t x = 0;
          std::memcpy(&x, resp.raw_output_contents(k).data(), 4);
          got.outputs[resp.outputs(k).name()].push_back(std::to_string(x));
        }
        return got;
      }));
    for (int i = 0; i < 4; ++i) {
      outcome got = calls[static_cast<std::size_t>(i)].get();
      CHECK(got.error.empty());
      CHECK(got.outputs["OUTPUT0"] == std::vector<std::string>{std::to_string(i)});
      CHECK(got.outputs["COUNT"] == std::vector<std::string>{"4"});
    }
  }
}

TEST_CASE("backend API: decoupled responses sent from the backend's thread", "[backend_api][grpc]") {
  server_process& s = backend_server();
  // HTTP: generate_stream, one event per response.
  const reply r = request(s.http_port(), "POST", "/v2/models/iw_repeat/generate_stream", R"({"IN":[4,5,6]})");
  REQUIRE(r.status == 200);
  CHECK(r.body.find(R"("OUT":4})") != std::string::npos);
  CHECK(r.body.find(R"("OUT":5})") != std::string::npos);
  CHECK(r.body.find(R"("OUT":6})") != std::string::npos);
  CHECK(r.body.find("error") == std::string::npos);
  // gRPC: ModelStreamInfer, the three responses and no error.
  grpc::ClientContext ctx;
  auto stream = stub_of(s)->ModelStreamInfer(&ctx);
  inference::ModelInferRequest q;
  q.set_model_name("iw_repeat");
  q.set_id("r1");
  auto* in = q.add_inputs();
  in->set_name("IN");
  in->set_datatype("INT32");
  in->add_shape(3);
  const std::int32_t values[] = {4, 5, 6};
  q.add_raw_input_contents(std::string(reinterpret_cast<const char*>(values), sizeof values));
  REQUIRE(stream->Write(q));
  stream->WritesDone();
  std::vector<std::int32_t> got;
  inference::ModelStreamInferResponse resp;
  while (stream->Read(&resp)) {
    CHECK(resp.error_message().empty());
    if (resp.infer_response().raw_output_contents_size() == 1) {
      std::int32_t v = 0;
      std::memcpy(&v, resp.infer_response().raw_output_contents(0).data(), 4);
      got.push_back(v);
    }
  }
  CHECK(stream->Finish().ok());
  CHECK(got == std::vector<std::int32_t>{4, 5, 6});
}

TEST_CASE("backend API: a client that goes away cancels the backend's request", "[backend_api][grpc]") {
  server_process& s = backend_server();
  auto failures = [&] {
    const auto v = boost::json::parse(request(s.http_port(), "GET", "/v2/models/iw_wait_cancel/stats").body);
    return v.at("model_stats").at(0).at("inference_stats").at("fail").at("count").to_number<std::int64_t>();
  };
  const auto before = failures();
  {
    grpc::ClientContext ctx;
    auto stream = stub_of(s)->ModelStreamInfer(&ctx);
    inference::ModelInferRequest q;
    q.set_model_name("iw_wait_cancel");
    auto* in = q.add_inputs();
    in->set_name("IN");
    in->set_datatype("INT32");
    in->add_shape(1);
    q.add_raw_input_contents(std::string(4, '\0'));
    REQUIRE(stream->Write(q));
    std::this_thread::sleep_for(std::chrono::milliseconds(200));
    ctx.TryCancel();
  }
  // The backend waits up to 20 s for the cancellation; it sees it at once.
  const auto until = std::chrono::steady_clock::now() + std::chrono::seconds(8);
  while (failures() == before && std::chrono::steady_clock::now() < until)
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  CHECK(failures() == before + 1);
}

TEST_CASE("backend API: statistics of library backends", "[backend_api]") {
  server_process& s = backend_server();
  for (int i = 0; i < 3; ++i) REQUIRE(infer_http(s, {"iw_identity"}).error.empty());
  const auto v = boost::json::parse(request(s.http_port(), "GET", "/v2/models/iw_identity/stats").body);
  const auto& stats = v.at("model_stats").at(0);
  CHECK(stats.at("inference_stats").at("success").at("count").to_number<std::int64_t>() >= 3);
  CHECK(stats.at("execution_count").to_number<std::int64_t>() >= 3);
  // The backend reports compute_start - exec_start = 1 us per request (iwtest's report()).
  CHECK(stats.at("inference_stats").at("compute_input").at("ns").to_number<std::int64_t>() >= 3000);
}

TEST_CASE("backend API: a library that is missing, refused or incomplete leaves its model UNAVAILABLE", "[backend_api][grpc]") {
  server_process& s = backend_server();
  struct failure {
    const char* model;
    std::string reason;
  };
  const std::vector<failure> failures = {
      {"iw_missing", "unable to find backend library for backend 'no_such_backend', try specifying runtime on the model configuration."},
      {"iw_newer", "triton backend API version does not support this backend"},
      {"iw_noexec", "unable to find required entrypoint 'TRITONBACKEND_ModelInstanceExecute' in shared library: "},
      {"iw_undefined", "unable to load shared library: "},
  };
  for (const auto& f : failures) {
    INFO(f.model);
    const reply r = request(s.http_port(), "POST", std::string("/v2/repository/models/") + f.model + "/load", "");
    CHECK(r.status == 400);
    CHECK(error_of(r).find(f.reason) != std::string::npos);
    grpc::ClientContext ctx;
    inference::RepositoryModelLoadRequest q;
    q.set_model_name(f.model);
    inference::RepositoryModelLoadResponse resp;
    const auto st = stub_of(s)->RepositoryModelLoad(&ctx, q, &resp);
    CHECK(st.error_code() == grpc::StatusCode::INVALID_ARGUMENT);
    CHECK(st.error_message().find(f.reason) != std::string::npos);
  }
  const reply index = request(s.http_port(), "POST", "/v2/repository/index", "{}");
  CHECK(index.body.find("iwtest_function_no_library_defines") != std::string::npos);  // dlerror's text
  // The server still serves the other models.
  CHECK(infer_http(s, {"iw_identity"}).outputs["OUTPUT0"] == std::vector<std::string>{"1", "2", "3"});
}

TEST_CASE("backend API: a backend that never answers does not hold shutdown past --exit-timeout-secs", "[backend_api]") {
  server_process s(server_flags({"--load-model", "iw_hang", "--exit-timeout-secs", "2"}), false);
  // The request gets an error, or its connection closes with the server: never an answer.
  auto pending = std::async(std::launch::async, [&] {
    try {
      return infer_http(s, {"iw_hang"});
    } catch (const std::exception& e) {
      return outcome{errc::unavailable, e.what(), {}};
    }
  });
  std::this_thread::sleep_for(std::chrono::milliseconds(300));
  const auto start = std::chrono::steady_clock::now();
  CHECK(s.stop() == 0);
  CHECK(std::chrono::steady_clock::now() - start < std::chrono::seconds(10));
  const outcome got = pending.get();
  CHECK(got.code == errc::unavailable);
  CHECK(got.outputs.empty());
}
