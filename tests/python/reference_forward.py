"""Independent numpy reference of the GLM-5.3-Flash forward pass.

Written only from the contract, ../shared/design/MODEL.md ("MODEL.md") and docs/checkpoint.md
("checkpoint.md"), never from the engine's C++ sources, so that it can catch bugs there.
Everything is computed in float64, token by token where the contract is recurrent (KDA), with full
causal MLA plus the DSA indexer selection, MoE, mHC with Sinkhorn, the head reduction and the MTP
module.

Public entry points:
    load_checkpoint(dir)                    -> (config, tensors)      tensors: name -> float64 array
    forward(config, tensors, tokens)        -> (logits [T, vocab], h [T, D])
    mtp_forward(config, tensors, tokens, h) -> mtp_logits [T-1, vocab]

forward and mtp_forward accept an optional `info` dict that collects diagnostics (how many query
positions used a sparse indexer selection, the smallest score margins at the top-k boundaries of the
indexer and the router, which is where float32 and float64 can legitimately disagree).
"""

import json
import os
import struct

import numpy as np

# ----------------------------------------------------------------------------------------------
# Checkpoint reading (checkpoint.md "Files of a checkpoint directory"; MODEL.md section 7 formats)
# ----------------------------------------------------------------------------------------------

_PLAIN_DTYPES = {
    "F64": np.float64,
    "F32": np.float32,
    "F16": np.float16,
    "I64": np.int64,
    "I32": np.int32,
    "I16": np.int16,
    "I8": np.int8,
    "U8": np.uint8,
    "BOOL": np.bool_,
}
_BYTE_DTYPES = {"BF16": 2, "F8_E4M3": 1, "F8_E5M2": 1, "F8_E8M0": 1}


def _decode_e4m3(u):
    """FP8 E4M3 (the 'fn' variant: no infinities, S.1111.111 is NaN) -> float64."""
    u = u.astype(np.int64)
    sign = np.where(u & 0x80, -1.0, 1.0)
    e = (u >> 3) & 0xF
    m = (u & 0x7).astype(np.float64)
    val = np.where(e == 0, m / 8.0 * 2.0 ** -6, (1.0 + m / 8.0) * np.exp2(e.astype(np.float64) - 7.0))
    val = np.where((e == 15) & ((u & 7) == 7), np.nan, val)
    return sign * val


def _decode_e5m2(u):
    """FP8 E5M2 is the upper byte of an IEEE half."""
    return (u.astype(np.uint16) << 8).view(np.float16).astype(np.float64)


def _decode_e8m0(u):
    """E8M0 scale: 2^(e - 127); 255 is NaN."""
    u = u.astype(np.float64)
    return np.where(u == 255, np.nan, np.exp2(u - 127.0))


_E2M1_VALUES = np.array([0.0, 0.5, 1.0, 1.5, 2.0, 3.0, 4.0, 6.0])


def _decode_e2m1_packed(packed):
    """NVFP4 payload: U8 [n, k/2], two E2M1 per byte, low nibble first -> float64 [n, k]."""
    lo = packed & 0xF
    hi = packed >> 4
    nib = np.stack([lo, hi], axis=-1).reshape(packed.shape[:-1] + (packed.shape[-1] * 2,))
    mag = _E2M1_VALUES[nib & 0x7]
    return np.where(nib & 0x8, -mag, mag)


