"""Soak: N clients stream completions against a running sparkglm-serve for a while, a share of
them hanging up mid-stream; afterwards every KV block must be free again and no request may have
failed on the server's side. Prints one JSON line and exits non-zero on a leak or an error.

    python3 bench/soak.py --url http://127.0.0.1:8893 --clients 12 --seconds 600 --cancel 0.3
"""
import argparse
import http.client
import json
import random
import re
import sys
import threading
import time
import urllib.parse


def metric(base, name):
    u = urllib.parse.urlparse(base)
    c = http.client.HTTPConnection(u.hostname, u.port, timeout=30)
    c.request("GET", "/metrics")
    text = c.getresponse().read().decode()
    c.close()
    m = re.search(r"^%s(?:\{[^}]*\})? ([0-9.e+-]+)$" % re.escape(name), text, re.M)
    return float(m.group(1)) if m else None


def one_request(base, model, rng, cancel_share, stats, lock):
    u = urllib.parse.urlparse(base)
    body = {"model": model, "prompt": "soak " * rng.randint(1, 200), "max_tokens": rng.randint(1, 64),
            "stream": True, "temperature": rng.choice([0, 0.8]), "seed": rng.randint(0, 1 << 30)}
    hang_up = rng.random() < cancel_share
    c = http.client.HTTPConnection(u.hostname, u.port, timeout=120)
    try:
        c.request("POST", "/v1/completions", json.dumps(body), {"content-type": "application/json"})
        r = c.getresponse()
        if r.status != 200:
            with lock:
                stats["http_errors"] += 1
                stats["last_error"] = "%d %s" % (r.status, r.read()[:200])
            return
        events = 0
        while True:
            line = r.fp.readline()
            if not line:
                break
            if line.startswith(b"data: "):
                if b'"error"' in line:
                    with lock:
                        stats["stream_errors"] += 1
                        stats["last_error"] = line[:200].decode(errors="replace")
                if line.strip() == b"data: [DONE]":
                    break
                events += 1
                if hang_up and events >= 2:
                    with lock:
                        stats["cancelled"] += 1
                    return
        with lock:
            stats["completed"] += 1
    except Exception as e:  # a transport failure is a failed request, never a silent one
        with lock:
            stats["client_errors"] += 1
            stats["last_error"] = repr(e)
    finally:
        c.close()


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--url", required=True)
    ap.add_argument("--model", default="tinyglm-micro")
    ap.add_argument("--clients", type=int, default=12)
    ap.add_argument("--seconds", type=float, default=600)
    ap.add_argument("--cancel", type=float, default=0.3)
    a = ap.parse_args()
    stats = {"completed": 0, "cancelled": 0, "http_errors": 0, "stream_errors": 0,
             "client_errors": 0, "last_error": ""}
    lock = threading.Lock()
    deadline = time.monotonic() + a.seconds

    def client(i):
        rng = random.Random(i)
        while time.monotonic() < deadline:
            one_request(a.url, a.model, rng, a.cancel, stats, lock)

    threads = [threading.Thread(target=client, args=(i,)) for i in range(a.clients)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    # Cancellations are noticed at the engine's next step: give it a moment to settle.
    used = None
    for _ in range(100):
        used = metric(a.url, "sparkglm_kv_blocks_used")
        running = metric(a.url, "sparkglm_num_requests_running")
        if used == 0 and running == 0:
            break
        time.sleep(0.1)
    stats["kv_blocks_used_after"] = used
    stats["requests"] = stats["completed"] + stats["cancelled"] + stats["http_errors"] + \
        stats["stream_errors"] + stats["client_errors"]
    print(json.dumps(stats))
    bad = used != 0 or stats["http_errors"] or stats["stream_errors"] or stats["client_errors"]
    sys.exit(1 if bad else 0)


if __name__ == "__main__":
    main()
