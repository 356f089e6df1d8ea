// SPDX-License-Identifier: Apache-2.0
#include "scheduler.hpp"

#include <boost/asio/post.hpp>
#include <boost/asio/steady_timer.hpp>

#include <algorithm>
#include <cmath>

namespace inferwire::server {

// --- sequences -----------------------------------------------------------------------------

sequence_state* sequence_table::begin(const std::string& id, bool start, std::chrono::microseconds max_idle,
                                      bool& found, bool& full, clock::time_point now) {
  std::lock_guard lock(mu_);
  full = false;
  // Release idle sequences (the sequence batcher's max_sequence_idle_microseconds): the least
  // recently used come first. A sequence with a request queued or running is not idle: it goes
  // to the back, as used now.
  while (!order_.empty() && now - order_.front().last > max_idle) {
    if (order_.front().held != 0) {
      order_.front().last = now;
      order_.splice(order_.end(), order_, order_.begin());
    } else {
      erase(order_.begin());
    }
  }
  auto it = by_id_.find(id);
  found = it != by_id_.end();
  if (!found && !start) return nullptr;
  std::list<slot>::iterator s;
  if (found) {
    s = it->second;
    order_.splice(order_.end(), order_, s);  // now the most recently used
  } else {
    if (order_.size() >= max_live) {
      full = true;
      return nullptr;
    }
    s = order_.insert(order_.end(), slot{id, {}, now, ++generations_, 0});
    by_id_.emplace(s->id, s);
  }
  if (start) {
    s->state = {};
    s->state.started = true;
  }
  s->last = now;
  return &s->state;
}

std::size_t sequence_table::size() {
  std::lock_guard lock(mu_);
  return order_.size();
}

std::uint64_t sequence_table::hold(const std::string& id, std::chrono::microseconds max_idle, clock::time_point now) {
  std::lock_guard lock(mu_);
  auto it = by_id_.find(id);
  if (it == by_id_.end()) return 0;
  slot& s = *it->second;
  if (s.held == 0 && now - s.last > max_idle) {  // idle out already: its next request says so
    erase(it->second);
    return 0;
  }
  ++s.held;
  s.last = now;
  order_.splice(order_.end(), order_, it->second);
  return s.generation;
}

void sequence_table::release(const std::string& id, std::uint64_t hold, clock::time_point now) {
  if (hold == 0) return;
  std::lock_guard lock(mu_);
  auto it = by_id_.find(id);
  if (it == by_id_.end() || it->second->generation != hold || it->second->held == 0) return;
  --it->second->held;
  it->second->last = now;
  order_.splice(order_.end(), order_, it->second);
}

void sequence_table::end(const std::string& id) {
  std::lock_guard lock(mu_);
  if (auto it = by_id_.find(id); it != by_id_.end()) erase(it->second);
}

void sequence_table::erase(std::list<slot>::iterator it) {
  by_id_.erase(std::string_view(it->id));
  order_.erase(it);
}

// --- the batcher's rules -------------------------------------------------------------------

void batch_queue::configure(const model_config& c) {
  const inference::ModelDynamicBatching& b = c.proto.dynamic_batching();
  auto to_policy = [](const inference::ModelQueuePolicy& q) {
    return policy{q.max_queue_size(), q.default_timeout_microseconds(),
                  q.timeout_action() == inference::ModelQueuePolicy::DELAY, q.allow_timeout_override()};
  };
  const std::size_t levels = b.priority_levels() > 0 ? static_cast<std::size_t>(std::min<std::uint64_t>(b.priority_levels(), 1024)) : 1;
  policies_.assign(levels, to_policy(b.default_queue_policy()));
  for (const auto& [level, q] : b.priority_queue_policy())
    if (level >= 1 && level <= levels) policies_[static_cast<std::size_t>(level - 1)] = to_policy(q);
  queues_.assign(levels, {});
  with_deadline_.assign(levels, 0);
  reject_deadlines_.clear();
  size_ = 0;
  default_level_ = b.default_priority_level() >= 1 && b.default_priority_level() <= levels
                       ? static_cast<std::size_t>(b.default_priority_level() - 1)
                       : levels - 1;
  // Gathering: Triton's dynamic batcher, for models that batch and are neither sequences
  // (the sequence batcher's) nor decoupled; and the sequence batcher, `oldest` or `direct`.
  const auto& sb = c.proto.sequence_batching();
  const bool sequences = c.sequence && c.max_batch_size > 0 && !c.decoupled;
  const bool oldest = sequences && sb.has_oldest();
  const bool direct = sequences && !oldest;
  sequence_timeouts_ = c.sequence.has_value();
  const bool gathers = sequences || (c.proto.has_dynamic_batching() && c.max_batch_size > 0 && !c.sequence && !c.decoupled);
  max_batch_ = gathers ? c.max_batch_size : 0;
  preferred_.clear();
  running_groups_.clear();
  if (gathers && !direct)
    for (auto p : oldest ? sb.oldest().preferred_batch_size() : b.preferred_batch_size())
      if (p > 0 && p <= max_batch_) preferred_.push_back(p);
  std::sort(preferred_.begin(), preferred_.end());
  target_ = preferred_.empty() ? max_batch_ : preferred_.back();
  if (direct) {
    // Triton's slots: the batch goes once this share of them has a request ready.
    const double share = std::clamp(static_cast<double>(sb.direct().minimum_slot_utilization()), 0.0, 1.0);
    target_ = std::max<std::int64_t>(1, static_cast<std::int64_t>(std::ceil(share * static_cast<double>(max_batch_))));
  }
  const std::uint64_t delay = oldest   ? sb.oldest().max_queue_delay_microseconds()
                              : direct ? sb.direct().max_queue_delay_microseconds()
                                       : b.max_queue_delay_microseconds();
  max_delay_ = std::chrono::microseconds(std::min<std::uint64_t>(delay, std::uint64_t{1} << 40));
}

queue_ticket batch_queue::ticket(std::uint64_t priority, std::uint64_t timeout_us, clock::time_point now) const {
  queue_ticket t;
  t.level = priority >= 1 && priority <= policies_.size() ? static_cast<std::size_t>(priority - 1) : default_level_;
  const policy& p = policies_[t.level];
  std::uint64_t timeout = p.timeout_us;
  if (p.allow_override && timeout_us > 0) timeout = timeout == 0 ? timeout_us : std::min(timeout, timeout_us);
  t.delay = p.delay;
  // The sequence batcher takes a request's timeout for a request that waits for the model
  // (Triton: a sequence in the backlog), and rejects it at its deadline.
  if (sequence_timeouts_ && timeout_us > 0) {
    timeout = timeout == 0 ? timeout_us : std::min(timeout, timeout_us);
    t.delay = false;
  }
  if (timeout > 0) t.deadline = now + std::chrono::microseconds(std::min<std::uint64_t>(timeout, std::uint64_t{1} << 40));
  return t;
}

bool batch_queue::push(const queue_ticket& t, call_ptr call, std::int64_t rows, std::string key, std::string group,
                       clock::time_point now) {
  auto& q = queues_[t.level];
  const std::size_t max = policies_[t.level].max_queue;
  if (max && q.size() >= max) return false;
  if (t.deadline.time_since_epoch().count() != 0) {
    ++with_deadline_[t.level];
    if (!t.delay) reject_deadlines_.insert(t.deadline);
  }
  q.push_back({std::move(call), rows, std::move(key), std::move(group), now, t.deadline, t.delay});
  ++size_;
  return true;
}

void batch_queue::take(clock::time_point now, bool flushed, std::vector<call_ptr>& batch,
                       std::vector<call_ptr>& rejected, clock::time_point& wake, const batch_pacing& pace) {
  auto timed_out = [now](const entry& e) { return e.deadline.time_since_epoch().count() != 0 && e.deadline <= now; };
  // Requests past their timeout under REJECT leave the queue with their error.
  expire(now, rejected);
  // The candidates in the order they are served: levels highest first; within a level, FIFO,
  // the requests still in time before the delayed ones past their timeout. The batch is the
  // longest run from the first candidate of compatible requests that fits max_batch_size.
  struct pick {
    std::size_t level, index;
    std::int64_t total;  ///< batch size up to and with this request
  };
  std::vector<pick> picks;
  const entry* first = nullptr;
  clock::time_point newest{};
  std::int64_t total = 0;
  bool closed = false;  // the batch cannot grow: full, or the next request does not fit it
  std::vector<std::string_view> groups;  // the sequences in the batch
  auto consider = [&](std::size_t level, std::size_t i) {
    const entry& e = queues_[level][i];
    // A sequence with a request running or in this batch: its request waits for it (so do its
    // later ones, of the same sequence), the others may still join.
    if (!e.group.empty() && (running_groups_.count(e.group) != 0 ||
                             std::find(groups.begin(), groups.end(), e.group) != groups.end()))
      return true;
    if (first && (e.key != first->key || total + e.rows > max_batch_)) {
      closed = true;
      return false;
    }
    if (!e.group.empty()) groups.push_back(e.group);
    if (!first) first = &e;
    newest = std::max(newest, e.enqueued);
    total += e.rows;
    picks.push_back({level, i, total});
    if (max_batch_ == 0 || total >= max_batch_) closed = true;
    return !closed;
  };
  for (std::size_t level = 0; level < queues_.size() && !closed; ++level) {
    const auto& q = queues_[level];
    bool go = true;
    for (std::size_t i = 0; i < q.size() && go; ++i)
      if (with_deadline_[level] == 0 || !timed_out(q[i])) go = consider(level, i);
    if (with_deadline_[level] != 0)
      for (std::size_t i = 0; i < q.size() && go; ++i)
        if (timed_out(q[i])) go = consider(level, i);
  }
  if (!first) return;
  if (!closed) {
    // More requests could join: wait for them while the oldest has time left, unless the
    // queued requests already reach a preferred size (Triton sends a batch as soon as it can
    // be cut at one) or pass the largest.
    const bool preferred_reached = std::any_of(picks.begin(), picks.end(), [&](const pick& p) {
      return std::binary_search(preferred_.begin(), preferred_.end(), p.total);
    });
    const std::int64_t target = target_;
    const auto start = std::max(first->enqueued, pace.free_since);
    const auto until = std::min(std::max({start, pace.answered, newest}) + max_delay_,
                                start + std::max<clock::duration>(max_delay_, pace.stretch));
    if (!preferred_reached && total < target && now < until && !flushed) {
      wake = until;
      return;
    }
  }
  // Cut at the largest preferred batch size the run reaches, if any.
  std::size_t n = picks.size();
  if (!preferred_.empty() && !std::binary_search(preferred_.begin(), preferred_.end(), total))
    for (std::size_t k = picks.size(); k-- > 1;)
      if (std::binary_search(preferred_.begin(), preferred_.end(), picks[k - 1].total)) {
        n = k;
        break;
      }
  batch.reserve(n);
  for (std::size_t k = 0; k < n; ++k) {
    entry& e = queues_[picks[k].level][picks[k].index];
    if (!e.group.empty()) running_groups_.insert(e.group);
    batch.push_back(std::move(e.call));
  }
  // Remove the taken entries, from the back of each queue so the indices stay valid.
  std::sort(picks.begin(), picks.begin() + static_cast<std::ptrdiff_t>(n),
            [](const pick& a, const pick& b) { return a.level != b.level ? a.level < b.level : a.index > b.index; });
  for (std::size_t k = 0; k < n; ++k) {
    auto& q = queues_[picks[k].level];
    auto it = q.begin() + static_cast<std::ptrdiff_t>(picks[k].index);
    if (it->deadline.time_since_epoch().count() != 0) {
      --with_deadline_[picks[k].level];
      if (!it->delay) reject_deadlines_.erase(reject_deadlines_.find(it->deadline));
    }
    q.erase(it);
  }
  size_ -= n;
}

void batch_queue::expire(clock::time_point now, std::vector<call_ptr>& rejected) {
  if (reject_deadlines_.empty() || *reject_deadlines_.begin() > now) return;  // nothing is due
  for (std::size_t level = 0; level < queues_.size(); ++level) {
    if (with_deadline_[level] == 0) continue;
    auto& q = queues_[level];
    for (auto it = q.begin(); it != q.end();) {
      if (!it->delay && it->deadline.time_since_epoch().count() != 0 && it->deadline <= now) {
        reject_deadlines_.erase(reject_deadlines_.find(it->deadline));
        rejected.push_back(std::move(it->call));
        it = q.erase(it);
        --with_deadline_[level];
        --size_;
      } else {
        ++it;
      }
    }
  }
}

void batch_queue::ran(std::string_view group) {
  if (group.empty()) return;
  if (auto it = running_groups_.find(group); it != running_groups_.end()) running_groups_.erase(it);
}

clock::time_point batch_queue::next_deadline() const {
  return reject_deadlines_.empty() ? clock::time_point{} : *reject_deadlines_.begin();
}

// --- preserve_ordering ---------------------------------------------------------------------------

std::uint64_t completion_order::take() {
  std::lock_guard lock(mu_);
  return next_in_++;
}

void completion_order::complete(std::uint64_t number, std::function<void()> completion) {
  std::unique_lock lock(mu_);
  ready_.emplace(number, std::move(completion));
  if (draining_) return;  // the thread draining runs it in its turn
  draining_ = true;
  while (!ready_.empty() && ready_.begin()->first == next_out_) {
    auto next = std::move(ready_.begin()->second);
    ready_.erase(ready_.begin());
    ++next_out_;
    lock.unlock();
    if (next) next();
    lock.lock();
  }
  draining_ = false;
}

std::size_t completion_order::waiting() {
  std::lock_guard lock(mu_);
  return ready_.size();
}

// --- what runs where -------------------------------------------------------------------------

namespace {

// A model whose small requests may run on the thread that received them: no artificial delay,
// no batcher, no sequences (whose requests run one at a time, in order, through the queue).
bool inline_model(const model_config& c) {
  return !(c.parameters.count("execute_delay_ms") || c.proto.has_dynamic_batching() || c.sequence);
}

bool small_request(bool on_gpu, const v2::infer_request& request, const tensor_places& places) {
  constexpr std::size_t inline_execution_limit = 64 * 1024;
  std::size_t input_bytes = 0;
  for (std::size_t i = 0; i < request.inputs.size(); ++i)
    if (!on_gpu || i >= places.inputs.size() || !places.inputs[i].data) input_bytes += request.inputs[i].data.size();
  return input_bytes <= inline_execution_limit;
}

// The request's own part of runs_inline: small, or of any size for a size-free backend when no
// input is in device memory (which a host backend gets copied to the host first).
bool quick_request(bool on_gpu, const v2::infer_request& request, const tensor_places& places, bool size_free) {
  if (small_request(on_gpu, request, places)) return true;
  return size_free &&
         std::all_of(places.inputs.begin(), places.inputs.end(), [](const placement& p) { return !p.data; });
}

}  // namespace

bool runs_inline(const model_config& c, bool on_gpu, const v2::infer_request& request, const tensor_places& places,
                 bool size_free) {
  return inline_model(c) && quick_request(on_gpu, request, places, size_free);
}

std::string batch_key(const v2::infer_request& r) {
  // Input names in order, each with its type and its shape past the batch dimension: two
  // requests with the same key concatenate along dimension 0 into valid inputs. Inputs are
  // sorted by name so that the order a client lists them in does not matter.
  std::vector<const v2::infer_input*> in;
  in.reserve(r.inputs.size());
  for (const auto& i : r.inputs) in.push_back(&i);
  std::sort(in.begin(), in.end(), [](const auto* a, const auto* b) { return a->name < b->name; });
  std::string key;
  for (const auto* i : in) {
    key += i->name;
    key += '\0';
    key += static_cast<char>(i->datatype);
    for (std::size_t d = 1; d < i->shape.size(); ++d) key.append(reinterpret_cast<const char*>(&i->shape[d]), sizeof(std::int64_t));
    key += '\0';
  }
  return key;
}

std::string sequence_group(const v2::infer_request& r) {
  std::string text;
  std::uint64_t number = 0;
  bool string_id = false;
  read_sequence_id(r, text, number, string_id);
  return text.empty() ? text : (string_id ? "s:" : "u:") + text;
}

// --- the gate --------------------------------------------------------------------------------

struct instance_gate::wake_timer {
  explicit wake_timer(boost::asio::thread_pool& pool) : timer(pool.get_executor()) {}
  boost::asio::steady_timer timer;
  clock::time_point at{};    ///< when it fires; epoch: not armed
  std::uint64_t generation = 0;
};

instance_gate::instance_gate() = default;
instance_gate::~instance_gate() = default;

void instance_gate::configure(std::size_t instances, const model_config& c, bool on_gpu, version_stats& stats,
                              const execution_context& exec, std::weak_ptr<instance_gate> self,
                              sequence_table* sequences, const backend* impl) {
  queue_.configure(c);
  sequence_model_ = c.sequence.has_value();
  sequences_ = c.sequence ? sequences : nullptr;
  if (c.sequence) max_idle_ = std::chrono::microseconds(c.sequence->max_idle_us);
  self_ = std::move(self);
  exec_ = exec;
  stats_ = &stats;
  on_gpu_ = on_gpu;
  inline_ok_ = inline_model(c);
  impl_ = impl;
  instances_ = instances ? instances : 1;
  order_ = queue_.gathers() && !c.sequence && !c.decoupled && c.proto.dynamic_batching().preserve_ordering()
               ? std::make_shared<completion_order>()
               : nullptr;
}

queue_ticket instance_gate::ticket(std::uint64_t priority, std::uint64_t timeout_us) const {
  return queue_.ticket(priority, timeout_us, clock::now());
}

bool instance_gate::schedule(const call_ptr& call) {
  // Ensembles: each step is a call of its own to its model's scheduler; the ensemble holds no
  // instance while its steps wait there.
  if (impl_ && impl_->schedules_itself()) {
    impl_->start(call);
    return true;
  }
  // A live sequence is not idle while this request of it waits or runs; the runner releases it.
  if (sequence_model_) call->held_sequence = sequence_group(call->request);
  if (sequences_ && !call->held_sequence.empty()) call->sequence_hold = sequences_->hold(call->held_sequence, max_idle_);
  if (inline_ok_ && !call->hooks.sink && (!impl_ || impl_->runs_quickly()) &&
      quick_request(on_gpu_, call->request, call->places, impl_ && impl_->size_free())) {
    exec_.runner->run_one(*call);
    return true;
  }
  // The queue policy (schedule_policy): the request's priority level and how long it may wait.
  const queue_ticket t = ticket(unsigned_parameter(call->request, "priority"), unsigned_parameter(call->request, "timeout"));
  std::string key;
  if (queue_.gathers()) key = batch_key(call->request);
  std::string group = call->held_sequence;  // a sequence's requests run one at a time
  // preserve_ordering: the call completes in its turn among the requests queued before it.
  std::uint64_t number = 0;
  std::shared_ptr<std::function<void(status)>> completion;
  if (order_) {
    number = order_->take();
    completion = std::make_shared<std::function<void(status)>>(std::move(call->done));
    call->done = [order = order_, number, completion](status st) {
      order->complete(number, [completion, st = std::move(st)]() mutable { (*completion)(std::move(st)); });
    };
  }
  if (submit(t, call, call->batch_size, std::move(key), std::move(group))) return true;
  if (order_) {  // never queued: its completion is the caller's again, and the later ones go on
    call->done = std::move(*completion);
    order_->skip(number);
  }
  if (sequences_) sequences_->release(call->held_sequence, std::exchange(call->sequence_hold, 0));
  return false;
}

bool instance_gate::submit(const queue_ticket& t, call_ptr call, std::int64_t rows, std::string key, std::string group) {
  {
    std::lock_guard lock(mu_);
    if (!queue_.push(t, std::move(call), rows, std::move(key), std::move(group), clock::now())) return false;
    if (stats_) stats_->enqueued();
  }
  dispatch();
  return true;
}

void instance_gate::flush() {
  {
    std::lock_guard lock(mu_);
    flushed_ = true;
    if (timer_) {  // a wait already under way finds its generation stale
      ++timer_->generation;
      timer_->at = {};
      timer_->timer.cancel();
    }
  }
  dispatch(false);
}

void instance_gate::release(const std::vector<call_ptr>& batch) {
  {
    std::lock_guard lock(mu_);
    for (const auto& c : batch)
      if (c) queue_.ran(c->held_sequence);
    const auto now = clock::now();
    if (running_-- == instances_) pace_.free_since = now;
    ++answering_;
    if (!started_.empty()) {  // the oldest running batch stands for the one that ended
      const clock::duration took = now - started_.front();
      started_.pop_front();
      pace_.stretch = pace_.stretch.count() == 0 ? took : (pace_.stretch * 7 + took) / 8;
    }
  }
  dispatch();
}

void instance_gate::answered() {
  {
    std::lock_guard lock(mu_);
    if (answering_) --answering_;
    pace_.answered = clock::now();
  }
  dispatch();
}

void instance_gate::dispatch(bool run_here) {
  std::vector<std::vector<call_ptr>> batches;
  std::vector<call_ptr> rejected;
  {
    std::lock_guard lock(mu_);
    if (!exec_.pool || queue_.size() == 0) return;
    const auto now = clock::now();
    clock::time_point wake{};
    std::size_t taken = 0;
    // Requests whose REJECT deadline passed leave now, whether or not an instance is free.
    queue_.expire(now, rejected);
    while (running_ < instances_) {
      std::vector<call_ptr> batch;
      batch_pacing pace = pace_;
      if (answering_) pace.answered = now;  // the delay counts from the answers
      queue_.take(now, flushed_, batch, rejected, wake, pace);
      if (batch.empty()) break;
      ++running_;
      started_.push_back(now);
      taken += batch.size();
      batches.push_back(std::move(batch));
    }
    // What left the queue no longer counts as pending.
    if (stats_)
      for (std::size_t i = 0, n = taken + rejected.size(); i < n; ++i) stats_->dequeued();
    // Wake for the batch that waits for company, or for the next REJECT deadline, whichever
    // comes first.
    const clock::time_point deadline = queue_.next_deadline();
    if (deadline.time_since_epoch().count() != 0 && (wake.time_since_epoch().count() == 0 || deadline < wake))
      wake = deadline;
    if (wake.time_since_epoch().count() != 0) arm(wake);
  }
  const batch_runner* runner = exec_.runner;
  boost::asio::thread_pool& pool = *exec_.pool;
  for (auto& r : rejected) boost::asio::post(pool, [runner, r = std::move(r)]() mutable { runner->expire(std::move(r)); });
  for (std::size_t i = run_here ? 1 : 0; i < batches.size(); ++i)
    boost::asio::post(pool, [this, runner, b = std::move(batches[i])]() mutable { runner->run(std::move(b), *this); });
  if (run_here && !batches.empty()) runner->run(std::move(batches.front()), *this);
}

void instance_gate::arm(clock::time_point at) {
  if (!timer_) timer_ = std::make_unique<wake_timer>(*exec_.pool);
  if (timer_->at.time_since_epoch().count() != 0 && timer_->at <= at) return;  // wakes earlier already
  timer_->at = at;
  const std::uint64_t generation = ++timer_->generation;
  timer_->timer.expires_at(at);
  timer_->timer.async_wait([self = self_, generation](const boost::system::error_code& ec) {
    if (ec) return;
    auto gate = self.lock();
    if (!gate) return;
    {
      std::lock_guard lock(gate->mu_);
      if (gate->timer_->generation == generation) gate->timer_->at = {};
    }
    gate->dispatch(true);  // on a pool thread already: the batch runs here, without another hop
  });
}

}  // namespace inferwire::server
