// SPDX-License-Identifier: Apache-2.0
// The scheduler of one model version: its live sequences (v2-protocol §7, the sequence
// batcher) and the gate in front of its instances, which decides where an admitted call runs:
// at once on the thread that scheduled it, or queued by the dynamic batcher's rules and its
// queue policy and then run as part of a batch on the execution pool. The rules themselves
// (batch_queue) are plain code without threads or a clock of their own, tested as such.
//
// The call path runs down: service -> scheduler -> the runner (inference.hpp) -> backends. The
// gate gets the runner and the pool once, at configure; only completions travel back up.
#pragma once

#include "backends.hpp"
#include "call.hpp"
#include "model_config.hpp"
#include "statistics.hpp"

#include <boost/asio/thread_pool.hpp>

#include <chrono>
#include <cstddef>
#include <deque>
#include <functional>
#include <list>
#include <map>
#include <memory>
#include <mutex>
#include <set>
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
  /// `now`: the time of the request (a test's own clock; the server's is clock::now()).
  sequence_state* begin(const std::string& id, bool start, std::chrono::microseconds max_idle,
                        bool& found, bool& full, clock::time_point now = clock::now());
  /// The sequences live now.
  std::size_t size();
  void end(const std::string& id);

  /// A request of the live sequence `id` was queued: the sequence is not idle while a request
  /// of it waits or runs (as in Triton), however long that takes. Returns the hold (0: the
  /// sequence is not live, or idle longer than `max_idle` already: nothing is held), for
  /// release().
  std::uint64_t hold(const std::string& id, std::chrono::microseconds max_idle, clock::time_point now = clock::now());
  /// The request that took `hold` is done: the sequence's idle time starts again at `now`.
  /// A hold of a sequence that ended (or of an earlier sequence of the same ID) is nothing.
  void release(const std::string& id, std::uint64_t hold, clock::time_point now = clock::now());

 private:
  struct slot {
    std::string id;
    sequence_state state;
    clock::time_point last;
    std::uint64_t generation = 0;  ///< this sequence among those that had its ID
    std::size_t held = 0;          ///< its requests queued or running
  };
  void erase(std::list<slot>::iterator it);
  std::mutex mu_;
  /// Least recently used first, so that idle sequences are released from the front, in time
  /// proportional to their number (a sweep of every sequence on each request made a client
  /// that starts many sequences slow every request down); `by_id_`'s keys view the ids.
  std::list<slot> order_;
  std::unordered_map<std::string_view, std::list<slot>::iterator> by_id_;
  std::uint64_t generations_ = 0;
};

/// Where a request waits (the dynamic batcher's queue policy, the schedule_policy extension):
/// its priority level and the time it may wait.
struct queue_ticket {
  std::size_t level = 0;          ///< index of its level's queue (0 = highest priority)
  clock::time_point deadline{};   ///< epoch: no timeout
  bool delay = false;             ///< timeout_action DELAY: served after those still in time
};

/// What a batch that can grow waits for (batch_queue::take), from the gate in front of the
/// instances.
struct batch_pacing {
  clock::time_point free_since{};  ///< since when an instance has been free (epoch: long ago)
  clock::time_point answered{};    ///< when the batch that freed it was answered
  clock::duration stretch{};       ///< the recent execution time
};

