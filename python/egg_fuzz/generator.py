"""Random KernelBench-format programs from an integer seed, valid by construction (NNSmith's way).

`generate(seed)` grows a forward op by op. Each candidate op is run at once on concrete tensors (float32 and
float64 side by side), so every shape is known and an op that PyTorch refuses, that makes a value too large,
empty or non-finite, or whose float32 result drifts from float64 (an ill-conditioned step, where any correct
reordering of the sums could miss the tolerance) is dropped and another drawn. The same seed always gives the
same source; torch's random state is saved and restored around it.
"""

from __future__ import annotations

import copy
import dataclasses
import math
import random
import re
import warnings

import torch
import torch.nn as nn
import torch.nn.functional as F

# The interpreter runs every element of every value: keep each value to a few thousand elements.
MAX_ELEMENTS = 2048
MAX_DIM = 24
MAX_ABS_VALUE = 1e3
# float32 against float64 at each step: 10x tighter than egg's default tolerance (1e-4), so a correct kernel's
# own rounding stays well inside it.
CONDITION_TOL = 1e-5
# The harness builds Model under this seed (egg_worker's init_seed).
MODEL_SEED = 42
ATTEMPTS_PER_OP = 12
PROGRAM_ATTEMPTS = 8
# The inputs the harness draws for its correctness trials (egg eval's --seed 1, then 2, ...).
TRIAL_SEEDS = (1, 2, 3)

# The op families a program draws from; every op a program uses is tagged with one.
FAMILIES = ("view", "broadcast", "unary", "reduction", "softmax", "norm", "product", "conv", "pool", "scan",
            "indexing", "concat")


@dataclasses.dataclass
class Program:
    seed: int
    source: str
    ops: list  # (family, op name) per forward line, in order
    input_shapes: list

    @property
    def families(self) -> set:
        return {family for family, _ in self.ops}


class Rejected(Exception):
    """The drawn op does not fit the values at hand; draw another."""


class _Holder(nn.Module):
    pass


class Builder:
    """A forward under construction: its lines, its modules, and every value computed in float32 and float64."""

    def __init__(self, rng: random.Random):
        self.rng = rng
        self.inputs: list[tuple[str, tuple]] = []
        self.init_lines: list[str] = []
        self.lines: list[str] = []
        self.ops: list[tuple[str, str]] = []
        self.values: dict[str, torch.Tensor] = {}  # float32 (or integer) values
        self.values64: dict[str, torch.Tensor] = {}
        self.holder = _Holder()
        self.holder64 = _Holder()
        self.counter = 0
        self.consumed: set[str] = set()
        torch.manual_seed(MODEL_SEED)
        self.init_stream = torch.random.get_rng_state()
        self.input_stream = self.init_stream

    # -- names and values --
    def fresh(self, prefix: str) -> str:
        name = f"{prefix}{self.counter}"
        self.counter += 1
        return name

    def add_input(self, shape: tuple) -> str:
        name = self.fresh("x")
        torch.random.set_rng_state(self.input_stream)
        tensor = torch.randn(shape)
        self.input_stream = torch.random.get_rng_state()
        self.inputs.append((name, shape))
        self.values[name] = tensor
        self.values64[name] = tensor.double()
        return name

    def float_values(self) -> list[str]:
        return [name for name, value in self.values.items() if value.is_floating_point()]

    def pick(self, rank=None, min_rank: int = 1) -> str:
        """A float value of `rank` when given; values no op reads yet and recent ones likelier, so that the
        program grows deep and few values end unused."""
        names = [name for name in self.float_values()
                 if (rank is None or self.values[name].dim() == rank) and self.values[name].dim() >= min_rank]
        if not names:
            raise Rejected("no value of that rank")
        weights = [1.0 + 2.0 * (index >= len(names) - 2) + 4.0 * (name not in self.consumed)
                   for index, name in enumerate(names)]
        return self.rng.choices(names, weights)[0]

    def sinks(self) -> list[str]:
        """The computed values no op reads: the program's outputs, so that no op is dead code."""
        return [name for name in self.values if name not in self.consumed and not name.startswith("x")]

    def shape(self, name: str) -> tuple:
        return tuple(self.values[name].shape)

    # -- adding lines --
    def module(self, prefix: str, constructor: str) -> str:
        """A submodule, parameter or buffer created in __init__ by `constructor` (`{name}` its name). Both holders
        draw from the init stream that the harness's `torch.manual_seed(MODEL_SEED); Model()` will replay, so
        what is checked here is the model that will be evaluated."""
        name = self.fresh(prefix)
        line = constructor.format(name=name)
        for holder, cast in ((self.holder, None), (self.holder64, torch.float64)):
            torch.random.set_rng_state(self.init_stream)
            exec(line, _namespace(holder))
            if cast is not None:
                holder.to(cast)
        self.init_stream = torch.random.get_rng_state()
        self.init_lines.append(line)
        return name

    def emit(self, family: str, op: str, expr: str) -> str:
        """Run `expr` (operands by name, modules as self.NAME) in both precisions and keep it if it is sound."""
        out32 = eval(expr, _namespace(self.holder, self.values))
        out64 = eval(expr, _namespace(self.holder64, self.values64))
        _check(out32, out64)
        name = self.fresh("v")
        self.values[name] = out32
        self.values64[name] = out64
        self.lines.append(f"{name} = {expr}")
        self.ops.append((family, op))
        self.consumed.update(_VALUE_NAME.findall(expr))
        return name

    def attempt(self, draw) -> str | None:
        """Run one op generator; on rejection undo whatever it added."""
        saved = (len(self.init_lines), len(self.lines), len(self.ops), dict(self.values), dict(self.values64),
                 self.counter, self.init_stream, set(self.consumed))
        try:
            return draw(self)
        except (Rejected, RuntimeError, ValueError, IndexError, TypeError):
            count_init, count_lines, count_ops, values, values64, counter, init_stream, consumed = saved
            del self.init_lines[count_init:], self.lines[count_lines:], self.ops[count_ops:]
            self.values, self.values64, self.counter, self.init_stream = values, values64, counter, init_stream
            self.consumed = consumed
            return None


