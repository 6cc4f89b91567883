"""tinyGLM in PyTorch: the users' default alternative that SparkGLM's CUDA engine is compared with.

The model (MODEL.md sections 2-5, no MTP) lives beside this file: peer_mhc (hyper-connections),
peer_kda (KDA, chunked prefill and recurrent decode), peer_mla (MLA + DSA indexer, absorbed form),
peer_moe (router, experts, dense MLP), peer_model (layers, caches), peer_config (presets, weights).
Precision: projections in BF16 (torch matmul on BF16 tensors: FP32 accumulation, BF16 output, upcast);
norms, mHC, router, indexer head sum, softmax and the KDA state in FP32; the MLA latent and indexer-key
caches in BF16. With --check everything is float64 on the CPU.

  bench:  python3 bench/torch/tinyglm_torch.py --preset tinyglm --device cuda --modes eager,compile \\
              --out torch_peer.json
  check:  python3 bench/torch/tinyglm_torch.py --check CKPT_DIR --device cpu   (float64; exit 1 above
          the tolerance; --device cuda checks the BF16 path and the compiled decode step)

Cells: decode_cC = one decode step of C sequences that each hold a 128-token prefill (tok/s = C / step
time); prefill_N = a cold prefill of N tokens in forwards of --prefill-chunk tokens (tok/s = N / time).
Compile mode: the decode step is compiled whole with --decode-compile-mode (reduce-overhead: CUDA
graphs, which needs the graph-friendly dense MoE); prefill compiles its per-layer pieces with
--prefill-compile-mode while the expert loop and the KDA chunk scan stay in Python.
"""
import argparse
import json
import math
import os
import statistics
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
sys.path.insert(1, os.path.join(HERE, "..", "..", "tests", "python"))  # reference_forward.py

import torch  # noqa: E402

from peer_config import checkpoint_weights, load_config, preset, random_weights  # noqa: E402
from peer_model import TinyGlm  # noqa: E402

SCHEMA = "sparkglm.torch_peer/1"
CHECK_TOLERANCE = 1e-8  # float64 against float64: only summation order and the chunked KDA form differ
CHECK_TOLERANCE_BF16 = 5e-2  # --device cuda: BF16 projections and caches against float64
DEFAULT_CELLS = "decode_c1,decode_c4,decode_c8,prefill_8192,prefill_32768,prefill_65536"


# ---------------------------------------------------------------------------------------------------
# Correctness check against reference_forward.py
# ---------------------------------------------------------------------------------------------------

def check_prompts(vocab):
    text = list(b"SparkGLM checks its PyTorch peer against the float64 numpy reference, one token at a "
                b"time: KDA chunks, sparse pools, routed experts and hyper-connections.")
    long = ([258, 260, 263] + text * 2)[:150]
    return [p for p in (long, long[:40], [258, 260, 263, 72, 101]) if max(p) < vocab]


def rel_err(got, want):
    got, want = got.double(), torch.as_tensor(want, dtype=torch.float64)
    return float((got - want).abs().max() / want.abs().max().clamp(min=1e-30))


def run_check(ckpt, perturb=None, decode_steps=4, verbose=True, device="cpu"):
    """Compares last-position prefill logits and batched decode-step logits with reference_forward.forward
    for a few prompts. On the CPU everything is float64; on CUDA the bench's precisions (BF16
    projections, FP32 elsewhere) and the decode step also runs compiled (reduce-overhead, dense MoE).
    Returns {comparison: relative error}."""
    import reference_forward as ref
    cuda = device.startswith("cuda")
    pd, fd = (torch.bfloat16, torch.float32) if cuda else (torch.float64, torch.float64)
    c = load_config(ckpt)
    config, tensors = ref.load_checkpoint(ckpt)
    W = checkpoint_weights(c, ckpt, device, pd, fd)
    if perturb is not None:
        perturb(W)
    model = TinyGlm(c, W, pd, fd)
    model.mla_block = 8                           # several attention blocks, dense and sparse, per chunk
    prompts = check_prompts(c["vocab_size"])
    refs = [ref.forward(config, tensors, p)[0] for p in prompts]
    tensor = lambda xs: torch.tensor(xs, device=device)
    errors = {}
    for p, want in zip(prompts, refs):
        cache = model.new_cache(1, len(p), device)
        got = model.prefill(tensor(p), cache, 0, chunk=96)       # 96: a chunk boundary inside a KDA chunk
        errors[f"prefill T={len(p)} last logits"] = rel_err(got.cpu(), want[-1])
    variants = [("loop", None), ("dense", None)]
    if cuda:
        for t in model.W.values():
            torch._dynamo.mark_static_address(t)
        variants.append(("compiled", torch.compile(model.decode_step, mode="reduce-overhead")))
    for name, step in variants:
        cache = model.new_cache(len(prompts), max(map(len, prompts)), device)
        if step is not None:
            for t in cache.tensors():
                torch._dynamo.mark_static_address(t)
        for b, p in enumerate(prompts):
            model.prefill(tensor(p[:-decode_steps]), cache, b, chunk=96)
        for j in range(decode_steps):
            toks = tensor([p[len(p) - decode_steps + j] for p in prompts])
            got = model.decode(toks, cache, step, moe_impl="loop" if name == "loop" else "dense").cpu()
            for b, (p, want) in enumerate(zip(prompts, refs)):
                errors[f"decode[{name}] T={len(p)} step {j}"] = rel_err(got[b], want[len(p) - decode_steps + j])
    if verbose:
        for k, v in errors.items():
            print(f"  {k:40s} max|torch-ref|/max|ref| = {v:.3e}")
    return errors


