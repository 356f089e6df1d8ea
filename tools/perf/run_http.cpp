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
    return mean_cost_us([&] { return v2::encode_infer_request(r).header.size(); });
  }
  /// Decoding one response as the client does, averaged: `res` encoded again as the server sent
  /// it (JSON header and binary data).
  static double recv_cost_us(const v2::infer_response& res) {
    const v2::encoded_body body = v2::encode_infer_response(res);
    const std::string wire = body.flatten();
    // The whole body is the header unless there are binary data.
    const std::size_t header_length = body.has_binary_data() ? body.header_length() : wire.size();
    return mean_cost_us([&] { return v2::decode_infer_response(wire, header_length).outputs.size() + 1; });
  }
};

}  // namespace

int run_http(const options& o) { return run_with<http_traits>(o); }

}  // namespace inferwire::perf
