"""Black-box tests of `python -m egg_worker.timeit` (no egg binary): a fresh process builds Model and ModelNew as the
harness does and checks that they agree; without a GPU nothing is timed, and it says so."""
import json
import os
import subprocess
import sys

from conftest import FIXTURES, ROOT


def timeit(workdir, *args):
    env = {k: v for k, v in os.environ.items() if k != "TRITON_INTERPRET"}
    env["PYTHONPATH"] = str(ROOT / "python")
    return subprocess.run([sys.executable, "-m", "egg_worker.timeit", *map(str, args)], capture_output=True,
                          text=True, timeout=300, env=env, cwd=workdir)


def test_table_shows_agreement_launches_the_three_rows_and_the_protocol(tmp_path):
    proc = timeit(tmp_path, FIXTURES / "task_relu.py", FIXTURES / "relu_ok.py", "--trials", "2")
    assert proc.returncode == 0, proc.stderr
    out = proc.stdout
    assert "correct: yes (2 of 2 trials at tol 0.0001" in out
    assert "ModelNew: 1 Triton launches per call" in out
    for row in ("Model eager     default", "torch.compile   default", "ModelNew        strict"):
        assert row in out, out
    assert "correctness only, nothing timed" in out and "protocol:" in out


def test_json_carries_the_harness_fields_and_the_timing_protocol(tmp_path):
    proc = timeit(tmp_path, FIXTURES / "task_relu.py", FIXTURES / "relu_ok.py", "--json", "--trials", "1",
                  "--precision", "tf32")
    assert proc.returncode == 0, proc.stderr
    result = json.loads(proc.stdout)
    assert result["correct"] is True and result["trials_passed"] == 1 and result["max_abs_err"] == 0.0
    assert result["device"]["kind"] == "cpu" and result["time_ms"]["candidate"] is None
    protocol = result["timing_protocol"]
    assert protocol["timer"] == "none" and "fresh process" in protocol["process"]
    assert protocol["precision"] == {"candidate": "strict", "eager": "tf32", "compile": "tf32"}
    assert protocol["seed"] == 1 and protocol["init_seed"] == 42  # egg's defaults


def test_a_wrong_candidate_disagrees_and_exits_1(tmp_path):
    proc = timeit(tmp_path, FIXTURES / "task_relu.py", FIXTURES / "relu_wrong.py", "--trials", "1")
    assert proc.returncode == 1
    assert "correct: NO (0 of 1 trials" in proc.stdout and "not allclose" in proc.stdout
