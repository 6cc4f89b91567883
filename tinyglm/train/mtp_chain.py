"""The MTP module chained as the engine drafts with it, differentiable, for training chained drafts.

The engine (engine/runtime/speculation/mtp_drafter.h) drafts k tokens per step: pass 1 runs the
module over the committed rows (row i: token t_{i+1} and the main model's h_i), writing the MTP
layer's latent and indexer key at every position; draft 1 is its last row's argmax. Pass d >= 2
runs one position further on, on draft d - 1 and the module's own previous output z (before
shared_head.norm), and writes its own entry at that position. So a pass-d query at position j
attends to pass-1 entries at positions <= j - d + 1 and, at j - o for o = 0 .. d - 2, the entry
pass d - o wrote there: the key at position s comes from pass max(1, d - (j - s)).

TrainableGlm._mtp (tinyglm/train/trainable_glm.py) trains pass 1 alone, which is why chained drafts
are rarely right (docs/speculative-decoding.md: acceptance 0.82-0.90, then 0.24-0.27). This module
computes passes 1..depth teacher-forced (pass d at position j reads t_{j+1}, as if every earlier draft
were right, which is the only case whose draft is ever verified) on one position grid: row j of every
pass is position j = 0 .. T-2; pass d's rows j < d - 1 have no input (zeros) and predict nothing.
Row j of pass d predicts t_{j+2}, like pass 1's.

The attention follows TrainableGlm._mla (sparse selection by the indexer with the lower pool first
on ties, the tail, the dense warm-up), with the entries of later passes put in at their positions:
scores and values on the band below the diagonal, and the pooled indexer keys of the (at most two)
complete pools that hold a later pass's token recomputed per query. The indexer is not trained here
(pass 1's KL in TrainableGlm is its loss). tests/python/test_mtp_chain.py checks pass 1 against
TrainableGlm._mtp and passes 2-3 against the engine's chained forward_mtp (`sparkglm logits
--mtp-chain-at`).

Not imported by train.py yet: the committed weights bind train.py and trainable_glm.py by sha256
(their training.json), so the training run that uses this module commits its train.py change with
the weights it trains.
"""
import os
import sys

import torch

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "..", "bench", "torch"))

import peer_mhc as mhc  # noqa: E402
import peer_mla as mla  # noqa: E402


def _no_autocast(t):
    return torch.autocast(device_type=t.device.type, enabled=False)


def _band(d, T, device):
    """[T, T] pass index (1-based) of the key at position s for a pass-d query at j (s <= j)."""
    j = torch.arange(T, device=device)[:, None]
    s = torch.arange(T, device=device)[None, :]
    return torch.clamp(d - (j - s), min=1)


def _indexer_scores(c, ape, qI, w, kI, gate, which, d, Pm):
    """[B, T, Pm] indexer scores of pass d's queries: pass 1's pooled keys, and for each query the
    (at most two) complete pools that hold a later pass's token pooled again from its tokens' passes.
    kI [d, B, T, dI], gate [d, B, T]; qI [B, T, nI, dI], w [B, T, nI] in the float dtype."""
    kp = c["index_kpool"]
    norm = (c["index_n_heads"] * c["index_head_dim"]) ** -0.5
    B, T = qI.shape[:2]
    Kp1 = mla.pooled_keys(kI[0], gate[0], ape, Pm)                               # [B, Pm, dI]
    iscore = torch.einsum("bthp,bth->btp", torch.relu(torch.einsum("bthd,bpd->bthp", qI, Kp1)), w) * norm
    if d == 1:
        return iscore
    j = torch.arange(T, device=qI.device)
    for r in range(2):
        q = j // kp - r                                                          # [T] a candidate pool
        # Complete for query j, and holding a position a later pass wrote (s >= j - d + 2).
        use = (q >= 0) & (q < Pm) & (q * kp + kp - 1 <= j) & (q * kp + kp - 1 >= j - d + 2)
        if not bool(use.any()):
            continue
        pos = (q.clamp(min=0)[:, None] * kp + torch.arange(kp, device=qI.device)).clamp(max=T - 1)
        src = (which[j[:, None], pos] - 1).clamp(0, d - 1)                       # [T, kp]
        kq = kI[src, :, pos].permute(2, 0, 1, 3)                                  # [B, T, kp, dI]
        gq = gate[src, :, pos].permute(2, 0, 1)                                   # [B, T, kp]
        a = torch.softmax(gq + ape, dim=-1)
        Kq = torch.einsum("btj,btjd->btd", a, kq)                                 # [B, T, dI]
        sq = torch.einsum("bth,bth->bt", torch.relu(torch.einsum("bthd,btd->bth", qI, Kq)), w) * norm
        idx = q.clamp(0, Pm - 1)[None, :, None].expand(B, T, 1)
        patched = iscore.scatter(-1, idx, sq[..., None])
        iscore = torch.where(use[None, :, None], patched, iscore)
    return iscore


