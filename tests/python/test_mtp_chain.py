"""The chained MTP module for training (tinyglm/train/mtp_chain.py) computes what the engine drafts.

On the committed trained tinyGLM (or --checkpoint DIR), in float64 on the CPU:
1. Pass 1 of mtp_chain equals TrainableGlm's MTP logits (the same function, written again with the
   band of later passes).
2. `sparkglm logits --mtp --mtp-chain-at P,... --mtp-chain-depth 4` (the engine's forward_mtp,
   chained as engine/runtime/speculation/mtp_drafter.h chains it, on the given tokens) against the
   torch chain: pass 1 over every row, passes 2-4 at the rows each chain reaches, for chain roots P of
   every residue mod 4 (the pool a later pass completes) on a prompt long enough that the MLA
   selects sparsely; max|engine - torch| / max|torch| < 1e-4 each.
3. The comparison can fail: with every pass attending only its own entries (the band dropped), the
   chained rows disagree beyond the bound.
4. The chain loss backpropagates to the MTP module's weights (finite, non-zero gradients).

5. (without torch too) Each committed MTP fine-tune (DERIVED: tinyglm-micro-trained-mtp-chain,
   tinyglm-micro-trained-mtp-distill, which derives from it, and
   tinyglm-micro-trained-mtp-onpolicy-1200, which derives from the distilled one) differs from
   the checkpoint its training.json derives it from only in the MTP module's tensors
   (model.layers.<L>.*): the main model, the embedding and the LM head are byte for byte the base's,
   so every number of the base's main model holds for it.

Steps 1-4 skip when torch is not importable (CI has no torch).
Run: python3 test_mtp_chain.py --bin-dir BUILD_DIR [--checkpoint DIR]
"""
import argparse
import hashlib
import json
import os
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.join(HERE, "..", "..")
sys.path.insert(0, os.path.join(ROOT, "tinyglm", "train"))
TOLERANCE = 1e-4
DEPTH = 4
DERIVED = ("tinyglm-micro-trained-mtp-chain", "tinyglm-micro-trained-mtp-distill",
           "tinyglm-micro-trained-mtp-onpolicy-1200")

try:
    import torch
    HAVE_TORCH = True
except ImportError:
    HAVE_TORCH = False


def rel_err(got, want):
    import numpy as np
    return float(np.max(np.abs(got.astype(np.float64) - want)) / max(np.max(np.abs(want)), 1e-30))


def prompt():
    import curriculum
    for i in range(200):
        p, r = curriculum.example(curriculum.Draws(19, 512, i), 512)
        if len(p) + len(r) >= 360:
            return p + r
    raise RuntimeError("no curriculum example of 360 tokens")


def safetensors(path):
    import struct
    with open(path, "rb") as f:
        raw = f.read()
    n = struct.unpack("<Q", raw[:8])[0]
    header = json.loads(raw[8:8 + n])
    header.pop("__metadata__", None)
    return {k: raw[8 + n + v["data_offsets"][0]:8 + n + v["data_offsets"][1]] for k, v in header.items()}


def derived_checkpoint_failures():
    """Step 5: each fine-tuned checkpoint changes the MTP module only."""
    return [f"{name}: {f}" for name in DERIVED for f in derived_failures(name)]


