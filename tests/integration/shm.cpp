// SPDX-License-Identifier: Apache-2.0
// System and CUDA shared memory through the real server and the SDK (v2-protocol §5, §10.4):
// registration checks and texts, status, unregister (deferred while in use), inference with
// inputs and outputs in regions for every data type, and the CPU-only CUDA behaviour.
#include <inferwire/http/client.hpp>
#include <inferwire/shm/system_region.hpp>
#include <inferwire/shm/vmm_channel.hpp>

#include "harness.hpp"

#include <boost/asio/io_context.hpp>
#include <boost/asio/use_future.hpp>

#include <catch2/catch.hpp>

#include <algorithm>
#include <cstring>
#include <filesystem>
#include <future>
#include <numeric>
#include <thread>

#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

using namespace iwtest;
namespace v2 = inferwire::v2;
namespace ih = inferwire::http;
namespace shm = inferwire::shm;
using inferwire::data_type;
using namespace std::chrono_literals;

namespace {

server_process& shm_server() {
  static server_process s({"--allow-client-shm=true"});
  return s;
}

ih::client client_of(const server_process& s) {
  return ih::client("127.0.0.1", std::to_string(s.http_port()));
}

/// A unique key per test process and name.
std::string key(std::string_view name) {
  return "/iwtest_" + std::to_string(::getpid()) + "_" + std::string(name);
}

/// The server's text and HTTP status of a failed call.
struct failure {
  unsigned status = 0;
  std::string message;
};
template <class F>
failure fails(F&& f) {
  ih::error_code ec;
  f(ec);
  REQUIRE(ec);
  return {ih::server_status(ec), ec.message()};
}

}  // namespace

TEST_CASE("shm: registration is refused unless --allow-client-shm is on", "[shm]") {
  auto c = client_of(shared_server());
  const std::string disabled =
      "Client shared memory is disabled. Start the server with '--allow-client-shm=true' to "
      "enable.";
  auto region = shm::system_region::create(key("disabled"), 4096);
  auto f = fails([&](auto& ec) { c.register_system_shared_memory(region.register_request("r"), ec); });
  CHECK(f.status == 501);
  CHECK(f.message == disabled);
  f = fails([&](auto& ec) { c.unregister_system_shared_memory(ec); });
  CHECK(f.status == 501);
  f = fails([&](auto& ec) { c.unregister_cuda_shared_memory("x", ec); });
  CHECK(f.message == disabled);
  // Status still works: nothing registered.
  CHECK(c.system_shared_memory_status().empty());
  CHECK(c.cuda_shared_memory_status().empty());
}

