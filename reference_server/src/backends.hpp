// SPDX-License-Identifier: Apache-2.0
// Built-in backends of the reference server. A model's `backend` field names one of them:
//   simple            OUTPUT0 = INPUT0 + INPUT1, OUTPUT1 = INPUT0 - INPUT1 (any numeric type;
//                     integer arithmetic wraps to the element width)
//   simple_string     the same on BYTES elements holding decimal integers
//   identity          OUTPUT<i> = INPUT<i>, any data type (FP16, BF16, BOOL, BYTES included)
//   sequence          OUTPUT = (INPUT + START) * READY
//   dyna_sequence     OUTPUT = (INPUT + START + END * CORRID) * READY
//   accumulator       per-sequence running sum (END also adds the numeric correlation ID)
//   repeat            decoupled: for each IN[i], waits DELAY[i] ms and responds OUT = IN[i],
//                     IDX = i (no response for an empty IN)
// Every backend honours the config parameter `execute_delay_ms` (an artificial delay).
// `simple` and `identity` models whose instances are on a GPU (instance_group KIND_GPU) run
// there: CUDA kernels read inputs from and write outputs to device memory directly, CUDA
// shared-memory regions included; tensors elsewhere are staged with copies.
#pragma once

#include "model_config.hpp"
#include "shm_registry.hpp"

#include <inferwire/v2/types.hpp>

#include <chrono>
#include <filesystem>
#include <functional>
#include <memory>
#include <span>
#include <string>
#include <vector>

namespace inferwire::server {

struct trace_record;
struct infer_call;

/// State a sequence keeps between its requests.
struct sequence_state {
  std::int64_t accumulator = 0;
  bool started = false;
};

/// One execution: the validated request inputs plus the injected control tensors.
struct execution {
  const model_config& config;
  std::span<const v2::infer_input> inputs;
  std::int64_t batch_size = 1;        ///< 1 for models without batching
  sequence_state* sequence = nullptr; ///< the sequence's state (sequence models)
  std::string correlation_id;         ///< the sequence's correlation ID as text
  /// An `oldest` sequence batch: each row's sequence and correlation ID (empty otherwise).
  std::span<sequence_state* const> row_sequences;
  std::span<const std::string> row_correlation_ids;
  std::vector<v2::infer_output> outputs;  ///< every model output, full shapes
  /// Where inputs[i]'s bytes are when they are device memory (parallel to `inputs`, may be
  /// shorter; host inputs have data == nullptr here). Only GPU backends see device inputs.
  std::span<const placement> input_places;
  /// Shared-memory destinations of outputs, by name. A backend may write an output straight
  /// into its destination; the output's data then views the destination.
  std::span<const std::pair<std::string, placement>> output_places;
  /// The request's trace record when it is traced (ensembles trace their steps under it).
  trace_record* trace = nullptr;
  /// Decoupled models: sends one response made of `outputs` (set by the frontend).
  std::function<status(std::vector<v2::infer_output>&&)> respond;
  /// True once the request's client gave up (null: never known). Backends that wait (a
  /// configured delay, repeat's DELAY) look at it while they wait, through pause().
  const std::function<bool()>* cancelled = nullptr;
  /// The request as the client sent it (id, parameters, requested outputs); null for a batch
  /// concatenated over the batch dimension.
  const v2::infer_request* request = nullptr;
  /// How the backend split its time, when it reported it (a TRITONBACKEND library does):
  /// the request's compute input, infer and output durations in the statistics.
  struct reported_split {
    bool set = false;
    std::uint64_t input_ns = 0, infer_ns = 0, output_ns = 0;
  } split;

  const v2::infer_input* input(std::string_view name) const noexcept {
    for (const auto& i : inputs)
      if (i.name == name) return &i;
    return nullptr;
  }
  /// The device placement of an input of `inputs`, or a host placement of its data.
  placement place_of(const v2::infer_input& in) const noexcept {
    const auto i = static_cast<std::size_t>(&in - inputs.data());
    if (i < input_places.size() && input_places[i].data) return input_places[i];
    return {const_cast<std::byte*>(in.data.bytes().data()), in.data.size(), -1};
  }
  const placement* output_place(std::string_view name) const noexcept {
    for (const auto& [n, p] : output_places)
      if (n == name) return &p;
    return nullptr;
  }
};

class backend {
 public:
  virtual ~backend() = default;
  /// Computes every output of the model into `e.outputs`. Outputs may view the inputs' data
  /// (which outlives the response).
  virtual status execute(execution& e) = 0;
  /// True for backends that run on the model's GPU and read device inputs themselves; the
  /// others get device inputs copied to host memory first.
  virtual bool on_gpu() const noexcept { return false; }

