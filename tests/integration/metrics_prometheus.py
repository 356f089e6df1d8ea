#!/usr/bin/python3
# SPDX-License-Identifier: Apache-2.0
"""inferwire-server's /metrics read by the Prometheus client's own text parser
(python3-prometheus-client): every family parses, with Triton's names, types and labels, and
the values move with inference. Covers the pending-request gauge, the latency counters and
summaries (--metrics-config) and the CPU metrics (--allow-cpu-metrics).

usage: metrics_prometheus.py <inferwire-server> <source dir>
"""
import json
import os
import re
import subprocess
import sys
import tempfile
import time
import urllib.request

from prometheus_client.parser import text_string_to_metric_families

server_bin, source = sys.argv[1], sys.argv[2]
work = tempfile.mkdtemp(prefix="iw-metrics-py-")
failures = []


def check(cond, what):
    if not cond:
        failures.append(what)
        print("FAILED:", what)


logs = []


def start(extra):
    log_path = os.path.join(work, "server-%d.log" % len(os.listdir(work)))
    logs.append(log_path)
    log = open(log_path, "w")
    proc = subprocess.Popen([server_bin, "--model-repository", os.path.join(source, "reference_server/models"),
                             "--http-address", "127.0.0.1", "--http-port", "0", "--metrics-port", "0",
                             "--allow-grpc", "false"] + extra, stdout=log, stderr=subprocess.STDOUT)
    ports = {}
    for _ in range(500):
        text = open(log_path).read()
        for name, pattern in (("http", r"Started HTTPService at [0-9.]+:([0-9]+)"),
                              ("metrics", r"Started Metrics Service at [0-9.]+:([0-9]+)")):
            m = re.search(pattern, text)
            if m:
                ports[name] = int(m.group(1))
        if len(ports) == 2:
            return proc, ports
        time.sleep(0.01)
    proc.kill()
    raise RuntimeError("the server did not start:\n" + open(log_path).read())


def infer(port):
    body = {"inputs": [{"name": n, "datatype": "INT32", "shape": [1, 16], "data": list(range(16))}
                       for n in ("INPUT0", "INPUT1")]}
    req = urllib.request.Request("http://127.0.0.1:%d/v2/models/simple/infer" % port,
                                 data=json.dumps(body).encode(), method="POST")
    with urllib.request.urlopen(req) as r:
        return r.status


def scrape(port):
    with urllib.request.urlopen("http://127.0.0.1:%d/metrics" % port) as r:
        text = r.read().decode()
    return {f.name: f for f in text_string_to_metric_families(text)}


def sample(families, family, name=None, **labels):
    for s in families[family].samples:
        if (name is None or s.name == name) and all(s.labels.get(k) == v for k, v in labels.items()):
            return s.value
    return None


simple = {"model": "simple", "version": "1"}

# Defaults: counters, pending gauge, CPU metrics; no summaries.
proc, ports = start([])
try:
    before = scrape(ports["metrics"])
    for _ in range(5):
        check(infer(ports["http"]) == 200, "inference")
    after = scrape(ports["metrics"])
    # The parser names counter families without their _total suffix; Triton's have none.
    for family, kind in (("nv_inference_request_success", "counter"), ("nv_inference_count", "counter"),
                         ("nv_inference_exec_count", "counter"), ("nv_inference_request_duration_us", "counter"),
                         ("nv_inference_queue_duration_us", "counter"),
                         ("nv_inference_compute_infer_duration_us", "counter"),
                         ("nv_inference_pending_request_count", "gauge"), ("nv_cpu_utilization", "gauge"),
                         ("nv_cpu_memory_total_bytes", "gauge"), ("nv_cpu_memory_used_bytes", "gauge")):
        check(family in after, family + " is present")
        if family in after:
            check(after[family].type == kind, family + " is a " + kind)
    check(sample(after, "nv_inference_request_success", **simple) -
          sample(before, "nv_inference_request_success", **simple) == 5, "five successes counted")
    check(sample(after, "nv_inference_pending_request_count", **simple) == 0, "nothing pending when idle")
    check(sample(after, "nv_inference_request_duration_us", **simple) > 0, "request duration accumulates")
    util = sample(after, "nv_cpu_utilization")
    check(util is not None and 0.0 <= util <= 1.0, "CPU utilisation within [0, 1]")
    total = sample(after, "nv_cpu_memory_total_bytes")
    used = sample(after, "nv_cpu_memory_used_bytes")
    check(total is not None and total > 0 and 0 < used <= total, "CPU memory used within total")
    check("nv_inference_request_summary_us" not in after, "no summaries unless asked for")
    # GPU metrics come from NVML when the driver's library and a GPU are there; otherwise the
    # log says why and there are none.
    if "no GPU metrics:" in open(logs[-1]).read():
        check(not any(f.startswith("nv_gpu_") for f in after), "no GPU families without NVML")
    else:
        for family in ("nv_gpu_utilization", "nv_gpu_memory_total_bytes", "nv_gpu_memory_used_bytes",
                       "nv_gpu_power_usage", "nv_gpu_power_limit"):
            check(family in after and after[family].type == "gauge" and after[family].samples, family + " per GPU")
        if "nv_gpu_utilization" in after:
            check(all(0 <= s.value <= 1 and s.labels.get("gpu_uuid", "").startswith("GPU-")
                      for s in after["nv_gpu_utilization"].samples), "GPU utilisation in [0, 1] by UUID")
