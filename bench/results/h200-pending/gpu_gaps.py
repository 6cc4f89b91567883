#!/usr/bin/env python3
"""Where the GPU waits: busy time and gaps in an `nsys stats --report cuda_gpu_trace --format csv`
trace (kernels and copies, one row each), step by step.

Usage: python3 gpu_gaps.py trace.csv[.gz]
A step starts at each `unpack_kernel` (StepInputs::load, once per engine step). Per step: the span
from its first to its last operation, the time some operation ran (their union), and the gaps
between operations; then the medians over the steps after the first tenth (warm-up), and the gap
before each step (from the previous step's last operation), which is the host's round trip when
steps do not pipeline.
"""
import csv
import gzip
import statistics
import sys


def rows(path):
    opener = gzip.open if path.endswith(".gz") else open
    with opener(path, "rt") as f:
        lines = [line for line in f if line.strip()]
    head = next(i for i, line in enumerate(lines) if "Start" in line and "Duration" in line)
    for r in csv.DictReader(lines[head:]):
        start = next(v for k, v in r.items() if k and k.startswith("Start"))
        dur = next(v for k, v in r.items() if k and k.startswith("Duration"))
        name = r.get("Name") or r.get("Kernel Name") or ""
        yield float(start) / 1e3, float(dur) / 1e3, name  # ns -> us


def main():
    ops = sorted(rows(sys.argv[1]))
    starts = [i for i, (_, _, n) in enumerate(ops) if "unpack_kernel" in n]
    steps = []
    for a, b in zip(starts, starts[1:]):
        seg = ops[a:b]
        end, busy, gaps = seg[0][0], 0.0, []
        for s, d, _ in seg:
            if s > end:
                gaps.append(s - end)
            busy += max(0.0, s + d - max(s, end))
            end = max(end, s + d)
        before = ops[a][0] - max(s + d for s, d, _ in ops[max(0, a - 400):a]) if a > 0 else 0.0
        steps.append((end - seg[0][0], busy, sum(gaps), max(gaps, default=0.0), before, len(seg)))
    warm = steps[len(steps) // 10:]
    if not warm:
        print(sys.argv[1], "no steps found")
        return
    med = lambda i: statistics.median(x[i] for x in warm)  # noqa: E731
    print(f"{sys.argv[1]}: {len(warm)} steps after warm-up; medians: span {med(0):.1f} us, "
          f"busy {med(1):.1f} us, gaps inside {med(2):.1f} us (largest {med(3):.1f}), "
          f"idle before the step {med(4):.1f} us, {med(5):.0f} operations")


if __name__ == "__main__":
    main()
