// SPDX-License-Identifier: Apache-2.0
// What the infer fuzz targets compare: two decoded requests, equal as values, where a NaN
// parameter (which the JSON parser accepts, as Triton's does) equals a NaN.
#pragma once

#include <inferwire/v2/types.hpp>

#include <cmath>
#include <string>
#include <variant>

namespace fuzz {

// Parameters where every NaN is one marker string.
inline inferwire::parameter_map without_nan(const inferwire::parameter_map& in) {
  inferwire::parameter_map out;
  for (const auto& [key, value] : in) {
    const auto* d = std::get_if<double>(&value);
    if (d && std::isnan(*d)) out.set(key, inferwire::parameter_value(std::string("\0NaN", 4)));
    else out.set(key, value);
  }
  return out;
}

inline bool same(inferwire::v2::infer_request a, inferwire::v2::infer_request b) {
  for (auto* r : {&a, &b}) {
    r->parameters = without_nan(r->parameters);
    for (auto& i : r->inputs) i.parameters = without_nan(i.parameters);
    for (auto& o : r->outputs) o.parameters = without_nan(o.parameters);
  }
  return a == b;
}

}  // namespace fuzz
