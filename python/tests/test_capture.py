"""The `capture` op (egg_worker.capture): a task's forward as egg's JSON IR, through a worker subprocess (cpu
interpreter) and, for the encoding details, in-process through `capture.capture`."""

import math
import textwrap

import pytest
import torch
import torch.nn as nn

from conftest import task_path
from egg_worker import capture

SOFTMAX_OPS = {"aten.amax.default", "aten.exp.default", "aten.sum.dim_IntList"}

BATCHNORM_TASK = """
    import torch
    import torch.nn as nn


    class Model(nn.Module):
        def __init__(self):
            super().__init__()
            self.fc = nn.Linear(8, 4)
            self.bn = nn.BatchNorm1d(4)

        def forward(self, x):
            return self.bn(self.fc(x))


    def get_inputs():
        return [torch.randn(2, 8)]


    def get_init_inputs():
        return []
"""

SCALAR_INPUT_TASK = """
    import torch
    import torch.nn as nn


    class Model(nn.Module):
        def forward(self, x, dim):
            return torch.sum(x, dim=dim)


    def get_inputs():
        return [torch.randn(4, 6), 1]


    def get_init_inputs():
        return []
"""

SPECIAL_FLOATS_TASK = """
    import torch
    import torch.nn as nn


    class Model(nn.Module):
        def forward(self, x, cap, fill):
            y = torch.clamp(x, max=cap).masked_fill(x < 0, float("-inf"))
            return torch.where(x > 2, fill, y)


    def get_inputs():
        return [torch.randn(3, 4), float("inf"), float("nan")]


    def get_init_inputs():
        return []
"""

DATA_DEPENDENT_TASK = """
    import torch
    import torch.nn as nn


    class Model(nn.Module):
        def forward(self, x):
            if x.sum() > 0:
                return x * 2
            return x - 1


    def get_inputs():
        return [torch.randn(4, 8)]


    def get_init_inputs():
        return []
"""

NON_FINITE_CONSTANT_TASK = """
    import torch
    import torch.nn as nn


    class Model(nn.Module):
        def __init__(self):
            super().__init__()
            self.floor = torch.tensor([0.0, float("-inf"), 1.0, 2.0])  # a plain attribute: a lifted constant

        def forward(self, x):
            return torch.maximum(x, self.floor)


    def get_inputs():
        return [torch.randn(3, 4)]


    def get_init_inputs():
        return []
"""


def write_task(tmp_path, name: str, source: str) -> str:
    path = tmp_path / f"{name}.py"
    path.write_text(textwrap.dedent(source).lstrip())
    return str(path)


def capture_request(worker, task: str) -> dict:
    return worker.request("capture", task=task, device="cpu", seed=42, init_seed=42)


def captured_graph(worker, task: str) -> dict:
    response = capture_request(worker, task)
    assert response["ok"], response
    result = response["result"]
    assert result["status"] == "ok", result
    return result["graph"]


def node_refs(arg) -> list:
    """Every value name an encoded argument refers to."""
    if isinstance(arg, dict):
        return [arg["node"]] if "node" in arg else []
    if isinstance(arg, list):
        return [name for item in arg for name in node_refs(item)]
    return []


def assert_well_formed(ir: dict) -> None:
    """Names are unique, and every reference (node argument, output) is to an input, state or earlier node."""
    assert ir["format"] == "egg-graph" and ir["version"] == 1
    known = [entry["name"] for entry in ir["inputs"] + ir["state"]]
    for node in ir["nodes"]:
        for name in node_refs(node["args"]) + node_refs(list(node["kwargs"].values())):
            assert name in known, f"{node['name']} refers to {name} before it is defined"
        known.append(node["name"])
    assert len(known) == len(set(known)), known
    assert ir["outputs"], "a graph has outputs"
    for output in ir["outputs"]:
        assert set(node_refs(output)) <= set(known) and node_refs(output), output


def ops(ir: dict) -> list:
    return [node["op"] for node in ir["nodes"]]


