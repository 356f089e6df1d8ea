// SPDX-License-Identifier: Apache-2.0
// gms::memory_manager with mmap_mapper against the memfd server: VA-stable commit, unmap and
// remap, read-only access for readers, stale-layout detection, reallocation.
#include "fixture.hpp"

#include <inferwire/gms/backend.hpp>
#include <inferwire/gms/cuda_vmm.hpp>
#include <inferwire/gms/cuda_vmm_region.hpp>
#include <inferwire/gms/memfd_backend.hpp>
#include <inferwire/gms/memory_manager.hpp>
#include <inferwire/gms/mmap_mapper.hpp>

#include <catch2/catch.hpp>

#include <csignal>
#include <thread>
#include <functional>
#include <atomic>
#include <filesystem>
#include <iterator>

#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <sys/wait.h>

using namespace gms_test;
using gms::requested_lock_type;
using Catch::Matchers::Contains;
using Catch::Matchers::StartsWith;
using manager = gms::memory_manager<gms::mmap_mapper>;

TEST_CASE("gms: every exception derives from gms::error", "[gms]") {
  STATIC_REQUIRE(std::is_base_of_v<gms::error, gms::connection_error>);
  STATIC_REQUIRE(std::is_base_of_v<gms::error, gms::lock_timeout>);
  STATIC_REQUIRE(std::is_base_of_v<gms::error, gms::server_error>);
  STATIC_REQUIRE(std::is_base_of_v<gms::error, gms::stale_memory_layout>);
  STATIC_REQUIRE(std::is_base_of_v<gms::error, gms::decode_error>);
  STATIC_REQUIRE(std::is_base_of_v<gms::error, gms::cuda_vmm_error>);
  // A payload that is not a message is refused with the common base.
  CHECK_THROWS_AS(gms::decode(std::string_view("\xc1")), gms::error);
}

namespace {
// A mapper missing one requirement (validate) models nothing.
struct incomplete_mapper {
  using handle = int;
  std::size_t granularity() const { return 1; }
  std::uintptr_t reserve(std::size_t) { return 0; }
  void free_va(std::uintptr_t, std::size_t) noexcept {}
  handle import(gms::unique_fd, std::size_t) { return 0; }
  void map(std::uintptr_t, std::size_t, handle&, bool) {}
  void unmap(std::uintptr_t, std::size_t, handle&) noexcept {}
  void synchronize() {}
};
}  // namespace

TEST_CASE("gms: the backend and mapper concepts", "[gms]") {
  STATIC_REQUIRE(gms::backend<gms::memfd_backend>);
  STATIC_REQUIRE(gms::read_only_exporting_backend<gms::memfd_backend>);
  STATIC_REQUIRE(gms::backend<gms::cuda_vmm_backend>);
  STATIC_REQUIRE_FALSE(gms::read_only_exporting_backend<gms::cuda_vmm_backend>);
  STATIC_REQUIRE(gms::mapper<gms::mmap_mapper>);
  STATIC_REQUIRE(gms::mapper<gms::cuda_vmm_mapper>);
  STATIC_REQUIRE_FALSE(gms::mapper<incomplete_mapper>);
  STATIC_REQUIRE_FALSE(gms::backend<gms::mmap_mapper>);
  STATIC_REQUIRE_FALSE(gms::mapper<gms::memfd_backend>);
}

namespace {

char* at(std::uintptr_t va) { return reinterpret_cast<char*>(va); }

/// Publishes a layout of `sizes` with one metadata entry per allocation, each allocation filled
/// with `fill`.
std::vector<std::uintptr_t> publish(manager& m, const std::vector<std::int64_t>& sizes, char fill,
                                    const std::string& tag = "weights") {
  m.connect(requested_lock_type::rw);
  std::vector<std::uintptr_t> vas;
  for (std::size_t i = 0; i < sizes.size(); ++i) {
    auto va = m.create_mapping({}, sizes[i], tag);
    std::memset(at(va), fill, static_cast<std::size_t>(sizes[i]));
    m.metadata_put("t" + std::to_string(i), m.find(va)->allocation_id, 0, "{}");
    vas.push_back(va);
  }
  m.commit();
  return vas;
}

/// Whether writing to `p` kills a child process with SIGSEGV.
bool write_faults(char* p) {
  const pid_t child = ::fork();
  if (child == 0) {
    ::signal(SIGSEGV, SIG_DFL);  // not the test framework's handler
    *reinterpret_cast<volatile char*>(p) = 1;
    ::_exit(0);
  }
  int status = 0;
  ::waitpid(child, &status, 0);
  return WIFSIGNALED(status) && WTERMSIG(status) == SIGSEGV;
}

}  // namespace

