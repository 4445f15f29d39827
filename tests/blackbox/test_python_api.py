"""The Python API (python/egg: egg.optimize, egg.load) and torch.export programs (.pt2) on the command line,
through the real binary, on the CPU in Triton's interpreter.

One egg.optimize run (module-scoped: it exports the module, runs `egg optimize OUT/program.pt2 --quick`) serves
the tests of the result. The kernels run in this process, in Triton's interpreter: TRITON_INTERPRET is set while
this module's tests run (triton reads it when a candidate file is imported)."""
import os
import sys

import pytest
import torch
from conftest import ROOT

sys.path.insert(0, str(ROOT / "python"))
import egg  # noqa: E402


@pytest.fixture(scope="module", autouse=True)
def interpreter():
    previous = os.environ.get("TRITON_INTERPRET")
    os.environ["TRITON_INTERPRET"] = "1"
    yield
    if previous is None:
        os.environ.pop("TRITON_INTERPRET")
    else:
        os.environ["TRITON_INTERPRET"] = previous


class Block(torch.nn.Module):
    def __init__(self, features: int, scale: float):
        super().__init__()
        self.proj = torch.nn.Linear(8, features)
        self.norm = torch.nn.LayerNorm(features)
        self.scale = scale
        self.register_buffer("shift", torch.linspace(-1.0, 1.0, features))

    def forward(self, x):
        return torch.softmax(self.norm(self.proj(x)) * self.scale + self.shift, dim=-1)


@pytest.fixture
def egg_cli(egg):
    """conftest's `egg` fixture (the binary), under another name: `egg` is the API module here."""
    return egg


def _refuse_own_forward(*args, **kwargs):
    raise AssertionError("the module's own forward ran instead of egg's kernels")


@pytest.fixture(scope="module")
def optimized(tmp_path_factory):
    base = tmp_path_factory.mktemp("api")
    previous_home = os.environ.get("EGG_HOME")
    os.environ["EGG_HOME"] = str(base / "home")
    try:
        torch.manual_seed(0)
        module = Block(6, 0.5).eval()
        out = base / "out"
        fast = egg.optimize(module, (torch.randn(4, 8),), device="cpu", quick=True, out=str(out))
    finally:
        if previous_home is None:
            os.environ.pop("EGG_HOME", None)
        else:
            os.environ["EGG_HOME"] = previous_home
    return module, fast, out


def _assert_kernels_match(module, fast, x):
    """fast(x) equals module(x), computed with the module's own forward made to raise: the kernels ran."""
    with torch.no_grad():
        expected = module(x)
        module.forward = _refuse_own_forward
        try:
            got = fast(x)
        finally:
            del module.forward
    torch.testing.assert_close(got, expected, rtol=1e-4, atol=1e-4)


def test_optimize_writes_the_program_and_a_verified_candidate(optimized):
    _, _, out = optimized
    assert (out / "program.pt2").is_file() and (out / "report.json").is_file()
    source = (out / "model_new.py").read_text()
    assert "class Model(ProgramModel)" in source and "@triton.jit" in source


def test_the_result_runs_egg_kernels_and_equals_the_module(optimized):
    module, fast, _ = optimized
    _assert_kernels_match(module, fast, torch.randn(4, 8))


def test_parameters_are_shared_and_updates_are_seen(optimized):
    module, fast, _ = optimized
    assert fast.proj.weight is module.proj.weight and fast.shift is module.shift
    assert list(fast.state_dict()) == list(module.state_dict())
    x = torch.randn(4, 8)
    saved = {name: value.clone() for name, value in module.state_dict().items()}
    try:
        torch.manual_seed(1)
        module.load_state_dict(Block(6, 0.5).state_dict())
        with torch.no_grad():
            module.shift.mul_(3.0)
        _assert_kernels_match(module, fast, x)
    finally:
        module.load_state_dict(saved)


def test_a_replaced_parameter_drops_captured_cuda_graphs(optimized):
    module, fast, _ = optimized
    fast.__dict__["_egg_graphs"] = {"captured": "before"}  # what a CUDA-graph candidate keeps after capture
    original = module.proj.weight
    x = torch.randn(4, 8)
    with torch.no_grad():
        fast(x)
        assert fast.__dict__.get("_egg_graphs") == {"captured": "before"}  # same tensors: kept
        module.proj.weight = torch.nn.Parameter(original.detach() * 2.0)
        try:
            _assert_kernels_match(module, fast, x)
            assert "_egg_graphs" not in fast.__dict__
        finally:
            module.proj.weight = original


