// SPDX-License-Identifier: Apache-2.0
// libFuzzer target: model configuration parsing (config.pbtxt text format) and its
// finalisation into the server's model_config, as a model load does.
#include "model_config.hpp"

#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <string_view>

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  inference::ModelConfig proto;
  if (inferwire::server::parse_config_text(text, proto)) return 0;
  inferwire::server::model_config out;
  static const std::filesystem::path dir = std::filesystem::temp_directory_path();
  (void)inferwire::server::finalize_config(std::move(proto), "model", dir, out);
  return 0;
}
