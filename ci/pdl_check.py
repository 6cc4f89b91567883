#!/usr/bin/env python3
"""Every kernel launched with programmatic dependent launch waits for the kernel ahead first.

A kernel launched through `launch_dependent` (engine/backend/cuda/pdl.cuh) may start while the
kernel ahead of it still runs. It must call `pdl_wait()` before it reads what that kernel wrote,
before any write and before it exits (an early `return` included): otherwise it reads stale data,
or ends before the kernel ahead and lets the kernel after it start too soon. The CUDA tests catch
such a race only when it happens to bite, so this check reads the sources: for each
`launch_dependent(KERNEL, ...)` (KERNEL may be a local `auto* name = kernel<...>;`), the
`__global__` definition of KERNEL must reach `pdl_wait()` (in its body, or in a `__device__`
function it calls, two levels deep) before its first `return` (returns inside lambdas do not
count). Reading before the wait is not checked here (weights only, by pdl.cuh's rule).

Run: python3 ci/pdl_check.py [--root REPO]; exits 1 naming each kernel that fails, 0 otherwise.
"""
import argparse
import pathlib
import re
import sys

MAX_SOURCE_BYTES = 4 << 20  # a CUDA source larger than this is not ours: refuse it


def strip_comments(text):
    text = re.sub(r"//[^\n]*", "", text)
    return re.sub(r"/\*.*?\*/", "", text, flags=re.S)


def strip_lambdas(body):
    # A lambda's own `return` is not the kernel's: drop one-level lambda bodies.
    return re.sub(r"\[[^\]]*\]\s*\([^()]*\)\s*(?:->\s*[\w:<>*& ]+)?\{[^{}]*\}", "[]{}", body)


def matching(text, start, open_c, close_c):
    """Index of the bracket closing the one at text[start]."""
    depth = 0
    for i in range(start, len(text)):
        if text[i] == open_c:
            depth += 1
        elif text[i] == close_c:
            depth -= 1
            if depth == 0:
                return i
    raise ValueError("unbalanced " + open_c + close_c)


def function_body(text, paren):
    """The body of the function whose parameter list opens at text[paren]."""
    close = matching(text, paren, "(", ")")
    brace = text.find("{", close)
    semi = text.find(";", close)
    if brace < 0 or (0 <= semi < brace):
        return None  # a declaration
    return text[brace + 1:matching(text, brace, "{", "}")]


class Sources:
    def __init__(self, folder):
        self.files = {}
        for path in sorted(folder.glob("*.cu")) + sorted(folder.glob("*.cuh")):
            if path.stat().st_size > MAX_SOURCE_BYTES:
                raise SystemExit(f"pdl_check: {path} is larger than {MAX_SOURCE_BYTES} bytes")
            self.files[path] = strip_comments(path.read_text())

    def definition(self, name, qualifier):
        for text in self.files.values():
            pattern = qualifier + r"[^;{}]*?\b" + re.escape(name) + r"\s*\("
            for m in re.finditer(pattern, text):
                body = function_body(text, m.end() - 1)
                if body is not None:
                    return strip_lambdas(body)
        return None

    def waits_before_returning(self, body, depth=0):
        wait = body.find("pdl_wait()")
        if wait < 0 and depth < 2:
            for m in re.finditer(r"\b(\w+)\s*(?:<[^;(){}]*>)?\s*\(", body):
                helper = self.definition(m.group(1), r"__device__")
                if helper is not None and self.waits_before_returning(helper, depth + 1):
                    wait = m.start()
                    break
        if wait < 0:
            return False
        early = re.search(r"\breturn\b", body)
        return early is None or wait < early.start()


def launched_kernels(sources):
    """(file, kernel name) for every launch_dependent call outside pdl.cuh."""
    for path, text in sources.files.items():
        if path.name == "pdl.cuh":
            continue
        for m in re.finditer(r"launch_dependent\(\s*([A-Za-z_]\w*)", text):
            name = m.group(1)
            alias = re.findall(r"auto\s*\*\s*" + name + r"\s*=\s*([A-Za-z_]\w*)", text[:m.start()])
            yield path, alias[-1] if alias else name


def problems(root):
    sources = Sources(pathlib.Path(root) / "engine" / "backend" / "cuda")
    found = []
    for path, name in launched_kernels(sources):
        body = sources.definition(name, r"__global__")
        if body is None:
            found.append(f"{path.name}: launch_dependent({name}): no __global__ definition found")
        elif not sources.waits_before_returning(body):
            found.append(f"{path.name}: {name} is launched with launch_dependent but does not "
                         "call pdl_wait() before its first return")
    return found


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--root", default=str(pathlib.Path(__file__).resolve().parent.parent))
    args = parser.parse_args()
    found = problems(args.root)
    for line in found:
        print("pdl_check: " + line)
    if not found:
        print("pdl_check: every kernel launched with launch_dependent waits first")
    return 1 if found else 0


if __name__ == "__main__":
    sys.exit(main())
