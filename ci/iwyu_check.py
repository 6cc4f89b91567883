#!/usr/bin/env python3
"""Reads include-what-you-use's report (stdin) and fails on one class of finding only: a file uses a
symbol of a standard header that it reaches only through another standard header, where that
header is one a libstdc++ release has stopped including transitively (GCC's porting notes: 11
dropped <limits>, <memory>, <utility>'s users, <thread>; 13 dropped <string>, <system_error>,
<cstdint>, <cstdio>, <cstdlib>). Such a file compiles with one g++ (12's <string> pulls in
<cstdint>) and breaks with the next (13's does not), so the header must be included directly, or
by one of the project's own headers (which the project controls).

Everything else IWYU says (headers to remove, forward declarations, other standard headers, Boost,
libstdc++-private or POSIX headers, suggestions without a symbol, the operators and allocator
machinery IWYU attributes to a header no code names) is not this class and is ignored.

Usage: include-what-you-use ... | python3 ci/iwyu_check.py --root REPO
"""
import argparse
import os
import re
import sys

# The C++ standard library headers (C++20) and the C headers' <cname> forms.
STANDARD = set("""
algorithm any array atomic barrier bit bitset charconv chrono codecvt compare complex concepts
condition_variable coroutine deque exception execution expected filesystem format forward_list
fstream functional future initializer_list iomanip ios iosfwd iostream istream iterator latch limits
list locale map memory memory_resource mutex new numbers numeric optional ostream queue random
ranges ratio regex scoped_allocator semaphore set shared_mutex source_location span sstream stack
stdexcept stop_token streambuf string string_view strstream syncstream system_error thread tuple
type_traits typeindex typeinfo unordered_map unordered_set utility valarray variant vector version
cassert cctype cerrno cfenv cfloat cinttypes climits clocale cmath csetjmp csignal cstdarg cstddef
cstdint cstdio cstdlib cstring ctime cuchar cwchar cwctype
""".split())

# The headers libstdc++ releases have stopped including from other standard headers: a use that
# reaches one of them transitively is what breaks on the next g++.
# (<system_error> is left out: its users here use std::filesystem, whose <filesystem> declares
# the std::error_code overloads and so must provide it.)
DROPPED = {"cstdint", "cstdio", "cstdlib", "cstring", "string", "limits", "memory", "thread"}

# Symbols that a POSIX header provides as well as the standard one IWYU names: glibc's <stdlib.h>
# also defines <sys/wait.h>'s status macros (WIFEXITED, WEXITSTATUS, ...; IWYU may cut a name
# short with "...").
# And std::abs of a floating-point value is <cmath>'s, which IWYU files under <cstdlib>.
ALSO_FROM = {"sys/wait.h": re.compile(r"^W[A-Z]+(\.\.\.)?$"),
             "cmath": re.compile(r"^(std::)?abs$")}

# Symbols IWYU attributes to a header although no code names them: the allocator machinery of
# every container, char_traits of every string, operators found by lookup, internal templates.
# IWYU cuts long names short with "...".
NOISE = re.compile(r"^(std::)?(__\w*|alloc\w*.*|char_traits.*|operator\W.*|basic_\w+<.*|.*<>::.*)$")

INCLUDE = re.compile(r'^\s*#\s*include\s*([<"])([^>"]+)[>"]')
ADD_HEADER = re.compile(r"^(.*) should add these lines:$")
BUILD_DIR = re.compile(r"^/build[^/]*/")  # generated sources of a build tree
ADD_LINE = re.compile(r"^#include <([^>]+)>\s*(?://\s*for\s+(.*))?$")


def canonical(header):
    """<stdint.h> and <cstdint> are the same header for this check."""
    if header.endswith(".h") and "/" not in header and "c" + header[:-2] in STANDARD:
        return "c" + header[:-2]
    return header


class IncludeGraph:
    """The standard headers a file reaches through its own includes and the project's headers."""

    def __init__(self, root):
        self.root = root
        self.cache = {}

    def resolve(self, name, including):
        for base in (os.path.dirname(including), self.root):
            path = os.path.normpath(os.path.join(base, name))
            if path.startswith(self.root + os.sep) and os.path.isfile(path):
                return path
        return None

    def standard_reach(self, path):
        if path in self.cache:
            return self.cache[path]
        self.cache[path] = set()  # a cycle adds nothing
        reach = set()
        try:
            with open(path, encoding="utf-8", errors="replace") as f:
                lines = f.readlines()
        except OSError:
            return reach
        for line in lines:
            m = INCLUDE.match(line)
            if not m:
                continue
            project = self.resolve(m.group(2), path) if m.group(1) == '"' else None
            if project:
                reach |= self.standard_reach(project)
            else:
                reach.add(canonical(m.group(2)))
        self.cache[path] = reach
        return reach


def findings(report, root):
    """(file, header, symbols) for every standard header a file must include and does not."""
    graph = IncludeGraph(root)
    current = None
    out = []
    for line in report.splitlines():
        m = ADD_HEADER.match(line)
        if m:
            path = os.path.normpath(os.path.join(root, m.group(1)))
            inside = path.startswith(root + os.sep) and not BUILD_DIR.match(path[len(root):])
            current = path if inside else None
            continue
        if not line.strip():
            current = None
            continue
        if current is None:
            continue
        m = ADD_LINE.match(line.strip())
        if not m or not m.group(2):
            continue
        header = canonical(m.group(1))
        symbols = [s.strip() for s in m.group(2).split(",") if s.strip()]
        symbols = [s for s in symbols if not NOISE.match(s)]
        if header not in DROPPED or not symbols:
            continue
        reach = graph.standard_reach(current)
        symbols = [s for s in symbols
                   if not any(h in reach and p.match(s) for h, p in ALSO_FROM.items())]
        if symbols and header not in reach:
            out.append((os.path.relpath(current, root), header, symbols))
    return sorted(set((f, h, ", ".join(s)) for f, h, s in out))


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--root", required=True, help="the repository root")
    args = parser.parse_args()
    report = sys.stdin.read()
    if "should add these lines:" not in report and "has correct #includes" not in report:
        print("iwyu: no include-what-you-use report on stdin (did it run?)", file=sys.stderr)
        return 2
    problems = findings(report, os.path.realpath(args.root))
    for path, header, symbols in problems:
        print(f"{path}: uses {symbols} from <{header}>, which it does not include (directly or "
              f"through a project header); add #include <{header}>")
    if problems:
        print(f"iwyu: {len(problems)} missing standard include(s)", file=sys.stderr)
        return 1
    print("iwyu: every standard header a file uses is included directly or by a project header")
    return 0


if __name__ == "__main__":
    sys.exit(main())
