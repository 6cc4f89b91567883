"""sparkglm-serve --tp-size 2 on the CPU backend: two processes (rank 0 starts rank 1), the model's
heads, widths, experts and vocabulary split between them (docs/parallel.md).

- greedy output of TP2 equals TP1's and repeats across two TP2 runs, alone (C1) and with four
  requests at once (C4); so do a seeded sampled completion and a constrained (guided_choice) chat. The
  logits differ from TP1's by rounding only (tests/dist checks the NMSE), which changes none of
  these picks or draws;
- killing rank 1 ends the request in flight with a device_fault error, new requests get 503, and
  rank 0 exits with status 3 on its own (never a hang);
- ranks started by hand with different settings refuse to start, naming the setting; a size that
  does not divide the model is refused naming the dimension;
- the KV shard (on by default: each rank stores the latents of every other position) holds
  392 / 264 = 1.48x TP1's tokens in the same --kv-cache-memory-bytes and says so; --kv-shard off
  keeps TP1's pool and output.

Run: python3 test_tensor_parallel.py --bin-dir BUILD_DIR
"""
import json
import os
import re
import signal
import socket
import subprocess
import threading
import unittest

from test_server_lifecycle import (ServerProcess, call, metric, open_stream, parse_args_and_run,
                                   sse_events)

PROMPTS = ["The quick brown fox", "tensor parallel", "GLM", "0123456789 abc"]
TP2 = ("--tp-size", "2", "--master-port", "0", "--threads", "1")


def completion(port, prompt, max_tokens=24):
    status, _, body = call(port, "POST", "/v1/completions",
                           {"prompt": prompt, "max_tokens": max_tokens, "temperature": 0,
                            "ignore_eos": True})
    assert status == 200, body
    return json.loads(body)["choices"][0]["text"]


CHOICES = ["tensor parallel", "expert parallel", "vocabulary parallel"]


def other_rows(port):
    """A seeded sampled completion (its rows gathered whole, drawn by rank 0's sampler) and a
    constrained greedy chat (masked rows: gathered, masked and picked on rank 0)."""
    sampled = call(port, "POST", "/v1/completions",
                   {"prompt": "seeded", "max_tokens": 24, "temperature": 0.9, "seed": 7,
                    "ignore_eos": True})
    schema = call(port, "POST", "/v1/chat/completions",
                  {"messages": [{"role": "user", "content": "a number"}], "max_tokens": 48,
                   "temperature": 0, "chat_template_kwargs": {"enable_thinking": False},
                   "guided_choice": CHOICES})
    assert sampled[0] == 200 and schema[0] == 200, (sampled, schema)
    return (json.loads(sampled[2])["choices"][0]["text"],
            json.loads(schema[2])["choices"][0]["message"]["content"])


def all_at_once(port, prompts):
    out = [None] * len(prompts)

    def one(i):
        out[i] = completion(port, prompts[i])
    threads = [threading.Thread(target=one, args=(i,)) for i in range(len(prompts))]
    for t in threads:
        t.start()
    for t in threads:
        t.join(120)
    return out


def children(pid):
    """Pids whose parent is `pid` (from /proc, no extra package)."""
    found = []
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                with open(f"/proc/{entry}/stat") as f:
                    stat = f.read()
            except OSError:
                continue
            if int(stat.rsplit(")", 1)[1].split()[1]) == pid:
                found.append(int(entry))
    return found


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def pool_tokens(log):
    return int(re.search(r"KV pool: \d+ blocks of 16 tokens = (\d+) tokens", log).group(1))


