import pytest

from conftest import task_path
from egg_worker import baseline, loader


def test_cpu_baseline_checks_the_reference_and_times_nothing():
    result = baseline.handle_baseline({"task": task_path("relu_64"), "device": "cpu", "seed": 1, "init_seed": 2,
                                       "timing": {"enabled": True}})
    assert result == {"status": "ok", "reason": "", "eager": None, "compile": None, "compile_error": "",
                      "compile_s": None}


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
