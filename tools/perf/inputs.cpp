// SPDX-License-Identifier: Apache-2.0
#include "inputs.hpp"

#include <boost/json/parse.hpp>
#include <boost/json/serialize.hpp>

#include <cstring>
#include <fstream>
#include <random>
#include <sstream>
#include <stdexcept>

namespace inferwire::perf {

namespace {

std::string shape_text(const shape_t& s) {
  std::string t = "[";
  for (std::size_t i = 0; i < s.size(); ++i) t += (i ? "," : "") + std::to_string(s[i]);
  return t + "]";
}

/// Appends `v` to `out` as one element of `type`.
void append_number(std::string& out, data_type type, const boost::json::value& v, const std::string& input) {
  auto as_double = [&]() -> double {
    if (v.is_double()) return v.get_double();
    if (v.is_int64()) return static_cast<double>(v.get_int64());
    if (v.is_uint64()) return static_cast<double>(v.get_uint64());
    if (v.is_bool()) return v.get_bool() ? 1 : 0;
    throw std::invalid_argument("input " + input + ": " + boost::json::serialize(v) + " is not a number");
  };
  auto put = [&](auto x) {
    char b[sizeof x];
    std::memcpy(b, &x, sizeof x);
    out.append(b, sizeof x);
  };
  const double d = as_double();
  switch (type) {
    case data_type::bool_: put(static_cast<std::uint8_t>(d != 0)); break;
    case data_type::uint8: put(static_cast<std::uint8_t>(d)); break;
    case data_type::uint16: put(static_cast<std::uint16_t>(d)); break;
    case data_type::uint32: put(static_cast<std::uint32_t>(d)); break;
    case data_type::uint64: put(v.is_uint64() ? v.get_uint64() : static_cast<std::uint64_t>(d)); break;
    case data_type::int8: put(static_cast<std::int8_t>(d)); break;
    case data_type::int16: put(static_cast<std::int16_t>(d)); break;
    case data_type::int32: put(static_cast<std::int32_t>(d)); break;
    case data_type::int64: put(v.is_int64() ? v.get_int64() : static_cast<std::int64_t>(d)); break;
    case data_type::fp32: put(static_cast<float>(d)); break;
    case data_type::fp64: put(d); break;
    default:
      throw std::invalid_argument("input " + input + ": " + std::string(wire_name(type)) +
                                  " values cannot come from a data file here; use --input-data zero or random");
  }
}

/// Flattens nested JSON arrays into `out`.
void flatten(const boost::json::value& v, std::vector<boost::json::value>& out) {
  if (v.is_array()) {
    for (const auto& e : v.as_array()) flatten(e, out);
  } else {
    out.push_back(v);
  }
}

v2::infer_input owned(const input_spec& s, std::string bytes) {
  v2::infer_input in;
  in.name = s.name;
  in.datatype = s.type;
  in.shape = s.shape;
  in.encoding = v2::tensor_encoding::binary;
  in.data = v2::tensor_data::own(std::move(bytes));
  return in;
}

std::vector<std::vector<v2::infer_input>> generated(const options& o, const std::vector<input_spec>& specs) {
  std::mt19937_64 rng(20261123);
  std::vector<v2::infer_input> set;
  for (const auto& s : specs) {
    const auto n = static_cast<std::size_t>(s.elements());
    if (s.type == data_type::bytes) {
      std::vector<std::string> strings(n);
      for (auto& str : strings) {
        if (o.input_data == "zero") {
          str = "0";
        } else {
          str.resize(8);
          for (auto& c : str) c = static_cast<char>('a' + rng() % 26);
        }
      }
      set.push_back(owned(s, encode_bytes(strings)));
      continue;
    }
    std::string bytes(n * element_size(s.type), '\0');
    if (o.input_data == "random") {
      if (s.type == data_type::bool_) {
        for (auto& b : bytes) b = static_cast<char>(rng() & 1);
      } else if (s.type == data_type::fp32 || s.type == data_type::fp64 || s.type == data_type::fp16 ||
                 s.type == data_type::bf16) {
        // Finite values in [0, 1): random bit patterns would include NaNs and infinities.
        std::uniform_real_distribution<float> u(0, 1);
        for (std::size_t i = 0; i < n; ++i) {
          const float f = u(rng);
          if (s.type == data_type::fp32) {
            std::memcpy(&bytes[i * 4], &f, 4);
          } else if (s.type == data_type::fp64) {
            const double d = f;
            std::memcpy(&bytes[i * 8], &d, 8);
          } else {
            std::uint32_t bits;
            std::memcpy(&bits, &f, 4);
            // bf16: the high half; fp16: a small positive half with a random mantissa.
            const std::uint16_t h = s.type == data_type::bf16 ? static_cast<std::uint16_t>(bits >> 16)
                                                               : static_cast<std::uint16_t>(0x3800 | (bits & 0x3ff));
            std::memcpy(&bytes[i * 2], &h, 2);
          }
        }
      } else {
        for (auto& b : bytes) b = static_cast<char>(rng() & 0x3f);  // small values: no overflow in sums
      }
    }
    set.push_back(owned(s, std::move(bytes)));
  }
  return {std::move(set)};
}

std::vector<std::vector<v2::infer_input>> from_file(const options& o, const std::vector<input_spec>& specs) {
  std::ifstream in(o.input_data);
  if (!in) throw std::invalid_argument("--input-data: cannot read '" + o.input_data + "' (not zero, random or a file)");
  std::stringstream text;
  text << in.rdbuf();
  boost::system::error_code ec;
  auto doc = boost::json::parse(text.str(), ec);
  if (ec || !doc.is_object() || !doc.as_object().contains("data") || !doc.at("data").is_array() ||
      doc.at("data").as_array().empty())
    throw std::invalid_argument("--input-data " + o.input_data +
                                ": expected {\"data\": [{<input>: [values] or {\"content\": [...], \"shape\": [...]}}, ...]}");
  std::vector<std::vector<v2::infer_input>> sets;
  for (const auto& entry : doc.at("data").as_array()) {
    if (!entry.is_object()) throw std::invalid_argument("--input-data: every entry of \"data\" must be an object");
    std::vector<v2::infer_input> set;
    for (auto s : specs) {
      const auto* v = entry.as_object().if_contains(s.name);
      if (!v) throw std::invalid_argument("--input-data: an entry has no input " + s.name);
      const boost::json::value* content = v;
      if (v->is_object()) {
        content = v->as_object().if_contains("content");
        if (!content) throw std::invalid_argument("--input-data: input " + s.name + " has an object without \"content\"");
        if (const auto* shape = v->as_object().if_contains("shape")) {
          shape_t dims;
          for (const auto& d : shape->as_array()) dims.push_back(d.to_number<std::int64_t>());
          // The file's shape excludes the batch dimension, as --shape does.
          if (s.shape.size() == dims.size() + 1) dims.insert(dims.begin(), s.shape.front());
          s.shape = dims;
        }
      }
      std::vector<boost::json::value> values;
      flatten(*content, values);
      if (static_cast<std::int64_t>(values.size()) != s.elements())
        throw std::invalid_argument("--input-data: input " + s.name + " has " + std::to_string(values.size()) +
                                    " values for shape " + shape_text(s.shape));
      std::string bytes;
      if (s.type == data_type::bytes) {
        std::vector<std::string> strings;
        for (const auto& x : values)
          strings.push_back(x.is_string() ? std::string(x.get_string()) : boost::json::serialize(x));
        bytes = encode_bytes(strings);
      } else {
        for (const auto& x : values) append_number(bytes, s.type, x, s.name);
      }
      set.push_back(owned(s, std::move(bytes)));
    }
    sets.push_back(std::move(set));
  }
  return sets;
}

}  // namespace

std::vector<input_spec> input_specs(const options& o, const v2::model_metadata& md, const boost::json::value& config) {
  std::int64_t max_batch = 0;
  if (config.is_object())
    if (const auto* m = config.as_object().if_contains("max_batch_size"); m && m->is_number())
      max_batch = m->to_number<std::int64_t>();
  if (o.batch_size > 1 && max_batch == 0)
    throw std::invalid_argument("model " + o.model + " does not support batching (max_batch_size 0): -b must be 1");
  if (max_batch > 0 && o.batch_size > max_batch)
    throw std::invalid_argument("-b " + std::to_string(o.batch_size) + " is above model " + o.model +
                                "'s max_batch_size " + std::to_string(max_batch));
  for (const auto& [name, dims] : o.shapes) {
    bool known = false;
    for (const auto& in : md.inputs) known = known || in.name == name;
    if (!known) throw std::invalid_argument("--shape names " + name + ", which is not an input of " + o.model);
  }
  std::vector<input_spec> specs;
  for (const auto& in : md.inputs) {
    input_spec s{in.name, in.datatype, {}};
    shape_t dims = in.shape;
    if (max_batch > 0 && !dims.empty()) dims.erase(dims.begin());  // the batch dimension
    if (auto it = o.shapes.find(in.name); it != o.shapes.end()) {
      if (it->second.size() != dims.size())
        throw std::invalid_argument("--shape " + in.name + " has " + std::to_string(it->second.size()) +
                                    " dimensions; the model's input has " + std::to_string(dims.size()) + " " +
                                    shape_text(dims));
      for (std::size_t i = 0; i < dims.size(); ++i)
        if (dims[i] >= 0 && dims[i] != it->second[i])
          throw std::invalid_argument("--shape " + in.name + " " + shape_text(it->second) +
                                      " does not fit the model's " + shape_text(dims));
      dims.assign(it->second.begin(), it->second.end());
    }
    for (auto d : dims)
      if (d < 0)
        throw std::invalid_argument("input " + in.name + " has a variable dimension " + shape_text(dims) +
                                    ": give its shape with --shape " + in.name + ":<d1>,<d2>,...");
    if (max_batch > 0) dims.insert(dims.begin(), o.batch_size);
    s.shape = std::move(dims);
    specs.push_back(std::move(s));
  }
  if (specs.empty()) throw std::invalid_argument("model " + o.model + " has no inputs");
  return specs;
}

bool is_decoupled(const boost::json::value& config) {
  if (!config.is_object()) return false;
  const auto* policy = config.as_object().if_contains("model_transaction_policy");
  if (!policy || !policy->is_object()) return false;
  const auto* d = policy->as_object().if_contains("decoupled");
  return d && d->is_bool() && d->get_bool();
}

std::vector<std::vector<v2::infer_input>> input_data(const options& o, const std::vector<input_spec>& specs) {
  if (o.input_data == "zero" || o.input_data == "random") return generated(o, specs);
  return from_file(o, specs);
}

}  // namespace inferwire::perf
