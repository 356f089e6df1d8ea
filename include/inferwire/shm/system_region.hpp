// SPDX-License-Identifier: Apache-2.0
// inferwire/shm/system_region.hpp
//
// POSIX shared-memory regions for the system shared-memory extension: create or open a named
// object (`shm_open`), map it, unlink it, all RAII.
//
//   auto region = inferwire::shm::system_region::create("/input_simple", 128);
//   std::memcpy(region.data(), input0.data(), 64);
//   client.register_system_shared_memory(region.register_request("input_data"));
//   request.inputs.push_back(v2::make_shm_input("INPUT0", data_type::int32, {1, 16},
//                                               {"input_data", 0, 64}));
//
// The server maps the same object by its key, so both processes must see the same /dev/shm:
// the same host (or container) and, for containers, a shared IPC namespace (`--ipc=host`) or a
// shared /dev/shm volume. Errors say so.
#ifndef INFERWIRE_SHM_SYSTEM_REGION_HPP
#define INFERWIRE_SHM_SYSTEM_REGION_HPP

#include <inferwire/v2/types.hpp>

#include <cerrno>
#include <cstddef>
#include <cstring>
#include <span>
#include <stdexcept>
#include <string>
#include <string_view>
#include <system_error>
#include <utility>

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

namespace inferwire::shm {

/// Whether `key` is a portable POSIX shared-memory name: "/" then 1-254 characters, none of
/// them '/'.
inline bool valid_key(std::string_view key) noexcept {
  return key.size() >= 2 && key.size() <= 255 && key[0] == '/' &&
         key.find('/', 1) == std::string_view::npos;
}

namespace detail {
[[noreturn]] inline void throw_errno(int err, const std::string& what) {
  std::string hint;
  switch (err) {
    case ENOENT:
      hint = " (no such object: it was never created, was unlinked, or lives in another IPC "
             "namespace; a container needs --ipc=host or a /dev/shm shared with the other "
             "process)";
      break;
    case EACCES:
    case EPERM:
      hint = " (permission denied: the object belongs to another user, or /dev/shm is "
             "mounted read-only)";
      break;
    case EEXIST: hint = " (an object with this key exists; pick another key or unlink it)"; break;
    case ENOSPC:
    case ENOMEM:
      hint = " (out of shared memory: /dev/shm is full or too small; containers default to "
             "64 MiB, raise it with --shm-size)";
      break;
    case ENOSYS:
    case ENODEV: hint = " (/dev/shm is not mounted on this system)"; break;
    default: break;
  }
  throw std::system_error(err, std::generic_category(), what + hint);
}
}  // namespace detail

/// A mapped POSIX shared-memory object. Move-only; unmaps when destroyed, and unlinks the
/// object too when this process created it (unless release_ownership() was called).
class system_region {
 public:
  system_region() = default;

  /// Creates `key` with `size` bytes (fails if it exists) and maps all of it, zero-filled.
  static system_region create(std::string key, std::size_t size) {
    check_key(key);
    if (size == 0) throw std::invalid_argument("shared memory region size must be > 0");
    int fd = ::shm_open(key.c_str(), O_RDWR | O_CREAT | O_EXCL, 0600);
    if (fd < 0) detail::throw_errno(errno, "shm_open('" + key + "', O_CREAT)");
    if (::ftruncate(fd, static_cast<off_t>(size)) != 0) {
      int err = errno;
      ::close(fd);
      ::shm_unlink(key.c_str());
      detail::throw_errno(err, "ftruncate('" + key + "', " + std::to_string(size) + ")");
    }
    system_region r;
    r.key_ = std::move(key);
    r.owner_ = true;
    r.map(fd, size);
    return r;
  }

