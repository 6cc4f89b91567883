"""The optimiser, step loop and checkpoint loading that extend_context.py and train_wide.py share.

They are train.py's, which cannot call this module: the committed micro's training.json binds
train.py by sha256, so its loop stays where it is. What is the same:
- the loss: next token, plus --mtp-weight x MTP at t + 2, plus --indexer-weight x the indexer's KL;
- the schedule: train.lr_at (50 warm-up steps, cosine to 10 %);
- gradient clipping at 1.0, AdamW (0.9, 0.95) with decay on projections only, expert balancing;
- with no step count given, the count is fixed from the time of steps [5, 25) so that training ends
  within the time budget, stopping at 1.15 x the budget in any case.

One loss train.py lacks, off unless asked for (Losses.chain_depth > 1): the MTP module chained as
the engine drafts with it (mtp_chain.py, passes 2..depth, teacher-forced), over the first
chain_len tokens of up to chain_tokens // chain_len rows and on the main model's detached hidden
states, so it trains the MTP module only.
finetune_mtp_chain.py adds the same passes to a trained checkpoint; here they train from the start.
"""
import json
import os
import time
from dataclasses import dataclass
from types import SimpleNamespace

import torch

import blocked_mla  # noqa: E402
import checkpoint_io  # noqa: E402
import mtp_chain  # noqa: E402
import train  # noqa: E402  (lr_at, weighted_ce, CALIBRATE)


def load_base(directory, query_block):
    """A checkpoint one of the training scripts wrote, to train on: (its weights as a float32
    BlockedGlm, its config, its training.json). Refuses a folder without training.json by name."""
    path = os.path.join(directory, "training.json")
    if not os.path.isfile(path):
        raise SystemExit(f"{directory}: no training.json (expected a training script's output)")
    with open(path) as f:
        record = json.load(f)
    loaded = checkpoint_io.load(directory, torch.float32)
    model = blocked_mla.BlockedGlm(loaded.c, query_block=query_block)
    model.load_state_dict(loaded.state_dict())
    return model, loaded.c, record


@dataclass
class Losses:
    mtp_weight: float = 0.3
    indexer_weight: float = 0.5
    balance_rate: float = 1e-3
    chain_depth: int = 1  # MTP passes trained chained; 1: pass 1 only, as train.py
    chain_weight: float = 0.3  # of each pass 2 .. chain_depth
    chain_len: int = 512  # the chained passes run over each row's first chain_len tokens
    chain_tokens: int = 8192  # ... of the first chain_tokens // chain_len rows (at least one)


def add_flags(ap, lr):
    """train.py's optimiser and loss flags, with their defaults but this script's learning rate."""
    ap.add_argument("--lr", type=float, default=lr)
    ap.add_argument("--weight-decay", type=float, default=0.05)
    ap.add_argument("--prompt-loss-weight", type=float, default=0.1)
    ap.add_argument("--mtp-weight", type=float, default=0.3)
    ap.add_argument("--indexer-weight", type=float, default=0.5)
    ap.add_argument("--balance-rate", type=float, default=1e-3)


def optimizer(model, lr, weight_decay):
    """train.py's AdamW: decay on projections only (not the mHC tensors, not the router's gate)."""
    decays = lambda n, p: p.dim() >= 2 and "hc_" not in n and "gate__weight" not in n
    groups = [{"params": [p for n, p in model.named_parameters() if decays(n, p)], "weight_decay": weight_decay},
              {"params": [p for n, p in model.named_parameters() if not decays(n, p)], "weight_decay": 0.0}]
    return torch.optim.AdamW(groups, lr=lr, betas=(0.9, 0.95), eps=1e-8)


def batches(seed, prompt_loss_weight, max_len, tokens_per_step, workers=0):
    """curriculum.batch(seed, step, ...) for step = 0, 1, 2, ... as (tokens, weights) tensors, as train.py
    draws them (its Batches), prepared ahead by `workers` processes."""
    data = train.Batches(SimpleNamespace(seed=seed, prompt_loss_weight=prompt_loss_weight, max_len=max_len,
                                         tokens_per_step=tokens_per_step))
    return torch.utils.data.DataLoader(data, batch_size=None, shuffle=False, num_workers=workers,
                                       prefetch_factor=2 if workers else None, persistent_workers=bool(workers))


