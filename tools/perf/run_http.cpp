// SPDX-License-Identifier: Apache-2.0
// inferwire-perf over HTTP/REST: inferwire::http::client.
#include "load.hpp"
#include "run.hpp"

#include <inferwire/http/client.hpp>
#include <inferwire/v2/binary.hpp>

namespace inferwire::perf {

namespace {

struct http_traits {
  using client = http::client;
  static constexpr bool has_streams = false;

  static std::unique_ptr<client> make_blocking(const options& o) {
    const auto [host, port] = split_url(o.url);
    return std::make_unique<client>(host, port);
  }
  static std::unique_ptr<client> make_async(net::any_io_executor ex, const options& o, std::size_t concurrency) {
    const auto [host, port] = split_url(o.url);
    http::client_options opts;
    opts.max_connections = std::max<std::size_t>(1, concurrency);
    return std::make_unique<client>(std::move(ex), host, port, opts);
  }
  /// Serialising one request as the client does (JSON header and binary segments), averaged.
  static double send_cost_us(const v2::infer_request& r, const options&) {
    constexpr int n = 200;
    std::size_t sink = 0;
    const auto t0 = std::chrono::steady_clock::now();
    for (int i = 0; i < n; ++i) sink += v2::encode_infer_request(r).header.size();
    const auto t1 = std::chrono::steady_clock::now();
    if (sink == 0) return 0;
    return std::chrono::duration<double, std::micro>(t1 - t0).count() / n;
  }
  /// Decoding one response as the client does, averaged: the response to `r`, encoded again
  /// as the server sent it (JSON header and binary data). 0 when the request fails.
  static double recv_cost_us(client& c, const v2::infer_request& r, const options& o) {
    error_code ec;
    const auto result = c.infer(v2::model_id(o.model, o.version), r, ec);
    if (ec) return 0;
    const v2::encoded_body body = v2::encode_infer_response(result.response());
    const std::string wire = body.flatten();
    // The whole body is the header unless there are binary data.
    const std::size_t header_length = body.has_binary_data() ? body.header_length() : wire.size();
    constexpr int n = 200;
    std::size_t sink = 0;
    const auto t0 = std::chrono::steady_clock::now();
    for (int i = 0; i < n; ++i) sink += v2::decode_infer_response(wire, header_length).outputs.size() + 1;
    const auto t1 = std::chrono::steady_clock::now();
    if (sink == 0) return 0;
    return std::chrono::duration<double, std::micro>(t1 - t0).count() / n;
  }
};

}  // namespace

int run_http(const options& o) { return run_with<http_traits>(o); }

}  // namespace inferwire::perf
