"""Fine-tunes a trained tinyGLM's MTP module toward the main model's own predictions; nothing else moves.

A draft is accepted when it equals the main model's greedy pick, not when it equals the training
text, so the module is trained here against the frozen main model's distribution (soft-target cross
entropy, the KL divergence up to a constant) instead of against the data tokens that
finetune_mtp_chain.py uses. Passes 1..depth run teacher-forced through mtp_chain.py exactly as there;
row j of every pass predicts token j + 2, which the main model predicts from position j + 1, so each
pass's rows take the main model's logits at the next position as their target. Only the module's
tensors (model.layers.<L>.*) train: the main model's logits stay bit for bit the checkpoint's.

Every log line also states, per pass, how often the module's argmax equals the main model's on the
weighted rows (teacher-forced agreement, a proxy for draft acceptance), and the run starts and ends
with that agreement on held-out batches (seed key "distill-eval"), so a run that does not raise it is
seen as such.

Data: curriculum.batch under the seed "distill:<seed>" (a key neither earlier run drew);
deterministic on the CPU (fixed threads, deterministic algorithms). The output folder holds the
checkpoint, its training.json (`derived_from`: the base shard's sha256 and identity; the sources this
run depends on) and train_log.jsonl.

Run: python3 tinyglm/train/finetune_mtp_distill.py \\
         --checkpoint tinyglm/weights/tinyglm-micro-trained-mtp-chain --out DIR [--steps 1200]
"""
import argparse
import hashlib
import json
import os
import sys
import time

import torch
import torch.nn.functional as F

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)

import checkpoint_io  # noqa: E402
import curriculum  # noqa: E402
import mtp_chain  # noqa: E402
import train  # noqa: E402  (lr_at: the base run's schedule)

SCHEMA = "sparkglm.tinyglm_training/1"
EVAL_KEY = "distill-eval"


def sources_sha256():
    out = {}
    files = [f"tinyglm/train/{n}" for n in ("finetune_mtp_distill.py", "mtp_chain.py", "train.py", "curriculum.py",
                                              "byte_chat.py", "trainable_glm.py", "checkpoint_io.py")]
    files += [f"bench/torch/{n}" for n in ("peer_config.py", "peer_kda.py", "peer_mhc.py", "peer_mla.py")]
    for rel in files:
        with open(os.path.join(HERE, "..", "..", rel), "rb") as f:
            out[rel] = hashlib.sha256(f.read()).hexdigest()
    return out


def pass_rows(depth, main_logits, weights):
    """Per pass d = 1..depth: (slice of the pass's rows, the main model's logits there, the weights).
    Pass d's rows j = d-1 .. T-3 predict t_{j+2}, which the main model predicts at position j+1."""
    out = []
    for d in range(1, depth + 1):
        out.append((slice(d - 1, -1), main_logits[:, d:-1], weights[:, d:-1]))
    return out


def soft_ce(student, teacher, weights):
    """sum_rows w * H(softmax(teacher), softmax(student)) / sum w."""
    p = F.softmax(teacher.float(), dim=-1)
    ce = -(p * F.log_softmax(student.float(), dim=-1)).sum(-1)
    return (ce * weights).sum() / weights.sum().clamp(min=1.0)


def agreement(student, teacher, weights):
    """The weighted share of rows whose argmax is the main model's."""
    same = (student.argmax(-1) == teacher.argmax(-1)).float()
    return float((same * weights).sum() / weights.sum().clamp(min=1.0))


def losses_and_agreement(model, tokens, weights, depth):
    with torch.no_grad():
        main_logits, h, _, _ = model(tokens, with_mtp=False)
    logits = mtp_chain.mtp_chain(model, tokens, h, depth)
    losses, agree = [], []
    for lg, (rows, teacher, w) in zip(logits, pass_rows(depth, main_logits, weights)):
        student = lg[:, rows]
        losses.append(soft_ce(student, teacher, w))
        agree.append(agreement(student.detach(), teacher, w))
    return losses, agree


