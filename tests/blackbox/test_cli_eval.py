import re
import signal
import sqlite3
import subprocess
import time

import pytest
from conftest import EGG, ROOT

CONTRACT_FIELDS = ["status", "reason", "correct", "max_abs_err", "max_rel_err", "tol", "time_ms",
                   "speedup_vs_eager", "speedup_vs_compile", "triton_launches", "device", "versions",
                   "harness_version"]


def process_alive(pid):
    """A zombie waiting for init to reap it counts as dead."""
    try:
        with open(f"/proc/{pid}/status") as status:
            state = next(line for line in status if line.startswith("State:"))
    except (FileNotFoundError, StopIteration):
        return False
    return "Z" not in state.split()[1]


def single_error_line(proc):
    lines = [line for line in proc.stderr.splitlines() if line.strip()]
    assert len(lines) == 1, proc.stderr
    assert lines[0].startswith("egg: error:"), lines[0]
    assert "Traceback" not in proc.stderr
    return lines[0]


def test_correct_candidate_passes_with_contract_fields(egg):
    proc, result = egg.eval_json("task_relu.py", "relu_ok.py")
    assert proc.returncode == 0, proc.stderr
    for field in CONTRACT_FIELDS:
        assert field in result, field
    assert result["status"] == "ok" and result["correct"] is True
    assert result["triton_launches"] == 1
    assert result["max_abs_err"] == 0.0
    assert result["tol"] == 0.0001, "KernelBench's float32 rule unless the user asks for another"
    version = egg.run("--version")
    assert version.returncode == 0 and re.fullmatch(r"egg [\w.+-]+\n", version.stdout), version
    assert result["versions"]["egg"] == version.stdout.split()[1], "the result names the binary that judged it"
    assert result["time_ms"]["candidate"] is None, "nothing is timed in the interpreter"
    assert "not a performance figure" in result["timing_note"] or "no timing" in result["timing_note"]
    assert result["device"]["kind"] == "cpu"
    assert result["versions"]["torch"] and result["versions"]["triton"]
    assert result["robust"]["correct"] is True
    protocol = result["timing_protocol"]  # stated even when nothing was timed
    assert protocol["timer"] == "none" and "worker" in protocol["process"]
    assert protocol["precision"]["candidate"] == "strict"
    assert protocol["precision"]["eager"] == protocol["precision"]["compile"] == result["baseline"]


def test_three_baseline_settings_are_recorded_against_the_exact_reference(egg):
    proc, result = egg.eval_json("task_relu.py", "relu_ok.py", "--tol", "1e-2")
    assert proc.returncode == 0, proc.stderr
    assert (result["baseline"], result["beside_baseline"]) == ("default", "tf32")
    settings = result["baselines"]
    assert list(settings) == ["default", "strict", "tf32"]
    assert settings["strict"]["flags"] == {"matmul_precision": "highest", "matmul_allow_tf32": False,
                                           "cudnn_allow_tf32": False}
    assert settings["default"]["flags"]["cudnn_allow_tf32"] is True
    assert settings["tf32"]["flags"]["matmul_precision"] == "high"
    for entry in settings.values():
        eager = entry["runs"]["eager"]
        assert eager["time_ms"] is None and eager["accuracy"]["within_tol"] is True
    assert result["speedups"] is None, "no speedup exists without timing"
    proc, strict_only = egg.eval_json("task_relu.py", "relu_ok.py", "--baselines", "strict")
    assert list(strict_only["baselines"]) == ["strict"] and strict_only["baseline"] == "strict"
    proc = egg.run("eval", "task_relu.py", "relu_ok.py", "--baselines", "fp8")
    assert proc.returncode == 2 and "unknown baseline 'fp8'" in single_error_line(proc)


def test_vacuous_task_and_robustness_trial_verdicts(egg):
    tasks, candidates = ROOT / "tests" / "fixtures" / "tasks", ROOT / "tests" / "fixtures" / "candidates"
    proc, constant = egg.eval_json(tasks / "relu_after_shift.py", candidates / "zeros.py")
    assert proc.returncode == 0 and constant["vacuous"] is True
    assert "vacuous" in egg.run("eval", tasks / "relu_after_shift.py", candidates / "zeros.py", "--device",
                                "cpu").stdout
    _, sound = egg.eval_json(tasks / "matmul_deep_k.py", candidates / "matmul_deep_k_ok.py", "--trials", "1")
    assert sound["status"] == "ok" and sound["vacuous"] is False and sound["robust"]["correct"] is True
    _, clamped = egg.eval_json(tasks / "matmul_deep_k.py", candidates / "matmul_deep_k_clamped.py", "--trials", "1")
    assert clamped["status"] == "ok" and clamped["robust"]["correct"] is False


def test_wrong_candidate_is_mismatch_and_exit_1(egg):
    proc, result = egg.eval_json("task_relu.py", "relu_wrong.py")
    assert proc.returncode == 1
    assert result["status"] == "mismatch" and result["correct"] is False
    assert result["max_abs_err"] == pytest.approx(0.5, abs=1e-6)


