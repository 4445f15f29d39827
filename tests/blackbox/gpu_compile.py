"""Compiles every Triton kernel of an egg candidate for an NVIDIA GPU (sm_90 unless told) with Triton's own
compiler, on a machine without one, and checks each fits the GPU's shared memory: the interpreter runs kernels that the GPU compiler refuses (a block mask on
a scalar pointer, for one). The kernels and their specializations are the candidate's own `egg_precompile()`
calls, with `JITFunction.warmup` replaced by an ahead-of-time compile for the target.

    python gpu_compile.py CANDIDATE.py [ARCH]    (without TRITON_INTERPRET; exit 1 and one line per failure)"""
import importlib.util
import inspect
import sys

import torch
import triton
from triton.backends.compiler import GPUTarget
from triton.runtime.jit import JITFunction

POINTER_TYPES = {torch.float32: "*fp32", torch.float64: "*fp64", torch.float16: "*fp16", torch.bfloat16: "*bf16",
                 torch.int64: "*i64", torch.int32: "*i32", torch.int8: "*i8", torch.uint8: "*u8", torch.bool: "*i1"}
LAUNCH_OPTIONS = ("num_warps", "num_stages")
# Shared memory a block may use (bytes): an H100/H200 refuses more at launch (OutOfResources), which a compile
# alone does not; the compiled kernel's metadata says what it needs.
SHARED_MEMORY_LIMIT = {90: 232448, 80: 166912}


def main() -> int:
    path, arch = sys.argv[1], int(sys.argv[2]) if len(sys.argv) > 2 else 90
    target = GPUTarget("cuda", arch, 32)
    compiled, failures = [], []

    def compile_for_target(kernel, *args, grid=None, **constants):
        del grid
        options = {name: constants.pop(name) for name in LAUNCH_OPTIONS if name in constants}
        names = list(inspect.signature(kernel.fn).parameters)
        signature = {name: POINTER_TYPES[arg] if isinstance(arg, torch.dtype) else ("i64" if isinstance(arg, int)
                                                                                    else "fp32")
                     for name, arg in zip(names, args)}
        signature.update({name: "constexpr" for name in constants})
        try:
            binary = triton.compile(triton.compiler.ASTSource(fn=kernel, signature=signature, constexprs=constants),
                                    target=target, options=options)
            limit = SHARED_MEMORY_LIMIT.get(arch)
            if limit is not None and binary.metadata.shared > limit:
                failures.append(f"{kernel.fn.__name__} {constants} {options}: needs {binary.metadata.shared} bytes "
                                f"of shared memory, sm_{arch} has {limit}")
                return
            compiled.append(kernel.fn.__name__)
        except Exception as error:  # report every kernel, not only the first
            message = " ".join(str(error).split())
            failures.append(f"{kernel.fn.__name__} {constants} {options}: ...{message[-300:]}")

    spec = importlib.util.spec_from_file_location("egg_candidate", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    JITFunction.warmup = compile_for_target
    module.egg_precompile()
    for failure in failures:
        print(failure)
    print(f"{len(compiled)} kernel(s) compiled for sm_{arch}, {len(failures)} failed")
    return 1 if failures or not compiled else 0


if __name__ == "__main__":
    sys.exit(main())
