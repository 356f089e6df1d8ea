// SPDX-License-Identifier: Apache-2.0
// inferwire/gms/error.hpp — the one base of every exception the GMS headers throw.
//
//   gms::error
//     connection_error, lock_timeout, server_error   (gms/session.hpp)
//     stale_memory_layout                            (gms/memory_manager.hpp)
//     decode_error                                   (gms/codec.hpp)
//     cuda_vmm_error                                 (gms/cuda_vmm.hpp)
#ifndef INFERWIRE_GMS_ERROR_HPP
#define INFERWIRE_GMS_ERROR_HPP

#include <stdexcept>

namespace inferwire::gms {

class error : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

}  // namespace inferwire::gms

#endif
