"""tinyGLM as a trainable torch module: MODEL.md sections 2-6 over a batch of whole sequences.

The arithmetic is the PyTorch peer's (bench/torch/peer_*.py: mHC, KDA projections and the chunked WY
form, MLA projections in the absorbed form, pooled indexer keys, SwiGLU); this file batches it over
[B, T] rows and keeps it differentiable:
- KDA: peer_kda.kda_chunk_prepare over all rows' chunks at once, then the chunk scan with the state
  S [B, H, K, V] carried per row (FP32, autocast off).
- MLA: scores against every latent [B, H, T, T]; a query attends to the tokens the indexer selects
  (top min(index_topk / index_kpool, P) complete pools by score, plus the tail), exactly the engine's
  rule, or to every earlier token during the dense warm-up. The indexer is trained by its own loss only:
  KL(main attention mass per complete pool, averaged over heads and detached || softmax of the pool
  scores), on inputs detached from the main model (the lightning-indexer recipe).
- MoE: every expert on every token weighted by the routing weights (static shapes); the router in
  FP32; e_score_correction_bias is a buffer moved by the aux-loss-free balance rule, not by gradients.
- MTP (layer num_hidden_layers): eh_proj([enorm(embed(t_{i+1})); hnorm(h_i)]) -> MLA + MoE with a plain
  residual -> shared_head.norm -> lm_head, trained on token t_{i+2}.
Residual streams, mHC, norms, router, softmax and KDA run in FP32; projections follow autocast (BF16
on CUDA). In float64 on the CPU the forward is the engine's function (tests/python/test_trained_tinyglm).
"""
import copy
import os
import sys

import torch
import torch.nn.functional as F

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "..", "bench", "torch"))

import peer_kda as kda  # noqa: E402
import peer_mhc as mhc  # noqa: E402
import peer_mla as mla  # noqa: E402
from peer_config import KDA_KIND, MLA_KIND, tensor_specs  # noqa: E402


def mtp_specs(c):
    """tensor_layout.cpp's MTP block: enorm, hnorm, eh_proj, shared_head.norm, the norms, MLA and a MoE
    MLP (no mHC), as (name, shape, is_projection, center, half_width)."""
    L, D = c["num_hidden_layers"], c["hidden_size"]
    c2 = copy.deepcopy(c)
    c2["num_hidden_layers"] = L + 1
    c2["layer_types"] = list(c["layer_types"]) + [MLA_KIND]
    p = f"model.layers.{L}."
    block = [s for s in tensor_specs(c2) if s[0].startswith(p) and ".hc_" not in s[0]]
    extra = [(p + "enorm.weight", (D,), False, 1.0, 0.0), (p + "hnorm.weight", (D,), False, 1.0, 0.0),
             (p + "eh_proj.weight", (D, 2 * D), True, 0.0, (3.0 / (2 * D)) ** 0.5),
             (p + "shared_head.norm.weight", (D,), False, 1.0, 0.0)]
    return extra + block


def all_specs(c):
    return tensor_specs(c) + mtp_specs(c)


def _no_autocast(t):
    return torch.autocast(device_type=t.device.type, enabled=False)


def kda_rows(q, k, v, g, beta):
    """Chunked KDA over B independent rows from a zero state. q, k, v, g [B, T, H, K]; beta [B, T, H].
    Returns o [B, T, H, V]. Padding to a chunk multiple uses g = 0, beta = 0 (state unchanged)."""
    B, T, H, K = q.shape
    pad = (-T) % kda.CHUNK
    if pad:
        z = lambda t: torch.cat([t, t.new_zeros((B, pad) + t.shape[2:])], dim=1)
        q, k, v, g, beta = z(q), z(k), z(v), z(g), z(beta)
    Tp = T + pad
    N = Tp // kda.CHUNK
    flat = lambda t: t.reshape((B * Tp,) + t.shape[2:])
    parts = kda.kda_chunk_prepare(flat(q), flat(k), flat(v), flat(g), flat(beta))
    U, Wm, Qbar, Pqk, Kdec, gL = (t.reshape((B, N) + t.shape[1:]) for t in parts)   # [B, N, H, L, *]
    S = q.new_zeros(B, H, K, v.shape[-1])
    outs = []
    for n in range(N):
        delta = U[:, n] - Wm[:, n] @ S                                          # [B, H, L, V]
        outs.append(Qbar[:, n] @ S + Pqk[:, n] @ delta)
        S = gL[:, n][..., None] * S + Kdec[:, n].transpose(-1, -2) @ delta
    O = torch.stack(outs, 1)                                                     # [B, N, H, L, V]
    return O.permute(0, 1, 3, 2, 4).reshape(B, Tp, H, -1)[:, :T]


