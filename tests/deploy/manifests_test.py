#!/usr/bin/python3
# SPDX-License-Identifier: Apache-2.0
"""The Kubernetes manifests of deploy/ checked against the programs, without a cluster.

Every manifest parses as YAML with the expected kinds; every port, probe, annotation and name
that one manifest or field refers to exists where it should; and each container is run here the
way its manifest runs it: inferwire-server with the manifest's command and arguments (ports
moved to free ones, the repository path to the bundled one) must become ready and answer every
probe path on the manifest's ports, the metrics path, and gRPC on the h2c port, then exit 0 on
SIGTERM within the pod's grace period; the GMS DaemonSet's node script (memfd backend instead of
GPUs) must create its sockets where the workload pods look and pass its readiness probe; and the
example workload's command must publish, import and verify weights through it.

usage: manifests_test.py <source dir> <folder holding inferwire-server and the GMS programs>
"""
import glob
import json
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request

import yaml

source, bin_dir = os.path.abspath(sys.argv[1]), os.path.abspath(sys.argv[2])
deploy = os.path.join(source, "deploy")
models = os.path.join(source, "reference_server", "models")
work = tempfile.mkdtemp(prefix="iw-manifests-")
failures = []


def check(cond, what):
    print(("ok: " if cond else "FAILED: ") + what)
    if not cond:
        failures.append(what)
    return cond


def load(path):
    with open(os.path.join(deploy, path)) as f:
        return [d for d in yaml.safe_load_all(f) if d]


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def get(url):
    try:
        with urllib.request.urlopen(url, timeout=5) as r:
            return r.status, r.read().decode()
    except urllib.error.HTTPError as e:
        return e.code, ""
    except OSError:
        return None, ""


def flag_values(args):
    """--name=value and --name value pairs of an argument list."""
    out, i = {}, 0
    while i < len(args):
        a = args[i]
        if a.startswith("--") and "=" in a:
            k, v = a[2:].split("=", 1)
            out[k] = v
        elif a.startswith("--") and i + 1 < len(args) and not args[i + 1].startswith("--"):
            out[a[2:]] = args[i + 1]
            i += 1
        elif a.startswith("--"):
            out[a[2:]] = ""
        i += 1
    return out


# A PATH with the programs under the names the image gives them (tritonserver is a link there).
path_dir = os.path.join(work, "bin")
os.mkdir(path_dir)
for name in ("inferwire-server", "inferwire-gms-server", "inferwire-gms-weights"):
    os.symlink(os.path.join(bin_dir, name), os.path.join(path_dir, name))
os.symlink(os.path.join(bin_dir, "inferwire-server"), os.path.join(path_dir, "tritonserver"))
os.symlink(os.path.join(deploy, "container", "inferwire-gms-node"), os.path.join(path_dir, "inferwire-gms-node"))
env = dict(os.environ, PATH=path_dir + os.pathsep + os.environ.get("PATH", ""))

# What the image promises (deploy/container/Containerfile).
containerfile = open(os.path.join(deploy, "container", "Containerfile")).read()
image_user = re.findall(r"^USER (\d+)", containerfile, re.M)[-1]
image_args = json.loads(re.search(r"^CMD (\[.*\])", containerfile, re.M).group(1))

# gRPC stubs for the h2c check.
subprocess.run(["protoc", "-I", os.path.join(source, "proto"), "--python_out=" + work, "--grpc_out=" + work,
                "--plugin=protoc-gen-grpc=/usr/bin/grpc_python_plugin"]
               + [os.path.join(source, "proto", p) for p in ("model_config.proto", "grpc_service.proto")], check=True)
sys.path.insert(0, work)
import grpc  # noqa: E402
import grpc_service_pb2 as pb  # noqa: E402
import grpc_service_pb2_grpc as rpc  # noqa: E402


def probe_port(probe, ports_by_name):
    p = (probe.get("httpGet") or probe.get("tcpSocket"))["port"]
    return ports_by_name.get(p) if isinstance(p, str) else p


def knative_probe_works(probe, knative_port):
    """Whether a probe the kubelet runs still works once Knative rewrites its port to the
    container's one port (what it does unless a feature flag, off by default, is on): an
    HTTP/1.1 GET on an h2c port gets HTTP/2 bytes; a TCP connect works on either."""
    if "tcpSocket" in probe:
        return True
    return knative_port["name"] == "http1"


