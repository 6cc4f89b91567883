"""sparkglm-serve through curl: `curl -sN` streaming as server-sent events, /tokenize and
/detokenize, /health, /v1/models, and /metrics in Prometheus' text format.

Run: python3 test_server_curl.py --bin-dir BUILD_DIR
"""
import json
import os
import re
import shutil
import subprocess
import sys
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import test_server_lifecycle as harness  # noqa: E402

SERVER = None


def setUpModule():
    global SERVER
    if shutil.which("curl") is None:
        raise RuntimeError("curl is missing")
    SERVER = harness.ServerProcess()


def tearDownModule():
    if SERVER is not None:
        code = SERVER.stop()
        assert code == 0, f"exit code {code}\n{SERVER.log()}"


def curl(*args, data=None):
    """curl's stdout (bytes) and exit code; -w prints the status on a last line."""
    cmd = ["curl", "-s", "--max-time", "60", "-w", "\n%{http_code}"] + list(args)
    if data is not None:
        cmd += ["-H", "Content-Type: application/json", "--data-binary", "@-"]
    out = subprocess.run(cmd, input=json.dumps(data).encode() if data is not None else None,
                         capture_output=True, timeout=90)
    body, _, status = out.stdout.rpartition(b"\n")
    return out.returncode, int(status or 0), body


# One sample line of the text format: name, optional {labels}, a value.
SAMPLE = re.compile(r'^([a-zA-Z_:][a-zA-Z0-9_:]*)(\{([a-zA-Z_][a-zA-Z0-9_]*="[^"]*",?)*\})? '
                    r'(-?[0-9.e+-]+|\+Inf|NaN)$')


