#!/usr/bin/env python3
"""The expert compiler's golden check: the candidates it writes for KernelBench tasks, before and after a change.

    tests/golden/golden.py capture  [--levels 1 2 3]        # graphs into $EGG_GOLDEN/graphs (once; minutes)
    tests/golden/golden.py generate NAME [--egg ./egg]      # candidates into $EGG_GOLDEN/NAME (seconds)
    tests/golden/golden.py compare OLD NEW                  # the tasks whose candidates differ, with a diff stat
    tests/golden/golden.py compare OLD NEW --blank-lines    # ...blank lines aside (a layout-only change)

Capturing needs torch (the project's .venv) and ../shared/kernelbench; generating needs only the egg binary
(`egg compile --graph`), so a compiler change is checked in seconds against every task at seeds 0, 1 and 2 and
at the tf32 product precision. $EGG_GOLDEN defaults to /tmp/egg-golden; nothing here is committed output.
"""
from __future__ import annotations

import argparse
import concurrent.futures
import difflib
import json
import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
KERNELBENCH = ROOT.parent / "shared" / "kernelbench"
# (variant name, design record): the three seed families at ieee products, and seed 0 at tf32 products.
VARIANTS = [("s0", {"seed": 0}), ("s1", {"seed": 1}), ("s2", {"seed": 2}), ("s0-tf32", {"seed": 0, "precision": "tf32"})]


def golden_dir() -> Path:
    return Path(os.environ.get("EGG_GOLDEN", "/tmp/egg-golden"))


def tasks(levels: list[int]) -> list[Path]:
    return [path for level in levels for path in sorted((KERNELBENCH / f"level{level}").glob("*.py"))]


def graph_path(task: Path) -> Path:
    return golden_dir() / "graphs" / f"{task.parent.name}_{task.stem}.json"


def _capture_on(spec, device):
    """The worker's own capture. On the meta device first: no memory for KernelBench's multi-GB inputs, no
    arithmetic, and the same graph as on the CPU (where a task's code needs real values, the CPU is used)."""
    from egg_worker import capture, loader

    model = loader.build_model(spec.Model, spec, device, 42)
    inputs = loader.make_inputs(spec, 42, device)
    ir = capture.capture(model, inputs)  # its reference forward, on meta, computes shapes only
    ir["device"] = "cpu"
    del model, inputs
    return ir


def capture_one(task: str) -> str:
    """Captures one task in this process (a pool worker)."""
    sys.path.insert(0, str(ROOT / "python"))
    os.environ.setdefault("TRITON_INTERPRET", "1")
    import torch
    from egg_worker import loader

    path = Path(task)
    out = graph_path(path)
    if out.exists():
        return f"{path.stem}: cached"
    spec = loader.load_task(str(path))
    ir = None
    for device in (torch.device("meta"), torch.device("cpu")):
        try:
            ir = _capture_on(spec, device)
            break
        except Exception as error:  # a task the capture refuses is recorded as such
            ir = {"unsupported": loader.one_line(error)}
    ir["task"] = str(path)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(ir))
    return f"{path.stem}: {'unsupported' if 'unsupported' in ir else 'ok'}"


def cmd_capture(args) -> int:
    todo = [str(task) for task in tasks(args.levels) if not graph_path(task).exists()]
    print(f"capturing {len(todo)} task(s) into {golden_dir() / 'graphs'}", flush=True)
    with concurrent.futures.ProcessPoolExecutor(max_workers=args.jobs) as pool:
        for line in pool.map(capture_one, todo):
            print(line, flush=True)
    return 0


def generate_one(egg: str, task: Path, out_dir: Path) -> str:
    graph = graph_path(task)
    if not graph.exists() or "unsupported" in json.loads(graph.read_text()):
        return f"{task.stem}: no graph"
    lines = []
    for name, design in VARIANTS:
        out = out_dir / f"{task.parent.name}_{task.stem}.{name}.py"
        proc = subprocess.run([egg, "compile", str(task), "--graph", str(graph), "--design", json.dumps(design),
                               "--out", str(out)], capture_output=True, text=True)
        if proc.returncode != 0:
            out.with_suffix(".failed").write_text(proc.stderr)
            lines.append(f"{name} failed")
    return f"{task.stem}: {', '.join(lines) or 'ok'}"


def cmd_generate(args) -> int:
    out_dir = golden_dir() / args.name
    out_dir.mkdir(parents=True, exist_ok=True)
    egg = str(Path(args.egg).resolve())
    with concurrent.futures.ThreadPoolExecutor(max_workers=args.jobs) as pool:
        results = list(pool.map(lambda task: generate_one(egg, task, out_dir), tasks(args.levels)))
    failed = [line for line in results if not line.endswith(": ok")]
    print(f"{len(results)} task(s), {len(failed)} not fully generated; candidates in {out_dir}")
    for line in failed:
        print("  " + line)
    return 0


def cmd_compare(args) -> int:
    old, new = golden_dir() / args.old, golden_dir() / args.new
    names = sorted({path.name for path in old.iterdir()} | {path.name for path in new.iterdir()})
    differing = 0
    blank_only = 0
    for name in names:
        a, b = old / name, new / name
        if not a.exists() or not b.exists():
            print(f"{name}: only in {'new' if b.exists() else 'old'}")
            differing += 1
            continue
        if a.read_bytes() == b.read_bytes():
            continue
        old_lines, new_lines = a.read_text().splitlines(), b.read_text().splitlines()
        if args.blank_lines:
            old_lines = [line for line in old_lines if line.strip()]
            new_lines = [line for line in new_lines if line.strip()]
            if old_lines == new_lines:
                blank_only += 1
                continue
        differing += 1
        diff = list(difflib.unified_diff(old_lines, new_lines, lineterm="", n=0))
        changed = sum(1 for line in diff if line[:1] in "+-" and line[:3] not in ("+++", "---"))
        print(f"{name}: {changed} line(s) differ")
        if args.show:
            print("\n".join(diff[: args.show]))
    print(f"{len(names)} file(s), {differing} differ" + (f", {blank_only} in blank lines only" if args.blank_lines else ""))
    return 1 if differing else 0


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = parser.add_subparsers(dest="command", required=True)
    capture_parser = sub.add_parser("capture")
    capture_parser.add_argument("--levels", type=int, nargs="+", default=[1, 2, 3])
    capture_parser.add_argument("--jobs", type=int, default=1)
    capture_parser.set_defaults(run=cmd_capture)
    generate_parser = sub.add_parser("generate")
    generate_parser.add_argument("name")
    generate_parser.add_argument("--egg", default=str(ROOT / "build" / "egg"))
    generate_parser.add_argument("--levels", type=int, nargs="+", default=[1, 2, 3])
    generate_parser.add_argument("--jobs", type=int, default=2)
    generate_parser.set_defaults(run=cmd_generate)
    compare_parser = sub.add_parser("compare")
    compare_parser.add_argument("old")
    compare_parser.add_argument("new")
    compare_parser.add_argument("--show", type=int, default=0, help="print up to N diff lines per file")
    compare_parser.add_argument("--blank-lines", action="store_true", help="ignore blank lines (count them apart)")
    compare_parser.set_defaults(run=cmd_compare)
    args = parser.parse_args()
    return args.run(args)


if __name__ == "__main__":
    sys.exit(main())