def chained_attention(model, W, p, passes, d, sparse):
    """Pass d's MLA over the position grid. passes[k] = (q_abs, c_kv, qI, w, kI, gate) of pass
    k + 1 (mla.mla_project's outputs, [B, T, ...]); returns o_bar [B * T, H, kvr]."""
    c = model.c
    q_abs, _, qI, w, _, _ = passes[d - 1]
    B, T = q_abs.shape[:2]
    H, kvr, kp = c["num_attention_heads"], c["kv_lora_rank"], c["index_kpool"]
    fd = torch.float64 if q_abs.dtype == torch.float64 else torch.float32
    t = torch.arange(T, device=q_abs.device)
    causal = t[None, :] <= t[:, None]
    which = _band(d, T, q_abs.device)                                           # [T, T], 1-based
    # Latents and indexer keys each query sees: pass 1's, with the band of later passes put in.
    ckv = torch.stack([x[1].to(fd) for x in passes[:d]])                         # [d, B, T, kvr]
    kI = torch.stack([x[4].to(fd) for x in passes[:d]])                          # [d, B, T, dI]
    gate = torch.stack([x[5].to(fd) for x in passes[:d]])                        # [d, B, T]
    scale = (c["qk_nope_head_dim"] + c.get("qk_rope_head_dim", 0)) ** -0.5
    # scores[b, h, j, s] = q_abs[j] . ckv[which[j, s] - 1][s]: one einsum per pass, kept where it applies.
    scores = torch.zeros(B, H, T, T, dtype=fd, device=q_abs.device)
    for k in range(d):
        sk = torch.einsum("bthc,bsc->bhts", q_abs.to(fd), ckv[k]) * scale
        scores = torch.where((which == k + 1)[None, None], sk, scores)
    Pm = T // kp
    P = (t + 1) // kp
    visible = torch.arange(Pm, device=q_abs.device)[None, :] < P[:, None]       # [T, Pm]
    ape = W[p + "indexer.kpool_compress_ape"].to(fd)
    with torch.no_grad():
        if sparse:
            iscore = _indexer_scores(c, ape, qI.to(fd), w.to(fd), kI, gate, which, d, Pm)
            top = iscore.masked_fill(~visible, float("-inf")).sort(dim=-1, descending=True, stable=True)
            k_sel = min(c["index_topk"] // kp, Pm)
            chosen = torch.zeros_like(iscore, dtype=torch.bool).scatter(
                -1, top.indices[..., :k_sel], top.values[..., :k_sel] > float("-inf"))
            sel = chosen.repeat_interleave(kp, -1)
            sel = torch.cat([sel, sel.new_zeros(B, T, T - Pm * kp)], -1)
            tail = (t[None, :] >= (P * kp)[:, None]) & causal
            mask = (sel | tail) & causal
        else:
            mask = causal.expand(B, T, T)
    with _no_autocast(q_abs):
        probs = torch.softmax(scores.masked_fill(~mask[:, None], float("-inf")), -1)   # [B, H, T, T]
        o_bar = torch.zeros(B, H, T, kvr, dtype=fd, device=q_abs.device)
        for k in range(d):
            o_bar = o_bar + (probs * (which == k + 1)[None, None]) @ ckv[k][:, None]
    return o_bar.transpose(1, 2).reshape(B * T, H, kvr)


def _pass(model, W, tokens_next, hidden, passes, d, aux):
    """One pass of the module: row j reads tokens_next[:, j] and hidden[:, j]. Appends its MLA
    projections to `passes`; returns z [B, T, D] (before shared_head.norm)."""
    c, eps = model.c, model.c["rms_norm_eps"]
    p = f"model.layers.{c['num_hidden_layers']}."
    B, T, D = hidden.shape
    with _no_autocast(hidden):
        e = mhc.rms_norm(W["model.embed_tokens.weight"][tokens_next].to(hidden.dtype), W[p + "enorm.weight"], eps)
        hn = mhc.rms_norm(hidden, W[p + "hnorm.weight"], eps)
    z = mhc.linear(torch.cat([e, hn], -1), W[p + "eh_proj.weight"])
    with _no_autocast(hidden):
        x = mhc.rms_norm(z, W[p + "input_layernorm.weight"], eps)
    passes.append(mla.mla_project(x, W, p + "self_attn.", c))
    o_bar = chained_attention(model, W, p + "self_attn.", passes, d, model.sparse)
    z = z + mla.mla_output(o_bar.to(x.dtype), W, p + "self_attn.", c, x.dtype).view(B, T, D).to(z.dtype)
    with _no_autocast(hidden):
        x = mhc.rms_norm(z, W[p + "post_attention_layernorm.weight"], eps).reshape(-1, D)
    return z + model._moe(W, x, p + "mlp.", aux).view(B, T, D).to(z.dtype)


def mtp_chain(model, tokens, h, depth, aux=None):
    """tokens [B, T], h [B, T, D] (the main model's, before the final norm) -> logits of passes
    1..depth, each [B, T - 1, V]: row j of pass d predicts t_{j+2}; rows j < d - 1 mean nothing."""
    c, eps, W = model.c, model.c["rms_norm_eps"], model.W
    p = f"model.layers.{c['num_hidden_layers']}."
    aux = {} if aux is None else aux
    tokens_next = tokens[:, 1:]
    hidden = h[:, :-1]
    passes, out = [], []
    for d in range(1, depth + 1):
        z = _pass(model, W, tokens_next, hidden, passes, d, aux)
        with _no_autocast(h):
            zn = mhc.rms_norm(z, W[p + "shared_head.norm.weight"], eps)
        out.append(mhc.linear(zn, W["lm_head.weight"]))
        hidden = torch.cat([torch.zeros_like(z[:, :1]), z[:, :-1]], 1)      # row j reads z[j - 1]
    return out


def chain_loss(logits, tokens, weights, ce):
    """The loss of passes 2.. as train.py weighs pass 1's: pass d's rows j >= d - 1 that have a
    target (j <= T - 3) against t_{j+2}. ce(logits, targets, weights) is train.weighted_ce."""
    losses = []
    for d, lg in enumerate(logits[1:], start=2):
        losses.append(ce(lg[:, d - 1:-1], tokens[:, d + 1:], weights[:, d:-1]))
    return losses
