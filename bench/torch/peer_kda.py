"""KDA, the gated delta rule with per-channel decay (MODEL.md section 3), in plain torch.

Mirrors reference_forward.kda_layer. Decode runs the recurrence one token per sequence on the cached
state S [B, H, K, V] FP32; prefill runs the chunked (WY / UT-transform) form, chunk 64, which is the
same function:

  within a chunk, G_t = cumsum of g (chunk-local, <= 0), kbar_t = exp(G_t) k_t, qbar_t = exp(G_t) q_t,
  P[i, j] = sum_c k_ic k_jc exp(G_ic - G_jc)   (j < i),   A = diag(beta) P,
  T = (I + A)^-1 diag(beta),  U = T V,  Wm = T Kbar,  Delta = U - Wm S0,
  O = Qbar S0 + (Qbar Khat^T, j <= i) Delta,  S_end = exp(G_L) S0 + (exp(G_L - G_i) k_i)^T Delta.

exp(-G) overflows FP32 within a chunk (g reaches -5 a token), so the pairwise terms are formed in
16-token sub-chunks with a reference point between i and j that keeps every factor bounded.
"""
import math

import torch

from peer_mhc import linear, rms_norm

CHUNK = 64
SUB = 16


def kda_project(x, W, p, la, hist):
    """x [B, T, D] normed; hist [B, taps-1, 3*H*K] FP32 conv history (pre-conv q, k, v).
    Returns q, k, v, g [B, T, H, K], beta [B, T, H], out_gate [B, T, H, K], new history."""
    B, T, _ = x.shape
    H, K = la["num_heads"], la["head_dim"]
    qkv = linear(x, W[p + "qkv_proj.weight"])                                    # [B, T, 3HK]
    padded = torch.cat([hist, qkv], dim=1)                                       # [B, T+taps-1, 3HK]
    cw = W[p + "qkv_conv1d.weight"]                                              # [3HK, taps]
    conv = sum(cw[:, j] * padded[:, j:j + T] for j in range(cw.shape[1]))
    conv = torch.nn.functional.silu(conv)
    q, k, v = conv.view(B, T, 3, H, K).unbind(2)
    q = q * torch.rsqrt(q.pow(2).sum(-1, keepdim=True) + 1e-6) / math.sqrt(K)
    k = k * torch.rsqrt(k.pow(2).sum(-1, keepdim=True) + 1e-6)
    f = linear(linear(x, W[p + "f_a_proj.weight"]), W[p + "f_b_proj.weight"]).view(B, T, H, K)
    a = torch.exp(W[p + "A_log"]).view(H, 1)
    g = la["gate_lower_bound"] * torch.sigmoid(a * (f + W[p + "dt_bias"].view(H, K)))
    beta = torch.sigmoid(linear(x, W[p + "b_proj.weight"]))
    gate = torch.sigmoid(linear(linear(x, W[p + "g_a_proj.weight"]), W[p + "g_b_proj.weight"])).view(B, T, H, K)
    return q, k, v, g, beta, gate, padded[:, T:]


def kda_output(o, gate, W, p, eps):
    """RMSNorm per head, output gate, o_proj. o, gate: [B, T, H, V] -> [B, T, D]."""
    B, T = o.shape[:2]
    o = rms_norm(o, W[p + "o_norm.weight"], eps) * gate
    return linear(o.reshape(B, T, -1), W[p + "o_proj.weight"])


def kda_recurrent_step(q, k, v, g, beta, S):
    """One token per sequence. q, k, v, g [B, H, K]; beta [B, H]; S [B, H, K, V] -> (o [B, H, V], S')."""
    S = S * torch.exp(g)[..., None]
    pred = torch.einsum("bhk,bhkv->bhv", k, S)                                   # S^T k
    S = S + beta[..., None, None] * k[..., None] * (v - pred)[..., None, :]
    return torch.einsum("bhkv,bhk->bhv", S, q), S


