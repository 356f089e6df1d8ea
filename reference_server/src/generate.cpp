// SPDX-License-Identifier: Apache-2.0
#include "generate.hpp"

#include <inferwire/v2/detail/sax_handler.hpp>
#include <inferwire/v2/json_codec.hpp>
#include <inferwire/v2/tensor.hpp>

#include <boost/json/basic_parser_impl.hpp>
#include <boost/json/value.hpp>

#include <set>


namespace inferwire::server {

namespace {

// The input's configured dims with their variable dimensions fitted to `count` elements, and
// the batch dimension of a batching model.
status fit_shape(const model_config& c, const tensor_config& in, std::int64_t count, shape_t& shape) {
  std::int64_t fixed = 1;
  int variable = 0;
  for (const auto d : in.dims) {
    if (d < 0) ++variable;
    else fixed *= d;
  }
  const auto refuse = [&] {
    return status{errc::invalid_arg, "input '" + in.name + "' of model '" + c.name + "' has shape " +
                                         to_string(std::span<const std::int64_t>(in.dims)) + ": " +
                                         std::to_string(count) + (count == 1 ? " element does" : " elements do") +
                                         " not fit it"};
  };
  if (variable == 0 ? fixed != count : fixed == 0 || count % fixed != 0) return refuse();
  shape.clear();
  if (c.batching()) shape.push_back(1);
  bool first = true;
  for (const auto d : in.dims) {
    if (d >= 0) shape.push_back(d);
    else shape.push_back(std::exchange(first, false) ? count / fixed : 1);
  }
  return {};
}

status add_tensor(const model_config& c, const tensor_config& in, const boost::json::value& v,
                  v2::infer_request& out) {
  for (const auto& t : out.inputs)
    if (t.name == in.name)
      return {errc::invalid_arg, "input '" + in.name + "' is given more than once"};
  // A scalar is a one-element array.
  const boost::json::value wrapped = v.is_array() ? boost::json::value() : boost::json::value(boost::json::array{v});
  const boost::json::value& data = v.is_array() ? v : wrapped;
  const boost::json::array& elements = data.get_array();
  for (const auto& e : elements)
    if (e.is_array() || e.is_object() || e.is_null())
      return {errc::invalid_arg, "input '" + in.name + "' must be a scalar or a flat array of scalars"};
  v2::infer_input t;
  t.name = in.name;
  t.datatype = in.datatype;
  t.encoding = v2::tensor_encoding::json;
  const auto count = static_cast<std::int64_t>(elements.size());
  if (auto st = fit_shape(c, in, count, t.shape)) return st;
  std::string bytes;
  if (auto st = v2::decode_json_tensor_data(data, in.datatype, count, in.name, bytes)) return st;
  t.data = v2::tensor_data::own(std::move(bytes));
  out.inputs.push_back(std::move(t));
  return {};
}

// The first top-level key of a JSON object that appears more than once (a parsed document keeps
// only one of them, so the parse alone cannot tell), found with Boost.JSON's SAX parser.
class repeated_key_finder : public v2::detail::sax_handler_base {
 public:

  std::string repeated;

  bool on_document_begin(ec_t&) { return true; }
  bool on_document_end(ec_t&) { return true; }
  bool on_object_begin(ec_t&) { return ++depth_, true; }
  bool on_object_end(std::size_t, ec_t&) { return --depth_, true; }
  bool on_array_begin(ec_t&) { return ++depth_, true; }
  bool on_array_end(std::size_t, ec_t&) { return --depth_, true; }
  bool on_key_part(sv s, std::size_t, ec_t&) {
    if (depth_ == 1) key_.append(s.data(), s.size());
    return true;
  }
  bool on_key(sv s, std::size_t, ec_t&) {
    if (depth_ != 1) return true;
    key_.append(s.data(), s.size());
    if (!seen_.insert(key_).second && repeated.empty()) repeated = key_;
    key_.clear();
    return true;
  }
  bool on_string_part(sv, std::size_t, ec_t&) { return true; }
  bool on_string(sv, std::size_t, ec_t&) { return true; }
  bool on_number_part(sv, ec_t&) { return true; }
  bool on_int64(std::int64_t, sv, ec_t&) { return true; }
  bool on_uint64(std::uint64_t, sv, ec_t&) { return true; }
  bool on_double(double, sv, ec_t&) { return true; }
  bool on_bool(bool, ec_t&) { return true; }
  bool on_null(ec_t&) { return true; }
  bool on_comment_part(sv, ec_t&) { return true; }
  bool on_comment(sv, ec_t&) { return true; }

