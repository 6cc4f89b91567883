#!/usr/bin/env python3
"""Medians of session 25's alternated speculation_bench runs, per build and cell.

Usage: python3 bench_table.py [folder [prefix build...]]
  default: this file's folder, bench-{main,sel,both}-N.json;
  the grouped GEMV's A/B: python3 bench_table.py grouped-gemv hb head group
Prints, per (concurrency, k): each build's median over its runs of the run's median tok/s, the
runs' range, the change against the first build, and the output hashes seen (one per cell when
identical).
"""
import glob
import json
import os
import statistics
import sys

def main():
    here = os.path.dirname(os.path.abspath(__file__))
    folder = os.path.join(here, sys.argv[1]) if len(sys.argv) > 1 else here
    prefix = sys.argv[2] if len(sys.argv) > 2 else "bench"
    builds = sys.argv[3:] if len(sys.argv) > 3 else ["main", "sel", "both"]
    cells = {}
    for build in builds:
        for path in sorted(glob.glob(os.path.join(folder, f"{prefix}-{build}-*.json"))):
            with open(path) as f:
                for c in json.load(f)["cells"]:
                    cell = cells.setdefault((c["concurrency"], c["k"]), {})
                    cell.setdefault(build, []).append(
                        (c["median_decode_tok_s"], c["output_sha256"][:8], c["tokens_per_verify_step"]))
    for key in sorted(cells):
        cell = cells[key]
        base = statistics.median(x[0] for x in cell[builds[0]])
        line = f"C{key[0]} k={key[1]} tokens/step={cell[builds[0]][0][2]:.2f}"
        for build in builds:
            rates = [x[0] for x in cell.get(build, [])]
            if not rates:
                continue
            m = statistics.median(rates)
            line += f" | {build} {m:6.0f} ({min(rates):.0f}-{max(rates):.0f}) {100 * (m / base - 1):+5.1f}%"
        hashes = {x[1] for runs in cell.values() for x in runs}
        print(line + f" | hashes {sorted(hashes)}")


if __name__ == "__main__":
    main()
