// SPDX-License-Identifier: Apache-2.0
#include <inferwire/core/error.hpp>

#include <catch2/catch.hpp>

using namespace inferwire;

TEST_CASE("error: status table maps every code as v2-protocol section 0.2", "[core][error]") {
  struct row { errc code; int http; grpc_status_code grpc; };
  const row table[] = {
      {errc::internal, 500, grpc_status_code::internal},
      {errc::not_found, 404, grpc_status_code::not_found},
      {errc::unavailable, 503, grpc_status_code::unavailable},
      {errc::unsupported, 501, grpc_status_code::unimplemented},
      {errc::invalid_arg, 400, grpc_status_code::invalid_argument},
      {errc::already_exists, 400, grpc_status_code::already_exists},
      {errc::cancelled, 400, grpc_status_code::cancelled},
      {errc::unknown, 400, grpc_status_code::unknown},
  };
  for (const auto& r : table) {
    CAPTURE(to_string(r.code));
    CHECK(http_status(r.code) == r.http);
    CHECK(grpc_code(r.code) == r.grpc);
    CHECK(from_grpc_code(r.grpc) == r.code);
  }
  CHECK(static_cast<int>(grpc_status_code::unimplemented) == 12);
  CHECK(static_cast<int>(grpc_status_code::unavailable) == 14);
  CHECK(from_http_status(404) == errc::not_found);
  CHECK(from_http_status(418) == errc::unknown);
}

TEST_CASE("error: codes are std::error_codes of the inferwire category", "[core][error]") {
  std::error_code ec = errc::not_found;
  CHECK(ec.category().name() == std::string("inferwire"));
  CHECK(ec.message() == "Not found");
  CHECK(ec == errc::not_found);
  CHECK(ec != errc::internal);
}

TEST_CASE("error: status carries code and exact message", "[core][error]") {
  status ok;
  CHECK(ok.is_ok());
  CHECK_FALSE(ok);
  CHECK(ok.http_status() == 200);
  CHECK(ok.grpc_code() == grpc_status_code::ok);

  status s(errc::internal, "attempt to access JSON non-string as string");
  s.prefix("Unable to parse 'id': ");
  CHECK(s);
  CHECK(s.message() == "Unable to parse 'id': attempt to access JSON non-string as string");
  CHECK(s.http_status() == 500);
  CHECK(s.error_code() == errc::internal);
}

TEST_CASE("error: exception's what() is exactly the protocol message", "[core][error]") {
  try {
    throw_if(status(errc::unavailable, "Server not ready"));
    FAIL("throw_if did not throw");
  } catch (const error& e) {
    CHECK(std::string(e.what()) == "Server not ready");
    CHECK(e.code() == errc::unavailable);
    CHECK(e.get_status().http_status() == 503);
  }
  CHECK_NOTHROW(throw_if(status{}));
}

TEST_CASE("error: quote_input cuts long input and keeps the text UTF-8", "[core][error]") {
  using inferwire::quote_input;
  CHECK(quote_input("simple") == "simple");
  const std::string cut = quote_input(std::string(300, 'a'));
  CHECK(cut.size() == 259);
  CHECK(cut.find_first_not_of('a') == 256);
  CHECK(cut.substr(256) == "...");
  // The cut never splits a sequence: "é" would straddle byte 4.
  CHECK(quote_input("abc\xc3\xa9", 4) == "abc...");
  CHECK(quote_input("abc\xc3\xa9", 5) == "abc\xc3\xa9");
  // Bytes that are not well-formed UTF-8 (a URL may carry any) become U+FFFD, one each.
  CHECK(quote_input("sim\xc4\xc4ple") == "sim\xef\xbf\xbd\xef\xbf\xbdple");
  CHECK(quote_input("\xed\xa0\x80") == "\xef\xbf\xbd\xef\xbf\xbd\xef\xbf\xbd");  // a surrogate
  CHECK(quote_input("end\xe2\x82") == "end\xef\xbf\xbd\xef\xbf\xbd");           // cut short
  CHECK(inferwire::valid_utf8(quote_input(std::string(1000, '\xff'))));
  CHECK(quote_input(std::string(1000, '\xff')).size() == 256 * 3 + 3);
}
