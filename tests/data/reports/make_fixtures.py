"""Writes the two small bundles the reports tests read (run once; the output is committed):

  2026-11-29-g2-tinyglm-micro-measurement  a single-arm G2 measurement, 3 repetitions
  2026-11-29-g2-kv-fp8-g128-ab             an A/B of kv_cache_dtype bf16 -> fp8_g128, 5 pairs

The request records are synthetic (seeded) but follow harness/request_record.h field for field;
the metrics are computed from them with the definitions of gates/case_metrics.h, and the A/B
numbers with the algorithms stated in harness/statistics.h (SplitMix64 bootstrap of the median
ratio, exact two-sided Mann-Whitney U), so the fixtures agree with what the runner would write.
Every file is listed in `artifacts` with its sha256 and size, so the bundles also verify.

Run: python3 tests/data/reports/make_fixtures.py
"""
import hashlib
import itertools
import json
import math
import os
import random
import shutil

HERE = os.path.dirname(os.path.abspath(__file__))
MASK = (1 << 64) - 1
WORKLOAD_ID = "tinyglm-gate"
CASES = [("decode_c1", 1, 0.0), ("mixed_c4", 4, 0.25)]  # id, concurrency, stagger seconds
OUTPUT_TOKENS = 8

WORKLOAD_SPEC = {
    "id": WORKLOAD_ID,
    "description": "tinyGLM gate, fixture-sized",
    "prompt_builder": {"kind": "counting", "seed": 7},
    "sampling": {"temperature": 0.0, "ignore_eos": True, "max_tokens": OUTPUT_TOKENS},
    "warmups": 1,
    "cases": [
        {"id": "decode_c1", "prompt_tokens": 128, "concurrency": 1,
         "arrival": {"kind": "closed"}},
        {"id": "mixed_c4", "prompt_tokens": 4096, "concurrency": 4,
         "arrival": {"kind": "staggered", "offset_s": 0.25}},
    ],
}


def sha256(data):
    return hashlib.sha256(data).hexdigest()


def dump(obj):
    return (json.dumps(obj, indent=2, ensure_ascii=False, sort_keys=True) + "\n").encode()


