// SPDX-License-Identifier: Apache-2.0
// The reference server's view of a model configuration: config.pbtxt parsed with protobuf's
// text format into inference::ModelConfig, normalised as Triton normalises it (v2-protocol
// §2.6), and compiled into the plain structures the request path uses.
#pragma once

#include <inferwire/core/data_type.hpp>
#include <inferwire/core/error.hpp>
#include <inferwire/core/shape.hpp>

#include "model_config.pb.h"

#include <cstdint>
#include <filesystem>
#include <map>
#include <optional>
#include <string>
#include <vector>

namespace inferwire::server {

struct tensor_config {
  std::string name;
  data_type datatype = data_type::invalid;
  shape_t dims;  ///< configured dims, without the batch dimension
  bool optional = false;
  std::vector<std::string> labels;  ///< outputs: lines of label_filename
};

enum class control_kind { start, ready, end, corrid };

/// One sequence-batcher control input (v2-protocol §7): the tensor the server injects.
struct sequence_control {
  control_kind kind = control_kind::start;
  std::string input;
  data_type datatype = data_type::int32;  ///< int32, fp32 or bool (corrid: its data_type)
  double false_value = 0;
  double true_value = 1;
};

struct sequence_config {
  std::vector<sequence_control> controls;
  std::uint64_t max_idle_us = 1'000'000;
  const sequence_control* find(control_kind k) const noexcept {
    for (const auto& c : controls)
      if (c.kind == k) return &c;
    return nullptr;
  }
};

/// A loaded, normalised model configuration.
struct model_config {
  inference::ModelConfig proto;  ///< normalised
  std::string name;
  std::string platform;  ///< platform, or backend when platform is empty
  std::string backend;
  std::int32_t max_batch_size = 0;
  bool decoupled = false;
  int gpu_device = -1;  ///< the GPU of the model's instances (KIND_GPU), or -1 for the CPU
  std::vector<tensor_config> inputs;
  std::vector<tensor_config> outputs;
  std::optional<sequence_config> sequence;
  std::map<std::string, std::string, std::less<>> parameters;  ///< parameters[k].string_value
  std::string json;  ///< the GET .../config body

  bool batching() const noexcept { return max_batch_size > 0; }
  const tensor_config* input(std::string_view n) const noexcept;
  const tensor_config* output(std::string_view n) const noexcept;
  std::size_t required_inputs() const noexcept;
};

/// The largest file a model may read from its folder (config.pbtxt, label files).
inline constexpr std::uint64_t max_model_file_size = std::uint64_t{64} << 20;

/// Reads `relative` from `model_dir` into `out`, only if it is a regular file of at most
/// max_model_file_size bytes whose real path (links resolved) lies inside the real model
/// folder; absolute paths and `..` are refused. False on any refusal or failure, without
/// saying which: callers answer one text for all.
bool read_model_file(const std::filesystem::path& model_dir, std::string_view relative,
                     std::string& out);

/// Parses config.pbtxt text. Errors are `failed to parse model configuration: <detail>`.
status parse_config_text(std::string_view text, inference::ModelConfig& out);

/// Normalises `proto` for model `name` (defaults of v2-protocol §2.6), checks it and compiles
/// it into `out`. `model_dir` is where label files are read from.
status finalize_config(inference::ModelConfig proto, std::string_view name,
                       const std::filesystem::path& model_dir, model_config& out);

/// Reads and finalizes `<model_dir>/config.pbtxt`.
status load_model_config(const std::filesystem::path& model_dir, std::string_view name,
                         model_config& out);

/// The ModelConfig JSON Triton serves: compact, snake_case, every primitive field printed, enum
/// names, selected 64-bit fields as JSON numbers; an all-default config gives "".
std::string config_to_json(const inference::ModelConfig& config);

}  // namespace inferwire::server
