// SPDX-License-Identifier: Apache-2.0
// Implementation of inferwire/v2/json_codec.hpp. Include that header, not this one.
#ifndef INFERWIRE_V2_IMPL_JSON_CODEC_HPP
#define INFERWIRE_V2_IMPL_JSON_CODEC_HPP

#include <inferwire/v2/impl/json_parse.hpp>   // parse_json, json_access, base64
#include <inferwire/v2/impl/json_tensor.hpp>  // tensor data in JSON

#endif  // INFERWIRE_V2_IMPL_JSON_CODEC_HPP
