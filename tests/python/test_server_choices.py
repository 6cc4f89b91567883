"""`n` > 1 through openai-python (issue 20): n choices per request, each an independent sequence
with the same prompt, as a body and as a stream; seeded choices reproducible one by one (choice i
samples with the seed docs/api.md gives); greedy choices all equal; usage counting the prompt once;
an `n` the server can never run at once refused with 400 naming `n`; a client that leaves cancels
every choice.

Run: python3 test_server_choices.py --bin-dir BUILD_DIR
"""
import os
import sys
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import test_server_lifecycle as harness  # noqa: E402

import openai  # noqa: E402

SERVER = None
CLIENT = None
MODEL = "tinyglm-micro"
MESSAGES = [{"role": "user", "content": "Name three sparks."}]
MAX_NUM_SEQS = 4  # harness.BASE_ARGS


def setUpModule():
    global SERVER, CLIENT
    SERVER = harness.ServerProcess()
    CLIENT = openai.OpenAI(base_url=SERVER.base + "/v1", api_key="unused", max_retries=0,
                           timeout=60)


def tearDownModule():
    if SERVER is not None:
        assert SERVER.stop() == 0, SERVER.log()


def choice_seed(seed, i):
    """Choice i's seed (docs/api.md): the seed itself for i = 0, else SplitMix64's i-th output
    from state `seed`; as the signed 64-bit integer a request's `seed` field carries."""
    mask = (1 << 64) - 1
    s = seed & mask
    if i > 0:
        z = (s + i * 0x9E3779B97F4A7C15) & mask
        z = ((z ^ (z >> 30)) * 0xBF58476D1CE4E5B9) & mask
        z = ((z ^ (z >> 27)) * 0x94D049BB133111EB) & mask
        s = z ^ (z >> 31)
    return s - (1 << 64) if s >= 1 << 63 else s


def token_ids(choice):
    return choice.model_dump()["token_ids"]


class ChoicesTest(unittest.TestCase):
    def chat(self, **kw):
        args = dict(model=MODEL, messages=MESSAGES, max_tokens=12, temperature=1.0,
                    extra_body={"ignore_eos": True, "return_token_ids": True})
        args.update(kw)
        return CLIENT.chat.completions.create(**args)

    def test_blocking_chat_answers_n_choices_and_counts_the_prompt_once(self):
        r = self.chat(n=3, seed=5, logprobs=True)
        self.assertEqual([c.index for c in r.choices], [0, 1, 2])
        for c in r.choices:
            self.assertEqual(c.finish_reason, "length")
            self.assertEqual(len(token_ids(c)), 12)
            self.assertEqual(len(c.logprobs.content), 12)
        prompt = harness.post_json(SERVER.port, "/tokenize", {"messages": MESSAGES})[1]["count"]
        self.assertEqual(r.usage.prompt_tokens, prompt)
        self.assertEqual(r.usage.completion_tokens, 3 * 12)
        self.assertEqual(r.usage.total_tokens, prompt + 36)
        ids = [token_ids(c) for c in r.choices]
        self.assertEqual(len({tuple(x) for x in ids}), 3, f"the choices are one sample: {ids}")

    def test_seeded_choices_are_reproducible_one_by_one(self):
        seed = 20260
        a, b = self.chat(n=3, seed=seed), self.chat(n=3, seed=seed)
        self.assertEqual([token_ids(c) for c in a.choices], [token_ids(c) for c in b.choices])
        for i, c in enumerate(a.choices):
            alone = self.chat(seed=choice_seed(seed, i)).choices[0]
            self.assertEqual(token_ids(c), token_ids(alone), f"choice {i}")

    def test_greedy_choices_are_all_the_greedy_answer(self):
        r = self.chat(n=3, temperature=0)
        greedy = token_ids(self.chat(temperature=0).choices[0])
        for c in r.choices:
            self.assertEqual(token_ids(c), greedy, f"choice {c.index}")

    def test_streamed_chat_choices_carry_their_index_and_finish(self):
        seed = 77
        # Thinking off: the whole output is content.
        extra = {"ignore_eos": True, "chat_template_kwargs": {"enable_thinking": False}}
        body = self.chat(n=3, seed=seed, extra_body=extra)
        chunks = list(self.chat(n=3, seed=seed, stream=True,
                                stream_options={"include_usage": True}, extra_body=extra))
        text, finish, roles = ["", "", ""], [None] * 3, set()
        for chunk in chunks:
            for c in chunk.choices:
                if c.delta.role:
                    roles.add(c.index)
                text[c.index] += c.delta.content or ""
                if c.finish_reason:
                    self.assertIsNone(finish[c.index], "one finish per choice")
                    finish[c.index] = c.finish_reason
        self.assertEqual(roles, {0, 1, 2})
        self.assertEqual(finish, ["length"] * 3)
        self.assertEqual(text, [c.message.content for c in body.choices])
        self.assertEqual(chunks[-1].choices, [])
        self.assertEqual(chunks[-1].usage.completion_tokens, 36)

    def test_text_completion_choices_stream_and_block_alike(self):
        kw = dict(model=MODEL, prompt="Sparks:", max_tokens=10, temperature=0.8, seed=3, n=3,
                  logprobs=2, extra_body={"ignore_eos": True})
        body = CLIENT.completions.create(**kw)
        self.assertEqual([c.index for c in body.choices], [0, 1, 2])
        for c in body.choices:
            self.assertEqual(len(c.logprobs.tokens), 10)
        text = ["", "", ""]
        for chunk in CLIENT.completions.create(stream=True, **kw):
            for c in chunk.choices:
                text[c.index] += c.text
        self.assertEqual(text, [c.text for c in body.choices])
        self.assertEqual(body.usage.completion_tokens, 30)

    def test_n_beyond_what_the_server_runs_at_once_is_400_naming_n(self):
        for n in (MAX_NUM_SEQS + 1, 17):
            with self.assertRaises(openai.BadRequestError) as e:
                self.chat(n=n)
            self.assertEqual(e.exception.body["param"], "n", e.exception.body)
        self.assertEqual(len(self.chat(n=MAX_NUM_SEQS, max_tokens=2).choices), MAX_NUM_SEQS)

    def test_client_leaving_cancels_every_choice(self):
        conn, head = harness.open_stream(SERVER.port, dict(harness.LONG_STREAM, n=3))
        self.assertIn(b" 200 ", head.split(b"\r\n")[0])
        self.assertEqual(harness.wait_metric(SERVER.port, "sparkglm_num_requests_running", 3), 3)
        conn.close()
        self.assertEqual(harness.wait_metric(SERVER.port, "sparkglm_num_requests_running", 0), 0)


if __name__ == "__main__":
    harness.parse_args_and_run(globals())
