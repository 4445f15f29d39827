import pytest
import torch

from conftest import task_path
from egg_worker import baseline, loader, precision, server


def test_cpu_baseline_runs_eager_under_every_setting_and_times_nothing():
    result = baseline.handle_baseline({"task": task_path("relu_64"), "device": "cpu", "seed": 1, "init_seed": 2,
                                       "timing": {"enabled": True}, "tol": 1e-4})
    assert result["status"] == "ok" and result["tol"] == 1e-4
    assert list(result["settings"]) == ["default", "strict", "tf32"]
    flags = {name: entry["flags"] for name, entry in result["settings"].items()}
    assert flags["default"] == {"matmul_precision": "highest", "matmul_allow_tf32": False, "cudnn_allow_tf32": True}
    assert flags["strict"] == {"matmul_precision": "highest", "matmul_allow_tf32": False, "cudnn_allow_tf32": False}
    assert flags["tf32"] == {"matmul_precision": "high", "matmul_allow_tf32": True, "cudnn_allow_tf32": True}
    for entry in result["settings"].values():
        assert list(entry["runs"]) == ["eager"]  # no torch.compile on the cpu
        eager = entry["runs"]["eager"]
        assert eager["time_ms"] is None and eager["error"] == ""
        assert eager["accuracy"] == {"max_abs_err": 0.0, "max_rel_err": 0.0, "rel_l2_err": 0.0, "within_tol": True}


def test_the_worker_is_strict_again_after_the_baselines():
    server.configure_torch()
    baseline.handle_baseline({"task": task_path("relu_64"), "device": "cpu", "settings": ["tf32", "default"]})
    assert precision.describe_current() == {"matmul_precision": "highest", "matmul_allow_tf32": False,
                                            "cudnn_allow_tf32": False}


def test_each_setting_runs_under_its_own_switches(monkeypatch):
    seen = []
    real = loader.reference_model

    def spying_model(*args):
        model = real(*args)
        forward = model.forward
        model.forward = lambda *inputs: (seen.append(precision.describe_current()["cudnn_allow_tf32"]),
                                         forward(*inputs))[1]
        return model

    monkeypatch.setattr(loader, "reference_model", spying_model)
    baseline.handle_baseline({"task": task_path("relu_64"), "device": "cpu", "seed": 5,
                              "settings": ["strict", "default"]})
    assert seen == [False, False, True]  # the reference (strict), then strict's eager run, then default's


def test_a_failing_reference_is_a_runtime_error(tmp_path):
    path = tmp_path / "broken_forward.py"
    path.write_text("import torch\nclass Model(torch.nn.Module):\n    def forward(self, x):\n"
                    "        return x.view(7, -1)\n"
                    "def get_inputs():\n    return [torch.ones(4)]\ndef get_init_inputs():\n    return []\n")
    result = baseline.handle_baseline({"task": str(path), "device": "cpu"})
    assert result["status"] == "runtime_error" and result["reason"].startswith("reference forward failed: ")


def test_bad_baseline_requests_raise_request_errors():
    with pytest.raises(loader.RequestError):
        baseline.handle_baseline({"device": "cpu"})
    with pytest.raises(loader.RequestError):
        baseline.handle_baseline({"task": task_path("relu_64"), "device": "cpu", "timing": {"warmup": -1}})
    with pytest.raises(loader.TaskError):
        baseline.handle_baseline({"task": task_path("no_get_inputs"), "device": "cpu"})


def test_unknown_settings_and_runs_are_request_errors():
    with pytest.raises(loader.RequestError, match="unknown settings 'fp8'"):
        baseline.handle_baseline({"task": task_path("relu_64"), "device": "cpu", "settings": ["fp8"]})
    with pytest.raises(loader.RequestError, match="unknown runs 'fast'"):
        baseline.handle_baseline({"task": task_path("relu_64"), "device": "cpu", "runs": ["eager", "fast"]})
    with pytest.raises(loader.RequestError, match="tol > 0"):
        baseline.handle_baseline({"task": task_path("relu_64"), "device": "cpu", "tol": 0})


def _fake_stats(median):
    return {"mean": median, "median": median, "p20": median, "p80": median, "std": 0.0, "n": 10}


