// SPDX-License-Identifier: Apache-2.0
// gms::server with the memfd backend, driven through real Unix sockets by gms::session and by
// raw bytes: the session protocol, the lock FSM scenarios, permissions, metadata rules,
// connection drops, killed clients and the upstream quirks we fix.
#include "fixture.hpp"

#include <inferwire/gms/layout_hash.hpp>

#include <catch2/catch.hpp>

#include <csignal>
#include <filesystem>
#include <future>
#include <random>

#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/wait.h>

using namespace gms_test;
using gms::requested_lock_type;
using Catch::Matchers::Contains;
using Catch::Matchers::Equals;
using Catch::Matchers::StartsWith;

namespace {

gms::get_runtime_state_response state(const test_server& s) { return gms::session::runtime_state(s.path()); }

std::vector<std::string> event_kinds(const test_server& s) {
  std::vector<std::string> out;
  for (const auto& e : gms::session::event_history(s.path()).events) out.push_back(e.kind);
  return out;
}

void* map_fd(int fd, std::size_t size, int prot) {
  void* p = ::mmap(nullptr, size, prot, MAP_SHARED, fd, 0);
  REQUIRE(p != MAP_FAILED);
  return p;
}

}  // namespace

TEST_CASE("gms server: a commit publishes allocations, metadata and the layout hash", "[gms]") {
  test_server s;
  gms::session w(s.path(), requested_lock_type::rw);
  CHECK(w.granted() == gms::granted_lock_type::rw);
  CHECK_FALSE(w.committed_at_connect());
  auto a = w.allocate(4096, "weights");
  auto b = w.allocate(3145728);
  CHECK(a.size == 4096);
  CHECK(a.aligned_size == MiB2);
  CHECK(a.layout_slot == 0);
  CHECK(b.aligned_size == 2 * MiB2);
  CHECK(b.layout_slot == 1);
  CHECK(a.allocation_id.size() == 36);
  CHECK(a.allocation_id[14] == '4');  // a version-4 UUID
  w.metadata_put("tensor.0", a.allocation_id, 0, R"({"x":1})");
  CHECK(w.get_memory_layout_hash().empty());  // nothing committed yet
  CHECK(w.get_lock_state().state == "RW");
  w.commit();
  CHECK_FALSE(w.connected());

  // The spec's test vector: the same layout, whatever the allocation ids.
  const std::string expected = "7abf180f8a031defd71f13aa7d3294d041c1955b635c32e37efbed148abd8c22";
  auto rs = state(s);
  CHECK(rs.state == "COMMITTED");
  CHECK(rs.committed);
  CHECK(rs.is_ready);
  CHECK(rs.allocation_count == 2);
  CHECK(rs.memory_layout_hash == expected);

  gms::session r(s.path(), requested_lock_type::ro, 1000);
  CHECK(r.granted() == gms::granted_lock_type::ro);
  CHECK(r.committed_at_connect());
  CHECK(r.get_memory_layout_hash() == expected);
  auto list = r.list_allocations();
  REQUIRE(list.size() == 2);
  CHECK(list[0].allocation_id == a.allocation_id);
  CHECK(list[0].tag == "weights");
  CHECK(list[1].tag == "default");
  CHECK(r.list_allocations("weights").size() == 1);
  CHECK(r.list_allocations("nope").empty());
  auto md = r.metadata_get("tensor.0");
  CHECK(md.found);
  CHECK(md.allocation_id == a.allocation_id);
  CHECK(md.offset_bytes == 0);
  CHECK(md.value->data == R"({"x":1})");
  CHECK(r.get_allocation_state() == 2);
  auto ls = r.get_lock_state();
  CHECK(ls.state == "RO");
  CHECK(ls.ro_session_count == 1);
  CHECK_FALSE(ls.has_rw_session);
  CHECK(event_kinds(s) == std::vector<std::string>{"rw_connected", "committed"});
}

TEST_CASE("gms server: an empty commit hashes to SHA-256 of nothing", "[gms]") {
  test_server s;
  gms::session(s.path(), requested_lock_type::rw).commit();
  CHECK(state(s).memory_layout_hash == "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855");
}

TEST_CASE("gms server: exported descriptors share the allocation's memory", "[gms]") {
  test_server s;
  gms::session w(s.path(), requested_lock_type::rw);
  auto a = w.allocate(100);
  auto e1 = w.export_allocation(a.allocation_id);
  auto e2 = w.export_allocation(a.allocation_id);
  CHECK(e1.info.allocation_id == a.allocation_id);
  CHECK(e1.info.size == 100);
  CHECK(e1.info.layout_slot == 0);
  REQUIRE(e1.fd);
  REQUIRE(e2.fd);
  CHECK(e1.fd.get() != e2.fd.get());
  struct stat st1{}, st2{};
  ::fstat(e1.fd.get(), &st1);
  ::fstat(e2.fd.get(), &st2);
  CHECK(st1.st_ino == st2.st_ino);
  CHECK(st1.st_size == MiB2);
  auto* p = static_cast<char*>(map_fd(e1.fd.get(), MiB2, PROT_READ | PROT_WRITE));
  std::memcpy(p + 12345, "weights!", 8);
  w.commit();

  gms::session r(s.path(), requested_lock_type::ro);
  auto e3 = r.export_allocation(a.allocation_id);
  auto* q = static_cast<const char*>(map_fd(e3.fd.get(), MiB2, PROT_READ));
  CHECK(std::string(q + 12345, 8) == "weights!");
  ::munmap(p, MiB2);
  ::munmap(const_cast<char*>(q), MiB2);
}

