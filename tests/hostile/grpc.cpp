// SPDX-License-Identifier: Apache-2.0
// Hostile and malformed input against inferwire-server's gRPC frontend: one table of cases.
// After every case the server must still answer a correct inference over gRPC and HTTP, and
// its resident memory and thread count must stay bounded.
#include "../integration/harness.hpp"
#include "../integration/raw_stream.hpp"
#include "proc.hpp"

#include "grpc_service.grpc.pb.h"

#include <grpcpp/generic/generic_stub.h>
#include <grpcpp/grpcpp.h>

#include <catch2/catch.hpp>

#include <atomic>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <functional>
#include <memory>
#include <thread>

// One program holds every hostile test file as one translation unit: this file's names stay
// in its own namespace.
namespace hostile_grpc_server {

using namespace iwtest;
namespace fs = std::filesystem;
namespace pb = ::inference;

namespace {

const fs::path source(INFERWIRE_SOURCE_DIR);

using stub_ptr = std::unique_ptr<pb::GRPCInferenceService::Stub>;

stub_ptr make_stub(int port) {
  // Each stub gets its own channel (and so its own connection).
  grpc::ChannelArguments args;
  args.SetInt("grpc.use_local_subchannel_pool", 1);
  args.SetMaxReceiveMessageSize(-1);
  return pb::GRPCInferenceService::NewStub(grpc::CreateCustomChannel(
      "127.0.0.1:" + std::to_string(port), grpc::InsecureChannelCredentials(), args));
}

/// `simple` with INPUT0 = 0..15 and INPUT1 = 1, in raw contents.
pb::ModelInferRequest simple_request() {
  pb::ModelInferRequest q;
  q.set_model_name("simple");
  for (const char* name : {"INPUT0", "INPUT1"}) {
    auto* in = q.add_inputs();
    in->set_name(name);
    in->set_datatype("INT32");
    in->add_shape(1);
    in->add_shape(16);
    std::int32_t v[16];
    for (int i = 0; i < 16; ++i) v[i] = std::strcmp(name, "INPUT0") == 0 ? i : 1;
    q.add_raw_input_contents(std::string(reinterpret_cast<const char*>(v), sizeof v));
  }
  return q;
}

/// OUTPUT0[15] of a `simple` response (0..15 + 1).
std::int32_t last_sum(const pb::ModelInferResponse& r) {
  REQUIRE(r.raw_output_contents_size() >= 1);
  std::int32_t v[16];
  REQUIRE(r.raw_output_contents(0).size() == sizeof v);
  std::memcpy(v, r.raw_output_contents(0).data(), sizeof v);
  return v[15];
}

void still_serving(pb::GRPCInferenceService::Stub& stub, int http_port) {
  grpc::ClientContext ctx;
  ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(10));
  pb::ModelInferResponse r;
  auto st = stub.ModelInfer(&ctx, simple_request(), &r);
  REQUIRE(st.ok());
  CHECK(last_sum(r) == 16);
  CHECK(request(http_port, "GET", "/v2/health/ready").status == 200);
}

std::size_t threads_of(pid_t pid) { return hostile::status_kib(pid, "Threads"); }

/// The requests of `model` waiting for an instance, from the server's metrics.
int pending_requests(int metrics_port, const std::string& model) {
  const std::string m = request(metrics_port, "GET", "/metrics").body;
  const std::string key = "nv_inference_pending_request_count{model=\"" + model + "\"";
  const auto at = m.find(key);
  if (at == std::string::npos) return 0;
  const auto end = m.find('\n', at);
  return std::atoi(m.substr(m.rfind(' ', end) + 1, end - m.rfind(' ', end) - 1).c_str());
}

/// The server's flags for `simple` alone, gRPC on a free port, plus `extra`.
std::vector<std::string> simple_over_grpc(std::vector<std::string> extra) {
  std::vector<std::string> flags{"--model-repository", (source / "reference_server/models").string(),
                                 "--model-control-mode=explicit", "--load-model", "simple", "--allow-grpc=true",
                                 "--grpc-port=0"};
  flags.insert(flags.end(), extra.begin(), extra.end());
  return flags;
}

/// A ModelStreamInfer stream a case keeps open (its context must outlive it).
struct open_stream {
  grpc::ClientContext ctx;
  std::unique_ptr<grpc::ClientReaderWriter<pb::ModelInferRequest, pb::ModelStreamInferResponse>> rw;
};

struct grpc_case {
  const char* name;
  std::function<void()> attack;
};

}  // namespace

