// SPDX-License-Identifier: Apache-2.0
// inferwire/version.hpp — the library version.
#ifndef INFERWIRE_VERSION_HPP
#define INFERWIRE_VERSION_HPP

#define INFERWIRE_VERSION_MAJOR 0
#define INFERWIRE_VERSION_MINOR 1
#define INFERWIRE_VERSION_PATCH 0
#define INFERWIRE_VERSION_STRING "0.1.0"

namespace inferwire {
inline constexpr const char* version_string = INFERWIRE_VERSION_STRING;
}

#endif
