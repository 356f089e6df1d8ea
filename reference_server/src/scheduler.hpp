// Scheduling state of one model version: its live sequences (v2-protocol §7, the sequence
// batcher) and the gate that holds executions to the instance count, with the dynamic
// batcher's queue limit.
#pragma once

#include "backends.hpp"
#include "statistics.hpp"

#include <boost/asio/thread_pool.hpp>

#include <chrono>
#include <cstddef>
#include <deque>
#include <functional>
#include <mutex>
#include <string>
#include <unordered_map>

namespace inferwire::server {

/// Live sequences of one model version, keyed by correlation ID (v2-protocol §7).
class sequence_table {
 public:
  /// Starts or continues the sequence `id` (its text form). Errors: a continuing request
  /// whose sequence is unknown (never started, ended or idle longer than `max_idle`).
  sequence_state* begin(const std::string& id, bool start, std::chrono::microseconds max_idle,
                        bool& found);
  void end(const std::string& id);

 private:
  struct slot {
    sequence_state state;
    clock::time_point last;
  };
  std::mutex mu_;
  std::unordered_map<std::string, slot> slots_;
};

/// Limits a model version to its instance count of concurrent executions; the rest wait in a
/// FIFO queue bounded by the dynamic batcher's max_queue_size (0 = unbounded).
class instance_gate {
 public:
  using job = std::function<void()>;
  void configure(std::size_t instances, std::size_t max_queue) {
    instances_ = instances ? instances : 1;
    max_queue_ = max_queue;
  }
  /// Runs `j` on `pool` now if an instance is free, or queues it. False when the queue is
  /// full (the service answers `Exceeds maximum queue size`).
  bool submit(boost::asio::thread_pool& pool, job j);
  /// Called by a job once its execution is over (before it reports, so the next queued job
  /// does not wait for a response to be encoded): hands the instance to the next queued job,
  /// or gives it back.
  void release(boost::asio::thread_pool& pool);

  std::mutex mu_;
  std::size_t instances_ = 1;
  std::size_t max_queue_ = 0;
  std::size_t running_ = 0;
  std::deque<job> pending_;
};

}  // namespace inferwire::server