TEST_CASE("hostile: inferwire-server's gRPC frontend survives every case of the table", "[hostile][grpc]") {
  server_process s(simple_over_grpc({"--strict-readiness=false"}), false);
  REQUIRE(s.grpc_port() > 0);
  const pid_t pid = s.pid();
  auto stub = make_stub(s.grpc_port());
  still_serving(*stub, s.http_port());
  const auto base_rss = hostile::rss_mib(pid);
  const auto base_threads = threads_of(pid);

  const std::vector<grpc_case> table = {
      {"500 open streams do not hold a thread each",
       [&] {
         // Five connections with 100 streams each; every stream infers once and stays open.
         std::vector<stub_ptr> stubs;
         for (int i = 0; i < 5; ++i) stubs.push_back(make_stub(s.grpc_port()));
         std::vector<std::unique_ptr<open_stream>> streams;
         const auto q = simple_request();
         for (int i = 0; i < 500; ++i) {
           auto os = std::make_unique<open_stream>();
           os->rw = stubs[i % 5]->ModelStreamInfer(&os->ctx);
           REQUIRE(os->rw->Write(q));
           streams.push_back(std::move(os));
         }
         for (auto& os : streams) {
           pb::ModelStreamInferResponse r;
           REQUIRE(os->rw->Read(&r));
           CHECK(r.error_message().empty());
           CHECK(last_sum(r.infer_response()) == 16);
         }
         const auto threads = threads_of(pid);
         INFO("server threads: " << base_threads << " before, " << threads << " with 500 open streams");
         CHECK(threads < base_threads + 32);  // one thread per stream was 500 more
         still_serving(*stub, s.http_port());
         for (auto& os : streams) {
           os->rw->WritesDone();
           CHECK(os->rw->Finish().ok());
         }
       }},
      {"a client that never reads its stream's responses is held back, not buffered",
       [&] {
         // Requests written as fast as the connection takes them, no reply read: the server
         // stops reading once a few replies wait, so flow control stops the writer.
         grpc::ClientContext ctx;
         auto rw = stub->ModelStreamInfer(&ctx);
         std::atomic<int> written{0};
         std::thread writer([&] {
           const auto q = simple_request();
           while (written < 1000000 && rw->Write(q)) ++written;
         });
         // How many requests fit before the writer blocks depends on the HTTP/2 windows gRPC
         // grows for the connection and on how fast this machine is; wait until the count
         // stops moving (bounded), then it must stay put while the server's memory stays low.
         int before = -1;
         for (int i = 0; i < 40 && written != before; ++i) {
           before = written;
           std::this_thread::sleep_for(std::chrono::milliseconds(500));
         }
         const int stalled = written;
         std::this_thread::sleep_for(std::chrono::milliseconds(500));
         INFO(stalled << " requests written before the writer stalled, " << written << " 0.5 s later");
         CHECK(written == stalled);      // the writer is blocked
         CHECK(written < 1000000);       // long before it ran out of requests to send
         CHECK(hostile::rss_mib(pid) < base_rss + 64);
         ctx.TryCancel();
         writer.join();
         rw->Finish();
       }},
      {"10,000 calls opened without their message do not hold 12 KiB each",
       [&] {
         // Four connections each open 2,500 ModelInfer calls whose message never comes: headers
         // of a few bytes that gRPC holds a call of 12 KiB for. A connection may have 256 open
         // at once (--grpc-max-concurrent-streams); the client queues the rest.
         const auto before = hostile::rss_mib(pid);
         grpc::CompletionQueue cq;
         std::vector<std::unique_ptr<grpc::GenericStub>> generic;
         for (int i = 0; i < 4; ++i) {
           grpc::ChannelArguments args;
           args.SetInt("grpc.use_local_subchannel_pool", 1);
           generic.push_back(std::make_unique<grpc::GenericStub>(grpc::CreateCustomChannel(
               "127.0.0.1:" + std::to_string(s.grpc_port()), grpc::InsecureChannelCredentials(), args)));
         }
         struct open_call {
           grpc::ClientContext ctx;
           std::unique_ptr<grpc::GenericClientAsyncReaderWriter> call;
         };
         std::vector<std::unique_ptr<open_call>> calls;
         for (int i = 0; i < 10000; ++i) {
           auto c = std::make_unique<open_call>();
           c->call = generic[i % 4]->PrepareCall(&c->ctx, "/inference.GRPCInferenceService/ModelInfer", &cq);
           c->call->StartCall(c.get());
           calls.push_back(std::move(c));
         }
         // The calls the connections may open start at once; give gRPC time to open them.
         void* tag = nullptr;
         bool ok = false;
         int started = 0;
         while (cq.AsyncNext(&tag, &ok, std::chrono::system_clock::now() + std::chrono::seconds(2)) ==
                grpc::CompletionQueue::GOT_EVENT)
           started += ok ? 1 : 0;
         const auto during = hostile::rss_mib(pid);
         INFO(started << " calls started; server RSS " << before << " MiB before, " << during << " MiB with them open");
         CHECK(started <= 4 * 256);
         CHECK(during < before + 40);  // all 10,000 open took 117 MiB more
         still_serving(*stub, s.http_port());
         for (auto& c : calls) c->ctx.TryCancel();
         cq.Shutdown();
         while (cq.Next(&tag, &ok)) {
         }
       }},
      {"a stream does not keep its large requests once they are answered",
       [&] {
         // Eight streams send one 48 MiB request each and stay open. What protobuf allocated for
         // it stayed with each stream's reused message, outside the in-flight budget.
         const auto before = hostile::rss_mib(pid);
         auto q = simple_request();
         q.mutable_raw_input_contents(0)->assign(std::size_t{48} << 20, '\1');
         std::vector<std::unique_ptr<open_stream>> streams;
         for (int i = 0; i < 8; ++i) {
           auto os = std::make_unique<open_stream>();
           os->rw = stub->ModelStreamInfer(&os->ctx);
           REQUIRE(os->rw->Write(q));
           pb::ModelStreamInferResponse r;
           REQUIRE(os->rw->Read(&r));
           CHECK_THAT(r.error_message(), Catch::Matchers::Contains("input byte size mismatch"));
           streams.push_back(std::move(os));
         }
         // 384 MiB more when each stream kept its request. What the requests left free in the
         // heap's arenas (50-120 MiB, depending on the machine) mostly goes back once the server
         // is quiet (the heap trim, whose own cases are in heap_trim.cpp).
         const auto idle = hostile::settled_rss_mib(pid, before + 64);
         INFO("server RSS " << before << " MiB before, " << idle << " MiB with 8 idle streams");
         CHECK(idle < before + 64);
         // The streams go on with small requests.
         for (auto& os : streams) {
           REQUIRE(os->rw->Write(simple_request()));
           pb::ModelStreamInferResponse r;
           REQUIRE(os->rw->Read(&r));
           CHECK(r.error_message().empty());
           CHECK(last_sum(r.infer_response()) == 16);
           os->rw->WritesDone();
           CHECK(os->rw->Finish().ok());
         }
       }},
      {"a ModelInfer message that does not parse is refused as gRPC refuses it",
       [&] {
         // ModelInfer's messages are parsed by the server, not by gRPC (a raw method): a tag
         // whose varint never ends, a field whose length is 4 GiB, a truncated message.
         grpc::GenericStub generic(grpc::CreateChannel("127.0.0.1:" + std::to_string(s.grpc_port()),
                                                       grpc::InsecureChannelCredentials()));
         grpc::CompletionQueue cq;
         // Past 50,000,000 bytes the server reads the sizes of raw_input_contents entries before
         // the parse (to reserve them): an entry that says it is longer than what follows, and a
         // whole entry followed by a broken tag.
         const std::string big(50'000'016, 'x');
         std::string lying = "\x3a";  // field 7, length-delimited
         std::uint64_t n = big.size() + 8;  // its length as a varint: 8 bytes more than follow
         for (; n >= 0x80; n >>= 7) lying += static_cast<char>((n & 0x7f) | 0x80);
         lying += static_cast<char>(n);
         lying += big;
         inference::ModelInferRequest whole;
         whole.add_raw_input_contents(big);
         const std::string broken = whole.SerializeAsString() + "\xff\xff\xff\xff";
         for (const std::string& bytes : {std::string("\xff\xff\xff\xff", 4), std::string("\x0a\x80\x80\x80\x80\x10", 6),
                                          simple_request().SerializeAsString().substr(0, 40), lying, broken}) {
           grpc::ClientContext ctx;
           grpc::Slice slice(bytes);
           grpc::ByteBuffer in(&slice, 1), out;
           auto call = generic.PrepareUnaryCall(&ctx, "/inference.GRPCInferenceService/ModelInfer", in, &cq);
           call->StartCall();
           grpc::Status st;
           call->Finish(&out, &st, &ctx);
           void* tag = nullptr;
           bool ok = false;
           REQUIRE(cq.Next(&tag, &ok));
           CHECK(st.error_code() == grpc::StatusCode::INTERNAL);
           CHECK(st.error_message() == "Unable to parse request");
         }
         cq.Shutdown();
         void* tag = nullptr;
         bool ok = false;
         while (cq.Next(&tag, &ok)) {
         }
         still_serving(*stub, s.http_port());
       }},
      {"a stream message that does not parse ends the stream as gRPC ends a typed one's",
       [&] {
         // ModelStreamInfer's messages are parsed by the server too: a message that does not
         // parse fails the read, as it does when gRPC parses it, and the stream ends OK with no
         // response. The server keeps serving.
         const auto channel =
             grpc::CreateChannel("127.0.0.1:" + std::to_string(s.grpc_port()), grpc::InsecureChannelCredentials());
         for (const std::string& bytes : {std::string("\xff\xff\xff\xff", 4), std::string("\x0a\x80\x80\x80\x80\x10", 6),
                                          simple_request().SerializeAsString().substr(0, 40)}) {
           inferwire::test::raw_stream stream(channel);
           REQUIRE(stream.opened());
           CHECK(stream.write(bytes));
           std::string reply;
           CHECK_FALSE(stream.read(reply));  // no response: the stream is over
           CHECK(stream.finish().ok());
         }
         still_serving(*stub, s.http_port());
       }},
      {"error texts do not echo a 1 MiB model name",
       [&] {
         auto q = simple_request();
         q.set_model_name(std::string(1 << 20, 'M'));
         grpc::ClientContext ctx;
         pb::ModelInferResponse r;
         auto st = stub->ModelInfer(&ctx, q, &r);
         CHECK(st.error_code() == grpc::StatusCode::NOT_FOUND);
         CHECK(st.error_message().size() < 10000);
       }},
      {"a stream error does not echo a 1 MiB input name",
       [&] {
         auto q = simple_request();
         q.mutable_inputs(0)->set_name(std::string(1 << 20, 'N'));
         grpc::ClientContext ctx;
         auto rw = stub->ModelStreamInfer(&ctx);
         REQUIRE(rw->Write(q));
         pb::ModelStreamInferResponse r;
         REQUIRE(rw->Read(&r));
         CHECK_FALSE(r.error_message().empty());
         CHECK(r.error_message().size() < 10000);
         rw->WritesDone();
         CHECK(rw->Finish().ok());
       }},
      {"100,000 inputs are refused at once",
       [&] {
         auto q = simple_request();
         for (int i = 0; i < 100000; ++i) {
           auto* in = q.add_inputs();
           in->set_name("X" + std::to_string(i));
           in->set_datatype("INT32");
           in->add_shape(1);
         }
         grpc::ClientContext ctx;
         pb::ModelInferResponse r;
         const auto t0 = std::chrono::steady_clock::now();
         auto st = stub->ModelInfer(&ctx, q, &r);
         CHECK(std::chrono::steady_clock::now() - t0 < std::chrono::seconds(3));
         CHECK(st.error_code() == grpc::StatusCode::INVALID_ARGUMENT);
         CHECK(st.error_message() == "request has 100002 inputs, more than the 1024 allowed");
       }},
      {"a duplicate input name is refused",
       [&] {
         auto q = simple_request();
         *q.add_inputs() = q.inputs(0);
         q.add_raw_input_contents(q.raw_input_contents(0));
         grpc::ClientContext ctx;
         pb::ModelInferResponse r;
         auto st = stub->ModelInfer(&ctx, q, &r);
         CHECK(st.error_code() == grpc::StatusCode::INVALID_ARGUMENT);
         CHECK_THAT(st.error_message(), Catch::Matchers::Contains("'INPUT0'"));
       }},
  };

  for (const auto& c : table) {
    INFO("case: " << c.name);
    c.attack();
    REQUIRE(s.running());
    still_serving(*stub, s.http_port());
    // What requests leave free goes back once the server is quiet, except the free end of a
    // thread's heap, which glibc keeps for reuse up to the 64 MiB trim threshold.
    CHECK(hostile::settled_rss_mib(pid, base_rss + 128) < base_rss + 128);
  }
  // Streams that ended give back whatever they held.
  std::this_thread::sleep_for(std::chrono::milliseconds(200));
  CHECK(threads_of(pid) < base_threads + 32);
}

