"""The plain attributes a forward reads, recorded at capture (egg_worker.settings) for the candidates' guard."""

import torch
import torch.nn as nn

from egg_worker import capture, settings


class Scaled(nn.Module):
    def __init__(self, scale: float):
        super().__init__()
        self.scale = scale
        self.unused = 3.5
        self.body = nn.Sequential(nn.Linear(4, 4), nn.LeakyReLU(0.2))
        self.table = [1, 2]
        self.drop = nn.Dropout(0.1)

    def forward(self, x):
        return self.drop(self.body(x)) * self.scale + len(self.table)


def test_the_reads_of_plain_attributes_are_recorded_with_their_values():
    model = Scaled(0.125).eval()
    with settings.recording(model) as reads:
        model(torch.randn(2, 4))
    assert reads.entries() == [{"path": "body.1.negative_slope", "literal": "0.2"},
                               {"path": "body.1.inplace", "literal": "False"},
                               {"path": "drop.p", "literal": "0.1"},
                               {"path": "drop.training", "literal": "False"},
                               {"path": "drop.inplace", "literal": "False"},
                               {"path": "scale", "literal": "0.125"},
                               {"path": "table", "literal": "[1, 2]"}]
    assert type(model) is Scaled and type(model.body[1]) is nn.LeakyReLU  # the classes are given back


def test_capture_holds_the_settings_its_forward_read():
    model = Scaled(0.125).eval()
    ir = capture.capture(model, [torch.randn(2, 4)])
    assert {"path": "scale", "literal": "0.125"} in ir["settings"]
    assert type(model) is Scaled
