// SPDX-License-Identifier: Apache-2.0
// inferwire/gms/framing.hpp
//
// GMS framing (gms-protocol §1): a 4-byte unsigned big-endian payload length, then the payload.
// File descriptors travel with SCM_RIGHTS: the sender attaches one fd to the first byte of a
// frame and sends the whole frame in one sendmsg; a receiver reads with recvmsg and room for
// descriptors on every read.
#ifndef INFERWIRE_GMS_FRAMING_HPP
#define INFERWIRE_GMS_FRAMING_HPP

#include <inferwire/gms/codec.hpp>
#include <inferwire/shm/unique_fd.hpp>

#include <cerrno>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <string>
#include <string_view>
#include <vector>

#include <sys/socket.h>
#include <sys/types.h>
#include <unistd.h>

namespace inferwire::gms {

/// Frames declaring more than this are refused (upstream has no limit; gms-protocol §12.1 #5).
inline constexpr std::size_t default_max_frame_size = std::size_t{64} << 20;

/// The 4-byte header of a payload of `size` bytes.
inline std::string frame_header(std::size_t size) {
  const auto n = static_cast<std::uint32_t>(size);
  return {static_cast<char>(n >> 24), static_cast<char>(n >> 16), static_cast<char>(n >> 8),
          static_cast<char>(n)};
}

/// Header and payload of one message.
template <class T>
std::string encode_frame(const T& m) {
  std::string payload = encode(m);
  std::string frame = frame_header(payload.size());
  frame += payload;
  return frame;
}

/// Splits a byte stream into payloads.
class frame_reader {
 public:
  explicit frame_reader(std::size_t max_frame = default_max_frame_size) : max_(max_frame) {}

  void append(const char* data, std::size_t n) { buffer_.append(data, n); }

  enum class result { frame, need_more, too_large };

  /// The next complete payload, if any. After too_large the stream is unusable.
  result next(std::string& payload) {
    if (buffer_.size() - start_ < 4) return compact(), result::need_more;
    const auto* p = reinterpret_cast<const unsigned char*>(buffer_.data() + start_);
    const std::size_t n = (std::size_t{p[0]} << 24) | (std::size_t{p[1]} << 16) |
                          (std::size_t{p[2]} << 8) | std::size_t{p[3]};
    if (n > max_) return result::too_large;
    if (buffer_.size() - start_ - 4 < n) return compact(), result::need_more;
    payload.assign(buffer_, start_ + 4, n);
    start_ += 4 + n;
    if (start_ == buffer_.size()) {
      buffer_.clear();
      start_ = 0;
    }
    return result::frame;
  }

  /// Bytes received but not yet returned as payloads.
  std::size_t buffered() const noexcept { return buffer_.size() - start_; }

 private:
  void compact() {
    if (start_ > 0) {
      buffer_.erase(0, start_);
      start_ = 0;
    }
  }
  std::string buffer_;
  std::size_t start_ = 0;
  std::size_t max_;
};

/// Sends `data` with `fd` attached to its first byte in one sendmsg (MSG_NOSIGNAL). Returns
/// the bytes sent (the ancillary data went with them when > 0), or -1 with errno set.
inline ssize_t send_with_fd(int socket, std::string_view data, int fd) noexcept {
  iovec iov{const_cast<char*>(data.data()), data.size()};
  alignas(cmsghdr) char control[CMSG_SPACE(sizeof(int))] = {};
  msghdr msg{};
  msg.msg_iov = &iov;
  msg.msg_iovlen = 1;
  msg.msg_control = control;
  msg.msg_controllen = sizeof control;
  cmsghdr* c = CMSG_FIRSTHDR(&msg);
  c->cmsg_level = SOL_SOCKET;
  c->cmsg_type = SCM_RIGHTS;
  c->cmsg_len = CMSG_LEN(sizeof(int));
  std::memcpy(CMSG_DATA(c), &fd, sizeof(int));
  ssize_t n;
  do {
    n = ::sendmsg(socket, &msg, MSG_NOSIGNAL);
  } while (n < 0 && errno == EINTR);
  return n;
}

namespace detail {
/// Appends the descriptors (SCM_RIGHTS) that a received message carried to `fds`.
inline void collect_fds(msghdr& msg, std::vector<int>& fds) {
  shm::detail::for_each_received_fd(msg, [&fds](int fd) { fds.push_back(fd); });
}
}  // namespace detail

/// Reads up to `size` bytes with recvmsg, collecting any descriptors that arrive (close-on-exec)
/// into `fds`. Returns the bytes read (0 at end of stream), or -1 with errno set.
inline ssize_t recv_with_fds(int socket, char* buffer, std::size_t size, std::vector<int>& fds,
                             int flags = 0) noexcept {
  iovec iov{buffer, size};
  alignas(cmsghdr) char control[CMSG_SPACE(sizeof(int) * 8)];
  msghdr msg{};
  msg.msg_iov = &iov;
  msg.msg_iovlen = 1;
  msg.msg_control = control;
  msg.msg_controllen = sizeof control;
  ssize_t n;
  do {
    n = ::recvmsg(socket, &msg, flags | MSG_CMSG_CLOEXEC);
  } while (n < 0 && errno == EINTR);
  if (n < 0) return n;
  detail::collect_fds(msg, fds);
  return n;
}

/// Up to `Slots` reads of a stream socket in one recvmmsg: the first waits (as a recvmsg would,
/// SO_RCVTIMEO included), the others take only what has already arrived (MSG_WAITFORONE). Each
/// read is what one recvmsg with room for descriptors would return: it ends right after a
/// segment that carried descriptors, so replies that came with descriptors each get a read of
/// their own, and several of them cost one system call instead of one each.
template <std::size_t Slots, std::size_t SlotSize>
class batched_reader {
 public:
  /// Reads; returns how many reads completed (each may be 0 bytes: end of stream), or -1 with
  /// errno set when the first failed.
  int read(int socket) noexcept {
    for (std::size_t i = 0; i < Slots; ++i) {
      iov_[i] = {data_ + i * SlotSize, SlotSize};
      msgs_[i] = {};
      msgs_[i].msg_hdr.msg_iov = &iov_[i];
      msgs_[i].msg_hdr.msg_iovlen = 1;
      msgs_[i].msg_hdr.msg_control = control_[i];
      msgs_[i].msg_hdr.msg_controllen = sizeof control_[i];
    }
    int n;
    do {
      n = ::recvmmsg(socket, msgs_, static_cast<unsigned>(Slots), MSG_WAITFORONE | MSG_CMSG_CLOEXEC, nullptr);
    } while (n < 0 && errno == EINTR);
    return n;
  }
  /// The bytes of read `i`.
  std::string_view bytes(int i) const noexcept {
    return {data_ + static_cast<std::size_t>(i) * SlotSize, msgs_[i].msg_len};
  }
  /// Appends the descriptors that came with read `i` to `fds` (the caller owns them).
  void take_fds(int i, std::vector<int>& fds) { detail::collect_fds(msgs_[i].msg_hdr, fds); }

 private:
  char data_[Slots * SlotSize];
  iovec iov_[Slots];
  mmsghdr msgs_[Slots];
  alignas(cmsghdr) char control_[Slots][CMSG_SPACE(sizeof(int) * 8)];
};

}  // namespace inferwire::gms

#endif
