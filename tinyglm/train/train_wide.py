"""Trains tinyglm-wide from scratch: the wider tinyGLM that issue 18 plans for retrieval.

The committed micro (train.py) never finds the first key of a needle, at any length
(docs/trained-tinyglm.md). tinyglm-wide keeps every dimension the CUDA kernels' micro
instantiation fixes (hidden 256, KDA head dim 32, latent 64, indexer head dim 32, pools of 4,
4 mHC streams; CudaModelRunner::check_config) and widens what retrieval needs (WIDE below):
16 MLA heads with 64-dim keys, 16 indexer heads, 64 tokens selected, 8 layers of which two are MLA.

Everything else is train.py's: the curriculum (buckets of 512-8192 tokens, the same generator
version), the losses, the schedule and the expert balancing (train_loop.py), the held-out greedy
check and the export. One loss is added: the MTP module is trained chained as the engine drafts
with it (--mtp-chain-depth 3: passes 2 and 3 of mtp_chain.py over the first 512 tokens of up to
16 rows a step), since a head trained one position ahead makes chained drafts that are rarely
right (docs/speculative-decoding.md), and speculation is the other reason for a model this size:
its MTP layer is one of nine layers, not one of five. The model is BlockedGlm (blocked_mla.py),
TrainableGlm with its MLA run in blocks of queries, since 16 heads of [T, T] scores at 8K do not
fit as one. A separate script, not a preset of train.py: the committed micro's training.json binds
train.py and peer_config.py by sha256, so neither can change without retraining it.

Memory, one float32 step on the CPU, 512-token rows (peak RSS; a script's output, not a receipt):
16 rows 6.9 GB, 10.7 GB with the chained passes over all 16. A whole 32K-token step of that bucket
(64 rows) did not fit this 24 GB machine, with the passes over 16 rows or over all 64: by the
16-row numbers it needs up to 28 GB, and 15 GB more with the passes over every row, hence their
cap (the H200 has 141 GB).

  python3 tinyglm/train/train_wide.py --seed 1 --steps auto --time-budget-s 330 --out DIR        (H200)
  python3 tinyglm/train/train_wide.py --seed 1 --steps 3 --device cpu --tokens-per-step 1024 --max-len 512 --out DIR
  python3 tinyglm/train/train_wide.py --init DIR --seed 2 --steps auto --dense-warmup-frac 0 --out DIR2  (continue)

A device call lasts at most 10 minutes, and the wide model needs several times the steps one call
trains (docs/trained-tinyglm.md), so --init continues this script's output: its weights, a fresh
optimiser and schedule, the same losses, and batches of a data stream that depends on the base
shard and --seed (so a continuation does not replay the base run's batches); training.json's
derived_from names the base.

DIR receives what train.py writes: config.json, the shard and its index, train_log.jsonl and
training.json (preset tinyglm-wide, the geometry, seed, steps, generator version, the sources'
sha256, the shard's sha256, the command that reproduces it).
"""
import argparse
import os
import sys
import time

os.environ.setdefault("CUBLAS_WORKSPACE_CONFIG", ":4096:8")  # before CUDA starts: deterministic cuBLAS

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
sys.path.insert(1, os.path.join(HERE, "..", "..", "bench", "torch"))

import torch  # noqa: E402

import blocked_mla  # noqa: E402
import checkpoint_io  # noqa: E402
import curriculum  # noqa: E402
import greedy_eval  # noqa: E402
import peer_config  # noqa: E402
import run_record  # noqa: E402  (sources_sha256)
import train  # noqa: E402  (SCHEMA)
import train_loop  # noqa: E402

PRESET = "tinyglm-wide"
# tinyglm-micro's geometry with these fields changed: the engine's preset tinyglm-wide
# (engine/model/presets.cpp), which tests/python/test_train_wide.py holds this to, and which the CUDA
# runner tests run with dummy weights (tests/cuda/served_models.h).
WIDE = {"num_attention_heads": 16, "qk_nope_head_dim": 64, "index_n_heads": 16, "index_topk": 64,
        "num_hidden_layers": 8}
