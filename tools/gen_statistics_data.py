#!/usr/bin/env python3
"""Generates tests/data/statistics/scipy_cases.json: reference numbers for harness/statistics.cpp.

    .venv/bin/python3 tools/gen_statistics_data.py > tests/data/statistics/scipy_cases.json

scipy is needed only here, once; the JSON is committed and the C++ test reads it. For each case of
two samples `a` and `b` it records:
  - u_a: scipy.stats.mannwhitneyu(a, b).statistic (U of a);
  - p_exact (only when the pooled sample has no ties): two-sided p with method="exact";
  - p_asymptotic: two-sided p with method="asymptotic", use_continuity=True (tie-corrected);
  - median_a, median_b: numpy.median;
  - percentiles_a: numpy.percentile(a, p, method="inverted_cdf"), which is the nearest rank.
It also records "bootstrap" cases recomputed here from the algorithm written in docs/statistics.md
(splitmix64, rejection sampling, numpy-identical medians, nearest-rank ends), so that the C++
interval is checked against an independent implementation of the description, not against itself.
"""

import json
import math
import sys

import numpy as np
from scipy import stats

PERCENTILES = [1, 10, 25, 50, 70, 90, 95, 99, 99.9, 100]
MASK64 = (1 << 64) - 1


def cases():
    """~30 pairs of samples: sizes 1..60, ties, identical arms, negatives, separated and overlapping."""
    rng = np.random.RandomState(20261129)

    def lognormal(n, scale, sigma=0.1):
        return [float(x) for x in np.round(scale * rng.lognormal(0, sigma, n), 6)]

    def normal(n, mean, sd, decimals=6):
        return [float(x) for x in np.round(rng.normal(mean, sd, n), decimals)]

    def integers(n, lo, hi):
        return [float(x) for x in rng.randint(lo, hi, n)]

    base25 = lognormal(25, 100, 0.05)
    out = [
        ("one_each_different", [1.0], [2.0]),
        ("one_each_identical", [5.0], [5.0]),
        ("identical_samples_5", [1.0, 2.0, 3.0, 4.0, 5.0], [1.0, 2.0, 3.0, 4.0, 5.0]),
        ("constant_equal_arms_4", [7.0] * 4, [7.0] * 4),
        ("separated_3v3", [1.0, 2.0, 3.0], [4.0, 5.0, 6.0]),
        ("interleaved_3v3", [1.0, 3.0, 5.0], [2.0, 4.0, 6.0]),
        ("separated_4v4", [10.1, 10.2, 10.3, 10.4], [11.1, 11.2, 11.3, 11.4]),
        ("random_5v7", normal(5, 0, 1), normal(7, 0.5, 1)),
        ("shift_8v8", normal(8, 10, 1), normal(8, 11, 1)),
        ("shift_9v9", normal(9, 10, 1), normal(9, 10.8, 1)),
        ("integer_ties_10v12", integers(10, 0, 6), integers(12, 1, 7)),
        ("negative_values_6v6", normal(6, -5, 2), normal(6, -3, 2)),
        ("negative_mixed_ties_8v9", integers(8, -3, 3), integers(9, -2, 4)),
        ("latency_20v20", lognormal(20, 0.25), lognormal(20, 0.24)),
        ("shift_5pct_30v30", lognormal(30, 100, 0.03), lognormal(30, 105, 0.03)),
        ("no_ties_50v50", normal(50, 0, 1), normal(50, 0.3, 1)),
        ("no_ties_51v50", normal(51, 0, 1), normal(50, 0.3, 1)),
        ("no_ties_60v60", normal(60, 0, 1), normal(60, 0.2, 1)),
        ("ties_60v55", normal(60, 0, 1, 1), normal(55, 0.2, 1, 1)),
        ("one_vs_20", [3.5], normal(20, 3, 1)),
        ("two_vs_40", [0.1, 0.2], normal(40, 0.5, 0.2)),
        ("heavy_ties_15v3", [1.0] * 7 + [2.0] * 5 + [3.0] * 3, [2.0, 2.0, 3.0]),
        ("one_cross_tie_6v6", [1.0, 2.0, 3.0, 4.0, 5.0, 6.5], [6.5, 7.0, 8.0, 9.0, 10.0, 11.0]),
        ("doubled_25v25", base25, [2 * x for x in base25]),
        ("token_counts_12v12", integers(12, 100, 106), integers(12, 101, 107)),
        ("lognormal_40v45", lognormal(40, 1.0, 0.2), lognormal(45, 1.1, 0.2)),
        ("reversed_7v7", [21.0, 22.0, 23.0, 24.0, 25.0, 26.0, 27.0],
         [1.0, 2.0, 3.0, 4.0, 5.0, 6.0, 7.0]),
        ("fifty_vs_3", normal(50, 0, 1), [-0.05, 0.01, 0.07]),
        ("separated_45v50", normal(45, 0, 0.1), normal(50, 10, 0.1)),
        ("decimals_10v10", [0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8, 0.9, 1.0],
         [0.15, 0.25, 0.35, 0.45, 0.55, 0.65, 0.75, 0.85, 0.95, 1.05]),
    ]
    return out


