"""The fuzzer's generator and judge (python/egg_fuzz), without egg: programs are valid, deterministic and varied,
and every way a candidate can go wrong gets a failing verdict."""

import re

import pytest
import torch

from egg_fuzz import driver
from egg_fuzz.generator import FAMILIES, TRIAL_SEEDS, generate, well_conditioned

SEEDS = range(16)


@pytest.fixture(scope="module")
def programs():
    return [generate(seed) for seed in SEEDS]


def _load(source: str) -> dict:
    namespace: dict = {}
    exec(compile(source, "<fuzz>", "exec"), namespace)
    return namespace


def test_same_seed_same_program_and_torch_state_untouched():
    torch.manual_seed(7)
    before = torch.random.get_rng_state()
    first = generate(5).source
    assert torch.equal(torch.random.get_rng_state(), before)
    assert generate(5).source == first
    assert generate(6).source != first


def test_programs_run_in_pytorch_and_are_well_conditioned(programs):
    for seed, program in zip(SEEDS, programs):
        namespace = _load(program.source)
        model = namespace["Model"](*namespace["get_init_inputs"]())
        inputs = namespace["get_inputs"]()
        assert [tuple(x.shape) for x in inputs] == program.input_shapes
        outputs = model(*inputs)
        for out in outputs if isinstance(outputs, tuple) else (outputs,):
            assert out.is_floating_point() and torch.isfinite(out).all(), seed
        assert well_conditioned(program.source, TRIAL_SEEDS), seed
        assert program.ops, seed


def test_every_output_depends_on_the_program_no_dead_ops(programs):
    """Every op's value is read by a later op or returned: the capture cannot drop any of them."""
    for seed, program in zip(SEEDS, programs):
        source = program.source
        body = source.split("def forward")[1].split("def get_inputs")[0]
        assigned = [line.split(" = ")[0].strip() for line in body.splitlines() if " = " in line]
        for name in assigned:
            uses = len(re.findall(rf"\b{name}\b", body)) - 1
            assert uses >= 1, (seed, name, source)


def test_seeds_cover_every_family(programs):
    families = set()
    for program in programs:
        families |= program.families
    assert families == set(FAMILIES)


def test_parse_seeds():
    assert driver.parse_seeds("0-3,7, 9") == [0, 1, 2, 3, 7, 9]


def _report(*screened, final=()):
    return {"screened": [{"move": move, "status": status, "reason": reason} for move, status, reason in screened],
            "stages": [{"candidates": [{"move": move, "status": status, "reason": reason}
                                       for move, status, reason in final]}]}


def test_judge_ranks_a_wrong_result_worst_even_when_another_seed_passed():
    row = {"status": "ok", "correct": True, "pytorch_ops": []}
    report = _report(("seed 0", "ok", ""), ("seed 1", "mismatch", "not allclose"), final=[("seed 0", "ok", "")])
    assert driver.judge(row, report)[0] == "incorrect"


def test_judge_verdicts():
    ok = {"status": "ok", "correct": True, "pytorch_ops": []}
    passed = _report(("seed 0", "ok", ""), final=[("seed 0", "ok", "")])
    assert driver.judge(ok, passed)[0] == "correct"
    assert driver.judge(dict(ok, pytorch_ops=["aten.sort.default"]), passed)[0] == "partial"
    crashed = _report(("seed 0", "ok", ""), ("seed 1", "compile_error", "boom"), final=[("seed 0", "ok", "")])
    assert driver.judge(ok, crashed)[0] == "failed"
    assert driver.judge(None, None)[0] == "error"
    assert driver.judge({"status": "error", "correct": False, "reason": "worker died"}, None)[0] == "error"
    refused = {"status": "error", "correct": False, "reason": "capture failed: data-dependent control flow"}
    assert driver.judge(refused, None)[0] == "unsupported"
    all_pytorch = _report(("seed 0", "rejected", "no Triton kernel launched in the forward call"))
    assert driver.judge({"status": "failed", "correct": False, "reason": "no candidate"}, all_pytorch)[0] == \
        "unsupported"
