"""The long-context stage (tinyglm/train/extend_context.py) runs, repeats itself, and the engine serves
its output.

On the CPU, from the committed trained tinyGLM (or --checkpoint DIR), with a small long bucket so it
takes seconds:
1. Two runs of 3 steps write the same shard (the stage is deterministic on the CPU).
2. Its training.json binds the base shard (`derived_from`, named relative to the repository), the
   sources by sha256 (this stage's own among them), the extended data generator, and its log shows
   steps drawn from the long bucket at that length.
3. `sparkglm logits` on the output (the engine's CPU backend) agrees with TrainableGlm loaded from the
   same files in float64 within 1e-4 (issue 18's agreement bound), on a row long enough to select.
4. A long bucket the base curriculum already has is refused, naming it.

Skips when torch is not importable (CI has no torch).
Run: python3 test_extend_context.py --bin-dir BUILD_DIR [--checkpoint DIR]
"""
import argparse
import json
import os
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import training_runs  # noqa: E402

ROOT = os.path.join(HERE, "..", "..")
SCRIPT = os.path.join(ROOT, "tinyglm", "train", "extend_context.py")
sys.path.insert(0, os.path.join(ROOT, "tinyglm", "train"))
TOLERANCE = 1e-4
LONG = 1536  # a bucket the base curriculum lacks, short enough for a CPU test

try:
    import torch
    HAVE_TORCH = True
except ImportError:
    HAVE_TORCH = False


def extend(checkpoint, out, *extra):
    return subprocess.run([sys.executable, SCRIPT, "--checkpoint", checkpoint, "--out", out, "--steps", "3",
                           "--long-buckets", str(LONG), "--replay", "0.5", "--tokens-per-step", "2048",
                           "--query-block", "256", "--log-every", "1", "--device", "cpu", *extra],
                          stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--bin-dir", default="")
    ap.add_argument("--checkpoint", default=os.path.join(ROOT, "tinyglm", "weights", "tinyglm-micro-trained"))
    args = ap.parse_args()
    if not HAVE_TORCH:
        print("SKIP: torch is not importable (pip install torch to run the long-context stage)")
        return 0
    import numpy as np

    import checkpoint_io
    import curriculum
    failures = []
    with open(os.path.join(args.checkpoint, "training.json")) as f:
        base = json.load(f)
    with tempfile.TemporaryDirectory(prefix="sparkglm_extend_") as work:
        outs, shards, error = training_runs.run_twice(lambda out: extend(args.checkpoint, out), work,
                                                      checkpoint_io.SHARD)
        if error:
            print(f"FAIL: extend_context.py {error}")
            return 1
        # 1. Deterministic.
        if shards[0] != shards[1]:
            failures.append("two runs of the same stage wrote different shards")
        # 2. The record.
        with open(os.path.join(outs[0], "training.json")) as f:
            rec = json.load(f)
        with open(os.path.join(outs[0], "train_log.jsonl")) as f:
            lengths = [json.loads(line)["T"] for line in f]
        print(f"[record] derived from {rec['derived_from']['shard_sha256'][:16]}, data {rec['data_generator']}, "
              f"step lengths {lengths}")
        if rec["shard_sha256"] != shards[0] or rec["derived_from"]["shard_sha256"] != base["shard_sha256"]:
            failures.append("training.json does not bind the shard it wrote and the base shard")
        if rec["sources_sha256"].get("tinyglm/train/extend_context.py") != training_runs.sha256(SCRIPT):
            failures.append("training.json does not bind extend_context.py by sha256")
        if os.path.isabs(rec["derived_from"]["checkpoint"]) or os.path.isabs(rec["args"]["checkpoint"]):
            failures.append("training.json names the base checkpoint by this machine's absolute path")
        if rec["data_generator"] != f"{curriculum.GENERATOR_VERSION}+long/1":
            failures.append(f"data generator {rec['data_generator']!r}")
        if LONG not in lengths:
            failures.append(f"no step drew the {LONG}-token bucket: {lengths}")
        # 3. The engine serves the output and agrees with the torch model.
        prompt, reply = curriculum.example(curriculum.Draws(31, 512, 0), 512)
        tokens = (prompt + reply)[:300]
        npz = os.path.join(work, "logits.npz")
        proc = subprocess.run([os.path.join(args.bin_dir, "sparkglm"), "logits", "--model", outs[0], "--tokens",
                               ",".join(map(str, tokens)), "--out", npz],
                              stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
        if proc.returncode != 0:
            print(f"FAIL: sparkglm logits exited {proc.returncode}: {proc.stdout.strip()}")
            return 1
        engine = np.load(npz)["logits"]
        model = checkpoint_io.load(outs[0], torch.float64)
        with torch.no_grad():
            want = model(torch.tensor([tokens]), with_mtp=False)[0][0].numpy()
        err = float(np.abs(engine - want).max() / np.abs(want).max())
        print(f"[engine] max|engine - torch| / max|torch| = {err:.2e} over {len(tokens)} rows")
        if not err < TOLERANCE:
            failures.append(f"the engine's logits differ from the torch model's by {err:.2e}")
        # 4. Bad input.
        proc = extend(args.checkpoint, os.path.join(work, "c"), "--long-buckets", "1024")
        print(f"[refused] exit {proc.returncode}: {proc.stdout.strip().splitlines()[-1]}")
        if proc.returncode == 0 or "1024" not in proc.stdout:
            failures.append("a long bucket the base curriculum has was not refused by name")
    if failures:
        print("FAIL: " + "; ".join(failures))
        return 1
    print("PASS: the long-context stage is deterministic, records its inputs, and the engine agrees with it")
    return 0


if __name__ == "__main__":
    sys.exit(main())
