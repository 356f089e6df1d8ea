// SPDX-License-Identifier: Apache-2.0
#include <inferwire/v2/types.hpp>

#include <catch2/catch.hpp>

#include <vector>

using namespace inferwire;
using namespace inferwire::v2;

TEST_CASE("types: tensor_data views borrow, own copies keep their bytes", "[v2][types]") {
  std::string buffer = "abcd";
  tensor_data view = tensor_data::view(buffer);
  CHECK_FALSE(view.owns());
  buffer[0] = 'X';
  CHECK(view.str() == "Xbcd");  // a view sees the caller's memory

  tensor_data owned = tensor_data::own("short");  // small-string storage moves with the value
  tensor_data moved = std::move(owned);
  tensor_data copied = moved;
  CHECK(moved.owns());
  CHECK(copied.str() == "short");
  CHECK(copied.bytes().data() != moved.bytes().data());
  CHECK(copied == moved);

  // release() hands over what it owns, storage included, and leaves the value empty.
  std::string large(100, 'z');
  const char* storage = large.data();
  tensor_data big = tensor_data::own(std::move(large));
  std::string back = big.release();
  CHECK(back == std::string(100, 'z'));
  CHECK(back.data() == storage);
  CHECK(big.empty());
  CHECK_FALSE(big.owns());
  CHECK(view.release().empty());  // a view owns nothing: nothing to hand over
  CHECK(view.empty());
  CHECK(buffer == "Xbcd");
}

TEST_CASE("types: typed access to inputs and outputs", "[v2][types]") {
  std::vector<float> values{1.f, 2.f, 3.f, 4.f};
  infer_output out;
  out.name = "OUTPUT0";
  out.datatype = data_type::fp32;
  out.shape = {2, 2};
  out.data = tensor_data::view(std::as_bytes(std::span(values)));
  CHECK(out.as<float>().at(3) == 4.f);
  CHECK_THROWS_AS(out.as<double>(), std::invalid_argument);

  infer_response r;
  r.outputs.push_back(out);
  CHECK(r.output("OUTPUT0") != nullptr);
  CHECK(r.output("OUTPUT9") == nullptr);
}

TEST_CASE("types: binary_data_output reads the request parameter", "[v2][types]") {
  infer_request q;
  CHECK_FALSE(q.binary_data_output());
  q.parameters.set("binary_data_output", true);
  CHECK(q.binary_data_output());
}
