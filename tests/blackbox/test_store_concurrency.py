"""Black-box test: several egg processes opening a fresh store at the same time (as `egg bench` runs side by side
with one EGG_HOME, or two `egg compile` at once, do) all get in: each runs the migrations at most once and waits
for the others' WAL switch instead of failing with 'table ... already exists' or 'database is locked'."""
import subprocess

from conftest import EGG

ROUNDS = 20
PROCESSES = 8


def test_processes_opening_a_fresh_store_together_all_get_in(egg):
    errors = []
    for round_number in range(ROUNDS):
        env = dict(egg.env, EGG_HOME=str(egg.home / f"round{round_number}"))
        processes = [subprocess.Popen([str(EGG), "show", "no-such-run"], env=env, cwd=egg.workdir, text=True,
                                      stdout=subprocess.PIPE, stderr=subprocess.PIPE) for _ in range(PROCESSES)]
        for process in processes:
            _, stderr = process.communicate(timeout=60)
            assert process.returncode == 2, stderr
            if "no run 'no-such-run'" not in stderr:
                errors.append(stderr.strip())
    assert errors == []
