// SPDX-License-Identifier: Apache-2.0
// http::infer_result::decode: replies whose JSON header repeats are decoded from the memo of the
// last header, with results equal to the full decoder's and views into their own bodies.
#include <inferwire/http/client.hpp>
#include <inferwire/v2/binary.hpp>

#include <catch2/catch.hpp>

#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

namespace ih = inferwire::http;
namespace v2 = inferwire::v2;

namespace {

const std::string header =
    R"({"model_name":"simple","model_version":"1","outputs":[)"
    R"({"name":"OUTPUT0","datatype":"INT32","shape":[1,4],"parameters":{"binary_data_size":16}},)"
    R"({"name":"OUTPUT1","datatype":"INT32","shape":[1,4],"parameters":{"binary_data_size":16}}]})";

std::string body_of(const std::string& head, std::int32_t first) {
  std::string b = head;
  for (std::int32_t i = 0; i < 8; ++i) {
    const std::int32_t v = first + i;
    b.append(reinterpret_cast<const char*>(&v), sizeof v);
  }
  return b;
}

ih::infer_result decode(const std::string& body, std::size_t header_length, inferwire::status& st) {
  return ih::infer_result::decode(body, header_length, st);
}

}  // namespace

TEST_CASE("infer_result: a repeated header decodes as the full decoder does, into its own body",
          "[http]") {
  inferwire::status st;
  const auto a = decode(body_of(header, 0), header.size(), st);
  REQUIRE_FALSE(st);
  const auto b = decode(body_of(header, 100), header.size(), st);  // the same header bytes
  REQUIRE_FALSE(st);
  CHECK(a.as<std::int32_t>("OUTPUT0")[0] == 0);
  CHECK(a.as<std::int32_t>("OUTPUT1")[3] == 7);
  CHECK(b.as<std::int32_t>("OUTPUT0")[0] == 100);
  CHECK(b.as<std::int32_t>("OUTPUT1")[3] == 107);
  const auto bytes = b.output("OUTPUT1").data.bytes();
  CHECK(reinterpret_cast<const char*>(bytes.data()) == b.body().data() + header.size() + 16);
  inferwire::status full;
  CHECK(b.response() == v2::decode_infer_response(b.body(), header.size(), full));
  CHECK_FALSE(full);
  CHECK(b.response().model_name == "simple");
  CHECK(b.output("OUTPUT0").shape == inferwire::shape_t{1, 4});
}

TEST_CASE("infer_result: a repeated header with a body of another length fails as before", "[http]") {
  inferwire::status st;
  (void)decode(body_of(header, 0), header.size(), st);
  REQUIRE_FALSE(st);
  std::string longer = body_of(header, 0) + "xy";
  (void)decode(longer, header.size(), st);
  CHECK(st.message() == "2 bytes of the response belong to no output");
  std::string shorter = body_of(header, 0);
  shorter.resize(shorter.size() - 4);
  (void)decode(shorter, header.size(), st);
  CHECK(st.message() == "output 'OUTPUT1' declares 16 bytes but only 12 remain in the response");
}

TEST_CASE("infer_result: headers that differ, and outputs in JSON, are decoded in full", "[http]") {
  inferwire::status st;
  const std::string other =
      R"({"model_name":"simple","model_version":"1","outputs":[)"
      R"({"name":"OUTPUT0","datatype":"INT32","shape":[1,8],"parameters":{"binary_data_size":32}}]})";
  for (int round = 0; round < 2; ++round) {
    const auto a = decode(body_of(header, 10), header.size(), st);
    REQUIRE_FALSE(st);
    CHECK(a.outputs().size() == 2);
    const auto b = decode(body_of(other, 20), other.size(), st);
    REQUIRE_FALSE(st);
    REQUIRE(b.outputs().size() == 1);
    CHECK(b.as<std::int32_t>("OUTPUT0")[7] == 27);
  }
  const std::string json = R"({"model_name":"m","outputs":[{"name":"O","datatype":"INT32","shape":[2],"data":[5,6]}]})";
  for (int round = 0; round < 2; ++round) {
    const auto j = decode(json, json.size(), st);
    REQUIRE_FALSE(st);
    CHECK(j.as<std::int32_t>("O")[1] == 6);
  }
  // A bad header is never remembered: the same bytes fail again.
  const std::string bad = R"({"model_name":"m","outputs":[{"name":"O","datatype":"INT32"}]})";
  for (int round = 0; round < 2; ++round) {
    (void)decode(bad, bad.size(), st);
    CHECK(st);
  }
}

TEST_CASE("infer_result: a temporary result's accessors copy what they return", "[http]") {
  // A view would point into the result, which is gone once the statement ends.
  inferwire::status st;
  const std::string body = body_of(header, 40);
  std::vector<std::int32_t> out = decode(body, header.size(), st).as<std::int32_t>("OUTPUT1");
  REQUIRE_FALSE(st);
  CHECK(out == std::vector<std::int32_t>{44, 45, 46, 47});

  const std::string strings_header =
      R"({"model_name":"m","outputs":[{"name":"S","datatype":"BYTES","shape":[2],)"
      R"("parameters":{"binary_data_size":13}}]})";
  std::string sbody = strings_header;
  for (std::string_view e : {std::string_view("abcd"), std::string_view("x")}) {
    const auto n = static_cast<std::uint32_t>(e.size());
    sbody.append(reinterpret_cast<const char*>(&n), 4).append(e);
  }
  std::vector<std::string> strings = decode(sbody, strings_header.size(), st).strings("S");
  REQUIRE_FALSE(st);
  CHECK(strings == std::vector<std::string>{"abcd", "x"});

  // A result that lives keeps handing out views.
  const auto held = decode(body, header.size(), st);
  CHECK(held.as<std::int32_t>("OUTPUT0").bytes().data() == held.output("OUTPUT0").data.bytes().data());
}
