// SPDX-License-Identifier: Apache-2.0
// Launching inferwire-server as tritonserver is launched: Triton's flags (working, or accepted
// and reported as having no effect), their refusals, fail-fast start-up on a repository that
// cannot be read, and the start-up tables.
#include "common.hpp"

#include <filesystem>

using namespace iwtest;

namespace {


bool contains(const std::string& text, std::string_view what) { return text.find(what) != std::string::npos; }

}  // namespace

TEST_CASE("a tritonserver launch line with Triton's flags starts", "[cli][launch]") {
  // Flags as Triton's QA scripts and deployment guides pass them.
  server_process s({"--model-repository", bundled_models(),
                    "--backend-directory=/opt/tritonserver/backends",
                    "--backend-config=python,shm-default-byte-size=1048576",
                    "--backend-config=default-max-batch-size=0",
                    "--strict-model-config=false",
                    "--disable-auto-complete-config",
                    "--model-load-thread-count=2",
                    "--rate-limit=execution_count",
                    "--rate-limit-resource=R1:10:0",
                    "--pinned-memory-pool-byte-size=0",
                    "--cuda-memory-pool-byte-size=0:0",
                    "--cache-config=local,size=1048576",
                    "--trace-config=triton,file=/tmp/trace.json",
                    "--trace-config=level=OFF",
                    "--metrics-config=summary_latencies=true",
                    "--metrics-address=127.0.0.1",
                    "--metrics-interval-ms=1000",
                    "--allow-gpu-metrics=false",
                    "--allow-cpu-metrics=false",
                    "--min-supported-compute-capability=6.0",
                    "--model-load-retry-count=0",
                    "--grpc-address=127.0.0.1",
                    "--grpc-infer-response-compression-level=low",
                    "--grpc-keepalive-time=7200000",
                    "--grpc-keepalive-timeout=20000",
                    "--grpc-keepalive-permit-without-calls=true",
                    "--grpc-http2-max-pings-without-data=2",
                    "--reuse-http-port=true",
                    "--exit-timeout-secs=5",
                    "--allow-grpc", "true", "--grpc-port", "0"},
                   false);
  CHECK(request(s.http_port(), "GET", "/v2/health/ready").status == 200);
  CHECK(s.grpc_port() > 0);
  const std::string log = s.log();
  CHECK_FALSE(contains(log, "--backend-directory has no effect"));  // backend libraries load from it
  CHECK_FALSE(contains(log, "--backend-config has no effect"));
  CHECK(contains(log, "--rate-limit has no effect: there is no rate limiter"));
  CHECK(contains(log, "--cache-config has no effect"));
  CHECK(contains(log, "Started Metrics Service at 127.0.0.1:"));
  CHECK(contains(log, "Started GRPCInferenceService at 127.0.0.1:"));
  // The start-up tables.
  CHECK(contains(log, "| Model  "));
  CHECK(contains(log, "| simple "));
  CHECK(contains(log, "| READY  |"));
  CHECK(contains(log, "| Option "));
  CHECK(contains(log, "| strict_model_config      | 1 "));  // --disable-auto-complete-config
  CHECK(contains(log, "| model_control_mode       | MODE_NONE "));
}

