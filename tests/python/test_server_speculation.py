"""Speculative decoding through sparkglm-serve's HTTP API, on the trained tinyGLM (its MTP head is
right often enough to be accepted): with --speculative-tokens 2 greedy answers to concurrent chat
and completion requests are the answers of a server without speculation, with either
--speculative-rollback (records, recompute: only recompute replays rows), drafts are accepted at
both positions (/metrics), and "disable_mtp": true requests draft nothing. Requests with an output
grammar (JSON schema, JSON mode, a forced tool call) are drafted for and answer as without
speculation. --device cuda with --speculative-tokens is not refused for the drafts (without a GPU
the one refusal names the device).

Run: python3 test_server_speculation.py --bin-dir BUILD_DIR
"""
import os
import subprocess
import sys
import threading
import time
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import test_server_lifecycle as lifecycle  # noqa: E402
from test_server_lifecycle import ServerProcess, call, post_json  # noqa: E402

TRAINED = os.path.join(HERE, "..", "..", "tinyglm", "weights", "tinyglm-micro-trained")
PROMPTS = ["What is 12 times 7?", "Name three colors.", "Write a short greeting.",
           "Reply with the tag in the notes."]


def ask(port, i, extra=None):
    if i % 2:
        body = {"prompt": PROMPTS[i], "max_tokens": 40, "temperature": 0}
        route = "/v1/completions"
    else:
        body = {"messages": [{"role": "user", "content": PROMPTS[i]}], "max_tokens": 40,
                "temperature": 0}
        route = "/v1/chat/completions"
    body.update(extra or {})
    status, out = post_json(port, route, body)
    assert status == 200, out
    choice = out["choices"][0]
    return choice["text"] if "text" in choice else choice["message"]["content"]


SCHEMA = {"type": "object", "additionalProperties": False, "required": ["name", "count", "ok"],
          "properties": {"name": {"type": "string", "maxLength": 16},
                         "count": {"type": "integer", "minimum": 0, "maximum": 999},
                         "ok": {"type": "boolean"}}}
WEATHER = {"type": "function", "function": {
    "name": "get_weather", "description": "Current weather of a city.",
    "parameters": {"type": "object", "properties": {"city": {"type": "string"}},
                   "required": ["city"]}}}
CONSTRAINED = [
    {"messages": [{"role": "user", "content": "Task: output one JSON object that follows this "
                   "schema, and nothing else. name is kiwi, count is 42, ok is true."}],
     "response_format": {"type": "json_schema",
                         "json_schema": {"name": "item", "schema": SCHEMA}}},
    {"messages": [{"role": "user", "content": "Give a JSON object with the key color."}],
     "response_format": {"type": "json_object"}},
    {"messages": [{"role": "user", "content": "What is the weather in Oslo?"}],
     "tools": [WEATHER],
     "tool_choice": {"type": "function", "function": {"name": "get_weather"}}},
]


def ask_constrained(port, i):
    body = dict(CONSTRAINED[i], max_tokens=48, temperature=0)
    status, out = post_json(port, "/v1/chat/completions", body)
    assert status == 200, out
    message = out["choices"][0]["message"]
    calls = [(c["function"]["name"], c["function"]["arguments"])  # ids are random per call
             for c in message.get("tool_calls") or []]
    return message.get("content"), calls, out["choices"][0]["finish_reason"]


def ask_all(port, extra=None):
    """The four requests at once (C4)."""
    answers = [None] * len(PROMPTS)

    def one(i):
        try:
            answers[i] = ask(port, i, extra)
        except Exception as e:  # the comparison then shows what went wrong
            answers[i] = f"error: {e!r}"

    threads = [threading.Thread(target=one, args=(i,)) for i in range(len(PROMPTS))]
    for t in threads:
        t.start()
    for t in threads:
        t.join(120)
    return answers


def scrape_spec_counters(port):
    _, _, data = call(port, "GET", "/metrics")
    out = {}
    for line in data.decode().splitlines():
        if line.startswith("sparkglm_spec_"):
            name, value = line.rsplit(" ", 1)
            out[name] = float(value)
    return out


