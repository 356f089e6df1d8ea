// SPDX-License-Identifier: Apache-2.0
// Request tracing in Triton's mode (the trace extension, v2-protocol §7): the trace settings
// (global, with per-model overrides), the choice of which requests to trace (level, rate,
// count), and the trace files, in Triton's JSON with its timestamp names.
#pragma once

#include <inferwire/core/error.hpp>
#include <inferwire/v2/types.hpp>

#include <atomic>
#include <chrono>
#include <cstdint>
#include <fstream>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <span>
#include <string>
#include <utility>
#include <vector>

namespace inferwire::server {

/// One traced request: who it was, and its timestamps in order (Triton's names, nanoseconds
/// of the steady clock). Stamped by the frontend and the inference path, written when the
/// reply has been sent.
class trace_registry;

struct trace_record {
  std::uint64_t id = 0;
  std::uint64_t parent_id = 0;  ///< the ensemble request a step belongs to (0: none)
  std::string model_name;
  std::int64_t model_version = 0;
  std::string request_id;
  bool tensors = false;  ///< level TENSORS: inputs and outputs are recorded too
  std::vector<std::pair<const char*, std::uint64_t>> timestamps;
  std::string tensor_json;  ///< {"activity":...,"tensor":{...}} objects, comma-separated

  void stamp(const char* name, std::chrono::steady_clock::time_point t) {
    if (t.time_since_epoch().count() == 0) return;  // a step the request never reached
    timestamps.emplace_back(
        name, static_cast<std::uint64_t>(
                  std::chrono::duration_cast<std::chrono::nanoseconds>(t.time_since_epoch()).count()));
  }
  void stamp_now(const char* name) { stamp(name, std::chrono::steady_clock::now()); }
  /// Level TENSORS: one tensor, as `activity` (TENSOR_QUEUE_INPUT, TENSOR_BACKEND_OUTPUT).
  void add_tensor(const char* activity, const std::string& name, data_type type, const shape_t& shape,
                  std::span<const std::byte> data);

 private:
  friend class trace_registry;
  std::string file;
  std::uint64_t log_frequency = 0;

 public:
  trace_registry* registry = nullptr;  ///< where this record (and its children) are written
};

/// The trace settings and the trace files.
class trace_registry {
 public:
  trace_registry();
  ~trace_registry();

  /// Start-up values (from --trace-config), before any request.
  status configure(const std::vector<std::pair<std::string, std::string>>& settings);

  v2::trace_settings get(const std::string& model) const;
  /// Applies an update (v2-protocol §7) and returns the resulting settings.
  status update(const std::string& model, const v2::trace_settings& update, v2::trace_settings& out);

  /// A record when this request of `model` is to be traced (level not OFF, a trace file, its
  /// turn by trace_rate, trace_count not used up); else null. Cheap when tracing is off.
  std::shared_ptr<trace_record> begin(const std::string& model);
  /// The record of one step of a traced ensemble request: its own id, `parent`'s id as
  /// parent_id, the parent's file and level.
  std::shared_ptr<trace_record> child(const trace_record& parent, const std::string& model, std::int64_t version);
  /// Writes a finished record to its trace file.
  void finish(const trace_record& record);
  /// Writes what is pending and closes every trace file (shutdown).
  void flush();

  /// What tracing may write per minute, whatever a client sets over the network (level
  /// TENSORS, rate 1, count -1, log_frequency 1): traces past either bound are dropped, counted
  /// and warned about once a minute. From --trace-config max-bytes-per-minute=N and
  /// max-files-per-minute=N (0: no bound).
  struct write_budget {
    std::uint64_t bytes_per_minute = std::uint64_t{256} << 20;
    std::uint64_t files_per_minute = 60;
  };
  const write_budget& budget() const noexcept { return budget_; }
  /// Traces dropped for the budget since start-up.
  std::uint64_t dropped();
  /// Where the once-a-minute warning about dropped traces goes (the server's log).
  std::function<void(const std::string&)> warn;

 private:
  using setting_map = std::map<std::string, std::vector<std::string>>;
  struct sampler {
    std::uint64_t seen = 0;
    std::int64_t remaining = -1;  ///< trace_count; -1: unlimited
  };
  struct file_writer {
    std::ofstream out;             ///< log_frequency 0: the file, a JSON array being written
    bool first = true;
    std::vector<std::string> pending;  ///< log_frequency > 0: traces of the next numbered file
    std::size_t pending_bytes = 0;
    std::uint64_t index = 0;
  };
  static status check(const std::string& key, const std::vector<std::string>& v);
  void reset_samplers_locked();
  void write_numbered_locked(const std::string& path, file_writer& w);

  mutable std::mutex mu_;
  setting_map global_;
  setting_map startup_;  ///< global values at start-up
  std::map<std::string, setting_map> models_;
  std::map<std::string, sampler> samplers_;  ///< by model ("" = models without overrides)
  std::atomic<bool> any_on_{false};          ///< some level is not OFF
  std::uint64_t next_id_ = 1;
  std::mutex files_mu_;
  std::map<std::string, file_writer> files_;
  write_budget budget_;
  // Under files_mu_: the current minute's writes, and the drops.
  std::chrono::steady_clock::time_point window_start_{};
  std::uint64_t window_bytes_ = 0, window_files_ = 0, window_dropped_ = 0, dropped_ = 0;
  /// Whether `bytes` more (and `files` more files) fit this minute; counts them when they do.
  bool charge_locked(std::uint64_t bytes, std::uint64_t files);
};

}  // namespace inferwire::server