# ---------------------------------------------------------------------------------------------------
# Benchmark
# ---------------------------------------------------------------------------------------------------

class Timer:
    """CUDA events around a region on the GPU (synchronized before and after), perf_counter on the CPU."""

    def __init__(self, device):
        self.cuda = device.startswith("cuda")

    def sync(self):
        if self.cuda:
            torch.cuda.synchronize()

    def time_ms(self, fn):
        self.sync()
        if not self.cuda:
            t0 = time.perf_counter()
            fn()
            return (time.perf_counter() - t0) * 1e3
        a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        a.record()
        fn()
        b.record()
        torch.cuda.synchronize()
        return a.elapsed_time(b)


def compile_model(model, args):
    """torch.compile: the decode step whole, the prefill pieces one by one (W tensors and caches are
    marked static so that CUDA graphs do not copy them)."""
    cfg = torch._dynamo.config
    for name in ("cache_size_limit", "recompile_limit", "accumulated_cache_size_limit", "accumulated_recompile_limit"):
        if hasattr(cfg, name):
            setattr(cfg, name, 256)
    for t in model.W.values():
        torch._dynamo.mark_static_address(t)
    pieces = dict(model.piece)
    dynamic = {"expert": True}                    # tokens per expert vary; the rest sees fixed chunks
    model.piece = {k: torch.compile(f, mode=args.prefill_compile_mode, dynamic=dynamic.get(k))
                   for k, f in pieces.items()}
    return pieces, torch.compile(model.decode_step, mode=args.decode_compile_mode)


def decode_cell(model, C, mode, args, step, eager_pieces, timer, device, gen):
    warm = 3 if mode == "eager" else 6
    cache = model.new_cache(C, 128 + warm + args.decode_runs + 8, device)
    if mode == "compile":
        for t in cache.tensors():
            torch._dynamo.mark_static_address(t)
    compiled_pieces, model.piece = model.piece, eager_pieces      # the 128-token prefills are setup
    try:
        for b in range(C):
            model.prefill(torch.randint(0, 256, (128,), generator=gen, device="cpu").to(device), cache, b)
    finally:
        model.piece = compiled_pieces
    moe_impl = "loop" if mode == "eager" else "dense"
    toks = lambda: torch.randint(0, 256, (C,), generator=gen).to(device)
    t_warm = time.time()
    for _ in range(warm):                         # compiles and records CUDA graphs in compile mode
        model.decode(toks(), cache, step, moe_impl)
    timer.sync()
    t_start = time.time()
    samples = []
    for _ in range(args.decode_runs):
        tk = toks()
        samples.append(timer.time_ms(lambda: model.decode(tk, cache, step, moe_impl)))
        if time.time() - t_start > args.max_seconds and len(samples) < 10:
            return {"skipped": f"exceeded --max-seconds {args.max_seconds} after {len(samples)} runs"}
    return {"runs": samples, "tokens": C, "note": f"moe={moe_impl}; warmup {warm} steps {t_start - t_warm:.1f} s"}


def prefill_cell(model, N, mode, args, timer, device, gen):
    toks = torch.randint(0, 256, (N,), generator=gen).to(device)

    def once():
        cache = model.new_cache(1, N, device)
        timer.sync()
        return timer.time_ms(lambda: model.prefill(toks, cache, 0, chunk=args.prefill_chunk))

    t_warm = time.time()
    warm_ms = once()                              # warmup (compiles in compile mode), not recorded
    if mode == "compile":
        warm_ms = once()                          # a second one: steady time for the budget estimate
    t_start = time.time()
    samples = []
    while len(samples) < args.prefill_runs:
        if time.time() - t_start + (samples[-1] if samples else warm_ms) / 1e3 > args.max_seconds:
            return {"skipped": f"would exceed --max-seconds {args.max_seconds} (warmup {warm_ms / 1e3:.1f} s, "
                               f"{len(samples)} runs done: {[round(s, 1) for s in samples]} ms)"}
        samples.append(once())
    return {"runs": samples, "tokens": N, "note": f"chunk={args.prefill_chunk}; warmup {t_start - t_warm:.1f} s"}


