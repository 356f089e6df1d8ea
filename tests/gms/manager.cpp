// SPDX-License-Identifier: Apache-2.0
// gms::memory_manager with mmap_mapper against the memfd server: VA-stable commit, unmap and
// remap, read-only access for readers, stale-layout detection, reallocation.
#include "fixture.hpp"

#include <inferwire/gms/cuda_vmm.hpp>
#include <inferwire/gms/memory_manager.hpp>
#include <inferwire/gms/mmap_mapper.hpp>

#include <catch2/catch.hpp>

#include <csignal>

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

constexpr std::int64_t MiB2 = std::int64_t{2} << 20;

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