def _intra_chunk(q, k, G):
    """Pkk [N, H, L, L] strictly lower and Pqk inclusive lower: sum_c a_ic k_jc exp(G_ic - G_jc).
    q, k, G: [N, H, L, K]."""
    N, H, L, K = k.shape
    ns = L // SUB
    Gs = G.view(N, H, ns, SUB, K)
    # Earlier sub-chunks: reference r = first row of sub-chunk I, so G_i - G_r <= 0 and G_r - G_j <= 0.
    Gr = Gs[:, :, :, :1]                                                         # [N, H, ns, 1, K]
    starts = torch.arange(ns, device=k.device) * SUB
    earlier = (torch.arange(L, device=k.device)[None, :] < starts[:, None])[..., None]   # [ns, L, 1]
    right = torch.where(earlier, k[:, :, None] * torch.exp((Gr - G[:, :, None]).clamp(max=0)), 0.0)
    to_r = torch.exp(Gs - Gr)
    Pkk = (k.view(N, H, ns, SUB, K) * to_r) @ right.transpose(-1, -2)            # [N, H, ns, SUB, L]
    Pqk = (q.view(N, H, ns, SUB, K) * to_r) @ right.transpose(-1, -2)
    # Own sub-chunk: reference at its middle, each factor <= exp(|gate bound| * SUB / 2).
    Gm = Gs[:, :, :, SUB // 2:SUB // 2 + 1]
    kr = (k.view(N, H, ns, SUB, K) * torch.exp(Gm - Gs)).transpose(-1, -2)
    dkk = (k.view(N, H, ns, SUB, K) * torch.exp(Gs - Gm)) @ kr                   # [N, H, ns, SUB, SUB]
    dqk = (q.view(N, H, ns, SUB, K) * torch.exp(Gs - Gm)) @ kr
    ones = torch.ones(SUB, SUB, dtype=torch.bool, device=k.device)
    dkk = dkk * torch.tril(ones, -1)
    dqk = dqk * torch.tril(ones, 0)
    Pkk, Pqk = Pkk.view(N, H, ns, SUB, ns, SUB), Pqk.view(N, H, ns, SUB, ns, SUB)
    Pkk.diagonal(dim1=2, dim2=4).add_(dkk.permute(0, 1, 3, 4, 2))
    Pqk.diagonal(dim1=2, dim2=4).add_(dqk.permute(0, 1, 3, 4, 2))
    return Pkk.reshape(N, H, L, L), Pqk.reshape(N, H, L, L)


def kda_chunk_prepare(q, k, v, g, beta):
    """The chunk-parallel part. q, k, v, g [T, H, K] (T a multiple of CHUNK), beta [T, H].
    Returns U, Wm, Qbar, Pqk, Kdec [N, H, L, *] and gL = exp(G_L) [N, H, K]."""
    T, H, K = q.shape
    N = T // CHUNK
    q, k, v, g = (t.view(N, CHUNK, H, -1).transpose(1, 2) for t in (q, k, v, g))  # [N, H, L, K]
    beta = beta.view(N, CHUNK, H).transpose(1, 2)                                # [N, H, L]
    G = g.cumsum(2)
    Pkk, Pqk = _intra_chunk(q, k, G)
    eye = torch.eye(CHUNK, dtype=q.dtype, device=q.device)
    Tm = torch.linalg.solve_triangular(eye + beta[..., None] * Pkk, torch.diag_embed(beta),
                                       upper=False, unitriangular=True)
    U = Tm @ v
    Wm = Tm @ (k * torch.exp(G))
    Kdec = k * torch.exp(G[:, :, -1:] - G)
    return U, Wm, q * torch.exp(G), Pqk, Kdec, torch.exp(G[:, :, -1])


def kda_chunk_scan(U, Wm, Qbar, Pqk, Kdec, gL, S):
    """The sequential part, one chunk at a time. S [H, K, V] -> (O [N*L, H, V], S_end)."""
    outs = []
    for n in range(U.shape[0]):
        delta = U[n] - Wm[n] @ S                                                # [H, L, V]
        outs.append(Qbar[n] @ S + Pqk[n] @ delta)
        S = gL[n][..., None] * S + Kdec[n].transpose(-1, -2) @ delta
    O = torch.stack(outs)                                                        # [N, H, L, V]
    return O.transpose(1, 2).reshape(-1, O.shape[1], O.shape[3]), S


def kda_chunked(q, k, v, g, beta, S, prepare=kda_chunk_prepare):
    """Prefill of one sequence: q, k, v, g [T, H, K], beta [T, H], S [H, K, V] FP32. The tail is padded
    with g = 0 and beta = 0, which leaves the state unchanged."""
    T = q.shape[0]
    pad = (-T) % CHUNK
    if pad:
        z = lambda t: torch.cat([t, t.new_zeros((pad,) + t.shape[1:])])
        q, k, v, g, beta = z(q), z(k), z(v), z(g), z(beta)
    O, S = kda_chunk_scan(*prepare(q, k, v, g, beta), S)
    return O[:T], S