def _read_safetensors(path):
    """Returns {name: (dtype string, raw numpy array of its stored shape)}."""
    out = {}
    with open(path, "rb") as f:
        data = f.read()
    (hlen,) = struct.unpack("<Q", data[:8])
    header = json.loads(data[8:8 + hlen].decode("utf-8"))
    base = 8 + hlen
    for name, spec in header.items():
        if name == "__metadata__":
            continue
        dtype, shape = spec["dtype"], tuple(spec["shape"])
        begin, end = spec["data_offsets"]
        buf = data[base + begin:base + end]
        count = int(np.prod(shape)) if shape else 1
        if dtype in _PLAIN_DTYPES:
            arr = np.frombuffer(buf, dtype=np.dtype(_PLAIN_DTYPES[dtype]).newbyteorder("<"), count=count)
        elif dtype == "BF16":
            u16 = np.frombuffer(buf, dtype="<u2", count=count)
            arr = (u16.astype(np.uint32) << 16).view(np.float32)
        elif dtype in ("F8_E4M3", "F8_E5M2", "F8_E8M0"):
            arr = np.frombuffer(buf, dtype=np.uint8, count=count)
        else:
            raise ValueError(f"{path}: tensor {name} has dtype {dtype}, which the reference does not know")
        if len(buf) != count * (np.dtype(_PLAIN_DTYPES[dtype]).itemsize if dtype in _PLAIN_DTYPES
                                else _BYTE_DTYPES[dtype]):
            raise ValueError(f"{path}: tensor {name} byte size does not match its shape")
        out[name] = (dtype, arr.reshape(shape))
    return out


def _to_float(dtype, arr):
    if dtype == "F8_E4M3":
        return _decode_e4m3(arr)
    if dtype == "F8_E5M2":
        return _decode_e5m2(arr)
    if dtype == "F8_E8M0":
        return _decode_e8m0(arr)
    return arr.astype(np.float64)


def _dequantize(raw):
    """Turns quantized projections into plain float64 `.weight` tensors (checkpoint.md, quantized
    projections): FP8 block (`weight_scale_inv`, one FP32 per 128x128 block), MXFP8 (E4M3 with an
    E8M0 `weight_scale` per 32 values of a row), NVFP4 (packed E2M1 with an E4M3 `weight_scale` per
    16 values and an FP32 `weight_scale_2`; `input_scale` only concerns activations)."""
    tensors = {}
    consumed = set()
    for name, (dtype, arr) in raw.items():
        if not name.endswith(".weight"):
            continue
        s_inv, s, s2 = name + "_scale_inv", name + "_scale", name + "_scale_2"
        if s_inv in raw:  # FP8 E4M3 with 128x128 block scales
            w = _to_float(dtype, arr)
            sc = _to_float(*raw[s_inv])
            n, k = w.shape
            w = w * np.repeat(np.repeat(sc, 128, axis=0), 128, axis=1)[:n, :k]
            consumed.add(s_inv)
        elif s in raw and s2 in raw:  # NVFP4
            if dtype != "U8":
                raise ValueError(f"{name}: NVFP4 payload must be U8, found {dtype}")
            w = _decode_e2m1_packed(arr)
            sc = _to_float(*raw[s])
            w = w * np.repeat(sc, 16, axis=1)[:, :w.shape[1]] * _to_float(*raw[s2]).reshape(())
            consumed.update([s, s2])
        elif s in raw:  # MXFP8
            w = _to_float(dtype, arr)
            sc = _to_float(*raw[s])
            w = w * np.repeat(sc, 32, axis=1)[:, :w.shape[1]]
            consumed.add(s)
        else:
            continue
        tensors[name] = w
        consumed.add(name)
        consumed.add(name[:-len(".weight")] + ".input_scale")
    for name, (dtype, arr) in raw.items():
        if name in consumed:
            continue
        if dtype in ("U8", "I8") and name.endswith(".weight"):
            raise ValueError(f"{name}: integer weight without a known quantization scale")
        tensors[name] = _to_float(dtype, arr)
    return tensors


def load_checkpoint(directory):
    """Reads config.json and every tensor (through model.safetensors.index.json's weight_map or a
    single model.safetensors) into float64 arrays."""
    with open(os.path.join(directory, "config.json")) as f:
        config = json.load(f)
    index_path = os.path.join(directory, "model.safetensors.index.json")
    if os.path.exists(index_path):
        with open(index_path) as f:
            weight_map = json.load(f)["weight_map"]
        shards = sorted(set(weight_map.values()))
    else:
        weight_map = None
        shards = ["model.safetensors"]
    raw = {}
    for shard in shards:
        for name, value in _read_safetensors(os.path.join(directory, shard)).items():
            if weight_map is not None and weight_map.get(name) not in (shard, None):
                raise ValueError(f"{name} found in {shard} but the index maps it to {weight_map[name]}")
            if name in raw:
                raise ValueError(f"{name} appears in more than one shard")
            raw[name] = value
    if weight_map is not None:
        missing = [n for n in weight_map if n not in raw]
        if missing:
            raise ValueError(f"index names tensors absent from the shards: {missing[:5]}")
    return config, _dequantize(raw)


