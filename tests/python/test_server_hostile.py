"""sparkglm-serve against hostile requests: one request must not freeze the others. While clients
flood /tokenize with huge chats (within and beyond --max-messages / --max-tools /
--max-prompt-bytes), /health answers within 50 ms (p99) and a concurrent stream keeps receiving
tokens, because reading bodies, rendering templates and tokenizing run on the request workers,
not on the I/O thread. Each limit is a 400 naming it. A client's strings (cache_salt) reach the
log escaped and cut short: no forged lines, no megabyte lines.

Run: python3 test_server_hostile.py --bin-dir BUILD_DIR
"""
import http.client
import json
import os
import socket
import sys
import threading
import time
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import test_server_lifecycle as harness  # noqa: E402

SERVER = None


def setUpModule():
    global SERVER
    SERVER = harness.ServerProcess()


def tearDownModule():
    if SERVER is not None:
        code = SERVER.stop()
        assert code == 0, f"exit code {code}\n{SERVER.log()}"


def chat(n, content="tell me about sparks"):
    return [{"role": "user" if i % 2 == 0 else "assistant", "content": content}
            for i in range(n)]


def tool(i):
    return {"type": "function", "function": {"name": f"f{i}", "description": "d",
                                             "parameters": {"type": "object"}}}


class LimitsTest(unittest.TestCase):
    def expect_limit(self, path, body, param, option):
        status, data = harness.post_json(SERVER.port, path, body, timeout=120)
        self.assertEqual(status, 400, data)
        self.assertEqual(data["error"]["param"], param)
        self.assertIn(option, data["error"]["message"])

    def test_each_limit_is_a_400_naming_it(self):
        self.expect_limit("/tokenize", {"messages": chat(200000)}, "messages", "--max-messages")
        self.expect_limit("/v1/chat/completions", {"messages": chat(20000), "max_tokens": 1},
                          "messages", "--max-messages")
        self.expect_limit("/v1/chat/completions",
                          {"messages": chat(1), "tools": [tool(i) for i in range(100000)]},
                          "tools", "--max-tools")
        self.expect_limit("/tokenize", {"prompt": "x" * (9 << 20)}, "prompt",
                          "--max-prompt-bytes")
        self.expect_limit("/v1/completions", {"prompt": "y" * (9 << 20), "max_tokens": 1},
                          "prompt", "--max-prompt-bytes")
        # Within the limits: served, however large the answer (8 Mi ids here: about 40 MB of
        # JSON, more than a stream may leave unsent).
        status, data = harness.post_json(SERVER.port, "/tokenize", {"messages": chat(16384)},
                                         timeout=120)
        self.assertEqual(status, 200, data)
        status, data = harness.post_json(SERVER.port, "/tokenize", {"prompt": "7" * (8 << 20)},
                                         timeout=120)
        self.assertEqual(status, 200)
        self.assertEqual(data["count"], (8 << 20) + 2)

    def test_sixty_mib_prompt_is_refused_and_the_server_stays_small(self):
        status, data = harness.post_json(SERVER.port, "/tokenize", {"prompt": "z" * (60 << 20)},
                                         timeout=120)
        self.assertEqual(status, 400, data)
        self.assertIn("--max-prompt-bytes", data["error"]["message"])
        with open(f"/proc/{SERVER.proc.pid}/status") as f:
            rss_kib = next(int(line.split()[1]) for line in f if line.startswith("VmHWM:"))
        self.assertLess(rss_kib, 1 << 20, "peak RSS above 1 GiB")