def state_by_target(ir: dict) -> dict:
    return {entry["target"]: entry for entry in ir["state"]}


def test_softmax_is_captured_decomposed(worker):
    ir = captured_graph(worker, task_path("softmax_4x32"))
    assert_well_formed(ir)
    assert ir["mode"] == "eval" and ir["device"] == "cpu" and ir["task"] == task_path("softmax_4x32")
    assert ir["inputs"] == [{"name": ir["inputs"][0]["name"], "position": 0, "kind": "tensor",
                             "meta": {"shape": [4, 32], "stride": [32, 1], "offset": 0, "dtype": "float32"}}]
    assert ir["state"] == [] and ir["mutations"] == []
    assert SOFTMAX_OPS <= set(ops(ir)), ops(ir)
    assert not any("softmax" in op for op in ops(ir)), "softmax is decomposed into reductions and pointwise ops"
    reductions = [node for node in ir["nodes"] if node["op"] in ("aten.amax.default", "aten.sum.dim_IntList")]
    assert all(node["meta"]["shape"] == [4, 1] for node in reductions), reductions
    assert len(ir["outputs"]) == 1 and ir["outputs"][0]["node"] == ir["nodes"][-1]["name"]
    assert ir["nodes"][-1]["meta"]["shape"] == [4, 32]
    assert ir["returns"] == "tensor"


def test_scaled_dot_product_attention_is_captured_in_its_math_form():
    """Two products and a softmax, whatever backend the device would pick: on the H200 the default dispatch
    records _scaled_dot_product_efficient_attention, one op no decomposition breaks up; on the CPU the flash
    kernel's decomposition ends in a permute, clone and permute the math form does not have."""
    from egg_worker import capture

    class Attention(torch.nn.Module):
        def forward(self, q, k, v):
            return torch.nn.functional.scaled_dot_product_attention(q, k, v)

    exported = capture._exported(Attention(), [torch.rand(2, 2, 16, 8) for _ in range(3)])
    targets = [str(node.target) for node in exported.graph.nodes if node.op == "call_function"]
    assert not any("scaled_dot_product" in target for target in targets), targets
    assert targets.count("aten.bmm.default") == 2 and "aten.amax.default" in targets, targets
    assert "aten.clone.default" not in targets, targets


RECURRENT_TASK = """
import torch
import torch.nn as nn

class Model(nn.Module):
    def __init__(self):
        super().__init__()
        self.lstm = nn.LSTM(4, 8, 2, batch_first=True)
        self.gru = nn.GRU(8, 8, 1, bidirectional=True)
        self.fc = nn.Linear(16, 3)

    def forward(self, x, h0, c0):
        out, _ = self.lstm(x, (h0, c0))
        out, _ = self.gru(out)
        return self.fc(out[:, -1, :])

def get_inputs():
    return [torch.rand(2, 12, 4), torch.rand(2, 2, 8), torch.rand(2, 2, 8)]

def get_init_inputs():
    return []
"""


def test_recurrent_layers_stay_one_node_each(worker, tmp_path):
    """The core decomposition table would unroll them into a cell per step and layer (36_LSTMHn: 3,072)."""
    ir = captured_graph(worker, write_task(tmp_path, "recurrent", RECURRENT_TASK))
    assert_well_formed(ir)
    assert ops(ir).count("aten.lstm.input") == 1 and ops(ir).count("aten.gru.input") == 1, ops(ir)
    assert len(ir["nodes"]) < 30, f"{len(ir['nodes'])} nodes: the recurrences were unrolled"


