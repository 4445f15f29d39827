"""Issue 21's per-shape scoreboard: for every level-1 GEMM (1-4, 6-18) and convolution (50, 54-87) task of an
`egg bench` results.json, the task's floating-point work, egg's achieved TFLOP/s and the library's (cuBLAS or
cuDNN through PyTorch eager, the one op such a task is) on the same shape, with TF32 off (`strict`) and on
(`tf32`), from the baselines the run timed beside egg's kernel in the same worker.

    .venv/bin/python bench/scoreboard.py bench/results/NAME/results.json [--kernelbench ../shared/kernelbench]

The work is counted by PyTorch's own FLOP counter (torch.utils.flop_counter, 2 per multiply-add) over the task's
model and inputs built on the meta device, so nothing is allocated and no GPU is needed. `vs library` divides egg's
TFLOP/s by the library's at the precision the run's tolerance allows: `strict` at tol 1e-4 (TF32 products miss
it), the faster of `default` and `tf32` at tol 1e-2. Needs torch (the project's .venv).
"""
import argparse
import json
import math
import pathlib

GEMMS = set(range(1, 19)) - {5}
CONVOLUTIONS = {50, *range(54, 88)}
ROOT = pathlib.Path(__file__).resolve().parents[1]


def task_flops(path: pathlib.Path) -> int:
    """The FLOPs of one forward of the task's Model on its get_inputs(), counted on the meta device."""
    import importlib.util

    import torch
    from torch.utils.flop_counter import FlopCounterMode

    spec = importlib.util.spec_from_file_location(f"task_{path.stem}", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    with torch.device("meta"):
        model = module.Model(*module.get_init_inputs())
        inputs = module.get_inputs()
    counter = FlopCounterMode(display=False)
    with counter, torch.no_grad():
        model(*inputs)
    return counter.get_total_flops()


def median_ms(row: dict, setting: str, which: str = "eager"):
    runs = ((row.get("baselines") or {}).get(setting) or {}).get("runs") or {}
    stats = (runs.get(which) or {}).get("time_ms") or {}
    return stats.get("median")


def tflops(flops: int, ms):
    return flops / (ms * 1e-3) / 1e12 if ms else None


def products(row: dict) -> str:
    kernels = (row.get("design") or {}).get("kernels") or {}
    found = sorted({f"{k.get('algorithm')} {k.get('precision')}" for k in kernels.values()
                    if k.get("algorithm") in ("tiled", "splitk", "nhwc", "nhwck", "aligned", "kmajor", "direct", "gemv")})
    return ", ".join(found) or "-"


def fmt(value, digits=1):
    return f"{value:.{digits}f}" if isinstance(value, (int, float)) else "-"


def number(task: str) -> int:
    return int(task.split("_", 1)[0])


def scoreboard(results: dict, kernelbench: pathlib.Path) -> list:
    tol = float(results.get("summary", {}).get("run_tol") or results["tasks"][0].get("tol") or 1e-4)
    strict_only = tol < 1e-3
    lines = [f"tol {tol:g}: vs library = egg TFLOP/s over the library's at "
             + ("`strict` (TF32 off)" if strict_only else "the faster of `default` and `tf32`"), "",
             "| task | GFLOP | egg ms | egg TFLOP/s | library TFLOP/s strict | tf32 | default | vs library | egg's "
             "products |", "|---|---|---|---|---|---|---|---|---|"]
    ratios = {"GEMM": [], "convolution": []}
    for row in sorted(results["tasks"], key=lambda r: number(r["task"])):
        # level 1's, or a folder suite's (level 0) copy of a level-1 task file
        if row.get("level") not in (0, 1) or number(row["task"]) not in GEMMS | CONVOLUTIONS or \
                not (kernelbench / "level1" / row["task"]).is_file():
            continue
        flops = task_flops(kernelbench / "level1" / row["task"])
        if flops == 0:  # 12_Matmul_with_diagonal_matrices_ is A.unsqueeze(1) * B: no product to count
            lines.append(f"| {row['task'][:-3]} | 0 (elementwise) | - | - | - | - | - | - | - |")
            continue
        ok = row.get("status") == "ok" and row.get("correct")
        egg_ms = ((row.get("time_ms") or {}).get("candidate") or {}).get("median") if ok else None
        library = {s: tflops(flops, median_ms(row, s)) for s in ("strict", "tf32", "default")}
        matched = library["strict"] if strict_only else max(
            (v for v in (library["tf32"], library["default"]) if v), default=None)
        egg = tflops(flops, egg_ms)
        ratio = egg / matched if egg and matched else None
        if ratio:
            ratios["GEMM" if number(row["task"]) in GEMMS else "convolution"].append(ratio)
        lines.append(f"| {row['task'][:-3]} | {fmt(flops / 1e9)} | {fmt(egg_ms, 3)} | {fmt(egg)} | "
                     f"{fmt(library['strict'])} | {fmt(library['tf32'])} | {fmt(library['default'])} | "
                     f"{fmt(ratio, 2)}{'x' if ratio else ''} | {products(row) if ok else row.get('status')} |")
    lines += ["", "| family | tasks | geomean egg / library TFLOP/s | below 1.0x |", "|---|---|---|---|"]
    for family, values in ratios.items():
        if values:
            geomean = math.exp(sum(math.log(v) for v in values) / len(values))
            lines.append(f"| {family} | {len(values)} | {geomean:.2f}x | {sum(v < 1 for v in values)} |")
    return lines


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("results", type=pathlib.Path)
    parser.add_argument("--kernelbench", type=pathlib.Path, default=ROOT.parent / "shared" / "kernelbench")
    args = parser.parse_args()
    results = json.loads(args.results.read_text())
    print("\n".join(scoreboard(results, args.kernelbench)))


if __name__ == "__main__":
    main()
