// SPDX-License-Identifier: Apache-2.0
// The gRPC frontend against the gRPC client (and, where a field the client does not expose
// matters, the generated stub): every RPC, Triton's errors and texts, typed and raw contents,
// compression, deadlines, streams with interleaved sequences and in-stream errors, decoupled
// repeat_int32, cancellation, repository control and shared memory.
#include <inferwire/grpc/client.hpp>
#include <inferwire/grpc/convert.hpp>
#include <inferwire/shm/system_region.hpp>
#include <inferwire/shm/vmm_channel.hpp>

#include "harness.hpp"
#include "raw_stream.hpp"

#include <catch2/catch.hpp>

#include "grpc_service.grpc.pb.h"

#include <boost/asio/as_tuple.hpp>
#include <boost/asio/bind_cancellation_slot.hpp>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/deferred.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/bind_executor.hpp>
#include <boost/asio/system_executor.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <boost/asio/use_future.hpp>
#include <grpcpp/grpcpp.h>

#include <atomic>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>
#include <future>
#include <set>
#include <numeric>
#include <thread>

#include <pthread.h>

using namespace iwtest;
namespace ig = inferwire::grpc;
namespace v2 = inferwire::v2;
using inferwire::data_type;
using Catch::Matchers::Contains;
using Catch::Matchers::StartsWith;

namespace {


server_process& test_server() {
  static server_process s({"--allow-grpc", "true", "--grpc-port", "0", "--allow-client-shm=true", "--model-repository",
                           source_path("reference_server/models_decoupled")});
  return s;
}

std::string target_of(const server_process& s) { return "127.0.0.1:" + std::to_string(s.grpc_port()); }

ig::client client_of(const server_process& s) { return ig::client(target_of(s)); }

ig::client& shared_client() {
  static ig::client c = client_of(test_server());
  return c;
}

// The request with its inputs as typed contents (json encoding) when `typed`.
v2::infer_request typed_if(v2::infer_request r, bool typed) {
  if (typed)
    for (auto& i : r.inputs) i.encoding = v2::tensor_encoding::json;
  return r;
}

std::vector<std::int32_t> iota16(int start = 0) {
  std::vector<std::int32_t> v(16);
  std::iota(v.begin(), v.end(), start);
  return v;
}

// An input that owns a copy of `values` (make_input only views them).
template <class T>
v2::infer_input owned_input(std::string name, const std::vector<T>& values, inferwire::shape_t shape) {
  v2::infer_input i = v2::make_input(std::move(name), std::span<const T>(values), std::move(shape));
  i.data = v2::tensor_data::own(std::string(i.data.str()));
  return i;
}

v2::infer_request simple_request(const std::vector<std::int32_t>& a, const std::vector<std::int32_t>& b) {
  v2::infer_request r;
  r.inputs.push_back(owned_input("INPUT0", a, {1, 16}));
  r.inputs.push_back(owned_input("INPUT1", b, {1, 16}));
  return r;
}

std::vector<std::int32_t> ints(const v2::infer_output& o) {
  auto v = o.as<std::int32_t>();
  return {v.begin(), v.end()};
}

template <class F>
std::string error_text(F f, int expected_code) {
  try {
    f();
  } catch (const ig::rpc_error& e) {
    CHECK(e.grpc_code() == expected_code);
    return e.what();
  }
  FAIL("the call succeeded");
  return {};
}

// The raw stub, for fields the client does not expose.
std::unique_ptr<inference::GRPCInferenceService::Stub> raw_stub(const server_process& s) {
  return inference::GRPCInferenceService::NewStub(
      grpc::CreateChannel("127.0.0.1:" + std::to_string(s.grpc_port()), grpc::InsecureChannelCredentials()));
}

constexpr int INVALID_ARGUMENT = 3, DEADLINE_EXCEEDED = 4, NOT_FOUND = 5, INTERNAL = 13, UNIMPLEMENTED = 12,
              UNAVAILABLE = 14, CANCELLED = 1;

}  // namespace

TEST_CASE("grpc: health, metadata, config and statistics", "[grpc]") {
  auto& c = shared_client();
  CHECK(c.server_live());
  CHECK(c.server_ready());
  CHECK(c.health_check());
  auto md = c.server_metadata();
  CHECK(md.name == "triton");
  CHECK(std::find(md.extensions.begin(), md.extensions.end(), "model_repository") != md.extensions.end());
  auto mm = c.model_metadata("simple");
  CHECK(is_simple_metadata(mm));
  CHECK(c.model_ready("simple"));
  CHECK_FALSE(c.model_ready("nope"));
  const auto config = c.model_config("simple").as_object();
  CHECK(config.at("name").as_string() == "simple");
  CHECK(config.at("max_batch_size").as_int64() == 8);
  c.infer("simple", simple_request(iota16(), std::vector<std::int32_t>(16, 1)));
  auto stats = c.model_statistics("simple");
  REQUIRE(stats.model_stats.size() == 1);
  CHECK(stats.model_stats[0].inference_count >= 1);
  CHECK(c.model_statistics().model_stats.size() > 5);

  CHECK_THAT(error_text([&] { c.model_metadata("nope"); }, NOT_FOUND), StartsWith("Request for unknown model"));
  CHECK_THAT(error_text([&] { c.model_config({"simple", "wrong_specification"}); }, INVALID_ARGUMENT),
             Contains("failed to get model version from specified version string 'wrong_specification'"));
  ig::error_code ec;
  c.model_statistics("nope", ec);  // the statistics extension's own text, as over HTTP
  CHECK(ig::status_code(ec) == INVALID_ARGUMENT);
  CHECK(ec.message() == "requested model 'nope' is not available");
}

TEST_CASE("grpc: ModelInfer with raw and typed contents", "[grpc]") {
  auto& c = shared_client();
  auto req = simple_request(iota16(), std::vector<std::int32_t>(16, 1));
  req.id = "my-request";
  for (bool typed : {false, true}) {
    INFO(typed);
    auto r = c.infer("simple", typed_if(req, typed));
    CHECK(r.response().id == "my-request");
    CHECK(r.model_name() == "simple");
    CHECK(r.model_version() == "1");
    REQUIRE(r.outputs().size() == 2);
    CHECK(r.outputs()[0].name == "OUTPUT0");
    CHECK(ints(r.outputs()[0]) == iota16(1));
    CHECK(ints(r.outputs()[1]) == iota16(-1));
  }
  // INT8 in int_contents, narrowed by the server.
  std::vector<std::int8_t> a(16, -3), b(16, 5);
  v2::infer_request q8;
  q8.inputs.push_back(v2::make_input("INPUT0", std::span<const std::int8_t>(a), {1, 16}));
  q8.inputs.push_back(v2::make_input("INPUT1", std::span<const std::int8_t>(b), {1, 16}));
  auto r8 = c.infer("simple_int8", typed_if(q8, true));
  CHECK(r8.as<std::int8_t>("OUTPUT0")[0] == 2);
  CHECK(r8.as<std::int8_t>("OUTPUT1")[15] == -8);
  // BYTES, raw and in bytes_contents.
  std::vector<std::string> s0, s1;
  for (int i = 0; i < 16; ++i) {
    s0.push_back(std::to_string(i));
    s1.push_back("1");
  }
  v2::infer_request qs;
  qs.inputs.push_back(v2::make_bytes_input("INPUT0", s0, {1, 16}));
  qs.inputs.push_back(v2::make_bytes_input("INPUT1", s1, {1, 16}));
  for (bool typed : {false, true}) {
    auto rs = c.infer("simple_string", typed_if(qs, typed));
    auto out = rs.strings("OUTPUT0");
    CHECK(out.front() == "1");
    CHECK(out.back() == "16");
  }
  // Requested outputs, in the requested order.
  auto sub = req;
  sub.outputs.push_back(v2::make_output("OUTPUT1"));
  auto rsub = c.infer("simple", sub);
  REQUIRE(rsub.outputs().size() == 1);
  CHECK(rsub.outputs()[0].name == "OUTPUT1");
}