TEST_CASE("gms memory_manager: commit keeps VAs, RO remap maps the same VAs read-only", "[gms]") {
  test_server s;
  manager m(s.path());
  auto vas = publish(m, {MiB2, std::int64_t{3} << 20}, 'w');
  CHECK(m.unmapped());
  CHECK_FALSE(m.connected());
  for (const auto& [va, mp] : m.mappings()) CHECK_FALSE(mp.mapped);
  CHECK(m.find(vas[1])->aligned_size == 2 * MiB2);  // 3 MiB rounded up before sending
  CHECK(write_faults(at(vas[0])));                  // unmapped: the reservation is PROT_NONE

  m.connect(requested_lock_type::ro);
  REQUIRE(m.saved_layout_hash());
  CHECK(*m.saved_layout_hash() == gms::session::runtime_state(s.path()).memory_layout_hash);
  m.remap_all_vas();
  CHECK_FALSE(m.unmapped());
  CHECK(m.mappings().size() == 2);
  CHECK(at(vas[0])[0] == 'w');
  CHECK(at(vas[1])[(3 << 20) - 1] == 'w');
  CHECK(write_faults(at(vas[1])));  // read-only for a reader
  // create_mapping of a known allocation returns its VA.
  CHECK(m.create_mapping(m.find(vas[0])->allocation_id) == vas[0]);
  CHECK_THROWS_WITH(m.create_mapping({}, MiB2), "Operation requires RW mode");
  CHECK_THROWS_WITH(m.metadata_put("x", "y", 0, ""), "Operation requires RW mode");
  m.close();
  CHECK(m.mappings().empty());
  CHECK_THROWS_WITH(m.get_memory_layout_hash(), "Memory manager is not connected");
}

TEST_CASE("gms memory_manager: a second process imports by metadata", "[gms]") {
  test_server s;
  manager writer(s.path());
  auto vas = publish(writer, {MiB2}, 'q');
  manager reader(s.path());
  reader.connect(requested_lock_type::ro);
  auto md = reader.metadata_get("t0");
  REQUIRE(md.found);
  auto va = reader.create_mapping(*md.allocation_id);
  CHECK(va != vas[0]);
  CHECK(at(va)[*md.offset_bytes] == 'q');
  CHECK(reader.find(va + 100)->allocation_id == *md.allocation_id);
  CHECK(reader.find(va + MiB2) == nullptr);
}

TEST_CASE("gms memory_manager: create_mappings imports a layout with pipelined exports", "[gms]") {
  test_server s;
  manager writer(s.path());
  std::vector<std::int64_t> sizes(70, MiB2);  // more than two windows of 32 requests
  publish(writer, sizes, 'p');
  manager reader(s.path());
  reader.connect(requested_lock_type::ro);
  std::vector<std::string> ids;
  for (const auto& a : reader.list_handles()) ids.push_back(a.allocation_id);
  REQUIRE(ids.size() == 70);
  // One already imported the usual way keeps its VA; a repeated id maps once.
  const auto first = reader.create_mapping(ids[0]);
  auto with_repeat = ids;
  with_repeat.push_back(ids[5]);
  auto vas = reader.create_mappings(with_repeat);
  REQUIRE(vas.size() == 71);
  CHECK(vas[0] == first);
  CHECK(vas[70] == vas[5]);
  CHECK(reader.mappings().size() == 70);
  for (std::size_t i = 0; i < ids.size(); ++i) {
    CHECK(reader.find(vas[i])->allocation_id == ids[i]);
    CHECK(at(vas[i])[0] == 'p');
    CHECK(at(vas[i])[MiB2 - 1] == 'p');
  }
  CHECK(write_faults(at(vas[7])));  // read-only, as one by one

  // A refused id among others: the rest are mapped, the refusal is reported, the session
  // stays usable (every pipelined reply was read).
  manager other(s.path());
  other.connect(requested_lock_type::ro);
  std::vector<std::string> mixed{ids[1], "no-such-allocation", ids[2]};
  CHECK_THROWS_AS(other.create_mappings(mixed), inferwire::gms::server_error);
  CHECK(other.mappings().size() == 2);
  CHECK(other.metadata_get("t3").found);
  std::error_code ec;
  auto none = other.create_mappings({"missing-too"}, ec);
  CHECK(ec == inferwire::gms::errc::server_error);
  CHECK(other.create_mappings({ids[1]}, ec).front() == other.create_mapping(ids[1]));
  CHECK_FALSE(ec);

  // The session level: results in order, each with its descriptor.
  inferwire::gms::session raw(s.path(), requested_lock_type::ro);
  auto exported = raw.export_allocations({ids[3], ids[4], ids[3]});
  REQUIRE(exported.size() == 3);
  CHECK(exported[0].info.allocation_id == ids[3]);
  CHECK(exported[1].info.allocation_id == ids[4]);
  CHECK(exported[2].info.aligned_size == MiB2);
  for (const auto& e : exported) CHECK(static_cast<bool>(e.fd));
}

