// SPDX-License-Identifier: Apache-2.0
// Where a GMS server listens by default, shared by inferwire-gms-server (which binds there) and
// inferwire-gms-weights (which connects there): $GMS_SOCKET_DIR/gms_<GPU-UUID>_<tag>.sock, or
// gms_memfd<N>_<tag>.sock for the memfd backend.
#ifndef INFERWIRE_REFERENCE_SERVER_GMS_SOCKET_PATH_HPP
#define INFERWIRE_REFERENCE_SERVER_GMS_SOCKET_PATH_HPP

#include <inferwire/gms/cuda_vmm_driver.hpp>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <stdexcept>
#include <string>
#include <system_error>

#include <sys/stat.h>
#include <unistd.h>

namespace inferwire::gms::programs {

/// Throws unless `dir` is a directory only this user can write to: owned by us, not a link, no
/// access for others.
inline void require_private_dir(const std::string& dir) {
  struct stat st {};
  if (::lstat(dir.c_str(), &st) != 0)
    throw std::runtime_error("socket directory " + dir + ": " + std::strerror(errno));
  if (!S_ISDIR(st.st_mode) || st.st_uid != ::geteuid() || (st.st_mode & 077) != 0)
    throw std::runtime_error("socket directory " + dir +
                             " is not a private directory of this user (mode 0700, owned by "
                             "uid " + std::to_string(::geteuid()) + "); refusing to use it");
}

/// The directory for default socket paths: $GMS_SOCKET_DIR as upstream (operator deployments
/// set it), else $XDG_RUNTIME_DIR, else a private per-user folder in the temp dir, never the
/// shared temp dir itself where another user could take the name first.
inline std::string socket_dir() {
  if (const char* d = std::getenv("GMS_SOCKET_DIR"); d && *d) return d;
  if (const char* d = std::getenv("XDG_RUNTIME_DIR"); d && *d) {
    require_private_dir(d);
    return d;
  }
  std::error_code ec;
  auto tmp = std::filesystem::temp_directory_path(ec);
  const std::string dir = (ec ? std::string("/tmp") : tmp.string()) + "/inferwire-gms-" +
                          std::to_string(::geteuid());
  if (::mkdir(dir.c_str(), 0700) != 0 && errno != EEXIST)
    throw std::runtime_error("cannot create socket directory " + dir + ": " + std::strerror(errno));
  require_private_dir(dir);
  return dir;
}

/// The default socket of the server for (`backend`, `device`, `tag`); CUDA devices are named by
/// their UUID, so clients that see the GPU under another ordinal find the same socket.
inline std::string default_socket_path(const std::string& backend, int device, const std::string& tag) {
  const std::string name = backend == "memfd" ? "memfd" + std::to_string(device) : gpu_uuid(device);
  return socket_dir() + "/gms_" + name + "_" + tag + ".sock";
}

}  // namespace inferwire::gms::programs

#endif
