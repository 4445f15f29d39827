"""The `screen` op through a worker subprocess (cpu interpreter), its precompile pool in-process, and on a GPU
(skipped without one) the precompile step and the timing."""

import os
import textwrap

import pytest
import torch

from conftest import Worker, candidate_path, task_path
from egg_worker import precompile

SPARE_WORKERS = 1
ENTRY_FIELDS = {"candidate", "status", "reason", "time_ms", "max_abs_err", "screened"}


def screen(worker, candidates, task="relu_64", **fields):
    request = {"task": task_path(task), "candidates": candidates, "device": "cpu", "tol": 1e-4, "seed": 42,
               "init_seed": 42, "timing": {"enabled": True, "warmup": 1, "min_trials": 2, "budget_s": 1.0},
               "compile_workers": 2, "compile_timeout_s": 60, **fields}
    response = worker.request("screen", **request)
    assert response["ok"], response
    return response["result"]


def test_every_status_in_the_order_given(worker, tmp_path):
    missing = str(tmp_path / "missing.py")
    names = ["relu_ok", "zeros", "syntax_error", "no_triton", "runtime_error", "no_modelnew", "softmax_ok",
             "relu_ok"]
    paths = [candidate_path(name) for name in names] + [missing]
    result = screen(worker, paths)
    assert result["worker_tainted"] is False
    assert result["compile_s"] == 0.0 and result["screen_s"] > 0
    entries = result["results"]
    assert [entry["candidate"] for entry in entries] == paths
    assert all(set(entry) == ENTRY_FIELDS and entry["screened"] for entry in entries)
    assert [entry["status"] for entry in entries] == [
        "ok", "mismatch", "compile_error", "rejected", "runtime_error", "compile_error", "mismatch", "ok",
        "compile_error"]
    ok = entries[0]
    assert ok["reason"] == "" and ok["max_abs_err"] == 0.0 and ok["time_ms"] is None  # never timed on cpu
    assert "not allclose" in entries[1]["reason"] and entries[1]["max_abs_err"] > 0
    assert entries[2]["reason"].startswith("import failed: SyntaxError")
    assert "no Triton kernel" in entries[3]["reason"]
    assert "RuntimeError" in entries[4]["reason"]
    assert "no class ModelNew" in entries[5]["reason"]
    assert entries[6]["reason"].startswith("output 0: not allclose")  # softmax of a ReLU task: wrong values
    assert "not found" in entries[8]["reason"]
    assert all("\n" not in entry["reason"] for entry in entries)


def test_triton_compile_failures_are_compile_errors(worker):
    entry = screen(worker, [candidate_path("triton_compile_error")])["results"][0]
    assert entry["status"] == "compile_error", entry


def test_reference_runs_once_and_tuple_outputs_compare(worker):
    result = screen(worker, [candidate_path("scaled_relu_param_ok")] * 3, task="scaled_relu_param")
    assert [entry["status"] for entry in result["results"]] == ["ok"] * 3


CENTERED_MEAN_TASK = """
import torch
import torch.nn as nn


class Model(nn.Module):
    def forward(self, x):
        return (x - x.mean(dim=1, keepdim=True)).mean(dim=1)


def get_inputs():
    return [torch.randn(64, 32)]


def get_init_inputs():
    return []
"""

ROW_ZEROS = """
import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def zeros_kernel(out_ptr, n_rows, BLOCK: tl.constexpr):
    rows = tl.arange(0, BLOCK)
    tl.store(out_ptr + rows, tl.zeros((BLOCK,), dtype=tl.float32), mask=rows < n_rows)


class ModelNew(nn.Module):
    def forward(self, x):
        out = torch.empty(x.shape[0], device=x.device, dtype=x.dtype)
        zeros_kernel[(1,)](out, x.shape[0], BLOCK=64)
        return out
"""