namespace {

/// mmap_mapper whose import fails once `fail_at` imports have succeeded (a device refusing a
/// handle in the middle of a batch).
struct failing_mapper : gms::mmap_mapper {
  int* imports = nullptr;
  int fail_at = -1;
  handle import(gms::unique_fd fd, std::size_t size) {
    if (fail_at >= 0 && *imports == fail_at) throw gms::error("import refused by the test");
    ++*imports;
    return gms::mmap_mapper::import(std::move(fd), size);
  }
};

std::ptrdiff_t open_fds() {
  return std::distance(std::filesystem::directory_iterator("/proc/self/fd"), std::filesystem::directory_iterator{});
}

}  // namespace

TEST_CASE("gms memory_manager: create_mappings puts a batch side by side in one reservation", "[gms]") {
  test_server s;
  manager writer(s.path());
  publish(writer, {MiB2, 2 * MiB2, MiB2, MiB2}, 'r');
  manager reader(s.path());
  reader.connect(requested_lock_type::ro);
  std::vector<std::string> ids;
  for (const auto& a : reader.list_handles()) ids.push_back(a.allocation_id);
  auto vas = reader.create_mappings(ids);
  REQUIRE(vas.size() == 4);
  // In reply order, each right after the one before.
  CHECK(vas[1] == vas[0] + MiB2);
  CHECK(vas[2] == vas[1] + 2 * MiB2);
  CHECK(vas[3] == vas[2] + MiB2);
  for (auto va : vas) CHECK(reader.find(va)->reservation == vas[0]);
  CHECK(at(vas[1])[2 * MiB2 - 1] == 'r');
  // Freeing one keeps the others mapped and its range reserved; the last gives it all back.
  reader.free_va(vas[1]);
  CHECK(at(vas[2])[0] == 'r');
  CHECK(reader.mapper().validate(vas[1]));  // still ours (PROT_NONE)
  CHECK(write_faults(at(vas[1])));
  reader.free_va(vas[0]);
  reader.free_va(vas[3]);
  CHECK(reader.mapper().validate(vas[0]));
  reader.free_va(vas[2]);
  CHECK_FALSE(reader.mapper().validate(vas[0]));
  CHECK_FALSE(reader.mapper().validate(vas[3]));
  // Mapped again: a new reservation.
  auto again = reader.create_mappings({ids[2], ids[3]});
  CHECK(again[1] == again[0] + MiB2);
  CHECK(at(again[1])[MiB2 - 1] == 'r');
}

