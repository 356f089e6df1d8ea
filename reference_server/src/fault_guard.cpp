// SPDX-License-Identifier: Apache-2.0
#include "fault_guard.hpp"

#include <array>
#include <csignal>
#include <cstdint>
#include <mutex>

#include <sys/mman.h>
#include <unistd.h>

namespace inferwire::server {

namespace {

// The watched ranges, read by the signal handler: plain atomics in fixed arrays, no locks and
// no allocation. A slot is claimed by its flag; its range is published after the claim and
// withdrawn before the release.
struct slot_table {
  std::array<std::atomic<fault_flag*>, fault_watch::capacity> flag{};
  std::array<std::atomic<std::uintptr_t>, fault_watch::capacity> begin{};
  std::array<std::atomic<std::uintptr_t>, fault_watch::capacity> end{};
};
slot_table slots;

struct sigaction previous_action {};
std::uintptr_t page_size = 4096;

void restore_and_raise(int sig) {
  struct sigaction dfl {};
  dfl.sa_handler = SIG_DFL;
  ::sigemptyset(&dfl.sa_mask);
  ::sigaction(sig, &dfl, nullptr);
  ::raise(sig);  // delivered when the handler returns (SIGBUS is blocked inside it)
}

void on_sigbus(int sig, siginfo_t* info, void* context) {
  const auto addr = reinterpret_cast<std::uintptr_t>(info->si_addr);
  for (std::size_t i = 0; i < fault_watch::capacity; ++i) {
    fault_flag* f = slots.flag[i].load(std::memory_order_acquire);
    if (!f) continue;
    const std::uintptr_t b = slots.begin[i].load(std::memory_order_acquire);
    const std::uintptr_t e = slots.end[i].load(std::memory_order_acquire);
    if (addr < b || addr >= e) continue;
    // A private zero page in place of the vanished one: the access completes, reads zeros,
    // and writes go nowhere the client can see.
    void* page = reinterpret_cast<void*>(addr & ~(page_size - 1));
    if (::mmap(page, page_size, PROT_READ | PROT_WRITE, MAP_FIXED | MAP_PRIVATE | MAP_ANONYMOUS,
               -1, 0) == MAP_FAILED)
      break;
    f->hit.store(true, std::memory_order_release);
    return;
  }
  // Not a watched range: whatever SIGBUS did before.
  if ((previous_action.sa_flags & SA_SIGINFO) && previous_action.sa_sigaction) {
    previous_action.sa_sigaction(sig, info, context);
    return;
  }
  if (previous_action.sa_handler == SIG_IGN) return;
  if (previous_action.sa_handler != SIG_DFL && previous_action.sa_handler) {
    previous_action.sa_handler(sig);
    return;
  }
  restore_and_raise(sig);
}

}  // namespace

status fault_flag::check() const {
  if (!hit.load(std::memory_order_acquire)) return {};
  return {errc::internal, "shared memory region '" + quote_input(region) +
                              "' was truncated by its owner while in use; unregister it and "
                              "register it again"};
}

void install_fault_guard() {
  static std::once_flag once;
  std::call_once(once, [] {
    page_size = static_cast<std::uintptr_t>(::sysconf(_SC_PAGESIZE));
    struct sigaction sa {};
    sa.sa_sigaction = on_sigbus;
    sa.sa_flags = SA_SIGINFO | SA_RESTART;
    ::sigemptyset(&sa.sa_mask);
    ::sigaction(SIGBUS, &sa, &previous_action);
  });
}

fault_watch::fault_watch(const void* data, std::size_t size, fault_flag& flag) noexcept {
  install_fault_guard();
  for (std::size_t i = 0; i < capacity; ++i) {
    fault_flag* expected = nullptr;
    if (!slots.flag[i].compare_exchange_strong(expected, &flag, std::memory_order_acq_rel))
      continue;
    const auto b = reinterpret_cast<std::uintptr_t>(data);
    slots.end[i].store(b + size, std::memory_order_release);
    slots.begin[i].store(b, std::memory_order_release);
    slot_ = static_cast<int>(i);
    return;
  }
}

fault_watch::~fault_watch() {
  if (slot_ < 0) return;
  const auto i = static_cast<std::size_t>(slot_);
  slots.begin[i].store(0, std::memory_order_release);
  slots.end[i].store(0, std::memory_order_release);
  slots.flag[i].store(nullptr, std::memory_order_release);
}

}  // namespace inferwire::server
