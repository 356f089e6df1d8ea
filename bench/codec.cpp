// SPDX-License-Identifier: Apache-2.0
// bench_codec: the KServe v2 binary-tensor codec against memcpy of the same bytes.
//
//   (a) the `simple` request (two INT32 [1,16] inputs, binary): encode + decode round trips
//       per second on one core, and memcpy of the same body size for scale;
//   (b) a 64 MiB FP32 binary request: decode time (must not depend on the tensor size: it is
//       compared with a 64 KiB request), and encode to a contiguous body (one copy) against
//       memcpy of the same bytes into a warm buffer;
//   (c) the `simple` request with its tensors in JSON (as bench_http_infer sends it), and an
//       FP32 one: the server's fast path (its plain JSON reader, and Boost.JSON's parser
//       driving the same handler) against the full decoder (a document, then a walk).
//
//   bench_codec [--seconds S]   (default 1 second per measurement)
#include <inferwire/v2.hpp>
#include <inferwire/v2/fast_request.hpp>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <numeric>
#include <string>
#include <vector>

// Every benchmark's code is one translation unit (CMakeLists.txt): its names stay in its own
// namespace, and bench_codec's main() calls run().
namespace bench_codec {

using namespace inferwire;
using clock_type = std::chrono::steady_clock;

namespace {

double g_seconds = 1.0;
volatile std::size_t g_sink = 0;  // keeps results alive

// Runs `f` repeatedly for about g_seconds; returns seconds per call (best of 3 batches).
template <class F>
double time_per_call(F&& f) {
  f();  // warm up
  double best = 1e300;
  for (int batch = 0; batch < 3; ++batch) {
    std::size_t n = 0;
    auto start = clock_type::now();
    double elapsed = 0;
    do {
      f();
      ++n;
      elapsed = std::chrono::duration<double>(clock_type::now() - start).count();
    } while (elapsed < g_seconds / 3);
    best = std::min(best, elapsed / static_cast<double>(n));
  }
  return best;
}

v2::infer_request make_request(std::vector<std::vector<std::byte>>& buffers, data_type type,
                               std::vector<shape_t> shapes) {
  v2::infer_request q;
  for (std::size_t i = 0; i < shapes.size(); ++i) {
    v2::infer_input in;
    in.name = "INPUT" + std::to_string(i);
    in.datatype = type;
    in.shape = shapes[i];
    in.encoding = v2::tensor_encoding::binary;
    in.data = v2::tensor_data::view(buffers[i]);
    q.inputs.push_back(std::move(in));
  }
  return q;
}

}  // namespace

int run(int argc, char** argv) {
  for (int i = 1; i < argc; ++i) {
    if (std::strcmp(argv[i], "--seconds") == 0 && i + 1 < argc) g_seconds = std::atof(argv[++i]);
    else {
      std::puts("usage: bench_codec [--seconds S]");
      return std::strcmp(argv[i], "--help") == 0 ? 0 : 2;
    }
  }

  // (a) the simple request -----------------------------------------------------------------
  std::vector<std::vector<std::byte>> small(2, std::vector<std::byte>(64, std::byte{1}));
  v2::infer_request simple = make_request(small, data_type::int32, {{1, 16}, {1, 16}});
  {
    v2::requested_output o0, o1;
    o0.name = "OUTPUT0";
    o0.binary_data = true;
    o1.name = "OUTPUT1";
    o1.binary_data = true;
    simple.outputs = {o0, o1};
  }
  v2::encoded_body body;
  std::string wire;
  double round_trip = time_per_call([&] {
    v2::encode_infer_request(simple, body);
    wire.clear();
    body.append_to(wire);
    status st;
    auto back = v2::decode_infer_request(wire, body.header_length(), "simple", st);
    g_sink = g_sink + back.inputs.size() + (st ? 1 : 0);
  });
  std::string copy_dst(wire.size(), '\0');
  double small_copy = time_per_call([&] {
    std::memcpy(copy_dst.data(), wire.data(), wire.size());
    g_sink = g_sink + static_cast<unsigned char>(copy_dst[wire.size() / 2]);
  });
  std::printf("(a) simple request, %zu-byte body (%zu header + 128 binary)\n", wire.size(),
              body.header_length());
  std::printf("    encode+decode: %10.0f round trips/s  (%.2f us each; target >= 200000/s)\n",
              1 / round_trip, round_trip * 1e6);
  std::printf("    memcpy of the body: %10.0f copies/s; codec/memcpy time ratio %.1f\n",
              1 / small_copy, round_trip / small_copy);

  // (b) 64 MiB FP32 request ----------------------------------------------------------------
  const std::size_t big_bytes = std::size_t{64} << 20;
  std::vector<std::vector<std::byte>> big(1, std::vector<std::byte>(big_bytes, std::byte{3}));
  v2::infer_request large =
      make_request(big, data_type::fp32, {{1, static_cast<std::int64_t>(big_bytes / 4)}});
  std::vector<std::vector<std::byte>> mid(1, std::vector<std::byte>(64 << 10, std::byte{3}));
  v2::infer_request medium = make_request(mid, data_type::fp32, {{1, (64 << 10) / 4}});

  v2::encoded_body big_body;
  std::string big_wire;
  double encode_sg = time_per_call([&] {
    v2::encode_infer_request(large, big_body);  // header + segment views: no tensor copy
    g_sink = g_sink + big_body.size();
  });
  big_wire.reserve(big_bytes + 4096);
  double encode_flat = time_per_call([&] {
    v2::encode_infer_request(large, big_body);
    big_wire.clear();
    big_body.append_to(big_wire);  // the one copy
    g_sink = g_sink + static_cast<unsigned char>(big_wire.back());
  });
  std::string memcpy_dst(big_wire.size(), '\0');
  double big_copy = time_per_call([&] {
    std::memcpy(memcpy_dst.data(), big_wire.data(), big_wire.size());
    g_sink = g_sink + static_cast<unsigned char>(memcpy_dst.back());
  });
  double decode_big = time_per_call([&] {
    status st;
    auto q = v2::decode_infer_request(big_wire, big_body.header_length(), "m", st);
    g_sink = g_sink + q.inputs.at(0).data.size();
  });
  v2::encoded_body mid_body = v2::encode_infer_request(medium);
  std::string mid_wire = mid_body.flatten();
  double decode_mid = time_per_call([&] {
    status st;
    auto q = v2::decode_infer_request(mid_wire, mid_body.header_length(), "m", st);
    g_sink = g_sink + q.inputs.at(0).data.size();
  });

  const double mb = static_cast<double>(big_wire.size()) / 1e6;
  std::printf("(b) 64 MiB FP32 binary request (%zu-byte body)\n", big_wire.size());
  std::printf("    memcpy:                    %8.1f MB/s\n", mb / big_copy);
  std::printf("    encode, contiguous (1 copy): %8.1f MB/s  ratio to memcpy %.2f  (target >= 0.80)\n",
              mb / encode_flat, big_copy / encode_flat);
  std::printf("    encode, scatter-gather (0 copies): %.2f us per request\n", encode_sg * 1e6);
  std::printf("    decode 64 MiB: %.2f us   decode 64 KiB: %.2f us   size ratio 1024x, time ratio "
              "%.2fx  (target: constant time)\n",
              decode_big * 1e6, decode_mid * 1e6, decode_big / decode_mid);
  std::printf("    decode 64 MiB vs memcpy of it: %.6f of the memcpy time\n", decode_big / big_copy);
  // (c) JSON tensors: the fast path's two readers, the full decoder and the request memo ----
  auto json_request = [](const char* datatype, auto value) {
    std::string h = R"({"inputs":[)";
    for (const char* name : {"INPUT0", "INPUT1"}) {
      h += std::string(name[5] == '0' ? "" : ",") + R"({"name":")" + name + R"(","datatype":")" + datatype +
           R"(","shape":[1,16],"data":[)";
      for (int i = 0; i < 16; ++i) h += (i ? "," : "") + value(i);
      h += "]}";
    }
    return h + "]}";
  };
  std::printf("(c) JSON tensors, decode per request (fast path readers against the full decoder)\n");
  struct json_case {
    const char* what;
    std::string header;
    std::string other;  ///< the same header with other numbers, for the request memo
  };
  for (const auto& [what, header, other] :
       {json_case{"simple, INT32", json_request("INT32", [](int i) { return std::to_string(i * 7 + 3); }),
                  json_request("INT32", [](int i) { return std::to_string(i * 11 + 2); })},
        json_case{"FP32", json_request("FP32", [](int i) { return std::to_string(i) + ".25"; }),
                  json_request("FP32", [](int i) { return std::to_string(i) + ".75"; })}}) {
    const v2::codec_limits limits;
    v2::infer_request out;
    namespace reader = v2::detail;
    const double full = time_per_call([&] {
      status st;
      auto r = v2::decode_infer_request(header, header.size(), "simple", st, limits);
      g_sink = g_sink + r.inputs.size() + (st ? 1 : 0);
    });
    const double sax = time_per_call([&] { g_sink = g_sink + reader::decode_fast_boost(header, header.size(), limits, out); });
    const double fast = time_per_call([&] { g_sink = g_sink + v2::try_decode_infer_request_fast(header, header.size(), limits, out); });
    const bool plain = reader::decode_fast_plain(header, header.size(), limits, out) == reader::json_reading::accepted;
    // The request memo: the header remembered, then the two headers recalled in turn (each
    // differs from the other only in its numbers).
    v2::detail::json_request_memo memo;
    (void)v2::try_decode_infer_request_fast(header, header.size(), limits, out, &memo);
    bool recalled = true;
    int turn = 0;
    const double memo_time = time_per_call([&] {
      const std::string& h = (turn++ & 1) ? header : other;
      recalled = recalled && memo.recall(h, h.size(), limits, out);
      g_sink = g_sink + out.inputs.size();
    });
    std::printf("    %-14s %3zu-byte header: full %.3f us, Boost.JSON SAX %.3f us, fast path %.3f us (%s): "
                "fast path / SAX %.2fx, / full %.2fx; memo recall %.3f us (%s), / fast path %.2fx\n",
                what, header.size(), full * 1e6, sax * 1e6, fast * 1e6, plain ? "plain reader" : "SAX", fast / sax,
                fast / full, memo_time * 1e6, recalled ? "every call" : "NOT ALWAYS", memo_time / fast);
  }
  return 0;
}

}  // namespace bench_codec
