// SPDX-License-Identifier: Apache-2.0
#include <inferwire/gms/codec.hpp>

#include <inferwire/gms/framing.hpp>

#include <boost/algorithm/hex.hpp>
#include <catch2/catch.hpp>
#include <msgpack.hpp>  // sbuffer and the adaptors, for frames the codec would not write

#include <string>

namespace gms = inferwire::gms;
using boost::algorithm::hex_lower;
using boost::algorithm::unhex;

namespace {

const std::string fixed_id = "00000000-0000-4000-8000-000000000000";

struct golden {
  const char* name;
  gms::message message;
  const char* length;
  const char* payload;
};

std::vector<golden> golden_frames() {
  using namespace gms;
  return {
      {"HandshakeRequest(rw, timeout nil)", handshake_request{requested_lock_type::rw, std::nullopt},
       "00000031",
       "83a474797065b168616e647368616b655f72657175657374a96c6f636b5f74797065a27277aa74696d656f75745f6d73c0"},
      {"HandshakeRequest(ro, 5000)", handshake_request{requested_lock_type::ro, 5000}, "00000033",
       "83a474797065b168616e647368616b655f72657175657374a96c6f636b5f74797065a2726faa74696d656f75745f6d73cd1388"},
      {"HandshakeRequest(rw_or_ro, 100)", handshake_request{requested_lock_type::rw_or_ro, 100},
       "00000037",
       "83a474797065b168616e647368616b655f72657175657374a96c6f636b5f74797065a872775f6f725f726faa74696d656f75745f6d7364"},
      {"HandshakeResponse(success, not committed, rw)",
       handshake_response{true, false, granted_lock_type::rw}, "00000042",
       "84a474797065b268616e647368616b655f726573706f6e7365a773756363657373c3a9636f6d6d6974746564c2b16772616e7465645f6c6f636b5f74797065a27277"},
      {"HandshakeResponse(timeout, committed)", handshake_response{false, true, std::nullopt},
       "00000040",
       "84a474797065b268616e647368616b655f726573706f6e7365a773756363657373c2a9636f6d6d6974746564c3b16772616e7465645f6c6f636b5f74797065c0"},
      {"AllocateRequest(2097152, weights)", allocate_request{2097152, "weights"}, "0000002d",
       "83a474797065b0616c6c6f636174655f72657175657374a473697a65ce00200000a3746167a777656967687473"},
      {"AllocateResponse(slot 0)", allocate_response{fixed_id, 2097152, 2097152, 0}, "00000075",
       "85a474797065b1616c6c6f636174655f726573706f6e7365ad616c6c6f636174696f6e5f6964d92430303030303030302d303030302d343030302d383030302d303030303030303030303030a473697a65ce00200000ac616c69676e65645f73697a65ce00200000ab6c61796f75745f736c6f7400"},
      {"ExportAllocationRequest", export_allocation_request{fixed_id}, "00000054",
       "82a474797065b96578706f72745f616c6c6f636174696f6e5f72657175657374ad616c6c6f636174696f6e5f6964d92430303030303030302d303030302d343030302d383030302d303030303030303030303030"},
      {"ExportAllocationResponse",
       export_allocation_response{{fixed_id, 2097152, 2097152, "weights", 0}}, "0000008a",
       "86a474797065ba6578706f72745f616c6c6f636174696f6e5f726573706f6e7365ad616c6c6f636174696f6e5f6964d92430303030303030302d303030302d343030302d383030302d303030303030303030303030a473697a65ce00200000ac616c69676e65645f73697a65ce00200000a3746167a777656967687473ab6c61796f75745f736c6f7400"},
      {"CommitRequest", commit_request{}, "00000015", "81a474797065ae636f6d6d69745f72657175657374"},
      {"CommitResponse(true)", commit_response{true}, "0000001f",
       "82a474797065af636f6d6d69745f726573706f6e7365a773756363657373c3"},
      {"ErrorResponse(boom)", error_response{"boom", 0}, "00000026",
       "83a474797065ae6572726f725f726573706f6e7365a56572726f72a4626f6f6da4636f646500"},
      {"MetadataPutRequest(k, id, 16, 0x0102)",
       metadata_put_request{"k", fixed_id, 16, bytes{std::string("\x01\x02", 2)}}, "0000006d",
       "85a474797065b46d657461646174615f7075745f72657175657374a36b6579a16bad616c6c6f636174696f6e5f6964d92430303030303030302d303030302d343030302d383030302d303030303030303030303030ac6f66667365745f627974657310a576616c7565c4020102"},
      {"MetadataGetResponse(not found)", metadata_get_response{}, "00000047",
       "85a474797065b56d657461646174615f6765745f726573706f6e7365a5666f756e64c2ad616c6c6f636174696f6e5f6964c0ac6f66667365745f6279746573c0a576616c7565c0"},
      {"ListAllocationsRequest()", list_allocations_request{}, "00000024",
       "82a474797065b86c6973745f616c6c6f636174696f6e735f72657175657374a3746167c0"},
      {"GetStateHashRequest", get_state_hash_request{}, "00000025",
       "81a474797065be6765745f6d656d6f72795f6c61796f75745f686173685f72657175657374"},
      {"GetEventHistoryResponse([committed])",
       get_event_history_response{{runtime_event{"committed", 0}}}, "0000004b",
       "82a474797065ba6765745f6576656e745f686973746f72795f726573706f6e7365a66576656e74739182a46b696e64a9636f6d6d6974746564b0616c6c6f636174696f6e5f636f756e7400"},
  };
}

/// A payload built with msgpack-cxx's object model (for inputs our encoder never makes).
template <class... KV>
std::string map_payload(KV&&... kv) {
  msgpack::sbuffer b;
  msgpack::packer<msgpack::sbuffer> p(b);
  p.pack_map(sizeof...(KV) / 2);
  auto put = [&](const auto& x) { p.pack(x); };
  (put(kv), ...);
  return std::string(b.data(), b.size());
}

std::string decode_error_of(const std::string& payload) {
  gms::message m;
  std::string error;
  CHECK_FALSE(gms::try_decode(payload, m, error));
  return error;
}

}  // namespace

