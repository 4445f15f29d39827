"""profile: the `profile` and `peaks` ops on the CPU, and the ncu driver against fake ncu programs."""
import json
import os
import stat
import subprocess
import sys
import time
from pathlib import Path

import pytest

from egg_worker import ncu_target, profile

DATA = Path(__file__).parent / "data"
TASK = str(DATA / "profile_matmul_task.py")
CANDIDATE = str(DATA / "profile_matmul_candidate.py")
PEAKS = {"dram_bytes_per_s": 4e12, "fp32_flops_per_s": 50e12, "tf32_flops_per_s": 400e12}


def request(**overrides):
    fields = {"task": TASK, "candidate": CANDIDATE, "device": "cpu", "seed": 1, "init_seed": 2, "ncu": None,
              "timeout_s": 60}
    fields.update(overrides)
    return fields


def fake_ncu(tmp_path, body):
    """An executable standing in for ncu: `body` is Python run with `args` (its argv) and `names_out`."""
    script = tmp_path / "ncu"
    script.write_text(
        f"#!{sys.executable}\n"
        "import sys, json, time\n"
        "args = sys.argv[1:]\n"
        "names_out = args[args.index('--names-out') + 1]\n"
        f"{body}\n"
    )
    script.chmod(script.stat().st_mode | stat.S_IXUSR)
    return str(script)


PRINT_FIXTURE = (
    "json.dump({'names': ['fused_add_kernel', 'matmul_kernel'], 'launches': 2}, open(names_out, 'w'))\n"
    f"sys.stdout.write(open({str(DATA / 'ncu_details_handmade.csv')!r}).read())\n"
)


def test_cpu_without_ncu_returns_roofline_flops_and_bytes():
    result = profile.handle_profile(request(ncu="/nonexistent/ncu"))
    assert result["status"] == "ok"
    assert result["ncu"]["available"] is False
    assert "not found" in result["ncu"]["reason"] and "/nonexistent/ncu" in result["ncu"]["reason"]
    assert result["kernels"] == []
    roof = result["roofline"]
    assert roof["flops"] == 2 * 32 * 48 * 16
    assert roof["bytes"] == 4 * (32 * 16 + 16 * 48 + 32 * 48)
    assert roof["time_ms"] is None and roof["achieved_flops_per_s"] is None and roof["pct_of_roof"] is None
    assert "interpreter" in roof["note"]


def test_cpu_with_an_ncu_does_not_run_it(tmp_path):
    marker = tmp_path / "ran"
    ncu = fake_ncu(tmp_path, f"open({str(marker)!r}, 'w').write('ran')")
    result = profile.handle_profile(request(ncu=ncu))
    assert result["status"] == "ok"
    assert result["ncu"]["available"] is False
    assert "cpu" in result["ncu"]["reason"]
    assert not marker.exists()
    assert result["roofline"]["flops"] == 2 * 32 * 48 * 16


def test_missing_candidate_is_an_error_result():
    result = profile.handle_profile(request(candidate=str(DATA / "no_such_candidate.py")))
    assert result["status"] == "error"
    assert "no_such_candidate" in result["reason"]
    assert result["roofline"] is None and result["ncu"]["available"] is False


def test_measure_peaks_on_cpu_is_null_with_a_note():
    peaks = profile.measure_peaks({"device": "cpu"})
    assert peaks["dram_bytes_per_s"] is None and peaks["fp32_flops_per_s"] is None
    assert peaks["tf32_flops_per_s"] is None and peaks["gpu_name"] is None
    assert "cpu" in peaks["note"]


def test_find_ncu_uses_the_requested_path_only(tmp_path):
    ncu = fake_ncu(tmp_path, "pass")
    assert profile.find_ncu(ncu) == ncu
    assert profile.find_ncu(str(tmp_path / "missing")) is None


def test_ncu_command_carries_the_profiling_flags_and_the_target():
    command = profile.ncu_command("/opt/ncu", request(device="cuda"), "/tmp/names.json")
    joined = " ".join(command)
    assert command[0] == "/opt/ncu"
    for flags in ("--clock-control none", "--csv", "--page details", "--profile-from-start off",
                  "--section SpeedOfLight", "--section WarpStateStats", "--section SchedulerStats"):
        assert flags in joined
    metrics = command[command.index("--metrics") + 1].split(",")
    assert "dram__bytes_read.sum" in metrics and "sm__sass_thread_inst_executed_op_ffma_pred_on.sum" in metrics
    target = command[command.index(sys.executable):]
    assert target[:3] == [sys.executable, "-m", "egg_worker.ncu_target"]
    assert target[target.index("--task") + 1] == os.path.abspath(TASK)
    assert target[target.index("--names-out") + 1] == "/tmp/names.json"
    assert target[target.index("--init-seed") + 1] == "2"


@pytest.mark.parametrize("kernel_name, expected", [
    ("fused_add_kernel", True),
    ("fused_add_kernel(float*, int)", True),
    ("fused_add_kernel_2", False),
    ("void at::native::vectorized_elementwise_kernel<4>(int)", False),
    ("matmul_kernel", True),
])
def test_triton_kernel_classification(kernel_name, expected):
    assert profile.is_triton_kernel(kernel_name, ["fused_add_kernel", "matmul_kernel"]) is expected


