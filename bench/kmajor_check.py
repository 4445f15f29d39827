"""The kmajor algorithm against the tiled one on KernelBench's fp32 matrix products, on the GPU: for each task,
egg's expert compiler writes the product both ways in the same tiles (tf32 products checked at tol 1e-2,
tf32x3 at 1e-4) and `egg eval` checks and times each beside PyTorch's baselines (default and tf32, eager and
torch.compile). Run from the repository root on a GPU machine, the binary at ./egg (or EGG):
    python3 bench/kmajor_check.py KERNELBENCH_LEVEL1_DIR TASK_NUMBER... > table.txt"""
import json
import os
import pathlib
import subprocess
import sys
import tempfile

EGG = os.environ.get("EGG", "./egg")
DEVICE = os.environ.get("DEVICE", "cuda")  # cpu: a dry run in the interpreter on small tasks
# (precision, tol, tile): the tiles bench/micro/fp32_precision.py measured fastest with B K-contiguous
SETTINGS = (("tf32", 1e-2, (128, 256, 32, 8, 3)), ("tf32x3", 1e-4, (128, 64, 32, 4, 4)))
PRODUCT_ALGORITHMS = {"tiled", "aligned", "kmajor", "splitk"}


def egg(*args, timeout=600):
    return subprocess.run([EGG, *map(str, args)], capture_output=True, text=True, timeout=timeout)


def main():
    level1 = pathlib.Path(sys.argv[1])
    work = pathlib.Path(tempfile.mkdtemp(prefix="kmajor-"))
    print(f"{'task':40s} {'prec':7s} {'algorithm':9s} {'ok':3s} {'ms':>8s} {'eager':>8s} {'compile':>8s} "
          f"{'x eager':>8s} {'x comp':>8s} {'x tf32 c':>8s}")
    for number in sys.argv[2:]:
        (task,) = level1.glob(f"{number}_*.py")
        seed = egg("compile", task, "--seed", 0, "--json", "--device", DEVICE, "--out", work / "seed.py")
        if seed.returncode != 0:
            print(f"{task.stem[:40]:40s} seed compile failed: {seed.stderr.strip()[-200:]}")
            continue
        kernels = json.loads(seed.stdout)["kernels"]
        for precision, tol, (bm, bn, bk, warps, stages) in SETTINGS:
            for algorithm in ("tiled", "kmajor"):
                designs = {}
                for kernel in kernels:
                    if kernel["design"].get("algorithm") in PRODUCT_ALGORITHMS:
                        designs[kernel["name"]] = dict(kernel["design"], algorithm=algorithm, split=0,
                                                       precision=precision, xblock=bm, yblock=bn, rblock=bk,
                                                       num_warps=warps, num_stages=stages)
                out = work / f"{task.stem}_{precision}_{algorithm}.py"
                made = egg("compile", task, "--device", DEVICE, "--out", out, "--json", "--design",
                           json.dumps({"seed": 0, "kernels": designs}))
                written = [k["design"]["algorithm"] for k in json.loads(made.stdout)["kernels"]
                           if k["name"] in designs] if made.returncode == 0 else ["failed"]
                if made.returncode != 0 or any(a != algorithm for a in written):
                    print(f"{task.stem[:40]:40s} {precision:7s} {algorithm:9s} compile gave {written}: "
                          f"{made.stderr.strip()[-300:]}")
                    continue
                run = egg("eval", task, out, "--json", "--device", DEVICE, "--tol", tol, "--trials", 2,
                          "--timing-budget", 3, "--baselines", "default,tf32")
                try:
                    r = json.loads(run.stdout)
                except json.JSONDecodeError:
                    print(f"{task.stem[:40]:40s} {precision:7s} {algorithm:9s} eval failed: {run.stderr[-300:]}")
                    continue
                speedups = r.get("speedups") or {}
                fmt = lambda v: f"{v:8.3f}" if isinstance(v, (int, float)) else f"{'-':>8s}"
                t = {k: (v or {}).get("median") for k, v in (r.get("time_ms") or {}).items()}
                print(f"{task.stem[:40]:40s} {precision:7s} {algorithm:9s} {'yes' if r.get('correct') else 'NO ':3s} "
                      f"{fmt(t.get('candidate'))} {fmt(t.get('eager'))} {fmt(t.get('compile'))} "
                      f"{fmt(speedups.get('default', {}).get('eager'))} {fmt(speedups.get('default', {}).get('compile'))} "
                      f"{fmt(speedups.get('tf32', {}).get('compile'))}", flush=True)
                if not r.get("correct"):
                    print(f"    {r.get('status')}: {str(r.get('reason'))[:300]}")


if __name__ == "__main__":
    main()