TEST_CASE("grpc: an output that is a whole input takes the input's bytes instead of a copy", "[grpc]") {
  // The converter: whole inputs of 4 KiB and more are taken (the request's entry left empty);
  // a second output of the same input, a part of an input and small inputs are copied.
  inference::ModelInferRequest q;
  const std::string big(8192, 'b'), small(100, 's');
  q.add_raw_input_contents(big);
  q.add_raw_input_contents(small);
  const std::string_view in0 = q.raw_input_contents(0), in1 = q.raw_input_contents(1);
  v2::infer_response resp;
  for (std::string_view bytes : {in0, in0, in0.substr(0, 4096), in1}) {
    v2::infer_output o;
    o.name = "OUT" + std::to_string(resp.outputs.size());
    o.datatype = inferwire::data_type::uint8;
    o.shape = {static_cast<std::int64_t>(bytes.size())};
    o.data = v2::tensor_data::view(bytes);
    resp.outputs.push_back(std::move(o));
  }
  inference::ModelInferResponse out;
  ig::encode_infer_response(resp, out, &q);
  REQUIRE(out.raw_output_contents_size() == 4);
  CHECK(out.raw_output_contents(0) == big);
  CHECK(out.raw_output_contents(1) == big);
  CHECK(out.raw_output_contents(2) == big.substr(0, 4096));
  CHECK(out.raw_output_contents(3) == small);
  CHECK(q.raw_input_contents(0).empty());  // taken
  CHECK(q.raw_input_contents(1) == small);  // copied
  // Without the request, everything is copied.
  inference::ModelInferRequest q2;
  q2.add_raw_input_contents(big);
  resp.outputs.resize(1);
  resp.outputs[0].data = v2::tensor_data::view(std::string_view(q2.raw_input_contents(0)));
  inference::ModelInferResponse out2;
  ig::encode_infer_response(resp, out2);
  CHECK(out2.raw_output_contents(0) == big);
  CHECK(q2.raw_input_contents(0) == big);

  // Through the server: identity's outputs are its inputs, small and large.
  auto& c = shared_client();
  for (std::size_t n : {std::size_t{4}, std::size_t{1023}, std::size_t{1024}, std::size_t{1} << 16}) {
    INFO(n);
    std::vector<float> x(n);
    for (std::size_t i = 0; i < n; ++i) x[i] = static_cast<float>(i) * 0.5f;
    v2::infer_request req;
    req.inputs.push_back(v2::make_input("INPUT0", std::span<const float>(x), {static_cast<std::int64_t>(n)}));
    auto r = c.infer("identity_fp32", req);
    const auto got = r.as<float>("OUTPUT0");
    CHECK(std::vector<float>(got.begin(), got.end()) == x);
  }
}

TEST_CASE("grpc: ModelInfer and stream replies with large and small outputs in order, the large ones as slices", "[grpc]") {
  // The server serialises ModelInfer's reply itself: outputs of 64 KiB or more go out as slices
  // of their own strings after the rest of the message. Both orders of a large and a small
  // output, and the message's other fields, must read as protobuf wrote them.
  // Replies past gRPC's default 4 MiB receive limit.
  grpc::ChannelArguments args;
  args.SetMaxReceiveMessageSize(-1);
  const auto channel = grpc::CreateCustomChannel("127.0.0.1:" + std::to_string(test_server().grpc_port()),
                                                 grpc::InsecureChannelCredentials(), args);
  auto stub = inference::GRPCInferenceService::NewStub(channel);
  // 12,500,001 INT32 elements: an entry of 50,000,004 bytes, past the size protobuf grows as it
  // parses, which the server reserves first. Its buffer is kept once the reply is sent, and the
  // next entry of 32 MiB or more (10,485,761 elements, 41,943,044 bytes) is parsed into it.
  for (const auto& [n0, n1] : {std::pair<std::size_t, std::size_t>{300000, 3}, {5, 70000}, {40000, 40000}, {0, 0},
                               {12'500'001, 2}, {10'485'761, 1}}) {
    INFO(n0 << " INT32 elements and " << n1 << " strings");
    inference::ModelInferRequest q;
    q.set_model_name("batch_identity");
    q.set_id("mixed");
    auto* in0 = q.add_inputs();
    in0->set_name("INPUT0");
    in0->set_datatype("INT32");
    in0->add_shape(1);
    in0->add_shape(static_cast<std::int64_t>(n0));
    auto* in1 = q.add_inputs();
    in1->set_name("INPUT1");
    in1->set_datatype("BYTES");
    in1->add_shape(1);
    in1->add_shape(static_cast<std::int64_t>(n1));
    std::string ints(n0 * 4, '\0');
    for (std::size_t i = 0; i < n0; ++i) {
      const auto v = static_cast<std::int32_t>(i * 7 + n0);  // no two requests alike
      std::memcpy(ints.data() + i * 4, &v, 4);
    }
    std::string strings;
    for (std::size_t i = 0; i < n1; ++i) {
      const std::string e = std::to_string(i);
      const auto len = static_cast<std::uint32_t>(e.size());
      strings.append(reinterpret_cast<const char*>(&len), 4).append(e);
    }
    q.add_raw_input_contents(ints);
    q.add_raw_input_contents(strings);
    grpc::ClientContext ctx;
    inference::ModelInferResponse r;
    const auto st = stub->ModelInfer(&ctx, q, &r);
    REQUIRE(st.ok());
    CHECK(r.id() == "mixed");
    CHECK(r.model_name() == "batch_identity");
    REQUIRE(r.outputs_size() == 2);
    CHECK(r.outputs(0).name() == "OUTPUT0");
    CHECK(r.outputs(1).shape(1) == static_cast<std::int64_t>(n1));
    REQUIRE(r.raw_output_contents_size() == 2);
    CHECK(r.raw_output_contents(0) == ints);
    CHECK(r.raw_output_contents(1) == strings);

    // The same request over a stream, whose responses the server serialises too: read as bytes,
    // they must be the bytes protobuf writes for the message they parse into.
    inferwire::test::raw_stream stream(channel);
    REQUIRE(stream.opened());
    REQUIRE(stream.write(q.SerializeAsString()));
    std::string wire;
    REQUIRE(stream.read(wire));
    inference::ModelStreamInferResponse sr;
    REQUIRE(sr.ParseFromString(wire));
    CHECK(sr.SerializeAsString() == wire);
    CHECK(sr.error_message().empty());
    CHECK(sr.infer_response().id() == "mixed");
    CHECK(sr.infer_response().parameters().at("triton_final_response").bool_param());
    REQUIRE(sr.infer_response().raw_output_contents_size() == 2);
    CHECK(sr.infer_response().raw_output_contents(0) == ints);
    CHECK(sr.infer_response().raw_output_contents(1) == strings);
    REQUIRE(stream.writes_done());
    CHECK(stream.finish().ok());
  }
}

