"""The worker on a GPU (skipped without one): timing, the side-stream check, baselines, the oom fault."""

import pytest
import torch

from conftest import Worker, candidate_path, task_path

pytestmark = pytest.mark.skipif(not torch.cuda.is_available(), reason="needs cuda")

TIMING = {"enabled": True, "warmup": 2, "min_trials": 20, "budget_s": 5.0}


@pytest.fixture(scope="module")
def gpu_worker():
    worker = Worker(device="cuda")
    yield worker
    worker.close()


def evaluate(worker, task, candidate, **fields):
    return worker.evaluate(task, candidate, device="cuda", **fields)


def test_hello_describes_the_gpu(gpu_worker):
    response = gpu_worker.request("hello")
    device = response["device"]
    assert device["kind"] == "cuda" and device["name"]
    assert device["sm_count"] > 0 and device["l2_bytes"] > 0 and device["total_memory_bytes"] > 0
    assert response["versions"]["cuda"]


@pytest.mark.parametrize("task, candidate", [("relu_64", "relu_ok"), ("softmax_4x32", "softmax_ok"),
                                             ("linear_16x32x16", "linear_ok"),
                                             ("scaled_relu_param", "scaled_relu_param_ok")])
def test_correct_candidates_are_ok_and_timed(gpu_worker, task, candidate):
    result = evaluate(gpu_worker, task, candidate, timing=TIMING, robust_trial=True)
    assert result["status"] == "ok", result
    assert result["worker_tainted"] is False and result["flags"] == []
    stats = result["time_ms"]["candidate"]
    assert stats["n"] == 20 and 0 < stats["p20"] <= stats["median"] <= stats["p80"]
    assert result["triton_time_share"] == pytest.approx(1.0)
    assert result["robust"]["correct"] is True


def test_autotuned_launches_are_counted_on_a_warm_call(gpu_worker):
    result = evaluate(gpu_worker, "relu_64", "relu_autotuned", timing=TIMING)
    assert result["status"] == "ok", result
    assert result["triton_launches"] == 1 and result["triton_kernels"] == ["relu_kernel"]


def test_timing_disabled_gives_no_stats(gpu_worker):
    result = evaluate(gpu_worker, "relu_64", "relu_ok", timing={"enabled": False})
    assert result["status"] == "ok" and result["time_ms"] == {"candidate": None}


def test_side_stream_is_rejected(gpu_worker):
    result = evaluate(gpu_worker, "relu_64", "side_stream", timing=TIMING)
    assert result["status"] == "rejected" and "CUDA streams" in result["reason"], result


@pytest.mark.parametrize("candidate, status, words", [
    ("uninitialized_output", "mismatch", "non-finite"),
    ("no_triton", "rejected", "no Triton kernel"),
    ("patch_synchronize", "rejected", "torch.cuda.synchronize"),
    ("triton_compile_error", "compile_error", "CompilationError"),
    ("modifies_input", "rejected", "modified input"),
    ("first_call_only", "rejected", "no Triton kernel launched in the forward call of trial 1"),
    ("tensor_subclass", "rejected", "not a plain torch.Tensor"),
    ("cached_result", "mismatch", "trial 1 "),
])
def test_failures_on_the_gpu(gpu_worker, candidate, status, words):
    result = evaluate(gpu_worker, "relu_64", candidate, timing=TIMING)
    assert result["status"] == status and words in result["reason"], result


def test_baseline_times_eager_and_compile(gpu_worker):
    response = gpu_worker.request("baseline", task=task_path("relu_64"), device="cuda", seed=42, init_seed=42,
                                  timing=TIMING)
    result = response["result"]
    assert result["status"] == "ok" and result["compile_error"] == "", result
    assert result["eager"]["n"] == 20 and result["compile"]["n"] == 20 and result["compile_s"] > 0
    again = gpu_worker.request("baseline", task=task_path("relu_64"), device="cuda", seed=42, init_seed=42,
                               timing=TIMING)["result"]
    assert again == result  # cached per task


def test_worker_is_still_healthy_after_the_gpu_failures(gpu_worker):
    result = evaluate(gpu_worker, "relu_64", "relu_ok", timing=TIMING)
    assert result["status"] == "ok" and result["worker_tainted"] is False


def test_oom_fault_answers_ok_false_and_frees_the_memory(gpu_worker):
    response = gpu_worker.request("fault", kind="oom")
    assert response["ok"] is False and "out of memory" in response["error"]
    assert evaluate(gpu_worker, "relu_64", "relu_ok", timing={"enabled": False})["status"] == "ok"


def test_candidate_path_is_checked(gpu_worker):
    response = gpu_worker.request("evaluate", task=task_path("relu_64"), candidate=candidate_path("x_missing"),
                                  device="cuda")
    assert response["ok"] is False
