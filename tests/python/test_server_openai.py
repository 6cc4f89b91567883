"""sparkglm-serve through the official `openai` Python package: chat and text completions, blocking
and streaming, logprobs, seeded sampling, usage (with stream_options.include_usage), reasoning
content with thinking on and off, stop strings and stop token ids, return_token_ids.

Run: python3 test_server_openai.py --bin-dir BUILD_DIR
"""
import math
import os
import sys
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import test_server_lifecycle as harness  # noqa: E402

try:
    import openai
except ImportError:  # ci/setup.sh installs it into .venv
    openai = None

SERVER = None
CLIENT = None
MODEL = "tinyglm-micro"
MESSAGES = [{"role": "system", "content": "You are terse."},
            {"role": "user", "content": "Name three sparks."}]


def setUpModule():
    global SERVER, CLIENT
    if openai is None:
        raise RuntimeError("the openai package is missing: run ci/setup.sh")
    SERVER = harness.ServerProcess()
    CLIENT = openai.OpenAI(base_url=SERVER.base + "/v1", api_key="unused", max_retries=0,
                           timeout=60)


def tearDownModule():
    if SERVER is not None:
        code = SERVER.stop()
        assert code == 0, f"exit code {code}\n{SERVER.log()}"


def extra(obj, key):
    """A field the openai models do not declare (reasoning_content, token_ids, ...)."""
    return obj.model_dump().get(key)