TEST_CASE("gms codec reproduces every golden frame of the spec", "[gms]") {
  for (const auto& g : golden_frames()) {
    INFO(g.name);
    const std::string frame = gms::encode_frame(g.message);
    CHECK(hex_lower(frame.substr(0, 4)) == g.length);
    CHECK(hex_lower(frame.substr(4)) == g.payload);
    // And back: the same value.
    CHECK(gms::decode(unhex(std::string(g.payload))) == g.message);
  }
}

TEST_CASE("gms codec: every message round-trips, nested tagged structs carry their type", "[gms]") {
  using namespace gms;
  list_allocations_response list;
  list.allocations.push_back(get_allocation_response{{"a", 10, 2097152, "weights", 0}});
  list.allocations.push_back(get_allocation_response{{"b", 20, 4194304, "default", 3}});
  const std::vector<message> all = {
      handshake_request{requested_lock_type::rw_or_ro, -5}, commit_response{false},
      get_lock_state_request{}, get_lock_state_response{"COMMITTED", false, 2, 1, true, true},
      get_allocation_state_request{}, get_allocation_state_response{7},
      get_state_hash_response{std::string(64, 'a')}, error_response{"x", 3},
      get_allocation_request{"id"}, list, free_allocation_request{"id"},
      free_allocation_response{true}, metadata_put_response{true}, metadata_get_request{"key"},
      metadata_get_response{true, "id", 12, bytes{std::string("\0\xff", 2)}},
      metadata_delete_request{"k"}, metadata_delete_response{true}, metadata_list_request{"pre"},
      metadata_list_response{{"a", "b"}}, get_runtime_state_request{},
      get_runtime_state_response{"RW", true, 0, 2, false, false, 4, ""},
      get_event_history_request{},
      get_event_history_response{{{"rw_connected", 0}, {"allocations_cleared", 12}}},
      allocate_request{1ll << 40, "kv_cache"}, handshake_request{requested_lock_type::ro, std::nullopt}};
  for (const auto& m : all) {
    INFO(std::string(class_name(m)));
    CHECK(decode(encode(m)) == m);
  }
  const std::string payload = encode(list);
  // Each element is a map whose first key is "type": get_allocation_response.
  CHECK(payload.find("\xa4type\xb7get_allocation_response") != std::string::npos);
  CHECK(class_name(message{list}) == "ListAllocationsResponse");
  CHECK(class_name(message{get_state_hash_request{}}) == "GetStateHashRequest");
}