TEST_CASE("shm: system registration checks and texts", "[shm]") {
  auto& s = shm_server();
  auto c = client_of(s);
  c.unregister_system_shared_memory();
  const long page = ::sysconf(_SC_PAGESIZE);
  auto region = shm::system_region::create(key("reg"), static_cast<std::size_t>(page) * 2);
  const auto size = region.size();

  // Raw HTTP: the URL needs a region, the body a key and a byte_size.
  auto r = request(s.http_port(), "POST", "/v2/systemsharedmemory/register",
                   R"({"key":"/x","byte_size":8})");
  CHECK(r.status == 400);
  CHECK(error_of(r) == "'region name' is necessary to register system shared memory region");
  r = request(s.http_port(), "POST", "/v2/systemsharedmemory/region/a/register", R"({"byte_size":8})");
  CHECK(r.status == 400);
  CHECK(error_of(r) == "Shared memory register request has no 'key' field");
  r = request(s.http_port(), "POST", "/v2/systemsharedmemory/region/a/register", R"({"key":"/x"})");
  CHECK(r.status == 400);
  CHECK(error_of(r) == "Shared memory register request has no 'byte_size' field");
  r = request(s.http_port(), "POST", "/v2/systemsharedmemory/region/a/register", "");
  CHECK(r.status >= 400);
  r = request(s.http_port(), "POST", "/v2/systemsharedmemory/region/a/register",
              R"({"key":5,"byte_size":8})");
  CHECK(r.status >= 400);
  r = request(s.http_port(), "GET", "/v2/systemsharedmemory/region/a/register");
  CHECK(r.status == 405);

  auto reg = [&](std::string name, std::string k, std::uint64_t offset, std::uint64_t bytes) {
    return fails([&](auto& ec) {
      c.register_system_shared_memory(v2::system_shm_register_request{name, k, offset, bytes}, ec);
    });
  };
  auto f = reg("a", "///", 0, 8);
  CHECK(f.status == 400);
  CHECK(f.message == "cannot register shared memory region 'a' - invalid shm key '///'");
  f = reg("a", "//triton_python_backend_shm_region_1", 0, 8);
  CHECK(f.message == "cannot register shared memory region 'a' with key "
                     "'//triton_python_backend_shm_region_1' as the key contains the reserved "
                     "prefix 'triton_python_backend_shm_region_'");
  f = reg("a", key("never_created"), 0, 8);
  CHECK(f.status == 500);
  CHECK(f.message == "Unable to open shared memory region: '" + key("never_created") + "'");
  // Out of bounds, as upstream's QA provokes it.
  const std::string invalid = "failed to register shared memory region 'a': invalid args";
  CHECK(reg("a", region.key(), 0, size + 1).message == invalid);
  CHECK(reg("a", region.key(), 1, size).message == invalid);
  CHECK(reg("a", region.key(), size + 1, 0).message == invalid);
  f = reg("a", region.key(), size, 1);
  CHECK(f.status == 400);
  CHECK(f.message == invalid);
  // mmap rules: page-aligned offsets, non-zero sizes.
  f = reg("a", region.key(), 1, 8);
  CHECK(f.status == 400);
  CHECK(f.message == "failed to register shared memory region 'a': unable to process address "
                     "spaceInvalid argument");
  CHECK(reg("a", region.key(), 0, 0).message.find("unable to process address space") != std::string::npos);

  // Success, duplicates, status.
  c.register_system_shared_memory(region.register_request("a", 0, 64));
  c.register_system_shared_memory(region.register_request("b", static_cast<std::size_t>(page), 128));
  f = reg("a", region.key(), 0, 8);
  CHECK(f.status == 400);
  CHECK(f.message == "shared memory region 'a' already in manager");
  auto all = c.system_shared_memory_status();
  REQUIRE(all.size() == 2);
  CHECK(all[0] == v2::system_shm_status{"a", region.key(), 0, 64});
  CHECK(all[1] == v2::system_shm_status{"b", region.key(), static_cast<std::uint64_t>(page), 128});
  auto one = c.system_shared_memory_status("b");
  REQUIRE(one.size() == 1);
  CHECK(one[0].name == "b");
  f = fails([&](auto& ec) { c.system_shared_memory_status("zzz", ec); });
  CHECK(f.status == 404);
  CHECK(f.message == "Unable to find system shared memory region: 'zzz'");
  f = fails([&](auto& ec) { c.cuda_shared_memory_status("a", ec); });
  CHECK(f.status == 404);
  CHECK(f.message == "The region named 'a' is registered as system shared memory, not CUDA shared memory");
  CHECK(c.cuda_shared_memory_status().empty());

  // Unregister: unknown names and the other kind are no-ops; a name removes one; none, all.
  c.unregister_system_shared_memory("zzz");
  c.unregister_cuda_shared_memory("a");
  CHECK(c.system_shared_memory_status().size() == 2);
  c.unregister_system_shared_memory("a");
  CHECK(c.system_shared_memory_status().size() == 1);
  c.unregister_system_shared_memory();
  CHECK(c.system_shared_memory_status().empty());
}