/// Triton's dynamic batcher and its queue policy over the requests that wait for one model
/// version's instances, as plain code: no lock, no thread, no clock (every time is an argument).
///
/// The requests wait in FIFO queues, one per priority level, each bounded by its
/// max_queue_size (0 = unbounded). The next batch is the request at the head of the highest
/// non-empty level and, when the model batches dynamically, the requests after it (in priority
/// order) whose batch key equals its own, while their batch sizes add up to at most
/// max_batch_size. As Triton's dynamic batcher, it goes at once when it is full, when the next
/// request is not compatible, or when the queued requests reach a preferred batch size (then
/// cut at the largest one they reach); otherwise it waits for more requests until the oldest
/// has waited max_queue_delay_microseconds. A request past its timeout is rejected (REJECT: at
/// its deadline, see expire()) or served after the requests of its level still in time
/// (DELAY). Models without dynamic batching run one request per batch.
///
/// A sequence model's requests carry their sequence as their `group`: a batch holds at most
/// one request of a sequence, and a sequence with a request running (taken and not yet ran())
/// is passed over until it is done, so each sequence's requests run one at a time, in order,
/// whatever the instance count. With `max_batch_size > 0` the sequence batcher gathers too:
/// `oldest` as the dynamic batcher (its own delay and preferred sizes); `direct` goes as soon
/// as ceil(minimum_slot_utilization x max_batch_size) sequences (at least one) have a request
/// ready, or when its max_queue_delay_microseconds has passed.
class batch_queue {
 public:
  /// From the model's configuration (levels, their policies, batch sizes, delay).
  void configure(const model_config& config);
  /// Whether requests are gathered into batches: dynamic_batching with max_batch_size > 0 (not
  /// a sequence or decoupled model), or a sequence model (not decoupled) with max_batch_size > 0.
  bool gathers() const noexcept { return max_batch_ > 0; }
  /// The ticket at `now` of a request with these `priority` and `timeout` (µs) parameters, 0
  /// meaning none. As Triton: priority 0 or past the model's levels takes the default level; a
  /// request timeout applies when its level allows overrides, and never lengthens the default.
  queue_ticket ticket(std::uint64_t priority, std::uint64_t timeout_us, clock::time_point now) const;
  /// Queues `call` at `now` (of `rows` batch size; requests with equal `key` may share a
  /// batch, but never two of one non-empty `group`). False when its level's queue is full.
  bool push(const queue_ticket& t, call_ptr call, std::int64_t rows, std::string key, std::string group,
            clock::time_point now);
  /// The next batch at `now` into `batch`, or none: `wake` then says until when it waits for
  /// more requests, or stays epoch when nothing waits. Requests past their timeout under REJECT
  /// leave the queue into `rejected`. `flushed`: batches no longer wait for more requests.
  ///
  /// How long a batch that can grow waits for company (`pace`): from `start`, the later of its
  /// oldest request's arrival and `pace.free_since`, max_queue_delay_microseconds after the
  /// later of `start`, `pace.answered` and its newest request's arrival, but never past `start`
  /// plus the larger of the delay and `pace.stretch`. So requests that waited for a busy
  /// instance still give the requests right behind them (the next ones of the clients just
  /// answered) the delay to join once the answers went out, and a wave of requests that takes
  /// longer than the delay to arrive, each less than the delay after the one before, goes as one
  /// batch, not split in two executions; no request waits for company longer than the larger of
  /// the delay and a recent execution.
  void take(clock::time_point now, bool flushed, std::vector<call_ptr>& batch, std::vector<call_ptr>& rejected,
            clock::time_point& wake, const batch_pacing& pace = batch_pacing{});
  /// Moves the requests past their timeout under REJECT at `now` into `rejected`.
  void expire(clock::time_point now, std::vector<call_ptr>& rejected);
  /// The earliest deadline of a request waiting under REJECT (when it must be answered), or
  /// epoch when none has one.
  clock::time_point next_deadline() const;
  /// The requests waiting.
  std::size_t size() const noexcept { return size_; }
  /// A request of the sequence `group` that take() handed out ran: the sequence's next request
  /// may be taken.
  void ran(std::string_view group);

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
  std::size_t default_level_ = 0;
  std::int64_t max_batch_ = 0;                 ///< 0: no gathering
  bool sequence_timeouts_ = false;  ///< a sequence model: a request's `timeout` rejects it from the queue
  std::vector<std::int64_t> preferred_;        ///< ascending
  std::int64_t target_ = 0;                    ///< a batch this large goes without waiting for company
  std::multiset<std::string, std::less<>> running_groups_;  ///< sequences with a request taken, not yet ran()
  std::chrono::microseconds max_delay_{0};
  std::vector<policy> policies_{policy{}};     ///< per level, highest priority first
  std::vector<std::deque<entry>> queues_{1};   ///< per level
  std::vector<std::size_t> with_deadline_{0};  ///< per level: queued entries that have a timeout
  /// The deadlines of the entries waiting under REJECT, so that the next one is known without
  /// a pass over the queues, and expire() looks at the queues only when one is due.
  std::multiset<clock::time_point> reject_deadlines_;
  std::size_t size_ = 0;
};