# ----------------------------------------------------------------------------------------------
# Geometry (MODEL.md section 1)
# ----------------------------------------------------------------------------------------------

MLA_KIND = "deepseek_sparse_attention"
KDA_KIND = "linear_attention"


def layer_kinds(config):
    """Layer i is MLA/DSA when (i+1) % 4 == 0 unless config.json has a layer_types list."""
    n = config["num_hidden_layers"]
    kinds = config.get("layer_types")
    if kinds is None:
        kinds = [MLA_KIND if (i + 1) % 4 == 0 else KDA_KIND for i in range(n)]
    kinds = list(kinds)
    if len(kinds) != n:
        raise ValueError(f"layer_types has {len(kinds)} entries for {n} layers")
    for k in kinds:
        if k not in (MLA_KIND, KDA_KIND):
            raise ValueError(f"unknown layer type {k!r}")
    return kinds


def dense_layers(config):
    """Layers below first_k_dense_replace use the dense MLP (MODEL.md section 1 'MLP kind')."""
    n = config["num_hidden_layers"]
    first_k = config.get("first_k_dense_replace", 0)
    dense = set(range(min(first_k, n)))
    only = config.get("mlp_only_layers")
    if isinstance(only, list) and set(only) != dense:
        raise ValueError(f"mlp_only_layers {only} disagrees with first_k_dense_replace {first_k}")
    return dense


# ----------------------------------------------------------------------------------------------
# Elementary functions (checkpoint.md "Numerical choices")
# ----------------------------------------------------------------------------------------------

def sigmoid(x):
    return 1.0 / (1.0 + np.exp(-x))


def silu(x):
    return x * sigmoid(x)


def softmax(x, axis=-1):
    e = np.exp(x - np.max(x, axis=axis, keepdims=True))
    return e / np.sum(e, axis=axis, keepdims=True)


def rms_norm(x, w, eps):
    """RMSNorm(x; w) = x * rsqrt(mean(x^2) + eps) * w, over the last axis."""
    return x / np.sqrt(np.mean(x * x, axis=-1, keepdims=True) + eps) * w


def layer_norm(x, w, b, eps=1e-6):
    """Indexer k_norm: (x - mean) * rsqrt(var + 1e-6) * w + b, population variance."""
    mu = np.mean(x, axis=-1, keepdims=True)
    var = np.mean((x - mu) ** 2, axis=-1, keepdims=True)
    return (x - mu) / np.sqrt(var + eps) * w + b


def l2norm(x, eps=1e-6):
    """KDA l2norm: x / sqrt(sum x^2 + 1e-6), over the last axis."""
    return x / np.sqrt(np.sum(x * x, axis=-1, keepdims=True) + eps)


def linear(x, w):
    """nn.Linear layout: w is [out, in], y = W x (x may be [..., in])."""
    return x @ w.T


# ----------------------------------------------------------------------------------------------
# mHC (MODEL.md section 2)
# ----------------------------------------------------------------------------------------------

def hc_mixes(config, fn, X):
    """mixes = (fn . v) * rsqrt(mean(v^2) + rms_norm_eps) with v = flatten(X), stream-major.
    X: [T, hc, D] -> [T, rows of fn]."""
    T = X.shape[0]
    v = X.reshape(T, -1)
    return linear(v, fn) / np.sqrt(np.mean(v * v, axis=-1, keepdims=True) + config["rms_norm_eps"])