def evaluate(model, args):
    """Agreement per pass over args.eval_batches held-out batches (answer rows weighted 1, prompts 0)."""
    total = [0.0] * args.depth
    with torch.no_grad():
        for i in range(args.eval_batches):
            toks, wts = curriculum.batch(EVAL_KEY, i, 0.0, max_len=args.max_len,
                                         tokens_per_step=args.tokens_per_step)
            _, agree = losses_and_agreement(model, torch.tensor(toks), torch.tensor(wts, dtype=torch.float32),
                                            args.depth)
            total = [t + a for t, a in zip(total, agree)]
    return {f"pass{d + 1}": round(total[d] / args.eval_batches, 5) for d in range(args.depth)}


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--checkpoint", required=True)
    ap.add_argument("--out", required=True)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--steps", type=int, default=1200)
    ap.add_argument("--depth", type=int, default=3)
    ap.add_argument("--pass-weights", default="1,1,1", help="loss weight of passes 1..depth")
    ap.add_argument("--lr", type=float, default=1e-3)
    ap.add_argument("--weight-decay", type=float, default=0.05)
    ap.add_argument("--prompt-loss-weight", type=float, default=0.1)
    ap.add_argument("--tokens-per-step", type=int, default=4096)
    ap.add_argument("--max-len", type=int, default=512)
    ap.add_argument("--eval-batches", type=int, default=4)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--log-every", type=int, default=10)
    args = ap.parse_args()
    pass_w = [float(x) for x in args.pass_weights.split(",")]
    if len(pass_w) != args.depth:
        ap.error(f"--pass-weights: {args.depth} weights, one per pass")
    torch.set_num_threads(args.threads)
    torch.use_deterministic_algorithms(True)
    torch.manual_seed(args.seed)
    t_start = time.time()

    with open(os.path.join(args.checkpoint, "training.json")) as f:
        base = json.load(f)
    model = checkpoint_io.load(args.checkpoint, torch.float32)
    model.sparse = True
    prefix = model._key(f"model.layers.{model.c['num_hidden_layers']}.")
    trained = []
    for n, p in model.named_parameters():
        p.requires_grad_(n.startswith(prefix))
        if p.requires_grad:
            trained.append((n, p))
    decays = [p for n, p in trained if p.dim() >= 2 and "gate__weight" not in n]
    rest = [p for n, p in trained if not (p.dim() >= 2 and "gate__weight" not in n)]
    opt = torch.optim.AdamW([{"params": decays, "weight_decay": args.weight_decay},
                             {"params": rest, "weight_decay": 0.0}], lr=args.lr, betas=(0.9, 0.95), eps=1e-8)
    n_trained = sum(p.numel() for _, p in trained)
    os.makedirs(args.out, exist_ok=True)
    log = open(os.path.join(args.out, "train_log.jsonl"), "w")
    before = evaluate(model, args)
    print(f"distill: {n_trained} MTP parameters, depth {args.depth}, {args.steps} steps; held-out agreement "
          f"before {before}", flush=True)
    seed_key = f"distill:{args.seed}"
    window, agree_window, tokens_seen, t_train = [0.0] * args.depth, [0.0] * args.depth, 0, time.time()
    last = {}
    for step in range(args.steps):
        toks, wts = curriculum.batch(seed_key, step, args.prompt_loss_weight, max_len=args.max_len,
                                     tokens_per_step=args.tokens_per_step)
        tokens, weights = torch.tensor(toks), torch.tensor(wts, dtype=torch.float32)
        losses, agree = losses_and_agreement(model, tokens, weights, args.depth)
        loss = sum(w * l for w, l in zip(pass_w, losses))
        for g in opt.param_groups:
            g["lr"] = train.lr_at(step, args.steps, args.lr)
        opt.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_([p for _, p in trained], 1.0)
        opt.step()
        tokens_seen += tokens.numel()
        for d in range(args.depth):
            window[d] += float(losses[d].detach())
            agree_window[d] += agree[d]
        if (step + 1) % args.log_every == 0 or step + 1 == args.steps:
            n = args.log_every if (step + 1) % args.log_every == 0 else (step + 1) % args.log_every
            last = {f"pass{d + 1}": round(window[d] / n, 5) for d in range(args.depth)}
            rec = {"step": step + 1, **last,
                   **{f"agree{d + 1}": round(agree_window[d] / n, 5) for d in range(args.depth)},
                   "lr": opt.param_groups[0]["lr"], "T": tokens.shape[1], "tokens": tokens_seen,
                   "elapsed_s": round(time.time() - t_train, 2)}
            log.write(json.dumps(rec) + "\n")
            log.flush()
            print(json.dumps(rec), flush=True)
            window, agree_window = [0.0] * args.depth, [0.0] * args.depth
    train_s = time.time() - t_train
    after = evaluate(model, args)
    print(f"held-out agreement after {after}", flush=True)
    identity = (f"{base['weights_identity']}+mtp-distill:seed={args.seed},steps={args.steps},depth={args.depth},"
                f"data={curriculum.GENERATOR_VERSION}")
    sha = checkpoint_io.export(model.float().cpu(), args.out, identity)
    record = {"schema": SCHEMA, "preset": base["preset"], "seed": args.seed, "steps": args.steps,
              "data_generator": curriculum.GENERATOR_VERSION, "args": vars(args),
              "parameters_trained": n_trained, "tokens": tokens_seen, "final": last,
              "heldout_agreement": {"before": before, "after": after},
              "train_wall_s": round(train_s, 2), "total_wall_s": round(time.time() - t_start, 2),
              "device": "cpu", "threads": args.threads, "torch": torch.__version__,
              "derived_from": {"checkpoint": args.checkpoint, "shard_sha256": base["shard_sha256"],
                               "weights_identity": base["weights_identity"]},
              "weights_identity": identity, "shard_sha256": sha, "sources_sha256": sources_sha256(),
              "reproduce": "python3 tinyglm/train/finetune_mtp_distill.py " + " ".join(
                  f"--{k.replace('_', '-')} {v}" for k, v in vars(args).items())}
    with open(os.path.join(args.out, "training.json"), "w") as f:
        json.dump(record, f, indent=2)
        f.write("\n")
    print(f"done: {args.steps} steps in {train_s:.1f} s; wrote {args.out} (shard sha256 {sha})", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
