// SPDX-License-Identifier: Apache-2.0
// Surviving memory that a client can take away: a client that registered a system shared-memory
// region owns the object behind it and may shrink it (ftruncate) at any time. Touching a page
// of a mapping past the object's new end raises SIGBUS, which by default ends the process.
//
// The guard watches the address ranges of registered regions. When SIGBUS hits inside one, the
// handler replaces the faulting page with a private zero page (the instruction then completes),
// marks the range as faulted and returns; any other SIGBUS goes to the previous disposition.
// The request that used the region gets an error reply (see `fault_flag::check`), and the
// region refuses every later use until it is registered again. Nothing unwinds through frames
// that do not expect it (no longjmp), and a request never reads another client's memory: the
// substituted page holds zeros.
#pragma once

#include <inferwire/core/error.hpp>

#include <atomic>
#include <cstddef>
#include <string>

namespace inferwire::server {

/// Set by the SIGBUS handler when a watched range faulted.
struct fault_flag {
  std::atomic<bool> hit{false};
  std::string region;  ///< the region's name, for the error text
  /// INTERNAL with a text naming the region once it faulted.
  status check() const;
};

/// Watches [data, data + size) until destroyed. Registration fails (false from `active`) when
/// every slot is taken: the caller then refuses the region.
class fault_watch {
 public:
  fault_watch() = default;
  fault_watch(const void* data, std::size_t size, fault_flag& flag) noexcept;
  ~fault_watch();
  fault_watch(const fault_watch&) = delete;
  fault_watch& operator=(const fault_watch&) = delete;
  bool active() const noexcept { return slot_ >= 0; }

  /// How many ranges can be watched at once (the most system regions one server registers).
  static constexpr std::size_t capacity = 4096;

 private:
  int slot_ = -1;
};

/// Installs the SIGBUS handler once (idempotent, thread-safe).
void install_fault_guard();

}  // namespace inferwire::server