TEST_CASE("shm: CUDA regions on a server without a GPU", "[shm]") {
  auto& s = shm_server();
  auto c = client_of(s);
  // Unregister-all succeeds (clients begin with it) and the extension stays advertised.
  c.unregister_cuda_shared_memory();
  auto meta = c.server_metadata();
  CHECK(std::find(meta.extensions.begin(), meta.extensions.end(), "cuda_shared_memory") !=
        meta.extensions.end());
  auto r = request(s.http_port(), "POST", "/v2/cudasharedmemory/region/c/register",
                   R"({"raw_handle":{"b64":"AAAA"},"device_id":0,"byte_size":64})");
  CHECK(r.status == 400);
  CHECK(error_of(r) == "'raw_handle' must be a valid base64 encoded cudaIpcMemHandle_t");
  r = request(s.http_port(), "POST", "/v2/cudasharedmemory/region/c/register",
              R"({"device_id":0,"byte_size":64})");
  CHECK(error_of(r) == "Shared memory register request has no 'raw_handle' field");
  r = request(s.http_port(), "POST", "/v2/cudasharedmemory/register",
              R"({"raw_handle":{"b64":"AAAA"},"device_id":0,"byte_size":64})");
  CHECK(error_of(r) == "'region name' is necessary to register cuda shared memory region");
  if (std::getenv("INFERWIRE_EXPECT_GPU") == nullptr) {
    ih::error_code ec;
    c.register_cuda_shared_memory(v2::cuda_shm_register_request{"c", std::string(64, '\0'), 0, 64}, ec);
    // Without a GPU: the spec's text. With one, a zero handle is simply invalid.
    CHECK(ih::server_status(ec) == 400);
    CHECK((ec.message() == "failed to register CUDA shared memory region: 'c', GPUs not supported" ||
           ec.message() == "failed to register shared memory region: invalid args"));
  }
  auto f = fails([&](auto& ec) { c.cuda_shared_memory_status("c", ec); });
  CHECK(f.status == 404);
  CHECK(f.message == "Unable to find cuda shared memory region: 'c'");
}

TEST_CASE("shm: simple through regions at offsets, as Triton's clients use them", "[shm]") {
  auto& s = shm_server();
  auto c = client_of(s);
  c.unregister_system_shared_memory();
  auto in = shm::system_region::create(key("input_simple"), 128);
  auto out = shm::system_region::create(key("output_simple"), 128);
  auto a = in.as<std::int32_t>(0, 16);
  auto b = in.as<std::int32_t>(64, 16);
  std::iota(a.begin(), a.end(), 0);
  std::fill(b.begin(), b.end(), 1);
  c.register_system_shared_memory(in.register_request("input_data"));
  c.register_system_shared_memory(out.register_request("output_data"));

  v2::infer_request q;
  q.inputs.push_back(v2::make_shm_input("INPUT0", data_type::int32, {1, 16}, {"input_data", 0, 64}));
  q.inputs.push_back(v2::make_shm_input("INPUT1", data_type::int32, {1, 16}, {"input_data", 64, 64}));
  q.outputs.push_back(v2::make_shm_output("OUTPUT0", {"output_data", 0, 64}));
  q.outputs.push_back(v2::make_shm_output("OUTPUT1", {"output_data", 64, 64}));
  auto result = c.infer("simple", q);
  REQUIRE(result.outputs().size() == 2);
  for (const auto& o : result.outputs()) {
    CHECK(o.datatype == data_type::int32);
    CHECK(o.shape == inferwire::shape_t{1, 16});
    CHECK(o.data.empty());
  }
  // The JSON lists shm outputs with name, datatype and shape only.
  CHECK(result.body().find("\"parameters\"") == std::string::npos);
  CHECK(result.body().find("\"data\"") == std::string::npos);
  auto sum = out.as<std::int32_t>(0, 16);
  auto diff = out.as<std::int32_t>(64, 16);
  for (int i = 0; i < 16; ++i) {
    CHECK(sum[i] == i + 1);
    CHECK(diff[i] == i - 1);
  }

  // binary_data:false beside a region is accepted (the Python client sends it).
  std::string body = R"({"inputs":[{"name":"INPUT0","datatype":"INT32","shape":[1,16],"parameters":{"shared_memory_region":"input_data","shared_memory_byte_size":64}},)"
                     R"({"name":"INPUT1","datatype":"INT32","shape":[1,16],"parameters":{"shared_memory_region":"input_data","shared_memory_offset":64,"shared_memory_byte_size":64}}],)"
                     R"("outputs":[{"name":"OUTPUT0","parameters":{"binary_data":false,"shared_memory_region":"output_data","shared_memory_byte_size":64}}]})";
  std::fill(sum.begin(), sum.end(), 0);
  auto r = request(s.http_port(), "POST", "/v2/models/simple/infer", body);
  CHECK(r.status == 200);
  CHECK(r.body.find(R"("outputs":[{"name":"OUTPUT0","datatype":"INT32","shape":[1,16]}])") != std::string::npos);
  CHECK(sum[15] == 16);

  // Alternating with ordinary inference, then after unregistering.
  std::vector<std::int32_t> x(16, 3), y(16, 2);
  v2::infer_request plain;
  plain.inputs.push_back(v2::make_input("INPUT0", x, {1, 16}));
  plain.inputs.push_back(v2::make_input("INPUT1", y, {1, 16}));
  CHECK(c.infer("simple", plain).as<std::int32_t>("OUTPUT0")[0] == 5);
  CHECK(c.infer("simple", q).outputs().size() == 2);
  c.unregister_system_shared_memory();
  CHECK(c.infer("simple", plain).as<std::int32_t>("OUTPUT1")[0] == 1);
  auto f = fails([&](auto& ec) { c.infer("simple", q, ec); });
  CHECK(f.status == 404);
  CHECK(f.message == "Unable to find shared memory region: 'input_data'");
}

