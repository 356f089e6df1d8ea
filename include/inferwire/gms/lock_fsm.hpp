// SPDX-License-Identifier: Apache-2.0
// inferwire/gms/lock_fsm.hpp
//
// The GMS lock state machine (gms-protocol §4) as pure code: no I/O, no clocks, no threads.
// The server owns one and asks it three things: what a handshake gets now (`decide`), what a
// waiting handshake gets after a state change (`retry`), and the transitions (connect, commit,
// abort, disconnect), which throw std::logic_error on an event the state does not allow (an
// invariant violation: upstream exits the server).
//
// State: RW if a writer session exists, else RO if readers exist, else COMMITTED if a layout is
// committed, else EMPTY. Writers have priority: while an RW request waits, new readers wait.
#ifndef INFERWIRE_GMS_LOCK_FSM_HPP
#define INFERWIRE_GMS_LOCK_FSM_HPP

#include <inferwire/gms/messages.hpp>

#include <cstdint>
#include <optional>
#include <set>
#include <stdexcept>
#include <string>
#include <string_view>

namespace inferwire::gms {

enum class lock_state { empty, rw, committed, ro };

constexpr std::string_view to_string(lock_state s) noexcept {
  switch (s) {
    case lock_state::empty: return "EMPTY";
    case lock_state::rw: return "RW";
    case lock_state::committed: return "COMMITTED";
    case lock_state::ro: return "RO";
  }
  return "";
}

/// What a handshake gets.
enum class grant { rw, ro, wait, fail };

class lock_fsm {
 public:
  using session_id = std::uint64_t;

  lock_state state() const noexcept {
    if (rw_) return lock_state::rw;
    if (!ro_.empty()) return lock_state::ro;
    return committed_ ? lock_state::committed : lock_state::empty;
  }
  bool committed() const noexcept { return committed_; }
  bool has_rw_session() const noexcept { return rw_.has_value(); }
  std::optional<session_id> rw_session() const noexcept { return rw_; }
  std::size_t ro_session_count() const noexcept { return ro_.size(); }
  std::int64_t waiting_writers() const noexcept { return waiting_writers_; }
  bool is_ready() const noexcept { return committed_ && !rw_; }

  bool can_rw() const noexcept { return !rw_ && ro_.empty(); }
  bool can_ro() const noexcept { return committed_ && !rw_ && waiting_writers_ == 0; }

  /// A new handshake. `timeout_ms` <= 0 fails at once (upstream's asyncio behaviour), except
  /// that rw_or_ro gets RW at once when RW is grantable on an uncommitted server.
  grant decide(requested_lock_type t, std::optional<std::int64_t> timeout_ms) const noexcept {
    if (t == requested_lock_type::rw_or_ro && can_rw() && !committed_) return grant::rw;
    if (timeout_ms && *timeout_ms <= 0) return grant::fail;
    return retry(t);
  }

  /// A waiting handshake, re-evaluated after a change.
  grant retry(requested_lock_type t) const noexcept {
    switch (t) {
      case requested_lock_type::rw: return can_rw() ? grant::rw : grant::wait;
      case requested_lock_type::ro: return can_ro() ? grant::ro : grant::wait;
      case requested_lock_type::rw_or_ro:
        if (can_rw() && !committed_) return grant::rw;
        return can_ro() ? grant::ro : grant::wait;
    }
    return grant::wait;
  }

  /// An RW request starts or stops waiting (it counts in waiting_writers meanwhile).
  void begin_rw_wait() noexcept { ++waiting_writers_; }
  void end_rw_wait() noexcept {
    if (waiting_writers_ > 0) --waiting_writers_;
  }

  /// RW_CONNECT (from EMPTY or COMMITTED): the caller clears the layout. Returns whether a
  /// committed layout existed (for the allocations_cleared event).
  bool rw_connect(session_id s) {
    const auto st = state();
    if (st != lock_state::empty && st != lock_state::committed) violation("RW_CONNECT", st);
    const bool had_layout = committed_;
    committed_ = false;
    rw_ = s;
    return had_layout;
  }

  /// RW_COMMIT: RW -> COMMITTED; the writer's session is detached.
  void rw_commit(session_id s) {
    if (rw_ != s) violation("RW_COMMIT", state());
    rw_.reset();
    committed_ = true;
  }

  /// RW_ABORT (the writer left before committing): RW -> EMPTY; the caller clears the layout.
  void rw_abort(session_id s) {
    if (rw_ != s) violation("RW_ABORT", state());
    rw_.reset();
    committed_ = false;
  }

  /// RO_CONNECT (from COMMITTED or RO).
  void ro_connect(session_id s) {
    const auto st = state();
    if (st != lock_state::committed && st != lock_state::ro) violation("RO_CONNECT", st);
    ro_.insert(s);
  }

  /// RO_DISCONNECT: RO stays RO, or becomes COMMITTED after the last reader.
  void ro_disconnect(session_id s) {
    if (!ro_.erase(s)) violation("RO_DISCONNECT", state());
  }

  /// Whether `s` holds the RW or an RO lock.
  bool holds(session_id s) const noexcept { return rw_ == s || ro_.count(s) != 0; }

 private:
  [[noreturn]] static void violation(std::string_view event, lock_state st) {
    throw std::logic_error("GMS lock FSM invariant violated: event " + std::string(event) +
                           " in state " + std::string(to_string(st)));
  }

  std::optional<session_id> rw_;
  std::set<session_id> ro_;
  bool committed_ = false;
  std::int64_t waiting_writers_ = 0;
};

}  // namespace inferwire::gms

#endif
