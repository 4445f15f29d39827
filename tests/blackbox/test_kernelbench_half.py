"""Half precision (`--precision bf16|fp16`, KernelBench's manner) on real KernelBench tasks, in Triton's interpreter.

A sample of level-1 tasks at reduced size (egg_worker.reduce, as test_kernelbench_expert.py does) covering
elementwise ops, reductions, norms, softmax, matrix products, convolutions (a transposed one too), pooling, scans
and a loss with integer targets, through one `egg bench --precision bf16` (and a smaller one in fp16): each must be
correct at the half precision's default tolerance (1e-2) against the task's Model cast to that dtype, with all its
work in Triton and the precision stated in its row and design record. Every level-1 task was run this way by hand
(docs/expert.md, "Half precision"); this sample keeps the CPU time near two minutes.

Also `egg compile --precision bf16` on a Linear: the addmm is a Triton kernel on bf16 operands, and `egg eval`
finds it correct.
"""

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from conftest import ROOT as REPO

KERNELBENCH = Path(os.environ.get("EGG_KERNELBENCH", REPO.parent / "shared" / "kernelbench"))
BF16_SAMPLE = [
    1, 3, 4,  # square and batched matrix products, a matrix-vector product
    19, 26,  # ReLU, GELU
    23, 24,  # softmax, log-softmax
    33, 35, 40,  # batch norm, group norm, layer norm
    47, 51,  # sum reduction, argmax
    41, 45,  # max pooling 1D, average pooling 2D
    54, 57,  # 3-D convolution, transposed 2-D convolution
    89,  # cumsum
    94, 95,  # MSE loss, cross entropy (integer targets stay int64)
    97,  # scaled dot-product attention
]
FP16_SAMPLE = [2, 23, 40, 45, 63, 89]  # a product, softmax, layer norm, pooling, a 2-D convolution, cumsum
TRANSPOSED_MAX_ELEMENTS = 16384
MAX_ELEMENTS = 65536
BENCH_TIMEOUT_S = 900

pytestmark = pytest.mark.skipif(not (KERNELBENCH / "level1").is_dir(), reason="KernelBench data not found")


def _reduced_level1(numbers, root: Path) -> list:
    sys.path.insert(0, str(REPO / "python"))
    from egg_worker.reduce import reduce_task

    directory = root / "level1"
    directory.mkdir(parents=True)
    names = []
    for path in sorted((KERNELBENCH / "level1").glob("*.py")):
        number = int(path.name.split("_", 1)[0])
        if number not in numbers:
            continue
        budget = TRANSPOSED_MAX_ELEMENTS if "conv_transposed" in path.name else MAX_ELEMENTS
        (directory / path.name).write_text(reduce_task(str(path), "aligned", budget).source)
        names.append(path.name)
    return names


def _bench(precision: str, numbers, root: Path) -> dict:
    names = _reduced_level1(numbers, root)
    env = dict(os.environ, EGG_HOME=str(root / "home"), OMP_NUM_THREADS="1")
    env.pop("TRITON_INTERPRET", None)
    command = [str(REPO / "egg"), "bench", "--kernelbench", str(root), "--level", "1", "--workers", "2",
               "--device", "cpu", "--seeds", "1", "--trials", "2", "--precision", precision, "--timeout", "600",
               "--no-report", "--out", str(root / "out")]
    with open(root / "bench.log", "w") as log:
        subprocess.run(command, env=env, stdout=log, stderr=subprocess.STDOUT, timeout=BENCH_TIMEOUT_S, check=False)
    results = json.loads((root / "out" / "results.json").read_text())
    return {"expected": names, "suite": results["suite"], "rows": {row["task"]: row for row in results["tasks"]},
            "log": (root / "bench.log").read_text()[-3000:]}


def _failures(result, precision: str) -> list:
    failures = []
    for name in result["expected"]:
        row = result["rows"].get(name)
        if row is None:
            failures.append(f"{name}: no result")
        elif not row.get("correct"):
            failures.append(f"{name}: {row.get('status')} {str(row.get('reason'))[:300]}")
        elif row.get("pytorch_ops") or not row.get("kernels"):
            failures.append(f"{name}: ops left to PyTorch {row.get('pytorch_ops')}, {row.get('kernels')} kernels")
        elif row.get("precision") != precision or row.get("tol") != 1e-2:
            failures.append(f"{name}: precision {row.get('precision')}, tol {row.get('tol')}")
        elif (row.get("design") or {}).get("dtype") != precision:
            failures.append(f"{name}: the design record says dtype {(row.get('design') or {}).get('dtype')}")
    return failures


