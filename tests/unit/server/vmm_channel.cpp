// SPDX-License-Identifier: Apache-2.0
// The CUDA VMM socket and the registry's VMM regions without a GPU: memfd descriptors stand in
// for the CUDA handles and an importer that maps them contiguously (PROT_NONE reservation,
// MAP_FIXED per chunk) stands in for cuMemImport/cuMemMap, so the channel, the handle, the
// permission rules, every refusal, registration, inference-side resolution, unregister and
// disconnect run for real, descriptors and mappings counted.
#include "vmm_channel.hpp"

#include <inferwire/shm/vmm_channel.hpp>

#include "../shm/vmm_layout.hpp"

#include <catch2/catch.hpp>

#include <atomic>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <thread>

#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

namespace srv = inferwire::server;
namespace shm = inferwire::shm;
using iwtest::layout_of;
namespace v2 = inferwire::v2;
using namespace std::chrono_literals;

namespace {

std::atomic<int> live_mappings{0};

struct memfd_mapping final : srv::vmm_mapping {
  void* reserved = MAP_FAILED;
  std::size_t length = 0;
  ~memfd_mapping() override {
    if (reserved != MAP_FAILED) ::munmap(reserved, length);
    --live_mappings;
  }
};

// What the CUDA importer checks, on memory: a descriptor of a memory object (else "not a
// memory handle"), at least as large as its chunk, on device 0.
class memfd_importer final : public srv::vmm_importer {
 public:
  std::unique_ptr<srv::vmm_mapping> import(const shm::vmm_layout& layout, std::vector<shm::unique_fd>& fds) override {
    if (layout.device != 0) throw std::runtime_error("chunk 0: the memory is on device 0, not device " + std::to_string(layout.device));
    for (std::size_t i = 0; i < fds.size(); ++i) {
      struct stat st {};
      if (::fstat(fds[i].get(), &st) != 0 || !S_ISREG(st.st_mode))
        throw std::runtime_error("chunk " + std::to_string(i) + ": the descriptor is not a memory handle");
      if (static_cast<std::uint64_t>(st.st_size) < layout.chunk_sizes[i])
        throw std::runtime_error("chunk " + std::to_string(i) + ": smaller than declared");
    }
    auto m = std::make_unique<memfd_mapping>();
    ++live_mappings;
    m->length = layout.mapped_size();
    m->reserved = ::mmap(nullptr, m->length, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    if (m->reserved == MAP_FAILED) throw std::runtime_error("mmap");
    std::size_t at = 0;
    for (std::size_t i = 0; i < fds.size(); ++i) {
      void* p = ::mmap(static_cast<char*>(m->reserved) + at, layout.chunk_sizes[i], PROT_READ | PROT_WRITE,
                       MAP_SHARED | MAP_FIXED, fds[i].get(), 0);
      if (p == MAP_FAILED) throw std::runtime_error("mmap chunk");
      at += layout.chunk_sizes[i];
    }
    m->base = static_cast<std::byte*>(m->reserved) + layout.offset;
    m->size = layout.byte_size;
    m->device = 0;
    return m;
  }
};

std::size_t open_fds() {
  std::size_t n = 0;
  for ([[maybe_unused]] const auto& e : std::filesystem::directory_iterator("/proc/self/fd")) ++n;
  return n;
}

shm::unique_fd memfd(std::size_t size) {
  shm::unique_fd fd(::memfd_create("vmm_chunk", MFD_CLOEXEC));
  REQUIRE(fd);
  REQUIRE(::ftruncate(fd.get(), static_cast<off_t>(size)) == 0);
  return fd;
}

// A channel server on a socket of its own, with the registry it deposits into.
struct channel_fixture {
  srv::shm_registry registry{true};
  memfd_importer importer;
  std::string path = "/tmp/iwunit_vmm_" + std::to_string(::getpid()) + ".sock";
  std::unique_ptr<srv::vmm_channel> channel;

  explicit channel_fixture(srv::vmm_channel_options o = {}) {
    o.path = path;
    channel = std::make_unique<srv::vmm_channel>(registry, importer, std::move(o));
    REQUIRE_FALSE(channel->start());
  }
  ~channel_fixture() { channel->stop(); }

