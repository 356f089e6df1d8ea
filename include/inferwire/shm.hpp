// SPDX-License-Identifier: Apache-2.0
// inferwire/shm.hpp — POSIX shared-memory regions (component shm; CUDA IPC regions are in <inferwire/cuda.hpp>).
#ifndef INFERWIRE_SHM_HPP
#define INFERWIRE_SHM_HPP

#include <inferwire/shm/system_region.hpp>

#endif
