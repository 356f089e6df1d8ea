// SPDX-License-Identifier: Apache-2.0
// inferwire-server: the reference KServe v2 / Triton-compatible inference server.
#include "src/backends.hpp"
#include "src/heap_trim.hpp"
#include "src/options.hpp"
#include "src/server.hpp"
#include "src/vmm_channel.hpp"
#if INFERWIRE_SERVER_GRPC
#include "src/grpc.hpp"
#include "src/inprocess.hpp"
#endif

#include <inferwire/core/allocator.hpp>

#include <boost/asio/signal_set.hpp>
#include <boost/asio/executor_work_guard.hpp>
#include <boost/asio/steady_timer.hpp>

#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <atomic>
#include <iostream>
#include <functional>
#include <thread>

#include <pthread.h>

using namespace inferwire::server;

namespace {

// The watch over an exit whose timeout expired: an execution still running 5 s later does not
// hold the exit (status 1), while a shutdown that only runs slow (a loaded machine: gRPC's
// second, the joins) with no execution left finishes on its own, within 30 s.
std::atomic<bool> exit_done{false};  ///< main is past the shutdown

void watch_exit() {
  std::thread([] {
    const auto start = std::chrono::steady_clock::now();
    std::this_thread::sleep_for(std::chrono::seconds(5));
    for (; !exit_done.load(); std::this_thread::sleep_for(std::chrono::milliseconds(100))) {
      const bool running = execution_count::running() > 0;
      if (running || std::chrono::steady_clock::now() - start >= std::chrono::seconds(30)) {
        std::fputs(running ? "inferwire-server: executions still running 5 s after the exit timeout; exiting\n"
                           : "inferwire-server: shutdown still not finished 30 s after the exit timeout; exiting\n",
                   stderr);
        std::_Exit(1);
      }
    }
  }).detach();
}

// Waits for in-flight requests (bounded by --exit-timeout-secs), then stops the I/O loop.
void drain(server_state& s, std::shared_ptr<boost::asio::steady_timer> timer,
           std::chrono::steady_clock::time_point deadline) {
  if (s.in_flight.load() <= 0 || std::chrono::steady_clock::now() >= deadline) {
    if (s.in_flight.load() > 0) {
      s.log.log_warning("exit timeout expired with " + std::to_string(s.in_flight.load()) +
                        " requests in flight");
      // Models that wait (configured delays, repeat's DELAY) stop waiting, so that their
      // executions end; one that still runs a few seconds later does not hold the exit.
      interrupt_waits();
      watch_exit();
    }
    s.stop_io();
    return;
  }
  timer->expires_after(std::chrono::milliseconds(20));
  timer->async_wait([&s, timer, deadline](const boost::system::error_code&) { drain(s, timer, deadline); });
}

}  // namespace