TEST_CASE("gms server: exports queued behind a full socket keep their memory when it is freed", "[gms]") {
  // Replies that go out at once carry the backend's own descriptor; those that must wait get
  // a copy, which stays valid after the free that follows them.
  server_config cfg;
  cfg.adjust = [](gms::server_options& o) { o.max_pending_fds = 1000; };
  test_server s(cfg);
  gms::session w(s.path(), requested_lock_type::rw);
  auto a = w.allocate(MiB2);
  {
    auto e = w.export_allocation(a.allocation_id);
    auto* p = static_cast<char*>(map_fd(e.fd.get(), MiB2, PROT_READ | PROT_WRITE));
    std::memcpy(p + 4096, "kept", 4);
    ::munmap(p, MiB2);
  }
  const int exports = 400;  // more replies with descriptors than a socket buffer holds
  std::string frames;
  for (int i = 0; i < exports; ++i) frames += gms::encode_frame(gms::export_allocation_request{a.allocation_id});
  frames += gms::encode_frame(gms::free_allocation_request{a.allocation_id});
  const int sock = w.native_handle();
  REQUIRE(::send(sock, frames.data(), frames.size(), MSG_NOSIGNAL) == static_cast<ssize_t>(frames.size()));
  // Read only once the server has freed the allocation.
  CHECK(eventually([&] { return s.backend_bytes() == 0; }));
  gms::frame_reader reader;
  std::vector<int> fds;
  std::vector<gms::message> replies;
  std::vector<char> buf(4096);
  while (replies.size() < static_cast<std::size_t>(exports + 1)) {
    std::string payload;
    if (reader.next(payload) == gms::frame_reader::result::frame) {
      replies.push_back(gms::decode(payload));
      continue;
    }
    const ssize_t n = gms::recv_with_fds(sock, buf.data(), buf.size(), fds);
    REQUIRE(n > 0);
    reader.append(buf.data(), static_cast<std::size_t>(n));
  }
  REQUIRE(fds.size() == static_cast<std::size_t>(exports));
  for (int i = 0; i < exports; ++i)
    CHECK(std::holds_alternative<gms::export_allocation_response>(replies[static_cast<std::size_t>(i)]));
  REQUIRE(std::holds_alternative<gms::free_allocation_response>(replies.back()));
  CHECK(std::get<gms::free_allocation_response>(replies.back()).success);
  for (int fd : {fds.front(), fds.back()}) {
    auto* q = static_cast<const char*>(map_fd(fd, MiB2, PROT_READ));
    CHECK(std::string(q + 4096, 4) == "kept");
    ::munmap(const_cast<char*>(q), MiB2);
  }
  for (int fd : fds) ::close(fd);
}

TEST_CASE("gms server: a writer that disconnects before commit aborts and clears", "[gms]") {
  test_server s;
  {
    gms::session w(s.path(), requested_lock_type::rw);
    auto a = w.allocate(MiB2);
    w.allocate(MiB2);
    w.metadata_put("k", a.allocation_id, 0, "v");
  }
  REQUIRE(eventually([&] { return state(s).state == "EMPTY"; }));
  auto rs = state(s);
  CHECK(rs.allocation_count == 0);
  CHECK_FALSE(rs.committed);
  CHECK(rs.memory_layout_hash.empty());
  CHECK(s.backend_bytes() == 0);
  auto h = gms::session::event_history(s.path());
  REQUIRE(h.events.size() == 3);
  CHECK(h.events[1].kind == "rw_aborted");
  CHECK(h.events[2].kind == "allocations_cleared");
  CHECK(h.events[2].allocation_count == 2);
  // Readers wait for a new commit.
  CHECK_THROWS_AS(gms::session(s.path(), requested_lock_type::ro, 100), gms::lock_timeout);
}

TEST_CASE("gms server: a writer that sends an undecodable frame is dropped and aborts", "[gms]") {
  test_server s;
  gms::session w(s.path(), requested_lock_type::rw);
  w.allocate(MiB2);
  const std::string junk = "\xc1\xc1";
  ::send(w.native_handle(), gms::frame_header(junk.size()).data(), 4, MSG_NOSIGNAL);
  ::send(w.native_handle(), junk.data(), junk.size(), MSG_NOSIGNAL);
  REQUIRE(eventually([&] { return state(s).state == "EMPTY"; }));
  CHECK(state(s).allocation_count == 0);
  CHECK_THROWS_AS(w.get_lock_state(), gms::connection_error);
}

