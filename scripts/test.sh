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
echo "== C++ unit tests"
ctest --test-dir build --output-on-failure -j2
echo "== worker tests"
TRITON_INTERPRET=1 PYTHONPATH="$root/python" "$python" -m pytest -q -p no:cacheprovider python/tests
echo "== black-box tests of ./egg"
"$python" -m pytest -q -p no:cacheprovider --durations=25 tests/blackbox
