"""Dynamic batch (issue 25): `--dynamic batch` compiles one file whose kernels take the batch as an argument.

Each fixture (a norm, a GEMM with an epilogue, a convolution with a pool) is compiled once with --max-batch 32 and
then run here, in Triton's interpreter, at batch 1, 3 and 17 against the task's Model, with the task's forward
replaced by one that raises: a fallback inside the range would fail the test, not pass it. `egg eval --dynamic
batch` checks the same sizes itself; a file made for one batch fails that check, and a task whose forward fixes
its batch is refused with one line.
"""

import importlib.util
import json
import subprocess
import sys

import pytest
import torch

from conftest import ROOT as REPO

TASKS = REPO / "tests" / "fixtures" / "tasks"
# a norm, a GEMM with an epilogue, a convolution with a pool, and a mean over every element (a reduction whose
# length grows with the batch: its one-tile design is looped instead)
FIXTURES = ["dynamic_layernorm.py", "dynamic_linear_gelu.py", "dynamic_conv_pool.py", "dynamic_mse.py"]


def _load(path):
    spec = importlib.util.spec_from_file_location(f"egg_dynamic_{path.stem}", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _fallback(*args, **kwargs):
    raise AssertionError("the candidate fell back to the task's forward")


def _built(candidate):
    """The candidate file's module, its task's Model and a ModelNew holding the same weights."""
    module = _load(candidate)
    torch.manual_seed(0)
    reference = module.Model(*module.get_init_inputs())
    model = module.ModelNew(*module.get_init_inputs())
    model.load_state_dict(reference.state_dict())
    return module, reference, model


def _kernels_only(module, model, *inputs):
    """model(*inputs) with the task's forward made to raise: a fallback fails the test."""
    own_forward, module.Model.forward = module.Model.forward, _fallback
    try:
        return model(*inputs)
    finally:
        module.Model.forward = own_forward


@pytest.mark.parametrize("task", FIXTURES)
def test_one_file_is_correct_at_batch_1_3_and_17_without_fallback(egg, tmp_path, task):
    candidate = tmp_path / f"dyn_{task}"
    proc = egg.run("compile", TASKS / task, "--device", "cpu", "--dynamic", "batch", "--max-batch", "32",
                   "--out", candidate)
    assert proc.returncode == 0, proc.stderr
    source = candidate.read_text()
    assert "# Dynamic batch:" in source and "egg_B" in source
    module, reference, model = _built(candidate)
    for batch in (1, 3, 17):
        inputs = [torch.randn(batch, *x.shape[1:]) for x in module.get_inputs()]
        expected = reference(*inputs)
        got = _kernels_only(module, model, *inputs)
        assert got.shape == expected.shape
        torch.testing.assert_close(got, expected, atol=1e-4, rtol=1e-4, msg=f"batch {batch}")
    # past --max-batch the guard hands the call to the task's own forward, and says so once
    big = [torch.randn(33, *x.shape[1:]) for x in module.get_inputs()]
    with pytest.warns(RuntimeWarning, match="the batch is outside the 1..32 the kernels hold for") as caught:
        torch.testing.assert_close(model(*big), reference(*big))
        torch.testing.assert_close(model(*big), reference(*big))
    assert len([w for w in caught if "egg:" in str(w.message)]) == 1, [str(w.message) for w in caught]


def test_a_dynamic_dim_1_file_is_correct_at_sequence_1_3_and_17_without_fallback(egg, tmp_path):
    # --dynamic dim1: a [batch, sequence, features] input whose sequence length is the runtime size, through a
    # matrix product over batch*sequence rows, a softmax along the sequence and a norm over the features
    task = TASKS / "dynamic_sequence.py"
    candidate = tmp_path / "seq.py"
    proc = egg.run("compile", task, "--device", "cpu", "--dynamic", "dim1", "--max-size", "32", "--out", candidate)
    assert proc.returncode == 0, proc.stderr
    assert "# Dynamic dim 1:" in candidate.read_text()
    module, reference, model = _built(candidate)
    for sequence in (1, 3, 17):
        x = torch.randn(2, sequence, 32)
        got = _kernels_only(module, model, x)
        torch.testing.assert_close(got, reference(x), atol=1e-4, rtol=1e-4, msg=f"sequence {sequence}")
    with pytest.warns(RuntimeWarning, match="the size of dim 1 is outside the 1..32 the kernels hold for"):
        x = torch.randn(2, 33, 32)
        torch.testing.assert_close(model(x), reference(x))
    other_batch = torch.randn(3, 5, 32)  # dim 0 stays the captured 2: the guard sends it to the task's forward
    torch.testing.assert_close(model(other_batch), reference(other_batch))
    proc, result = egg.eval_json(task, candidate, "--dynamic", "dim1", "--max-size", "32", "--no-store")
    assert result["status"] == "ok" and result["batch_sizes"] == [1, 3, 17, 32], result
    assert result["batch_dims"] == [1]
    fixed = tmp_path / "fixed.py"
    assert egg.run("compile", task, "--device", "cpu", "--out", fixed).returncode == 0
    proc, result = egg.eval_json(task, fixed, "--dynamic", "dim1", "--no-store")
    assert result["status"] != "ok" and "dim 1 size 1" in result["reason"], result["reason"]


def test_causal_attention_over_a_dynamic_sequence_is_one_file_without_fallback(egg, tmp_path):
    # Its scores are sequence x sequence (sizes of the square, {"sym": [q, a, d]} in the IR); the flash kernel
    # loops over the keys up to the runtime length, and the mask is cut from the longest sequence's buffer.
    task = TASKS / "dynamic_causal_attention.py"
    candidate = tmp_path / "attention.py"
    proc = egg.run("compile", task, "--device", "cpu", "--dynamic", "dim1", "--max-size", "24", "--out", candidate)
    assert proc.returncode == 0, proc.stderr
    assert "(attention)" in candidate.read_text() and "for n0 in range(0, egg_B, BLOCK_N)" in candidate.read_text()
    module, reference, model = _built(candidate)
    for sequence in (1, 3, 17, 24):
        x = torch.randn(2, sequence, 32)
        got = _kernels_only(module, model, x)
        torch.testing.assert_close(got, reference(x), atol=1e-4, rtol=1e-4, msg=f"sequence {sequence}")


def test_batch_and_sequence_both_dynamic_is_one_file_without_fallback(egg, tmp_path):
    # --dynamic batch,dim1: two runtime sizes, egg_B and egg_C; the linear layers' rows are B*S and the scores
    # B*H*S*S (polynomials of both). One file, correct at points of both sizes, and `egg eval` checks them.
    task = TASKS / "dynamic_causal_attention.py"
    candidate = tmp_path / "both.py"
    proc = egg.run("compile", task, "--device", "cpu", "--dynamic", "batch,dim1", "--max-size", "4,24",
                   "--out", candidate)
    assert proc.returncode == 0, proc.stderr
    source = candidate.read_text()
    assert "# Dynamic sizes:" in source and "egg_B, egg_C = egg_sizes" in source
    module, reference, model = _built(candidate)
    for batch, sequence in ((1, 1), (3, 5), (2, 17), (4, 24)):
        x = torch.randn(batch, sequence, 32)
        got = _kernels_only(module, model, x)
        # one sequence of one step cut from a longer one keeps its dim-0 stride, which no kernel reads
        sliced = _kernels_only(module, model, x[:1, :1])
        torch.testing.assert_close(got, reference(x), atol=1e-4, rtol=1e-4, msg=f"{batch}x{sequence}")
        torch.testing.assert_close(sliced, reference(x[:1, :1]), atol=1e-4, rtol=1e-4)
    big = torch.randn(5, 3, 32)  # batch 5 is past --max-size's 4: the task's own forward, said once
    with pytest.warns(RuntimeWarning, match="the sizes are outside the 1..4 x 1..24 the kernels hold for"):
        torch.testing.assert_close(model(big), reference(big))
    proc, result = egg.eval_json(task, candidate, "--dynamic", "batch,dim1", "--max-size", "4,24", "--no-store")
    assert result["status"] == "ok", result["reason"]
    assert result["batch_sizes"] == [[1, 1], [1, 24], [3, 3], [4, 1], [4, 17], [4, 24]]
    assert result["batch_dims"] == [0, 1]


@pytest.mark.parametrize("value, message", [
    ("dim0,dim0", "--dynamic: dim 0 is named twice in 'dim0,dim0'"),
    ("seq", "--dynamic: each dynamic dimension is batch or dimN (dim1, dim2, ...), not 'seq'"),
])
def test_a_bad_dynamic_dimension_is_refused_in_one_line(egg, tmp_path, value, message):
    proc = egg.run("compile", TASKS / "dynamic_sequence.py", "--device", "cpu", "--dynamic", value,
                   "--out", tmp_path / "never.py")
    assert proc.returncode == 2 and proc.stderr.count("\n") == 1 and message in proc.stderr, proc.stderr


def test_a_largest_size_without_a_dynamic_dimension_is_refused_in_one_line(egg, tmp_path):
    proc = egg.run("compile", TASKS / "dynamic_sequence.py", "--device", "cpu", "--max-size", "8",
                   "--out", tmp_path / "never.py")
    assert proc.returncode == 2 and proc.stderr.count("\n") == 1, proc.stderr
    assert "--max-size requires --dynamic" in proc.stderr
    proc = egg.run("compile", TASKS / "dynamic_sequence.py", "--device", "cpu", "--dynamic", "batch",
                   "--max-size", "8,16", "--out", tmp_path / "never.py")
    assert proc.returncode == 2 and "--max-size gives 2 sizes for 1 dynamic dimension(s)" in proc.stderr


def test_a_dynamic_dimension_no_input_has_is_refused_in_one_line(egg, tmp_path):
    proc = egg.run("compile", TASKS / "dynamic_sequence.py", "--device", "cpu", "--dynamic", "dim3",
                   "--out", tmp_path / "never.py")
    assert proc.returncode == 1
    assert proc.stderr.count("\n") == 1 and "no dynamic dim 3: no tensor input has a dim 3" in proc.stderr


def test_a_module_whose_far_sample_passes_int32_offsets_indexes_in_int64(egg, tmp_path):
    # Rows of 2^21 floats at --max-batch 2: the file is generated at batch 2, 3, 4, 5 and 1026, and only the last
    # passes 2^31 elements. Its int64 indexing used to change the code's form and the compile was refused (a
    # KernelBench convolution, 2_1, at --max-batch 128); now every batch indexes in int64, and is correct.
    task = TASKS / "dynamic_wide_rows.py"
    candidate = tmp_path / "wide.py"
    # 64k elements a program: the interpreter's cost is per program (the default 1024 took 13 s here)
    design = '{"seed": 0, "kernels": {"egg_k0_mul_2": {"algorithm": "flat", "xblock": 65536}}}'
    proc = egg.run("compile", task, "--device", "cpu", "--dynamic", "batch", "--max-batch", "2", "--out", candidate,
                   "--design", design)
    assert proc.returncode == 0, proc.stderr
    assert "tl.program_id(0).to(tl.int64)" in candidate.read_text()
    module = _load(candidate)
    model, reference = module.ModelNew(), module.Model()
    for batch in (1, 2):
        x = torch.randn(batch, 2097152)
        got = _kernels_only(module, model, x)
        torch.testing.assert_close(got, reference(x), atol=1e-4, rtol=1e-4, msg=f"batch {batch}")


def test_eval_checks_a_dynamic_file_at_other_batches_and_fails_a_fixed_one(egg, tmp_path):
    task = TASKS / "dynamic_linear_gelu.py"
    dynamic, fixed = tmp_path / "dynamic.py", tmp_path / "fixed.py"
    assert egg.run("compile", task, "--device", "cpu", "--dynamic", "batch", "--out", dynamic).returncode == 0
    assert egg.run("compile", task, "--device", "cpu", "--out", fixed).returncode == 0
    proc, result = egg.eval_json(task, dynamic, "--dynamic", "batch", "--no-store")
    assert result["status"] == "ok", result["reason"]
    assert result["batch_sizes"] == [1, 3, 17, 20]  # up to the task's own batch, 20
    proc, result = egg.eval_json(task, fixed, "--dynamic", "batch", "--no-store")
    assert result["status"] != "ok" and "batch 1" in result["reason"], result["reason"]
    text = egg.run("eval", task, dynamic, "--device", "cpu", "--dynamic", "batch", "--no-store")
    assert "dynamic batch: also correct at batch 1, 3, 17, 20" in text.stdout


def test_a_forward_that_fixes_its_batch_is_refused_in_one_line(egg, tmp_path):
    proc = egg.run("compile", TASKS / "fixed_batch_view.py", "--device", "cpu", "--dynamic", "batch",
                   "--out", tmp_path / "never.py")
    assert proc.returncode == 1
    assert proc.stderr.count("\n") == 1 and "no dynamic batch: the forward fixes the batch size" in proc.stderr
    assert not (tmp_path / "never.py").exists()


def test_dynamic_design_record_and_report_say_the_range(egg, tmp_path):
    candidate = tmp_path / "dyn.py"
    proc = egg.run("compile", TASKS / "dynamic_layernorm.py", "--device", "cpu", "--dynamic", "batch",
                   "--max-batch", "64", "--out", candidate, "--json")
    assert proc.returncode == 0, proc.stderr
    report = json.loads(proc.stdout)
    assert report["design"]["dynamic"] == {"dim": "batch", "min": 1, "max": 64}
    assert "for egg_B in\n# 1..64" in candidate.read_text()


def test_bench_rows_of_a_dynamic_batch_say_the_batches_checked(egg, tmp_path):
    suite = tmp_path / "suite"
    suite.mkdir()
    (suite / "dynamic_layernorm.py").write_text((TASKS / "dynamic_layernorm.py").read_text())
    proc = egg.run("bench", suite, "--device", "cpu", "--dynamic", "batch", "--max-batch", "20", "--seeds", "1",
                   "--trials", "1", "--rounds", "0", "--no-report", "--out", tmp_path / "out")
    assert proc.returncode == 0, proc.stderr
    (row,) = json.loads((tmp_path / "out" / "results.json").read_text())["tasks"]
    assert row["correct"] is True and row["batch_sizes"] == [1, 3, 17, 20], row
    assert row["by_batch"] is None, "nothing is timed on the cpu, at any batch"


def test_timeit_checks_each_batch_of_a_dynamic_file(egg, tmp_path):
    task = TASKS / "dynamic_linear_gelu.py"
    candidate = tmp_path / "dynamic.py"
    assert egg.run("compile", task, "--device", "cpu", "--dynamic", "batch", "--out", candidate).returncode == 0
    command = [sys.executable, "-m", "egg_worker.timeit", str(task), str(candidate), "--trials", "1", "--json"]
    env = dict(egg.env, PYTHONPATH=str(REPO / "python"))
    proc = subprocess.run(command + ["--batch-sizes", "1,7"], capture_output=True, text=True, env=env, timeout=300)
    assert proc.returncode == 0, proc.stderr
    rows = json.loads(proc.stdout)["batches"]
    assert [(row["batch"], row["correct"]) for row in rows] == [(1, True), (7, True)]
    assert all(row["triton_launches"] >= 1 for row in rows)  # the kernels ran, no fallback
    bad = subprocess.run(command + ["--batch-sizes", "0"], capture_output=True, text=True, env=env, timeout=300)
    assert bad.returncode == 2 and "--batch-sizes must be at least 1" in bad.stderr