def hc_site_coefficients(config, fn, base, scale, X):
    """pre [T, hc], post [T, hc], comb [T, hc, hc] of one site (attn or ffn), Sinkhorn included.
    comb[s][s'] is row-major in mixes[2hc : 2hc + hc*hc]; the softmax runs along s' for each s."""
    hc = config["hc_mult"]
    eps = config["hc_eps"]
    m = hc_mixes(config, fn, X)
    pre = sigmoid(m[:, 0:hc] * scale[0] + base[0:hc]) + eps
    post = 2.0 * sigmoid(m[:, hc:2 * hc] * scale[1] + base[hc:2 * hc])
    logits = (m[:, 2 * hc:] * scale[2] + base[2 * hc:]).reshape(-1, hc, hc)
    comb = softmax(logits, axis=-1) + eps
    comb = comb / (np.sum(comb, axis=-2, keepdims=True) + eps)       # column sums: over s
    for _ in range(config["hc_sinkhorn_iters"] - 1):
        comb = comb / (np.sum(comb, axis=-1, keepdims=True) + eps)   # row sums: over s'
        comb = comb / (np.sum(comb, axis=-2, keepdims=True) + eps)
    return pre, post, comb


def hc_site(config, tensors, prefix, site, X, block):
    """One mHC site: y = sum_s pre[s] X[s]; b = block(y); X'[s] = post[s] b + sum_s' comb[s,s'] X[s']."""
    pre, post, comb = hc_site_coefficients(
        config, tensors[f"{prefix}hc_{site}_fn"], tensors[f"{prefix}hc_{site}_base"],
        tensors[f"{prefix}hc_{site}_scale"], X)
    y = np.einsum("ts,tsd->td", pre, X)
    b = block(y)
    return post[:, :, None] * b[:, None, :] + np.einsum("tab,tbd->tad", comb, X)


def hc_head(config, tensors, X):
    """Head site: pre = sigmoid(mixes * scale[0] + base) + hc_eps; h = sum_s pre[s] X[s]."""
    m = hc_mixes(config, tensors["model.hc_head_fn"], X)
    pre = sigmoid(m * tensors["model.hc_head_scale"][0] + tensors["model.hc_head_base"]) + config["hc_eps"]
    return np.einsum("ts,tsd->td", pre, X)


# ----------------------------------------------------------------------------------------------
# KDA layer (MODEL.md section 3)
# ----------------------------------------------------------------------------------------------

def short_conv_silu(x, w):
    """Causal depthwise conv: out[t][c] = sum_j w[c][j] * x[t - (taps-1) + j][c], zeros before the
    first token, then SiLU. x: [T, C], w: [C, taps] (a [C, 1, taps] layout is accepted too)."""
    w = w.reshape(w.shape[0], -1)
    taps = w.shape[1]
    T = x.shape[0]
    padded = np.concatenate([np.zeros((taps - 1, x.shape[1])), x], axis=0)
    out = np.zeros_like(x)
    for j in range(taps):
        out += w[:, j] * padded[j:j + T]
    return silu(out)