def test_a_reference_zero_up_to_rounding_is_judged_against_float64(worker, tmp_path):
    task = tmp_path / "centered_mean.py"
    task.write_text(CENTERED_MEAN_TASK)
    candidate = tmp_path / "row_zeros.py"
    candidate.write_text(ROW_ZEROS)
    response = worker.request("screen", task=str(task), candidates=[str(candidate)], device="cpu", tol=1e-4,
                              seed=42, init_seed=42)
    assert response["ok"], response
    entry = response["result"]["results"][0]
    assert entry["status"] == "ok", entry  # the relative L2 error alone fails: rounding noise of float32


def test_a_half_candidate_is_judged_against_the_float32_answer_as_evaluate_judges_it(worker):
    # as in test_evaluate: bf16 eager rounds 3.1x + 1000 to a multiple of 4, the fused kernel rounds once
    paths = [candidate_path("shift_cancel_ok"), candidate_path("shift_cancel_off")]
    ok, off = screen(worker, paths, task="shift_cancel_64", precision="bf16", tol=1e-2)["results"]
    assert set(ok) == ENTRY_FIELDS  # the float32 answer's pass is not reported by screening
    assert ok["status"] == "ok" and ok["reason"] == "", ok
    assert ok["max_abs_err"] > 0.5  # not allclose to PyTorch's bf16 output: KernelBench's rule alone fails it
    # closer to the float32 answer than PyTorch's bf16 output, but 0.5 off everywhere: outside tol, so wrong
    assert off["status"] == "mismatch" and "not allclose" in off["reason"], off
    # in float32 there is no half answer to excuse: the rule never applies
    exact, shifted = screen(worker, paths, task="shift_cancel_64", tol=1e-4)["results"]
    assert exact["status"] == "ok" and shifted["status"] == "mismatch"


def test_cpu_wall_timing_when_asked(worker):
    timing = {"enabled": True, "cpu_wall": True, "warmup": 1, "min_trials": 2, "budget_s": 1.0}
    entries = screen(worker, [candidate_path("relu_ok"), candidate_path("zeros")], timing=timing)["results"]
    assert entries[0]["time_ms"]["timer"] == "cpu-interpreter-wall" and entries[0]["time_ms"]["n"] == 2
    assert entries[1]["time_ms"] is None


def test_precompile_is_skipped_on_cpu(worker, tmp_path):
    marker = tmp_path / "ran"
    candidate = tmp_path / "relu_with_failing_precompile.py"
    source = open(candidate_path("relu_ok")).read()
    candidate.write_text(source + textwrap.dedent(f"""

        def egg_precompile():
            open({str(marker)!r}, "w").close()
            raise RuntimeError("never called on cpu")
    """))
    entry = screen(worker, [str(candidate)])["results"][0]
    assert entry["status"] == "ok", entry
    assert not marker.exists()


def test_empty_list_and_bad_requests(worker):
    assert screen(worker, [])["results"] == []
    for fields in ({"candidates": "relu_ok.py"}, {"candidates": [1]}, {"tol": 0}, {"compile_workers": -1},
                   {"compile_timeout_s": 0}, {"device": "tpu"}, {"timing": "fast"}):
        request = {"task": task_path("relu_64"), "candidates": [candidate_path("relu_ok")], "device": "cpu",
                   **fields}
        response = worker.request("screen", **request)
        assert response["ok"] is False and "\n" not in response["error"], fields
    broken = worker.request("screen", task=task_path("no_get_inputs"), candidates=[candidate_path("relu_ok")],
                            device="cpu")
    assert broken["ok"] is False and "get_inputs" in broken["error"]


def test_a_patching_candidate_taints_the_worker_and_the_rest_still_screen(fresh_worker):
    names = ["patch_allclose", "relu_ok", "zeros"]
    result = screen(fresh_worker, [candidate_path(name) for name in names])
    assert [entry["status"] for entry in result["results"]] == ["rejected", "ok", "mismatch"]
    assert "torch.allclose" in result["results"][0]["reason"]
    assert result["worker_tainted"] is True
    # the snapshot was restored: a full evaluation in the same worker still judges correctly
    assert fresh_worker.evaluate("relu_64", "zeros")["status"] == "mismatch"


