// SPDX-License-Identifier: Apache-2.0
// Health, metadata, readiness, configuration and routing (v2-protocol §1.1-1.3, §3).
#include "common.hpp"

using namespace iwtest;

TEST_CASE("health endpoints answer with empty bodies", "[endpoints]") {
  for (auto target : {"/v2/health/live", "/v2/health/ready", "/v2/health/ready?test_1=1&test_2=2"}) {
    auto r = get(target);
    CHECK(r.status == 200);
    CHECK(r.body.empty());
    CHECK_FALSE(r.has("content-type"));
  }
  auto r = request(shared_server().http_port(), "GET", "/v2/health/live", {},
                   {{"test", "1"}, {"dummy", "2"}});
  CHECK(r.status == 200);
}

TEST_CASE("server metadata names triton and lists the implemented extensions", "[endpoints]") {
  auto r = get("/v2");
  REQUIRE(r.status == 200);
  CHECK(r.header("content-type") == "application/json");
  CHECK(r.body ==
        R"({"name":"triton","version":"0.1.0","extensions":["classification","sequence",)"
        R"x("model_repository","model_repository(unload_dependents)","schedule_policy","model_configuration",)x"
        R"("system_shared_memory","cuda_shared_memory","binary_tensor_data","parameters","statistics","trace","logging",)"
        R"("inferwire_cuda_vmm_shared_memory"]})");
}

TEST_CASE("routing: 404 and 405 replies", "[endpoints]") {
  auto r = get("/v2/health/live/");
  CHECK(r.status == 404);
  CHECK(r.body == R"({"error":"Not Found"})");
  CHECK(get("/v1/models").status == 404);
  CHECK(get("/v2/models/simple/versions/abc").status == 404);
  r = post("/v2/health/live", "");
  CHECK(r.status == 405);
  CHECK(r.body == R"({"error":"Method Not Allowed"})");
  CHECK(get("/v2/models/simple/infer").status == 405);
  CHECK(request(shared_server().http_port(), "DELETE", "/v2").status == 405);
}

TEST_CASE("model metadata", "[endpoints]") {
  auto r = get("/v2/models/simple");
  REQUIRE(r.status == 200);
  CHECK(r.body ==
        R"({"name":"simple","versions":["1"],"platform":"simple","inputs":[{"name":"INPUT0",)"
        R"("datatype":"INT32","shape":[-1,16]},{"name":"INPUT1","datatype":"INT32","shape":[-1,16]}],)"
        R"("outputs":[{"name":"OUTPUT0","datatype":"INT32","shape":[-1,16]},{"name":"OUTPUT1",)"
        R"("datatype":"INT32","shape":[-1,16]}]})");
  r = get("/v2/models/simple/versions/1?x=y");
  CHECK(r.status == 200);
  // Version policy `specific: [1, 3]` of a folder with 1, 2, 3.
  r = get("/v2/models/multi_version");
  CHECK(r.body.find(R"("versions":["1","3"])") != std::string::npos);
  CHECK(get("/v2/models/multi_version/versions/3").status == 200);
  r = get("/v2/models/multi_version/versions/2");
  CHECK(r.status == 404);
  CHECK(error_of(r) == "Request for unknown model: 'multi_version' version 2 is not found");
  // No batch dimension for max_batch_size 0.
  CHECK(get("/v2/models/identity_fp32").body.find(R"("shape":[-1]})") != std::string::npos);
}

TEST_CASE("model lookup errors", "[endpoints]") {
  auto r = get("/v2/models/foo");
  CHECK(r.status == 404);
  CHECK(error_of(r) == "Request for unknown model: 'foo' is not found");
  r = get("/v2/models/simple/versions/99");
  CHECK(r.status == 404);
  CHECK(error_of(r) == "Request for unknown model: 'simple' version 99 is not found");
  r = get("/v2/models/simple/versions/99999999999999999999");
  CHECK(r.status == 400);
  CHECK(error_of(r) ==
        "failed to get model version from specified version string '99999999999999999999' "
        "(details: stol), version should be an integral value > 0");
  r = get("/v2/models/foo/config");
  CHECK(r.status == 404);
  r = post("/v2/models/foo/infer", simple_json());
  CHECK(r.status == 404);
  CHECK(error_of(r) == "Request for unknown model: 'foo' is not found");
}

