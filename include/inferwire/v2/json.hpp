// SPDX-License-Identifier: Apache-2.0
// inferwire/v2/json.hpp
//
// JSON for the KServe v2 protocol, with Boost.JSON:
//  - the codec of json_codec.hpp (included): `parse_json` with Triton's limits and error
//    texts, `json_access`, tensor data in JSON, base64;
//  - Boost.JSON conversions (value_from / value_to) for every message of types.hpp except the
//    infer request and response, whose bodies are handled by binary.hpp.
#ifndef INFERWIRE_V2_JSON_HPP
#define INFERWIRE_V2_JSON_HPP

#include <inferwire/core/config.hpp>
#include <inferwire/v2/json_codec.hpp>
#include <inferwire/v2/types.hpp>

#include <boost/json/conversion.hpp>
#include <boost/json/value.hpp>

namespace inferwire::v2 {

// Boost.JSON conversions. value_to throws inferwire::error with Triton's texts.
#define INFERWIRE_V2_JSON_CONVERSION(T)                                                  \
  INFERWIRE_DECL void tag_invoke(boost::json::value_from_tag, boost::json::value& jv, const T& v);      \
  INFERWIRE_DECL T tag_invoke(boost::json::value_to_tag<T>, const boost::json::value& jv);
INFERWIRE_V2_JSON_CONVERSION(server_metadata)
INFERWIRE_V2_JSON_CONVERSION(tensor_metadata)
INFERWIRE_V2_JSON_CONVERSION(model_metadata)
INFERWIRE_V2_JSON_CONVERSION(repository_index_request)
INFERWIRE_V2_JSON_CONVERSION(repository_index_entry)
INFERWIRE_V2_JSON_CONVERSION(repository_load_request)
INFERWIRE_V2_JSON_CONVERSION(repository_unload_request)
INFERWIRE_V2_JSON_CONVERSION(system_shm_register_request)
INFERWIRE_V2_JSON_CONVERSION(system_shm_status)
INFERWIRE_V2_JSON_CONVERSION(cuda_shm_register_request)
INFERWIRE_V2_JSON_CONVERSION(cuda_shm_status)
INFERWIRE_V2_JSON_CONVERSION(statistic_duration)
INFERWIRE_V2_JSON_CONVERSION(infer_statistics)
INFERWIRE_V2_JSON_CONVERSION(response_statistics)
INFERWIRE_V2_JSON_CONVERSION(batch_statistics)
INFERWIRE_V2_JSON_CONVERSION(memory_usage)
INFERWIRE_V2_JSON_CONVERSION(model_statistics)
INFERWIRE_V2_JSON_CONVERSION(statistics_response)
INFERWIRE_V2_JSON_CONVERSION(trace_settings)
INFERWIRE_V2_JSON_CONVERSION(log_settings)
#undef INFERWIRE_V2_JSON_CONVERSION

/// A parameter value as JSON (bool, number or string).
INFERWIRE_DECL boost::json::value to_json(const parameter_value& v);
/// A parameter map as a JSON object.
INFERWIRE_DECL boost::json::object to_json(const parameter_map& m);

}  // namespace inferwire::v2

#if INFERWIRE_HEADER_ONLY
#include <inferwire/v2/impl/json.hpp>
#endif

#endif
