import pytest

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