TEST_CASE("shm: inference errors with regions", "[shm]") {
  auto& s = shm_server();
  auto c = client_of(s);
  c.unregister_system_shared_memory();
  auto in = shm::system_region::create(key("err_in"), 256);
  auto out = shm::system_region::create(key("err_out"), 128);
  c.register_system_shared_memory(in.register_request("in", 0, 128));
  c.register_system_shared_memory(out.register_request("out"));
  auto request_with = [](v2::shm_ref a, v2::shm_ref b, v2::shm_ref o) {
    v2::infer_request q;
    q.inputs.push_back(v2::make_shm_input("INPUT0", data_type::int32, {1, 16}, std::move(a)));
    q.inputs.push_back(v2::make_shm_input("INPUT1", data_type::int32, {1, 16}, std::move(b)));
    q.outputs.push_back(v2::make_shm_output("OUTPUT0", std::move(o)));
    return q;
  };
  auto infer = [&](const v2::infer_request& q) { return fails([&](auto& ec) { c.infer("simple", q, ec); }); };
  auto f = infer(request_with({"nope", 0, 64}, {"in", 64, 64}, {"out", 0, 64}));
  CHECK(f.status == 404);
  CHECK(f.message == "Unable to find shared memory region: 'nope'");
  f = infer(request_with({"in", 128, 64}, {"in", 64, 64}, {"out", 0, 64}));
  CHECK(f.status == 400);
  CHECK(f.message == "Invalid offset for shared memory region: 'in'");
  f = infer(request_with({"in", 0, 64}, {"in", 64, 64}, {"out", 32, 18446744073709551584ull}));
  CHECK(f.status == 400);
  CHECK(f.message == "Integer overflow detected: byte_size (18446744073709551584) + offset (32) "
                     "exceeds maximum value (18446744073709551615) for region 'out'");
  f = infer(request_with({"in", 0, 64}, {"in", 96, 64}, {"out", 0, 64}));
  CHECK(f.status == 400);
  CHECK(f.message == "Invalid offset + byte size for shared memory region: 'in'");
  f = infer(request_with({"in", 0, 64}, {"in", 0, 128}, {"out", 0, 64}));
  CHECK(f.status == 400);
  CHECK(f.message == "[request id: <id_unknown>] input byte size mismatch for input 'INPUT1' for model 'simple'. Expected 64, got 128");
  f = infer(request_with({"in", 0, 64}, {"in", 64, 64}, {"out", 0, 32}));
  CHECK(f.status == 500);
  CHECK(f.message == "shared memory size specified with the request for output 'OUTPUT0' (32 "
                     "bytes) should be at least 64 bytes to hold the results");
  // Bad parameter values over raw HTTP.
  auto r = request(s.http_port(), "POST", "/v2/models/simple/infer",
                   R"({"inputs":[{"name":"INPUT0","datatype":"INT32","shape":[1,16],"parameters":{"shared_memory_region":"in","shared_memory_offset":"x","shared_memory_byte_size":64}}]})");
  CHECK(r.status >= 400);
  CHECK(error_of(r).find("shared_memory_offset") != std::string::npos);
  // The server is still fine, and so are the regions.
  CHECK(c.system_shared_memory_status().size() == 2);
  CHECK(c.server_live());
  c.unregister_system_shared_memory();
}

