"""tinyGLM geometry and weights for the PyTorch peer.

Mirrors engine/model/presets.cpp (the presets), engine/model/config.cpp (config.json fields, the 3:1
layer rule) and engine/model/tensor_layout.cpp (checkpoint_tensors: names, shapes, dtypes and the
dummy init scales). Random weights use torch's generator: same shapes and scales as the engine's
dummy weights, not the same values (timing does not need them).
"""
import json
import math
import os

import torch

MLA_KIND = "deepseek_sparse_attention"
KDA_KIND = "linear_attention"

_GLM = {  # MODEL.md section 1, the ModelConfig defaults
    "model_type": "glm5_next", "hidden_size": 4096, "num_hidden_layers": 45, "first_k_dense_replace": 3,
    "intermediate_size": 12288, "vocab_size": 154880, "eos_token_id": [154820, 154827, 154829],
    "rms_norm_eps": 1e-5,
    "linear_attn_config": {"num_heads": 64, "head_dim": 128, "short_conv_kernel_size": 4, "gate_lower_bound": -5.0},
    "num_attention_heads": 64, "q_lora_rank": 1536, "kv_lora_rank": 512, "qk_nope_head_dim": 256,
    "qk_rope_head_dim": 0, "v_head_dim": 256, "index_n_heads": 32, "index_head_dim": 128, "index_topk": 2048,
    "index_kpool": 4, "n_routed_experts": 288, "num_experts_per_tok": 8, "moe_intermediate_size": 2048,
    "n_shared_experts": 1, "routed_scaling_factor": 2.5, "swiglu_limit": 10.0, "hc_mult": 4,
    "hc_sinkhorn_iters": 20, "hc_eps": 1e-6,
}


def preset(name):
    """presets.cpp: tinyglm keeps every per-layer dimension; tinyglm-micro shrinks them."""
    c = json.loads(json.dumps(_GLM))
    if name not in ("tinyglm", "tinyglm-micro"):
        raise ValueError(f"unknown preset {name!r}: expected tinyglm or tinyglm-micro")
    c.update(num_hidden_layers=4, first_k_dense_replace=1, n_routed_experts=16, vocab_size=320,
             eos_token_id=[256, 263, 265])  # ByteTokenizer: 320 ids, end-of-text/user/observation
    if name == "tinyglm-micro":
        c.update(hidden_size=256, intermediate_size=512, num_attention_heads=4, q_lora_rank=64, kv_lora_rank=64,
                 qk_nope_head_dim=32, v_head_dim=32, index_n_heads=4, index_head_dim=32, index_topk=16,
                 n_routed_experts=8, num_experts_per_tok=2, moe_intermediate_size=64)
        c["linear_attn_config"].update(num_heads=4, head_dim=32)
    c["layer_types"] = layer_kinds(c)
    return c


def load_config(directory):
    with open(os.path.join(directory, "config.json")) as f:
        c = json.load(f)
    if c.get("qk_rope_head_dim", 0) != 0:
        raise ValueError("config.json field `qk_rope_head_dim`: expected 0 (NoPE MLA)")
    c["layer_types"] = layer_kinds(c)
    return c


def layer_kinds(c):
    kinds = c.get("layer_types") or [MLA_KIND if (i + 1) % 4 == 0 else KDA_KIND
                                     for i in range(c["num_hidden_layers"])]
    if len(kinds) != c["num_hidden_layers"]:
        raise ValueError(f"config.json field `layer_types`: expected {c['num_hidden_layers']} entries")
    return list(kinds)


