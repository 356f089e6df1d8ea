#include "scheduler.hpp"

#include <boost/asio/post.hpp>

#include <algorithm>

namespace inferwire::server {

// --- sequences -----------------------------------------------------------------------------

sequence_state* sequence_table::begin(const std::string& id, bool start,
                                      std::chrono::microseconds max_idle, bool& found) {
  std::lock_guard lock(mu_);
  auto now = clock::now();
  // Release idle sequences (the sequence batcher's max_sequence_idle_microseconds).
  for (auto it = slots_.begin(); it != slots_.end();) {
    if (now - it->second.last > max_idle) it = slots_.erase(it);
    else ++it;
  }
  auto it = slots_.find(id);
  found = it != slots_.end();
  if (start) {
    auto& s = slots_[id];
    s.state = {};
    s.state.started = true;
    s.last = now;
    return &s.state;
  }
  if (!found) return nullptr;
  it->second.last = now;
  return &it->second.state;
}

void sequence_table::end(const std::string& id) {
  std::lock_guard lock(mu_);
  slots_.erase(id);
}

// --- instances -----------------------------------------------------------------------------

void instance_gate::configure(std::size_t instances, const inference::ModelDynamicBatching& b) {
  instances_ = instances ? instances : 1;
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
  default_level_ = b.default_priority_level() >= 1 && b.default_priority_level() <= levels
                       ? static_cast<std::size_t>(b.default_priority_level() - 1)
                       : levels - 1;
}

queue_ticket instance_gate::ticket(std::uint64_t priority, std::uint64_t timeout_us) const {
  queue_ticket t;
  t.level = priority >= 1 && priority <= policies_.size() ? static_cast<std::size_t>(priority - 1) : default_level_;
  const policy& p = policies_[t.level];
  std::uint64_t timeout = p.timeout_us;
  if (p.allow_override && timeout_us > 0) timeout = timeout == 0 ? timeout_us : std::min(timeout, timeout_us);
  if (timeout > 0) t.deadline = clock::now() + std::chrono::microseconds(std::min<std::uint64_t>(timeout, std::uint64_t{1} << 40));
  t.delay = p.delay;
  return t;
}

bool instance_gate::submit(boost::asio::thread_pool& pool, const queue_ticket& t, job run, job expired) {
  {
    std::lock_guard lock(mu_);
    if (running_ >= instances_) {
      auto& q = queues_[t.level];
      const std::size_t max = policies_[t.level].max_queue;
      if (max && q.size() >= max) return false;
      if (t.deadline.time_since_epoch().count() != 0) ++with_deadline_[t.level];
      q.push_back({std::move(run), std::move(expired), t.deadline, t.delay});
      return true;
    }
    ++running_;
  }
  boost::asio::post(pool, std::move(run));
  return true;
}

void instance_gate::release(boost::asio::thread_pool& pool) {
  job next;
  std::vector<job> rejected;
  {
    std::lock_guard lock(mu_);
    const auto now = clock::now();
    auto timed_out = [now](const entry& e) { return e.deadline.time_since_epoch().count() != 0 && e.deadline <= now; };
    for (std::size_t level = 0; level < queues_.size(); ++level) {
      auto& q = queues_[level];
      if (q.empty()) continue;
      if (with_deadline_[level] == 0) {  // the common case: plain FIFO, no scan
        next = std::move(q.front().run);
        q.pop_front();
        break;
      }
      // Requests past their timeout under REJECT leave the queue with their error.
      for (auto it = q.begin(); it != q.end();) {
        if (!it->delay && timed_out(*it)) {
          rejected.push_back(std::move(it->expired));
          it = q.erase(it);
          --with_deadline_[level];
        } else {
          ++it;
        }
      }
      if (q.empty()) continue;
      // The first request still in time; else the first delayed one.
      auto pick = std::find_if(q.begin(), q.end(), [&](const entry& e) { return !timed_out(e); });
      if (pick == q.end()) pick = q.begin();
      if (pick->deadline.time_since_epoch().count() != 0) --with_deadline_[level];
      next = std::move(pick->run);
      q.erase(pick);
      break;
    }
    if (!next) --running_;
  }
  for (auto& r : rejected) boost::asio::post(pool, std::move(r));
  if (next) boost::asio::post(pool, std::move(next));
}

}  // namespace inferwire::server