def chained_passes(model, tokens, weights, h, losses):
    """The summed loss of MTP passes 2 .. chain_depth over the first chain_len tokens of the first
    chain_tokens // chain_len rows (0 when chain_depth is 1): mtp_chain holds [rows, heads, n, n]
    scores per pass, so its rows are capped. The main model's states are detached: this loss moves
    the MTP module only."""
    if losses.chain_depth < 2:
        return torch.zeros((), device=tokens.device)
    n = min(losses.chain_len, tokens.shape[1])
    b = max(1, losses.chain_tokens // n)
    logits = mtp_chain.mtp_chain(model, tokens[:b, :n], h[:b, :n].detach(), losses.chain_depth, aux={})
    return sum(mtp_chain.chain_loss(logits, tokens[:b, :n], weights[:b, :n], train.weighted_ce))


@dataclass
class Result:
    steps: int
    planned: int
    tokens: int
    train_s: float
    final: dict


def run(model, opt, batches, device, lr, losses, log, *, steps=None, time_budget_s=None, dense_frac=0.0,
        log_every=10):
    """Trains `model` on `batches` (an iterable of (tokens, weights) tensors, one per step).

    steps None: fixed at step 25 from the time of steps [5, 25) to end within time_budget_s. With
    dense_frac > 0 the MLA attends densely before step max(25, int(dense_frac x steps)), as in train.py
    (so a run with --steps auto and its rerun with the count it recorded agree); with 0, never.
    One JSON line per log_every steps goes to `log` and stdout."""
    cuda = device.startswith("cuda")
    sync = torch.cuda.synchronize if cuda else (lambda: None)
    total, t_cal, tokens_seen, step, last = steps, None, 0, 0, {}
    window = {"loss": 0.0, "main": 0.0, "mtp": 0.0, "kl": 0.0, "chain": 0.0, "n": 0}
    t_train = time.time()
    for tokens, weights in batches:
        if total is not None and step >= total:
            break
        if total is None and time.time() - t_train > 1.15 * time_budget_s:
            print(f"hard stop at step {step}: past 1.15 x the time budget", flush=True)
            break
        if step == train.CALIBRATE[0]:
            sync()
            t_cal = time.time()
        if step == train.CALIBRATE[1] and total is None:
            sync()
            per_step = (time.time() - t_cal) / (train.CALIBRATE[1] - train.CALIBRATE[0])
            left = time_budget_s - (time.time() - t_train)
            total = max(train.CALIBRATE[1] + 1, int(0.92 * left / per_step) + step)  # 8 % margin: buckets vary
            print(f"calibrated: {per_step * 1e3:.1f} ms/step -> --steps {total}", flush=True)
        tokens, weights = tokens.to(device, non_blocking=True), weights.to(device, non_blocking=True)
        model.sparse = dense_frac == 0 or (total is not None and
                                           step >= max(train.CALIBRATE[1], int(dense_frac * total)))
        for g in opt.param_groups:
            g["lr"] = train.lr_at(step, total if total is not None else 10 ** 9, lr)
        with torch.autocast(device_type="cuda", dtype=torch.bfloat16, enabled=cuda):
            logits, h, mtp, aux = model(tokens)
            chain = chained_passes(model, tokens, weights, h, losses)
        main = train.weighted_ce(logits[:, :-1], tokens[:, 1:], weights[:, :-1])
        mtp_loss = train.weighted_ce(mtp[:, :-1], tokens[:, 2:], weights[:, 1:-1])
        kl = aux.get("indexer_kl", torch.zeros((), device=tokens.device))
        loss = (main + losses.mtp_weight * mtp_loss + losses.indexer_weight * kl +
                losses.chain_weight * chain)
        opt.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        model.balance_experts(aux, losses.balance_rate)
        tokens_seen += tokens.numel()
        step += 1
        for k, v in (("loss", loss), ("main", main), ("mtp", mtp_loss), ("kl", kl), ("chain", chain)):
            window[k] += v.detach()  # summed on the device: no host sync per step
        window["n"] += 1
        if step % log_every == 0 or step == total:
            elapsed = time.time() - t_train
            last = {k: round(float(window[k]) / window["n"], 5) for k in window if k != "n"}
            rec = {"step": step, **last, "lr": opt.param_groups[0]["lr"], "sparse": model.sparse,
                   "T": tokens.shape[1], "tokens": tokens_seen, "elapsed_s": round(elapsed, 2),
                   "tok_per_s": round(tokens_seen / elapsed)}
            if cuda:
                rec["max_mem_gb"] = round(torch.cuda.max_memory_allocated() / 2 ** 30, 1)
            log.write(json.dumps(rec) + "\n")
            log.flush()
            print(json.dumps(rec), flush=True)
            window = {k: 0.0 for k in window} | {"n": 0}
    return Result(steps=step, planned=total, tokens=tokens_seen, train_s=round(time.time() - t_train, 2), final=last)
