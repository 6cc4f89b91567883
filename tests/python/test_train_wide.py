"""tinyglm-wide's training script (tinyglm/train/train_wide.py) runs, repeats itself, records its
inputs, and the engine serves what it writes.

0. (without torch too) train_wide.py's WIDE is the engine's tinyglm-wide preset: every field of
   `sparkglm tinyglm make --preset tinyglm-wide`'s config.json is tinyglm-micro's, except WIDE's
   fields, which have WIDE's values. Its checkpoint holds the sizes docs/trained-tinyglm.md states:
   6,716,697 stored values in a 14.3 MB shard (the micro's: 3,361,393, 7.2 MB).

On the CPU, 3 steps of 512-token rows, so it takes seconds:
1. Two runs write the same shard.
2. config.json is the engine preset's (16 MLA heads of 64, 16 indexer heads, top-k 64, 8 layers
   with MLA at layers 3 and 7), field for field; training.json names the preset and binds the
   shard, every source by sha256 (train_wide.py and train_loop.py among them) and no absolute path.
3. `sparkglm logits` on the output (the engine's CPU backend) agrees with TrainableGlm loaded from the
   same files in float64 within 1e-4 (issue 18's agreement bound), on a row long enough that the
   indexer selects 16 of its pools.
4. The MTP module trains chained (--mtp-chain-depth 3 by default): the log carries the chained
   passes' loss, and test_mtp_chain.py on the output finds the engine's chained forward_mtp equal to
   mtp_chain.py's passes 1-4 at this geometry within 1e-4.
5. A step count, a row length or a chain depth it cannot run is refused, naming the flag.

Steps 1-5 skip when torch is not importable (CI has no torch).
Run: python3 test_train_wide.py --bin-dir BUILD_DIR
"""
import argparse
import ast
import json
import math
import os
import struct
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import training_runs  # noqa: E402

ROOT = os.path.join(HERE, "..", "..")
TRAIN = os.path.join(ROOT, "tinyglm", "train")
SCRIPT = os.path.join(TRAIN, "train_wide.py")
sys.path.insert(0, TRAIN)
TOLERANCE = 1e-4
ROW = 400  # tokens: 100 pools, of which the indexer selects 16
# Stored values and shard megabytes of the presets' checkpoints, as docs/trained-tinyglm.md states them.
SIZES = {"tinyglm-wide": (6716697, 14.3), "tinyglm-micro": (3361393, 7.2)}
# config.json fields that follow from others: the layer kinds from the layer count, the KV heads
# from the attention heads.
DERIVED = {"layer_types", "mlp_layer_types", "num_key_value_heads"}

try:
    import torch
    HAVE_TORCH = True
except ImportError:
    HAVE_TORCH = False


def train(out, *extra):
    return subprocess.run([sys.executable, SCRIPT, "--seed", "1", "--steps", "3", "--device", "cpu",
                           "--tokens-per-step", "1024", "--max-len", "512", "--workers", "0", "--log-every", "1",
                           "--eval-prompts", "1", "--eval-max-s", "5", "--out", out, *extra],
                          stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)


def wide_fields():
    """train_wide.py's WIDE, read without importing it (it imports torch)."""
    with open(SCRIPT) as f:
        tree = ast.parse(f.read())
    for node in tree.body:
        if isinstance(node, ast.Assign) and any(getattr(t, "id", "") == "WIDE" for t in node.targets):
            return ast.literal_eval(node.value)
    raise RuntimeError("train_wide.py has no WIDE")


