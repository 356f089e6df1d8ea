#!/usr/bin/python3
# SPDX-License-Identifier: Apache-2.0
"""The container image end to end: builds deploy/container/Containerfile's `prebuilt` target
(the servers of this build) on a Debian base made locally, runs it on loopback ports as its
non-root user, checks readiness, infers `simple` over HTTP and gRPC, scrapes the metrics, runs
the image's HEALTHCHECK, runs the GMS node script with the memfd backend on a host folder, and
stops both with SIGTERM, timing each step. Prints the image size and the timings.

usage: container_test.py <source dir> <folder holding inferwire-server and inferwire-gms-server>
Exits 77 (skipped) when neither podman nor a working docker is present, or when the base image
would have to be made without root. INFERWIRE_CONTAINER_BASE names a Debian 12 base to use
instead of making one.
"""
import json
import os
import shutil
import socket
import struct
import subprocess
import sys
import tempfile
import time
import urllib.request

source, bin_dir = os.path.abspath(sys.argv[1]), os.path.abspath(sys.argv[2])
prebuilt = os.path.relpath(bin_dir, source)
if prebuilt.startswith(".."):
    print("SKIP: the build folder %s is outside the source tree, so outside the image's build context" % bin_dir)
    sys.exit(77)

engine = shutil.which("podman")
if not engine:
    docker = shutil.which("docker")
    if docker and subprocess.run([docker, "info"], capture_output=True).returncode == 0:
        engine = docker
if not engine:
    print("SKIP: neither podman nor a working docker (scripts/bootstrap.sh installs podman)")
    sys.exit(77)
is_podman = os.path.basename(engine) == "podman"

work = tempfile.mkdtemp(prefix="iw-container-")
env = dict(os.environ)
if is_podman and "CONTAINERS_CONF" not in env:
    # Podman on these machines: runc (crun cannot run under cgroups v1 hybrid mode) and no
    # default ulimits (raising RLIMIT_NOFILE is not permitted inside the machine's container).
    conf = os.path.join(work, "containers.conf")
    with open(conf, "w") as f:
        f.write("[containers]\ndefault_ulimits = []\n")
        if shutil.which("runc"):
            f.write('\n[engine]\nruntime = "runc"\n')
    env["CONTAINERS_CONF"] = conf
env["ENGINE"] = engine

tag = "localhost/inferwire-test:%d" % os.getpid()
name = "inferwire-test-%d" % os.getpid()
gms_name = name + "-gms"
failures = []


def check(cond, what):
    print(("ok: " if cond else "FAILED: ") + what)
    if not cond:
        failures.append(what)


def run(*args, **kw):
    return subprocess.run([engine, *args], env=env, capture_output=True, text=True, **kw)


def free_ports(n):
    socks = [socket.socket() for _ in range(n)]
    for s in socks:
        s.bind(("127.0.0.1", 0))
    ports = [s.getsockname()[1] for s in socks]
    for s in socks:
        s.close()
    return ports


def http(method, url, body=None):
    req = urllib.request.Request(url, data=body, method=method)
    try:
        with urllib.request.urlopen(req, timeout=5) as r:
            return r.status, r.read()
    except urllib.error.HTTPError as e:
        return e.code, e.read()
    except OSError:
        return None, b""


def wait_exit(container, limit):
    t0 = time.monotonic()
    r = run("wait", container, timeout=limit + 30)
    return time.monotonic() - t0, r.stdout.strip()


