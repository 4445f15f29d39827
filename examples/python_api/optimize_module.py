"""egg's Python API on a module of your own (docs/api.md). From the repository root:

    PYTHONPATH=python .venv/bin/python examples/python_api/optimize_module.py

On a machine without a GPU the kernels run in Triton's interpreter (correctness only, slow).
"""
import os

import torch

if not torch.cuda.is_available():
    os.environ.setdefault("TRITON_INTERPRET", "1")  # before triton is imported (egg.load imports the kernels)

import egg  # noqa: E402


class Head(torch.nn.Module):
    def __init__(self, features: int, classes: int, temperature: float):
        super().__init__()
        self.proj = torch.nn.Linear(features, classes)
        self.norm = torch.nn.LayerNorm(classes)
        self.temperature = temperature

    def forward(self, x):
        return torch.softmax(self.norm(self.proj(x)) / self.temperature, dim=-1)


device = "cuda" if torch.cuda.is_available() else "cpu"
module = Head(64, 32, temperature=2.0).to(device).eval()
x = torch.randn(16, 64, device=device)

fast = egg.optimize(module, (x,), tol=1e-4, quick=True, out="egg-out/Head")  # ./egg optimize on its .pt2
with torch.no_grad():
    print("max error against the module:", (fast(x) - module(x)).abs().max().item())
    module.load_state_dict(Head(64, 32, temperature=2.0).state_dict())  # fast reads the module's tensors
    print("after load_state_dict:", (fast(x) - module(x)).abs().max().item())

again = egg.load("egg-out/Head", module)  # later, in another process: the stored kernels, bound again
with torch.no_grad():
    print("egg.load:", (again(x) - module(x)).abs().max().item())