TEST_CASE("gms server: rw_or_ro is RW on an empty server and RO on a committed one", "[gms]") {
  test_server s;
  {
    gms::session w(s.path(), requested_lock_type::rw_or_ro, 0);  // the fast path, even at 0
    CHECK(w.granted() == gms::granted_lock_type::rw);
    w.allocate(MiB2);
    w.commit();
  }
  gms::session r(s.path(), requested_lock_type::rw_or_ro, 1000);
  CHECK(r.granted() == gms::granted_lock_type::ro);
  CHECK(r.committed_at_connect());

  SECTION("behind a writer it waits and becomes a reader when the writer commits") {
    r.close();
    REQUIRE(eventually([&] { return state(s).state == "COMMITTED"; }));
    gms::session w(s.path(), requested_lock_type::rw);
    auto pending = std::async(std::launch::async, [&] {
      return gms::session(s.path(), requested_lock_type::rw_or_ro, 5000).granted();
    });
    REQUIRE(eventually([&] { return gms::session::runtime_state(s.path()).state == "RW"; }));
    CHECK(pending.wait_for(std::chrono::milliseconds(100)) == std::future_status::timeout);
    w.commit();
    CHECK(pending.get() == gms::granted_lock_type::ro);
  }
  SECTION("behind a writer it waits and becomes the writer when the writer aborts") {
    r.close();
    REQUIRE(eventually([&] { return state(s).state == "COMMITTED"; }));
    auto w = std::make_unique<gms::session>(s.path(), requested_lock_type::rw);
    auto pending = std::async(std::launch::async, [&] {
      gms::session x(s.path(), requested_lock_type::rw_or_ro, 5000);
      return x.granted();
    });
    CHECK(pending.wait_for(std::chrono::milliseconds(100)) == std::future_status::timeout);
    w.reset();  // abort: the server is EMPTY, so rw_or_ro takes RW
    CHECK(pending.get() == gms::granted_lock_type::rw);
  }
}

TEST_CASE("gms server: the probes have no side effects", "[gms]") {
  test_server s;
  auto before = state(s);
  CHECK(before.state == "EMPTY");
  CHECK_FALSE(before.is_ready);
  CHECK(event_kinds(s).empty());
  for (int i = 0; i < 5; ++i) {
    state(s);
    gms::session::event_history(s.path());
  }
  CHECK(event_kinds(s).empty());
  gms::session w(s.path(), requested_lock_type::rw);
  w.allocate(MiB2);
  auto during = state(s);
  CHECK(during.state == "RW");
  CHECK(during.has_rw_session);
  CHECK(during.allocation_count == 1);
  // The writer is undisturbed by probes and keeps its layout.
  CHECK(w.get_allocation_state() == 1);
  // Inside a session a probe is refused, and the session stays usable.
  auto m = w.request(gms::get_runtime_state_request{});
  REQUIRE(std::holds_alternative<gms::error_response>(m));
  CHECK(std::get<gms::error_response>(m).error == "GetRuntimeStateRequest not allowed for RW session in state RW");
  CHECK(w.get_lock_state().state == "RW");
  // The server closes a probe's connection after the reply.
  raw_socket probe(s.path());
  probe.send(gms::encode_frame(gms::get_event_history_request{}));
  CHECK_FALSE(probe.read_frame().empty());
  CHECK(probe.closed_within(2000));
}

TEST_CASE("gms server: a new writer replaces a committed layout at once", "[gms]") {
  test_server s;
  {
    gms::session w(s.path(), requested_lock_type::rw);
    auto a = w.allocate(MiB2, "weights");
    w.allocate(MiB2, "weights");
    w.metadata_put("k", a.allocation_id, 1, "v");
    w.commit();
  }
  gms::session w2(s.path(), requested_lock_type::rw);
  CHECK_FALSE(w2.committed_at_connect());
  CHECK(w2.get_allocation_state() == 0);
  CHECK(w2.list_allocations().empty());
  CHECK(w2.metadata_list().empty());
  CHECK(w2.get_memory_layout_hash().empty());
  CHECK(w2.allocate(MiB2).layout_slot == 0);  // slots start again
  auto h = gms::session::event_history(s.path());
  REQUIRE(h.events.size() == 4);
  CHECK(h.events[2].kind == "allocations_cleared");
  CHECK(h.events[2].allocation_count == 2);
  CHECK(h.events[3].kind == "rw_connected");
}

TEST_CASE("gms server: a waiting writer blocks new readers and gets the lock after the last reader",
          "[gms]") {
  test_server s;
  gms::session(s.path(), requested_lock_type::rw).commit();
  auto r1 = std::make_unique<gms::session>(s.path(), requested_lock_type::ro);
  auto r2 = std::make_unique<gms::session>(s.path(), requested_lock_type::ro);
  auto writer = std::async(std::launch::async, [&] {
    gms::session w(s.path(), requested_lock_type::rw, 10000);
    return w.get_lock_state();
  });
  REQUIRE(eventually([&] { return state(s).waiting_writers == 1; }));
  auto ls = r1->get_lock_state();
  CHECK(ls.waiting_writers == 1);
  CHECK(ls.ro_session_count == 2);
  // A new reader now waits behind the writer.
  CHECK_THROWS_AS(gms::session(s.path(), requested_lock_type::ro, 150), gms::lock_timeout);
  r1.reset();
  CHECK(writer.wait_for(std::chrono::milliseconds(150)) == std::future_status::timeout);
  r2.reset();
  auto granted = writer.get();
  CHECK(granted.state == "RW");
  CHECK(granted.waiting_writers == 0);
}