SOURCES = ["tinyglm/train/" + n for n in ("train_wide.py", "train_loop.py", "mtp_chain.py", "blocked_mla.py",
                                          "train.py", "run_record.py", "curriculum.py", "byte_chat.py",
                                          "trainable_glm.py", "checkpoint_io.py", "greedy_eval.py")]
SOURCES += ["bench/torch/" + n for n in ("peer_config.py", "peer_kda.py", "peer_mhc.py", "peer_mla.py")]


def wide_config():
    c = peer_config.preset("tinyglm-micro")
    c.update(WIDE)
    del c["layer_types"]  # the 3:1 rule again, over 8 layers: MLA at layers 3 and 7
    c["layer_types"] = peer_config.layer_kinds(c)
    return c


def init_model(directory, c, query_block):
    """The BlockedGlm of a tinyglm-wide checkpoint this script wrote, and its training record; refuses
    another preset or geometry by name."""
    try:
        model, loaded_c, base = train_loop.load_base(directory, query_block)
    except SystemExit as e:
        raise SystemExit(f"--init {e}") from None
    if base.get("preset") != PRESET:
        raise SystemExit(f"--init {directory}: preset {base.get('preset')!r}, expected {PRESET!r}")
    differ = sorted(k for k in c if loaded_c.get(k) != c[k])
    if differ:
        raise SystemExit(f"--init {directory}: config differs from {PRESET} in " + ", ".join(differ))
    return model, base


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--seed", type=int, required=True)
    ap.add_argument("--steps", required=True, help="an integer, or auto (fit --time-budget-s)")
    ap.add_argument("--time-budget-s", type=float, default=330.0, help="with --steps auto: training wall time")
    ap.add_argument("--out", required=True)
    ap.add_argument("--init", help="continue a tinyglm-wide checkpoint this script wrote (see above)")
    ap.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    train_loop.add_flags(ap, lr=2e-3)
    ap.add_argument("--dense-warmup-frac", type=float, default=0.1,
                    help="first fraction of steps attends densely (the indexer learns before it selects)")
    ap.add_argument("--mtp-chain-depth", type=int, default=3,
                    help="MTP passes trained chained as the engine drafts (mtp_chain.py); 1: pass 1 only")
    ap.add_argument("--mtp-chain-weight", type=float, default=0.3, help="loss weight of each pass 2 .. depth")
    ap.add_argument("--mtp-chain-len", type=int, default=512,
                    help="the chained passes see each row's first N tokens ([B, 16, N, N] scores per pass)")
    ap.add_argument("--mtp-chain-tokens", type=int, default=8192,
                    help="... of the first (this // --mtp-chain-len) rows of a step")
    ap.add_argument("--tokens-per-step", type=int, default=32768)
    ap.add_argument("--max-len", type=int, default=8192, help="longest bucket used (512 ... 8192)")
    ap.add_argument("--query-block", type=int, default=1024, help="BlockedGlm's MLA query block")
    ap.add_argument("--workers", type=int, default=6, help="processes preparing batches")
    ap.add_argument("--threads", type=int, default=2, help="CPU runs: torch threads")
    ap.add_argument("--log-every", type=int, default=10)
    ap.add_argument("--eval-max-s", type=float, default=60.0, help="the held-out eval stops after this long")
    ap.add_argument("--eval-prompts", type=int, default=8, help="held-out greedy replies graded after training")
    args = ap.parse_args()
    if args.steps != "auto" and not (args.steps.isdigit() and int(args.steps) > 0):
        ap.error(f"--steps {args.steps!r}: a positive integer, or auto")
    if not 1 <= args.mtp_chain_depth <= 4:
        ap.error(f"--mtp-chain-depth {args.mtp_chain_depth}: 1 to 4 (the engine drafts at most 4 tokens)")
    if args.mtp_chain_len < 8 or args.mtp_chain_tokens < args.mtp_chain_len:
        ap.error(f"--mtp-chain-len {args.mtp_chain_len}, --mtp-chain-tokens {args.mtp_chain_tokens}: "
                 "at least 8 tokens a row, and at least one row")
    if args.max_len not in [T for T, _ in curriculum.BUCKETS]:
        ap.error(f"--max-len {args.max_len}: one of the curriculum's buckets {[T for T, _ in curriculum.BUCKETS]}")

    t_start = time.time()
    cuda = args.device.startswith("cuda")
    torch.manual_seed(args.seed)
    torch.use_deterministic_algorithms(True, warn_only=cuda)
    if hasattr(torch.utils, "deterministic"):  # no NaN fill of every torch.empty: nothing reads it uninitialised
        torch.utils.deterministic.fill_uninitialized_memory = False
    if cuda:
        torch.backends.cuda.matmul.allow_tf32 = False
        torch.backends.cudnn.allow_tf32 = False
    else:
        torch.set_num_threads(args.threads)
    c = wide_config()
    base = None
    if args.init:
        model, base = init_model(args.init, c, args.query_block)
    else:
        model = blocked_mla.BlockedGlm(c, seed=args.seed, query_block=args.query_block)
    model = model.to(args.device)
    n_params = sum(p.numel() for p in model.parameters())
    opt = train_loop.optimizer(model, args.lr, args.weight_decay)
    os.makedirs(args.out, exist_ok=True)
    log = open(os.path.join(args.out, "train_log.jsonl"), "w")
    print(f"{PRESET} train: {n_params} parameters, device {args.device}, seed {args.seed}, "
          f"data {curriculum.GENERATOR_VERSION}, steps {args.steps}"
          + (f", from {args.init}" if base else ""), flush=True)
    data_seed = args.seed if base is None else f"after:{base['shard_sha256'][:16]}:{args.seed}"
    batches = train_loop.batches(data_seed, args.prompt_loss_weight, args.max_len, args.tokens_per_step,
                                 workers=args.workers)
    losses = train_loop.Losses(args.mtp_weight, args.indexer_weight, args.balance_rate, args.mtp_chain_depth,
                               args.mtp_chain_weight, args.mtp_chain_len, args.mtp_chain_tokens)
    done = train_loop.run(model, opt, batches, args.device, args.lr, losses, log,
                          steps=None if args.steps == "auto" else int(args.steps), time_budget_s=args.time_budget_s,
                          dense_frac=args.dense_warmup_frac, log_every=args.log_every)

    identity = f"trained:{PRESET},seed={args.seed},steps={done.steps},data={curriculum.GENERATOR_VERSION}"
    if base:
        identity = f"{base['weights_identity']}+{identity}"
    model.eval()
    t_eval = time.time()
    scores, samples = greedy_eval.run(model, args.seed, args.eval_prompts, args.device, args.max_len,
                                      deadline=time.time() + args.eval_max_s)
    print(f"held-out greedy ({time.time() - t_eval:.1f} s): " +
          ", ".join(f"{k} {v[0]}/{v[1]}" for k, v in sorted(scores.items())), flush=True)
    sha = checkpoint_io.export(model.float().cpu(), args.out, identity)
    if base:
        args.init = run_record.repo_path(args.init)
    run_only = ("steps", "time_budget_s", "out", "device", "workers", "threads", "log_every", "eval_prompts",
                "eval_max_s")
    flags = " ".join(f"--{k.replace('_', '-')} {v}" for k, v in vars(args).items()
                     if k not in run_only and v is not None)
    record = {"schema": train.SCHEMA, "preset": PRESET, "geometry": WIDE, "seed": args.seed, "steps": done.steps,
              "planned_steps": done.planned, "steps_arg": args.steps,
              "data_generator": curriculum.GENERATOR_VERSION,
              "args": {k: v for k, v in vars(args).items() if k != "out"}, "parameters": n_params,
              "tokens": done.tokens, "final": done.final, "train_wall_s": done.train_s,
              "total_wall_s": round(time.time() - t_start, 2),
              "device": torch.cuda.get_device_name() if cuda else "cpu", "torch": torch.__version__,
              "held_out_greedy": {"scores": scores, "samples": samples},
              **({"derived_from": run_record.derived_from(args.init, base)} if base else {}),
              "weights_identity": identity, "shard_sha256": sha, "sources_sha256": run_record.sources_sha256(SOURCES),
              "reproduce": f"python3 tinyglm/train/train_wide.py {flags} --steps {done.steps} --out DIR"}
    run_record.write(args.out, record)
    print(f"done: {done.steps} steps in {done.train_s:.1f} s; wrote {args.out} (shard sha256 {sha})", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