class ChatTest(unittest.TestCase):
    def test_models_lists_the_preset(self):
        ids = [m.id for m in CLIENT.models.list().data]
        self.assertEqual(ids, [MODEL])

    def test_blocking_chat_counts_usage(self):
        r = CLIENT.chat.completions.create(model=MODEL, messages=MESSAGES, max_tokens=24,
                                           temperature=0, extra_body={"ignore_eos": True})
        self.assertEqual(r.object, "chat.completion")
        self.assertTrue(r.id.startswith("chatcmpl-"))
        c = r.choices[0]
        self.assertEqual(c.message.role, "assistant")
        self.assertEqual(c.finish_reason, "length")
        self.assertEqual(r.usage.completion_tokens, 24)
        prompt = harness.post_json(SERVER.port, "/tokenize", {"messages": MESSAGES})[1]
        self.assertEqual(r.usage.prompt_tokens, prompt["count"])
        self.assertEqual(r.usage.total_tokens, r.usage.prompt_tokens + 24)
        self.assertEqual(r.usage.prompt_tokens_details.cached_tokens, 0)
        # Thinking is on by default and the prompt leaves <think> open: the tokens are reasoning
        # until a </think> (id 267) shows up.
        reasoning = r.usage.completion_tokens_details.reasoning_tokens
        self.assertGreater(reasoning, 0)
        self.assertLessEqual(reasoning, 24)

    def test_streaming_chat_role_deltas_finish_usage_done(self):
        stream = CLIENT.chat.completions.create(
            model=MODEL, messages=MESSAGES, max_tokens=16, temperature=0, stream=True,
            stream_options={"include_usage": True}, extra_body={"ignore_eos": True})
        chunks = list(stream)
        self.assertEqual(chunks[0].choices[0].delta.role, "assistant")
        finishes = [c.choices[0].finish_reason for c in chunks if c.choices]
        self.assertEqual(finishes[-1], "length")
        self.assertTrue(all(f is None for f in finishes[:-1]))
        last = chunks[-1]
        self.assertEqual(last.choices, [])
        self.assertEqual(last.usage.completion_tokens, 16)
        self.assertTrue(all(c.usage is None for c in chunks[:-1]))
        # The stream says what the blocking call says.
        blocking = CLIENT.chat.completions.create(model=MODEL, messages=MESSAGES, max_tokens=16,
                                                  temperature=0, extra_body={"ignore_eos": True})
        reasoning = "".join(extra(c.choices[0].delta, "reasoning_content") or ""
                            for c in chunks if c.choices)
        content = "".join(c.choices[0].delta.content or "" for c in chunks if c.choices)
        self.assertEqual(reasoning, extra(blocking.choices[0].message, "reasoning_content"))
        self.assertEqual(content, blocking.choices[0].message.content)

    def test_streaming_without_include_usage_has_no_usage_chunk(self):
        chunks = list(CLIENT.chat.completions.create(model=MODEL, messages=MESSAGES, max_tokens=4,
                                                     temperature=0, stream=True))
        self.assertTrue(all(c.choices for c in chunks))
        self.assertTrue(all(getattr(c, "usage", None) is None for c in chunks))

    def test_reasoning_content_with_thinking_on_and_off(self):
        on = CLIENT.chat.completions.create(model=MODEL, messages=MESSAGES, max_tokens=12,
                                            temperature=0, extra_body={"ignore_eos": True})
        self.assertIsInstance(extra(on.choices[0].message, "reasoning_content"), str)
        self.assertNotEqual(extra(on.choices[0].message, "reasoning_content"), "")
        off_body = {"ignore_eos": True, "chat_template_kwargs": {"enable_thinking": False}}
        off = CLIENT.chat.completions.create(model=MODEL, messages=MESSAGES, max_tokens=12,
                                             temperature=0, extra_body=off_body)
        self.assertIsNone(extra(off.choices[0].message, "reasoning_content"))
        self.assertEqual(off.usage.completion_tokens_details.reasoning_tokens, 0)
        # The prompt rendered the reasoning closed.
        toks = harness.post_json(SERVER.port, "/tokenize",
                                 {"messages": MESSAGES, "chat_template_kwargs":
                                  {"enable_thinking": False}})[1]["tokens"]
        self.assertEqual(toks[-2:], [266, 267])  # <think></think>
        streamed = list(CLIENT.chat.completions.create(model=MODEL, messages=MESSAGES,
                                                       max_tokens=12, temperature=0, stream=True,
                                                       extra_body=off_body))
        self.assertFalse(any(extra(c.choices[0].delta, "reasoning_content")
                             for c in streamed if c.choices))
        # reasoning_effort "none" turns thinking off too.
        none = CLIENT.chat.completions.create(model=MODEL, messages=MESSAGES, max_tokens=4,
                                              temperature=0, reasoning_effort="none")
        self.assertIsNone(extra(none.choices[0].message, "reasoning_content"))

    def test_logprobs_and_top_logprobs(self):
        r = CLIENT.chat.completions.create(model=MODEL, messages=MESSAGES, max_tokens=8,
                                           temperature=0, logprobs=True, top_logprobs=3,
                                           extra_body={"ignore_eos": True})
        entries = r.choices[0].logprobs.content
        self.assertEqual(len(entries), 8)
        for e in entries:
            self.assertLessEqual(e.logprob, 0.0)
            self.assertEqual(len(e.top_logprobs), 3)
            lps = [t.logprob for t in e.top_logprobs]
            self.assertEqual(lps, sorted(lps, reverse=True))
            # Greedy picks the most likely token.
            self.assertAlmostEqual(e.logprob, lps[0], places=5)
            self.assertEqual(bytes(e.bytes).decode(errors="replace"), e.token)
        total = sum(math.exp(t.logprob) for t in entries[0].top_logprobs)
        self.assertLessEqual(total, 1.0 + 1e-4)

    def test_seed_makes_sampling_reproducible(self):
        def sample(seed):
            r = CLIENT.chat.completions.create(
                model=MODEL, messages=MESSAGES, max_tokens=24, temperature=1.0, top_p=0.95,
                seed=seed, extra_body={"ignore_eos": True, "return_token_ids": True})
            return extra(r.choices[0], "token_ids")

        a, b, c = sample(1234), sample(1234), sample(99)
        self.assertEqual(len(a), 24)
        self.assertEqual(a, b)
        self.assertNotEqual(a, c)

    def test_stop_token_ids_end_with_stop(self):
        base = CLIENT.chat.completions.create(model=MODEL, messages=MESSAGES, max_tokens=16,
                                              temperature=0,
                                              extra_body={"ignore_eos": True,
                                                          "return_token_ids": True})
        ids = extra(base.choices[0], "token_ids")
        stop_id = ids[5]
        first = ids.index(stop_id)
        r = CLIENT.chat.completions.create(model=MODEL, messages=MESSAGES, max_tokens=16,
                                           temperature=0,
                                           extra_body={"ignore_eos": True,
                                                       "stop_token_ids": [stop_id],
                                                       "return_token_ids": True})
        self.assertEqual(r.choices[0].finish_reason, "stop")
        self.assertEqual(extra(r.choices[0], "token_ids"), ids[:first + 1])
        self.assertEqual(extra(r.choices[0], "stop_reason"), stop_id)