def test_profile_kernels_parses_and_classifies_ncu_output(tmp_path):
    ncu = fake_ncu(tmp_path, PRINT_FIXTURE)
    info, kernels, names = profile.profile_kernels(ncu, request(device="cuda"), 30, PEAKS)
    assert info["available"] is True and info["reason"] == ""
    assert info["command"][0] == ncu
    assert names == ["fused_add_kernel", "matmul_kernel"]
    assert [k["triton"] for k in kernels] == [True, False, True]
    first = kernels[0]["roofline"]
    assert first["bytes"] == kernels[0]["dram_bytes"]
    assert first["time_ms"] == pytest.approx(0.0456)
    assert first["achieved_bytes_per_s"] == pytest.approx(kernels[0]["dram_bytes"] / 45.6e-6)
    assert first["bound"] == "memory"
    assert kernels[1]["roofline"] is None  # no dram bytes measured for it


@pytest.mark.parametrize("body, expected", [
    ("print('==ERROR== ERR_NVGPUCTRPERM - The user does not have permission'); sys.exit(1)",
     "ERR_NVGPUCTRPERM"),
    ("print('==ERROR== Failed to initialize the profiler: LibraryNotLoaded'); sys.exit(1)", "LibraryNotLoaded"),
    ("print('==PROF== Disconnected'); print('==WARNING== No kernels were profiled.')", "no kernels"),
    ("print('ncu_target: RuntimeError: boom in forward', file=sys.stderr); sys.exit(1)", "boom in forward"),
])
def test_profile_kernels_reports_ncu_failures_in_one_line(tmp_path, body, expected):
    ncu = fake_ncu(tmp_path, body)
    info, kernels, _ = profile.profile_kernels(ncu, request(device="cuda"), 30, PEAKS)
    assert info["available"] is False
    assert expected in info["reason"] and "\n" not in info["reason"]
    assert kernels == []


def test_profile_kernels_times_out_and_kills_ncu(tmp_path):
    ncu = fake_ncu(tmp_path, "time.sleep(60)")
    started = time.monotonic()
    info, kernels, _ = profile.profile_kernels(ncu, request(device="cuda"), 1, PEAKS)
    assert time.monotonic() - started < 20
    assert info["available"] is False and "timed out" in info["reason"]


def test_child_environment_keeps_the_worker_environment_and_finds_the_package(monkeypatch):
    monkeypatch.setenv("EGG_PROFILE_TEST_VARIABLE", "kept")
    env = profile.child_environment()
    assert env["EGG_PROFILE_TEST_VARIABLE"] == "kept"
    package_root = str(Path(profile.__file__).resolve().parent.parent)
    assert package_root in env["PYTHONPATH"].split(os.pathsep)


def test_launch_recorder_names_the_triton_kernels_and_restores_run():
    built = ncu_target.build(TASK, CANDIDATE, "cpu", seed=1, init_seed=2)
    from triton.runtime.jit import JITFunction
    original = JITFunction.__dict__["run"]
    with ncu_target.TritonLaunchRecorder() as recorder:
        output = ncu_target.run_forward(built.candidate, built.inputs, "cpu")
    assert recorder.names == ["profile_matmul_kernel"]
    assert JITFunction.__dict__["run"] is original
    assert (output - built.reference(*built.inputs)).abs().max().item() < 1e-4


def test_build_follows_the_kernelbench_seeding_convention():
    first = ncu_target.build(TASK, CANDIDATE, "cpu", seed=7, init_seed=2)
    second = ncu_target.build(TASK, CANDIDATE, "cpu", seed=7, init_seed=3)
    other = ncu_target.build(TASK, CANDIDATE, "cpu", seed=8, init_seed=2)
    assert all((a == b).all() for a, b in zip(first.inputs, second.inputs))
    assert not (first.inputs[0] == other.inputs[0]).all()


def test_ncu_target_names_file_format(tmp_path):
    """read_names accepts what ncu_target writes and tolerates a missing file."""
    path = tmp_path / "names.json"
    path.write_text(json.dumps({"names": ["a_kernel"], "launches": 3}))
    assert profile.read_names(str(path)) == ["a_kernel"]
    assert profile.read_names(str(tmp_path / "absent.json")) == []


def test_ncu_target_reports_a_failing_candidate_in_one_line_and_exits_1(tmp_path):
    names_out = tmp_path / "names.json"
    command = [sys.executable, "-m", "egg_worker.ncu_target", "--task", TASK,
               "--candidate", str(DATA / "profile_broken_candidate.py"), "--device", "cpu", "--seed", "1",
               "--init-seed", "2", "--names-out", str(names_out)]
    completed = subprocess.run(command, capture_output=True, text=True, env=profile.child_environment(),
                               timeout=120)
    assert completed.returncode == 1
    assert completed.stdout == ""
    assert profile.last_line(completed.stderr) == "ncu_target: RuntimeError: deliberate failure in forward"
    assert not names_out.exists()