class instance_gate;

/// The dynamic batcher's `preserve_ordering`: completions released in the order their
/// requests were queued. Each request takes a number (take()); its completion, handed to
/// complete() from whatever thread, runs once every earlier number completed, on the thread
/// that completed the last one missing, one at a time.
class completion_order {
 public:
  std::uint64_t take();
  /// Runs `completion` now or once the requests before `number` completed.
  void complete(std::uint64_t number, std::function<void()> completion);
  /// `number` will not complete (its request was never queued): the later ones go on.
  void skip(std::uint64_t number) { complete(number, nullptr); }
  /// Completions waiting for an earlier one.
  std::size_t waiting();

 private:
  std::mutex mu_;
  std::uint64_t next_in_ = 0, next_out_ = 0;
  std::map<std::uint64_t, std::function<void()>> ready_;
  bool draining_ = false;  ///< a thread runs the completions in order
};

/// What the gates hand their work to (the server's is inference_runner()): a small call, run
/// on the thread that scheduled it; a batch, run on the pool thread it is called on (the runner
/// calls `gate.release(batch)` once the execution is over, before it completes the calls, and
/// `gate.answered()` once it completed them); a request whose queue timeout expired under
/// REJECT. Each completes its calls.
struct batch_runner {
  void (*run_one)(infer_call& call);
  void (*run)(std::vector<call_ptr>&& batch, instance_gate& gate);
  void (*expire)(call_ptr call);
};

/// Where a server's gates run their work, given to each gate once.
struct execution_context {
  boost::asio::thread_pool* pool = nullptr;
  const batch_runner* runner = nullptr;
};

/// The scheduler of one model version in front of its instances: at most `instances`
/// executions run at a time, batches formed by its batch_queue. A small call of a model that
/// neither batches nor delays runs at once on the scheduling thread (runs_inline). One timer
/// wakes the gate when a batch's queue delay ends or a waiting request's REJECT deadline comes,
/// whichever is first: a request that times out behind a busy instance is answered then.
class instance_gate {
 public:
  instance_gate();
  ~instance_gate();
  instance_gate(const instance_gate&) = delete;
  instance_gate& operator=(const instance_gate&) = delete;

