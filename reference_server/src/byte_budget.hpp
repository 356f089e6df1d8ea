// SPDX-License-Identifier: Apache-2.0
// The in-flight byte budget: what every connection's request bodies, and what decoding made of
// them, may hold together (--http-max-inflight-bytes).
#pragma once

#include <atomic>
#include <cstdint>
#include <string>

namespace inferwire::server {

/// A budget of bytes shared by every connection (request bodies in flight): a charge that
/// would pass the limit is refused, and the client that asked is answered 413, never the
/// process. Lock-free; a charge gives its bytes back when it is destroyed.
class byte_budget {
 public:
  explicit byte_budget(std::uint64_t limit) noexcept : limit_(limit) {}
  bool try_add(std::uint64_t n) noexcept {
    std::uint64_t cur = used_.load(std::memory_order_relaxed);
    do {
      if (n > limit_ - cur) return false;
    } while (!used_.compare_exchange_weak(cur, cur + n, std::memory_order_relaxed));
    return true;
  }
  void sub(std::uint64_t n) noexcept { used_.fetch_sub(n, std::memory_order_relaxed); }
  std::uint64_t used() const noexcept { return used_.load(std::memory_order_relaxed); }
  std::uint64_t limit() const noexcept { return limit_; }
  /// The text of a refusal for want of room: "the server's in-flight request memory (<limit>
  /// bytes, --http-max-inflight-bytes) is exhausted; retry later".
  std::string exhausted_text() const {
    return "the server's in-flight request memory (" + std::to_string(limit_) +
           " bytes, --http-max-inflight-bytes) is exhausted; retry later";
  }

  /// The bytes one request holds.
  class charge {
   public:
    explicit charge(byte_budget& b) noexcept : budget_(b) {}
    ~charge() { reset(); }
    charge(const charge&) = delete;
    charge& operator=(const charge&) = delete;
    bool add(std::uint64_t n) noexcept {
      if (!budget_.try_add(n)) return false;
      held_ += n;
      return true;
    }
    void sub(std::uint64_t n) noexcept {
      budget_.sub(n);
      held_ -= n;
    }
    void reset() noexcept {
      budget_.sub(held_);
      held_ = 0;
    }

   private:
    byte_budget& budget_;
    std::uint64_t held_ = 0;
  };

 private:
  const std::uint64_t limit_;
  std::atomic<std::uint64_t> used_{0};
};

}  // namespace inferwire::server
