"""How far a small precision change moves each row's logits, on the CPU: `sparkglm logits` with f32
latents and with bf16 latents over the same 2,600 random printable bytes (dummy weights:
`sparkglm tinyglm make --preset P --out DIR` first), per-row NMSE between the
two. A diagnostic run by hand in session 22 (its numbers are in README.md), not a test.

  python3 bench/results/device-2026-12-05-s22/perturb_rows.py --bin-dir build --model DIR [--model DIR ...]
"""
import argparse
import os
import subprocess
import tempfile

import numpy as np


def logits(sparkglm, model, tokens, dtype, out):
    subprocess.run([sparkglm, "logits", "--model", model, "--tokens", tokens, "--out", out,
                    "--kv-cache-dtype", dtype, "--threads", "2"], check=True, capture_output=True)
    return np.load(out)["logits"].astype(np.float64)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--bin-dir", default="build")
    ap.add_argument("--model", action="append", required=True)
    ap.add_argument("--tokens", type=int, default=2600)
    args = ap.parse_args()
    tokens = ",".join(str(int(x)) for x in np.random.default_rng(7).integers(32, 127, args.tokens))
    sparkglm = os.path.join(args.bin_dir, "sparkglm")
    with tempfile.TemporaryDirectory() as work:
        for model in args.model:
            a = logits(sparkglm, model, tokens, "f32", os.path.join(work, "a.npz"))
            b = logits(sparkglm, model, tokens, "bf16", os.path.join(work, "b.npz"))
            e = ((a - b) ** 2).sum(1) / (a ** 2).sum(1)
            tail = e[2048:]
            seg = len(e) // 8
            print(f"{model}: worst row {e.max():.2e}; rows past 2,048: median {np.median(tail):.2e}, "
                  f"share > 1e-4 {(tail > 1e-4).mean():.2f}; "
                  "median by segment of " + str(seg) + " rows: " +
                  " ".join(f"{np.median(e[i:i + seg]):.1e}" for i in range(0, seg * 8, seg)))


if __name__ == "__main__":
    main()
