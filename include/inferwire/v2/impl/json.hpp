// SPDX-License-Identifier: Apache-2.0
// Implementation of inferwire/v2/json.hpp. Include that header, not this one.
#ifndef INFERWIRE_V2_IMPL_JSON_HPP
#define INFERWIRE_V2_IMPL_JSON_HPP

#include <inferwire/v2/impl/json_codec.hpp>     // parse_json, json_access, tensor data, base64
#include <inferwire/v2/impl/json_messages.hpp>  // value_from / value_to of the messages

#endif  // INFERWIRE_V2_IMPL_JSON_HPP