def test_worker_serves_evaluate_after_screening(worker):
    screen(worker, [candidate_path("runtime_error"), candidate_path("relu_ok")])
    assert worker.evaluate("relu_64", "relu_ok")["status"] == "ok"


# ---------------------------------------------------------------- the precompile pool, in-process

PRECOMPILE_SOURCE = """
import os
import time

def egg_precompile():
{body}
"""


def _write(tmp_path, name: str, body: str) -> str:
    path = tmp_path / f"{name}.py"
    path.write_text(PRECOMPILE_SOURCE.format(body=textwrap.indent(textwrap.dedent(body), "    ")))
    return str(path)


def test_pool_statuses_by_index(tmp_path, monkeypatch):
    reader, writer = os.pipe()
    os.set_inheritable(writer, True)  # even an inheritable descriptor of the worker must not reach a child
    monkeypatch.setenv("EGG_TEST_PIPE", f"pipe:[{os.fstat(writer).st_ino}]")
    report = tmp_path / "report"
    paths = [
        _write(tmp_path, "good", f"""
            held = set()
            for fd in os.listdir("/proc/self/fd"):
                try:
                    held.add(os.readlink(f"/proc/self/fd/{{fd}}"))
                except OSError:  # the descriptor listdir itself used
                    pass
            with open({str(report)!r}, "w") as out:
                out.write(f"{{os.getpid()}} {{os.environ['EGG_TEST_PIPE'] in held}}")
        """),
        _write(tmp_path, "raises", "raise ValueError('no such block size')"),
        str(tmp_path / "missing.py"),
        _write(tmp_path, "hangs", "time.sleep(120)"),
        _write(tmp_path, "exits", "os._exit(7)"),
        _write(tmp_path, "later", "pass"),
    ]
    (tmp_path / "plain.py").write_text("x = 1\n")
    paths.append(str(tmp_path / "plain.py"))
    try:
        failures = precompile.precompile(paths, workers=2, timeout_s=8.0)
    finally:
        os.close(reader)
        os.close(writer)
    assert set(failures) == {1, 2, 3, 4}
    assert failures[1] == ("compile_error", "egg_precompile failed: ValueError: no such block size")
    assert failures[2][0] == "compile_error" and failures[2][1].startswith("import failed")
    assert failures[3][0] == "timeout" and "8 s" in failures[3][1]
    assert failures[4] == ("compile_error", "precompiling failed: its process died (exit code 7)")
    child_pid, saw_pipe = report.read_text().split()
    assert int(child_pid) != os.getpid()
    assert saw_pipe == "False"


def test_pool_compiles_a_files_kernels_in_threads(tmp_path):
    """egg_precompile's warmups reach Triton's AsyncCompileMode: two compiles that each wait for the other can
    only both finish in two threads at once, and both have ended (finalized) when the file's status comes back; a
    compile that raises fails its file."""
    report = tmp_path / "threads"
    submit = """
        import threading
        from triton.runtime import _async_compile
        meeting = threading.Barrier(2, timeout=20)
        def compile_fn():
            meeting.wait()
            {failure}
            return threading.current_thread().name
        def finalize(name):
            with open({report!r}, "a") as out:
                out.write(name + "\\n")
        for key in ("first", "second"):
            _async_compile.active_mode.get().submit(key, compile_fn, finalize)
        """
    good = _write(tmp_path, "threaded", submit.format(failure="", report=str(report)))
    bad = _write(tmp_path, "threaded_bad", submit.format(failure="raise RuntimeError('ptxas said no')",
                                                         report=str(tmp_path / "unused")))
    failures = precompile.precompile([good, bad], workers=1, timeout_s=60.0, threads=2)
    assert failures == {1: ("compile_error", "egg_precompile failed: RuntimeError: ptxas said no")}
    names = report.read_text().split()
    assert len(names) == 2 and len(set(names)) == 2 and all(name.startswith("egg-compile") for name in names)