def tensor_specs(c):
    """(name, shape, is_projection, center, half_width) per tensor of the main model (no MTP), as
    checkpoint_tensors lays them out. Projections are BF16 there, everything else FP32."""
    D, hc = c["hidden_size"], c["hc_mult"]
    specs = []
    lin = lambda n, rows, cols: specs.append((n, (rows, cols), True, 0.0, math.sqrt(3.0 / cols)))
    f32 = lambda n, shape, ctr, hw: specs.append((n, tuple(shape), False, ctr, hw))
    norm = lambda n, size: f32(n, (size,), 1.0, 0.0)
    specs.append(("model.embed_tokens.weight", (c["vocab_size"], D), True, 0.0, math.sqrt(3.0)))
    norm("model.norm.weight", D)
    lin("lm_head.weight", c["vocab_size"], D)
    f32("model.hc_head_fn", (hc, hc * D), 0.0, math.sqrt(3.0 / (hc * D)))
    f32("model.hc_head_base", (hc,), 0.0, 0.5)
    f32("model.hc_head_scale", (1,), 0.5, 0.25)
    la = c["linear_attn_config"]
    for i, kind in enumerate(c["layer_types"]):
        p = f"model.layers.{i}."
        norm(p + "input_layernorm.weight", D)
        norm(p + "post_attention_layernorm.weight", D)
        for site in ("attn", "ffn"):
            f32(p + f"hc_{site}_fn", (hc * (2 + hc), hc * D), 0.0, math.sqrt(3.0 / (hc * D)))
            f32(p + f"hc_{site}_base", (hc * (2 + hc),), 0.0, 0.5)
            f32(p + f"hc_{site}_scale", (3,), 0.5, 0.25)
        a = p + "self_attn."
        if kind == KDA_KIND:
            H, K, taps = la["num_heads"], la["head_dim"], la["short_conv_kernel_size"]
            for n in ("q", "k", "v"):
                lin(a + f"{n}_proj.weight", H * K, D)
                f32(a + f"{n}_conv1d.weight", (H * K, taps), 0.0, math.sqrt(3.0 / taps))
            lin(a + "f_a_proj.weight", K, D)
            lin(a + "f_b_proj.weight", H * K, K)
            f32(a + "A_log", (H,), 0.0, 1.0)
            f32(a + "dt_bias", (H * K,), 0.0, 1.0)
            lin(a + "b_proj.weight", H, D)
            lin(a + "g_a_proj.weight", K, D)
            lin(a + "g_b_proj.weight", H * K, K)
            norm(a + "o_norm.weight", K)
            lin(a + "o_proj.weight", D, H * K)
        else:
            H, dn, dv = c["num_attention_heads"], c["qk_nope_head_dim"], c["v_head_dim"]
            lin(a + "q_a_proj.weight", c["q_lora_rank"], D)
            norm(a + "q_a_layernorm.weight", c["q_lora_rank"])
            lin(a + "q_b_proj.weight", H * dn, c["q_lora_rank"])
            lin(a + "kv_a_proj_with_mqa.weight", c["kv_lora_rank"], D)
            norm(a + "kv_a_layernorm.weight", c["kv_lora_rank"])
            lin(a + "kv_b_proj.weight", H * (dn + dv), c["kv_lora_rank"])
            lin(a + "o_proj.weight", D, H * dv)
            ix, nI, dI = a + "indexer.", c["index_n_heads"], c["index_head_dim"]
            lin(ix + "wq_b.weight", nI * dI, c["q_lora_rank"])
            lin(ix + "wk.weight", dI, D)
            norm(ix + "k_norm.weight", dI)
            f32(ix + "k_norm.bias", (dI,), 0.0, 0.1)
            lin(ix + "weights_proj.weight", nI, D)
            lin(ix + "kpool_gate.weight", 1, D)
            f32(ix + "kpool_compress_ape", (c["index_kpool"],), 0.0, 0.5)
        m = p + "mlp."
        swiglu = lambda q, width: [lin(q + "gate_proj.weight", width, D), lin(q + "up_proj.weight", width, D),
                                   lin(q + "down_proj.weight", D, width)]
        if i < c["first_k_dense_replace"]:
            swiglu(m, c["intermediate_size"])
            continue
        E, F = c["n_routed_experts"], c["moe_intermediate_size"]
        f32(m + "gate.weight", (E, D), 0.0, math.sqrt(3.0 / D))
        f32(m + "gate.e_score_correction_bias", (E,), 0.0, 0.05)
        # Experts are drawn stacked, [E, out, in]; a checkpoint's per-expert tensors are stacked on load.
        specs.append((m + "experts.gate_proj", (E, F, D), True, 0.0, math.sqrt(3.0 / D)))
        specs.append((m + "experts.up_proj", (E, F, D), True, 0.0, math.sqrt(3.0 / D)))
        specs.append((m + "experts.down_proj", (E, D, F), True, 0.0, math.sqrt(3.0 / F)))
        if c["n_shared_experts"] > 0:
            swiglu(m + "shared_experts.", F * c["n_shared_experts"])
    return specs


def random_weights(c, device, proj_dtype, seed=0):
    """Uniform on [center - hw, center + hw] for every tensor of tensor_specs, drawn on the device."""
    g = torch.Generator(device=device)
    g.manual_seed(seed)
    W = {}
    for name, shape, is_proj, ctr, hw in tensor_specs(c):
        t = torch.rand(shape, generator=g, device=device, dtype=torch.float32)
        t = t.mul_(2.0 * hw).add_(ctr - hw)
        W[name] = t.to(proj_dtype) if is_proj else t
    return W


def checkpoint_weights(c, directory, device, proj_dtype, float_dtype):
    """Loads a checkpoint with reference_forward.load_checkpoint (dequantized to float64), then casts:
    projections to proj_dtype, the rest to float_dtype. Per-expert tensors become stacked ones."""
    import reference_forward as ref  # tests/python, put on sys.path by the caller
    _, tensors = ref.load_checkpoint(directory)
    W = {}
    for name, shape, is_proj, _, _ in tensor_specs(c):
        if ".experts." in name:
            stem, proj = name.rsplit(".", 1)
            arrs = [tensors[f"{stem}.{e}.{proj}.weight"] for e in range(c["n_routed_experts"])]
            t = torch.stack([torch.from_numpy(a) for a in arrs])
        else:
            t = torch.from_numpy(tensors[name]).reshape(shape)
        W[name] = t.to(device=device, dtype=proj_dtype if is_proj else float_dtype)
    return W
