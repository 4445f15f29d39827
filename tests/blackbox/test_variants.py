"""`egg eval --variants` on the quickstart task (examples/quickstart/scaled_softmax.py, built with scale 0.125):
the expert's candidate must stay right when ModelNew is built with another scale or its scale is set later."""
import pytest
from conftest import ROOT

QUICKSTART = ROOT / "examples" / "quickstart" / "scaled_softmax.py"


@pytest.mark.xfail(strict=True, reason="issue 24 item 2: the expert bakes init arguments and attributes into its "
                   "kernels and its guard checks only the inputs")
def test_the_expert_candidate_stays_right_for_other_scales(egg, tmp_path):
    candidate = tmp_path / "scaled_softmax_expert.py"
    proc = egg.run("compile", QUICKSTART, "--device", "cpu", "--out", candidate)
    assert proc.returncode == 0, proc.stderr
    proc, result = egg.eval_json(QUICKSTART, candidate, "--variants", "--trials", "1", "--no-sandbox")
    assert result["status"] == "ok", result["reason"]
    assert proc.returncode == 0
