"""A torch.export program (.pt2) as a task: loading, the task file that stands for it, its inputs, capture and
the one-line errors for files that are not programs."""

import zipfile

import pytest
import torch

from egg_worker import capture, loader, program, server


class Small(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.proj = torch.nn.Linear(8, 6)
        self.blocks = torch.nn.ModuleList([torch.nn.LayerNorm(6)])
        self.register_buffer("shift", torch.linspace(-1, 1, 6))

    def forward(self, x, scale: float):
        return torch.softmax(self.blocks[0](self.proj(x)) * scale + self.shift, dim=-1)


@pytest.fixture(scope="module")
def saved(tmp_path_factory):
    torch.manual_seed(0)
    module = Small().eval()
    with torch.no_grad():
        exported = torch.export.export(module, (torch.randn(3, 8), 0.5), strict=False)
    path = tmp_path_factory.mktemp("program") / "small.pt2"
    torch.export.save(exported, str(path))
    return module, str(path)


def test_the_task_holds_the_programs_parameters_at_their_names(saved):
    module, path = saved
    task = loader.load_task(path)
    model = loader.build_model(task.Model, task, torch.device("cpu"), init_seed=7)
    names = {name for name, _ in model.named_parameters()} | {name for name, _ in model.named_buffers()}
    assert names == {"proj.weight", "proj.bias", "blocks.0.weight", "blocks.0.bias", "shift"}
    assert torch.equal(model.proj.weight, module.proj.weight)
    assert model.proj.weight.data_ptr() != module.proj.weight.data_ptr()  # a copy per model, not shared
    x = torch.randn(3, 8)
    torch.testing.assert_close(model(x, 0.5), module(x, 0.5))
    assert task.get_init_inputs() == []


def test_inputs_are_fresh_draws_shaped_like_the_examples(saved):
    _, path = saved
    task = loader.load_task(path)
    first = loader.make_inputs(task, seed=1, device=torch.device("cpu"))
    second = loader.make_inputs(task, seed=2, device=torch.device("cpu"))
    assert first[0].shape == (3, 8) and first[0].dtype == torch.float32 and first[1] == 0.5
    assert not torch.equal(first[0], second[0])
    assert torch.equal(first[0], loader.make_inputs(task, seed=1, device=torch.device("cpu"))[0])


def test_task_source_is_the_file_candidates_embed(saved):
    _, path = saved
    response = server.respond({"id": 1, "op": "task_source", "task": path})
    assert response["ok"], response
    source = response["source"]
    assert "class Model(ProgramModel)" in source and "'proj.weight': ((6, 8), (8, 1), 'float32')" in source
    namespace = {}
    exec(compile(source, "<task>", "exec"), namespace)
    assert namespace["PROGRAM_SHA256"] == loader.load_task(path).sha256


def test_capture_names_state_by_the_modules_names(saved):
    _, path = saved
    result = capture.handle_capture({"task": path, "device": "cpu"})
    assert result["status"] == "ok", result
    graph = result["graph"]
    assert [entry["target"] for entry in graph["state"]] == ["proj.weight", "proj.bias", "blocks.0.weight",
                                                             "blocks.0.bias", "shift"]
    assert [entry["kind"] for entry in graph["inputs"]] == ["tensor", "scalar"]


@pytest.mark.parametrize("content, reason", [
    (b"not a zip archive", "is not a .pt2 archive"),
    (None, "is not a torch.export program"),
])
def test_a_file_that_is_not_a_program_is_a_one_line_error(tmp_path, content, reason):
    path = tmp_path / "bad.pt2"
    if content is None:
        with zipfile.ZipFile(path, "w") as archive:
            archive.writestr("data.txt", "hello")
    else:
        path.write_bytes(content)
    response = server.respond({"id": 2, "op": "task_source", "task": str(path)})
    assert not response["ok"]
    assert reason in response["error"] and "\n" not in response["error"]


def test_a_program_without_example_inputs_is_refused(saved, tmp_path):
    module, _ = saved
    with torch.no_grad():
        exported = torch.export.export(module, (torch.randn(3, 8), 0.5), strict=False)
    exported._example_inputs = None
    path = tmp_path / "bare.pt2"
    torch.export.save(exported, str(path))
    with pytest.raises(program.ProgramError, match="holds no example inputs"):
        program.load_program(str(path))
