// SPDX-License-Identifier: Apache-2.0
#include <inferwire/shm/vmm_channel.hpp>

#include "vmm_layout.hpp"

#include <catch2/catch.hpp>

#include <string>
#include <vector>

#include <cstring>

#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

namespace shm = inferwire::shm;
using iwtest::layout_of;

namespace {
std::string hex(std::string_view s) {
  static const char* d = "0123456789abcdef";
  std::string out;
  for (unsigned char c : s) out += {d[c >> 4], d[c & 15]};
  return out;
}
}  // namespace

TEST_CASE("vmm_handle: 64 bytes, our magic, round trip", "[shm][vmm]") {
  shm::vmm_handle h;
  for (std::size_t i = 0; i < h.token.size(); ++i) h.token[i] = static_cast<unsigned char>(0xa0 + i);
  h.byte_size = 0x0102030405060708;
  h.device = 3;
  h.chunks = 0x11223344;
  const std::string b = h.encode();
  REQUIRE(b.size() == shm::vmm_handle_size);
  CHECK(hex(b) ==
        "4957564d4d464431"                  // IWVMMFD1
        "a0a1a2a3a4a5a6a7a8a9aaabacadaeaf"  // token
        "0807060504030201"                  // byte size, little-endian
        "03000000"                          // device
        "44332211"                          // chunk count
        "000000000000000000000000000000000000000000000000");
  CHECK(shm::is_vmm_handle(b));
  auto d = shm::vmm_handle::decode(b);
  REQUIRE(d);
  CHECK(d->token == h.token);
  CHECK(d->byte_size == h.byte_size);
  CHECK(d->device == 3);
  CHECK(d->chunks == h.chunks);

  // A legacy cudaIpcMemHandle_t (opaque bytes), a short one, reserved bytes set: not ours.
  CHECK_FALSE(shm::is_vmm_handle(std::string(64, '\0')));
  CHECK_FALSE(shm::vmm_handle::decode(std::string(64, '\x7f')));
  CHECK_FALSE(shm::vmm_handle::decode(b.substr(0, 63)));
  std::string reserved = b;
  reserved[63] = 1;
  CHECK(shm::is_vmm_handle(reserved));
  CHECK_FALSE(shm::vmm_handle::decode(reserved));
}

TEST_CASE("vmm deposit: wire bytes and round trip", "[shm][vmm]") {
  const auto l = layout_of({0x200000, 0x400000}, 0x10, 0x500000, 1);
  const std::string p = shm::encode_deposit(l);
  CHECK(hex(p) ==
        "44010000"          // 'D', version 1, reserved
        "01000000"          // device 1
        "02000000"          // 2 chunks
        "00000000"          // reserved
        "1000000000000000"  // offset
        "0000500000000000"  // byte size
        "0000200000000000"  // chunk 0
        "0000400000000000");  // chunk 1
  shm::vmm_layout back;
  std::string why;
  REQUIRE(shm::decode_deposit(p, back, why));
  CHECK(why.empty());
  CHECK(back.device == 1);
  CHECK(back.offset == 0x10);
  CHECK(back.byte_size == 0x500000);
  CHECK(back.chunk_sizes == l.chunk_sizes);
  CHECK(back.mapped_size() == 0x600000);
  CHECK(hex(shm::vmm_frame("ab")) == "020000006162");
}

