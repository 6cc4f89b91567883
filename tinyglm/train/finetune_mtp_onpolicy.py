"""Fine-tunes a trained tinyGLM's MTP module on the served model's own greedy replies.

finetune_mtp_distill.py trains the module toward the main model's predictions on curriculum text:
the reply rows there are the data's reply, which the main model does not always write, and a
chained pass reads the data's next token where, served, it reads the main model's pick. A draft is
verified only on the main model's own greedy text, so here the training text is that text: prompts
drawn from the curriculum under a key no other run draws, replied to greedily by the engine itself
(speculation_bench at k = 0, its --outputs), and the module trained on prompt + reply with the same
loss as the distillation (each pass's row against the frozen main model's softmax at the next
position; finetune_mtp_distill.losses_and_agreement). On the reply the main model's argmax is the
next token, so the teacher-forced chain reads exactly the tokens that accepted drafts would be.

Two steps and the engine between them:

    python3 tinyglm/train/finetune_mtp_onpolicy.py prompts --out P.json --count 3072
    ./build/bench/speculation_bench --device cpu --model M --prompts P.json --k 0 \\
        --concurrency 48 --waves 64 --max-tokens 128 --reps 1 --outputs R.json > /dev/null
    python3 tinyglm/train/finetune_mtp_onpolicy.py train --checkpoint M --prompts P.json \\
        --replies R.json --out DIR [--steps 800] [--device cuda]

M is the checkpoint whose main model replies and whose module trains (the distilled one). Every
20th example is held out: the run starts and ends with the module's agreement with the main model
on their reply rows, per pass. The output folder holds the checkpoint, its training.json (the
prompt set's and replies' sha256, the base shard, the sources) and train_log.jsonl. Deterministic on
the CPU (fixed threads, deterministic algorithms), given the same replies. --device cuda trains on
the GPU in float32 (no TF32): deterministic where torch has deterministic CUDA kernels (it warns,
and the record says "deterministic": "warn_only", where it has none), and not bit-equal to the CPU.
"""
import argparse
import hashlib
import json
import os
import random
import sys
import time

import torch

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)

import checkpoint_io  # noqa: E402
import curriculum  # noqa: E402
import finetune_mtp_distill as distill  # noqa: E402
import heldout  # noqa: E402
import train  # noqa: E402  (lr_at: the base run's schedule)

SCHEMA = "sparkglm.tinyglm_training/1"
KEY = "onpolicy"
BUCKETS = (512, 1024, 2048)
EVAL_EVERY = 20  # example i is held out when i % EVAL_EVERY == EVAL_EVERY - 1
MAX_COUNT = 100000
MAX_REPLY = 4096


def sha256_file(path):
    with open(path, "rb") as f:
        return hashlib.sha256(f.read()).hexdigest()


def draw_prompts(count, buckets=BUCKETS):
    """heldout.py's format (task, bucket, reply_from, tokens = prompt + the data's reply), example i
    drawn by Draws(KEY, T, i) with T the buckets in turn: a key neither training nor the held-out set
    draws."""
    examples = []
    for i in range(count):
        T = buckets[i % len(buckets)]
        rng = heldout.LabelledDraws(T, KEY, T, i)
        prompt, reply = curriculum.example(rng, T)
        examples.append({"task": rng.task, "bucket": T, "reply_from": len(prompt), "tokens": prompt + reply})
    return {"schema": heldout.SCHEMA, "generator": curriculum.GENERATOR_VERSION, "draws": f"{KEY}:T:i",
            "buckets": list(buckets), "examples": examples}


def load_pairs(prompts_path, replies_path, vocab):
    """[(prompt ids, reply ids)] in example order; refuses a replies file that is not this prompt
    set's (count), an example no request took, or ids outside the vocabulary, naming the example."""
    with open(prompts_path) as f:
        prompts = json.load(f)
    with open(replies_path) as f:
        replies = json.load(f)
    if prompts.get("schema") != heldout.SCHEMA:
        raise SystemExit(f"{prompts_path}: schema {prompts.get('schema')!r}, want {heldout.SCHEMA}")
    if replies.get("schema") != "sparkglm.bench_outputs/1" or replies.get("k") != 0:
        raise SystemExit(f"{replies_path}: not speculation_bench --outputs of a k = 0 cell")
    ex, rs = prompts["examples"], replies["replies"]
    if len(ex) != len(rs) or len(ex) > MAX_COUNT:
        raise SystemExit(f"{replies_path}: {len(rs)} replies for {len(ex)} prompts")
    pairs = []
    for i, (e, r) in enumerate(zip(ex, rs)):
        prompt = e["tokens"][:e["reply_from"]]
        if not r or len(r) > MAX_REPLY:
            raise SystemExit(f"{replies_path}: example {i}: {len(r)} reply tokens (run every example)")
        if any(not (0 <= t < vocab) for t in prompt + r):
            raise SystemExit(f"example {i}: a token id outside 0..{vocab - 1}")
        pairs.append((prompt, r))
    return pairs