def test_hanging_candidate_times_out_and_is_stored(egg):
    start = time.monotonic()
    proc, result = egg.eval_json("task_relu.py", "relu_hang.py", "--timeout", "4")
    assert time.monotonic() - start < 120
    assert proc.returncode == 1
    assert result["status"] == "timeout"
    assert "4 s" in result["reason"]
    with sqlite3.connect(egg.home / "egg.db") as db:
        statuses = [row[0] for row in db.execute("SELECT status FROM evaluations")]
    assert statuses == ["timeout"]
    # a timeout is the limit's answer, not the candidate's: the next call runs it again (a longer --timeout
    # would give it the time), and its row replaces the first
    start = time.monotonic()
    proc, again = egg.eval_json("task_relu.py", "relu_hang.py", "--timeout", "3")
    assert time.monotonic() - start >= 3
    assert again["status"] == "timeout" and again["cached"] is False and "3 s" in again["reason"]
    with sqlite3.connect(egg.home / "egg.db") as db:
        assert db.execute("SELECT COUNT(*) FROM evaluations").fetchone()[0] == 1


def test_aborting_candidate_is_crash(egg):
    proc, result = egg.eval_json("task_relu.py", "relu_abort.py")
    assert proc.returncode == 1
    assert result["status"] == "crash"
    assert "signal 6" in result["reason"], result["reason"]


def test_second_ask_returns_the_stored_row(egg):
    _, first = egg.eval_json("task_relu.py", "relu_ok.py")
    _, second = egg.eval_json("task_relu.py", "relu_ok.py")
    assert first["cached"] is False and second["cached"] is True
    assert second["key"] == first["key"] and second["status"] == "ok"
    _, third = egg.eval_json("task_relu.py", "relu_ok.py", "--no-cache")
    assert third["cached"] is False
    _, other_tol = egg.eval_json("task_relu.py", "relu_ok.py", "--tol", "1e-2")
    assert other_tol["cached"] is False and other_tol["tol"] == 1e-2


def test_secrets_never_reach_the_worker_store_or_logs(egg):
    secret = "sk-egg-test-secret-0123456789"
    # without the sandbox (whose read-only inbox keeps the dump from being written): the environment scrub alone
    proc, result = egg.eval_json("task_relu.py", "relu_env_dump.py", "--no-sandbox",
                                 env={"OPENAI_API_KEY": secret, "ANTHROPIC_API_KEY": secret + "-a",
                                      "TORCH_LOGS_EXTRA": secret})
    assert result["status"] == "ok", result["reason"]
    dump = (egg.workdir / "env_dump.txt").read_text()
    assert "PYTHONPATH=" in dump, "the dump must really be the worker's environment"
    assert secret not in dump and "OPENAI_API_KEY" not in dump and "ANTHROPIC_API_KEY" not in dump
    for path in egg.home.rglob("*"):
        if path.is_file():
            assert secret.encode() not in path.read_bytes(), path
    assert secret not in proc.stdout + proc.stderr


def test_missing_file_is_one_line_error(egg):
    proc = egg.run("eval", "nope.py", "relu_ok.py", "--device", "cpu")
    assert proc.returncode == 2
    assert "task file not found" in single_error_line(proc)


@pytest.mark.parametrize("args", [["--tol", "-1"], ["--trials", "0"], ["--device", "tpu"], ["--timeout", "x"]])
def test_bad_flags_are_one_line_errors(egg, args):
    proc = egg.run("eval", "task_relu.py", "relu_ok.py", *args)
    assert proc.returncode == 2
    single_error_line(proc)


def test_broken_task_is_one_line_error(egg):
    proc = egg.run("eval", "task_broken.py", "relu_ok.py", "--device", "cpu")
    assert proc.returncode == 2
    assert "get_inputs" in single_error_line(proc)


def test_missing_python_is_one_line_error(egg):
    proc = egg.run("eval", "task_relu.py", "relu_ok.py", "--device", "cpu", "--python", "/nonexistent/python")
    assert proc.returncode == 2
    assert "worker" in single_error_line(proc)


def test_no_subcommand_and_help(egg):
    assert egg.run("--help").returncode == 0
    proc = egg.run()
    assert proc.returncode == 2
    single_error_line(proc)


def test_interrupt_keeps_finished_rows_and_kills_the_worker(egg):
    _, first = egg.eval_json("task_relu.py", "relu_ok.py")
    assert first["status"] == "ok"
    proc = subprocess.Popen([str(EGG), "eval", "task_relu.py", "relu_hang.py",
                             "--device", "cpu", "--timeout", "300"],
                            cwd=egg.workdir, env=egg.env, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            # a runner started in the background hands SIGINT down ignored: restore it
                            preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))
    deadline = time.monotonic() + 120
    worker_pids = []
    while time.monotonic() < deadline and not worker_pids:
        time.sleep(0.5)
        out = subprocess.run(["pgrep", "-f", "-P", str(proc.pid), "egg_worker"], capture_output=True, text=True)
        worker_pids = [int(p) for p in out.stdout.split()]
    assert worker_pids, "the worker did not start"
    time.sleep(3)
    proc.send_signal(signal.SIGINT)
    proc.wait(timeout=30)
    assert proc.returncode != 0
    gone_by = time.monotonic() + 10  # egg kills it on the way out; a loaded CI machine may take a moment
    while time.monotonic() < gone_by and any(process_alive(pid) for pid in worker_pids):
        time.sleep(0.2)
    for pid in worker_pids:
        assert not process_alive(pid), f"worker {pid} outlived egg"
    with sqlite3.connect(egg.home / "egg.db") as db:
        assert db.execute("PRAGMA integrity_check").fetchone()[0] == "ok"
        rows = db.execute("SELECT status FROM evaluations").fetchall()
    assert rows == [("ok",)]