TEST_CASE("Triton's flags are refused as Triton refuses them", "[cli][launch]") {
  struct refusal {
    std::vector<std::string> flags;
    std::string message;
  };
  const std::vector<refusal> table = {
      {{"--http-restricted-api=health,bogus:k=v"}, "unknown restricted api 'bogus'"},
      {{"--http-restricted-api=health:k=v", "--http-restricted-api=health:x=y"},
       "restricted api 'health' can not be specified in multiple config groups"},
      {{"--http-restricted-api=health"},
       "--http-restricted-api option format is '<api category>:<key>=<value>'. Got health"},
      {{"--http-restricted-api=inference:=v"},
       "--http-restricted-api option format is '<api category>:<key>=<value>'. Got inference:=v"},
      {{"--grpc-restricted-protocol=metadata:k"},
       "--grpc-restricted-protocol option format is '<protocol category>:<key>=<value>'. Got metadata:k"},
      {{"--grpc-restricted-protocol=inferences:k=v"}, "unknown restricted protocol 'inferences'"},
      {{"--rate-limit=sometimes"}, "--rate-limit option format is 'off|execution_count'. Got sometimes"},
      {{"--backend-config=python"}, "--backend-config option format is '<backend>,<setting>=<value>'. Got python"},
      {{"--cache-config=size=1"}, "--cache-config option format is '<cache name>,<setting>=<value>'. Got size=1"},
      {{"--cuda-memory-pool-byte-size=67108864"},
       "--cuda-memory-pool-byte-size option format is '<GPU device ID>:<pool byte size>'. Got 67108864"},
      {{"--pinned-memory-pool-byte-size=-5"}, "--pinned-memory-pool-byte-size option format is '<integer>'. Got -5"},
      {{"--min-supported-compute-capability=six"},
       "--min-supported-compute-capability option format is '<float>'. Got six"},
      {{"--grpc-infer-response-compression-level=max"},
       "invalid argument for --grpc-infer-response-compression-level, got: max"},
      {{"--grpc-use-ssl=true"}, "--grpc-use-ssl needs --grpc-server-cert and --grpc-server-key"},
      {{"--model-load-thread-count=0"}, "invalid value '0' for --model-load-thread-count"},
      {{"--grpc-keepalive-time=-1"}, "invalid value '-1' for --grpc-keepalive-time"},
      // Triton's text for every value that is not positive (its QA greps for it).
      {{"--http-max-input-size=-1024"}, "Error: --http-max-input-size must be greater than 0."},
      {{"--http-max-input-size=0"}, "Error: --http-max-input-size must be greater than 0."},
  };
  for (const auto& r : table) {
    CAPTURE(r.flags);
    std::vector<std::string> args = {"--model-repository", bundled_models(), "--http-port", "0", "--metrics-port", "0",
                                     "--allow-grpc=false"};
    args.insert(args.end(), r.flags.begin(), r.flags.end());
    std::string out;
    CHECK(run_server_once(args, out) == 2);
    CHECK(contains(out, r.message));
  }
}

TEST_CASE("a repository that cannot be read fails the start-up", "[cli][launch]") {
  std::string out;
  CHECK(run_server_once({"--model-repository", "/no/such/repository", "--http-port", "0", "--metrics-port", "0",
                         "--allow-grpc=false"},
                        out) == 1);
  CHECK(contains(out, "error: creating server: Internal - failed to stat file /no/such/repository"));
  // One good and one missing repository: still a failure.
  CHECK(run_server_once({"--model-repository", bundled_models(), "--model-repository", "/no/such/repository",
                         "--http-port", "0", "--metrics-port", "0", "--allow-grpc=false"},
                        out) == 1);
  // A file where a folder should be.
  CHECK(run_server_once({"--model-repository", bundled_models() + "/simple/config.pbtxt", "--http-port", "0",
                         "--metrics-port", "0", "--allow-grpc=false"},
                        out) == 1);
  CHECK(contains(out, "not a directory"));

  // --exit-on-error=false: the server answers, with metadata, but is neither live nor ready;
  // the repository endpoints say the server is not ready.
  server_process s({"--model-repository", "/no/such/repository", "--exit-on-error=false"}, false);
  CHECK(request(s.http_port(), "GET", "/v2/health/live").status == 400);
  CHECK(request(s.http_port(), "GET", "/v2/health/ready").status == 400);
  CHECK(request(s.http_port(), "GET", "/v2").status == 200);
  auto r = request(s.http_port(), "POST", "/v2/repository/index", "");
  CHECK(r.status == 503);
  CHECK(error_of(r) == "Server not ready");
  CHECK(contains(s.log(), "failed to stat file /no/such/repository"));
}

