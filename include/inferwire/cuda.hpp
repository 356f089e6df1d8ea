// SPDX-License-Identifier: Apache-2.0
// inferwire/cuda.hpp — the CUDA runtime helpers and CUDA IPC shared-memory regions (component cuda).
#ifndef INFERWIRE_CUDA_HPP
#define INFERWIRE_CUDA_HPP

#include <inferwire/cuda/runtime.hpp>
#include <inferwire/shm/cuda_region.hpp>

#endif
