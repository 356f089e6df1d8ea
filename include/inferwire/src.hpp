// SPDX-License-Identifier: Apache-2.0
// inferwire/src.hpp — the bodies of inferwire's separately compiled parts.
//
// With INFERWIRE_SEPARATE_COMPILATION defined for the whole program (see
// <inferwire/core/config.hpp>), include this header in exactly one translation unit:
//
//   // inferwire.cpp
//   #include <inferwire/src.hpp>
//
// It compiles the v2 codec (JSON and binary tensor framing) and the HTTP client (plain and
// TLS, every call and result type); the other translation units only declare them.
#ifndef INFERWIRE_SRC_HPP
#define INFERWIRE_SRC_HPP

#include <inferwire/core/config.hpp>

#if INFERWIRE_HEADER_ONLY
#error "<inferwire/src.hpp> is for INFERWIRE_SEPARATE_COMPILATION builds; header-only builds need no source file"
#endif

#include <inferwire/http/client.hpp>
#include <inferwire/http/tls_client.hpp>

#include <inferwire/v2/impl/json.hpp>
#include <inferwire/v2/impl/binary.hpp>
#include <inferwire/http/impl/compression.hpp>
#include <inferwire/http/impl/error.hpp>
#include <inferwire/http/impl/client.hpp>

namespace inferwire::http {

template class basic_client<net::ip::tcp::socket>;
template class basic_client<net::ssl::stream<net::ip::tcp::socket>>;

}  // namespace inferwire::http

#endif