TEST_CASE("gms memory_manager: a mapped range exported for a CUDA VMM region", "[gms][vmm]") {
  // The layout and descriptors gms::register_cuda_vmm() deposits with inferwire-server: one
  // chunk per allocation the range covers, each descriptor from the GMS server.
  test_server s;
  manager m(s.path());
  m.connect(requested_lock_type::rw);
  std::vector<std::string> ids;
  for (std::int64_t size : {MiB2, 2 * MiB2, MiB2}) ids.push_back(m.allocate_handle(size, "weights").allocation_id);
  const auto vas = m.create_mappings(ids);
  REQUIRE(vas.size() == 3);
  REQUIRE(vas[2] == vas[0] + 3 * MiB2);
  for (std::size_t i = 0; i < 3; ++i) std::memset(at(vas[i]), 'a' + static_cast<int>(i), 16);

  // From 4 KiB into the first allocation to one byte into the third.
  const std::uintptr_t start = vas[0] + 4096;
  const std::size_t size = vas[2] + 1 - start;
  const auto e = gms::export_for_cuda_vmm(m, start, size);
  CHECK(e.layout.device == 0);
  CHECK(e.layout.offset == 4096);
  CHECK(e.layout.byte_size == size);
  CHECK(e.layout.chunk_sizes == std::vector<std::uint64_t>{MiB2, 2 * MiB2, MiB2});
  REQUIRE(e.fds.size() == 3);
  // Each descriptor is the memory behind its mapping: what one writes, the other shows.
  for (std::size_t i = 0; i < 3; ++i) {
    const auto bytes = static_cast<std::size_t>(e.layout.chunk_sizes[i]);
    void* p = ::mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_SHARED, e.fds[i].get(), 0);
    REQUIRE(p != MAP_FAILED);
    auto* c = static_cast<char*>(p);
    CHECK(c[15] == 'a' + static_cast<int>(i));
    c[bytes - 1] = 'z';
    CHECK(at(vas[i])[bytes - 1] == 'z');
    ::munmap(p, bytes);
  }
  // One allocation on its own, from its first byte.
  CHECK(gms::export_for_cuda_vmm(m, vas[1], 2 * MiB2).layout.chunk_sizes == std::vector<std::uint64_t>{2 * MiB2});

  CHECK_THROWS_AS(gms::export_for_cuda_vmm(m, start, 0), std::invalid_argument);
  CHECK_THROWS_WITH(gms::export_for_cuda_vmm(m, vas[2], 2 * MiB2),
                    Contains("byte 2097152 of the range is not memory this GMS client mapped"));
  CHECK_THROWS_WITH(gms::export_for_cuda_vmm(m, vas[0] - 1, 2), Contains("byte 0 of the range"));
  CHECK_THROWS_AS(gms::export_for_cuda_vmm(m, UINTPTR_MAX - 8, 16), std::invalid_argument);
  // A hole in the middle: the second allocation unmapped.
  m.unmap_va(vas[1]);
  CHECK_THROWS_WITH(gms::export_for_cuda_vmm(m, vas[0], 4 * MiB2), Contains("byte 2097152 of the range"));
}

TEST_CASE("gms memory_manager: a failed import maps none of the batch and keeps the session", "[gms]") {
  test_server s;
  manager writer(s.path());
  publish(writer, std::vector<std::int64_t>(40, MiB2), 'f');
  std::vector<std::string> ids;
  {
    manager warm(s.path());  // the server's read-only descriptors are made on first export
    warm.connect(requested_lock_type::ro);
    for (const auto& a : warm.list_handles()) ids.push_back(a.allocation_id);
    warm.create_mappings(ids);
  }
  int imports = 0;
  failing_mapper fm;
  fm.imports = &imports;
  fm.fail_at = 20;
  gms::memory_manager<failing_mapper> m(s.path(), fm);
  m.connect(requested_lock_type::ro);
  const auto baseline = open_fds();
  CHECK_THROWS_WITH(m.create_mappings(ids), "import refused by the test");
  CHECK(m.mappings().empty());
  CHECK(imports == 20);
  // Every reply was read (the descriptors after the failure closed), so the session goes on.
  CHECK(eventually([&] { return open_fds() == baseline; }));
  CHECK(m.metadata_get("t3").found);
  m.mapper().fail_at = -1;
  auto vas = m.create_mappings(ids);
  CHECK(m.mappings().size() == 40);
  CHECK(at(vas[39])[0] == 'f');
}

