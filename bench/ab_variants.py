"""A/B sets of candidate files for one GPU call, measured by bench/h200_ab.sh through egg_worker.timeit.

    .venv/bin/python bench/ab_variants.py make transposed DIR [--egg build/egg]   # candidates + DIR/manifest.json
    python3 bench/ab_variants.py table DIR/results.jsonl                          # the table of a run

Sets (each variant the same task compiled with another design record, so a pair differs in one decision):
- `transposed`: transposed convolutions (issue 21) at full KernelBench size, each in its seed-0 tiles as the NCHW
  phase form (`tiled`) and channels-last (`nhwc`) at tf32 products (tol 1e-2), and for the stride-1 ones seed 1's
  NCHW form in ieee products against channels-last in tf32x3 products (tol 1e-4).
- `nan`: max-like reductions and poolings in their seed-0 files (nan kept as PyTorch keeps it) against the same
  files with tl.max / tl.min and plain folds (`plain`, nan dropped): the cost of PyTorch's nan semantics.
- `phases`: transposed convolutions in seed 0's channels-last form at tf32 (tol 1e-2), their output phases side
  by side along one grid axis (`inner`, as generated) against the phase on grid axis 1 (`outer`, the order
  before: the same file with the lanes and the grid rewritten).
- `cat`: concatenations written in place by their pieces' kernels (`in-place`, seed 0 at tf32, tol 1e-2) against
  the same record with `plan.concat_in_place` false (`copied`: a kernel copies each piece into the cat).
- `fold`: sums over a product's columns and pooled transposed convolutions folded (`folded`, seed 0 at tf32, tol
  1e-2) against the same record with `plan.fold_summed_products` false (`whole`: the product or convolution,
  then the sum); at tol 1e-4 the same pair in tf32x3 products (`folded-4`, `whole-4`).
- `kloop`: channels-last convolutions with a loop over the taps around the channel steps (`nested`, nhwc)
  against one K loop over (tap, channel step) (`kloop`, nhwck), in seed 0's tiles, and the one loop in 128x128
  tiles of 8 warps (`wide`), at tf32 (tol 1e-2, seed 0 as it is beside them where it is not channels-last), and
  at tf32x3 (tol 1e-4, `-4`) for three of them.
- `graph`: seed 0 at tf32 (tol 1e-2) of eleven level-3 networks in one CUDA graph (`graphed`, as seed 0 takes it
  for 8 launches or more with no op left to PyTorch) against the same record without it (`plain`).
- `colred`: reductions over a convolution's channels finished in its tile (`fused`, seed 0 at tf32, tol 1e-2)
  against the same record with `plan.reduce_in_products` false (`apart`: the product stored, then a reduction
  kernel); at tol 1e-4 the same pair in tf32x3 products (`fused-4`, `apart-4`).

`--append` adds a set's candidates to DIR's manifest (several sets in one GPU call).

`make` needs egg built and torch (each task captured once on the meta device, as tests/golden/golden.py does, its
graph kept in $EGG_GOLDEN/graphs); the candidates and copies of the tasks go to DIR, so DIR alone is
carried to the GPU machine. `table` needs only the standard library.
"""
import argparse
import importlib.util
import json
import pathlib
import re
import shutil
import subprocess
import sys

ROOT = pathlib.Path(__file__).resolve().parents[1]
KERNELBENCH = ROOT.parent / "shared" / "kernelbench"
TRANSPOSED = ["level1/65_", "level1/69_", "level1/77_", "level1/57_", "level2/36_", "level2/49_"]
STRIDE_ONE = {"level1/65_", "level1/69_", "level1/57_"}
PHASES = ["level1/81_", "level1/79_", "level1/77_", "level1/73_", "level2/36_", "level2/49_", "level2/2_", "level2/16_"]
CAT = ["level1/92_", "level3/17_", "level3/6_", "level3/34_"]
FOLD = ["level2/14_", "level2/18_", "level2/51_", "level2/42_", "level2/77_"]
COLUMN_REDUCTIONS = ["level2/25_", "level2/32_", "level2/36_", "level2/6_", "level2/49_", "level2/58_"]
REDUCING = {"aten.min.dim", "aten.amax.default", "aten.amin.default", "aten.sum.dim_IntList", "aten.mean.dim",
            "aten.max.dim", "aten.logsumexp.default"}
