#!/usr/bin/env python3
"""Peers of the G1 operator table, run on the GPU machine: a PyTorch eager version of each
operator (the everyday baseline), fla-core's chunk_kda / fused_recurrent_kda on the KDA shapes,
torch's cuBLAS matmul, and torch._scaled_mm on the FP8 rows of the quantized weights. Shapes and operator names match g1_operators' rows so the bundle can set
them side by side. Writes {"peers": [{"peer", "operator", "shape", "median_us"}]}.

    python3 bench/cuda/g1_peers.py --out peers.json [--quick]
"""
import argparse
import json
import math
import sys

import torch
import torch.nn.functional as F

DEC = [32, 1, 2, 4, 8, 16]
PRE = [512, 2048, 8192]
H, K, D, VOCAB, E = 64, 128, 4096, 154880, 288

flush = None
peers = []


def bench(fn, runs=30, warmup=3):
    for _ in range(warmup):
        fn()
    times = []
    for _ in range(runs):
        flush.zero_()
        a = torch.cuda.Event(enable_timing=True)
        b = torch.cuda.Event(enable_timing=True)
        a.record()
        fn()
        b.record()
        b.synchronize()
        times.append(a.elapsed_time(b) * 1e3)
    times.sort()
    n = len(times)
    return times[n // 2] if n % 2 else 0.5 * (times[n // 2 - 1] + times[n // 2])


def add(peer, op, shape, fn, runs=30):
    try:
        us = bench(fn, runs=runs)
        peers.append({"peer": peer, "operator": op, "shape": shape, "median_us": us})
        print(f"{peer:22s} {op:28s} {shape:48s} {us:10.2f} us", flush=True)
    except Exception as e:  # a peer that cannot run is reported, not fatal
        print(f"{peer:22s} {op:28s} {shape:48s} failed: {e}", flush=True)


def linear_peers(quick):
    dev = "cuda"
    for name, n, k, rows in [("kda_qkv", 8192, 4096, DEC), ("mla_q_b", 16384, 1536, DEC),
                             ("dense_down", 4096, 12288, DEC), ("expert_up", 2048, 4096, DEC),
                             ("lm_head", 154880, 4096, DEC), ("kda_qkv", 8192, 4096, PRE),
                             ("dense_up", 12288, 4096, PRE), ("mla_o", 4096, 16384, PRE)]:
        w = torch.randn(n, k, device=dev, dtype=torch.bfloat16) / math.sqrt(k)
        for m in rows:
            if quick and m == 8192:
                continue
            x = torch.randn(m, k, device=dev, dtype=torch.bfloat16)
            shape = f"x[{m},{k}] W[{n},{k}] bf16 -> f32"
            add("torch-eager", f"linear.{name}", shape, lambda: F.linear(x, w).float())
        del w


# The quantized decode rows of g1_cases_linear.cpp (run_quantized_linear_cases): [n, k] at
# glm-5.3-flash's geometry, by the checkpoint's format. torch._scaled_mm on sm_90 multiplies FP8
# E4M3 with one scale per tensor or per row / column (and, in torch builds that have it, 1 x 128 /
# 128 x 128 blocks); it has no FP4 and no E8M0-per-32 (MX) path below sm_100, so the NVFP4 rows
# get no peer and the MXFP8 rows the nearest one: the same FP8 bytes with row scales. Its output
# is BF16 where ours is FP32 (4 bytes a value; negligible beside the weights at decode rows).
QUANT = [("nvfp4.expert_up", "nvfp4", 2048, 4096), ("nvfp4.expert_down", "nvfp4", 4096, 2048),
         ("mxfp8.kda_qkv", "mxfp8", 8192, 4096), ("mxfp8.dense_down", "mxfp8", 4096, 12288),
         ("mxfp8.lm_head", "mxfp8", VOCAB, 4096), ("fp8_block.mla_q_a", "fp8_block", 1536, 4096),
         ("fp8_block.mla_q_b", "fp8_block", 16384, 1536), ("fp8_block.mla_o", "fp8_block", 4096, 16384)]


def quantized_peers(quick):
    dev = "cuda"
    f8 = torch.float8_e4m3fn
    for name, fmt, n, k in QUANT:
        if fmt == "nvfp4":
            continue
        w = (torch.randn(n, k, device=dev) / math.sqrt(k)).clamp(-1, 1)
        w8 = (w * 448.0).to(f8)  # row-major [n, k]; w8.t() is the column-major [k, n] operand
        col_scale = torch.full((1, n), 1.0 / 448.0, device=dev)
        one = torch.ones((), device=dev)
        blocks = None
        if k % 128 == 0 and n % 128 == 0:
            blocks = torch.full((k // 128, n // 128), 1.0 / 448.0, device=dev)
        for m in DEC:
            if quick and m == 16:
                continue
            x = torch.randn(m, k, device=dev).to(f8)
            row_scale = torch.ones((m, 1), device=dev)
            shape = f"x[{m},{k}] W[{n},{k}] {fmt} -> f32"
            op = "linear." + name
            add("scaled_mm_tensorwise", op, shape,
                lambda x=x: torch._scaled_mm(x, w8.t(), scale_a=one, scale_b=one,
                                             out_dtype=torch.bfloat16))
            add("scaled_mm_rowwise", op, shape,
                lambda x=x, rs=row_scale: torch._scaled_mm(x, w8.t(), scale_a=rs,
                                                           scale_b=col_scale,
                                                           out_dtype=torch.bfloat16))
            if fmt == "fp8_block" and blocks is not None:
                # 1 x 128 activation blocks (outer-dim major, as torch's blockwise path wants)
                # and the checkpoint's 128 x 128 weight blocks.
                xs = torch.ones((k // 128, m), device=dev).t()
                add("scaled_mm_block128", op, shape,
                    lambda x=x, xs=xs: torch._scaled_mm(x, w8.t(), scale_a=xs, scale_b=blocks,
                                                        out_dtype=torch.bfloat16))


def norm_peers(quick):
    rows = DEC + [r for r in PRE if not (quick and r == 8192)]
    for n in (4096, 512, 1536):
        w = torch.rand(n, device="cuda") + 0.5
        for m in rows:
            x = torch.randn(m, n, device="cuda")
            add("torch-eager", f"rms_norm.d{n}", f"x[{m},{n}] f32",
                lambda: x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + 1e-5) * w)
    w = torch.rand(128, device="cuda") + 0.5
    b = torch.rand(128, device="cuda") * 0.1
    for m in rows:
        x = torch.randn(m, 128, device="cuda")
        add("torch-eager", "layer_norm.index_key", f"x[{m},128] f32",
            lambda: F.layer_norm(x, (128,), w, b, 1e-6))
    table = torch.randn(VOCAB, D, device="cuda", dtype=torch.bfloat16)
    for m in rows:
        ids = torch.randint(0, VOCAB, (m,), device="cuda")
        add("torch-eager", "embedding", f"ids[{m}] table[154880,4096] bf16 -> [rows,4,4096] f32",
            lambda: F.embedding(ids, table).float().unsqueeze(1).expand(m, 4, D).contiguous())


def kda_shape(seqs, n):
    return f"{seqs} seq x {n} rows, H 64, K=V 128"


def kda_peers(quick):
    hk = H * K
    # Conv + gates, eager.
    conv_w = torch.randn(3, hk, 4, device="cuda") * 0.4
    a_log = torch.rand(H, device="cuda") * 2.6 + 0.1
    dt = torch.randn(hk, device="cuda") * 0.5

    def conv_gates(raw, hist, f, bl, seqs, n):
        outs = []
        for p in range(3):
            x = torch.cat([hist[:, p], raw[p].view(seqs, n, hk)], dim=1)  # [B, 3+n, HK]
            y = F.conv1d(x.transpose(1, 2), conv_w[p].unsqueeze(1), groups=hk).transpose(1, 2)
            outs.append(F.silu(y))
        q = F.normalize(outs[0].reshape(-1, H, K), dim=-1, eps=1e-3) / math.sqrt(K)
        k = F.normalize(outs[1].reshape(-1, H, K), dim=-1, eps=1e-3)
        g = -5.0 * torch.sigmoid(torch.exp(a_log).view(1, H, 1) * (f.view(-1, H, K) + dt.view(1, H, K)))
        return q, k, outs[2], torch.exp(g), torch.sigmoid(bl)

    cases = [(r, 1) for r in DEC] + [(1, n) for n in PRE if not (quick and n == 8192)]
    for seqs, n in cases:
        rows = seqs * n
        raw = torch.randn(3, rows, hk, device="cuda")
        hist = torch.randn(seqs, 3, 3, hk, device="cuda")
        f = torch.randn(rows, hk, device="cuda")
        bl = torch.randn(rows, H, device="cuda")
        add("torch-eager", "kda.conv_gates", kda_shape(seqs, n),
            lambda: conv_gates(raw, hist, f, bl, seqs, n))

    # Recurrent decode, eager: one step for B sequences.
    for seqs in DEC:
        S = torch.randn(seqs, H, K, K, device="cuda") * 0.1
        q = F.normalize(torch.randn(seqs, H, K, device="cuda"), dim=-1)
        k = F.normalize(torch.randn(seqs, H, K, device="cuda"), dim=-1)
        v = torch.randn(seqs, H, K, device="cuda")
        d = torch.exp(-5 * torch.sigmoid(torch.randn(seqs, H, K, device="cuda") * 2.5 - 3))
        beta = torch.rand(seqs, H, 1, device="cuda")

        def step():
            s = S * d.unsqueeze(-1)
            kv = torch.einsum("bhk,bhkv->bhv", k, s)
            s = s + torch.einsum("bhk,bhv->bhkv", k, beta * (v - kv))
            return torch.einsum("bhk,bhkv->bhv", q, s), s

        add("torch-eager", "kda.recurrent_decode", kda_shape(seqs, 1), step)

    try:
        from fla.ops.kda import chunk_kda, fused_recurrent_kda
    except Exception as e:
        print(f"fla-core unavailable: {e}", flush=True)
        chunk_kda = fused_recurrent_kda = None
    for n in PRE + [77]:
        if quick and n == 8192:
            continue
        q = F.normalize(torch.randn(1, n, H, K, device="cuda"), dim=-1)
        k = F.normalize(torch.randn(1, n, H, K, device="cuda"), dim=-1)
        v = torch.randn(1, n, H, K, device="cuda")
        g = -5 * torch.sigmoid(torch.randn(1, n, H, K, device="cuda") * 2.5 - 3)
        beta = torch.rand(1, n, H, device="cuda")
        s0 = torch.randn(1, H, K, K, device="cuda") * 0.1
        shape = kda_shape(1, n)
        if chunk_kda is not None:
            for dtype, tag in [(torch.bfloat16, "bf16"), (torch.float32, "f32")]:
                qq, kk, vv = q.to(dtype), k.to(dtype), v.to(dtype)
                add(f"fla-core chunk_kda {tag}", "kda.prefill", shape,
                    lambda: chunk_kda(qq, kk, vv, g, beta, scale=1.0, initial_state=s0,
                                      output_final_state=True))
            add("fla-core fused_recurrent_kda", "kda.prefill", shape,
                lambda: fused_recurrent_kda(q, k, v, g, beta, scale=1.0, initial_state=s0,
                                            output_final_state=True))
        if n <= 2048:  # the eager token loop: thousands of launches per call
            def loop():
                S = s0[0].clone()
                out = []
                for t in range(n):
                    S = S * torch.exp(g[0, t]).unsqueeze(-1)
                    kv = torch.einsum("hk,hkv->hv", k[0, t], S)
                    S = S + torch.einsum("hk,hv->hkv", k[0, t], beta[0, t].unsqueeze(-1) * (v[0, t] - kv))
                    out.append(torch.einsum("hk,hkv->hv", q[0, t], S))
                return out
            add("torch-eager", "kda.prefill", shape, loop, runs=3)

    for m in DEC + [r for r in PRE if not (quick and r == 8192)]:
        o = torch.randn(m, H, K, device="cuda")
        gate = torch.randn(m, H, K, device="cuda")
        w = torch.rand(K, device="cuda") + 0.5
        add("torch-eager", "kda.output_gate", f"o[{m},64x128] f32",
            lambda: o * torch.rsqrt(o.pow(2).mean(-1, keepdim=True) + 1e-5) * w * torch.sigmoid(gate))


def mla_peers():
    R = 512
    for fmt in ("bf16", "fp8_g128"):
        for rows in DEC:
            L = 2048
            lat = torch.randn(rows * L, R, device="cuda")
            if fmt == "bf16":
                pages = lat.to(torch.bfloat16)
            else:
                scale = lat.view(-1, 4, 128).abs().amax(-1, keepdim=True) / 448
                pages = (lat.view(-1, 4, 128) / scale).to(torch.float8_e4m3fn)
            idx = torch.randperm(rows * L, device="cuda").view(rows, L)
            qt = torch.randn(rows, H, R, device="cuda")

            def attend():
                if fmt == "bf16":
                    c = pages[idx].float()
                else:
                    c = (pages[idx].float() * scale[idx]).view(rows, L, R)
                s = torch.einsum("bhr,blr->bhl", qt, c) * 0.0625
                return torch.einsum("bhl,blr->bhr", torch.softmax(s, -1), c)

            add("torch-eager", f"mla.decode.{fmt}",
                f"{rows} rows x 2048 attended of 2048, H 64, R 512, block 64", attend)


def router_and_sampling_peers(quick):
    bias = torch.randn(E, device="cuda") * 0.02
    for m in DEC + [r for r in PRE if not (quick and r == 8192)]:
        logits = torch.randn(m, E, device="cuda") * 2

        def route():
            s = torch.sigmoid(logits)
            _, idx = torch.topk(s + bias, 8, dim=-1)
            w = torch.gather(s, 1, idx)
            return idx, w / w.sum(-1, keepdim=True) * 2.5

        add("torch-eager", "moe.router", f"logits[{m},288] f32, top-8", route)
    for m in DEC:
        logits = torch.randn(m, VOCAB, device="cuda") * 4
        add("torch-eager", "sampling.greedy", f"logits[{m},154880] f32",
            lambda: torch.argmax(torch.nan_to_num(logits, nan=-math.inf), -1))


def mhc_and_dsa_peers(quick):
    N = 4 * D
    fn = torch.randn(24, N, device="cuda") * 0.02
    base = torch.randn(24, device="cuda") * 0.3
    scale = torch.rand(3, device="cuda") + 0.5
    for m in DEC + [r for r in PRE if not (quick and r == 8192)]:
        X = torch.randn(m, 4, D, device="cuda")

        def hc_pre():
            v = X.reshape(m, N)
            mixes = (v @ fn.t()) * torch.rsqrt(v.pow(2).mean(-1, keepdim=True) + 1e-5)
            pre = torch.sigmoid(mixes[:, :4] * scale[0] + base[:4]) + 1e-6
            post = 2 * torch.sigmoid(mixes[:, 4:8] * scale[1] + base[4:8])
            comb = torch.softmax((mixes[:, 8:] * scale[2] + base[8:]).view(m, 4, 4), -1) + 1e-6
            comb = comb / (comb.sum(1, keepdim=True) + 1e-6)
            for _ in range(19):
                comb = comb / (comb.sum(2, keepdim=True) + 1e-6)
                comb = comb / (comb.sum(1, keepdim=True) + 1e-6)
            return (pre.unsqueeze(-1) * X).sum(1), post, comb

        add("torch-eager", "mhc.pre", f"X[{m},4,4096] f32", hc_pre)
    pooled = torch.randn(2048, 128, device="cuda")
    for m in DEC + [512]:
        q = torch.randn(m, 32, 128, device="cuda")
        w = torch.randn(m, 32, device="cuda")
        add("torch-eager", "dsa.pool_scores", f"{m} rows x 2048 pools, 32 heads x 128",
            lambda: (torch.relu(torch.einsum("rhd,pd->rhp", q, pooled)) * w.unsqueeze(-1)).sum(1)
            / math.sqrt(128 * 32))


def main():
    global flush
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", required=True)
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--only", default="linear,quantized,norm,kda,mla,router,mhc")
    args = ap.parse_args()
    if not torch.cuda.is_available():
        sys.exit("g1_peers.py needs a CUDA device")
    torch.manual_seed(0)
    flush = torch.empty(256 << 20, dtype=torch.uint8, device="cuda")
    only = set(args.only.split(","))
    with torch.inference_mode():
        if "linear" in only:
            linear_peers(args.quick)
        if "quantized" in only:
            quantized_peers(args.quick)
        if "norm" in only:
            norm_peers(args.quick)
        if "kda" in only:
            kda_peers(args.quick)
        if "mla" in only:
            mla_peers()
        if "router" in only:
            router_and_sampling_peers(args.quick)
        if "mhc" in only:
            mhc_and_dsa_peers(args.quick)
    with open(args.out, "w") as f:
        json.dump({"peers": peers}, f, indent=1)
    print(f"{len(peers)} peer timings written to {args.out}")


if __name__ == "__main__":
    main()
