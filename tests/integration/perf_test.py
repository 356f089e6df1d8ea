#!/usr/bin/python3
# SPDX-License-Identifier: Apache-2.0
"""inferwire-perf against inferwire-server: every load shape (sync, async, gRPC, streaming,
request rate, system shared memory, batches, a data file) runs and reports; the client's counts
agree with the server's statistics of the same windows; the CSV has perf_analyzer's columns;
regions are unregistered afterwards; bad flags and bad inputs fail with clear errors.

usage: perf_test.py <inferwire-perf> <inferwire-server> <source dir>
"""
import csv
import json
import os
import re
import subprocess
import sys
import tempfile
import time
import urllib.request

perf, server_bin, source = sys.argv[1:4]
work = tempfile.mkdtemp(prefix="iw-perf-")
log_path = os.path.join(work, "server.log")
server = subprocess.Popen([server_bin, "--model-repository", os.path.join(source, "reference_server/models"),
                           "--model-repository", os.path.join(source, "reference_server/models_decoupled"),
                           "--http-address", "127.0.0.1", "--http-port", "0", "--grpc-port", "0",
                           "--metrics-port", "0", "--allow-client-shm=true"],
                          stdout=open(log_path, "w"), stderr=subprocess.STDOUT)
failures = []


def check(cond, what):
    print(("ok: " if cond else "FAILED: ") + what)
    if not cond:
        failures.append(what)
    return cond


def ports():
    for _ in range(500):
        text = open(log_path).read()
        h = re.search(r"Started HTTPService at [0-9.]+:([0-9]+)", text)
        g = re.search(r"Started GRPCInferenceService at [0-9.]+:([0-9]+)", text)
        if h and g:
            return int(h.group(1)), int(g.group(1))
        time.sleep(0.01)
    raise SystemExit("the server did not start:\n" + open(log_path).read())


def perf_run(*args):
    return subprocess.run([perf, *args], capture_output=True, text=True, timeout=120)


def levels(out):
    """(client request count, server successful request count, level) per reported level."""
    found = []
    for block in re.split(r"\n(?=Request concurrency: |Request Rate: )", out):
        c = re.search(r"Request count: (\d+)", block)
        s = re.search(r"Successful request count: (\d+)", block)
        lv = re.match(r"(?:Request concurrency|Request Rate): ([0-9.]+)", block)
        if c and s and lv:
            found.append((int(c.group(1)), int(s.group(1)), float(lv.group(1))))
    return found


