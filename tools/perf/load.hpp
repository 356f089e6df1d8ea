// SPDX-License-Identifier: Apache-2.0
// The load: requests built from the model's metadata and the input data, sent by inferwire's
// HTTP or gRPC client (the same code for both: the clients have the same calls), in one of
// four shapes: threads with blocking calls (--sync), coroutines with asynchronous calls
// (--async), gRPC streams (--streaming), or a schedule of requests per second
// (--request-rate-range). Windows are measured while it runs.
#ifndef INFERWIRE_TOOLS_PERF_LOAD_HPP
#define INFERWIRE_TOOLS_PERF_LOAD_HPP

#include "inputs.hpp"
#include "measure.hpp"
#include "options.hpp"

#include <boost/asio/as_tuple.hpp>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/executor_work_guard.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/use_awaitable.hpp>

#include <algorithm>
#include <atomic>
#include <fstream>
#include <condition_variable>
#include <cstdlib>
#include <iostream>
#include <memory>
#include <optional>
#include <random>
#include <thread>

namespace inferwire::perf {

namespace net = boost::asio;

/// What a protocol provides: `Traits::client` (inferwire's client), `make_blocking(o)`,
/// `make_async(ex, o, concurrency)`, `send_cost_us(request, o)` and, for gRPC, streams.
template <class Traits>
class driver {
 public:
  using client = typename Traits::client;

  driver(const options& o, const request_set& requests) : o_(o), requests_(requests) {}

  /// Runs one load level, measuring windows until they are stable (or max_trials).
  result measure(double level, client& control) {
    stop_ = false;
    recorder_.take();
    start(level);
    try {
      return measure_started(level, control);
    } catch (...) {
      stop();  // no thread outlives the level, whatever went wrong
      throw;
    }
  }

 private:
  result measure_started(double level, client& control) {
    std::vector<window> windows;
    result r;
    r.level = level;
    auto stats = [&] {
      auto s = control.model_statistics(v2::model_id(o_.model, o_.version));
      if (s.model_stats.empty()) throw std::runtime_error("the server has no statistics for " + o_.model);
      return s.model_stats.front();
    };
    // Windows are back to back. Each edge is the instant the client takes its recorder and then
    // asks for the statistics, so the server's window is the client's, shifted by the time a
    // statistics request takes to reach the server: the same length at both edges, where
    // reading the statistics first at the start and last at the end would widen the server's
    // window by two such requests.
    recorder_.take();
    auto t0 = std::chrono::steady_clock::now();
    auto before = stats();
    for (int trial = 0; trial < o_.max_trials; ++trial) {
      std::this_thread::sleep_until(t0 + std::chrono::milliseconds(o_.measurement_interval_ms));
      auto taken = recorder_.take();
      const auto t1 = std::chrono::steady_clock::now();
      auto after = stats();
      window w;
      w.duration = t1 - t0;
      t0 = t1;
      w.latencies_ns = std::move(taken.latencies_ns);
      std::sort(w.latencies_ns.begin(), w.latencies_ns.end());
      w.failures = taken.failures;
      w.first_error = std::move(taken.first_error);
      w.server = server_side::between(before, after);
      before = std::move(after);
      w.batch_size = o_.batch_size;
      if (o_.verbose)
        std::cerr << "  window " << trial + 1 << ": " << w.requests() << " requests, " << w.throughput()
                  << " infer/sec, avg latency " << w.avg_latency_us() << " usec\n";
      const bool failed = w.failures > 0;
      windows.push_back(std::move(w));
      if (failed) throw std::runtime_error("a request failed: " + windows.back().first_error);
      if (stable(windows, o_.stability_percentage, o_.percentile)) {
        r.stable = true;
        break;
      }
    }
    stop();
    const auto n = std::min<std::size_t>(3, windows.size());
    r.w = window::merge(std::vector<window>(windows.end() - static_cast<std::ptrdiff_t>(n), windows.end()));
    return r;
  }

  const v2::infer_request& next_request() {
    const auto i = next_.fetch_add(1, std::memory_order_relaxed);
    return requests_.requests[i % requests_.requests.size()];
  }

  void record(std::chrono::steady_clock::time_point t0, const error_code& ec) {
    if (ec)
      recorder_.failure(ec.message());
    else
      recorder_.success(std::chrono::steady_clock::now() - t0);
  }