def test_a_dynamic_batch_times_eager_and_one_dynamic_compile_per_setting_at_each_checked_batch(monkeypatch):
    # The GPU path, faked on the cpu: eager and torch.compile(dynamic=True) timed at batches 1, 3 and the range's
    # top (17 lies above it), under each setting; one compiled module per setting, called at every batch.
    timed, compiled = [], []

    def fake_time_cuda(fn, args, settings, device):
        timed.append((type(fn).__name__, precision.describe_current()["cudnn_allow_tf32"], args[0].shape[0]))
        return _fake_stats(2.0 if type(fn).__name__ == "Model" else 1.0)

    def fake_compile(model, dynamic=None):
        assert dynamic is True
        compiled.append(model)
        return Compiled(model)

    monkeypatch.setattr(baseline.timing, "time_cuda", fake_time_cuda)
    monkeypatch.setattr(torch, "compile", fake_compile)
    monkeypatch.setattr(torch.cuda, "synchronize", lambda *args: None)
    request = baseline.parse_request({"task": task_path("dynamic_layernorm"), "device": "cpu", "seed": 3,
                                      "settings": ["strict", "default"], "dynamic": {"batch_max": 8}})
    task = loader.load_task(request.task)
    model = loader.reference_model(task, request.device, request.init_seed)
    rows = baseline._measure_batches(task, model, request)
    assert [row["batch"] for row in rows] == [1, 3, 8]
    assert len(compiled) == 2, "one torch.compile(dynamic=True) per setting, not per batch"
    for row in rows:
        assert list(row["settings"]) == ["strict", "default"]
        for entry in row["settings"].values():
            assert entry["eager"]["median"] == 2.0 and entry["compile"]["median"] == 1.0
            assert entry["compile_s"] is not None and entry["error"] == ""
    # strict's runs (cuDNN TF32 off) first, eager at each batch then the compiled module at each
    assert timed[:6] == [("Model", False, 1), ("Model", False, 3), ("Model", False, 8),
                         ("Compiled", False, 1), ("Compiled", False, 3), ("Compiled", False, 8)]
    assert {allow for _, allow, _ in timed[6:]} == {True}


def test_a_failed_dynamic_compile_is_each_batch_s_error(monkeypatch):
    monkeypatch.setattr(baseline.timing, "time_cuda", lambda fn, args, settings, device: _fake_stats(1.0))
    monkeypatch.setattr(torch, "compile", lambda model, dynamic=None: (_ for _ in ()).throw(RuntimeError("no\nluck")))
    request = baseline.parse_request({"task": task_path("dynamic_layernorm"), "device": "cpu",
                                      "settings": ["strict"], "dynamic": {"batch_max": 0}})
    task = loader.load_task(request.task)
    rows = baseline._measure_batches(task, loader.reference_model(task, request.device, 0), request)
    assert rows and all(row["settings"]["strict"]["error"] == "RuntimeError: no luck" and
                        row["settings"]["strict"]["compile"] is None and
                        row["settings"]["strict"]["eager"]["median"] == 1.0 for row in rows)


def test_a_dynamic_compile_failing_at_one_batch_keeps_the_batches_before_it(monkeypatch):
    class FailsAtThree(torch.nn.Module):
        def forward(self, x):
            if x.shape[0] == 3:
                raise RuntimeError("guard failure")
            return x

    monkeypatch.setattr(baseline.timing, "time_cuda", lambda fn, args, settings, device: _fake_stats(1.0))
    monkeypatch.setattr(torch, "compile", lambda model, dynamic=None: FailsAtThree())
    monkeypatch.setattr(torch.cuda, "synchronize", lambda *args: None)
    request = baseline.parse_request({"task": task_path("dynamic_layernorm"), "device": "cpu",
                                      "settings": ["strict"], "dynamic": {"batch_max": 8}})
    task = loader.load_task(request.task)
    rows = baseline._measure_batches(task, loader.reference_model(task, request.device, 0), request)
    entries = {row["batch"]: row["settings"]["strict"] for row in rows}
    assert entries[1]["compile"]["median"] == 1.0 and entries[1]["error"] == ""
    assert entries[3]["compile"] is None and entries[3]["error"] == "RuntimeError: guard failure"
    assert entries[8]["compile"] is None and entries[8]["error"] == "RuntimeError: guard failure"


def test_the_cpu_baseline_of_a_dynamic_batch_times_no_batch():
    result = baseline.handle_baseline({"task": task_path("dynamic_layernorm"), "device": "cpu",
                                       "timing": {"enabled": True}, "dynamic": {"batch_max": 8}})
    assert result["status"] == "ok" and "by_batch" not in result


class Compiled(torch.nn.Module):
    """What the faked torch.compile returns: the model's forward, timed as 'Compiled'."""

    def __init__(self, model):
        super().__init__()
        self.inner = model

    def forward(self, *args):
        return self.inner(*args)
