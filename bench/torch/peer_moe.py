"""MoE and dense MLP (MODEL.md section 5). Mirrors reference_forward.moe_route/moe_layer/dense_mlp.

The router runs in the float dtype (FP32). Two ways to apply the experts, the same function:
- `moe_loop`, what HF eager code does: loop over the experts that got tokens (a host sync to learn
  which), gather their tokens, run the SwiGLU, scatter-add. Used by eager decode and by prefill.
- `moe_dense`: every expert on every token, weighted by the (mostly zero) routing weights. Static
  shapes without host syncs, so torch.compile can capture the decode step in a CUDA graph; it reads
  every expert's weights, which at C >= 4 tokens of top-8 over 16 experts nearly all are anyway.
"""
import torch

from peer_mhc import linear


def swiglu(x, w_gate, w_up, w_down, limit):
    """W_down(SiLU(min(W_gate x, limit)) * clamp(W_up x, -limit, limit)); no clamp when limit is None."""
    g, u = linear(x, w_gate), linear(x, w_up)
    if limit is not None:
        g, u = g.clamp(max=limit), u.clamp(-limit, limit)
    return linear(torch.nn.functional.silu(g) * u, w_down)


def moe_route(x, w_router, bias, k: int, scaling: float):
    """x [N, D] -> chosen [N, k] expert ids, weights [N, k] (normalized, times routed_scaling_factor)."""
    s = torch.sigmoid(x @ w_router.t())
    chosen = (s + bias).topk(k, dim=-1).indices
    w = s.gather(1, chosen)
    return chosen, w / w.sum(-1, keepdim=True) * scaling


def _shared(x, W, m, limit):
    if m + "shared_experts.gate_proj.weight" not in W:
        return torch.zeros_like(x)
    return swiglu(x, W[m + "shared_experts.gate_proj.weight"], W[m + "shared_experts.up_proj.weight"],
                  W[m + "shared_experts.down_proj.weight"], limit)


def moe_loop(x, W, m, c, route=moe_route, expert=swiglu):
    """x [N, D] normed by post_attention_layernorm."""
    limit = c.get("swiglu_limit")
    chosen, weights = route(x, W[m + "gate.weight"], W[m + "gate.e_score_correction_bias"],
                            c["num_experts_per_tok"], c["routed_scaling_factor"])
    out = _shared(x, W, m, limit)
    wg, wu, wd = W[m + "experts.gate_proj"], W[m + "experts.up_proj"], W[m + "experts.down_proj"]
    hit = torch.bincount(chosen.flatten(), minlength=wg.shape[0]).nonzero().flatten().tolist()
    for e in hit:
        tok, slot = torch.where(chosen == e)
        y = expert(x[tok], wg[e], wu[e], wd[e], limit) * weights[tok, slot, None]
        out.index_add_(0, tok, y)
    return out


def moe_dense(x, W, m, c):
    """Same function as moe_loop, static shapes: [E, N, F] intermediate for all experts."""
    limit = c.get("swiglu_limit")
    chosen, weights = moe_route(x, W[m + "gate.weight"], W[m + "gate.e_score_correction_bias"],
                                c["num_experts_per_tok"], c["routed_scaling_factor"])
    wg, wu, wd = W[m + "experts.gate_proj"], W[m + "experts.up_proj"], W[m + "experts.down_proj"]
    comb = torch.zeros(x.shape[0], wg.shape[0], dtype=x.dtype, device=x.device).scatter(1, chosen, weights)
    xe = x.to(wg.dtype)
    g = torch.einsum("nd,efd->enf", xe, wg).to(x.dtype).clamp(max=limit)
    u = torch.einsum("nd,efd->enf", xe, wu).to(x.dtype).clamp(-limit, limit)
    y = torch.einsum("enf,edf->end", (torch.nn.functional.silu(g) * u).to(wd.dtype), wd).to(x.dtype)
    return _shared(x, W, m, limit) + torch.einsum("end,ne->nd", y, comb)


def dense_mlp(x, W, m):
    """Layers below first_k_dense_replace: SwiGLU without the clamp."""
    return swiglu(x, W[m + "gate_proj.weight"], W[m + "up_proj.weight"], W[m + "down_proj.weight"], None)