def run_server(where, container, grace, prometheus):
    """Runs the server as `container` runs it and checks its ports, probes and shutdown."""
    command = container.get("command") or ["inferwire-server"]
    args = container.get("args", image_args)
    flags = flag_values(args)
    ports = {"http-port": int(flags.get("http-port", 8000)), "grpc-port": int(flags.get("grpc-port", 8001)),
             "metrics-port": int(flags.get("metrics-port", 8002))}
    declared = {p["containerPort"] for p in container.get("ports", [])}
    check(declared <= set(ports.values()), "%s: declared container ports %s are the server's %s" % (where, sorted(declared), ports))
    by_name = {p["name"]: p["containerPort"] for p in container.get("ports", []) if "name" in p}
    probes = [(k, container[k]) for k in ("readinessProbe", "livenessProbe", "startupProbe") if k in container]
    check(any(k == "readinessProbe" and v["httpGet"]["path"] == "/v2/health/ready" for k, v in probes),
          "%s: readiness probe on /v2/health/ready" % where)
    check(any(k == "livenessProbe" and ("tcpSocket" in v or v["httpGet"]["path"] == "/v2/health/live") for k, v in probes),
          "%s: liveness probe on /v2/health/live or the port" % where)
    for k, v in probes:
        if "httpGet" in v:
            check(probe_port(v, by_name) == ports["http-port"], "%s: %s is on the HTTP port" % (where, k))
    if prometheus:
        check(int(prometheus[0]) == ports["metrics-port"] and prometheus[1] == "/metrics",
              "%s: Prometheus annotations name the metrics port and path" % where)
    sc = container.get("securityContext", {})
    check(str(sc.get("runAsUser", image_user)) == image_user, "%s: runs as the image's user %s" % (where, image_user))
    exit_timeout = int(flags.get("exit-timeout-secs", 30))
    check(exit_timeout < grace, "%s: --exit-timeout-secs (%d) fits in the grace period (%d s)" % (where, exit_timeout, grace))

    # Run it: the manifest's command and arguments, ports moved, the repository made local.
    mapped = {v: free_port() for v in ports.values()}
    run_args = []
    for a in args:
        m = re.match(r"--(http-port|grpc-port|metrics-port)=(\d+)$", a)
        if m:
            a = "--%s=%d" % (m.group(1), mapped[int(m.group(2))])
        elif a.startswith("--model-repository=") or a.startswith("--model-store="):
            a = a.split("=", 1)[0] + "=" + models
        run_args.append(a)
    log = open(os.path.join(work, "server.log"), "w")
    proc = subprocess.Popen(command + run_args + ["--http-address=127.0.0.1"], env=env, stdout=log, stderr=subprocess.STDOUT)
    try:
        http = mapped[ports["http-port"]]
        t0 = time.monotonic()
        while time.monotonic() - t0 < 30 and get("http://127.0.0.1:%d/v2/health/ready" % http)[0] != 200:
            if proc.poll() is not None:
                break
            time.sleep(0.05)
        if not check(proc.poll() is None, "%s: the server accepts the manifest's command line" % where):
            print(open(log.name).read()[-3000:])
            return
        for k, v in probes:
            port = mapped[probe_port(v, by_name)]
            if "tcpSocket" in v:
                with socket.create_connection(("127.0.0.1", port), timeout=5):
                    check(True, "%s: %s connects" % (where, k))
                continue
            check(get("http://127.0.0.1:%d%s" % (port, v["httpGet"]["path"]))[0] == 200,
                  "%s: %s %s answers 200" % (where, k, v["httpGet"]["path"]))
        st, text = get("http://127.0.0.1:%d/metrics" % mapped[ports["metrics-port"]])
        check(st == 200 and "nv_inference_request_success" in text, "%s: metrics on the metrics port" % where)
        for p in container.get("ports", []):
            if p.get("name") == "h2c":
                stub = rpc.GRPCInferenceServiceStub(grpc.insecure_channel("127.0.0.1:%d" % mapped[p["containerPort"]]))
                check(stub.ServerReady(pb.ServerReadyRequest(), timeout=5).ready, "%s: gRPC on the h2c port" % where)
                check(stub.ModelReady(pb.ModelReadyRequest(name="simple"), timeout=5).ready,
                      "%s: simple is ready over gRPC" % where)
        t0 = time.monotonic()
        proc.send_signal(signal.SIGTERM)
        code = proc.wait(timeout=grace)
        check(code == 0, "%s: exits 0 on SIGTERM (after %.2f s)" % (where, time.monotonic() - t0))
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()