  void start(double level) {
    if (o_.request_rate) return start_rate(level);
    const auto n = static_cast<std::size_t>(level);
    if (!o_.async) {
      for (std::size_t i = 0; i < n; ++i)
        threads_.emplace_back([this] {
          {
            auto c = Traits::make_blocking(o_);
            while (!stop_.load(std::memory_order_relaxed)) {
              const auto t0 = std::chrono::steady_clock::now();
              error_code ec;
              c->infer(v2::model_id(o_.model, o_.version), next_request(), ec);
              record(t0, ec);
            }
          }
          std::lock_guard lock(mu_);
          ++sync_done_;
          cv_.notify_all();
        });
      return;
    }
    // Every slot on one of up to --max-threads event loops, each loop with its own client.
    start_loops(std::min<std::size_t>(n, static_cast<std::size_t>(o_.max_threads)), n);
    for (std::size_t i = 0; i < n; ++i) {
      auto& l = loops_[i % loops_.size()];
      ++active_;
      if constexpr (Traits::has_streams) {
        if (o_.streaming) {
          net::co_spawn(l.ioc, stream_slot(l.c), [this](std::exception_ptr) { done_one(); });
          continue;
        }
      }
      net::co_spawn(l.ioc, slot(l.c), [this](std::exception_ptr) { done_one(); });
    }
  }

  net::awaitable<void> slot(std::shared_ptr<client> c) {
    const v2::model_id model(o_.model, o_.version);
    while (!stop_.load(std::memory_order_relaxed)) {
      const auto t0 = std::chrono::steady_clock::now();
      auto [ec, r] = co_await c->async_infer(model, next_request(), net::as_tuple(net::use_awaitable));
      record(t0, ec);
    }
  }

  net::awaitable<void> stream_slot(std::shared_ptr<client> c) {
    if constexpr (Traits::has_streams) {
      const v2::model_id model(o_.model, o_.version);
      auto s = c->open_stream();
      while (!stop_.load(std::memory_order_relaxed)) {
        const auto t0 = std::chrono::steady_clock::now();
        auto [wec] = co_await s.async_write(model, next_request(), net::as_tuple(net::use_awaitable));
        if (wec) {
          record(t0, wec);
          break;
        }
        // One response per request, or, from a decoupled model, responses until the final one.
        error_code rec;
        for (;;) {
          auto [ec, r] = co_await s.async_read(net::as_tuple(net::use_awaitable));
          rec = ec;
          if (ec || !requests_.decoupled || r.parameters().template get<bool>("triton_final_response").value_or(false))
            break;
        }
        record(t0, rec);
        if (rec) break;
      }
      co_await s.async_writes_done(net::as_tuple(net::use_awaitable));
      co_await s.async_finish(net::as_tuple(net::use_awaitable));
    }
  }

  void start_rate(double rate) {
    start_loops(static_cast<std::size_t>(o_.max_threads), 64);
    ++active_;
    net::co_spawn(loops_.front().ioc, schedule(rate), [this](std::exception_ptr) { done_one(); });
  }

  /// Sends on a schedule: a constant gap of 1/rate, or exponential gaps of that mean; the
  /// requests go round robin to the event loops.
  net::awaitable<void> schedule(double rate) {
    std::mt19937_64 rng(12345);
    std::exponential_distribution<double> exp(rate);
    net::steady_timer timer(loops_.front().ioc);
    auto next = std::chrono::steady_clock::now();
    for (std::size_t k = 0; !stop_.load(std::memory_order_relaxed); ++k) {
      const double gap = o_.request_distribution == distribution::poisson ? exp(rng) : 1.0 / rate;
      next += std::chrono::duration_cast<std::chrono::steady_clock::duration>(std::chrono::duration<double>(gap));
      timer.expires_at(next);
      co_await timer.async_wait(net::as_tuple(net::use_awaitable));
      auto& l = loops_[k % loops_.size()];
      ++active_;
      net::co_spawn(l.ioc, one_request(l.c), [this](std::exception_ptr) { done_one(); });
    }
  }

  net::awaitable<void> one_request(std::shared_ptr<client> c) {
    const v2::model_id model(o_.model, o_.version);
    const auto t0 = std::chrono::steady_clock::now();
    auto [ec, r] = co_await c->async_infer(model, next_request(), net::as_tuple(net::use_awaitable));
    record(t0, ec);
  }

  /// `count` event loops on their own threads, each with a client sized for its share of
  /// `connections` (HTTP keep-alive connections).
  void start_loops(std::size_t count, std::size_t connections) {
    loops_ = std::vector<loop>(std::max<std::size_t>(1, count));
    const auto per_loop = (connections + loops_.size() - 1) / loops_.size();
    for (auto& l : loops_) {
      l.c = std::shared_ptr<client>(Traits::make_async(l.ioc.get_executor(), o_, per_loop));
      l.work.emplace(l.ioc.get_executor());
    }
    for (auto& l : loops_) threads_.emplace_back([&l] { l.ioc.run(); });
  }

  void done_one() {
    if (--active_ == 0) {
      std::lock_guard lock(mu_);
      cv_.notify_all();
    }
  }

