"""Continues a trained tinyGLM at 16K and 32K tokens: the long-context stage issue 18's needles need.

The committed micro trained on rows of 512-8192 tokens (train.py), while the quality probes ask for
needles at 16K and 32K. Its TrainableGlm holds a row's whole [T, T] attention (about 45 GB of
activations at 8K on the H200), so this stage trains BlockedGlm (blocked_mla.py: the same function,
the MLA run over blocks of queries under activation checkpointing) from the checkpoint's weights.
Every tensor trains, with train.py's losses (next token, MTP at t + 2, the indexer's KL), its
schedule (lr_at: warm-up, cosine to 10 %) and its expert balancing; the indexer selects sparsely
throughout (the base run already did its dense warm-up).

Data: curriculum.batch under the seed "long:<seed>", a key neither the base run nor the held-out
set draws. A step is a long bucket with probability 1 - --replay (one 32K row or two 16K rows of
needle and prose_fact examples, the 8K bucket's mix), otherwise one of the base run's buckets with
their own odds, so what the model already does is rehearsed. curriculum.py is bound by sha256 in the
base weights' training.json, so the long buckets are added to its tables here (long_curriculum)
rather than in its source; the data generator this stage records is "<base version>+long/1".

Deterministic as train.py is (seeded, deterministic algorithms where torch has them; on the CPU,
fixed threads). The output folder holds the checkpoint, training.json (`derived_from`: the base
shard's sha256 and identity; the sources this run depends on) and train_log.jsonl.
tests/python/test_extend_context.py runs two short CPU runs and loads the result in the engine.

Run (H200): python3 tinyglm/train/extend_context.py --checkpoint tinyglm/weights/tinyglm-micro-trained \\
                --out DIR --steps N [--replay 0.3] [--query-block 1024]
"""
import argparse
import os
import sys
import time

os.environ.setdefault("CUBLAS_WORKSPACE_CONFIG", ":4096:8")  # before CUDA starts: deterministic cuBLAS

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)

import torch  # noqa: E402

import checkpoint_io  # noqa: E402
import curriculum  # noqa: E402
import run_record  # noqa: E402
import train_loop  # noqa: E402  (train.py's losses, schedule and step)

SCHEMA = "sparkglm.tinyglm_training/1"
LONG_VERSION = "long/1"
# Tokens per row of the long buckets (a step holds --tokens-per-step // T rows), and their tasks: the
# 8K bucket's retrieval mix.
LONG_BUCKETS = [16384, 32768]
LONG_MIX = {"needle": 3, "prose_fact": 2}


