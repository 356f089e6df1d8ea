// SPDX-License-Identifier: Apache-2.0
// inferwire/http/impl/client.hpp — bodies of client.hpp.
#ifndef INFERWIRE_HTTP_IMPL_CLIENT_HPP
#define INFERWIRE_HTTP_IMPL_CLIENT_HPP

// The reply reader, the connection pool and the two exchanges are in impl/reply_reader.hpp,
// impl/connection_pool.hpp, impl/async_exchange.hpp and impl/blocking_exchange.hpp; here are
// the requests, basic_client and the endpoints.

#include <inferwire/http/impl/async_exchange.hpp>
#include <inferwire/http/impl/blocking_exchange.hpp>

#include <boost/asio/compose.hpp>
#include <boost/asio/dispatch.hpp>
#include <boost/asio/executor_work_guard.hpp>
#include <boost/json/serialize.hpp>
#include <boost/json/value_from.hpp>
#include <boost/url/encode.hpp>
#include <boost/url/grammar/lut_chars.hpp>
#include <boost/url/rfc/pchars.hpp>

#include <condition_variable>
#include <mutex>

namespace inferwire::http {
namespace detail {

// ---------------------------------------------------------------------------------------------
// Building requests.

// A path segment or query part: characters a path segment may carry pass as they are.
// What a path segment or query part keeps as it is.
inline constexpr auto segment_chars = boost::urls::pchars - boost::urls::grammar::lut_chars("&=+");

/// Appends `s` percent-encoded as a path segment, without a temporary string.
INFERWIRE_DECL void append_segment(std::string& out, std::string_view s) {
  const std::size_t n = boost::urls::encoded_size(s, segment_chars);
  const std::size_t at = out.size();
  out.resize(at + n);
  boost::urls::encode(out.data() + at, n, s, segment_chars);
}

INFERWIRE_DECL std::string encode_segment(std::string_view s) {
  std::string out;
  append_segment(out, s);
  return out;
}

/// "/v2/models/<name>[/versions/<version>]<suffix>", built in one string.
INFERWIRE_DECL std::string model_path(const model_id& m, std::string_view suffix = {}) {
  std::string t;
  t.reserve(32 + m.name.size() + m.version.size() + suffix.size());
  t += "/v2/models/";
  append_segment(t, m.name);
  if (!m.version.empty()) {
    t += "/versions/";
    append_segment(t, m.version);
  }
  t += suffix;
  return t;
}

INFERWIRE_DECL bool valid_field(std::string_view s) {
  return s.find_first_of("\r\n") == std::string_view::npos;
}

// Starts a call: the request line, the fields every request carries, the caller's fields.
template <class Stream>
call_ptr begin_call(const client_state<Stream>& st, std::string_view method,
                                      std::string target, const call_options& o) {
  auto c = call_ptr(new call_data());
  c->timeout = o.timeout;
  c->request_coding = o.request_compression.value_or(st.options.request_compression);
  c->response_coding = o.response_compression.value_or(st.options.response_compression);
  if (!o.query.empty()) {
    char sep = '?';
    for (const auto& [k, v] : o.query) {
      target += sep;
      target += encode_segment(k);
      target += '=';
      target += encode_segment(v);
      sep = '&';
    }
  }
  auto& h = c->head;
  h.reserve(160 + target.size());
  h.append(method).append(" ").append(target).append(" HTTP/1.1\r\nHost: ");
  h.append(st.host_field).append("\r\n");
  if (*c->response_coding != content_coding::identity)
    h.append("Accept-Encoding: ").append(coding_name(*c->response_coding)).append("\r\n");
  for (const auto* list : {&st.options.headers, &o.headers})
    for (const auto& [k, v] : *list) {
      if (!valid_field(k) || !valid_field(v) || k.empty()) {
        c->error = net::error::invalid_argument;
        continue;
      }
      h.append(k).append(": ").append(v).append("\r\n");
    }
  return c;
}

// Finishes a call's header with the body's fields (compressing it when asked) and builds the
// buffer list. `header_length` is the Inference-Header-Content-Length of infer bodies.
INFERWIRE_DECL void end_call(call_data& c, std::string_view content_type,
                     std::optional<std::size_t> header_length = std::nullopt) {
  bool has_body = c.use_infer_body || !c.owned_body.empty();
  if (has_body && c.request_coding && *c.request_coding != content_coding::identity) {
    std::string compressed;
    if (c.use_infer_body) {
      std::vector<std::string_view> parts;
      parts.reserve(1 + c.infer_body.segments.size());
      parts.push_back(c.infer_body.header);
      for (auto s : c.infer_body.segments)
        parts.emplace_back(reinterpret_cast<const char*>(s.data()), s.size());
      compress(parts, *c.request_coding, compressed);
    } else {
      compress(c.owned_body, *c.request_coding, compressed);
    }
    c.owned_body = std::move(compressed);
    c.use_infer_body = false;
    c.infer_body = {};
    c.head.append("Content-Encoding: ").append(coding_name(*c.request_coding)).append("\r\n");
  }
  if (has_body && !content_type.empty())
    c.head.append("Content-Type: ").append(content_type).append("\r\n");
  if (header_length)
    c.head.append(v2::header_length_field).append(": ").append(std::to_string(*header_length))
        .append("\r\n");
  c.head.append("Content-Length: ").append(std::to_string(c.body_size())).append("\r\n\r\n");
  c.make_buffers();
}

template <class Stream>
call_ptr get_call(const client_state<Stream>& st, std::string target,
                                    const call_options& o) {
  auto c = begin_call(st, "GET", std::move(target), o);
  end_call(*c, {});
  return c;
}

template <class Stream>
call_ptr post_call(const client_state<Stream>& st, std::string target,
                                     std::string json, const call_options& o) {
  auto c = begin_call(st, "POST", std::move(target), o);
  c->owned_body = std::move(json);
  end_call(*c, "application/json");
  return c;
}

INFERWIRE_DECL std::string to_body(const boost::json::value& v) { return boost::json::serialize(v); }

}  // namespace detail

// ---------------------------------------------------------------------------------------------
// basic_client

namespace detail {
template <class Stream>
std::shared_ptr<client_state<Stream>> make_state(std::optional<net::any_io_executor> ex,
                                                 net::ssl::context* ssl,
                                                 std::string host, std::string port,
                                                 client_options opts) {
  auto s = std::make_shared<client_state<Stream>>();
  s->lazy_executor = !ex;
  if (ex) s->executor_ = std::move(*ex);
  s->ssl = ssl;
  bool default_port = (!ssl && port == "80") || (ssl && port == "443");
  bool ipv6 = host.find(':') != std::string::npos;
  s->host_field = ipv6 ? "[" + host + "]" : host;
  if (!default_port) s->host_field += ":" + port;
  s->host = std::move(host);
  s->port = std::move(port);
  s->options = std::move(opts);
  return s;
}
}  // namespace detail

template <class Stream>
basic_client<Stream>::basic_client(executor_type ex, std::string host, std::string port,
                                   client_options opts)
  requires(!detail::transport<Stream>::tls)
    : state_(detail::make_state<Stream>(std::move(ex), nullptr, std::move(host), std::move(port),
                                        std::move(opts))) {}

template <class Stream>
basic_client<Stream>::basic_client(std::string host, std::string port, client_options opts)
  requires(!detail::transport<Stream>::tls)
    : state_(detail::make_state<Stream>(std::nullopt, nullptr, std::move(host), std::move(port),
                                        std::move(opts))) {}

template <class Stream>
basic_client<Stream>::basic_client(executor_type ex, net::ssl::context& ssl, std::string host,
                                   std::string port, client_options opts)
  requires(detail::transport<Stream>::tls)
    : state_(detail::make_state<Stream>(std::move(ex), &ssl, std::move(host), std::move(port),
                                        std::move(opts))) {}

template <class Stream>
basic_client<Stream>::basic_client(net::ssl::context& ssl, std::string host, std::string port,
                                   client_options opts)
  requires(detail::transport<Stream>::tls)
    : state_(detail::make_state<Stream>(std::nullopt, &ssl, std::move(host), std::move(port),
                                        std::move(opts))) {}

template <class Stream>
basic_client<Stream>::~basic_client() {
  if (!state_) return;  // moved from
  close();
  if (state_->drain_own) {
    // The private io_context, once made: the closed connections' handlers finish, then it goes
    // after the state (operations it still holds keep the state until it does).
    state_->drain_own(*state_->own_ioc);
    auto own = std::move(state_->own);
    state_.reset();
  }
}

template <class Stream>
auto basic_client<Stream>::get_executor() const noexcept -> executor_type {
  return state_->executor();
}

template <class Stream>
const client_options& basic_client<Stream>::options() const noexcept {
  return state_->options;
}

template <class Stream>
void basic_client<Stream>::close() {
  state_->close_idle();
}

template <class Stream>
std::size_t basic_client<Stream>::open_connections() const {
  std::lock_guard lock(state_->mutex);
  std::size_t n = 0;
  for (const auto& c : state_->all) n += c->open ? 1 : 0;
  return n;
}

namespace detail {
// The handler of the exchange. The exchange's operations run on the client's executor (Asio
// 1.26's any_completion_executor cannot be required to be non-blocking, as Beast's operations
// require of a handler's executor); the caller's cancellation slot is forwarded, and the reply
// is dispatched to the call on the call's own executor.
template <class Handler>
struct erased_completion {
  Handler handler;
  net::any_io_executor executor;

