"""Issue 24: a program PyTorch runs is captured. `torch.var(t, dim=2, keepdim=True)` on a masked_fill's output
(tests/fixtures/tasks/var_after_masked_fill.py) failed torch.export's decomposition and egg gave up; it is now one
Triton var-reduction kernel with the masked_fill fused, verified correct, nothing left to PyTorch."""
import json
import shutil

from conftest import ROOT, Egg

TASK = ROOT / "tests" / "fixtures" / "tasks" / "var_after_masked_fill.py"


def test_var_after_masked_fill_is_optimized_in_triton(tmp_path):
    egg = Egg(tmp_path / "home", tmp_path / "work")
    egg.workdir.mkdir()
    shutil.copy(TASK, egg.workdir / TASK.name)
    proc = egg.run("optimize", TASK.name, "--device", "cpu", "--quick", "--out", "out", "--quiet")
    assert proc.returncode == 0, proc.stderr
    report = json.loads((egg.workdir / "out" / "report.json").read_text())
    assert report["status"] == "ok" and report["final"]["correct"] is True, report["final"].get("reason")
    expert = report["expert"]
    assert expert["pytorch_ops"] == [], expert["pytorch_ops"]
    (kernel,) = expert["kernels"]
    assert kernel["kind"] == "reduction"
    assert {"aten.where.self", "prims.var.default"} <= set(kernel["ops"]), kernel["ops"]
