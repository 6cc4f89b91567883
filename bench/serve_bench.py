#!/usr/bin/env python3
"""Serving overhead on tinyglm-micro: aggregate decode tok/s at concurrency 1, 4 and 8 through
sparkglm-serve's HTTP/SSE API against the same greedy requests submitted in-process
(bench/engine_bench). Writes one JSON file; asserts nothing.

    python3 bench/serve_bench.py --bin-dir build --out bench/results/serve-overhead-2core.json \
        --config default --config sse_flush_1ms:--sse-flush-interval=0.001

Each repetition runs, per concurrency, one round through HTTP with a light client (one thread,
non-blocking sockets, large reads), one round with curl, and one in-process round (engine_bench
--concurrency C), back to back, so that the machine's drifting load hits both sides of a ratio
alike. Besides the rates it records where the server's CPU time went: per generated token, the
CPU time of the HTTP I/O threads, of the engine thread and of the other threads (the forward
pass's pool workers), read from /proc/PID/task/*/schedstat, and the clients' own CPU time.

Aggregate decode rate = sum(completion - 1) / (last token event - first token event), as
QUALIFICATION.md defines it; the HTTP side timestamps each SSE event as its bytes arrive.
"""
import argparse
import http.client
import json
import os
import resource
import selectors
import socket
import statistics
import subprocess
import time

PROMPT_TOKENS = 64
MARK = b'"finish_reason":'  # in every chunk of a completion stream


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def request_body(c, max_tokens):
    prompt = [(i * 7 + c * 13 + 1) % 256 for i in range(PROMPT_TOKENS)]
    return json.dumps({"model": "tinyglm-micro", "prompt": prompt, "max_tokens": max_tokens,
                       "temperature": 0, "ignore_eos": True, "stream": True})


def thread_cpu(pid):
    """CPU nanoseconds per thread class: io (sparkglm-io), engine (sparkglm-engine), other."""
    out = {"io": 0, "engine": 0, "other": 0}
    for tid in os.listdir(f"/proc/{pid}/task"):
        try:
            with open(f"/proc/{pid}/task/{tid}/comm") as f:
                name = f.read().strip()
            with open(f"/proc/{pid}/task/{tid}/schedstat") as f:
                ns = int(f.read().split()[0])
        except OSError:
            continue
        key = "io" if name == "sparkglm-io" else "engine" if name == "sparkglm-engine" else "other"
        out[key] += ns
    return out


def http_round(port, concurrency, max_tokens):
    """All streams on one thread: the client's cost per event stays small next to a decode step
    of ~0.1 ms, and it reads whatever has arrived in one call."""
    sel = selectors.DefaultSelector()
    times = [[] for _ in range(concurrency)]
    for c in range(concurrency):
        body = request_body(c, max_tokens).encode()
        s = socket.create_connection(("127.0.0.1", port), timeout=300)
        s.sendall(b"POST /v1/completions HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n"
                  b"Content-Type: application/json\r\nContent-Length: " + str(len(body)).encode()
                  + b"\r\n\r\n" + body)
        s.setblocking(False)
        sel.register(s, selectors.EVENT_READ, [c, b""])
    open_streams = concurrency
    while open_streams:
        for key, _ in sel.select(timeout=300):
            chunk = key.fileobj.recv(1 << 20)
            now = time.perf_counter()
            c, tail = key.data
            if not chunk:
                sel.unregister(key.fileobj)
                key.fileobj.close()
                open_streams -= 1
                continue
            data = tail + chunk
            times[c].extend([now] * data.count(MARK))
            key.data[1] = data[-(len(MARK) - 1):]  # a mark split across two reads counts once
    # A token that ends inside a UTF-8 character sends no chunk of its own, so chunks are not
    # counted: each stream generated max_tokens, its first chunk came with its first token (or,
    # rarely, one step later) and its finish chunk with its last.
    first = min(t[0] for t in times)
    last = max(t[-1] for t in times)
    return concurrency * (max_tokens - 1) / max(last - first, 1e-9)


