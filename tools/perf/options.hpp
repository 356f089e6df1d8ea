// SPDX-License-Identifier: Apache-2.0
// inferwire-perf's command line: perf_analyzer's names and defaults, checked up front so that a
// bad flag is an error before any request is sent.
#ifndef INFERWIRE_TOOLS_PERF_OPTIONS_HPP
#define INFERWIRE_TOOLS_PERF_OPTIONS_HPP

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

namespace inferwire::perf {

enum class protocol { http, grpc };
enum class shared_memory { none, system, cuda };
enum class distribution { constant, poisson };

/// start:end:step, as perf_analyzer reads it (end and step optional).
struct range {
  double start = 1, end = 1, step = 1;
  std::vector<double> values() const;
};

struct options {
  std::string model;
  std::string version;
  std::string url;  // host:port
  protocol proto = protocol::http;
  bool async = false;
  bool streaming = false;
  std::optional<range> concurrency;
  std::optional<range> request_rate;
  distribution request_distribution = distribution::constant;
  std::int64_t batch_size = 1;
  std::string input_data = "random";
  std::map<std::string, std::vector<std::int64_t>> shapes;
  shared_memory shm = shared_memory::none;
  std::uint64_t output_shm_size = 102400;
  std::uint64_t measurement_interval_ms = 5000;
  double stability_percentage = 10;
  int max_trials = 10;
  int percentile = 0;  // 0: stabilise on the average latency
  std::string csv_file;
  int max_threads = 4;
  int verbose = 0;
};

/// Parses and checks the command line. Returns -1 to go on, else the exit code (0 after
/// --help, 2 after an error, which it prints).
int parse_options(int argc, char** argv, options& o);

}  // namespace inferwire::perf

#endif
