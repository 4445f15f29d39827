#!/usr/bin/env bash
# kb-sample spread over every GPU of one host with `egg bench --ray local`, against the same suite on one GPU:
# the wall time each takes. Run from the repository root on a machine with several GPUs, the stripped binary in
# .deps/egg, KernelBench in .kb/ and the ray wheel's files in .deps/raysite (pip install --target .deps/raysite
# ray==2.60.0 on a machine that reaches PyPI; carried, as the device reaches nothing outside):
#   bash bench/h200_ray.sh ray  [egg bench flags]   # every GPU: one Ray task per suite task, one GPU each
#   bash bench/h200_ray.sh one  [egg bench flags]   # GPU 0 only, no Ray
# Each call runs at most BENCH_SECONDS (default 540) and passes --resume, so calling it again goes on where it
# stopped; .gl/ray-bench/MODE/wall_s sums the seconds egg bench ran over the calls (carry ".gl" with every call).
# What comes back in $OUT: results.json, bench.log, wall_s and walls.txt (both modes' totals, when both ran).
set -uo pipefail
mode="$1"
shift
out="${OUT:-/tmp/egg-out}"
dir=".gl/ray-bench/$mode"
mkdir -p "$out" "$dir" build .gl/home
[ -x build/egg ] || cp .deps/egg build/egg
export EGG_PYTHON="${EGG_PYTHON:-python3}" EGG_HOME="${EGG_HOME:-$PWD/.gl/home}" EGG_KERNELBENCH="$PWD/.kb"
export PYTHONUNBUFFERED=1 PYTHONPATH="$PWD/.deps/raysite${PYTHONPATH:+:$PYTHONPATH}"
case "$mode" in
  ray) where=(--ray local) ;;
  one) where=(--gpus 0) ;;
  *) echo "usage: bash bench/h200_ray.sh ray|one [egg bench flags]" >&2; exit 2 ;;
esac
gpus=$(nvidia-smi --list-gpus | wc -l)
started=$(date +%s)
timeout "${BENCH_SECONDS:-540}" ./egg bench --sample kb-sample --device cuda --out "$dir" --resume --no-report \
  "${where[@]}" "$@" >> "$dir/summary.txt" 2>> "$dir/bench.log"
status=$?
ran=$(( $(date +%s) - started ))
echo $(( $(cat "$dir/wall_s" 2>/dev/null || echo 0) + ran )) > "$dir/wall_s"
echo "egg bench exit $status after $ran s on $gpus GPUs: ./egg bench --sample kb-sample ${where[*]} $*" >> "$dir/bench.log"
cp "$dir/results.json" "$dir/bench.log" "$dir/wall_s" "$out/" 2>/dev/null
python3 - "$dir/.." "$out/walls.txt" <<'PY'
import json, pathlib, sys
root, lines = pathlib.Path(sys.argv[1]), []
for mode in ("one", "ray"):
    try:
        rows = json.loads((root / mode / "results.json").read_text())["tasks"]
        wall = int((root / mode / "wall_s").read_text())
    except (OSError, ValueError, KeyError):
        continue
    done = sum(row["status"] != "error" for row in rows)
    lines.append(f"{mode}: {done} tasks finished, {sum(row['correct'] for row in rows)} correct, wall {wall} s")
pathlib.Path(sys.argv[2]).write_text("\n".join(lines) + "\n")
print("\n".join(lines))
PY