def test_other_shapes_and_changed_attributes_run_the_modules_forward(optimized):
    module, fast, _ = optimized
    wider = torch.randn(7, 8)
    with torch.no_grad():
        with pytest.warns(RuntimeWarning, match="not the shapes, dtypes and strides the kernels were compiled for"):
            torch.testing.assert_close(fast(wider), module(wider))
        module.scale = 2.0
        try:
            x = torch.randn(4, 8)
            with pytest.warns(UserWarning, match="an attribute the forward reads has changed"):
                got = fast(x)
            torch.testing.assert_close(got, module(x))
        finally:
            module.scale = 0.5


def test_load_binds_the_stored_result_to_another_instance(optimized):
    _, _, out = optimized
    torch.manual_seed(2)
    other = Block(6, 0.5).eval()
    _assert_kernels_match(other, egg.load(str(out), other), torch.randn(4, 8))


def test_load_refuses_a_module_of_another_shape(optimized):
    _, _, out = optimized
    with pytest.raises(egg.EggError, match=r"proj.weight is \(\(5, 8\)"):
        egg.load(str(out), Block(5, 0.5))


def test_a_module_torch_export_cannot_export_is_one_line(tmp_path):
    class DataDependent(torch.nn.Module):
        def forward(self, x):
            return x * 2 if x.sum() > 0 else x - 1

    with pytest.raises(egg.EggError, match="torch.export cannot export DataDependent") as error:
        egg.optimize(DataDependent(), (torch.randn(4, 8),), device="cpu", out=str(tmp_path))
    assert "\n" not in str(error.value)


def test_a_file_that_is_not_a_program_is_a_one_line_error_exit_2(egg_cli, tmp_path):
    bad = tmp_path / "bad.pt2"
    bad.write_text("not a program")
    proc = egg_cli.run("optimize", bad, "--device", "cpu", "--quick", "--out", tmp_path / "out")
    assert proc.returncode == 2, proc.stderr
    assert proc.stderr.strip() == "egg: error: bad.pt2 is not a .pt2 archive (torch.export.save writes one)"


class Head(torch.nn.Module):
    """A forward that reads no plain attribute (egg.load once failed to bind such a module)."""

    def __init__(self):
        super().__init__()
        self.fc = torch.nn.Linear(16, 8)

    def forward(self, x):
        return torch.relu(self.fc(x)) * 3.0


def test_dynamic_batch_runs_the_kernels_at_every_batch_in_its_range(tmp_path, monkeypatch):
    monkeypatch.setenv("EGG_HOME", str(tmp_path / "home"))
    torch.manual_seed(0)
    module = Head().eval()
    fast = egg.optimize(module, (torch.randn(12, 16),), device="cpu", quick=True, out=str(tmp_path / "out"),
                        dynamic="batch", max_batch=32)
    assert "egg_B" in (tmp_path / "out" / "model_new.py").read_text()
    for batch in (1, 5, 12, 32):
        _assert_kernels_match(module, fast, torch.randn(batch, 16))
    past = torch.randn(33, 16)  # beyond max_batch: the module's own forward
    torch.testing.assert_close(fast(past), module(past))
    with pytest.raises(egg.EggError, match="dynamic is None, 'batch' or 'dimN'"):
        egg.optimize(module, (torch.randn(12, 16),), dynamic="seq")


def test_a_dynamic_dim_1_takes_every_sequence_length_in_its_range(tmp_path, monkeypatch):
    monkeypatch.setenv("EGG_HOME", str(tmp_path / "home"))
    torch.manual_seed(0)
    module = Head().eval()
    fast = egg.optimize(module, (torch.randn(2, 6, 16),), device="cpu", quick=True, out=str(tmp_path / "out"),
                        dynamic="dim1", max_batch=24)
    assert "# Dynamic dim 1:" in (tmp_path / "out" / "model_new.py").read_text()
    for sequence in (1, 7, 24):
        _assert_kernels_match(module, fast, torch.randn(2, sequence, 16))
    with pytest.raises(egg.EggError, match="dynamic='dim3': no tensor input has a dim 3"):
        egg.optimize(module, (torch.randn(2, 6, 16),), dynamic="dim3")
