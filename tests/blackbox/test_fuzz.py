"""Differential fuzzing of the expert backend (python/egg_fuzz), the CI share: a fixed set of random programs.

Each program (random op chains over random shapes, valid by construction) goes through the real `egg bench` on
the CPU: every seed design of the expert compiler is screened against PyTorch in Triton's interpreter and the
first that passes is evaluated in full. No program may be judged incorrect (a silent miscompile), failed or
errored, and the set must really exercise every op family in Triton, so that it cannot pass by compiling
nothing. By hand, any seeds: `PYTHONPATH=python python -m egg_fuzz --seeds 0-199` (docs/expert.md, "Differential fuzzing").
"""
import shutil
import sys

import pytest

from conftest import ROOT

sys.path.insert(0, str(ROOT / "python"))
from egg_fuzz import driver  # noqa: E402
from egg_fuzz.generator import FAMILIES  # noqa: E402

# Reduced reproducers of the bugs the fuzzer found, each a regression test here.
REPRODUCERS = sorted((ROOT / "tests" / "fixtures" / "tasks").glob("fuzz_*.py"))
# Chosen once for coverage and time: together they use every family several times (asserted below).
CI_SEEDS = list(range(1000, 1024))
# Design seeds of the expert compiler checked per program (0: registers and fused kernels, 1 and 2: the other
# algorithm families: implicit GEMM convolutions, looped reductions, ...).
EGG_SEEDS = 3
# Each family must run in Triton (a correct program with none of its ops in PyTorch) in at least this many programs.
MIN_PROGRAMS_PER_FAMILY = 2


@pytest.fixture(scope="module")
def outcomes(tmp_path_factory):
    out = tmp_path_factory.mktemp("fuzz")
    return driver.run(CI_SEEDS, out, ROOT / "egg", egg_seeds=EGG_SEEDS, batch=len(CI_SEEDS), log=lambda _: None)


def test_no_program_is_miscompiled_or_crashes(outcomes):
    bad = [o for o in outcomes if o.verdict in driver.BAD_VERDICTS]
    assert not bad, driver.summary(outcomes)


def test_every_seed_design_was_checked(outcomes):
    """A seed design the screen never ran would let a miscompile through unseen."""
    for outcome in outcomes:
        moves = {move for move, _status, _reason in outcome.candidates}
        assert {f"seed {i}" for i in range(EGG_SEEDS)} <= moves, (outcome.seed, outcome.candidates)


def test_the_programs_exercise_every_family_in_triton(outcomes):
    in_triton = [o for o in outcomes if o.verdict == "correct"]
    assert len(in_triton) >= len(outcomes) * 3 // 4, driver.summary(outcomes)
    for family in FAMILIES:
        count = sum(family in o.families for o in in_triton)
        assert count >= MIN_PROGRAMS_PER_FAMILY, f"{family}: {count} programs\n{driver.summary(outcomes)}"


@pytest.fixture(scope="module")
def reproducers(tmp_path_factory):
    root = tmp_path_factory.mktemp("fuzz_reproducers")
    (root / "tasks").mkdir()
    for path in REPRODUCERS:
        shutil.copy(path, root / "tasks" / path.name)
    return driver.judge_tasks(root / "tasks", root, ROOT / "egg", egg_seeds=EGG_SEEDS)


@pytest.mark.parametrize("name", [path.name for path in REPRODUCERS])
def test_reproducer_is_correct_in_triton(reproducers, name):
    verdict, reason, candidates, pytorch_ops = reproducers[name]
    assert verdict == "correct", (verdict, reason, candidates, pytorch_ops)
