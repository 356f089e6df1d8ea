// SPDX-License-Identifier: Apache-2.0
// One inference call as every layer of the server sees it: the request a frontend decoded, its
// shared-memory places, its clock, its hooks and completion, and what it holds (in-flight
// bytes, the in-flight count). Defined below the scheduler and the service, which both hand it
// on; it knows no transport.
//
// Also the one translation of an exception into a request's error, used wherever a call's
// work may throw.
#pragma once

#include "byte_budget.hpp"
#include "shm_registry.hpp"
#include "spare_blocks.hpp"
#include "statistics.hpp"

#include <inferwire/core/error.hpp>
#include <inferwire/v2/types.hpp>

#include <array>
#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace inferwire::server {

struct model_version;  // repository.hpp
struct trace_record;   // trace.hpp

/// Times of one request, for the statistics.
struct request_clock {
  clock::time_point received;  ///< the request was read
  clock::time_point queued;    ///< it was handed to the scheduler
  // Filled by execute_request (statistics and traces).
  clock::time_point compute_start;
  clock::time_point compute_input_end;
  clock::time_point compute_output_start;
  clock::time_point compute_end;
};

/// The shared-memory places of one request's tensors, and the leases that keep their regions
/// registered until the request is done.
struct tensor_places {
  std::vector<placement> inputs;  ///< parallel to request.inputs; data == nullptr: not device memory
  std::vector<std::pair<std::string, placement>> outputs;  ///< outputs requested in regions
  std::vector<shm_lease> leases;
  std::vector<const fault_flag*> faults;  ///< host regions used, checked after execution
  /// The first region that faulted while the request used it (fault_guard.hpp).
  status check_faults() const {
    for (const auto* f : faults)
      if (auto st = f->check()) return st;
    return {};
  }
};

/// Where a decoupled model's responses go, while it runs: false when nobody receives responses
/// any more (the client went away); the model then stops.
using response_sink = std::function<bool(v2::infer_response&&)>;

/// Counts one request the server is answering while it lives (a shutdown drains them; the heap
/// trimmer waits for none). Move-only.
class in_flight_token {
 public:
  explicit in_flight_token(std::atomic<std::int64_t>& count) noexcept : count_(&count) {
    count.fetch_add(1, std::memory_order_relaxed);
  }
  in_flight_token(in_flight_token&& o) noexcept : count_(std::exchange(o.count_, nullptr)) {}
  in_flight_token& operator=(in_flight_token&&) = delete;
  ~in_flight_token() {
    if (count_) count_->fetch_sub(1, std::memory_order_relaxed);
  }

 private:
  std::atomic<std::int64_t>* count_;
};

/// What a frontend gives an inference besides the call.
struct infer_hooks {
  /// Where a decoupled model's responses go (null: the frontend takes none).
  const response_sink* sink = nullptr;
  /// True once the client gave up (empty: never). Checked before the call runs and before
  /// each decoupled response.
  std::function<bool()> cancelled;
};

/// A time the frontend knows of a request (when its bytes arrived), stamped into its trace
/// under `name` when the request is traced.
struct receive_stamp {
  const char* name = nullptr;  ///< a literal; null: none
  clock::time_point at;
};

/// The output lists of responses (spare_blocks.hpp): 8 per thread, of at most 16 outputs.
using spare_outputs = spare_containers<std::vector<v2::infer_output>, 8, 16>;

/// One inference on its way through the server: the model found, the request the frontend
/// decoded, its shared-memory places and, once run, the response. Frontends may derive from it
/// to keep what the request's bytes live in.
struct infer_call {
  std::shared_ptr<model_version> model;
  v2::infer_request request;
  tensor_places places;
  std::int64_t batch_size = 1;
  request_clock times;
  v2::infer_response response;
  /// Set when this request is traced (trace extension); the frontend stamps its send times and
  /// hands the record to the trace registry once the reply is sent.
  std::shared_ptr<trace_record> trace;
  /// The frontend's receive times, stamped when the request is traced.
  std::array<receive_stamp, 2> received{};
  /// The frontend's hooks and completion, from scheduling until it completes.
  infer_hooks hooks;
  std::function<void(status)> done;
  /// What the response's data views when the call ran in a dynamic batch.
  std::shared_ptr<const void> batch_data;
  /// What decoding made beyond the bytes received (an inflated body, tensors decoded from JSON
  /// or gRPC's typed contents), charged to the in-flight budget while the call lives.
  std::optional<byte_budget::charge> made;
  /// The call counts as in flight from its start until it is destroyed.
  std::optional<in_flight_token> in_flight;
  /// A sequence model's call: its sequence's key (sequence_group), and the hold it keeps on the
  /// live sequence (sequence_table::hold) from scheduling until it ran (0: none).
  std::string held_sequence;
  std::uint64_t sequence_hold = 0;
  /// A step of an ensemble: how many ensembles it is nested in (0: a client's request).
  int ensemble_depth = 0;

  infer_call() = default;
  infer_call(const infer_call&) = delete;
  infer_call& operator=(const infer_call&) = delete;
  /// The response's small outputs, their shapes and their list go back to the thread's spares
  /// (spare_blocks.hpp), for the next request's backend (make_output, request_run).
  ~infer_call() {
    for (auto& o : response.outputs) {
      spare_strings::give(o.data.release());
      spare_shapes::give(std::move(o.shape));
    }
    spare_outputs::give(std::move(response.outputs));
  }

  /// Completes the call: its completion and hooks are taken out first (the completion may hold
  /// the call), then the completion is called with `st`. Once only.
  void finish(status st) {
    auto d = std::move(done);
    done = nullptr;
    hooks = {};
    d(std::move(st));
  }
};

/// A new call (of a frontend's type derived from infer_call), its memory from the thread's
/// spare blocks: every request makes one and frees it (spare_blocks.hpp).
template <class Call = infer_call>
std::shared_ptr<Call> make_call() {
  return std::allocate_shared<Call>(spare_allocator<Call>{});
}
using call_ptr = std::shared_ptr<infer_call>;

/// The error of a request whose work threw, to be called in a `catch` block: "failed to
/// allocate memory for the request" (internal) for an allocation failure, else the quoted
/// text of the exception (internal).
status exception_status() noexcept;

/// Runs `f` (returning a status) and turns whatever it throws into its error.
template <class F>
status guarded(F&& f) noexcept {
  try {
    return std::forward<F>(f)();
  } catch (...) {
    return exception_status();
  }
}

/// A request parameter read as unsigned (HTTP carries uint64, gRPC int64 or uint64); 0 when
/// absent or negative.
std::uint64_t unsigned_parameter(const v2::infer_request& r, std::string_view key);

/// The correlation ID of a sequence request (`sequence_id`: uint64, int64 or string): its
/// text, its number (0 for a string) and whether it is a string. `text` stays empty when the
/// request names no sequence.
void read_sequence_id(const v2::infer_request& r, std::string& text, std::uint64_t& number, bool& string_id);

}  // namespace inferwire::server
