"""Profile-test fixture: a small matmul task in KernelBench format (C = A @ B, 32x16 @ 16x48)."""
import torch
import torch.nn as nn

M, K, N = 32, 16, 48


class Model(nn.Module):
    def forward(self, a, b):
        return torch.matmul(a, b)


def get_inputs():
    return [torch.rand(M, K), torch.rand(K, N)]


def get_init_inputs():
    return []