  /// Whether a small request may run now on the thread that received it (a network thread)
  /// rather than on the execution pool. The built-in backends always may; a backend library
  /// may once its recent executions were short.
  virtual bool runs_quickly() const noexcept { return true; }
  /// True for backends whose execution does not grow with the size of the inputs in host
  /// memory (identity: outputs view the inputs). Their requests run on the receiving thread at
  /// any size: handing a large one to the execution pool cost more than the execution (a
  /// 1 MiB identity call over gRPC spent about a fifth of its CPU switching threads).
  virtual bool size_free() const noexcept { return false; }

  /// True for backends that schedule their calls themselves (ensembles: each step goes to its
  /// model's scheduler); the gate hands them every call through start().
  virtual bool schedules_itself() const noexcept { return false; }
  /// Takes `call` (an admitted call of this backend's model) and completes it, now or later.
  virtual void start(const std::shared_ptr<infer_call>& call) const { (void)call; }

  /// True for backends that take a batch as a list of requests (Triton's backend API) rather
  /// than one execution over concatenated inputs. They get execute_list() for batches.
  virtual bool takes_request_lists() const noexcept { return false; }
  /// Runs the requests of one batch, each with its own execution (inputs, sequence controls,
  /// responder); results[i] is requests[i]'s verdict, and its outputs go in its `outputs`.
  virtual void execute_list(std::span<execution* const> requests, std::span<status> results) {
    for (std::size_t i = 0; i < requests.size(); ++i) results[i] = execute(*requests[i]);
  }
};

/// Where a model version's files are, for backends that read them.
struct model_location {
  std::filesystem::path dir;  ///< the model's folder
  std::int64_t version = 0;
  bool from_request_files = false;  ///< the folder was written from a load request's `file:` parameters
};

/// The status of a request whose client gave up (before it ran, while its model waited, or
/// while a decoupled model still had responses to send).
inline status cancelled_status() { return {errc::cancelled, "the client cancelled the request"}; }

/// Waits `d` on behalf of `e`'s request, or less: the wait ends early when the request's client
/// gives up or interrupt_waits() was called. Returns why it ended early, else no error.
status pause(const execution& e, std::chrono::milliseconds d);

/// Ends every wait of pause(), running or to come, for the rest of the process: the server's
/// exit timeout expired, and executions must end so that the server can.
void interrupt_waits() noexcept;
/// Whether interrupt_waits() was called: other waits on behalf of a request (a streamed reply
/// waiting for its client) end too.
bool waits_are_interrupted() noexcept;

/// Executions running now, all models: the exit's last watch (main.cpp) ends the process only
/// while one still runs. An execution counts while the object lives.
class execution_count {
 public:
  execution_count() noexcept;
  ~execution_count();
  execution_count(const execution_count&) = delete;
  execution_count& operator=(const execution_count&) = delete;
  static std::int64_t running() noexcept;
};

/// The backend `config.backend` names: a registered one first, then a backend library found
/// for the model (set_library_loader), else a built-in one. Unknown names fail with Triton's
/// text.
std::unique_ptr<backend> make_backend(const model_config& config, const model_location& where, status& st);

/// Loads the backend library of a model: null with `found` false when there is none for it
/// (a built-in backend may then serve the model), null with `st` set when it failed.
using library_loader = std::function<std::unique_ptr<backend>(const model_config& config, const model_location& where,
                                                              status& st, bool& found)>;
/// Makes `load` the process's way to backend libraries (the server sets it once at start).
void set_library_loader(library_loader load);

/// Makes a backend for a model's configuration; null with `st` set when it cannot.
using backend_factory = std::function<std::unique_ptr<backend>(const model_config& config, status& st)>;
/// Makes `name` a backend of this process, ahead of a built-in one of the same name, for the
/// models loaded from now on (a host of other backends, a test's own). Thread-safe.
void register_backend(std::string name, backend_factory make);

/// The names of the built-in backends.
std::span<const std::string_view> builtin_backends() noexcept;

}  // namespace inferwire::server
