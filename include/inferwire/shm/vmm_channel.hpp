// SPDX-License-Identifier: Apache-2.0
// inferwire/shm/vmm_channel.hpp
//
// CUDA shared memory from VMM allocations (cuMemCreate + cuMemMap: PyTorch's expandable
// segments, GMS mappings), which have no legacy CUDA IPC handle. The client hands the server
// one POSIX file descriptor per physical chunk over a Unix socket (SCM_RIGHTS), gets back a
// 64-byte handle, and registers the region with it through the usual CUDA register endpoints
// (HTTP or gRPC), in place of a cudaIpcMemHandle_t:
//
//   auto channel = inferwire::shm::vmm_channel::connect("/tmp/inferwire-cuda-vmm.sock");
//   std::string handle = channel.deposit(layout, fds);   // fds: one per chunk, kept by the caller
//   client.register_cuda_shared_memory({"input_data", handle, layout.device, layout.byte_size});
//
// The region stays registered while the channel is open: closing it (or the process ending)
// unregisters it. `register_vmm_region()` does the three steps and returns an object that owns
// the channel; <inferwire/shm/cuda_vmm_region.hpp> finds the chunks of a device pointer range.
//
// This header is the wire format (docs/shared-memory.md, "CUDA VMM regions") and the client's
// side; it needs no CUDA. All integers are little-endian.
//
//   frame    = u32 payload length, payload
//   deposit  = 'D', u8 version (1), u16 0, i32 device, u32 chunk count, u32 0, u64 offset of
//              the region in the first chunk, u64 region byte size, u64 chunk size x chunk count;
//              the chunk descriptors travel with the frame's bytes, in order, at most
//              `vmm_fds_per_message` per sendmsg
//   reply    = 'H', 64-byte handle | 'E', UTF-8 error text
//   handle   = "IWVMMFD1", 16-byte token, u64 byte size, i32 device, u32 chunk count, 24 zero bytes
#ifndef INFERWIRE_SHM_VMM_CHANNEL_HPP
#define INFERWIRE_SHM_VMM_CHANNEL_HPP

#include <inferwire/shm/unique_fd.hpp>
#include <inferwire/v2/types.hpp>

#include <algorithm>
#include <array>
#include <cerrno>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <optional>
#include <span>
#include <stdexcept>
#include <string>
#include <string_view>
#include <system_error>
#include <utility>
#include <vector>

#include <sys/socket.h>
#include <sys/time.h>
#include <sys/un.h>
#include <unistd.h>

namespace inferwire::shm {

/// The server's socket when `--cuda-vmm-socket` is not given.
inline constexpr std::string_view default_cuda_vmm_socket = "/tmp/inferwire-cuda-vmm.sock";
/// The server metadata extension that says a server takes these regions.
inline constexpr std::string_view cuda_vmm_extension = "inferwire_cuda_vmm_shared_memory";
/// The handle's size: that of a cudaIpcMemHandle_t, so it travels where one does.
inline constexpr std::size_t vmm_handle_size = 64;
/// The most chunks one region may have (20 GiB in PyTorch's 20 MiB expandable-segment pages).
inline constexpr std::size_t vmm_max_chunks = 1024;
/// Descriptors attached to one sendmsg (the kernel's limit is 253).
inline constexpr std::size_t vmm_fds_per_message = 64;
/// The largest frame either side accepts.
inline constexpr std::size_t vmm_max_frame = 32 + 8 * vmm_max_chunks;

/// Where a region lies in its chunks: the chunks are mapped one after the other, and the
/// region is [offset, offset + byte_size) of that range.
struct vmm_layout {
  int device = 0;
  std::uint64_t offset = 0;
  std::uint64_t byte_size = 0;
  std::vector<std::uint64_t> chunk_sizes;

  /// The sum of the chunk sizes (0 when it overflows).
  std::uint64_t mapped_size() const noexcept {
    std::uint64_t total = 0;
    for (auto s : chunk_sizes) {
      if (s > UINT64_MAX - total) return 0;
      total += s;
    }
    return total;
  }
  /// Why the layout cannot describe a region ("" when it can).
  std::string check() const {
    if (device < 0) return "the device must be a CUDA ordinal (>= 0), not " + std::to_string(device);
    if (chunk_sizes.empty()) return "a region needs at least one chunk";
    if (chunk_sizes.size() > vmm_max_chunks)
      return "too many chunks: " + std::to_string(chunk_sizes.size()) + " (at most " +
             std::to_string(vmm_max_chunks) + ")";
    for (std::size_t i = 0; i < chunk_sizes.size(); ++i)
      if (chunk_sizes[i] == 0) return "chunk " + std::to_string(i) + " has size 0";
    const std::uint64_t total = mapped_size();
    if (total == 0) return "the chunk sizes overflow";
    if (byte_size == 0) return "the region's byte size must be > 0";
    if (offset >= chunk_sizes.front())
      return "the region must start in its first chunk (offset " + std::to_string(offset) +
             ", first chunk " + std::to_string(chunk_sizes.front()) + " bytes)";
    if (byte_size > total - offset)
      return "the region (offset " + std::to_string(offset) + ", " + std::to_string(byte_size) +
             " bytes) does not fit in its chunks (" + std::to_string(total) + " bytes)";
    return {};
  }
};

/// The decoded 64-byte handle.
struct vmm_handle {
  std::array<unsigned char, 16> token{};
  std::uint64_t byte_size = 0;
  int device = 0;
  std::uint32_t chunks = 0;

