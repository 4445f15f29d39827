import os
import subprocess
import sys

import pytest
import torch

from conftest import REPO, candidate_path, task_path
from egg_worker import loader


def test_each_import_is_a_fresh_module_and_sys_path_is_restored():
    path_before = list(sys.path)
    first = loader.import_fresh(task_path("relu_64"), "egg_test")
    second = loader.import_fresh(task_path("relu_64"), "egg_test")
    assert first is not second and first.__name__ != second.__name__
    assert first.Model is not second.Model
    assert sys.modules[first.__name__] is first
    assert sys.path == path_before
    loader.forget(first)
    loader.forget(second)
    assert first.__name__ not in sys.modules


def test_the_file_directory_is_importable_while_importing(tmp_path):
    (tmp_path / "helper_for_egg_test.py").write_text("VALUE = 41\n")
    (tmp_path / "uses_helper.py").write_text("import helper_for_egg_test\nVALUE = helper_for_egg_test.VALUE + 1\n")
    module = loader.import_fresh(str(tmp_path / "uses_helper.py"), "egg_test")
    assert module.VALUE == 42 and str(tmp_path) not in sys.path
    loader.forget(module)


def test_tasks_are_cached_by_content(tmp_path):
    path = tmp_path / "task.py"
    path.write_text("import torch\nclass Model(torch.nn.Module):\n    pass\n"
                    "def get_inputs():\n    return [1]\ndef get_init_inputs():\n    return []\n")
    first = loader.load_task(str(path))
    assert loader.load_task(str(path)) is first
    path.write_text(path.read_text().replace("[1]", "[2]"))
    changed = loader.load_task(str(path))
    assert changed is not first and changed.get_inputs() == [2]


def test_a_task_lacking_names_is_a_task_error():
    with pytest.raises(loader.TaskError, match="lacks get_inputs"):
        loader.load_task(task_path("no_get_inputs"))
    with pytest.raises(loader.TaskError, match="not found"):
        loader.load_task("/nonexistent/task.py")


def test_candidate_failures_are_one_line_reasons():
    with pytest.raises(loader.CandidateError, match=r"^import failed: SyntaxError: expected ':'"):
        loader.load_candidate(candidate_path("syntax_error"))
    with pytest.raises(loader.CandidateError, match="no class ModelNew"):
        loader.load_candidate(candidate_path("no_modelnew"))
    with pytest.raises(loader.RequestError, match="not found"):
        loader.load_candidate("/nonexistent/candidate.py")


def test_inputs_depend_on_the_seed_only():
    task = loader.load_task(task_path("relu_64"))
    cpu = torch.device("cpu")
    first, again, other = (loader.make_inputs(task, seed, cpu) for seed in (5, 5, 6))
    assert torch.equal(first[0], again[0]) and not torch.equal(first[0], other[0])


def test_models_are_built_from_the_init_seed():
    task = loader.load_task(task_path("linear_16x32x16"))
    cpu = torch.device("cpu")
    a, b, c = (loader.build_model(task.Model, task, cpu, seed) for seed in (1, 1, 2))
    assert torch.equal(a.linear.weight, b.linear.weight) and not torch.equal(a.linear.weight, c.linear.weight)
    assert not a.training
    assert loader.reference_model(task, cpu, 1) is loader.reference_model(task, cpu, 1)


def test_one_line_collapses_and_truncates():
    assert loader.one_line(ValueError("a\n  b")) == "ValueError: a b"
    assert loader.one_line(KeyError()) == "KeyError"
    assert len(loader.one_line(RuntimeError("x" * 2000))) == 500
    # Triton's CompilationError: the source excerpt first, the error last; both ends are kept
    compile_error = RuntimeError("at 23:15: " + "tmp0 = tl.load(ptr0 + x) " * 100 + "ValueError: Unsupported ptr type")
    shortened = loader.one_line(compile_error)
    assert len(shortened) == 500 and shortened.startswith("RuntimeError: at 23:15: tmp0")
    assert shortened.endswith("ValueError: Unsupported ptr type") and " ... " in shortened


