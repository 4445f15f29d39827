"""Evaluate through a worker subprocess, as the C++ side does: every status and every planted exploit."""

import pytest

from conftest import candidate_path, task_path

RESULT_FIELDS = {"status", "reason", "correct", "trials", "trials_passed", "max_abs_err", "max_rel_err", "rel_l2_err",
                 "tol", "robust", "time_ms", "triton_launches", "triton_kernels", "triton_time_share", "kernel_times",
                 "flags", "worker_tainted", "vacuous", "float32_answer", "io_bytes", "timing_protocol", "variants"}


@pytest.mark.parametrize("task, candidate, kernel", [
    ("relu_64", "relu_ok", "relu_kernel"),
    ("softmax_4x32", "softmax_ok", "softmax_kernel"),
    ("linear_16x32x16", "linear_ok", "linear_kernel"),
])
def test_correct_candidates_are_ok(worker, task, candidate, kernel):
    result = worker.evaluate(task, candidate, trials=4)
    assert set(result) == RESULT_FIELDS
    assert result["status"] == "ok" and result["reason"] == "" and result["correct"] is True
    assert result["trials"] == 4 and result["trials_passed"] == 4
    assert 0 <= result["max_abs_err"] < 1e-5 and 0 <= result["rel_l2_err"] < 1e-5
    assert result["triton_launches"] == 1 and result["triton_kernels"] == [kernel]
    assert result["time_ms"] == {"candidate": None}  # never timed on cpu, whatever timing says
    assert result["triton_time_share"] is None and result["robust"] is None
    assert result["kernel_times"] == []  # no kernel trace on the cpu
    assert result["worker_tainted"] is False and result["flags"] == [] and result["vacuous"] is False
    assert result["float32_answer"] is False
    assert result["io_bytes"] > 0


def test_tuple_outputs_and_reference_parameters_survive_the_poisoning(worker):
    result = worker.evaluate("scaled_relu_param", "scaled_relu_param_ok", trials=4)
    assert result["status"] == "ok" and result["trials_passed"] == 4, result
    assert result["max_abs_err"] == 0.0


def test_launch_count_of_a_single_trial_comes_from_a_warm_call(worker):
    single = worker.evaluate("relu_64", "relu_ok", trials=1)
    assert single["status"] == "ok" and single["triton_launches"] == 1


@pytest.mark.parametrize("trials, reason", [
    (3, "no Triton kernel launched in the forward call of trial 1"),
    (1, "no Triton kernel launched in the warm forward call"),
])
def test_triton_on_the_first_call_only_is_rejected(worker, trials, reason):
    result = worker.evaluate("relu_64", "first_call_only", trials=trials)
    assert result["status"] == "rejected" and result["reason"] == reason


def test_tensor_subclass_outputs_are_rejected(worker):
    result = worker.evaluate("relu_64", "tensor_subclass")
    assert result["status"] == "rejected"
    assert result["reason"] == "output 0 is a AlwaysClose, not a plain torch.Tensor in trial 0"


def test_syntax_error_is_a_compile_error(worker):
    result = worker.evaluate("relu_64", "syntax_error")
    assert result["status"] == "compile_error" and result["correct"] is False
    assert result["reason"].startswith("import failed: SyntaxError") and "\n" not in result["reason"]
    assert result["max_abs_err"] is None and result["trials_passed"] == 0


def test_error_inside_a_triton_jit_body_is_a_compile_error(worker):
    result = worker.evaluate("relu_64", "triton_compile_error")
    assert result["status"] == "compile_error"
    assert "power of 2" in result["reason"]


def test_missing_model_new_is_a_compile_error(worker):
    result = worker.evaluate("relu_64", "no_modelnew")
    assert result["status"] == "compile_error" and "ModelNew" in result["reason"]


def test_exception_in_forward_is_a_runtime_error(worker):
    result = worker.evaluate("relu_64", "runtime_error")
    assert result["status"] == "runtime_error"
    assert result["reason"].startswith("RuntimeError: shape '[7, -1]' is invalid")


def test_wrong_answer_is_a_mismatch_with_errors(worker):
    result = worker.evaluate("relu_64", "identity_copy", trials=2)
    assert result["status"] == "mismatch" and result["correct"] is False
    assert result["reason"].startswith("trial 0 output 0: not allclose")
    assert result["trials_passed"] == 0
    assert result["max_abs_err"] > 1 and result["rel_l2_err"] > 0.5 and result["max_rel_err"] > 1


def test_answer_within_atol_everywhere_fails_on_rel_l2(worker):
    result = worker.evaluate("tiny_scale_64", "zeros", trials=1)
    assert result["status"] == "mismatch"
    assert "rel_l2_err over tol" in result["reason"] and "not allclose" not in result["reason"]
    assert result["max_abs_err"] < 1e-4 and result["rel_l2_err"] == pytest.approx(1.0)