TEST_CASE("vmm deposit: every refusal says why", "[shm][vmm]") {
  auto refused = [](std::string payload) {
    shm::vmm_layout l;
    std::string why;
    CHECK_FALSE(shm::decode_deposit(payload, l, why));
    return why;
  };
  const std::string good = shm::encode_deposit(layout_of({4096}, 0, 4096));
  CHECK(refused("") == "not a deposit message");
  CHECK(refused(std::string(40, 'X')) == "not a deposit message");
  std::string v = good;
  v[1] = 2;
  CHECK(refused(v) == "unknown deposit version 2");
  std::string r = good;
  r[13] = 1;
  CHECK(refused(r) == "reserved deposit bits are set");
  CHECK(refused(good + "x") == "a deposit of 1 chunks has 40 bytes, not 41");
  CHECK(refused(good.substr(0, 39)) == "a deposit of 1 chunks has 40 bytes, not 39");
  std::string many = good;
  many[8] = 0x01;
  many[9] = 0x04;  // 1025 chunks
  CHECK(refused(many) == "too many chunks: 1025 (at most 1024)");
  CHECK(refused(shm::encode_deposit(layout_of({}, 0, 1))) == "a region needs at least one chunk");
  CHECK(refused(shm::encode_deposit(layout_of({4096, 0}, 0, 1))) == "chunk 1 has size 0");
  CHECK(refused(shm::encode_deposit(layout_of({UINT64_MAX, 2}, 0, 1))) == "the chunk sizes overflow");
  CHECK(refused(shm::encode_deposit(layout_of({4096}, 0, 0))) == "the region's byte size must be > 0");
  CHECK(refused(shm::encode_deposit(layout_of({4096, 4096}, 4096, 1))) ==
        "the region must start in its first chunk (offset 4096, first chunk 4096 bytes)");
  CHECK(refused(shm::encode_deposit(layout_of({4096, 4096}, 1, 8192))) ==
        "the region (offset 1, 8192 bytes) does not fit in its chunks (8192 bytes)");
  CHECK(refused(shm::encode_deposit(layout_of({4096}, 0, 1, -1))) ==
        "the device must be a CUDA ordinal (>= 0), not -1");
}

TEST_CASE("vmm descriptors: more than one message's worth travel in groups, in order", "[shm][vmm]") {
  int sv[2];
  REQUIRE(::socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv) == 0);
  shm::unique_fd a(sv[0]), b(sv[1]);
  // 150 descriptors: three groups (64, 64, 22), each a memfd whose size names its index.
  std::vector<shm::unique_fd> owned;
  std::vector<int> fds;
  for (int i = 0; i < 150; ++i) {
    owned.emplace_back(::memfd_create("vmm_unit", MFD_CLOEXEC));
    REQUIRE(owned.back());
    REQUIRE(::ftruncate(owned.back().get(), i + 1) == 0);
    fds.push_back(owned.back().get());
  }
  std::vector<std::uint64_t> sizes(150, 4096);
  const std::string frame = shm::vmm_frame(shm::encode_deposit(layout_of(sizes, 0, 4096)));
  shm::detail::send_with_fds(a.get(), frame, fds);
  std::string got;
  std::vector<shm::unique_fd> received;
  int messages = 0;
  while (got.size() < frame.size()) {
    char data[65536];
    iovec iov{data, sizeof data};
    alignas(cmsghdr) char control[CMSG_SPACE(sizeof(int) * 64)];
    msghdr msg{};
    msg.msg_iov = &iov;
    msg.msg_iovlen = 1;
    msg.msg_control = control;
    msg.msg_controllen = sizeof control;
    const ssize_t n = ::recvmsg(b.get(), &msg, MSG_CMSG_CLOEXEC);
    REQUIRE(n > 0);
    CHECK_FALSE(msg.msg_flags & MSG_CTRUNC);
    ++messages;
    shm::detail::for_each_received_fd(msg, [&received](int fd) { received.emplace_back(fd); });
    got.append(data, static_cast<std::size_t>(n));
  }
  CHECK(got == frame);
  CHECK(messages >= 3);
  REQUIRE(received.size() == 150);
  for (std::size_t i = 0; i < received.size(); ++i) {
    struct stat st {};
    REQUIRE(::fstat(received[i].get(), &st) == 0);
    CHECK(st.st_size == static_cast<off_t>(i + 1));
  }
}

TEST_CASE("vmm_channel: a client without a server, and bad calls", "[shm][vmm]") {
  const std::string path = "/tmp/iwunit_vmm_none_" + std::to_string(::getpid()) + ".sock";
  try {
    shm::vmm_channel::connect(path);
    FAIL("connected to nothing");
  } catch (const std::system_error& e) {
    CHECK(std::string(e.what()).find("--allow-client-shm=true") != std::string::npos);
  }
  CHECK_THROWS_AS(shm::vmm_channel::connect(std::string(200, 'x')), std::invalid_argument);
  shm::vmm_channel closed;
  CHECK_FALSE(closed);
  CHECK_THROWS_AS(closed.deposit(layout_of({4096}, 0, 1), {}), std::logic_error);
}