def test_recurrent_state_outputs_take_the_shape_of_h0():
    """torch 2.11's fake CUDA lstm (the H200's) gives h_n and c_n as [layers, 1, batch, hidden]."""
    def meta(shape, stride):
        return {"shape": shape, "stride": stride, "offset": 0, "dtype": "float32"}
    wrong = meta([6, 1, 10, 256], [2560, 2560, 256, 1])
    ir = {"inputs": [{"name": "x", "meta": meta([10, 512, 128], [65536, 128, 1])},
                     {"name": "h0", "meta": meta([6, 10, 256], [2560, 256, 1])},
                     {"name": "c0", "meta": meta([6, 10, 256], [256, 1536, 1])}],
          "state": [],
          "nodes": [{"name": "lstm", "op": "aten.lstm.input",
                     "args": [{"node": "x"}, [{"node": "h0"}, {"node": "c0"}], [], True, 6, 0.0, False, False,
                              True],
                     "meta": [meta([10, 512, 256], [256, 2560, 1]), dict(wrong), dict(wrong)]},
                    {"name": "getitem", "op": "getitem", "args": [{"node": "lstm"}, 0],
                     "meta": meta([10, 512, 256], [256, 2560, 1])},
                    {"name": "getitem_2", "op": "getitem", "args": [{"node": "lstm"}, 2],
                     "meta": dict(wrong)},
                    {"name": "gru", "op": "aten.gru.input",
                     "args": [{"node": "x"}, {"node": "h0"}, [], True, 6, 0.0, False, False, True],
                     "meta": [meta([10, 512, 256], [131072, 256, 1]), dict(wrong)]}]}
    capture.fix_recurrent_state_meta(ir)
    dense = meta([6, 10, 256], [2560, 256, 1])
    lstm, output, cell, gru = ir["nodes"]
    assert lstm["meta"][1] == dense and lstm["meta"][2] == dense and cell["meta"] == dense
    assert gru["meta"][1] == dense
    assert output["meta"]["shape"] == [10, 512, 256] and lstm["meta"][0]["stride"] == [256, 2560, 1]


def test_parameters_and_buffers_are_state_named_by_attribute_path(worker, tmp_path):
    ir = captured_graph(worker, write_task(tmp_path, "linear_batchnorm", BATCHNORM_TASK))
    assert_well_formed(ir)
    state = state_by_target(ir)
    kinds = {target: entry["kind"] for target, entry in state.items()}
    assert {"fc.weight": "parameter", "fc.bias": "parameter", "bn.weight": "parameter", "bn.bias": "parameter",
            "bn.running_mean": "buffer", "bn.running_var": "buffer"}.items() <= kinds.items(), kinds
    assert set(kinds.values()) <= {"parameter", "buffer"}
    assert state["fc.weight"]["meta"] == {"shape": [4, 8], "stride": [8, 1], "offset": 0, "dtype": "float32"}
    assert state["bn.running_var"]["meta"]["shape"] == [4]
    assert "values" not in state["fc.weight"], "parameter data never crosses the protocol"
    referenced = {name for node in ir["nodes"] for name in node_refs(node["args"])}
    for target in ("fc.weight", "fc.bias", "bn.weight", "bn.bias", "bn.running_mean", "bn.running_var"):
        assert state[target]["name"] in referenced, f"no node reads {target}"
    assert ir["mutations"] == [], "eval-mode batch norm leaves its running statistics alone"
    assert ir["inputs"][0]["meta"]["shape"] == [2, 8]


def test_tuple_output_with_a_parameter_among_the_outputs(worker):
    ir = captured_graph(worker, task_path("scaled_relu_param"))
    assert_well_formed(ir)
    assert ir["returns"] == "tuple"
    assert len(ir["outputs"]) == 2
    weight = state_by_target(ir)["weight"]
    assert weight["kind"] == "parameter" and weight["meta"]["shape"] == [16]
    assert ir["outputs"][1] == {"node": weight["name"]}, "the second output is the parameter itself"
    assert ir["outputs"][0]["node"] in {node["name"] for node in ir["nodes"]}


