"""The query-blocked MLA for long-context training (tinyglm/train/blocked_mla.py) is TrainableGlm's.

In float64 on the CPU, for the committed trained tinyGLM (or --checkpoint DIR) and a curriculum row
long enough that the indexer selects sparsely:
1. BlockedGlm's logits, hidden state, MTP logits and indexer KL equal TrainableGlm's within 1e-12
   (relative), with the sparse selection and in the dense warm-up, for query blocks that divide the
   row and blocks that do not (and a block longer than the row).
2. So do the gradients of a loss over all three outputs and the KL, for every parameter.
3. The comparison can fail: with the lower-pool-first tie rule flipped inside the blocks (a stable
   sort made unstable by reversing the pool order), the outputs differ.

Skips when torch is not importable (CI has no torch).
Run: python3 test_blocked_mla.py --bin-dir BUILD_DIR [--checkpoint DIR]
"""
import argparse
import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.join(HERE, "..", "..")
sys.path.insert(0, os.path.join(ROOT, "tinyglm", "train"))
TOLERANCE = 1e-12

try:
    import torch
    HAVE_TORCH = True
except ImportError:
    HAVE_TORCH = False


def rel(a, b):
    return float((a - b).abs().max() / b.abs().max().clamp(min=1e-300))


def outputs(model, x):
    logits, h, mtp, aux = model(x)
    return {"logits": logits, "hidden": h, "mtp": mtp, "kl": aux["indexer_kl"].reshape(1)}


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--bin-dir", default="")
    ap.add_argument("--checkpoint", default=os.path.join(ROOT, "tinyglm", "weights", "tinyglm-micro-trained"))
    args = ap.parse_args()
    if not HAVE_TORCH:
        print("SKIP: torch is not importable (pip install torch to compare the blocked MLA)")
        return 0
    import blocked_mla
    import checkpoint_io
    import curriculum
    prompt, reply = curriculum.example(curriculum.Draws(21, 512, 0), 512)
    x = torch.tensor([(prompt + reply)[:300]])
    base = checkpoint_io.load(args.checkpoint, torch.float64)
    blocked = blocked_mla.BlockedGlm(base.c, dtype=torch.float64)
    blocked.load_state_dict(base.state_dict())
    failures = []
    for sparse in (True, False):
        base.sparse = blocked.sparse = sparse
        base.zero_grad()
        want = outputs(base, x)
        sum(v.sum() * (i + 1) for i, v in enumerate(want.values())).backward()
        grads = {n: p.grad.clone() for n, p in base.named_parameters() if p.grad is not None}
        for block in (64, 100, 300, 512):
            blocked.query_block = block
            blocked.zero_grad()
            got = outputs(blocked, x)
            sum(v.sum() * (i + 1) for i, v in enumerate(got.values())).backward()
            worst = max(rel(got[k].detach(), want[k].detach()) for k in want)
            gworst = max(rel(p.grad, grads[n]) for n, p in blocked.named_parameters() if n in grads)
            missing = [n for n, p in blocked.named_parameters() if (p.grad is None) != (n not in grads)]
            label = f"{'sparse' if sparse else 'dense '} block {block:3d}"
            print(f"[{label}] outputs {worst:.2e}, gradients {gworst:.2e} ({len(grads)} parameters)")
            if not (worst < TOLERANCE and gworst < TOLERANCE) or missing:
                failures.append(f"{label}: outputs {worst:.2e}, gradients {gworst:.2e}, "
                                f"gradient presence differs for {missing[:3]}")
    # 3. A broken selection inside the blocks must show.
    own = blocked_mla._block

    def flipped(c, sparse, t0, q_abs, c_kv, qI, w, Kp):
        o, kl = own(c, sparse, t0, q_abs, c_kv, qI, w, Kp.flip(1))   # pools in reverse order
        return o, kl
    blocked_mla._block = flipped
    try:
        base.sparse = blocked.sparse = True
        with torch.no_grad():
            want, got = outputs(base, x), outputs(blocked, x)
    finally:
        blocked_mla._block = own
    worst = max(rel(got[k], want[k]) for k in want)
    print(f"[pools reversed inside the blocks] {worst:.2e} (must be >= {TOLERANCE:g})")
    if worst < TOLERANCE:
        failures.append("a reversed pool order inside the blocks still agrees: the check cannot fail")
    if failures:
        print("FAIL: the blocked MLA differs from TrainableGlm's:")
        for f in failures:
            print("  " + f)
        return 1
    print(f"PASS: the query-blocked MLA equals TrainableGlm's within {TOLERANCE:g}, outputs and gradients")
    return 0


if __name__ == "__main__":
    sys.exit(main())
