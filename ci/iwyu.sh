#!/usr/bin/env bash
# include-what-you-use over the project's own C++ sources (.cpp and, through them, their headers;
# not .cu), with the compile database of a CPU build: build-clang/ by default (ci/build-clang.sh
# makes it), or the build folder given. Fails only when a file uses a standard header that it
# reaches through another standard header rather than directly or through a project header
# (ci/iwyu_check.py says why); every other IWYU suggestion is left alone.
#
#   bash ci/iwyu.sh [BUILD_DIR]
set -euo pipefail
cd "$(dirname "$0")/.."
build=${1:-build-clang}
if [ ! -f "$build/compile_commands.json" ]; then
  echo "iwyu: no $build/compile_commands.json (configure it first, e.g. bash ci/build-clang.sh)" >&2
  exit 2
fi
if ! command -v include-what-you-use >/dev/null 2>&1; then
  echo "iwyu: include-what-you-use is not installed (ci/setup.sh installs the iwyu package)" >&2
  exit 2
fi
tool=$(command -v iwyu_tool || command -v iwyu_tool.py || true)
[ -n "$tool" ] || { echo "iwyu: iwyu_tool is not installed (package iwyu)" >&2; exit 2; }

# The project's sources in the database: not the generated ones under build folders.
mapfile -t sources < <(python3 - "$build/compile_commands.json" "$PWD" <<'PY'
import json, os, sys
root = os.path.realpath(sys.argv[2])
for e in json.load(open(sys.argv[1])):
    path = os.path.realpath(os.path.join(e["directory"], e["file"]))
    rel = os.path.relpath(path, root)
    if path.endswith(".cpp") and not rel.startswith(("..", "build")):
        print(path)
PY
)
[ ${#sources[@]} -gt 0 ] || { echo "iwyu: no project sources in $build/compile_commands.json" >&2; exit 2; }

report="$build/iwyu-report.txt"
echo "iwyu: ${#sources[@]} sources from $build/compile_commands.json, $(nproc) jobs"
# iwyu_tool exits non-zero whenever IWYU suggests anything; what counts is decided below.
"$tool" -j "$(nproc)" -p "$build" "${sources[@]}" -- -Xiwyu --no_fwd_decls >"$report" 2>&1 || true
if grep -qE "(^|: )(fatal )?error: " "$report"; then
  grep -E "(^|: )(fatal )?error: " "$report" | head -20 >&2
  echo "iwyu: include-what-you-use could not parse every source (full report: $report)" >&2
  exit 2
fi
python3 ci/iwyu_check.py --root . <"$report"