TEST_CASE("shm: every data type through regions", "[shm]") {
  auto& s = shm_server();
  auto c = client_of(s);
  c.unregister_system_shared_memory();
  auto in = shm::system_region::create(key("types_in"), 4096);
  auto out = shm::system_region::create(key("types_out"), 4096);
  c.register_system_shared_memory(in.register_request("tin"));
  c.register_system_shared_memory(out.register_request("tout"));
  struct model_case {
    const char* model;
    data_type type;
  };
  const model_case cases[] = {{"identity_fp32", data_type::fp32}, {"identity_int64", data_type::int64},
                              {"identity_bool", data_type::bool_}, {"identity_fp16", data_type::fp16},
                              {"identity_bf16", data_type::bf16}};
  for (const auto& mc : cases) {
    INFO(mc.model);
    const std::size_t bytes = 8 * inferwire::element_size(mc.type);
    for (std::size_t i = 0; i < bytes; ++i)
      in.data()[i] = static_cast<std::byte>(mc.type == data_type::bool_ ? (i % 2) : (i * 7 + 3));
    std::memset(out.data(), 0, bytes);
    v2::infer_request q;
    q.inputs.push_back(v2::make_shm_input("INPUT0", mc.type, {8}, {"tin", 0, bytes}));
    q.outputs.push_back(v2::make_shm_output("OUTPUT0", {"tout", 0, bytes}));
    auto result = c.infer(mc.model, q);
    REQUIRE(result.outputs().size() == 1);
    CHECK(result.outputs()[0].datatype == mc.type);
    CHECK(std::memcmp(in.data(), out.data(), bytes) == 0);
  }
  // Every numeric type of `simple`'s arithmetic: INT8 through simple_int8.
  {
    auto a = in.as<std::int8_t>(0, 16);
    auto b = in.as<std::int8_t>(64, 16);
    for (int i = 0; i < 16; ++i) {
      a[i] = static_cast<std::int8_t>(120 + i);
      b[i] = 10;
    }
    v2::infer_request q;
    q.inputs.push_back(v2::make_shm_input("INPUT0", data_type::int8, {1, 16}, {"tin", 0, 16}));
    q.inputs.push_back(v2::make_shm_input("INPUT1", data_type::int8, {1, 16}, {"tin", 64, 16}));
    q.outputs.push_back(v2::make_shm_output("OUTPUT0", {"tout", 0, 16}));
    q.outputs.push_back(v2::make_shm_output("OUTPUT1", {"tout", 64, 16}));
    c.infer("simple_int8", q);
    auto sum = out.as<std::int8_t>(0, 16);
    CHECK(sum[0] == static_cast<std::int8_t>(-126));  // 130 wraps
    CHECK(out.as<std::int8_t>(64, 16)[5] == 115);
  }
  // BYTES: serialised elements in, an exactly-sized serialised result out (four regions).
  {
    c.unregister_system_shared_memory();
    std::vector<std::string> xs, ys;
    for (int i = 0; i < 16; ++i) {
      xs.push_back(std::to_string(i));
      ys.push_back("1");
    }
    auto serialise = [](const std::vector<std::string>& v) {
      std::string w;
      for (const auto& e : v) {
        std::uint32_t n = static_cast<std::uint32_t>(e.size());
        w.append(reinterpret_cast<const char*>(&n), 4);
        w += e;
      }
      return w;
    };
    std::string sx = serialise(xs), sy = serialise(ys);
    std::vector<std::string> sums, diffs;
    for (int i = 0; i < 16; ++i) {
      sums.push_back(std::to_string(i + 1));
      diffs.push_back(std::to_string(i - 1));
    }
    std::string ssum = serialise(sums), sdiff = serialise(diffs);
    auto r0 = shm::system_region::create(key("s0"), sx.size());
    auto r1 = shm::system_region::create(key("s1"), sy.size());
    auto r2 = shm::system_region::create(key("s2"), ssum.size());
    auto r3 = shm::system_region::create(key("s3"), sdiff.size());
    r0.write(0, std::as_bytes(std::span(sx)));
    r1.write(0, std::as_bytes(std::span(sy)));
    c.register_system_shared_memory(r0.register_request("s0"));
    c.register_system_shared_memory(r1.register_request("s1"));
    c.register_system_shared_memory(r2.register_request("s2"));
    c.register_system_shared_memory(r3.register_request("s3"));
    v2::infer_request q;
    q.inputs.push_back(v2::make_shm_input("INPUT0", data_type::bytes, {1, 16}, {"s0", 0, sx.size()}));
    q.inputs.push_back(v2::make_shm_input("INPUT1", data_type::bytes, {1, 16}, {"s1", 0, sy.size()}));
    q.outputs.push_back(v2::make_shm_output("OUTPUT0", {"s2", 0, ssum.size()}));
    q.outputs.push_back(v2::make_shm_output("OUTPUT1", {"s3", 0, sdiff.size()}));
    auto result = c.infer("simple_string", q);
    CHECK(result.outputs().size() == 2);
    CHECK(std::string(reinterpret_cast<const char*>(r2.data()), r2.size()) == ssum);
    CHECK(std::string(reinterpret_cast<const char*>(r3.data()), r3.size()) == sdiff);
    c.unregister_system_shared_memory();
  }
}

