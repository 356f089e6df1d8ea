// SPDX-License-Identifier: Apache-2.0
// A program of a project that uses inferwire as users do (an installed package,
// add_subdirectory or FetchContent). One component per build, chosen by CONSUMER_USES_<C>;
// where the component talks to a server, the server's address is the first argument:
//   http, grpc: the port of a running inferwire-server (HTTP / gRPC);
//   gms:        the socket path of a running inferwire-gms-server (memfd backend).
// Exits 0 when the headers work as documented; any other status says which check failed.
#include <inferwire/core.hpp>
#include <inferwire/version.hpp>

#if defined(CONSUMER_USES_V2)
#include <inferwire/v2.hpp>
#elif defined(CONSUMER_USES_HTTP)
#include <inferwire/http/client.hpp>

#include <boost/asio/use_future.hpp>
#elif defined(CONSUMER_USES_GRPC)
#include <inferwire/grpc/client.hpp>
#elif defined(CONSUMER_USES_SHM)
#include <inferwire/shm/system_region.hpp>
#elif defined(CONSUMER_USES_CUDA)
#include <inferwire/cuda/runtime.hpp>
#elif defined(CONSUMER_USES_GMS)
#include <inferwire/gms/mmap_mapper.hpp>
#include <inferwire/gms/session.hpp>
#endif

#include <cstdint>
#include <cstdio>
#include <cstring>
#include <numeric>
#include <string>
#include <vector>

namespace {

#if defined(CONSUMER_USES_HTTP) || defined(CONSUMER_USES_GRPC)
// The request for 'simple' on the server (OUTPUT0 = INPUT0 + INPUT1): 0..15 and 1s. The
// request's inputs are views of the vectors held here.
struct simple_request {
  std::vector<std::int32_t> a = [] {
    std::vector<std::int32_t> v(16);
    std::iota(v.begin(), v.end(), 0);
    return v;
  }();
  std::vector<std::int32_t> b = std::vector<std::int32_t>(16, 1);
  inferwire::v2::infer_request q;
  simple_request() {
    q.inputs.push_back(inferwire::v2::make_input("INPUT0", a, {1, 16}));
    q.inputs.push_back(inferwire::v2::make_input("INPUT1", b, {1, 16}));
  }
  simple_request(const simple_request&) = delete;
};
#endif

}  // namespace

int main(int argc, char** argv) {
  using namespace inferwire;
  [[maybe_unused]] const std::string arg = argc > 1 ? argv[1] : "";
  if (std::strcmp(version_string, INFERWIRE_VERSION_STRING) != 0) return 1;
  if (wire_name(data_type::bytes) != "BYTES" || config_name(data_type::bytes) != "TYPE_STRING")
    return 1;
  std::vector<std::int64_t> shape{1, 16};
  if (byte_size(shape, data_type::int32).value != 64) return 2;
  if (http_status(errc::unavailable) != 503) return 3;

#if defined(CONSUMER_USES_V2)
  std::vector<std::int32_t> data(16, 7);
  v2::infer_request q;
  q.inputs.push_back(v2::make_input("INPUT0", data, shape));
  std::string body = v2::encode_infer_request(q).flatten();
  auto header = body.find("}]}") + 3;
  auto back = v2::decode_infer_request(body, header, "simple");
  if (back.inputs.at(0).as<std::int32_t>().at(15) != 7) return 4;
#elif defined(CONSUMER_USES_HTTP)
  http::client c("127.0.0.1", arg);
  if (!c.server_ready()) return 5;
  simple_request simple;
  const auto& q = simple.q;
  auto r = c.infer("simple", q);
  if (r.as<std::int32_t>("OUTPUT0")[15] != 16) return 6;
  // Asynchronous, on the caller's io_context, with futures.
  boost::asio::io_context ioc;
  http::client ac(ioc.get_executor(), "127.0.0.1", arg);
  auto f = ac.async_infer("simple", q, boost::asio::use_future);
  auto ready = ac.async_model_ready("simple", boost::asio::use_future);
  ioc.run();
  if (f.get().as<std::int32_t>("OUTPUT0")[0] != 1 || !ready.get()) return 7;
#elif defined(CONSUMER_USES_GRPC)
  // The protos were generated and compiled in this build.
  namespace ig = inferwire::grpc;
  ig::client c("127.0.0.1:" + arg);
  if (!c.server_ready()) return 5;
  simple_request simple;
  const auto& q = simple.q;
  auto r = c.infer("simple", q);
  if (r.as<std::int32_t>("OUTPUT0")[15] != 16) return 6;
  ig::error_code ec;
  c.infer("no_such_model", q, ec);
  if (ig::status_code(ec) != 5) return 7;  // NOT_FOUND
#elif defined(CONSUMER_USES_SHM)
  // A region created, written, opened by key a second time and read back.
  std::string key = "/inferwire_consumer_" + std::to_string(::getpid());
  auto region = shm::system_region::create(key, 4096);
  std::memcpy(region.data(), "inferwire", 9);
  auto again = shm::system_region::open(key);
  if (again.size() != 4096 || std::memcmp(again.data(), "inferwire", 9) != 0) return 5;
#elif defined(CONSUMER_USES_CUDA)
  // Without a GPU the runtime says why; with one it counts devices. Neither may throw.
  if (!cuda::available() && cuda::unavailable_reason().empty()) return 5;
  std::printf("consumer: %d CUDA device(s)\n", cuda::device_count());
#elif defined(CONSUMER_USES_GMS)
  // A writer allocates, exports (a real descriptor), maps, writes and commits; a reader finds
  // the metadata and reads the bytes back through its own import.
  gms::mmap_mapper mapper;
  auto map = [&](gms::exported_allocation e, bool writable) {
    const auto size = static_cast<std::size_t>(e.info.aligned_size);
    const std::uintptr_t va = mapper.reserve(size);
    auto h = mapper.import(std::move(e.fd), size);
    mapper.map(va, size, h, writable);
    return reinterpret_cast<char*>(va);  // the mapping keeps the memory; the process ends soon
  };
  {
    gms::session w(arg, gms::requested_lock_type::rw);
    auto a = w.allocate(2 << 20, "weights");
    std::memcpy(map(w.export_allocation(a.allocation_id), true), "weights", 7);
    w.metadata_put("layer0", a.allocation_id, 0, "{}");
    w.commit();
  }
  gms::session r(arg, gms::requested_lock_type::ro, 10000);
  auto md = r.metadata_get("layer0");
  if (!md.found || !md.allocation_id) return 5;
  if (std::memcmp(map(r.export_allocation(*md.allocation_id), false), "weights", 7) != 0) return 6;
#endif
  std::puts("consumer: ok");
  return 0;
}