TEST_CASE("grpc: a timeout parameter held as uint64 goes out as int64_param", "[grpc]") {
  // The decoders keep `timeout` as uint64; Triton accepts it as int64_param only.
  auto q = simple_request(iota16(), iota16());
  q.parameters.set("timeout", std::uint64_t{5000000});
  inference::ModelInferRequest pq;
  ig::encode_infer_request(q, "simple", "", pq);
  const auto& p = pq.parameters().at("timeout");
  CHECK(p.parameter_choice_case() == inference::InferParameter::kInt64Param);
  CHECK(p.int64_param() == 5000000);
  auto r = shared_client().infer("simple", q);
  CHECK(r.as<std::int32_t>("OUTPUT0")[1] == 2);
}

TEST_CASE("grpc: ModelInfer errors keep Triton's texts", "[grpc]") {
  auto& c = shared_client();
  auto stub = raw_stub(test_server());
  auto call = [&](const inference::ModelInferRequest& q) {
    grpc::ClientContext ctx;
    inference::ModelInferResponse r;
    return stub->ModelInfer(&ctx, q, &r);
  };
  inference::ModelInferRequest q;
  ig::encode_infer_request(simple_request(iota16(), iota16()), "simple", "", q);
  {
    auto both = q;
    for (int v : iota16()) both.mutable_inputs(0)->mutable_contents()->add_int_contents(v);
    auto s = call(both);
    CHECK(s.error_code() == grpc::StatusCode::INVALID_ARGUMENT);
    CHECK(s.error_message() ==
          "contents field must not be specified when using raw_input_contents for 'INPUT0' for model 'simple'");
  }
  {
    auto missing = q;
    missing.mutable_raw_input_contents()->RemoveLast();
    CHECK(call(missing).error_message() == "unable to find data for input tensor 'INPUT1' for model 'simple' in request.");
  }
  {
    auto typed = q;
    typed.clear_raw_input_contents();
    for (int i = 0; i < 2; ++i)
      for (int v : iota16()) typed.mutable_inputs(i)->mutable_contents()->add_fp32_contents(static_cast<float>(v));
    CHECK(call(typed).error_message() ==
          "unexpected explicit tensor data for input tensor 'INPUT0' for model 'simple' of type 'FP32', expected "
          "datatype 'INT32'");
  }
  {
    auto p = q;
    (*p.mutable_parameters())["sequence_id"].set_bool_param(true);
    CHECK(call(p).error_message() ==
          "invalid value type for 'sequence_id' parameter, expected int64_param or string_param.");
    p.mutable_parameters()->clear();
    (*p.mutable_parameters())["triton_x"].set_bool_param(true);
    CHECK_THAT(call(p).error_message(), StartsWith("parameter keys starting with 'triton_' are reserved"));
    p.mutable_parameters()->clear();
    (*p.mutable_parameters())["priority"].set_int64_param(-1);
    CHECK(call(p).error_message() == "invalid value for 'priority', expected value >= 0.");
    p.mutable_parameters()->clear();
    (*p.mutable_parameters())["custom"].set_uint64_param(1);
    CHECK(call(p).error_message() ==
          "invalid value type for 'custom' parameter, expected int64_param, bool_param, or string_param.");
  }
  {
    auto v = q;
    v.set_model_version("wrong_specification");
    CHECK_THAT(call(v).error_message(),
               Contains("failed to get model version from specified version string 'wrong_specification'"));
  }
  CHECK(error_text([&] { c.infer("repeat_int32", v2::infer_request{}); }, UNIMPLEMENTED) ==
        "ModelInfer RPC doesn't support models with decoupled transaction policy");
  CHECK(request(test_server().http_port(), "POST", "/v2/models/repeat_int32/infer", R"({"inputs":[]})").status == 501);
  // The server still serves.
  CHECK(c.infer("simple", simple_request(iota16(), iota16())).outputs().size() == 2);
}

TEST_CASE("grpc: compression and deadlines", "[grpc]") {
  auto& c = shared_client();
  for (auto algo : {ig::compression::gzip, ig::compression::deflate}) {
    ig::call_options co;
    co.request_compression = algo;
    auto r = c.infer("simple", simple_request(iota16(), iota16()), co);
    CHECK(ints(r.outputs()[0])[15] == 30);
  }
  {
    ig::client_options o;
    o.request_compression = ig::compression::gzip;
    o.keepalive_time = std::chrono::milliseconds(200);
    o.keepalive_without_calls = true;
    ig::client compressed(target_of(test_server()), o);
    CHECK(compressed.infer("simple", simple_request(iota16(), iota16())).outputs().size() == 2);
  }
  std::vector<std::int32_t> data{1, 2, 3};
  v2::infer_request slow;
  slow.inputs.push_back(v2::make_input("INPUT0", std::span<const std::int32_t>(data), {3}));
  ig::call_options deadline;
  deadline.timeout = std::chrono::milliseconds(200);
  CHECK(ig::status_code([&] {
          ig::error_code ec;
          c.infer("identity_slow", slow, ec, deadline);
          return ec;
        }()) == DEADLINE_EXCEEDED);

}