  static constexpr std::string_view magic = "IWVMMFD1";

  std::string encode() const;
  /// The handle in `bytes`, or nothing when they are not one of ours (a cudaIpcMemHandle_t).
  static std::optional<vmm_handle> decode(std::string_view bytes) noexcept;
};

/// Whether `raw_handle` of a CUDA registration is a VMM handle rather than a legacy IPC handle.
inline bool is_vmm_handle(std::string_view raw_handle) noexcept {
  return raw_handle.size() == vmm_handle_size && raw_handle.substr(0, 8) == vmm_handle::magic;
}

namespace detail {

inline void put_le(std::string& out, std::uint64_t v, int bytes) {
  for (int i = 0; i < bytes; ++i) out.push_back(static_cast<char>((v >> (8 * i)) & 0xff));
}
inline std::uint64_t get_le(std::string_view in, std::size_t at, int bytes) noexcept {
  std::uint64_t v = 0;
  for (int i = 0; i < bytes; ++i)
    v |= std::uint64_t{static_cast<unsigned char>(in[at + static_cast<std::size_t>(i)])} << (8 * i);
  return v;
}

}  // namespace detail

inline std::string vmm_handle::encode() const {
  std::string out(magic);
  out.append(reinterpret_cast<const char*>(token.data()), token.size());
  detail::put_le(out, byte_size, 8);
  detail::put_le(out, static_cast<std::uint32_t>(device), 4);
  detail::put_le(out, chunks, 4);
  out.resize(vmm_handle_size, '\0');
  return out;
}

inline std::optional<vmm_handle> vmm_handle::decode(std::string_view b) noexcept {
  if (!is_vmm_handle(b)) return std::nullopt;
  for (std::size_t i = 40; i < vmm_handle_size; ++i)
    if (b[i] != '\0') return std::nullopt;
  vmm_handle h;
  std::memcpy(h.token.data(), b.data() + 8, h.token.size());
  h.byte_size = detail::get_le(b, 24, 8);
  h.device = static_cast<int>(static_cast<std::int32_t>(detail::get_le(b, 32, 4)));
  h.chunks = static_cast<std::uint32_t>(detail::get_le(b, 36, 4));
  return h;
}

/// The deposit payload of `layout` (no frame header).
inline std::string encode_deposit(const vmm_layout& layout) {
  std::string out;
  out.reserve(32 + 8 * layout.chunk_sizes.size());
  out.push_back('D');
  out.push_back('\x01');
  detail::put_le(out, 0, 2);
  detail::put_le(out, static_cast<std::uint32_t>(layout.device), 4);
  detail::put_le(out, layout.chunk_sizes.size(), 4);
  detail::put_le(out, 0, 4);
  detail::put_le(out, layout.offset, 8);
  detail::put_le(out, layout.byte_size, 8);
  for (auto s : layout.chunk_sizes) detail::put_le(out, s, 8);
  return out;
}

/// Decodes and checks a deposit payload; on failure returns false with the reason in `why`.
inline bool decode_deposit(std::string_view p, vmm_layout& out, std::string& why) {
  if (p.size() < 32 || p[0] != 'D') return why = "not a deposit message", false;
  if (p[1] != '\x01') return why = "unknown deposit version " + std::to_string(static_cast<unsigned char>(p[1])), false;
  if (detail::get_le(p, 2, 2) != 0 || detail::get_le(p, 12, 4) != 0) return why = "reserved deposit bits are set", false;
  const auto count = detail::get_le(p, 8, 4);
  if (count > vmm_max_chunks)
    return why = "too many chunks: " + std::to_string(count) + " (at most " + std::to_string(vmm_max_chunks) + ")",
           false;
  if (p.size() != 32 + 8 * count)
    return why = "a deposit of " + std::to_string(count) + " chunks has " + std::to_string(32 + 8 * count) +
                 " bytes, not " + std::to_string(p.size()),
           false;
  out.device = static_cast<int>(static_cast<std::int32_t>(detail::get_le(p, 4, 4)));
  out.offset = detail::get_le(p, 16, 8);
  out.byte_size = detail::get_le(p, 24, 8);
  out.chunk_sizes.resize(count);
  for (std::size_t i = 0; i < count; ++i) out.chunk_sizes[i] = detail::get_le(p, 32 + 8 * i, 8);
  why = out.check();
  return why.empty();
}

/// A frame: the payload's length, then the payload.
inline std::string vmm_frame(std::string_view payload) {
  std::string out;
  detail::put_le(out, payload.size(), 4);
  out.append(payload);
  return out;
}

namespace detail {

/// Sends `frame` with `fds` attached in order, at most vmm_fds_per_message per sendmsg (the
/// frame's bytes are split so that each piece carries its share).
inline void send_with_fds(int socket, std::string_view frame, std::span<const int> fds) {
  const std::size_t groups = std::max<std::size_t>(1, (fds.size() + vmm_fds_per_message - 1) / vmm_fds_per_message);
  if (frame.size() < groups) throw std::invalid_argument("a frame too short for its descriptors");
  std::size_t sent = 0;
  for (std::size_t g = 0; g < groups; ++g) {
    const std::size_t end = g + 1 == groups ? frame.size() : frame.size() * (g + 1) / groups;
    const std::size_t first_fd = std::min(fds.size(), g * vmm_fds_per_message);
    const auto group = fds.subspan(first_fd, std::min(vmm_fds_per_message, fds.size() - first_fd));
    alignas(cmsghdr) char control[CMSG_SPACE(sizeof(int) * vmm_fds_per_message)] = {};
    bool first = true;
    while (sent < end) {
      iovec iov{const_cast<char*>(frame.data() + sent), end - sent};
      msghdr msg{};
      msg.msg_iov = &iov;
      msg.msg_iovlen = 1;
      if (first && !group.empty()) {
        msg.msg_control = control;
        msg.msg_controllen = CMSG_SPACE(sizeof(int) * group.size());
        cmsghdr* c = CMSG_FIRSTHDR(&msg);
        c->cmsg_level = SOL_SOCKET;
        c->cmsg_type = SCM_RIGHTS;
        c->cmsg_len = CMSG_LEN(sizeof(int) * group.size());
        std::memcpy(CMSG_DATA(c), group.data(), sizeof(int) * group.size());
      }
      const ssize_t n = ::sendmsg(socket, &msg, MSG_NOSIGNAL);
      if (n < 0) {
        if (errno == EINTR) continue;
        throw std::system_error(errno, std::generic_category(), "sending to the CUDA VMM socket");
      }
      sent += static_cast<std::size_t>(n);
      first = false;
    }
  }
}

}  // namespace detail

/// The error the server replied with ("E" reply), or a failure of the socket itself.
class vmm_channel_error : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

/// The client's end of the server's CUDA VMM socket. Move-only; closing it unregisters every
/// region registered with a handle it deposited.
class vmm_channel {
 public:
  vmm_channel() = default;