def test_devices_are_refused_where_triton_cannot_run_kernels(monkeypatch):
    monkeypatch.setenv("TRITON_INTERPRET", "1")
    assert loader.resolve_device(None) == loader.resolve_device("cpu") == torch.device("cpu")
    with pytest.raises(loader.RequestError, match="interpreter"):
        loader.resolve_device("cuda")
    with pytest.raises(loader.RequestError, match="cuda or cpu"):
        loader.resolve_device("tpu")
    monkeypatch.delenv("TRITON_INTERPRET")
    with pytest.raises(loader.RequestError, match="TRITON_INTERPRET=1"):
        loader.resolve_device("cpu")


HALF_TASK = """import torch
class Model(torch.nn.Module):
    def __init__(self, scale):
        super().__init__()
        self.fc = torch.nn.Linear(4, 3)
        self.register_buffer("offset", torch.ones(3))
        self.scale = scale
    def forward(self, x, index):
        return self.fc(x)[index] * self.scale + self.offset
def get_inputs():
    return [torch.randn(2, 4), torch.tensor([1, 0]), 3]
def get_init_inputs():
    return [torch.tensor(2.0)]
"""


@pytest.mark.parametrize("precision, dtype", [("bf16", torch.bfloat16), ("fp16", torch.float16)])
def test_a_half_precision_casts_floating_inputs_parameters_and_buffers(tmp_path, precision, dtype):
    """KernelBench's manner: floating input and init-input tensors and the module (Module.to) cast; integer
    tensors and plain numbers kept."""
    path = tmp_path / "task.py"
    path.write_text(HALF_TASK)
    task = loader.load_task(str(path), precision)
    assert task.dtype == dtype and loader.load_task(str(path)).dtype is None
    x, index, number = loader.make_inputs(task, 1, torch.device("cpu"))
    assert x.dtype == dtype and index.dtype == torch.int64 and number == 3
    model = loader.build_model(task.Model, task, torch.device("cpu"), 42)
    assert model.fc.weight.dtype == dtype and model.offset.dtype == dtype and model.scale.dtype == dtype
    assert model(x, index).dtype == dtype
    reference = loader.reference_model(task, torch.device("cpu"), 42)
    assert reference is not loader.reference_model(loader.load_task(str(path)), torch.device("cpu"), 42)
    fp32 = loader.make_inputs(loader.load_task(str(path), "fp32"), 1, torch.device("cpu"))[0]
    assert torch.equal(fp32.to(dtype), x), "the same draws, cast"


def test_an_unknown_precision_is_refused(tmp_path):
    path = tmp_path / "task.py"
    path.write_text(HALF_TASK)
    with pytest.raises(loader.RequestError, match="precision must be one of fp32, bf16, fp16"):
        loader.load_task(str(path), "fp8")


BATCH_TASK = """import torch
class Model(torch.nn.Module):
    def forward(self, x, index, scale):
        return x[:, index] * scale
def get_inputs():
    return [torch.randn(4, 3), torch.randint(0, 3, (2,)), 0.5]
def get_init_inputs():
    return []
"""


def test_batch_inputs_take_their_rows_from_get_inputs_draws(tmp_path):
    """Dim 0 of the first tensor input is the batch: rows come from get_inputs() under seed, seed + 1, ... in
    turn; the other inputs are the first draw's."""
    path = tmp_path / "task.py"
    path.write_text(BATCH_TASK)
    task = loader.load_task(str(path))
    cpu = torch.device("cpu")
    draws = [loader.make_inputs(task, seed, cpu) for seed in (7, 8, 9)]
    assert loader.example_batch(draws[0]) == 4

    one = loader.make_batch_inputs(task, 7, cpu, 1)
    assert one[0].shape == (1, 3) and torch.equal(one[0], draws[0][0][:1])
    assert torch.equal(one[1], draws[0][1][:1]), "every tensor input with a dimension is cut to the batch"
    assert one[2] == 0.5

    ten = loader.make_batch_inputs(task, 7, cpu, 10)  # 2.5 x the task's batch: three draws
    assert ten[0].shape == (10, 3) and ten[0].is_contiguous()
    assert torch.equal(ten[0][:4], draws[0][0]) and torch.equal(ten[0][4:8], draws[1][0])
    assert torch.equal(ten[0][8:], draws[2][0][:2])
    assert torch.equal(ten[1], torch.cat([draws[0][1], draws[1][1], draws[2][1]])[:10])
    assert ten[2] == 0.5, "a non-tensor input is passed through"
    assert torch.equal(loader.make_batch_inputs(task, 7, cpu, 4)[0], draws[0][0]), "the task's batch: its draw"