TEST_CASE("gms server: handshake timeouts", "[gms]") {
  test_server s;
  SECTION("a non-positive timeout fails at once even when the lock is free (upstream behaviour)") {
    CHECK_THROWS_AS(gms::session(s.path(), requested_lock_type::rw, 0), gms::lock_timeout);
    CHECK_THROWS_AS(gms::session(s.path(), requested_lock_type::rw, -5), gms::lock_timeout);
    CHECK(state(s).state == "EMPTY");
  }
  SECTION("a reader on an empty server times out and the server closes the connection") {
    raw_socket c(s.path());
    const auto t0 = std::chrono::steady_clock::now();
    c.send(gms::encode_frame(gms::handshake_request{requested_lock_type::ro, 120}));
    const std::string f = c.read_frame();
    const auto waited = std::chrono::steady_clock::now() - t0;
    CHECK(waited >= std::chrono::milliseconds(110));
    // HandshakeResponse(success=false, committed=false, granted=nil).
    CHECK(f == gms::encode_frame(gms::handshake_response{false, false, std::nullopt}));
    CHECK(c.closed_within(2000));
  }
  SECTION("a writer times out behind a writer; the failed response carries the committed flag") {
    gms::session(s.path(), requested_lock_type::rw).commit();
    gms::session r(s.path(), requested_lock_type::ro);
    raw_socket c(s.path());
    c.send(gms::encode_frame(gms::handshake_request{requested_lock_type::rw, 100}));
    CHECK(c.read_frame() == gms::encode_frame(gms::handshake_response{false, true, std::nullopt}));
    CHECK(state(s).waiting_writers == 0);
    // Readers are not blocked by a writer that gave up.
    gms::session r2(s.path(), requested_lock_type::ro, 1000);
    CHECK(r2.get_lock_state().ro_session_count == 2);
  }
}

TEST_CASE("gms server: permissions per granted lock", "[gms]") {
  test_server s;
  std::string id;
  {
    gms::session w(s.path(), requested_lock_type::rw);
    id = w.allocate(MiB2).allocation_id;
    auto m = w.request(gms::handshake_request{requested_lock_type::rw, {}});
    CHECK(std::get<gms::error_response>(m).error == "HandshakeRequest not allowed for RW session in state RW");
    m = w.request(gms::commit_response{true});
    CHECK(std::get<gms::error_response>(m).error == "CommitResponse not allowed for RW session in state RW");
    w.commit();
  }
  gms::session r(s.path(), requested_lock_type::ro);
  auto refused = [&](auto request, const std::string& cls) {
    auto m = r.request(request);
    REQUIRE(std::holds_alternative<gms::error_response>(m));
    CHECK(std::get<gms::error_response>(m).error == cls + " not allowed for RO session in state RO");
    CHECK(std::get<gms::error_response>(m).code == 0);
  };
  refused(gms::allocate_request{MiB2, "default"}, "AllocateRequest");
  refused(gms::free_allocation_request{id}, "FreeAllocationRequest");
  refused(gms::metadata_put_request{"k", id, 0, {}}, "MetadataPutRequest");
  refused(gms::metadata_delete_request{"k"}, "MetadataDeleteRequest");
  refused(gms::commit_request{}, "CommitRequest");
  refused(gms::get_event_history_request{}, "GetEventHistoryRequest");
  // The typed client reports the same text.
  try {
    r.allocate(1);
    FAIL("allocate in an RO session succeeded");
  } catch (const gms::server_error& e) {
    CHECK(e.text() == "AllocateRequest not allowed for RO session in state RO");
    CHECK_THAT(std::string(e.what()), StartsWith("GMS request AllocateRequest error: "));
  }
  // The session is still usable and nothing changed.
  CHECK(r.get_allocation_state() == 1);
  CHECK(r.get_allocation(id).allocation_id == id);
  CHECK(r.export_allocation(id).fd);
}

TEST_CASE("gms server: request errors keep the session open", "[gms]") {
  test_server s;
  gms::session w(s.path(), requested_lock_type::rw);
  auto error_of = [&](auto request) {
    auto m = w.request(request);
    REQUIRE(std::holds_alternative<gms::error_response>(m));
    return std::get<gms::error_response>(m).error;
  };
  CHECK(error_of(gms::allocate_request{0, "default"}) == "size must be > 0, got 0");
  CHECK(error_of(gms::allocate_request{-7, "default"}) == "size must be > 0, got -7");
  CHECK(error_of(gms::export_allocation_request{"nope"}) == "Unknown allocation: nope");
  CHECK(error_of(gms::get_allocation_request{"nope"}) == "Unknown allocation: nope");
  CHECK(error_of(gms::metadata_put_request{"k", "nope", 0, {}}) == "Unknown allocation: nope");
  CHECK_FALSE(w.free("nope"));
  auto a = w.allocate(100);
  CHECK(error_of(gms::metadata_put_request{"k", a.allocation_id, -1, {}}) == "offset_bytes must be >= 0, got -1");
  CHECK(error_of(gms::metadata_put_request{"k", a.allocation_id, MiB2, {}}) ==
        "offset_bytes 2097152 out of range for allocation " + a.allocation_id + " (aligned_size=2097152)");
  // The last byte of the aligned size is in range, past the requested size.
  w.metadata_put("k", a.allocation_id, MiB2 - 1, "");
  CHECK(w.get_allocation_state() == 1);
  CHECK_THROWS_AS(w.allocate(0), gms::server_error);
  CHECK(w.get_lock_state().state == "RW");
}

