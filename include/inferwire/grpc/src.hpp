// SPDX-License-Identifier: Apache-2.0
// inferwire/grpc/src.hpp — the bodies of the gRPC client, for separately compiled programs.
//
// With INFERWIRE_SEPARATE_COMPILATION defined for the whole program (see
// <inferwire/core/config.hpp>), include this header in exactly one translation unit. It also
// compiles the v2 codec; a program that uses the HTTP client as well includes
// <inferwire/src.hpp> in the same translation unit (the shared bodies are compiled once):
//
//   // inferwire.cpp
//   #include <inferwire/src.hpp>        // HTTP programs
//   #include <inferwire/grpc/src.hpp>   // gRPC programs
//
// The other translation units then see only <inferwire/grpc/client.hpp>'s declarations: no
// generated protobuf or gRPC header.
#ifndef INFERWIRE_GRPC_SRC_HPP
#define INFERWIRE_GRPC_SRC_HPP

#include <inferwire/core/config.hpp>
#if INFERWIRE_HEADER_ONLY
#error "<inferwire/grpc/src.hpp> is for INFERWIRE_SEPARATE_COMPILATION builds; header-only builds need no source file"
#endif

#include <inferwire/grpc/client.hpp>
#include <inferwire/v2/binary.hpp>
#include <inferwire/v2/json.hpp>
#include <inferwire/v2/impl/json.hpp>
#include <inferwire/v2/impl/binary.hpp>
#include <inferwire/grpc/impl/error.hpp>
#include <inferwire/grpc/impl/client.hpp>

#endif
