// SPDX-License-Identifier: Apache-2.0
#include "run.hpp"

#include <stdexcept>

namespace inferwire::perf {

int run(const options& o) {
  if (o.proto == protocol::grpc) return run_grpc(o);
  return run_http(o);
}

std::pair<std::string, std::string> split_url(const std::string& url) {
  const auto colon = url.rfind(':');
  return {url.substr(0, colon), url.substr(colon + 1)};
}

}  // namespace inferwire::perf
