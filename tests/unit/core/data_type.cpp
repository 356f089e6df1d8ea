// SPDX-License-Identifier: Apache-2.0
#include <inferwire/core/data_type.hpp>

#include <catch2/catch.hpp>

#include <set>

using namespace inferwire;

TEST_CASE("data_type: all 14 types with wire names, config names and sizes", "[core][data_type]") {
  struct row { data_type t; const char* wire; const char* config; std::size_t size; int number; };
  const row rows[] = {
      {data_type::bool_, "BOOL", "TYPE_BOOL", 1, 1},
      {data_type::uint8, "UINT8", "TYPE_UINT8", 1, 2},
      {data_type::uint16, "UINT16", "TYPE_UINT16", 2, 3},
      {data_type::uint32, "UINT32", "TYPE_UINT32", 4, 4},
      {data_type::uint64, "UINT64", "TYPE_UINT64", 8, 5},
      {data_type::int8, "INT8", "TYPE_INT8", 1, 6},
      {data_type::int16, "INT16", "TYPE_INT16", 2, 7},
      {data_type::int32, "INT32", "TYPE_INT32", 4, 8},
      {data_type::int64, "INT64", "TYPE_INT64", 8, 9},
      {data_type::fp16, "FP16", "TYPE_FP16", 2, 10},
      {data_type::fp32, "FP32", "TYPE_FP32", 4, 11},
      {data_type::fp64, "FP64", "TYPE_FP64", 8, 12},
      {data_type::bytes, "BYTES", "TYPE_STRING", 0, 13},
      {data_type::bf16, "BF16", "TYPE_BF16", 2, 14},
  };
  REQUIRE(all_data_types.size() == 14);
  for (const auto& r : rows) {
    CAPTURE(r.wire);
    CHECK(wire_name(r.t) == r.wire);
    CHECK(config_name(r.t) == r.config);
    CHECK(element_size(r.t) == r.size);
    CHECK(static_cast<int>(r.t) == r.number);
    CHECK(parse_data_type(r.wire) == r.t);
    CHECK(parse_config_data_type(r.config) == r.t);
    CHECK(is_fixed_size(r.t) == (r.t != data_type::bytes));
  }
}

TEST_CASE("data_type: unknown names are invalid", "[core][data_type]") {
  CHECK(parse_data_type("STRING") == data_type::invalid);
  CHECK(parse_data_type("int32") == data_type::invalid);
  CHECK(parse_data_type("") == data_type::invalid);
  CHECK(parse_config_data_type("TYPE_BYTES") == data_type::invalid);
  CHECK(wire_name(data_type::invalid) == "<invalid>");
  CHECK(config_name(data_type::invalid) == "TYPE_INVALID");
  CHECK(element_size(data_type::invalid) == 0);
  CHECK(wire_name(static_cast<data_type>(200)) == "<invalid>");
}

TEST_CASE("data_type: C++ element types map to their data types", "[core][data_type]") {
  STATIC_REQUIRE(data_type_of_v<float> == data_type::fp32);
  STATIC_REQUIRE(data_type_of_v<const std::int8_t> == data_type::int8);
  STATIC_REQUIRE(data_type_of_v<bool> == data_type::bool_);
  STATIC_REQUIRE(data_type_of_v<bfloat16> == data_type::bf16);
  STATIC_REQUIRE(tensor_element<double>);
  STATIC_REQUIRE_FALSE(tensor_element<char>);
  CHECK(bfloat16{0x3f80}.to_float() == 1.0f);
  CHECK(bfloat16{0xc000}.to_float() == -2.0f);
}