 private:
  int depth_ = 0;
  std::string key_;
  std::set<std::string, std::less<>> seen_;
};

// The repeated top-level key of `body`, or empty (also when the text is not plain JSON: its
// NaN/Infinity literals were read by parse_json's own pass).
std::string repeated_top_level_key(std::string_view body) {
  boost::json::basic_parser<repeated_key_finder> p(boost::json::parse_options{});
  boost::json::error_code ec;
  p.write_some(false, body.data(), body.size(), ec);
  return ec ? std::string() : p.handler().repeated;
}

}  // namespace

status decode_generate_request(std::string_view body, const model_config& c, const v2::codec_limits& limits,
                               v2::infer_request& out) {
  out = {};
  if (auto st = v2::check_json_size(body.size(), limits)) return st;
  status st;
  const boost::json::value jv = v2::parse_json(body, st);
  if (st) return st;
  const boost::json::object* root = jv.if_object();
  if (!root) return {errc::invalid_arg, "the generate request must be a JSON object"};
  // An input given twice is refused, as /infer refuses it (Triton's text), not the last one
  // taken.
  if (const std::string repeated = repeated_top_level_key(body); !repeated.empty() && c.input(repeated))
    return {errc::invalid_arg, "input '" + quote_input(repeated) + "' already exists in request"};
  // Keys that are not inputs, gathered as the `parameters` of an infer request would be.
  boost::json::object parameters;
  auto place = [&](std::string_view key, const boost::json::value& v) -> status {
    if (const tensor_config* in = c.input(key)) return add_tensor(c, *in, v, out);
    if (v.is_array() || v.is_object() || v.is_null())
      return {errc::invalid_arg, "parameter '" + quote_input(key) +
                                     "' of the generate request must be a string, number or boolean"};
    parameters[key] = v;
    return {};
  };
  for (const auto& kv : *root) {
    const std::string_view key = kv.key();
    if (key == "id") {
      if (!kv.value().is_string()) return {errc::invalid_arg, "the generate request's 'id' must be a string"};
      out.id = kv.value().get_string();
    } else if (key == "parameters") {
      const boost::json::object* p = kv.value().if_object();
      if (!p) return {errc::invalid_arg, "the generate request's 'parameters' must be an object"};
      if (auto e = v2::check_count("parameters", p->size(), limits.max_parameters)) return e;
      for (const auto& pkv : *p)
        if (auto e = place(pkv.key(), pkv.value())) return e;
    } else if (auto e = place(key, kv.value())) {
      return e;
    }
  }
  if (!parameters.empty())
    if (auto e = v2::detail::decode_request_parameters(parameters, out.parameters, limits)) return e;
  out.outputs.reserve(c.outputs.size());
  for (const auto& o : c.outputs) out.outputs.push_back(v2::make_output(o.name, false));
  return {};
}

status encode_generate_response(const v2::infer_response& r, std::string& out) {
  out.clear();
  out += '{';
  if (!r.id.empty()) {
    out += "\"id\":";
    v2::append_json_string(out, r.id);
    out += ',';
  }
  out += "\"model_name\":";
  v2::append_json_string(out, r.model_name);
  out += ",\"model_version\":";
  v2::append_json_string(out, r.model_version);
  for (const auto& o : r.outputs) {
    out += ',';
    v2::append_json_string(out, o.name);
    out += ':';
    const auto count = element_count(std::span<const std::int64_t>(o.shape));
    if (!count) return {errc::internal, "output '" + o.name + "' has an invalid shape"};
    const std::size_t at = out.size();
    if (auto st = v2::append_json_tensor_data(out, o.datatype, o.data.bytes(), count.value, o.name)) return st;
    if (count.value == 1 && out.size() >= at + 2 && out[at] == '[' && out.back() == ']') {
      out.pop_back();  // one element: the scalar, not a one-element array
      out.erase(at, 1);
    }
  }
  v2::detail::append_parameter_members(out, r.parameters, true);
  out += '}';
  return {};
}

std::string sse_event(std::string_view json) {
  std::string e;
  e.reserve(json.size() + 8);
  e.append("data: ").append(json).append("\n\n");
  return e;
}

}  // namespace inferwire::server
