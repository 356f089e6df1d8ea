// SPDX-License-Identifier: Apache-2.0
#include <inferwire/gms/lock_fsm.hpp>

#include <catch2/catch.hpp>

namespace gms = inferwire::gms;
using gms::grant;
using gms::lock_state;
using gms::requested_lock_type;
constexpr auto rw = requested_lock_type::rw;
constexpr auto ro = requested_lock_type::ro;
constexpr auto rw_or_ro = requested_lock_type::rw_or_ro;

TEST_CASE("gms lock FSM: a writer commits, readers come and go", "[gms]") {
  gms::lock_fsm f;
  CHECK(f.state() == lock_state::empty);
  CHECK(f.decide(ro, std::nullopt) == grant::wait);  // nothing committed yet
  CHECK(f.decide(rw, std::nullopt) == grant::rw);
  CHECK_FALSE(f.rw_connect(1));
  CHECK(f.state() == lock_state::rw);
  CHECK_FALSE(f.is_ready());
  CHECK(f.decide(rw, 1000) == grant::wait);
  CHECK(f.decide(ro, 1000) == grant::wait);
  f.rw_commit(1);
  CHECK(f.state() == lock_state::committed);
  CHECK(f.is_ready());
  CHECK(f.decide(ro, 5) == grant::ro);
  f.ro_connect(2);
  f.ro_connect(3);
  CHECK(f.state() == lock_state::ro);
  CHECK(f.ro_session_count() == 2);
  CHECK(f.decide(rw, std::nullopt) == grant::wait);  // readers hold it
  f.ro_disconnect(2);
  CHECK(f.state() == lock_state::ro);
  f.ro_disconnect(3);
  CHECK(f.state() == lock_state::committed);
  // A new writer replaces the committed layout.
  CHECK(f.decide(rw, std::nullopt) == grant::rw);
  CHECK(f.rw_connect(4));  // a committed layout existed
  CHECK_FALSE(f.committed());
  f.rw_abort(4);
  CHECK(f.state() == lock_state::empty);
}

TEST_CASE("gms lock FSM: writers have priority over new readers", "[gms]") {
  gms::lock_fsm f;
  f.rw_connect(1);
  f.rw_commit(1);
  f.ro_connect(2);
  // A writer waits for the reader; meanwhile new readers must wait too.
  CHECK(f.decide(rw, std::nullopt) == grant::wait);
  f.begin_rw_wait();
  CHECK(f.waiting_writers() == 1);
  CHECK(f.decide(ro, std::nullopt) == grant::wait);
  CHECK(f.retry(rw_or_ro) == grant::wait);
  f.ro_disconnect(2);
  CHECK(f.retry(rw) == grant::rw);
  f.end_rw_wait();
  f.rw_connect(3);
  CHECK(f.waiting_writers() == 0);
}

TEST_CASE("gms lock FSM: rw_or_ro and non-positive timeouts", "[gms]") {
  gms::lock_fsm f;
  // Empty server: rw_or_ro is RW, even with timeout 0; rw and ro with timeout 0 fail.
  CHECK(f.decide(rw_or_ro, 0) == grant::rw);
  CHECK(f.decide(rw, 0) == grant::fail);
  CHECK(f.decide(rw, -1) == grant::fail);
  CHECK(f.decide(ro, 0) == grant::fail);
  f.rw_connect(1);
  // Behind an active writer rw_or_ro waits: RO if it commits, RW if it aborts.
  CHECK(f.decide(rw_or_ro, 100) == grant::wait);
  CHECK(f.decide(rw_or_ro, 0) == grant::fail);
  f.rw_commit(1);
  CHECK(f.retry(rw_or_ro) == grant::ro);
  CHECK(f.decide(rw_or_ro, 0) == grant::fail);  // committed: no fast path
  gms::lock_fsm g;
  g.rw_connect(1);
  g.rw_abort(1);
  CHECK(g.retry(rw_or_ro) == grant::rw);
}

TEST_CASE("gms lock FSM: invalid transitions are invariant violations", "[gms]") {
  gms::lock_fsm f;
  CHECK_THROWS_AS(f.ro_connect(1), std::logic_error);  // EMPTY
  CHECK_THROWS_AS(f.rw_commit(1), std::logic_error);
  CHECK_THROWS_AS(f.ro_disconnect(1), std::logic_error);
  f.rw_connect(1);
  CHECK_THROWS_AS(f.rw_connect(2), std::logic_error);
  CHECK_THROWS_AS(f.rw_abort(2), std::logic_error);
  CHECK(f.holds(1));
  CHECK_FALSE(f.holds(2));
  try {
    f.ro_connect(3);
  } catch (const std::logic_error& e) {
    CHECK(std::string(e.what()) == "GMS lock FSM invariant violated: event RO_CONNECT in state RW");
  }
  CHECK(gms::to_string(lock_state::committed) == "COMMITTED");
}
