"""Run generated programs through the real `egg bench` (expert backend, Triton's interpreter) and judge each.

One `egg bench` process per batch: one long-lived worker, no tuning on the CPU. Every seed design of the expert
compiler (`--egg-seeds`) is screened (one trial against PyTorch) and the first that passes is evaluated in full
(fresh inputs per trial, the exploit guards); a failure in either counts. No Debug repairs: a repair would hide
the first candidate's failure. Each program gets one verdict, worst first:

- incorrect: a candidate ran and returned a wrong result (a silent miscompile, the worst bug);
- failed: a candidate did not compile, crashed, timed out or was refused by the harness;
- error: egg itself failed on the task (no row, or a row with status "error");
- unsupported: capture refused the program, or egg wrote a candidate that runs all its work in PyTorch;
- partial: correct, with some ops left to PyTorch (counted, acceptable);
- correct: correct, all work in Triton.
"""

from __future__ import annotations

import dataclasses
import json
import os
import pathlib
import shutil
import subprocess

from .generator import FAMILIES, generate

REPO = pathlib.Path(__file__).resolve().parents[2]
VERDICTS = ("correct", "partial", "unsupported", "error", "failed", "incorrect")
BAD_VERDICTS = ("incorrect", "failed", "error")
# Candidate statuses from the harness (harness/eval_types.cpp).
WRONG_RESULT = {"mismatch"}
BROKEN = {"compile_error", "runtime_error", "timeout", "crash", "rejected"}
# A candidate the harness refused because it launched no Triton kernel: the program is all PyTorch fallbacks.
NO_KERNEL = "no Triton kernel launched"


@dataclasses.dataclass
class Outcome:
    seed: int
    verdict: str
    reason: str
    families: set
    ops: list
    pytorch_ops: list = dataclasses.field(default_factory=list)
    candidates: list = dataclasses.field(default_factory=list)  # (move, status, reason)


def parse_seeds(text: str) -> list[int]:
    """'0-99', '3,17,40' or a mix ('0-9,42')."""
    seeds = []
    for part in text.split(","):
        part = part.strip()
        if "-" in part:
            first, last = part.split("-", 1)
            seeds.extend(range(int(first), int(last) + 1))
        elif part:
            seeds.append(int(part))
    return seeds


def task_name(seed: int) -> str:
    return f"fuzz_{seed:06d}.py"


def bench_command(egg: pathlib.Path, tasks: pathlib.Path, out: pathlib.Path, egg_seeds: int, tol: float,
                  trials: int, timeout_s: float) -> list[str]:
    return [str(egg), "bench", str(tasks), "--device", "cpu", "--out", str(out), "--seeds", str(egg_seeds),
            "--debug-attempts", "0", "--no-report", "--no-timing", "--trials", str(trials),
            "--tol", str(tol), "--timeout", str(timeout_s)]


def judge(row: dict | None, report: dict | None) -> tuple[str, str, list]:
    """(verdict, reason, candidates) of one task from its results.json row and report.json."""
    if row is None:
        return "error", "no row in results.json", []
    candidates = [(entry.get("move", ""), entry.get("status", ""), entry.get("reason", ""))
                  for entry in (report or {}).get("screened", [])]
    for stage in (report or {}).get("stages", []):
        for candidate in stage.get("candidates", []):
            candidates.append((candidate.get("move", ""), candidate.get("status", ""), candidate.get("reason", "")))
    wrong = [c for c in candidates if c[1] in WRONG_RESULT]
    if wrong:
        return "incorrect", f"{wrong[0][0]}: {wrong[0][2]}", candidates
    broken = [c for c in candidates if c[1] in BROKEN and NO_KERNEL not in c[2]]
    if broken:
        return "failed", f"{broken[0][0]}: {broken[0][1]}: {broken[0][2]}", candidates
    if row.get("status") == "error":
        reason = str(row.get("reason", ""))
        if "capture" in reason.lower():
            return "unsupported", reason, candidates
        return "error", reason, candidates
    if not row.get("correct"):
        if any(NO_KERNEL in c[2] for c in candidates) or "capture" in str(row.get("reason", "")).lower():
            return "unsupported", str(row.get("reason", "")), candidates
        return "error", str(row.get("reason", "")), candidates
    if row.get("pytorch_ops"):
        return "partial", "left to PyTorch: " + ", ".join(row["pytorch_ops"]), candidates
    return "correct", "", candidates


