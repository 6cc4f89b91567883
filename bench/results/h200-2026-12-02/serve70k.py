# A 70K-token prompt to sparkglm-serve --preset tinyglm --device cuda (issue 16: the old cap was 64K).
import json, subprocess, sys, time, urllib.request
R = sys.argv[1]
port = 8941
srv = subprocess.Popen(["./build/sparkglm-serve", "--preset", "tinyglm", "--device", "cuda",
                        "--max-seq-len", "131072", "--port", str(port)],
                       stdout=open(f"{R}/serve70k-server.log", "w"), stderr=subprocess.STDOUT)
try:
    for _ in range(240):
        try:
            urllib.request.urlopen(f"http://127.0.0.1:{port}/health", timeout=2).read(); break
        except Exception:
            time.sleep(0.5)
    words = " ".join(f"w{i % 997}" for i in range(20000))
    for n_chars in (70000,):
        prompt = (words * 4)[:n_chars]
        body = json.dumps({"model": "tinyglm", "prompt": prompt, "max_tokens": 16,
                           "temperature": 0}).encode()
        t = time.time()
        req = urllib.request.Request(f"http://127.0.0.1:{port}/v1/completions", data=body,
                                     headers={"Content-Type": "application/json"})
        try:
            with urllib.request.urlopen(req, timeout=300) as r:
                out = json.loads(r.read())
                print("status", r.status, "seconds", round(time.time() - t, 3), "usage", out.get("usage"))
                print("text", repr(out["choices"][0]["text"][:80]))
        except urllib.error.HTTPError as e:
            print("HTTP", e.code, e.read()[:500])
    m = urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics").read().decode()
    print("\n".join(l for l in m.splitlines() if "kv_blocks" in l or "prompt_tokens" in l))
finally:
    srv.terminate(); srv.wait(30)