def test_tuple_output_in_process():
    class TwoOutputs(nn.Module):
        def forward(self, x):
            return torch.relu(x), x.sum(dim=1)

    ir = capture.capture(TwoOutputs().eval(), [torch.randn(3, 5)])
    assert_well_formed(ir)
    assert ir["returns"] == "tuple"
    assert len(ir["outputs"]) == 2 and ir["outputs"][0] != ir["outputs"][1]
    metas = {node["name"]: node["meta"]["shape"] for node in ir["nodes"]}
    assert [metas[output["node"]] for output in ir["outputs"]] == [[3, 5], [3]]



def test_split_is_captured_as_slices():
    """MinGPT's `q, k, v = c_attn(x).split(n_embd, dim=2)`: slices the planner reads in place, not one
    tuple-valued split_with_sizes left to PyTorch."""
    class Split(nn.Module):
        def forward(self, x):
            q, k, v = x.split(4, dim=1)
            return q * k + v

    ir = capture.capture(Split().eval(), [torch.randn(3, 12)])
    assert_well_formed(ir)
    assert not any(op.startswith("aten.split") for op in ops(ir)), ops(ir)
    slices = [node["args"][1:] for node in ir["nodes"] if node["op"] == "aten.slice.Tensor"]
    assert sorted(slices) == [[1, 0, 4], [1, 4, 8], [1, 8, 12]], slices


def test_var_after_masked_fill_is_one_var_reduction(worker):
    """Issue 24: `torch.var(t, dim=2, keepdim=True)` records aten.var.dim, whose decomposition by torch._refs failed
    inside functionalization (prims.broadcast_in_dim). It is captured as the expert's var reduction (prims.var
    over dim 2 with Bessel's correction) and a broadcast_in_dim back to the kept dim, as var.correction is."""
    ir = captured_graph(worker, task_path("var_after_masked_fill"))
    assert_well_formed(ir)
    (var,) = [node for node in ir["nodes"] if node["op"] == "prims.var.default"]
    assert var["args"][1:] == [[2], 1.0] and var["meta"]["shape"] == [2, 4], var
    assert "aten.where.self" in ops(ir), "masked_fill is a where"
    assert not any(op.startswith("aten.var") for op in ops(ir)), ops(ir)
    assert ir["nodes"][-1]["op"] == "prims.broadcast_in_dim.default" and ir["nodes"][-1]["meta"]["shape"] == [2, 4, 1]


# torch.var/std/var_mean as forwards call them: their CompositeImplicitAutograd overloads (dim, default), with and
# without keepdim and Bessel's correction, and the correction overload, which always decomposed.
VARIANCE_FORWARDS = {
    "var_dim_keepdim": lambda t: torch.var(t, dim=2, keepdim=True),
    "var_dims_biased_keepdim": lambda t: torch.var(t, (0, 2), unbiased=False, keepdim=True),
    "var_all": lambda t: torch.var(t),
    "var_all_biased": lambda t: torch.var(t, unbiased=False),
    "var_correction_keepdim": lambda t: torch.var(t, dim=1, correction=0, keepdim=True),
    "std_dim_keepdim": lambda t: torch.std(t, dim=-1, keepdim=True),
    "std_all": lambda t: torch.std(t),
    "var_mean_dim_keepdim": lambda t: torch.var_mean(t, dim=2, keepdim=True),
    "var_mean_all_biased": lambda t: torch.var_mean(t, unbiased=False),
}


@pytest.mark.parametrize("name", sorted(VARIANCE_FORWARDS))
def test_variance_ops_after_masked_fill_are_captured_and_compute_the_same(name):
    forward = VARIANCE_FORWARDS[name]

    class Variance(nn.Module):
        def forward(self, x):
            return forward(x.masked_fill(x > 0.5, 0.0))

    model, x = Variance().eval(), torch.rand(3, 4, 16)
    ir = capture.capture(model, [x])
    assert_well_formed(ir)
    assert "prims.var.default" in ops(ir), ops(ir)
    whole = {"aten.var", "aten.std", "aten.var_mean"}
    assert not any(op.rsplit(".", 1)[0] in whole for op in ops(ir)), ops(ir)
    decomposed = capture._exported(model, [x]).module()
    expected, actual = model(x), decomposed(x)
    for want, got in zip(expected if isinstance(expected, tuple) else (expected,),
                         actual if isinstance(actual, tuple) else (actual,)):
        assert got.shape == want.shape
        torch.testing.assert_close(got, want, rtol=1e-6, atol=1e-7)


