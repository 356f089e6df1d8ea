// SPDX-License-Identifier: Apache-2.0
// The server's heap trimmer: free heap pages go back to the system once large requests are
// answered and the server is quiet, never while a request is in flight.
#include "heap_trim.hpp"

#include "proc.hpp"

#include <catch2/catch.hpp>

#include <boost/asio/io_context.hpp>

#include <cstdlib>
#include <cstring>
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
