#!/usr/bin/env bash
# Installs what the build and the tests need, and nothing twice. Debian packages through apt-get;
# numpy (for the independent reference test) into the project's .venv.
set -euo pipefail
cd "$(dirname "$0")/.."

packages=(
  build-essential cmake ninja-build pkg-config git
  nlohmann-json3-dev libgtest-dev libgmock-dev libbenchmark-dev
  libssl-dev libcurl4-openssl-dev libboost-dev
  clang libclang-rt-14-dev clang-format
  chromium
  python3 python3-venv python3-pip
)
missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -gt 0 ]; then
  echo "setup: installing Debian packages: ${missing[*]}"
  sudo_cmd=""
  [ "$(id -u)" -ne 0 ] && sudo_cmd="sudo"
  $sudo_cmd apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $sudo_cmd apt-get install -y -qq --no-install-recommends "${missing[@]}"
else
  echo "setup: Debian packages already installed"
fi

if [ ! -x .venv/bin/python3 ]; then
  echo "setup: creating .venv"
  python3 -m venv .venv
fi
# Test clients and references only: numpy (the independent forward reference), tokenizers (the
# tokenizer.json comparison), openai (the real client against sparkglm-serve).
python_packages=(numpy tokenizers openai)
if ! .venv/bin/python3 -c "import numpy, tokenizers, openai" 2>/dev/null; then
  echo "setup: installing into .venv: ${python_packages[*]}"
  .venv/bin/pip install -q "${python_packages[@]}"
else
  echo "setup: python packages already in .venv: ${python_packages[*]}"
fi
if command -v nvcc >/dev/null 2>&1 || [ -x /usr/local/cuda/bin/nvcc ]; then
  echo "setup: CUDA toolkit found; the CUDA backend will be built"
else
  echo "setup: no CUDA toolkit; building the CPU backend only"
fi