def row(prompt, reply, T, prompt_weight):
    """tokens [T] and weights [T] as curriculum.batch lays them out (weights[t] weighs predicting
    tokens[t + 1]; padding repeats <|endoftext|> with weight 0)."""
    n = len(prompt) + len(reply)
    tokens = prompt + reply + [curriculum.chat.END_OF_TEXT] * (T - n)
    weights = [prompt_weight] * (len(prompt) - 1) + [1.0] * len(reply) + [0.0] * (T - n + 1)
    return tokens, weights


def batches(pairs, tokens_per_step, seed):
    """Deterministic batches of at most tokens_per_step padded tokens (one sequence when a single one
    is longer): the pairs shuffled by seed, sorted by length within windows of 64 so a batch pads
    little, the batches shuffled again."""
    order = list(range(len(pairs)))
    random.Random(seed).shuffle(order)
    length = lambda i: len(pairs[i][0]) + len(pairs[i][1])
    out = []
    for w in range(0, len(order), 64):
        window = sorted(order[w:w + 64], key=length)
        cur = []
        for i in window:  # ascending, so i is the longest of cur + [i]
            if cur and length(i) * (len(cur) + 1) > tokens_per_step:
                out.append(cur)
                cur = []
            cur.append(i)
        if cur:
            out.append(cur)
    random.Random(seed + 1).shuffle(out)
    return out


def tensors(pairs, idx, prompt_weight, device="cpu"):
    T = max(len(pairs[i][0]) + len(pairs[i][1]) for i in idx)
    rows = [row(pairs[i][0], pairs[i][1], T, prompt_weight) for i in idx]
    return (torch.tensor([r[0] for r in rows], device=device),
            torch.tensor([r[1] for r in rows], dtype=torch.float32, device=device))


def evaluate(model, pairs, eval_idx, depth, device="cpu"):
    """Agreement per pass on the held-out examples' reply rows (prompt rows weighted 0), weighted by
    their rows."""
    total, rows = [0.0] * depth, 0.0
    with torch.no_grad():
        for i in eval_idx:
            tokens, weights = tensors(pairs, [i], 0.0, device)
            _, agree = distill.losses_and_agreement(model, tokens, weights, depth)
            n = float(len(pairs[i][1]))
            total = [t + a * n for t, a in zip(total, agree)]
            rows += n
    return {f"pass{d + 1}": round(total[d] / max(rows, 1.0), 5) for d in range(depth)}


def sources_sha256():
    out = distill.sources_sha256()
    for n in ("finetune_mtp_onpolicy.py", "finetune_mtp_distill.py", "heldout.py"):
        out[f"tinyglm/train/{n}"] = sha256_file(os.path.join(HERE, n))
    return out


def cmd_prompts(args):
    if not 1 <= args.count <= MAX_COUNT:
        raise SystemExit(f"--count: 1..{MAX_COUNT}")
    buckets = tuple(int(b) for b in args.buckets.split(","))
    if not buckets or any(b not in heldout.BUCKETS for b in buckets):
        raise SystemExit(f"--buckets: a comma-separated subset of {','.join(map(str, heldout.BUCKETS))}")
    data = draw_prompts(args.count, buckets)
    with open(args.out, "w") as f:
        json.dump(data, f, separators=(",", ":"))
        f.write("\n")
    print(f"wrote {args.out}: {len(data['examples'])} prompts")
    return 0