TEST_CASE("grpc: asynchronous calls with completion tokens", "[grpc]") {
  namespace net = boost::asio;
  net::io_context ioc;
  ig::client c(ioc.get_executor(), target_of(test_server()));
  // A callback, run by the caller's io_context (no thread of the library's).
  std::optional<ig::infer_result> got;
  ig::error_code got_ec;
  c.async_infer("simple", simple_request(iota16(5), iota16()), [&](ig::error_code ec, ig::infer_result r) {
    CHECK(ioc.get_executor().running_in_this_thread());
    got_ec = ec;
    got = std::move(r);
  });
  ig::error_code missing;
  c.async_model_metadata("nope", [&](ig::error_code ec, v2::model_metadata) { missing = ec; });
  // deferred: nothing starts until the deferred operation is invoked.
  bool ready = false;
  auto later = c.async_server_ready(net::deferred);
  // A coroutine.
  std::vector<std::int32_t> sums;
  net::co_spawn(
      ioc,
      [&]() -> net::awaitable<void> {
        auto r = co_await c.async_infer("simple", simple_request(iota16(), iota16()), net::use_awaitable);
        auto v = r.as<std::int32_t>("OUTPUT0");
        sums.assign(v.begin(), v.end());
        co_await c.async_unregister_system_shared_memory("not-registered-here", net::use_awaitable);
      },
      net::detached);
  ioc.run();
  CHECK_FALSE(got_ec);
  REQUIRE(got);
  CHECK(ints(got->output("OUTPUT1")) == std::vector<std::int32_t>(16, 5));
  CHECK(ig::status_code(missing) == NOT_FOUND);
  CHECK(ig::server_errc(missing) == inferwire::errc::not_found);
  std::vector<std::int32_t> twice;
  for (auto v : iota16()) twice.push_back(2 * v);
  CHECK(sums == twice);
  std::move(later)([&](ig::error_code ec, bool r) { ready = !ec && r; });
  ioc.restart();
  ioc.run();
  CHECK(ready);

  // use_future works on a client without an executor (its private io_context never runs).
  auto& blocking = shared_client();
  auto f = blocking.async_infer("simple", simple_request(iota16(), iota16()), net::use_future);
  CHECK(ints(f.get().output("OUTPUT0"))[15] == 30);
  auto failed = blocking.async_infer("nope", simple_request(iota16(), iota16()), net::use_future);
  try {
    failed.get();
    FAIL("no error");
  } catch (const boost::system::system_error& e) {
    CHECK(ig::status_code(e.code()) == NOT_FOUND);
  }

  // A client without an executor makes its private io_context when first asked, once, even
  // when several threads ask at the same time.
  {
    ig::client fresh(target_of(test_server()));
    std::vector<net::any_io_executor> seen(4);
    std::vector<std::thread> askers;
    for (auto& ex : seen) askers.emplace_back([&fresh, &ex] { ex = fresh.get_executor(); });
    for (auto& t : askers) t.join();
    REQUIRE(seen[0].target<net::io_context::executor_type>() != nullptr);
    for (const auto& ex : seen) CHECK(ex == seen[0]);
    CHECK(fresh.get_executor() == seen[0]);
    CHECK(fresh.async_server_live(net::use_future).get());
  }

  // Per-operation cancellation: the call fails with CANCELLED.
  std::vector<std::int32_t> data{1, 2, 3};
  v2::infer_request slow;
  slow.inputs.push_back(v2::make_input("INPUT0", std::span<const std::int32_t>(data), {3}));
  net::cancellation_signal cancel;
  ig::error_code cancelled;
  ioc.restart();
  c.async_infer("identity_slow", slow,
                net::bind_cancellation_slot(cancel.slot(), [&](ig::error_code ec, ig::infer_result) { cancelled = ec; }));
  net::steady_timer t(ioc, std::chrono::milliseconds(50));
  t.async_wait([&](auto) { cancel.emit(net::cancellation_type::terminal); });
  ioc.run();
  CHECK(ig::status_code(cancelled) == CANCELLED);
}

namespace {
// Reads a stream to its end; each response or in-stream error as (error, result).
std::vector<std::pair<ig::error_code, ig::infer_result>> read_all(ig::stream& s, ig::error_code& end) {
  std::vector<std::pair<ig::error_code, ig::infer_result>> out;
  for (;;) {
    ig::error_code ec;
    auto r = s.read(ec);
    if (ec && ig::status_code(ec) != 2 /*UNKNOWN: in-stream*/) {
      end = ec;
      return out;
    }
    out.emplace_back(ec, std::move(r));
  }
}
}  // namespace

TEST_CASE("grpc: a stream with interleaved sequences and in-stream errors", "[grpc]") {
  auto& c = shared_client();
  auto stream = c.open_stream();
  const std::vector<std::int32_t> values{0, 11, 7, 5, 3, 2, 0, 1};
  for (std::size_t i = 0; i < values.size(); ++i) {
    for (std::uint64_t seq : {1001u, 1002u}) {
      std::vector<std::int32_t> one{values[i] + (seq == 1002 ? 100 : 0)};
      v2::infer_request q;
      q.id = std::to_string(seq) + "_" + std::to_string(i);
      q.parameters.set("sequence_id", seq);
      q.parameters.set("sequence_start", i == 0);
      q.parameters.set("sequence_end", i + 1 == values.size());
      q.inputs.push_back(v2::make_input("INPUT", std::span<const std::int32_t>(one), {1, 1}));
      stream.write("simple_sequence", q);  // encoded at once: `one` may go
    }
    if (i == 3) {  // an error in the middle does not end the stream
      v2::infer_request bad;
      bad.id = "bad";
      stream.write("nope", bad);
    }
  }
  stream.writes_done();
  ig::error_code late;
  stream.write("simple", v2::infer_request{}, late);
  CHECK(late == ig::client_errc::stream_closed);
  ig::error_code end;
  auto all = read_all(stream, end);
  CHECK(end == boost::asio::error::eof);
  std::vector<std::pair<std::string, std::int32_t>> got;
  std::vector<std::string> errors;
  for (auto& [ec, r] : all) {
    if (ec) {
      errors.push_back(ec.message() + "|" + r.id());
      continue;
    }
    got.emplace_back(r.id(), r.as<std::int32_t>("OUTPUT")[0]);
    CHECK(r.parameters().get<bool>("triton_final_response").value_or(false));
  }
  stream.finish();
  REQUIRE(got.size() == 2 * values.size());
  for (std::size_t i = 0; i < values.size(); ++i) {
    // (INPUT + START) * READY, each sequence's responses in order with their ids.
    CHECK(got[2 * i].first == "1001_" + std::to_string(i));
    CHECK(got[2 * i].second == values[i] + (i == 0 ? 1 : 0));
    CHECK(got[2 * i + 1].first == "1002_" + std::to_string(i));
    CHECK(got[2 * i + 1].second == values[i] + 100 + (i == 0 ? 1 : 0));
  }
  REQUIRE(errors.size() == 1);
  CHECK_THAT(errors[0], StartsWith("Request for unknown model"));
  CHECK_THAT(errors[0], Contains("|bad"));
}

