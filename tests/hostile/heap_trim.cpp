// SPDX-License-Identifier: Apache-2.0
// The server's heap trimmer: free heap pages go back to the system once large requests are
// answered and the server is quiet, never while a request is in flight.
#include "heap_trim.hpp"

#include "proc.hpp"

#include <catch2/catch.hpp>

#include <boost/asio/io_context.hpp>

#include <cstdlib>
#include <sys/mman.h>
#include <unistd.h>
#include <cstring>
#include <string>
#include <vector>

using namespace inferwire::server;
using namespace std::chrono_literals;

TEST_CASE("heap trim: waits until nothing is in flight, and small requests never arm it", "[hostile][heap]") {
  boost::asio::io_context io;
  std::atomic<std::int64_t> in_flight{1};
  heap_trimmer trim(io.get_executor(), in_flight);

  trim.note(heap_trimmer::large_request_bytes - 1);
  io.run_for(2 * heap_trimmer::quiet);
  CHECK(trim.trims() == 0);

  trim.note(heap_trimmer::large_request_bytes);
  io.restart();
  io.run_for(3 * heap_trimmer::quiet);
  CHECK(trim.trims() == 0);  // a request is still in flight: the timer waits again

  in_flight = 0;
  io.restart();
  io.run_for(3 * heap_trimmer::quiet);
  CHECK(trim.trims() == 1);

  // Once trimmed, the next large request arms it again.
  trim.note(std::uint64_t{64} << 20);
  io.restart();
  io.run_for(3 * heap_trimmer::quiet);
  CHECK(trim.trims() == 2);
}

TEST_CASE("heap trim: large buffers are kept for the next request, bounded, and freed once quiet", "[hostile][heap]") {
  boost::asio::io_context io;
  std::atomic<std::int64_t> in_flight{0};
  heap_trimmer trim(io.get_executor(), in_flight);
  constexpr std::size_t large = heap_trimmer::kept_buffer_bytes;

  // Small buffers are not kept (glibc's heap reuses them), nor one past the bound.
  std::string small(large - 1, 'x');
  trim.keep_buffer(small);
  CHECK(small.size() == large - 1);
  std::string huge;
  huge.reserve(heap_trimmer::most_kept_bytes + 1);
  trim.keep_buffer(huge);
  CHECK(huge.capacity() > heap_trimmer::most_kept_bytes);
  CHECK(trim.kept_bytes() == 0);

  // A large one is kept, left empty; the next entry that fits takes it, emptied.
  std::string a(large, 'a');
  const char* a_bytes = a.data();
  trim.keep_buffer(a);
  CHECK(a.capacity() < large);
  CHECK(trim.kept_bytes() >= large);
  std::string entry;
  CHECK_FALSE(trim.take_buffer(entry, large - 1));  // too small to be served from the kept ones
  CHECK_FALSE(trim.take_buffer(entry, 2 * large));   // none that large
  REQUIRE(trim.take_buffer(entry, large));
  CHECK(entry.data() == a_bytes);
  CHECK(entry.empty());
  CHECK(trim.kept_bytes() == 0);
  // An entry that already holds enough takes nothing.
  CHECK_FALSE(trim.take_buffer(entry, large));

  // The smallest that fits is taken; at most most_kept buffers and most_kept_bytes are kept.
  std::vector<std::string> many;
  for (std::size_t n : {3 * large, large, 2 * large}) {
    many.emplace_back();
    many.back().reserve(n);
  }
  for (auto& m : many) trim.keep_buffer(m);
  const std::size_t kept = trim.kept_bytes();
  CHECK(kept >= 6 * large);
  std::string beyond;
  beyond.reserve(heap_trimmer::most_kept_bytes - kept + 1);
  trim.keep_buffer(beyond);  // would pass most_kept_bytes
  CHECK(trim.kept_bytes() == kept);
  std::string second;
  REQUIRE(trim.take_buffer(second, large + 1));
  CHECK(second.capacity() >= 2 * large);
  CHECK(second.capacity() < 3 * large);
  std::string third;
  CHECK_FALSE(trim.take_buffer(third, 1));  // below the kept size: not served from them
  CHECK(trim.kept_bytes() == kept - second.capacity());

  // make_room: nothing below the kept size; a kept buffer when one fits, else a fresh one.
  std::string room;
  CHECK_FALSE(trim.make_room(room, large - 1));
  CHECK(room.capacity() < large);
  const std::size_t before_room = trim.kept_bytes();
  REQUIRE(trim.make_room(room, large));
  CHECK(room.capacity() >= large);
  CHECK(trim.kept_bytes() < before_room);  // the smallest kept one that fits
  std::string fresh;
  REQUIRE(trim.make_room(fresh, 4 * large));  // none fits: a fresh buffer
  CHECK(fresh.capacity() >= 4 * large);
  CHECK(trim.kept_bytes() == before_room - room.capacity());

  // Kept buffers hold the trim back for kept_quiet, then are freed with the trim.
  io.run_for(3 * heap_trimmer::quiet);
  CHECK(trim.trims() == 0);
  CHECK(trim.kept_bytes() > 0);
  io.restart();
  io.run_for(heap_trimmer::kept_quiet);
  CHECK(trim.trims() == 1);
  CHECK(trim.kept_bytes() == 0);
}

