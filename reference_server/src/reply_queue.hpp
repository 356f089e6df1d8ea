// SPDX-License-Identifier: Apache-2.0
// The replies of one streamed call on their way to its client: generate_stream's events over
// HTTP, ModelStreamInfer's responses over gRPC. Both frontends drain this one queue, so both
// follow the same rules.
#pragma once

#include "backends.hpp"  // waits_are_interrupted

#include <chrono>
#include <condition_variable>
#include <cstddef>
#include <functional>
#include <mutex>
#include <utility>
#include <vector>

namespace inferwire::server {

/// A bounded queue of replies between producers (a decoupled model on the execution pool, the
/// call's own completion) and the one consumer that writes them to the client.
///
/// - **Bound.** At most `max_queued` replies wait for the consumer.
/// - **Push that waits.** push() waits while the queue is full; put() does not (a call's last
///   reply or its error, which must not wait for the client), so the queue may then hold a few
///   more.
/// - **Stall rule.** A push that waits ends the queue (broken) once the consumer has taken
///   nothing for the stall timeout: a client that reads nothing does not hold a model and an
///   execution thread for as long as it keeps its connection open. `on_stall` then tells the
///   transport (gRPC cancels the call; HTTP's connection closes on its own watchdog).
/// - **Exit rule.** A push that waits also ends the queue once the server's exit interrupted
///   every wait (interrupt_waits()).
/// - **End and break.** end(): the producers are done; the consumer takes what is left and then
///   learns it. broken(): the client is gone (a failed write, a closed call); producers get false
///   from then on. A consumer waiting for replies is woken by either.
template <class T>
class reply_queue {
 public:
  static constexpr std::size_t max_queued = 16;

  /// What take() found.
  enum class taken {
    replies,  ///< some replies (and maybe the end, see `ended`)
    waiting,  ///< none yet: `wake` is kept and called once there are, or the queue ends or breaks
    broken,   ///< the queue is broken: nothing more will be delivered
  };

  explicit reply_queue(std::chrono::steady_clock::duration stall, std::function<void()> on_stall = {})
      : stall_(stall), on_stall_(std::move(on_stall)), progress_(std::chrono::steady_clock::now()) {}
  reply_queue(const reply_queue&) = delete;
  reply_queue& operator=(const reply_queue&) = delete;

  /// Producer: queues `reply`, waiting while the queue is full. False when nobody will receive
  /// it (broken, ended, or ended by the stall or exit rule while it waited).
  bool push(T&& reply) { return add(std::move(reply), true); }
  /// Producer: queues `reply` without waiting. False when nobody will receive it.
  bool put(T&& reply) { return add(std::move(reply), false); }
  /// Producer: no more replies.
  void end() {
    std::function<void()> wake;
    {
      std::lock_guard lock(mu_);
      ended_ = true;
      wake = std::exchange(wake_, nullptr);
    }
    if (wake) wake();
  }

  /// Consumer: moves up to `most` waiting replies into `out` (appended) and says whether the
  /// producers are done with nothing left (`ended`). With nothing waiting and no end yet,
  /// keeps `wake` (called once, from a producer's thread) and returns `waiting`.
  taken take(std::vector<T>& out, std::size_t most, bool& ended, std::function<void()> wake) {
    {
      std::lock_guard lock(mu_);
      if (broken_) return taken::broken;
      if (queue_.empty() && !ended_) {
        wake_ = std::move(wake);
        return taken::waiting;
      }
      const std::size_t n = std::min(most, queue_.size());
      for (std::size_t i = 0; i < n; ++i) out.push_back(std::move(queue_[i]));
      queue_.erase(queue_.begin(), queue_.begin() + static_cast<std::ptrdiff_t>(n));
      ended = ended_ && queue_.empty();
      progress_ = std::chrono::steady_clock::now();
    }
    room_.notify_all();
    return taken::replies;
  }
  /// Consumer: the client is gone. Producers are released and told so; a waiting consumer's
  /// wake is called.
  void broken() {
    std::function<void()> wake;
    {
      std::lock_guard lock(mu_);
      broken_ = true;
      queue_.clear();
      wake = std::exchange(wake_, nullptr);
    }
    room_.notify_all();
    if (wake) wake();
  }
  /// Replies waiting for the consumer.
  std::size_t size() const {
    std::lock_guard lock(mu_);
    return queue_.size();
  }

 private:
  // By reference: a gRPC stream's reply is a protobuf message, whose every move is a new
  // message and a swap, and every moved-from one a destructor to run.
  bool add(T&& reply, bool wait) {
    std::function<void()> wake;
    bool stalled = false;
    {
      std::unique_lock lock(mu_);
      if (wait) {
        // In slices, so that the server's exit (which interrupts every wait of a model) also
        // ends a wait for a client that does not read.
        const auto room = [&] { return broken_ || queue_.size() < max_queued; };
        while (!room()) {
          const auto now = std::chrono::steady_clock::now();
          if (now - progress_ >= stall_ || waits_are_interrupted()) {
            stalled = true;
            broken_ = true;
            queue_.clear();
            wake = std::exchange(wake_, nullptr);
            break;
          }
          room_.wait_until(lock, std::min(progress_ + stall_, now + std::chrono::milliseconds(100)));
        }
      }
      if (!broken_ && !ended_) {
        queue_.push_back(std::move(reply));
        wake = std::exchange(wake_, nullptr);
      } else if (!stalled) {
        return false;
      }
    }
    if (stalled) {
      room_.notify_all();
      if (on_stall_) on_stall_();
    }
    if (wake) wake();
    return !stalled;
  }

  const std::chrono::steady_clock::duration stall_;
  const std::function<void()> on_stall_;
  mutable std::mutex mu_;
  std::condition_variable room_;
  std::vector<T> queue_;
  std::function<void()> wake_;
  /// When the consumer last took replies (or the queue was made).
  std::chrono::steady_clock::time_point progress_;
  bool ended_ = false;
  bool broken_ = false;
};

}  // namespace inferwire::server