# --- harness/statistics.h, as stated there ---------------------------------------------------
def median(xs):
    s = sorted(xs)
    n = len(s)
    return s[n // 2] if n % 2 else (s[n // 2 - 1] + s[n // 2]) / 2


def nearest_rank(xs, p):
    s = sorted(xs)
    r = p / 100 * len(s)
    rank = round(r) if abs(r - round(r)) < 1e-9 else math.ceil(r)
    return s[max(rank, 1) - 1]


class SplitMix64:
    def __init__(self, seed):
        self.state = seed & MASK

    def next(self):
        self.state = (self.state + 0x9E3779B97F4A7C15) & MASK
        z = self.state
        z = ((z ^ (z >> 30)) * 0xBF58476D1CE4E5B9) & MASK
        z = ((z ^ (z >> 27)) * 0x94D049BB133111EB) & MASK
        return z ^ (z >> 31)

    def below(self, n):
        threshold = ((1 << 64) - n) % n
        while True:
            x = self.next()
            if x >= threshold:
                return x % n


def median_ratio(b, c):
    if b == 0:
        return 1.0 if c == 0 else math.copysign(math.inf, c)
    return c / b


def bootstrap_ci(base, cand, seed=20261129, resamples=10000, level=0.95):
    rng = SplitMix64(seed)
    ratios = []
    for _ in range(resamples):
        mb = median([base[rng.below(len(base))] for _ in base])
        mc = median([cand[rng.below(len(cand))] for _ in cand])
        ratios.append(median_ratio(mb, mc))
    return [nearest_rank(ratios, 100 * (1 - level) / 2), nearest_rank(ratios, 100 * (1 + level) / 2)]


def u_of(a, b):
    return sum(1.0 if x > y else 0.5 if x == y else 0.0 for x in a for y in b)


def mann_whitney_p_exact(a, b):
    pooled = a + b
    assert len(set(pooled)) == len(pooled), "fixture samples must not tie"
    ua = u_of(a, b)
    observed = max(ua, len(a) * len(b) - ua)
    count = total = 0
    for pick in itertools.combinations(range(len(pooled)), len(a)):
        xs = [pooled[i] for i in pick]
        ys = [pooled[i] for i in range(len(pooled)) if i not in pick]
        total += 1
        if u_of(xs, ys) >= observed:
            count += 1
    return min(1.0, 2 * count / total)


def compare(base, cand, higher_is_better, min_effect_pct=5.0, alpha=0.05):
    ratio = median_ratio(median(base), median(cand))
    change = (ratio - 1) * 100
    lo, hi = bootstrap_ci(base, cand)
    p = mann_whitney_p_exact(base, cand)
    verdict = "neutral-noisy"
    if p < alpha:
        if lo > 1 and change >= min_effect_pct:
            verdict = "better" if higher_is_better else "worse"
        elif hi < 1 and change <= -min_effect_pct:
            verdict = "worse" if higher_is_better else "better"
    return change, [lo, hi], p, verdict


# --- records --------------------------------------------------------------------------------
def make_records(rng, arm, repetitions, ttft_s, gap_s, clock):
    """One arm's records: warmup (-1) then measured repetitions; returns records, new clock."""
    records = []
    for case_id, concurrency, stagger in CASES:
        for rep in [-1] + list(range(repetitions)):
            t0 = clock
            for index in range(concurrency):
                start = t0 + index * stagger + rng.uniform(0, 0.002)
                # Later arrivals queue behind earlier prefills: TTFT grows with the index.
                first = start + ttft_s * (1 + 0.6 * index) * rng.uniform(0.9, 1.1)
                events, t = [], first
                for _ in range(OUTPUT_TOKENS):
                    events.append(round(t, 6))
                    t += gap_s * rng.uniform(0.85, 1.15)
                ids = [(17 * (i + 3) + index) % 500 for i in range(OUTPUT_TOKENS)]
                text = " ".join(str(i) for i in ids)
                marker = f"[m-{case_id}-{rep}-{index}]"
                records.append({
                    "arm": arm, "workload": WORKLOAD_ID, "case_id": case_id, "repetition": rep, "index": index,
                    "marker": marker, "start_s": round(start, 6),
                    "first_output_s": events[0], "first_visible_s": events[0],
                    "output_event_s": events, "end_s": round(events[-1] + 0.0005, 6),
                    "ok": True, "http_status": 200, "error": "", "finish_reason": "length",
                    "prompt_tokens": 128 if case_id == "decode_c1" else 4096,
                    "completion_tokens": OUTPUT_TOKENS, "cached_tokens": 0,
                    "reasoning_tokens": 0, "token_ids": ids, "output_text": text,
                    "reasoning_text": "", "output_sha256": sha256(text.encode()),
                    "reasoning_sha256": sha256(b""),
                    "token_ids_sha256": sha256(",".join(map(str, ids)).encode()),
                    "client_overhead_median_s": 0.00002, "client_overhead_max_s": 0.00011,
                })
            clock = max(r["end_s"] for r in records) + 0.05
    return records, clock


def case_metrics(records, arm, case_id):
    """Per measured repetition: the metrics of gates/case_metrics.h used in the fixtures."""
    out = {"aggregate_decode_tok_s": [], "wall_s": [], "ttft_s": [], "decode_tok_s": []}
    reps = sorted({r["repetition"] for r in records if r["arm"] == arm and r["case_id"] == case_id
                   and r["repetition"] >= 0})
    for rep in reps:
        group = [r for r in records
                 if r["arm"] == arm and r["case_id"] == case_id and r["repetition"] == rep]
        tokens = sum(r["completion_tokens"] - 1 for r in group)
        first_output = min(r["first_output_s"] for r in group)
        last_end = max(r["end_s"] for r in group)
        out["aggregate_decode_tok_s"].append(tokens / (last_end - first_output))
        out["wall_s"].append(last_end - min(r["start_s"] for r in group))
        out["ttft_s"].append(median([r["first_output_s"] - r["start_s"] for r in group]))
        out["decode_tok_s"].append(median([
            (r["completion_tokens"] - 1) / (r["output_event_s"][-1] - r["output_event_s"][0])
            for r in group]))
    return out


UNITS = {"aggregate_decode_tok_s": ("tok/s", True), "wall_s": ("s", False),
         "ttft_s": ("s", False), "decode_tok_s": ("tok/s", True)}


def side(xs):
    if not xs:
        return None
    return {"median": median(xs), "min": min(xs), "max": max(xs), "samples": xs}


def metrics(records, with_baseline):
    out = []
    for case_id, _, _ in CASES:
        cand = case_metrics(records, "candidate", case_id)
        base = case_metrics(records, "baseline", case_id) if with_baseline else None
        for name, (unit, higher) in UNITS.items():
            m = {"name": name, "unit": unit, "workload": WORKLOAD_ID, "case": case_id,
                 "direction": "higher" if higher else "lower", "n": len(cand[name]),
                 "baseline": side(base[name]) if base else None, "candidate": side(cand[name]),
                 "change_pct": None, "ci95": None, "p": None, "verdict": "measured"}
            if base:
                change, ci, p, verdict = compare(base[name], cand[name], higher)
                m.update({"change_pct": change, "ci95": ci, "p": p, "verdict": verdict})
            out.append(m)
    return out


def effective_config(kv_dtype):
    return {"preset": "tinyglm-micro", "model": "", "num-layers": 0, "seed": 0,
            "precision-mode": "strict", "max-seq-len": 0, "max-num-seqs": 4,
            "max-batch-size": 0, "max-prefill-tokens": 8192, "kv-cache-memory-bytes": 67108864,
            "gpu-memory-utilization": 0.9, "block-size": 16, "kv-cache-dtype": kv_dtype,
            "enable-prefix-caching": False, "device": "cpu", "threads": 2, "world-size": 1,
            "master-addr": "127.0.0.1", "master-port": 29500, "tp-size": 1,
            "bind": "127.0.0.1", "port": 41000 if kv_dtype == "bf16" else 41001}


def arm_identity(label, kv_dtype):
    config = effective_config(kv_dtype)
    return {"label": label, "commit": "af5e772c0d1b2a3948576f6e5d4c3b2a19080706",
            "clean_tree": True, "binary_sha256": sha256(b"sparkglm-serve fixture binary"),
            "profile": "", "profile_sha256": "",
            "effective_config_sha256": sha256(json.dumps(config, sort_keys=True,
                                                         separators=(",", ":")).encode()),
            "model": {"preset": "tinyglm-micro", "config_sha256": sha256(b"tinyglm-micro"),
                      "weights": "dummy-seed:0"},
            "device": "cpu",
            "args": ["--preset", "tinyglm-micro", "--kv-cache-dtype", kv_dtype]}


ENVIRONMENT = {"host": "fixture-host", "os": "Debian GNU/Linux 12 (bookworm)",
               "cpu": "AMD EPYC 9654 96-Core Processor", "cpu_cores": 2,
               "memory_bytes": 8589934592, "gpus": [], "driver": "", "cuda": "", "nccl": "",
               "compiler": "GNU-12.2.0"}


def write_bundle(bundle_id, record, files):
    folder = os.path.join(HERE, bundle_id)
    shutil.rmtree(folder, ignore_errors=True)
    artifacts = []
    for path, kind, data in files:
        full = os.path.join(folder, path)
        os.makedirs(os.path.dirname(full), exist_ok=True)
        with open(full, "wb") as f:
            f.write(data)
        artifacts.append({"path": path, "kind": kind, "sha256": sha256(data), "bytes": len(data)})
    record["artifacts"] = sorted(artifacts, key=lambda a: a["path"])
    with open(os.path.join(folder, "qualification.json"), "wb") as f:
        f.write(dump(record))


def jsonl(records):
    return "".join(json.dumps(r, ensure_ascii=False, separators=(",", ":")) + "\n"
                   for r in records).encode()


def gates(summary, criteria):
    # A pass names what it checked (docs/qualification-bundle.md, consistency).
    return [{"id": "G0", "status": "pass", "summary": "build, unit tests and format green",
             "criteria": [{"name": "committed bundles verify", "observed": 0, "threshold": 0,
                           "pass": True}]},
            {"id": "G2", "status": "pass", "summary": summary, "criteria": criteria}]


def main():
    spec = dump(WORKLOAD_SPEC)
    workload = [{"id": WORKLOAD_ID, "spec_sha256": sha256(spec), "scale": 0.05}]

    # The single-arm measurement.
    rng = random.Random(11)
    records, _ = make_records(rng, "candidate", 3, ttft_s=0.040, gap_s=0.012, clock=0.5)
    m_id = "2026-11-29-g2-tinyglm-micro-measurement"
    write_bundle(m_id, {
        "schema": "sparkglm.qualification/1", "id": m_id,
        "title": "G2 tinyGLM measurement, tinyglm-micro, CPU (fixture)",
        "created_at": "2026-11-29T21:04:05Z", "state": "measurement", "level": "G2",
        "target": "Records the tinyglm-micro serving speed on CPU with the default KV cache dtype.",
        "change": {"class": "launcher-profile", "option": None, "baseline": None,
                   "candidate": arm_identity("candidate", "bf16")},
        "environment": ENVIRONMENT, "workloads": workload,
        "gates": gates("deterministic across 3 repetitions",
                       [{"name": "deterministic across repetitions", "observed": True,
                         "threshold": True, "pass": True}]),
        "metrics": metrics(records, False),
        "limitations": ["Synthetic fixture for the report tests; the times are generated, "
                        "not measured.",
                        "G2 numbers are never full-model throughput."],
        "attestation": {"status": "unattested", "by": "", "date": ""},
    }, [("requests.jsonl", "requests", jsonl(records)),
        (f"workloads/{WORKLOAD_ID}.json", "workload", spec),
        ("server/candidate/effective-config.json", "config", dump(effective_config("bf16")))])

    # The A/B: interleaved arms, the candidate decoding faster with a longer first token.
    rng = random.Random(23)
    base, clock = make_records(rng, "baseline", 5, ttft_s=0.040, gap_s=0.012, clock=0.5)
    cand, _ = make_records(rng, "candidate", 5, ttft_s=0.046, gap_s=0.010, clock=clock)
    records = base + cand
    ab_id = "2026-11-29-g2-kv-fp8-g128-ab"
    write_bundle(ab_id, {
        "schema": "sparkglm.qualification/1", "id": ab_id,
        "title": "G2 A/B: kv_cache_dtype fp8_g128 vs bf16, tinyglm-micro, CPU (fixture)",
        # Unsigned, so a measurement: any other state needs a trusted maintainer's signature.
        "created_at": "2026-11-29T21:30:00Z", "state": "measurement", "level": "G2",
        "target": "fp8_g128 KV cache keeps token ids and does not slow tinyglm-micro decode.",
        "change": {"class": "launcher-profile",
                   "option": {"name": "kv_cache_dtype", "value": "fp8_g128"},
                   "baseline": arm_identity("baseline", "bf16"),
                   "candidate": arm_identity("candidate", "fp8_g128")},
        "environment": ENVIRONMENT, "workloads": workload,
        "gates": gates("token ids equal to baseline; aggregate tok/s within bounds",
                       [{"name": "token-id sha256 equal to baseline", "observed": True,
                         "threshold": True, "pass": True},
                        {"name": "median aggregate tok/s / baseline", "observed": 1.19,
                         "threshold": 0.95, "pass": True}]),
        "metrics": metrics(records, True),
        "limitations": ["Synthetic fixture for the report tests; the times are generated, "
                        "not measured."],
        "attestation": {"status": "unattested", "by": "", "date": ""},
    }, [("requests.jsonl", "requests", jsonl(records)),
        (f"workloads/{WORKLOAD_ID}.json", "workload", spec),
        ("server/baseline/effective-config.json", "config", dump(effective_config("bf16"))),
        ("server/candidate/effective-config.json", "config",
         dump(effective_config("fp8_g128")))])


if __name__ == "__main__":
    main()
