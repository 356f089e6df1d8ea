// SPDX-License-Identifier: Apache-2.0
// The one translation unit of the consumer that compiles inferwire (separate compilation).
#if defined(CONSUMER_USES_GRPC)
#include <inferwire/grpc/src.hpp>
#else
#include <inferwire/src.hpp>
#endif
