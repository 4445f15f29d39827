#!/usr/bin/env bash
# Issue 28 on the H200: is `--backend hybrid` never slower than `--backend expert` on the same task and budget? For
# each task, `egg optimize` with the expert backend, then with the hybrid backend against bench/hybrid_fake_llm.py (a
# scripted LLM on 127.0.0.1, Python stdlib only: design moves legal and illegal, a source edit), both with the same
# OPTIMIZE_FLAGS; the final kernels are compared by the acceptance rule (median against max(p80 - p20 of either, 1%)).
# Run through the device tool from the repository root, with the stripped binary in .deps/egg and KernelBench's levels
# copied into .kb/ (both carried):
#     bash bench/h200_hybrid.sh [TASK...]     TASK: level1/19_ReLU (under .kb/) or a path without .py
# $OUT gets compare.txt (a line a task: expert ms, hybrid ms, verdict, LLM calls, accepted from the LLM),
# results.jsonl (both reports' finals and provenance) and logs.tgz (each run's stderr, report.json, trajectory.md).
set -uo pipefail
out="${OUT:-/tmp/egg-out}"
work=/tmp/egg-hybrid
mkdir -p "$out" "$work" build
[ -x build/egg ] || cp .deps/egg build/egg
export EGG_PYTHON="${EGG_PYTHON:-python3}" EGG_HOME="${EGG_HOME:-/tmp/egg-hybrid-home}" PYTHONUNBUFFERED=1
export OPENAI_API_KEY=sk-egg-scripted-fake
kb="${KB:-.kb}"
default=(level1/19_ReLU level1/23_Softmax level2/12_Gemm_Multiply_LeakyReLU level2/76_Gemm_Add_ReLU level3/1_MLP)
tasks=("$@")
[ ${#tasks[@]} -gt 0 ] || tasks=("${default[@]}")
flags=(${OPTIMIZE_FLAGS:---quick --time-budget 60 --no-profile})
deadline=$(( $(date +%s) + ${HYBRID_SECONDS:-500} ))

rm -f "$work/port"  # a warm machine keeps /tmp: a stale port file would name a server that is gone
python3 bench/hybrid_fake_llm.py "$work/port" &
fake=$!
trap 'kill $fake 2>/dev/null' EXIT
for _ in $(seq 50); do [ -s "$work/port" ] && break; sleep 0.1; done
port=$(cat "$work/port")

for task in "${tasks[@]}"; do
  if [ "$(date +%s)" -ge "$deadline" ]; then echo "not run (time): $task"; continue; fi
  path="$task.py"; [ -f "$path" ] || path="$kb/$task.py"
  name=$(basename "$task")
  for backend in expert hybrid; do
    dir="$work/$name/$backend"; mkdir -p "$dir"
    extra=(); [ "$backend" = hybrid ] && extra=(--provider openai --base-url "http://127.0.0.1:$port/v1" --model scripted)
    ./egg optimize "$path" --backend "$backend" --device cuda --out "$dir" --quiet "${flags[@]}" "${extra[@]}" \
      > "$dir/stdout.txt" 2> "$dir/stderr.txt"
  done
  python3 - "$work/$name" "$name" >> "$out/results.jsonl" <<'PY'
import json, pathlib, sys
root, name = pathlib.Path(sys.argv[1]), sys.argv[2]
def load(backend):
    path = root / backend / "report.json"
    return json.loads(path.read_text()) if path.exists() else {}
row = {"task": name}
for backend in ("expert", "hybrid"):
    rep = load(backend)
    row[backend] = {"status": rep.get("status"), "final": ((rep.get("final") or {}).get("time_ms") or {}).get("candidate"),
                    "provenance": rep.get("provenance"), "hybrid": rep.get("hybrid")}
print(json.dumps(row))
PY
done
python3 - "$out/results.jsonl" > "$out/compare.txt" <<'PY'
import json, sys
print(f"{'task':40} {'expert ms':>10} {'hybrid ms':>10}  verdict (acceptance rule)  llm calls  accepted from llm")
for line in open(sys.argv[1]):
    row = json.loads(line)
    e, h = row["expert"]["final"], row["hybrid"]["final"]
    llm = ((row["hybrid"]["provenance"] or {}).get("llm") or {})
    if not e or not h:
        print(f"{row['task']:40} {'-':>10} {'-':>10}  incomplete ({row['expert']['status']}, {row['hybrid']['status']})")
        continue
    noise = max(e["p80"] - e["p20"], h["p80"] - h["p20"], 0.01 * h["median"])
    verdict = "hybrid slower" if e["median"] < h["median"] - noise else (
        "hybrid faster" if h["median"] < e["median"] - noise else "same within noise")
    print(f"{row['task']:40} {e['median']:10.4f} {h['median']:10.4f}  {verdict:25}  {llm.get('calls', 0):9}  "
          f"{llm.get('accepted', 0)}")
PY
cat "$out/compare.txt"
tar czf "$out/logs.tgz" -C "$work" --exclude=model_new.py . 2>/dev/null || true
