// inferwire-server: the reference KServe v2 / Triton-compatible inference server.
//
// This version ships the library's codecs only; the HTTP and gRPC frontends, the model
// repository and the built-in backends are not part of it yet. The program says so and exits
// with status 2, so that scripts/run.sh, the README's run command, fails visibly instead of
// pretending to serve.
#include <inferwire/version.hpp>

#include <cstdio>
#include <cstring>

int main(int argc, char** argv) {
  for (int i = 1; i < argc; ++i) {
    if (std::strcmp(argv[i], "--version") == 0) {
      std::printf("inferwire-server %s\n", inferwire::version_string);
      return 0;
    }
  }
  std::fprintf(stderr,
               "inferwire-server %s: the HTTP/REST and gRPC frontends are not implemented in "
               "this version yet; only the inferwire headers are. See README.md.\n",
               inferwire::version_string);
  return 2;
}