def long_curriculum(replay, long_buckets, tokens_per_step):
    """Adds the long buckets to curriculum.py's tables, which curriculum.batch and curriculum.example
    read at call time: the base buckets keep their relative odds and share `replay` of the steps."""
    known = {T for T, _ in curriculum.BUCKETS}
    for T in long_buckets:
        if T in known:
            raise ValueError(f"long bucket {T}: the base curriculum already has a bucket of {T} tokens")
    curriculum.BUCKET_P = [p * replay for p in curriculum.BUCKET_P] + [(1 - replay) / len(long_buckets)] * len(
        long_buckets)
    curriculum.BUCKETS = curriculum.BUCKETS + [(T, max(1, tokens_per_step // T)) for T in long_buckets]
    curriculum.TASK_MIX = {**curriculum.TASK_MIX, **{T: dict(LONG_MIX) for T in long_buckets}}
    return f"{curriculum.GENERATOR_VERSION}+{LONG_VERSION}"


SOURCES = ["tinyglm/train/" + n for n in ("extend_context.py", "train_loop.py", "mtp_chain.py", "run_record.py",
                                          "blocked_mla.py", "train.py", "curriculum.py", "byte_chat.py",
                                          "trainable_glm.py", "checkpoint_io.py")]
SOURCES += ["bench/torch/" + n for n in ("peer_config.py", "peer_kda.py", "peer_mhc.py", "peer_mla.py")]


def parse_buckets(text):
    """'16384,32768' -> [16384, 32768]"""
    out = []
    for item in text.split(","):
        if not item.isdigit() or int(item) % 4 or int(item) < 512:
            raise argparse.ArgumentTypeError(f"bucket {item!r}: tokens per row, a multiple of 4, at least 512")
        out.append(int(item))
    return out


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--checkpoint", required=True)
    ap.add_argument("--out", required=True)
    ap.add_argument("--steps", type=int, required=True)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    ap.add_argument("--long-buckets", type=parse_buckets, default=LONG_BUCKETS,
                    help="tokens per row of each long bucket (default 16384,32768)")
    ap.add_argument("--replay", type=float, default=0.3, help="share of steps drawn from the base buckets")
    ap.add_argument("--query-block", type=int, default=1024, help="BlockedGlm's MLA query block")
    train_loop.add_flags(ap, lr=5e-4)
    ap.add_argument("--tokens-per-step", type=int, default=32768, help="rows of a bucket: this // T, at least 1")
    ap.add_argument("--threads", type=int, default=2, help="CPU runs: torch threads")
    ap.add_argument("--log-every", type=int, default=10)
    args = ap.parse_args()
    if not 0 <= args.replay < 1:
        ap.error("--replay: a share in [0, 1)")
    t_start = time.time()
    try:
        generator = long_curriculum(args.replay, args.long_buckets, args.tokens_per_step)
    except ValueError as e:
        ap.error(f"--long-buckets: {e}")
    max_len = max(T for T, _ in curriculum.BUCKETS)
    cuda = args.device.startswith("cuda")
    torch.manual_seed(args.seed)
    torch.use_deterministic_algorithms(True, warn_only=cuda)
    if cuda:
        torch.backends.cuda.matmul.allow_tf32 = False
        torch.backends.cudnn.allow_tf32 = False
    else:
        torch.set_num_threads(args.threads)

    model, _, base = train_loop.load_base(args.checkpoint, args.query_block)
    model = model.to(args.device)
    opt = train_loop.optimizer(model, args.lr, args.weight_decay)
    os.makedirs(args.out, exist_ok=True)
    log = open(os.path.join(args.out, "train_log.jsonl"), "w")
    print(f"extend: {sum(p.numel() for p in model.parameters())} parameters from {args.checkpoint}, device "
          f"{args.device}, buckets {curriculum.BUCKETS} odds {[round(p, 3) for p in curriculum.BUCKET_P]}, "
          f"data {generator}, {args.steps} steps", flush=True)
    batches = train_loop.batches(f"long:{args.seed}", args.prompt_loss_weight, max_len, args.tokens_per_step)
    losses = train_loop.Losses(args.mtp_weight, args.indexer_weight, args.balance_rate)
    done = train_loop.run(model, opt, batches, args.device, args.lr, losses, log, steps=args.steps,
                          log_every=args.log_every)
    recorded = {**vars(args), "checkpoint": run_record.repo_path(args.checkpoint),
                "out": run_record.repo_path(args.out)}
    identity = f"{base['weights_identity']}+long:seed={args.seed},steps={args.steps},data={generator}"
    sha = checkpoint_io.export(model.float().cpu(), args.out, identity)
    record = {"schema": SCHEMA, "preset": base["preset"], "seed": args.seed, "steps": args.steps,
              "data_generator": generator, "args": recorded,
              "buckets": curriculum.BUCKETS, "bucket_p": curriculum.BUCKET_P, "tokens": done.tokens,
              "final": done.final, "train_wall_s": done.train_s, "total_wall_s": round(time.time() - t_start, 2),
              "device": torch.cuda.get_device_name() if cuda else "cpu", "torch": torch.__version__,
              "derived_from": run_record.derived_from(recorded["checkpoint"], base),
              "weights_identity": identity, "shard_sha256": sha, "sources_sha256": run_record.sources_sha256(SOURCES),
              "reproduce": "python3 tinyglm/train/extend_context.py " + " ".join(
                  f"--{k.replace('_', '-')} {v}" for k, v in recorded.items()
                  if k not in ("out", "device", "threads", "log_every", "long_buckets"))
              + " --long-buckets " + ",".join(map(str, args.long_buckets)) + " --out DIR"}
    run_record.write(args.out, record)
    print(f"done: {args.steps} steps in {done.train_s:.1f} s; wrote {args.out} (shard sha256 {sha})", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