TEST_CASE("grpc: decoupled repeat_int32 streams one response per element", "[grpc]") {
  namespace net = boost::asio;
  auto repeat = [](std::vector<std::int32_t> in, std::uint32_t delay_ms, const std::string& id) {
    std::vector<std::uint32_t> delay(in.size(), delay_ms), wait{0};
    v2::infer_request q;
    q.id = id;
    q.inputs.push_back(owned_input("IN", in, {static_cast<std::int64_t>(in.size())}));
    q.inputs.push_back(owned_input("DELAY", delay, {static_cast<std::int64_t>(delay.size())}));
    q.inputs.push_back(owned_input("WAIT", wait, {1}));
    return q;
  };
  // Driven by a coroutine on the caller's io_context.
  net::io_context ioc;
  ig::client c(ioc.get_executor(), target_of(test_server()));
  std::vector<std::tuple<std::string, std::int32_t, std::uint32_t, bool>> got;
  ig::error_code final_status = ig::make_error(13, "not finished");
  const auto t0 = std::chrono::steady_clock::now();
  net::co_spawn(
      ioc,
      [&]() -> net::awaitable<void> {
        auto stream = c.open_stream();
        // (Requests are built outside co_await expressions: GCC 12 cannot keep an
        // initializer list or a string literal alive across a suspension.)
        const std::string model = "repeat_int32";
        auto first = repeat({100, 101, 102, 103, 104}, 40, "a");
        auto empty = repeat({}, 0, "empty");
        auto last = repeat({7}, 0, "final");
        last.parameters.set("triton_enable_empty_final_response", true);
        co_await stream.async_write(model, first, net::use_awaitable);
        co_await stream.async_write(model, empty, net::use_awaitable);
        co_await stream.async_write(model, last, net::use_awaitable);
        co_await stream.async_writes_done(net::use_awaitable);
        for (;;) {
          auto next = co_await stream.async_read(net::as_tuple(net::use_awaitable));
          if (std::get<0>(next)) break;
          const auto& r = std::get<1>(next);
          const auto* out = r.response().output("OUT");
          const auto* idx = r.response().output("IDX");
          got.emplace_back(r.id(), out ? out->as<std::int32_t>()[0] : -1, idx ? idx->as<std::uint32_t>()[0] : 0u,
                           r.parameters().get<bool>("triton_final_response").value_or(false));
        }
        auto fin = co_await stream.async_finish(net::as_tuple(net::use_awaitable));
        final_status = std::get<0>(fin);
      },
      net::detached);
  ioc.run();
  CHECK_FALSE(final_status);
  CHECK(std::chrono::steady_clock::now() - t0 >= std::chrono::milliseconds(200));
  REQUIRE(got.size() == 7);  // 5 + none for the empty input + 1 + the empty final
  for (std::uint32_t i = 0; i < 5; ++i) {
    CHECK(std::get<0>(got[i]) == "a");
    CHECK(std::get<1>(got[i]) == static_cast<std::int32_t>(100 + i));
    CHECK(std::get<2>(got[i]) == i);
    CHECK_FALSE(std::get<3>(got[i]));
  }
  CHECK(std::get<0>(got[5]) == "final");
  CHECK(std::get<1>(got[5]) == 7);
  CHECK_FALSE(std::get<3>(got[5]));
  CHECK(std::get<0>(got[6]) == "final");
  CHECK(std::get<1>(got[6]) == -1);  // empty: only the final flag
  CHECK(std::get<3>(got[6]));
}

// gRPC runs callback reactions on threads owned by a queue that lives while any channel does;
// destroying the process's last channel on one of those threads aborts the process. A client
// whose last operation completes inline (use_future) and which is dropped at once, alone in the
// process, is the case: the test runs in its own process and repeats it.
namespace {
// How many threads of this process carry the name of the clients' completion thread.
int completion_threads() {
  int n = 0;
  for (const auto& e : std::filesystem::directory_iterator("/proc/self/task")) {
    std::ifstream comm(e.path() / "comm");
    std::string name;
    std::getline(comm, name);
    n += name == "inferwire-grpc";
  }
  return n;
}
// Waits up to 5 s for the count to become `n`: the last reference to a client may go on the
// completion thread itself, just after a handler there ran, and the thread then ends on its own.
int completion_threads_become(int n) {
  for (int i = 0; i < 500 && completion_threads() != n; ++i) std::this_thread::sleep_for(std::chrono::milliseconds(10));
  return completion_threads();
}
std::string this_thread_name() {
  char name[32] = {};
  ::pthread_getname_np(::pthread_self(), name, sizeof name);
  return name;
}
}  // namespace

TEST_CASE("grpc: asynchronous calls of every client complete on one thread", "[grpc]") {
  namespace net = boost::asio;
  const auto target = target_of(test_server());
  const int before = completion_threads();  // 1 when an earlier test's shared client made one
  REQUIRE(before <= 1);
  {
    std::vector<std::unique_ptr<ig::client>> clients;
    for (int i = 0; i < 3; ++i) clients.push_back(std::make_unique<ig::client>(target));
    CHECK(completion_threads() == before);  // blocking calls and construction start nothing
    CHECK(clients[0]->server_live());
    CHECK(completion_threads() == before);
    // Handlers bound to the system executor run where the call completed.
    std::vector<std::promise<std::pair<std::thread::id, std::string>>> where(6);
    for (std::size_t i = 0; i < where.size(); ++i)
      clients[i % 3]->async_server_live(net::bind_executor(net::system_executor(), [&where, i](ig::error_code ec, bool) {
        CHECK_FALSE(ec);
        where[i].set_value({std::this_thread::get_id(), this_thread_name()});
      }));
    std::set<std::thread::id> ids;
    for (auto& w : where) {
      auto [id, name] = w.get_future().get();
      ids.insert(id);
      CHECK(name == "inferwire-grpc");
    }
    CHECK(ids.size() == 1);
    CHECK(ids.count(std::this_thread::get_id()) == 0);
    CHECK(completion_threads() == 1);
  }
  // The last client to go stops the thread (unless an earlier test's client still holds it).
  CHECK(completion_threads_become(before) == before);

  // The last client destroyed by a handler on the completion thread: the thread finishes on
  // its own, and the next asynchronous call starts another.
  if (before == 0) {
    auto c = std::make_unique<ig::client>(target);
    std::promise<bool> done;
    c->async_server_live(net::bind_executor(net::system_executor(), [&](ig::error_code ec, bool live) {
      c.reset();
      done.set_value(!ec && live);
    }));
    CHECK(done.get_future().get());
    CHECK(completion_threads_become(0) == 0);
    ig::client again(target);
    CHECK(again.async_server_live(net::use_future).get());
  }
}

