"""MLA (NoPE) with the DSA indexer (MODEL.md section 4), absorbed form, in plain torch.

Mirrors reference_forward.mla_layer and indexer_selection. The per-token cache is what a serving engine
keeps: the latent c_kv [n, kv_lora] and the indexer key [n, index_head_dim] in the projection dtype,
the pooling gate [n] in FP32. Queries attend in the absorbed form (q~_h = W_kb,h^T q_h, scores against
the latents, values are the latents, then W_vb,h), both in prefill and in decode:
- a query that sees <= index_topk/index_kpool pools attends to every earlier token (dense);
- otherwise the top pools by indexer score plus the tail, gathered into a fixed width of
  index_topk + index_kpool - 1 slots with a validity mask.
"""
import torch

from peer_mhc import linear, rms_norm


def mla_project(x, W, p, c):
    """x [B, T, D] normed -> q_abs [B, T, H, kvr], c_kv [B, T, kvr], qI [B, T, nI, dI], w [B, T, nI],
    kI [B, T, dI], gate [B, T]."""
    B, T, _ = x.shape
    H, dn, kvr, eps = c["num_attention_heads"], c["qk_nope_head_dim"], c["kv_lora_rank"], c["rms_norm_eps"]
    c_q = rms_norm(linear(x, W[p + "q_a_proj.weight"]), W[p + "q_a_layernorm.weight"], eps)
    q = linear(c_q, W[p + "q_b_proj.weight"]).view(B, T, H, dn)
    w_kb = W[p + "kv_b_proj.weight"].view(H, -1, kvr)[:, :dn]                     # [H, dn, kvr]
    q_abs = torch.einsum("bthd,hdc->bthc", q.to(w_kb.dtype), w_kb)
    c_kv = rms_norm(linear(x, W[p + "kv_a_proj_with_mqa.weight"]), W[p + "kv_a_layernorm.weight"], eps)
    ix = p + "indexer."
    qI = linear(c_q, W[ix + "wq_b.weight"]).view(B, T, c["index_n_heads"], c["index_head_dim"])
    kI = torch.nn.functional.layer_norm(linear(x, W[ix + "wk.weight"]), (c["index_head_dim"],),
                                        W[ix + "k_norm.weight"], W[ix + "k_norm.bias"], 1e-6)
    w = linear(x, W[ix + "weights_proj.weight"])
    gate = linear(x, W[ix + "kpool_gate.weight"]).squeeze(-1)
    return q_abs, c_kv, qI, w, kI, gate


def pooled_keys(kI, gate, ape, n_pools):
    """K_p = sum over the pool's tokens of softmax(gate_j + ape_{j mod kpool}) k^I_j.
    kI [B, n, dI], gate [B, n] -> [B, n_pools, dI] FP32."""
    B, _, dI = kI.shape
    kp = ape.shape[0]
    a = torch.softmax(gate[:, :n_pools * kp].view(B, n_pools, kp) + ape, dim=-1)
    return torch.einsum("bpj,bpjd->bpd", a, kI[:, :n_pools * kp].view(B, n_pools, kp, dI).to(a.dtype))


def indexer_select(qI, w, Kp, n, c, dot_dtype):
    """Selected token slots for each query. qI [Q, nI, dI], w [Q, nI], Kp [Q or 1, P, dI] pooled keys,
    n [Q] visible tokens per query. Returns idx, valid [Q, slots] with slots = topk + kpool - 1."""
    nI, dI, kpool = c["index_n_heads"], c["index_head_dim"], c["index_kpool"]
    max_pools = c["index_topk"] // kpool
    Pmax = Kp.shape[1]
    # Dot products in the cache dtype (BF16 on the GPU), the head-weighted sum in the float dtype.
    qd, Kd = qI.to(dot_dtype), Kp.to(dot_dtype)
    if Kp.shape[0] == 1:                                                         # prefill: shared keys
        dots = (qd.reshape(-1, dI) @ Kd[0].t()).view(qI.shape[0], nI, Pmax)
    else:                                                                        # decode: per sequence
        dots = qd @ Kd.transpose(-1, -2)
    score = torch.einsum("qhp,qh->qp", torch.relu(dots).to(w.dtype), w) * (nI * dI) ** -0.5
    P = n // kpool                                                                # complete pools
    visible = torch.arange(Pmax, device=n.device)[None, :] < P[:, None]
    score = torch.where(visible & ~torch.isnan(score), score, float("-inf"))
    top = score.topk(min(max_pools, Pmax), dim=-1)                               # [Q, k]
    pool_ok = top.values > float("-inf")
    arange_k = torch.arange(kpool, device=n.device)
    idx = (top.indices[..., None] * kpool + arange_k).flatten(1)                 # [Q, k*kpool]
    valid = pool_ok[..., None].expand(-1, -1, kpool).flatten(1)
    tail = P[:, None] * kpool + arange_k[None, :kpool - 1]                       # tokens 4P .. t
    idx = torch.cat([idx, tail], dim=1)
    valid = torch.cat([valid, tail < n[:, None]], dim=1)
    return torch.where(valid, idx, 0), valid


