// SPDX-License-Identifier: Apache-2.0
#include "restricted.hpp"

namespace inferwire::server {

namespace {

constexpr std::array<std::string_view, api_category_count> names = {
    "health", "metadata", "inference", "shared-memory", "model-config",
    "model-repository", "statistics", "trace", "logging"};

}  // namespace

std::string_view category_name(api_category c) noexcept { return names[static_cast<std::size_t>(c)]; }

std::optional<api_category> parse_category(std::string_view name) noexcept {
  for (std::size_t i = 0; i < names.size(); ++i)
    if (names[i] == name) return static_cast<api_category>(i);
  return std::nullopt;
}

bool restricted_apis::empty() const noexcept {
  for (const auto& r : rules_)
    if (r) return false;
  return true;
}

status restricted_apis::add(std::string_view argument, std::string_view flag, std::string_view kind) {
  const auto colon = argument.find(':');
  const auto equals = colon == std::string_view::npos ? colon : argument.find('=', colon + 1);
  if (colon == std::string_view::npos || equals == std::string_view::npos || colon == 0 || equals == colon + 1)
    return {errc::invalid_arg, "--" + std::string(flag) + " option format is '<" + std::string(kind) +
                                   " category>:<key>=<value>'. Got " + std::string(argument)};
  restriction rule{std::string(argument.substr(colon + 1, equals - colon - 1)),
                   std::string(argument.substr(equals + 1))};
  std::string_view categories = argument.substr(0, colon);
  while (true) {
    const auto comma = categories.find(',');
    const std::string_view name = categories.substr(0, comma);
    const auto c = parse_category(name);
    if (!c) return {errc::invalid_arg, "unknown restricted " + std::string(kind) + " '" + std::string(name) + "'"};
    auto& slot = rules_[static_cast<std::size_t>(*c)];
    if (slot)
      return {errc::invalid_arg, "restricted " + std::string(kind) + " '" + std::string(name) +
                                     "' can not be specified in multiple config groups"};
    slot = rule;
    if (comma == std::string_view::npos) break;
    categories.remove_prefix(comma + 1);
  }
  return {};
}

}  // namespace inferwire::server