def test_robust_trial_is_reported_without_changing_status(worker):
    fooled = worker.evaluate("relu_rand_64", "identity_copy", robust_trial=True)
    assert fooled["status"] == "ok" and fooled["trials_passed"] == 3
    assert fooled["robust"]["correct"] is False and fooled["robust"]["max_abs_err"] > 0.1
    assert "rel_l2_err over tol" in fooled["robust"]["reason"]
    sound = worker.evaluate("relu_64", "relu_ok", robust_trial=True)
    assert sound["robust"] == {"correct": True, "max_abs_err": 0.0, "max_rel_err": 0.0, "rel_l2_err": 0.0,
                               "reason": ""}


def test_no_triton_launch_is_rejected(worker):
    result = worker.evaluate("relu_64", "no_triton")
    assert result["status"] == "rejected" and "no Triton kernel launched" in result["reason"]


def test_modifying_the_input_is_rejected(worker):
    result = worker.evaluate("relu_64", "modifies_input")
    assert result["status"] == "rejected" and result["reason"] == "candidate modified input 0 in trial 0"


def test_returning_the_input_itself_is_rejected_although_the_values_are_right(worker):
    result = worker.evaluate("relu_rand_64", "aliases_input")
    assert result["status"] == "rejected" and "shares storage with input 0" in result["reason"]


def test_an_answer_cached_across_calls_fails_on_fresh_inputs(worker):
    result = worker.evaluate("relu_64", "cached_result")
    assert result["status"] == "mismatch" and result["reason"].startswith("trial 1 ")
    assert result["trials_passed"] == 1


def test_uninitialised_output_never_holds_the_answer(worker):
    # a correct candidate first leaves right answers for the same seeds in freed memory
    assert worker.evaluate("relu_64", "relu_ok", trials=4)["status"] == "ok"
    for _ in range(2):
        result = worker.evaluate("relu_64", "uninitialized_output", trials=4)
        assert result["status"] == "mismatch" and result["trials_passed"] == 0, result


@pytest.mark.parametrize("candidate, patched", [
    ("patch_allclose", "torch.allclose (import)"),
    ("patch_perf_counter", "time.perf_counter (trial 0)"),
    ("patch_synchronize", "torch.cuda.synchronize (import)"),
])
def test_patching_is_rejected_restored_and_taints_the_worker(worker, candidate, patched):
    result = worker.evaluate("relu_64", candidate)
    assert result["status"] == "rejected" and result["reason"] == f"candidate patched {patched}"
    assert result["worker_tainted"] is True
    after = worker.evaluate("relu_64", "relu_ok")
    assert after["status"] == "ok" and after["worker_tainted"] is False


def test_a_thread_left_running_is_flagged_and_taints_the_worker(worker):
    result = worker.evaluate("relu_64", "leaves_thread")
    assert result["status"] == "ok" and result["worker_tainted"] is True
    assert result["flags"] == ["candidate left 1 Python threads running (lurker)"]


def test_worker_stays_healthy_after_bad_candidates(worker):
    for bad in ("runtime_error", "syntax_error", "triton_compile_error", "modifies_input"):
        assert worker.evaluate("relu_64", bad)["status"] != "ok"
    result = worker.evaluate("relu_64", "relu_ok")
    assert result["status"] == "ok" and result["trials_passed"] == 3


def test_defaults_fill_missing_fields(worker):
    response = worker.request("evaluate", task=task_path("relu_64"), candidate=candidate_path("relu_ok"),
                              device="cpu")
    assert response["ok"] is True
    result = response["result"]
    assert result["status"] == "ok" and result["trials"] == 5 and result["tol"] == 1e-4


def test_bad_fields_are_request_errors(worker):
    for fields in ({"trials": 0}, {"tol": -1}, {"device": "tpu"}, {"timing": "fast"}):
        request = {"task": task_path("relu_64"), "candidate": candidate_path("relu_ok"), "device": "cpu",
                   **fields}
        response = worker.request("evaluate", **request)
        assert response["ok"] is False and "\n" not in response["error"], fields



def test_threads_started_by_torch_itself_are_not_blamed_on_the_candidate():
    # inductor's compile-worker timer starts lazily after a torch.compile baseline in the same worker
    import threading
    import torch._inductor.compile_worker.timer as inductor_timer
    from egg_worker import evaluate

    torch_thread = threading.Thread(target=inductor_timer.Timer.record_call, name="subproc_worker_timer")
    candidate_thread = threading.Thread(target=lambda: None, name="lurker")
    assert evaluate._started_by_torch(torch_thread)
    assert not evaluate._started_by_torch(candidate_thread)


