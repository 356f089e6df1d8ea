#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
# A PyTorch tensor allocated with expandable_segments:True (CUDA VMM memory, no legacy IPC
# handle) registered as a CUDA shared-memory region through the server's CUDA VMM socket, with
# nothing of ours on this side: the driver's export through ctypes, the socket's wire format
# (docs/shared-memory.md), and the plain HTTP/JSON register and infer endpoints. `simple_gpu`
# reads its inputs from and writes its outputs to the tensor.
#
#   torch_vmm.py -u host:port      (socket: $INFERWIRE_CUDA_VMM_SOCKET)
# Exits 77 (skipped) without torch, a GPU or libcuda.
import base64
import ctypes
import json
import os
import socket
import struct
import sys
import time
import urllib.error
import urllib.request

os.environ["PYTORCH_CUDA_ALLOC_CONF"] = "expandable_segments:True"
try:
    import torch
except ImportError:
    print("SKIPPED: gpu_torch_vmm: torch is not installed")
    sys.exit(77)
if not torch.cuda.is_available():
    print("SKIPPED: gpu_torch_vmm: torch sees no GPU")
    sys.exit(77)
try:
    cu = ctypes.CDLL("libcuda.so.1")
except OSError as e:
    print(f"SKIPPED: gpu_torch_vmm: {e}")
    sys.exit(77)

url = sys.argv[sys.argv.index("-u") + 1] if "-u" in sys.argv else "localhost:8000"
path = os.environ.get("INFERWIRE_CUDA_VMM_SOCKET", "/tmp/inferwire-cuda-vmm.sock")


def check(result, what):
    if result != 0:
        raise RuntimeError(f"{what} failed: CUresult {result}")


def export_chunks(ptr, size):
    """(offset in the first chunk, [chunk sizes], [fds]) of the VMM range [ptr, ptr+size)."""
    cu.cuMemGetAddressRange_v2.argtypes = [ctypes.POINTER(ctypes.c_uint64), ctypes.POINTER(ctypes.c_size_t), ctypes.c_uint64]
    cu.cuMemRetainAllocationHandle.argtypes = [ctypes.POINTER(ctypes.c_uint64), ctypes.c_void_p]
    cu.cuMemExportToShareableHandle.argtypes = [ctypes.c_void_p, ctypes.c_uint64, ctypes.c_int, ctypes.c_uint64]
    cu.cuMemRelease.argtypes = [ctypes.c_uint64]
    at, end, offset, sizes, fds = ptr, ptr + size, None, [], []
    while at < end:
        base, length = ctypes.c_uint64(), ctypes.c_size_t()
        check(cu.cuMemGetAddressRange_v2(ctypes.byref(base), ctypes.byref(length), at), "cuMemGetAddressRange")
        handle = ctypes.c_uint64()
        check(cu.cuMemRetainAllocationHandle(ctypes.byref(handle), ctypes.c_void_p(at)), "cuMemRetainAllocationHandle")
        fd = ctypes.c_int(-1)
        check(cu.cuMemExportToShareableHandle(ctypes.byref(fd), handle.value, 1, 0), "cuMemExportToShareableHandle")
        cu.cuMemRelease(handle.value)
        if offset is None:
            offset = at - base.value
        sizes.append(length.value)
        fds.append(fd.value)
        at = base.value + length.value
    return offset, sizes, fds


def http(method, target, body=None):
    req = urllib.request.Request(f"http://{url}{target}", method=method,
                                 data=None if body is None else json.dumps(body).encode())
    try:
        with urllib.request.urlopen(req) as r:
            return r.status, json.loads(r.read() or b"{}")
    except urllib.error.HTTPError as e:
        return e.code, json.loads(e.read() or b"{}")


n = 16 << 20  # 64 MiB per tensor: the buffer spans several expandable-segment pages
buf = torch.empty(4 * n, dtype=torch.int32, device="cuda")
buf[:n] = torch.arange(n, dtype=torch.int32, device="cuda")
buf[n:2 * n] = 7
torch.cuda.synchronize()
nbytes = buf.numel() * 4
offset, sizes, fds = export_chunks(buf.data_ptr(), nbytes)
print(f"tensor of {nbytes >> 20} MiB in {len(sizes)} VMM chunks ({sorted(set(s >> 20 for s in sizes))} MiB)")

sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
sock.connect(path)
payload = struct.pack("<cBHiII", b"D", 1, 0, torch.cuda.current_device(), len(sizes), 0)
payload += struct.pack("<QQ", offset, nbytes) + b"".join(struct.pack("<Q", s) for s in sizes)
frame = struct.pack("<I", len(payload)) + payload
step = max(1, len(frame) // ((len(fds) + 63) // 64))
for i in range(0, len(fds), 64):  # at most 64 descriptors per message
    piece = frame[(i // 64) * step:] if i + 64 >= len(fds) else frame[(i // 64) * step:(i // 64 + 1) * step]
    socket.send_fds(sock, [piece], fds[i:i + 64])
for fd in fds:
    os.close(fd)
size = struct.unpack("<I", sock.recv(4, socket.MSG_WAITALL))[0]
reply = sock.recv(size, socket.MSG_WAITALL)
if reply[:1] != b"H":
    print("deposit refused:", reply[1:].decode())
    sys.exit(1)
handle = reply[1:]

status, body = http("POST", "/v2/cudasharedmemory/region/torch_buf/register",
                    {"raw_handle": {"b64": base64.b64encode(handle).decode()},
                     "device_id": torch.cuda.current_device(), "byte_size": nbytes})
assert status == 200, (status, body)


def shm(at):
    return {"shared_memory_region": "torch_buf", "shared_memory_offset": at, "shared_memory_byte_size": 4 * n}


status, body = http("POST", "/v2/models/simple_gpu/infer", {
    "inputs": [{"name": "INPUT0", "datatype": "INT32", "shape": [n], "parameters": shm(0)},
               {"name": "INPUT1", "datatype": "INT32", "shape": [n], "parameters": shm(4 * n)}],
    "outputs": [{"name": "OUTPUT0", "parameters": shm(8 * n)},
                {"name": "OUTPUT1", "parameters": shm(12 * n)}]})
assert status == 200, (status, body)
torch.cuda.synchronize()
want = torch.arange(n, dtype=torch.int32, device="cuda")
ok = bool(torch.equal(buf[2 * n:3 * n], want + 7)) and bool(torch.equal(buf[3 * n:], want - 7))
print("outputs written into the tensor:", "correct" if ok else "WRONG")

sock.close()  # the server unregisters the region
for _ in range(200):
    status, body = http("GET", "/v2/cudasharedmemory/region/torch_buf/status")
    if status == 404:
        break
    time.sleep(0.01)
print("unregistered when the socket closed:", status == 404)
ok = ok and status == 404
print("PASS" if ok else "FAIL")
sys.exit(0 if ok else 1)