def run_bench(args):
    device = args.device
    if device.startswith("cuda"):
        torch.backends.cuda.matmul.allow_tf32 = False           # FP32 parts stay FP32 (the contract)
        torch.backends.cudnn.allow_tf32 = False
    pd = torch.bfloat16 if device.startswith("cuda") else torch.float32
    fd = torch.float32
    if args.checkpoint:
        c = load_config(args.checkpoint)
        W = checkpoint_weights(c, args.checkpoint, device, pd, fd)
        weights = f"checkpoint:{args.checkpoint}"
    else:
        c = preset(args.preset)
        W = random_weights(c, device, pd, seed=args.seed)
        weights = "random"
    model = TinyGlm(c, W, pd, fd)
    timer = Timer(device)
    gen = torch.Generator().manual_seed(args.seed)
    out = {"schema": SCHEMA, "preset": args.preset if not args.checkpoint else c.get("model_type"),
           "device": torch.cuda.get_device_name() if device.startswith("cuda") else "cpu",
           "torch": torch.__version__, "weights": weights,
           "compile_modes": {"decode": args.decode_compile_mode, "prefill": args.prefill_compile_mode},
           "cells": []}
    eager_pieces = dict(model.piece)
    for mode in args.modes.split(","):
        step = model.decode_step
        if mode == "compile":
            eager_pieces, step = compile_model(model, args)
        elif mode != "eager":
            raise SystemExit(f"--modes: expected eager and/or compile, got {mode!r}")
        for cell in args.cells.split(","):
            kind, _, n = cell.partition("_")
            try:
                if kind == "decode":
                    r = decode_cell(model, int(n.lstrip("c")), mode, args, step, eager_pieces, timer, device, gen)
                elif kind == "prefill":
                    r = prefill_cell(model, int(n), mode, args, timer, device, gen)
                else:
                    raise SystemExit(f"--cells: unknown cell {cell!r}")
            except torch.cuda.OutOfMemoryError as e:
                r = {"skipped": f"out of memory: {str(e).splitlines()[0]}"}
            if device.startswith("cuda"):
                torch.cuda.empty_cache()
            if "skipped" in r:
                rec = {"cell": cell, "mode": mode, "skipped": r["skipped"]}
            else:
                med = statistics.median(r["runs"])
                note = r["note"] + (f"; torch.compile decode={args.decode_compile_mode} "
                                    f"prefill={args.prefill_compile_mode}" if mode == "compile" else "")
                rec = {"cell": cell, "mode": mode, "tokens_per_s": r["tokens"] / (med / 1e3), "median_ms": med,
                       "runs": len(r["runs"]), "samples_ms": [round(s, 4) for s in r["runs"]], "note": note}
            print(json.dumps(rec), flush=True)
            out["cells"].append(rec)
            if args.out:                          # after every cell, so a cut-short run keeps what it has
                with open(args.out, "w") as f:
                    json.dump(out, f, indent=1)
        if mode == "compile":
            model.piece = eager_pieces
    return 0


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--preset", default="tinyglm", choices=["tinyglm", "tinyglm-micro"])
    ap.add_argument("--checkpoint", help="checkpoint directory (config.json + safetensors) instead of a preset")
    ap.add_argument("--weights", default="random", choices=["random"], help="without --checkpoint: random")
    ap.add_argument("--device", default="cuda")
    ap.add_argument("--modes", default="eager,compile")
    ap.add_argument("--cells", default=DEFAULT_CELLS)
    ap.add_argument("--out")
    ap.add_argument("--max-seconds", type=float, default=60.0, help="wall budget per cell")
    ap.add_argument("--decode-runs", type=int, default=20)
    ap.add_argument("--prefill-runs", type=int, default=3)
    ap.add_argument("--prefill-chunk", type=int, default=8192)
    ap.add_argument("--decode-compile-mode", default="reduce-overhead")
    ap.add_argument("--prefill-compile-mode", default="default",
                    help="max-autotune-no-cudagraphs autotuned ~5 min at 8192 tokens on an H200 and "
                    "picked cuBLAS for most GEMMs")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--check", metavar="DIR", help="compare with reference_forward.py on this checkpoint "
                    "(float64 on the CPU unless --device cuda)")
    args = ap.parse_args()
    if args.check:
        errors = run_check(args.check, device=args.device if args.device.startswith("cuda") else "cpu")
        worst = max(errors.values())
        tol = CHECK_TOLERANCE_BF16 if args.device.startswith("cuda") else CHECK_TOLERANCE
        ok = math.isfinite(worst) and worst < tol
        print(f"{'PASS' if ok else 'FAIL'}: max normalized error {worst:.3e} (tolerance {tol:g})")
        return 0 if ok else 1
    return run_bench(args)


if __name__ == "__main__":
    sys.exit(main())
