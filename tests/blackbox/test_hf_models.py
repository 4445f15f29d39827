"""Coverage of real models (docs/expert.md): tiny Hugging Face transformers models (a decoder LM, an encoder, a
vision transformer, a CNN; hf_models.py builds them from their config classes, no download) are captured,
compiled and checked correct on the CPU, and the ops the compiler leaves to PyTorch are the known ones below.

About 2 minutes in the interpreter (1 minute of CPU); part of the default run since every list below is empty
(EGG_HF_SURVEY=0 skips it). Skipped without transformers (scripts/setup.sh installs it)."""
import os

import pytest

import hf_models

pytest.importorskip("transformers")
pytestmark = pytest.mark.skipif(os.environ.get("EGG_HF_SURVEY") == "0", reason="EGG_HF_SURVEY=0")

# Ops each model leaves to PyTorch (none since embedding, transformers' mask construction (`index` with two
# index tensors, int64 `le`/`eq`, `bitwise_and`) were lowered): a new one fails the survey.
LEFT_TO_PYTORCH = {"llama": {}, "gpt2": {}, "bert": {}, "vit": {}, "resnet": {}}


@pytest.mark.parametrize("name", hf_models.MODELS)
def test_model_is_captured_compiled_and_correct(name, tmp_path):
    result = hf_models.survey(name, tmp_path / name)
    assert result["capture"] == "ok", result.get("capture_error")
    assert result.get("compile") == "ok", result.get("compile_error")
    assert result["correct"], (result["eval_status"], result["eval_reason"])
    assert hf_models.left_to_pytorch(result) == dict(sorted(LEFT_TO_PYTORCH[name].items())), result["planner_notes"]
