import triton
import triton.language as tl
import torch
from triton.runtime.jit import JITFunction

from egg_worker import launches


@triton.jit
def double_kernel(x_ptr, BLOCK: tl.constexpr):
    offsets = tl.arange(0, BLOCK)
    tl.store(x_ptr + offsets, tl.load(x_ptr + offsets) * 2)


def test_launches_are_counted_with_kernel_names_only_inside_the_context():
    x = torch.ones(16)
    launches.install()
    double_kernel[(1,)](x, BLOCK=16)
    with launches.count_launches() as outer:
        double_kernel[(1,)](x, BLOCK=16)
        with launches.count_launches() as inner:
            double_kernel[(1,)](x, BLOCK=16)
        double_kernel[(1,)](x, BLOCK=16)
    double_kernel[(1,)](x, BLOCK=16)
    assert outer == ["double_kernel", "double_kernel"]
    assert inner == ["double_kernel"]
    assert torch.equal(x, torch.full((16,), 32.0))  # every launch still ran


def test_install_is_idempotent_and_wraps_at_class_level():
    launches.install()
    launches.install()
    for cls in launches.launch_classes():
        assert cls.run.__name__ == "run" and not hasattr(cls.run.__wrapped__, "__wrapped__")
    assert JITFunction in launches.launch_classes()


class FakeGraph:
    """torch.cuda.CUDAGraph's capture and replay entry points, without a GPU: replay runs what it captured."""

    def __init__(self):
        self.captured, self.capturing = [], False

    def capture_begin(self):
        self.capturing = True

    def capture_end(self):
        self.capturing = False

    def replay(self):
        for call in self.captured:
            call()


def test_a_replayed_cuda_graph_counts_the_triton_launches_of_its_capture():
    launches.install()
    launches.wrap_graph_class(FakeGraph)
    assert "wrap_graph_class" in torch.cuda.CUDAGraph.replay.__qualname__  # install() wrapped the real class
    x = torch.ones(16)
    graph = FakeGraph()
    with launches.count_launches() as capture_call:
        graph.capture_begin()
        double_kernel[(1,)](x, BLOCK=16)  # a real launch here stands for the one the capture records
        graph.captured.append(lambda: double_kernel[(1,)](x, BLOCK=16))
        graph.capture_end()
    double_kernel[(1,)](x, BLOCK=16)  # after the capture: not the graph's
    assert capture_call == ["double_kernel"]
    assert getattr(graph, launches.GRAPH_LAUNCHES) == ["double_kernel"]
    with launches.count_launches() as replay_call:
        graph.replay()
    # the replay's own run() launch (FakeGraph re-runs the kernel) plus the graph's recorded one: a real
    # CUDA graph replays without calling run(), so only the recorded launch is counted there
    assert replay_call == ["double_kernel", "double_kernel"]
    empty = FakeGraph()
    empty.capture_begin()
    empty.capture_end()
    with launches.count_launches() as nothing:
        empty.replay()
    assert nothing == []  # a graph that captured no Triton kernel adds nothing


def test_paused_runs_the_original_entry_points_and_wraps_them_again():
    launches.install()
    wrapped = JITFunction.run
    x = torch.ones(16)
    with launches.count_launches() as counted:
        with launches.paused():
            assert JITFunction.run is wrapped.__wrapped__ and "run" in vars(JITFunction)
            with launches.paused():  # nested: still the originals
                double_kernel[(1,)](x, BLOCK=16)
            double_kernel[(1,)](x, BLOCK=16)
    assert counted == [] and torch.equal(x, torch.full((16,), 4.0))
    assert JITFunction.run is wrapped


def test_paused_leaves_an_entry_point_replaced_meanwhile_for_the_patch_checks():
    launches.install()
    wrapped = JITFunction.run

    def impostor(self, *args, **kwargs):
        return None

    try:
        with launches.paused():
            JITFunction.run = impostor
        assert JITFunction.run is impostor
    finally:
        JITFunction.run = wrapped