  /// Ends the level: every slot finishes its request in flight. A request that gets no answer
  /// within the grace period (a model told by its input data to wait for days, a server that
  /// stopped answering) ends the run instead of holding it forever.
  void stop() {
    stop_ = true;
    const auto grace = std::max(std::chrono::milliseconds(30'000),
                                std::chrono::milliseconds(4 * static_cast<std::int64_t>(o_.measurement_interval_ms)));
    auto give_up = [&](std::size_t left) {
      std::cout.flush();
      std::cerr << "inferwire-perf: " << left << " request(s) still without a response "
                << std::chrono::duration_cast<std::chrono::seconds>(grace).count()
                << " s after the measurement ended; exiting (does the model wait on its input data? see "
                   "--input-data)\n";
      std::cerr.flush();
      std::_Exit(1);
    };
    if (!loops_.empty()) {
      std::unique_lock lock(mu_);
      if (!cv_.wait_for(lock, grace, [this] { return active_.load() == 0; }))
        give_up(static_cast<std::size_t>(active_.load()));
      lock.unlock();
      for (auto& l : loops_) l.work.reset();
    } else if (!threads_.empty()) {  // blocking calls: each thread ends after its call
      const auto until = std::chrono::steady_clock::now() + grace;
      std::unique_lock lock(mu_);
      if (!cv_.wait_until(lock, until, [this] { return sync_done_ == threads_.size(); }))
        give_up(threads_.size() - sync_done_);
    }
    for (auto& t : threads_) t.join();
    threads_.clear();
    sync_done_ = 0;
    loops_.clear();  // clients first, then their io_contexts
  }

  struct loop {
    net::io_context ioc{1};
    std::optional<net::executor_work_guard<net::io_context::executor_type>> work;
    std::shared_ptr<client> c;
    loop() = default;
    loop(loop&&) = delete;
    ~loop() { c.reset(); }
  };

  const options& o_;
  const request_set& requests_;
  recorder recorder_;
  std::atomic<bool> stop_{false};
  std::atomic<std::uint64_t> next_{0};
  std::vector<std::thread> threads_;
  std::vector<loop> loops_;
  std::atomic<int> active_{0};
  std::size_t sync_done_ = 0;  // blocking threads that ended (under mu_)
  std::mutex mu_;
  std::condition_variable cv_;
};

/// The mean time of one run of `f` over 200 runs, in microseconds (the codec costs reported
/// beside the load). `f` returns a count that is summed, so the work is kept.
template <class F>
double mean_cost_us(F&& f) {
  constexpr int n = 200;
  std::size_t sink = 0;
  const auto t0 = std::chrono::steady_clock::now();
  for (int i = 0; i < n; ++i) sink += f();
  const auto t1 = std::chrono::steady_clock::now();
  if (sink == 0) return 0;
  return std::chrono::duration<double, std::micro>(t1 - t0).count() / n;
}

/// Measures every level of `o` against a server through `Traits`' client; the exit code.
template <class Traits>
int run_with(const options& o) {
  auto control = Traits::make_blocking(o);
  auto requests = prepare_requests(*control, o);
  // The regions this run registered go on every way out, a failed request's included.
  struct unregister {
    typename Traits::client& c;
    const request_set& r;
    ~unregister() { release_shm(c, r); }
  } unregister_on_exit{*control, requests};
  const double client_send_us = Traits::send_cost_us(requests.requests.front(), o);
  // The response to the first request, decoded again and again on the side. A decoupled model
  // answers on streams only; its responses are not decoded on the side (nor a failed request's).
  double client_recv_us = 0;
  if (!requests.decoupled) {
    error_code ec;
    const auto sample = control->infer(v2::model_id(o.model, o.version), requests.requests.front(), ec);
    if (!ec) client_recv_us = Traits::recv_cost_us(sample.response());
  }

  print_settings(std::cout, o);
  std::vector<result> results;
  bool all_stable = true;
  driver<Traits> d(o, requests);
  const auto levels = o.request_rate ? o.request_rate->values() : o.concurrency->values();
  for (double level : levels) {
    auto r = d.measure(level, *control);
    r.client_send_us = client_send_us;
    r.client_recv_us = client_recv_us;
    all_stable = all_stable && r.stable;
    print_level(std::cout, o, r);
    results.push_back(std::move(r));
  }
  print_summary(std::cout, o, results);
  if (!o.csv_file.empty()) {
    std::ofstream csv(o.csv_file);
    write_csv(csv, o, results);
    if (!csv) throw std::runtime_error("cannot write " + o.csv_file);
  }
  return all_stable ? 0 : 1;
}

}  // namespace inferwire::perf

#endif
