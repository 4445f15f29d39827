"""Markdown tables of an `egg bench` results.json, as the READMEs under bench/results/ show them: per level
(from the summary), per level-1 family (GEMM, convolution) when the run has them, and per task (with the matmul
products each final kernel used, read from its design record: the row's `design`, else the `expert.design` of
DIR/tasks/<task>/report.json, else the `# egg-design:` line of DIR/tasks/<task>/model_new.py).

    python bench/kb_tables.py bench/results/NAME/results.json [--tol 0.0001]
"""
import argparse
import json
import math
import pathlib

DESIGN_MARKER = "# egg-design: "


def fmt(value, digits=2, suffix=""):
    return f"{value:.{digits}f}{suffix}" if isinstance(value, (int, float)) else "-"


PRODUCT_ALGORITHMS = ("tiled", "splitk", "sequential", "flash", "nhwc", "nhwck", "aligned", "kmajor")


def design_products(design: dict) -> str:
    kernels = design.get("kernels", {})
    found = sorted({k["precision"] for k in kernels.values() if k.get("algorithm") in PRODUCT_ALGORITHMS})
    return "+".join(found) or "-"


def task_design(row: dict, task_dir: pathlib.Path):
    """The final kernel's design record: the row's, its report.json's, or its model_new.py's; None if none."""
    if isinstance(row.get("design"), dict):
        return row["design"]
    report = task_dir / "report.json"
    if report.is_file():
        design = (json.loads(report.read_text()).get("expert") or {}).get("design")
        if isinstance(design, dict):
            return design
    model_new = task_dir / "model_new.py"
    if model_new.is_file():
        for line in model_new.read_text().splitlines():
            if line.startswith(DESIGN_MARKER):
                return json.loads(line[len(DESIGN_MARKER):])
    return None


def products(row: dict, task_dir: pathlib.Path) -> str:
    design = task_design(row, task_dir)
    return "-" if design is None else design_products(design)


def without_column(lines: list, column: int) -> list:
    """The table without its `column`-th column (from 1)."""
    return ["|".join(cell for i, cell in enumerate(line.split("|")) if i != column) for line in lines]


def level_table(summary: dict, run_tol: str, other_tol: str) -> list:
    lines = ["| level | tasks | correct " + run_tol + " | correct " + other_tol + " | fast_1 vs eager | fast_1 vs "
             "torch.compile | geomean vs eager | geomean vs torch.compile | mean vs eager | median vs torch.compile |",
             "|---|---|---|---|---|---|---|---|---|---|"]
    groups = [(level, summary["levels"][level]) for level in sorted(summary["levels"])]
    groups.append(("all", summary["overall"]))
    for name, group in groups:
        run, other = group["tol"][run_tol], group["tol"].get(other_tol, {})
        tasks = group["tasks"]
        lines.append(
            f"| {name} | {tasks} | {run['correct']} ({run['correct'] / tasks:.0%}) | {other.get('correct', '-')} | "
            f"{fmt(run['fast_p_vs_eager']['1'])} | {fmt(run['fast_p_vs_compile']['1'])} | "
            f"{fmt(run['speedup_vs_eager']['geomean'], suffix='x')} | "
            f"{fmt(run['speedup_vs_compile']['geomean'], suffix='x')} | "
            f"{fmt(run['speedup_vs_eager']['mean'], suffix='x')} | "
            f"{fmt(run['speedup_vs_compile']['median'], suffix='x')} |")
    return lines


def task_table(results: dict, folder: pathlib.Path, other_tol: str) -> list:
    lines = ["| level | task | status | x eager | x torch.compile | egg ms | torch.compile ms | correct " + other_tol
             + " | matmul products | Triton share |", "|---|---|---|---|---|---|---|---|---|---|"]
    for row in sorted(results["tasks"], key=lambda r: (r["level"], int(r["task"].split("_", 1)[0]))):
        name = row["task"][: -len(".py")]
        time_ms = row.get("time_ms") or {}
        egg_ms = (time_ms.get("candidate") or {}).get("mean")
        compile_ms = (time_ms.get("compile") or {}).get("mean")
        other = (row.get("at_tol") or {}).get(other_tol)
        checked = "-" if other is None else ("yes" if other.get("correct") else "no")
        share = row.get("triton_time_share")
        lines.append(
            f"| {row['level']} | {name} | {row['status']} | {fmt(row.get('speedup_vs_eager'))} | "
            f"{fmt(row.get('speedup_vs_compile'))} | {fmt(egg_ms, 3)} | {fmt(compile_ms, 3)} | {checked} | "
            f"{products(row, folder / 'tasks' / name) if row['correct'] else '-'} | "
            f"{fmt(share * 100, 0, '%') if isinstance(share, (int, float)) else '-'} |")
    return lines


# KernelBench level 1's families by task number: matrix products, and convolutions (transposed ones included).
FAMILIES = {"GEMM (1-4, 6-18)": set(range(1, 19)) - {5}, "convolution (50, 54-87)": {50, *range(54, 88)}}


def geomean(values: list):
    return math.exp(sum(math.log(v) for v in values) / len(values)) if values else None


def family_table(results: dict) -> list:
    """Level-1 families present in the run: geomean speedups over their correct tasks, and how many are below 1.0
    against torch.compile."""
    lines = ["| level-1 family | tasks | correct | geomean vs eager | geomean vs torch.compile | below 1.0x vs torch.compile |",
             "|---|---|---|---|---|---|"]
    for name, numbers in FAMILIES.items():
        rows = [r for r in results["tasks"] if r["level"] == 1 and int(r["task"].split("_", 1)[0]) in numbers]
        if not rows:
            continue
        good = [r for r in rows if r["correct"]]
        eager = geomean([r["speedup_vs_eager"] for r in good])
        compiled = geomean([r["speedup_vs_compile"] for r in good])
        below = sum(1 for r in good if r["speedup_vs_compile"] < 1.0)
        lines.append(f"| {name} | {len(rows)} | {len(good)} | {fmt(eager, suffix='x')} | {fmt(compiled, suffix='x')} | "
                     f"{below} |")
    return lines if len(lines) > 2 else []


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("results")
    parser.add_argument("--tol", default="0.0001", help="the other tolerance's key in at_tol")
    args = parser.parse_args()
    path = pathlib.Path(args.results)
    results = json.loads(path.read_text())
    summary = results["summary"]
    run_tol = str(summary.get("run_tol", "0.01"))
    levels, tasks = level_table(summary, run_tol, args.tol), task_table(results, path.parent, args.tol)
    if float(args.tol) == float(run_tol):  # a run at that tolerance (`--tol 1e-4`): nothing re-checked
        levels, tasks = without_column(levels, 4), without_column(tasks, 8)
    print("\n".join(levels))
    print()
    families = family_table(results)
    if families:
        print("\n".join(families))
        print()
    print("\n".join(tasks))


if __name__ == "__main__":
    main()
