"""Peak host memory of one training step (forward and backward, float32, CPU) of the trained micro
on a row of T tokens, with TrainableGlm's MLA or BlockedGlm's, each in a process of its own.

Run: python3 tinyglm/train/blocked_mla_memory.py --tokens 4096 [--block 512]
"""
import argparse
import json
import os
import resource
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
CKPT = os.path.join(HERE, "..", "weights", "tinyglm-micro-trained")


def step(kind, T, block):
    import torch
    sys.path.insert(0, HERE)
    import blocked_mla
    import checkpoint_io
    torch.set_num_threads(2)
    model = checkpoint_io.load(CKPT, torch.float32)
    if kind == "blocked":
        b = blocked_mla.BlockedGlm(model.c, query_block=block)
        b.load_state_dict(model.state_dict())
        model = b
    model.sparse = True
    x = torch.randint(0, model.c["vocab_size"], (1, T), generator=torch.Generator().manual_seed(0))
    base = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    t = time.time()
    logits, _, mtp, aux = model(x)
    (logits.float().logsumexp(-1).mean() + mtp.float().logsumexp(-1).mean() + aux["indexer_kl"]).backward()
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    print(json.dumps({"kind": kind, "tokens": T, "block": block if kind == "blocked" else None,
                      "peak_rss_mib": round(peak / 1024), "before_step_mib": round(base / 1024),
                      "step_s": round(time.time() - t, 1)}))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--tokens", type=int, default=4096)
    ap.add_argument("--block", type=int, default=512)
    ap.add_argument("--kind", choices=["whole", "blocked"])
    a = ap.parse_args()
    if a.kind:
        return step(a.kind, a.tokens, a.block)
    for kind in ("whole", "blocked"):
        subprocess.run([sys.executable, __file__, "--kind", kind, "--tokens", str(a.tokens), "--block", str(a.block)],
                       check=True)


if __name__ == "__main__":
    main()
