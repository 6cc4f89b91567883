"""The PyTorch peer (bench/torch/tinyglm_torch.py) computes the same function as reference_forward.py.

1. `sparkglm tinyglm make --preset tinyglm-micro` writes a checkpoint; `tinyglm_torch.py --check` on it
   compares last-position prefill logits and batched decode-step logits (loop and dense MoE, dense and
   sparse indexer selection, KDA chunks across prefill chunk boundaries) with the float64 reference and
   must pass its declared tolerance.
2. The same comparison with one KDA gate weight changed by 1 % must fail it (the check can fail).
3. The chunked KDA form in float32 matches the token-by-token recurrence at production head size with
   gates near the lower bound, where exp(-cumsum g) would overflow a naive chunked form.

Skips when torch is not importable (CI has no torch).
Run: python3 test_torch_peer.py --bin-dir BUILD_DIR    (or pytest with SPARKGLM_BIN_DIR set)
"""
import argparse
import os
import re
import subprocess
import sys
import tempfile
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
PEER_DIR = os.path.join(HERE, "..", "..", "bench", "torch")
PEER = os.path.join(PEER_DIR, "tinyglm_torch.py")
BIN_DIR = os.environ.get("SPARKGLM_BIN_DIR")  # main() sets it from --bin-dir

try:
    import torch  # noqa: F401
    HAVE_TORCH = True
except ImportError:
    HAVE_TORCH = False


@unittest.skipUnless(HAVE_TORCH, "torch is not importable")
class TorchPeerMatchesReference(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        if not BIN_DIR or not os.access(os.path.join(BIN_DIR, "sparkglm"), os.X_OK):
            raise unittest.SkipTest("no sparkglm binary: pass --bin-dir or set SPARKGLM_BIN_DIR")
        cls.tmp = tempfile.TemporaryDirectory()
        cls.ckpt = os.path.join(cls.tmp.name, "ckpt")
        subprocess.run([os.path.join(BIN_DIR, "sparkglm"), "tinyglm", "make", "--preset", "tinyglm-micro",
                        "--out", cls.ckpt], check=True, stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
        sys.path.insert(0, PEER_DIR)

    @classmethod
    def tearDownClass(cls):
        cls.tmp.cleanup()

    def test_check_passes_on_tinyglm_micro(self):
        proc = subprocess.run([sys.executable, PEER, "--check", self.ckpt, "--device", "cpu"],
                              stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
        print(proc.stdout)
        self.assertEqual(proc.returncode, 0, proc.stdout)
        m = re.search(r"PASS: max normalized error (\S+) \(tolerance (\S+)\)", proc.stdout)
        self.assertIsNotNone(m, proc.stdout)
        self.assertLess(float(m.group(1)), float(m.group(2)))
        self.assertEqual(len(re.findall(r"prefill T=\d+ last logits", proc.stdout)), 3)
        self.assertEqual(len(re.findall(r"decode\[(loop|dense)\]", proc.stdout)), 24)

    def test_check_fails_when_a_weight_differs(self):
        import tinyglm_torch as peer

        def perturb(W):
            W["model.layers.1.self_attn.dt_bias"] *= 1.01

        errors = peer.run_check(self.ckpt, perturb=perturb, verbose=False)
        worst = max(errors.values())
        self.assertGreater(worst, 100 * peer.CHECK_TOLERANCE, f"a 1% change of dt_bias gave only {worst:.3e}")


@unittest.skipUnless(HAVE_TORCH, "torch is not importable")
class ChunkedKdaMatchesRecurrence(unittest.TestCase):
    def test_float32_chunked_form_near_the_gate_bound(self):
        sys.path.insert(0, PEER_DIR)
        import torch
        import peer_kda as kda
        g_ = torch.Generator().manual_seed(1)
        T, H, K = 200, 4, 128
        q, k, v = (torch.randn(T, H, K, generator=g_) for _ in range(3))
        q = q / q.norm(dim=-1, keepdim=True) / K ** 0.5
        k = k / k.norm(dim=-1, keepdim=True)
        g = -5.0 * torch.rand(T, H, K, generator=g_)
        beta = torch.rand(T, H, generator=g_)
        S0 = 0.1 * torch.randn(H, K, K, generator=g_)
        O, S = kda.kda_chunked(q, k, v, g, beta, S0.clone())
        S_ref, outs = S0.double()[None], []
        for t in range(T):
            o, S_ref = kda.kda_recurrent_step(*(x[t:t + 1].double() for x in (q, k, v, g, beta)), S_ref)
            outs.append(o[0])
        O_ref = torch.stack(outs)
        err_o = float((O.double() - O_ref).abs().max() / O_ref.abs().max())
        err_s = float((S.double() - S_ref[0]).abs().max() / S_ref.abs().max())
        self.assertTrue(bool(torch.isfinite(O).all()), "chunked KDA produced non-finite outputs")
        self.assertLess(err_o, 1e-4, f"outputs: {err_o:.3e}")
        self.assertLess(err_s, 1e-4, f"final state: {err_s:.3e}")


def main():
    global BIN_DIR
    parser = argparse.ArgumentParser()
    parser.add_argument("--bin-dir", required=True)
    args, rest = parser.parse_known_args()
    BIN_DIR = os.path.abspath(args.bin_dir)
    if not HAVE_TORCH:
        print("SKIP: torch is not importable")
        return 0
    prog = unittest.main(argv=[sys.argv[0]] + rest, verbosity=2, exit=False)
    return 0 if prog.result.wasSuccessful() else 1


if __name__ == "__main__":
    sys.exit(main())