TEST_CASE("gms server: metadata store", "[gms]") {
  test_server s;
  gms::session w(s.path(), requested_lock_type::rw);
  auto a = w.allocate(MiB2);
  auto b = w.allocate(MiB2);
  w.metadata_put("layer.1.bias", a.allocation_id, 64, std::string("\0\x01\xff", 3));
  w.metadata_put("layer.0.weight", b.allocation_id, 0, "x");
  w.metadata_put("emb", a.allocation_id, 128, "");
  w.metadata_put("\xc3\xa9t\xc3\xa9", a.allocation_id, 0, "unicode key");
  w.metadata_put("layer.0.weight", a.allocation_id, 8, "overwritten");
  CHECK(w.metadata_list() == std::vector<std::string>{"emb", "layer.0.weight", "layer.1.bias", "\xc3\xa9t\xc3\xa9"});
  CHECK(w.metadata_list("layer.") == std::vector<std::string>{"layer.0.weight", "layer.1.bias"});
  CHECK(w.metadata_list("zzz").empty());
  auto g = w.metadata_get("layer.0.weight");
  CHECK(g.allocation_id == a.allocation_id);
  CHECK(g.offset_bytes == 8);
  CHECK(g.value->data == "overwritten");
  CHECK(w.metadata_get("layer.1.bias").value->data == std::string("\0\x01\xff", 3));
  auto none = w.metadata_get("missing");
  CHECK_FALSE(none.found);
  CHECK_FALSE(none.allocation_id);
  CHECK_FALSE(none.offset_bytes);
  CHECK_FALSE(none.value);
  CHECK(w.metadata_delete("emb"));
  CHECK_FALSE(w.metadata_delete("emb"));
  CHECK(w.metadata_list().size() == 3);
}

TEST_CASE("gms server: freeing an allocation deletes its metadata and leaves slot gaps", "[gms]") {
  test_server s;
  gms::session w(s.path(), requested_lock_type::rw);
  auto a = w.allocate(MiB2);
  auto b = w.allocate(MiB2);
  w.metadata_put("a1", a.allocation_id, 0, "");
  w.metadata_put("a2", a.allocation_id, 4, "");
  w.metadata_put("b1", b.allocation_id, 0, "");
  CHECK(w.free(a.allocation_id));
  CHECK_FALSE(w.free(a.allocation_id));
  CHECK(w.metadata_list() == std::vector<std::string>{"b1"});
  CHECK(w.allocate(MiB2).layout_slot == 2);  // slot 0 is not reused
  auto list = w.list_allocations();
  REQUIRE(list.size() == 2);
  CHECK(list[0].layout_slot == 1);
  CHECK(list[1].layout_slot == 2);
  CHECK(s.backend_bytes() == 2 * MiB2);
  w.commit();
  CHECK(state(s).allocation_count == 2);
}

TEST_CASE("gms server: the first frame must be a handshake or a probe", "[gms]") {
  test_server s;
  SECTION("another message gets 'Expected HandshakeRequest' and a close") {
    raw_socket c(s.path());
    c.send(gms::encode_frame(gms::allocate_request{MiB2, "default"}));
    CHECK(c.read_frame() == gms::encode_frame(gms::error_response{"Expected HandshakeRequest", 0}));
    CHECK(c.closed_within(2000));
  }
  SECTION("an undecodable handshake is closed without a reply (upstream hangs)") {
    for (std::string payload : {std::string("\xc1"), gms::encode(gms::commit_request{}).substr(0, 5),
                                unhex("82a474797065b168616e647368616b655f72657175657374a96c6f636b5f74797065a27878"),
                                unhex("81a474797065a3666f6f")}) {
      raw_socket c(s.path());
      c.send(gms::frame_header(payload.size()) + payload);
      CHECK(c.closed_within(2000));
    }
  }
  SECTION("a frame over the size cap is closed") {
    raw_socket c(s.path());
    c.send(gms::frame_header(std::size_t{1} << 30));
    CHECK(c.closed_within(2000));
  }
  SECTION("frames that omit defaulted fields are accepted") {
    raw_socket c(s.path());
    // {"type":"handshake_request","lock_type":"rw"}
    const std::string hs = unhex("82a474797065b168616e647368616b655f72657175657374a96c6f636b5f74797065a27277");
    c.send(gms::frame_header(hs.size()) + hs);
    CHECK(c.read_frame() ==
          gms::encode_frame(gms::handshake_response{true, false, gms::granted_lock_type::rw}));
    // {"type":"metadata_list_request"} and pipelined behind it a lock-state request.
    const std::string list = unhex("81a474797065b56d657461646174615f6c6973745f72657175657374");
    c.send(gms::frame_header(list.size()) + list + gms::encode_frame(gms::get_lock_state_request{}));
    CHECK(c.read_frame() == gms::encode_frame(gms::metadata_list_response{}));
    auto m = gms::decode(c.read_frame().substr(4));
    CHECK(std::get<gms::get_lock_state_response>(m).state == "RW");
  }
  CHECK(state(s).state == "EMPTY");
}