// Shutdown with work everywhere: unary calls of a slow model (one instance, 1.5 s each, so they
// queue), a stream whose slow request is queued too, idle streams. The server drains every
// request it accepted (about 4.5 s here), ends the idle streams, and exits cleanly and in time;
// no client is left hanging.
TEST_CASE("hostile: SIGTERM with gRPC calls running, a stream mid-request and idle streams", "[hostile][grpc]") {
  server_process s({"--model-repository", (source / "reference_server/models").string(), "--model-repository",
                    (source / "tests/integration/models").string(), "--model-control-mode=explicit",
                    "--load-model", "simple", "--load-model", "identity_slow", "--allow-grpc=true", "--grpc-port=0",
                    "--strict-readiness=false"},
                   false);
  REQUIRE(s.grpc_port() > 0);
  pb::ModelInferRequest slow;
  slow.set_model_name("identity_slow");
  {
    auto* in = slow.add_inputs();
    in->set_name("INPUT0");
    in->set_datatype("INT32");
    in->add_shape(4);
    const std::int32_t v[4] = {1, 2, 3, 4};
    slow.add_raw_input_contents(std::string(reinterpret_cast<const char*>(v), sizeof v));
  }
  const auto deadline = [] { return std::chrono::system_clock::now() + std::chrono::seconds(20); };

  // Two unary calls of the slow model, on their own connections.
  std::vector<grpc::StatusCode> unary(2, grpc::StatusCode::UNKNOWN);
  std::vector<std::thread> callers;
  for (std::size_t i = 0; i < unary.size(); ++i)
    callers.emplace_back([&, i] {
      auto stub = make_stub(s.grpc_port());
      grpc::ClientContext ctx;
      ctx.set_deadline(deadline());
      pb::ModelInferResponse r;
      unary[i] = stub->ModelInfer(&ctx, slow, &r).error_code();
    });
  // Two idle streams (one inference each, then open) and one whose slow request runs.
  auto stub = make_stub(s.grpc_port());
  std::vector<std::unique_ptr<open_stream>> streams;
  for (int i = 0; i < 3; ++i) {
    auto os = std::make_unique<open_stream>();
    os->ctx.set_deadline(deadline());
    os->rw = stub->ModelStreamInfer(&os->ctx);
    REQUIRE(os->rw->Write(i < 2 ? simple_request() : slow));
    if (i < 2) {
      pb::ModelStreamInferResponse r;
      REQUIRE(os->rw->Read(&r));
      CHECK(r.error_message().empty());
    }
    streams.push_back(std::move(os));
  }
  // Wait until the server holds the slow requests (one runs, the others wait for the instance).
  const auto pending = [&] { return pending_requests(s.metrics_port(), "identity_slow"); };
  for (int i = 0; i < 500 && pending() < 2; ++i) std::this_thread::sleep_for(std::chrono::milliseconds(10));
  REQUIRE(pending() >= 2);
  std::this_thread::sleep_for(std::chrono::milliseconds(200));

  const auto t0 = std::chrono::steady_clock::now();
  CHECK(s.stop() == 0);
  const auto took = std::chrono::steady_clock::now() - t0;
  INFO("exit took " << std::chrono::duration_cast<std::chrono::milliseconds>(took).count() << " ms");
  CHECK(took < std::chrono::seconds(10));

  for (auto& t : callers) t.join();
  for (auto code : unary) {
    INFO("unary status " << code);
    CHECK(code == grpc::StatusCode::OK);  // drained
  }
  for (std::size_t i = 0; i < streams.size(); ++i) {
    auto& os = streams[i];
    os->rw->WritesDone();
    pb::ModelStreamInferResponse r;
    int responses = 0;
    while (os->rw->Read(&r)) ++responses;
    const auto st = os->rw->Finish();
    INFO("stream " << i << " status " << st.error_code() << " " << st.error_message());
    CHECK(st.error_code() != grpc::StatusCode::DEADLINE_EXCEEDED);
    if (i == 2) CHECK(responses == 1);  // its request was drained and answered
  }
}

