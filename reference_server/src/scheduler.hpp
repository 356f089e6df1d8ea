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
#include <vector>

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

/// Where a request waits (the dynamic batcher's queue policy, the schedule_policy extension):
/// its priority level and the time it may wait.
struct queue_ticket {
  std::size_t level = 0;          ///< index of its level's queue (0 = highest priority)
  clock::time_point deadline{};   ///< epoch: no timeout
  bool delay = false;             ///< timeout_action DELAY: served after those still in time
};

/// Limits a model version to its instance count of concurrent executions; the rest wait in
/// FIFO queues, one per priority level, each bounded by its queue policy's max_queue_size
/// (0 = unbounded). A request that waited past its timeout is rejected when an instance
/// comes free (REJECT) or served after the requests of its level still in time (DELAY).
class instance_gate {
 public:
  using job = std::function<void()>;
  /// From the model's instance count and `dynamic_batching` (levels, default level, default
  /// and per-level queue policies).
  void configure(std::size_t instances, const inference::ModelDynamicBatching& batching);
  /// The ticket of a request with these `priority` and `timeout` (µs) parameters, 0 meaning
  /// none. As Triton: priority 0 or past the model's levels takes the default level; a request
  /// timeout applies when its level allows overrides, and never lengthens the default.
  queue_ticket ticket(std::uint64_t priority, std::uint64_t timeout_us) const;
  /// Runs `run` on `pool` now if an instance is free, or queues it at its level. A queued
  /// request that timed out under REJECT gets `expired` (on `pool`) instead. False when its
  /// level's queue is full (the service answers `Exceeds maximum queue size`).
  bool submit(boost::asio::thread_pool& pool, const queue_ticket& t, job run, job expired);
  /// Called by a job once its execution is over (before it reports, so the next queued job
  /// does not wait for a response to be encoded): hands the instance to the next queued job,
  /// or gives it back.
  void release(boost::asio::thread_pool& pool);

 private:
  struct policy {
    std::size_t max_queue = 0;
    std::uint64_t timeout_us = 0;  ///< 0: none
    bool delay = false;
    bool allow_override = false;
  };
  struct entry {
    job run;
    job expired;
    clock::time_point deadline;
    bool delay = false;
  };

  std::mutex mu_;
  std::size_t instances_ = 1;
  std::size_t running_ = 0;
  std::size_t default_level_ = 0;
  std::vector<policy> policies_{policy{}};     ///< per level, highest priority first
  std::vector<std::deque<entry>> queues_{1};   ///< per level
  std::vector<std::size_t> with_deadline_{0};  ///< per level: queued entries that have a timeout
};

}  // namespace inferwire::server