namespace {

/// A stand-in GMS server on one connection: grants RO at once (nothing committed) and answers
/// each ExportAllocation with what `describe(id)` says and a fresh 2 MiB memfd, to see how the
/// client takes replies a real server would never send.
class scripted_server {
 public:
  explicit scripted_server(std::function<gms::allocation_info(const std::string&)> describe)
      : path_(fresh_socket_path()), describe_(std::move(describe)) {
    listener_ = ::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    sockaddr_un a{};
    a.sun_family = AF_UNIX;
    std::memcpy(a.sun_path, path_.c_str(), path_.size() + 1);
    REQUIRE(::bind(listener_, reinterpret_cast<sockaddr*>(&a), sizeof a) == 0);
    REQUIRE(::listen(listener_, 4) == 0);
    thread_ = std::thread([this] { serve(); });
  }
  ~scripted_server() {
    ::shutdown(listener_, SHUT_RDWR);
    if (const int c = connection_.load(); c >= 0) ::shutdown(c, SHUT_RDWR);
    thread_.join();
    ::close(listener_);
    ::unlink(path_.c_str());
  }
  const std::string& path() const { return path_; }

 private:
  void serve() {
    const int c = ::accept4(listener_, nullptr, nullptr, SOCK_CLOEXEC);
    if (c < 0) return;
    connection_ = c;
    gms::frame_reader reader;
    std::vector<char> buf(65536);
    for (;;) {
      std::string payload;
      if (reader.next(payload) != gms::frame_reader::result::frame) {
        const ssize_t n = ::recv(c, buf.data(), buf.size(), 0);
        if (n <= 0) break;
        reader.append(buf.data(), static_cast<std::size_t>(n));
        continue;
      }
      const gms::message m = gms::decode(payload);
      if (std::holds_alternative<gms::handshake_request>(m)) {
        const auto frame = gms::encode_frame(gms::handshake_response{true, false, gms::granted_lock_type::ro});
        ::send(c, frame.data(), frame.size(), MSG_NOSIGNAL);
      } else if (auto* q = std::get_if<gms::export_allocation_request>(&m)) {
        gms::export_allocation_response r;
        static_cast<gms::allocation_info&>(r) = describe_(q->allocation_id);
        const int fd = ::memfd_create("scripted", MFD_CLOEXEC);
        ::ftruncate(fd, MiB2);
        gms::send_with_fd(c, gms::encode_frame(r), fd);
        ::close(fd);
      }
    }
    ::close(c);
  }

  std::string path_;
  std::function<gms::allocation_info(const std::string&)> describe_;
  int listener_ = -1;
  std::atomic<int> connection_{-1};
  std::thread thread_;
};

}  // namespace

TEST_CASE("gms memory_manager: replies with impossible sizes map nothing and keep the session", "[gms]") {
  scripted_server s([](const std::string& id) {
    gms::allocation_info a{id, MiB2, MiB2, "weights", 0};
    if (id == "unaligned") a.aligned_size = 3 << 20;  // not a multiple of the granularity
    if (id == "negative") a.aligned_size = -MiB2;
    if (id == "larger") a.size = 2 * MiB2;            // more than its aligned size
    if (id == "huge") a.aligned_size = std::int64_t{1} << 62;
    if (id == "beyond") a.size = a.aligned_size = 2 * MiB2;  // the memfd sent holds 2 MiB
    return a;
  });
  manager m(s.path());
  m.connect(requested_lock_type::ro);
  for (const char* bad : {"unaligned", "negative", "larger"}) {
    CHECK_THROWS_WITH(m.create_mappings({"ok1", bad, "ok2"}), Contains("invalid aligned size"));
    CHECK(m.mappings().empty());
  }
  // Sizes the address space or the descriptor cannot hold: refused before anything is mapped.
  CHECK_THROWS_AS(m.create_mappings({"huge", "ok1"}), std::exception);
  CHECK_THROWS_WITH(m.create_mappings({"ok1", "beyond"}), Contains("fewer than the 4194304 described"));
  CHECK_THROWS_WITH(m.create_mapping(std::string("negative")), Contains("invalid aligned size"));
  CHECK(m.mappings().empty());
  // Every reply was read: the session is still in step.
  auto vas = m.create_mappings({"ok1", "ok2"});
  CHECK(vas[1] == vas[0] + MiB2);
  CHECK(m.mappings().size() == 2);
}

