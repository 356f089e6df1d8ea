// SPDX-License-Identifier: Apache-2.0
// CUDA kernels of the built-in backends (kernels.cu). Plain C++17 so nvcc and the host
// compiler both read it; launches go to `stream` and do not wait.
#pragma once

#include <cstddef>

#include <cuda_runtime_api.h>

namespace inferwire::server::kernels {

enum class element { u8, u16, u32, u64, i8, i16, i32, i64, f32, f64 };

/// sum = a + b, diff = a - b over `count` elements (integers wrap to the element width).
cudaError_t add_sub(element type, const void* a, const void* b, void* sum, void* diff,
                    std::size_t count, cudaStream_t stream);

}  // namespace inferwire::server::kernels