namespace {
/// repeat_int32 with IN = `values`, each response after the matching wait of `delays_ms`.
pb::ModelInferRequest repeat_request(std::vector<std::int32_t> values, std::vector<std::uint32_t> delays_ms) {
  pb::ModelInferRequest q;
  q.set_model_name("repeat_int32");
  auto add = [&q](const char* name, const char* type, const void* data, std::size_t n) {
    auto* in = q.add_inputs();
    in->set_name(name);
    in->set_datatype(type);
    in->add_shape(static_cast<std::int64_t>(n));
    q.add_raw_input_contents(std::string(static_cast<const char*>(data), 4 * n));
  };
  const std::uint32_t wait = 0;
  add("IN", "INT32", values.data(), values.size());
  add("DELAY", "UINT32", delays_ms.data(), delays_ms.size());
  add("WAIT", "UINT32", &wait, 1);
  (*q.mutable_parameters())["triton_enable_empty_final_response"].set_bool_param(true);
  return q;
}

/// The first OUT of a stream response.
std::int32_t first_out(const pb::ModelStreamInferResponse& r) {
  INFO(r.error_message());
  REQUIRE(r.error_message().empty());
  REQUIRE(r.infer_response().raw_output_contents_size() >= 1);
  std::int32_t out = 0;
  std::memcpy(&out, r.infer_response().raw_output_contents(0).data(), 4);
  return out;
}

/// inferwire-server over the decoupled models, gRPC on, plus `flag`.
std::vector<std::string> decoupled_over_grpc(std::string flag) {
  return {"--model-repository", (source / "reference_server/models_decoupled").string(), "--allow-grpc=true",
          "--grpc-port=0", std::move(flag)};
}

/// A stream asking repeat_int32 for 100,000 responses, of which the client reads the first and
/// then none: the model blocks once 16 of them wait (HTTP/2 flow control holds the rest back).
std::unique_ptr<open_stream> unread_stream(pb::GRPCInferenceService::Stub& stub, std::chrono::seconds deadline) {
  auto os = std::make_unique<open_stream>();
  os->ctx.set_deadline(std::chrono::system_clock::now() + deadline);
  os->rw = stub.ModelStreamInfer(&os->ctx);
  const std::vector<std::int32_t> values(100000, 7);
  REQUIRE(os->rw->Write(repeat_request(values, std::vector<std::uint32_t>(values.size(), 0))));
  pb::ModelStreamInferResponse first;
  REQUIRE(os->rw->Read(&first));
  CHECK(first_out(first) == 7);
  return os;
}
}  // namespace

