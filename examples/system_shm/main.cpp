// SPDX-License-Identifier: Apache-2.0
// Inference through system shared memory, as Triton's shm clients do it: inputs at offsets 0 and
// 64 of one region, outputs at offsets 0 and 64 of another; no tensor byte crosses the socket.
// The server must run with --allow-client-shm=true on the same host (scripts/run.sh does).
//
//   example_system_shm [-u host:port]
#include "../common/example_args.hpp"

#include <inferwire/http/client.hpp>
#include <inferwire/shm/system_region.hpp>

#include <iostream>
#include <numeric>
#include <string>

#include <unistd.h>

int main(int argc, char** argv) {
  auto args = example::parse(argc, argv,
                             "usage: example_system_shm [-u host:port]\n"
                             "Runs 'simple' with inputs and outputs in POSIX shared-memory "
                             "regions (the server must allow client shared memory).");
  namespace http = inferwire::http;
  namespace v2 = inferwire::v2;
  namespace shm = inferwire::shm;
  using inferwire::data_type;
  try {
    http::client client(args.host, args.port);

    // Two POSIX shared-memory objects; both are unlinked when these objects go away. Region
    // names are per process: other clients of the same server keep theirs (Triton's examples
    // unregister every region first, which would break a client running beside this one).
    const std::string tag = std::to_string(::getpid());
    const std::string input_name = "input_data_" + tag, output_name = "output_data_" + tag;
    auto input = shm::system_region::create("/example_input_" + tag, 128);
    auto output = shm::system_region::create("/example_output_" + tag, 128);
    auto input0 = input.as<std::int32_t>(0, 16);
    auto input1 = input.as<std::int32_t>(64, 16);
    std::iota(input0.begin(), input0.end(), 0);
    std::fill(input1.begin(), input1.end(), 1);

    client.register_system_shared_memory(input.register_request(input_name));
    client.register_system_shared_memory(output.register_request(output_name));
    for (const auto& r : client.system_shared_memory_status())
      std::cout << "registered " << r.name << " -> " << r.key << " (" << r.byte_size << " bytes)\n";

    v2::infer_request request;
    request.inputs.push_back(
        v2::make_shm_input("INPUT0", data_type::int32, {1, 16}, {input_name, 0, 64}));
    request.inputs.push_back(
        v2::make_shm_input("INPUT1", data_type::int32, {1, 16}, {input_name, 64, 64}));
    request.outputs.push_back(v2::make_shm_output("OUTPUT0", {output_name, 0, 64}));
    request.outputs.push_back(v2::make_shm_output("OUTPUT1", {output_name, 64, 64}));
    auto result = client.infer("simple", request);

    // The reply names the outputs; their values are in the output region.
    auto sum = output.as<std::int32_t>(0, 16);
    auto difference = output.as<std::int32_t>(64, 16);
    bool ok = result.outputs().size() == 2;
    for (int i = 0; i < 16; ++i) {
      std::cout << input0[i] << " + " << input1[i] << " = " << sum[i] << ", " << input0[i] << " - "
                << input1[i] << " = " << difference[i] << "\n";
      ok = ok && sum[i] == input0[i] + input1[i] && difference[i] == input0[i] - input1[i];
    }
    // Only this client's regions.
    client.unregister_system_shared_memory(input_name);
    client.unregister_system_shared_memory(output_name);
    std::cout << (ok ? "PASS" : "FAIL") << "\n";
    return ok ? 0 : 1;
  } catch (const std::exception& e) {
    std::cerr << "error: " << e.what() << "\n";
    return 1;
  }
}