def _stream_call(records, caller_stream=7, launches=("relu_kernel",)):
    from egg_worker import evaluate as ev
    from egg_worker.guards import KernelRecord
    return ev.CallRecord([], list(launches), [KernelRecord(name, stream, 1.0) for name, stream in records], None,
                         caller_stream)


def _stream_context():
    from egg_worker import evaluate as ev
    return ev.Context(request=None, task=None, reference=None, reference_key=())


def test_triton_kernels_off_the_callers_stream_are_rejected():
    from egg_worker import evaluate as ev
    context = _stream_context()
    with pytest.raises(ev.Rejected, match="Triton kernels ran on CUDA streams \\[13\\]"):
        ev._check_streams(context, _stream_call([("relu_kernel", 13), ("cudnn_conv", 7)]), 2)
    # no marker in the trace: any second stream is refused
    with pytest.raises(ev.Rejected, match="2 CUDA streams"):
        ev._check_streams(context, _stream_call([("relu_kernel", 7), ("cudnn_conv", 13)], caller_stream=None), 2)


def test_library_kernels_on_side_streams_switch_to_synchronized_timing():
    from egg_worker import evaluate as ev
    context = _stream_context()
    ev._check_streams(context, _stream_call([("relu_kernel", 7)]), 2)
    assert context.side_streams == [] and context.flags == []
    ev._check_streams(context, _stream_call([("cudnn_dgrad", 14), ("relu_kernel", 7), ("cudnn_split", 15)]), 2)
    assert context.side_streams == [14, 15]
    assert len(context.flags) == 1 and "device-wide synchronize" in context.flags[0]


def test_robust_trial_judges_signed_outputs_by_the_relative_criterion(worker):
    # randn inputs to a 16384-deep product: outputs of magnitude ~128 crossing zero, where an absolute 1e-4 on
    # each element is rounding noise; the relative L2 criterion of the main check passes the exact kernel
    sound = worker.evaluate("matmul_deep_k", "matmul_deep_k_ok", trials=1, robust_trial=True)
    assert sound["status"] == "ok" and sound["robust"]["correct"] is True, sound["robust"]
    assert sound["robust"]["rel_l2_err"] < 1e-5
    clamped = worker.evaluate("matmul_deep_k", "matmul_deep_k_clamped", trials=1, robust_trial=True)
    assert clamped["status"] == "ok"  # right on uniform [0, 1) inputs
    assert clamped["robust"]["correct"] is False and "rel_l2_err over tol" in clamped["robust"]["reason"]


def test_a_reference_that_never_changes_is_flagged_vacuous(worker):
    constant = worker.evaluate("relu_after_shift", "zeros", trials=3)
    assert constant["status"] == "ok" and constant["vacuous"] is True
    assert any(flag.startswith("vacuous: ") for flag in constant["flags"])
    single = worker.evaluate("relu_after_shift", "zeros", trials=1)
    assert single["vacuous"] is False  # one trial cannot tell


def test_a_half_candidate_more_accurate_than_pytorch_passes_against_the_float32_answer(worker):
    # bf16 eager rounds 3.1x + 1000 to a multiple of 4: off by up to 2 from the answer; the fused kernel is not
    fused = worker.evaluate("shift_cancel_64", "shift_cancel_ok", precision="bf16", tol=1e-2, robust_trial=True)
    assert fused["status"] == "ok" and fused["trials_passed"] == 3, fused
    assert fused["float32_answer"] is True and fused["robust"]["correct"] is True
    assert fused["max_abs_err"] > 0.5  # not allclose to PyTorch's bf16 output: KernelBench's rule fails it
    flag = [flag for flag in fused["flags"] if flag.startswith("half-precision check passed against the float32")]
    assert len(flag) == 1 and "not allclose" in flag[0] and "against PyTorch's" in flag[0]
    # closer to the float32 answer than PyTorch's bf16 output, but 0.5 off everywhere: outside tol, so wrong
    shifted = worker.evaluate("shift_cancel_64", "shift_cancel_off", precision="bf16", tol=1e-2)
    assert shifted["status"] == "mismatch" and shifted["float32_answer"] is False
    # in float32 there is no half answer to excuse: the rule never applies
    exact = worker.evaluate("shift_cancel_64", "shift_cancel_ok", tol=1e-4)
    assert exact["status"] == "ok" and exact["float32_answer"] is False and exact["flags"] == [], exact


