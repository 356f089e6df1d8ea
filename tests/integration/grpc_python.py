#!/usr/bin/python3
# SPDX-License-Identifier: Apache-2.0
"""A Python gRPC client (Debian's python3-grpcio) against inferwire-server, with stubs
generated at test time from our protos: proves that clients in another language work.

usage: grpc_python.py <inferwire-server> <source dir>
"""
import os
import re
import struct
import subprocess
import sys
import tempfile
import time

server_bin, source = sys.argv[1], sys.argv[2]
work = tempfile.mkdtemp(prefix="iw-grpc-py-")
subprocess.run(["protoc", "-I", os.path.join(source, "proto"), "--python_out=" + work, "--grpc_out=" + work,
                "--plugin=protoc-gen-grpc=/usr/bin/grpc_python_plugin"]
               + [os.path.join(source, "proto", p) for p in ("model_config.proto", "grpc_service.proto", "health.proto")],
               check=True)
sys.path.insert(0, work)
import grpc  # noqa: E402
import grpc_service_pb2 as pb  # noqa: E402
import grpc_service_pb2_grpc as rpc  # noqa: E402
import health_pb2  # noqa: E402
import health_pb2_grpc  # noqa: E402

log_path = os.path.join(work, "server.log")
log = open(log_path, "w")
server = subprocess.Popen([server_bin, "--model-repository", os.path.join(source, "reference_server/models"),
                           "--model-repository", os.path.join(source, "reference_server/models_decoupled"),
                           "--http-address", "127.0.0.1", "--http-port", "0", "--metrics-port", "0",
                           "--grpc-port", "0"], stdout=log, stderr=subprocess.STDOUT)
failures = []


def check(cond, what):
    if not cond:
        failures.append(what)
        print("FAILED:", what)


try:
    port = None
    for _ in range(500):
        m = re.search(r"Started GRPCInferenceService at [0-9.]+:([0-9]+)", open(log_path).read())
        if m:
            port = int(m.group(1))
            break
        time.sleep(0.01)
    check(port is not None, "the server started")
    channel = grpc.insecure_channel("127.0.0.1:%d" % port)
    stub = rpc.GRPCInferenceServiceStub(channel)

    md = stub.ServerMetadata(pb.ServerMetadataRequest())
    check(md.name == "triton", "server metadata name")
    check(health_pb2_grpc.HealthStub(channel).Check(health_pb2.HealthCheckRequest()).status ==
          health_pb2.HealthCheckResponse.SERVING, "health check")
    mm = stub.ModelMetadata(pb.ModelMetadataRequest(name="simple"))
    check(mm.name == "simple" and [i.name for i in mm.inputs] == ["INPUT0", "INPUT1"], "model metadata")
    check(list(mm.inputs[0].shape) == [-1, 16], "model metadata shape")

    def simple_request(rid, typed=False):
        q = pb.ModelInferRequest(model_name="simple", id=rid)
        for name, values in (("INPUT0", list(range(16))), ("INPUT1", [1] * 16)):
            t = q.inputs.add(name=name, datatype="INT32", shape=[1, 16])
            if typed:
                t.contents.int_contents.extend(values)
            else:
                q.raw_input_contents.append(struct.pack("<16i", *values))
        return q

    for typed in (False, True):
        r = stub.ModelInfer(simple_request("py", typed), compression=grpc.Compression.Gzip)
        check(r.id == "py", "id echoed")
        check([o.name for o in r.outputs] == ["OUTPUT0", "OUTPUT1"], "outputs in order")
        check(len(r.raw_output_contents) == 2 and not r.outputs[0].HasField("contents"), "raw outputs only")
        check(struct.unpack("<16i", r.raw_output_contents[0]) == tuple(range(1, 17)), "OUTPUT0 = INPUT0 + INPUT1")
        check(struct.unpack("<16i", r.raw_output_contents[1]) == tuple(range(-1, 15)), "OUTPUT1 = INPUT0 - INPUT1")
    try:
        stub.ModelInfer(pb.ModelInferRequest(model_name="nope"))
        check(False, "unknown model fails")
    except grpc.RpcError as e:
        check(e.code() == grpc.StatusCode.NOT_FOUND and e.details().startswith("Request for unknown model"),
              "unknown model: NOT_FOUND")

    def stream_requests():
        yield simple_request("s1")
        q = pb.ModelInferRequest(model_name="repeat_int32", id="rep")
        for name, dt, fmt, values in (("IN", "INT32", "i", [10, 11, 12]), ("DELAY", "UINT32", "I", [20, 20, 20]),
                                      ("WAIT", "UINT32", "I", [0])):
            q.inputs.add(name=name, datatype=dt, shape=[len(values)])
            q.raw_input_contents.append(struct.pack("<%d%s" % (len(values), fmt), *values))
        yield q
        yield pb.ModelInferRequest(model_name="nope", id="bad")
        yield simple_request("s2")

    got = []
    for resp in stub.ModelStreamInfer(stream_requests()):
        if resp.error_message:
            got.append(("error", resp.infer_response.id))
        elif resp.infer_response.model_name == "repeat_int32":
            got.append(("rep", struct.unpack("<i", resp.infer_response.raw_output_contents[0])[0]))
        else:
            got.append((resp.infer_response.id, resp.infer_response.parameters["triton_final_response"].bool_param))
    check(got == [("s1", True), ("rep", 10), ("rep", 11), ("rep", 12), ("error", "bad"), ("s2", True)],
          "stream responses: %r" % (got,))
finally:
    server.terminate()
    server.wait(timeout=30)

if failures:
    print(open(log_path).read())
    sys.exit(1)
print("python gRPC client: all checks passed")