  /// From the model's instance count and configuration; `on_gpu`: its backend runs on a GPU.
  /// Queued requests count in `stats` (pending). `self` owns the gate (the model version): a
  /// pending batch-delay timer holds it weakly. `sequences`: a sequence model's live sequences,
  /// which each scheduled request holds (sequence_table::hold) until the runner releases it.
  /// `impl` (may be null: always) says, per call, whether its executions are quick enough to
  /// run on the thread that received a request (backend::runs_quickly); it outlives the gate.
  void configure(std::size_t instances, const model_config& config, bool on_gpu, version_stats& stats,
                 const execution_context& exec, std::weak_ptr<instance_gate> self,
                 sequence_table* sequences = nullptr, const backend* impl = nullptr);
  /// Schedules an admitted call whose hooks and completion are in it: runs it now, on the
  /// calling thread, when it is small and takes no decoupled responses (runs_inline);
  /// otherwise queues it with its ticket (its `priority` and `timeout` parameters), batch key
  /// and sequence, and starts what can start. False when its level's queue is full: nothing
  /// was done with the call (the service answers `Exceeds maximum queue size`).
  bool schedule(const call_ptr& call);
  /// Queues `call` with its ticket, batch key and group (see batch_queue::push) and starts
  /// what can start. False when its level's queue is full.
  bool submit(const queue_ticket& t, call_ptr call, std::int64_t rows, std::string key, std::string group = {});
  /// The ticket of a request with these parameters, now (batch_queue::ticket).
  queue_ticket ticket(std::uint64_t priority, std::uint64_t timeout_us) const;
  /// Called by the runner once the execution of `batch` is over (before it reports, so the next
  /// batch does not wait for responses to be encoded): hands the instance to the next batch,
  /// and the next request of each sequence in it may run.
  void release(const std::vector<call_ptr>& batch);
  /// Called by the runner once it answered the calls of a batch it released: a batch waiting
  /// for company gives the answered clients' next requests the queue delay from now.
  void answered();
  /// From now on, batches do not wait for more requests (their queue delay): what is queued
  /// runs now, and the delay timer is cancelled (a pending one would hold the execution pool,
  /// and so the exit, until it fires: up to 2^40 us after the last delayed batch). For a
  /// version that is leaving (unload, reload, shutdown): nothing more will come to fill a batch.
  void flush();

 private:
  struct wake_timer;
  /// Starts every batch that can start now, rejects expired requests, and arms the delay
  /// timer when a batch waits for more requests. `run_here`: the caller is a pool thread that
  /// runs the first batch itself.
  void dispatch(bool run_here = false);
  void arm(clock::time_point at);

  std::mutex mu_;
  std::size_t instances_ = 1;
  std::size_t running_ = 0;
  batch_queue queue_;
  const model_config* config_ = nullptr;
  bool on_gpu_ = false;
  bool inline_ok_ = false;  ///< the model neither batches nor delays: small calls may run inline
  const backend* impl_ = nullptr;  ///< asked whether its executions are quick (may be null)
  version_stats* stats_ = nullptr;
  bool sequence_model_ = false;     ///< requests name their sequence (sequence_group)
  sequence_table* sequences_ = nullptr;
  std::chrono::microseconds max_idle_{0};  ///< a sequence model's max_sequence_idle_microseconds
  execution_context exec_;
  std::weak_ptr<instance_gate> self_;
  std::unique_ptr<wake_timer> timer_;
  bool flushed_ = false;  ///< under mu_: flush() was called
  std::shared_ptr<completion_order> order_;  ///< preserve_ordering: completions in queue order
  /// Under mu_: when an instance last came free while all were busy, when that batch's answers
  /// went out, and the recent execution time (batch_queue::take's pacing).
  batch_pacing pace_;
  std::size_t answering_ = 0;              ///< under mu_: batches released and not yet answered
  std::deque<clock::time_point> started_;  ///< under mu_: when the running batches left the queue
};

/// Whether a request is small enough to execute on the thread that received it (HTTP I/O
/// thread, gRPC handler thread) instead of the execution pool: models without an artificial
/// delay or dynamic batching, with at most 64 KiB of host input bytes (inputs already in the
/// GPU memory of a GPU instance cost nothing), or at any size when the backend's work does not
/// grow with it (`size_free`: backend::size_free) and no input is in device memory. Its work is
/// bounded and small, and a thread hop would cost more.
bool runs_inline(const model_config& config, bool on_gpu, const v2::infer_request& request,
                 const tensor_places& places, bool size_free = false);

/// The key of the requests that may share one execution (the dynamic batcher): their inputs'
/// names, types and shapes past the batch dimension.
std::string batch_key(const v2::infer_request& request);

/// The sequence a request belongs to ("" when it names none): at most one request of a
/// sequence goes into one batch (the sequence batcher's `oldest` strategy).
std::string sequence_group(const v2::infer_request& request);

}  // namespace inferwire::server
