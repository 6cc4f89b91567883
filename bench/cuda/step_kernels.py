#!/usr/bin/env python3
"""Where one engine step spends its device time, kernel by kernel, from an Nsight Compute CSV.

Input: `ncu --csv --metrics gpu__time_duration.sum,dram__bytes_read.sum,... --log-file F` over a
runner bench (bench/cuda/step_kernels.sh makes it). Output: every kernel of the last step (the
launches from the last `--step-start` kernel on), then the same grouped by kernel name, with the
time, the DRAM bytes read and the rate while the kernel ran; the sum of the durations last.

    python3 bench/cuda/step_kernels.py ncu.csv [--step-start embed_kernel]
"""
import argparse
import collections
import csv
import re
import sys

TIME = "gpu__time_duration.sum"  # ns
BYTES = "dram__bytes_read.sum"


def number(text):
    return float(text.replace(",", ""))


def kernel_name(text):
    """`void f<1, 2>((anonymous namespace)::Args)` -> `f<1, 2>` (the arguments dropped)."""
    name = text.replace("(anonymous namespace)::", "").replace("unnamed>::", "")
    name = re.sub(r"^void ", "", name)
    depth = 0
    for i, c in enumerate(name):  # cut at the first '(' outside template brackets
        if c == "<":
            depth += 1
        elif c == ">":
            depth -= 1
        elif c == "(" and depth == 0:
            return name[:i]
    return name


def launches(rows):
    """{launch id: {name, grid, block, metric: value}} from ncu's raw CSV rows (one per metric)."""
    header, out = None, {}
    for row in rows:
        if row and row[0] == "ID":
            header = row
            continue
        if not header or len(row) != len(header):
            continue  # ncu's own messages
        r = dict(zip(header, row))
        try:
            i = int(r["ID"])
            value = number(r["Metric Value"])
        except ValueError:
            continue
        k = out.setdefault(i, {"name": kernel_name(r["Kernel Name"]), "grid": r["Grid Size"],
                               "block": r["Block Size"]})
        k[r["Metric Name"]] = value
    return out


def last_step(kernels, start):
    ids = sorted(i for i, k in kernels.items() if TIME in k)
    starts = [i for i in ids if kernels[i]["name"].startswith(start)]
    if not starts:
        raise SystemExit(f"step_kernels: no launch of a kernel named {start}* (give --step-start)")
    return [i for i in ids if i >= starts[-1]]


def report(kernels, ids, out):
    total = 0.0
    for i in ids:
        k = kernels[i]
        us = k[TIME] / 1000
        total += us
        print(f"{k['name'][:48]:48s} grid {k['grid']:>14s} block {k['block']:>12s} {us:9.1f} us "
              f"{k.get(BYTES, 0) / 1e6:9.2f} MB", file=out)
    print(f"# {len(ids)} launches, {total:.1f} us of kernel time", file=out)
    groups = collections.defaultdict(lambda: [0, 0.0, 0.0])
    for i in ids:
        g = groups[kernels[i]["name"]]
        g[0] += 1
        g[1] += kernels[i][TIME]
        g[2] += kernels[i].get(BYTES, 0)
    print("# by kernel: launches, us, % of the step, MB read, GB/s while running", file=out)
    for name, (n, ns, b) in sorted(groups.items(), key=lambda x: -x[1][1]):
        print(f"#   {name[:48]:48s} {n:4d} {ns / 1000:9.1f} {100 * ns / 1000 / total:5.1f} "
              f"{b / 1e6:9.1f} {b / ns:7.0f}", file=out)
    return total


def main(argv):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("csv")
    ap.add_argument("--step-start", default="embed_kernel",
                    help="the name of the first kernel of a step (default: embed_kernel)")
    a = ap.parse_args(argv)
    with open(a.csv, newline="") as f:
        kernels = launches(csv.reader(f))
    if not kernels:
        raise SystemExit(f"step_kernels: {a.csv} holds no ncu metric rows (was it --csv --page raw?)")
    report(kernels, last_step(kernels, a.step_start), sys.stdout)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
