"""KernelBench level1/47_Sum_reduction_over_a_dimension: torch.sum(x, dim, keepdim=True).

x is viewed as (outer, R, inner) with R the reduced dim. Each program owns BLOCK_I consecutive inner
columns of one outer slice and streams down R in [BLOCK_R, BLOCK_I] tiles (coalesced along inner),
accumulating in fp32 registers, then reduces the tile once at the end.
"""
import math

import torch
import torch.nn as nn
import triton
import triton.language as tl

TILE_ELEMENTS = 4096
MAX_BLOCK_I = 64
NUM_WARPS = 8


# Loop trip counts are constexpr: Triton 3.6's interpreter cannot range() over a runtime scalar
# with numpy >= 2.4 (triton-lang/triton#9171).
@triton.jit
def _sum_dim_kernel(x_ptr, y_ptr, R, INNER,
                    BLOCK_R: tl.constexpr, BLOCK_I: tl.constexpr, R_TILES: tl.constexpr):
    pid = tl.program_id(0)
    n_i_blocks = tl.cdiv(INNER, BLOCK_I)
    outer = (pid // n_i_blocks).to(tl.int64)
    offs_i = (pid % n_i_blocks) * BLOCK_I + tl.arange(0, BLOCK_I)
    i_mask = offs_i < INNER
    x_slice = x_ptr + outer * R * INNER
    acc = tl.zeros([BLOCK_R, BLOCK_I], dtype=tl.float32)
    for r_tile in range(R_TILES):
        offs_r = (r_tile * BLOCK_R + tl.arange(0, BLOCK_R)).to(tl.int64)
        ptrs = x_slice + offs_r[:, None] * INNER + offs_i[None, :]
        mask = (offs_r[:, None] < R) & i_mask[None, :]
        acc += tl.load(ptrs, mask=mask, other=0.0).to(tl.float32)
    total = tl.sum(acc, axis=0)
    tl.store(y_ptr + outer * INNER + offs_i, total.to(y_ptr.dtype.element_ty), mask=i_mask)


class ModelNew(nn.Module):
    def __init__(self, dim: int):
        super().__init__()
        self.dim = dim

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = x.contiguous()
        dim = self.dim % x.dim()
        outer = math.prod(x.shape[:dim])
        reduced = x.shape[dim]
        inner = math.prod(x.shape[dim + 1:])
        out_shape = list(x.shape)
        out_shape[dim] = 1
        y = torch.empty(out_shape, device=x.device, dtype=x.dtype)
        block_i = min(MAX_BLOCK_I, triton.next_power_of_2(inner))
        block_r = max(1, TILE_ELEMENTS // block_i)
        grid = (outer * triton.cdiv(inner, block_i),)
        _sum_dim_kernel[grid](x, y, reduced, inner, BLOCK_R=block_r, BLOCK_I=block_i,
                             R_TILES=triton.cdiv(reduced, block_r), num_warps=NUM_WARPS)
        return y
