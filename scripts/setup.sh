#!/usr/bin/env bash
# Sets egg up on this machine: Debian/Ubuntu packages for the C++ build and the sandbox (bubblewrap), a Python venv with torch and
# triton (skipped when EGG_PYTHON names a Python that already has them), and the build. Idempotent.
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$root"

apt_packages=(build-essential cmake ninja-build pkg-config libcurl4-openssl-dev nlohmann-json3-dev
              libsqlite3-dev libcli11-dev libfmt-dev libgtest-dev libgmock-dev libssl-dev libtomlplusplus-dev
              libkainjow-mustache-dev python3-venv bubblewrap)
missing=()
for package in "${apt_packages[@]}"; do
  dpkg-query -W -f='${Status}' "$package" 2>/dev/null | grep -q "install ok installed" || missing+=("$package")
done
if [ ${#missing[@]} -gt 0 ]; then
  if command -v apt-get >/dev/null; then
    sudo_cmd=""
    [ "$(id -u)" -eq 0 ] || sudo_cmd="sudo"
    echo "setup: installing ${missing[*]}"
    $sudo_cmd apt-get update -qq
    DEBIAN_FRONTEND=noninteractive $sudo_cmd apt-get install -y -qq "${missing[@]}" >/dev/null
  else
    echo "setup: error: missing packages (${missing[*]}) and no apt-get to install them" >&2
    exit 2
  fi
fi

if [ -n "${EGG_PYTHON:-}" ]; then
  "$EGG_PYTHON" -c "import torch, triton" || { echo "setup: error: EGG_PYTHON=$EGG_PYTHON lacks torch or triton" >&2; exit 2; }
  echo "setup: using EGG_PYTHON=$EGG_PYTHON"
else
  python="${EGG_SETUP_PYTHON:-python3}"
  # numpy < 2.4: Triton 3.6's interpreter fails on runtime loop bounds with numpy 2.4 (triton-lang/triton#9171)
  # einops: KernelBench's Mamba2 tasks (level 3, 48 and 49) import it
  # ray: egg bench --ray and its test on a local multi-node cluster (optional at run time)
  # pytest-xdist: scripts/test.sh runs the tests over both cores
  # transformers: tests only, tiny Hugging Face models built from their config classes (tests/blackbox/hf_models.py)
  requirements=(torch==2.13.0 triton==3.6.0 "numpy<2.4" einops pytest pytest-xdist matplotlib jinja2 ray==2.60.0
                transformers==5.25.0)
  if [ ! -x .venv/bin/python ]; then
    "$python" -m venv .venv
  fi
  if [ "$(cat .venv/.egg-requirements 2>/dev/null)" != "${requirements[*]}" ]; then
    .venv/bin/python -m pip install -q --disable-pip-version-check "${requirements[@]}"
    echo "${requirements[*]}" > .venv/.egg-requirements
  fi
fi

cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo -DEGG_WERROR=ON >/dev/null
cmake --build build
echo "setup: done; run ./egg --help"