TEST_CASE("gms server: responses on the wire match the golden frames", "[gms]") {
  test_server s;
  raw_socket c(s.path());
  auto golden = [](const char* length, const char* payload) { return unhex(length) + unhex(payload); };
  const std::string fixed_id = "00000000-0000-4000-8000-000000000000";
  c.send(golden("00000031", "83a474797065b168616e647368616b655f72657175657374a96c6f636b5f74797065a27277aa74696d656f75745f6d73c0"));
  CHECK(hex(c.read_frame()) ==
        "00000042" "84a474797065b268616e647368616b655f726573706f6e7365a773756363657373c3a9636f6d6d6974746564c2b16772616e7465645f6c6f636b5f74797065a27277");
  c.send(golden("0000002d", "83a474797065b0616c6c6f636174655f72657175657374a473697a65ce00200000a3746167a777656967687473"));
  std::string alloc = c.read_frame();
  auto id = std::get<gms::allocate_response>(gms::decode(alloc.substr(4))).allocation_id;
  REQUIRE(id.size() == 36);
  auto with_fixed_id = [&](std::string frame) {
    for (auto pos = frame.find(id); pos != std::string::npos; pos = frame.find(id)) frame.replace(pos, 36, fixed_id);
    return hex(frame);
  };
  CHECK(with_fixed_id(alloc) ==
        "00000075" "85a474797065b1616c6c6f636174655f726573706f6e7365ad616c6c6f636174696f6e5f6964d92430303030303030302d303030302d343030302d383030302d303030303030303030303030a473697a65ce00200000ac616c69676e65645f73697a65ce00200000ab6c61796f75745f736c6f7400");
  // ExportAllocationRequest for the real id, built from the golden frame.
  std::string export_request = golden("00000054", "82a474797065b96578706f72745f616c6c6f636174696f6e5f72657175657374ad616c6c6f636174696f6e5f6964d92430303030303030302d303030302d343030302d383030302d303030303030303030303030");
  export_request.replace(export_request.find(fixed_id), 36, id);
  c.send(export_request);
  int fd = -1;
  std::string exported = c.read_frame(&fd);
  CHECK(fd >= 0);
  if (fd >= 0) ::close(fd);
  CHECK(with_fixed_id(exported) ==
        "0000008a" "86a474797065ba6578706f72745f616c6c6f636174696f6e5f726573706f6e7365ad616c6c6f636174696f6e5f6964d92430303030303030302d303030302d343030302d383030302d303030303030303030303030a473697a65ce00200000ac616c69676e65645f73697a65ce00200000a3746167a777656967687473ab6c61796f75745f736c6f7400");
  c.send(gms::encode_frame(gms::metadata_get_request{"missing"}));
  CHECK(hex(c.read_frame()) ==
        "00000047" "85a474797065b56d657461646174615f6765745f726573706f6e7365a5666f756e64c2ad616c6c6f636174696f6e5f6964c0ac6f66667365745f6279746573c0a576616c7565c0");
  c.send(golden("00000015", "81a474797065ae636f6d6d69745f72657175657374"));
  CHECK(hex(c.read_frame()) == "0000001f" "82a474797065af636f6d6d69745f726573706f6e7365a773756363657373c3");
  // No descriptor leak: the server's close after a commit reaches us as EOF, exports or not.
  CHECK(c.closed_within(2000));
  raw_socket p(s.path());
  p.send(gms::encode_frame(gms::get_event_history_request{}));
  auto events = std::get<gms::get_event_history_response>(gms::decode(p.read_frame().substr(4)));
  REQUIRE(events.events.size() == 2);
  CHECK(gms::encode_frame(gms::get_event_history_response{{events.events[1]}}) ==
        golden("0000004b", "82a474797065ba6765745f6576656e745f686973746f72795f726573706f6e7365a66576656e74739182a46b696e64a9636f6d6d6974746564b0616c6c6f636174696f6e5f636f756e7400"));
}

TEST_CASE("gms server: a writer killed with SIGKILL releases its lock and allocations", "[gms]") {
  test_server s;
  const pid_t child = ::fork();
  REQUIRE(child >= 0);
  if (child == 0) {
    try {
      gms::session w(s.path(), requested_lock_type::rw);
      w.allocate(MiB2);
      w.allocate(MiB2);
      for (;;) ::pause();
    } catch (...) {
    }
    ::_exit(3);
  }
  child_guard guard(child);
  REQUIRE(eventually([&] { return state(s).allocation_count == 2; }));
  CHECK(state(s).state == "RW");
  CHECK(WIFSIGNALED(guard.stop(SIGKILL)));
  REQUIRE(eventually([&] { return state(s).state == "EMPTY"; }));
  CHECK(state(s).allocation_count == 0);
  CHECK(s.backend_bytes() == 0);
  // The lock is free for the next writer.
  gms::session w(s.path(), requested_lock_type::rw, 1000);
  CHECK(w.granted() == gms::granted_lock_type::rw);
}

