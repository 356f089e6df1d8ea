// SPDX-License-Identifier: Apache-2.0
// The v2 endpoints over HTTP (v2-protocol §1): each handler decodes the request, calls the
// service, and encodes what it returns. The rules themselves live in the service; what stays
// here is HTTP's alone (routes and methods, JSON bodies, binary framing, Content-Encoding, the
// binary_data output rule, and the texts upstream's HTTP frontend has and its gRPC one lacks).
#include "http.hpp"

#include "generate.hpp"

#include <inferwire/http/compression.hpp>
#include <inferwire/v2/binary.hpp>
#include <inferwire/v2/detail/header_memo.hpp>
#include <inferwire/v2/fast_request.hpp>
#include <inferwire/v2/json.hpp>

#include <boost/asio/dispatch.hpp>
#include <boost/asio/post.hpp>
#include <boost/beast/core/string.hpp>
#include <boost/json/serialize.hpp>

#include <algorithm>
#include <cctype>
#include <new>
#include <optional>
#include <utility>
#include <vector>

namespace inferwire::server::rest {

using inferwire::http::endpoint;
using inferwire::http::route;

namespace {

// Nesting allowed in control bodies (repository index), far above the infer body's limit but
// low enough that freeing the parsed value cannot exhaust an I/O thread's stack.
constexpr std::size_t control_json_depth = 10000;

template <class T>
status parse_body_as(std::string_view body, T& out, std::size_t max_depth = v2::max_json_depth) {
  status st;
  boost::json::value jv = v2::parse_json(body, st, max_depth);
  if (st) return st;
  try {
    out = boost::json::value_to<T>(jv);
  } catch (const inferwire::error& e) {
    return e.get_status();
  } catch (const std::exception& e) {
    return {errc::invalid_arg, e.what()};
  }
  return {};
}

// The repository index body: the kind of its root object's first `ready` member, found by one
// pass over the bytes with an explicit stack of open brackets, building nothing and recursing
// nowhere. As upstream reads it (RapidJSON, no nesting limit), `{"ready": [[[...true]]]}`
// 250,000 levels deep is an invalid `ready`, not a nesting error (a tree parser would need the
// depth in stack frames). Anything the scan does not take for valid JSON with an object root
// goes to the tree parser, whose errors are upstream's texts.
struct index_body {
  enum class kind : std::uint8_t { absent, boolean, other };
  kind ready = kind::absent;
  bool value = false;
};

bool scan_index_body(std::string_view b, index_body& out) {
  std::size_t i = 0;
  auto ws = [&] {
    while (i < b.size() && (b[i] == ' ' || b[i] == '\t' || b[i] == '\r' || b[i] == '\n')) ++i;
  };
  auto string = [&](std::string_view* text) {  // at '"': past the closing quote
    const std::size_t begin = ++i;
    for (; i < b.size() && b[i] != '"'; ++i)
      if (b[i] == '\\') ++i;
      else if (static_cast<unsigned char>(b[i]) < 0x20) return false;
    if (i >= b.size()) return false;
    if (text) *text = b.substr(begin, i - begin);
    ++i;
    return true;
  };
  auto literal = [&](std::string_view word) {
    if (b.substr(i, word.size()) != word) return false;
    i += word.size();
    return true;
  };
  std::vector<char> open;  // '{' or '[' per level
  bool ready_next = false;
  auto member_key = [&] {  // at an object's key: past its colon
    ws();
    std::string_view key;
    if (i >= b.size() || b[i] != '"' || !string(&key)) return false;
    ws();
    if (i >= b.size() || b[i] != ':') return false;
    ++i;
    ready_next = key == "ready";
    return true;
  };
  ws();
  if (i >= b.size() || b[i] != '{') return false;
  for (bool expect_value = true;;) {
    ws();
    if (i >= b.size()) return false;
    if (expect_value) {
      const char c = b[i];
      const bool first_ready = ready_next && open.size() == 1 && out.ready == index_body::kind::absent;
      ready_next = false;
      if (first_ready) out.ready = (c == 't' || c == 'f') ? index_body::kind::boolean : index_body::kind::other;
      if (c == '{' || c == '[') {
        open.push_back(c);
        ++i;
        ws();
        if (i < b.size() && b[i] == (c == '{' ? '}' : ']')) {  // empty
          open.pop_back();
          ++i;
          expect_value = false;
        } else if (c == '{' && !member_key()) {  // a key, then its value
          return false;
        }
        if (open.empty()) break;
        continue;
      }
      if (c == '"') {
        if (!string(nullptr)) return false;
      } else if (c == 't' || c == 'f') {
        if (!literal(c == 't' ? "true" : "false")) return false;
        if (first_ready) out.value = c == 't';
      } else if (c == 'n') {
        if (!literal("null")) return false;
      } else if (c == '-' || (c >= '0' && c <= '9')) {
        while (i < b.size() && (std::isdigit(static_cast<unsigned char>(b[i])) || b[i] == '-' || b[i] == '+' ||
                                b[i] == '.' || b[i] == 'e' || b[i] == 'E'))
          ++i;
      } else {
        return false;
      }
      expect_value = false;
      continue;
    }
    // After a value: a comma, or the end of its container.
    const char c = b[i++];
    if (c == (open.back() == '{' ? '}' : ']')) {
      open.pop_back();
      if (open.empty()) break;
      continue;
    }
    if (c != ',') return false;
    expect_value = true;
    if (open.back() == '{' && !member_key()) return false;
  }
  ws();
  return i == b.size();
}

// The index body's `ready` into `q`, with upstream's errors.
status read_index_request(std::string_view body, v2::repository_index_request& q) {
  index_body r;
  if (!scan_index_body(body, r)) return parse_body_as(body, q, control_json_depth);
  if (r.ready == index_body::kind::other) return {errc::invalid_arg, "Invalid value for 'ready': expected a boolean"};
  if (r.ready == index_body::kind::boolean) q.ready = r.value;
  return {};
}

// The API category of an endpoint (--http-restricted-api), or none.
std::optional<api_category> category_of(endpoint e) noexcept {
  switch (e) {
    case endpoint::health_live:
    case endpoint::health_ready:
    case endpoint::model_ready: return api_category::health;
    case endpoint::server_metadata:
    case endpoint::model_metadata: return api_category::metadata;
    case endpoint::model_infer:
    case endpoint::model_generate:
    case endpoint::model_generate_stream: return api_category::inference;
    case endpoint::model_config: return api_category::model_config;
    case endpoint::model_stats:
    case endpoint::all_stats: return api_category::statistics;
    case endpoint::model_trace:
    case endpoint::trace: return api_category::trace;
    case endpoint::logging: return api_category::logging;
    case endpoint::repository_index:
    case endpoint::repository_load:
    case endpoint::repository_unload: return api_category::model_repository;
    case endpoint::system_shm:
    case endpoint::cuda_shm: return api_category::shared_memory;
    case endpoint::not_found: break;
  }
  return std::nullopt;
}

template <class T>
reply json_of(const T& value) {
  return json_reply(boost::json::serialize(boost::json::value_from(value)));
}

template <class T>
reply json_array_of(const std::vector<T>& values) {
  boost::json::array out;
  for (const auto& v : values) out.push_back(boost::json::value_from(v));
  return json_reply(boost::json::serialize(out));
}

}  // namespace

reply json_reply(std::string body, unsigned status) {
  reply r;
  r.status = status;
  r.content_type = "application/json";
  // JSON text is UTF-8. Names a URL brings in are refused where they would be kept (model
  // loads, region registrations) and quoted in error texts; should any other byte that is not
  // UTF-8 reach a reply, it becomes U+FFFD rather than make the whole reply unreadable.
  if (!valid_utf8(body)) body = quote_input(body, body.size());
  r.body = std::move(body);
  return r;
}

reply error_reply(unsigned code, std::string_view message) {
  return json_reply(v2::error_body(quote_input(message, max_error_text)), code);
}
reply error_reply(const status& st) {
  return error_reply(static_cast<unsigned>(st.http_status()), st.message());
}
reply empty_reply(unsigned code) {
  reply r;
  r.status = code;
  return r;
}
reply budget_reply(const byte_budget& budget) {
  return error_reply(413, "Request body too large: " + budget.exhausted_text());
}

// --- routing ---------------------------------------------------------------------------------

std::optional<reply> endpoints::handle(http_request&& req, std::shared_ptr<body_buffer> big,
                                       const std::shared_ptr<responder>& out, const receive_times& received) {
  const route r = inferwire::http::match_route(req.target());
  if (big && r.kind != endpoint::model_infer) {
    // Only infer reads its body in place; the other endpoints take it as a string.
    req.body().assign(big->view());
    big.reset();
  }
  if (s_.log.verbose >= 1)
    s_.log.log_verbose(1, "HTTP request: " + std::string(req.method_string()) + " " +
                              std::string(req.target()));
  // A restricted API needs its header before anything else is looked at.
  if (const auto c = category_of(r.kind))
    if (const restriction* rule = s_.opts.http_restricted.find(*c))
      if (auto it = req.find(rule->key); it == req.end() || it->value() != rule->value)
        return error_reply(403, "This API is restricted, expecting header '" + rule->key + "'");
  const auto method = req.method();
  const bool get = method == bhttp::verb::get;  // HEAD: 405, headers only
  const bool post = method == bhttp::verb::post;
  const auto not_allowed = [] { return error_reply(405, "Method Not Allowed"); };
  switch (r.kind) {
    case endpoint::health_live: {
      if (!get) return not_allowed();
      bool live = false;
      if (auto st = svc_.live(live)) return error_reply(st);
      return empty_reply(live ? 200 : 400);
    }
    case endpoint::health_ready:
      if (!get) return not_allowed();
      return empty_reply(svc_.ready() ? 200 : 400);
    case endpoint::server_metadata:
      if (!get) return not_allowed();
      return json_reply(s_.metadata_json);
    case endpoint::model_metadata:
      if (!get) return not_allowed();
      return model_metadata(r);
    case endpoint::model_ready: {
      if (!get) return not_allowed();
      bool ready = false;
      if (auto st = svc_.model_ready(r.model, r.version, ready)) return error_reply(st);
      // Upstream's HTTP frontend answers a model that is not ready with 400 and this text
      // (gRPC answers ready = false).
      if (!ready) return error_reply(400, "Model version not ready");
      return empty_reply(200);
    }
    case endpoint::model_config:
      if (!get) return not_allowed();
      return model_config(r);
    case endpoint::model_stats:
    case endpoint::all_stats:
      if (!get) return not_allowed();
      return statistics(r);
    case endpoint::model_trace:
    case endpoint::trace:
      if (!get && !post) return not_allowed();
      return trace(r, req);
    case endpoint::logging:
      if (!get && !post) return not_allowed();
      return logging(req);
    case endpoint::model_infer:
      if (!post) return not_allowed();
      return infer(r, std::move(req), std::move(big), out, received);
    case endpoint::repository_index:
      if (!post) return not_allowed();
      return repository_index(req);
    case endpoint::repository_load:
    case endpoint::repository_unload:
      if (!post) return not_allowed();
      return repository_control(r, std::move(req), out);
    case endpoint::system_shm:
    case endpoint::cuda_shm:
      if (r.action == "status" ? !get : !post) return not_allowed();
      return shared_memory(r, req.body());
    case endpoint::model_generate:
    case endpoint::model_generate_stream:
      if (!post) return not_allowed();
      return generate(r, std::move(req), r.kind == endpoint::model_generate_stream, out);
    case endpoint::not_found:
      break;
  }
  return error_reply(404, "Not Found");
}

reply endpoints::metrics(const http_request& req) const {
  const std::string_view path = inferwire::http::target_path(req.target());
  if (req.method() != bhttp::verb::get) return error_reply(405, "Method Not Allowed");
  reply r;
  if (path == "/metrics" || path == "/metrics/") {
    r.content_type = "text/plain; charset=utf-8";
    r.body = s_.metrics_text();
  }
  return r;
}

// --- metadata, configuration, statistics -------------------------------------------------------

reply endpoints::model_metadata(const route& r) {
  v2::model_metadata md;
  if (auto st = svc_.model_metadata(r.model, r.version, md)) return error_reply(st);
  return json_of(md);
}

reply endpoints::model_config(const route& r) {
  std::shared_ptr<const server::model_config> c;
  if (auto st = svc_.model_configuration(r.model, r.version, c)) return error_reply(st);
  return json_reply(c->json);
}

reply endpoints::statistics(const route& r) {
  v2::statistics_response out;
  if (auto st = svc_.statistics(r.kind == endpoint::all_stats ? std::string_view() : r.model, r.version, out))
    return error_reply(st);
  return json_of(out);
}

// --- shared memory (v2-protocol §5) ------------------------------------------------------------

reply endpoints::shared_memory(const route& r, std::string_view body) {
  const bool system = r.kind == endpoint::system_shm;
  const auto kind = system ? region_kind::system : region_kind::cuda;
  if (r.action == "status") {
    if (system) {
      std::vector<v2::system_shm_status> v;
      if (auto st = svc_.system_shm_status(r.region, v)) return error_reply(st);
      return json_array_of(v);
    }
    std::vector<v2::cuda_shm_status> v;
    if (auto st = svc_.cuda_shm_status(r.region, v)) return error_reply(st);
    return json_array_of(v);
  }
  if (r.action == "unregister") {
    if (auto st = svc_.unregister_shm(kind, r.region)) return error_reply(st);
    return empty_reply(200);
  }
  // Register. Upstream's HTTP frontend checks the permission, then the region name of the
  // URL, before it parses the body; the name check and its text are HTTP's alone.
  if (auto st = s_.shm.check_allowed()) return error_reply(st);
  if (auto st = shm_registry::require_name(kind, r.region)) return error_reply(st);
  status st;
  if (system) {
    v2::system_shm_register_request q;
    if (auto e = parse_body_as(body, q)) return error_reply(e);
    q.name = r.region;
    st = svc_.register_system_shm(q);
  } else {
    v2::cuda_shm_register_request q;
    if (auto e = parse_body_as(body, q)) return error_reply(e);
    q.name = r.region;
    st = svc_.register_cuda_shm(q);
  }
  if (st) return error_reply(st);
  return empty_reply(200);
}

// --- trace and log settings ----------------------------------------------------------------------

reply endpoints::trace(const route& r, const http_request& req) {
  std::string_view model;
  if (r.kind == endpoint::model_trace) {
    if (!r.version.empty()) return error_reply(404, "Not Found");
    model = r.model;
  }
  v2::trace_settings result;
  std::optional<v2::trace_settings> update;
  if (req.method() == bhttp::verb::post)
    if (auto st = parse_body_as(req.body(), update.emplace())) return error_reply(st);
  if (auto st = svc_.trace_settings(model, update ? &*update : nullptr, result)) return error_reply(st);
  return json_of(result);
}

reply endpoints::logging(const http_request& req) {
  std::optional<v2::log_settings> update;
  if (req.method() == bhttp::verb::post)
    if (auto st = parse_body_as(req.body(), update.emplace())) return error_reply(st);
  v2::log_settings current;
  if (auto st = svc_.log_settings(update ? &*update : nullptr, current)) return error_reply(st);
  return json_of(current);
}

// --- model repository (v2-protocol §6) -----------------------------------------------------------

reply endpoints::repository_index(const http_request& req) {
  v2::repository_index_request q;
  if (!req.body().empty())
    if (auto st = read_index_request(req.body(), q)) return error_reply(st);
  std::vector<v2::repository_index_entry> index;
  // Upstream's HTTP frontend ignores the repository name of the index URL (gRPC refuses one).
  if (auto st = svc_.repository_index("", q.ready.value_or(false), index)) return error_reply(st);
  return json_array_of(index);
}

// Load and unload run on the execution pool: they are synchronous for the client (the reply
// comes when they finished) but never hold an I/O thread. `out` keeps the connection, and with
// it this object, alive until the reply is handed over.
std::optional<reply> endpoints::repository_control(const route& r, http_request&& req,
                                                   const std::shared_ptr<responder>& out) {
  if (auto st = svc_.repository_available(r.repository)) return error_reply(st);
  const v2::codec_limits limits{static_cast<std::size_t>(s_.opts.http_max_input_size)};
  if (auto st = v2::check_json_size(req.body().size(), limits)) return error_reply(st);
  auto shared = std::make_shared<http_request>(std::move(req));
  const bool load = r.kind == endpoint::repository_load;
  net::post(s_.execution, [this, out, shared, load, model = std::string(r.model),
                           repository = std::string(r.repository)] {
    status st;
    const std::string& body = shared->body();
    if (load) {
      v2::repository_load_request q;
      if (!body.empty()) st = parse_body_as(body, q);
      if (!st) st = svc_.repository_load(repository, model, q);
    } else {
      // As upstream: a malformed unload_dependents is ignored (unload without dependents).
      v2::repository_unload_request q;
      if (!body.empty()) {
        boost::json::value jv = v2::parse_json(body, st);
        if (!st) {
          try {
            q = boost::json::value_to<v2::repository_unload_request>(jv);
          } catch (const std::exception&) {
            q = {};
          }
        }
      }
      if (!st) st = svc_.repository_unload(repository, model, q.unload_dependents);
    }
    out->respond(st ? error_reply(st) : empty_reply(200));
  });
  return std::nullopt;
}

}  // namespace inferwire::server::rest