def test_an_op_whose_decomposition_fails_is_kept_undecomposed():
    """The general rule: PyTorch runs the module, so a decomposition that fails on one op keeps that op whole (the
    compiler lowers it or leaves it to PyTorch). With torch._refs' var on aten.var.dim (the table before the fix)
    the decomposition fails; `decomposed` keeps aten.var.dim and decomposes the rest."""
    from torch._decomp import get_decompositions

    class Variance(nn.Module):
        def forward(self, x):
            return torch.var(x.masked_fill(x > 0.5, 0.0), dim=2, keepdim=True)

    with torch.no_grad():
        exported = torch.export.export(Variance(), (torch.rand(2, 4, 16),), strict=False)
    table = capture.decomposition_table()
    table.update(get_decompositions([torch.ops.aten.var]))
    with pytest.raises(RuntimeError, match="alias annotations"):
        exported.run_decompositions(table)
    targets = [str(node.target) for node in capture.decomposed(exported, table).graph.nodes
               if node.op == "call_function"]
    assert targets == ["aten.gt.Scalar", "aten.scalar_tensor.default", "aten.where.self", "aten.var.dim"], targets
    assert torch.ops.aten.var.dim in table, "the caller's table is left as it was"


def test_metadata_checks_are_left_out():
    """`x.to(device)` records aten._assert_tensor_metadata (34_VanillaRNNHidden): nothing to compute."""
    class Moved(nn.Module):
        def forward(self, x, h):
            return x + h.to(x.device)

    ir = capture.capture(Moved().eval(), [torch.randn(2, 3), torch.randn(2, 3)])
    assert_well_formed(ir)
    assert "aten._assert_tensor_metadata.default" not in ops(ir), ops(ir)


def test_a_tensor_attribute_that_forward_reassigns_is_a_buffer_mutation():
    """33_VanillaRNN keeps its state in a plain tensor attribute, copies its second input into it and reassigns
    it: the decomposition refuses a mutated constant, so capture makes it a buffer, and the new value is a
    mutation of its target."""
    class Stateful(nn.Module):
        def __init__(self):
            super().__init__()
            self.fc = nn.Linear(6, 3)
            self.hidden = torch.randn(2, 3)

        def forward(self, x, initial_hidden):
            self.hidden.copy_(initial_hidden)
            self.hidden = self.hidden.to(x.device)
            self.hidden = torch.tanh(self.fc(torch.cat((x, self.hidden), dim=1)))
            return self.hidden * 2

    ir = capture.capture(Stateful().eval(), [torch.randn(2, 3), torch.randn(2, 3)])
    assert_well_formed(ir)
    hidden = state_by_target(ir)["hidden"]
    assert hidden["kind"] == "buffer" and hidden["meta"]["shape"] == [2, 3]
    (mutation,) = ir["mutations"]
    assert mutation["target"] == "hidden"
    assert {node["name"]: node["op"] for node in ir["nodes"]}[mutation["value"]["node"]] == "aten.tanh.default"


def test_int_forward_argument_is_a_scalar_input(worker, tmp_path):
    ir = captured_graph(worker, write_task(tmp_path, "sum_dim_argument", SCALAR_INPUT_TASK))
    assert_well_formed(ir)
    assert [entry["kind"] for entry in ir["inputs"]] == ["tensor", "scalar"]
    scalar = ir["inputs"][1]
    assert scalar["position"] == 1 and scalar["value"] == 1 and "meta" not in scalar
    (total,) = [node for node in ir["nodes"] if node["op"] == "aten.sum.dim_IntList"]
    assert total["args"][1] == [1] and total["meta"]["shape"] == [4]