class CurlTest(unittest.TestCase):
    def test_streaming_chat_with_curl_n(self):
        body = {"model": "tinyglm-micro", "messages": [{"role": "user", "content": "hi"}],
                "max_tokens": 12, "temperature": 0, "stream": True, "ignore_eos": True,
                "stream_options": {"include_usage": True}}
        code, status, out = curl("-N", SERVER.base + "/v1/chat/completions", data=body)
        self.assertEqual((code, status), (0, 200), out)
        text = out.decode(errors="replace")
        # Events are `data: ...` lines separated by blank lines.
        blocks = [b for b in text.split("\n\n") if b.strip()]
        self.assertTrue(all(b.startswith("data: ") and "\n" not in b for b in blocks), blocks)
        events = harness.sse_events(text.splitlines())
        self.assertEqual(events[-1], "[DONE]")
        self.assertEqual(events[0]["choices"][0]["delta"]["role"], "assistant")
        self.assertEqual(events[-3]["choices"][0]["finish_reason"], "length")
        self.assertEqual(events[-2]["usage"]["completion_tokens"], 12)
        self.assertEqual(events[-2]["choices"], [])
        ids = {e["id"] for e in events[:-1]}
        self.assertEqual(len(ids), 1)

    def test_streaming_headers(self):
        body = {"prompt": "x", "max_tokens": 2, "stream": True}
        out = subprocess.run(["curl", "-sN", "-D", "-", "-o", "/dev/null", "--data-binary", "@-",
                              SERVER.base + "/v1/completions"],
                             input=json.dumps(body).encode(), capture_output=True, timeout=60)
        head = out.stdout.decode().lower()
        self.assertIn("content-type: text/event-stream", head)
        self.assertIn("transfer-encoding: chunked", head)
        self.assertIn("cache-control: no-cache", head)

    def test_streaming_to_an_http_1_0_client_ends_with_the_connection(self):
        body = {"prompt": "x", "max_tokens": 6, "stream": True, "ignore_eos": True}
        code, status, out = curl("-0", "-N", SERVER.base + "/v1/completions", data=body)
        self.assertEqual((code, status), (0, 200), out)
        events = harness.sse_events(out.decode(errors="replace").splitlines())
        self.assertEqual(events[-1], "[DONE]")
        self.assertEqual(events[-2]["choices"][0]["finish_reason"], "length")

    def test_tokenize_prompt_and_messages(self):
        code, status, out = curl(SERVER.base + "/tokenize", data={"prompt": "hi"})
        self.assertEqual(status, 200, out)
        r = json.loads(out)
        self.assertEqual(r["tokens"], [258, 260, 104, 105])  # [gMASK]<sop>h i
        self.assertEqual(r["count"], 4)
        code, status, out = curl(SERVER.base + "/tokenize",
                                 data={"prompt": "hi", "add_special_tokens": False})
        self.assertEqual(json.loads(out)["tokens"], [104, 105])
        msgs = {"messages": [{"role": "user", "content": "hi"}]}
        code, status, out = curl(SERVER.base + "/tokenize", data=msgs)
        r = json.loads(out)
        toks = r["tokens"]
        self.assertEqual(r["count"], len(toks))
        # The rendered template: [gMASK]<sop> first, the user turn, the assistant's turn last.
        self.assertEqual(toks[:2], [258, 260])
        at = toks.index(263)  # <|user|>
        self.assertIn([104, 105], [toks[i:i + 2] for i in range(at, len(toks) - 1)])
        self.assertIn(264, toks[at:])  # <|assistant|>
        # Messages tokenize as their rendered text does.
        _, _, text = curl(SERVER.base + "/detokenize", data={"tokens": toks})
        _, _, again = curl(SERVER.base + "/tokenize", data={"prompt": json.loads(text)["prompt"],
                                                            "add_special_tokens": False})
        self.assertEqual(json.loads(again)["tokens"], toks)
        code, status, out = curl(SERVER.base + "/tokenize", data={})
        self.assertEqual(status, 400, out)

    def test_detokenize_round_trips(self):
        text = "Sparks fly: ✨ <think>why</think>"
        _, _, out = curl(SERVER.base + "/tokenize", data={"prompt": text,
                                                          "add_special_tokens": False})
        tokens = json.loads(out)["tokens"]
        self.assertIn(266, tokens)  # <think> is one token
        code, status, out = curl(SERVER.base + "/detokenize", data={"tokens": tokens})
        self.assertEqual(status, 200, out)
        self.assertEqual(json.loads(out)["prompt"], text)
        code, status, out = curl(SERVER.base + "/detokenize", data={"tokens": [1, 999999]})
        self.assertEqual(status, 400, out)
        self.assertIn("tokens[1]", json.loads(out)["error"]["message"])

    def test_health_and_models(self):
        code, status, out = curl(SERVER.base + "/health")
        self.assertEqual((status, json.loads(out)), (200, {"status": "ok"}))
        code, status, out = curl(SERVER.base + "/v1/models")
        models = json.loads(out)
        self.assertEqual(models["object"], "list")
        self.assertEqual([m["id"] for m in models["data"]], ["tinyglm-micro"])

    def test_metrics_prometheus_text_format(self):
        curl(SERVER.base + "/v1/completions", data={"prompt": "warm up", "max_tokens": 5})
        code, status, out = curl("-i", SERVER.base + "/metrics")
        head, _, body = out.decode().partition("\r\n\r\n")
        self.assertEqual(status, 200)
        self.assertIn("text/plain; version=0.0.4", head)
        types, samples = {}, {}
        for line in body.splitlines():
            if line.startswith("# TYPE "):
                _, _, name, kind = line.split(" ")
                types[name] = kind
                continue
            if line.startswith("#") or not line:
                continue
            m = SAMPLE.match(line)
            self.assertIsNotNone(m, f"not a sample line: {line!r}")
            family = re.sub(r"_(bucket|sum|count)$", "", m.group(1))
            self.assertTrue(m.group(1) in types or family in types, f"no TYPE for {line!r}")
            samples[line.rsplit(" ", 1)[0]] = float(line.rsplit(" ", 1)[1])
        for name in ["sparkglm_num_requests_waiting", "sparkglm_num_requests_running",
                     "sparkglm_kv_blocks_used", "sparkglm_kv_blocks_total",
                     "sparkglm_prompt_tokens_total", "sparkglm_generation_tokens_total",
                     "sparkglm_engine_step_seconds_sum", "sparkglm_engine_step_seconds_count"]:
            self.assertIn(name, samples)
        self.assertGreater(samples["sparkglm_kv_blocks_total"], 0)
        self.assertGreaterEqual(samples["sparkglm_generation_tokens_total"], 5)
        self.assertGreater(samples["sparkglm_engine_step_seconds_count"], 0)
        self.assertGreaterEqual(
            samples['sparkglm_http_requests_total{route="/v1/completions",status="200"}'], 1)
        # Histogram buckets are cumulative and end in +Inf == _count.
        buckets = [(k, v) for k, v in samples.items()
                   if k.startswith("sparkglm_request_duration_seconds_bucket")]
        values = [v for _, v in buckets]
        self.assertEqual(values, sorted(values))
        self.assertEqual(buckets[-1][0], 'sparkglm_request_duration_seconds_bucket{le="+Inf"}')
        self.assertEqual(values[-1], samples["sparkglm_request_duration_seconds_count"])

    def test_expect_100_continue_and_keep_alive(self):
        body = {"prompt": "x" * 3000, "max_tokens": 2}
        code, status, out = curl("-H", "Expect: 100-continue", SERVER.base + "/v1/completions",
                                 data=body)
        self.assertEqual(status, 200, out)
        # Two URLs on one curl command reuse one connection.
        out = subprocess.run(["curl", "-sv", SERVER.base + "/health", SERVER.base + "/health"],
                             capture_output=True, timeout=60)
        self.assertIn(b"Re-using existing connection", out.stderr)


if __name__ == "__main__":
    harness.parse_args_and_run(globals())