// A decoupled request may ask its model to wait DELAY ms per element, up to 2^32-1 (49 days),
// on the model's one instance. That wait must end when its client leaves (or the next request
// for the model waits behind it for weeks), and when the server's exit timeout expires (or
// SIGTERM never ends the process: its execution threads are joined before it exits).
TEST_CASE("hostile: a request that asks its model to wait 49 days holds neither the model nor the exit",
          "[hostile][grpc]") {
  server_process s(decoupled_over_grpc("--exit-timeout-secs=1"), false);
  REQUIRE(s.grpc_port() > 0);
  auto stub = make_stub(s.grpc_port());
  const std::uint32_t forever = 0xFFFFFFFFu;
  // Requests queued for the model's one instance: with a request behind it, the first runs.
  const auto queued = [&] { return pending_requests(s.metrics_port(), "repeat_int32"); };
  const auto open = [&](const pb::ModelInferRequest& q) {
    auto os = std::make_unique<open_stream>();
    os->ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(20));
    os->rw = stub->ModelStreamInfer(&os->ctx);
    REQUIRE(os->rw->Write(q));
    return os;
  };
  // A request that answers its first element at once and then waits: once that answer is
  // read, the request runs and holds the instance. A second request then waits for it.
  const auto waiting_behind = [&](std::int32_t first, std::int32_t second) {
    auto holder = open(repeat_request({first, first + 1}, {0, forever}));
    pb::ModelStreamInferResponse r;
    REQUIRE(holder->rw->Read(&r));
    CHECK(first_out(r) == first);
    auto behind = open(repeat_request({second}, {0}));
    for (int i = 0; i < 500 && queued() < 1; ++i) std::this_thread::sleep_for(std::chrono::milliseconds(10));
    REQUIRE(queued() == 1);
    return std::pair(std::move(holder), std::move(behind));
  };

  // A client asks for the long wait; a second request waits for the instance; the first
  // client goes away: the second runs.
  {
    auto [long_wait, next] = waiting_behind(1, 5);
    long_wait->ctx.TryCancel();
    pb::ModelStreamInferResponse r;
    while (long_wait->rw->Read(&r)) {
    }
    CHECK(long_wait->rw->Finish().error_code() == grpc::StatusCode::CANCELLED);
    REQUIRE(next->rw->Read(&r));
    CHECK(first_out(r) == 5);
    next->rw->WritesDone();
    while (next->rw->Read(&r)) {
    }
    CHECK(next->rw->Finish().ok());
  }

  // A client that asks for the long wait and stays, another request behind it: SIGTERM ends
  // the server after the exit timeout (1 s) all the same.
  auto [stays, behind] = waiting_behind(2, 3);
  const auto t0 = std::chrono::steady_clock::now();
  CHECK(s.stop() == 0);
  const auto took = std::chrono::steady_clock::now() - t0;
  INFO("exit took " << std::chrono::duration_cast<std::chrono::milliseconds>(took).count() << " ms");
  CHECK(took < std::chrono::seconds(8));  // about 2 s: the timeout, then gRPC's second for what is left
  for (auto* os : {stays.get(), behind.get()}) {
    os->ctx.TryCancel();
    pb::ModelStreamInferResponse r;
    while (os->rw->Read(&r)) {
    }
    (void)os->rw->Finish();
  }
}