def cmd_train(args):
    pass_w = [float(x) for x in args.pass_weights.split(",")]
    if len(pass_w) != args.depth:
        raise SystemExit(f"--pass-weights: {args.depth} weights, one per pass")
    if args.device == "cuda":
        if not torch.cuda.is_available():
            raise SystemExit("--device cuda: torch sees no GPU")
        os.environ.setdefault("CUBLAS_WORKSPACE_CONFIG", ":4096:8")  # deterministic cuBLAS
        torch.backends.cuda.matmul.allow_tf32 = False
        torch.backends.cudnn.allow_tf32 = False
    torch.set_num_threads(args.threads)
    torch.use_deterministic_algorithms(True, warn_only=args.device == "cuda")
    torch.manual_seed(args.seed)
    t_start = time.time()
    with open(os.path.join(args.checkpoint, "training.json")) as f:
        base = json.load(f)
    model = checkpoint_io.load(args.checkpoint, torch.float32).to(args.device)
    model.sparse = True
    pairs = load_pairs(args.prompts, args.replies, model.c["vocab_size"])
    eval_idx = [i for i in range(len(pairs)) if i % EVAL_EVERY == EVAL_EVERY - 1]
    train_pairs = [p for i, p in enumerate(pairs) if i % EVAL_EVERY != EVAL_EVERY - 1]
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
    before = evaluate(model, pairs, eval_idx, args.depth, args.device)
    print(f"onpolicy: {len(train_pairs)} replies ({len(eval_idx)} held out), {n_trained} MTP parameters, "
          f"{args.steps} steps; held-out agreement before {before}", flush=True)
    plan = []
    epoch = 0
    while len(plan) < args.steps:
        plan += batches(train_pairs, args.tokens_per_step, args.seed * 1000 + epoch)
        epoch += 1
    window, agree_window, tokens_seen, t_train = [0.0] * args.depth, [0.0] * args.depth, 0, time.time()
    last = {}
    for step in range(args.steps):
        tokens, weights = tensors(train_pairs, plan[step], args.prompt_loss_weight, args.device)
        losses, agree = distill.losses_and_agreement(model, tokens, weights, args.depth)
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
    after = evaluate(model, pairs, eval_idx, args.depth, args.device)
    print(f"held-out agreement after {after}", flush=True)
    identity = (f"{base['weights_identity']}+mtp-onpolicy:seed={args.seed},steps={args.steps},depth={args.depth},"
                f"replies={sha256_file(args.replies)[:16]}")
    sha = checkpoint_io.export(model.float().cpu(), args.out, identity)
    with open(args.prompts) as f:
        generator = json.load(f).get("generator")
    record = {"schema": SCHEMA, "preset": base["preset"], "seed": args.seed, "steps": args.steps,
              "data_generator": generator, "args": vars(args) | {"func": None},
              "prompts_sha256": sha256_file(args.prompts), "replies_sha256": sha256_file(args.replies),
              "replies": len(train_pairs), "heldout_replies": len(eval_idx),
              "parameters_trained": n_trained, "tokens": tokens_seen, "final": last,
              "heldout_agreement": {"before": before, "after": after},
              "train_wall_s": round(train_s, 2), "total_wall_s": round(time.time() - t_start, 2),
              "device": args.device, "threads": args.threads, "torch": torch.__version__,
              **({"gpu": torch.cuda.get_device_name(), "deterministic": "warn_only"} if args.device == "cuda" else {}),
              "derived_from": {"checkpoint": args.checkpoint, "shard_sha256": base["shard_sha256"],
                               "weights_identity": base["weights_identity"]},
              "weights_identity": identity, "shard_sha256": sha, "sources_sha256": sources_sha256(),
              "reproduce": "python3 tinyglm/train/finetune_mtp_onpolicy.py train " + " ".join(
                  f"--{k.replace('_', '-')} {v}" for k, v in vars(args).items() if k != "func")}
    with open(os.path.join(args.out, "training.json"), "w") as f:
        json.dump(record, f, indent=2)
        f.write("\n")
    print(f"done: {args.steps} steps in {train_s:.1f} s; wrote {args.out} (shard sha256 {sha})", flush=True)
    return 0


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    sub = ap.add_subparsers(dest="cmd", required=True)
    p = sub.add_parser("prompts", help="draw the prompt set (heldout.py's format)")
    p.add_argument("--out", required=True)
    p.add_argument("--count", type=int, default=3072)
    p.add_argument("--buckets", default=",".join(map(str, BUCKETS)), help="prompt lengths drawn in turn")
    p.set_defaults(func=cmd_prompts)
    t = sub.add_parser("train", help="train the MTP module on the engine's replies to the prompt set")
    t.add_argument("--checkpoint", required=True)
    t.add_argument("--prompts", required=True)
    t.add_argument("--replies", required=True, help="speculation_bench --outputs of a k = 0 cell")
    t.add_argument("--out", required=True)
    t.add_argument("--seed", type=int, default=1)
    t.add_argument("--steps", type=int, default=800)
    t.add_argument("--depth", type=int, default=3)
    t.add_argument("--pass-weights", default="1,1,1", help="loss weight of passes 1..depth")
    t.add_argument("--lr", type=float, default=5e-4)
    t.add_argument("--weight-decay", type=float, default=0.05)
    t.add_argument("--prompt-loss-weight", type=float, default=0.1)
    t.add_argument("--tokens-per-step", type=int, default=4096)
    t.add_argument("--threads", type=int, default=2)
    t.add_argument("--device", choices=("cpu", "cuda"), default="cpu")
    t.add_argument("--log-every", type=int, default=10)
    t.set_defaults(func=cmd_train)
    args = ap.parse_args()
    return args.func(args)


if __name__ == "__main__":
    sys.exit(main())
