"""Coverage of real models (docs/expert.md): tiny Hugging Face transformers models (a decoder LM, an encoder, a
vision transformer, a CNN; hf_models.py builds them from their config classes, no download) are captured,
compiled and checked correct on the CPU, and the ops the compiler leaves to PyTorch are the known ones below.

About 2-3 minutes in the interpreter, so not part of the default run:
    EGG_HF_SURVEY=1 .venv/bin/python -m pytest -q tests/blackbox/test_hf_models.py
Skipped without transformers (scripts/setup.sh installs it). When the compiler lowers one of these ops, remove it
here: the goal (issue 24) is every list empty."""
import os

import pytest

import hf_models

pytest.importorskip("transformers")
pytestmark = pytest.mark.skipif(os.environ.get("EGG_HF_SURVEY") != "1",
                                reason="the transformers survey takes minutes: set EGG_HF_SURVEY=1 to run it")

# The causal and padding masks of transformers' masking_utils: a 2-index `index` of the position ids / attention
# mask by (batch, position) ranges and `le`/`eq` over those int64 values (the planner places neither in a kernel:
# "runs in PyTorch" notes), and `bitwise_and` of the boolean masks (not in the compiler's op table); token and
# position look-ups as `embedding` (not in the table).
MASKS = {"aten.bitwise_and.Tensor": 2, "aten.eq.Tensor": 1, "aten.index.Tensor": 4, "aten.le.Tensor": 1}
LEFT_TO_PYTORCH = {
    "llama": {**MASKS, "aten.embedding.default": 1},
    "gpt2": {**MASKS, "aten.embedding.default": 2},
    "bert": {"aten.bitwise_and.Tensor": 2, "aten.embedding.default": 3, "aten.index.Tensor": 1},
    "vit": {},
    "resnet": {},
}


@pytest.mark.parametrize("name", hf_models.MODELS)
def test_model_is_captured_compiled_and_correct(name, tmp_path):
    result = hf_models.survey(name, tmp_path / name)
    assert result["capture"] == "ok", result.get("capture_error")
    assert result.get("compile") == "ok", result.get("compile_error")
    assert result["correct"], (result["eval_status"], result["eval_reason"])
    assert hf_models.left_to_pytorch(result) == dict(sorted(LEFT_TO_PYTORCH[name].items())), result["planner_notes"]
