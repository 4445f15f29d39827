"""KernelBench level1/23_Softmax: softmax over dim 1 of a (rows, cols) tensor, one program per row.

The rows are far too long for registers, so pass 1 keeps a per-lane online (max, sum of exp) over the
row and pass 2 re-reads it and writes exp(x - max) / sum. Pass 2 walks the row backwards, so the
chunks pass 1 read last (the likeliest to still be in L2) are re-read first. Three HBM passes in all.
"""
import torch
import torch.nn as nn
import triton
import triton.language as tl

BLOCK = 16384
NUM_WARPS = 32


# Loop trip counts are constexpr: Triton 3.6's interpreter cannot range() over a runtime scalar
# with numpy >= 2.4 (triton-lang/triton#9171).
@triton.jit
def _softmax_kernel(x_ptr, y_ptr, n_cols, stride_x_row, stride_y_row,
                    BLOCK: tl.constexpr, N_BLOCKS: tl.constexpr):
    row = tl.program_id(0).to(tl.int64)
    x_row = x_ptr + row * stride_x_row
    y_row = y_ptr + row * stride_y_row
    lane_max = tl.full([BLOCK], float("-inf"), dtype=tl.float32)
    lane_sum = tl.zeros([BLOCK], dtype=tl.float32)
    for b in range(N_BLOCKS):
        offs = b * BLOCK + tl.arange(0, BLOCK)
        x = tl.load(x_row + offs, mask=offs < n_cols, other=float("-inf")).to(tl.float32)
        new_max = tl.maximum(lane_max, x)
        # Lanes that have seen only padding keep max -inf; shift them by 0 so exp gives 0, not NaN.
        shift = tl.where(new_max == float("-inf"), 0.0, new_max)
        lane_sum = lane_sum * tl.exp(lane_max - shift) + tl.exp(x - shift)
        lane_max = new_max
    row_max = tl.max(lane_max, axis=0)
    row_sum = tl.sum(lane_sum * tl.exp(lane_max - row_max), axis=0)
    inv_sum = 1.0 / row_sum
    for i in range(N_BLOCKS):
        offs = (N_BLOCKS - 1 - i) * BLOCK + tl.arange(0, BLOCK)
        mask = offs < n_cols
        x = tl.load(x_row + offs, mask=mask, other=float("-inf")).to(tl.float32)
        y = tl.exp(x - row_max) * inv_sum
        tl.store(y_row + offs, y.to(y_ptr.dtype.element_ty), mask=mask)


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = x.contiguous()
        y = torch.empty_like(x)
        n_rows, n_cols = x.shape
        _softmax_kernel[(n_rows,)](x, y, n_cols, x.stride(0), y.stride(0), BLOCK=BLOCK,
                                   N_BLOCKS=triton.cdiv(n_cols, BLOCK), num_warps=NUM_WARPS)
        return y