def has_ties(a, b):
    pooled = a + b
    return len(set(pooled)) != len(pooled)


def scipy_case(name, a, b):
    asym = stats.mannwhitneyu(a, b, alternative="two-sided", method="asymptotic",
                              use_continuity=True)
    case = {
        "name": name,
        "a": a,
        "b": b,
        "u_a": float(asym.statistic),
        "p_asymptotic": float(asym.pvalue),
        "median_a": float(np.median(a)),
        "median_b": float(np.median(b)),
        "percentiles_a": [{"p": p, "value": float(np.percentile(a, p, method="inverted_cdf"))}
                          for p in PERCENTILES],
    }
    if not has_ties(a, b):
        exact = stats.mannwhitneyu(a, b, alternative="two-sided", method="exact")
        assert exact.statistic == asym.statistic
        case["p_exact"] = float(exact.pvalue)
    return case


class SplitMix64:
    """The generator of docs/statistics.md, in plain integers."""

    def __init__(self, seed):
        self.state = seed & MASK64

    def next(self):
        self.state = (self.state + 0x9E3779B97F4A7C15) & MASK64
        z = self.state
        z = ((z ^ (z >> 30)) * 0xBF58476D1CE4E5B9) & MASK64
        z = ((z ^ (z >> 27)) * 0x94D049BB133111EB) & MASK64
        return z ^ (z >> 31)

    def below(self, n):
        threshold = (1 << 64) % n
        while True:
            x = self.next()
            if x >= threshold:
                return x % n


def nearest_rank(p, n):
    x = p * n / 100.0
    nearest = round(x)
    rank = nearest if abs(x - nearest) <= 1e-9 else math.ceil(x)
    return min(max(int(rank), 1), n)


def reference_median(xs):
    s = sorted(xs)
    h = len(s) // 2
    return s[h] if len(s) % 2 else (s[h - 1] + s[h]) / 2


def ratio(b, c):
    if c == b:
        return 1.0
    if b == 0:
        return math.copysign(math.inf, c)
    return c / b


def bootstrap(baseline, candidate, seed, resamples, level):
    g = SplitMix64(seed)
    ratios = []
    for _ in range(resamples):
        mb = reference_median([baseline[g.below(len(baseline))] for _ in baseline])
        mc = reference_median([candidate[g.below(len(candidate))] for _ in candidate])
        ratios.append(ratio(mb, mc))
    ratios.sort()
    lo = ratios[nearest_rank(100 * (1 - level) / 2, resamples) - 1]
    hi = ratios[nearest_rank(100 * (1 + level) / 2, resamples) - 1]
    return lo, hi


def bootstrap_cases(by_name):
    out = []
    for name, seed, resamples, level in [("latency_20v20", 20261129, 2000, 0.95),
                                         ("shift_8v8", 1, 1000, 0.9),
                                         ("random_5v7", 42, 999, 0.5),
                                         ("separated_3v3", 20261129, 1000, 0.95)]:
        a, b = by_name[name]
        # Positive samples only: a ratio of medians means nothing across zero.
        low = min(a + b)
        if low <= 0:
            a = [x - low + 1 for x in a]
            b = [x - low + 1 for x in b]
        lo, hi = bootstrap(a, b, seed, resamples, level)
        out.append({"name": name, "baseline": a, "candidate": b, "seed": seed,
                    "resamples": resamples, "level": level, "lo": lo, "hi": hi})
    return out


def main():
    raw = cases()
    by_name = {name: (a, b) for name, a, b in raw}
    g = SplitMix64(1234567)
    doc = {
        "generator": f"tools/gen_statistics_data.py with scipy {__import__('scipy').__version__}, "
                     f"numpy {np.__version__}",
        "splitmix64_seed_1234567": [str(g.next()) for _ in range(5)],
        "cases": [scipy_case(name, a, b) for name, a, b in raw],
        "bootstrap": bootstrap_cases(by_name),
    }
    json.dump(doc, sys.stdout, indent=1)
    sys.stdout.write("\n")


if __name__ == "__main__":
    main()