@pytest.mark.parametrize("precision, sample", [("bf16", BF16_SAMPLE), ("fp16", FP16_SAMPLE)])
def test_level1_sample_is_correct_in_half_precision(tmp_path, precision, sample):
    result = _bench(precision, set(sample), tmp_path)
    assert len(result["expected"]) == len(sample)
    assert result["suite"]["precision"] == precision and result["suite"]["tol"] == 1e-2
    failures = _failures(result, precision)
    assert not failures, "\n".join(failures) + "\n" + result["log"]


def test_compile_lowers_a_bf16_linear_and_eval_finds_it_correct(egg, tmp_path):
    task = REPO / "tests" / "fixtures" / "tasks" / "linear_16x32x16.py"
    candidate = tmp_path / "linear_bf16.py"
    proc = egg.run("compile", task, "--device", "cpu", "--precision", "bf16", "--out", candidate, "--json")
    assert proc.returncode == 0, proc.stderr
    report = json.loads(proc.stdout)
    assert report["pytorch_ops"] == [] and [kernel["kind"] for kernel in report["kernels"]] == ["matmul"]
    assert report["design"]["dtype"] == "bf16"
    source = candidate.read_text()
    assert "tl.dot(a.to(EGG_BF16_DOT), b.to(EGG_BF16_DOT)" in source
    # both operands loaded in bf16 and handed to tl.dot as loaded: no widening to float32 and back in the K loop
    loop = source[source.index("for k0 in"):source.index("tl.dot(")]
    assert loop.count(", other=0.0)") == 2 and "float32" not in loop and "tl.where" not in loop, loop
    proc, result = egg.eval_json(task, candidate, "--precision", "bf16", "--no-store")
    assert result["status"] == "ok", result["reason"]
    assert result["precision"] == "bf16" and result["tol"] == 1e-2
    assert result["timing_protocol"]["precision"]["dtype"] == "bf16"
    proc, strict = egg.eval_json(task, candidate, "--precision", "bf16", "--tol", "1e-3", "--no-store")
    assert strict["tol"] == 1e-3, "an explicit --tol wins over the precision's default"


def test_a_bf16_gru_is_a_recurrent_kernel_and_eval_finds_it_correct(egg, tmp_path):
    task = REPO / "tests" / "fixtures" / "tasks" / "gru_2layer_small.py"
    candidate = tmp_path / "gru_bf16.py"
    proc = egg.run("compile", task, "--device", "cpu", "--precision", "bf16", "--out", candidate, "--json")
    assert proc.returncode == 0, proc.stderr
    report = json.loads(proc.stdout)
    assert report["pytorch_ops"] == [] and "recurrent" in [kernel["kind"] for kernel in report["kernels"]]
    assert "tl.dot(h.to(EGG_BF16_DOT)" in candidate.read_text()
    proc, result = egg.eval_json(task, candidate, "--precision", "bf16", "--no-store")
    assert result["status"] == "ok", result["reason"]
    assert result["precision"] == "bf16" and result["triton_launches"] > 0


def test_bf16_causal_attention_is_one_flash_kernel_and_eval_finds_it_correct(egg, tmp_path):
    # the softmax PyTorch computes over a float32 upcast, then casts back for the product: the flash kernel's own
    # float32 probabilities, cast for tl.dot
    task = REPO / "tests" / "fixtures" / "tasks" / "causal_attention_small.py"
    candidate = tmp_path / "attention_bf16.py"
    proc = egg.run("compile", task, "--device", "cpu", "--precision", "bf16", "--out", candidate, "--json")
    assert proc.returncode == 0, proc.stderr
    report = json.loads(proc.stdout)
    assert report["pytorch_ops"] == [] and [kernel["kind"] for kernel in report["kernels"]].count("attention") == 1
    assert "tl.dot(p.to(EGG_BF16_DOT), v.to(EGG_BF16_DOT)" in candidate.read_text()
    proc, result = egg.eval_json(task, candidate, "--precision", "bf16", "--no-store")
    assert result["status"] == "ok", result["reason"]
