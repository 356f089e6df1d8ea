// SPDX-License-Identifier: Apache-2.0
// inferwire/v2.hpp — the KServe v2 value types and their JSON and binary codecs.
#ifndef INFERWIRE_V2_HPP
#define INFERWIRE_V2_HPP

#include <inferwire/core.hpp>
#include <inferwire/v2/binary.hpp>
#include <inferwire/v2/json.hpp>
#include <inferwire/v2/tensor.hpp>
#include <inferwire/v2/types.hpp>

#endif