def test_inputs_at_another_size_of_dim_1_take_their_slices_along_it(tmp_path):
    """A dynamic dim 1 (a sequence length): tensor inputs with a dim 1 are cut and joined along it, the others (here
    the 1-d index) are the first draw's."""
    path = tmp_path / "task.py"
    path.write_text(BATCH_TASK)
    task = loader.load_task(str(path))
    cpu = torch.device("cpu")
    draws = [loader.make_inputs(task, seed, cpu) for seed in (7, 8)]
    assert loader.example_batch(draws[0], 1) == 3
    five = loader.make_batch_inputs(task, 7, cpu, 5, 1)
    assert five[0].shape == (4, 5) and five[0].is_contiguous()
    assert torch.equal(five[0], torch.cat([draws[0][0], draws[1][0][:, :2]], dim=1))
    assert torch.equal(five[1], draws[0][1]) and five[2] == 0.5
    with pytest.raises(loader.TaskError, match="no tensor input has a dim 2"):
        loader.example_batch(draws[0], 2)
    assert loader.dynamic_fields({}) == []
    assert loader.dynamic_fields({"dynamic": {"batch_max": 9, "dim": 1}}) == [(1, 9)]
    assert loader.dynamic_fields({"dynamic": {"dims": [{"dim": 1, "batch_max": 9}, {"dim": 0, "batch_max": 4}]}}) \
        == [(0, 4), (1, 9)], "ordered by dimension"
    for bad in ({"dim": -1}, {"dims": [{"dim": 1}, {"dim": 1}]}, {"dims": []}):
        with pytest.raises(ValueError, match="dynamic dims must be distinct and 0 or more"):
            loader.dynamic_fields({"dynamic": bad})


def test_inputs_at_sizes_of_two_dimensions_are_cut_along_each(tmp_path):
    """Batch 6 and dim 1 of size 5: the dim-1 slices come from draws already at batch 6."""
    path = tmp_path / "task.py"
    path.write_text(BATCH_TASK)
    task = loader.load_task(str(path))
    cpu = torch.device("cpu")
    sized = loader.make_sized_inputs(task, 7, cpu, [(0, 6), (1, 5)])
    assert sized[0].shape == (6, 5) and sized[0].is_contiguous()
    first = loader.make_batch_inputs(task, 7, cpu, 6)
    second = loader.make_sized_inputs(task, 8, cpu, [(0, 6)])
    assert torch.equal(sized[0], torch.cat([first[0], second[0]], dim=1)[:, :5])
    assert torch.equal(sized[1], first[1]), "the 1-d index has no dim 1: cut to the batch only"


def test_example_batch_needs_a_tensor_input_with_a_dimension():
    assert loader.example_batch([3, torch.tensor(1.0), torch.zeros(5, 2)]) == 5
    with pytest.raises(loader.TaskError, match="no tensor input has a batch dimension"):
        loader.example_batch([3, torch.tensor(1.0), "x"])
    with pytest.raises(loader.TaskError):
        loader.example_batch([])


