// SPDX-License-Identifier: Apache-2.0
// The one translation unit of the consumer that compiles inferwire (separate compilation).
#include <inferwire/src.hpp>
