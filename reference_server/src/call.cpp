// SPDX-License-Identifier: Apache-2.0
#include "call.hpp"

#include <exception>
#include <new>

namespace inferwire::server {

status exception_status() noexcept {
  try {
    throw;
  } catch (const std::bad_alloc&) {
    // below
  } catch (const std::exception& e) {
    try {
      return {errc::internal, quote_input(e.what())};
    } catch (...) {  // no memory for the text either
    }
  } catch (...) {
    return {errc::internal, "unknown error"};
  }
  return {errc::internal, "failed to allocate memory for the request"};
}

std::uint64_t unsigned_parameter(const v2::infer_request& r, std::string_view key) {
  if (auto v = r.parameters.get<std::uint64_t>(key)) return *v;
  if (auto v = r.parameters.get<std::int64_t>(key)) return *v > 0 ? static_cast<std::uint64_t>(*v) : 0;
  return 0;
}

void read_sequence_id(const v2::infer_request& r, std::string& text, std::uint64_t& number, bool& string_id) {
  const auto* idp = r.parameters.find("sequence_id");
  if (!idp) return;
  if (const auto* s = std::get_if<std::string>(idp)) {
    text = *s;
    string_id = true;
  } else if (const auto* u = std::get_if<std::uint64_t>(idp)) {
    number = *u;
    text = std::to_string(*u);
  } else if (const auto* i = std::get_if<std::int64_t>(idp)) {
    number = static_cast<std::uint64_t>(*i);
    text = std::to_string(*i);
  }
}

}  // namespace inferwire::server