  // Waits until the registry holds `n` regions (the channel thread unregisters on close).
  bool regions_become(std::size_t n) {
    for (int i = 0; i < 500; ++i) {
      if (registry.size() == n) return true;
      std::this_thread::sleep_for(2ms);
    }
    return false;
  }
};


// Sends a raw frame (with descriptors) and returns the reply's payload ("" when the server
// closed the connection without one).
std::string raw_exchange(const shm::vmm_channel& c, std::string_view payload, std::span<const int> fds) {
  shm::detail::send_with_fds(c.native_handle(), shm::vmm_frame(payload), fds);
  std::string out;
  char head[4];
  if (::recv(c.native_handle(), head, 4, MSG_WAITALL) != 4) return out;
  const std::size_t n = shm::detail::get_le(std::string_view(head, 4), 0, 4);
  out.resize(n);
  if (::recv(c.native_handle(), out.data(), n, MSG_WAITALL) != static_cast<ssize_t>(n)) out.clear();
  return out;
}

// End of stream, or a reset when the server closed with bytes of ours still unread.
bool closed_by_server(const shm::vmm_channel& c) {
  char b;
  const ssize_t n = ::recv(c.native_handle(), &b, 1, 0);
  return n == 0 || (n < 0 && errno == ECONNRESET);
}

}  // namespace

TEST_CASE("vmm socket: a multi-chunk region is mapped contiguously, registered, resolved, released", "[vmm]") {
  const std::size_t fds_before = open_fds();
  {
    channel_fixture f;
    struct stat st {};
    REQUIRE(::stat(f.path.c_str(), &st) == 0);
    CHECK(S_ISSOCK(st.st_mode));
    CHECK((st.st_mode & 0777) == 0600);

    const std::size_t page = static_cast<std::size_t>(::sysconf(_SC_PAGESIZE));
    std::vector<shm::unique_fd> chunks;
    for (int i = 0; i < 3; ++i) chunks.push_back(memfd(16 * page));
    const int raw[] = {chunks[0].get(), chunks[1].get(), chunks[2].get()};
    // The region starts 100 bytes into the first chunk and ends inside the third.
    const auto layout = layout_of({16 * page, 16 * page, 16 * page}, 100, 40 * page);
    auto channel = shm::vmm_channel::connect(f.path);
    const std::string handle = channel.deposit(layout, raw);
    REQUIRE(shm::is_vmm_handle(handle));
    const auto h = shm::vmm_handle::decode(handle);
    REQUIRE(h);
    CHECK(h->byte_size == 40 * page);
    CHECK(h->chunks == 3);
    CHECK(h->device == 0);
    CHECK(live_mappings == 1);
    CHECK(f.registry.size() == 0);  // deposited, not registered

    REQUIRE_FALSE(f.registry.register_cuda({"vmm", handle, 0, 40 * page}));
    std::vector<v2::cuda_shm_status> status;
    REQUIRE_FALSE(f.registry.cuda_status("vmm", status));
    REQUIRE(status.size() == 1);
    CHECK(status[0].device_id == 0);
    CHECK(status[0].byte_size == 40 * page);

    // The server's view: one range across the chunks, writes land in the client's objects.
    srv::placement place;
    std::vector<srv::shm_lease> leases;
    REQUIRE_FALSE(f.registry.resolve({"vmm", 0, 40 * page}, place, leases));
    CHECK(place.device == 0);
    for (std::size_t i = 0; i < place.size; ++i) place.data[i] = static_cast<std::byte>(i % 251);
    for (std::size_t i : {std::size_t{0}, 16 * page - 101, 16 * page - 100, 32 * page - 100, 40 * page - 1}) {
      const std::size_t absolute = i + 100;
      unsigned char b = 0;
      REQUIRE(::pread(chunks[absolute / (16 * page)].get(), &b, 1, static_cast<off_t>(absolute % (16 * page))) == 1);
      CHECK(b == i % 251);
    }

    // The handle is single use; the device and the size must match it.
    auto again = f.registry.register_cuda({"vmm2", handle, 0, 64});
    CHECK(again.code() == inferwire::errc::invalid_arg);
    CHECK(again.message().find("unknown CUDA VMM handle") != std::string::npos);
    auto dup = f.registry.register_cuda({"vmm", handle, 0, 64});
    CHECK(dup.message() == "shared memory region 'vmm' already in manager");

    // Closing the channel unregisters the region once the request holding it ends.
    channel.close();
    std::this_thread::sleep_for(20ms);
    CHECK(f.registry.size() == 1);
    leases.clear();
    CHECK(f.regions_become(0));
    CHECK(live_mappings == 0);
  }
  CHECK(open_fds() == fds_before);
}

TEST_CASE("vmm socket: register checks and unregister through the registry", "[vmm]") {
  channel_fixture f;
  auto chunk = memfd(8192);
  const int raw[] = {chunk.get()};
  auto channel = shm::vmm_channel::connect(f.path);
  const std::string h1 = channel.deposit(layout_of({8192}, 0, 8192), raw);
  auto st = f.registry.register_cuda({"r", h1, 1, 8192});
  CHECK(st.message() == "failed to register shared memory region 'r': the CUDA VMM handle's memory is on device 0, not 1");
  st = f.registry.register_cuda({"r", h1, 0, 8193});
  CHECK(st.message() ==
        "failed to register shared memory region 'r': byte_size 8193 does not fit the deposited region (8192 bytes)");
  // A refused registration leaves the deposit claimable.
  REQUIRE_FALSE(f.registry.register_cuda({"r", h1, 0, 4096}));
  // A handle with our magic but a token nobody deposited, and one that does not decode.
  shm::vmm_handle forged;
  forged.byte_size = 8192;
  st = f.registry.register_cuda({"s", forged.encode(), 0, 8192});
  CHECK(st.message().starts_with("failed to register shared memory region 's': unknown CUDA VMM handle"));
  std::string bad = forged.encode();
  bad[50] = 1;
  st = f.registry.register_cuda({"s", bad, 0, 8192});
  CHECK(st.message() == "failed to register shared memory region 's': invalid CUDA VMM handle");
  // Unregister releases the mapping while the channel stays open.
  CHECK(live_mappings == 1);
  REQUIRE_FALSE(f.registry.unregister(srv::region_kind::cuda, "r"));
  CHECK(live_mappings == 0);
  // The channel still takes deposits.
  CHECK(shm::is_vmm_handle(channel.deposit(layout_of({8192}, 0, 8192), raw)));
  CHECK(live_mappings == 1);
  channel.close();  // an unclaimed deposit goes with its connection
  for (int i = 0; i < 500 && live_mappings != 0; ++i) std::this_thread::sleep_for(2ms);
  CHECK(live_mappings == 0);
}

TEST_CASE("vmm socket: every refusal is a reply, descriptors are closed, the socket keeps serving", "[vmm]") {
  const std::size_t fds_before = open_fds();
  {
    channel_fixture f({.path = {}, .permitted = {}, .max_connections = 64, .max_pending = 2});
    auto chunk = memfd(8192);
    const int one[] = {chunk.get()};
    const int two[] = {chunk.get(), chunk.get()};

    auto expect_refusal = [&](std::string_view payload, std::span<const int> fds, std::string_view text, bool closes) {
      auto c = shm::vmm_channel::connect(f.path);
      const std::string reply = raw_exchange(c, payload, fds);
      CHECK(reply == "E" + std::string(text));
      if (closes) CHECK(closed_by_server(c));
    };
    const std::string good = shm::encode_deposit(layout_of({8192}, 0, 8192));
    // Malformed frames end the connection (the stream cannot be trusted after them).
    expect_refusal("garbage", one, "not a deposit message", true);
    expect_refusal(good, two, "a deposit of 1 chunks came with 2 descriptors", true);
    expect_refusal(good, {}, "a deposit of 1 chunks came with 0 descriptors", true);
    std::string many = good;
    many[8] = 0x01;
    many[9] = 0x04;
    expect_refusal(many, one, "too many chunks: 1025 (at most 1024)", true);
    {
      auto c = shm::vmm_channel::connect(f.path);
      const char huge[] = {'\xff', '\xff', '\x00', '\x00', 'D'};
      REQUIRE(::send(c.native_handle(), huge, sizeof huge, 0) == sizeof huge);
      char head[4];
      REQUIRE(::recv(c.native_handle(), head, 4, MSG_WAITALL) == 4);
      std::string text(shm::detail::get_le(std::string_view(head, 4), 0, 4), '\0');
      REQUIRE(::recv(c.native_handle(), text.data(), text.size(), MSG_WAITALL) == static_cast<ssize_t>(text.size()));
      CHECK(text == "Ea frame of 65535 bytes (1 to 8224 allowed)");
      CHECK(closed_by_server(c));
    }
    // What the importer refuses is a reply on a connection that goes on serving.
    {
      auto c = shm::vmm_channel::connect(f.path);
      int pipe_fds[2];
      REQUIRE(::pipe(pipe_fds) == 0);
      shm::unique_fd r(pipe_fds[0]), w(pipe_fds[1]);
      const int not_memory[] = {r.get()};
      CHECK_THROWS_WITH(c.deposit(layout_of({8192}, 0, 8192), not_memory),
                        "cannot import the CUDA VMM region: chunk 0: the descriptor is not a memory handle");
      CHECK_THROWS_WITH(c.deposit(layout_of({8192}, 0, 8192, 1), one),
                        "cannot import the CUDA VMM region: chunk 0: the memory is on device 0, not device 1");
      CHECK_THROWS_WITH(c.deposit(layout_of({16384}, 0, 8192), one),
                        "cannot import the CUDA VMM region: chunk 0: smaller than declared");
      // At most max_pending deposits wait for registration.
      CHECK(shm::is_vmm_handle(c.deposit(layout_of({8192}, 0, 8192), one)));
      CHECK(shm::is_vmm_handle(c.deposit(layout_of({8192}, 0, 8192), one)));
      CHECK_THROWS_WITH(c.deposit(layout_of({8192}, 0, 8192), one),
                        "2 deposits of this connection await registration (at most 2); register or close them first");
      CHECK(live_mappings == 2);
    }
    for (int i = 0; i < 500 && live_mappings != 0; ++i) std::this_thread::sleep_for(2ms);
    CHECK(live_mappings == 0);
    CHECK(f.registry.size() == 0);
  }
  CHECK(open_fds() == fds_before);
}

TEST_CASE("vmm socket: permissions, connection limit, an occupied or foreign path", "[vmm]") {
  {
    channel_fixture f({.path = {}, .permitted = [](const ucred&) { return false; }, .max_connections = 64, .max_pending = 16});
    auto c = shm::vmm_channel::connect(f.path);
    auto chunk = memfd(8192);
    const int one[] = {chunk.get()};
    try {
      c.deposit(layout_of({8192}, 0, 8192), one);
      FAIL("a refused peer deposited");
    } catch (const shm::vmm_channel_error& e) {
      CHECK(std::string(e.what()).starts_with("permission denied: this server's CUDA VMM socket does not accept user " +
                                              std::to_string(::geteuid())));
    } catch (const std::system_error&) {
      // The server may close before the deposit is sent (EPIPE); the reply was still written.
    }
  }
  {
    channel_fixture f({.path = {}, .permitted = {}, .max_connections = 1, .max_pending = 16});
    auto first = shm::vmm_channel::connect(f.path);
    auto chunk = memfd(8192);
    const int one[] = {chunk.get()};
    CHECK(shm::is_vmm_handle(first.deposit(layout_of({8192}, 0, 8192), one)));
    auto second = shm::vmm_channel::connect(f.path);
    CHECK_THROWS_WITH(second.deposit(layout_of({8192}, 0, 8192), one),
                      "too many connections to the CUDA VMM socket (at most 1)");
    // A second server on the same path is refused while the first listens.
    srv::shm_registry other(true);
    memfd_importer importer;
    srv::vmm_channel_options o;
    o.path = f.path;
    srv::vmm_channel again(other, importer, o);
    auto st = again.start();
    CHECK(st.message() == "CUDA VMM socket '" + f.path + "' is in use by another process");
  }
  // A stale socket file (its server gone) is replaced.
  {
    const std::string stale = "/tmp/iwunit_vmm_stale_" + std::to_string(::getpid()) + ".sock";
    shm::unique_fd s(::socket(AF_UNIX, SOCK_STREAM, 0));
    sockaddr_un addr{};
    addr.sun_family = AF_UNIX;
    std::memcpy(addr.sun_path, stale.c_str(), stale.size() + 1);
    REQUIRE(::bind(s.get(), reinterpret_cast<const sockaddr*>(&addr), sizeof addr) == 0);
    s.reset();
    REQUIRE(std::filesystem::exists(stale));
    srv::shm_registry registry(true);
    memfd_importer importer;
    srv::vmm_channel_options o;
    o.path = stale;
    srv::vmm_channel c(registry, importer, o);
    CHECK_FALSE(c.start());
    auto client = shm::vmm_channel::connect(stale);
    c.stop();
    CHECK_FALSE(std::filesystem::exists(stale));
  }
  // A regular file is never touched.
  const std::string path = "/tmp/iwunit_vmm_file_" + std::to_string(::getpid());
  { std::ofstream(path) << "keep"; }
  srv::shm_registry registry(true);
  memfd_importer importer;
  srv::vmm_channel_options o;
  o.path = path;
  srv::vmm_channel c(registry, importer, o);
  CHECK(c.start().message() == "CUDA VMM socket path '" + path + "' exists and is not a socket");
  CHECK(std::filesystem::file_size(path) == 4);
  std::filesystem::remove(path);
  o.path = std::string(200, 'p');
  srv::vmm_channel too_long(registry, importer, o);
  CHECK(too_long.start().message().find("is empty or longer than") != std::string::npos);
}

TEST_CASE("vmm socket: a stalled deposit is ended, held descriptors are bounded", "[vmm]") {
  srv::vmm_channel_options o;
  o.max_held_fds = 2;
  o.frame_timeout = 300ms;
  channel_fixture f(o);
  auto chunk = memfd(8192);
  const int three[] = {chunk.get(), chunk.get(), chunk.get()};
  const std::string deposit = shm::vmm_frame(shm::encode_deposit(layout_of({8192, 8192, 8192}, 0, 8192)));
  auto read_reply = [](const shm::vmm_channel& c) {
    char head[4];
    if (::recv(c.native_handle(), head, 4, MSG_WAITALL) != 4) return std::string();
    std::string text(shm::detail::get_le(std::string_view(head, 4), 0, 4), '\0');
    if (::recv(c.native_handle(), text.data(), text.size(), MSG_WAITALL) != static_cast<ssize_t>(text.size()))
      return std::string();
    return text;
  };
  {
    // Half a frame, then nothing: ended after the timeout, its descriptor closed.
    auto c = shm::vmm_channel::connect(f.path);
    shm::detail::send_with_fds(c.native_handle(), std::string_view(deposit).substr(0, 10), std::span(three, 1));
    const auto t0 = std::chrono::steady_clock::now();
    CHECK(read_reply(c) == "Ea deposit was not complete within 300 ms");
    CHECK(std::chrono::steady_clock::now() - t0 >= 250ms);
    CHECK(closed_by_server(c));
  }
  {
    // Three descriptors in one unfinished deposit exceed what the server holds for them.
    auto c = shm::vmm_channel::connect(f.path);
    shm::detail::send_with_fds(c.native_handle(), std::string_view(deposit).substr(0, 10), three);
    CHECK(read_reply(c) == "Ethe server holds too many descriptors of unfinished deposits; try again");
    CHECK(closed_by_server(c));
  }
  // A complete deposit within the bound still works.
  auto c = shm::vmm_channel::connect(f.path);
  const int one[] = {chunk.get()};
  CHECK(shm::is_vmm_handle(c.deposit(layout_of({8192}, 0, 8192), one)));
}

TEST_CASE("vmm socket: a deposit sent a byte at a time, and two deposits in one write", "[vmm]") {
  channel_fixture f;
  auto chunk = memfd(8192);
  const int one[] = {chunk.get()};
  const std::string frame = shm::vmm_frame(shm::encode_deposit(layout_of({8192}, 0, 8192)));
  auto c = shm::vmm_channel::connect(f.path);
  // The descriptor rides on the first byte; the rest trickles in.
  shm::detail::send_with_fds(c.native_handle(), std::string_view(frame).substr(0, 1), one);
  for (std::size_t i = 1; i < frame.size(); ++i) {
    REQUIRE(::send(c.native_handle(), frame.data() + i, 1, MSG_NOSIGNAL) == 1);
    if (i % 8 == 0) std::this_thread::sleep_for(1ms);
  }
  char head[4];
  REQUIRE(::recv(c.native_handle(), head, 4, MSG_WAITALL) == 4);
  std::string reply(shm::detail::get_le(std::string_view(head, 4), 0, 4), '\0');
  REQUIRE(::recv(c.native_handle(), reply.data(), reply.size(), MSG_WAITALL) == static_cast<ssize_t>(reply.size()));
  CHECK(reply.size() == 1 + shm::vmm_handle_size);
  CHECK(reply[0] == 'H');
  // Two frames in one write, the descriptors of both on its first byte: the server reads up to
  // the first frame's end, so the second frame's descriptor arrives with the first.
  const int two[] = {chunk.get(), chunk.get()};
  shm::detail::send_with_fds(c.native_handle(), frame + frame, two);
  REQUIRE(::recv(c.native_handle(), head, 4, MSG_WAITALL) == 4);
  reply.assign(shm::detail::get_le(std::string_view(head, 4), 0, 4), '\0');
  REQUIRE(::recv(c.native_handle(), reply.data(), reply.size(), MSG_WAITALL) == static_cast<ssize_t>(reply.size()));
  CHECK(reply == "Ea deposit of 1 chunks came with 2 descriptors");
  CHECK(closed_by_server(c));
  CHECK(f.regions_become(0));
}