TEST_CASE("gms server: an RO handshake with a huge timeout waits behind a waiting writer", "[gms]") {
  test_server s;
  {
    gms::session w(s.path(), requested_lock_type::rw);
    w.commit();
  }
  gms::session r(s.path(), requested_lock_type::ro);  // holds RO
  raw_socket writer(s.path());
  writer.send(gms::encode_frame(gms::handshake_request{requested_lock_type::rw, {}}));
  REQUIRE(eventually([&] { return state(s).waiting_writers == 1; }));
  // timeout_ms near 2^63: writers have priority, so this reader must keep waiting (an
  // overflow in the deadline arithmetic would refuse it at once).
  raw_socket reader(s.path());
  reader.send(gms::encode_frame(
      gms::handshake_request{requested_lock_type::ro, std::numeric_limits<std::int64_t>::max() - 1}));
  CHECK(reader.read_frame(nullptr, 300).empty());  // no answer: still waiting
  CHECK_FALSE(reader.closed_within(10));
}

TEST_CASE("gms server: a killed reader does not disturb the others", "[gms]") {
  test_server s;
  {
    gms::session w(s.path(), requested_lock_type::rw);
    w.metadata_put("k", w.allocate(MiB2).allocation_id, 0, "v");
    w.commit();
  }
  gms::session r(s.path(), requested_lock_type::ro);
  const pid_t child = ::fork();
  REQUIRE(child >= 0);
  if (child == 0) {
    try {
      gms::session other(s.path(), requested_lock_type::ro);
      for (;;) ::pause();
    } catch (...) {
    }
    ::_exit(3);
  }
  child_guard guard(child);
  REQUIRE(eventually([&] { return state(s).ro_session_count == 2; }));
  guard.stop(SIGKILL);
  REQUIRE(eventually([&] { return state(s).ro_session_count == 1; }));
  CHECK(r.metadata_get("k").found);
  CHECK(r.get_lock_state().state == "RO");
  CHECK(state(s).allocation_count == 1);
  r.close();
  REQUIRE(eventually([&] { return state(s).state == "COMMITTED"; }));
}

TEST_CASE("gms server: a writer waiting for the lock that hangs up is never granted", "[gms]") {
  test_server s;
  {
    gms::session w(s.path(), requested_lock_type::rw);
    w.allocate(MiB2);
    w.commit();
  }
  auto r = std::make_unique<gms::session>(s.path(), requested_lock_type::ro);
  {
    raw_socket c(s.path());
    c.send(gms::encode_frame(gms::handshake_request{requested_lock_type::rw, {}}));
    REQUIRE(eventually([&] { return state(s).waiting_writers == 1; }));
  }  // hangs up while waiting
  REQUIRE(eventually([&] { return state(s).waiting_writers == 0; }));
  r.reset();
  REQUIRE(eventually([&] { return state(s).state == "COMMITTED"; }));
  // Upstream would have granted the dead writer and cleared the layout.
  CHECK(state(s).allocation_count == 1);
  CHECK(state(s).committed);
}

TEST_CASE("gms server: out-of-memory allocations retry, record an event and time out", "[gms]") {
  server_config cfg;
  cfg.capacity = 2 * MiB2;
  cfg.retry_interval = 0.05;
  cfg.retry_timeout = 0.2;
  test_server s(cfg);
  gms::session w(s.path(), requested_lock_type::rw);
  w.allocate(MiB2);
  w.allocate(MiB2);
  const auto t0 = std::chrono::steady_clock::now();
  try {
    w.allocate(4096, "kv_cache");
    FAIL("allocation beyond capacity succeeded");
  } catch (const gms::server_error& e) {
    CHECK_THAT(e.text(), StartsWith("Timed out waiting for GPU memory: requested_size=4096, aligned_size=2097152, "
                                    "tag=kv_cache, waited_sec=0."));
    // Three decimals, as Dynamo writes it.
    CHECK(e.text().size() - e.text().rfind('.') == 4);
  }
  CHECK(std::chrono::steady_clock::now() - t0 >= std::chrono::milliseconds(200));
  auto h = gms::session::event_history(s.path());
  REQUIRE(h.events.size() == 2);
  CHECK(h.events[1].kind == "allocation_oom");
  CHECK(h.events[1].allocation_count == 2);
  // The session goes on; freeing makes room.
  CHECK(w.free(w.list_allocations()[0].allocation_id));
  CHECK(w.allocate(4096).aligned_size == MiB2);
}

TEST_CASE("gms server: other connections are served while an allocation waits for memory", "[gms]") {
  server_config cfg;
  cfg.capacity = MiB2;
  cfg.retry_interval = 0.02;
  test_server s(cfg);
  auto w = std::make_unique<gms::session>(s.path(), requested_lock_type::rw);
  w->allocate(MiB2);
  std::thread stuck([&] {
    try {
      w->allocate(MiB2);  // waits for memory
    } catch (const gms::error&) {
    }
  });
  REQUIRE(eventually([&] {
    auto e = gms::session::event_history(s.path()).events;
    return !e.empty() && e.back().kind == "allocation_oom";
  }));
  // Probes and handshakes are still answered.
  raw_socket c(s.path());
  c.send(gms::encode_frame(gms::handshake_request{requested_lock_type::rw, 50}));
  CHECK(c.read_frame() == gms::encode_frame(gms::handshake_response{false, false, std::nullopt}));
  CHECK(state(s).allocation_count == 1);
  // A writer that hangs up during the wait is dropped and its layout cleared.
  ::shutdown(w->native_handle(), SHUT_RDWR);
  stuck.join();
  REQUIRE(eventually([&] { return state(s).state == "EMPTY"; }));
  CHECK(s.backend_bytes() == 0);
}

