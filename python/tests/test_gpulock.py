"""egg_worker.gpulock: workers sharing a GPU never overlap their locked sections; re-entrant; off when unset."""

import os
import subprocess
import sys
import textwrap

from egg_worker import gpulock

HOLDER = textwrap.dedent("""
    import sys, time
    from egg_worker import gpulock
    with gpulock.held("test section"):
        start = time.time()
        with gpulock.held():  # re-entrant: must not deadlock on its own lock
            time.sleep(float(sys.argv[1]))
        print(start, time.time(), flush=True)
""")


def _spawn(lock_path, hold_s=0.3):
    env = dict(os.environ, EGG_GPU_LOCK=str(lock_path),
               PYTHONPATH=os.path.dirname(os.path.dirname(gpulock.__file__)))
    return subprocess.Popen([sys.executable, "-c", HOLDER, str(hold_s)], env=env, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)


def test_sections_of_processes_sharing_a_lock_do_not_overlap(tmp_path):
    processes = [_spawn(tmp_path / "gpu0.lock") for _ in range(3)]
    outputs = [process.communicate(timeout=60) for process in processes]
    intervals = sorted(tuple(map(float, stdout.split())) for stdout, _ in outputs)
    assert all(process.returncode == 0 for process in processes)
    assert len(intervals) == 3
    for _, stderr in outputs:  # one line per outermost section, none for the nested one
        assert stderr.count("egg-gpulock: test section waited ") == 1, stderr
    for (_, end), (start, _) in zip(intervals, intervals[1:]):
        assert start >= end - 1e-3, intervals


def test_different_locks_run_side_by_side(tmp_path):
    processes = [_spawn(tmp_path / f"gpu{index}.lock", hold_s=2.0) for index in range(2)]
    intervals = sorted(tuple(map(float, process.communicate(timeout=60)[0].split())) for process in processes)
    assert intervals[1][0] < intervals[0][1], intervals  # the second started before the first ended


def test_without_the_variable_nothing_is_locked(tmp_path, monkeypatch):
    monkeypatch.delenv(gpulock.ENV, raising=False)
    with gpulock.held():
        with gpulock.held():
            pass
    assert list(tmp_path.iterdir()) == []


def test_a_held_lock_blocks_another_process_until_released(tmp_path, monkeypatch):
    lock = tmp_path / "gpu0.lock"
    monkeypatch.setenv(gpulock.ENV, str(lock))
    with gpulock.held():
        process = _spawn(lock)
        try:
            process.wait(timeout=1.0)
            finished_early = True
        except subprocess.TimeoutExpired:
            finished_early = False
    assert not finished_early  # it waited for our section
    assert process.communicate(timeout=60)[0].strip()
    assert process.returncode == 0
