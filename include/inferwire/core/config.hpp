// SPDX-License-Identifier: Apache-2.0
// inferwire/core/config.hpp — how inferwire's non-template functions are compiled.
//
// Header-only (the default): every function is defined inline in the headers; nothing to
// link. Separate compilation, as Beast's BOOST_BEAST_SEPARATE_COMPILATION: define
// INFERWIRE_SEPARATE_COMPILATION for every translation unit of the program (CMake:
// `target_compile_definitions(app PUBLIC INFERWIRE_SEPARATE_COMPILATION)`) and compile
// <inferwire/src.hpp> in exactly one of them. The headers then declare the v2 codec and the
// HTTP client without their bodies (impl/ headers), which src.hpp compiles once, so each
// translation unit that uses the client parses less and instantiates almost nothing.
#ifndef INFERWIRE_CORE_CONFIG_HPP
#define INFERWIRE_CORE_CONFIG_HPP

#if defined(INFERWIRE_SEPARATE_COMPILATION)
#define INFERWIRE_HEADER_ONLY 0
#define INFERWIRE_DECL
#else
#define INFERWIRE_HEADER_ONLY 1
#define INFERWIRE_DECL inline
#endif

// ThreadSanitizer: gRPC orders what a call hands to a completion queue before what comes back
// out of it, inside libraries that TSan cannot see into unless they were built with it (the
// distributions' are not). Defined INFERWIRE_TSAN (scripts/tsan.sh defines it) makes those
// hand-overs known to TSan; otherwise the macros are empty.
#if defined(INFERWIRE_TSAN)
extern "C" void __tsan_acquire(void* addr);
extern "C" void __tsan_release(void* addr);
#define INFERWIRE_HANDED_OVER(p) __tsan_release(static_cast<void*>(p))
#define INFERWIRE_TAKEN_BACK(p) __tsan_acquire(static_cast<void*>(p))
#else
#define INFERWIRE_HANDED_OVER(p) ((void)0)
#define INFERWIRE_TAKEN_BACK(p) ((void)0)
#endif

#endif
