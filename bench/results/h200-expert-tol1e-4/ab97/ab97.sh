set -u
mkdir -p build; cp .deps/egg build/egg
export EGG_PYTHON=python3 EGG_HOME=$PWD/.gl/home
T=$(ls .kb/t6/level1/97_*.py)
./egg compile $T --device cuda --design '{"seed":0,"precision":"tf32"}' --out /tmp/a.py > /dev/null || echo compile failed
python3 - <<'PY'
import re
s = open("/tmp/a.py").read()
s = re.sub(r"^(\s*)a = (tmp\d+)$", r"\1a = tl.where(mmask & kamask, (\2).to(tl.float32), 0.0)", s, flags=re.M)
s = re.sub(r"^(\s*)b = (tmp\d+)$", r"\1b = tl.where(kbmask & nmask, (\2).to(tl.float32), 0.0)", s, flags=re.M)
open("/tmp/b.py", "w").write(s)
PY
grep -n "^        [ab] = " /tmp/a.py /tmp/b.py
for c in a b a b; do
  ./egg eval $T /tmp/$c.py --device cuda --trials 1 --timing-budget 3 --json --no-cache > /tmp/$c.json 2>/tmp/$c.err
  python3 -c "import json; d=json.load(open('/tmp/$c.json')); print('$c', d['status'], d.get('correct'), d['time_ms']['candidate']['median'], d['time_ms'].get('eager',{}).get('median'))" || tail -3 /tmp/$c.err
done
cp /tmp/a.py /tmp/b.py $OUT/
