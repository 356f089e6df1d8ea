// SPDX-License-Identifier: Apache-2.0
// inferwire/core/message_table.hpp
//
// Error codes that carry a server's message: a code's value holds a small status number and
// the id of its message in this process-wide, bounded table (used by the HTTP and gRPC
// clients' error categories).
#ifndef INFERWIRE_CORE_MESSAGE_TABLE_HPP
#define INFERWIRE_CORE_MESSAGE_TABLE_HPP

#include <array>
#include <cstdint>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>

namespace inferwire::detail {

// Messages live in a bounded table shared by the process;
// equal messages share an id, and when more than `table_size` distinct messages have been
// seen, the oldest are forgotten (their codes then read as the bare status).
class message_table {
 public:
  static constexpr int id_bits = 20;
  static constexpr std::uint32_t id_mask = (1u << id_bits) - 1;
  static constexpr std::size_t table_size = 4096;

  static message_table& instance() {
    static message_table m;
    return m;
  }

  /// The value of a code that carries `status` and `text`: status << id_bits | id(text).
  static int code_value(std::uint32_t status, std::string_view text) {
    const std::uint32_t id = text.empty() ? 0 : instance().intern(text);
    return static_cast<int>((status << id_bits) | id);
  }
  /// The status a code value carries.
  static std::uint32_t status_of(int value) noexcept { return static_cast<std::uint32_t>(value) >> id_bits; }
  /// The text a code value carries, unless it was never set or has been forgotten.
  static std::optional<std::string> text_of(int value) {
    std::string text;
    if (!instance().lookup(static_cast<std::uint32_t>(value) & id_mask, text)) return std::nullopt;
    return text;
  }

  std::uint32_t intern(std::string_view message) {
    std::lock_guard lock(mutex_);
    if (auto it = ids_.find(std::string(message)); it != ids_.end()) return it->second;
    std::uint32_t id = next_;
    next_ = (next_ + 1) & id_mask;
    if (next_ == 0) next_ = 1;  // 0 means "no message"
    auto& slot = slots_[id % table_size];
    if (slot.id != 0) ids_.erase(slot.text);
    slot.id = id;
    slot.text.assign(message);
    ids_.emplace(slot.text, id);
    return id;
  }

  bool lookup(std::uint32_t id, std::string& out) const {
    if (id == 0) return false;
    std::lock_guard lock(mutex_);
    const auto& slot = slots_[id % table_size];
    if (slot.id != id) return false;
    out = slot.text;
    return true;
  }

 private:
  struct slot_t {
    std::uint32_t id = 0;
    std::string text;
  };
  mutable std::mutex mutex_;
  std::array<slot_t, table_size> slots_{};
  std::unordered_map<std::string, std::uint32_t> ids_;
  std::uint32_t next_ = 1;
};

}  // namespace inferwire::detail

#endif
