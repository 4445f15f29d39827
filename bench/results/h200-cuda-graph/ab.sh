#!/usr/bin/env bash
# stage2.memory's CUDA-graph move on the H200: each task compiled at seed 0 (tf32 products) as it is and with
# the forward captured in a CUDA graph ({"plan": {"cuda_graph": true}}), both evaluated by `egg eval` at tol
# 1e-2 on the GPU in one run (same worker, eager and torch.compile timed alongside). From the repository root
# with .deps/egg and the tasks in .kb/cg/level3 carried:  bash bench/results/h200-cuda-graph/ab.sh TASK...
set -u
out="${OUT:-/tmp/egg-out}/cuda-graph"
mkdir -p "$out" build .gl/home
[ -x build/egg ] || cp .deps/egg build/egg
export EGG_PYTHON="${EGG_PYTHON:-python3}" EGG_HOME="${EGG_HOME:-$PWD/.gl/home}"
for task in "$@"; do
  file=$(ls .kb/cg/level3/"${task}"_*.py | head -1)
  name=$(basename "$file" .py)
  for variant in plain graph; do
    plan=""
    [ "$variant" = graph ] && plan=', "plan": {"cuda_graph": true}'
    ./egg compile "$file" --device cuda --design "{\"seed\": 0, \"precision\": \"tf32\"$plan}" \
      --out "$out/${name}_$variant.py" --json > "$out/${name}_$variant.compile.json" 2> "$out/${name}_$variant.compile.log"
    ./egg eval "$file" "$out/${name}_$variant.py" --device cuda --tol 1e-2 --trials 3 --timing-budget 3 --json \
      > "$out/${name}_$variant.eval.json" 2> "$out/${name}_$variant.eval.log"
  done
done
python3 - "$out" <<'PY'
import glob, json, os, sys
out = sys.argv[1]
print(f"{'task':34s} {'variant':7s} {'kernels':>8s} {'correct':>7s} {'egg ms':>8s} {'eager ms':>8s} {'compile ms':>10s} {'x eager':>7s} {'x compile':>9s}")
for path in sorted(glob.glob(f"{out}/*.eval.json")):
    name, variant = os.path.basename(path)[:-len(".eval.json")].rsplit("_", 1)
    try:
        r = json.load(open(path))
        c = json.load(open(path.replace(".eval.json", ".compile.json")))
    except (OSError, ValueError) as error:
        print(f"{name[:34]:34s} {variant:7s} unreadable: {error}")
        continue
    t = r.get("time_ms") or {}
    ms = lambda k: (t.get(k) or {}).get("mean")
    f = lambda v: f"{v:.3f}" if isinstance(v, (int, float)) else "-"
    print(f"{name[:34]:34s} {variant:7s} {len(c.get('kernels', [])):>8d} {str(r.get('correct')):>7s} {f(ms('candidate')):>8s} "
          f"{f(ms('eager')):>8s} {f(ms('compile')):>10s} {f(r.get('speedup_vs_eager')):>7s} {f(r.get('speedup_vs_compile')):>9s}")
PY