  /// Opens an existing object and maps all of it.
  static system_region open(std::string key) {
    check_key(key);
    int fd = ::shm_open(key.c_str(), O_RDWR, 0);
    if (fd < 0) detail::throw_errno(errno, "shm_open('" + key + "')");
    struct stat st {};
    if (::fstat(fd, &st) != 0) {
      int err = errno;
      ::close(fd);
      detail::throw_errno(err, "fstat('" + key + "')");
    }
    if (st.st_size <= 0) {
      ::close(fd);
      throw std::invalid_argument("shared memory object '" + key + "' is empty");
    }
    system_region r;
    r.key_ = std::move(key);
    r.map(fd, static_cast<std::size_t>(st.st_size));
    return r;
  }

  system_region(system_region&& o) noexcept { swap(o); }
  system_region& operator=(system_region&& o) noexcept {
    if (this != &o) {
      system_region(std::move(o)).swap(*this);
    }
    return *this;
  }
  system_region(const system_region&) = delete;
  system_region& operator=(const system_region&) = delete;
  ~system_region() {
    if (data_) ::munmap(data_, size_);
    if (owner_) ::shm_unlink(key_.c_str());
  }

  std::byte* data() const noexcept { return static_cast<std::byte*>(data_); }
  std::size_t size() const noexcept { return size_; }
  const std::string& key() const noexcept { return key_; }
  std::span<std::byte> bytes() const noexcept { return {data(), size_}; }
  explicit operator bool() const noexcept { return data_ != nullptr; }

  /// `count` elements of T at byte `offset` (bounds-checked; offset must suit T's alignment).
  template <class T>
  std::span<T> as(std::size_t offset, std::size_t count) const {
    if (offset > size_ || count > (size_ - offset) / sizeof(T))
      throw std::out_of_range("span past the end of shared memory region '" + key_ + "'");
    if (offset % alignof(T) != 0)
      throw std::invalid_argument("misaligned offset in shared memory region '" + key_ + "'");
    return {reinterpret_cast<T*>(data() + offset), count};
  }

  /// Copies `src` to byte `offset`.
  void write(std::size_t offset, std::span<const std::byte> src) const {
    if (offset > size_ || src.size() > size_ - offset)
      throw std::out_of_range("write past the end of shared memory region '" + key_ + "'");
    if (!src.empty()) std::memcpy(data() + offset, src.data(), src.size());
  }

  /// The request that registers bytes [offset, offset + byte_size) of this object as region
  /// `name` (all of it by default). The server requires a page-aligned offset.
  v2::system_shm_register_request register_request(std::string name, std::size_t offset = 0,
                                                   std::size_t byte_size = 0) const {
    return {std::move(name), key_, offset, byte_size ? byte_size : size_ - offset};
  }

  /// Removes the name now (mappings stay valid); the destructor then does not unlink.
  void unlink() {
    if (::shm_unlink(key_.c_str()) != 0 && errno != ENOENT)
      detail::throw_errno(errno, "shm_unlink('" + key_ + "')");
    owner_ = false;
  }
  /// Keeps the object after this handle is destroyed.
  void release_ownership() noexcept { owner_ = false; }
  bool owner() const noexcept { return owner_; }

  void swap(system_region& o) noexcept {
    std::swap(data_, o.data_);
    std::swap(size_, o.size_);
    std::swap(key_, o.key_);
    std::swap(owner_, o.owner_);
  }

 private:
  static void check_key(const std::string& key) {
    if (!valid_key(key))
      throw std::invalid_argument("invalid shared memory key '" + key +
                                  "': it must be '/' followed by 1-254 characters other than '/'");
  }
  void map(int fd, std::size_t size) {
    void* p = ::mmap(nullptr, size, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    int err = errno;
    ::close(fd);
    if (p == MAP_FAILED) {
      if (owner_) ::shm_unlink(key_.c_str());
      detail::throw_errno(err, "mmap('" + key_ + "', " + std::to_string(size) + " bytes)");
    }
    data_ = p;
    size_ = size;
  }

  void* data_ = nullptr;
  std::size_t size_ = 0;
  std::string key_;
  bool owner_ = false;
};

}  // namespace inferwire::shm

#endif