class StallTest(unittest.TestCase):
    def test_health_and_a_stream_stay_live_under_a_tokenize_flood(self):
        stop = threading.Event()
        statuses = []
        hostile = [{"messages": chat(16000)}, {"messages": chat(200000)},
                   {"messages": chat(1), "tools": [tool(i) for i in range(100000)]},
                   {"prompt": "q" * (9 << 20)}]
        bodies = [json.dumps(b).encode() for b in hostile]

        def flood(k):
            while not stop.is_set():
                body = bodies[k % len(bodies)]
                k += 1
                try:
                    status, _, _ = harness.call(SERVER.port, "POST", "/tokenize", body,
                                                headers={"Content-Type": "application/json"},
                                                timeout=120)
                    statuses.append(status)
                except OSError as e:
                    statuses.append(str(e))

        # The stream: a long greedy generation, its events timed as they arrive.
        s, head = harness.open_stream(SERVER.port, harness.LONG_STREAM)
        self.assertIn(b"200 OK", head)
        arrivals = []

        def read_stream():
            s.settimeout(30)
            while not stop.is_set():
                chunk = s.recv(65536)
                if not chunk:
                    return
                arrivals.append((time.monotonic(), chunk.count(b"data: ")))

        reader = threading.Thread(target=read_stream, daemon=True)
        reader.start()
        floods = [threading.Thread(target=flood, args=(k,), daemon=True) for k in range(4)]
        for t in floods:
            t.start()
        time.sleep(1.0)  # the flood is under way

        conn = http.client.HTTPConnection("127.0.0.1", SERVER.port, timeout=30)
        latencies = []
        start = time.monotonic()
        while time.monotonic() - start < 8.0:
            t0 = time.monotonic()
            status, _, _ = harness.call(SERVER.port, "GET", "/health", conn=conn)
            latencies.append(time.monotonic() - t0)
            self.assertEqual(status, 200)
            time.sleep(0.02)
        window = (start, time.monotonic())
        stop.set()
        for t in floods:
            t.join(120)
        conn.close()
        s.close()
        reader.join(30)

        latencies.sort()
        p99 = latencies[int(len(latencies) * 0.99) - 1]
        self.assertGreater(len(statuses), 4, statuses)
        self.assertTrue(set(statuses) <= {200, 400, 503}, statuses)
        self.assertIn(400, statuses)
        self.assertLess(p99, 0.050, f"/health p99 {p99 * 1000:.1f} ms over {len(latencies)} "
                                    f"calls; max {latencies[-1] * 1000:.1f} ms")
        # The stream kept going through the whole window: no gap of a second without tokens.
        during = [t for t, n in arrivals if window[0] <= t <= window[1] and n > 0]
        self.assertGreater(len(during), 10)
        gaps = [b - a for a, b in zip([window[0]] + during, during + [window[1]])]
        self.assertLess(max(gaps), 1.0, f"longest gap between stream events {max(gaps):.2f} s")
        self.assertEqual(harness.wait_metric(SERVER.port, "sparkglm_num_requests_running", 0,
                                             timeout=10), 0)


class LogInjectionTest(unittest.TestCase):
    def test_client_strings_cannot_forge_or_flood_log_lines(self):
        forged = "x\n2020-01-01T00:00:00.000Z sparkglm-serve 9.9.9 (forged)\r\x1b[2J"
        for salt in [forged, "s" * (50 << 20)]:
            status, data = harness.post_json(
                SERVER.port, "/v1/completions",
                {"prompt": "hi", "max_tokens": 2, "cache_salt": salt}, timeout=120)
            self.assertEqual(status, 200, data)
        deadline = time.time() + 10
        while time.time() < deadline and sum("cache_salt=" in l for l in SERVER.lines) < 2:
            time.sleep(0.05)
        salted = [l for l in SERVER.lines if "cache_salt=" in l]
        self.assertEqual(len(salted), 2, salted)
        self.assertIn('cache_salt="x\\n2020-01-01T00:00:00.000Z sparkglm-serve 9.9.9 (forged)'
                      '\\r\\x1b[2J"', salted[0])
        self.assertIn("bytes cut]", salted[1])
        self.assertLess(len(salted[1]), 1024)
        self.assertFalse(any(l.startswith("2020-01-01") for l in SERVER.lines))
        self.assertFalse(any(len(l) > 20000 for l in SERVER.lines))


if __name__ == "__main__":
    harness.parse_args_and_run(globals())