# ---- KServe -----------------------------------------------------------------------------------
runtimes = load("kserve/clusterservingruntime.yaml")
check([d["kind"] for d in runtimes] == ["ClusterServingRuntime"] * 2, "two ClusterServingRuntimes")
check({d["apiVersion"] for d in runtimes} == {"serving.kserve.io/v1alpha1"}, "serving.kserve.io/v1alpha1")
images = set()
for rt in runtimes:
    spec = rt["spec"]
    name = rt["metadata"]["name"]
    c = spec["containers"][0]
    images.add(c["image"])
    check(c["name"] == "kserve-container", "%s: the container is kserve-container" % name)
    check(any(f["name"] == "triton" for f in spec["supportedModelFormats"]), "%s: serves the triton format" % name)
    ann = spec.get("annotations", {})
    port_names = [p.get("name") for p in c.get("ports", [])]
    check(len(port_names) == 1 and port_names[0] in ("http1", "h2c"), "%s: one Knative port, http1 or h2c" % name)
    check(("v2" in spec["protocolVersions"]) == (port_names[0] == "http1"), "%s: protocol v2 on http1, grpc-v2 on h2c" % name)
    for k in ("livenessProbe", "startupProbe"):
        if k in c:
            check(knative_probe_works(c[k], c["ports"][0]),
                  "%s: %s works on the Knative port (%s) it is moved to" % (name, k, port_names[0]))
    run_server(name, c, 30, (ann.get("prometheus.kserve.io/port"), ann.get("prometheus.kserve.io/path")))

isvc = load("kserve/inferenceservice.yaml")[0]
check(isvc["kind"] == "InferenceService" and isvc["apiVersion"] == "serving.kserve.io/v1beta1", "an InferenceService")
pred = isvc["spec"]["predictor"]["model"]
rt = {r["metadata"]["name"]: r for r in runtimes}.get(pred["runtime"])
check(rt is not None, "the InferenceService names an existing runtime")
check(pred["modelFormat"]["name"] in [f["name"] for f in rt["spec"]["supportedModelFormats"]], "its format is the runtime's")
check(pred["protocolVersion"] in rt["spec"]["protocolVersions"], "its protocol is the runtime's")
pvc = load("kserve/model-repository-pvc.yaml")[0]
m = re.match(r"pvc://([^/]+)/(.*)$", pred["storageUri"])
check(m is not None and m.group(1) == pvc["metadata"]["name"], "storageUri names the PVC of model-repository-pvc.yaml")
check(os.path.exists(os.path.join(models, isvc["metadata"]["name"], "config.pbtxt")),
      "the served model (%s) is in the bundled repository" % isvc["metadata"]["name"])

# ---- plain Kubernetes -------------------------------------------------------------------------
docs = load("kubernetes/inferwire-server.yaml")
dep = [d for d in docs if d["kind"] == "Deployment"][0]
services = [d for d in docs if d["kind"] == "Service"]
pod = dep["spec"]["template"]
c = pod["spec"]["containers"][0]
images.add(c["image"])
check(dep["spec"]["selector"]["matchLabels"].items() <= pod["metadata"]["labels"].items(), "the selector matches the pods")
check(len(services) == 2 and any(s["spec"].get("clusterIP") == "None" for s in services),
      "a Service for clients and a headless one for each replica")
named = {p["name"] for p in c["ports"]}
for svc in services:
    n = svc["metadata"]["name"]
    check(svc["spec"]["selector"].items() <= pod["metadata"]["labels"].items(), "%s selects the pods" % n)
    check(all(p["targetPort"] in named for p in svc["spec"]["ports"]), "%s: every targetPort is a named container port" % n)
ann = pod["metadata"]["annotations"]
run_server("Deployment", c, pod["spec"].get("terminationGracePeriodSeconds", 30),
           (ann.get("prometheus.io/port"), ann.get("prometheus.io/path")))

# ---- GMS --------------------------------------------------------------------------------------
ds = load("gms/daemonset.yaml")[0]
ex = load("gms/weights-example.yaml")[0]
check(ds["kind"] == "DaemonSet" and ex["kind"] == "Deployment", "a DaemonSet and an example Deployment")
ds_pod, ex_pod = ds["spec"]["template"]["spec"], ex["spec"]["template"]["spec"]
gms_c, ex_c = ds_pod["containers"][0], ex_pod["containers"][0]
images.update({gms_c["image"], ex_c["image"], ds_pod["initContainers"][0]["image"]})
host_paths = {v["hostPath"]["path"] for v in ds_pod["volumes"] + ex_pod["volumes"]}
check(len(host_paths) == 1, "the DaemonSet and the workload share one hostPath folder: %s" % host_paths)
ds_env = {e["name"]: e["value"] for e in gms_c["env"]}
ex_env = {e["name"]: e["value"] for e in ex_c["env"]}
check(ds_env["GMS_SOCKET_DIR"] == gms_c["volumeMounts"][0]["mountPath"] == ex_env["GMS_SOCKET_DIR"]
      == ex_c["volumeMounts"][0]["mountPath"], "GMS_SOCKET_DIR is the mounted folder on both sides")
