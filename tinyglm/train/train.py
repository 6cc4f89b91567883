"""Trains tinyglm-micro on the synthetic curriculum and exports a checkpoint the engine loads.

  python3 tinyglm/train/train.py --seed 1 --steps auto --time-budget-s 300 --out DIR
  python3 tinyglm/train/train.py --seed 1 --steps 20 --device cpu --tokens-per-step 2048 --max-len 512 --out DIR

--steps auto measures the step time over steps [5, 25) and fixes the total so that training ends within
--time-budget-s; the total is recorded, and `--steps <that total>` reproduces the run (the learning
rate before step 25 does not depend on the total: warm-up is 50 steps). Batches are a pure function of
(seed, step) (curriculum.py); torch runs seeded with deterministic algorithms where torch has them
(warn_only: CUDA's index/scatter backward may still sum in varying order). DIR receives config.json,
the safetensors shard and index, train_log.jsonl (one line per --log-every steps) and training.json
(seed, steps, generator version, source checksums, wall time, final losses, shard sha256).
"""
import argparse
import hashlib
import json
import math
import os
import sys
import time

os.environ.setdefault("CUBLAS_WORKSPACE_CONFIG", ":4096:8")  # before CUDA starts: deterministic cuBLAS

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
sys.path.insert(1, os.path.join(HERE, "..", "..", "bench", "torch"))

import torch  # noqa: E402
import torch.nn.functional as F  # noqa: E402

import checkpoint_io  # noqa: E402
import curriculum  # noqa: E402
import greedy_eval  # noqa: E402
from peer_config import preset  # noqa: E402
from trainable_glm import TrainableGlm  # noqa: E402

SCHEMA = "sparkglm.tinyglm_training/1"
WARMUP = 50
CALIBRATE = (5, 25)


class Batches(torch.utils.data.Dataset):
    """Index = step; a batch is curriculum.batch(seed, step), optionally limited in length and rows."""

    def __init__(self, args):
        self.args = args

    def __len__(self):
        return 1 << 30

    def __getitem__(self, step):
        a = self.args
        tokens, weights = curriculum.batch(a.seed, step, a.prompt_loss_weight, max_len=a.max_len,
                                           tokens_per_step=a.tokens_per_step)
        return torch.tensor(tokens, dtype=torch.int64), torch.tensor(weights, dtype=torch.float32)


def weighted_ce(logits, targets, weights):
    ce = F.cross_entropy(logits.float().reshape(-1, logits.shape[-1]), targets.reshape(-1), reduction="none")
    return (ce * weights.reshape(-1)).sum() / weights.sum().clamp(min=1.0)


def lr_at(step, total, peak):
    if step < WARMUP:
        return peak * (step + 1) / WARMUP
    frac = min(1.0, (step - WARMUP) / max(1, total - WARMUP))
    return peak * (0.1 + 0.9 * 0.5 * (1 + math.cos(math.pi * frac)))


def sources_sha256():
    """sha256 of every source the run's function depends on, by repository path."""
    out = {}
    train = ["train.py", "curriculum.py", "byte_chat.py", "trainable_glm.py", "checkpoint_io.py", "greedy_eval.py"]
    peer = ["peer_config.py", "peer_kda.py", "peer_mhc.py", "peer_mla.py"]
    for rel in [f"tinyglm/train/{n}" for n in train] + [f"bench/torch/{n}" for n in peer]:
        with open(os.path.join(HERE, "..", "..", rel), "rb") as f:
            out[rel] = hashlib.sha256(f.read()).hexdigest()
    return out