TEST_CASE("restricted APIs: each category over HTTP needs its header", "[launch][restricted]") {
  server_process s({"--model-repository", bundled_models(),
                    "--http-restricted-api=inference,model-config:infer-key=secret",
                    "--http-restricted-api=model-repository,shared-memory,statistics,trace,logging:admin-key=admin"},
                   false);
  struct probe {
    std::string method, target, body;
    std::string key;  ///< the header it needs ("" = open)
  };
  const std::vector<probe> probes = {
      {"GET", "/v2/health/live", "", ""},
      {"GET", "/v2/health/ready", "", ""},
      {"GET", "/v2", "", ""},
      {"GET", "/v2/models/simple", "", ""},
      {"GET", "/v2/models/simple/ready", "", ""},
      {"POST", "/v2/models/simple/infer", simple_json(), "infer-key"},
      {"GET", "/v2/models/simple/config", "", "infer-key"},
      {"GET", "/v2/models/simple/stats", "", "admin-key"},
      {"GET", "/v2/models/stats", "", "admin-key"},
      {"POST", "/v2/repository/index", "", "admin-key"},
      {"GET", "/v2/systemsharedmemory/status", "", "admin-key"},
      {"GET", "/v2/cudasharedmemory/status", "", "admin-key"},
      {"GET", "/v2/trace/setting", "", "admin-key"},
      {"GET", "/v2/models/simple/trace/setting", "", "admin-key"},
      {"GET", "/v2/logging", "", "admin-key"},
  };
  for (const auto& p : probes) {
    CAPTURE(p.method, p.target);
    auto open = request(s.http_port(), p.method, p.target, p.body);
    if (p.key.empty()) {
      CHECK(open.status == 200);
      continue;
    }
    CHECK(open.status == 403);
    CHECK(error_of(open) == "This API is restricted, expecting header '" + p.key + "'");
    const std::string value = p.key == "infer-key" ? "secret" : "admin";
    auto wrong = request(s.http_port(), p.method, p.target, p.body, {{p.key, value + "x"}});
    CHECK(wrong.status == 403);
    auto right = request(s.http_port(), p.method, p.target, p.body, {{p.key, value}});
    CHECK(right.status == 200);
  }
  // The check comes before the method check and before the body is parsed.
  auto r = request(s.http_port(), "GET", "/v2/models/simple/infer", "");
  CHECK(r.status == 403);
  r = request(s.http_port(), "POST", "/v2/models/simple/infer", "{not json");
  CHECK(r.status == 403);
}

TEST_CASE("model loading: --model-load-thread-count loads models in parallel, ensembles after their steps", "[cli][launch]") {
  for (const char* threads : {"1", "8"}) {
    CAPTURE(threads);
    server_process s({"--model-repository", bundled_models(), "--model-repository",
                      INFERWIRE_SOURCE_DIR "/reference_server/models_ensemble", "--model-load-thread-count", threads},
                     false);
    // Strict readiness: every model, the ensemble included, is READY.
    CHECK(request(s.http_port(), "GET", "/v2/health/ready").status == 200);
    auto index = request(s.http_port(), "POST", "/v2/repository/index", "");
    REQUIRE(index.status == 200);
    CHECK(index.body.find("UNAVAILABLE") == std::string::npos);
    CHECK(index.body.find(R"("name":"simple_ensemble","version":"1","state":"READY")") != std::string::npos);
    CHECK(request(s.http_port(), "GET", "/v2/models/simple_ensemble/ready").status == 200);
  }
}