def kda_layer(config, tensors, prefix, x):
    """x: [T, D] already RMS-normed by input_layernorm. Token-by-token gated delta rule."""
    la = config["linear_attn_config"]
    H, K = la["num_heads"], la["head_dim"]
    V = K
    T = x.shape[0]
    p = prefix + "self_attn."
    W = lambda n: tensors[p + n]

    q = short_conv_silu(linear(x, W("q_proj.weight")), W("q_conv1d.weight")).reshape(T, H, K)
    k = short_conv_silu(linear(x, W("k_proj.weight")), W("k_conv1d.weight")).reshape(T, H, K)
    v = short_conv_silu(linear(x, W("v_proj.weight")), W("v_conv1d.weight")).reshape(T, H, V)
    q = l2norm(q) / np.sqrt(K)
    k = l2norm(k)

    f = linear(linear(x, W("f_a_proj.weight")), W("f_b_proj.weight")).reshape(T, H, K)
    a = np.exp(W("A_log").reshape(H))[None, :, None]
    g = la["gate_lower_bound"] * sigmoid(a * (f + W("dt_bias").reshape(H, K)))   # [T, H, K]
    beta = sigmoid(linear(x, W("b_proj.weight")))                                  # [T, H]
    out_gate = sigmoid(linear(linear(x, W("g_a_proj.weight")), W("g_b_proj.weight"))).reshape(T, H, V)

    S = np.zeros((H, K, V))
    o = np.zeros((T, H, V))
    for t in range(T):
        S = np.exp(g[t])[:, :, None] * S                                   # decay rows (K)
        pred = np.einsum("hk,hkv->hv", k[t], S)                             # S^T k
        S = S + beta[t][:, None, None] * k[t][:, :, None] * (v[t] - pred)[:, None, :]
        o[t] = np.einsum("hkv,hk->hv", S, q[t])                             # S^T q
    o = rms_norm(o, W("o_norm.weight"), config["rms_norm_eps"]) * out_gate
    return linear(o.reshape(T, H * V), W("o_proj.weight"))


# ----------------------------------------------------------------------------------------------
# MLA layer with the DSA indexer (MODEL.md section 4)
# ----------------------------------------------------------------------------------------------

def indexer_selection(config, tensors, prefix, x, c_q, info=None):
    """For each query position t, the sorted array of attended positions I_t.
    x: [T, D] the layer's normed input; c_q: [T, q_lora] the normed query latent."""
    p = prefix + "self_attn.indexer."
    W = lambda n: tensors[p + n]
    nI, dI = config["index_n_heads"], config["index_head_dim"]
    kpool = config["index_kpool"]
    max_pools = config["index_topk"] // kpool
    T = x.shape[0]

    qI = linear(c_q, W("wq_b.weight")).reshape(T, nI, dI)
    kI = layer_norm(linear(x, W("wk.weight")), W("k_norm.weight"), W("k_norm.bias"))   # [T, dI]
    wts = linear(x, W("weights_proj.weight"))                                          # [T, nI]
    gate = linear(x, W("kpool_gate.weight")).reshape(T)                                # [T]
    ape = W("kpool_compress_ape").reshape(kpool)

    # Pooled keys: pool p holds tokens kpool*p ... kpool*p + kpool-1 (depends only on those tokens).
    n_pools = T // kpool
    Kp = np.zeros((n_pools, dI))
    for pi in range(n_pools):
        sl = slice(kpool * pi, kpool * (pi + 1))
        a = softmax(gate[sl] + ape)
        Kp[pi] = a @ kI[sl]

    selections = []
    for t in range(T):
        n = t + 1
        P = n // kpool
        if P <= max_pools:
            selections.append(np.arange(n))
            continue
        dots = np.einsum("hd,pd->ph", qI[t], Kp[:P])                                   # [P, nI]
        score = (np.maximum(dots, 0.0) @ wts[t]) / np.sqrt(dI * nI)                    # [P]
        valid = np.flatnonzero(~np.isnan(score))
        order = valid[np.argsort(-score[valid], kind="stable")]   # equal scores: lower pool first
        chosen = np.sort(order[:max_pools])
        tokens = [np.arange(kpool * c, kpool * (c + 1)) for c in chosen]
        tokens.append(np.arange(kpool * P, n))                                         # tail
        selections.append(np.concatenate(tokens))
        if info is not None:
            info["sparse_positions"] = info.get("sparse_positions", 0) + 1
            if len(order) > max_pools:
                s_in, s_out = score[order[max_pools - 1]], score[order[max_pools]]
                margin = abs(s_in - s_out) / max(np.max(np.abs(score)), 1e-30)
                info["min_pool_margin"] = min(info.get("min_pool_margin", np.inf), margin)
    return selections