def run(seeds: list[int], out: pathlib.Path, egg: pathlib.Path = REPO / "egg", egg_seeds: int = 1,
        tol: float = 1e-4, trials: int = 2, timeout_s: float = 300, batch: int = 50,
        log=print, ops: tuple = (3, 7)) -> list[Outcome]:
    """Generate (`ops`: least and most ops a program), compile and judge every seed in batches of `batch`
    programs (one egg bench each); keep each program that is not correct or partial under OUT/failures/ with its
    verdict."""
    out.mkdir(parents=True, exist_ok=True)
    outcomes = []
    for start in range(0, len(seeds), batch):
        outcomes.extend(_run_batch(seeds[start:start + batch], out / f"batch{start // batch:04d}", egg, egg_seeds,
                                   tol, trials, timeout_s, log, ops))
    failures = out / "failures"
    for outcome in outcomes:
        if outcome.verdict in BAD_VERDICTS or outcome.verdict == "unsupported":
            failures.mkdir(exist_ok=True)
            source = next(out.glob(f"batch*/tasks/{task_name(outcome.seed)}")).read_text()
            header = f"# egg_fuzz verdict: {outcome.verdict}: {outcome.reason[:300]}\n".replace("\n", " ") + "\n"
            (failures / f"{outcome.verdict}_{task_name(outcome.seed)}").write_text(header + source)
    return outcomes


def _run_batch(seeds, root: pathlib.Path, egg, egg_seeds, tol, trials, timeout_s, log, ops) -> list[Outcome]:
    tasks = root / "tasks"
    if root.exists():
        shutil.rmtree(root)
    tasks.mkdir(parents=True)
    programs = {}
    for seed in seeds:
        programs[seed] = generate(seed, *ops)
        (tasks / task_name(seed)).write_text(programs[seed].source)
    log(f"egg_fuzz: seeds {seeds[0]}..{seeds[-1]} ({len(seeds)} programs)")
    judged = judge_tasks(tasks, root, egg, egg_seeds, tol, trials, timeout_s)
    outcomes = []
    for seed, program in programs.items():
        verdict, reason, candidates, pytorch_ops = judged[task_name(seed)]
        outcomes.append(Outcome(seed, verdict, reason, program.families, program.ops, pytorch_ops, candidates))
        log(f"  seed {seed}: {verdict}{': ' + reason[:160] if reason else ''}")
    return outcomes


def judge_tasks(tasks: pathlib.Path, root: pathlib.Path, egg: pathlib.Path = REPO / "egg", egg_seeds: int = 3,
                tol: float = 1e-4, trials: int = 2, timeout_s: float = 300) -> dict:
    """Every task file in `tasks` through one `egg bench` (its output, store and log under `root`):
    {file name: (verdict, reason, candidates, pytorch_ops)}."""
    env = dict(os.environ, EGG_HOME=str(root / "home"), OMP_NUM_THREADS=os.environ.get("OMP_NUM_THREADS", "1"))
    env.pop("TRITON_INTERPRET", None)
    names = sorted(path.name for path in tasks.glob("*.py"))
    command = bench_command(egg, tasks, root / "bench", egg_seeds, tol, trials, timeout_s)
    with open(root / "bench.log", "w") as bench_log:
        subprocess.run(command, env=env, stdout=bench_log, stderr=subprocess.STDOUT,
                       timeout=timeout_s * egg_seeds * len(names) + 600)
    results = root / "bench" / "results.json"
    rows = {row["task"]: row for row in json.loads(results.read_text())["tasks"]} if results.exists() else {}
    judged = {}
    for name in names:
        row = rows.get(name)
        report_path = root / "bench" / "tasks" / name[:-3] / "report.json"
        report = json.loads(report_path.read_text()) if report_path.exists() else None
        judged[name] = (*judge(row, report), list((row or {}).get("pytorch_ops", [])))
    return judged


def summary(outcomes: list[Outcome]) -> str:
    """A table: verdicts per op family (a program counts under each family it uses), then the totals."""
    lines = [f"{'family':<10} " + " ".join(f"{v:>11}" for v in VERDICTS)]
    for family in FAMILIES:
        counts = [sum(o.verdict == v and family in o.families for o in outcomes) for v in VERDICTS]
        lines.append(f"{family:<10} " + " ".join(f"{c:>11}" for c in counts))
    totals = [sum(o.verdict == v for o in outcomes) for v in VERDICTS]
    lines.append(f"{'programs':<10} " + " ".join(f"{c:>11}" for c in totals))
    bad = [o for o in outcomes if o.verdict in BAD_VERDICTS]
    for outcome in bad:
        lines.append(f"{outcome.verdict} seed {outcome.seed}: {outcome.reason[:300]}")
    return "\n".join(lines)