def test_a_dynamic_candidate_is_timed_at_each_checked_batch_on_inputs_of_that_batch(monkeypatch):
    # The GPU path's per-batch timing, faked on the cpu: each batch's inputs are drawn at that batch (the seed the
    # baseline op draws its inputs from), and the candidate runs under the fence as in every timing.
    import torch
    from egg_worker import evaluate as ev, guards, loader, timing

    timed = []
    monkeypatch.setattr(timing, "time_cuda",
                        lambda fn, args, settings, device: timed.append(args[0].shape) or {"mean": 1.0, "n": 1})
    request = ev.parse_request({"task": task_path("dynamic_layernorm"), "candidate": candidate_path("relu_ok"),
                                "device": "cpu", "seed": 4, "dynamic": {"batch_max": 8}})
    task = loader.load_task(request.task)
    model = loader.reference_model(task, request.device, 0)
    context = ev.Context(request=request, task=task, reference=None, reference_key=(), snapshot=guards.take_snapshot())
    rows = ev._time_batches(context, model, [(1,), (3,), (8,)])
    assert [row["batch"] for row in rows] == [1, 3, 8] and all(row["time_ms"] == {"mean": 1.0, "n": 1} for row in rows)
    assert [shape[0] for shape in timed] == [1, 3, 8]
    # two dynamic sizes: rows keyed by both, inputs cut along each
    two = ev.parse_request({"task": task_path("dynamic_layernorm"), "candidate": candidate_path("relu_ok"),
                            "device": "cpu", "seed": 4, "dynamic": {"dims": [{"dim": 0, "batch_max": 8},
                                                                             {"dim": 1, "batch_max": 6}]}})
    context = ev.Context(request=two, task=task, reference=None, reference_key=(), snapshot=guards.take_snapshot())
    timed.clear()
    rows = ev._time_batches(context, model, [(2, 5)])
    assert [row["sizes"] for row in rows] == [[2, 5]] and [tuple(shape[:2]) for shape in timed] == [(2, 5)]
    assert ev.dynamic_points(two.dynamic, loader.make_inputs(task, 4, request.device)) == [
        (1, 1), (1, 6), (3, 3), (8, 1), (8, 6)], "side by side (dim 1 stops at its top, 6), then each at 1"
    assert torch.equal(loader.make_batch_inputs(task, 4, request.device, 3)[0],
                       loader.make_batch_inputs(task, 4, request.device, 3)[0])


def test_second_looks_measure_distances_a_chunk_at_a_time(monkeypatch):
    # the float64 noise floor and the half rule's float32 answer: distances and norms summed over chunks equal
    # the whole tensors' (no whole float64 copy of an output is made), for a strided view and complex values too
    import torch
    from egg_worker import evaluate as ev

    monkeypatch.setattr(ev, "COMPARE_CHUNK_ELEMENTS", 7)
    generator = torch.Generator().manual_seed(3)
    out = torch.randn(6, 10, generator=generator)[:, ::2]
    exact = torch.randn(6, 5, generator=generator, dtype=torch.float64)
    l2, worst = ev._distances(out, exact)
    diff = out.double() - exact
    assert l2 == pytest.approx(torch.linalg.vector_norm(diff).item(), rel=1e-12)
    assert worst == diff.abs().max().item()
    assert ev._norm(exact) == pytest.approx(torch.linalg.vector_norm(exact).item(), rel=1e-12)
    waves = torch.randn(4, 3, generator=generator, dtype=torch.complex64)
    assert ev._norm(waves) == pytest.approx(torch.linalg.vector_norm(waves.to(torch.complex128)).item(), rel=1e-6)
    assert ev._distances(torch.empty(0), torch.empty(0, dtype=torch.float64)) == (0.0, 0.0)


def test_the_last_trials_trace_gives_the_kernel_times_and_the_triton_share(monkeypatch):
    # The GPU path, faked on the cpu: the last trial runs under the profiler; its kernel records become the
    # result's kernel_times (per name, the longest first) and triton_time_share.
    from types import SimpleNamespace
    import torch
    from egg_worker import evaluate as ev
    records = [("relu_kernel", 7), ("cudnn_conv", 7), ("relu_kernel", 7)]
    traced = []

    def fake_trial(context, model, trial, profile):
        traced.append(profile)
        call = _stream_call(records if profile else [], launches=("relu_kernel", "relu_kernel"))
        call.kernel_records = call.kernel_records if profile else None
        return call, ev.Comparison(True, ev.Errors(0.0, 0.0, 0.0), "")

    monkeypatch.setattr(ev, "run_trial", fake_trial)
    request = SimpleNamespace(trials=2, device=torch.device("cuda"))
    context = ev.Context(request=request, task=None, reference=None, reference_key=())
    context.reference_fingerprints = {1, 2}
    result = {"trials_passed": 0, "status": "ok", "reason": ""}
    ev._run_trials(context, None, result)
    assert traced == [False, True]
    assert result["triton_time_share"] == pytest.approx(2 / 3)
    assert [(t["name"], t["launches"], t["us"], t["triton"]) for t in result["kernel_times"]] == [
        ("relu_kernel", 2, 2.0, True), ("cudnn_conv", 1, 1.0, False)]
