"""`egg bench --ray` on a local Ray cluster of three nodes (a head without CPUs and two one-core workers): the
same rows as a plain `egg bench` of the same tasks, and a worker node killed under a running task: that task is
run again on the other node and every task still ends with exactly one row."""
import json
import os
import pathlib
import shutil
import subprocess
import sys
import threading
import time

import pytest

from conftest import ROOT

ray = pytest.importorskip("ray", reason="ray is not installed (scripts/setup.sh installs it into .venv)")
from ray.cluster_utils import Cluster  # noqa: E402

EXPERT_TASKS = ROOT / "tests" / "fixtures" / "tasks" / "expert"
TASKS = ["mat_vec.py", "relu_scale_64.py", "softmax_8x32.py", "sum_mid_dim.py"]
COMPARED = ["task", "level", "status", "correct", "kernels", "pytorch_ops"]
# A dead node is noticed after a few missed health checks, not the default ~15 s.
HEAD = {"num_cpus": 0, "_system_config": {"health_check_period_ms": 500, "health_check_failure_threshold": 3}}
YOUNG_S = 0.5  # an egg that started this recently has seconds of work left: killing its node interrupts it


def egg_env(home: pathlib.Path) -> dict:
    env = {k: v for k, v in os.environ.items() if k != "TRITON_INTERPRET"}
    env["EGG_HOME"] = str(home)
    return env


def bench(suite, out, home, *extra):
    return subprocess.run([str(ROOT / "egg"), "bench", str(suite), "--device", "cpu", "--quick", "--no-report",
                           "--out", str(out), *extra], capture_output=True, text=True, timeout=300,
                          env=egg_env(home))


def ancestors(pid: int) -> set:
    seen = set()
    while pid > 1 and pid not in seen:
        seen.add(pid)
        try:
            stat = pathlib.Path(f"/proc/{pid}/stat").read_text()
        except OSError:
            break
        pid = int(stat.rsplit(")", 1)[1].split()[1])
    return seen


def young_task_under(raylet_pid: int):
    """The pid of an `egg ... --ray-task` process that runs under this raylet and started moments ago."""
    ticks = os.sysconf("SC_CLK_TCK")
    uptime = float(pathlib.Path("/proc/uptime").read_text().split()[0])
    for proc in pathlib.Path("/proc").iterdir():
        if not proc.name.isdigit():
            continue
        try:
            if b"--ray-task" not in (proc / "cmdline").read_bytes():
                continue
            started = int((proc / "stat").read_text().rsplit(")", 1)[1].split()[19]) / ticks
        except OSError:
            continue
        if uptime - started < YOUNG_S and raylet_pid in ancestors(int(proc.name)):
            return int(proc.name)
    return None


def kill_node_under_a_task(cluster, node, stop: threading.Event, killed: list):
    raylet = node.all_processes["raylet"][0].process.pid
    while not stop.is_set():
        if young_task_under(raylet):
            cluster.remove_node(node, allow_graceful=False)
            killed.append(time.monotonic())
            return
        time.sleep(0.05)


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    root = tmp_path_factory.mktemp("ray")
    suite = root / "suite"
    suite.mkdir()
    for name in TASKS:
        shutil.copy(EXPERT_TASKS / name, suite)
    started = time.monotonic()
    plain = bench(suite, root / "plain", root / "home-plain")
    assert plain.returncode == 0, plain.stderr
    cluster = Cluster(initialize_head=True, head_node_args=HEAD)
    try:
        cluster.add_node(num_cpus=1)
        doomed = cluster.add_node(num_cpus=1)
        cluster.wait_for_nodes()
        stop, killed = threading.Event(), []
        killer = threading.Thread(target=kill_node_under_a_task, args=(cluster, doomed, stop, killed))
        killer.start()
        on_ray = bench(suite, root / "ray", root / "home-ray", "--ray", cluster.address)
        stop.set()
        killer.join()
    finally:
        cluster.shutdown()
    print(f"plain and Ray runs with the cluster took {time.monotonic() - started:.1f} s", file=sys.stderr)
    print("\n".join(line for line in on_ray.stderr.splitlines() if "egg bench:" in line), file=sys.stderr)
    return {"root": root, "plain": plain, "ray": on_ray, "killed": killed}


def rows(out: pathlib.Path) -> list:
    return json.loads((out / "results.json").read_text())["tasks"]


def test_ray_rows_match_a_plain_run(runs):
    assert runs["ray"].returncode == 0, runs["ray"].stderr
    plain, on_ray = rows(runs["root"] / "plain"), rows(runs["root"] / "ray")
    assert [{k: row.get(k) for k in COMPARED} for row in on_ray] == [{k: row.get(k) for k in COMPARED}
                                                                     for row in plain]
    for row, before in zip(on_ray, plain):
        assert set(row) - set(before) == {"ray"}, "a Ray row is a plain row and where it ran"
        assert row["out_dir"] == str(runs["root"] / "ray" / "tasks" / row["task"][: -len(".py")])
        assert row["path"] == str(runs["root"] / "suite" / row["task"])
        folder = pathlib.Path(row["out_dir"])
        assert sorted(p.name for p in folder.iterdir()) == ["model_new.py", "report.json", "trajectory.md"]
        assert (runs["root"] / "ray" / "kernelbench" / "level0" / (folder.name + ".json")).is_file()
    assert not (runs["root"] / "ray" / ".ray").exists(), "the driver's scratch is cleaned up"


def test_ray_store_holds_every_task_run(runs):
    import sqlite3
    with sqlite3.connect(runs["root"] / "home-ray" / "egg.db") as db:
        run_ids = {row[0] for row in db.execute("SELECT id FROM runs")}
    assert {row["run_id"] for row in rows(runs["root"] / "ray")} <= run_ids


def test_a_killed_node_loses_no_task_and_counts_none_twice(runs):
    assert runs["killed"], "the node was never killed under a running task"
    on_ray = rows(runs["root"] / "ray")
    assert sorted(row["task"] for row in on_ray) == TASKS
    retried = [row for row in on_ray if row["ray"]["attempts"] > 1]
    assert retried, [row["ray"] for row in on_ray]
    for row in retried:
        assert row["status"] == "ok" and row["correct"] is True
        assert len(row["ray"]["failures"]) == row["ray"]["attempts"] - 1
    assert "running it again" in runs["ray"].stderr
    summary = json.loads((runs["root"] / "ray" / "results.json").read_text())["summary"]["overall"]
    assert summary["tasks"] == len(TASKS)


def test_ray_without_the_ray_package_is_one_line_error(tmp_path):
    python = shutil.which("python3")
    env = egg_env(tmp_path / "home")
    env.pop("PYTHONPATH", None)
    if subprocess.run([python, "-c", "import ray"], capture_output=True, env=env).returncode == 0:
        pytest.skip(f"{python} has ray")
    suite = tmp_path / "suite"
    suite.mkdir()
    shutil.copy(EXPERT_TASKS / "relu_scale_64.py", suite)
    proc = subprocess.run([str(ROOT / "egg"), "--python", python, "bench", str(suite), "--device", "cpu", "--out",
                           str(tmp_path / "out"), "--ray", "local"], capture_output=True, text=True, timeout=60,
                          env=env)
    assert proc.returncode == 2
    lines = [line for line in proc.stderr.splitlines() if line.strip()]
    assert len(lines) == 1 and lines[0].startswith("egg: error: --ray needs the ray package"), proc.stderr
