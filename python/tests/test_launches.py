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