TEST_CASE("grpc: calls started on an io_context while others are in flight", "[grpc]") {
  // Each handler starts its lane's next call: with calls in flight, a call started on this
  // thread is handed to the completion thread, and its end comes back here.
  namespace net = boost::asio;
  net::io_context ioc;
  ig::client c(ioc.get_executor(), target_of(test_server()));
  constexpr int lanes = 16, rounds = 20;
  int done = 0, wrong = 0, elsewhere = 0;
  std::function<void(int, int)> start = [&](int lane, int round) {
    c.async_infer("simple", simple_request(iota16(lane), iota16(round)),
                  [&, lane, round](ig::error_code ec, ig::infer_result r) {
                    if (!ioc.get_executor().running_in_this_thread()) ++elsewhere;
                    std::vector<std::int32_t> sum;
                    for (int i = 0; i < 16; ++i) sum.push_back(lane + round + 2 * i);
                    if (ec || ints(r.output("OUTPUT0")) != sum) ++wrong;
                    ++done;
                    if (round + 1 < rounds) start(lane, round + 1);
                  });
  };
  for (int lane = 0; lane < lanes; ++lane) start(lane, 0);
  // Cancelled at once, while it may still wait for the completion thread to start it.
  std::vector<std::int32_t> data{1, 2, 3};
  v2::infer_request slow;
  slow.inputs.push_back(v2::make_input("INPUT0", std::span<const std::int32_t>(data), {3}));
  net::cancellation_signal cancel;
  ig::error_code cancelled;
  c.async_infer("identity_slow", slow,
                net::bind_cancellation_slot(cancel.slot(), [&](ig::error_code ec, ig::infer_result) { cancelled = ec; }));
  cancel.emit(net::cancellation_type::terminal);
  const auto t0 = std::chrono::steady_clock::now();
  ioc.run();
  CHECK(done == lanes * rounds);
  CHECK(wrong == 0);
  CHECK(elsewhere == 0);
  CHECK(ig::status_code(cancelled) == CANCELLED);
  CHECK(std::chrono::steady_clock::now() - t0 < std::chrono::milliseconds(1500));  // never ran the model
}

TEST_CASE("grpc: calls handed over from several threads at once", "[grpc]") {
  // Four threads, each with its own io_context and client, keep 8 calls in flight each: their
  // starts race to the completion thread's list and its one alarm.
  namespace net = boost::asio;
  const auto target = target_of(test_server());
  constexpr int threads = 4, lanes = 8, rounds = 10;
  std::atomic<int> done{0}, wrong{0};
  std::vector<std::thread> workers;
  for (int t = 0; t < threads; ++t)
    workers.emplace_back([&, t] {
      net::io_context ioc;
      ig::client c(ioc.get_executor(), target);
      std::function<void(int, int)> start = [&](int lane, int round) {
        c.async_infer("simple", simple_request(iota16(t * 100 + lane), iota16(round)),
                      [&, lane, round](ig::error_code ec, ig::infer_result r) {
                        std::vector<std::int32_t> diff(16, t * 100 + lane - round);
                        if (ec || ints(r.output("OUTPUT1")) != diff) ++wrong;
                        ++done;
                        if (round + 1 < rounds) start(lane, round + 1);
                      });
      };
      for (int lane = 0; lane < lanes; ++lane) start(lane, 0);
      ioc.run();
    });
  for (auto& w : workers) w.join();
  CHECK(done == threads * lanes * rounds);
  CHECK(wrong == 0);
}

TEST_CASE("grpc: a lone client dropped as its last completion arrives", "[grpc]") {
  const auto target = target_of(test_server());
  for (int i = 0; i < 40; ++i) {
    {
      ig::client c(target);
      auto live = c.async_server_live(boost::asio::use_future);
      CHECK(live.get());
    }
    {
      ig::client c(target);
      auto stream = c.open_stream();
      CHECK_NOTHROW(stream.async_finish(boost::asio::use_future).get());
    }
    {
      boost::asio::io_context ioc;
      ig::client c(ioc.get_executor(), target);
      auto stream = c.open_stream();
      ig::error_code fin = ig::make_error(13, "not finished");
      stream.async_finish([&](ig::error_code ec) { fin = ec; });
      ioc.run();
      CHECK_FALSE(fin);
    }
  }
}

TEST_CASE("grpc: cancelling a stream, closing on the first error, abandoning one", "[grpc]") {
  auto& c = shared_client();
  std::vector<std::int32_t> in(20, 1);
  std::vector<std::uint32_t> delay(20, 100), wait{0};
  v2::infer_request q;
  q.inputs.push_back(v2::make_input("IN", std::span<const std::int32_t>(in), {20}));
  q.inputs.push_back(v2::make_input("DELAY", std::span<const std::uint32_t>(delay), {20}));
  q.inputs.push_back(v2::make_input("WAIT", std::span<const std::uint32_t>(wait), {1}));
  auto failures = [&] {
    return c.model_statistics("repeat_int32").model_stats.at(0).inference_stats.fail.count;
  };
  const auto failed_before = failures();
  {
    auto stream = c.open_stream();
    stream.write("repeat_int32", q);
    CHECK(stream.read().id().empty());  // the first response
    stream.cancel();
    const auto cancelled_at = std::chrono::steady_clock::now();
    ig::error_code end;
    auto rest = read_all(stream, end);
    CHECK(ig::status_code(end) == CANCELLED);
    CHECK(rest.size() < 19);
    ig::error_code fin;
    stream.finish(fin);
    CHECK(ig::status_code(fin) == CANCELLED);
    // The model stops at its next response instead of running its 2 s to the end.
    while (failures() == failed_before && std::chrono::steady_clock::now() - cancelled_at < std::chrono::seconds(3))
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    CHECK(failures() == failed_before + 1);
    CHECK(std::chrono::steady_clock::now() - cancelled_at < std::chrono::milliseconds(1000));
  }

  ig::call_options strict;
  strict.headers.emplace_back("triton_grpc_error", "true");
  auto s2 = c.open_stream(strict);
  s2.write("nope", v2::infer_request{});
  ig::error_code ec;
  s2.read(ec);
  CHECK(ig::status_code(ec) == NOT_FOUND);
  CHECK(ig::server_errc(ec) == inferwire::errc::not_found);
  s2.finish(ec);
  CHECK(ig::status_code(ec) == NOT_FOUND);

  // Two reads at once: the second is refused, the first still completes.
  auto s3 = c.open_stream();
  auto first = s3.async_read(boost::asio::use_future);
  ig::error_code second;
  s3.read(second);
  CHECK(second == ig::client_errc::operation_in_progress);
  s3.write("simple", simple_request(iota16(), iota16()));
  CHECK(ints(first.get().output("OUTPUT0"))[1] == 2);
  // Abandoned with a write and a read pending: the destructor cancels, nothing leaks or hangs.
  {
    auto s4 = c.open_stream();
    s4.write("repeat_int32", q);
    auto pending = s4.async_read(boost::asio::use_future);
    (void)pending;
  }
  {
    auto s5 = std::move(s3);  // moved-from streams are inert
  }
  CHECK(c.server_live());
}

