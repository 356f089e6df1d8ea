// SPDX-License-Identifier: Apache-2.0
// The allocator of inference calls: a thread reuses the blocks its calls gave back, keeps a
// bounded number of them whatever it is sent, and leaves larger blocks to the global
// allocator. The spare strings of request and reply bodies keep a bounded number as well.
#include "spare_blocks.hpp"

#include <catch2/catch.hpp>

#include <memory>
#include <string>
#include <thread>
#include <vector>

namespace srv = inferwire::server;
using blocks = srv::detail::spare_blocks;

// Each case runs on a thread of its own, whose spares start empty (the test thread waits, so
// no two threads assert at once; CHECK, not REQUIRE, as an exception must not leave a thread).
template <class F>
void on_new_thread(F f) {
  std::thread(f).join();
}

TEST_CASE("spare_allocator: a block given back is the next one of its size class", "[spare_allocator]") {
  on_new_thread([] {
    srv::spare_allocator<char> a;
    const std::size_t before = blocks::kept();
    CHECK(before == 0);
    char* p = a.allocate(40);
    a.deallocate(p, 40);
    CHECK(blocks::kept() == before + 1);
    // 1 to 64 bytes share a class: the same block comes back.
    char* q = a.allocate(64);
    CHECK(q == p);
    CHECK(blocks::kept() == before);
    // Another class does not take it.
    a.deallocate(q, 64);
    char* r = a.allocate(65);
    CHECK(r != q);
    a.deallocate(r, 65);
    CHECK(blocks::kept() == before + 2);
  });
}

TEST_CASE("spare_allocator: a thread keeps a bounded number of blocks, none larger than 1 KiB", "[spare_allocator]") {
  on_new_thread([] {
    srv::spare_allocator<char> a;
    CHECK(blocks::kept() == 0);
    // Many blocks of every class, and large ones, all given back at once.
    std::vector<std::pair<char*, std::size_t>> held;
    std::vector<std::size_t> sizes = {1, 4096, 1 << 20};
    for (std::size_t s = 64; s <= 1024; s += 64) sizes.insert(sizes.end(), {s - 63, s - 1, s});
    sizes.push_back(1025);
    for (std::size_t size : sizes)
      for (int i = 0; i < 100; ++i) held.emplace_back(a.allocate(size), size);
    for (auto [p, n] : held) {
      std::fill(p, p + n, 'x');  // each block holds what was asked for
      a.deallocate(p, n);
    }
    const std::size_t most = 8 * 32 + 8 * 8;  // 32 of each class up to 512 bytes, 8 beyond
    CHECK(blocks::kept() == most);
    CHECK(blocks::max_kept_bytes() == 32 * 64 * (1 + 8) * 8 / 2 + 8 * 64 * (9 + 16) * 8 / 2);
    CHECK(blocks::max_kept_bytes() <= 122 * 1024);
    // A large block is not kept.
    char* big = a.allocate(1025);
    a.deallocate(big, 1025);
    CHECK(blocks::kept() == most);
  });
}

TEST_CASE("spare_allocator: an inference call's block comes back to the next call", "[spare_allocator]") {
  on_new_thread([] {
    struct call : std::enable_shared_from_this<call> {
      char state[900];
    };
    const srv::spare_allocator<call> a;
    const void* first = nullptr;
    {
      auto c = std::allocate_shared<call>(a);
      first = c.get();
      CHECK(c->shared_from_this() == c);
    }
    CHECK(blocks::kept() == 1);
    auto again = std::allocate_shared<call>(a);
    CHECK(static_cast<const void*>(again.get()) == first);
    CHECK(blocks::kept() == 0);
  });
}

TEST_CASE("spare_allocator: a block freed on another thread joins that thread's spares", "[spare_allocator]") {
  on_new_thread([] {
    srv::spare_allocator<char> a;
    char* p = a.allocate(100);
    std::size_t there = 0;
    std::thread([&] {
      a.deallocate(p, 100);
      there = blocks::kept();
    }).join();
    CHECK(there == 1);
    CHECK(blocks::kept() == 0);
  });
}

TEST_CASE("spare_strings: a string given back comes back empty with its capacity, within bounds", "[spare_allocator]") {
  on_new_thread([] {
    using strings = srv::spare_strings;
    CHECK(strings::kept() == 0);
    CHECK(strings::take().capacity() == std::string().capacity());  // none kept: a new string
    std::string body(300, 'b');
    const char* memory = body.data();
    strings::give(std::move(body));
    CHECK(strings::kept() == 1);
    std::string again = strings::take();
    CHECK(again.empty());  // nothing of what it held shows
    CHECK(again.capacity() >= 300);
    CHECK(again.data() == memory);
    CHECK(strings::kept() == 0);
    // Inline and large strings are not kept; at most max_kept are.
    strings::give(std::string("short"));
    strings::give(std::string(strings::max_capacity + 1, 'x'));
    CHECK(strings::kept() == 0);
    for (int i = 0; i < 40; ++i) strings::give(std::string(strings::max_capacity, 'x'));
    CHECK(strings::kept() == strings::max_kept);
  });
}

TEST_CASE("spare_shapes: a shape given back comes back empty with its memory; large ones are not kept", "[spare_allocator]") {
  on_new_thread([] {
    using shapes = srv::spare_shapes;
    CHECK(shapes::kept() == 0);
    CHECK(shapes::take().capacity() == 0);  // none kept: a new vector
    std::vector<std::int64_t> dims{1, 16};
    const std::int64_t* memory = dims.data();
    shapes::give(std::move(dims));
    CHECK(shapes::kept() == 1);
    auto again = shapes::take();
    CHECK(again.empty());
    CHECK(again.data() == memory);
    // Empty and over-large shapes are not kept; at most max_kept are.
    shapes::give(std::vector<std::int64_t>());
    shapes::give(std::vector<std::int64_t>(shapes::max_capacity + 1, 2));
    CHECK(shapes::kept() == 0);
    for (int i = 0; i < 40; ++i) shapes::give(std::vector<std::int64_t>(3, 1));
    CHECK(shapes::kept() == shapes::max_kept);
  });
}
