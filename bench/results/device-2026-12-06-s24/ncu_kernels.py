#!/usr/bin/env python3
"""Per-kernel device time from `ncu --metrics gpu__time_duration.sum --csv` output (gzip'd).

Usage: python3 ncu_kernels.py ncu-k0.csv.gz [more.csv.gz ...]
Prints, per file, the 30 kernels with the most total time: total us, launches, us per launch.
ncu runs each kernel alone (serialised, caches flushed), so tiny kernels read slower than in a
replayed graph: compare kernels and launch counts across files, not these sums with step times.
"""
import collections
import csv
import gzip
import re
import sys

UNIT = {"nsecond": 1.0, "ns": 1.0, "usecond": 1e3, "us": 1e3, "msecond": 1e6, "ms": 1e6}


def load(path):
    with gzip.open(path, "rt") as f:
        lines = [line for line in f if line.startswith('"')]
    rows = []
    for r in csv.DictReader(lines):
        if r.get("Metric Name") != "gpu__time_duration.sum":
            continue
        ns = float(r["Metric Value"].replace(",", "")) * UNIT[r.get("Metric Unit", "nsecond")]
        rows.append((re.sub(r"\(.*", "", r["Kernel Name"])[:70], ns))
    return rows


def main():
    for path in sys.argv[1:]:
        rows = load(path)
        total, count = collections.Counter(), collections.Counter()
        for name, ns in rows:
            total[name] += ns
            count[name] += 1
        print(f"== {path}: {len(rows)} kernels, {sum(total.values()) / 1e3:.1f} us total")
        for name, ns in total.most_common(30):
            print(f"{ns / 1e3:10.1f} us {count[name]:6d}x {ns / count[name] / 1e3:8.2f} us/launch  {name}")


if __name__ == "__main__":
    main()