class TensorParallelTest(unittest.TestCase):
    def test_tp2_output_equals_tp1_repeats_and_is_the_same_at_c1_and_c4(self):
        with ServerProcess() as one:
            expected = [completion(one.port, p) for p in PROMPTS]
            expected_other = other_rows(one.port)
        self.assertIn(expected_other[1], CHOICES)  # the constraint held
        runs = []
        for _ in range(2):
            with ServerProcess(*TP2) as srv:
                self.assertIn("rank 0 of 2: every rank joined with the same settings", srv.log())
                alone = [completion(srv.port, p) for p in PROMPTS]
                together = all_at_once(srv.port, PROMPTS)
                self.assertEqual(together, alone, "C4 differs from C1 at TP2")
                runs.append(alone)
                self.assertEqual(other_rows(srv.port), expected_other, "sampled or masked rows")
                self.assertEqual(srv.stop(), 0, srv.log())
                self.assertIn("rank 1: stopped by rank 0", srv.log())
        self.assertEqual(runs[0], expected, "TP2 differs from TP1")
        self.assertEqual(runs[1], runs[0], "TP2 differs between two runs")

    def test_tp2_prefix_cache_hits_give_the_output_of_a_cold_prefill(self):
        # Snapshots are per rank (each holds its heads' KDA state): a hit restores them on every
        # rank from the slice rank 0 sends.
        prompt = "a shared prefix that spans a few blocks of sixteen tokens each; " * 3
        prompts = [prompt + "one", prompt + "two", prompt + "one"]
        with ServerProcess() as one:
            cold = [completion(one.port, p, 16) for p in prompts]
        with ServerProcess(*TP2, "--enable-prefix-caching", True) as srv:
            self.assertEqual([completion(srv.port, p, 16) for p in prompts], cold)
            self.assertGreaterEqual(metric(srv.port, "sparkglm_prefix_cache_hits_total"), 2)

    def test_tp2_kv_shard_holds_more_tokens_in_the_same_memory_and_off_keeps_every_latent(self):
        with ServerProcess() as one:
            whole = pool_tokens(one.log())
            expected = completion(one.port, PROMPTS[0])
        with ServerProcess(*TP2) as srv:
            shard = pool_tokens(srv.log())
            self.assertIn("KV shard: each of the 2 ranks stores the latents of the positions p % 2",
                          srv.log())
        with ServerProcess(*TP2, "--kv-shard", "off") as srv:
            self.assertEqual(pool_tokens(srv.log()), whole)
            self.assertNotIn("KV shard:", srv.log())
            self.assertEqual(completion(srv.port, PROMPTS[0]), expected)
        # tinyglm-micro at bf16, the MLA and MTP layers: 2 x (128 latent + 64 key + 4 gate) = 392
        # bytes a token, 2 x (64 + 68) = 264 on each rank with the shard; the pool is whole blocks.
        self.assertAlmostEqual(shard / whole, 392 / 264, delta=32 / whole)

    def test_killing_rank_1_ends_requests_with_503_and_rank_0_exits_3(self):
        with ServerProcess(*TP2) as srv:
            ranks = children(srv.proc.pid)
            self.assertEqual(len(ranks), 1, srv.log())
            sock, head = open_stream(srv.port, {"prompt": "a long one", "max_tokens": 30000,
                                                "temperature": 0, "ignore_eos": True,
                                                "stream": True})
            self.assertIn(b" 200 ", head.split(b"\r\n", 1)[0])
            sock.recv(4096)  # tokens are flowing
            os.kill(ranks[0], signal.SIGKILL)
            data = b""
            while b"data: [DONE]" not in data:
                chunk = sock.recv(65536)
                if not chunk:
                    break
                data += chunk
            sock.close()
            events = sse_events(data.decode(errors="replace").splitlines())
            self.assertEqual(events[-1], "[DONE]", events[-3:])
            self.assertEqual(events[-2]["error"]["code"], "device_fault", events[-2])
            self.assertIn("rank 1 is gone", events[-2]["error"]["message"])
            status, _, body = call(srv.port, "POST", "/v1/completions",
                                   {"prompt": "x", "max_tokens": 4}, timeout=10)
            self.assertEqual(status, 503, body)
            self.assertEqual(srv.proc.wait(30), 3, srv.log())

    def test_ranks_with_different_settings_refuse_to_start_naming_the_setting(self):
        port = str(free_port())
        serve = os.path.join(BIN_DIR, "sparkglm-serve")
        base = [serve, "--preset", "tinyglm-micro", "--port", "0", "--tp-size", "2",
                "--master-port", port]
        procs = [subprocess.Popen(base + ["--rank", str(r), "--max-num-seqs", str(4 - 2 * r)],
                                  stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
                 for r in (0, 1)]
        outs = [p.communicate(timeout=60)[0] for p in procs]
        for p, out in zip(procs, outs):
            self.assertNotEqual(p.returncode, 0, out)
            self.assertNotIn("listening on", out)
        self.assertIn("rank 1 differs from rank 0 in settings.max-num-seqs: 2 there, 4 on rank 0",
                      outs[0])
        self.assertIn("rank 0 refused this rank", outs[1])

    def test_a_size_that_does_not_divide_the_model_is_refused_naming_the_dimension(self):
        # With the KV shard (the default) the block of 16 positions is the first thing 3 does not
        # divide; without it, the model's heads are.
        for extra, refusal in (
                ((), "--block-size=16 (default) is not divisible by --tp-size=3 with "
                     "--kv-shard=on (default)"),
                (("--kv-shard", "off"), "linear_attn_config.num_heads = 4 is not divisible by "
                                        "the tensor-parallel size 3")):
            out = subprocess.run([os.path.join(BIN_DIR, "sparkglm-serve"), "--preset",
                                  "tinyglm-micro", "--port", "0", "--tp-size", "3",
                                  "--master-port", "0", "--threads", "1", *extra],
                                 capture_output=True, text=True, timeout=120)
            self.assertEqual(out.returncode, 2, out.stderr)
            self.assertIn(refusal, out.stderr)


if __name__ == "__main__":
    parse_args_and_run(globals())
