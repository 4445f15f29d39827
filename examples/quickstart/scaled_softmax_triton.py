"""A hand-written candidate for scaled_softmax.py: one program per row, the row held in registers, the
scale fused into the exponent, one read and one write of the data."""
import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def scaled_softmax_kernel(x_ptr, out_ptr, n_cols, row_stride, scale, BLOCK: tl.constexpr):
    row = tl.program_id(0)
    cols = tl.arange(0, BLOCK)
    mask = cols < n_cols
    x = tl.load(x_ptr + row * row_stride + cols, mask=mask, other=-float("inf")) * scale
    x = x - tl.max(x, axis=0)
    numerator = tl.exp(x)
    tl.store(out_ptr + row * row_stride + cols, numerator / tl.sum(numerator, axis=0), mask=mask)


class ModelNew(nn.Module):
    def __init__(self, scale: float):
        super().__init__()
        self.scale = scale

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = x.contiguous()
        out = torch.empty_like(x)
        n_cols = x.shape[-1]
        rows = x.numel() // n_cols
        scaled_softmax_kernel[(rows,)](x, out, n_cols, n_cols, self.scale, BLOCK=triton.next_power_of_2(n_cols))
        return out
