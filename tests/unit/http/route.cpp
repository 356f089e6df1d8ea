// SPDX-License-Identifier: Apache-2.0
#include <inferwire/http/route.hpp>

#include <catch2/catch.hpp>

using namespace inferwire::http;

TEST_CASE("route: fixed endpoints and query strings", "[http][route]") {
  CHECK(match_route("/v2").kind == endpoint::server_metadata);
  CHECK(match_route("/v2?x=1").kind == endpoint::server_metadata);
  CHECK(match_route("/v2/health/live").kind == endpoint::health_live);
  CHECK(match_route("/v2/health/ready?test_1=1&test_2=2").kind == endpoint::health_ready);
  CHECK(match_route("/v2/health/ready/").kind == endpoint::not_found);
  CHECK(match_route("/v2/health").kind == endpoint::not_found);
  CHECK(match_route("/v2/logging").kind == endpoint::logging);
  CHECK(match_route("/v2/trace/setting").kind == endpoint::trace);
  CHECK(match_route("/v2/models/stats").kind == endpoint::all_stats);
  CHECK(match_route("/v3").kind == endpoint::not_found);
  CHECK(match_route("").kind == endpoint::not_found);
}

TEST_CASE("route: model routes capture name and version", "[http][route]") {
  auto r = match_route("/v2/models/simple/versions/12/infer");
  CHECK(r.kind == endpoint::model_infer);
  CHECK(r.model == "simple");
  CHECK(r.version == "12");
  r = match_route("/v2/models/simple");
  CHECK(r.kind == endpoint::model_metadata);
  CHECK(r.version.empty());
  CHECK(match_route("/v2/models/simple/ready").kind == endpoint::model_ready);
  CHECK(match_route("/v2/models/simple/config").kind == endpoint::model_config);
  CHECK(match_route("/v2/models/simple/stats").kind == endpoint::model_stats);
  CHECK(match_route("/v2/models/simple/trace/setting").kind == endpoint::model_trace);
  CHECK(match_route("/v2/models/simple/generate_stream").kind == endpoint::model_generate_stream);
  // Non-numeric versions, unknown actions and trailing slashes do not match.
  CHECK(match_route("/v2/models/simple/versions/abc").kind == endpoint::not_found);
  CHECK(match_route("/v2/models/simple/versions/-1/infer").kind == endpoint::not_found);
  CHECK(match_route("/v2/models/simple/infer/").kind == endpoint::not_found);
  CHECK(match_route("/v2/models/simple/foo").kind == endpoint::not_found);
  CHECK(match_route("/v2/models/").kind == endpoint::not_found);
  // No percent-decoding.
  CHECK(match_route("/v2/models/a%2Fb").model == "a%2Fb");
}

TEST_CASE("route: shared memory and repository", "[http][route]") {
  auto r = match_route("/v2/systemsharedmemory/region/in0/register");
  CHECK(r.kind == endpoint::system_shm);
  CHECK(r.region == "in0");
  CHECK(r.action == "register");
  r = match_route("/v2/cudasharedmemory/unregister");
  CHECK(r.kind == endpoint::cuda_shm);
  CHECK(r.region.empty());
  CHECK(match_route("/v2/systemsharedmemory/region/x/delete").kind == endpoint::not_found);
  CHECK(match_route("/v2/repository/index").kind == endpoint::repository_index);
  r = match_route("/v2/repository/myrepo/index");
  CHECK(r.kind == endpoint::repository_index);
  CHECK(r.repository == "myrepo");
  r = match_route("/v2/repository/models/simple/load");
  CHECK(r.kind == endpoint::repository_load);
  CHECK(r.model == "simple");
  CHECK(r.repository.empty());
  r = match_route("/v2/repository/rr/models/simple/unload");
  CHECK(r.kind == endpoint::repository_unload);
  CHECK(r.repository == "rr");
  CHECK(match_route("/v2/repository/models/simple").kind == endpoint::not_found);
}
