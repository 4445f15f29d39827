#!/usr/bin/env bash
# egg bench on an H200 through the device tool, from the repository root, with the stripped binary in .deps/egg
# and KernelBench copied into .kb/ (both carried):   bash bench/h200_bench.sh NAME [egg bench flags]
# The bench folder (.gl/bench/NAME) and EGG_HOME (.gl/home: the store with its caches) live in an ignored path of
# the checkout, and every call passes --resume: a run cut by BENCH_SECONDS (default 540, under the tool's 600 s
# limit) goes on where it stopped when the same command is run again. The device does not keep .gl from one call
# to the next reliably: copy the returned results.json into .gl/bench/NAME/ here and carry ".gl" with every call
# (rows with status "error", such as an out-of-memory, are run again by --resume). What comes back in $OUT: results.json, bench.log, summary.txt and tasks.tgz
# (every task's model_new.py, report.json and trajectory.md), worker-logs.tgz and store.tgz. report.html is made on the CPU machine from
# results.json (python -m egg_report), as the device has no plotting packages.
set -uo pipefail
name="$1"
shift
out="${OUT:-/tmp/egg-out}"
dir=".gl/bench/$name"
mkdir -p "$out" "$dir" build .gl/home
[ -x build/egg ] || cp .deps/egg build/egg
export EGG_PYTHON="${EGG_PYTHON:-python3}" EGG_HOME="${EGG_HOME:-$PWD/.gl/home}" PYTHONUNBUFFERED=1
started=$(date +%s)
# results.json copied into $OUT every 20 s too: a call the device tool cuts short (its limit, or the session's
# device time running out before BENCH_SECONDS) still brings back the rows finished so far
( while sleep 20; do cp "$dir/results.json" "$out/" 2>/dev/null; done ) >/dev/null 2>&1 &
copier=$!
timeout "${BENCH_SECONDS:-540}" ./egg bench --device cuda --out "$dir" --resume --no-report "$@" \
  >> "$dir/summary.txt" 2>> "$dir/bench.log"
status=$?
kill "$copier" 2>/dev/null
wait "$copier" 2>/dev/null
echo "egg bench exit $status after $(( $(date +%s) - started )) s: ./egg bench --device cuda --out $dir --resume --no-report $*" \
  >> "$dir/bench.log"
cp "$dir/results.json" "$dir/bench.log" "$dir/summary.txt" "$out/" 2>/dev/null
tar czf "$out/worker-logs.tgz" -C "$EGG_HOME" logs 2>/dev/null  # egg-gpulock lines: where GPU time went
# The store (every evaluation and baseline, cached): copied back into .gl/home/ here, it lets the next call skip
# what a task cut by BENCH_SECONDS had already measured.
tar czf "$out/store.tgz" -C "$EGG_HOME" egg.db 2>/dev/null
(cd "$dir" && find tasks -name model_new.py -o -name report.json -o -name trajectory.md 2>/dev/null \
  | tar czf "$out/tasks.tgz" -T -) 2>/dev/null
python3 - "$out/results.json" <<'PY'
import json, sys
try:
    d = json.load(open(sys.argv[1]))
except OSError:
    sys.exit("no results.json")
fmt = lambda v: f"{v:.2f}" if isinstance(v, (int, float)) else "-"
for r in d["tasks"]:
    tol = (r.get("at_tol") or {}).get("0.0001", {})
    print(f"{r['task'][:38]:38s} {r['status']:8s} e{fmt(r.get('speedup_vs_eager'))} c{fmt(r.get('speedup_vs_compile'))} "
          f"4:{str(tol.get('correct'))[0]} {r.get('wall_s', 0):.0f}s")
print(len(d["tasks"]), "rows;", json.dumps(d["summary"])[:1500])
PY
