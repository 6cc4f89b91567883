"""End-to-end check of the engine's forward pass against the independent numpy reference.

Run by CTest as:  python3 test_reference_logits.py --bin-dir <cmake build dir>

1. `sparkglm tinyglm make --preset tinyglm-micro --out <tmp>/ckpt` writes a checkpoint directory.
2. For a ~40-token prompt (long enough for the tinyglm-micro indexer, topk 16 = 4 pools of 4, to
   select sparsely) and a 5-token prompt, `sparkglm logits --model <tmp>/ckpt --tokens ... --mtp
   --out <tmp>/engine.npz` writes logits [T, vocab], hidden [T, D] and mtp_logits [T-1, vocab].
3. reference_forward.py computes the same in float64 from the same files; every array must satisfy
   max|engine - ref| / max|ref| < 1e-4.
4. The long prompt again on a copy of the checkpoint whose gate_proj/up_proj weights are multiplied by
   4 (exact in BF16/F32), so that the SwiGLU clamp at swiglu_limit is active in the routed and
   shared experts (and the dense MLP, which must not clamp, sees large values too).
"""

import argparse
import json
import os
import shutil
import subprocess
import sys
import struct
import tempfile

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import reference_forward as ref  # noqa: E402

TOLERANCE = 1e-4

# 3 special tokens then bytes: 40 tokens in all.
LONG_PROMPT = [258, 260, 263] + list(b"Hello, SparkGLM! Sparse pools: 0123456789")[:37]
SHORT_PROMPT = [258, 260, 263, 72, 101]


def run(cmd):
    print("$", " ".join(cmd), flush=True)
    proc = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    if proc.stdout.strip():
        print(proc.stdout.rstrip())
    if proc.returncode != 0:
        raise RuntimeError(f"command failed with exit status {proc.returncode}: {' '.join(cmd)}")


def scaled_swiglu_checkpoint(src, dst, factor=4.0):
    """Copies the checkpoint directory and multiplies every gate_proj/up_proj weight by `factor` (a
    power of two, so BF16 and F32 values stay exact), patching the shard bytes in place."""
    shutil.copytree(src, dst)
    for shard in sorted(f for f in os.listdir(dst) if f.endswith(".safetensors")):
        path = os.path.join(dst, shard)
        with open(path, "r+b") as f:
            (hlen,) = struct.unpack("<Q", f.read(8))
            header = json.loads(f.read(hlen))
            for name, spec in header.items():
                if name == "__metadata__" or not name.endswith(("gate_proj.weight", "up_proj.weight")):
                    continue
                begin, end = spec["data_offsets"]
                f.seek(8 + hlen + begin)
                buf = f.read(end - begin)
                if spec["dtype"] == "BF16":
                    x = (np.frombuffer(buf, "<u2").astype(np.uint32) << 16).view(np.float32) * np.float32(factor)
                    out = (x.view(np.uint32) >> 16).astype("<u2").tobytes()
                elif spec["dtype"] == "F32":
                    out = (np.frombuffer(buf, "<f4") * np.float32(factor)).astype("<f4").tobytes()
                else:
                    raise RuntimeError(f"{name}: cannot rescale dtype {spec['dtype']}")
                f.seek(8 + hlen + begin)
                f.write(out)


def rel_err(engine, reference):
    return float(np.max(np.abs(engine.astype(np.float64) - reference)) / max(np.max(np.abs(reference)), 1e-30))