def mla_layer(config, tensors, prefix, x, info=None):
    """x: [T, D] already normed by input_layernorm. Causal MLA restricted to I_t, in un-absorbed form
    (the absorbed form is the same function)."""
    if config.get("qk_rope_head_dim", 0):
        raise NotImplementedError("MODEL.md defines NoPE MLA only (qk_rope_head_dim 0)")
    H = config["num_attention_heads"]
    dn, dv = config["qk_nope_head_dim"], config["v_head_dim"]
    kv_lora = config["kv_lora_rank"]
    eps = config["rms_norm_eps"]
    T = x.shape[0]
    p = prefix + "self_attn."
    W = lambda n: tensors[p + n]

    c_q = rms_norm(linear(x, W("q_a_proj.weight")), W("q_a_layernorm.weight"), eps)
    q = linear(c_q, W("q_b_proj.weight")).reshape(T, H, dn)
    c_kv = rms_norm(linear(x, W("kv_a_proj_with_mqa.weight")), W("kv_a_layernorm.weight"), eps)
    kv_b = W("kv_b_proj.weight").reshape(H, dn + dv, kv_lora)     # head h: dn rows W_kb, dv rows W_vb
    k = np.einsum("tc,hdc->thd", c_kv, kv_b[:, :dn])
    v = np.einsum("tc,hdc->thd", c_kv, kv_b[:, dn:])

    selections = indexer_selection(config, tensors, prefix, x, c_q, info)
    scale = 1.0 / np.sqrt(dn + config.get("qk_rope_head_dim", 0))
    o = np.zeros((T, H, dv))
    for t in range(T):
        idx = selections[t]
        s = scale * np.einsum("hd,jhd->hj", q[t], k[idx])
        o[t] = np.einsum("hj,jhd->hd", softmax(s, axis=-1), v[idx])
    return linear(o.reshape(T, H * dv), W("o_proj.weight"))


# ----------------------------------------------------------------------------------------------
# MoE and dense MLP (MODEL.md section 5)
# ----------------------------------------------------------------------------------------------

def swiglu(x, w_gate, w_up, w_down, limit=None):
    """W_down(SiLU(min(W_gate x, limit)) * clamp(W_up x, -limit, limit)); no clamp when limit is None."""
    gate, up = linear(x, w_gate), linear(x, w_up)
    if limit is not None:
        gate = np.minimum(gate, limit)
        up = np.clip(up, -limit, limit)
    return linear(silu(gate) * up, w_down)


def moe_route(config, tensors, prefix, x_row, info=None):
    """Chosen expert indices and their weights for one token (x_row: [D], normed)."""
    p = prefix + "mlp.gate."
    s = sigmoid(linear(x_row, tensors[p + "weight"]))
    biased = s + tensors[p + "e_score_correction_bias"]
    k = config["num_experts_per_tok"]
    order = np.argsort(-biased, kind="stable")             # equal values: lower expert index first
    chosen = order[:k]
    weights = s[chosen] / np.sum(s[chosen]) * config["routed_scaling_factor"]
    if info is not None and len(order) > k:
        margin = abs(biased[order[k - 1]] - biased[order[k]])
        info["min_route_margin"] = min(info.get("min_route_margin", np.inf), margin)
    return chosen, weights


def moe_layer(config, tensors, prefix, x, info=None):
    """x: [T, D] normed by post_attention_layernorm."""
    if config.get("n_group", 1) not in (None, 1) or config.get("topk_group", 1) not in (None, 1):
        raise NotImplementedError("grouped routing is not part of the contract (n_group = topk_group = 1)")
    if config.get("norm_topk_prob", True) is not True:
        raise NotImplementedError("the contract normalizes the top-k probabilities")
    limit = config.get("swiglu_limit")
    p = prefix + "mlp."
    out = swiglu(x, tensors[p + "shared_experts.gate_proj.weight"], tensors[p + "shared_experts.up_proj.weight"],
                 tensors[p + "shared_experts.down_proj.weight"], limit)
    for t in range(x.shape[0]):
        chosen, weights = moe_route(config, tensors, prefix, x[t], info)
        for e, w in zip(chosen, weights):
            pe = f"{p}experts.{e}."
            out[t] += w * swiglu(x[t], tensors[pe + "gate_proj.weight"], tensors[pe + "up_proj.weight"],
                                 tensors[pe + "down_proj.weight"], limit)
    return out