KLOOP = ["level1/55_", "level1/56_", "level1/62_", "level1/67_", "level2/32_", "level1/57_", "level1/65_",
         "level1/71_", "level1/61_", "level3/11_", "level3/9_"]
KLOOP_TIGHT = {"level1/55_", "level1/57_", "level2/32_"}
GRAPH = ["level3/9_", "level3/11_", "level3/4_", "level3/8_", "level3/19_", "level3/20_", "level3/5_", "level3/3_",
         "level3/13_", "level3/14_", "level3/12_"]
NAN = ["level1/23_", "level1/24_", "level1/41_", "level1/42_", "level1/43_", "level1/49_", "level1/53_"]


def task_file(prefix: str) -> pathlib.Path:
    level, number = prefix.split("/")
    matches = sorted((KERNELBENCH / level).glob(number + "*.py"))
    if len(matches) != 1:
        sys.exit(f"ab_variants: {prefix}: {len(matches)} task files")
    return matches[0]


def golden():
    """tests/golden/golden.py as a module: its capture on the meta device (full-size tasks without their memory)
    into $EGG_GOLDEN/graphs, reused where a graph is there already."""
    spec = importlib.util.spec_from_file_location("golden", ROOT / "tests" / "golden" / "golden.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def run_compile(egg: str, task: pathlib.Path, design: dict, out: pathlib.Path) -> subprocess.CompletedProcess:
    """`egg compile --graph` of the task (captured on the meta device once) with `design`, to `out`."""
    capture = golden()
    capture.capture_one(str(task))
    graph = capture.graph_path(task)
    return subprocess.run([egg, "compile", str(task), "--graph", str(graph), "--design", json.dumps(design),
                           "--out", str(out), "--json"], capture_output=True, text=True)


def compile_task(egg: str, task: pathlib.Path, design: dict, out: pathlib.Path) -> dict:
    proc = run_compile(egg, task, design, out)
    if proc.returncode != 0 or "warning: --design" in proc.stderr:
        sys.exit(f"ab_variants: {task.name}: {proc.stderr.strip()[-400:]}")
    return json.loads(proc.stdout)


def with_convolutions(report: dict, skip: frozenset = frozenset(), **changes) -> dict:
    """The report's design with every convolution kernel's design changed (the K step kept within 64), but the
    kernels named in `skip`."""
    kernels = {}
    for kernel in report["kernels"]:
        design = dict(kernel["design"])
        if kernel["kind"] == "matmul" and "aten.convolution.default" in kernel["ops"] and kernel["name"] not in skip:
            design.update(changes, rblock=min(design["rblock"], 64))
        kernels[kernel["name"]] = design
    return {**report["design"], "kernels": kernels}


def compile_fitting(egg: str, task: pathlib.Path, report: dict, out: pathlib.Path, **changes) -> dict:
    """with_convolutions(report, **changes) compiled, leaving as they are the convolutions the change does not fit
    (a CNN's first convolution of 3 channels is no channels-last GEMM): each one egg warns of is skipped."""
    skip = set()
    while True:
        proc = run_compile(egg, task, with_convolutions(report, frozenset(skip), **changes), out)
        unfit = re.search(r"for kernel (\S+) does not fit", proc.stderr)
        if proc.returncode == 0 and not unfit:
            return json.loads(proc.stdout)
        if proc.returncode != 0 or unfit.group(1) in skip:
            sys.exit(f"ab_variants: {task.name}: {proc.stderr.strip()[-400:]}")
        skip.add(unfit.group(1))


def staged(prefixes: list, out: pathlib.Path):
    """(prefix, task file, tag) per task, its copy written to out/TAG_task.py (1_65 for level1/65_...)."""
    for prefix in prefixes:
        task = task_file(prefix)
        tag = prefix.replace("level", "").replace("/", "_").rstrip("_")
        shutil.copy(task, out / f"{tag}_task.py")
        yield prefix, task, tag


def make_transposed(egg: str, out: pathlib.Path) -> list:
    entries = []
    for prefix, task, tag in staged(TRANSPOSED, out):
        seed0 = compile_task(egg, task, {"seed": 0, "precision": "tf32"}, out / f"{tag}_tiled.py")
        compile_task(egg, task, with_convolutions(seed0, algorithm="nhwc"), out / f"{tag}_nhwc.py")
        entries += [{"tag": tag, "variant": "tiled", "tol": 1e-2, "baselines": True},
                    {"tag": tag, "variant": "nhwc", "tol": 1e-2, "baselines": False}]
        if prefix in STRIDE_ONE:
            seed1 = compile_task(egg, task, {"seed": 1}, out / f"{tag}_ieee.py")
            compile_task(egg, task, with_convolutions(seed1, algorithm="nhwc", precision="tf32x3"),
                         out / f"{tag}_nhwc-tf32x3.py")
            entries += [{"tag": tag, "variant": "ieee", "tol": 1e-4, "baselines": False},
                        {"tag": tag, "variant": "nhwc-tf32x3", "tol": 1e-4, "baselines": False}]
    return entries


def without_nan_semantics(source: str) -> str:
    """tl.max / tl.min for the nan-keeping reducers (their definitions left as they are) and folds without
    propagate_nan: the kernels as they were before nan was kept."""
    lines = []
    for line in source.splitlines(keepends=True):
        if not line.startswith("def _egg_m"):
            line = line.replace("_egg_max(", "tl.max(").replace("_egg_min(", "tl.min(")
        lines.append(line.replace(", propagate_nan=tl.PropagateNan.ALL", ""))
    return "".join(lines)


def make_nan(egg: str, out: pathlib.Path) -> list:
    entries = []
    for _, task, tag in staged(NAN, out):
        compile_task(egg, task, {"seed": 0}, out / f"{tag}_kept.py")
        kept = (out / f"{tag}_kept.py").read_text()
        plain = without_nan_semantics(kept)
        if plain == kept or re.search(r"^\s+.*_egg_m(ax|in)\(", plain, re.M):
            sys.exit(f"ab_variants: {tag}: no nan-keeping reduction to replace")
        (out / f"{tag}_plain.py").write_text(plain)
        entries += [{"tag": tag, "variant": "kept", "tol": 1e-4, "baselines": False},
                    {"tag": tag, "variant": "plain", "tol": 1e-4, "baselines": False}]
    return entries


def phases_outer(source: str) -> str:
    """The phase on grid axis 1 again: `bindex = pid % B; tile = pid // B` and a grid (tiles * B,) back to
    `tile = program_id(0)`, `bindex = program_id(1)` and a grid (tiles, B)."""
    lanes = re.compile(r"    # the batch \(output phases\) fastest[^\n]*\n"
                       r"    bindex = tl\.program_id\(0\)(\.to\(tl\.int64\))? % (\d+)\n"
                       r"    tile = tl\.program_id\(0\) // \d+\n")
    source, lanes_changed = lanes.subn(lambda m: f"    tile = tl.program_id(0)\n"
                                              f"    bindex = tl.program_id(1){m.group(1) or ''}\n", source)
    source, grids_changed = re.subn(r"\[\((.+?) \* (\d+),\)\]\(", r"[(\1, \2)](", source)
    if lanes_changed == 0 or lanes_changed != grids_changed:
        raise ValueError(f"{lanes_changed} phase-inner kernels, {grids_changed} grids")
    return source


def make_phases(egg: str, out: pathlib.Path) -> list:
    entries = []
    for _, task, tag in staged(PHASES, out):
        report = compile_task(egg, task, {"seed": 0, "precision": "tf32"}, out / f"{tag}_probe.py")
        compile_task(egg, task, with_convolutions(report, algorithm="nhwc"), out / f"{tag}_inner.py")
        (out / f"{tag}_probe.py").unlink()
        try:
            (out / f"{tag}_outer.py").write_text(phases_outer((out / f"{tag}_inner.py").read_text()))
        except ValueError as error:
            sys.exit(f"ab_variants: {tag}: {error}")
        entries += [{"tag": tag, "variant": "inner", "tol": 1e-2, "baselines": True},
                    {"tag": tag, "variant": "outer", "tol": 1e-2, "baselines": False}]
    return entries


def make_cat(egg: str, out: pathlib.Path) -> list:
    entries = []
    for _, task, tag in staged(CAT, out):
        report = compile_task(egg, task, {"seed": 0, "precision": "tf32"}, out / f"{tag}_in-place.py")
        if not any(" in place: " in note for note in report["planner_notes"]):
            sys.exit(f"ab_variants: {tag}: no concatenation written in place")
        copied = {**report["design"], "plan": {**report["design"]["plan"], "concat_in_place": False}}
        compile_task(egg, task, {k: v for k, v in copied.items() if k != "kernels"}, out / f"{tag}_copied.py")
        entries += [{"tag": tag, "variant": "in-place", "tol": 1e-2, "baselines": True},
                    {"tag": tag, "variant": "copied", "tol": 1e-2, "baselines": False}]
    return entries


def option_pairs(egg: str, out: pathlib.Path, prefixes: list, option: str, names: tuple, applied) -> list:
    """Each task in seed 0 with the plan option `option` on (`names[0]`) and off (`names[1]`): at tf32 products
    (tol 1e-2, the baselines beside the first) and at tf32x3 (tol 1e-4, names with a `-4`), the tol 1e-2 pairs
    of every task first (a call cut short keeps whole pairs). `applied(report)` says the option changed the
    plan."""
    loose, tight = [], []
    on, off = names
    for _, task, tag in staged(prefixes, out):
        for precision, suffix, tol, pairs in (("tf32", "", 1e-2, loose), ("tf32x3", "-4", 1e-4, tight)):
            report = compile_task(egg, task, {"seed": 0, "precision": precision}, out / f"{tag}_{on}{suffix}.py")
            if not applied(report):
                sys.exit(f"ab_variants: {tag}: {option} changes nothing")
            apart = {"seed": 0, "precision": precision, "plan": {**report["design"]["plan"], option: False}}
            compile_task(egg, task, apart, out / f"{tag}_{off}{suffix}.py")
            pairs += [{"tag": tag, "variant": on + suffix, "tol": tol, "baselines": not suffix},
                      {"tag": tag, "variant": off + suffix, "tol": tol, "baselines": False}]
    return loose + tight


def make_fold(egg: str, out: pathlib.Path) -> list:
    return option_pairs(egg, out, FOLD, "fold_summed_products", ("folded", "whole"),
                        lambda report: any("_fold_" in kernel["name"] for kernel in report["kernels"]))


def make_colred(egg: str, out: pathlib.Path) -> list:
    return option_pairs(egg, out, COLUMN_REDUCTIONS, "reduce_in_products", ("fused", "apart"),
                        lambda report: any(kernel["kind"] == "matmul" and set(kernel["ops"]) & REDUCING
                                           for kernel in report["kernels"]))


def make_kloop(egg: str, out: pathlib.Path) -> list:
    """Channels-last convolutions in seed 0's tiles, the taps around the channel steps (`nested`, nhwc) against
    one K loop over (tap, channel step) (`kloop`, nhwck), and that loop in 128x128 tiles of 8 warps (`wide`), at
    tf32 (tol 1e-2) beside seed 0 as it is (`seed`, where that is not the nested form already); then at tf32x3
    (tol 1e-4) for KLOOP_TIGHT."""
    loose, tight = [], []
    for prefix, task, tag in staged(KLOOP, out):
        for precision, suffix, tol, pairs in (("tf32", "", 1e-2, loose), ("tf32x3", "-4", 1e-4, tight)):
            if suffix and prefix not in KLOOP_TIGHT:
                continue
            report = compile_task(egg, task, {"seed": 0, "precision": precision}, out / f"{tag}_seed{suffix}.py")
            nested = compile_fitting(egg, task, report, out / f"{tag}_nested{suffix}.py", algorithm="nhwc",
                                     precision=precision)
            kloop = compile_fitting(egg, task, nested, out / f"{tag}_kloop{suffix}.py", algorithm="nhwck")
            # one K loop in Hopper-sized tiles: 128 rows, up to 128 output channels (the task's), 8 warps
            channels = re.search(r"^out_channels = (\d+)", task.read_text(), re.M)  # level 3's CNNs: 128
            columns = min(128, 1 << (int(channels.group(1)) - 1).bit_length()) if channels else 128
            compile_fitting(egg, task, kloop, out / f"{tag}_wide{suffix}.py", xblock=128, yblock=columns,
                            num_warps=8, num_stages=3)
            variants = ["nested", "kloop", "wide"]
            if (out / f"{tag}_seed{suffix}.py").read_text() == (out / f"{tag}_nested{suffix}.py").read_text():
                (out / f"{tag}_seed{suffix}.py").unlink()
            else:
                variants.insert(0, "seed")
            pairs += [{"tag": tag, "variant": v + suffix, "tol": tol, "baselines": not suffix and k == 0}
                      for k, v in enumerate(variants)]
    return loose + tight


def make_graph(egg: str, out: pathlib.Path) -> list:
    """Seed 0 at tf32 (tol 1e-2) as `egg optimize` proposes it for forwards of many launches with no op left to
    PyTorch, in one CUDA graph (`graphed`, plan.cuda_graph), against the same record without it (`plain`), the
    baselines beside `plain`; a task whose plan leaves an op to PyTorch is skipped (seed 0 graphs none)."""
    entries = []
    for _, task, tag in staged(GRAPH, out):
        plain = compile_task(egg, task, {"seed": 0, "precision": "tf32"}, out / f"{tag}_plain.py")
        if plain["pytorch_ops"]:
            print(f"ab_variants: {tag}: {len(plain['pytorch_ops'])} op(s) left to PyTorch, skipped")
            continue
        compile_task(egg, task, {"seed": 0, "precision": "tf32", "plan": {"cuda_graph": True}},
                     out / f"{tag}_graphed.py")
        entries += [{"tag": tag, "variant": "plain", "tol": 1e-2, "baselines": True},
                    {"tag": tag, "variant": "graphed", "tol": 1e-2, "baselines": False}]
    return entries


def table(path: pathlib.Path) -> list:
    rows = {}
    for line in path.read_text().splitlines():
        row = json.loads(line)
        rows.setdefault(row["tag"], {})[row["variant"]] = row
    variants = list(dict.fromkeys(v for by_variant in rows.values() for v in by_variant))

    def median(row: dict, key: str):
        return ((row.get("time_ms") or {}).get(key) or {}).get("median")

    lines = ["| task | eager ms | torch.compile ms | " + " | ".join(f"{v} ms" for v in variants) + " | correct |",
             "|---|---|---|" + "---|" * len(variants) + "---|"]
    for tag, by_variant in rows.items():
        eager = next((median(r, "eager") for r in by_variant.values() if median(r, "eager")), None)
        compiled = next((median(r, "compile") for r in by_variant.values() if median(r, "compile")), None)
        cells = [f"{median(by_variant[v], 'candidate'):.3f}" if v in by_variant and median(by_variant[v], "candidate")
                 else "-" for v in variants]
        correct = ", ".join(f"{v} {'yes' if r.get('correct') else 'NO: ' + str(r.get('reason') or r.get('error'))[:60]}"
                            for v, r in by_variant.items())
        fmt = lambda x: f"{x:.3f}" if x else "-"
        lines.append(f"| {tag} | {fmt(eager)} | {fmt(compiled)} | " + " | ".join(cells) + f" | {correct} |")
    return lines


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    sub = parser.add_subparsers(dest="command", required=True)
    make = sub.add_parser("make")
    make.add_argument("set", choices=("transposed", "nan", "cat", "phases", "fold", "colred", "kloop", "graph"))
    make.add_argument("out", type=pathlib.Path)
    make.add_argument("--append", action="store_true", help="add to DIR's manifest instead of replacing it")
    make.add_argument("--egg", default=str(ROOT / "egg"))
    show = sub.add_parser("table")
    show.add_argument("results", type=pathlib.Path)
    args = parser.parse_args()
    if args.command == "table":
        print("\n".join(table(args.results)))
        return
    args.out.mkdir(parents=True, exist_ok=True)
    manifest = args.out / "manifest.json"
    earlier = json.loads(manifest.read_text()) if args.append and manifest.exists() else []
    entries = {"transposed": make_transposed, "nan": make_nan, "cat": make_cat,
               "phases": make_phases, "fold": make_fold, "colred": make_colred,
               "kloop": make_kloop, "graph": make_graph}[args.set](args.egg, args.out)
    manifest.write_text(json.dumps(earlier + entries, indent=1) + "\n")
    print(f"wrote {len(entries)} candidates and {args.out / 'manifest.json'}")


if __name__ == "__main__":
    main()
