// Copyright (c) inferwire contributors. SPDX-License-Identifier: Apache-2.0
#ifndef INFERWIRE_HTTP_IMPL_ROUTE_HPP
#define INFERWIRE_HTTP_IMPL_ROUTE_HPP

namespace inferwire::http {

namespace detail {

// Consumes `prefix` from the front of `s`.
constexpr bool eat(std::string_view& s, std::string_view prefix) noexcept {
  if (!s.starts_with(prefix)) return false;
  s.remove_prefix(prefix.size());
  return true;
}

// Consumes a non-empty segment ([^/]+) from the front of `s`.
constexpr bool eat_segment(std::string_view& s, std::string_view& out) noexcept {
  std::size_t n = s.find('/');
  if (n == std::string_view::npos) n = s.size();
  if (n == 0) return false;
  out = s.substr(0, n);
  s.remove_prefix(n);
  return true;
}

constexpr bool all_digits(std::string_view s) noexcept {
  if (s.empty()) return false;
  for (char c : s)
    if (c < '0' || c > '9') return false;
  return true;
}

// /v2/models/([^/]+)(?:/versions/([0-9]+))?(?:/(infer|...|trace/setting))?
constexpr route match_model(std::string_view rest) noexcept {
  route r;
  if (!eat_segment(rest, r.model)) return {};
  if (rest.starts_with("/versions/")) {
    std::string_view tail = rest.substr(10);
    std::string_view v;
    if (eat_segment(tail, v) && all_digits(v)) {
      r.version = v;
      rest = tail;
    }
  }
  if (rest.empty()) {
    r.kind = endpoint::model_metadata;
    return r;
  }
  struct action {
    std::string_view name;
    endpoint kind;
  };
  constexpr action actions[] = {
      {"/infer", endpoint::model_infer},         {"/generate", endpoint::model_generate},
      {"/generate_stream", endpoint::model_generate_stream},
      {"/ready", endpoint::model_ready},         {"/config", endpoint::model_config},
      {"/stats", endpoint::model_stats},         {"/trace/setting", endpoint::model_trace},
  };
  for (const auto& a : actions)
    if (rest == a.name) {
      r.kind = a.kind;
      return r;
    }
  return {};
}

// /v2/<prefix>(?:/region/([^/]+))?/(status|register|unregister)
constexpr route match_shm(std::string_view rest, endpoint kind) noexcept {
  route r;
  if (eat(rest, "/region/")) {
    if (!eat_segment(rest, r.region)) return {};
  }
  if (!eat(rest, "/")) return {};
  if (rest != "status" && rest != "register" && rest != "unregister") return {};
  r.action = rest;
  r.kind = kind;
  return r;
}

// /v2/repository(?:/([^/]+))?/(index|models/([^/]+)/(load|unload))
constexpr route match_repository(std::string_view rest) noexcept {
  // The optional repository segment makes the pattern ambiguous for "/index" and
  // "/models/...": try without it first, as the regex engine would.
  auto tail = [](std::string_view s, route r) -> route {
    if (s == "/index") {
      r.kind = endpoint::repository_index;
      return r;
    }
    if (!eat(s, "/models/")) return {};
    if (!eat_segment(s, r.model)) return {};
    if (s == "/load") r.kind = endpoint::repository_load;
    else if (s == "/unload") r.kind = endpoint::repository_unload;
    else return {};
    return r;
  };
  if (route r = tail(rest, {}); r.kind != endpoint::not_found) return r;
  route with_repo;
  if (!eat(rest, "/") || !eat_segment(rest, with_repo.repository)) return {};
  return tail(rest, with_repo);
}

}  // namespace detail

namespace detail {
constexpr route only(endpoint e) noexcept {
  route r;
  r.kind = e;
  return r;
}
}  // namespace detail

constexpr route match_route(std::string_view target) noexcept {
  std::string_view path = target_path(target);
  if (path == "/v2/models/stats") return detail::only(endpoint::all_stats);
  if (path == "/v2/logging") return detail::only(endpoint::logging);
  std::string_view rest = path;
  if (detail::eat(rest, "/v2/models/")) {
    if (route r = detail::match_model(rest); r.kind != endpoint::not_found) return r;
    return {};
  }
  if (path == "/v2") return detail::only(endpoint::server_metadata);
  if (path == "/v2/health/live") return detail::only(endpoint::health_live);
  if (path == "/v2/health/ready") return detail::only(endpoint::health_ready);
  rest = path;
  if (detail::eat(rest, "/v2/systemsharedmemory"))
    return detail::match_shm(rest, endpoint::system_shm);
  rest = path;
  if (detail::eat(rest, "/v2/cudasharedmemory")) return detail::match_shm(rest, endpoint::cuda_shm);
  rest = path;
  if (detail::eat(rest, "/v2/repository")) return detail::match_repository(rest);
  if (path == "/v2/trace/setting") return detail::only(endpoint::trace);
  return {};
}

}  // namespace inferwire::http

#endif