class CompletionTest(unittest.TestCase):
    PROMPT = "The quick brown fox"

    def greedy(self, **kw):
        body = {"ignore_eos": True, "return_token_ids": True}
        body.update(kw.pop("extra_body", {}))
        return CLIENT.completions.create(model=MODEL, prompt=self.PROMPT, temperature=0,
                                         extra_body=body, **kw)

    def test_blocking_completion(self):
        r = self.greedy(max_tokens=20)
        self.assertEqual(r.object, "text_completion")
        self.assertEqual(r.choices[0].finish_reason, "length")
        self.assertEqual(r.usage.completion_tokens, 20)
        # add_special_tokens (default) puts [gMASK]<sop> first.
        self.assertEqual(extra(r, "prompt_token_ids")[:2], [258, 260])
        self.assertEqual(r.usage.prompt_tokens, len(self.PROMPT) + 2)
        detok = harness.post_json(SERVER.port, "/detokenize",
                                  {"tokens": extra(r.choices[0], "token_ids"),
                                   "skip_special_tokens": True})[1]
        self.assertEqual(r.choices[0].text, detok["prompt"])

    def test_token_id_prompt_and_add_special_tokens(self):
        ids = [ord(c) for c in self.PROMPT]
        by_ids = CLIENT.completions.create(model=MODEL, prompt=ids, max_tokens=10, temperature=0,
                                           extra_body={"ignore_eos": True})
        by_text = self.greedy(max_tokens=10, extra_body={"add_special_tokens": False})
        self.assertEqual(by_ids.usage.prompt_tokens, len(ids))
        self.assertEqual(by_ids.choices[0].text, by_text.choices[0].text)

    def test_streaming_completion_matches_blocking(self):
        blocking = self.greedy(max_tokens=30)
        chunks = list(CLIENT.completions.create(model=MODEL, prompt=self.PROMPT, max_tokens=30,
                                                temperature=0, stream=True,
                                                stream_options={"include_usage": True},
                                                extra_body={"ignore_eos": True}))
        text = "".join(c.choices[0].text for c in chunks if c.choices)
        self.assertEqual(text, blocking.choices[0].text)
        self.assertEqual(chunks[-1].usage.completion_tokens, 30)
        self.assertEqual([c.choices[0].finish_reason for c in chunks if c.choices][-1], "length")

    def test_completion_logprobs(self):
        r = self.greedy(max_tokens=6, logprobs=2)
        lp = r.choices[0].logprobs
        self.assertEqual(len(lp.tokens), 6)
        self.assertEqual(len(lp.token_logprobs), 6)
        self.assertEqual(len(lp.top_logprobs), 6)
        for chosen, top in zip(lp.token_logprobs, lp.top_logprobs):
            self.assertLessEqual(chosen, 0.0)
            self.assertAlmostEqual(chosen, max(top.values()), places=5)
        self.assertEqual(lp.text_offset, sorted(lp.text_offset))

    def test_stop_string_truncates_and_reports_stop(self):
        base = self.greedy(max_tokens=64).choices[0].text
        # A short printable window of the greedy output, not at its very start.
        stop = None
        for i in range(4, len(base) - 2):
            window = base[i:i + 2]
            if all(32 <= ord(ch) < 127 for ch in window):
                stop = window
                break
        self.assertIsNotNone(stop, f"no printable window in {base!r}")
        cut = base.index(stop)
        r = self.greedy(max_tokens=64, stop=[stop, "never-there"])
        self.assertEqual(r.choices[0].finish_reason, "stop")
        self.assertEqual(r.choices[0].text, base[:cut])
        self.assertEqual(extra(r.choices[0], "stop_reason"), stop)
        self.assertLess(r.usage.completion_tokens, 64)
        # Streaming stops at the same place, and the engine request is gone right after.
        chunks = list(CLIENT.completions.create(model=MODEL, prompt=self.PROMPT, max_tokens=64,
                                                temperature=0, stream=True, stop=stop,
                                                extra_body={"ignore_eos": True}))
        self.assertEqual("".join(c.choices[0].text for c in chunks), base[:cut])
        self.assertEqual(harness.wait_metric(SERVER.port, "sparkglm_num_requests_running", 0), 0)
        # include_stop_str_in_output keeps it.
        kept = self.greedy(max_tokens=64, stop=stop,
                           extra_body={"include_stop_str_in_output": True})
        self.assertEqual(kept.choices[0].text, base[:cut] + stop)


if __name__ == "__main__":
    harness.parse_args_and_run(globals())
