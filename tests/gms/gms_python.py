#!/usr/bin/python3
# SPDX-License-Identifier: Apache-2.0
"""A GMS client written in Python (Debian's python3-msgpack, socket.send/recv_fds) against
inferwire-gms-server: frames built the way msgspec lays them out, descriptors received the
way Dynamo's client receives them (recvmsg with room for one fd on the first read of a
response). Proves the protocol is language-neutral, not just self-consistent.

usage: gms_python.py <inferwire-gms-server>
"""
import mmap
import os
import socket
import struct
import subprocess
import sys
import tempfile
import time

import msgpack

server_bin = sys.argv[1]
work = tempfile.mkdtemp(prefix="iw-gms-py-")
path = os.path.join(work, "gms.sock")
server = subprocess.Popen([server_bin, "--device", "0", "--backend", "memfd", "--socket-path", path],
                          stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
failures = []


def check(cond, what):
    if not cond:
        failures.append(what)
        print("FAILED:", what)


def frame(message_type, **fields):
    # msgspec's layout: a map, "type" first, then every field in declared order.
    body = {"type": message_type}
    body.update(fields)
    payload = msgpack.packb(body, use_bin_type=True)
    return struct.pack(">I", len(payload)) + payload


class Conn:
    def __init__(self):
        self.s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.s.connect(path)

    def call(self, data):
        self.s.sendall(data)
        # As Dynamo's client: the first read of a response with room for one descriptor.
        buf, fds, _, _ = socket.recv_fds(self.s, 65536, 1)
        while len(buf) < 4 or len(buf) < 4 + struct.unpack(">I", buf[:4])[0]:
            more = self.s.recv(65536)
            if not more:
                raise ConnectionError("closed")
            buf += more
        n = struct.unpack(">I", buf[:4])[0]
        return msgpack.unpackb(buf[4:4 + n], raw=False), (fds[0] if fds else None)

    def close(self):
        self.s.close()


try:
    for _ in range(500):
        if os.path.exists(path):
            break
        time.sleep(0.01)
    time.sleep(0.05)

    # Python's encoding of the spec's golden frames is byte-identical to msgspec's.
    check(frame("handshake_request", lock_type="rw", timeout_ms=None).hex() ==
          "00000031" "83a474797065b168616e647368616b655f72657175657374a96c6f636b5f74797065a27277aa74696d656f75745f6d73c0",
          "golden HandshakeRequest(rw)")
    check(frame("allocate_request", size=2097152, tag="weights").hex() ==
          "0000002d" "83a474797065b0616c6c6f636174655f72657175657374a473697a65ce00200000a3746167a777656967687473",
          "golden AllocateRequest")

    w = Conn()
    r, _ = w.call(frame("handshake_request", lock_type="rw", timeout_ms=None))
    check(r == {"type": "handshake_response", "success": True, "committed": False, "granted_lock_type": "rw"},
          "RW handshake: %r" % (r,))
    a, _ = w.call(frame("allocate_request", size=4096, tag="weights"))
    check(a["type"] == "allocate_response" and a["aligned_size"] == 2097152 and a["layout_slot"] == 0,
          "allocate: %r" % (a,))
    b, _ = w.call(frame("allocate_request", size=3145728, tag="default"))
    e, fd = w.call(frame("export_allocation_request", allocation_id=a["allocation_id"]))
    check(e["type"] == "export_allocation_response" and fd is not None, "export carries a descriptor")
    m = mmap.mmap(fd, 2097152)
    m[100:108] = b"python!!"
    m.close()
    os.close(fd)
    p, _ = w.call(frame("metadata_put_request", key="tensor.0", allocation_id=a["allocation_id"], offset_bytes=0,
                        value=b'{"x":1}'))
    check(p == {"type": "metadata_put_response", "success": True}, "metadata put")
    bad, _ = w.call(frame("metadata_put_request", key="k", allocation_id="nope", offset_bytes=0, value=b""))
    check(bad == {"type": "error_response", "error": "Unknown allocation: nope", "code": 0}, "error response")
    c, _ = w.call(frame("commit_request"))
    check(c == {"type": "commit_response", "success": True}, "commit")
    w.close()

    # The spec's layout-hash vector, from a layout built in Python.
    probe = Conn()
    st, _ = probe.call(frame("get_runtime_state_request"))
    probe.close()
    check(st["state"] == "COMMITTED" and st["allocation_count"] == 2, "runtime state: %r" % (st,))
    check(st["memory_layout_hash"] == "7abf180f8a031defd71f13aa7d3294d041c1955b635c32e37efbed148abd8c22",
          "layout hash vector")

    # A reader: defaults omitted from the handshake, data read through the exported descriptor.
    rd = Conn()
    h, _ = rd.call(struct.pack(">I", 37) + bytes.fromhex(
        "82a474797065b168616e647368616b655f72657175657374a96c6f636b5f74797065a2726f"))
    check(h["success"] and h["granted_lock_type"] == "ro" and h["committed"], "RO handshake: %r" % (h,))
    lst, _ = rd.call(frame("list_allocations_request", tag=None))
    check([x["layout_slot"] for x in lst["allocations"]] == [0, 1] and
          all(x["type"] == "get_allocation_response" for x in lst["allocations"]), "list allocations")
    md, _ = rd.call(frame("metadata_get_request", key="tensor.0"))
    check(md["found"] and md["value"] == b'{"x":1}' and md["offset_bytes"] == 0, "metadata get")
    e2, fd2 = rd.call(frame("export_allocation_request", allocation_id=md["allocation_id"]))
    m2 = mmap.mmap(fd2, 2097152, prot=mmap.PROT_READ)
    check(m2[100:108] == b"python!!", "data written by the writer is read by the reader")
    m2.close()
    os.close(fd2)
    refused, _ = rd.call(frame("allocate_request", size=1, tag="default"))
    check(refused.get("error") == "AllocateRequest not allowed for RO session in state RO", "RO permission")
    rd.close()
finally:
    server.terminate()
    server.wait(timeout=30)

check(server.returncode == 0, "the server exits 0 on SIGTERM")
check(not os.path.exists(path), "the socket is removed")
if failures:
    sys.exit(1)
print("python GMS client: all checks passed")
