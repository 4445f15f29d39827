import signal
import subprocess

import pytest

SPARE_WORKERS = 4


@pytest.mark.parametrize("kind, returncode", [("crash", -signal.SIGSEGV), ("abort", -signal.SIGABRT), ("exit", 3)])
def test_fatal_faults_end_the_process_the_chosen_way(fresh_worker, kind, returncode):
    assert fresh_worker.request("hello")["ok"] is True
    fresh_worker.send({"id": 2, "op": "fault", "kind": kind})
    assert fresh_worker.process.stdout.read(4) == b""  # no answer: the frame pipe just closes
    assert fresh_worker.process.wait(timeout=30) == returncode


def test_hang_never_answers(fresh_worker):
    assert fresh_worker.request("hello")["ok"] is True
    fresh_worker.send({"id": 2, "op": "fault", "kind": "hang"})
    with pytest.raises(subprocess.TimeoutExpired):
        fresh_worker.process.wait(timeout=2)
    assert fresh_worker.close() == -signal.SIGKILL


def test_exception_and_cpu_oom_faults_answer_ok_false_and_the_worker_still_serves(worker):
    exception = worker.request("fault", kind="exception")
    assert exception["ok"] is False and "exception" in exception["error"]
    oom = worker.request("fault", kind="oom")
    assert oom["ok"] is False and "oom fault needs cuda" in oom["error"]
    unknown = worker.request("fault", kind="meltdown")
    assert unknown["ok"] is False and "meltdown" in unknown["error"]
    assert worker.request("hello")["ok"] is True
