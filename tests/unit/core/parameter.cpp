// SPDX-License-Identifier: Apache-2.0
#include <inferwire/core/parameter.hpp>

#include <catch2/catch.hpp>

using namespace inferwire;

TEST_CASE("parameter: values keep their kind", "[core][parameter]") {
  parameter_map m;
  m.set("sequence_id", std::uint64_t{42});
  m.set("sequence_start", true);
  m.set("priority", 3);        // int -> int64
  m.set("ratio", 0.5f);        // float -> double
  m.set("label", "cat");       // const char* -> string
  CHECK(m.size() == 5);
  CHECK(m.get<std::uint64_t>("sequence_id") == 42u);
  CHECK(m.get<bool>("sequence_start") == true);
  CHECK(m.get<std::int64_t>("priority") == 3);
  CHECK(m.get<double>("ratio") == 0.5);
  CHECK(m.get<std::string>("label") == "cat");
  CHECK_FALSE(m.get<std::string>("priority"));  // wrong kind
  CHECK_FALSE(m.get<bool>("missing"));
  CHECK(type_name(*m.find("sequence_id")) == "uint64");
}

TEST_CASE("parameter: insertion order is kept, set replaces in place", "[core][parameter]") {
  parameter_map m{{"b", std::int64_t{1}}, {"a", std::string("x")}};
  m.set("b", false);
  std::vector<std::string> keys;
  for (const auto& kv : m) keys.push_back(kv.first);
  CHECK(keys == std::vector<std::string>{"b", "a"});
  CHECK(m.get<bool>("b") == false);
  CHECK(m.erase("b"));
  CHECK_FALSE(m.erase("b"));
  CHECK(m.size() == 1);
  CHECK_FALSE(m.contains("b"));
}