// A decoupled request whose client does not read its responses: the model blocks once 16 of
// them wait (HTTP/2 flow control holds the rest back). SIGTERM must still end the server.
TEST_CASE("hostile: SIGTERM while a decoupled model waits for a client that does not read", "[hostile][grpc]") {
  server_process s(decoupled_over_grpc("--exit-timeout-secs=1"), false);
  REQUIRE(s.grpc_port() > 0);
  auto stub = make_stub(s.grpc_port());
  auto unread = unread_stream(*stub, std::chrono::seconds(30));
  std::this_thread::sleep_for(std::chrono::milliseconds(300));  // it fills the queue and waits
  const auto t0 = std::chrono::steady_clock::now();
  CHECK(s.stop() == 0);
  const auto took = std::chrono::steady_clock::now() - t0;
  INFO("exit took " << std::chrono::duration_cast<std::chrono::milliseconds>(took).count() << " ms");
  // About 5 s: the exit timeout, gRPC's second, the calls' two. The bound is what the case
  // tells apart: a server that waits for the client has its 30 s deadline to wait. (Under the
  // test command's parallel load one exit took 10.3 s; alone it takes 5.1 s every time.)
  CHECK(took < std::chrono::seconds(15));
  unread->ctx.TryCancel();
  pb::ModelStreamInferResponse r;
  while (unread->rw->Read(&r)) {
  }
  (void)unread->rw->Finish();
}

