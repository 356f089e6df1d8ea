// SPDX-License-Identifier: Apache-2.0
#include <inferwire/gms/framing.hpp>

#include <catch2/catch.hpp>

#include <memory>

#include <sys/mman.h>
#include <sys/stat.h>

namespace gms = inferwire::gms;

TEST_CASE("gms frame_reader splits a stream at any boundary", "[gms]") {
  std::string stream = gms::encode_frame(gms::commit_request{}) +
                       gms::encode_frame(gms::allocate_request{2097152, "weights"}) +
                       gms::encode_frame(gms::metadata_list_request{});
  for (std::size_t chunk : {1u, 3u, 7u, 1000u}) {
    INFO(chunk);
    gms::frame_reader r;
    std::vector<gms::message> got;
    std::string payload;
    for (std::size_t i = 0; i < stream.size(); i += chunk) {
      r.append(stream.data() + i, std::min(chunk, stream.size() - i));
      while (r.next(payload) == gms::frame_reader::result::frame) got.push_back(gms::decode(payload));
    }
    REQUIRE(got.size() == 3);
    CHECK(std::holds_alternative<gms::commit_request>(got[0]));
    CHECK(std::get<gms::allocate_request>(got[1]).size == 2097152);
    CHECK(std::holds_alternative<gms::metadata_list_request>(got[2]));
    CHECK(r.buffered() == 0);
  }
}

TEST_CASE("gms frame_reader refuses oversized frames", "[gms]") {
  gms::frame_reader r(16);
  std::string header = gms::frame_header(17);
  r.append(header.data(), header.size());
  std::string payload;
  CHECK(r.next(payload) == gms::frame_reader::result::too_large);
  gms::frame_reader empty;
  std::string zero = gms::frame_header(0);
  empty.append(zero.data(), zero.size());
  CHECK(empty.next(payload) == gms::frame_reader::result::frame);
  CHECK(payload.empty());
  CHECK(gms::frame_header(0x01020304) == std::string("\x01\x02\x03\x04", 4));
}

TEST_CASE("gms fd passing: one fd on the first byte of a frame", "[gms]") {
  int sv[2];
  REQUIRE(::socketpair(AF_UNIX, SOCK_STREAM, 0, sv) == 0);
  int mem = ::memfd_create("gms-test", MFD_CLOEXEC);
  REQUIRE(mem >= 0);
  REQUIRE(::ftruncate(mem, 4096) == 0);
  REQUIRE(::pwrite(mem, "gms", 3, 0) == 3);
  const std::string frame =
      gms::encode_frame(gms::export_allocation_response{{"id", 4096, 4096, "weights", 0}});
  CHECK(gms::send_with_fd(sv[0], frame, mem) == static_cast<ssize_t>(frame.size()));
  ::close(mem);

  std::vector<int> fds;
  std::string buf(65536, '\0');
  ssize_t n = gms::recv_with_fds(sv[1], buf.data(), buf.size(), fds);
  REQUIRE(n == static_cast<ssize_t>(frame.size()));
  REQUIRE(fds.size() == 1);
  char text[4] = {};
  CHECK(::pread(fds[0], text, 3, 0) == 3);
  CHECK(std::string(text) == "gms");
  gms::frame_reader r;
  r.append(buf.data(), static_cast<std::size_t>(n));
  std::string payload;
  REQUIRE(r.next(payload) == gms::frame_reader::result::frame);
  CHECK(std::get<gms::export_allocation_response>(gms::decode(payload)).tag == "weights");
  ::close(fds[0]);
  // A plain frame brings no descriptor.
  const std::string plain = gms::encode_frame(gms::commit_response{true});
  CHECK(::send(sv[0], plain.data(), plain.size(), MSG_NOSIGNAL) == static_cast<ssize_t>(plain.size()));
  fds.clear();
  CHECK(gms::recv_with_fds(sv[1], buf.data(), buf.size(), fds) == static_cast<ssize_t>(plain.size()));
  CHECK(fds.empty());
  ::close(sv[0]);
  fds.clear();
  CHECK(gms::recv_with_fds(sv[1], buf.data(), buf.size(), fds) == 0);  // end of stream
  ::close(sv[1]);
}

TEST_CASE("gms batched reads: each reply with its descriptor, then the end of stream", "[gms]") {
  int sv[2];
  REQUIRE(::socketpair(AF_UNIX, SOCK_STREAM, 0, sv) == 0);
  // Three replies with a descriptor each, a plain one, then the sender closes.
  std::vector<std::string> frames;
  for (int i = 0; i < 3; ++i) {
    int mem = ::memfd_create("gms-test", MFD_CLOEXEC);
    REQUIRE(mem >= 0);
    REQUIRE(::ftruncate(mem, 4096 * (i + 1)) == 0);
    frames.push_back(gms::encode_frame(gms::export_allocation_response{{"id" + std::to_string(i), 1, 4096, "t", i}}));
    CHECK(gms::send_with_fd(sv[0], frames.back(), mem) == static_cast<ssize_t>(frames.back().size()));
    ::close(mem);
  }
  const std::string plain = gms::encode_frame(gms::commit_response{true});
  CHECK(::send(sv[0], plain.data(), plain.size(), MSG_NOSIGNAL) == static_cast<ssize_t>(plain.size()));
  ::close(sv[0]);

  auto batch = std::make_unique<gms::batched_reader<16, 4096>>();
  const int reads = batch->read(sv[1]);
  // One read per descriptor-carrying reply, the plain reply, then the end of stream (every
  // further slot reads it again).
  REQUIRE(reads >= 5);
  for (int i = 0; i < 3; ++i) {
    CHECK(batch->bytes(i) == frames[static_cast<std::size_t>(i)]);
    std::vector<int> fds;
    batch->take_fds(i, fds);
    REQUIRE(fds.size() == 1);
    struct stat st {};
    CHECK(::fstat(fds[0], &st) == 0);
    CHECK(st.st_size == 4096 * (i + 1));  // its own memfd, in order
    ::close(fds[0]);
  }
  CHECK(batch->bytes(3) == plain);
  std::vector<int> none;
  batch->take_fds(3, none);
  CHECK(none.empty());
  CHECK(batch->bytes(4).empty());  // end of stream
  ::close(sv[1]);
}
