#!/usr/bin/env bash
# The main job on its embedded default. Until the qualification harness exists (issue 4), this is
# the tinyGLM generation demo: the production per-layer geometry with dummy weights, generated on the
# CPU reference backend (the CUDA engine arrives with a later issue). Arguments, when given, replace
# the default flags of `sparkglm generate`.
set -euo pipefail
cd "$(dirname "$0")/.."
[ -x build/sparkglm ] || { bash ci/setup.sh; bash ci/build.sh; }
./build/sparkglm --version
if [ $# -eq 0 ]; then
  set -- --preset tinyglm --max-tokens 16
fi
./build/sparkglm generate "$@"