def test_special_floats_are_encoded_as_objects(worker, tmp_path):
    ir = captured_graph(worker, write_task(tmp_path, "special_floats", SPECIAL_FLOATS_TASK))
    assert_well_formed(ir)
    assert [entry.get("value") for entry in ir["inputs"]] == [None, {"float": "inf"}, {"float": "nan"}]
    encoded = [arg for node in ir["nodes"] for arg in node["args"] if isinstance(arg, dict) and "float" in arg]
    assert {arg["float"] for arg in encoded} == {"inf", "-inf", "nan"}, encoded


def test_encode_arg_special_floats_and_plain_values():
    assert capture.encode_arg(math.inf) == {"float": "inf"}
    assert capture.encode_arg(-math.inf) == {"float": "-inf"}
    assert capture.encode_arg(math.nan) == {"float": "nan"}
    assert capture.encode_arg(1.5) == 1.5
    assert capture.encode_arg(True) is True and capture.encode_arg(3) == 3 and capture.encode_arg(None) is None
    assert capture.encode_arg([1, -math.inf]) == [1, {"float": "-inf"}]
    assert capture.encode_arg(torch.float16) == {"dtype": "float16"}


def test_data_dependent_control_flow_is_unsupported_and_the_worker_goes_on(worker, tmp_path):
    response = capture_request(worker, write_task(tmp_path, "data_dependent", DATA_DEPENDENT_TASK))
    assert response["ok"], "an unexportable forward is a result, not a protocol error"
    result = response["result"]
    assert result["status"] == "unsupported" and "graph" not in result
    reason = result["reason"]
    assert reason.startswith("capture failed: ") and "\n" not in reason and len(reason) <= 600, reason
    assert_well_formed(captured_graph(worker, task_path("softmax_4x32")))


def test_missing_task_is_an_error_and_the_worker_goes_on(worker, tmp_path):
    missing = str(tmp_path / "missing_task.py")
    response = capture_request(worker, missing)
    assert response["ok"] is False
    assert "task file not found" in response["error"] and "\n" not in response["error"]
    no_task = worker.request("capture", device="cpu", seed=42, init_seed=42)
    assert no_task["ok"] is False and "task" in no_task["error"]
    assert_well_formed(captured_graph(worker, task_path("softmax_4x32")))


def test_non_finite_lifted_constant_is_a_result(worker, tmp_path):
    response = capture_request(worker, write_task(tmp_path, "non_finite_constant", NON_FINITE_CONSTANT_TASK))
    assert response["ok"], response
    assert response["result"]["status"] in ("ok", "unsupported")
    if response["result"]["status"] == "ok":
        constants = [entry for entry in response["result"]["graph"]["state"] if entry["kind"] == "constant"]
        values = [value for entry in constants for value in entry.get("values", [])]
        assert {"float": "-inf"} in values or {"float": "inf"} in values or {"float": "nan"} in values


def test_a_dynamic_batch_capture_writes_batch_sizes_as_linear_forms():
    """batch_max > 0: dim 0 of the input is the symbol B; every size that depends on it is {"sym": [a, d]}, the
    size arithmetic (sym_size) is inlined, and "dynamic" gives the range and the captured example batch."""
    class Flatten(nn.Module):
        def __init__(self):
            super().__init__()
            self.fc = nn.Linear(8, 6)

        def forward(self, x):
            return self.fc(x).view(x.size(0), -1).sum()

    torch.manual_seed(0)
    ir = capture.capture(Flatten().eval(), [torch.randn(4, 3, 8)], batch_max=32)
    assert_well_formed(ir)
    assert ir["dynamic"] == {"dim": "batch", "axis": 0, "min": 1, "max": 32, "example": 4}
    (x,) = ir["inputs"]
    assert x["meta"]["shape"] == [{"sym": [1, 0]}, 3, 8]
    assert x["meta"]["stride"] == [24, 8, 1] and x["meta"]["offset"] == 0
    assert not any("sym_size" in op for op in ops(ir)), ops(ir)
    assert all(not isinstance(node["meta"], dict) or node["meta"]["shape"][:1] != [4] for node in ir["nodes"]), \
        "no size keeps the example batch"
    view = next(node for node in ir["nodes"] if node["op"] == "aten.view.default" and
                node["meta"]["shape"] == [{"sym": [1, 0]}, 18])
    assert {"sym": [1, 0]} in view["args"][1], view
    reshaped = [node for node in ir["nodes"] if node["op"] == "aten.view.default"
                and node["meta"]["shape"] == [{"sym": [3, 0]}, 8]]
    assert reshaped, "the linear layer's 2-d view has 3*B rows"
    assert ops(ir)[-1].startswith("aten.sum.") and ir["nodes"][-1]["meta"]["shape"] == []
    static = capture.capture(Flatten().eval(), [torch.randn(4, 3, 8)])
    assert "dynamic" not in static and static["inputs"][0]["meta"]["shape"] == [4, 3, 8]


