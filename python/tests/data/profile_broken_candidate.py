"""Profile-test fixture: a candidate whose forward raises."""
import torch.nn as nn


class ModelNew(nn.Module):
    def forward(self, a, b):
        raise RuntimeError("deliberate failure in forward")