def spec_counters(port):
    """The counters once they have settled: the engine counts a verify step just after emitting
    its tokens, so a scrape sent the moment the last answer arrived can miss that step."""
    last = scrape_spec_counters(port)
    for _ in range(50):
        time.sleep(0.1)
        now = scrape_spec_counters(port)
        if now == last:
            return now
        last = now
    return last


class SpeculationServerTest(unittest.TestCase):
    def serve(self, *extra):
        return ServerProcess("--model", TRAINED, "--preset", None, *extra)

    def test_greedy_answers_are_the_same_and_drafts_are_accepted(self):
        with self.serve() as plain:
            want = ask_all(plain.port)
            self.assertEqual(plain.stop(), 0)
        for rollback in ("records", "recompute"):
            with self.subTest(rollback=rollback):
                self.check_speculation(want, rollback)

    def check_speculation(self, want, rollback):
        with self.serve("--speculative-tokens", "2", "--speculative-rollback", rollback) as spec:
            got = ask_all(spec.port)
            self.assertEqual(got, want)
            c = spec_counters(spec.port)
            replayed = c["sparkglm_spec_replayed_rows_total"]
            if rollback == "recompute":
                self.assertGreater(replayed, 0)
            else:
                self.assertEqual(replayed, 0)
            for pos in ("1", "2"):
                drafted = c['sparkglm_spec_draft_tokens_total{position="%s"}' % pos]
                accepted = c['sparkglm_spec_accepted_tokens_total{position="%s"}' % pos]
                self.assertGreater(drafted, 0, pos)
                self.assertGreater(accepted, 0, pos)
                self.assertLessEqual(accepted, drafted, pos)
            self.assertGreater(c["sparkglm_spec_verify_tokens_total"],
                               c["sparkglm_spec_verify_steps_total"])
            # disable_mtp: the same answers, and not one more draft.
            self.assertEqual(ask_all(spec.port, {"disable_mtp": True}), want)
            self.assertEqual(spec_counters(spec.port), c)
            self.assertEqual(spec.stop(), 0)

    def test_constrained_answers_are_the_same_and_drafted_for(self):
        # Output grammars (a JSON schema, JSON mode, a forced tool call) are drafted for, each
        # verify row checked under the grammar's mask there: the answers are the plain server's.
        with self.serve() as plain:
            want = [ask_constrained(plain.port, i) for i in range(len(CONSTRAINED))]
            self.assertEqual(plain.stop(), 0)
        with self.serve("--speculative-tokens", "2") as spec:
            before = spec_counters(spec.port)
            got = [ask_constrained(spec.port, i) for i in range(len(CONSTRAINED))]
            self.assertEqual(got, want)
            c = spec_counters(spec.port)
            for pos in ("1", "2"):
                key = 'sparkglm_spec_draft_tokens_total{position="%s"}' % pos
                self.assertGreater(c[key], before.get(key, 0), pos)
            key = 'sparkglm_spec_accepted_tokens_total{position="1"}'
            self.assertGreater(c[key], before.get(key, 0))
            self.assertEqual(spec.stop(), 0)

    def test_cuda_is_not_refused_for_speculation(self):
        # Speculation runs on --device cuda: on a machine without a GPU (or a binary built without
        # the backend) the one refusal left names the device, never the drafts; on a GPU the server
        # starts and is stopped here.
        proc = subprocess.Popen([os.path.join(lifecycle.BIN_DIR, "sparkglm-serve"), "--model",
                                 TRAINED, "--device", "cuda", "--speculative-tokens", "2",
                                 "--port", "0"],
                                stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
        try:
            out, _ = proc.communicate(timeout=60)
        except subprocess.TimeoutExpired:
            proc.terminate()
            proc.communicate(timeout=60)
            return
        self.assertNotEqual(proc.returncode, 0)
        self.assertIn("--device cuda", out)
        self.assertNotIn("--speculative-tokens 2 with --device cuda", out)

if __name__ == "__main__":
    lifecycle.parse_args_and_run(globals())