try:
    http, grpc = ports()
    H, G = "127.0.0.1:%d" % http, "127.0.0.1:%d" % grpc
    fast = ["-p", "150", "-s", "100", "-r", "3"]  # short windows, any stability: a test, not a measurement
    data_file = os.path.join(work, "data.json")
    with open(data_file, "w") as f:
        json.dump({"data": [{"INPUT0": list(range(16)), "INPUT1": {"content": [1] * 16, "shape": [16]}},
                            {"INPUT0": [5] * 16, "INPUT1": [2] * 16}]}, f)
    shapes = {
        "sync HTTP, concurrency 1 and 3": ["-m", "simple", "-u", H, "--concurrency-range", "1:3:2"],
        "async HTTP": ["-m", "simple", "-u", H, "--async", "--concurrency-range", "4"],
        "sync gRPC": ["-m", "simple", "-i", "grpc", "-u", G, "--concurrency-range", "2"],
        "async gRPC": ["-m", "simple", "-i", "grpc", "-u", G, "-a", "--concurrency-range", "4"],
        "gRPC streaming": ["-m", "simple", "-i", "grpc", "-u", G, "--streaming", "--concurrency-range", "2"],
        "request rate (poisson)": ["-m", "simple", "-u", H, "--request-rate-range", "200:400:200",
                                   "--request-distribution", "poisson"],
        "system shared memory over HTTP": ["-m", "simple", "-u", H, "--shared-memory", "system", "-a",
                                           "--concurrency-range", "2"],
        "system shared memory over gRPC": ["-m", "simple", "-i", "grpc", "-u", G, "--shared-memory", "system"],
        "batch 4, zero data": ["-m", "simple", "-u", H, "-b", "4", "--input-data", "zero"],
        "a data file": ["-m", "simple", "-u", H, "--input-data", data_file],
        "BYTES inputs (zero data)": ["-m", "simple_string", "-u", H, "--input-data", "zero"],
        "p95 stability, model version": ["-m", "simple", "-x", "1", "-u", H, "--percentile", "95"],
        "a decoupled model, streamed": ["-m", "repeat_int32", "-i", "grpc", "-u", G, "--streaming", "--input-data",
                                        "zero", "--shape", "IN:3", "--shape", "DELAY:3", "--shape", "WAIT:1"],
    }
    for name, args in shapes.items():
        r = perf_run(*(args + fast))
        found = levels(r.stdout)
        if not check(r.returncode in (0, 1) and found and "Inferences/Second vs. Client Average Batch Latency" in r.stdout,
                     "%s: runs and reports (exit %d)" % (name, r.returncode)):
            print(r.stdout[-2000:], r.stderr[-2000:])
            continue
        for client_n, server_n, level in found:
            conc = level if "--request-rate-range" not in args else 8
            # The statistics are read at the window's edges: requests in flight there may count
            # on one side only, and the server's edges trail the client's by the time a statistics
            # request takes to arrive, which a loaded machine stretches at one edge and not the
            # other (a few milliseconds: a few percent of a 150 ms window).
            check(client_n > 0 and abs(client_n - server_n) <= 2 * conc + 0.05 * client_n,
                  "%s, level %g: client %d requests, server %d in the same windows" % (name, level, client_n, server_n))
        if "-b" in args:
            m = re.search(r"Throughput: ([0-9.]+) infer/sec", r.stdout)
            n = re.search(r"Request count: (\d+)", r.stdout)
            check(m and n and float(m.group(1)) > 3 * int(n.group(1)) / (3 * 0.150 + 1),
                  "batch 4: throughput counts inferences, not requests")

    # CSV in perf_analyzer's layout.
    csv_path = os.path.join(work, "out.csv")
    r = perf_run("-m", "simple", "-u", H, "--concurrency-range", "1:2", "-f", csv_path, *fast)
    rows = list(csv.reader(open(csv_path))) if os.path.exists(csv_path) else []
    check(rows and rows[0][:3] == ["Concurrency", "Inferences/Second", "Client Send"] and rows[0][-1] == "p99 latency"
          and [row[0] for row in rows[1:]] == ["1", "2"], "CSV: perf_analyzer's header, one row per level")
    check(all(float(row[1]) > 0 and float(row[9]) <= float(row[10]) <= float(row[11]) <= float(row[12])
              for row in rows[1:]), "CSV: throughput > 0, p50 <= p90 <= p95 <= p99")
    check(rows and rows[0][8] == "Client Recv" and all(float(row[2]) >= 0 and float(row[8]) >= 0 for row in rows[1:]),
          "CSV: Client Send and Client Recv are measured times")
    check(re.search(r"Avg HTTP time: \d+ usec \(send/recv \d+ usec \+ response wait \d+ usec\)", r.stdout),
          "the HTTP time splits into send/recv and response wait, as perf_analyzer prints it")

    # Only this run's regions were registered, and none is left (the failed run's included).
    with urllib.request.urlopen("http://%s/v2/systemsharedmemory/status" % H) as resp:
        check(json.loads(resp.read()) == [], "no shared-memory region left registered")

    # Bad flags and bad inputs: a clear message, exit 2 before any request (1 for what the
    # server refuses).
    bad = [
        ([], 2, "-m <model> is required"),
        (["-m", "simple", "-i", "udp"], 2, "-i takes http or grpc"),
        (["-m", "simple", "--concurrency-range", "0:4"], 2, "not a positive integer"),
        (["-m", "simple", "--concurrency-range", "4:2"], 2, "the end is below the start"),
        (["-m", "simple", "--concurrency-range", "1", "--request-rate-range", "10"], 2, "exclude each other"),
        (["-m", "simple", "--streaming"], 2, "--streaming needs -i grpc"),
        (["-m", "simple", "--shared-memory", "gpu"], 2, "--shared-memory takes none, system or cuda"),
        (["-m", "simple", "-p", "5"], 2, "at least 10 ms"),
        (["-m", "simple", "--percentile", "100"], 2, "between 1 and 99"),
        (["-m", "simple", "--shape", "INPUT0"], 2, "--shape takes"),
        (["-m", "simple", "-u", "nohost"], 2, "-u takes host:port"),
        (["-m", "simple", "--sync", "--async"], 2, "exclude each other"),
        (["-m", "simple", "-u", H, "-b", "9"], 1, "above model simple's max_batch_size 8"),
        (["-m", "simple", "-u", H, "--shape", "NOPE:1"], 1, "not an input of simple"),
        (["-m", "simple", "-u", H, "--shape", "INPUT0:15"], 1, "does not fit"),
        (["-m", "nope", "-u", H], 1, "nope"),
        (["-m", "simple", "-u", H, "--input-data", os.path.join(work, "missing.json")], 1, "cannot read"),
        (["-m", "simple", "-u", H, "-p", "50", "--shared-memory", "system", "--output-shared-memory-size", "8"], 1,
         "a request failed"),
        (["-m", "repeat_int32", "-u", H, "--shape", "IN:1", "--shape", "DELAY:1", "--shape", "WAIT:1"], 1,
         "is decoupled (several responses per request): use -i grpc --streaming"),
        (["-m", "simple", "-u", H, "-x", "7"], 1, "simple"),
    ]
    with open(os.path.join(work, "short.json"), "w") as f:
        json.dump({"data": [{"INPUT0": [1, 2], "INPUT1": [1] * 16}]}, f)
    bad.append((["-m", "simple", "-u", H, "--input-data", os.path.join(work, "short.json")], 1, "has 2 values for shape [1,16]"))
    for args, code, text in bad:
        r = perf_run(*args)
        check(r.returncode == code and text in r.stderr,
              "%s: exit %d with '%s' (got %d: %s)" % (" ".join(args) or "(no flags)", code, text, r.returncode,
                                                     r.stderr.strip()[:160]))
    with urllib.request.urlopen("http://%s/v2/systemsharedmemory/status" % H) as resp:
        check(json.loads(resp.read()) == [], "no region left registered after the failed runs either")
    r = perf_run("--help")
    check(r.returncode == 0 and "--concurrency-range" in r.stdout and "--measurement-interval" in r.stdout, "--help")
finally:
    server.terminate()
    server.wait()

if failures:
    print("%d check(s) failed" % len(failures))
    sys.exit(1)
