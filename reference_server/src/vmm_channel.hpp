// SPDX-License-Identifier: Apache-2.0
// The server's CUDA VMM socket (docs/shared-memory.md, "CUDA VMM regions"): a Unix socket on
// which local clients hand over the POSIX descriptors of their VMM chunks (SCM_RIGHTS). Each
// deposit is imported and mapped by a vmm_importer and kept in the shm_registry until a CUDA
// register call claims it with the handle the socket replied; a connection that closes
// releases what it deposited and unregisters what it registered.
//
// Rules (the same trust as --allow-client-shm, which must be on for the socket to exist): the
// socket file is mode 0600 and a peer whose credentials (SO_PEERCRED) `permitted` refuses is
// told so and disconnected; every frame, descriptor count and chunk is bounded; a descriptor
// the importer cannot use is an error reply, and every descriptor received is closed once the
// deposit is imported or refused.
#pragma once

#include "shm_registry.hpp"

#include <inferwire/core/error.hpp>
#include <inferwire/shm/unique_fd.hpp>
#include <inferwire/shm/vmm_channel.hpp>

#include <chrono>
#include <cstddef>
#include <functional>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include <sys/socket.h>

namespace inferwire::server {

/// Imports a deposit's chunks and maps them contiguously. Throws std::exception with a text
/// for the client (not a CUDA handle, wrong device, sizes, ...).
class vmm_importer {
 public:
  virtual ~vmm_importer() = default;
  virtual std::unique_ptr<vmm_mapping> import(const shm::vmm_layout& layout,
                                              std::vector<shm::unique_fd>& fds) = 0;
};

/// The CUDA driver's importer (cuMemImportFromShareableHandle, one VA reservation, cuMemMap
/// per chunk, read-write access for the device). Without a GPU it refuses every deposit with
/// the reason.
std::unique_ptr<vmm_importer> make_cuda_vmm_importer();

struct vmm_channel_options {
  std::string path;
  /// Whether a peer may use the socket; default: the server's own user, or root.
  std::function<bool(const ucred&)> permitted;
  std::size_t max_connections = 64;
  std::size_t max_pending = 16;  ///< deposits of one connection awaiting registration
  /// Descriptors all connections may hold in deposits not yet complete.
  std::size_t max_held_fds = 2 * shm::vmm_max_chunks;
  /// How long a deposit may take from its first byte to its last.
  std::chrono::milliseconds frame_timeout{10000};
};

class vmm_channel {
 public:
  vmm_channel(shm_registry& registry, vmm_importer& importer, vmm_channel_options options);
  ~vmm_channel();
  vmm_channel(const vmm_channel&) = delete;
  vmm_channel& operator=(const vmm_channel&) = delete;

  /// Binds the socket (replacing a stale one nobody listens on) and starts serving it on a
  /// thread of its own.
  status start();
  /// Stops serving, closes every connection (their regions are unregistered) and removes the
  /// socket file.
  void stop();

 private:
  struct connection;
  void run();
  void accept_one();
  bool read_some(connection& c);  // false: close it
  std::size_t held_fds() const;
  bool handle_frame(connection& c);
  bool reply(connection& c, char type, std::string_view body);
  void close(connection& c);

  shm_registry& registry_;
  vmm_importer& importer_;
  vmm_channel_options opts_;
  shm::unique_fd listener_;
  shm::unique_fd wake_;  // eventfd: stop()
  dev_t dev_ = 0;
  ino_t ino_ = 0;
  std::vector<std::unique_ptr<connection>> connections_;
  std::uint64_t next_id_ = 1;
  std::thread thread_;
};

}  // namespace inferwire::server