def engine_checkpoint(bin_dir, preset, work):
    """config.json of `sparkglm tinyglm make --preset P`, its shard's stored values and megabytes."""
    out = os.path.join(work, preset)
    subprocess.run([os.path.join(bin_dir, "sparkglm"), "tinyglm", "make", "--preset", preset, "--out", out],
                   check=True, stdout=subprocess.DEVNULL)
    with open(os.path.join(out, "config.json")) as f:
        config = json.load(f)
    shard = os.path.join(out, "model-00001-of-00001.safetensors")
    with open(shard, "rb") as f:
        header = json.loads(f.read(struct.unpack("<Q", f.read(8))[0]))
    values = sum(math.prod(t["shape"]) for name, t in header.items() if name != "__metadata__")
    return config, (values, round(os.path.getsize(shard) / 1e6, 1))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--bin-dir", default="")
    args = ap.parse_args()
    failures = []
    # 0. One geometry, stated in the engine's presets and in the trainer.
    with tempfile.TemporaryDirectory(prefix="sparkglm_wide_preset_") as work:
        wide, wide_size = engine_checkpoint(args.bin_dir, "tinyglm-wide", work)
        micro, micro_size = engine_checkpoint(args.bin_dir, "tinyglm-micro", work)
    print(f"[sizes] tinyglm-wide {wide_size}, tinyglm-micro {micro_size} (stored values, MB)")
    for preset, got in (("tinyglm-wide", wide_size), ("tinyglm-micro", micro_size)):
        if got != SIZES[preset]:
            failures.append(f"{preset}'s checkpoint holds {got}, docs/trained-tinyglm.md states {SIZES[preset]}")
    fields = wide_fields()
    differ = sorted(k for k in set(wide) | set(micro) if wide.get(k) != micro.get(k))
    print(f"[preset] tinyglm-wide differs from tinyglm-micro in {differ}; WIDE sets {sorted(fields)}")
    for k, v in fields.items():
        if wide.get(k) != v:
            failures.append(f"the engine's tinyglm-wide has {k} = {wide.get(k)!r}, train_wide.py's WIDE {v!r}")
    extra = sorted(set(differ) - set(fields) - DERIVED)
    if extra:
        failures.append(f"the engine's tinyglm-wide differs from tinyglm-micro in fields WIDE does not set: {extra}")
    if not HAVE_TORCH:
        if failures:
            print("FAIL: " + "; ".join(failures))
            return 1
        print("SKIP: torch is not importable (pip install torch to run tinyglm-wide's training script)")
        return 0
    import numpy as np

    import checkpoint_io
    import curriculum
    with tempfile.TemporaryDirectory(prefix="sparkglm_wide_") as work:
        outs, shards, error = training_runs.run_twice(train, work, checkpoint_io.SHARD)
        if error:
            print(f"FAIL: train_wide.py {error}")
            return 1
        # 1. Deterministic.
        if shards[0] != shards[1]:
            failures.append("two runs of the same training wrote different shards")
        # 2. The geometry and the record.
        with open(os.path.join(outs[0], "config.json")) as f:
            c = json.load(f)
        mla = [i for i, kind in enumerate(c["layer_types"]) if kind == "deepseek_sparse_attention"]
        apart = sorted(k for k in set(c) | set(wide) if c.get(k) != wide.get(k))
        print(f"[config] {c['num_attention_heads']} heads of {c['qk_nope_head_dim']}, {c['index_n_heads']} indexer "
              f"heads, top-k {c['index_topk']}, MLA layers {mla}; fields apart from the preset's: {apart}")
        if apart or mla != [3, 7]:
            failures.append(f"config.json is not the engine's tinyglm-wide: {apart}, MLA layers {mla}")
        with open(os.path.join(outs[0], "training.json")) as f:
            rec = json.load(f)
        sources = rec["sources_sha256"]
        print(f"[record] preset {rec['preset']}, steps {rec['steps']}, {len(sources)} sources bound, "
              f"reproduce: {rec['reproduce']}")
        if rec["preset"] != "tinyglm-wide" or rec["shard_sha256"] != shards[0] or rec["steps"] != 3:
            failures.append("training.json does not name the preset, the shard it wrote or its steps")
        for name in ("train_wide.py", "train_loop.py", "blocked_mla.py", "curriculum.py"):
            if sources.get(f"tinyglm/train/{name}") != training_runs.sha256(os.path.join(TRAIN, name)):
                failures.append(f"training.json does not bind tinyglm/train/{name} by sha256")
        if work in json.dumps(rec) or "--steps 3" not in rec["reproduce"]:
            failures.append("training.json names this machine's folder or does not say how to rerun it")
        # 3. The engine serves the output and agrees with the torch model on a selecting row.
        prompt, reply = curriculum.example(curriculum.Draws(31, 2048, 0), 2048)
        tokens = (prompt + reply)[:ROW]
        npz = os.path.join(work, "logits.npz")
        proc = subprocess.run([os.path.join(args.bin_dir, "sparkglm"), "logits", "--model", outs[0], "--tokens",
                               ",".join(map(str, tokens)), "--out", npz],
                              stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
        if proc.returncode != 0:
            print(f"FAIL: sparkglm logits exited {proc.returncode}: {proc.stdout.strip()}")
            return 1
        engine = np.load(npz)["logits"]
        model = checkpoint_io.load(outs[0], torch.float64)
        model.sparse = True
        with torch.no_grad():
            expect = model(torch.tensor([tokens]), with_mtp=False)[0][0].numpy()
        err = float(np.abs(engine - expect).max() / np.abs(expect).max())
        print(f"[engine] max|engine - torch| / max|torch| = {err:.2e} over {len(tokens)} rows")
        if not err < TOLERANCE:
            failures.append(f"the engine's logits differ from the torch model's by {err:.2e}")
        # 4. The chained MTP passes: trained, and what the engine drafts with.
        with open(os.path.join(outs[0], "train_log.jsonl")) as f:
            chain = [json.loads(line)["chain"] for line in f]
        print(f"[chain] depth {rec['args']['mtp_chain_depth']}, chained passes' loss by step {chain}")
        if rec["args"]["mtp_chain_depth"] != 3 or not all(x > 0 for x in chain):
            failures.append(f"the MTP module did not train chained: depth {rec['args']['mtp_chain_depth']}, {chain}")
        proc = subprocess.run([sys.executable, os.path.join(HERE, "test_mtp_chain.py"), "--bin-dir", args.bin_dir,
                               "--checkpoint", outs[0]], stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
        print("[test_mtp_chain.py] " + (proc.stdout.strip().splitlines() or ["(no output)"])[-1])
        if proc.returncode != 0:
            failures.append(f"test_mtp_chain.py on the output failed:\n{proc.stdout}")
        # 5. A continuation (--init) starts from the base's weights and records it. At --lr 0 and
        # --balance-rate 0 (the router biases move outside the optimiser) nothing moves, so its tensors
        # must be the base's.
        cont = os.path.join(work, "continued")
        proc = train(cont, "--init", outs[0], "--seed", "2", "--dense-warmup-frac", "0", "--lr", "0",
                     "--balance-rate", "0")
        if proc.returncode != 0:
            print(f"FAIL: train_wide.py --init exited {proc.returncode}: {proc.stdout.strip()[-2000:]}")
            return 1
        with open(os.path.join(cont, "training.json")) as f:
            crec = json.load(f)
        base_w = checkpoint_io.load(outs[0], torch.float32).state_dict()
        cont_w = checkpoint_io.load(cont, torch.float32).state_dict()
        same = all(torch.equal(base_w[k], cont_w[k]) for k in base_w) and base_w.keys() == cont_w.keys()
        derived = crec.get("derived_from", {})
        print(f"[init] derived_from {derived.get('shard_sha256', '')[:12]}..., identity {crec['weights_identity']}; "
              f"at --lr 0 the tensors are the base's: {same}")
        if derived.get("shard_sha256") != shards[0] or not crec["weights_identity"].startswith(rec["weights_identity"]):
            failures.append("the continuation's training.json does not name its base")
        if not same:
            failures.append("a continuation at --lr 0 changed the base's weights: it did not start from them")
        if f"--init {outs[0]}" not in crec["reproduce"]:
            failures.append(f"the continuation's reproduce line does not name its base: {crec['reproduce']}")
        micro = os.path.join(ROOT, "tinyglm", "weights", "tinyglm-micro-trained")
        for base, expect in ((micro, "preset"), (work, "training.json")):
            proc = train(os.path.join(work, "c"), "--init", base)
            last = proc.stdout.strip().splitlines()[-1] if proc.stdout.strip() else ""
            print(f"[refused --init {os.path.relpath(base, ROOT) if base == micro else 'a folder'}] "
                  f"exit {proc.returncode}: {last}")
            if proc.returncode == 0 or expect not in last:
                failures.append(f"--init {base} was not refused with a message naming the {expect}")
        # 6. Bad input.
        for flag, value in (("--steps", "0"), ("--max-len", "300"), ("--mtp-chain-depth", "5")):
            proc = train(os.path.join(work, "c"), flag, value)
            last = proc.stdout.strip().splitlines()[-1] if proc.stdout.strip() else ""
            print(f"[refused {flag} {value}] exit {proc.returncode}: {last}")
            if proc.returncode == 0 or flag not in last:
                failures.append(f"{flag} {value} was not refused by name")
    if failures:
        print("FAIL: " + "; ".join(failures))
        return 1
    print("PASS: tinyglm-wide's training is deterministic, records its inputs, and the engine agrees with it")
    return 0


if __name__ == "__main__":
    sys.exit(main())
