// SPDX-License-Identifier: Apache-2.0
// The trace registry against settings a client may send: a huge log_frequency must not make
// the server hold an unbounded number of traces in memory.
#include "trace.hpp"

#include <catch2/catch.hpp>

#include <filesystem>
#include <fstream>

#include <unistd.h>

using namespace inferwire::server;
namespace fs = std::filesystem;

TEST_CASE("trace: a huge log_frequency from a client does not hold traces without bound", "[hostile][trace]") {
  const auto dir = fs::temp_directory_path() / ("iw-hostile-trace-" + std::to_string(::getpid()));
  fs::remove_all(dir);
  fs::create_directories(dir);
  const std::string file = (dir / "t.json").string();
  {
    trace_registry traces;
    REQUIRE_FALSE(traces.configure({{"file", file}, {"level", "TIMESTAMPS"}, {"rate", "1"}}));
    // What POST /v2/trace/setting may carry.
    inferwire::v2::trace_settings update, out;
    update.settings["log_frequency"] = std::vector<std::string>{"9223372036854775807"};
    REQUIRE_FALSE(traces.update("", update, out));
    const std::string id(4096, 'x');  // a request id as long as a client likes
    for (int i = 0; i < 5000; ++i) {  // about 20 MiB of traces
      auto t = traces.begin("simple");
      REQUIRE(t);
      t->request_id = id;
      t->stamp_now("REQUEST_START");
      traces.finish(*t);
    }
    // Past the bound the numbered file was written early, before any shutdown.
    CHECK(fs::exists(file + ".0"));
    CHECK(fs::file_size(file + ".0") >= (std::size_t{16} << 20));
  }
  fs::remove_all(dir);
}
