"""egg_report: the bench page from a results.json (synthetic rows; the real bench is tested black-box)."""
import json
import re
import subprocess
import sys

import pytest

from conftest import REPO
from egg_report.page import ReportError, load_results, render, write_report

STAGES = ["stage1.seeds", "stage1.algorithm", "stage2.mapping", "stage2.tiling", "stage2.memory"]


def _row(task, level, correct, eager, compile_, stage_speedups):
    return {"task": task, "path": f"/kb/level{level}/{task}", "level": level, "correct": correct,
            "status": "ok" if correct else "failed", "speedup_vs_eager": eager, "speedup_vs_compile": compile_,
            "wall_s": 12.5, "kernels": 2, "pytorch_ops": ["aten.convolution.default"] if level == 2 else [],
            "triton_time_share": 0.75, "at_tol": {"0.0001": {"correct": correct}},
            "stages": [{"stage": s, "speedup_vs_eager": v} for s, v in zip(STAGES, stage_speedups)]}


@pytest.fixture
def results():
    rows = [_row("19_ReLU.py", 1, True, 1.01, 0.99, [1.0, 1.0, 1.01, 1.01, 1.01]),
            _row("23_Softmax.py", 1, True, 1.4, 1.07, [1.2, 1.3, 1.35, 1.4, 1.4]),
            _row("12_Gemm_Multiply.py", 2, False, None, None, [])]
    summary = {"run_tol": "0.01",
               "overall": {"tasks": 3, "wall_s_per_task": 12.5,
                           "tol": {"0.01": {"correct": 2, "correct_rate": 2 / 3,
                                            "speedup_vs_eager": {"geomean": 1.19, "mean": 1.2},
                                            "speedup_vs_compile": {"geomean": 1.03, "mean": 1.03},
                                            "fast_p_vs_eager": {"1": 0.6667}, "fast_p_vs_compile": {"1": 0.3333}},
                                   "0.0001": {"correct": 2, "correct_rate": 2 / 3}}},
               "levels": {"1": {"tasks": 2, "tol": {"0.01": {"correct": 2, "correct_rate": 1.0}}},
                          "2": {"tasks": 1, "tol": {"0.01": {"correct": 0, "correct_rate": 0.0}}}}}
    return {"suite": {"name": "unit", "backend": "expert", "device": "cuda"}, "tasks": rows, "summary": summary}


def test_page_has_charts_tables_and_every_task(results):
    html = render(results)
    assert html.startswith("<!DOCTYPE html>")
    assert html.count("<svg") == 4  # distribution, per-task bars, stages, time
    for row in results["tasks"]:
        assert row["task"] in html
    assert "tolerance 0.01" in html and "tolerance 0.0001" in html
    assert "66.7%" in html  # correct rate of all tasks
    assert 'class="failed"' in html
    assert "<script" not in html
    assert not re.search(r'(src|href)="(https?:)?//', html)  # nothing is fetched: the page is self-contained


def test_the_task_table_names_each_rows_hottest_kernel(results):
    results["tasks"][1]["kernel_times"] = [
        {"name": "egg_k1_softmax", "launches": 1, "us": 30.0, "share": 0.6, "triton": True},
        {"name": "egg_k0_exp", "launches": 1, "us": 20.0, "share": 0.4, "triton": True}]
    html = render(results)
    assert "<th>hottest kernel</th>" in html
    assert "<td>egg_k1_softmax 60%</td>" in html
    assert "egg_k0_exp" not in html  # the longest alone
    assert html.count("<td>-</td>") >= 2  # rows without a trace say so


def test_empty_suite_renders_without_charts(results):
    results["tasks"] = []
    html = render(results)
    assert "<svg" not in html and "<h2>Tasks</h2>" in html


def test_untimed_suite_says_why_there_are_no_speedup_charts(results):
    for row in results["tasks"]:
        row["speedup_vs_eager"] = row["speedup_vs_compile"] = None
    html = render(results)
    assert html.count("<svg") == 1 and "no speedup charts" in html


def test_bad_input_is_a_one_line_error(tmp_path):
    with pytest.raises(ReportError, match="cannot read"):
        load_results(str(tmp_path / "missing.json"))
    bad = tmp_path / "bad.json"
    bad.write_text("{\"tasks\": 3}")
    with pytest.raises(ReportError, match="no task list"):
        load_results(str(bad))
    process = subprocess.run([sys.executable, "-m", "egg_report", str(bad), "--out", str(tmp_path / "r.html")],
                             capture_output=True, text=True, cwd=REPO / "python")
    assert process.returncode == 2
    assert process.stderr.count("\n") == 1 and "egg_report: error:" in process.stderr


def test_write_report_writes_atomically(results, tmp_path):
    source = tmp_path / "results.json"
    source.write_text(json.dumps(results))
    target = tmp_path / "report.html"
    write_report(str(source), str(target))
    assert target.read_text().count("<svg") == 4
    assert not (tmp_path / "report.html.tmp").exists()
