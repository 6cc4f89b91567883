#!/usr/bin/env python3
"""Serving overhead on tinyglm-micro: aggregate decode tok/s at concurrency 1, 4 and 8 through
sparkglm-serve's HTTP/SSE API against the same greedy requests submitted in-process
(bench/engine_bench). Writes one JSON file; asserts nothing.

    python3 bench/serve_bench.py --bin-dir build --out bench/results/serve-overhead-2core.json

Aggregate decode rate = sum(completion - 1) / (last token event - first token event), as
QUALIFICATION.md defines it; the HTTP side timestamps each SSE event as its bytes arrive.
"""
import argparse
import http.client
import json
import os
import socket
import statistics
import subprocess
import threading
import time

PROMPT_TOKENS = 64


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def stream_one(port, prompt, max_tokens, times):
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=300)
    body = json.dumps({"model": "tinyglm-micro", "prompt": prompt, "max_tokens": max_tokens,
                       "temperature": 0, "ignore_eos": True, "stream": True})
    conn.request("POST", "/v1/completions", body, {"content-type": "application/json"})
    resp = conn.getresponse()
    assert resp.status == 200, resp.read()
    while True:
        line = resp.readline()
        if not line:
            break
        if not line.startswith(b"data: ") or line.startswith(b"data: [DONE]"):
            continue
        # A byte test instead of json.loads: the client's own cost per event must stay small
        # next to a ~0.1 ms decode step.
        if b'"finish_reason":null' in line:
            times.append(time.perf_counter())
    conn.close()


def http_round(port, concurrency, max_tokens):
    all_times = [[] for _ in range(concurrency)]
    threads = []
    for c in range(concurrency):
        prompt = [(i * 7 + c * 13 + 1) % 256 for i in range(PROMPT_TOKENS)]
        threads.append(threading.Thread(target=stream_one, args=(port, prompt, max_tokens, all_times[c])))
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    first = min(t[0] for t in all_times)
    last = max(t[-1] for t in all_times)
    return sum(len(t) - 1 for t in all_times) / (last - first)


def curl_round(port, concurrency, max_tokens):
    """Generated tokens / wall time with curl as the client: C code that parses nothing, so the
    number charges the server, not the client."""
    procs = []
    start = time.perf_counter()
    for c in range(concurrency):
        prompt = [(i * 7 + c * 13 + 1) % 256 for i in range(PROMPT_TOKENS)]
        body = json.dumps({"model": "tinyglm-micro", "prompt": prompt, "max_tokens": max_tokens,
                           "temperature": 0, "ignore_eos": True, "stream": True})
        procs.append(subprocess.Popen(
            ["curl", "-sN", "-o", "/dev/null", "-H", "content-type: application/json", "-d", body,
             f"http://127.0.0.1:{port}/v1/completions"]))
    for p in procs:
        assert p.wait() == 0
    return concurrency * max_tokens / (time.perf_counter() - start)


def peak_rss(pid):
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) * 1024
    return None


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--bin-dir", default="build")
    ap.add_argument("--out", required=True)
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument("--max-tokens", type=int, default=256)
    a = ap.parse_args()
    port = free_port()
    server = subprocess.Popen(
        [os.path.join(a.bin_dir, "sparkglm-serve"), "--preset", "tinyglm-micro", "--port", str(port),
         "--max-num-seqs", "8", "--max-batch-size", "8", "--max-seq-len", "4096",
         "--kv-cache-dtype", "bf16"], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
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
        http_rates, curl_rates = {}, {}
        for conc in (1, 4, 8):
            http_rates[str(conc)] = [http_round(port, conc, a.max_tokens) for _ in range(a.reps)]
            curl_rates[str(conc)] = [curl_round(port, conc, a.max_tokens) for _ in range(a.reps)]
        server_peak = peak_rss(server.pid)
    finally:
        server.terminate()
        server.wait(timeout=60)
    inproc = json.loads(subprocess.check_output(
        [os.path.join(a.bin_dir, "bench", "engine_bench"), "--reps", str(a.reps),
         "--max-tokens", str(a.max_tokens), "--prompt-tokens", str(PROMPT_TOKENS)]))
    inproc_wall = inproc["in_process_wall_tok_s"]
    inproc = inproc["in_process_aggregate_decode_tok_s"]
    cells = {}
    for conc in ("1", "4", "8"):
        h, i = statistics.median(http_rates[conc]), statistics.median(inproc[conc])
        cw, iw = statistics.median(curl_rates[conc]), statistics.median(inproc_wall[conc])
        # Per generated token: HTTP time / in-process time - 1 = the share HTTP adds.
        cells[conc] = {"python_client_tok_s_runs": http_rates[conc], "in_process_tok_s_runs": inproc[conc],
                       "python_client_tok_s_median": h, "in_process_tok_s_median": i,
                       "python_client_overhead_per_token": i / h - 1.0,
                       "curl_wall_tok_s_runs": curl_rates[conc], "in_process_wall_tok_s_runs": inproc_wall[conc],
                       "curl_wall_tok_s_median": cw, "in_process_wall_tok_s_median": iw,
                       "curl_overhead_per_token": iw / cw - 1.0}
    doc = {"schema": "sparkglm.bench.serve_overhead/1", "created_at": int(time.time()),
           "preset": "tinyglm-micro", "prompt_tokens": PROMPT_TOKENS, "max_tokens": a.max_tokens,
           "reps": a.reps, "server_peak_rss_bytes": server_peak,
           "method": __doc__.strip().splitlines()[-2] + " " + __doc__.strip().splitlines()[-1],
           "note": "client, server and engine share the same 2 cores; the client's own parsing is "
                   "included in the HTTP numbers",
           "cells": cells}
    with open(a.out, "w") as f:
        json.dump(doc, f, indent=2)
    for conc, c in cells.items():
        print(f"C{conc}: python client {c['python_client_tok_s_median']:.0f} vs in-process "
              f"{c['in_process_tok_s_median']:.0f} tok/s ({100 * c['python_client_overhead_per_token']:.1f}%); "
              f"curl {c['curl_wall_tok_s_median']:.0f} vs in-process wall {c['in_process_wall_tok_s_median']:.0f} tok/s "
              f"({100 * c['curl_overhead_per_token']:.1f}%)")
    print(f"server peak RSS {server_peak / 2**20:.0f} MiB; wrote {a.out}")


if __name__ == "__main__":
    main()
