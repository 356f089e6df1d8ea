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

TEST_CASE("trace: what a client's settings can make the server write is bounded per minute", "[hostile][trace]") {
  const auto dir = fs::temp_directory_path() / ("iw-hostile-trace-budget-" + std::to_string(::getpid()));
  fs::remove_all(dir);
  fs::create_directories(dir);
  const std::string file = (dir / "t.json").string();
  auto count_files = [&] {
    std::size_t n = 0;
    for ([[maybe_unused]] const auto& e : fs::directory_iterator(dir)) ++n;
    return n;
  };
  SECTION("files") {
    trace_registry traces;
    std::vector<std::string> warnings;
    traces.warn = [&](const std::string& w) { warnings.push_back(w); };
    REQUIRE_FALSE(traces.configure({{"file", file}, {"level", "TIMESTAMPS"}, {"max-files-per-minute", "5"}}));
    // The settings of the amplification: every request, its own file.
    inferwire::v2::trace_settings update, out;
    update.settings["trace_level"] = std::vector<std::string>{"TENSORS"};
    update.settings["trace_rate"] = std::vector<std::string>{"1"};
    update.settings["trace_count"] = std::vector<std::string>{"-1"};
    update.settings["log_frequency"] = std::vector<std::string>{"1"};
    REQUIRE_FALSE(traces.update("", update, out));
    for (int i = 0; i < 100; ++i) {
      auto t = traces.begin("simple");
      REQUIRE(t);
      t->stamp_now("REQUEST_START");
      traces.finish(*t);
    }
    CHECK(count_files() == 5);
    CHECK(traces.dropped() == 95);
    REQUIRE(warnings.size() == 1);  // once, not per trace
    CHECK(warnings[0].find("max-files-per-minute=5") != std::string::npos);
  }
  SECTION("bytes") {
    trace_registry traces;
    REQUIRE_FALSE(traces.configure({{"file", file}, {"level", "TIMESTAMPS"}, {"rate", "1"},
                                    {"max-bytes-per-minute", "20000"}}));
    const std::string id(1000, 'x');
    for (int i = 0; i < 100; ++i) {
      auto t = traces.begin("simple");
      REQUIRE(t);
      t->request_id = id;
      t->stamp_now("REQUEST_START");
      traces.finish(*t);
    }
    traces.flush();
    CHECK(fs::file_size(file) <= 20000 + 16);
    CHECK(traces.dropped() > 70);
  }
  SECTION("the bounds are the operator's to set, and checked") {
    trace_registry traces;
    CHECK(traces.budget().files_per_minute == 60);
    CHECK(traces.budget().bytes_per_minute == std::uint64_t{256} << 20);
    CHECK(traces.configure({{"max-files-per-minute", "-1"}}));
    CHECK(traces.configure({{"max-bytes-per-minute", "lots"}}));
  }
  fs::remove_all(dir);
}
