// SPDX-License-Identifier: Apache-2.0
// The config fuzz target links the server's model_config.cpp without its GPU support.
#include "gpu.hpp"

namespace inferwire::server {
int gpu_device_count() noexcept { return 0; }
}  // namespace inferwire::server
