// SPDX-License-Identifier: Apache-2.0
// libFuzzer target: the protobuf messages whose contents the library converts (grpc/convert.hpp
// and grpc/convert_messages.hpp). The first byte picks the message, the rest is its wire form:
//   0  ModelInferRequest, as the server decodes it (Triton's gRPC rules, typed contents made
//      raw, raw_input_contents viewed in place), then encoded again as the client would send it
//      and decoded once more: the second decode must succeed and give the same request. Parsed
//      also after the server's reservation of its raw_input_contents entries (every entry
//      reserved here, not only those past protobuf's safe string size): the parse must give
//      the same message, and the reservation must not exceed the message's size;
//   1  ModelInferResponse, as the client decodes it, then every output read through the typed
//      view its datatype names (which must refuse a size that does not match the shape);
//   2  RepositoryModelLoadRequest and 3 CudaSharedMemoryRegisterRequest, as the server reads
//      their parameters.
#include <inferwire/grpc/convert.hpp>

#include "raw_entries.hpp"

#include <google/protobuf/io/zero_copy_stream_impl_lite.h>

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <stdexcept>

namespace {

namespace v2 = inferwire::v2;
namespace pb = inference;

volatile std::uint64_t sink;

template <class T>
void read_as(const v2::infer_output& o) {
  try {
    std::uint64_t n = 0;
    for (auto v : o.as<T>()) n += v == T{} ? 0 : 1;  // every element is read
    sink = n;
  } catch (const std::invalid_argument&) {
    // a size that does not match the shape, or a shape that is not one
  }
}

void read_output(const v2::infer_output& o) {
  using inferwire::data_type;
  switch (o.datatype) {
    case data_type::int8: return read_as<std::int8_t>(o);
    case data_type::int32: return read_as<std::int32_t>(o);
    case data_type::int64: return read_as<std::int64_t>(o);
    case data_type::uint16: return read_as<std::uint16_t>(o);
    case data_type::fp32: return read_as<float>(o);
    case data_type::fp64: return read_as<double>(o);
    default: {
      std::uint64_t sum = 0;
      for (std::byte b : o.data.bytes()) sum += static_cast<std::uint8_t>(b);
      sink = sum;
    }
  }
}

void infer_request(const pb::ModelInferRequest& in) {
  v2::codec_limits limits;
  limits.max_tensors = 64;
  v2::infer_request first;
  if (inferwire::grpc::decode_infer_request(in, "model", first, limits)) return;
  for (const auto& i : first.inputs) {
    std::uint64_t sum = 0;
    for (std::byte b : i.data.bytes()) sum += static_cast<std::uint8_t>(b);
    sink = sum;
  }
  // What the server took, sent again by the client's encoder, reads back the same.
  pb::ModelInferRequest again;
  inferwire::grpc::encode_infer_request(first, "model", "", again);
  v2::infer_request second;
  if (inferwire::grpc::decode_infer_request(again, "model", second, limits)) __builtin_trap();
  if (second.inputs.size() != first.inputs.size() || second.outputs.size() != first.outputs.size())
    __builtin_trap();
  for (std::size_t k = 0; k < first.inputs.size(); ++k) {
    const auto& a = first.inputs[k];
    const auto& b = second.inputs[k];
    if (a.name != b.name || a.shape != b.shape || a.shm != b.shm) __builtin_trap();
    const auto x = a.data.bytes();
    const auto y = b.data.bytes();
    if (x.size() != y.size() || !std::equal(x.begin(), x.end(), y.begin())) __builtin_trap();
  }
}

std::string deterministic(const google::protobuf::MessageLite& m) {
  std::string out;
  {
    google::protobuf::io::StringOutputStream s(&out);
    google::protobuf::io::CodedOutputStream c(&s);
    c.SetSerializationDeterministic(true);  // map entries by key
    m.SerializeToCodedStream(&c);
  }
  return out;
}

// The server's reservation before the parse changes nothing the parse makes.
void reserved_parse(const void* wire, int n, bool parsed, const pb::ModelInferRequest& plain) {
  pb::ModelInferRequest reserved;
  google::protobuf::io::ArrayInputStream bytes(wire, n);
  if (inferwire::server::grpc_detail::reserve_large_entries(bytes, static_cast<std::uint64_t>(n), reserved, 0) >
      static_cast<std::uint64_t>(n))
    __builtin_trap();
  if (reserved.ParseFromArray(wire, n) != parsed) __builtin_trap();
  if (parsed && deterministic(reserved) != deterministic(plain)) __builtin_trap();
}

/// A request whose parameters the server reads with from_proto.
template <class Message, class Request>
void read_request(const void* wire, int n) {
  Message in;
  if (!in.ParseFromArray(wire, n)) return;
  Request out;
  (void)inferwire::grpc::from_proto(in, out);
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  // Protobuf logs every string field that is not UTF-8; the fuzzer makes plenty.
  static const bool quiet = (google::protobuf::SetLogHandler(nullptr), true);
  (void)quiet;
  if (size < 1) return 0;
  const void* wire = data + 1;
  const int n = static_cast<int>(size - 1);
  switch (data[0] % 4) {
    case 0: {
      pb::ModelInferRequest in;
      const bool parsed = in.ParseFromArray(wire, n);
      reserved_parse(wire, n, parsed, in);
      if (parsed) infer_request(in);
      break;
    }
    case 1: {
      pb::ModelInferResponse in;
      if (!in.ParseFromArray(wire, n)) break;
      v2::infer_response out;
      inferwire::grpc::decode_infer_response(in, out);
      for (const auto& o : out.outputs) read_output(o);
      break;
    }
    case 2: read_request<pb::RepositoryModelLoadRequest, v2::repository_load_request>(wire, n); break;
    case 3: read_request<pb::CudaSharedMemoryRegisterRequest, v2::cuda_shm_register_request>(wire, n); break;
  }
  return 0;
}