TEST_CASE("grpc: repository index, load and unload", "[grpc]") {
  server_process s({"--allow-grpc", "true", "--grpc-port", "0", "--model-control-mode", "explicit", "--load-model",
                    "*", "--model-repository", bundled_models(), "--model-repository",
                    source_path("reference_server/models_decoupled")},
                   false);
  auto c = client_of(s);
  auto index = c.repository_index();
  CHECK(index.size() == 8);  // what gRPC model-control clients expect
  c.unload_model("simple");
  CHECK_FALSE(c.model_ready("simple"));
  c.load_model("simple");
  CHECK(c.model_ready("simple"));
  v2::repository_load_request override;
  // A whole config (our built-in backends are not inferred from model files), with the
  // integer given as a string.
  override.config =
      R"({"name":"simple","backend":"simple","max_batch_size":"16",)"
      R"("input":[{"name":"INPUT0","data_type":"TYPE_INT32","dims":[16]},{"name":"INPUT1","data_type":"TYPE_INT32","dims":[16]}],)"
      R"("output":[{"name":"OUTPUT0","data_type":"TYPE_INT32","dims":[16]},{"name":"OUTPUT1","data_type":"TYPE_INT32","dims":[16]}]})";
  c.load_model("simple", override);
  CHECK(c.model_config("simple").at("max_batch_size").as_int64() == 16);
  CHECK(error_text([&] { c.load_model("wrong_model_name"); }, INTERNAL) ==
        "failed to load 'wrong_model_name', failed to poll from model repository");
  v2::repository_load_request files;
  files.config = "{}";
  files.files.emplace_back(std::string(256, 'A'), "x");
  CHECK_THAT(error_text([&] { c.load_model("simple", files); }, INTERNAL),
             Contains("failed to poll from model repository"));
  CHECK(c.server_live());
  auto stub = raw_stub(s);
  grpc::ClientContext ctx;
  inference::RepositoryIndexRequest q;
  q.set_repository_name("models");
  inference::RepositoryIndexResponse r;
  auto st = stub->RepositoryIndex(&ctx, q, &r);
  CHECK(st.error_code() == grpc::StatusCode::UNIMPLEMENTED);
  CHECK(st.error_message() == "'repository_name' specification is not supported");
}

TEST_CASE("grpc: system shared memory and the raw output entries of shm outputs", "[grpc]") {
  auto& c = shared_client();
  c.unregister_system_shared_memory();
  c.unregister_cuda_shared_memory();  // succeeds without a GPU
  const std::string key = "/iw_grpc_test_" + std::to_string(::getpid());
  auto in = inferwire::shm::system_region::create(key, 128);
  auto out = inferwire::shm::system_region::create(key + "_out", 128);
  auto a = iota16(), b = std::vector<std::int32_t>(16, 2);
  std::memcpy(in.data(), a.data(), 64);
  std::memcpy(static_cast<std::byte*>(in.data()) + 64, b.data(), 64);
  c.register_system_shared_memory({"in", key, 0, 128});
  c.register_system_shared_memory({"out", key + "_out", 0, 128});
  auto status = c.system_shared_memory_status();
  REQUIRE(status.size() == 2);
  CHECK(status[0].name == "in");
  CHECK(status[0].byte_size == 128);
  CHECK_THAT(error_text([&] { c.register_system_shared_memory({"in", key, 0, 128}); }, 6 /*ALREADY_EXISTS*/),
             Contains("already in manager"));

  v2::infer_request q;
  q.inputs.push_back(v2::make_shm_input("INPUT0", data_type::int32, {1, 16}, {"in", 0, 64}));
  q.inputs.push_back(v2::make_shm_input("INPUT1", data_type::int32, {1, 16}, {"in", 64, 64}));
  q.outputs.push_back(v2::make_shm_output("OUTPUT0", {"out", 0, 64}));
  q.outputs.push_back(v2::make_output("OUTPUT1"));
  inference::ModelInferRequest pq;
  ig::encode_infer_request(q, "simple", "", pq);
  auto stub = raw_stub(test_server());
  grpc::ClientContext ctx;
  inference::ModelInferResponse pr;
  REQUIRE(stub->ModelInfer(&ctx, pq, &pr).ok());
  REQUIRE(pr.outputs_size() == 2);
  REQUIRE(pr.raw_output_contents_size() == 2);  // one entry per output...
  CHECK(pr.raw_output_contents(0).empty());       // ...empty for the one in shared memory
  CHECK(pr.raw_output_contents(1).size() == 64);
  CHECK(pr.outputs(0).name() == "OUTPUT0");
  CHECK(pr.outputs(0).datatype() == "INT32");
  std::vector<std::int32_t> sum(16);
  std::memcpy(sum.data(), out.data(), 64);
  CHECK(sum == iota16(2));

  c.unregister_system_shared_memory("in");
  CHECK(c.system_shared_memory_status().size() == 1);
  c.unregister_system_shared_memory();
  CHECK(c.system_shared_memory_status().empty());
  CHECK(c.cuda_shared_memory_status().empty());
  ig::error_code ec;
  c.register_cuda_shared_memory({"gpu", std::string(64, '\0'), 0, 64}, ec);
  CHECK(ec);  // no GPU here, or an invalid handle on a GPU machine
  // A CUDA VMM handle (docs/shared-memory.md) nobody deposited: the registry's text.
  inferwire::shm::vmm_handle forged;
  forged.byte_size = 64;
  CHECK_THAT(error_text([&] { c.register_cuda_shared_memory({"vmm", forged.encode(), 0, 64}); }, INVALID_ARGUMENT),
             Contains("failed to register shared memory region 'vmm': unknown CUDA VMM handle"));
  // The SDK's VMM registration takes the gRPC client as it takes the HTTP one (here without a
  // socket to deposit on).
  inferwire::shm::vmm_layout layout;
  layout.byte_size = 4096;
  layout.chunk_sizes = {4096};
  const int fds[] = {0};
  CHECK_THROWS_AS(inferwire::shm::register_vmm_region(c, "vmm", layout, fds, "/nonexistent/inferwire.sock"),
                  std::system_error);
}

TEST_CASE("grpc: client shared memory is refused unless allowed", "[grpc]") {
  server_process s({"--allow-grpc", "true", "--grpc-port", "0"});
  auto c = client_of(s);
  CHECK(ig::status_code([&] {
          ig::error_code ec;
          c.unregister_system_shared_memory("", ec);
          return ec;
        }()) == UNIMPLEMENTED);
  CHECK(c.system_shared_memory_status().empty());
}

TEST_CASE("grpc: trace and log settings", "[grpc]") {
  auto& c = shared_client();
  auto t = c.trace_settings();
  CHECK(t.settings.count("trace_level"));
  v2::trace_settings update;
  update.settings["trace_rate"] = std::vector<std::string>{"500"};
  auto after = c.update_trace_settings(update, "simple");
  REQUIRE(after.settings.count("trace_rate"));
  CHECK((*after.settings["trace_rate"])[0] == "500");
  CHECK(error_text([&] { c.trace_settings("nope"); }, INVALID_ARGUMENT) == "Request for unknown model : nope");

  auto logs = c.log_settings();
  CHECK(logs.log_format == "default");
  v2::log_settings lu;
  lu.log_verbose_level = 1;
  CHECK(c.update_log_settings(lu).log_verbose_level == 1u);
  lu.log_verbose_level = 0;
  c.update_log_settings(lu);
  v2::log_settings bad;
  bad.log_file = "/tmp/x";
  CHECK(error_text([&] { c.update_log_settings(bad); }, UNIMPLEMENTED) ==
        "log file location can not be updated through network protocol");
}