OVERFLOW_SCRIPT = """
import sys
import torch
import triton
import triton.language as tl
from triton.runtime import interpreter
from egg_worker import loader

@triton.jit
def add(x_ptr, out_ptr):
    offsets = tl.arange(0, 4)
    tl.store(out_ptr + offsets, tl.load(x_ptr + offsets) * 3 + 2147483000)

if sys.argv[1] == "skip":
    loader.skip_interpreter_overflow_checks()
out = torch.empty(4, dtype=torch.int32)
add[(1,)](torch.full((4,), 1000, dtype=torch.int32), out)
print(interpreter.interpreter_builder.options.sanitize_overflow, out.tolist())
"""


def test_the_interpreter_skips_its_unread_overflow_check_with_the_same_results():
    env = dict(os.environ, TRITON_INTERPRET="1", PYTHONPATH=str(REPO / "python"))
    wrapped = [2147483000 + 3000 - 2**32] * 4
    for mode, checks in (("keep", True), ("skip", False)):
        completed = subprocess.run([sys.executable, "-c", OVERFLOW_SCRIPT, mode], capture_output=True, text=True,
                                   timeout=120, env=env)
        assert completed.stdout.strip() == f"{checks} {wrapped}", completed.stderr[-2000:]


def test_skipping_the_overflow_check_leaves_compiled_triton_alone(monkeypatch):
    monkeypatch.delenv("TRITON_INTERPRET", raising=False)
    from triton.runtime import interpreter

    before = interpreter.interpreter_builder.options
    loader.skip_interpreter_overflow_checks()
    assert interpreter.interpreter_builder.options is before


PATCH_SCRIPT = """
import sys
import torch
import triton
import triton.language as tl
from triton.runtime import interpreter
from egg_worker import loader

@triton.jit
def row_max(x, axis: tl.constexpr):
    return tl.max(x, axis) + tl.sum(x * 0.0, axis)

@triton.jit
def rows(x_ptr, out_ptr):
    r = tl.program_id(0)
    x = tl.load(x_ptr + r * 8 + tl.arange(0, 8)[None, :])
    tl.store(out_ptr + r + tl.arange(0, 1), row_max(x, 1))

calls = []  # the patches made: Triton's own _patch_lang, counted
patch = interpreter._patch_lang
interpreter._patch_lang = lambda fn: calls.append(fn.__name__) or patch(fn)
if sys.argv[1] == "once":
    loader.skip_repeated_interpreter_patches()
x = torch.arange(48, dtype=torch.float32).reshape(6, 8)
outs = []
for launch in range(2):
    out = torch.empty(6)
    rows[(6,)](x, out)
    outs.append(out.tolist())
print(len(calls), sorted(set(calls)), outs[0] == outs[1], outs[0])
"""


def test_the_interpreter_patches_triton_language_once_per_launch_with_the_same_results():
    """6 programs, each calling row_max, which calls tl.max and tl.sum (jit functions too): the interpreter
    patches the modules at each of those 18 calls and at the launch; skipped, once for the launch and once for
    triton.language.core (the standard library's module), per launch."""
    env = dict(os.environ, TRITON_INTERPRET="1", PYTHONPATH=str(REPO / "python"))
    results = {}
    for mode in ("every", "once"):
        completed = subprocess.run([sys.executable, "-c", PATCH_SCRIPT, mode], capture_output=True, text=True,
                                   timeout=120, env=env)
        assert completed.returncode == 0, completed.stderr[-2000:]
        results[mode] = completed.stdout.split(" ", 1)
    maxima = "[7.0, 15.0, 23.0, 31.0, 39.0, 47.0]"
    assert results["every"] == ["38", f"['max', 'row_max', 'rows', 'sum'] True {maxima}\n"]
    assert results["once"] == ["4", f"['max', 'rows'] True {maxima}\n"]


def test_patching_once_per_launch_leaves_compiled_triton_alone(monkeypatch):
    monkeypatch.delenv("TRITON_INTERPRET", raising=False)
    from triton.runtime import interpreter

    before = interpreter._patch_lang
    loader.skip_repeated_interpreter_patches()
    assert interpreter._patch_lang is before
