// Built-in backends of the reference server. A model's `backend` field names one of them:
//   simple            OUTPUT0 = INPUT0 + INPUT1, OUTPUT1 = INPUT0 - INPUT1 (any numeric type;
//                     integer arithmetic wraps to the element width)
//   simple_string     the same on BYTES elements holding decimal integers
//   identity          OUTPUT<i> = INPUT<i>, any data type (FP16, BF16, BOOL, BYTES included)
//   sequence          OUTPUT = (INPUT + START) * READY
//   dyna_sequence     OUTPUT = (INPUT + START + END * CORRID) * READY
//   accumulator       per-sequence running sum (END also adds the numeric correlation ID)
// Every backend honours the config parameter `execute_delay_ms` (an artificial delay).
#pragma once

#include "model_config.hpp"

#include <inferwire/v2/types.hpp>

#include <memory>
#include <span>
#include <string>
#include <vector>

namespace inferwire::server {

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
  std::vector<v2::infer_output> outputs;  ///< every model output, full shapes

  const v2::infer_input* input(std::string_view name) const noexcept {
    for (const auto& i : inputs)
      if (i.name == name) return &i;
    return nullptr;
  }
};

class backend {
 public:
  virtual ~backend() = default;
  /// Computes every output of the model into `e.outputs`. Outputs may view the inputs' data
  /// (which outlives the response).
  virtual status execute(execution& e) = 0;
};

/// The backend `config.backend` names. Unknown names fail with Triton's text.
std::unique_ptr<backend> make_backend(const model_config& config, status& st);

/// The names of the built-in backends.
std::span<const std::string_view> builtin_backends() noexcept;

}  // namespace inferwire::server