  using executor_type = net::any_io_executor;
  executor_type get_executor() const noexcept { return executor; }
  using cancellation_slot_type = net::associated_cancellation_slot_t<Handler>;
  cancellation_slot_type get_cancellation_slot() const noexcept {
    return net::get_associated_cancellation_slot(handler);
  }

  void operator()(error_code ec, reply r) {
    auto target = net::get_associated_executor(handler, executor);
    net::dispatch(target, [h = std::move(handler), ec, r = std::move(r)]() mutable {
      std::move(h)(ec, std::move(r));
    });
  }
};
}  // namespace detail

template <class Stream>
void basic_client<Stream>::exchange(
    std::shared_ptr<state_type> state, detail::call_ptr call,
    net::any_completion_handler<void(error_code, detail::reply)> handler) {
  auto ex = state->executor();
  detail::erased_completion<decltype(handler)> completion{std::move(handler), ex};
  net::async_compose<decltype(completion), void(error_code, detail::reply)>(
      detail::exchange_op<Stream>(std::move(state), std::move(call)), completion, ex);
}

namespace detail {
// A blocking call's completion: the reply handed to the waiting caller.
struct blocking_wait {
  std::mutex& mutex;
  std::condition_variable& cv;
  error_code ec;
  reply r;
  bool done = false;
};
struct blocking_handler {
  blocking_wait* wait;
  void operator()(error_code ec, reply r) const {
    std::lock_guard lock(wait->mutex);
    wait->ec = ec;
    wait->r = std::move(r);
    wait->done = true;
    wait->cv.notify_all();
  }
};
}  // namespace detail

template <class Stream>
detail::reply basic_client<Stream>::exchange_blocking(detail::call_ptr call, error_code& ec) {
  auto& st = *state_;
  // The executor is run by the caller's threads; this thread must not be one of them (a
  // connection it waits for may be held by a call only that thread can finish).
  if (!st.lazy_executor && st.executor_.template target<net::io_context::executor_type>() &&
      st.executor_.template target<net::io_context::executor_type>()->running_in_this_thread()) {
    ec = client_errc::sync_on_own_executor;
    return {};
  }
  if constexpr (!detail::transport<Stream>::tls) {
    return detail::blocking_exchange(st, *call, ec);
  } else {
    // TLS: the asynchronous exchange, waited for.
    detail::blocking_wait wait{st.drive_mutex, st.drive_cv, {}, {}, false};
    net::any_completion_handler<void(error_code, detail::reply)> handler(
        detail::blocking_handler{&wait});
    if (st.lazy_executor) (void)st.executor();  // makes own_ioc
    if (!st.own_ioc) {
      exchange(state_, std::move(call), std::move(handler));
      std::unique_lock lock(st.drive_mutex);
      st.drive_cv.wait(lock, [&] { return wait.done; });
    } else {
      // Leader/follower over the private io_context: whoever runs it completes everyone's
      // calls.
      auto guard = net::make_work_guard(*st.own_ioc);
      exchange(state_, std::move(call), std::move(handler));
      std::unique_lock lock(st.drive_mutex);
      while (!wait.done) {
        if (st.leading) {
          st.drive_cv.wait(lock);
          continue;
        }
        st.leading = true;
        lock.unlock();
        if (st.own_ioc->stopped()) st.own_ioc->restart();
        st.own_ioc->run_one();
        lock.lock();
        st.leading = false;
        st.drive_cv.notify_all();
      }
    }
    ec = wait.ec;
    return std::move(wait.r);
  }
}

// ---------------------------------------------------------------------------------------------
// The endpoints.

template <class Stream>
auto basic_client<Stream>::prepare_server_live(const call_options& o) -> prepared<bool> {
  return {detail::get_call(*state_, "/v2/health/live", o), &detail::parse_health};
}

template <class Stream>
auto basic_client<Stream>::prepare_server_ready(const call_options& o) -> prepared<bool> {
  return {detail::get_call(*state_, "/v2/health/ready", o), &detail::parse_health};
}

template <class Stream>
auto basic_client<Stream>::prepare_model_ready(model_id m, const call_options& o)
    -> prepared<bool> {
  return {detail::get_call(*state_, detail::model_path(m, "/ready"), o), &detail::parse_health};
}

template <class Stream>
auto basic_client<Stream>::prepare_server_metadata(const call_options& o)
    -> prepared<v2::server_metadata> {
  return {detail::get_call(*state_, "/v2", o), &detail::parse_json_as<v2::server_metadata>};
}

template <class Stream>
auto basic_client<Stream>::prepare_model_metadata(model_id m, const call_options& o)
    -> prepared<v2::model_metadata> {
  return {detail::get_call(*state_, detail::model_path(m), o),
          &detail::parse_json_as<v2::model_metadata>};
}

template <class Stream>
auto basic_client<Stream>::prepare_model_config(model_id m, const call_options& o)
    -> prepared<boost::json::value> {
  return {detail::get_call(*state_, detail::model_path(m, "/config"), o),
          &detail::parse_json_as<boost::json::value>};
}

template <class Stream>
auto basic_client<Stream>::prepare_infer(model_id m, const v2::infer_request& request,
                                         const call_options& o) -> prepared<infer_result> {
  auto c = detail::begin_call(*state_, "POST", detail::model_path(m, "/infer"), o);
  c->use_infer_body = true;
  // Like Triton's clients: with no outputs listed, every output comes back binary.
  status st;
  if (request.outputs.empty() && !request.raw_binary &&
      !request.parameters.contains("binary_data_output")) {
    if (request.parameters.empty()) {
      static const parameter_map only_binary{{"binary_data_output", true}};
      st = v2::encode_infer_request(request, only_binary, c->infer_body);
    } else {
      parameter_map parameters = request.parameters;
      parameters.set("binary_data_output", true);
      st = v2::encode_infer_request(request, parameters, c->infer_body);
    }
  } else {
    st = v2::encode_infer_request(request, c->infer_body);
  }
  if (st) c->error = net::error::invalid_argument;
  if (request.raw_binary)
    detail::end_call(*c, "application/octet-stream", 0);
  else if (c->infer_body.has_binary_data())
    detail::end_call(*c, "application/octet-stream", c->infer_body.header_length());
  else
    detail::end_call(*c, "application/json");
  return {std::move(c), &detail::parse_infer};
}

template <class Stream>
auto basic_client<Stream>::prepare_model_statistics(model_id m, const call_options& o)
    -> prepared<v2::statistics_response> {
  std::string target = m.name.empty() ? "/v2/models/stats" : detail::model_path(m, "/stats");
  return {detail::get_call(*state_, std::move(target), o),
          &detail::parse_json_as<v2::statistics_response>};
}

template <class Stream>
auto basic_client<Stream>::prepare_generate(model_id m, const boost::json::object& request, const call_options& o)
    -> prepared<boost::json::object> {
  return {detail::post_call(*state_, detail::model_path(m, "/generate"), boost::json::serialize(request), o),
          &detail::parse_json_as<boost::json::object>};
}

template <class Stream>
auto basic_client<Stream>::prepare_generate_stream(model_id m, const boost::json::object& request,
                                                   const call_options& o) -> prepared<std::vector<boost::json::object>> {
  auto c = detail::post_call(*state_, detail::model_path(m, "/generate_stream"), boost::json::serialize(request), o);
  c->collect_events = true;  // parsed as they arrive: the stream's raw body is never kept
  return {std::move(c), &detail::parse_generate_events};
}

template <class Stream>
auto basic_client<Stream>::prepare_generate_stream(model_id m, const boost::json::object& request,
                                                   std::function<void(boost::json::object&&)> on_event,
                                                   const call_options& o) -> prepared<void> {
  auto c = detail::post_call(*state_, detail::model_path(m, "/generate_stream"), boost::json::serialize(request), o);
  c->body_sink = detail::sse_splitter(std::move(on_event), state_->options.max_response_size);
  return {std::move(c), &detail::parse_empty};
}

template <class Stream>
auto basic_client<Stream>::prepare_repository_index(const v2::repository_index_request& r,
                                                    const call_options& o)
    -> prepared<std::vector<v2::repository_index_entry>> {
  return {detail::post_call(*state_, "/v2/repository/index",
                            detail::to_body(boost::json::value_from(r)), o),
          &detail::parse_json_as<std::vector<v2::repository_index_entry>>};
}

template <class Stream>
auto basic_client<Stream>::prepare_load_model(std::string_view model,
                                              const v2::repository_load_request& r,
                                              const call_options& o) -> prepared<void> {
  return {detail::post_call(*state_,
                            "/v2/repository/models/" + detail::encode_segment(model) + "/load",
                            detail::to_body(boost::json::value_from(r)), o),
          &detail::parse_empty};
}

template <class Stream>
auto basic_client<Stream>::prepare_unload_model(std::string_view model,
                                                const v2::repository_unload_request& r,
                                                const call_options& o) -> prepared<void> {
  return {detail::post_call(*state_,
                            "/v2/repository/models/" + detail::encode_segment(model) + "/unload",
                            detail::to_body(boost::json::value_from(r)), o),
          &detail::parse_empty};
}

namespace detail {
INFERWIRE_DECL std::string shm_target(std::string_view kind, std::string_view region,
                              std::string_view action) {
  std::string t = "/v2/";
  t += kind;
  if (!region.empty()) t += "/region/" + encode_segment(region);
  t += '/';
  t += action;
  return t;
}
}  // namespace detail

template <class Stream>
auto basic_client<Stream>::prepare_register_system_shared_memory(
    const v2::system_shm_register_request& r, const call_options& o) -> prepared<void> {
  auto c = detail::post_call(*state_, detail::shm_target("systemsharedmemory", r.name, "register"),
                             detail::to_body(boost::json::value_from(r)), o);
  if (r.name.empty()) c->error = net::error::invalid_argument;
  return {std::move(c), &detail::parse_empty};
}

template <class Stream>
auto basic_client<Stream>::prepare_system_shared_memory_status(std::string_view region,
                                                               const call_options& o)
    -> prepared<std::vector<v2::system_shm_status>> {
  return {detail::get_call(*state_, detail::shm_target("systemsharedmemory", region, "status"), o),
          &detail::parse_json_as<std::vector<v2::system_shm_status>>};
}

template <class Stream>
auto basic_client<Stream>::prepare_unregister_system_shared_memory(std::string_view region,
                                                                   const call_options& o)
    -> prepared<void> {
  return {detail::post_call(*state_,
                            detail::shm_target("systemsharedmemory", region, "unregister"), {}, o),
          &detail::parse_empty};
}

template <class Stream>
auto basic_client<Stream>::prepare_register_cuda_shared_memory(
    const v2::cuda_shm_register_request& r, const call_options& o) -> prepared<void> {
  auto c = detail::post_call(*state_, detail::shm_target("cudasharedmemory", r.name, "register"),
                             detail::to_body(boost::json::value_from(r)), o);
  if (r.name.empty()) c->error = net::error::invalid_argument;
  return {std::move(c), &detail::parse_empty};
}

template <class Stream>
auto basic_client<Stream>::prepare_cuda_shared_memory_status(std::string_view region,
                                                             const call_options& o)
    -> prepared<std::vector<v2::cuda_shm_status>> {
  return {detail::get_call(*state_, detail::shm_target("cudasharedmemory", region, "status"), o),
          &detail::parse_json_as<std::vector<v2::cuda_shm_status>>};
}

template <class Stream>
auto basic_client<Stream>::prepare_unregister_cuda_shared_memory(std::string_view region,
                                                                 const call_options& o)
    -> prepared<void> {
  return {detail::post_call(*state_, detail::shm_target("cudasharedmemory", region, "unregister"),
                            {}, o),
          &detail::parse_empty};
}

namespace detail {
INFERWIRE_DECL std::string trace_target(std::string_view model) {
  if (model.empty()) return "/v2/trace/setting";
  return "/v2/models/" + encode_segment(model) + "/trace/setting";
}
}  // namespace detail

template <class Stream>
auto basic_client<Stream>::prepare_trace_settings(std::string_view model, const call_options& o)
    -> prepared<v2::trace_settings> {
  return {detail::get_call(*state_, detail::trace_target(model), o),
          &detail::parse_json_as<v2::trace_settings>};
}

template <class Stream>
auto basic_client<Stream>::prepare_update_trace_settings(const v2::trace_settings& update,
                                                         std::string_view model,
                                                         const call_options& o)
    -> prepared<v2::trace_settings> {
  return {detail::post_call(*state_, detail::trace_target(model),
                            detail::to_body(boost::json::value_from(update)), o),
          &detail::parse_json_as<v2::trace_settings>};
}

template <class Stream>
auto basic_client<Stream>::prepare_log_settings(const call_options& o)
    -> prepared<v2::log_settings> {
  return {detail::get_call(*state_, "/v2/logging", o), &detail::parse_json_as<v2::log_settings>};
}

template <class Stream>
auto basic_client<Stream>::prepare_update_log_settings(const v2::log_settings& update,
                                                       const call_options& o)
    -> prepared<v2::log_settings> {
  return {detail::post_call(*state_, "/v2/logging",
                            detail::to_body(boost::json::value_from(update)), o),
          &detail::parse_json_as<v2::log_settings>};
}

}  // namespace inferwire::http

#endif
