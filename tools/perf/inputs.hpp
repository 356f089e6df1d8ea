// SPDX-License-Identifier: Apache-2.0
// The requests inferwire-perf sends: the model's inputs (from its metadata and configuration,
// with -b and --shape), filled with zeros, random values or a perf_analyzer JSON data file, as
// tensors in the request or in registered shared-memory regions.
#ifndef INFERWIRE_TOOLS_PERF_INPUTS_HPP
#define INFERWIRE_TOOLS_PERF_INPUTS_HPP

#include "options.hpp"

#include <inferwire/core/bytes.hpp>
#include <inferwire/core/data_type.hpp>
#include <inferwire/shm/system_region.hpp>
#include <inferwire/v2/client_types.hpp>
#include <inferwire/v2/tensor.hpp>
#include <inferwire/v2/types.hpp>
#if INFERWIRE_PERF_CUDA
#include <inferwire/shm/cuda_region.hpp>
#endif

#include <boost/json/value.hpp>
#include <boost/system/error_code.hpp>

#include <cstring>
#include <iostream>
#include <memory>
#include <string>
#include <vector>

#include <unistd.h>

namespace inferwire::perf {

using error_code = boost::system::error_code;

/// One input of the model as requests carry it.
struct input_spec {
  std::string name;
  data_type type = data_type::invalid;
  shape_t shape;  // batch dimension included
  std::int64_t elements() const {
    std::int64_t n = 1;
    for (auto d : shape) n *= d;
    return n;
  }
};

/// The requests to cycle through, and the regions they refer to.
struct request_set {
  std::vector<v2::infer_request> requests;
  std::vector<shm::system_region> system_regions;
#if INFERWIRE_PERF_CUDA
  std::vector<shm::cuda_region> cuda_regions;
#endif
  std::vector<std::string> registered;  // region names, to unregister
  shared_memory kind = shared_memory::none;
  /// The model may send several responses per request (model_transaction_policy.decoupled):
  /// streams read until the response flagged final.
  bool decoupled = false;
};

/// Whether a model configuration (JSON) declares a decoupled model.
bool is_decoupled(const boost::json::value& config);

/// The model's inputs with their request shapes (-b, --shape), checked against its metadata
/// and configuration (`max_batch_size`).
std::vector<input_spec> input_specs(const options& o, const v2::model_metadata& md, const boost::json::value& config);

/// The tensors' bytes for each request: one set for zero or random data, one per entry of a
/// JSON data file. Shapes from the file replace `specs`' where given.
std::vector<std::vector<v2::infer_input>> input_data(const options& o, const std::vector<input_spec>& specs);

/// Builds the requests: inputs as binary tensors, outputs asked for in binary, or everything in
/// shared-memory regions registered through `control` (named after this process).
template <class Client>
request_set prepare_requests(Client& control, const options& o) {
  const v2::model_id model(o.model, o.version);
  const auto md = control.model_metadata(model);
  const auto config = control.model_config(model);
  const auto specs = input_specs(o, md, config);
  auto data = input_data(o, specs);
  request_set set;
  set.kind = o.shm;
  set.decoupled = is_decoupled(config);
  if (set.decoupled && !o.streaming)
    throw std::invalid_argument("model " + o.model + " is decoupled (several responses per request): use -i grpc --streaming");
  auto finish = [&](v2::infer_request& r) {
    if (set.decoupled) r.parameters.set("triton_enable_empty_final_response", true);
  };
  if (o.shm == shared_memory::none) {
    for (auto& inputs : data) {
      v2::infer_request r;
      r.inputs = std::move(inputs);
      r.parameters.set("binary_data_output", true);
      finish(r);
      set.requests.push_back(std::move(r));
    }
    return set;
  }
  // Shared memory: the first data set, one input region, one region per output.
  if (data.size() > 1)
    std::cerr << "inferwire-perf: with --shared-memory only the first entry of the data file is sent\n";
  const std::string tag = "inferwire-perf-" + std::to_string(::getpid());
  std::size_t total = 0;
  for (const auto& in : data.front()) total += in.data.size();
  v2::infer_request r;
  auto add_region = [&](const std::string& name, std::size_t size) -> std::size_t {
    if (o.shm == shared_memory::system) {
      set.system_regions.push_back(shm::system_region::create("/" + name, std::max<std::size_t>(size, 1)));
      control.register_system_shared_memory(set.system_regions.back().register_request(name));
      set.registered.push_back(name);
      return set.system_regions.size() - 1;
    }
#if INFERWIRE_PERF_CUDA
    set.cuda_regions.push_back(shm::cuda_region::allocate(std::max<std::size_t>(size, 1), 0));
    control.register_cuda_shared_memory(set.cuda_regions.back().register_request(name));
    set.registered.push_back(name);
    return set.cuda_regions.size() - 1;
#else
    throw std::runtime_error("--shared-memory cuda: this inferwire-perf was built without the CUDA toolkit");
#endif
  };
  const auto in_region = add_region(tag + "-in", total);
  std::size_t offset = 0;
  for (const auto& in : data.front()) {
    const auto bytes = in.data.bytes();
    if (o.shm == shared_memory::system) {
      std::memcpy(set.system_regions[in_region].data() + offset, bytes.data(), bytes.size());
    } else {
#if INFERWIRE_PERF_CUDA
      set.cuda_regions[in_region].copy_from_host(offset, bytes);
#endif
    }
    r.inputs.push_back(v2::make_shm_input(in.name, in.datatype, in.shape, {tag + "-in", offset, bytes.size()}));
    offset += bytes.size();
  }
  for (const auto& out : md.outputs) {
    const std::string name = tag + "-out-" + out.name;
    add_region(name, o.output_shm_size);
    r.outputs.push_back(v2::make_shm_output(out.name, {name, 0, o.output_shm_size}));
  }
  finish(r);
  set.requests.push_back(std::move(r));
  return set;
}

/// Unregisters this run's regions (only these: other clients' stay).
template <class Client>
void release_shm(Client& control, const request_set& set) {
  for (const auto& name : set.registered) {
    error_code ec;
    if (set.kind == shared_memory::system)
      control.unregister_system_shared_memory(name, ec);
    else
      control.unregister_cuda_shared_memory(name, ec);
  }
}

}  // namespace inferwire::perf

#endif