// The same client with --stall-timeout-secs=2: its stream is cancelled once it has taken no
// response for 2 s, so the model stops and frees its one instance for the next request.
TEST_CASE("hostile: a decoupled stream whose client stops reading is cancelled after the stall timeout",
          "[hostile][grpc]") {
  server_process s(decoupled_over_grpc("--stall-timeout-secs=2"), false);
  REQUIRE(s.grpc_port() > 0);
  auto stub = make_stub(s.grpc_port());
  auto stalled = unread_stream(*stub, std::chrono::seconds(60));
  const auto t0 = std::chrono::steady_clock::now();
  open_stream next;
  next.ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(30));
  next.rw = stub->ModelStreamInfer(&next.ctx);
  REQUIRE(next.rw->Write(repeat_request({9}, {0})));
  pb::ModelStreamInferResponse r;
  REQUIRE(next.rw->Read(&r));
  const auto waited = std::chrono::steady_clock::now() - t0;
  INFO("the request behind waited " << std::chrono::duration_cast<std::chrono::milliseconds>(waited).count() << " ms");
  CHECK(first_out(r) == 9);
  CHECK(waited > std::chrono::milliseconds(1500));
  CHECK(waited < std::chrono::seconds(8));
  next.rw->WritesDone();
  while (next.rw->Read(&r)) {
  }
  CHECK(next.rw->Finish().ok());
  // The stalled stream was cancelled by the server.
  while (stalled->rw->Read(&r)) {
  }
  CHECK(stalled->rw->Finish().error_code() == grpc::StatusCode::CANCELLED);
}

TEST_CASE("hostile: --grpc-allow-compression=false refuses compressed messages before inflating them",
          "[hostile][grpc]") {
  server_process s(simple_over_grpc({"--grpc-allow-compression=false"}), false);
  REQUIRE(s.grpc_port() > 0);
  const pid_t pid = s.pid();
  auto stub = make_stub(s.grpc_port());
  still_serving(*stub, s.http_port());
  REQUIRE(hostile::reset_peak(pid));
  const auto before = hostile::peak_rss_mib(pid);
  // 256 MiB of zeros: about 256 KB of gzip on the wire, which gRPC would inflate in full.
  pb::ModelInferRequest q = simple_request();
  q.set_raw_input_contents(0, std::string(std::size_t{256} << 20, '\0'));
  for (auto algorithm : {GRPC_COMPRESS_GZIP, GRPC_COMPRESS_DEFLATE}) {
    grpc::ClientContext ctx;
    ctx.set_compression_algorithm(algorithm);
    pb::ModelInferResponse r;
    const auto st = stub->ModelInfer(&ctx, q, &r);
    CHECK(st.error_code() == grpc::StatusCode::UNIMPLEMENTED);
    CHECK(st.error_message().find("is disabled") != std::string::npos);
  }
  CHECK(hostile::peak_rss_mib(pid) < before + 64);
  // The same call uncompressed reaches the model (and its size check); the server serves on.
  {
    grpc::ClientContext ctx;
    pb::ModelInferResponse r;
    const auto st = stub->ModelInfer(&ctx, q, &r);
    CHECK(st.error_code() == grpc::StatusCode::INVALID_ARGUMENT);
    CHECK(st.error_message().find("input byte size mismatch") != std::string::npos);
  }
  still_serving(*stub, s.http_port());
}

