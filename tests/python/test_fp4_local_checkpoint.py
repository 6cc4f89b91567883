"""An fp4-local tinyglm-micro checkpoint loads and serves on the CPU, close to its BF16 twin.

Run by CTest as:  python3 test_fp4_local_checkpoint.py --bin-dir <cmake build dir>

1. `sparkglm tinyglm make --preset tinyglm-micro --weight-format fp4-local` and the same with bf16
   (same seed) write two checkpoint directories.
2. `sparkglm logits --model DIR` gives both models' logits over 48 tokens. The logit NMSE
   sum((fp4 - bf16)^2) / sum(bf16^2) is printed and must lie in (1e-6, 0.3), below 0.1 at position 0:
   not zero (the fp4-local weights were really quantized and really used) and small. Random dummy weights amplify weight
   error more than trained ones do: per-tensor weight NMSE is about 1e-2 (NVFP4) and 1e-3 (FP8), and
   the logits of the first position differ by about 3 %, later positions more where a routing
   decision flips.
3. `sparkglm-serve --model DIR` (CPU) answers a greedy completion from each checkpoint; both give 16
   tokens, and how many leading tokens agree is printed.
4. `sparkglm logits --precision-mode spark` on the fp4-local checkpoint (KDA and shared-expert
   weights converted to NVFP4, routed-expert activations through NVFP4 with the checkpoint's
   input_scale) against strict: NMSE printed, in (1e-6, 0.6), position 0 below 0.1; two spark runs
   give the same bits.
"""
import os
import subprocess
import sys
import tempfile
import unittest

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import test_server_lifecycle as harness  # noqa: E402

TOKENS = [(i * 37 + 11) % 256 for i in range(48)]


def run(*args):
    proc = subprocess.run(list(args), capture_output=True, text=True, timeout=300)
    if proc.returncode != 0:
        raise RuntimeError(f"{' '.join(args)} failed ({proc.returncode}): {proc.stderr.strip()}")
    return proc.stdout


class Fp4LocalCheckpointTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.tmp = tempfile.TemporaryDirectory()
        tool = os.path.join(harness.BIN_DIR, "sparkglm")
        cls.dirs = {}
        for fmt in ("bf16", "fp4-local"):
            cls.dirs[fmt] = os.path.join(cls.tmp.name, fmt)
            out = run(tool, "tinyglm", "make", "--preset", "tinyglm-micro", "--weight-format", fmt,
                      "--out", cls.dirs[fmt])
            assert fmt in out, out

    @classmethod
    def tearDownClass(cls):
        cls.tmp.cleanup()

    def test_logits_are_close_to_the_bf16_checkpoints_but_not_equal(self):
        tool = os.path.join(harness.BIN_DIR, "sparkglm")
        logits = {}
        for fmt, ckpt in self.dirs.items():
            out = os.path.join(self.tmp.name, f"{fmt}.npz")
            run(tool, "logits", "--model", ckpt, "--tokens", ",".join(map(str, TOKENS)), "--out", out)
            logits[fmt] = np.load(out)["logits"].astype(np.float64)
        a, b = logits["fp4-local"], logits["bf16"]
        nmse = float(((a - b) ** 2).sum() / (b ** 2).sum())
        first = float(((a[0] - b[0]) ** 2).sum() / (b[0] ** 2).sum())
        agree = float((a.argmax(1) == b.argmax(1)).mean())
        print(f"fp4-local vs bf16 logits over {len(TOKENS)} positions: NMSE {nmse:.4g} "
              f"(position 0: {first:.4g}), argmax agreement {agree:.0%}")
        self.assertGreater(nmse, 1e-6, "the fp4-local logits equal the bf16 ones: nothing quantized?")
        self.assertLess(nmse, 0.3)
        self.assertLess(first, 0.1)

    def logits(self, fmt, *flags, label=""):
        out = os.path.join(self.tmp.name, f"{fmt}{label}.npz")
        run(os.path.join(harness.BIN_DIR, "sparkglm"), "logits", "--model", self.dirs[fmt],
            "--tokens", ",".join(map(str, TOKENS)), "--out", out, *flags)
        return np.load(out)["logits"].astype(np.float64)

    def test_spark_mode_is_close_to_strict_and_repeatable(self):
        strict = self.logits("fp4-local", "--precision-mode", "strict", label="-strict")
        spark = self.logits("fp4-local", "--precision-mode", "spark", label="-spark")
        again = self.logits("fp4-local", "--precision-mode", "spark", label="-spark2")
        nmse = float(((spark - strict) ** 2).sum() / (strict ** 2).sum())
        first = float(((spark[0] - strict[0]) ** 2).sum() / (strict[0] ** 2).sum())
        agree = float((spark.argmax(1) == strict.argmax(1)).mean())
        print(f"spark vs strict on fp4-local: NMSE {nmse:.4g} (position 0: {first:.4g}), "
              f"argmax agreement {agree:.0%}")
        self.assertTrue(np.array_equal(spark, again), "two spark runs differ")
        self.assertGreater(nmse, 1e-6, "spark computes what strict does: nothing converted?")
        self.assertLess(nmse, 0.6)
        self.assertLess(first, 0.1)

    def test_both_checkpoints_serve_greedy_completions(self):
        body = {"prompt": "four bits per weight", "max_tokens": 16, "temperature": 0,
                "ignore_eos": True, "return_token_ids": True}
        ids = {}
        for fmt, ckpt in self.dirs.items():
            with harness.ServerProcess("--model", ckpt, "--preset", None) as srv:
                status, got = harness.post_json(srv.port, "/v1/completions", body)
                self.assertEqual(status, 200, got)
                ids[fmt] = got["choices"][0]["token_ids"]
                self.assertEqual(len(ids[fmt]), 16, got)
                self.assertEqual(srv.stop(), 0)
        same = next((i for i, (x, y) in enumerate(zip(ids["fp4-local"], ids["bf16"])) if x != y), 16)
        print(f"greedy: fp4-local {ids['fp4-local']}\n        bf16      {ids['bf16']}\n"
              f"        the first {same} of 16 tokens agree")


if __name__ == "__main__":
    harness.parse_args_and_run(globals())
