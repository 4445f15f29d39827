"""`egg eval --variants` on the expert's candidates: they stay right when ModelNew is built from other init
arguments or an attribute is set after construction, by running Model's forward where a value the kernels hold
has changed (the settings guard, docs/expert.md)."""
import pytest
from conftest import ROOT

QUICKSTART = ROOT / "examples" / "quickstart" / "scaled_softmax.py"

NESTED_TASK = '''import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self, slope, scale):
        super().__init__()
        self.body = nn.Sequential(nn.Linear(16, 8), nn.LeakyReLU(slope))
        self.scale = scale

    def forward(self, x):
        return self.body(x) * self.scale


def get_inputs():
    return [torch.randn(4, 16)]


def get_init_inputs():
    return [0.2, 1.5]
'''


@pytest.mark.parametrize("task, guarded", [
    (QUICKSTART, "o = self\n        if (o.scale,) != (0.125,):"),
    (None, "o = self._modules['body']._modules['1']\n        if (o.negative_slope, o.inplace) != (0.2, False):"),
], ids=["quickstart", "nested"])
def test_expert_candidates_stay_right_for_other_settings(egg, tmp_path, task, guarded):
    if task is None:
        task = tmp_path / "nested_settings.py"
        task.write_text(NESTED_TASK)
    candidate = tmp_path / "candidate.py"
    proc = egg.run("compile", task, "--device", "cpu", "--out", candidate)
    assert proc.returncode == 0, proc.stderr
    assert guarded in candidate.read_text()
    proc, result = egg.eval_json(task, candidate, "--variants", "--trials", "1", "--no-sandbox")
    assert result["status"] == "ok", result["reason"]
    assert proc.returncode == 0
