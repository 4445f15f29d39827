"""Profile-test fixture: ModelNew for profile_matmul_task.py with one Triton kernel (and one PyTorch fill).

K is a constexpr: Triton 3.6's interpreter cannot loop over a runtime scalar bound with numpy 2.
"""
import torch
import torch.nn as nn
import triton
import triton.language as tl

BLOCK = 16


@triton.jit
def profile_matmul_kernel(a_ptr, b_ptr, c_ptr, M, N, K: tl.constexpr, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr,
                          BLOCK_K: tl.constexpr):
    rows = tl.program_id(0) * BLOCK_M + tl.arange(0, BLOCK_M)
    cols = tl.program_id(1) * BLOCK_N + tl.arange(0, BLOCK_N)
    acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
    for k0 in range(0, K, BLOCK_K):
        ks = k0 + tl.arange(0, BLOCK_K)
        a = tl.load(a_ptr + rows[:, None] * K + ks[None, :], mask=(rows[:, None] < M) & (ks[None, :] < K), other=0.0)
        b = tl.load(b_ptr + ks[:, None] * N + cols[None, :], mask=(ks[:, None] < K) & (cols[None, :] < N), other=0.0)
        acc += tl.dot(a, b, input_precision="ieee")
    tl.store(c_ptr + rows[:, None] * N + cols[None, :], acc, mask=(rows[:, None] < M) & (cols[None, :] < N))


class ModelNew(nn.Module):
    def forward(self, a, b):
        m, k = a.shape
        n = b.shape[1]
        c = torch.zeros(m, n, device=a.device, dtype=torch.float32)
        grid = (triton.cdiv(m, BLOCK), triton.cdiv(n, BLOCK))
        profile_matmul_kernel[grid](a, b, c, m, n, k, BLOCK_M=BLOCK, BLOCK_N=BLOCK, BLOCK_K=BLOCK)
        return c
