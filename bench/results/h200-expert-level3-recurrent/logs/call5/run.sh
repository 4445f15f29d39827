#!/usr/bin/env bash
# Device check of stage2.memory's CUDA-graph move: the same design with and without plan.cuda_graph, side by side.
export EGG_PYTHON=python3 EGG_HOME=$PWD/.gl/ghome
mkdir -p "$EGG_HOME" "${OUT:-/tmp/o}"
[ -x build/egg ] || { mkdir -p build; cp .deps/egg build/egg; }
for t in 3_DeepNarrowMLP 4_LeNet5 40_GRUHidden; do
  for g in plain graph; do
    timeout 170 ./build/egg eval .kb/level3/$t.py .gl/graph/${t}_$g.py --device cuda --json --trials 3 \
      --timing-budget 2 --baseline-timeout 120 > "${OUT:-/tmp/o}/${t}_$g.json" 2> "${OUT:-/tmp/o}/${t}_$g.err" &
  done
done
wait
python3 - <<'PY'
import json, os, glob
out = os.environ.get("OUT", "/tmp/o")
for path in sorted(glob.glob(out + "/*.json")):
    try:
        r = json.load(open(path))
    except Exception as e:
        print(os.path.basename(path), "no json", open(path[:-5] + ".err").read()[-300:]); continue
    t = r.get("time_ms") or {}
    m = lambda k: (t.get(k) or {}).get("mean")
    f = lambda v: f"{v:.3f}" if isinstance(v, (int, float)) else "-"
    print(f"{os.path.basename(path)[:-5]:24s} {r.get('status')} correct={r.get('correct')} egg {f(m('candidate'))} "
          f"eager {f(m('eager'))} compile {f(m('compile'))} {str(r.get('reason',''))[:120]}")
PY