class TrainableGlm(torch.nn.Module):
    def __init__(self, c, seed=0, dtype=torch.float32):
        super().__init__()
        self.c = c
        self.specs = all_specs(c)
        g = torch.Generator().manual_seed(seed)
        for name, shape, _, ctr, hw in self.specs:
            t = (torch.rand(shape, generator=g, dtype=torch.float64) * 2 - 1) * hw + ctr
            if name.endswith("e_score_correction_bias"):   # balanced by load, not by gradient
                self.register_buffer(self._key(name), torch.zeros(shape, dtype=dtype))
            else:
                self.register_parameter(self._key(name), torch.nn.Parameter(t.to(dtype)))
        self.sparse = True       # False: dense causal MLA (the warm-up), the indexer still trained

    @staticmethod
    def _key(name):
        return name.replace(".", "__")

    @property
    def W(self):
        """name -> tensor for every checkpoint tensor (routed experts stacked [E, out, in])."""
        out = {n.replace("__", "."): t for n, t in self.named_parameters()}
        out.update({n.replace("__", "."): t for n, t in self.named_buffers()})
        return out

    # ---- blocks ---------------------------------------------------------------------------------
    def _site(self, W, X, p, site, block):
        """One mHC site over N = B*T rows: X [N, hc, D] FP32."""
        c = self.c
        with _no_autocast(X):
            pre, post, comb = mhc.hc_coefficients(X, W[p + f"hc_{site}_fn"], W[p + f"hc_{site}_base"],
                                                  W[p + f"hc_{site}_scale"], c["rms_norm_eps"], c["hc_eps"],
                                                  c["hc_sinkhorn_iters"])
            norm = "input_layernorm.weight" if site == "attn" else "post_attention_layernorm.weight"
            x = mhc.rms_norm(mhc.hc_reduce(X, pre), W[p + norm], c["rms_norm_eps"])
        b = block(x).to(X.dtype)
        with _no_autocast(X):
            return mhc.hc_combine(X, b, post, comb)

    def _kda(self, W, x, p):
        """x [B, T, D] normed -> [B, T, D]."""
        la, B = self.c["linear_attn_config"], x.shape[0]
        H, K, taps = la["num_heads"], la["head_dim"], la["short_conv_kernel_size"]
        Wl = dict(W)  # the peer reads q/k/v fused (its layout choice)
        Wl[p + "qkv_proj.weight"] = torch.cat([W[p + f"{n}_proj.weight"] for n in "qkv"])
        Wl[p + "qkv_conv1d.weight"] = torch.cat([W[p + f"{n}_conv1d.weight"] for n in "qkv"])
        hist = x.new_zeros(B, taps - 1, 3 * H * K)
        q, k, v, g, beta, gate, _ = kda.kda_project(x, Wl, p, la, hist)
        with _no_autocast(x):
            o = kda_rows(*(t.float() if x.dtype != torch.float64 else t for t in (q, k, v, g, beta)))
        return kda.kda_output(o.to(x.dtype), gate.to(x.dtype), W, p, self.c["rms_norm_eps"])

    def _mla(self, W, x, p, aux):
        """x [B, T, D] normed -> [B, T, D]; adds the indexer's KL to aux["indexer_kl"]."""
        c = self.c
        B, T, _ = x.shape
        H, kvr, kp = c["num_attention_heads"], c["kv_lora_rank"], c["index_kpool"]
        q_abs, c_kv, _, _, _, _ = mla.mla_project(x, W, p, c)
        # The indexer sees detached inputs: its loss trains only its own weights.
        Wd = {k: (v.detach() if k.startswith(p) and ".indexer." not in k else v) for k, v in W.items()}
        _, _, qI, w, kI, gate = mla.mla_project(x.detach(), Wd, p, c)
        fd = torch.float64 if x.dtype == torch.float64 else torch.float32
        Pm = T // kp
        t = torch.arange(T, device=x.device)
        P = (t + 1) // kp                                                        # complete pools per query
        visible = torch.arange(Pm, device=x.device)[None, :] < P[:, None]        # [T, Pm]
        causal = t[None, :] <= t[:, None]                                        # [T, T]
        with _no_autocast(x):
            scale = (c["qk_nope_head_dim"] + c.get("qk_rope_head_dim", 0)) ** -0.5
            scores = torch.einsum("bthc,bsc->bhts", q_abs.to(fd), c_kv.to(fd)) * scale    # [B, H, T, T]
            Kp = mla.pooled_keys(kI.to(fd), gate.to(fd), W[p + "indexer.kpool_compress_ape"].to(fd), Pm)
            dots = torch.einsum("bthd,bpd->bthp", qI.to(fd), Kp)                 # [B, T, nI, Pm]
            iscore = torch.einsum("bthp,bth->btp", torch.relu(dots), w.to(fd)) * (
                c["index_n_heads"] * c["index_head_dim"]) ** -0.5               # [B, T, Pm]
            with torch.no_grad():
                dense = torch.softmax(scores.masked_fill(~causal, float("-inf")), -1).mean(1)  # [B, T, T]
                if self.sparse:
                    # Stable descending sort: equal scores (ReLU zeros are common) keep the lower pool.
                    top = iscore.masked_fill(~visible, float("-inf")).sort(dim=-1, descending=True, stable=True)
                    k = min(c["index_topk"] // kp, Pm)
                    chosen = torch.zeros_like(iscore, dtype=torch.bool).scatter(
                        -1, top.indices[..., :k], top.values[..., :k] > float("-inf"))
                    sel = chosen.repeat_interleave(kp, -1)                       # [B, T, Pm*kp]
                    sel = torch.cat([sel, sel.new_zeros(B, T, T - Pm * kp)], -1)
                    tail = (t[None, :] >= (P * kp)[:, None]) & causal
                    mask = (sel | tail) & causal
                else:
                    mask = causal.expand(B, T, T)
            probs = torch.softmax(scores.masked_fill(~mask[:, None], float("-inf")), -1)
            o_bar = (probs @ c_kv.to(fd)[:, None]).transpose(1, 2).reshape(B * T, H, kvr)
            # KL(target || indexer) over the complete pools of queries that select (P > topk / kpool).
            with torch.no_grad():
                mass = dense[..., :Pm * kp].reshape(B, T, Pm, kp).sum(-1).masked_fill(~visible, 0)
                target = mass / mass.sum(-1, keepdim=True).clamp(min=1e-30)
            logq = torch.log_softmax(iscore.masked_fill(~visible, -1e30), -1)  # finite: rows with P = 0
            kl = torch.where(visible, target * (torch.log(target.clamp(min=1e-30)) - logq), 0).sum(-1)
            rows = (P > c["index_topk"] // kp).to(fd)
            if rows.sum() > 0:
                aux["indexer_kl"] = aux.get("indexer_kl", 0) + (kl * rows).sum() / (B * rows.sum())
        return mla.mla_output(o_bar.to(x.dtype), W, p, c, x.dtype).view(B, T, -1)

    def _moe(self, W, x, m, aux):
        """x [N, D] normed -> [N, D]; records each expert's token count in aux["expert_load"][m]."""
        c = self.c
        limit, E = c.get("swiglu_limit"), c["n_routed_experts"]
        with _no_autocast(x):
            s = torch.sigmoid(x @ W[m + "gate.weight"].to(x.dtype).t())          # [N, E] FP32
            chosen = (s + W[m + "gate.e_score_correction_bias"]).topk(c["num_experts_per_tok"], -1).indices
            wts = s.gather(1, chosen)
            wts = wts / wts.sum(-1, keepdim=True) * c["routed_scaling_factor"]
            comb = torch.zeros_like(s).scatter(1, chosen, wts)                  # [N, E]
        aux.setdefault("expert_load", {})[m] = torch.bincount(chosen.flatten(), minlength=E).detach()
        wg, wu, wd = W[m + "experts.gate_proj"], W[m + "experts.up_proj"], W[m + "experts.down_proj"]
        g = torch.einsum("nd,efd->enf", x, wg).to(x.dtype).clamp(max=limit)     # [E, N, F]
        u = torch.einsum("nd,efd->enf", x, wu).to(x.dtype).clamp(-limit, limit)
        y = torch.einsum("enf,edf->end", F.silu(g) * u, wd).to(x.dtype)         # [E, N, D]
        shared = [W[m + f"shared_experts.{n}_proj.weight"] for n in ("gate", "up", "down")]
        return self._swiglu(x, *shared, limit) + torch.einsum("end,ne->nd", y, comb.to(x.dtype))

    @staticmethod
    def _swiglu(x, wg, wu, wd, limit):
        g, u = mhc.linear(x, wg), mhc.linear(x, wu)
        if limit is not None:
            g, u = g.clamp(max=limit), u.clamp(-limit, limit)
        return mhc.linear(F.silu(g) * u, wd)

    def _ffn(self, W, x, i, aux):
        m = f"model.layers.{i}.mlp."
        if i < self.c["first_k_dense_replace"]:
            return self._swiglu(x, W[m + "gate_proj.weight"], W[m + "up_proj.weight"], W[m + "down_proj.weight"], None)
        return self._moe(W, x, m, aux)

    # ---- the model ------------------------------------------------------------------------------
    def forward(self, tokens, with_mtp=True):
        """tokens [B, T] -> logits [B, T, V], h [B, T, D] (head-reduced, before the final norm),
        mtp_logits [B, T-1, V] (row i predicts token i+2) or None, aux (indexer_kl, expert_load)."""
        c, W = self.c, self.W
        B, T = tokens.shape
        D, hc, eps = c["hidden_size"], c["hc_mult"], c["rms_norm_eps"]
        fd = W["model.norm.weight"].dtype
        emb = W["model.embed_tokens.weight"]
        X = emb[tokens.reshape(-1)].to(fd)[:, None, :].expand(-1, hc, -1).contiguous()   # [N, hc, D]
        aux = {}
        for i, kind in enumerate(c["layer_types"]):
            p = f"model.layers.{i}."
            if kind == KDA_KIND:
                block = lambda x: self._kda(W, x.view(B, T, D), p + "self_attn.").reshape(B * T, D)
            else:
                block = lambda x: self._mla(W, x.view(B, T, D), p + "self_attn.", aux).reshape(B * T, D)
            X = self._site(W, X, p, "attn", block)
            X = self._site(W, X, p, "ffn", lambda x: self._ffn(W, x, i, aux))
        with _no_autocast(X):
            h = mhc.hc_head(X, W["model.hc_head_fn"], W["model.hc_head_base"], W["model.hc_head_scale"], eps,
                            c["hc_eps"])                                         # [N, D]
            hn = mhc.rms_norm(h, W["model.norm.weight"], eps)
        logits = mhc.linear(hn, W["lm_head.weight"]).view(B, T, -1)
        h = h.view(B, T, D)
        mtp = self._mtp(W, tokens, h, aux) if with_mtp and T > 1 else None
        return logits, h, mtp, aux

    def _mtp(self, W, tokens, h, aux):
        c, eps = self.c, self.c["rms_norm_eps"]
        p = f"model.layers.{c['num_hidden_layers']}."
        B, T, D = h.shape
        with _no_autocast(h):
            e = mhc.rms_norm(W["model.embed_tokens.weight"][tokens[:, 1:]].to(h.dtype), W[p + "enorm.weight"], eps)
            hn = mhc.rms_norm(h[:, :-1], W[p + "hnorm.weight"], eps)
        z = mhc.linear(torch.cat([e, hn], -1), W[p + "eh_proj.weight"])         # [B, T-1, D]
        with _no_autocast(h):
            x = mhc.rms_norm(z, W[p + "input_layernorm.weight"], eps)
        z = z + self._mla(W, x, p + "self_attn.", aux).to(z.dtype)
        with _no_autocast(h):
            x = mhc.rms_norm(z, W[p + "post_attention_layernorm.weight"], eps).reshape(-1, D)
        z = z + self._moe(W, x, p + "mlp.", aux).view(B, T - 1, D).to(z.dtype)
        with _no_autocast(h):
            zn = mhc.rms_norm(z, W[p + "shared_head.norm.weight"], eps)
        return mhc.linear(zn, W["lm_head.weight"])                               # [B, T-1, V]

    @torch.no_grad()
    def balance_experts(self, aux, rate):
        """Aux-loss-free balancing: raise the bias of under-loaded experts, lower the over-loaded."""
        for m, load in aux.get("expert_load", {}).items():
            b = getattr(self, self._key(m + "gate.e_score_correction_bias"))
            load = load.to(b.dtype)
            b.add_(rate * torch.sign(load.mean() - load))
