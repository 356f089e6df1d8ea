// SPDX-License-Identifier: Apache-2.0
// inferwire/v2/detail/sax_handler.hpp — what every handler of Boost.JSON's SAX parser
// (boost::json::basic_parser) declares alike: no limits of the parser's own on objects, arrays,
// keys and strings (the codec's limits are checked where it reads them), and the types of the
// error code and the text its events carry.
#ifndef INFERWIRE_V2_DETAIL_SAX_HANDLER_HPP
#define INFERWIRE_V2_DETAIL_SAX_HANDLER_HPP

#include <boost/json/error.hpp>
#include <boost/json/string_view.hpp>

#include <cstddef>

namespace inferwire::v2::detail {

struct sax_handler_base {
  static constexpr std::size_t max_object_size = std::size_t(-1);
  static constexpr std::size_t max_array_size = std::size_t(-1);
  static constexpr std::size_t max_key_size = std::size_t(-1);
  static constexpr std::size_t max_string_size = std::size_t(-1);
  using ec_t = boost::json::error_code;
  using sv = boost::json::string_view;
};

}  // namespace inferwire::v2::detail

#endif
