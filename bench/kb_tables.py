"""Markdown tables of an `egg bench` results.json, as the READMEs under bench/results/ show them: per level
(from the summary) and per task (with the matmul products each final kernel used, read from the design record
of DIR/tasks/<task>/model_new.py).

    python bench/kb_tables.py bench/results/NAME/results.json [--tol 0.0001]
"""
import argparse
import json
import pathlib

DESIGN_MARKER = "# egg-design: "


def fmt(value, digits=2, suffix=""):
    return f"{value:.{digits}f}{suffix}" if isinstance(value, (int, float)) else "-"


def products(model_new: pathlib.Path) -> str:
    if not model_new.is_file():
        return "-"
    for line in model_new.read_text().splitlines():
        if line.startswith(DESIGN_MARKER):
            kernels = json.loads(line[len(DESIGN_MARKER):]).get("kernels", {})
            found = sorted({k["precision"] for k in kernels.values() if k.get("algorithm") == "tiled"})
            return "+".join(found) or "-"
    return "-"


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
            f"{products(folder / 'tasks' / name / 'model_new.py') if row['correct'] else '-'} | "
            f"{fmt(share * 100, 0, '%') if isinstance(share, (int, float)) else '-'} |")
    return lines


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("results")
    parser.add_argument("--tol", default="0.0001", help="the other tolerance's key in at_tol")
    args = parser.parse_args()
    path = pathlib.Path(args.results)
    results = json.loads(path.read_text())
    summary = results["summary"]
    run_tol = str(summary.get("run_tol", "0.01"))
    print("\n".join(level_table(summary, run_tol, args.tol)))
    print()
    print("\n".join(task_table(results, path.parent, args.tol)))


if __name__ == "__main__":
    main()
