"""`egg bench` end to end on the CPU: several workers, results.json with KernelBench's metrics, the
KernelBench-layout files, and report.html opened in headless Chromium."""
import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from conftest import FIXTURES, ROOT

EXPERT_TASKS = ROOT / "tests" / "fixtures" / "tasks" / "expert"
TASK_COUNT = len(list(EXPERT_TASKS.glob("*.py")))  # the suite is that whole folder
CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser") or shutil.which("google-chrome")


@pytest.fixture(scope="module")
def bench(tmp_path_factory):
    home = tmp_path_factory.mktemp("home")
    out = tmp_path_factory.mktemp("bench") / "out"
    suite = tmp_path_factory.mktemp("suite") / "level1"  # a folder named like a KernelBench level
    shutil.copytree(EXPERT_TASKS, suite)
    env = {k: v for k, v in __import__("os").environ.items() if k != "TRITON_INTERPRET"}
    env["EGG_HOME"] = str(home)
    proc = subprocess.run([str(ROOT / "egg"), "bench", str(suite), "--device", "cpu", "--per-gpu", "2",
                           "--trials", "2", "--tol", "1e-2", "--also-tol", "1e-4", "--out", str(out)],
                          capture_output=True, text=True, timeout=900, env=env)
    return proc, out


def test_results_have_kernelbench_metrics_per_level(bench):
    proc, out = bench
    assert proc.returncode == 0, proc.stderr[-2000:]
    results = json.loads((out / "results.json").read_text())
    assert results["format"] == "egg-bench"
    assert results["suite"]["per_gpu"] == 2 and results["suite"]["workers"] == 2  # two workers on one device
    assert "started on worker 1" in proc.stderr
    tasks = results["tasks"]
    assert len(tasks) == TASK_COUNT and all(row["correct"] and row["level"] == 1 for row in tasks)
    assert all(row["at_tol"]["0.0001"]["correct"] for row in tasks)
    assert [row["stage"] for row in tasks[0]["stages"]][:2] == ["stage1.seeds", "stage1.algorithm"]
    overall = results["summary"]["overall"]
    assert overall["tasks"] == TASK_COUNT and overall["tol"]["0.01"]["correct_rate"] == 1.0
    assert set(overall["tol"]) == {"0.01", "0.0001"}
    assert set(overall["tol"]["0.01"]["fast_p_vs_compile"]) == {"0", "0.5", "0.8", "1", "1.5", "2"}
    assert overall["tol"]["0.01"]["baseline"] == "default" and overall["tol"]["0.0001"]["baseline"] == "strict"
    assert overall["tol"]["0.01"]["vacuous"] == 0
    assert all(row["tol"] == 0.01 and list(row["baselines"]) == ["default", "strict", "tf32"] for row in tasks)
    version = subprocess.run([str(ROOT / "egg"), "--version"], capture_output=True, text=True).stdout.split()[1]
    assert all(row["egg"] == version and row["versions"]["egg"] == version for row in tasks), "each row's binary"
    assert results["summary"]["levels"]["1"]["tasks"] == TASK_COUNT
    kernelbench = sorted((out / "kernelbench" / "level1").glob("*.json"))
    assert len(kernelbench) == TASK_COUNT
    first = json.loads(kernelbench[0].read_text())
    assert first["correctness"] is True and first["compiled"] is True and "ref_runtime" in first
    assert (out / "tasks" / "softmax_8x32" / "model_new.py").is_file()
    assert f"[{TASK_COUNT}/{TASK_COUNT}]" in proc.stderr and "remaining" in proc.stderr and "stage1.seeds" in proc.stderr


