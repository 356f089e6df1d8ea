// The model repository on disk and the models loaded from it (v2-protocol §1.3, §6):
// <repo>/<model>/config.pbtxt and numbered version folders, version policies, model states,
// lookups with Triton's error texts, per-version statistics and sequence slots.
#pragma once

#include "backends.hpp"
#include "model_config.hpp"

#include <inferwire/v2/types.hpp>

#include <chrono>
#include <deque>
#include <filesystem>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <shared_mutex>
#include <string>
#include <unordered_map>
#include <vector>

namespace inferwire::server {

enum class model_state { unknown, ready, unavailable, loading, unloading };
std::string_view state_name(model_state s) noexcept;

using clock = std::chrono::steady_clock;

/// Counters of one model version: the statistics extension and the Prometheus metrics read
/// the same numbers.
class version_stats {
 public:
  struct durations {
    std::uint64_t request_ns = 0;  ///< received -> response ready
    std::uint64_t queue_ns = 0;
    std::uint64_t input_ns = 0;
    std::uint64_t infer_ns = 0;
    std::uint64_t output_ns = 0;
  };
  void record_success(std::uint64_t batch_size, const durations& d);
  /// `backend` separates execution failures from rejected requests (metrics label).
  void record_failure(std::uint64_t request_ns, bool backend);

  v2::model_statistics snapshot(const std::string& name, std::int64_t version) const;
  std::uint64_t failures_rejected() const;
  std::uint64_t failures_backend() const;

 private:
  mutable std::mutex mu_;
  v2::infer_statistics inference_;
  std::uint64_t inference_count_ = 0;
  std::uint64_t execution_count_ = 0;
  std::uint64_t last_inference_ms_ = 0;
  std::uint64_t fail_rejected_ = 0;
  std::uint64_t fail_backend_ = 0;
  std::map<std::uint64_t, v2::batch_statistics> batches_;
};

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
  /// Hands `j` to `launch` now if an instance is free, or queues it. False when the queue is
  /// full (the caller answers 503 `Exceeds maximum queue size`).
  bool submit(job j, const std::function<void(job)>& launch);
  /// Called by a finished job: starts the next queued one, if any, through `launch`.
  void release(const std::function<void(job)>& launch);

 private:
  std::mutex mu_;
  std::size_t instances_ = 1;
  std::size_t max_queue_ = 0;
  std::size_t running_ = 0;
  std::deque<job> pending_;
};

/// One version of a model.
struct model_version {
  std::string name;
  std::int64_t version = 0;
  model_state state = model_state::unknown;
  std::string reason;
  std::shared_ptr<const model_config> config;
  std::unique_ptr<backend> impl;
  version_stats stats;
  sequence_table sequences;
  /// Sequence models execute one request at a time, in arrival order.
  std::mutex sequence_mu;
  instance_gate instances;
};

/// Parses a version string as Triton does (empty = -1, std::stol rules, negatives refused).
status parse_version(std::string_view s, std::int64_t& out);

class model_repository {
 public:
  explicit model_repository(std::vector<std::filesystem::path> roots);

  /// Scans the repositories and loads every model (control mode `none`). Logs through `log`.
  /// Returns false when some model failed to load.
  bool load_all(const std::function<void(bool error, const std::string&)>& log);

  /// The version a request names (§1.3): empty version = the highest READY one.
  std::shared_ptr<model_version> find(std::string_view name, std::string_view version,
                                      status& st) const;
  /// Released-Triton model readiness: lookup errors read as "not ready".
  bool ready(std::string_view name, std::string_view version) const;

  /// READY versions, by name then version.
  std::vector<std::shared_ptr<model_version>> ready_versions() const;
  /// READY versions of one model (statistics); errors with the statistics texts.
  std::vector<std::shared_ptr<model_version>> stats_versions(std::string_view name,
                                                              std::string_view version,
                                                              status& st) const;
  /// Strict readiness: every known model has a version and each is READY (or unloaded).
  bool all_ready() const;
  /// Version numbers of the READY versions of `name`, ascending.
  std::vector<std::int64_t> ready_version_numbers(std::string_view name) const;

 private:
  struct model_entry {
    std::string name;
    std::filesystem::path dir;
    bool duplicate = false;
    std::string error;  ///< load error that left no version behind
    std::vector<std::shared_ptr<model_version>> versions;  ///< ascending
  };
  void load_model(model_entry& e);

  std::vector<std::filesystem::path> roots_;
  mutable std::shared_mutex mu_;
  std::map<std::string, model_entry, std::less<>> models_;
};

}  // namespace inferwire::server
