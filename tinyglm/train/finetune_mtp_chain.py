"""Fine-tunes a trained tinyGLM's MTP module for chained drafts; nothing else moves.

The committed micro trained its MTP head one position ahead (TrainableGlm._mtp), so the engine's
second and third drafts, which chain on the module's own output state, are rarely right
(docs/speculative-decoding.md). This run trains only the MTP module's own tensors
(model.layers.<L>.*: eh_proj, its norms, its MLA with indexer, its MoE) on passes 1..depth of
mtp_chain.py, teacher-forced, weighted per pass; the main model, the embedding and the LM head (shared
with the module) are frozen, so the main model's logits stay bit for bit the checkpoint's and every
quality number of the base weights still holds for it. The MoE's correction bias is not balanced.

Data: curriculum.batch under the seed "chain:<seed>", a key the base run never drew; deterministic on
the CPU (fixed threads, deterministic algorithms). The output folder holds the checkpoint, its
training.json (`derived_from`: the base shard's sha256 and identity; the sources this run depends on)
and train_log.jsonl.

Run: python3 tinyglm/train/finetune_mtp_chain.py --checkpoint tinyglm/weights/tinyglm-micro-trained \\
         --out DIR [--steps 300] [--depth 3] [--threads 2]
"""
import argparse
import hashlib
import json
import os
import sys
import time

import torch

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)

import checkpoint_io  # noqa: E402
import curriculum  # noqa: E402
import mtp_chain  # noqa: E402
import train  # noqa: E402  (weighted_ce, lr_at: the base run's loss and schedule)

SCHEMA = "sparkglm.tinyglm_training/1"


def sources_sha256():
    out = {}
    files = [f"tinyglm/train/{n}" for n in ("finetune_mtp_chain.py", "mtp_chain.py", "train.py", "curriculum.py",
                                              "byte_chat.py", "trainable_glm.py", "checkpoint_io.py")]
    files += [f"bench/torch/{n}" for n in ("peer_config.py", "peer_kda.py", "peer_mhc.py", "peer_mla.py")]
    for rel in files:
        with open(os.path.join(HERE, "..", "..", rel), "rb") as f:
            out[rel] = hashlib.sha256(f.read()).hexdigest()
    return out


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--checkpoint", required=True)
    ap.add_argument("--out", required=True)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--steps", type=int, default=300)
    ap.add_argument("--depth", type=int, default=3)
    ap.add_argument("--pass-weights", default="1,1,1", help="loss weight of passes 1..depth")
    ap.add_argument("--lr", type=float, default=1e-3)
    ap.add_argument("--weight-decay", type=float, default=0.05)
    ap.add_argument("--prompt-loss-weight", type=float, default=0.1)
    ap.add_argument("--tokens-per-step", type=int, default=8192)
    ap.add_argument("--max-len", type=int, default=1024)
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
    print(f"finetune: {n_trained} MTP parameters of {sum(p.numel() for p in model.parameters())}, depth "
          f"{args.depth}, pass weights {pass_w}, {args.steps} steps", flush=True)
    seed_key = f"chain:{args.seed}"
    window, tokens_seen, t_train = [0.0] * args.depth, 0, time.time()
    last = {}
    for step in range(args.steps):
        toks, wts = curriculum.batch(seed_key, step, args.prompt_loss_weight, max_len=args.max_len,
                                     tokens_per_step=args.tokens_per_step)
        tokens, weights = torch.tensor(toks), torch.tensor(wts, dtype=torch.float32)
        with torch.no_grad():
            _, h, _, _ = model(tokens, with_mtp=False)
        logits = mtp_chain.mtp_chain(model, tokens, h, args.depth)
        losses = [train.weighted_ce(logits[0][:, :-1], tokens[:, 2:], weights[:, 1:-1])]
        losses += mtp_chain.chain_loss(logits, tokens, weights, train.weighted_ce)
        loss = sum(w * l for w, l in zip(pass_w, losses))
        for g in opt.param_groups:
            g["lr"] = train.lr_at(step, args.steps, args.lr)
        opt.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_([p for _, p in trained], 1.0)
        opt.step()
        tokens_seen += tokens.numel()
        for d, l in enumerate(losses):
            window[d] += float(l.detach())
        if (step + 1) % args.log_every == 0 or step + 1 == args.steps:
            n = args.log_every if (step + 1) % args.log_every == 0 else (step + 1) % args.log_every
            last = {f"pass{d + 1}": round(window[d] / n, 5) for d in range(args.depth)}
            rec = {"step": step + 1, **last, "lr": opt.param_groups[0]["lr"], "T": tokens.shape[1],
                   "tokens": tokens_seen, "elapsed_s": round(time.time() - t_train, 2)}
            log.write(json.dumps(rec) + "\n")
            log.flush()
            print(json.dumps(rec), flush=True)
            window = [0.0] * args.depth
    train_s = time.time() - t_train
    identity = (f"{base['weights_identity']}+mtp-chain:seed={args.seed},steps={args.steps},depth={args.depth},"
                f"data={curriculum.GENERATOR_VERSION}")
    sha = checkpoint_io.export(model.float().cpu(), args.out, identity)
    record = {"schema": SCHEMA, "preset": base["preset"], "seed": args.seed, "steps": args.steps,
              "data_generator": curriculum.GENERATOR_VERSION, "args": vars(args),
              "parameters_trained": n_trained, "tokens": tokens_seen, "final": last,
              "train_wall_s": round(train_s, 2), "total_wall_s": round(time.time() - t_start, 2),
              "device": "cpu", "threads": args.threads, "torch": torch.__version__,
              "derived_from": {"checkpoint": args.checkpoint, "shard_sha256": base["shard_sha256"],
                               "weights_identity": base["weights_identity"]},
              "weights_identity": identity, "shard_sha256": sha, "sources_sha256": sources_sha256(),
              "reproduce": "python3 tinyglm/train/finetune_mtp_chain.py " + " ".join(
                  f"--{k.replace('_', '-')} {v}" for k, v in vars(args).items())}
    with open(os.path.join(args.out, "training.json"), "w") as f:
        json.dump(record, f, indent=2)
        f.write("\n")
    print(f"done: {args.steps} steps in {train_s:.1f} s; wrote {args.out} (shard sha256 {sha})", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
