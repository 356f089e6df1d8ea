// Copyright (c) inferwire contributors. SPDX-License-Identifier: Apache-2.0
//
// inferwire/http/route.hpp — matching a v2 request target to an endpoint (v2-protocol §1).
//
// The path (query string excluded) is matched as Triton matches it: against the raw path,
// without percent-decoding, as a full match of the route patterns in their order. A trailing
// slash leaves a path unmatched.

#ifndef INFERWIRE_HTTP_ROUTE_HPP
#define INFERWIRE_HTTP_ROUTE_HPP

#include <string_view>

namespace inferwire::http {

enum class endpoint {
  not_found,
  health_live,       ///< /v2/health/live
  health_ready,      ///< /v2/health/ready
  server_metadata,   ///< /v2
  model_metadata,    ///< /v2/models/<m>[/versions/<v>]
  model_ready,       ///< .../ready
  model_infer,       ///< .../infer
  model_generate,    ///< .../generate
  model_generate_stream,  ///< .../generate_stream
  model_config,      ///< .../config
  model_stats,       ///< .../stats
  model_trace,       ///< .../trace/setting
  all_stats,         ///< /v2/models/stats
  trace,             ///< /v2/trace/setting
  logging,           ///< /v2/logging
  system_shm,        ///< /v2/systemsharedmemory[/region/<r>]/<action>
  cuda_shm,          ///< /v2/cudasharedmemory[/region/<r>]/<action>
  repository_index,  ///< /v2/repository[/<repo>]/index
  repository_load,   ///< /v2/repository[/<repo>]/models/<m>/load
  repository_unload, ///< /v2/repository[/<repo>]/models/<m>/unload
};

/// A matched route: the endpoint and the captured path segments (views into the target).
struct route {
  endpoint kind = endpoint::not_found;
  std::string_view model;       ///< model name (model and repository load/unload routes)
  std::string_view version;     ///< digits, or empty for "latest"
  std::string_view region;      ///< shared-memory region, or empty for "all"
  std::string_view action;      ///< shared memory: status, register or unregister
  std::string_view repository;  ///< repository name segment, or empty
};

/// The path part of a request target (everything before '?').
constexpr std::string_view target_path(std::string_view target) noexcept {
  return target.substr(0, target.find('?'));
}

/// Matches a request target (query string allowed) to a route.
constexpr route match_route(std::string_view target) noexcept;

}  // namespace inferwire::http

#include <inferwire/http/impl/route.hpp>

#endif