try:
    # 1. The base: INFERWIRE_CONTAINER_BASE (e.g. debian:bookworm-slim where a registry is
    #    reachable), else made from Debian's packages (make-base.sh, cached under .deps/), and
    #    the image.
    t0 = time.monotonic()
    base_image = os.environ.get("INFERWIRE_CONTAINER_BASE", "")
    if not base_image:
        made = "localhost/inferwire-base:bookworm"
        if os.geteuid() != 0 and run("image", "inspect", made).returncode != 0:
            print("SKIP: making the base image needs root (debootstrap); set INFERWIRE_CONTAINER_BASE "
                  "to a Debian 12 image instead")
            sys.exit(77)
        base = subprocess.run([os.path.join(source, "deploy/container/make-base.sh"), made], env=env,
                              capture_output=True, text=True)
        check(base.returncode == 0, "the Debian base image (make-base.sh)")
        if base.returncode != 0:
            print(base.stderr)
            sys.exit(1)
        base_image = base.stdout.strip().splitlines()[-1]
    t_base = time.monotonic() - t0
    t0 = time.monotonic()
    build = [engine, "build", "--network", "host", "--build-arg", "BASE=" + base_image,
             "--build-arg", "PREBUILT_DIR=" + prebuilt, "--target", "prebuilt", "-t", tag,
             "-f", os.path.join(source, "deploy/container/Containerfile"), source]
    if is_podman:
        build[2:2] = ["--format", "docker"]  # HEALTHCHECK is a docker-format field
    b = subprocess.run(build, env=env, capture_output=True, text=True)
    check(b.returncode == 0, "the image builds (target prebuilt)")
    if b.returncode != 0:
        print(b.stdout[-4000:], b.stderr[-4000:])
        sys.exit(1)
    t_build = time.monotonic() - t0
    size = int(run("image", "inspect", "--format", "{{.Size}}", tag).stdout.strip())
    cfg = json.loads(run("image", "inspect", tag).stdout)[0]
    config = cfg.get("Config") or cfg.get("config") or {}
    check(config.get("User") == "1000:1000", "the image's user is 1000:1000, not root")
    check(sorted(config.get("ExposedPorts", {})) == ["8000/tcp", "8001/tcp", "8002/tcp"], "exposes 8000, 8001, 8002")
    check(bool(config.get("Healthcheck") or cfg.get("Healthcheck")), "the image has a HEALTHCHECK")

    # 2. inferwire-server with tritonserver's flags on free loopback ports.
    hp, gp, mp = free_ports(3)
    t0 = time.monotonic()
    # As the manifests run it: read-only root filesystem, no capabilities, no privilege gain.
    r = run("run", "-d", "--network", "host", "--name", name, "--read-only", "--cap-drop", "ALL",
            "--security-opt", "no-new-privileges", "-e", "INFERWIRE_HTTP_PORT=%d" % hp, tag,
            "--model-repository=/opt/inferwire/models", "--http-port=%d" % hp, "--grpc-port=%d" % gp,
            "--metrics-port=%d" % mp, "--exit-timeout-secs=20")
    check(r.returncode == 0, "the container starts")
    ready_after = None
    while time.monotonic() - t0 < 60:
        if http("GET", "http://127.0.0.1:%d/v2/health/ready" % hp)[0] == 200:
            ready_after = time.monotonic() - t0
            break
        time.sleep(0.05)
    check(ready_after is not None, "ready on /v2/health/ready")
    if ready_after is None:
        print(run("logs", name).stderr[-4000:])
        sys.exit(1)

    pid = run("inspect", "--format", "{{.State.Pid}}", name).stdout.strip()
    uid = [l.split()[1:] for l in open("/proc/%s/status" % pid) if l.startswith("Uid:")][0]
    check(uid[0] == "1000" and uid[1] == "1000", "the server runs as uid 1000 (real and effective: %s)" % uid[:2])
    check(run("exec", name, "id", "-u").stdout.strip() == "1000", "exec'd commands run as 1000 too")
    check(http("GET", "http://127.0.0.1:%d/v2/health/live" % hp)[0] == 200, "live")

    # Infer over HTTP.
    a, b2 = list(range(16)), [2] * 16
    body = json.dumps({"inputs": [
        {"name": "INPUT0", "datatype": "INT32", "shape": [1, 16], "data": a},
        {"name": "INPUT1", "datatype": "INT32", "shape": [1, 16], "data": b2}]}).encode()
    st, out = http("POST", "http://127.0.0.1:%d/v2/models/simple/infer" % hp, body)
    outs = {o["name"]: o["data"] for o in json.loads(out).get("outputs", [])} if st == 200 else {}
    check(st == 200 and outs.get("OUTPUT0") == [x + 2 for x in a] and outs.get("OUTPUT1") == [x - 2 for x in a],
          "simple over HTTP")

    # Infer over gRPC, with stubs generated from our protos by Debian's grpc tools.
    subprocess.run(["protoc", "-I", os.path.join(source, "proto"), "--python_out=" + work, "--grpc_out=" + work,
                    "--plugin=protoc-gen-grpc=/usr/bin/grpc_python_plugin"]
                   + [os.path.join(source, "proto", p) for p in ("model_config.proto", "grpc_service.proto")],
                   check=True)
    sys.path.insert(0, work)
    import grpc  # noqa: E402
    import grpc_service_pb2 as pb  # noqa: E402
    import grpc_service_pb2_grpc as rpc  # noqa: E402
    stub = rpc.GRPCInferenceServiceStub(grpc.insecure_channel("127.0.0.1:%d" % gp))
    q = pb.ModelInferRequest(model_name="simple")
    for n in ("INPUT0", "INPUT1"):
        t = q.inputs.add()
        t.name, t.datatype = n, "INT32"
        t.shape.extend([1, 16])
    q.raw_input_contents.append(struct.pack("<16i", *a))
    q.raw_input_contents.append(struct.pack("<16i", *b2))
    resp = stub.ModelInfer(q, timeout=10)
    names = [o.name for o in resp.outputs]
    got0 = list(struct.unpack("<16i", resp.raw_output_contents[names.index("OUTPUT0")]))
    check(got0 == [x + 2 for x in a], "simple over gRPC")

    # Metrics.
    st, text = http("GET", "http://127.0.0.1:%d/metrics" % mp)
    line = [l for l in text.decode().splitlines()
            if l.startswith("nv_inference_request_success{") and 'model="simple"' in l]
    check(st == 200 and line and line[0].split()[-1] in ("2", "2.0"), "metrics count both requests: %s" % line)

    # The image's own HEALTHCHECK command.
    if is_podman:
        check(run("healthcheck", "run", name).returncode == 0, "podman healthcheck run")

    # 3. SIGTERM: a clean exit within the grace period (--exit-timeout-secs=20).
    run("kill", "--signal", "TERM", name)
    t_stop, code = wait_exit(name, 20)
    check(code == "0", "exit code 0 after SIGTERM (got %s)" % code)
    check(t_stop < 20, "stopped within the grace period")
    log_lines = (run("logs", name).stderr + run("logs", name).stdout).splitlines()
    check(any("exited cleanly" in l for l in log_lines), "the server logs a clean exit")
    print("\n".join(l for l in log_lines if "signal" in l or "exited" in l or "drain" in l))
    run("rm", "-f", name)

    # 4. The GMS node script (the DaemonSet's entry point) with the memfd backend, its sockets in
    #    a host folder shared as a hostPath would be.
    sockets = os.path.join(work, "gms")
    os.mkdir(sockets, 0o700)
    os.chown(sockets, 1000, 1000)
    r = run("run", "-d", "--no-healthcheck", "--network", "none", "--name", gms_name, "-v", sockets + ":/run/gms",
            "-e", "GMS_DEVICES=2", "-e", "GMS_BACKEND=memfd", "--entrypoint", "inferwire-gms-node", tag)
    check(r.returncode == 0, "the GMS node starts")
    expected = {"gms_memfd0_weights.sock", "gms_memfd1_weights.sock"}
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline and not expected <= set(os.listdir(sockets)):
        time.sleep(0.05)
    check(expected <= set(os.listdir(sockets)), "one socket per device in the shared folder")
    check(run("exec", "-e", "GMS_DEVICES=2", gms_name, "inferwire-gms-node", "--check").returncode == 0,
          "the node's readiness check")
    for s in expected:
        st = os.stat(os.path.join(sockets, s))
        check(st.st_uid == 1000 and (st.st_mode & 0o777) == 0o600, "%s belongs to uid 1000, mode 0600" % s)
    # The example workload (deploy/gms/weights-example.yaml) from two other containers that share
    # only the socket folder: the first publishes, the second imports through passed descriptors.
    workload = ["run", "--rm", "--no-healthcheck", "--network", "none", "-v", sockets + ":/run/gms", "-e", "GMS_SOCKET_DIR=/run/gms",
                "--entrypoint", "inferwire-gms-weights", tag, "--backend", "memfd", "--mib", "32"]
    first, second = run(*workload), run(*workload)
    check(first.returncode == 0 and "published 32 MiB" in first.stdout and "checksum ok" in first.stdout,
          "a workload container publishes weights: " + first.stdout.strip().replace("\n", "; ")
          + ("" if first.returncode == 0 else first.stderr[-300:]))
    check(second.returncode == 0 and "published" not in second.stdout and "checksum ok" in second.stdout,
          "another imports and verifies them: " + second.stdout.strip()
          + ("" if second.returncode == 0 else second.stderr[-300:]))
    run("kill", "--signal", "TERM", gms_name)
    t_gms_stop, code = wait_exit(gms_name, 20)
    check(code == "0", "the GMS node exits 0 after SIGTERM (got %s)" % code)
    check(not (expected & set(os.listdir(sockets))), "its servers removed their sockets")

    print("container: engine %s; image %.1f MB; base %.1f s, image build %.1f s; start to ready %.2f s; "
          "SIGTERM to exit %.2f s (server), %.2f s (GMS node)"
          % (os.path.basename(engine), size / 1e6, t_base, t_build, ready_after, t_stop, t_gms_stop))
finally:
    for c in (name, gms_name):
        run("rm", "-f", c)
    run("rmi", "-f", tag)
    shutil.rmtree(work, ignore_errors=True)

if failures:
    print("%d check(s) failed" % len(failures))
    sys.exit(1)
