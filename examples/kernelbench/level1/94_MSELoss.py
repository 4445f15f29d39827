"""KernelBench level1/94_MSELoss: mean((p - t)^2) as a deterministic two-stage reduction.

Stage 1: each program sums the squared differences of TILES_PER_PROGRAM tiles into one partial.
Stage 2: one program sums the partials and divides by the element count; the
one-element result is returned as a 0-d view (like torch.mean).
"""
import torch
import torch.nn as nn
import triton
import triton.language as tl

BLOCK = 4096
TILES_PER_PROGRAM = 16
FINAL_BLOCK = 1024
NUM_WARPS = 8


# Loop trip counts are constexpr: Triton 3.6's interpreter cannot range() over a runtime scalar
# with numpy >= 2.4 (triton-lang/triton#9171).
@triton.jit
def _sq_diff_partial_kernel(p_ptr, t_ptr, partial_ptr, n_elements,
                            BLOCK: tl.constexpr, TILES_PER_PROGRAM: tl.constexpr):
    pid = tl.program_id(0)
    base = pid.to(tl.int64) * (BLOCK * TILES_PER_PROGRAM)
    acc = tl.zeros([BLOCK], dtype=tl.float32)
    for tile in range(TILES_PER_PROGRAM):
        offs = base + tile * BLOCK + tl.arange(0, BLOCK)
        mask = offs < n_elements
        p = tl.load(p_ptr + offs, mask=mask, other=0.0)
        t = tl.load(t_ptr + offs, mask=mask, other=0.0)
        d = p - t
        acc += d * d
    tl.store(partial_ptr + pid, tl.sum(acc, axis=0))


@triton.jit
def _mean_of_partials_kernel(partial_ptr, out_ptr, n_partials, n_elements,
                             BLOCK: tl.constexpr, N_TILES: tl.constexpr):
    acc = tl.zeros([BLOCK], dtype=tl.float32)
    for tile in range(N_TILES):
        offs = tile * BLOCK + tl.arange(0, BLOCK)
        acc += tl.load(partial_ptr + offs, mask=offs < n_partials, other=0.0)
    tl.store(out_ptr, tl.sum(acc, axis=0) / n_elements)


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, predictions: torch.Tensor, targets: torch.Tensor) -> torch.Tensor:
        p = predictions.contiguous()
        t = targets.contiguous()
        n = p.numel()
        n_partials = triton.cdiv(n, BLOCK * TILES_PER_PROGRAM)
        partials = torch.empty(n_partials, device=p.device, dtype=torch.float32)
        out = torch.empty(1, device=p.device, dtype=torch.float32)
        _sq_diff_partial_kernel[(n_partials,)](p, t, partials, n, BLOCK=BLOCK,
                                               TILES_PER_PROGRAM=TILES_PER_PROGRAM, num_warps=NUM_WARPS)
        _mean_of_partials_kernel[(1,)](partials, out, n_partials, n, BLOCK=FINAL_BLOCK,
                                       N_TILES=triton.cdiv(n_partials, FINAL_BLOCK), num_warps=4)
        return out.view(())