TEST_CASE("gms codec decodes leniently on order, unknown keys and defaults", "[gms]") {
  using namespace gms;
  // "type" last, an unknown key, timeout_ms missing.
  auto m = decode(map_payload(std::string("lock_type"), std::string("ro"), std::string("extra"), 5,
                              std::string("type"), std::string("handshake_request")));
  REQUIRE(std::holds_alternative<handshake_request>(m));
  CHECK(std::get<handshake_request>(m).lock_type == requested_lock_type::ro);
  CHECK_FALSE(std::get<handshake_request>(m).timeout_ms);
  m = decode(map_payload(std::string("type"), std::string("metadata_list_request")));
  CHECK(std::get<metadata_list_request>(m).prefix.empty());
  m = decode(map_payload(std::string("type"), std::string("allocate_request"), std::string("size"), 5));
  CHECK(std::get<allocate_request>(m).tag == "default");
  // A nested element without its "type" key is fine.
  {
    msgpack::sbuffer b;
    msgpack::packer<msgpack::sbuffer> p(b);
    p.pack_map(2);
    p.pack(std::string("type"));
    p.pack(std::string("list_allocations_response"));
    p.pack(std::string("allocations"));
    p.pack_array(1);
    p.pack_map(5);
    for (auto [k, v] : {std::pair<const char*, int>{"size", 1}, {"aligned_size", 2}, {"layout_slot", 0}}) {
      p.pack(std::string(k));
      p.pack(v);
    }
    p.pack(std::string("allocation_id"));
    p.pack(std::string("x"));
    p.pack(std::string("tag"));
    p.pack(std::string("t"));
    auto r = std::get<list_allocations_response>(decode(std::string(b.data(), b.size())));
    REQUIRE(r.allocations.size() == 1);
    CHECK(r.allocations[0].aligned_size == 2);
  }
}

TEST_CASE("gms codec rejects wrong types, tags and malformed data", "[gms]") {
  const std::string t = "type";
  CHECK(decode_error_of(map_payload(t, std::string("handshake_request"), std::string("lock_type"),
                                    std::string("xx"))) ==
        "Invalid enum value 'xx' - at `$.lock_type`");
  CHECK(decode_error_of(map_payload(t, std::string("nope"))) == "Invalid value 'nope' - at `$.type`");
  CHECK(decode_error_of(map_payload(std::string("lock_type"), std::string("rw"))) ==
        "Object missing required field `type`");
  CHECK(decode_error_of(map_payload(t, std::string("handshake_request"))) ==
        "Object missing required field `lock_type` - at `$`");
  // int fields reject floats and bools; bool fields reject integers; str rejects bin. (msgpack-cxx
  // packs integral doubles as integers, so the float is 100.5.)
  CHECK(decode_error_of(map_payload(t, std::string("handshake_request"), std::string("lock_type"),
                                    std::string("rw"), std::string("timeout_ms"), 100.5)) ==
        "Expected `int`, got `float` - at `$.timeout_ms`");
  CHECK(decode_error_of(map_payload(t, std::string("commit_response"), std::string("success"), 1)) ==
        "Expected `bool`, got `int` - at `$.success`");
  CHECK(decode_error_of(map_payload(t, std::string("allocate_request"), std::string("size"), true)) ==
        "Expected `int`, got `bool` - at `$.size`");
  {
    msgpack::sbuffer b;
    msgpack::packer<msgpack::sbuffer> p(b);
    p.pack_map(2);
    p.pack(t);
    p.pack(std::string("metadata_get_request"));
    p.pack(std::string("key"));
    p.pack_bin(1);
    p.pack_bin_body("k", 1);
    CHECK(decode_error_of(std::string(b.data(), b.size())) == "Expected `str`, got `bytes` - at `$.key`");
  }
  CHECK(decode_error_of(map_payload(t, std::string("metadata_put_request"), std::string("key"),
                                    std::string("k"), std::string("allocation_id"), std::string("a"),
                                    std::string("offset_bytes"), 0, std::string("value"),
                                    std::string("v"))) == "Expected `bytes`, got `str` - at `$.value`");
  // Not a map, garbage, truncated, trailing bytes, empty.
  CHECK(decode_error_of(std::string("\x93\x01\x02\x03", 4)) == "Expected `object`, got `array` - at `$`");
  CHECK(decode_error_of("\xc1").find("malformed") != std::string::npos);
  const std::string good = gms::encode(gms::commit_request{});
  CHECK(decode_error_of(good.substr(0, good.size() - 3)).find("malformed") != std::string::npos);
  CHECK(decode_error_of(good + "x").find("trailing") != std::string::npos);
  CHECK(decode_error_of("").find("malformed") != std::string::npos);
  // Out-of-range integers for int64 fields.
  {
    msgpack::sbuffer b;
    msgpack::packer<msgpack::sbuffer> p(b);
    p.pack_map(2);
    p.pack(t);
    p.pack(std::string("allocate_request"));
    p.pack(std::string("size"));
    p.pack_uint64(~0ull);
    CHECK(decode_error_of(std::string(b.data(), b.size())) == "Integer value out of range - at `$.size`");
  }
}