TEST_CASE("shm: unregistering a region in use waits for its requests", "[shm]") {
  auto& s = shm_server();
  auto c = client_of(s);
  c.unregister_system_shared_memory();
  auto in = shm::system_region::create(key("slow_in"), 64);
  auto out = shm::system_region::create(key("slow_out"), 64);
  auto x = in.as<std::int32_t>(0, 16);
  std::iota(x.begin(), x.end(), 100);
  c.register_system_shared_memory(in.register_request("slow_in"));
  c.register_system_shared_memory(out.register_request("slow_out"));
  v2::infer_request q;
  q.inputs.push_back(v2::make_shm_input("INPUT0", data_type::int32, {16}, {"slow_in", 0, 64}));
  q.outputs.push_back(v2::make_shm_output("OUTPUT0", {"slow_out", 0, 64}));

  // Two slow requests in flight (identity_slow sleeps 1.5 s), over separate connections.
  auto slow1 = std::async(std::launch::async, [&] { return client_of(s).infer("identity_slow", q); });
  auto slow2 = std::async(std::launch::async, [&] { return client_of(s).infer("identity_slow", q); });
  std::this_thread::sleep_for(400ms);
  c.unregister_system_shared_memory("slow_in");  // succeeds at once
  c.unregister_system_shared_memory();           // the output region too
  // Still listed and still usable while requests hold them.
  CHECK(c.system_shared_memory_status().size() == 2);
  CHECK(c.system_shared_memory_status("slow_in").size() == 1);
  CHECK_NOTHROW(slow1.get());
  CHECK_NOTHROW(slow2.get());
  CHECK(out.as<std::int32_t>(0, 16)[15] == 115);
  // Removed once the last user finished: the requests release their regions right after their
  // replies are written, so allow the server a moment after the client got them.
  for (int i = 0; i < 200 && !c.system_shared_memory_status().empty(); ++i) std::this_thread::sleep_for(10ms);
  CHECK(c.system_shared_memory_status().empty());
  auto f = fails([&](auto& ec) { c.infer("identity_slow", q, ec); });
  CHECK(f.status == 404);
  CHECK(f.message == "Unable to find shared memory region: 'slow_in'");
  // The name is free again.
  c.register_system_shared_memory(in.register_request("slow_in"));
  c.unregister_system_shared_memory();
}

TEST_CASE("shm: the SDK's system_region", "[shm]") {
  auto r = shm::system_region::create(key("sdk"), 100);
  CHECK(r.size() == 100);
  CHECK(r.owner());
  CHECK_THROWS_AS(shm::system_region::create(key("sdk"), 100), std::system_error);
  {
    auto other = shm::system_region::open(key("sdk"));
    CHECK(other.size() == 100);
    CHECK_FALSE(other.owner());
    r.as<std::uint8_t>(0, 4)[3] = 42;
    CHECK(other.as<std::uint8_t>(0, 4)[3] == 42);
  }
  CHECK_THROWS_AS(r.as<std::int32_t>(98, 1), std::out_of_range);
  CHECK_THROWS_AS(r.as<std::int32_t>(2, 1), std::invalid_argument);
  CHECK_THROWS_AS(shm::system_region::create("no_slash", 8), std::invalid_argument);
  CHECK_THROWS_AS(shm::system_region::create("/a/b", 8), std::invalid_argument);
  CHECK_THROWS_AS(shm::system_region::create(key("zero"), 0), std::invalid_argument);
  try {
    shm::system_region::open(key("missing"));
    FAIL("opened a missing object");
  } catch (const std::system_error& e) {
    CHECK(std::string(e.what()).find("--ipc=host") != std::string::npos);
  }
  auto req = r.register_request("name", 0);
  CHECK(req == v2::system_shm_register_request{"name", key("sdk"), 0, 100});
  auto moved = std::move(r);
  CHECK_FALSE(r);
  moved.unlink();
  CHECK_THROWS_AS(shm::system_region::open(key("sdk")), std::system_error);
}

