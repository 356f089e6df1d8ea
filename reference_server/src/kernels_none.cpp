// SPDX-License-Identifier: Apache-2.0
// Built without nvcc: no kernels, so GPU instances of the simple family cannot run.
#include "kernels.hpp"

namespace inferwire::server::kernels {

cudaError_t add_sub(element, const void*, const void*, void*, void*, std::size_t, cudaStream_t) {
  return cudaErrorNotSupported;
}

}  // namespace inferwire::server::kernels