TEST_CASE("gms memory_manager: remap after sleep", "[gms]") {
  test_server s;
  manager writer(s.path());
  publish(writer, {MiB2, MiB2}, 'a');
  manager r(s.path());
  r.connect(requested_lock_type::ro);
  auto v0 = r.create_mapping(r.metadata_get("t0").allocation_id);
  auto v1 = r.create_mapping(r.metadata_get("t1").allocation_id);
  r.unmap_all_vas();
  r.abort();
  CHECK(r.unmapped());
  CHECK_THROWS_WITH(r.create_mapping({}, 1), "Memory manager is not connected");

  SECTION("the unchanged layout remaps at the same VAs") {
    r.connect(requested_lock_type::ro);
    r.remap_all_vas();
    CHECK(at(v0)[0] == 'a');
    CHECK(at(v1)[0] == 'a');
  }
  SECTION("a changed layout is stale") {
    manager w2(s.path());
    publish(w2, {MiB2, 2 * MiB2}, 'b');
    r.connect(requested_lock_type::ro);
    CHECK_THROWS_AS(r.remap_all_vas(), gms::stale_memory_layout);
    CHECK_THROWS_WITH(r.remap_all_vas(), StartsWith("Layout changed: "));
    CHECK(r.unmapped());
  }
  SECTION("a new layout with the same structure remaps and adopts the new ids") {
    const std::string old_id = r.find(v0)->allocation_id;
    manager w2(s.path());
    publish(w2, {MiB2, MiB2}, 'c');
    r.connect(requested_lock_type::ro);
    r.remap_all_vas();
    CHECK(at(v0)[0] == 'c');  // new memory, same address
    CHECK(r.find(v0)->allocation_id != old_id);
    CHECK(r.va_of(r.find(v0)->allocation_id) == v0);
    CHECK_FALSE(r.va_of(old_id));
  }
}

TEST_CASE("gms memory_manager: slot and size checks when no hash was saved", "[gms]") {
  test_server s;
  manager w(s.path());
  w.connect(requested_lock_type::rw);
  w.create_mapping({}, MiB2);
  w.create_mapping({}, MiB2);
  w.unmap_all_vas();
  w.abort();  // the server drops this layout; the VAs stay reserved here
  SECTION("a missing slot") {
    manager w2(s.path());
    publish(w2, {MiB2}, 'x', "default");
    w.connect(requested_lock_type::ro);
    CHECK_THROWS_WITH(w.remap_all_vas(), "Layout slot 1 is missing from the committed layout");
  }
  SECTION("a different size") {
    manager w2(s.path());
    publish(w2, {MiB2, 2 * MiB2}, 'x', "default");
    w.connect(requested_lock_type::ro);
    CHECK_THROWS_WITH(w.remap_all_vas(), Contains("size changed"));
  }
  SECTION("a different tag") {
    manager w2(s.path());
    publish(w2, {MiB2, MiB2}, 'x');  // tag "weights", ours were "default"
    w.connect(requested_lock_type::ro);
    CHECK_THROWS_WITH(w.remap_all_vas(), Contains("tag changed"));
  }
}

TEST_CASE("gms memory_manager: reallocate then remap reuses the VAs", "[gms]") {
  test_server s;
  manager kv(s.path());
  kv.connect(requested_lock_type::rw);
  auto a = kv.create_mapping({}, MiB2, "kv_cache");
  auto b = kv.create_mapping({}, 4 * MiB2, "kv_cache");
  at(a)[0] = 1;
  kv.unmap_all_vas();  // sleep: the server keeps the layout while we hold RW...
  kv.abort();          // ...and drops it when we let go
  REQUIRE(eventually([&] { return gms::session::runtime_state(s.path()).allocation_count == 0; }));
  kv.connect(requested_lock_type::rw);
  kv.reallocate_all_handles();
  kv.remap_all_vas();
  CHECK(kv.mappings().size() == 2);
  CHECK(kv.find(a)->mapped);
  CHECK(kv.find(b)->aligned_size == 4 * MiB2);
  CHECK(kv.find(b)->tag == "kv_cache");
  at(b)[4 * MiB2 - 1] = 7;  // writable again
  CHECK(at(a)[0] == 0);      // fresh memory
  auto list = kv.list_handles("kv_cache");
  REQUIRE(list.size() == 2);
  CHECK(kv.va_of(list[0].allocation_id) == a);
  CHECK(kv.va_of(list[1].allocation_id) == b);
}

