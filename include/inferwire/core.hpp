// SPDX-License-Identifier: Apache-2.0
// inferwire/core.hpp — every header of the core component (no I/O, no dependencies).
#ifndef INFERWIRE_CORE_HPP
#define INFERWIRE_CORE_HPP

#include <inferwire/core/bytes.hpp>
#include <inferwire/core/data_type.hpp>
#include <inferwire/core/error.hpp>
#include <inferwire/core/parameter.hpp>
#include <inferwire/core/shape.hpp>
#include <inferwire/core/tensor_view.hpp>
#include <inferwire/version.hpp>

#endif