TEST_CASE("gms server: start-up, socket mode, stale sockets and shutdown", "[gms]") {
  const std::string path = fresh_socket_path();
  REQUIRE(make_stale_socket(path));  // a socket file with no server behind it is replaced
  REQUIRE(std::filesystem::exists(path));
  auto s = std::make_unique<test_server>(server_config{}, path);
  struct stat st{};
  REQUIRE(::stat(path.c_str(), &st) == 0);
  CHECK((st.st_mode & 0777) == 0600);
  // A second server refuses to take over a live one.
  boost::asio::io_context ioc;
  gms::memfd_backend backend;
  gms::server_options second_options;
  second_options.socket_path = path;
  gms::server<gms::memfd_backend> second(ioc, backend, second_options);
  CHECK_THROWS_WITH(second.start(), "GMS already running at " + path);

  auto w = std::make_unique<gms::session>(path, requested_lock_type::rw);
  w->allocate(MiB2);
  raw_socket waiting(path);
  waiting.send(gms::encode_frame(gms::handshake_request{requested_lock_type::ro, {}}));
  REQUIRE(eventually([&] { return s->backend_bytes() == std::size_t(MiB2); }));
  s->shutdown();
  // Every allocation released, the socket removed, clients see the connection close.
  CHECK(s->backend_bytes() == 0);
  CHECK_FALSE(std::filesystem::exists(path));
  CHECK(waiting.closed_within(2000));
  CHECK_THROWS_AS(w->get_lock_state(), gms::connection_error);
}

TEST_CASE("gms session: connection errors name the cause", "[gms]") {
  CHECK_THROWS_WITH(gms::session("/tmp/iw-gms-no-such.sock", requested_lock_type::rw),
                    "GMS server not running at /tmp/iw-gms-no-such.sock");
  test_server s;
  gms::session w(s.path(), requested_lock_type::rw);
  w.commit();
  CHECK_THROWS_WITH(w.get_lock_state(), Contains("not connected"));
}

TEST_CASE("gms server: exports leak no descriptors", "[gms]") {
  auto open_fds = [] {
    return std::distance(std::filesystem::directory_iterator("/proc/self/fd"), std::filesystem::directory_iterator{});
  };
  test_server s;
  const auto baseline = open_fds();
  {
    gms::session w(s.path(), requested_lock_type::rw);
    auto a = w.allocate(MiB2);
    for (int i = 0; i < 50; ++i) CHECK(w.export_allocation(a.allocation_id).fd);
    w.commit();
  }
  // What remains is the server's own descriptor of the one allocation.
  CHECK(eventually([&] { return open_fds() == baseline + 1; }));
}

TEST_CASE("gms server: randomised malformed traffic never breaks the server", "[gms]") {
  test_server s;
  std::mt19937 rng(12345);
  const std::vector<std::string> seeds{
      gms::encode_frame(gms::handshake_request{requested_lock_type::rw, {}}),
      gms::encode_frame(gms::handshake_request{requested_lock_type::ro, 10}),
      gms::encode_frame(gms::allocate_request{MiB2, "weights"}),
      gms::encode_frame(gms::metadata_put_request{"k", "id", 1, gms::bytes{"v"}}),
      gms::encode_frame(gms::list_allocations_request{}),
      gms::encode_frame(gms::commit_request{}),
      gms::encode_frame(gms::get_runtime_state_request{})};
  auto mutate = [&](std::string f) {
    switch (rng() % 4) {
      case 0: f.resize(rng() % (f.size() + 1)); break;                        // truncated
      case 1: f[rng() % f.size()] = static_cast<char>(rng()); break;          // one byte flipped
      case 2: f.insert(rng() % f.size(), 1, static_cast<char>(rng())); break; // a byte inserted
      default:                                                                // garbage payload
        f = gms::frame_header(8);
        for (int i = 0; i < 8; ++i) f.push_back(static_cast<char>(rng()));
    }
    return f;
  };
  for (int i = 0; i < 300; ++i) {
    raw_socket c(s.path());
    // Half of the time inside an RW session (a handshake first), else as the first frame.
    if (i % 2 == 0) {
      c.send(seeds[0]);
      if (c.read_frame(nullptr, 2000).empty()) continue;  // the lock may be busy: a reader
    }
    c.send(mutate(seeds[rng() % seeds.size()]));
    c.read_frame(nullptr, 50);  // a reply, a close or nothing; never a crash
  }
  // Still serving, with a consistent state, and a full publish works.
  REQUIRE(eventually([&] { return state(s).state == "EMPTY" || state(s).state == "COMMITTED"; }));
  CHECK(state(s).waiting_writers == 0);
  gms::session w(s.path(), requested_lock_type::rw, 5000);
  auto a = w.allocate(MiB2, "weights");
  w.metadata_put("k", a.allocation_id, 0, "v");
  w.commit();
  auto rs = state(s);
  CHECK(rs.state == "COMMITTED");
  CHECK(rs.allocation_count == 1);
  CHECK(s.backend_bytes() == std::size_t(MiB2));
}
