"""A/B on the H200 of the two layouts the expert backend can copy operands into before a product: the
channels-last convolution (`nhwc`) against the NCHW gather (`tiled`), and the matrix product over aligned operand
copies (`aligned`) against the operands read in place (`tiled`). Each task is compiled at seed 0 with tf32x3
products (what a tol-1e-4 search starts from), the variant is the same design with only the algorithm changed
(the nhwc K step capped at the group's channels), and both files are checked and timed by `egg eval` at tol 1e-4
on the GPU, eager and torch.compile timed in the same run by the same worker.

From the repository root with .deps/egg and the tasks in .kb/ab/level1 carried:
    python3 bench/results/h200-nhwc-aligned/ab.py
Writes $OUT/ab.tgz (candidates, compile and eval JSON) and prints the table last."""
import concurrent.futures
import glob
import json
import os
import shutil
import subprocess
import sys
import tarfile

OUT = os.environ.get("OUT", "/tmp/egg-out")
WORK = os.path.join(OUT, "ab")
os.makedirs(WORK, exist_ok=True)
os.makedirs("build", exist_ok=True)
if not os.path.exists("build/egg"):
    shutil.copy(".deps/egg", "build/egg")
env = dict(os.environ, EGG_PYTHON=os.environ.get("EGG_PYTHON", "python3"),
           EGG_HOME=os.environ.get("EGG_HOME", os.path.abspath(".gl/home")))
# input channels per group of each convolution task (all groups = 1); 1_8 is the misaligned product
CHANNELS = {"55": 64, "63": 16, "67": 64, "87": 64, "80": 32, "62": 32, "56": 64, "76": 64}
TASKS = sys.argv[1:] or ["8"] + list(CHANNELS)[:6]


def run(args, log):
    with open(log, "w") as err:
        return subprocess.run(["./egg", *args], stdout=subprocess.PIPE, stderr=err, text=True, env=env)


def task_file(number):
    return sorted(glob.glob(f".kb/ab/level1/{number}_*.py"))[0]


def compile_pair(number):
    task = task_file(number)
    base = os.path.join(WORK, f"{number}_seed0")
    proc = run(["compile", task, "--device", "cuda", "--design", '{"seed": 0, "precision": "tf32x3"}', "--json",
                "--out", base + ".py"], base + ".compile.log")
    if proc.returncode != 0:
        return number, None, None
    report = json.loads(proc.stdout)
    design = report["design"]
    changed = False
    for kernel in report["kernels"]:
        kd = design["kernels"][kernel["name"]]
        if number in CHANNELS and kd["algorithm"] == "tiled" and "aten.convolution.default" in kernel["ops"]:
            kd["algorithm"] = "nhwc"
            kd["rblock"] = min(kd["rblock"], max(16, CHANNELS[number]))
            changed = True
        elif number not in CHANNELS and kd["algorithm"] == "aligned":
            kd["algorithm"] = "tiled"
            changed = True
    if not changed:
        return number, (base, report), "no variant"
    other = os.path.join(WORK, f"{number}_variant")
    proc = run(["compile", task, "--device", "cuda", "--design", json.dumps(design), "--json", "--out",
                other + ".py"], other + ".compile.log")
    return number, (base, report), ((other, json.loads(proc.stdout)) if proc.returncode == 0 else None)


with concurrent.futures.ThreadPoolExecutor(8) as pool:
    pairs = list(pool.map(compile_pair, TASKS))

fmt_ms = lambda v: f"{v:.3f}" if isinstance(v, (int, float)) else "-"


def line(number, label, algorithms, status, egg, eager, comp):
    ratio = comp / egg if egg and comp else None
    return (f"{number:5s} {label:8s} {algorithms:18s} {status:22s} {fmt_ms(egg):>8s} {fmt_ms(eager):>9s} {fmt_ms(comp):>10s} "
            f"{fmt_ms(ratio):>9s}")


HEADER = (f"{'task':5s} {'file':8s} {'matmul algorithms':18s} {'status':22s} {'egg ms':>8s} {'eager ms':>9s} "
          f"{'compile ms':>10s} {'x compile':>9s}")
print(HEADER, flush=True)
rows = []
for number, base, variant in pairs:
    for label, entry in (("seed0", base), ("variant", variant)):
        if entry is None or isinstance(entry, str):
            rows.append((number, label, "-", entry or "compile failed", None, None, None))
            continue
        path, report = entry
        algorithms = ",".join(sorted({k["design"]["algorithm"] for k in report["kernels"]
                                      if k["kind"] == "matmul"}))
        proc = run(["eval", task_file(number), path + ".py", "--device", "cuda", "--tol", "1e-4", "--trials", "2",
                    "--timing-budget", "1", "--json"], path + ".eval.log")
        with open(path + ".eval.json", "w") as f:
            f.write(proc.stdout)
        try:
            r = json.loads(proc.stdout)
        except ValueError:
            rows.append((number, label, algorithms, "eval failed", None, None, None))
            continue
        t = r.get("time_ms") or {}
        ms = lambda k: (t.get(k) or {}).get("median")
        rows.append((number, label, algorithms, f"{r['status']} correct={r['correct']}", ms("candidate"),
                     ms("eager"), ms("compile")))
        print(line(*rows[-1]), flush=True)  # as it goes: a run cut by the time limit still shows its rows

with tarfile.open(os.path.join(OUT, "ab.tgz"), "w:gz") as tar:
    tar.add(WORK, arcname="ab")
shutil.rmtree(WORK)
lines = [HEADER] + [line(*row) for row in rows]
open(os.path.join(OUT, "summary.txt"), "w").write("\n".join(lines) + "\n")
print("\n".join(lines))