TEST_CASE("shm: the CUDA VMM socket of the real server (no GPU needed)", "[shm][vmm]") {
  const std::string path = "/tmp/iwit_vmm_" + std::to_string(::getpid()) + ".sock";
  // Without --allow-client-shm there is no socket.
  {
    server_process off({"--cuda-vmm-socket", path});
    CHECK_FALSE(std::filesystem::exists(path));
  }
  server_process s({"--allow-client-shm=true", "--cuda-vmm-socket", path});
  // Open before the HTTP listener that server_process waits for.
  CHECK(s.log().find("Started CUDA VMM socket at " + path) != std::string::npos);
  struct stat st {};
  REQUIRE(::stat(path.c_str(), &st) == 0);
  CHECK((st.st_mode & 0777) == 0600);
  auto c = client_of(s);
  const auto md = c.server_metadata();
  CHECK(std::count(md.extensions.begin(), md.extensions.end(), "inferwire_cuda_vmm_shared_memory") == 1);

  // A memfd is no CUDA handle: the server refuses the deposit with its reason (no GPU here, or
  // not a CUDA memory handle on a GPU machine), keeps no descriptor and keeps serving.
  const auto fds_before = open_fds_of(s.pid());
  {
    shm::unique_fd chunk(::memfd_create("iwit_vmm", MFD_CLOEXEC));
    REQUIRE(::ftruncate(chunk.get(), 2 << 20) == 0);
    const int raw[] = {chunk.get(), chunk.get()};
    shm::vmm_layout layout;
    layout.byte_size = 3 << 20;
    layout.chunk_sizes = {2 << 20, 2 << 20};
    auto channel = shm::vmm_channel::connect(path);
    try {
      channel.deposit(layout, raw);
      FAIL("the server took a memfd as CUDA memory");
    } catch (const shm::vmm_channel_error& e) {
      const std::string text = e.what();
      CHECK(text.starts_with("cannot import the CUDA VMM region: "));
      CHECK((text.find("GPUs not supported") != std::string::npos ||
             text.find("not a CUDA memory handle") != std::string::npos));
    }
    CHECK(c.server_live());
    // The SDK's one call does the same three steps.
    try {
      shm::register_vmm_region(c, "vmm", layout, raw, path);
      FAIL("registered a memfd");
    } catch (const shm::vmm_channel_error&) {
    }
  }
  for (int i = 0; i < 200 && open_fds_of(s.pid()).size() > fds_before.size(); ++i) std::this_thread::sleep_for(10ms);
  const auto fds_after = open_fds_of(s.pid());
  CAPTURE(added_fds(fds_before, fds_after));
  CHECK(fds_after.size() <= fds_before.size());

  // A handle of ours that nobody deposited, through the usual register call.
  shm::vmm_handle forged;
  forged.byte_size = 64;
  auto f = fails([&](auto& ec) { c.register_cuda_shared_memory({"vmm", forged.encode(), 0, 64}, ec); });
  CHECK(f.status == 400);
  CHECK(f.message.starts_with("failed to register shared memory region 'vmm': unknown CUDA VMM handle"));
  CHECK(c.cuda_shared_memory_status().empty());
  // The same path cannot be taken by a second server while this one listens.
  server_process second({"--allow-client-shm=true", "--cuda-vmm-socket", path});
  CHECK(second.log().find("CUDA VMM regions cannot be registered: CUDA VMM socket '" + path +
                          "' is in use by another process") != std::string::npos);
  s.stop();
  CHECK_FALSE(std::filesystem::exists(path));
}