def check_prompt(binary, ckpt, config, tensors, tokens, workdir, label):
    out = os.path.join(workdir, f"engine_{label}.npz")
    run([binary, "logits", "--model", ckpt, "--tokens", ",".join(map(str, tokens)), "--mtp", "--out", out])
    engine = np.load(out)

    info_main, info_mtp = {}, {}
    logits, h = ref.forward(config, tensors, tokens, info_main)
    mtp = ref.mtp_forward(config, tensors, tokens, h, info_mtp)
    n_mla = sum(1 for k in ref.layer_kinds(config) if k == ref.MLA_KIND)
    print(f"[{label}] T = {len(tokens)}; reference sparse query positions: "
          f"{info_main.get('sparse_positions', 0)} over {n_mla} MLA layer(s), "
          f"{info_mtp.get('sparse_positions', 0)} in the MTP layer")
    margins = {k: v for d in (info_main, info_mtp) for k, v in d.items() if k.startswith("min_")}
    if margins:
        print(f"[{label}] smallest top-k boundary margins (selection flips below ~1e-6 would be "
              f"precision, not logic): " + ", ".join(f"{k} {float(v):.3g}" for k, v in margins.items()))

    failures = []
    for name, want in (("logits", logits), ("hidden", h), ("mtp_logits", mtp)):
        if name not in engine.files:
            failures.append(f"{name}: missing from the engine's npz (has {engine.files})")
            continue
        got = engine[name]
        if got.shape != want.shape:
            failures.append(f"{name}: engine shape {got.shape}, reference shape {want.shape}")
            continue
        if want.size == 0:
            continue
        if not np.all(np.isfinite(got)):
            failures.append(f"{name}: engine output has non-finite values")
            continue
        err = rel_err(got, want)
        worst = np.unravel_index(np.argmax(np.abs(got - want)), want.shape)
        status = "ok" if err < TOLERANCE else "FAIL"
        print(f"[{label}] {name:10s} max|engine-ref|/max|ref| = {err:.3e}  (worst at {tuple(int(i) for i in worst)}) {status}")
        if err >= TOLERANCE:
            per_row = [rel_err(got[i], want[i]) for i in range(want.shape[0])]
            first_bad = next(i for i, e in enumerate(per_row) if e >= TOLERANCE)
            failures.append(f"{name}: relative error {err:.3e} >= {TOLERANCE:g}; first position over "
                            f"tolerance: {first_bad}")
    return failures


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--bin-dir", required=True, help="CMake build directory holding sparkglm")
    parser.add_argument("--preset", default="tinyglm-micro")
    parser.add_argument("--keep", action="store_true", help="keep the scratch directory")
    args = parser.parse_args()

    binary = os.path.join(args.bin_dir, "sparkglm")
    if not os.access(binary, os.X_OK):
        print(f"FAIL: no executable sparkglm in {args.bin_dir}")
        return 1

    workdir = tempfile.mkdtemp(prefix="sparkglm_ref_")
    failures = []
    try:
        ckpt = os.path.join(workdir, "ckpt")
        run([binary, "tinyglm", "make", "--preset", args.preset, "--out", ckpt])
        config, tensors = ref.load_checkpoint(ckpt)
        vocab = config["vocab_size"]
        for label, tokens in (("long", LONG_PROMPT), ("short", SHORT_PROMPT)):
            if max(tokens) >= vocab:
                raise RuntimeError(f"prompt token {max(tokens)} outside the vocabulary ({vocab})")
            failures += [f"[{label}] {f}" for f in check_prompt(binary, ckpt, config, tensors, tokens, workdir, label)]

        # Clamp run: large gate/up values so that SiLU(min(gate, limit)) * clamp(up) matters.
        clamp_ckpt = os.path.join(workdir, "ckpt_clamp")
        scaled_swiglu_checkpoint(ckpt, clamp_ckpt)
        config, tensors = ref.load_checkpoint(clamp_ckpt)
        unclamped = dict(config, swiglu_limit=None)
        l_c, _ = ref.forward(config, tensors, LONG_PROMPT)
        l_u, _ = ref.forward(unclamped, tensors, LONG_PROMPT)
        print(f"[clamp] reference logits with vs without the clamp differ by {rel_err(l_u, l_c):.3g} "
              f"(relative), so the clamp is exercised")
        failures += [f"[clamp] {f}" for f in check_prompt(binary, clamp_ckpt, config, tensors, LONG_PROMPT,
                                                           workdir, "clamp")]
    except Exception as e:  # a failing command or an unreadable checkpoint is a test failure
        failures.append(f"{type(e).__name__}: {e}")
    finally:
        if args.keep:
            print("scratch directory kept:", workdir)
        else:
            shutil.rmtree(workdir, ignore_errors=True)

    if failures:
        print("FAIL: engine and numpy reference disagree:")
        for f in failures:
            print("  " + f)
        return 1
    print("PASS: engine matches the numpy reference within", TOLERANCE)
    return 0


if __name__ == "__main__":
    sys.exit(main())
