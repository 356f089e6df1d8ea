// SPDX-License-Identifier: Apache-2.0
// Restricted APIs (tritonserver's --http-restricted-api and --grpc-restricted-protocol): an API
// category may require a header with a given value. The categories and the parsing of the
// flags are shared; each frontend checks its requests with its own header name and reply
// (HTTP: 403 `This API is restricted, expecting header '<key>'`; gRPC: UNAVAILABLE
// `This protocol is restricted, expecting header 'triton-grpc-protocol-<key>'`).
#pragma once

#include <inferwire/core/error.hpp>

#include <array>
#include <optional>
#include <string>
#include <string_view>

namespace inferwire::server {

/// Triton's API categories, in its order.
enum class api_category {
  health,
  metadata,
  inference,
  shared_memory,
  model_config,
  model_repository,
  statistics,
  trace,
  logging,
};
inline constexpr std::size_t api_category_count = 9;

std::string_view category_name(api_category c) noexcept;
std::optional<api_category> parse_category(std::string_view name) noexcept;

/// The header a restricted category requires.
struct restriction {
  std::string key;
  std::string value;
};

class restricted_apis {
 public:
  /// Adds one flag argument, `<category>[,<category>...]:<key>=<value>`. `flag` (the flag's
  /// name) and `kind` ("api" or "protocol") go into the messages of a refused argument: an
  /// unknown category, a category given twice, or a malformed argument.
  status add(std::string_view argument, std::string_view flag, std::string_view kind);
  /// The header `c` requires, or null when it is open.
  const restriction* find(api_category c) const noexcept {
    const auto& r = rules_[static_cast<std::size_t>(c)];
    return r ? &*r : nullptr;
  }
  bool empty() const noexcept;

 private:
  std::array<std::optional<restriction>, api_category_count> rules_;
};

}  // namespace inferwire::server