int main(int argc, char** argv) {
  options opts;
  if (int rc = parse_options(argc, argv, opts); rc >= 0) return rc;
  std::signal(SIGPIPE, SIG_IGN);
  // Tensors of a few MiB reuse the heap instead of faulting fresh pages in (docs/server.md).
  inferwire::keep_large_blocks();
  // ... in one heap, which the quiet-time trim gives back whole (src/heap_trim.hpp).
  use_one_heap();

  server_state s(std::move(opts));
  // Backend libraries may run inferences on other models (BLS) while the server is up.
  enable_inprocess_inference(s);
  struct inprocess_off {
    ~inprocess_off() { disable_inprocess_inference(); }
  } inprocess_guard;
  if (!s.opts.log_file.empty() && !s.log.set_file(s.opts.log_file)) {
    std::cerr << "Error: cannot open log file '" << s.opts.log_file << "'\n";
    return 1;
  }
  s.traces.warn = [&s](const std::string& line) { s.log.log_warning(line); };
  if (auto st = s.traces.configure(s.opts.trace_config)) {
    std::cerr << "Error: " << st.message() << "\n";
    return 2;
  }
  for (const auto& line : s.opts.inert) s.log.log_info(line);
  if (s.opts.allow_metrics && s.opts.allow_gpu_metrics) {
    s.gpu_metrics = std::make_unique<nvml_metrics>();
    s.log.log_info(s.gpu_metrics->available() ? "Collecting metrics for the GPUs NVML reports"
                                              : "no GPU metrics: " + s.gpu_metrics->why_not());
    if (!s.gpu_metrics->available()) s.gpu_metrics.reset();
  }
  // A repository that is missing or unreadable fails the start-up, as in tritonserver; with
  // --exit-on-error=false the server goes on, answering but neither live nor ready.
  if (auto st = check_repositories(s.opts.model_repositories)) {
    const std::string text = "error: creating server: Internal - " + st.message();
    if (s.opts.exit_on_error) {
      s.log.log_error(st.message());
      std::cerr << text << std::endl;
      return 1;
    }
    s.log.log_error(text + " (--exit-on-error=false: serving, not live and not ready)");
    s.failed_to_initialize = true;
  }
  bool loaded = s.repository.startup(s.opts.load_models, s.opts.model_load_thread_count);
  s.log.log_info(model_table(s.repository));
  s.log.log_info(options_table(s.opts));
  if (!loaded && s.opts.exit_on_error) {
    s.log.log_error("exiting: failed to load all models (--exit-on-error=true)");
    return 1;
  }

  // CUDA regions from VMM chunks: their descriptors come over a Unix socket of their own. It is
  // open before the HTTP and gRPC endpoints, so a client that waits for "Started HTTPService"
  // finds it there.
  std::unique_ptr<vmm_importer> vmm_import;
  std::unique_ptr<vmm_channel> vmm_socket;
  if (s.opts.allow_client_shm && !s.opts.cuda_vmm_socket.empty()) {
    vmm_import = make_cuda_vmm_importer();
    vmm_channel_options vmm_options;
    vmm_options.path = s.opts.cuda_vmm_socket;
    vmm_socket = std::make_unique<vmm_channel>(s.shm, *vmm_import, std::move(vmm_options));
    if (auto st = vmm_socket->start()) {
      s.log.log_warning("CUDA VMM regions cannot be registered: " + st.message());
      vmm_socket.reset();
    } else {
      s.log.log_info("Started CUDA VMM socket at " + s.opts.cuda_vmm_socket);
    }
  }

  std::vector<std::shared_ptr<listener>> listeners;
  auto listen = [&](const std::string& what, int port, bool metrics) {
    inferwire::status st;
    int bound = 0;
    const std::string& address =
        metrics && !s.opts.metrics_address.empty() ? s.opts.metrics_address : s.opts.http_address;
    auto l = start_listener(s, address, port, metrics, st, bound);
    if (!l) {
      s.log.log_error(st.message());
      return false;
    }
    listeners.push_back(l);
    s.log.log_info("Started " + what + " at " + address + ":" + std::to_string(bound));
    return true;
  };
  if (s.opts.allow_http && !listen("HTTPService", s.opts.http_port, false)) return 1;
  if (s.opts.allow_metrics && !listen("Metrics Service", s.opts.metrics_port, true)) return 1;
#if INFERWIRE_SERVER_GRPC
  std::shared_ptr<grpc_frontend> grpc;
  if (s.opts.allow_grpc) {
    inferwire::status st;
    int bound = 0;
    grpc = start_grpc(s, s.opts.grpc_address, s.opts.grpc_port, st, bound);
    if (!grpc) {
      s.log.log_error(st.message());
      return 1;
    }
    s.log.log_info("Started GRPCInferenceService at " + s.opts.grpc_address + ":" + std::to_string(bound));
  }
#else
  if (s.opts.allow_grpc)
    s.log.log_warning("the gRPC frontend is not available in this build; --grpc-port " +
                      std::to_string(s.opts.grpc_port) + " is not served");
#endif

  if (s.repository.mode() == control_mode::poll) s.repository.start_polling(s.opts.repository_poll_secs);

  boost::asio::signal_set signals(*s.ios.front(), SIGINT, SIGTERM);
  signals.async_wait([&](const boost::system::error_code& ec, int sig) {
    if (ec) return;
    s.log.log_info("received signal " + std::to_string(sig) + ", shutting down");
    s.exiting = true;
    for (auto& l : listeners) stop_listener(*l);
    // Requests waiting for a batch to fill run now: nothing more is coming to fill it.
    for (const auto& v : s.repository.ready_versions()) v->instances.flush();
    auto timer = std::make_shared<boost::asio::steady_timer>(*s.ios.front());
    drain(s, timer, std::chrono::steady_clock::now() + std::chrono::seconds(s.opts.exit_timeout_secs));
  });

  // Keep every I/O context running until shutdown, even while it has no connection.
  std::vector<boost::asio::executor_work_guard<boost::asio::io_context::executor_type>> work;
  for (auto& io : s.ios) work.push_back(boost::asio::make_work_guard(*io));
  // The last line of defence: an exception that escapes a handler costs that handler's
  // connection, never an I/O thread or the process.
  auto serve = [&s](boost::asio::io_context& io) {
    for (;;) {
      try {
        io.run();
        return;
      } catch (const std::exception& e) {
        s.log.log_error(std::string("I/O handler failed: ") + e.what());
      }
    }
  };
  std::vector<std::thread> pool;
  for (std::size_t i = 1; i < s.ios.size(); ++i) pool.emplace_back([&serve, &s, i] { serve(*s.ios[i]); });
  // The balance of the I/O threads: their CPU clocks, sampled every period on the first one.
  io_balance& balance = *s.io_threads;
  clockid_t clock;
  if (pthread_getcpuclockid(pthread_self(), &clock) == 0) balance.set_thread_clock(0, clock);
  for (std::size_t i = 1; i < s.ios.size(); ++i)
    if (pthread_getcpuclockid(pool[i - 1].native_handle(), &clock) == 0) balance.set_thread_clock(i, clock);
  boost::asio::steady_timer balance_timer(*s.ios.front());
  std::function<void()> sample_balance = [&] {
    balance_timer.expires_after(io_balance::period);
    balance_timer.async_wait([&](const boost::system::error_code& ec) {
      if (ec || s.exiting) return;
      balance.sample();
      sample_balance();
    });
  };
  if (balance.adaptive()) {
    balance.sample();
    sample_balance();
  }
  serve(*s.ios.front());
  for (auto& t : pool) t.join();
#if INFERWIRE_SERVER_GRPC
  if (grpc) stop_grpc(*grpc);  // what is left gets a second, then is cancelled
#endif
  if (vmm_socket) vmm_socket->stop();
  s.repository.stop_polling();
  s.execution.join();
  s.traces.flush();
  s.log.log_info("exited cleanly");
  exit_done = true;
  return 0;
}
