// SPDX-License-Identifier: Apache-2.0
// The request the client hostile tables send: `simple`'s INPUT0, one row of 16 INT32.
#pragma once

#include <inferwire/v2/types.hpp>

#include <string>
#include <utility>

namespace hostile {

inline inferwire::v2::infer_request small_request() {
  namespace v2 = inferwire::v2;
  v2::infer_request r;
  v2::infer_input in;
  in.name = "INPUT0";
  in.datatype = inferwire::data_type::int32;
  in.shape = {1, 16};
  in.encoding = v2::tensor_encoding::binary;
  in.data = v2::tensor_data::own(std::string(64, '\1'));
  r.inputs.push_back(std::move(in));
  return r;
}

}  // namespace hostile
