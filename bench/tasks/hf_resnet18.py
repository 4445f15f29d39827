# Issue 29's model: a Hugging Face ResNet-18 as a new user would take it (transformers' ResNetModel, basic blocks,
# untuned by egg), batch 16 at 224x224, in KernelBench's format. Needs transformers (the H200 image has it).
import torch
import torch.nn as nn
from transformers import ResNetConfig, ResNetModel


class Model(nn.Module):
    def __init__(self):
        super().__init__()
        config = ResNetConfig(embedding_size=64, hidden_sizes=[64, 128, 256, 512], depths=[2, 2, 2, 2],
                              layer_type="basic")
        self.resnet = ResNetModel(config)

    def forward(self, pixel_values):
        outputs = self.resnet(pixel_values)
        return outputs.last_hidden_state, outputs.pooler_output


def get_inputs():
    return [torch.randn(16, 3, 224, 224)]


def get_init_inputs():
    return []
