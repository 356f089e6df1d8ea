#include "scheduler.hpp"

#include <boost/asio/post.hpp>

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

bool instance_gate::submit(boost::asio::thread_pool& pool, job j) {
  {
    std::lock_guard lock(mu_);
    if (running_ >= instances_) {
      if (max_queue_ && pending_.size() >= max_queue_) return false;
      pending_.push_back(std::move(j));
      return true;
    }
    ++running_;
  }
  boost::asio::post(pool, std::move(j));
  return true;
}

void instance_gate::release(boost::asio::thread_pool& pool) {
  job next;
  {
    std::lock_guard lock(mu_);
    if (pending_.empty()) {
      --running_;
      return;
    }
    next = std::move(pending_.front());
    pending_.pop_front();
  }
  boost::asio::post(pool, std::move(next));
}

}  // namespace inferwire::server
