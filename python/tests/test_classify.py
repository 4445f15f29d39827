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
