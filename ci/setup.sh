#!/usr/bin/env bash
# Installs what the build and the tests need, and nothing twice, on Debian 12 or Ubuntu 24.04:
# system packages through apt-get, numpy/tokenizers/openai into the project's .venv. What is
# already installed is skipped without touching the network (dpkg's own records, an import check).
#
#   bash ci/setup.sh [--dry-run] [--os-release FILE]
#
# --dry-run prints what would be installed and changes nothing; --os-release reads another
# system's /etc/os-release (to check the package choice for Ubuntu on a Debian machine).
set -euo pipefail
cd "$(dirname "$0")/.."

dry_run=0
os_release=/etc/os-release
while [ $# -gt 0 ]; do
  case "$1" in
    --dry-run) dry_run=1 ;;
    --os-release)
      [ $# -ge 2 ] || { echo "setup: --os-release needs a file" >&2; exit 2; }
      os_release=$2
      shift
      ;;
    *) echo "setup: unknown argument \"$1\" (expected --dry-run, --os-release FILE)" >&2; exit 2 ;;
  esac
  shift
done
[ -r "$os_release" ] || { echo "setup: cannot read $os_release" >&2; exit 2; }
os_id=$(. "$os_release" && echo "${ID:-}")
os_version=$(. "$os_release" && echo "${VERSION_ID:-}")

# The names that differ: clang's libFuzzer/sanitizer runtimes carry clang's major version (the
# fuzz targets need them), and Chromium (the HTML report test) is a Debian package on Debian but
# a snap on Ubuntu, whose chromium-browser package only installs the snap.
case "$os_id:$os_version" in
  debian:12) clang_major=14 chromium_deb=chromium ;;
  ubuntu:24.04) clang_major=18 chromium_deb="" ;;
  *)
    # Another release: the clang that is installed, else the one apt would install.
    clang_major=$( (clang --version 2>/dev/null || true) | sed -n 's/.*clang version \([0-9]*\).*/\1/p' | head -1)
    if [ -z "$clang_major" ]; then
      clang_major=$( (apt-cache depends clang 2>/dev/null || true) | sed -n 's/.*Depends: clang-\([0-9]*\)$/\1/p' | head -1)
    fi
    if [ -z "$clang_major" ]; then
      echo "setup: $os_id $os_version is neither Debian 12 nor Ubuntu 24.04 and no clang version" \
        "could be found (install clang, or run apt-get update); stopping" >&2
      exit 2
    fi
    chromium_deb=chromium
    [ "$os_id" = ubuntu ] && chromium_deb=""
    echo "setup: $os_id $os_version is not a tested system; using clang $clang_major"
    ;;
esac

packages=(
  build-essential cmake ninja-build pkg-config git ccache
  nlohmann-json3-dev libgtest-dev libgmock-dev libbenchmark-dev
  libssl-dev libcurl4-openssl-dev libboost-dev
  clang "libclang-rt-$clang_major-dev" clang-format iwyu
  python3 python3-venv python3-pip
)
have_browser() {
  command -v chromium >/dev/null 2>&1 || command -v chromium-browser >/dev/null 2>&1
}
if [ -n "$chromium_deb" ]; then
  packages+=("$chromium_deb")
fi

missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
sudo_cmd=""
[ "$(id -u)" -ne 0 ] && sudo_cmd="sudo"
if [ ${#missing[@]} -gt 0 ]; then
  echo "setup: installing $os_id $os_version packages: ${missing[*]}"
  if [ $dry_run -eq 0 ]; then
    $sudo_cmd apt-get update -qq
    DEBIAN_FRONTEND=noninteractive $sudo_cmd apt-get install -y -qq --no-install-recommends \
      "${missing[@]}"
  fi
else
  echo "setup: $os_id $os_version packages already installed"
fi

# Ubuntu's Chromium is a snap: installed through snapd where it runs, else said, not hidden
# (tests/python/test_report_html.py fails without a browser rather than skipping).
if [ -z "$chromium_deb" ] && ! have_browser; then
  if command -v snap >/dev/null 2>&1 && snap version >/dev/null 2>&1 && [ -S /run/snapd.socket ]; then
    echo "setup: installing the chromium snap (the HTML report test needs a browser)"
    [ $dry_run -eq 0 ] && $sudo_cmd snap install chromium
  else
    echo "setup: no Chromium: on $os_id it is a snap and snapd does not run here; put a" \
      "chromium or chromium-browser binary on PATH, or python.test_report_html will fail"
  fi
fi

python_packages=(numpy tokenizers openai transformers jsonschema)
if [ ! -x .venv/bin/python3 ]; then
  echo "setup: creating .venv"
  [ $dry_run -eq 0 ] && python3 -m venv .venv
fi
# Test clients and references only: numpy (the independent forward reference), tokenizers (the
# tokenizer.json comparison), openai (the real client against sparkglm-serve), transformers (Hugging
# Face's AutoConfig/AutoTokenizer load the checkpoints tinyglm make writes; no torch needed), jsonschema
# (validates structured output, tests/python/test_structured_output.py). pip
# runs only when one of them cannot be imported.
if [ -x .venv/bin/python3 ] && .venv/bin/python3 -c "import numpy, tokenizers, openai, transformers, jsonschema" 2>/dev/null; then
  echo "setup: python packages already in .venv: ${python_packages[*]}"
else
  echo "setup: installing into .venv: ${python_packages[*]}"
  [ $dry_run -eq 0 ] && .venv/bin/pip install -q "${python_packages[@]}"
fi
if command -v nvcc >/dev/null 2>&1 || [ -x /usr/local/cuda/bin/nvcc ]; then
  echo "setup: CUDA toolkit found; the CUDA backend will be built"
else
  echo "setup: no CUDA toolkit; building the CPU backend only"
fi
[ $dry_run -eq 1 ] && echo "setup: dry run, nothing was changed"
exit 0
