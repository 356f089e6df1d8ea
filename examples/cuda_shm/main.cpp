// SPDX-License-Identifier: Apache-2.0
// Inference through CUDA shared memory: the inputs and outputs stay in this process's GPU
// memory, exported with CUDA IPC handles; the server's kernel reads and writes them directly
// when the model's instance is on the same GPU (tests/gpu/models/simple_gpu), and copies
// through host memory for a CPU model such as 'simple'. Needs a GPU, and a server on the same
// host with --allow-client-shm=true. Without a GPU it says so and exits 0.
//
//   example_cuda_shm [-u host:port] [-m model]
#include "../common/example_args.hpp"

#include <inferwire/http/client.hpp>
#include <inferwire/shm/cuda_region.hpp>

#include <iostream>
#include <numeric>
#include <string>
#include <vector>

#include <unistd.h>

int main(int argc, char** argv) {
  auto args = example::parse(argc, argv,
                             "usage: example_cuda_shm [-u host:port] [-m model]\n"
                             "Runs 'simple' (or -m simple_gpu) with inputs and outputs in CUDA "
                             "shared-memory regions (needs a GPU).",
                             "simple");
  const std::string& model = args.model;
  namespace http = inferwire::http;
  namespace v2 = inferwire::v2;
  namespace shm = inferwire::shm;
  using inferwire::data_type;
  if (!inferwire::cuda::available()) {
    std::cout << "skipped: " << inferwire::cuda::unavailable_reason() << "\n";
    return 0;
  }
  try {
    http::client client(args.host, args.port);
    // Region names are per process, so clients running beside this one keep their regions.
    const std::string tag = std::to_string(::getpid());
    const std::string input_name = "input_data_" + tag, output_name = "output_data_" + tag;

    std::vector<std::int32_t> input0(16), input1(16, 1);
    std::iota(input0.begin(), input0.end(), 0);
    auto input = shm::cuda_region::allocate(128);  // on the current GPU
    auto output = shm::cuda_region::allocate(128);
    input.copy_from_host(0, std::as_bytes(std::span(input0)));
    input.copy_from_host(64, std::as_bytes(std::span(input1)));
    client.register_cuda_shared_memory(input.register_request(input_name));
    client.register_cuda_shared_memory(output.register_request(output_name));

    const bool batched = model == "simple";
    const inferwire::shape_t shape = batched ? inferwire::shape_t{1, 16} : inferwire::shape_t{16};
    v2::infer_request request;
    request.inputs.push_back(v2::make_shm_input("INPUT0", data_type::int32, shape, {input_name, 0, 64}));
    request.inputs.push_back(v2::make_shm_input("INPUT1", data_type::int32, shape, {input_name, 64, 64}));
    request.outputs.push_back(v2::make_shm_output("OUTPUT0", {output_name, 0, 64}));
    request.outputs.push_back(v2::make_shm_output("OUTPUT1", {output_name, 64, 64}));
    client.infer(model, request);

    std::vector<std::int32_t> sum(16), difference(16);
    output.copy_to_host(0, std::as_writable_bytes(std::span(sum)));
    output.copy_to_host(64, std::as_writable_bytes(std::span(difference)));
    bool ok = true;
    for (int i = 0; i < 16; ++i) {
      std::cout << input0[i] << " + 1 = " << sum[i] << ", " << input0[i] << " - 1 = " << difference[i] << "\n";
      ok = ok && sum[i] == input0[i] + 1 && difference[i] == input0[i] - 1;
    }
    client.unregister_cuda_shared_memory(input_name);
    client.unregister_cuda_shared_memory(output_name);
    std::cout << (ok ? "PASS" : "FAIL") << "\n";
    return ok ? 0 : 1;
  } catch (const std::exception& e) {
    std::cerr << "error: " << e.what() << "\n";
    return 1;
  }
}