TEST_CASE("heap trim: populate_pages faults in the pages of a range, not past it", "[hostile][heap]") {
  const std::size_t page = static_cast<std::size_t>(::sysconf(_SC_PAGESIZE));
  const std::size_t pages = 64;
  void* m = ::mmap(nullptr, pages * page, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  REQUIRE(m != MAP_FAILED);
  char* base = static_cast<char*>(m);
  auto resident = [&] {
    std::vector<unsigned char> in(pages);
    REQUIRE(::mincore(base, pages * page, in.data()) == 0);
    std::vector<bool> out;
    for (auto b : in) out.push_back((b & 1) != 0);
    return out;
  };
  CHECK(resident() == std::vector<bool>(pages, false));
  // From the middle of page 3 to the middle of page 20: pages 4 to 20 (the one it starts in
  // may hold other bytes, and is left to fault in as it is written).
  populate_pages(base + 3 * page + 100, 17 * page);
  const auto got = resident();
  for (std::size_t i = 0; i < pages; ++i) {
    INFO("page " << i);
    CHECK(got[i] == (i >= 4 && i <= 20));
  }
  ::munmap(m, pages * page);
}

// glibc's allocator only: the sanitizers (scripts/tsan.sh, ASan) bring their own.
#if defined(__GLIBC__) && !defined(INFERWIRE_TSAN) && !defined(__SANITIZE_ADDRESS__)
TEST_CASE("heap trim: free pages in the middle of the heap go back to the system", "[hostile][heap]") {
  // 64 MiB in 64 KiB blocks (below malloc's mmap threshold, so in the heap), then all freed but
  // the last, which keeps the heap from shrinking at its top: the pages stay resident.
  std::vector<char*> blocks;
  for (int i = 0; i < 1024; ++i) {
    auto* b = static_cast<char*>(std::malloc(64 * 1024));
    REQUIRE(b != nullptr);
    std::memset(b, 1, 64 * 1024);
    blocks.push_back(b);
  }
  for (std::size_t i = 0; i + 1 < blocks.size(); ++i) std::free(blocks[i]);
  const auto before = hostile::rss_mib(::getpid());

  boost::asio::io_context io;
  std::atomic<std::int64_t> in_flight{0};
  heap_trimmer trim(io.get_executor(), in_flight);
  trim.note(std::uint64_t{64} << 20);
  io.run_for(3 * heap_trimmer::quiet);
  REQUIRE(trim.trims() == 1);
  const auto after = hostile::rss_mib(::getpid());
  INFO("RSS " << before << " MiB before the trim, " << after << " MiB after");
  CHECK(after + 32 < before);
  std::free(blocks.back());
}
#endif