finally:
    proc.terminate()
    proc.wait()

# Summaries on, latency counters and CPU metrics off, first-response histograms on. The
# quantiles are given in the form Triton's own QA passes ("0.0.1" reads as 0.0), with a pair
# Triton skips.
proc, ports = start(["--metrics-config", "summary_latencies=true", "--metrics-config",
                     "summary_quantiles=0.5:0.0.5,0.99:0.001,bogus", "--metrics-config", "counter_latencies=false",
                     "--metrics-config", "histogram_latencies=true", "--allow-cpu-metrics=false"])
try:
    for _ in range(7):
        infer(ports["http"])
    m = scrape(ports["metrics"])
    check("nv_inference_request_duration_us" not in m, "counter_latencies=false drops the latency counters")
    check("nv_cpu_utilization" not in m, "--allow-cpu-metrics=false drops the CPU metrics")
    for family in ("nv_inference_request_summary_us", "nv_inference_queue_summary_us",
                   "nv_inference_compute_input_summary_us", "nv_inference_compute_infer_summary_us",
                   "nv_inference_compute_output_summary_us"):
        check(family in m and m[family].type == "summary", family + " is a summary")
        if family not in m:
            continue
        check(sample(m, family, family + "_count", **simple) == 7, family + " counts seven requests")
        quantiles = sorted(s.labels["quantile"] for s in m[family].samples
                           if s.name == family and s.labels.get("model") == "simple")
        check([float(q) for q in quantiles] == [0.5, 0.99], family + " has the asked quantiles")
        p50 = sample(m, family, family, quantile=quantiles[0], **simple)
        p99 = sample(m, family, family, quantile=quantiles[1], **simple)
        check(p50 is not None and p99 is not None and 0 <= p50 <= p99, family + " quantiles are ordered")
    hist = "nv_inference_first_response_histogram_ms"
    check(hist in m and m[hist].type == "histogram", hist + " is a histogram")
    if hist in m:
        check(sample(m, hist, hist + "_count", **simple) == 7, hist + " counts seven first responses")
        bounds = sorted(float(s.labels["le"]) for s in m[hist].samples
                        if s.name == hist + "_bucket" and s.labels.get("model") == "simple")
        check(bounds == [100.0, 500.0, 2000.0, 5000.0, float("inf")], hist + " has Triton's default buckets")
        check(sample(m, hist, hist + "_bucket", le="+Inf", **simple) == 7, hist + " +Inf bucket holds every request")
    check("summary_quantiles: invalid option [bogus]" in open(logs[-1]).read(), "a malformed quantile pair is logged")
finally:
    proc.terminate()
    proc.wait()

# A malformed boolean setting stops the start-up (a malformed quantile pair is skipped, as
# Triton skips it).
bad = subprocess.run([server_bin, "--model-repository", os.path.join(source, "reference_server/models"),
                      "--metrics-config", "histogram_latencies=maybe"], capture_output=True, text=True)
check(bad.returncode == 2 and "histogram_latencies" in bad.stderr, "a malformed histogram_latencies is refused")

print("metrics_prometheus: %d failures" % len(failures))
sys.exit(1 if failures else 0)
