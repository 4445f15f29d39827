"""egg's Python API: a module's forward as egg's verified Triton kernels (docs/api.md).

    import egg
    fast = egg.optimize(module, (x,), tol=1e-4, out="egg-out/my_module")
    y = fast(x)                                   # egg's kernels; parameters and buffers are module's
    fast = egg.load("egg-out/my_module", module)  # later, in another process: the stored result, bound again

`optimize` exports the module with torch.export into OUT/program.pt2 and runs the `egg` binary's
`egg optimize OUT/program.pt2` on it (the same search as for a task file); `load` binds OUT/model_new.py to a
module. Both raise EggError with one line for anything they cannot do.
"""

from egg.api import EggError, load, optimize

__all__ = ["EggError", "load", "optimize"]