def test_only_files_that_mention_egg_precompile_need_the_pool(tmp_path):
    assert precompile.defines_precompile(candidate_path("relu_precompile_ok"))
    assert not precompile.defines_precompile(candidate_path("relu_ok"))
    assert not precompile.defines_precompile(str(tmp_path / "missing.py"))
    assert precompile.precompile([], workers=4, timeout_s=1.0) == {}


# ---------------------------------------------------------------- on a GPU

cuda_only = pytest.mark.skipif(not torch.cuda.is_available(), reason="needs cuda")


@pytest.fixture(scope="module")
def gpu_worker():
    worker = Worker(device="cuda")
    yield worker
    worker.close()


@cuda_only
def test_gpu_precompiles_then_times(gpu_worker, tmp_path):
    failing = tmp_path / "relu_bad_precompile.py"
    failing.write_text(open(candidate_path("relu_ok")).read()
                       + "\n\ndef egg_precompile():\n    raise RuntimeError('bad config')\n")
    hanging = tmp_path / "relu_hanging_precompile.py"
    hanging.write_text(open(candidate_path("relu_ok")).read()
                       + "\n\ndef egg_precompile():\n    import time\n    time.sleep(120)\n")
    paths = [candidate_path("relu_precompile_ok"), str(failing), str(hanging), candidate_path("relu_ok"),
             candidate_path("zeros"), candidate_path("no_triton")]
    timing = {"enabled": True, "warmup": 3, "min_trials": 20, "budget_s": 1.0}
    result = screen(gpu_worker, paths, device="cuda", timing=timing, compile_timeout_s=20)
    entries = result["results"]
    assert [entry["status"] for entry in entries] == [
        "ok", "compile_error", "timeout", "ok", "mismatch", "rejected"], entries
    assert result["compile_s"] > 0 and result["worker_tainted"] is False
    assert "bad config" in entries[1]["reason"]
    for entry in (entries[0], entries[3]):
        stats = entry["time_ms"]
        assert stats["n"] == 20 and 0 < stats["p20"] <= stats["median"] <= stats["p80"]
    assert entries[4]["time_ms"] is None and entries[5]["time_ms"] is None
    assert gpu_worker.evaluate("relu_64", "relu_precompile_ok", device="cuda")["status"] == "ok"


ILLEGAL_ADDRESS = '''
import torch, torch.nn as nn, triton, triton.language as tl

@triton.jit
def far_store(out_ptr, BLOCK: tl.constexpr):
    offsets = tl.arange(0, BLOCK)
    tl.store(out_ptr + offsets + (1 << 40), tl.zeros((BLOCK,), dtype=tl.float32))

class ModelNew(nn.Module):
    def forward(self, x):
        out = torch.empty_like(x)
        far_store[(1,)](out, BLOCK=128)
        return out
'''


@cuda_only
def test_gpu_lost_context_leaves_the_rest_unscreened(tmp_path):
    faulty = tmp_path / "illegal_address.py"
    faulty.write_text(ILLEGAL_ADDRESS)
    worker = Worker(device="cuda")
    try:
        paths = [candidate_path("relu_ok"), str(faulty), candidate_path("relu_ok")]
        result = screen(worker, paths, device="cuda")
    finally:
        worker.close()
    entries = result["results"]
    assert entries[0]["status"] == "ok" and entries[0]["screened"] is True
    assert entries[1]["status"] == "runtime_error" and entries[1]["screened"] is True, entries[1]
    assert entries[2]["screened"] is False and "not screened" in entries[2]["reason"]
    assert result["worker_tainted"] is True