_VALUE_NAME = re.compile(r"\b[vx][0-9]+\b")


def _namespace(holder, values=None) -> dict:
    return {"torch": torch, "nn": nn, "F": F, "self": holder, **(values or {})}


def _check(out32, out64) -> None:
    if not isinstance(out32, torch.Tensor):
        raise Rejected("not a tensor")
    if out32.numel() == 0 or out32.numel() > MAX_ELEMENTS or out32.dim() > 5 or out32.dim() == 0:
        raise Rejected("size")
    if not out32.is_floating_point():
        if not torch.equal(out32, out64):
            raise Rejected("integer result depends on rounding")
        return
    if not torch.isfinite(out64).all() or out64.abs().max() > MAX_ABS_VALUE:
        raise Rejected("range")
    if not torch.allclose(out32.double(), out64, atol=CONDITION_TOL, rtol=CONDITION_TOL):
        raise Rejected("ill-conditioned")


# ---- helpers for drawing shapes ----

def _factor(rng: random.Random, n: int, rank: int) -> tuple:
    """A random shape of `rank` dimensions with `n` elements."""
    dims = []
    for _ in range(rank - 1):
        divisors = [d for d in range(1, min(n, MAX_DIM) + 1) if n % d == 0]
        d = rng.choice(divisors[1:] if len(divisors) > 1 and rng.random() < 0.8 else divisors)
        dims.append(d)
        n //= d
    if n > MAX_DIM * 4:
        raise Rejected("cannot factor")
    dims.append(n)
    rng.shuffle(dims)
    return tuple(dims)


