import json
import time

import pytest
import torch

import egg_worker.evaluate
from egg_worker import guards


@pytest.fixture
def snapshot():
    taken = guards.take_snapshot()
    yield taken
    guards.restore(taken)
    assert guards.find_patches(taken) == []


def test_replaced_functions_are_found_and_restored(snapshot):
    original_allclose, original_perf_counter = torch.allclose, time.perf_counter
    torch.allclose = lambda *args, **kwargs: True
    time.perf_counter = lambda: 0.0
    assert guards.find_patches(snapshot) == ["torch.allclose", "time.perf_counter"]
    guards.restore(snapshot)
    assert torch.allclose is original_allclose and time.perf_counter is original_perf_counter
    assert guards.find_patches(snapshot) == []


def test_deleted_functions_are_found_and_restored(snapshot):
    original = torch.cuda.synchronize
    del torch.cuda.synchronize
    assert guards.find_patches(snapshot) == ["torch.cuda.synchronize"]
    guards.restore(snapshot)
    assert torch.cuda.synchronize is original


def test_additions_count_in_classes_not_in_modules(snapshot):
    torch.Tensor.__eq__ = lambda self, other: True
    torch._egg_test_attribute = lambda: None
    assert guards.find_patches(snapshot) == ["torch.Tensor.__eq__ (added)"]
    guards.restore(snapshot)
    assert "__eq__" not in vars(torch.Tensor)
    del torch._egg_test_attribute


def test_the_harness_own_functions_are_guarded(snapshot):
    egg_worker.evaluate._allclose = lambda *args, **kwargs: True
    assert guards.find_patches(snapshot) == ["egg_worker.evaluate._allclose"]


def test_extra_namespaces_are_guarded(snapshot):
    class Model:
        def forward(self):
            return 1

    extended = guards.take_snapshot(extra=[Model])
    Model.forward = lambda self: 2
    assert guards.find_patches(extended)[-1].endswith("Model.forward")
    guards.restore(extended)
    assert Model().forward() == 1


def test_tf32_and_cudnn_flags_are_guarded(snapshot):
    torch.backends.cudnn.allow_tf32 = not torch.backends.cudnn.allow_tf32
    torch.backends.cudnn.benchmark = not torch.backends.cudnn.benchmark
    assert guards.find_patches(snapshot) == ["torch.backends.cudnn.allow_tf32", "torch.backends.cudnn.benchmark"]
    guards.restore(snapshot)
    assert torch.backends.cudnn.allow_tf32 == snapshot.flags["torch.backends.cudnn.allow_tf32"]


def test_matmul_precision_is_guarded(snapshot):
    torch.set_float32_matmul_precision("medium")
    patches = guards.find_patches(snapshot)
    assert "torch.get_float32_matmul_precision()" in patches
    guards.restore(snapshot)
    assert torch.get_float32_matmul_precision() == snapshot.flags["torch.get_float32_matmul_precision()"]


def test_modified_input_compares_bits():
    inputs = [torch.tensor([1.0, float("nan"), 0.0]), 3, torch.arange(4)]
    clones = guards.clone_inputs(inputs)
    assert clones[1] is None
    assert guards.modified_input(inputs, clones) is None  # NaN equals itself bitwise
    inputs[0][2] = -0.0
    assert guards.modified_input(inputs, clones) == 0
    inputs[0][2] = 0.0
    inputs[2].resize_(2)
    assert guards.modified_input(inputs, clones) == 2


def test_aliasing_finds_shared_storage():
    x = torch.randn(4, 4)
    forbidden = [("input 0", x)]
    assert guards.aliasing([x.clone()], forbidden) is None
    assert guards.aliasing([torch.ones(1), x[2:].view(-1)], forbidden) == (1, "input 0")
    assert guards.aliasing([torch.empty(0)], [("input 0", torch.empty(0))]) is None
    assert guards.aliasing([3.0], forbidden) is None


def test_kernel_records_are_read_from_a_chrome_trace(tmp_path):
    trace = {"traceEvents": [
        {"cat": "kernel", "name": "relu_kernel", "dur": 3.0, "args": {"stream": 7}},
        {"cat": "kernel", "name": "void at::native::vectorized_elementwise", "dur": 1.0, "args": {"stream": 13}},
        {"cat": "cpu_op", "name": "aten::relu", "dur": 50.0, "args": {}},
    ]}
    path = tmp_path / "trace.json"
    path.write_text(json.dumps(trace))
    records = guards._kernel_records(str(path))
    assert [(record.name, record.stream) for record in records] == [
        ("relu_kernel", 7), ("void at::native::vectorized_elementwise", 13)]
    assert guards.triton_time_share(records, ["relu_kernel"]) == pytest.approx(0.75)
    assert guards.triton_time_share([], ["relu_kernel"]) is None


def test_kernel_times_sum_each_name_longest_first_and_the_rest_in_one_entry():
    records = [guards.KernelRecord("egg_k1_var", 7, 30.0, 1.0), guards.KernelRecord("egg_k0_convolution", 7, 50.0, 2.0),
               guards.KernelRecord("egg_k1_var", 7, 30.0, 3.0), guards.KernelRecord("void at::native::copy" + "x" * 200,
                                                                                  7, 10.0, 4.0),
               guards.KernelRecord("egg_k2_add", 7, 5.0, 5.0), guards.KernelRecord("egg_k3_mul", 7, 5.0, 6.0)]
    times = guards.kernel_times(records, ["egg_k0_convolution", "egg_k1_var", "egg_k2_add", "egg_k3_mul"], kept=3)
    assert [(t["name"][:22], t["launches"], t["us"], t["triton"]) for t in times] == [
        ("egg_k1_var", 2, 60.0, True), ("egg_k0_convolution", 1, 50.0, True),
        ("void at::native::copyx", 1, 10.0, False), ("(2 other kernels)", 2, 10.0, False)]
    assert [t["share"] for t in times] == [pytest.approx(60 / 130, abs=1e-4), pytest.approx(50 / 130, abs=1e-4),
                                           pytest.approx(10 / 130, abs=1e-4), pytest.approx(10 / 130, abs=1e-4)]
    assert len(times[2]["name"]) == guards.KERNEL_NAME_CHARS
    assert len(guards.kernel_times(records, [], kept=12)) == 5  # every name kept: no remainder entry
    assert guards.kernel_times([], ["egg_k1_var"]) == []
    assert guards.kernel_times([guards.KernelRecord("k", 7, 0.0)], ["k"]) == []


def test_the_marker_names_the_callers_stream_and_leaves_the_records():
    records = [guards.KernelRecord("void at::native::vectorized_elementwise_kernel<4, at::native::FillFunctor<float>>",
                                   7, 1.0, 10.0),
               guards.KernelRecord("relu_kernel", 7, 3.0, 12.0),
               guards.KernelRecord("void at::native::FillFunctor<float> again", 13, 1.0, 14.0)]
    stream, rest = guards.split_marker(records)
    assert stream == 7 and [record.name for record in rest] == ["relu_kernel", records[2].name]
    assert guards.split_marker(records[1:2]) == (None, records[1:2])


def test_kernel_records_come_in_order_of_start(tmp_path):
    trace = {"traceEvents": [{"cat": "kernel", "name": "b", "dur": 1.0, "ts": 20.0, "args": {"stream": 7}},
                             {"cat": "kernel", "name": "a", "dur": 1.0, "ts": 10.0, "args": {"stream": 7}}]}
    path = tmp_path / "trace.json"
    path.write_text(json.dumps(trace))
    assert [record.name for record in guards._kernel_records(str(path))] == ["a", "b"]