  /// Connects to the server's socket (`--cuda-vmm-socket`; `default_cuda_vmm_socket` unless
  /// the server was told otherwise). Replies are awaited for at most `timeout_ms`.
  static vmm_channel connect(std::string_view path = default_cuda_vmm_socket, int timeout_ms = 60000) {
    sockaddr_un addr{};
    addr.sun_family = AF_UNIX;
    if (path.empty() || path.size() >= sizeof addr.sun_path)
      throw std::invalid_argument("CUDA VMM socket path '" + std::string(path) + "' is empty or too long");
    std::memcpy(addr.sun_path, path.data(), path.size());
    vmm_channel c;
    c.fd_.reset(::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0));
    if (!c.fd_) throw std::system_error(errno, std::generic_category(), "socket");
    timeval tv{timeout_ms / 1000, static_cast<suseconds_t>((timeout_ms % 1000) * 1000)};
    ::setsockopt(c.fd_.get(), SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
    ::setsockopt(c.fd_.get(), SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof tv);
    int rc;
    do {
      rc = ::connect(c.fd_.get(), reinterpret_cast<const sockaddr*>(&addr), sizeof addr);
    } while (rc != 0 && errno == EINTR);
    if (rc != 0) {
      const int e = errno;
      throw std::system_error(e, std::generic_category(),
                              "connecting to the server's CUDA VMM socket '" + std::string(path) +
                                  "' (is the server local, started with --allow-client-shm=true, and "
                                  "is --cuda-vmm-socket this path?)");
    }
    return c;
  }

