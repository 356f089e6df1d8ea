// SPDX-License-Identifier: Apache-2.0
// Inference through CUDA shared memory allocated with CUDA's virtual memory management
// (cuMemCreate + cuMemMap in several chunks, as PyTorch's expandable segments and GMS
// mappings are), which has no legacy CUDA IPC handle: one call exports the chunks, hands their
// descriptors to the server over its CUDA VMM socket and registers the region; the server's
// kernel then reads and writes it directly. Needs a GPU and a server on the same host started
// with --allow-client-shm=true (its --cuda-vmm-socket, default /tmp/inferwire-cuda-vmm.sock,
// or the path in INFERWIRE_CUDA_VMM_SOCKET). Without a GPU it says so and exits 0.
//
//   example_cuda_vmm_shm [-u host:port] [-m model]
#include "../common/example_args.hpp"

#include <inferwire/http/client.hpp>
#include <inferwire/shm/cuda_vmm_region.hpp>

#include <cstdlib>
#include <iostream>
#include <numeric>
#include <string>
#include <vector>

#include <unistd.h>

int main(int argc, char** argv) {
  auto args = example::parse(argc, argv,
                             "usage: example_cuda_vmm_shm [-u host:port] [-m model]\n"
                             "Runs 'simple' (or -m simple_gpu) with inputs and outputs in a CUDA VMM "
                             "region of two chunks (needs a GPU).",
                             "simple");
  namespace http = inferwire::http;
  namespace v2 = inferwire::v2;
  namespace shm = inferwire::shm;
  using inferwire::data_type;
  if (!inferwire::cuda::available()) {
    std::cout << "skipped: " << inferwire::cuda::unavailable_reason() << "\n";
    return 0;
  }
  const char* env = std::getenv("INFERWIRE_CUDA_VMM_SOCKET");
  const std::string socket = env ? env : std::string(shm::default_cuda_vmm_socket);
  try {
    http::client client(args.host, args.port);
    const std::string name = "vmm_data_" + std::to_string(::getpid());

    // Two physical chunks mapped back to back; the region spans the boundary between them
    // (the inputs in the first chunk, the outputs in the second), which the server sees as one
    // contiguous range.
    auto memory = shm::cuda_vmm_memory::allocate(1, 2);
    const std::size_t at = memory.chunk_size() - 64;  // INPUT0 | INPUT1 | OUTPUT0 | OUTPUT1
    auto* base = static_cast<std::byte*>(memory.data()) + at;
    std::vector<std::int32_t> input0(16), input1(16, 1);
    std::iota(input0.begin(), input0.end(), 0);
    inferwire::cuda::check(cudaMemcpy(base, input0.data(), 64, cudaMemcpyHostToDevice), "copy INPUT0");
    inferwire::cuda::check(cudaMemcpy(base + 64, input1.data(), 64, cudaMemcpyHostToDevice), "copy INPUT1");

    // Registered while `region` lives (closing it unregisters).
    auto region = shm::register_cuda_vmm(client, name, base, 256, socket);

    const bool batched = args.model == "simple";
    const inferwire::shape_t shape = batched ? inferwire::shape_t{1, 16} : inferwire::shape_t{16};
    v2::infer_request request;
    request.inputs.push_back(v2::make_shm_input("INPUT0", data_type::int32, shape, {name, 0, 64}));
    request.inputs.push_back(v2::make_shm_input("INPUT1", data_type::int32, shape, {name, 64, 64}));
    request.outputs.push_back(v2::make_shm_output("OUTPUT0", {name, 128, 64}));
    request.outputs.push_back(v2::make_shm_output("OUTPUT1", {name, 192, 64}));
    client.infer(args.model, request);

    std::vector<std::int32_t> sum(16), difference(16);
    inferwire::cuda::check(cudaMemcpy(sum.data(), base + 128, 64, cudaMemcpyDeviceToHost), "copy OUTPUT0");
    inferwire::cuda::check(cudaMemcpy(difference.data(), base + 192, 64, cudaMemcpyDeviceToHost), "copy OUTPUT1");
    bool ok = true;
    for (int i = 0; i < 16; ++i) {
      std::cout << input0[i] << " + 1 = " << sum[i] << ", " << input0[i] << " - 1 = " << difference[i] << "\n";
      ok = ok && sum[i] == input0[i] + 1 && difference[i] == input0[i] - 1;
    }
    client.unregister_cuda_shared_memory(name);
    std::cout << (ok ? "PASS" : "FAIL") << "\n";
    return ok ? 0 : 1;
  } catch (const std::exception& e) {
    std::cerr << "error: " << e.what() << "\n";
    return 1;
  }
}
