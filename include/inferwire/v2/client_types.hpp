// SPDX-License-Identifier: Apache-2.0
// inferwire/v2/client_types.hpp — what the HTTP and the gRPC clients share: how a call names a
// model, header fields, and the accessors of an inference result.
#ifndef INFERWIRE_V2_CLIENT_TYPES_HPP
#define INFERWIRE_V2_CLIENT_TYPES_HPP

#include <inferwire/v2/tensor.hpp>
#include <inferwire/v2/types.hpp>

#include <stdexcept>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace inferwire::v2 {

/// Header fields (HTTP) or metadata (gRPC), in order (names may repeat).
using field_list = std::vector<std::pair<std::string, std::string>>;

/// A model name and an optional version ("" lets the model's version policy choose):
/// `"simple"` or `{"simple", "2"}`. Both are views.
struct model_id {
  std::string_view name;
  std::string_view version;
  model_id() = default;
  model_id(const char* n) : name(n) {}  // NOLINT: implicit by design
  model_id(const std::string& n) : name(n) {}  // NOLINT
  model_id(std::string_view n, std::string_view v = {}) : name(n), version(v) {}  // NOLINT
};

/// The accessors of an inference reply, shared by both clients' result types (which add the
/// storage the output views point into).
class infer_result_base {
 public:
  const v2::infer_response& response() const noexcept { return response_; }
  const std::string& id() const noexcept { return response_.id; }
  const std::string& model_name() const noexcept { return response_.model_name; }
  const std::string& model_version() const noexcept { return response_.model_version; }
  const std::vector<v2::infer_output>& outputs() const noexcept { return response_.outputs; }
  const parameter_map& parameters() const noexcept { return response_.parameters; }

  /// The output named `name`; throws std::out_of_range when the reply has none.
  const v2::infer_output& output(std::string_view name) const {
    if (const auto* o = response_.output(name)) return *o;
    throw std::out_of_range("the reply has no output '" + std::string(name) + "'");
  }
  /// A typed view of a fixed-size output; throws std::out_of_range or std::invalid_argument.
  template <tensor_element T>
  tensor_view<T> as(std::string_view name) const& {
    return output(name).as<T>();
  }
  /// The same of a temporary result (`auto v = client.infer(...).as<float>("OUTPUT0")`): a
  /// copy of the elements, since a view would outlive the result it points into.
  template <tensor_element T>
  std::vector<T> as(std::string_view name) && {
    const tensor_view<T> v = output(name).as<T>();
    return std::vector<T>(v.begin(), v.end());
  }
  /// The elements of a BYTES output (views).
  std::vector<std::string_view> strings(std::string_view name) const& {
    return v2::strings(output(name));
  }
  /// The same of a temporary result: copies of the elements.
  std::vector<std::string> strings(std::string_view name) && {
    std::vector<std::string> out;
    for (std::string_view e : v2::strings(output(name))) out.emplace_back(e);
    return out;
  }

 protected:
  infer_result_base() = default;
  v2::infer_response response_;
};

}  // namespace inferwire::v2

#endif
