// SPDX-License-Identifier: Apache-2.0
// inferwire/http.hpp — the HTTP/REST client (plain and TLS), its errors and body compression (component http).
#ifndef INFERWIRE_HTTP_HPP
#define INFERWIRE_HTTP_HPP

#include <inferwire/v2.hpp>
#include <inferwire/http/client.hpp>
#include <inferwire/http/tls_client.hpp>
#include <inferwire/http/compression.hpp>
#include <inferwire/http/error.hpp>

#endif
