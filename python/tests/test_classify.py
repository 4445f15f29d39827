import ast

import torch
from triton.compiler.errors import CompilationError
from triton.runtime.errors import InterpreterError

from egg_worker.evaluate import classify


def compilation_error():
    return CompilationError("x = 1", ast.parse("x = 1").body[0], "bad thing")


def test_triton_compilation_errors_are_compile_errors():
    failure = classify(compilation_error())
    assert failure.status == "compile_error" and failure.reason == "CompilationError: at 1:0: x = 1 ^ bad thing"
    assert classify(InterpreterError("ValueError('x')")).status == "compile_error"


def test_a_compile_error_wrapped_by_the_candidate_is_still_one():
    try:
        try:
            raise compilation_error()
        except CompilationError as inner:
            raise RuntimeError("kernel build failed") from inner
    except RuntimeError as outer:
        assert classify(outer).status == "compile_error"


def test_other_errors_are_runtime_errors():
    failure = classify(ValueError("bad\nshape"))
    assert failure.status == "runtime_error" and failure.reason == "ValueError: bad shape"


def test_out_of_memory_is_a_runtime_error_saying_so():
    failure = classify(torch.cuda.OutOfMemoryError("CUDA out of memory. Tried to allocate 2.00 GiB"))
    assert failure.status == "runtime_error"
    assert failure.reason.startswith("out of memory: OutOfMemoryError: CUDA out of memory")


def test_out_of_memory_in_the_harness_checks_is_no_verdict_on_the_candidate(monkeypatch):
    # four workers on one 80 GB card: the comparison of a 7 GiB output could not allocate; that is the run's
    # problem (retry it), not a wrong kernel, so evaluate answers ok:false instead of a failed candidate
    import pytest
    from conftest import candidate_path, task_path
    from egg_worker import evaluate

    def no_memory(*args, **kwargs):
        raise RuntimeError("DefaultCPUAllocator: can't allocate memory: you tried to allocate 7516192768 bytes")
    monkeypatch.setattr(evaluate, "compare_outputs", no_memory)
    request = {"task": task_path("relu_64"), "candidate": candidate_path("relu_ok"), "device": "cpu",
               "tol": 1e-4, "trials": 1, "seed": 1, "init_seed": 42, "robust_trial": False}
    with pytest.raises(evaluate.HarnessOutOfMemory, match="ran out of memory checking"):
        evaluate.handle_evaluate(request)  # twice: the retry with the cached blocks given back failed too
    monkeypatch.undo()
    assert evaluate.handle_evaluate(request)["status"] == "ok"  # nothing left behind


def test_the_harness_checks_run_once_more_after_running_out_of_memory(monkeypatch):
    # a worker sharing the GPU: the first comparison finds the memory reserved but fragmented; the evaluation
    # runs again from the start once the cached blocks are given back, and its verdict stands
    from conftest import candidate_path, task_path
    from egg_worker import evaluate

    compare = evaluate.compare_outputs
    calls = []

    def fragmented_once(*args, **kwargs):
        calls.append(1)
        if len(calls) == 1:
            raise torch.cuda.OutOfMemoryError("CUDA out of memory. Tried to allocate 7.00 GiB")
        return compare(*args, **kwargs)
    monkeypatch.setattr(evaluate, "compare_outputs", fragmented_once)
    request = {"task": task_path("relu_64"), "candidate": candidate_path("relu_ok"), "device": "cpu",
               "tol": 1e-4, "trials": 1, "seed": 1, "init_seed": 42, "robust_trial": False}
    result = evaluate.handle_evaluate(request)
    assert result["status"] == "ok" and result["correct"] is True
    assert len(calls) >= 2
