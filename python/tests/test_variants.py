"""The evaluate op's `variants` check on the quickstart task (examples/quickstart/scaled_softmax.py, built with
scale 0.125): a candidate that reads `self.scale` at call time passes it; one with 0.125 baked into its kernel
call fails it, both when built with another scale and when `scale` is set after construction."""

import pytest

from conftest import REPO, task_path

QUICKSTART = REPO / "examples" / "quickstart"
RUNTIME_SCALE = QUICKSTART / "scaled_softmax_triton.py"


@pytest.fixture(scope="module")
def baked_scale(tmp_path_factory):
    source = RUNTIME_SCALE.read_text()
    assert "n_cols, n_cols, self.scale, BLOCK" in source
    path = tmp_path_factory.mktemp("variants") / "baked_scale.py"
    path.write_text(source.replace("n_cols, n_cols, self.scale, BLOCK", "n_cols, n_cols, 0.125, BLOCK"))
    return str(path)


def _evaluate(worker, task: str, candidate: str) -> dict:
    response = worker.request("evaluate", task=task, candidate=candidate, device="cpu", tol=1e-4, trials=1,
                              seed=42, init_seed=42, robust_trial=False, variants=True)
    assert response["ok"], response
    return response["result"]


def test_a_scale_read_at_call_time_passes_both_checks(worker):
    result = _evaluate(worker, str(QUICKSTART / "scaled_softmax.py"), str(RUNTIME_SCALE))
    assert result["status"] == "ok", result["reason"]
    checks = result["variants"]
    assert checks["init_arguments"]["applicable"] and checks["init_arguments"]["correct"]
    assert checks["attributes"]["applicable"] and checks["attributes"]["correct"]


def test_a_baked_scale_fails_both_checks(worker, baked_scale):
    result = _evaluate(worker, str(QUICKSTART / "scaled_softmax.py"), baked_scale)
    assert result["status"] == "mismatch" and result["correct"] is False
    assert result["reason"].startswith("with init arguments [0.25]:")
    checks = result["variants"]
    assert not checks["init_arguments"]["correct"] and checks["init_arguments"]["max_abs_err"] > 1e-3
    assert not checks["attributes"]["correct"] and "scale changed" in checks["attributes"]["reason"]


def test_a_task_without_float_settings_has_nothing_to_vary(worker):
    response = worker.request("evaluate", task=task_path("relu_64"), candidate=str(REPO / "tests" / "fixtures" /
                              "candidates" / "relu_ok.py"), device="cpu", tol=1e-4, trials=1, variants=True)
    result = response["result"]
    assert result["status"] == "ok"
    assert result["variants"]["init_arguments"] == {"applicable": False, "correct": True,
                                                    "reason": "no float init argument", "max_abs_err": None}
    assert not result["variants"]["attributes"]["applicable"]
