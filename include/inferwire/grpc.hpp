// SPDX-License-Identifier: Apache-2.0
// inferwire/grpc.hpp — the gRPC client and the conversions between v2 values and the generated messages (component grpc).
#ifndef INFERWIRE_GRPC_HPP
#define INFERWIRE_GRPC_HPP

#include <inferwire/v2.hpp>
#include <inferwire/grpc/client.hpp>
#include <inferwire/grpc/convert.hpp>

#endif