// Typed contents take more memory once parsed than on the wire (an INT64 zero: one byte sent,
// eight held), and a queued call keeps them: they count against the in-flight budget, as an
// HTTP request's JSON tensors do. Contents already in their datatype's width are used in place.
TEST_CASE("hostile: typed contents count against the in-flight budget", "[hostile][grpc]") {
  server_process s({"--model-repository", (source / "reference_server/models").string(), "--model-repository",
                    (source / "tests/integration/models").string(), "--model-control-mode=explicit",
                    "--load-model", "simple", "--load-model", "identity_int64", "--load-model", "identity_fp32",
                    "--load-model", "identity_bool",
                    "--allow-grpc=true", "--grpc-port=0", "--http-max-inflight-bytes=67108864"},
                   false);
  REQUIRE(s.grpc_port() > 0);
  auto stub = make_stub(s.grpc_port());
  auto typed = [](int elements, std::int64_t value) {
    pb::ModelInferRequest q;
    q.set_model_name("identity_int64");
    auto* in = q.add_inputs();
    in->set_name("INPUT0");
    in->set_datatype("INT64");
    in->add_shape(elements);
    in->mutable_contents()->mutable_int64_contents()->Resize(elements, value);
    return q;
  };
  const std::string exhausted =
      "the server's in-flight request memory (67108864 bytes, --http-max-inflight-bytes) is exhausted; retry later";

  // 16 MiB on the wire, 128 MiB once parsed: refused (UNAVAILABLE, as a full queue is).
  const pb::ModelInferRequest big = typed(16 << 20, 0);
  REQUIRE(big.ByteSizeLong() < (std::size_t{17} << 20));
  {
    grpc::ClientContext ctx;
    pb::ModelInferResponse r;
    const auto st = stub->ModelInfer(&ctx, big, &r);
    CHECK(st.error_code() == grpc::StatusCode::UNAVAILABLE);
    CHECK(st.error_message() == exhausted);
  }
  // In a stream, the error is the response's and the stream goes on.
  {
    grpc::ClientContext ctx;
    auto stream = stub->ModelStreamInfer(&ctx);
    pb::ModelStreamInferResponse out;
    REQUIRE(stream->Write(big));
    REQUIRE(stream->Read(&out));
    CHECK(out.error_message() == exhausted);
    REQUIRE(stream->Write(simple_request()));
    REQUIRE(stream->Read(&out));
    CHECK(out.error_message().empty());
    CHECK(last_sum(out.infer_response()) == 16);
    stream->WritesDone();
    CHECK(stream->Finish().ok());
  }
  // Within the budget, contents of their datatype's own width are used in place; each comes
  // back as sent, element for element.
  constexpr int n = 1 << 20;
  auto round_trip = [&](const char* model, const char* datatype, auto fill) {
    INFO(model);
    pb::ModelInferRequest q;
    q.set_model_name(model);
    auto* in = q.add_inputs();
    in->set_name("INPUT0");
    in->set_datatype(datatype);
    in->add_shape(n);
    const std::string expected = fill(*in->mutable_contents());
    grpc::ClientContext ctx;
    pb::ModelInferResponse r;
    const auto st = stub->ModelInfer(&ctx, q, &r);
    REQUIRE(st.ok());
    REQUIRE(r.raw_output_contents_size() == 1);
    CHECK(r.raw_output_contents(0) == expected);
  };
  auto as_bytes = [](const auto& values) {
    return std::string(reinterpret_cast<const char*>(values.data()), values.size() * sizeof(values[0]));
  };
  round_trip("identity_int64", "INT64", [&](pb::InferTensorContents& c) {
    std::vector<std::int64_t> v(n);
    for (int i = 0; i < n; ++i) v[i] = std::int64_t{i} * 7 - 500000;
    c.mutable_int64_contents()->Add(v.begin(), v.end());
    return as_bytes(v);
  });
  round_trip("identity_fp32", "FP32", [&](pb::InferTensorContents& c) {
    std::vector<float> v(n);
    for (int i = 0; i < n; ++i) v[i] = static_cast<float>(i) * 0.5f - 3.0f;
    c.mutable_fp32_contents()->Add(v.begin(), v.end());
    return as_bytes(v);
  });
  round_trip("identity_bool", "BOOL", [&](pb::InferTensorContents& c) {
    std::string v(n, '\0');
    for (int i = 0; i < n; ++i) {
      v[i] = i % 3 == 0 ? '\1' : '\0';
      c.add_bool_contents(i % 3 == 0);
    }
    return v;
  });
  still_serving(*stub, s.http_port());
}

}  // namespace hostile_grpc_server