def _random_shape(rng: random.Random, rank: int, budget: int) -> tuple:
    dims = [rng.randint(1, 8) for _ in range(rank)]
    while math.prod(dims) > budget:
        index = max(range(rank), key=lambda i: dims[i])
        dims[index] = max(1, dims[index] // 2)
    return tuple(dims)


def _dims_text(shape) -> str:
    return "(" + ", ".join(map(str, shape)) + ("," if len(shape) == 1 else "") + ")"


def _ranked(b: Builder, rank: int, minimum: tuple = ()) -> str:
    """A value of `rank` dims, reshaped from another when none fits; `minimum`: least sizes of the last dims."""
    def fits(name):
        shape = b.shape(name)
        return len(shape) == rank and all(s >= m for s, m in zip(shape[rank - len(minimum):], minimum))

    fitting = [name for name in b.float_values() if fits(name)]
    if fitting and b.rng.random() < 0.75:
        return fitting[-1] if b.rng.random() < 0.6 else b.rng.choice(fitting)
    source = b.pick()
    shape = _factor(b.rng, b.values[source].numel(), rank)
    if not all(s >= m for s, m in zip(shape[rank - len(minimum):], minimum)):
        raise Rejected("reshape too small")
    return b.emit("view", "reshape", f"{source}.reshape{_dims_text(shape)}")


# ---- op generators: each adds one op (and any reshape it needs) or raises Rejected ----

UNARY = {"relu": "torch.relu({x})", "gelu": "F.gelu({x})", "silu": "F.silu({x})", "sigmoid": "torch.sigmoid({x})",
         "tanh": "torch.tanh({x})", "abs": "torch.abs({x})", "neg": "-{x}", "leaky_relu": "F.leaky_relu({x}, 0.1)",
         "elu": "F.elu({x})", "softplus": "F.softplus({x})", "hardtanh": "F.hardtanh({x}, -0.5, 0.5)",
         "clamp": "torch.clamp({x}, min=-1.0, max=2.0)", "sin": "torch.sin({x})", "cos": "torch.cos({x})",
         "log": "torch.log(torch.abs({x}) + 1.0)", "sqrt": "torch.sqrt(torch.abs({x}) + 0.25)",
         "erf": "torch.erf({x})", "hardswish": "F.hardswish({x})", "mish": "F.mish({x})", "square": "{x} * {x}",
         "exp": "torch.exp(torch.tanh({x}))", "affine": "{x} * 0.5 + 0.25", "rsqrt": "torch.rsqrt({x} * {x} + 1.0)",
         "selu": "F.selu({x})", "hardsigmoid": "F.hardsigmoid({x})", "floor": "torch.floor({x} * 4.0)",
         "sign": "torch.sign({x})"}


def op_unary(b: Builder) -> str:
    op = b.rng.choice(sorted(UNARY))
    return b.emit("unary", op, UNARY[op].format(x=b.pick()))


def _broadcastable_shape(rng: random.Random, shape: tuple) -> tuple:
    """A shape that broadcasts against `shape`: trailing dims kept or set to 1, leading ones maybe dropped."""
    keep = rng.randint(1, len(shape)) if rng.random() < 0.5 else len(shape)
    return tuple(1 if rng.random() < 0.4 else s for s in shape[len(shape) - keep:])


BINARY = {"add": "{a} + {b}", "sub": "{a} - {b}", "mul": "{a} * {b}", "maximum": "torch.maximum({a}, {b})",
          "minimum": "torch.minimum({a}, {b})", "div": "{a} / (torch.abs({b}) + 1.0)",
          "select_greater": "torch.where({a} > {b}, {a}, {b} * 0.5)"}


def op_broadcast(b: Builder) -> str:
    a = b.pick()
    shape = b.shape(a)
    partners = [name for name in b.float_values()
                if name != a and _broadcasts(b.shape(name), shape)]
    roll = b.rng.random()
    if partners and roll < 0.5:
        other = b.rng.choice(partners)
    elif roll < 0.8:
        other = "self." + b.module("p", f"self.{{name}} = nn.Parameter(torch.randn"
                                        f"{_dims_text(_broadcastable_shape(b.rng, shape))})")
    else:
        other = b.rng.choice(["2.0", "-0.75", "1.5"])
    left, right = (a, other) if b.rng.random() < 0.7 else (other, a)
    op = b.rng.choice(sorted(BINARY))
    return b.emit("broadcast", op, BINARY[op].format(a=left, b=right))


def _broadcasts(small: tuple, big: tuple) -> bool:
    if len(small) > len(big):
        return False
    return all(s == 1 or s == g for s, g in zip(reversed(small), reversed(big)))


def op_view(b: Builder) -> str:
    x = b.pick()
    shape = b.shape(x)
    rank = len(shape)
    kind = b.rng.choice(["reshape", "permute", "transpose", "flatten", "unsqueeze", "squeeze", "expand", "slice",
                         "flip", "select", "contiguous_t"])
    if kind == "reshape":
        return b.emit("view", kind, f"{x}.reshape{_dims_text(_factor(b.rng, math.prod(shape), b.rng.randint(1, 4)))}")
    if kind == "permute":
        order = list(range(rank))
        b.rng.shuffle(order)
        return b.emit("view", kind, f"{x}.permute{_dims_text(order)}")
    if kind == "transpose" or kind == "contiguous_t":
        if rank < 2:
            raise Rejected("rank")
        i, j = b.rng.sample(range(rank), 2)
        suffix = ".contiguous()" if kind == "contiguous_t" else ""
        return b.emit("view", "transpose", f"{x}.transpose({i}, {j}){suffix}")
    if kind == "flatten":
        start = b.rng.randrange(rank)
        return b.emit("view", kind, f"torch.flatten({x}, {start})")
    if kind == "unsqueeze":
        return b.emit("view", kind, f"{x}.unsqueeze({b.rng.randint(-rank - 1, rank)})")
    if kind == "squeeze":
        ones = [i for i, s in enumerate(shape) if s == 1]
        if not ones or rank == 1:
            raise Rejected("nothing to squeeze")
        return b.emit("view", kind, f"{x}.squeeze({b.rng.choice(ones)})")
    if kind == "expand":
        ones = [i for i, s in enumerate(shape) if s == 1]
        target = [b.rng.randint(2, 5) if i in ones else -1 for i in range(rank)]
        lead = [b.rng.randint(2, 3)] if b.rng.random() < 0.3 else []
        if not ones and not lead:
            raise Rejected("nothing to expand")
        return b.emit("view", kind, f"{x}.expand{_dims_text(lead + target)}")
    if kind == "slice":
        dim = b.rng.randrange(rank)
        size = shape[dim]
        if size < 2:
            raise Rejected("short")
        start = b.rng.randrange(size - 1)
        stop = b.rng.randint(start + 1, size)
        step = b.rng.choice([1, 1, 2, 3])
        index = ", ".join([":"] * dim + [f"{start}:{stop}:{step}"])
        return b.emit("view", kind, f"{x}[{index}]")
    if kind == "flip":
        dims = sorted(b.rng.sample(range(rank), b.rng.randint(1, rank)))
        return b.emit("view", kind, f"torch.flip({x}, {dims})")
    dim = b.rng.randrange(rank)
    if rank == 1:
        raise Rejected("select of a vector")
    return b.emit("view", kind, f"{x}.select({dim}, {b.rng.randrange(shape[dim])})")


def _dims_arg(rng: random.Random, rank: int) -> str:
    if rank > 1 and rng.random() < 0.35:
        dims = sorted(rng.sample(range(rank), rng.randint(2, rank)))
        return "(" + ", ".join(str(d - rank if rng.random() < 0.3 else d) for d in dims) + ")"
    dim = rng.randrange(rank)
    return str(dim - rank if rng.random() < 0.3 else dim)


def op_reduction(b: Builder) -> str:
    x = b.pick()
    rank = b.values[x].dim()
    keep = ", keepdim=True" if b.rng.random() < 0.5 else ""
    dims = _dims_arg(b.rng, rank)
    single = str(b.rng.randrange(rank))
    forms = {
        "sum": f"torch.sum({x}, {dims}{keep})",
        "mean": f"torch.mean({x}, {dims}{keep})",
        "amax": f"torch.amax({x}, {dims}{keep})",
        "amin": f"torch.amin({x}, {dims}{keep})",
        "max": f"torch.max({x}, {single}{keep})[0]",
        "min": f"torch.min({x}, {single}{keep}).values",
        "var": f"torch.var({x}, {dims}{keep}, correction={b.rng.choice([0, 1])})",
        "std": f"torch.std({x}, {dims}{keep})",
        "prod": f"torch.prod(torch.tanh({x}) + 1.0, {single}{keep})",
        "logsumexp": f"torch.logsumexp({x}, {dims}{keep})",
        "argmax": f"torch.argmax({x}, {single}{keep}).float()",
        "argmin": f"torch.argmin({x}, {single}{keep}).float()",
        "norm": f"torch.linalg.vector_norm({x}, 2, {dims}{keep})",
        "sum_all": f"{x}.sum().reshape(1)",
    }
    op = b.rng.choice(list(forms))
    return b.emit("reduction", op, forms[op])


def op_softmax(b: Builder) -> str:
    x = b.pick()
    dim = b.rng.randrange(-b.values[x].dim(), b.values[x].dim())
    fn = b.rng.choice(["softmax", "log_softmax"])
    return b.emit("softmax", fn, f"F.{fn}({x}, dim={dim})")


def op_norm(b: Builder) -> str:
    kind = b.rng.choice(["layer_norm", "group_norm", "batch_norm", "instance_norm", "rms_norm", "normalize"])
    if kind == "layer_norm":
        x = b.pick()
        shape = b.shape(x)
        count = b.rng.randint(1, min(2, len(shape)))
        normalized = shape[len(shape) - count:]
        if math.prod(normalized) < 2:
            raise Rejected("one element")
        if b.rng.random() < 0.5:
            m = b.module("ln", f"self.{{name}} = nn.LayerNorm({list(normalized)}, "
                               f"elementwise_affine={b.rng.random() < 0.7})")
            return b.emit("norm", kind, f"self.{m}({x})")
        return b.emit("norm", kind, f"F.layer_norm({x}, {list(normalized)})")
    if kind == "rms_norm":
        x = b.pick()
        return b.emit("norm", kind, f"{x} * torch.rsqrt(torch.mean({x} * {x}, dim=-1, keepdim=True) + 1e-5)")
    if kind == "normalize":
        x = b.pick()
        return b.emit("norm", kind, f"F.normalize({x}, dim={b.rng.randrange(b.values[x].dim())})")
    rank = b.rng.choice([3, 4]) if kind != "batch_norm" else b.rng.choice([2, 3, 4])
    x = _ranked(b, rank, (2,) * (rank - 1))
    channels = b.shape(x)[1]
    if kind == "group_norm":
        groups = b.rng.choice([g for g in range(1, channels + 1) if channels % g == 0])
        m = b.module("gn", f"self.{{name}} = nn.GroupNorm({groups}, {channels})")
    elif kind == "batch_norm":
        dims = {2: "1d", 3: "1d", 4: "2d"}[rank]
        m = b.module("bn", f"self.{{name}} = nn.BatchNorm{dims}({channels}); "
                           f"self.{{name}}.running_mean.uniform_(-0.5, 0.5); "
                           f"self.{{name}}.running_var.uniform_(0.5, 2.0); self.{{name}}.eval()")
    else:
        dims = {3: "1d", 4: "2d"}[rank]
        m = b.module("inorm", f"self.{{name}} = nn.InstanceNorm{dims}({channels}, affine={b.rng.random() < 0.5})")
    return b.emit("norm", kind, f"self.{m}({x})")


def op_product(b: Builder) -> str:
    kind = b.rng.choice(["linear", "matmul", "bmm", "mm_param", "addmm", "einsum"])
    if kind == "linear":
        x = b.pick()
        features = b.shape(x)[-1]
        out = b.rng.randint(1, 16)
        m = b.module("fc", f"self.{{name}} = nn.Linear({features}, {out}, bias={b.rng.random() < 0.7})")
        return b.emit("product", kind, f"self.{m}({x})")
    if kind in ("matmul", "bmm"):
        rank = 3 if kind == "bmm" else b.rng.choice([2, 3, 4])
        x = _ranked(b, rank)
        shape = b.shape(x)
        partners = [name for name in b.float_values() if b.values[name].dim() == rank
                    and b.shape(name)[-2] == shape[-1] and (kind == "matmul" or b.shape(name)[0] == shape[0])]
        if partners and b.rng.random() < 0.6:
            other = b.rng.choice(partners)
        else:
            batch = shape[:-2] if kind == "bmm" or b.rng.random() < 0.6 else ()
            other = "self." + b.module("w", f"self.{{name}} = nn.Parameter(torch.randn"
                                            f"{_dims_text(batch + (shape[-1], b.rng.randint(1, 12)))})")
        fn = "torch.bmm" if kind == "bmm" else "torch.matmul"
        return b.emit("product", kind, f"{fn}({x}, {other})")
    if kind == "einsum":
        x = _ranked(b, 3)
        _, k, n = b.shape(x)
        w = b.module("w", f"self.{{name}} = nn.Parameter(torch.randn({n}, {b.rng.randint(2, 8)}))")
        return b.emit("product", kind, f"torch.einsum('bkn,nm->bkm', {x}, self.{w})")
    x = _ranked(b, 2)
    rows, inner = b.shape(x)
    cols = b.rng.randint(1, 12)
    w = b.module("w", f"self.{{name}} = nn.Parameter(torch.randn({inner}, {cols}))")
    if kind == "mm_param":
        transposed = b.rng.random() < 0.5
        operand = f"self.{w}.t().contiguous().t()" if transposed else f"self.{w}"
        return b.emit("product", kind, f"torch.mm({x}, {operand})")
    bias = b.module("bias", f"self.{{name}} = nn.Parameter(torch.randn({cols}))")
    return b.emit("product", kind, f"torch.addmm(self.{bias}, {x}, self.{w}, beta={b.rng.choice([1.0, 0.5])}, "
                                   f"alpha={b.rng.choice([1.0, 2.0])})")


def op_conv(b: Builder) -> str:
    dims = b.rng.choice([1, 1, 2, 2, 2, 3])
    transposed = b.rng.random() < 0.3
    x = _ranked(b, dims + 2, (1,) + (2,) * dims)
    shape = b.shape(x)
    cin = shape[1]
    groups = b.rng.choice([g for g in range(1, cin + 1) if cin % g == 0]) if b.rng.random() < 0.4 else 1
    cout = groups * b.rng.randint(1, max(1, 8 // groups))
    kernel = b.rng.randint(1, 3)
    stride = b.rng.choice([1, 1, 2, 3])
    dilation = b.rng.choice([1, 1, 2])
    padding = b.rng.randint(0, kernel * dilation // 2 + (0 if transposed else 1))
    bias = b.rng.random() < 0.7
    cls = f"nn.Conv{'Transpose' if transposed else ''}{dims}d"
    extra = ""
    if transposed and stride > 1 and b.rng.random() < 0.5:
        extra = f", output_padding={b.rng.randrange(min(stride, dilation * 1 + stride - 1))}"
    m = b.module("conv", f"self.{{name}} = {cls}({cin}, {cout}, {kernel}, stride={stride}, padding={padding}, "
                         f"dilation={dilation}, groups={groups}, bias={bias}{extra})")
    return b.emit("conv", f"conv{'_transpose' if transposed else ''}{dims}d", f"self.{m}({x})")


def op_pool(b: Builder) -> str:
    dims = b.rng.choice([1, 2, 2, 3])
    kind = b.rng.choice(["max", "avg", "adaptive_avg", "adaptive_max"])
    x = _ranked(b, dims + 2, (1,) + (2,) * dims)
    spatial = b.shape(x)[2:]
    if kind.startswith("adaptive"):
        size = tuple(b.rng.randint(1, s) for s in spatial)
        return b.emit("pool", f"{kind}_pool{dims}d", f"F.{kind}_pool{dims}d({x}, {_dims_text(size)})")
    kernel = b.rng.randint(2, min(3, min(spatial)))
    stride = b.rng.choice([None, 1, 2, kernel])
    padding = b.rng.randint(0, kernel // 2)
    ceil = b.rng.random() < 0.25
    args = f"{x}, {kernel}, stride={stride}, padding={padding}, ceil_mode={ceil}"
    if kind == "max" and b.rng.random() < 0.3:
        args += ", dilation=2"
    if kind == "avg" and b.rng.random() < 0.5:
        args += f", count_include_pad={b.rng.random() < 0.5}"
    return b.emit("pool", f"{kind}_pool{dims}d", f"F.{kind}_pool{dims}d({args})")


def op_scan(b: Builder) -> str:
    x = b.pick()
    rank = b.values[x].dim()
    dim = b.rng.randrange(-rank, rank)
    kind = b.rng.choice(["cumsum", "cumsum", "cumprod", "cumsum_flip", "cumsum_exclusive"])
    if kind == "cumprod":
        return b.emit("scan", kind, f"torch.cumprod(torch.tanh({x}) * 0.5 + 1.0, dim={dim})")
    if kind == "cumsum_flip":
        return b.emit("scan", kind, f"torch.cumsum({x}.flip({dim}), dim={dim}).flip({dim})")
    if kind == "cumsum_exclusive":
        length = b.shape(x)[dim]
        if length < 2:
            raise Rejected("short")
        zeros = list(b.shape(x))
        zeros[dim] = 1
        narrowed = f"{x}.narrow({dim}, 0, {length - 1})"
        return b.emit("scan", kind, f"torch.cumsum(torch.cat([torch.zeros{_dims_text(zeros)}, {narrowed}], "
                                    f"dim={dim}), dim={dim})")
    return b.emit("scan", kind, f"torch.cumsum({x}, dim={dim})")


def op_indexing(b: Builder) -> str:
    x = b.pick()
    shape = b.shape(x)
    rank = len(shape)
    kind = b.rng.choice(["gather", "gather_argmax", "index_select", "advanced", "where", "masked_fill", "pad",
                         "tril", "narrow", "roll", "embedding", "index2", "mask", "sort", "topk", "argsort",
                         "interpolate"])
    dim = b.rng.randrange(rank)
    if kind in LOOKUPS:
        return LOOKUPS[kind](b, x, shape, dim)
    if kind == "gather":
        index_shape = tuple(b.rng.randint(1, s) for s in shape)
        m = b.module("idx", f"self.register_buffer('{{name}}', torch.randint(0, {shape[dim]}, "
                            f"{_dims_text(index_shape)}))")
        return b.emit("indexing", kind, f"torch.gather({x}, {dim}, self.{m})")
    if kind == "gather_argmax":
        return b.emit("indexing", kind, f"torch.gather({x}, {dim}, torch.argmax({x}, {dim}, keepdim=True))")
    if kind == "index_select":
        count = b.rng.randint(1, shape[dim] + 2)
        m = b.module("idx", f"self.register_buffer('{{name}}', torch.randint(0, {shape[dim]}, ({count},)))")
        return b.emit("indexing", kind, f"torch.index_select({x}, {dim}, self.{m})")
    if kind == "advanced":
        count = b.rng.randint(1, shape[0] + 2)
        m = b.module("idx", f"self.register_buffer('{{name}}', torch.randint(0, {shape[0]}, ({count},)))")
        return b.emit("indexing", kind, f"{x}[self.{m}]")
    if kind == "where":
        y = b.pick()
        if not _broadcasts(b.shape(y), shape):
            y = "0.0"
        return b.emit("indexing", kind, f"torch.where({x} > 0.25, {x}, {y})")
    if kind == "masked_fill":
        return b.emit("indexing", kind, f"{x}.masked_fill({x} < -0.5, {b.rng.choice([0.0, 1.0, -2.0])})")
    if kind == "pad":
        pads = [b.rng.randint(0, 2) for _ in range(2 * min(rank, b.rng.randint(1, 3)))]
        return b.emit("indexing", kind, f"F.pad({x}, {pads}, value={b.rng.choice([0.0, 0.5])})")
    if kind == "tril":
        if rank < 2:
            raise Rejected("rank")
        fn = b.rng.choice(["tril", "triu"])
        return b.emit("indexing", fn, f"torch.{fn}({x}, {b.rng.randint(-1, 1)})")
    if kind == "narrow":
        if shape[dim] < 2:
            raise Rejected("short")
        start = b.rng.randrange(shape[dim] - 1)
        return b.emit("indexing", kind, f"{x}.narrow({dim}, {start}, {b.rng.randint(1, shape[dim] - start)})")
    return b.emit("indexing", kind, f"torch.roll({x}, {b.rng.randint(1, 3)}, {dim})")


def _embedding(b: Builder, x: str, shape: tuple, dim: int) -> str:
    rows = shape[0]
    index_shape = _random_shape(b.rng, b.rng.randint(1, 2), 16)
    m = b.module("idx", f"self.register_buffer('{{name}}', torch.randint(0, {rows}, {_dims_text(index_shape)}))")
    return b.emit("indexing", "embedding", f"F.embedding(self.{m}, {x}.reshape({rows}, -1))")


def _index2(b: Builder, x: str, shape: tuple, dim: int) -> str:
    """x[i, j] over two dims (adjacent, or apart with a slice between) by broadcasting index tensors, some
    positions negative (transformers' masks read at (batch, position))."""
    if len(shape) < 2:
        raise Rejected("rank")
    first = b.rng.randrange(len(shape) - 1)
    second = b.rng.randrange(first + 1, min(first + 3, len(shape)))
    rows = b.module("idx", f"self.register_buffer('{{name}}', torch.randint({-shape[first]}, {shape[first]}, "
                           f"({b.rng.randint(1, 4)}, 1)))")
    cols = b.module("idx", f"self.register_buffer('{{name}}', torch.randint(0, {shape[second]}, "
                           f"(1, {b.rng.randint(1, 4)})))")
    slots = [":"] * first + [f"self.{rows}"] + [":"] * (second - first - 1) + [f"self.{cols}"]
    return b.emit("indexing", "index2", f"{x}[{', '.join(slots)}]")


def _mask(b: Builder, x: str, shape: tuple, dim: int) -> str:
    """A boolean mask of comparisons joined by bitwise and, or, xor (of bools and of int64 positions)."""
    op = b.rng.choice(["&", "|", "^"])
    position = f"torch.arange({shape[-1]})"
    return b.emit("indexing", "mask", f"torch.where(({x} > -0.25) {op} ({x} < 0.5) & (({position} & 3) != 1), "
                                      f"{x}, 0.0)")


def _sort(b: Builder, x: str, shape: tuple, dim: int) -> str:
    descending = b.rng.choice([False, True])
    return b.emit("indexing", "sort", f"torch.sort({x}, dim={dim}, descending={descending}).values")


def _topk(b: Builder, x: str, shape: tuple, dim: int) -> str:
    k = b.rng.randint(1, shape[dim])
    largest = b.rng.choice([True, False])
    return b.emit("indexing", "topk", f"torch.topk({x}, {k}, dim={dim}, largest={largest}).values")


def _argsort(b: Builder, x: str, shape: tuple, dim: int) -> str:
    return b.emit("indexing", "argsort", f"torch.gather({x}, {dim}, torch.argsort({x}, dim={dim}, descending=True))")


def _interpolate(b: Builder, x: str, shape: tuple, dim: int) -> str:
    x = _ranked(b, b.rng.choice([3, 4]))
    rank = b.values[x].dim()
    mode = b.rng.choice(["nearest", "linear" if rank == 3 else "bilinear"])
    align = "" if mode == "nearest" else f", align_corners={b.rng.choice([False, True])}"
    if b.rng.random() < 0.5:
        size = tuple(b.rng.randint(1, 9) for _ in range(rank - 2))
        return b.emit("indexing", f"interpolate_{mode}", f"F.interpolate({x}, size={size}, mode='{mode}'{align})")
    scale = b.rng.choice([0.5, 1.5, 2.0, 3.0])
    return b.emit("indexing", f"interpolate_{mode}", f"F.interpolate({x}, scale_factor={scale}, mode='{mode}'{align})")


LOOKUPS = {"embedding": _embedding, "index2": _index2, "mask": _mask, "sort": _sort, "topk": _topk,
           "argsort": _argsort, "interpolate": _interpolate}


def op_concat(b: Builder) -> str:
    x = b.pick()
    shape = b.shape(x)
    dim = b.rng.randrange(len(shape))
    partners = [name for name in b.float_values()
                if b.values[name].dim() == len(shape)
                and all(s == t for i, (s, t) in enumerate(zip(b.shape(name), shape)) if i != dim)]
    others = b.rng.sample(partners, min(len(partners), b.rng.randint(1, 2)))
    if b.rng.random() < 0.3:
        return b.emit("concat", "stack", f"torch.stack([{', '.join([x] + others)}], dim={dim})")
    return b.emit("concat", "cat", f"torch.cat([{', '.join([x] + others)}], dim={dim})")


GENERATORS = {"view": op_view, "broadcast": op_broadcast, "unary": op_unary, "reduction": op_reduction,
              "softmax": op_softmax, "norm": op_norm, "product": op_product, "conv": op_conv, "pool": op_pool,
              "scan": op_scan, "indexing": op_indexing, "concat": op_concat}
assert set(GENERATORS) == set(FAMILIES)


def generate(seed: int, min_ops: int = 3, max_ops: int = 7) -> Program:
    """The program of `seed`: a forward of min_ops..max_ops ops (reshapes an op needs come on top), checked as a
    whole on the harness's first trial inputs."""
    state = torch.random.get_rng_state()
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # PyTorch's warnings on rejected draws (var with no degrees of freedom)
            for attempt in range(PROGRAM_ATTEMPTS):
                torch.manual_seed(seed * PROGRAM_ATTEMPTS + attempt)
                program = _generate(seed, random.Random(f"{seed}/{attempt}"), min_ops, max_ops)
                if well_conditioned(program.source):
                    return program
        raise RuntimeError(f"seed {seed}: no well-conditioned program in {PROGRAM_ATTEMPTS} attempts")
    finally:
        torch.random.set_rng_state(state)


def well_conditioned(source: str, trial_seeds=TRIAL_SEEDS) -> bool:
    """Whether the task's Model, built as the harness builds it, gives finite float32 outputs within
    CONDITION_TOL of float64 on the inputs of `trial_seeds`."""
    namespace: dict = {}
    exec(compile(source, "<egg_fuzz>", "exec"), namespace)
    torch.manual_seed(MODEL_SEED)
    model = namespace["Model"](*namespace["get_init_inputs"]()).eval()
    model64 = copy.deepcopy(model).double()
    for trial in trial_seeds:
        torch.manual_seed(trial)
        inputs = namespace["get_inputs"]()
        with torch.no_grad():
            outputs = model(*inputs)
            outputs64 = model64(*[x.double() for x in inputs])
        for out32, out64 in zip(*map(_as_tuple, (outputs, outputs64))):
            try:
                _check(out32, out64)
            except Rejected:
                return False
    return True


def _as_tuple(value) -> tuple:
    return value if isinstance(value, tuple) else (value,)


def _generate(seed: int, rng: random.Random, min_ops: int, max_ops: int) -> Program:
    b = Builder(rng)
    for _ in range(rng.choice([1, 1, 2, 3])):
        rank = rng.randint(1, 4)
        b.add_input(_random_shape(rng, rank, rng.choice([64, 256, 512, 1024])))
    # Each program leans on a few families so that they meet each other; any family may still appear.
    favourites = rng.sample(FAMILIES, 3)
    wanted = rng.randint(min_ops, max_ops)
    drawn = 0
    while drawn < wanted:
        family = rng.choice(favourites) if rng.random() < 0.6 else rng.choice(FAMILIES)
        for _ in range(ATTEMPTS_PER_OP):
            if b.attempt(GENERATORS[family]) is not None:
                break
        drawn += 1
    if not b.lines:
        b.attempt(op_unary) or b.emit("unary", "relu", f"torch.relu({b.inputs[0][0]})")
    outputs = b.sinks()
    return Program(seed, _render(seed, b, outputs), list(b.ops), [shape for _, shape in b.inputs])


def _render(seed: int, b: Builder, outputs: list) -> str:
    families = sorted({family for family, _ in b.ops})
    init = "\n".join(f"        {line}" for line in b.init_lines) or "        pass"
    body = "\n".join(f"        {line}" for line in b.lines)
    returned = ", ".join(outputs)
    inputs = ", ".join(f"torch.randn{_dims_text(shape)}" for _, shape in b.inputs)
    return f'''"""egg fuzz program, seed {seed} (python -m egg_fuzz --seeds {seed}); families: {", ".join(families)}."""
import torch
import torch.nn as nn
import torch.nn.functional as F


class Model(nn.Module):
    def __init__(self):
        super().__init__()
{init}

    def forward(self, {", ".join(name for name, _ in b.inputs)}):
{body}
        return {returned}


def get_inputs():
    return [{inputs}]


def get_init_inputs():
    return []
'''