  /// Hands the chunks' descriptors (one per chunk of `layout`, in order; the caller keeps
  /// its own) to the server, which imports and maps them; returns the 64-byte handle to
  /// register. Throws vmm_channel_error with the server's reason when it refuses.
  std::string deposit(const vmm_layout& layout, std::span<const int> fds) {
    if (!fd_) throw std::logic_error("the CUDA VMM channel is closed");
    if (auto why = layout.check(); !why.empty()) throw std::invalid_argument("CUDA VMM region: " + why);
    if (fds.size() != layout.chunk_sizes.size())
      throw std::invalid_argument("CUDA VMM region: " + std::to_string(layout.chunk_sizes.size()) +
                                  " chunks need as many descriptors, not " + std::to_string(fds.size()));
    try {
      detail::send_with_fds(fd_.get(), vmm_frame(encode_deposit(layout)), fds);
    } catch (const std::system_error& e) {
      // A server that refuses a connection (one too many, a user it does not accept) writes
      // why and closes it, possibly before the deposit is sent: its reason, when it came,
      // says more than the broken pipe.
      if (e.code().value() != EPIPE && e.code().value() != ECONNRESET) throw;
      std::string refusal;
      try {
        refusal = read_frame();
      } catch (const vmm_channel_error&) {
        throw e;
      }
      fd_.reset();
      if (!refusal.empty() && refusal[0] == 'E') throw vmm_channel_error(refusal.substr(1));
      throw;
    }
    const std::string reply = read_frame();
    if (reply.size() == 1 + vmm_handle_size && reply[0] == 'H') return reply.substr(1);
    if (!reply.empty() && reply[0] == 'E') throw vmm_channel_error(reply.substr(1));
    throw vmm_channel_error("the CUDA VMM socket replied with an unknown message");
  }

  /// The socket (e.g. to poll it); -1 when closed.
  int native_handle() const noexcept { return fd_.get(); }
  explicit operator bool() const noexcept { return static_cast<bool>(fd_); }
  /// Closes the channel: the server unregisters the regions registered through it.
  void close() noexcept { fd_.reset(); }

 private:
  std::string read_frame() {
    std::string buffer;
    auto need = [&](std::size_t n) {
      while (buffer.size() < n) {
        char chunk[512];
        const ssize_t r = ::recv(fd_.get(), chunk, std::min(sizeof chunk, n - buffer.size()), 0);
        if (r > 0) {
          buffer.append(chunk, static_cast<std::size_t>(r));
          continue;
        }
        if (r < 0 && errno == EINTR) continue;
        const int e = r == 0 ? ECONNRESET : errno;
        fd_.reset();
        throw vmm_channel_error(std::string("the CUDA VMM socket ") +
                                (r == 0 ? "was closed by the server"
                                        : e == EAGAIN || e == EWOULDBLOCK ? "timed out waiting for the reply"
                                                                           : std::system_category().message(e)));
      }
    };
    need(4);
    const std::size_t size = detail::get_le(buffer, 0, 4);
    if (size > vmm_max_frame) {
      fd_.reset();
      throw vmm_channel_error("the CUDA VMM socket replied with a frame of " + std::to_string(size) + " bytes");
    }
    need(4 + size);
    return buffer.substr(4);
  }

  unique_fd fd_;
};

/// A CUDA region registered from VMM chunks: it owns the channel, so the region stays
/// registered while this object lives (or until unregistered by name).
class vmm_registration {
 public:
  vmm_registration() = default;
  vmm_registration(vmm_channel channel, v2::cuda_shm_register_request request)
      : channel_(std::move(channel)), request_(std::move(request)) {}

  const std::string& name() const noexcept { return request_.name; }
  /// What was registered (the handle, the device, the size).
  const v2::cuda_shm_register_request& request() const noexcept { return request_; }
  vmm_channel& channel() noexcept { return channel_; }
  /// Ends the registration now (the server unregisters the region when the channel closes).
  void release() noexcept { channel_.close(); }

 private:
  vmm_channel channel_;
  v2::cuda_shm_register_request request_;
};

/// Deposits the chunks and registers the region as `name` through `client` (inferwire's HTTP
/// or gRPC client, or anything with register_cuda_shared_memory(request)).
template <class Client>
vmm_registration register_vmm_region(Client& client, std::string name, const vmm_layout& layout,
                                     std::span<const int> fds,
                                     std::string_view socket_path = default_cuda_vmm_socket) {
  auto channel = vmm_channel::connect(socket_path);
  v2::cuda_shm_register_request q{std::move(name), channel.deposit(layout, fds),
                                  static_cast<std::uint64_t>(layout.device), layout.byte_size};
  client.register_cuda_shared_memory(q);
  return {std::move(channel), std::move(q)};
}

}  // namespace inferwire::shm

#endif
