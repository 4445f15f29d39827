#!/usr/bin/env bash
# Sets egg up (scripts/setup.sh) and runs every test: C++ unit tests, the worker's tests and the black-box
# tests of the real binary, all on the CPU (Triton interpreter).
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$root"
scripts/setup.sh
# Chromium renders egg bench's report.html in a black-box test.
if ! command -v chromium >/dev/null && command -v apt-get >/dev/null; then
  sudo_cmd=""
  [ "$(id -u)" -eq 0 ] || sudo_cmd="sudo"
  $sudo_cmd apt-get update -qq && DEBIAN_FRONTEND=noninteractive $sudo_cmd apt-get install -y -qq chromium >/dev/null
fi
python="${EGG_PYTHON:-$root/.venv/bin/python}"
export EGG_HOME="$(mktemp -d)"
trap 'rm -rf "$EGG_HOME"' EXIT
# The worker's tests over both cores through pytest-xdist (scripts/setup.sh installs it; an EGG_PYTHON without it
# runs them on one).
workers=(-n 2)
"$python" -c "import xdist" 2>/dev/null || { echo "test: no pytest-xdist in $python: the tests run on one core"; workers=(); }
echo "== C++ unit tests"
ctest --test-dir build --output-on-failure -j2
echo "== worker tests"
TRITON_INTERPRET=1 PYTHONPATH="$root/python" "$python" -m pytest -q -p no:cacheprovider "${workers[@]}" python/tests
echo "== black-box tests of ./egg"
# One at a time: each black-box test runs egg and its worker processes, which keep both cores busy already (over
# two pytest-xdist workers the suite took longer, and timed out a Ray run).
"$python" -m pytest -q -p no:cacheprovider --durations=25 tests/blackbox