def curl_round(port, concurrency, max_tokens):
    """Generated tokens / time from request sent to last byte, with curl as the client: C code
    that parses nothing. curl's own timers leave out its process start."""
    procs = []
    for c in range(concurrency):
        procs.append(subprocess.Popen(
            ["curl", "-sN", "-o", "/dev/null", "-w", "%{time_pretransfer} %{time_total}",
             "-H", "content-type: application/json", "-d", request_body(c, max_tokens),
             f"http://127.0.0.1:{port}/v1/completions"], stdout=subprocess.PIPE, text=True))
    spans = []
    for p in procs:
        out, _ = p.communicate()
        assert p.returncode == 0
        pre, total = map(float, out.split())
        spans.append(total - pre)
    return concurrency * max_tokens / max(spans)


def in_process(bin_dir, concurrency, max_tokens):
    out = json.loads(subprocess.check_output(
        [os.path.join(bin_dir, "bench", "engine_bench"), "--reps", "1", "--concurrency",
         str(concurrency), "--max-tokens", str(max_tokens), "--prompt-tokens", str(PROMPT_TOKENS)]))
    key = str(concurrency)
    return out["in_process_aggregate_decode_tok_s"][key][0], out["in_process_wall_tok_s"][key][0]


def children_cpu():
    r = resource.getrusage(resource.RUSAGE_CHILDREN)
    return r.ru_utime + r.ru_stime


def peak_rss(pid):
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) * 1024
    return None


def med(xs):
    return statistics.median(xs)


LEVELS = (1, 4, 8)


