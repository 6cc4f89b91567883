# Issue 16 on the H200: four concurrent ~204K-token sessions with a follow-up turn each, then the
# time and device memory to admit one 1M-token request (tinyglm, CUDA, prefix cache on so the
# follow-up reuses its session).
import json, subprocess, sys, threading, time, urllib.request
R = sys.argv[1]
port = 8942
base = f"http://127.0.0.1:{port}"
srv = subprocess.Popen(["./build/sparkglm-serve", "--preset", "tinyglm", "--device", "cuda",
                        "--max-seq-len", "1048576", "--max-num-seqs", "4", "--enable-prefix-caching",
                        "--port", str(port)],
                       stdout=open(f"{R}/sessions16-server.log", "w"), stderr=subprocess.STDOUT)
def gpu_mem():
    return subprocess.run(["nvidia-smi", "--query-gpu=memory.used", "--format=csv,noheader"],
                          capture_output=True, text=True).stdout.strip()
def metric(name):
    m = urllib.request.urlopen(base + "/metrics").read().decode()
    return [l for l in m.splitlines() if l.startswith(name)]
def stream(prompt, max_tokens, out, key):
    body = json.dumps({"model": "tinyglm", "prompt": prompt, "max_tokens": max_tokens,
                       "temperature": 0, "ignore_eos": True, "stream": True,
                       "stream_options": {"include_usage": True}}).encode()
    t0 = time.time(); first = None; text = []; usage = None
    req = urllib.request.Request(base + "/v1/completions", data=body,
                                 headers={"Content-Type": "application/json"})
    try:
        with urllib.request.urlopen(req, timeout=900) as r:
            for line in r:
                line = line.decode().strip()
                if not line.startswith("data: ") or line == "data: [DONE]":
                    continue
                ev = json.loads(line[6:])
                if ev.get("choices"):
                    if first is None: first = time.time()
                    text.append(ev["choices"][0].get("text", ""))
                if ev.get("usage"): usage = ev["usage"]
        out[key] = {"ttft_s": round(first - t0, 4) if first else None,
                    "total_s": round(time.time() - t0, 4), "usage": usage, "text": "".join(text)}
    except urllib.error.HTTPError as e:
        out[key] = {"http": e.code, "body": e.read()[:400].decode(errors="replace")}
try:
    for _ in range(600):
        try:
            urllib.request.urlopen(base + "/health", timeout=2).read(); break
        except Exception:
            time.sleep(0.5)
    print("pool", metric("sparkglm_kv_blocks_total"), "gpu", gpu_mem())
    def filler(seed, n):
        words = " ".join(f"s{seed}w{(i * 7919 + seed) % 10007}" for i in range(n // 6 + 10))
        return words[:n]
    res = {}
    prompts = [filler(s, 204000) for s in range(4)]
    t = time.time()
    th = [threading.Thread(target=stream, args=(prompts[s], 32, res, f"turn1_s{s}")) for s in range(4)]
    [x.start() for x in th]; [x.join() for x in th]
    print("four 204K first turns, wall", round(time.time() - t, 2), "s")
    t = time.time()
    th = [threading.Thread(target=stream, args=(prompts[s] + res[f"turn1_s{s}"].get("text", "") +
                                                filler(100 + s, 1000), 32, res, f"turn2_s{s}"))
          for s in range(4)]
    [x.start() for x in th]; [x.join() for x in th]
    print("four follow-ups, wall", round(time.time() - t, 2), "s")
    for k in sorted(res):
        v = dict(res[k]); v.pop("text", None); print(k, json.dumps(v))
    print("gpu after sessions", gpu_mem(), metric("sparkglm_kv_blocks_used"))
    one = filler(999, 1048000)
    res2 = {}
    t = time.time()
    stream(one, 16, res2, "one_m")
    v = dict(res2["one_m"]); v.pop("text", None)
    print("1M request", json.dumps(v), "wall", round(time.time() - t, 2), "gpu", gpu_mem())
    print(metric("sparkglm_prefix_cache_hit_tokens_total"), metric("sparkglm_kv_blocks"))
finally:
    srv.terminate(); srv.wait(60)