TEST_CASE("model ready uses released Triton semantics", "[endpoints]") {
  auto r = get("/v2/models/simple/ready");
  CHECK(r.status == 200);
  CHECK(r.body.empty());
  CHECK(get("/v2/models/simple/versions/1/ready").status == 200);
  for (auto t : {"/v2/models/foo/ready", "/v2/models/simple/versions/7/ready"}) {
    r = get(t);
    CHECK(r.status == 400);
    CHECK(r.body == R"({"error":"Model version not ready"})");
  }
}

TEST_CASE("model config is printed as Triton prints it", "[endpoints]") {
  auto r = get("/v2/models/simple/config");
  REQUIRE(r.status == 200);
  CHECK(r.header("content-type") == "application/json");
  CHECK(r.body ==
        R"({"name":"simple","platform":"","backend":"simple","runtime":"","version_policy":)"
        R"({"latest":{"num_versions":1}},"max_batch_size":8,"input":[{"name":"INPUT0",)"
        R"("data_type":"TYPE_INT32","format":"FORMAT_NONE","dims":[16],"is_shape_tensor":false,)"
        R"("allow_ragged_batch":false,"optional":false,"is_non_linear_format_io":false},)"
        R"({"name":"INPUT1","data_type":"TYPE_INT32","format":"FORMAT_NONE","dims":[16],)"
        R"("is_shape_tensor":false,"allow_ragged_batch":false,"optional":false,)"
        R"("is_non_linear_format_io":false}],"output":[{"name":"OUTPUT0","data_type":"TYPE_INT32",)"
        R"("dims":[16],"label_filename":"","is_shape_tensor":false,"is_non_linear_format_io":false},)"
        R"({"name":"OUTPUT1","data_type":"TYPE_INT32","dims":[16],"label_filename":"",)"
        R"("is_shape_tensor":false,"is_non_linear_format_io":false}],"batch_input":[],)"
        R"("batch_output":[],"optimization":{"priority":"PRIORITY_DEFAULT","input_pinned_memory":)"
        R"({"enable":true},"output_pinned_memory":{"enable":true},"gather_kernel_buffer_threshold":0,)"
        R"("eager_batching":false},"instance_group":[{"name":"simple_0","kind":"KIND_CPU",)"
        R"("count":1,"gpus":[],"secondary_devices":[],"profile":[],"passive":false,)"
        R"("host_policy":""}],"default_model_filename":"","cc_model_filenames":{},)"
        R"("metric_tags":{},"parameters":{},"model_warmup":[]})");
  // Sequence batching: 64-bit fields as numbers, the default strategy filled in.
  r = get("/v2/models/simple_dyna_sequence/config");
  CHECK(r.body.find(R"("sequence_batching":{"direct":{"max_queue_delay_microseconds":0,)"
                    R"("minimum_slot_utilization":0},"max_sequence_idle_microseconds":5000000,)") !=
        std::string::npos);
  CHECK(r.body.find(R"("data_type":"TYPE_UINT64")") != std::string::npos);
  r = get("/v2/models/multi_version/config");
  CHECK(r.body.find(R"("version_policy":{"specific":{"versions":[1,3]}})") != std::string::npos);
  r = get("/v2/models/identity_slow/config");
  CHECK(r.body.find(R"("parameters":{"execute_delay_ms":{"string_value":"1500"}})") !=
        std::string::npos);
}

TEST_CASE("shared-memory unregister without --allow-client-shm answers 501", "[endpoints]") {
  // Without --allow-client-shm, shared-memory unregister is refused as upstream does.
  auto r = post("/v2/systemsharedmemory/unregister", "");
  CHECK(r.status == 501);
  CHECK(error_of(r).find("--allow-client-shm=true") != std::string::npos);
}
