// SPDX-License-Identifier: Apache-2.0
#include "options.hpp"

#include <boost/program_options.hpp>

#include <cmath>
#include <iostream>
#include <sstream>
#include <stdexcept>

namespace inferwire::perf {
namespace po = boost::program_options;

std::vector<double> range::values() const {
  std::vector<double> v;
  for (double x = start; x <= end + 1e-9 && v.size() < 10000; x += step) v.push_back(x);
  return v;
}

namespace {

range parse_range(const std::string& flag, const std::string& text, bool integral) {
  std::vector<std::string> parts;
  std::stringstream in(text);
  for (std::string p; std::getline(in, p, ':');) parts.push_back(p);
  if (parts.empty() || parts.size() > 3) throw std::invalid_argument(flag + " takes <start>[:<end>[:<step>]], got '" + text + "'");
  auto number = [&](const std::string& p) {
    std::size_t used = 0;
    double v = 0;
    try {
      v = std::stod(p, &used);
    } catch (const std::exception&) {
      used = 0;
    }
    if (used != p.size() || !(v > 0) || !std::isfinite(v) || (integral && v != std::floor(v)))
      throw std::invalid_argument(flag + ": '" + p + "' is not a positive " + (integral ? "integer" : "number"));
    return v;
  };
  range r;
  r.start = number(parts[0]);
  r.end = parts.size() > 1 ? number(parts[1]) : r.start;
  r.step = parts.size() > 2 ? number(parts[2]) : 1;
  if (r.end < r.start) throw std::invalid_argument(flag + ": the end is below the start in '" + text + "'");
  return r;
}

/// NAME:d1,d2,... (perf_analyzer's --shape: the dimensions without the batch dimension).
void parse_shape(const std::string& text, options& o) {
  const auto colon = text.rfind(':');
  if (colon == std::string::npos || colon == 0 || colon + 1 == text.size())
    throw std::invalid_argument("--shape takes <input name>:<d1>,<d2>,..., got '" + text + "'");
  std::vector<std::int64_t> dims;
  std::stringstream in(text.substr(colon + 1));
  for (std::string d; std::getline(in, d, ',');) {
    std::size_t used = 0;
    long long v = -1;
    try {
      v = std::stoll(d, &used);
    } catch (const std::exception&) {
      used = 0;
    }
    if (used != d.size() || v < 0) throw std::invalid_argument("--shape: '" + d + "' is not a dimension (>= 0) in '" + text + "'");
    dims.push_back(v);
  }
  o.shapes[text.substr(0, colon)] = std::move(dims);
}

}  // namespace

int parse_options(int argc, char** argv, options& o) {
  std::string protocol_name = "http", shm_name = "none", concurrency, rate, dist = "constant";
  std::vector<std::string> shapes;
  bool sync = false;
  po::options_description desc(
      "inferwire-perf: measures a KServe v2 / Triton server under load (perf_analyzer's flags)\n\n"
      "usage: inferwire-perf -m <model> [options]\n\nOptions");
  desc.add_options()
    ("help,h", "print this help and exit")
    ("model-name,m", po::value<std::string>(&o.model), "the model to drive (required)")
    ("model-version,x", po::value<std::string>(&o.version), "its version (default: the server's choice)")
    ("url,u", po::value<std::string>(&o.url), "host:port (default localhost:8000, or localhost:8001 with -i grpc)")
    ("protocol,i", po::value<std::string>(&protocol_name), "http or grpc (default http)")
    ("async,a", po::bool_switch(&o.async), "asynchronous calls: every request of the load in flight from event loops")
    ("sync", po::bool_switch(&sync), "synchronous calls: one thread per concurrent request (the default)")
    ("streaming", po::bool_switch(&o.streaming), "gRPC bidirectional streams, one per concurrent request")
    ("concurrency-range", po::value<std::string>(&concurrency),
     "<start>:<end>:<step> requests in flight (default 1); each level is measured in turn")
    ("request-rate-range", po::value<std::string>(&rate),
     "<start>:<end>:<step> requests per second sent on a schedule, whatever the latency")
    ("request-distribution", po::value<std::string>(&dist), "constant or poisson (request-rate mode)")
    ("batch-size,b", po::value<std::int64_t>(&o.batch_size), "batch size of each request (default 1)")
    ("input-data", po::value<std::string>(&o.input_data),
     "zero, random (default), or a JSON file in perf_analyzer's format ({\"data\": [{<input>: [...]}, ...]})")
    ("shape", po::value<std::vector<std::string>>(&shapes),
     "<input>:<d1>,<d2>,... the shape of an input with variable dimensions, batch excluded (repeatable)")
    ("shared-memory", po::value<std::string>(&shm_name), "none (default), system or cuda: tensors in registered regions")
    ("output-shared-memory-size", po::value<std::uint64_t>(&o.output_shm_size),
     "bytes of each output's region with --shared-memory (default 102400)")
    ("measurement-interval,p", po::value<std::uint64_t>(&o.measurement_interval_ms),
     "milliseconds per measurement window (default 5000)")
    ("stability-percentage,s", po::value<double>(&o.stability_percentage),
     "how far (percent) the last three windows may be from their average (default 10)")
    ("max-trials,r", po::value<int>(&o.max_trials), "windows at most per load level before giving up (default 10)")
    ("percentile", po::value<int>(&o.percentile), "stabilise on this latency percentile instead of the average (1-99)")
    ("latency-report-file,f", po::value<std::string>(&o.csv_file), "also write the results to this CSV file")
    ("max-threads", po::value<int>(&o.max_threads), "event loops (threads, each with its own client) of the asynchronous modes (default 4)")
    ("verbose,v", po::value<int>(&o.verbose)->implicit_value(1)->zero_tokens(), "print every measurement window");
  po::variables_map vm;
  try {
    po::store(po::parse_command_line(argc, argv, desc), vm);
    po::notify(vm);
    if (vm.count("help")) {
      std::cout << desc << "\n";
      return 0;
    }
    if (o.model.empty()) throw std::invalid_argument("-m <model> is required");
    if (protocol_name == "http") o.proto = protocol::http;
    else if (protocol_name == "grpc") o.proto = protocol::grpc;
    else throw std::invalid_argument("-i takes http or grpc, got '" + protocol_name + "'");
    if (shm_name == "none") o.shm = shared_memory::none;
    else if (shm_name == "system") o.shm = shared_memory::system;
    else if (shm_name == "cuda") o.shm = shared_memory::cuda;
    else throw std::invalid_argument("--shared-memory takes none, system or cuda, got '" + shm_name + "'");
    if (dist == "constant") o.request_distribution = distribution::constant;
    else if (dist == "poisson") o.request_distribution = distribution::poisson;
    else throw std::invalid_argument("--request-distribution takes constant or poisson, got '" + dist + "'");
    if (o.async && sync) throw std::invalid_argument("--async and --sync exclude each other");
    if (!concurrency.empty() && !rate.empty())
      throw std::invalid_argument("--concurrency-range and --request-rate-range exclude each other");
    if (!rate.empty()) {
      o.request_rate = parse_range("--request-rate-range", rate, false);
      if (sync) throw std::invalid_argument("--request-rate-range sends on a schedule: it needs --async (the default for it)");
      o.async = true;
    } else {
      o.concurrency = parse_range("--concurrency-range", concurrency.empty() ? "1" : concurrency, true);
    }
    if (o.streaming && o.proto != protocol::grpc) throw std::invalid_argument("--streaming needs -i grpc");
    if (o.streaming) o.async = true;
    if (o.batch_size < 1) throw std::invalid_argument("-b must be at least 1");
    if (o.measurement_interval_ms < 10) throw std::invalid_argument("--measurement-interval must be at least 10 ms");
    if (!(o.stability_percentage > 0)) throw std::invalid_argument("--stability-percentage must be above 0");
    if (o.max_trials < 3) throw std::invalid_argument("--max-trials must be at least 3 (stability needs three windows)");
    if (vm.count("percentile") && (o.percentile < 1 || o.percentile > 99))
      throw std::invalid_argument("--percentile must be between 1 and 99");
    if (o.max_threads < 1) throw std::invalid_argument("--max-threads must be at least 1");
    if (o.output_shm_size == 0) throw std::invalid_argument("--output-shared-memory-size must be above 0");
    for (const auto& s : shapes) parse_shape(s, o);
    if (o.url.empty()) o.url = o.proto == protocol::grpc ? "localhost:8001" : "localhost:8000";
    const auto colon = o.url.rfind(':');
    if (colon == std::string::npos || colon == 0 || colon + 1 == o.url.size())
      throw std::invalid_argument("-u takes host:port, got '" + o.url + "'");
  } catch (const std::exception& e) {
    std::cerr << "inferwire-perf: " << e.what() << "\n(inferwire-perf --help lists the options)\n";
    return 2;
  }
  return -1;
}

}  // namespace inferwire::perf