TEST_CASE("gms memory_manager: destroy_mapping frees the allocation and its metadata", "[gms]") {
  test_server s;
  manager w(s.path());
  w.connect(requested_lock_type::rw);
  auto va = w.create_mapping({}, 100);
  const std::string id = w.find(va)->allocation_id;
  w.metadata_put("k", id, 50, "v");
  w.destroy_mapping(va);
  CHECK(w.mappings().empty());
  CHECK(w.list_handles().empty());
  CHECK(w.metadata_list().empty());
  CHECK_THROWS_AS(w.destroy_mapping(va), gms::error);
  CHECK_THROWS_AS(w.create_mapping({}, 0), std::invalid_argument);
  CHECK_THROWS_AS(w.connect(requested_lock_type::rw), gms::error);  // already connected
}

TEST_CASE("gms: error_code forms report what the throwing forms throw", "[gms]") {
  // No server: connection_failed, with the throwing form's text.
  std::error_code ec;
  auto none = gms::session::open("/nonexistent/gms.sock", requested_lock_type::rw, ec);
  CHECK_FALSE(none);
  CHECK(ec == gms::errc::connection_failed);
  CHECK(ec.category() == gms::category());
  CHECK_THAT(ec.message(), StartsWith("GMS server not running at /nonexistent/gms.sock"));
  try {
    gms::session("/nonexistent/gms.sock", requested_lock_type::rw);
    FAIL("no exception");
  } catch (const gms::error& e) {
    CHECK(e.code() == gms::errc::connection_failed);
    CHECK(e.code().message() == e.what());
  }

  test_server s;
  auto w = gms::session::open(s.path(), requested_lock_type::rw, ec);
  REQUIRE_FALSE(ec);
  REQUIRE(w);
  // A second writer cannot get the lock in time.
  auto late = gms::session::open(s.path(), requested_lock_type::rw, ec, 0);
  CHECK_FALSE(late);
  CHECK(ec == gms::errc::lock_timeout);
  CHECK(ec.message() == "Timeout waiting for lock");
  // A server ErrorResponse: the session stays usable.
  CHECK(w->get_allocation("no-such-id", ec).allocation_id.empty());
  CHECK(ec == gms::errc::server_error);
  CHECK_THAT(ec.message(), StartsWith("GMS request GetAllocationRequest error: "));
  auto a = w->allocate(MiB2, "weights", ec);
  REQUIRE_FALSE(ec);
  CHECK(a.aligned_size == MiB2);
  auto e = w->export_allocation(a.allocation_id, ec);
  CHECK_FALSE(ec);
  CHECK(e.fd);
  w->metadata_put("k", a.allocation_id, 0, "v", ec);
  CHECK_FALSE(ec);
  CHECK(w->metadata_list("", ec) == std::vector<std::string>{"k"});
  w->commit(ec);
  CHECK_FALSE(ec);
  CHECK(w->get_lock_state(ec).state.empty());  // the session ended with the commit
  CHECK(ec == gms::errc::connection_failed);

  // The memory manager: a stale layout is stale_layout, without an exception.
  manager m(s.path());
  m.connect(requested_lock_type::ro, ec);
  REQUIRE_FALSE(ec);
  CHECK(m.create_mapping(a.allocation_id, 0, "", ec) != 0);
  CHECK_FALSE(ec);
  m.unmap_all_vas(ec);
  CHECK_FALSE(ec);
  m.abort();
  {  // a new writer publishes a different layout
    manager w2(s.path());
    publish(w2, {2 * MiB2}, 'x');
  }
  m.connect(requested_lock_type::ro, ec);
  REQUIRE_FALSE(ec);
  m.remap_all_vas(ec);
  CHECK(ec == gms::errc::stale_layout);
  CHECK_THAT(ec.message(), StartsWith("Layout"));
  m.commit(ec);  // RW only
  CHECK(ec == gms::errc::failed);
  CHECK(ec.message() == "Operation requires RW mode");
}