def derived_failures(name):
    ckpt = os.path.join(ROOT, "tinyglm", "weights", name)
    with open(os.path.join(ckpt, "training.json")) as f:
        record = json.load(f)
    with open(os.path.join(ckpt, "config.json")) as f:
        layers = json.load(f)["num_hidden_layers"]
    base = os.path.join(ROOT, record["derived_from"]["checkpoint"])
    shard = "model-00001-of-00001.safetensors"
    with open(os.path.join(base, shard), "rb") as f:
        if hashlib.sha256(f.read()).hexdigest() != record["derived_from"]["shard_sha256"]:
            return [f"{base}: not the shard training.json derives from"]
    mine, theirs = safetensors(os.path.join(ckpt, shard)), safetensors(os.path.join(base, shard))
    if set(mine) != set(theirs):
        return ["the fine-tuned checkpoint holds other tensors than its base"]
    changed = [k for k in mine if mine[k] != theirs[k]]
    outside = [k for k in changed if not k.startswith(f"model.layers.{layers}.")]
    print(f"[derived] {name}: {len(changed)} of {len(mine)} tensors changed, all in model.layers.{layers}.*: "
          f"{not outside}")
    failures = [f"{k} changed outside the MTP module" for k in outside]
    if not changed:
        failures.append("nothing changed: the fine-tune trained nothing")
    return failures


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--bin-dir", required=True)
    ap.add_argument("--checkpoint", default=os.path.join(ROOT, "tinyglm", "weights", "tinyglm-micro-trained"))
    args = ap.parse_args()
    failures = derived_checkpoint_failures()
    if not HAVE_TORCH:
        if failures:
            print("FAIL: " + "; ".join(failures))
            return 1
        print("SKIP (steps 1-4): torch is not importable (pip install torch to run the chain against the "
              "engine); each fine-tuned checkpoint changes its MTP module only")
        return 0
    import numpy as np

    import checkpoint_io
    import mtp_chain
    tokens = prompt()
    T = len(tokens)
    roots = [40, 41, 42, 43, 200, 201, 202, 203, T - DEPTH]
    model = checkpoint_io.load(args.checkpoint, torch.float64)
    with tempfile.TemporaryDirectory(prefix="sparkglm_chain_") as work:
        out = os.path.join(work, "chain.npz")
        proc = subprocess.run([os.path.join(args.bin_dir, "sparkglm"), "logits", "--model", args.checkpoint,
                               "--tokens", ",".join(map(str, tokens)), "--mtp", "--mtp-chain-at",
                               ",".join(map(str, roots)), "--mtp-chain-depth", str(DEPTH), "--out", out],
                              stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
        if proc.returncode != 0:
            print(f"FAIL: sparkglm logits exited {proc.returncode}: {proc.stdout.strip()}")
            return 1
        engine = np.load(out)
    x = torch.tensor([tokens])
    with torch.no_grad():
        _, h, mtp, _ = model(x)
        chain = mtp_chain.mtp_chain(model, x, h, DEPTH)

    def check(label, got, want):
        e = rel_err(got, want)
        print(f"[{label}] max|a-b|/max|b| = {e:.3e} {'ok' if e < TOLERANCE else 'FAIL'}")
        if not e < TOLERANCE:
            failures.append(f"{label}: {e:.3e} >= {TOLERANCE:g}")

    e = rel_err(chain[0][0].numpy(), mtp[0].numpy())
    print(f"[pass 1 vs TrainableGlm._mtp] {e:.3e}")
    if not e < 1e-12:
        failures.append(f"pass 1 differs from TrainableGlm's MTP logits: {e:.3e}")
    check("pass 1 vs engine mtp_logits", engine["mtp_logits"], chain[0][0].numpy())
    got = engine["mtp_chain_logits"]                                  # [roots, DEPTH - 1, V]
    for d in range(2, DEPTH + 1):
        rows = [P + d - 2 for P in roots]
        check(f"pass {d} at rows {rows[0]}..{rows[-1]} vs engine", got[:, d - 2], chain[d - 1][0, rows].numpy())

    # 3. The band dropped: each pass attends only the entries it wrote itself.
    own = mtp_chain._band
    mtp_chain._band = lambda d, T, device: torch.full((T, T), d, dtype=torch.long, device=device)
    try:
        with torch.no_grad():
            broken = mtp_chain.mtp_chain(model, x, h, DEPTH)
    finally:
        mtp_chain._band = own
    worst = max(rel_err(got[:, d - 2], broken[d - 1][0, [P + d - 2 for P in roots]].numpy())
                for d in range(2, DEPTH + 1))
    print(f"[band dropped] worst {worst:.3e} (must be >= {TOLERANCE:g})")
    if worst < TOLERANCE:
        failures.append(f"the chain without its band still agrees ({worst:.3e}): the check cannot fail")

    # 4. Gradients reach the module through the chained passes.
    m32 = checkpoint_io.load(args.checkpoint, torch.float32)
    x32 = torch.tensor([tokens[:160]])
    _, h32, _, _ = m32(x32, with_mtp=False)
    logits = mtp_chain.mtp_chain(m32, x32, h32.detach(), 3)
    ce = lambda lg, tg, w: (torch.nn.functional.cross_entropy(lg.flatten(0, 1), tg.flatten(), reduction="none")
                            * w.flatten()).sum() / w.sum()
    loss = sum(mtp_chain.chain_loss(logits, x32, torch.ones_like(x32, dtype=torch.float32), ce))
    loss.backward()
    g = getattr(m32, m32._key(f"model.layers.{m32.c['num_hidden_layers']}.eh_proj.weight")).grad
    print(f"[gradient] chain loss {float(loss.detach()):.4f}, |d loss / d eh_proj| = {float(g.norm()):.3e}")
    if g is None or not torch.isfinite(g).all() or float(g.norm()) == 0:
        failures.append("the chain loss does not reach eh_proj")

    if failures:
        print("FAIL: the torch chain and the engine's chained drafts disagree:")
        for f in failures:
            print("  " + f)
        return 1
    print(f"PASS: passes 1-{DEPTH} of the torch MTP chain match the engine within {TOLERANCE:g}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