check(str(gms_c["securityContext"]["runAsUser"]) == str(ex_pod["securityContext"]["runAsUser"]) == image_user,
      "the servers and the workload run as the same user (the sockets are mode 0600)")
check(ex_c["resources"]["limits"].get("nvidia.com/gpu") == 1 and "nvidia.com/gpu" not in gms_c.get("resources", {}).get("limits", {}),
      "the workload requests a GPU; the DaemonSet takes none from the device plugin")

sockets = os.path.join(work, "gms")
os.mkdir(sockets)
if os.geteuid() == 0:
    init = ds_pod["initContainers"][0]
    script = init["command"][-1].replace(init["volumeMounts"][0]["mountPath"], sockets)
    check(subprocess.run(["/bin/sh", "-c", script]).returncode == 0, "the init container's command")
    st = os.stat(sockets)
    check(st.st_uid == 1000 and (st.st_mode & 0o777) == 0o700, "it leaves the folder private to uid 1000")
    os.chown(sockets, os.geteuid(), os.getegid())  # the servers run as this test's user here
os.chmod(sockets, 0o700)
# No GPU here: the memfd backend, two devices. Everything else as the manifest says.
node_env = dict(env, **ds_env)
node_env.update(GMS_SOCKET_DIR=sockets, GMS_BACKEND="memfd", GMS_DEVICES="2")
node = subprocess.Popen(gms_c["command"] + gms_c.get("args", []), env=node_env,
                        stderr=open(os.path.join(work, "gms.log"), "w"))
try:
    tags = ds_env.get("GMS_TAGS", "weights").split()
    expected = {"gms_memfd%d_%s.sock" % (d, t) for d in range(2) for t in tags}
    deadline = time.monotonic() + 20
    while time.monotonic() < deadline and not expected <= set(os.listdir(sockets)) and node.poll() is None:
        time.sleep(0.05)
    check(expected <= set(os.listdir(sockets)), "the node script serves every device and tag: %s" % sorted(expected))
    probe = gms_c["readinessProbe"]["exec"]["command"]
    check(subprocess.run(probe, env=node_env).returncode == 0, "the DaemonSet's readiness probe passes")
    # The example workload's command, as the manifest writes it (memfd instead of a GPU).
    wl_env = dict(env, **ex_env)
    wl_env["GMS_SOCKET_DIR"] = sockets
    wl_cmd = ex_c["command"] + ex_c["args"] + ["--backend", "memfd"]
    outs = []
    for i in range(2):
        w = subprocess.Popen(wl_cmd, env=wl_env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        lines = []
        t0 = time.monotonic()
        while time.monotonic() - t0 < 60:
            line = w.stdout.readline()
            if not line:
                break
            lines.append(line.strip())
            if "checksum ok" in line:
                break
        if "--hold" in wl_cmd:
            check(w.poll() is None, "workload %d holds its mapping (--hold)" % i)
        w.send_signal(signal.SIGTERM)
        code = w.wait(timeout=10)
        check(code == 0, "workload %d exits 0 on SIGTERM" % i)
        outs.append(lines)
        print("  workload %d: %s" % (i, "; ".join(lines)))
    check(any("published" in l for l in outs[0]) and any("checksum ok" in l for l in outs[0]), "the first workload publishes")
    check(not any("published" in l for l in outs[1]) and any("checksum ok" in l for l in outs[1]),
          "the second imports and verifies")
finally:
    node.send_signal(signal.SIGTERM)
    try:
        code = node.wait(timeout=ds_pod.get("terminationGracePeriodSeconds", 30))
    except subprocess.TimeoutExpired:
        node.kill()
        code = None
check(code == 0, "the node script exits 0 on SIGTERM")
check(not (set(os.listdir(sockets)) & expected), "and its servers removed their sockets")

check(len(images) == 1, "every manifest uses the same image: %s" % sorted(images))
shutil.rmtree(work, ignore_errors=True)
if failures:
    print("%d check(s) failed" % len(failures))
    sys.exit(1)