@pytest.mark.skipif(CHROMIUM is None, reason="no Chromium on this machine (scripts/test.sh installs it)")
def test_report_renders_in_headless_chromium(bench, tmp_path):
    _, out = bench
    page = out / "report.html"
    assert page.is_file()
    proc = subprocess.run([CHROMIUM, "--headless=new", "--no-sandbox", "--disable-gpu", "--enable-logging=stderr",
                           "--v=0", f"--user-data-dir={tmp_path / 'profile'}", "--dump-dom", page.as_uri()],
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr[-2000:]
    dom = proc.stdout
    assert "egg bench" in dom and "<table>" in dom and "softmax_8x32.py" in dom
    assert "CONSOLE" not in proc.stderr and "Uncaught" not in proc.stderr
    assert "Failed to load resource" not in proc.stderr


def test_kb_tables_reproduce_the_committed_kb_sample_figures():
    """bench/kb_tables.py makes the READMEs' tables from a results.json: the committed kb-sample run's."""
    results = ROOT / "bench" / "results" / "h200-expert-kb-sample" / "results.json"
    proc = subprocess.run(["python3", str(ROOT / "bench" / "kb_tables.py"), str(results)], capture_output=True,
                          text=True, timeout=60)
    assert proc.returncode == 0, proc.stderr
    lines = proc.stdout.splitlines()
    assert "| all | 50 | 45 (90%) | 24 | 0.66 | 0.62 | 1.45x | 1.30x | 1.74x | 1.07x |" in lines
    rows = [line for line in lines if line.startswith(("| 1 | ", "| 2 | ", "| 3 | ")) and "_" in line]
    assert len(rows) == 50
    # this run kept no design records (its model_new.py files were dropped from the tree): no products column
    assert "| 3 | 16_DenseNet201 | ok | 0.32 | 0.41 | 69.514 | 28.743 | no | - | 100% |" in rows
    assert "| 3 | 36_LSTMHn | failed | - | - | - | - | - | - | - |" in rows
    assert "| 1 | 56_conv_standard_2D__asymmetric_input__asymmetric_kernel | ok | 1.18 | 2.49 | 23.132 | 57.633 | " \
           "yes | - | 100% |" in rows


def test_kb_tables_give_the_level1_families_of_the_gemm_conv_runs():
    """The GEMM and convolution families' figures of the committed H200 runs (tol 1e-2 and a tol-1e-4 search,
    whose tables have no re-check column), as the README states them."""
    folder = ROOT / "bench" / "results" / "h200-expert-gemm-conv"
    outputs = {}
    for name, path in {"1e-2": folder / "results.json", "1e-4": folder / "tol1e-4" / "results.json"}.items():
        proc = subprocess.run(["python3", str(ROOT / "bench" / "kb_tables.py"), str(path)], capture_output=True,
                              text=True, timeout=60)
        assert proc.returncode == 0, proc.stderr
        outputs[name] = proc.stdout.splitlines()
    assert "| GEMM (1-4, 6-18) | 17 | 17 | 1.67x | 1.69x | 2 |" in outputs["1e-2"]
    assert "| convolution (50, 54-87) | 35 | 35 | 2.08x | 2.59x | 4 |" in outputs["1e-2"]
    assert "| GEMM (1-4, 6-18) | 17 | 17 | 0.83x | 0.89x | 12 |" in outputs["1e-4"]
    assert "| convolution (50, 54-87) | 35 | 35 | 0.85x | 1.06x | 16 |" in outputs["1e-4"]
    assert outputs["1e-4"][0].count("correct") == 1, "a tol-1e-4 run re-checks nothing"
    assert "| 1 | 6_Matmul_with_large_K_dimension_ | ok | 1.29 | 1.32 | 1.021 | 1.349 | no | tf32 | 100% |" \
        in outputs["1e-2"], "split-K kernels' products are listed"
    readme = (folder / "README.md").read_text()
    for line in outputs["1e-2"] + outputs["1e-4"]:
        assert line in readme, line


def test_kb_tables_give_the_recurrent_and_level3_run():
    """The committed H200 run of the recurrent layers, whole models and direct depthwise convolutions: the
    figures its README states, with the recurrent kernels' products listed."""
    folder = ROOT / "bench" / "results" / "h200-expert-level3-recurrent"
    proc = subprocess.run(["python3", str(ROOT / "bench" / "kb_tables.py"), str(folder / "results.json")],
                          capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0, proc.stderr
    lines = proc.stdout.splitlines()
    assert "| 3 | 17 | 17 (100%) | 0 | 0.76 | 0.76 | 1.45x | 1.56x | 1.77x | 2.01x |" in lines
    assert "| convolution (50, 54-87) | 5 | 5 | 2.77x | 5.26x | 0 |" in lines
    assert "| 3 | 36_LSTMHn | ok | 1.67 | 1.83 | 23.146 | 42.465 | no | tf32 | 100% |" in lines
    rows = [line for line in lines if line.startswith(("| 1 | ", "| 3 | ")) and "_" in line]
    assert len(rows) == 22 and all("| ok |" in row for row in rows)
    readme = (folder / "README.md").read_text()
    for line in lines:
        assert line in readme, line


def test_kb_tables_give_the_tol_1e4_searches_of_level2_and_the_gemm_family():
    """The committed tol-1e-4 searches of 30 level-2 tasks and of the level-1 GEMM family: the summary rows the
    README states, every task correct."""
    folder = ROOT / "bench" / "results" / "h200-expert-tol1e-4"
    readme = (folder / "README.md").read_text()
    expected = {"l2": "| 2 | 30 | 30 (100%) | 0.90 | 0.90 | 1.50x | 1.35x | 1.75x | 1.40x |",
                "l1-gemm": "| GEMM (1-4, 6-18) | 17 | 17 | 1.27x | 1.31x | 1 |"}
    for name, summary in expected.items():
        proc = subprocess.run(["python3", str(ROOT / "bench" / "kb_tables.py"), str(folder / name / "results.json")],
                              capture_output=True, text=True, timeout=60)
        assert proc.returncode == 0, proc.stderr
        lines = proc.stdout.splitlines()
        assert summary in lines and summary in readme, (name, lines[:8])
        rows = [line for line in lines if line.startswith(("| 1 | ", "| 2 | ")) and "_" in line]
        assert rows and all("| ok |" in row for row in rows), rows


@pytest.mark.skipif(not (ROOT.parent / "shared" / "kernelbench" / "level1").is_dir(), reason="needs ../shared/kernelbench")
def test_scoreboard_gives_each_level1_product_its_tflops_beside_the_library():
    """bench/scoreboard.py on the committed H200 level-1 run at tol 1e-4: each GEMM's and convolution's work
    counted by PyTorch's FLOP counter on the meta device, egg's TFLOP/s and cuBLAS's or cuDNN's (eager) from the
    baselines timed beside it, and the ratio at the tolerance's precision (`strict` at 1e-4)."""
    results = ROOT / "bench" / "results" / "h200-fair-l1-3" / "tol1e-4" / "results.json"
    proc = subprocess.run([sys.executable, str(ROOT / "bench" / "scoreboard.py"), str(results)], capture_output=True,
                          text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    lines = proc.stdout.splitlines()
    # 4096^3: 137.4 GFLOP in 2.563 ms is 53.6 TFLOP/s; cuBLAS's float32 SGEMM 51.1, with TF32 412.9
    assert "| 1_Square_matrix_multiplication_ | 137.4 | 2.563 | 53.6 | 51.1 | 412.9 | 51.3 | 1.05x | tiled tf32x3 |" \
        in lines
    assert "| 12_Matmul_with_diagonal_matrices_ | 0 (elementwise) | - | - | - | - | - | - | - |" in lines
    assert "| GEMM | 16 | 1.25x | 1 |" in lines and "| convolution | 35 | 1.37x | 9 |" in lines
    assert sum(line.startswith("| ") and "_conv_" in line for line in lines) == 35, "every convolution task a row"


BASELINE_TIMES = ROOT.parent / "shared" / "kernelbench" / "baseline_times"


@pytest.mark.skipif(not BASELINE_TIMES.is_dir(), reason="KernelBench's baseline timings not found")
def test_probe_check_sets_egg_baselines_beside_independent_timings():
    """bench/probe_check.py: egg's `default` eager and torch.compile times over an independent timing of the same
    tasks, per level and family, and the tasks off by more than 10%: the H200 probe's layout (the committed level
    1-2 run at 1e-4) and KernelBench's own (H100_Modal, the H100 convolutions, whose rows name no level)."""
    script = ROOT / "bench" / "probe_check.py"
    fair = ROOT / "bench" / "results" / "h200-fair-l1-3" / "tol1e-4" / "results.json"
    proc = subprocess.run([sys.executable, str(script), str(fair)], capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0, proc.stderr
    lines = proc.stdout.splitlines()
    assert "| 1 | GEMM | 18 | 0.986 (0.764-1.011) | 0.987 (0.335-1.016) |" in lines
    # level 2 is complete (calls 5-10); level 3 grows with the run, so the count of tasks off is only bounded
    assert "| 2 | convolution | 63 | 1.000 (0.956-1.312) | 0.980 (0.694-1.319) |" in lines
    off = next(line for line in lines if line.startswith("Off by more than 10% ("))
    counted, total = map(int, re.match(r"Off by more than 10% \((\d+) of (\d+)\):", off).groups())
    assert 21 <= counted < total and total >= 213, off
    assert "| 1 | 12_Matmul_with_diagonal_matrices_.py | 0.764 | 0.335 |" in lines
    conv = ROOT / "bench" / "results" / "h100-conv-1e-2" / "results.json"
    proc = subprocess.run([sys.executable, str(script), str(conv), "--reference", str(BASELINE_TIMES / "H100_Modal")],
                          capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0, proc.stderr
    lines = proc.stdout.splitlines()
    assert "| 1 | convolution | 34 | 1.004 (0.931-1.398) | 1.002 (0.892-1.342) |" in lines
    assert "| 1 | 60_conv_standard_3D__square_input__asymmetric_kernel.py | 1.398 | 1.299 |" in lines
    missing = subprocess.run([sys.executable, str(script), str(conv), "--reference", str(BASELINE_TIMES / "none")],
                             capture_output=True, text=True, timeout=60)
    assert missing.returncode == 1 and missing.stderr.startswith("probe_check: ") and len(missing.stderr.splitlines()) == 1


def test_phases_variant_puts_the_phase_back_on_grid_axis_1_and_both_orders_are_correct(tmp_path):
    """bench/ab_variants.py's `phases` set: a transposed convolution's kernel as generated (the output phases
    fastest along one grid axis) and rewritten to the order before (the phase on axis 1), both correct in the
    interpreter, so the pair differs in the programs' order alone."""
    sys.path.insert(0, str(ROOT / "bench"))
    import ab_variants

    shutil.copy(EXPERT_TASKS / "conv_transpose_grouped.py", tmp_path / "task.py")
    proc = subprocess.run([str(ROOT / "egg"), "compile", "task.py", "--seed", "0", "--device", "cpu", "--out",
                           "inner.py"], capture_output=True, text=True, timeout=300, cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    inner = (tmp_path / "inner.py").read_text()
    outer = ab_variants.phases_outer(inner)
    assert "tl.program_id(0) //" in inner and "tl.program_id(1)" not in inner
    assert "bindex = tl.program_id(1)" in outer and "tl.program_id(0) //" not in outer
    (tmp_path / "outer.py").write_text(outer)
    with pytest.raises(ValueError):
        ab_variants.phases_outer(outer)  # nothing left to rewrite: refused, not copied
    env = {**os.environ, "TRITON_INTERPRET": "1"}
    for name in ("inner.py", "outer.py"):
        proc = subprocess.run([str(ROOT / "egg"), "eval", "task.py", name, "--device", "cpu", "--json"],
                              capture_output=True, text=True, timeout=300, cwd=tmp_path, env=env)
        assert proc.returncode == 0, proc.stderr
        result = json.loads(proc.stdout)
        assert result["correct"] is True, (name, result["reason"])


def test_ab_run_checks_each_candidate_and_the_nan_variant_differs_in_nan_alone(tmp_path):
    """bench/h200_ab.sh over an A/B set in the interpreter (no GPU: correctness only, nothing timed): the nan
    fixture's seed-0 file passes, and its `plain` variant (bench/ab_variants.py: tl.max / tl.min and folds without
    propagate_nan) misses the rows that hold a nan, so the pair differs in PyTorch's nan semantics alone."""
    sys.path.insert(0, str(ROOT / "bench"))
    import ab_variants

    work = tmp_path / "set"
    work.mkdir()
    shutil.copy(EXPERT_TASKS / "nan_extrema.py", work / "x_task.py")
    proc = subprocess.run([str(ROOT / "egg"), "compile", str(work / "x_task.py"), "--seed", "0", "--device", "cpu",
                           "--out", str(work / "x_kept.py")], capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr
    kept = (work / "x_kept.py").read_text()
    plain = ab_variants.without_nan_semantics(kept)
    assert "_egg_max(" in kept and "propagate_nan=" in kept
    assert "propagate_nan=" not in plain and "tl.max(" in plain
    (work / "x_plain.py").write_text(plain)
    (work / "manifest.json").write_text(json.dumps([{"tag": "x", "variant": v, "tol": 1e-4, "baselines": False}
                                                    for v in ("kept", "plain")]))
    env = {**os.environ, "OUT": str(tmp_path / "out"), "TRITON_INTERPRET": "1",
           "PATH": f"{Path(sys.executable).parent}:{os.environ['PATH']}"}
    proc = subprocess.run(["bash", str(ROOT / "bench" / "h200_ab.sh"), str(work)], capture_output=True, text=True,
                          timeout=600, env=env, cwd=ROOT)
    assert proc.returncode == 0, proc.stderr
    rows = {row["variant"]: row for row in map(json.loads, (tmp_path / "out" / "ab.jsonl").read_text().splitlines())}
    assert rows["kept"]["correct"] is True, rows["kept"]
    assert rows["plain"]["correct"] is False and "NaN" in rows["plain"]["reason"], rows["plain"]
    assert "| x | - | - | - | - | kept yes, plain NO: " in proc.stdout
    # the table is also kept current after each candidate, for a call cut at the device's limit
    assert "| x | - | - | - | - | kept yes, plain NO: " in (tmp_path / "out" / "ab-table.txt").read_text()
