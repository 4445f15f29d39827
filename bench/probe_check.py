"""egg's baselines against an independent timing of the same tasks (issue 20's check of the judge): for every
task of an `egg bench` results.json, egg's `default` eager and torch.compile times (PyTorch's defaults, timed
beside egg's kernel) divided by the reference's, per level and family, and the tasks off by more than a margin.

    python3 bench/probe_check.py bench/results/NAME/results.json [--reference DIR] [--over 0.10]

DIR holds either the H200 probe's `baseline_times.json` ({level: {task: {eager_mean, compile_mean}}}, a
standalone script run with PyTorch's defaults) or KernelBench's own `baseline_time_torch.json` and
`baseline_time_torch_compile_inductor_default.json` ({level: {task: {mean}}}, as H100_Modal); default: the H200
probe in ../shared/kernelbench/baseline_times. A ratio above 1 means egg timed PyTorch slower than the reference
did, so egg's speedup over that baseline may be overstated by up to the ratio; below 1, understated
(conservative). Standard library only.
"""
import argparse
import json
import pathlib
import statistics

ROOT = pathlib.Path(__file__).resolve().parents[1]
DEFAULT_REFERENCE = ROOT.parent / "shared" / "kernelbench" / "baseline_times" / "H200_probe"
LEVEL1_GEMMS = set(range(1, 19))
LEVEL1_CONVOLUTIONS = {50, *range(54, 88)}


def load_reference(directory: pathlib.Path) -> dict:
    """{(level, task file): (eager ms, torch.compile ms)} from either layout."""
    times = {}
    probe = directory / "baseline_times.json"
    if probe.exists():
        for level, tasks in json.loads(probe.read_text()).items():
            for task, row in tasks.items():
                times[(int(level.removeprefix("level")), task)] = (row.get("eager_mean"), row.get("compile_mean"))
        return times
    eager = json.loads((directory / "baseline_time_torch.json").read_text())
    compiled = json.loads((directory / "baseline_time_torch_compile_inductor_default.json").read_text())
    for level, tasks in eager.items():
        for task, row in tasks.items():
            other = compiled.get(level, {}).get(task, {})
            times[(int(level.removeprefix("level")), task)] = (row.get("mean"), other.get("mean"))
    return times


def family(level: int, task: str) -> str:
    number = int(task.split("_")[0])
    if level == 1:
        return "GEMM" if number in LEVEL1_GEMMS else "convolution" if number in LEVEL1_CONVOLUTIONS else "other"
    return "convolution" if "conv" in task.lower() else "other"


def ratios(results: dict, reference: dict) -> list:
    """(level, family, task, eager ratio, compile ratio) for each task both timed."""
    rows = []
    for row in results["tasks"]:
        runs = ((row.get("baselines") or {}).get("default") or {}).get("runs") or {}
        level = int(row.get("level") or 0)
        if (level, row["task"]) not in reference:  # a folder of tasks, not a level: the level that has the name
            levels = [lv for lv, task in reference if task == row["task"]]
            level = levels[0] if len(levels) == 1 else level
        ref = reference.get((level, row["task"]))
        if not runs or ref is None:
            continue
        ours = [((runs.get(kind) or {}).get("time_ms") or {}).get("mean") for kind in ("eager", "compile")]
        pair = [o / r if o and r else None for o, r in zip(ours, ref)]
        if any(value is not None for value in pair):
            rows.append((level, family(level, row["task"]), row["task"], *pair))
    return rows


def report(rows: list, over: float) -> list:
    fmt = lambda value: f"{value:.3f}" if value is not None else "-"
    lines = ["| level | family | tasks | eager median (range) | torch.compile median (range) |", "|---|---|---|---|---|"]
    groups = {}
    for level, kind, _, eager, compiled in rows:
        groups.setdefault((level, kind), []).append((eager, compiled))
    for (level, kind), pairs in sorted(groups.items()):
        cells = []
        for index in (0, 1):
            values = [pair[index] for pair in pairs if pair[index] is not None]
            cells.append(f"{fmt(statistics.median(values))} ({fmt(min(values))}-{fmt(max(values))})" if values
                         else "-")
        lines.append(f"| {level} | {kind} | {len(pairs)} | {cells[0]} | {cells[1]} |")
    off = [row for row in rows if any(value is not None and abs(value - 1) > over for value in row[3:])]
    lines += ["", f"Off by more than {over:.0%} ({len(off)} of {len(rows)}):", ""]
    if off:
        lines += ["| level | task | eager | torch.compile |", "|---|---|---|---|"]
        lines += [f"| {level} | {task} | {fmt(eager)} | {fmt(compiled)} |" for level, _, task, eager, compiled in off]
    return lines


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("results", type=pathlib.Path)
    parser.add_argument("--reference", type=pathlib.Path, default=DEFAULT_REFERENCE)
    parser.add_argument("--over", type=float, default=0.10, help="the margin a task is listed beyond (0.10: 10%%)")
    args = parser.parse_args()
    try:
        reference = load_reference(args.reference)
        results = json.loads(args.results.read_text())
    except (OSError, ValueError) as error:
        raise SystemExit(f"probe_check: {error}")
    print(f"egg's `default` baselines over {args.reference.name}'s (mean times)\n")
    print("\n".join(report(ratios(results, reference), args.over)))


if __name__ == "__main__":
    main()