def test_a_dynamic_dim_1_capture_makes_the_sequence_length_the_symbol():
    """dim=1: dim 1 of every tensor input that has one is the symbol S (a [B, S, D] sequence); the linear layer's
    rows are B*S = 4*S, a weight's sizes stay fixed, and "dynamic" names the dimension."""
    class Project(nn.Module):
        def __init__(self):
            super().__init__()
            self.fc = nn.Linear(8, 6)

        def forward(self, x, scale):
            return torch.softmax(self.fc(x), dim=1) * scale

    torch.manual_seed(0)
    ir = capture.capture(Project().eval(), [torch.randn(4, 5, 8), torch.randn(6)], batch_max=64, dim=1)
    assert_well_formed(ir)
    assert ir["dynamic"] == {"dim": "dim1", "axis": 1, "min": 1, "max": 64, "example": 5}
    x, scale = ir["inputs"]
    assert x["meta"]["shape"] == [4, {"sym": [1, 0]}, 8] and x["meta"]["stride"] == [{"sym": [8, 0]}, 8, 1]
    assert scale["meta"]["shape"] == [6], "a tensor without a dim 1 keeps its size"
    assert any(node["op"] == "aten.view.default" and node["meta"]["shape"] == [{"sym": [4, 0]}, 8]
               for node in ir["nodes"]), "the linear layer's 2-d view has 4*S rows"


def test_sizes_of_the_square_of_a_dynamic_sequence_are_quadratic_forms():
    """Scores over a dynamic sequence S are [B, S, S]: their numel's and strides' forms are {"sym": [q, a, d]}."""
    class Scores(nn.Module):
        def forward(self, x):
            return torch.softmax(x @ x.transpose(1, 2), dim=-1)

    ir = capture.capture(Scores().eval(), [torch.randn(2, 5, 4)], batch_max=16, dim=1)
    assert_well_formed(ir)
    last = ir["nodes"][-1]["meta"]
    assert last["shape"] == [2, {"sym": [1, 0]}, {"sym": [1, 0]}]
    assert last["stride"][0] == {"sym": [1, 0, 0]}, last
    with pytest.raises(capture.NotLinearInBatch, match="not linear or quadratic"):
        capture.size_entry(torch.SymInt(_cubed_symint()))