namespace {
// A TLS gRPC server for the client's credentials: ServerLive only.
class live_service final : public inference::GRPCInferenceService::Service {
  grpc::Status ServerLive(grpc::ServerContext*, const inference::ServerLiveRequest*,
                          inference::ServerLiveResponse* r) override {
    r->set_live(true);
    return grpc::Status::OK;
  }
};
}  // namespace

TEST_CASE("grpc: the server over TLS with --grpc-use-ssl", "[grpc][tls][launch]") {
  test_certificate cert;
  server_process s({"--allow-grpc", "true", "--grpc-port", "0", "--grpc-use-ssl=true", "--grpc-server-cert",
                    cert.cert(), "--grpc-server-key", cert.key()});
  ig::client_options o;
  o.tls = true;
  o.root_certificates = file_text(cert.cert());
  ig::call_options co;
  co.timeout = std::chrono::seconds(5);
  ig::client tls("localhost:" + std::to_string(s.grpc_port()), o);
  CHECK(tls.server_live(co));
  CHECK(is_simple_metadata(tls.model_metadata("simple", co)));
  // A plaintext client does not get through.
  ig::error_code ec;
  CHECK_FALSE(client_of(s).server_live(ec, co));
  CHECK(ig::status_code(ec) == UNAVAILABLE);
  // Key files that cannot be read stop the start-up.
  std::string out;
  CHECK(run_server_once({"--model-repository", bundled_models(), "--http-port", "0", "--metrics-port",
                         "0", "--grpc-port", "0", "--grpc-use-ssl=true", "--grpc-server-cert", "/no/cert.pem",
                         "--grpc-server-key", cert.key()},
                        out) == 1);
  CHECK(out.find("cannot read --grpc-server-cert '/no/cert.pem'") != std::string::npos);
}

TEST_CASE("grpc: TLS channel credentials with a certificate made at test time", "[grpc][tls]") {
  test_certificate cert;
  grpc::SslServerCredentialsOptions ssl;
  ssl.pem_key_cert_pairs.push_back({file_text(cert.key()), file_text(cert.cert())});
  live_service svc;
  grpc::ServerBuilder b;
  int port = 0;
  b.AddListeningPort("127.0.0.1:0", grpc::SslServerCredentials(ssl), &port);
  b.RegisterService(&svc);
  auto server = b.BuildAndStart();
  REQUIRE(server);
  REQUIRE(port > 0);
  ig::client_options o;
  o.tls = true;
  o.root_certificates = file_text(cert.cert());
  ig::call_options co;
  co.timeout = std::chrono::seconds(5);
  const std::string target = "localhost:" + std::to_string(port);
  CHECK(ig::client(target, o).server_live(co));
  // Without the certificate among the trusted roots the handshake fails.
  test_certificate other;
  o.root_certificates = file_text(other.cert());
  ig::error_code ec;
  CHECK_FALSE(ig::client(target, o).server_live(ec, co));
  CHECK(ig::status_code(ec) == UNAVAILABLE);
  server->Shutdown();
}

TEST_CASE("grpc: an ensemble's step meets its model's queue limit and batching", "[grpc][ensemble]") {
  // As over HTTP (batching.cpp): ten calls at once through ensemble_queue reach batch_slow's
  // queue of 4 behind its one busy instance; the calls beyond it are refused with its text.
  server_process& s = test_server();
  std::vector<std::future<grpc::Status>> calls;
  for (int i = 0; i < 10; ++i)
    calls.push_back(std::async(std::launch::async, [&s] {
      inference::ModelInferRequest q;
      q.set_model_name("ensemble_queue");
      auto* in = q.add_inputs();
      in->set_name("IN");
      in->set_datatype("INT32");
      in->add_shape(1);
      in->add_shape(1);
      const std::int32_t v = 7;
      q.add_raw_input_contents(std::string(reinterpret_cast<const char*>(&v), 4));
      grpc::ClientContext ctx;
      inference::ModelInferResponse r;
      return raw_stub(s)->ModelInfer(&ctx, q, &r);
    }));
  int ok = 0, refused = 0;
  for (auto& c : calls) {
    const grpc::Status st = c.get();
    if (st.ok()) {
      ++ok;
    } else {
      CHECK(st.error_code() == grpc::StatusCode::UNAVAILABLE);
      CHECK(st.error_message() == "Exceeds maximum queue size");
      ++refused;
    }
  }
  CHECK(ok + refused == 10);
  CHECK(refused >= 3);
}

TEST_CASE("grpc: once shutdown begins, new inferences on an open connection are refused", "[grpc][shutdown]") {
  // Triton's gRPC frontend stops taking inferences when shutdown begins, on connections already
  // open too, while those in flight finish: a 1.5 s request runs, SIGTERM comes, a new
  // ModelInfer on the same channel (and a new request on an open stream) gets UNAVAILABLE with
  // Triton's text, and the running request still succeeds.
  server_process s({"--allow-grpc", "true", "--grpc-port", "0", "--exit-timeout-secs", "10"});
  auto stub = raw_stub(s);
  auto request_of = [](const char* model) {
    inference::ModelInferRequest q;
    q.set_model_name(model);
    auto* in = q.add_inputs();
    in->set_name("INPUT0");
    in->set_datatype("INT32");
    in->add_shape(1);
    const std::int32_t v = 3;
    q.add_raw_input_contents(std::string(reinterpret_cast<const char*>(&v), 4));
    return q;
  };
  // The stream is open before shutdown; its request comes after.
  grpc::ClientContext stream_ctx;
  auto stream = stub->ModelStreamInfer(&stream_ctx);
  auto slow = std::async(std::launch::async, [&] {
    grpc::ClientContext ctx;
    inference::ModelInferResponse r;
    return stub->ModelInfer(&ctx, request_of("identity_slow"), &r);
  });
  std::this_thread::sleep_for(std::chrono::milliseconds(300));
  ::kill(s.pid(), SIGTERM);
  std::this_thread::sleep_for(std::chrono::milliseconds(200));
  {
    grpc::ClientContext ctx;
    inference::ModelInferResponse r;
    const grpc::Status st = stub->ModelInfer(&ctx, request_of("identity_int64"), &r);
    CHECK(st.error_code() == grpc::StatusCode::UNAVAILABLE);
    CHECK(st.error_message() == "GRPC server is shutting down and has stopped accepting new requests.");
  }
  REQUIRE(stream->Write(request_of("identity_int64")));
  inference::ModelStreamInferResponse sr;
  REQUIRE(stream->Read(&sr));
  CHECK(sr.error_message() == "GRPC server is shutting down and has stopped accepting new requests.");
  stream->WritesDone();
  const grpc::Status ran = slow.get();
  CHECK(ran.ok());
  CHECK(s.stop() == 0);
}
