"""TrainableGlm's MLA over blocks of queries, each block recomputed in the backward pass.

TrainableGlm._mla (tinyglm/train/trainable_glm.py) holds the [B, H, T, T] attention scores, the
[B, T, T] dense attention mass and the [B, T, n_index_heads, T / 4] indexer dot products of a whole
row at once, and autograd keeps them for the backward pass: about 45 GB of activations at T = 8K on
the H200, so training stopped at 8K tokens while the quality probes ask for needles at 16K and 32K
(docs/trained-tinyglm.md, "Not done here"). Here the same function runs over blocks of `block`
queries under torch.utils.checkpoint: each block sees the keys up to its last query, and only its
inputs are kept, so a block's memory is [B, H, block, T] and the backward recomputes it.

The result is TrainableGlm._mla's: the same selection (the indexer's top min(index_topk /
index_kpool, P) complete pools, the lower pool first on ties, the tail, or every earlier token in the
dense warm-up) and the same indexer KL, summed over blocks and divided by the same count of
selecting rows. tests/python/test_blocked_mla.py checks outputs and gradients against TrainableGlm
in float64 (sparse and dense, block sizes that do and do not divide T).

BlockedGlm is TrainableGlm with this MLA (its MTP layer's too). Not used by train.py yet: the
committed weights bind train.py and trainable_glm.py by sha256 (their training.json), so the run
that trains at 16K-32K commits its train.py change with the weights it trains.
"""
import os
import sys

import torch
from torch.utils.checkpoint import checkpoint

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.join(HERE, "..", "..", "bench", "torch"))

import peer_mla as mla  # noqa: E402
from trainable_glm import TrainableGlm, _no_autocast  # noqa: E402


def _block(c, sparse, t0, q_abs, c_kv, qI, w, Kp):
    """Queries t0 .. t0 + len - 1 against keys 0 .. t0 + len - 1. q_abs [B, bq, H, kvr], c_kv
    [B, t1, kvr], qI [B, bq, nI, dI], w [B, bq, nI], Kp [B, t1 // kpool, dI], all in the float dtype.
    Returns o_bar [B, bq, H, kvr] and the block's indexer KL summed over its selecting rows."""
    B, bq = q_abs.shape[:2]
    t1 = c_kv.shape[1]
    kp = c["index_kpool"]
    Pm = Kp.shape[1]
    t = torch.arange(t0, t0 + bq, device=q_abs.device)
    s = torch.arange(t1, device=q_abs.device)
    P = (t + 1) // kp
    visible = torch.arange(Pm, device=q_abs.device)[None, :] < P[:, None]       # [bq, Pm]
    causal = s[None, :] <= t[:, None]                                            # [bq, t1]
    with _no_autocast(q_abs):
        scale = (c["qk_nope_head_dim"] + c.get("qk_rope_head_dim", 0)) ** -0.5
        scores = torch.einsum("bthc,bsc->bhts", q_abs, c_kv) * scale            # [B, H, bq, t1]
        dots = torch.einsum("bthd,bpd->bthp", qI, Kp)                            # [B, bq, nI, Pm]
        iscore = torch.einsum("bthp,bth->btp", torch.relu(dots), w) * (
            c["index_n_heads"] * c["index_head_dim"]) ** -0.5                    # [B, bq, Pm]
        with torch.no_grad():
            dense = torch.softmax(scores.masked_fill(~causal, float("-inf")), -1).mean(1)   # [B, bq, t1]
            if sparse:
                # Stable descending sort: equal scores keep the lower pool (pools past the block's
                # keys are invisible to it, as they are -inf in TrainableGlm's sort).
                top = iscore.masked_fill(~visible, float("-inf")).sort(dim=-1, descending=True, stable=True)
                k = min(c["index_topk"] // kp, Pm)
                chosen = torch.zeros_like(iscore, dtype=torch.bool).scatter(
                    -1, top.indices[..., :k], top.values[..., :k] > float("-inf"))
                sel = chosen.repeat_interleave(kp, -1)                           # [B, bq, Pm*kp]
                sel = torch.cat([sel, sel.new_zeros(B, bq, t1 - Pm * kp)], -1)
                tail = (s[None, :] >= (P * kp)[:, None]) & causal
                mask = (sel | tail) & causal
            else:
                mask = causal.expand(B, bq, t1)
        probs = torch.softmax(scores.masked_fill(~mask[:, None], float("-inf")), -1)
        o_bar = (probs @ c_kv[:, None]).transpose(1, 2)                          # [B, bq, H, kvr]
        with torch.no_grad():
            mass = dense[..., :Pm * kp].reshape(B, bq, Pm, kp).sum(-1).masked_fill(~visible, 0)
            target = mass / mass.sum(-1, keepdim=True).clamp(min=1e-30)
        logq = torch.log_softmax(iscore.masked_fill(~visible, -1e30), -1)
        kl = torch.where(visible, target * (torch.log(target.clamp(min=1e-30)) - logq), 0).sum(-1)
        rows = (P > c["index_topk"] // kp).to(kl.dtype)
        return o_bar, (kl * rows).sum()


def blocked_mla(model, W, x, p, aux, block):
    """TrainableGlm._mla(W, x, p, aux) in blocks of `block` queries: x [B, T, D] normed -> [B, T, D]."""
    c = model.c
    B, T, _ = x.shape
    H, kvr, kp = c["num_attention_heads"], c["kv_lora_rank"], c["index_kpool"]
    q_abs, c_kv, _, _, _, _ = mla.mla_project(x, W, p, c)
    # The indexer sees detached inputs: its loss trains only its own weights.
    Wd = {k: (v.detach() if k.startswith(p) and ".indexer." not in k else v) for k, v in W.items()}
    _, _, qI, w, kI, gate = mla.mla_project(x.detach(), Wd, p, c)
    fd = torch.float64 if x.dtype == torch.float64 else torch.float32
    Pm = T // kp
    with _no_autocast(x):
        Kp = mla.pooled_keys(kI.to(fd), gate.to(fd), W[p + "indexer.kpool_compress_ape"].to(fd), Pm)
        q_abs, c_kv, qI, w = q_abs.to(fd), c_kv.to(fd), qI.to(fd), w.to(fd)
    outs, kl = [], 0
    for t0 in range(0, T, block):
        t1 = min(T, t0 + block)
        o, k = checkpoint(_block, c, model.sparse, t0, q_abs[:, t0:t1], c_kv[:, :t1], qI[:, t0:t1],
                          w[:, t0:t1], Kp[:, :t1 // kp], use_reentrant=False)
        outs.append(o)
        kl = kl + k
    selecting = int(((torch.arange(T) + 1) // kp > c["index_topk"] // kp).sum())
    if selecting > 0:
        aux["indexer_kl"] = aux.get("indexer_kl", 0) + kl / (B * selecting)
    o_bar = torch.cat(outs, 1).reshape(B * T, H, kvr)
    return mla.mla_output(o_bar.to(x.dtype), W, p, c, x.dtype).view(B, T, -1)


class BlockedGlm(TrainableGlm):
    """TrainableGlm whose MLA layers (the MTP layer's too) run in query blocks of `query_block`."""

    def __init__(self, c, seed=0, dtype=torch.float32, query_block=1024):
        super().__init__(c, seed, dtype)
        self.query_block = query_block

    def _mla(self, W, x, p, aux):
        return blocked_mla(self, W, x, p, aux, self.query_block)