def test_two_dynamic_sizes_write_polynomials_of_both():
    """sizes [(0, 8), (1, 16)]: batch B and sequence S are two symbols; the linear layer's rows B*S and the scores'
    B*S*S elements are {"poly": [[c, [eB, eS]], ...]}, and "dynamic" lists both dimensions."""
    class Block(nn.Module):
        def __init__(self):
            super().__init__()
            self.fc = nn.Linear(4, 4)

        def forward(self, x):
            h = self.fc(x)
            return torch.softmax(h @ h.transpose(1, 2), dim=-1)

    ir = capture.capture(Block().eval(), [torch.randn(2, 5, 4)], sizes=[(0, 8), (1, 16)])
    assert_well_formed(ir)
    assert ir["dynamic"] == {"dims": [{"dim": "batch", "axis": 0, "min": 1, "max": 8, "example": 2},
                                      {"dim": "dim1", "axis": 1, "min": 1, "max": 16, "example": 5}]}
    (x,) = ir["inputs"]
    assert x["meta"]["shape"] == [{"poly": [[1, [1, 0]]]}, {"poly": [[1, [0, 1]]]}, 4]
    assert any(node["op"] == "aten.view.default" and node["meta"]["shape"][0] == {"poly": [[1, [1, 1]]]}
               for node in ir["nodes"]), "the linear layer's 2-d view has B*S rows"
    scores = ir["nodes"][-1]["meta"]
    assert scores["stride"][0] == {"poly": [[1, [0, 2]]]}, scores
    result = capture.handle_capture({"op": "capture", "task": task_path("dynamic_layernorm"), "device": "cpu",
                                     "dynamic": {"dims": [{"dim": 0, "batch_max": 16}, {"dim": 1, "batch_max": 0}]}})
    assert result["status"] == "ok", result
    assert [d["max"] for d in result["graph"]["dynamic"]["dims"]] == [16, 6], "dim 1's top: the task's own"


def _cubed_symint():
    from torch.fx.experimental.symbolic_shapes import ShapeEnv

    env = ShapeEnv()
    s = env.create_symbol(5, source=torch._dynamo.source.ConstantSource("s"))
    return env.create_symintnode(s * s * s, hint=125).node


def test_a_forward_that_fixes_the_batch_has_no_dynamic_batch(tmp_path):
    task = write_task(tmp_path, "fixed_batch", """
        import torch
        import torch.nn as nn


        class Model(nn.Module):
            def forward(self, x):
                return x.view(8, -1) * 2.0


        def get_inputs():
            return [torch.randn(8, 4, 4)]


        def get_init_inputs():
            return []
    """)
    request = {"op": "capture", "task": task, "device": "cpu", "dynamic": {"batch_max": 0}}
    result = capture.handle_capture(request)
    assert result["status"] == "unsupported", result
    assert result["reason"].startswith("no dynamic batch"), result
    static = capture.handle_capture({"op": "capture", "task": task, "device": "cpu"})
    assert static["status"] == "ok" and "dynamic" not in static["graph"], static


@pytest.mark.parametrize("batch, batch_max, reason", [
    (1, 4, "the task's inputs have batch 1"),
    (3, 1, "a range of batch sizes 1..1 holds one size"),
])
def test_a_dynamic_batch_of_one_size_is_refused_in_one_line(tmp_path, batch, batch_max, reason):
    task = write_task(tmp_path, "one_batch", f"""
        import torch
        import torch.nn as nn


        class Model(nn.Module):
            def forward(self, x):
                return x * 2.0


        def get_inputs():
            return [torch.randn({batch}, 4)]


        def get_init_inputs():
            return []
    """)
    request = {"op": "capture", "task": task, "device": "cpu", "dynamic": {"batch_max": batch_max}}
    result = capture.handle_capture(request)
    assert result["status"] == "unsupported" and result["reason"].startswith(f"no dynamic batch: {reason}"), result


def test_a_recurrent_layer_with_a_dynamic_batch_is_refused_in_one_line(tmp_path):
    task = write_task(tmp_path, "gru_dynamic", """
        import torch
        import torch.nn as nn


        class Model(nn.Module):
            def __init__(self):
                super().__init__()
                self.gru = nn.GRU(4, 6, batch_first=True)

            def forward(self, x):
                return self.gru(x)[1]


        def get_inputs():
            return [torch.randn(3, 5, 4)]


        def get_init_inputs():
            return []
    """)
    result = capture.handle_capture({"op": "capture", "task": task, "device": "cpu", "dynamic": {"batch_max": 8}})
    assert result["status"] == "unsupported", result
    assert result["reason"] == "no dynamic batch: a recurrent layer's state does not take a dynamic batch yet", result