def reproduce_command(args, steps):
    run_only = ("steps", "time_budget_s", "out", "device", "workers", "log_every", "eval_prompts", "eval_max_s")
    flags = [f"--{k.replace('_', '-')} {v}" for k, v in vars(args).items() if k not in run_only]
    return f"python3 tinyglm/train/train.py {' '.join(flags)} --steps {steps} --out DIR"


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--seed", type=int, required=True)
    ap.add_argument("--steps", required=True, help="an integer, or auto (fit --time-budget-s)")
    ap.add_argument("--time-budget-s", type=float, default=300.0, help="with --steps auto: training wall time")
    ap.add_argument("--out", required=True)
    ap.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    ap.add_argument("--preset", default="tinyglm-micro", choices=["tinyglm-micro"])
    ap.add_argument("--lr", type=float, default=2e-3)
    ap.add_argument("--weight-decay", type=float, default=0.05)
    ap.add_argument("--dense-warmup-frac", type=float, default=0.1,
                    help="first fraction of steps attends densely (the indexer learns before it selects)")
    ap.add_argument("--prompt-loss-weight", type=float, default=0.1)
    ap.add_argument("--mtp-weight", type=float, default=0.3)
    ap.add_argument("--indexer-weight", type=float, default=0.5)
    ap.add_argument("--balance-rate", type=float, default=1e-3)
    ap.add_argument("--tokens-per-step", type=int, default=32768)
    ap.add_argument("--max-len", type=int, default=8192, help="longest bucket used (512 ... 8192)")
    ap.add_argument("--workers", type=int, default=6)
    ap.add_argument("--log-every", type=int, default=10)
    ap.add_argument("--eval-max-s", type=float, default=60.0, help="the held-out eval stops after this long")
    ap.add_argument("--eval-prompts", type=int, default=8, help="held-out greedy replies graded after training")
    args = ap.parse_args()

    t_start = time.time()
    torch.manual_seed(args.seed)
    torch.use_deterministic_algorithms(True, warn_only=True)
    if hasattr(torch.utils, "deterministic"):  # no NaN fill of every torch.empty: nothing reads it uninitialised
        torch.utils.deterministic.fill_uninitialized_memory = False
    cuda = args.device.startswith("cuda")
    if cuda:
        torch.backends.cuda.matmul.allow_tf32 = False
        torch.backends.cudnn.allow_tf32 = False
    else:
        torch.set_num_threads(1)  # CPU runs are smoke tests on shared machines
    c = preset(args.preset)
    model = TrainableGlm(c, seed=args.seed).to(args.device)
    decays = lambda n, p: p.dim() >= 2 and "hc_" not in n and "gate__weight" not in n  # projections only
    decay = [p for n, p in model.named_parameters() if decays(n, p)]
    rest = [p for n, p in model.named_parameters() if not decays(n, p)]
    groups = [{"params": decay, "weight_decay": args.weight_decay}, {"params": rest, "weight_decay": 0.0}]
    opt = torch.optim.AdamW(groups, lr=args.lr, betas=(0.9, 0.95), eps=1e-8)
    n_params = sum(p.numel() for p in model.parameters())
    loader = torch.utils.data.DataLoader(Batches(args), batch_size=None, shuffle=False, num_workers=args.workers,
                                         prefetch_factor=2 if args.workers else None,
                                         persistent_workers=bool(args.workers))
    os.makedirs(args.out, exist_ok=True)
    log = open(os.path.join(args.out, "train_log.jsonl"), "w")
    total = None if args.steps == "auto" else int(args.steps)
    print(f"tinyglm train: {n_params} parameters, device {args.device}, seed {args.seed}, "
          f"data {curriculum.GENERATOR_VERSION}, steps {args.steps}", flush=True)

    t_train, t_cal, tokens_seen, step = time.time(), None, 0, 0
    window = {"loss": 0.0, "main": 0.0, "mtp": 0.0, "kl": 0.0, "n": 0}
    last = {}
    for tokens, weights in loader:
        if total is not None and step >= total:
            break
        if args.steps == "auto" and time.time() - t_train > 1.15 * args.time_budget_s:
            print(f"hard stop at step {step}: {time.time() - t_train:.0f} s > 1.15 x --time-budget-s "
                  f"(planned {total}); the record says so", flush=True)
            break
        if step == CALIBRATE[0]:
            if cuda:
                torch.cuda.synchronize()
            t_cal = time.time()
        if step == CALIBRATE[1] and total is None:
            if cuda:
                torch.cuda.synchronize()
            per_step = (time.time() - t_cal) / (CALIBRATE[1] - CALIBRATE[0])
            left = args.time_budget_s - (time.time() - t_train)
            total = max(CALIBRATE[1] + 1, int(0.92 * left / per_step) + step)  # 8 % margin: buckets vary
            print(f"calibrated: {per_step * 1e3:.1f} ms/step, {args.tokens_per_step / per_step:.0f} tok/s -> "
                  f"--steps {total}", flush=True)
        planned = total if total is not None else 10 ** 9
        tokens, weights = tokens.to(args.device, non_blocking=True), weights.to(args.device, non_blocking=True)
        # Dense until the warm-up fraction of the total, and never before the total is known (auto).
        model.sparse = total is not None and step >= max(CALIBRATE[1], int(args.dense_warmup_frac * total))
        for g in opt.param_groups:
            g["lr"] = lr_at(step, planned, args.lr)
        with torch.autocast(device_type="cuda", dtype=torch.bfloat16, enabled=cuda):
            logits, _, mtp, aux = model(tokens)
        main = weighted_ce(logits[:, :-1], tokens[:, 1:], weights[:, :-1])
        mtp_loss = weighted_ce(mtp[:, :-1], tokens[:, 2:], weights[:, 1:-1])
        kl = aux.get("indexer_kl", torch.zeros((), device=tokens.device))
        loss = main + args.mtp_weight * mtp_loss + args.indexer_weight * kl
        opt.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        model.balance_experts(aux, args.balance_rate)
        tokens_seen += tokens.numel()
        step += 1
        for k, v in (("loss", loss), ("main", main), ("mtp", mtp_loss), ("kl", kl)):
            window[k] += v.detach()  # summed on the device: no host sync per step
        window["n"] += 1
        if step % args.log_every == 0 or step == 5 or (total is not None and step == total):
            elapsed = time.time() - t_train
            last = {k: float(window[k]) / window["n"] for k in ("loss", "main", "mtp", "kl")}
            rec = {"step": step, **{k: round(v, 5) for k, v in last.items()}, "lr": opt.param_groups[0]["lr"],
                   "sparse": model.sparse, "T": tokens.shape[1], "tokens": tokens_seen,
                   "elapsed_s": round(elapsed, 2), "tok_per_s": round(tokens_seen / elapsed)}
            if cuda:
                rec["max_mem_gb"] = round(torch.cuda.max_memory_allocated() / 2 ** 30, 1)
            log.write(json.dumps(rec) + "\n")
            log.flush()
            print(json.dumps(rec), flush=True)
            window = {k: 0.0 for k in window} | {"n": 0}
    train_s = time.time() - t_train
    identity = f"trained:seed={args.seed},steps={step},data={curriculum.GENERATOR_VERSION}"
    model.eval()
    t_eval = time.time()
    scores, samples = greedy_eval.run(model, args.seed, args.eval_prompts, args.device, args.max_len,
                                      deadline=time.time() + args.eval_max_s)
    print(f"held-out greedy ({time.time() - t_eval:.1f} s): " +
          ", ".join(f"{k} {v[0]}/{v[1]}" for k, v in sorted(scores.items())), flush=True)
    for s in samples:
        print("  " + json.dumps(s), flush=True)
    sha = checkpoint_io.export(model.float().cpu(), args.out, identity)
    record = {"schema": SCHEMA, "preset": args.preset, "seed": args.seed, "steps": step, "planned_steps": total,
              "steps_arg": args.steps, "data_generator": curriculum.GENERATOR_VERSION,
              "args": vars(args), "parameters": n_params, "tokens": tokens_seen, "final": last,
              "train_wall_s": round(train_s, 2), "total_wall_s": round(time.time() - t_start, 2),
              "device": torch.cuda.get_device_name() if cuda else "cpu", "torch": torch.__version__,
              "held_out_greedy": {"scores": scores, "samples": samples},
              "weights_identity": identity, "shard_sha256": sha, "sources_sha256": sources_sha256(),
              "reproduce": reproduce_command(args, step)}
    with open(os.path.join(args.out, "training.json"), "w") as f:
        json.dump(record, f, indent=2)
        f.write("\n")
    print(f"done: {step} steps in {train_s:.1f} s; wrote {args.out} (shard sha256 {sha})", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