def measure(bin_dir, extra_args, reps, max_tokens):
    """One run: a fresh server, `reps` interleaved repetitions; returns (cells, server args, peak
    RSS)."""
    port = free_port()
    server_args = [os.path.join(bin_dir, "sparkglm-serve"), "--preset", "tinyglm-micro",
                   "--port", str(port), "--max-num-seqs", "8", "--max-batch-size", "8",
                   "--max-seq-len", "4096", "--kv-cache-dtype", "bf16"] + extra_args
    server = subprocess.Popen(server_args, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    runs = {c: {k: [] for k in ("http", "curl", "inproc", "inproc_wall", "io_us", "engine_us",
                                "other_us", "client_us", "curl_us")} for c in LEVELS}
    try:
        for _ in range(200):
            try:
                c = http.client.HTTPConnection("127.0.0.1", port, timeout=1)
                c.request("GET", "/health")
                if c.getresponse().status == 200:
                    break
            except OSError:
                time.sleep(0.05)
        http_round(port, 1, 8)  # warmup
        for _ in range(reps):
            for conc in LEVELS:
                r = runs[conc]
                tokens = conc * max_tokens
                cpu0, client0 = thread_cpu(server.pid), time.process_time()
                r["http"].append(http_round(port, conc, max_tokens))
                cpu1, client1 = thread_cpu(server.pid), time.process_time()
                for k in ("io", "engine", "other"):
                    r[k + "_us"].append((cpu1[k] - cpu0[k]) / 1e3 / tokens)
                r["client_us"].append((client1 - client0) * 1e6 / tokens)
                curl0 = children_cpu()
                r["curl"].append(curl_round(port, conc, max_tokens))
                r["curl_us"].append((children_cpu() - curl0) * 1e6 / tokens)
                rate, wall = in_process(bin_dir, conc, max_tokens)
                r["inproc"].append(rate)
                r["inproc_wall"].append(wall)
        server_peak = peak_rss(server.pid)
    finally:
        server.terminate()
        server.wait(timeout=60)
    cells = {}
    for conc in LEVELS:
        r = runs[conc]
        # Per generated token: HTTP time / in-process time - 1 = the share HTTP adds. Paired
        # within a repetition, then the median over repetitions.
        http_overhead = [i / h - 1.0 for i, h in zip(r["inproc"], r["http"])]
        curl_overhead = [i / c - 1.0 for i, c in zip(r["inproc_wall"], r["curl"])]
        step_us = 1e6 / med(r["inproc"])  # in-process time per generated token
        cells[str(conc)] = {
            "http_client_tok_s_runs": r["http"], "in_process_tok_s_runs": r["inproc"],
            "http_client_tok_s_median": med(r["http"]), "in_process_tok_s_median": med(r["inproc"]),
            "http_client_overhead_per_token_runs": http_overhead,
            "http_client_overhead_per_token": med(http_overhead),
            "curl_wall_tok_s_runs": r["curl"], "in_process_wall_tok_s_runs": r["inproc_wall"],
            "curl_wall_tok_s_median": med(r["curl"]),
            "in_process_wall_tok_s_median": med(r["inproc_wall"]),
            "curl_overhead_per_token_runs": curl_overhead,
            "curl_overhead_per_token": med(curl_overhead),
            "in_process_us_per_token": step_us,
            # CPU time is what the shared cores lose to each part, and unlike wall time it
            # barely moves with the machine's load.
            "server_io_threads_cpu_us_per_token": med(r["io_us"]),
            "server_io_threads_cpu_share_of_step": med(r["io_us"]) / step_us,
            "server_engine_thread_cpu_us_per_token": med(r["engine_us"]),
            "server_io_cpu_per_engine_thread_cpu": med(
                [i / e for i, e in zip(r["io_us"], r["engine_us"])]),
            "server_other_threads_cpu_us_per_token": med(r["other_us"]),
            "http_client_cpu_us_per_token": med(r["client_us"]),
            "curl_cpu_us_per_token": med(r["curl_us"]),
        }
    return cells, server_args[1:], server_peak


SUMMARY_KEYS = ("http_client_overhead_per_token", "curl_overhead_per_token",
                "in_process_us_per_token", "server_io_threads_cpu_us_per_token",
                "server_io_threads_cpu_share_of_step", "server_io_cpu_per_engine_thread_cpu",
                "http_client_cpu_us_per_token", "curl_cpu_us_per_token")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--bin-dir", default="build")
    ap.add_argument("--out", required=True)
    ap.add_argument("--runs", type=int, default=3, help="whole runs, each with a fresh server")
    ap.add_argument("--reps", type=int, default=5, help="repetitions within a run")
    ap.add_argument("--max-tokens", type=int, default=1024)
    ap.add_argument("--config", action="append", default=[],
                    help="NAME or NAME:FLAG=VALUE,...: a server configuration to measure, e.g. "
                         "sse_flush_1ms:--sse-flush-interval=0.001 (default: `default` alone)")
    a = ap.parse_args()
    configs = {}
    for spec in a.config or ["default"]:
        name, _, flags = spec.partition(":")
        configs[name] = [x for f in flags.split(",") if f for x in f.split("=", 1)]
    doc = {"schema": "sparkglm.bench.serve_overhead/2", "created_at": int(time.time()),
           "preset": "tinyglm-micro", "prompt_tokens": PROMPT_TOKENS, "max_tokens": a.max_tokens,
           "runs": a.runs, "reps": a.reps,
           "method": " ".join(" ".join(p.split()) for p in __doc__.strip().split("\n\n")[2:]),
           "note": "client, server and engine share the same cores; the clients' own CPU time "
                   "is part of the HTTP numbers. summary: per concurrency, the median over runs "
                   "of each run's ratio (itself the median of its paired repetitions)",
           "configs": {}}
    for name, extra in configs.items():
        runs, peaks = [], []
        for _ in range(a.runs):
            cells, server_args, peak = measure(a.bin_dir, extra, a.reps, a.max_tokens)
            runs.append(cells)
            peaks.append(peak)
        summary = {str(c): {k: med([r[str(c)][k] for r in runs]) for k in SUMMARY_KEYS}
                   for c in LEVELS}
        doc["configs"][name] = {"server_args": server_args, "server_peak_rss_bytes": max(peaks),
                                "summary": summary, "runs": runs}
        for conc, c in summary.items():
            print(f"{name} C{conc}: HTTP overhead {100 * c['http_client_overhead_per_token']:.1f}% "
                  f"(curl {100 * c['curl_overhead_per_token']:.1f}%); per token: in-process "
                  f"{c['in_process_us_per_token']:.1f} us, server I/O CPU "
                  f"{c['server_io_threads_cpu_us_per_token']:.1f} us "
                  f"({100 * c['server_io_threads_cpu_share_of_step']:.1f}%), client CPU "
                  f"{c['http_client_cpu_us_per_token']:.1f} us, curl CPU "
                  f"{c['curl_cpu_us_per_token']:.1f} us")
        print(f"{name}: server peak RSS {max(peaks) / 2**20:.0f} MiB")
    with open(a.out, "w") as f:
        json.dump(doc, f, indent=2)
    print(f"wrote {a.out}")


if __name__ == "__main__":
    main()
