// SPDX-License-Identifier: Apache-2.0
// Scheduling state of one model version: its live sequences (v2-protocol §7, the sequence
// batcher) and the gate in front of its instances: the dynamic batcher with its queue policy.
#pragma once

#include "backends.hpp"
#include "statistics.hpp"

#include <boost/asio/thread_pool.hpp>

#include <chrono>
#include <cstddef>
#include <deque>
#include <functional>
#include <list>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

namespace inferwire::server {

/// Live sequences of one model version, keyed by correlation ID (v2-protocol §7).
class sequence_table {
 public:
  /// The most sequences one model version keeps live at once. A sequence lives until it ends
  /// or idles out, and a model's max_sequence_idle_microseconds may be long (a client may load
  /// the model in explicit model control): each START would otherwise have been kept.
  static constexpr std::size_t max_live = 65536;

  /// Starts or continues the sequence `id` (its text form). Null when a continuing request's
  /// sequence is unknown (never started, ended or idle longer than `max_idle`: `found` false),
  /// or when a new sequence would exceed max_live (`full` true).
  sequence_state* begin(const std::string& id, bool start, std::chrono::microseconds max_idle,
                        bool& found, bool& full);
  void end(const std::string& id);

 private:
  struct slot {
    std::string id;
    sequence_state state;
    clock::time_point last;
  };
  void erase(std::list<slot>::iterator it);
  std::mutex mu_;
  /// Least recently used first, so that idle sequences are released from the front, in time
  /// proportional to their number (a sweep of every sequence on each request made a client
  /// that starts many sequences slow every request down); `by_id_`'s keys view the ids.
  std::list<slot> order_;
  std::unordered_map<std::string_view, std::list<slot>::iterator> by_id_;
};

/// Where a request waits (the dynamic batcher's queue policy, the schedule_policy extension):
/// its priority level and the time it may wait.
struct queue_ticket {
  std::size_t level = 0;          ///< index of its level's queue (0 = highest priority)
  clock::time_point deadline{};   ///< epoch: no timeout
  bool delay = false;             ///< timeout_action DELAY: served after those still in time
};

struct infer_call;  // service.hpp
using call_ptr = std::shared_ptr<infer_call>;

/// What the gate hands its work to (the service): a batch to execute on the pool thread it is
/// called on (the handler calls `instance_gate::release` once the execution is over), and a
/// request whose queue timeout expired under REJECT.
struct batch_handlers {
  void (*run)(std::vector<call_ptr>&& batch);
  void (*expire)(call_ptr call);
};

/// The scheduler of one model version in front of its instances (Triton's dynamic batcher
/// and its queue policy). At most `instances` executions run at a time; the other requests
/// wait in FIFO queues, one per priority level, each bounded by its max_queue_size (0 =
/// unbounded). When an instance is free the gate takes the next batch: the request at the
/// head of the highest non-empty level and, when the model batches dynamically, the requests
/// after it (in priority order) whose batch key equals its own, while their batch sizes add up
/// to at most max_batch_size. It sends the batch at once when it is full, when the next request
/// is not compatible, or when it reached the largest preferred batch size; otherwise it waits
/// for more requests until the oldest has waited max_queue_delay_microseconds. A request past
/// its timeout is rejected (REJECT) or served after the requests of its level still in time
/// (DELAY). Models without dynamic batching run one request per execution. A sequence model
// with the `oldest` strategy batches the same way, one request per sequence in a batch, one
// batch at a time (so a sequence's requests run in order).
class instance_gate {
 public:
  instance_gate();
  ~instance_gate();
  instance_gate(const instance_gate&) = delete;
  instance_gate& operator=(const instance_gate&) = delete;

  /// From the model's instance count and configuration. `self` owns the gate (the model
  /// version): a pending batch-delay timer holds it weakly.
  void configure(std::size_t instances, const model_config& config, std::weak_ptr<instance_gate> self);
  /// Whether requests are gathered into batches: dynamic_batching with max_batch_size > 0 (not
  /// a sequence or decoupled model), or a sequence model with the `oldest` strategy.
  bool gathers() const noexcept { return max_batch_ > 0; }
  /// The ticket of a request with these `priority` and `timeout` (µs) parameters, 0 meaning
  /// none. As Triton: priority 0 or past the model's levels takes the default level; a request
  /// timeout applies when its level allows overrides, and never lengthens the default.
  queue_ticket ticket(std::uint64_t priority, std::uint64_t timeout_us) const;
  /// Queues `call` (of `rows` batch size; requests with equal `key` may share an execution,
  /// but never two of one non-empty `group`: a sequence's requests run in order, one per batch)
  /// and starts what can start on `pool`. False when its level's queue is full (the service
  /// answers `Exceeds maximum queue size`).
  bool submit(boost::asio::thread_pool& pool, const batch_handlers& handlers, const queue_ticket& t,
              call_ptr call, std::int64_t rows, std::string key, std::string group = {});
  /// Called by the batch handler once its execution is over (before it reports, so the next
  /// batch does not wait for responses to be encoded): hands the instance to the next batch.
  void release();
  /// From now on, batches do not wait for more requests (their queue delay): what is queued
  /// runs now, and the delay timer is cancelled (a pending one would hold the execution pool,
  /// and so the exit, until it fires: up to 2^40 us after the last delayed batch). For a
  /// version that is leaving (unload, reload, shutdown): nothing more will come to fill a batch.
  void flush();

 private:
  struct policy {
    std::size_t max_queue = 0;
    std::uint64_t timeout_us = 0;  ///< 0: none
    bool delay = false;
    bool allow_override = false;
  };
  struct entry {
    call_ptr call;
    std::int64_t rows = 1;
    std::string key;
    std::string group;
    clock::time_point enqueued;
    clock::time_point deadline;
    bool delay = false;
  };
  struct wake_timer;
  /// Starts every batch that can start now, rejects expired requests, and arms the delay
  /// timer when a batch waits for more requests. `run_here`: the caller is a pool thread that
  /// runs the first batch itself.
  void dispatch(bool run_here = false);
  /// Under mu_: the next batch into `batch`, or none (`wake` then says until when to wait, or
  /// epoch when nothing is queued). Expired REJECT requests go to `rejected`.
  void take(clock::time_point now, std::vector<call_ptr>& batch, std::vector<call_ptr>& rejected,
            clock::time_point& wake);
  void arm(clock::time_point at);

  std::mutex mu_;
  std::size_t instances_ = 1;
  std::size_t running_ = 0;
  std::size_t default_level_ = 0;
  std::int64_t max_batch_ = 0;                 ///< 0: no gathering
  std::vector<std::int64_t> preferred_;        ///< ascending
  std::chrono::microseconds max_delay_{0};
  std::vector<policy> policies_{policy{}};     ///< per level, highest priority first
  std::vector<std::deque<entry>> queues_{1};   ///< per level
  std::vector<std::size_t> with_deadline_{0};  ///< per level: queued entries that have a timeout
  boost::asio::thread_pool* pool_ = nullptr;
  const batch_handlers* handlers_ = nullptr;
  std::weak_ptr<instance_gate> self_;
  std::unique_ptr<wake_timer> timer_;
  bool flushed_ = false;  ///< under mu_: flush() was called
};

}  // namespace inferwire::server