def latent_attention(q_abs, lat, valid, scale):
    """q_abs [Q, H, kvr]; lat [Q, S, kvr] (or [S, kvr] shared); valid [Q, S] -> o_bar [Q, H, kvr]."""
    s = (q_abs @ lat.transpose(-1, -2)).to(torch.promote_types(lat.dtype, torch.float32)) * scale  # [Q, H, S]
    s = s.masked_fill(~valid[:, None, :], float("-inf"))
    return torch.softmax(s, dim=-1).to(lat.dtype) @ lat


def mla_output(o_bar, W, p, c, out_dtype):
    """o_h = W_vb,h o_bar_h; out = W_o concat_h(o_h). o_bar [Q, H, kvr] -> [Q, D]."""
    H, dn, kvr = c["num_attention_heads"], c["qk_nope_head_dim"], c["kv_lora_rank"]
    w_vb = W[p + "kv_b_proj.weight"].view(H, -1, kvr)[:, dn:]                     # [H, dv, kvr]
    o = torch.einsum("qhc,hvc->qhv", o_bar.to(w_vb.dtype), w_vb)
    return linear(o.reshape(o.shape[0], -1).to(out_dtype), W[p + "o_proj.weight"])


def dense_limit(c):
    """Largest n whose query sees at most topk/kpool complete pools (then every token is selected)."""
    return (c["index_topk"] // c["index_kpool"] + 1) * c["index_kpool"] - 1


def mla_prefill_attend(q_abs, qI, w, ckv, kI, gate, ape, start, c, block):
    """Queries at positions start .. start+T-1 of one sequence, whose cache rows [0, start+T) are filled.
    q_abs [T, H, kvr], qI [T, nI, dI], w [T, nI]; ckv [n, kvr], kI [n, dI], gate [n]. -> [T, H, kvr]."""
    T = q_abs.shape[0]
    end = start + T
    scale = (c["qk_nope_head_dim"] + c.get("qk_rope_head_dim", 0)) ** -0.5
    n_pools = end // c["index_kpool"]
    Kp = pooled_keys(kI[None, :end], gate[None, :end], ape, n_pools) if end > dense_limit(c) else None
    outs = []
    for s in range(0, T, block):
        e = min(s + block, T)
        n = torch.arange(start + s + 1, start + e + 1, device=q_abs.device)     # visible tokens per query
        if start + e <= dense_limit(c):
            lat = ckv[:start + e]
            valid = torch.arange(start + e, device=n.device)[None, :] < n[:, None]
        else:
            pools = (start + e) // c["index_kpool"]
            idx, valid = indexer_select(qI[s:e], w[s:e], Kp[:, :pools], n, c, kI.dtype)
            lat = ckv[idx]                                                       # [Q, slots, kvr]
        outs.append(latent_attention(q_abs[s:e], lat, valid, scale))
    return torch.cat(outs)


def mla_decode_attend(q_abs, qI, w, ckv, kI, gate, ape, n, c, sparse: bool):
    """One query per sequence. q_abs [B, H, kvr]; ckv [B, cap, kvr], kI [B, cap, dI], gate [B, cap]
    hold every sequence's cache; n [B] visible tokens (the new one included)."""
    scale = (c["qk_nope_head_dim"] + c.get("qk_rope_head_dim", 0)) ** -0.5
    cap = ckv.shape[1]
    if not sparse:  # every sequence sees <= topk/kpool pools: plain causal MLA over the cache
        valid = torch.arange(cap, device=n.device)[None, :] < n[:, None]
        return latent_attention(q_abs, ckv, valid, scale)
    Kp = pooled_keys(kI, gate, ape, cap // c["index_kpool"])                     # [B, cap/kpool, dI]
    idx, valid = indexer_select(qI, w, Kp, n, c, kI.dtype)
    lat = torch.gather(ckv, 1, idx[..., None].expand(-1, -1, ckv.shape[2]))
    return latent_attention(q_abs, lat, valid, scale)
