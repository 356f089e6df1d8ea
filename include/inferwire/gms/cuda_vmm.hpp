// SPDX-License-Identifier: Apache-2.0
// inferwire/gms/cuda_vmm.hpp — GMS on a GPU through the CUDA virtual memory management API:
// the server's backend (<inferwire/gms/cuda_vmm_backend.hpp>) and the client's mapper
// (<inferwire/gms/cuda_vmm_mapper.hpp>). Include the one a program needs: a server does not
// need the client side, nor a client the server's.
#ifndef INFERWIRE_GMS_CUDA_VMM_HPP
#define INFERWIRE_GMS_CUDA_VMM_HPP

#include <inferwire/gms/cuda_vmm_backend.hpp>
#include <inferwire/gms/cuda_vmm_mapper.hpp>

#endif
