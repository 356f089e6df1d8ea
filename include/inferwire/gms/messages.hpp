// SPDX-License-Identifier: Apache-2.0
// inferwire/gms/messages.hpp
//
// Every message of the GPU Memory Service protocol v2 (gms-protocol §2) as a plain value type.
// Each type names its wire tag, its upstream class name (which appears in error strings) and
// its fields in declaration order through `fields(visitor)`: the codec encodes them in that
// order and decodes them by name. A field declared `defaulted` may be missing on decode.
#ifndef INFERWIRE_GMS_MESSAGES_HPP
#define INFERWIRE_GMS_MESSAGES_HPP

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <variant>
#include <vector>

namespace inferwire::gms {

/// The lock a client asks for.
enum class requested_lock_type { rw, ro, rw_or_ro };
/// The lock a server grants.
enum class granted_lock_type { rw, ro };

constexpr std::string_view to_string(requested_lock_type t) noexcept {
  switch (t) {
    case requested_lock_type::rw: return "rw";
    case requested_lock_type::ro: return "ro";
    case requested_lock_type::rw_or_ro: return "rw_or_ro";
  }
  return "";
}
constexpr std::string_view to_string(granted_lock_type t) noexcept {
  return t == granted_lock_type::rw ? "rw" : "ro";
}

/// Raw bytes carried as msgpack bin (never str).
struct bytes {
  std::string data;
  friend bool operator==(const bytes&, const bytes&) = default;
};

/// Marks a field that may be absent on decode (it keeps its default value).
inline constexpr bool defaulted = true;

#define INFERWIRE_GMS_MESSAGE(type_name, wire_tag, class_text)                   \
  static constexpr std::string_view type_tag = wire_tag;                            \
  static constexpr std::string_view class_name = class_text;                     \
  friend bool operator==(const type_name&, const type_name&) = default

// --- 2.1 Session / lock ----------------------------------------------------------------------

struct handshake_request {
  INFERWIRE_GMS_MESSAGE(handshake_request, "handshake_request", "HandshakeRequest");
  requested_lock_type lock_type = requested_lock_type::rw;
  std::optional<std::int64_t> timeout_ms;
  template <class V> void fields(V&& v) {
    v("lock_type", lock_type);
    v("timeout_ms", timeout_ms, defaulted);
  }
};

struct handshake_response {
  INFERWIRE_GMS_MESSAGE(handshake_response, "handshake_response", "HandshakeResponse");
  bool success = false;
  bool committed = false;
  std::optional<inferwire::gms::granted_lock_type> granted_lock_type;
  template <class V> void fields(V&& v) {
    v("success", success);
    v("committed", committed);
    v("granted_lock_type", granted_lock_type, defaulted);
  }
};

struct commit_request {
  INFERWIRE_GMS_MESSAGE(commit_request, "commit_request", "CommitRequest");
  template <class V> void fields(V&&) {}
};

struct commit_response {
  INFERWIRE_GMS_MESSAGE(commit_response, "commit_response", "CommitResponse");
  bool success = false;
  template <class V> void fields(V&& v) { v("success", success); }
};

struct get_lock_state_request {
  INFERWIRE_GMS_MESSAGE(get_lock_state_request, "get_lock_state_request", "GetLockStateRequest");
  template <class V> void fields(V&&) {}
};

struct get_lock_state_response {
  INFERWIRE_GMS_MESSAGE(get_lock_state_response, "get_lock_state_response",
                        "GetLockStateResponse");
  std::string state;
  bool has_rw_session = false;
  std::int64_t ro_session_count = 0;
  std::int64_t waiting_writers = 0;
  bool committed = false;
  bool is_ready = false;
  template <class V> void fields(V&& v) {
    v("state", state);
    v("has_rw_session", has_rw_session);
    v("ro_session_count", ro_session_count);
    v("waiting_writers", waiting_writers);
    v("committed", committed);
    v("is_ready", is_ready);
  }
};

struct get_allocation_state_request {
  INFERWIRE_GMS_MESSAGE(get_allocation_state_request, "get_allocation_state_request",
                        "GetAllocationStateRequest");
  template <class V> void fields(V&&) {}
};

struct get_allocation_state_response {
  INFERWIRE_GMS_MESSAGE(get_allocation_state_response, "get_allocation_state_response",
                        "GetAllocationStateResponse");
  std::int64_t allocation_count = 0;
  template <class V> void fields(V&& v) { v("allocation_count", allocation_count); }
};

struct get_state_hash_request {
  INFERWIRE_GMS_MESSAGE(get_state_hash_request, "get_memory_layout_hash_request",
                        "GetStateHashRequest");
  template <class V> void fields(V&&) {}
};

struct get_state_hash_response {
  INFERWIRE_GMS_MESSAGE(get_state_hash_response, "get_memory_layout_hash_response",
                        "GetStateHashResponse");
  std::string memory_layout_hash;
  template <class V> void fields(V&& v) { v("memory_layout_hash", memory_layout_hash); }
};

struct error_response {
  INFERWIRE_GMS_MESSAGE(error_response, "error_response", "ErrorResponse");
  std::string error;
  std::int64_t code = 0;
  template <class V> void fields(V&& v) {
    v("error", error);
    v("code", code, defaulted);
  }
};

// --- 2.2 Allocations -------------------------------------------------------------------------

struct allocate_request {
  INFERWIRE_GMS_MESSAGE(allocate_request, "allocate_request", "AllocateRequest");
  std::int64_t size = 0;
  std::string tag = "default";
  template <class V> void fields(V&& v) {
    v("size", size);
    v("tag", tag, defaulted);
  }
};

struct allocate_response {
  INFERWIRE_GMS_MESSAGE(allocate_response, "allocate_response", "AllocateResponse");
  std::string allocation_id;
  std::int64_t size = 0;
  std::int64_t aligned_size = 0;
  std::int64_t layout_slot = 0;
  template <class V> void fields(V&& v) {
    v("allocation_id", allocation_id);
    v("size", size);
    v("aligned_size", aligned_size);
    v("layout_slot", layout_slot);
  }
};

struct export_allocation_request {
  INFERWIRE_GMS_MESSAGE(export_allocation_request, "export_allocation_request",
                        "ExportAllocationRequest");
  std::string allocation_id;
  template <class V> void fields(V&& v) { v("allocation_id", allocation_id); }
};

/// An allocation's description; the body of three responses.
struct allocation_info {
  std::string allocation_id;
  std::int64_t size = 0;
  std::int64_t aligned_size = 0;
  std::string tag;
  std::int64_t layout_slot = 0;
  template <class V> void fields(V&& v) {
    v("allocation_id", allocation_id);
    v("size", size);
    v("aligned_size", aligned_size);
    v("tag", tag);
    v("layout_slot", layout_slot);
  }
  friend bool operator==(const allocation_info&, const allocation_info&) = default;
};

/// Sent together with one file descriptor (SCM_RIGHTS).
struct export_allocation_response : allocation_info {
  INFERWIRE_GMS_MESSAGE(export_allocation_response, "export_allocation_response",
                        "ExportAllocationResponse");
};

struct get_allocation_request {
  INFERWIRE_GMS_MESSAGE(get_allocation_request, "get_allocation_request", "GetAllocationRequest");
  std::string allocation_id;
  template <class V> void fields(V&& v) { v("allocation_id", allocation_id); }
};

struct get_allocation_response : allocation_info {
  INFERWIRE_GMS_MESSAGE(get_allocation_response, "get_allocation_response",
                        "GetAllocationResponse");
};

struct list_allocations_request {
  INFERWIRE_GMS_MESSAGE(list_allocations_request, "list_allocations_request",
                        "ListAllocationsRequest");
  std::optional<std::string> tag;  ///< nullopt: every tag
  template <class V> void fields(V&& v) { v("tag", tag, defaulted); }
};

struct list_allocations_response {
  INFERWIRE_GMS_MESSAGE(list_allocations_response, "list_allocations_response",
                        "ListAllocationsResponse");
  std::vector<get_allocation_response> allocations;
  template <class V> void fields(V&& v) { v("allocations", allocations, defaulted); }
};

struct free_allocation_request {
  INFERWIRE_GMS_MESSAGE(free_allocation_request, "free_allocation_request",
                        "FreeAllocationRequest");
  std::string allocation_id;
  template <class V> void fields(V&& v) { v("allocation_id", allocation_id); }
};

struct free_allocation_response {
  INFERWIRE_GMS_MESSAGE(free_allocation_response, "free_allocation_response",
                        "FreeAllocationResponse");
  bool success = false;
  template <class V> void fields(V&& v) { v("success", success); }
};

// --- 2.3 Metadata ----------------------------------------------------------------------------

struct metadata_put_request {
  INFERWIRE_GMS_MESSAGE(metadata_put_request, "metadata_put_request", "MetadataPutRequest");
  std::string key;
  std::string allocation_id;
  std::int64_t offset_bytes = 0;
  bytes value;
  template <class V> void fields(V&& v) {
    v("key", key);
    v("allocation_id", allocation_id);
    v("offset_bytes", offset_bytes);
    v("value", value);
  }
};

struct metadata_put_response {
  INFERWIRE_GMS_MESSAGE(metadata_put_response, "metadata_put_response", "MetadataPutResponse");
  bool success = true;
  template <class V> void fields(V&& v) { v("success", success); }
};

struct metadata_get_request {
  INFERWIRE_GMS_MESSAGE(metadata_get_request, "metadata_get_request", "MetadataGetRequest");
  std::string key;
  template <class V> void fields(V&& v) { v("key", key); }
};

struct metadata_get_response {
  INFERWIRE_GMS_MESSAGE(metadata_get_response, "metadata_get_response", "MetadataGetResponse");
  bool found = false;
  std::optional<std::string> allocation_id;
  std::optional<std::int64_t> offset_bytes;
  std::optional<bytes> value;
  template <class V> void fields(V&& v) {
    v("found", found);
    v("allocation_id", allocation_id, defaulted);
    v("offset_bytes", offset_bytes, defaulted);
    v("value", value, defaulted);
  }
};

struct metadata_delete_request {
  INFERWIRE_GMS_MESSAGE(metadata_delete_request, "metadata_delete_request",
                        "MetadataDeleteRequest");
  std::string key;
  template <class V> void fields(V&& v) { v("key", key); }
};

struct metadata_delete_response {
  INFERWIRE_GMS_MESSAGE(metadata_delete_response, "metadata_delete_response",
                        "MetadataDeleteResponse");
  bool deleted = false;
  template <class V> void fields(V&& v) { v("deleted", deleted); }
};

struct metadata_list_request {
  INFERWIRE_GMS_MESSAGE(metadata_list_request, "metadata_list_request", "MetadataListRequest");
  std::string prefix;
  template <class V> void fields(V&& v) { v("prefix", prefix, defaulted); }
};

struct metadata_list_response {
  INFERWIRE_GMS_MESSAGE(metadata_list_response, "metadata_list_response",
                        "MetadataListResponse");
  std::vector<std::string> keys;
  template <class V> void fields(V&& v) { v("keys", keys, defaulted); }
};

// --- 2.4 Diagnostics -------------------------------------------------------------------------

struct get_runtime_state_request {
  INFERWIRE_GMS_MESSAGE(get_runtime_state_request, "get_runtime_state_request",
                        "GetRuntimeStateRequest");
  template <class V> void fields(V&&) {}
};

struct get_runtime_state_response {
  INFERWIRE_GMS_MESSAGE(get_runtime_state_response, "get_runtime_state_response",
                        "GetRuntimeStateResponse");
  std::string state;
  bool has_rw_session = false;
  std::int64_t ro_session_count = 0;
  std::int64_t waiting_writers = 0;
  bool committed = false;
  bool is_ready = false;
  std::int64_t allocation_count = 0;
  std::string memory_layout_hash;
  template <class V> void fields(V&& v) {
    v("state", state);
    v("has_rw_session", has_rw_session);
    v("ro_session_count", ro_session_count);
    v("waiting_writers", waiting_writers);
    v("committed", committed);
    v("is_ready", is_ready);
    v("allocation_count", allocation_count, defaulted);
    v("memory_layout_hash", memory_layout_hash, defaulted);
  }
};

struct get_event_history_request {
  INFERWIRE_GMS_MESSAGE(get_event_history_request, "get_event_history_request",
                        "GetEventHistoryRequest");
  template <class V> void fields(V&&) {}
};

/// One entry of the event history: an untagged map {kind, allocation_count}.
struct runtime_event {
  std::string kind;  ///< rw_connected, committed, rw_aborted, allocations_cleared, allocation_oom
  std::int64_t allocation_count = 0;
  template <class V> void fields(V&& v) {
    v("kind", kind);
    v("allocation_count", allocation_count, defaulted);
  }
  friend bool operator==(const runtime_event&, const runtime_event&) = default;
};

struct get_event_history_response {
  INFERWIRE_GMS_MESSAGE(get_event_history_response, "get_event_history_response",
                        "GetEventHistoryResponse");
  std::vector<runtime_event> events;
  template <class V> void fields(V&& v) { v("events", events, defaulted); }
};

#undef INFERWIRE_GMS_MESSAGE

/// Any message of protocol v2.
using message = std::variant<
    handshake_request, handshake_response, commit_request, commit_response,
    get_lock_state_request, get_lock_state_response, get_allocation_state_request,
    get_allocation_state_response, get_state_hash_request, get_state_hash_response,
    error_response, allocate_request, allocate_response, export_allocation_request,
    export_allocation_response, get_allocation_request, get_allocation_response,
    list_allocations_request, list_allocations_response, free_allocation_request,
    free_allocation_response, metadata_put_request, metadata_put_response, metadata_get_request,
    metadata_get_response, metadata_delete_request, metadata_delete_response,
    metadata_list_request, metadata_list_response, get_runtime_state_request,
    get_runtime_state_response, get_event_history_request, get_event_history_response>;

/// The upstream class name of a message (for error strings).
inline std::string_view class_name(const message& m) noexcept {
  return std::visit([](const auto& x) { return std::decay_t<decltype(x)>::class_name; }, m);
}

}  // namespace inferwire::gms

#endif
