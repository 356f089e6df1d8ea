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

#include <inferwire/v2/impl/json.hpp>
#include <inferwire/v2/impl/binary.hpp>
#include <inferwire/http/impl/compression.hpp>
#include <inferwire/http/impl/error.hpp>
#include <inferwire/http/impl/client.hpp>

namespace inferwire::http {

template class basic_client<boost::beast::tcp_stream>;
template class basic_client<boost::beast::ssl_stream<boost::beast::tcp_stream>>;

// The blocking forms, once per stream and result type (the exchange itself is a member of
// the class, instantiated above).
#define INFERWIRE_HTTP_INSTANTIATE(S, T)                                                         \
  template T basic_client<S>::run<T>(detail::prepared_call<T>);                                  \
  template T basic_client<S>::run<T>(detail::prepared_call<T>, error_code&);
#define INFERWIRE_HTTP_INSTANTIATE_ALL(S)                                                        \
  INFERWIRE_HTTP_INSTANTIATE(S, bool)                                                            \
  INFERWIRE_HTTP_INSTANTIATE(S, void)                                                            \
  INFERWIRE_HTTP_INSTANTIATE(S, v2::server_metadata)                                             \
  INFERWIRE_HTTP_INSTANTIATE(S, v2::model_metadata)                                              \
  INFERWIRE_HTTP_INSTANTIATE(S, boost::json::value)                                              \
  INFERWIRE_HTTP_INSTANTIATE(S, infer_result)                                                    \
  INFERWIRE_HTTP_INSTANTIATE(S, v2::statistics_response)                                         \
  INFERWIRE_HTTP_INSTANTIATE(S, std::vector<v2::repository_index_entry>)                         \
  INFERWIRE_HTTP_INSTANTIATE(S, std::vector<v2::system_shm_status>)                              \
  INFERWIRE_HTTP_INSTANTIATE(S, std::vector<v2::cuda_shm_status>)                                \
  INFERWIRE_HTTP_INSTANTIATE(S, v2::trace_settings)                                              \
  INFERWIRE_HTTP_INSTANTIATE(S, v2::log_settings)
INFERWIRE_HTTP_INSTANTIATE_ALL(boost::beast::tcp_stream)
INFERWIRE_HTTP_INSTANTIATE_ALL(boost::beast::ssl_stream<boost::beast::tcp_stream>)
#undef INFERWIRE_HTTP_INSTANTIATE_ALL
#undef INFERWIRE_HTTP_INSTANTIATE

}  // namespace inferwire::http

#endif