def dense_mlp(config, tensors, prefix, x):
    p = prefix + "mlp."
    return swiglu(x, tensors[p + "gate_proj.weight"], tensors[p + "up_proj.weight"], tensors[p + "down_proj.weight"])


# ----------------------------------------------------------------------------------------------
# The model (MODEL.md section 2 layer structure; head; section 6 MTP)
# ----------------------------------------------------------------------------------------------

def attention_block(config, tensors, prefix, kind, y, info=None):
    """Block(y) at the attn site: its own pre-norm, then KDA or MLA."""
    x = rms_norm(y, tensors[prefix + "input_layernorm.weight"], config["rms_norm_eps"])
    if kind == KDA_KIND:
        return kda_layer(config, tensors, prefix, x)
    return mla_layer(config, tensors, prefix, x, info)


def ffn_block(config, tensors, prefix, dense, y, info=None):
    """Block(y) at the ffn site: post_attention_layernorm, then dense MLP or MoE."""
    x = rms_norm(y, tensors[prefix + "post_attention_layernorm.weight"], config["rms_norm_eps"])
    if dense:
        return dense_mlp(config, tensors, prefix, x)
    return moe_layer(config, tensors, prefix, x, info)


def lm_head(config, tensors, x):
    w = tensors.get("lm_head.weight")
    if w is None:
        if not config.get("tie_word_embeddings", False):
            raise KeyError("lm_head.weight")
        w = tensors["model.embed_tokens.weight"]
    return linear(x, w)


def forward(config, tensors, tokens, info=None):
    """Full model over one sequence. Returns (logits [T, vocab], h [T, D]) where h is the
    head-reduced hidden state before the final norm."""
    tokens = np.asarray(tokens, dtype=np.int64)
    hc = config["hc_mult"]
    kinds = layer_kinds(config)
    dense = dense_layers(config)
    emb = tensors["model.embed_tokens.weight"][tokens]                # [T, D]
    X = np.repeat(emb[:, None, :], hc, axis=1)                        # copied into every stream
    for i, kind in enumerate(kinds):
        prefix = f"model.layers.{i}."
        X = hc_site(config, tensors, prefix, "attn", X,
                    lambda y: attention_block(config, tensors, prefix, kind, y, info))
        X = hc_site(config, tensors, prefix, "ffn", X,
                    lambda y: ffn_block(config, tensors, prefix, i in dense, y, info))
    h = hc_head(config, tensors, X)
    logits = lm_head(config, tensors, rms_norm(h, tensors["model.norm.weight"], config["rms_norm_eps"]))
    return logits, h


def mtp_forward(config, tensors, tokens, h, info=None):
    """MTP module (layer index num_hidden_layers). Row i uses h[i] and tokens[i+1]; its MLA attends
    causally (with its own indexer) over MTP rows 0..i. Returns logits [T-1, vocab]."""
    tokens = np.asarray(tokens, dtype=np.int64)
    eps = config["rms_norm_eps"]
    prefix = f"model.layers.{config['num_hidden_layers']}."
    W = lambda n: tensors[prefix + n]
    e = rms_norm(tensors["model.embed_tokens.weight"][tokens[1:]], W("enorm.weight"), eps)
    hn = rms_norm(h[:len(tokens) - 1], W("hnorm.weight"), eps)
    z = linear(np.concatenate([e, hn], axis=-1), W("eh_proj.weight"))
    if z.shape[0] == 0:
        return np.zeros((0, config["vocab_size"]))
    z = z + mla_layer(config, tensors, prefix, rms_norm(z, W("input_layernorm.weight"), eps), info)
    z = z + moe_layer(config, tensors, prefix, rms_norm(z, W("post_attention_layernorm.weight"), eps), info)
    return lm_head(config, tensors, rms_norm(z, W("shared_head.norm.weight"), eps))