TEST_CASE("each tritonserver flag, as Triton's QA scripts pass it, starts the server", "[cli][launch]") {
  const std::vector<std::vector<std::string>> lines = {
      {"--strict-model-config=false"},
      {"--strict-model-config=true"},
      {"--disable-auto-complete-config"},
      {"--backend-directory=/opt/tritonserver/backends"},
      {"--backend-config=tensorflow,version=2"},
      // tritonserver's deprecated trace flags, as its client tests pass them.
      {"--trace-file=/tmp/inferwire-deprecated-trace.json", "--trace-level=TIMESTAMPS", "--trace-rate=1",
       "--trace-count=-1", "--trace-log-frequency=0"},
      {"--backend-config=python,shm-region-prefix-name=prefix0_"},
      {"--repoagent-directory=/opt/tritonserver/repoagents"},
      {"--model-load-thread-count=1"},
      {"--model-load-retry-count=2"},
      {"--model-namespacing=false"},
      {"--enable-peer-access=false"},
      {"--rate-limit=off"},
      {"--rate-limit=execution_count", "--rate-limit-resource=resource1:4", "--rate-limit-resource=resource2:2:0"},
      {"--pinned-memory-pool-byte-size=268435456"},
      {"--cuda-memory-pool-byte-size=0:67108864"},
      {"--cuda-virtual-address-size=0:1073741824"},
      {"--min-supported-compute-capability=7.0"},
      {"--buffer-manager-thread-count=2"},
      {"--host-policy=cpu_policy,numa-node=0"},
      {"--model-load-gpu-limit=0:0.5"},
      {"--cache-config=local,size=1048576"},
      {"--cache-directory=/opt/tritonserver/caches"},
      {"--response-cache-byte-size=0"},
      {"--trace-config=triton,file=/tmp/iw-launch-trace.json", "--trace-config=level=OFF"},
      {"--trace-config=mode=triton", "--trace-config=rate=100", "--trace-config=count=-1",
       "--trace-config=triton,log-frequency=50"},
      {"--trace-config=opentelemetry,url=localhost:4318/v1/traces"},
      {"--metrics-config=summary_latencies=true"},
      {"--metrics-config=histogram_latencies=true"},
      {"--metrics-interval-ms=500"},
      {"--allow-gpu-metrics=false"},
      {"--allow-cpu-metrics=false"},
      {"--metrics-address=127.0.0.1"},
      {"--http-header-forward-pattern=(nv|NV)-.*"},
      {"--http-restricted-api=model-repository:admin-key=admin-value"},
      {"--reuse-http-port=true"},
      {"--allow-grpc=true", "--grpc-port=0", "--grpc-address=127.0.0.1"},
      {"--allow-grpc=true", "--grpc-port=0", "--reuse-grpc-port=true"},
      {"--allow-grpc=true", "--grpc-port=0", "--grpc-infer-response-compression-level=high"},
      {"--allow-grpc=true", "--grpc-port=0", "--grpc-keepalive-time=10000", "--grpc-keepalive-timeout=5000",
       "--grpc-keepalive-permit-without-calls=true", "--grpc-http2-max-pings-without-data=0",
       "--grpc-http2-min-recv-ping-interval-without-data=5000", "--grpc-http2-max-ping-strikes=0"},
      {"--allow-grpc=true", "--grpc-port=0", "--grpc-max-connection-age=60000",
       "--grpc-max-connection-age-grace=5000"},
      {"--allow-grpc=true", "--grpc-port=0", "--grpc-restricted-protocol=shared-memory,model-repository:admin-key=v"},
      {"--allow-grpc=true", "--grpc-port=0", "--grpc-header-forward-pattern=(nv|NV)-.*"},
      {"--allow-grpc=true", "--grpc-port=0", "--grpc-infer-allocation-pool-size=8"},
      {"--allow-sagemaker=false"},
      {"--allow-vertex-ai=false"},
      {"--log-format=ISO8601"},
      {"--log-verbose=1"},
      {"--exit-timeout-secs=10"},
      {"--strict-readiness=false"},
  };
  for (const auto& flags : lines) {
    CAPTURE(flags);
    std::vector<std::string> args = {"--model-repository", bundled_models()};
    args.insert(args.end(), flags.begin(), flags.end());
    server_process s(args, false);
    CHECK(request(s.http_port(), "GET", "/v2/health/live").status == 200);
    CHECK(s.stop() == 0);
  }
}
