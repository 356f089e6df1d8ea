// SPDX-License-Identifier: Apache-2.0
// The model repository on disk and the models loaded from it (v2-protocol §1.3, §6):
// <repo>/<model>/config.pbtxt and numbered version folders, version policies, model states,
// lookups with Triton's error texts. Each version carries its statistics (statistics.hpp) and
// its scheduling state (scheduler.hpp).
#pragma once

#include "backends.hpp"
#include "model_config.hpp"
#include "scheduler.hpp"
#include "statistics.hpp"

#include <inferwire/v2/types.hpp>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <optional>
#include <thread>
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

/// How deep ensembles may nest (an ensemble whose step is an ensemble ...): a step runs within
/// its caller, on its thread's stack, and loads its missing steps within its own load.
inline constexpr int max_ensemble_depth = 32;

enum class model_state { unknown, ready, unavailable, loading, unloading };
std::string_view state_name(model_state s) noexcept;

/// One version of a model.
struct model_version {
  std::string name;
  std::int64_t version = 0;
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

enum class control_mode { none, poll, explicit_ };

class model_repository;
/// The backend of `platform: "ensemble"` models: runs the steps over the repository's models, in
/// an order found once here. Null, with `st` set, when a step can never run (it reads a tensor
/// that no ensemble input or other step provides).
std::unique_ptr<backend> make_ensemble_backend(const model_repository& repo, const model_config& c, status& st);

/// The models of one or more repositories on disk and their lifecycle (v2-protocol §6).
/// Lookups take a shared lock and hand out shared_ptrs, so an unload or reload never fails a
/// request already holding its version; control operations (load, unload, poll) are
/// serialised among themselves and never block inference.
class model_repository {
 public:
  using log_fn = std::function<void(bool error, const std::string&)>;
  /// `exec`: where the models' schedulers run their work.
  model_repository(std::vector<std::filesystem::path> roots, control_mode mode, log_fn log,
                   execution_context exec = {});
  ~model_repository();

  /// Startup loading: every model (none, poll) or the `--load-model` names (explicit; `*` =
  /// all), `threads` models at a time (--model-load-thread-count); ensembles load after the
  /// others. Returns false when some model failed to load.
  bool startup(const std::vector<std::string>& load_models, unsigned threads = 1);

  /// Explicit-mode load (§6.4) with an optional config override and `file:` contents.
  status load(std::string_view name, const v2::repository_load_request& request);
  /// Explicit-mode unload (§6.4); with `unload_dependents`, composing models loaded for an
  /// ensemble go too.
  status unload(std::string_view name, bool unload_dependents);
  /// The repository index (§6.3), sorted by name.
  std::vector<v2::repository_index_entry> index(bool ready_only) const;
  /// Poll mode: rescans the repositories and loads, reloads or unloads what changed.
  void poll();
  /// Starts (poll mode) the thread that calls poll() every `seconds`.
  void start_polling(unsigned seconds);
  void stop_polling();

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
  /// Strict readiness: every model the server tried to load has a version and each is
  /// READY (or unloaded).
  bool all_ready() const;
  /// Version numbers of the READY versions of `name`, ascending.
  std::vector<std::int64_t> ready_version_numbers(std::string_view name) const;

  control_mode mode() const noexcept { return mode_; }

 private:
  struct version_record {
    std::int64_t version = 0;
    model_state state = model_state::unknown;
    std::string reason;
    std::shared_ptr<model_version> live;  ///< null once unloaded
  };
  struct model_entry {
    std::string name;
    std::vector<version_record> versions;  ///< ascending
    std::string error;                     ///< a failure that left no version behind
    std::string fingerprint;               ///< config + version folders, for reload decisions
    bool from_files = false;               ///< loaded from `file:` parameters
    bool as_dependency = false;            ///< loaded only because an ensemble needs it
    std::vector<std::string> dependencies; ///< composing models (ensembles)
  };
  struct located {
    std::filesystem::path dir;
    int count = 0;
  };

  located locate(const std::string& name) const;
  /// find() without the thread's last lookup: searches under a shared lock on mu_ (which it
  /// takes; the *_locked functions are those that run under control_mu_).
  std::shared_ptr<model_version> search(std::string_view name, std::string_view version, status& st) const;
  /// The versions of `name` (none for an unknown name); never inserts, so a shared lock on
  /// mu_ suffices.
  const std::vector<version_record>& versions_of(const std::string& name) const {
    static const std::vector<version_record> none;
    auto it = models_.find(name);
    return it == models_.end() ? none : it->second.versions;
  }
  std::vector<std::string> scan_names() const;
  /// Whether `from`, a model with a live version, uses `target` through the steps of loaded
  /// ensembles (directly or further down).
  bool leads_to(const std::string& from, const std::string& target) const;
  status load_locked(const std::string& name, const std::optional<std::string>& config_override,
                     const std::filesystem::path& files_dir, bool as_dependency);
  status load_locked_unguarded(const std::string& name,
                               const std::optional<std::string>& config_override,
                               const std::filesystem::path& files_dir, bool as_dependency);
  status unload_locked(const std::string& name, bool unload_dependents);
  void forget_if_files_only(const std::string& name);
  void drain(std::vector<std::shared_ptr<model_version>> old);

  std::vector<std::filesystem::path> roots_;
  control_mode mode_;
  log_fn log_;
  execution_context exec_;
  std::mutex control_mu_;  ///< serialises load/unload/poll
  mutable std::shared_mutex mu_;
  std::map<std::string, model_entry, std::less<>> models_;
  /// Holds mu_ exclusively, and counts a change of what find() answers when it lets go.
  class change_lock {
   public:
    explicit change_lock(std::shared_mutex& mu) : lock_(mu) {}
    change_lock(const change_lock&) = delete;
    change_lock& operator=(const change_lock&) = delete;
    ~change_lock() { changes.fetch_add(1, std::memory_order_release); }  // (still held here)

   private:
    std::unique_lock<std::shared_mutex> lock_;
  };
  /// Changes to any repository of the process: each thread's last lookup (find()) holds while
  /// none came after it.
  static inline std::atomic<std::uint64_t> changes{1};

  std::thread poller_;
  std::mutex poll_mu_;
  std::condition_variable poll_cv_;
  bool stop_poll_ = false;
};

}  // namespace inferwire::server
