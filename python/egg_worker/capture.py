"""The `capture` op: a task's forward as an ATen-level graph, written as egg's JSON IR (docs/expert.md).

`handle_capture(request)` builds the reference model the harness way (seeded, on the device, eval mode), makes
trial-0 inputs, exports the forward with torch.export (non-strict), decomposes it with egg's table (core ATen
plus the normalisations, softmaxes and losses down to pointwise ops and reductions) and returns
{"status": "ok", "graph": IR} or {"status": "unsupported", "reason": one line}. A bad task raises
loader.TaskError. No tensor data crosses the protocol except small lifted constants.
"""

import functools
import inspect
import math
import operator
import re

import torch
from torch.nn.attention import SDPBackend, sdpa_kernel

from egg_worker import gpulock, loader, settings

IR_FORMAT = "egg-graph"
IR_VERSION = 1
MAX_CONSTANT_ELEMENTS = 4096

_aten = torch.ops.aten


def _extra_decompositions() -> list:
    names = ["_softmax", "_log_softmax", "_native_batch_norm_legit_no_training", "_native_batch_norm_legit",
             "_native_batch_norm_legit_functional", "native_batch_norm", "native_group_norm", "native_layer_norm",
             "mse_loss", "huber_loss", "smooth_l1_loss", "nll_loss_forward", "nll_loss2d_forward", "kl_div",
             "binary_cross_entropy", "hardsigmoid", "hardswish", "mish", "silu", "softplus", "logsumexp", "norm",
             "linalg_vector_norm", "gelu", "elu", "leaky_relu", "hardtanh", "var_mean", "var", "std", "celu",
             "selu", "softshrink", "hardshrink", "threshold", "glu", "log_sigmoid_forward", "rms_norm",
             "_adaptive_avg_pool2d", "adaptive_avg_pool1d", "frobenius_norm", "cosine_similarity",
             "pairwise_distance", "margin_ranking_loss", "soft_margin_loss", "smooth_l1_loss", "addcmul",
             "addcdiv", "lerp", "instance_norm", "group_norm", "layer_norm", "batch_norm"]
    ops = []
    for name in names:
        packet = getattr(_aten, name, None)
        if packet is not None:
            ops.append(packet)
    return ops


# Whole recurrent layers stay one node each (the expert plans each as one recurrent kernel: a projection GEMM and a
# time loop per layer and direction): the core table would unroll them into a cell per time step and layer
# (36_LSTMHn: 3,072 cells), a graph too large to plan or compile.
_KEPT_WHOLE = ("lstm", "gru", "rnn_tanh", "rnn_relu")


def _split_with_sizes(tensor, split_sizes, dim=0):
    """The pieces as slices (views the planner reads in place), not one tuple-valued op left to PyTorch."""
    pieces, start = [], 0
    for size in split_sizes:
        pieces.append(_aten.slice.Tensor(tensor, dim, start, start + size))
        start += size
    return pieces


def _with_correction(correction_overload, with_dims: bool):
    """var/std/var_mean's CompositeImplicitAutograd overloads (`torch.var(t, dim=2, keepdim=True)` records
    `aten.var.dim`) as a call of their `correction` overload. run_decompositions applies a table entry for such an
    overload before functionalization, as the kernel it replaces would run; the table's entry for these is
    torch._refs' reference, whose keepdim path calls `prims.broadcast_in_dim`, a view prim that functionalization
    refuses ("custom (non-ATen) operator whose output has alias annotations"). The correction overload's own entry
    (the same reference) runs after functionalization, where it is traced into `prims.var` and
    `prims.broadcast_in_dim` as the normalisations' `var_mean` is: ops the expert lowers."""
    if with_dims:
        def call(tensor, dim=None, unbiased=True, keepdim=False):
            return correction_overload(tensor, dim, correction=1 if unbiased else 0, keepdim=keepdim)
    else:
        def call(tensor, unbiased=True):
            return correction_overload(tensor, None, correction=1 if unbiased else 0)
    return call


def decomposition_table() -> dict:
    """The table every capture decomposes with (a copy: `decomposed` drops entries from its own)."""
    return dict(_decomposition_table())


@functools.lru_cache(maxsize=1)
def _decomposition_table() -> dict:
    """Built once per process: it took a third of a small task's capture (0.33 of 1.3 s)."""
    from torch._decomp import core_aten_decompositions, get_decompositions

    table = dict(core_aten_decompositions())
    table.update(get_decompositions(_extra_decompositions()))
    table[_aten.split_with_sizes.default] = _split_with_sizes
    for packet in (_aten.var, _aten.std, _aten.var_mean):
        table[packet.dim] = _with_correction(packet.correction, with_dims=True)
        table[packet.default] = _with_correction(packet.correction, with_dims=False)
    for name in _KEPT_WHOLE:
        packet = getattr(_aten, name, None)
        for overload in (packet.overloads() if packet is not None else []):
            table.pop(getattr(packet, overload), None)
    return table


DTYPE_NAMES = {torch.float32: "float32", torch.float16: "float16", torch.bfloat16: "bfloat16",
               torch.float64: "float64", torch.int64: "int64", torch.int32: "int32", torch.int16: "int16",
               torch.int8: "int8", torch.uint8: "uint8", torch.bool: "bool"}


def dtype_name(dtype) -> str:
    return DTYPE_NAMES.get(dtype, str(dtype).replace("torch.", ""))


class NotLinearInBatch(Exception):
    """A size of a dynamic-batch capture that is not a*batch + d (two symbols, a product of them, a division)."""


# The symbols of a capture with several dynamic sizes, in the order of its dynamic dimensions (set by capture()
# while it writes the IR): their sizes are polynomials {"poly": [[c, [e0, e1, ...]], ...]} over them.
_SYMBOLS: list = []


def size_entry(size):
    """An int, or for a size that depends on the dynamic size B the linear form {"sym": [a, d]} (a*B + d) or, for
    one that grows with its square (an attention's scores over a dynamic sequence), {"sym": [q, a, d]}
    (q*B*B + a*B + d). With several dynamic sizes (_SYMBOLS), the polynomial {"poly": [[c, [e0, e1, ...]], ...]}
    (the sum of c * x0^e0 * x1^e1 ...), of degree 2 at most in each."""
    if not isinstance(size, torch.SymInt):
        return int(size)
    import sympy

    expr = sympy.expand(size.node.expr)
    if expr.is_Integer:
        return int(expr)
    # a stride torch writes for a size that may be 1 is Min(8, 8*s) in torch's own Min and Max: as sympy's, over
    # torch's positive symbol, each settles where its arguments' order does not depend on the size
    expr = sympy.expand(expr.replace(lambda e: type(e).__name__ in ("Min", "Max") and e.args,
                                     lambda e: getattr(sympy, type(e).__name__)(*e.args)))
    if expr.is_Integer:
        return int(expr)
    if _SYMBOLS:
        return _polynomial_entry(expr, sympy)
    symbols = expr.free_symbols
    if len(symbols) != 1:
        raise NotLinearInBatch(f"size {expr} depends on {len(symbols)} symbols")
    symbol = next(iter(symbols))
    try:
        poly = sympy.Poly(expr, symbol)
    except sympy.PolynomialError:
        raise NotLinearInBatch(f"size {expr} is not a polynomial in the dynamic size") from None
    if poly.degree() > 2 or not all(c.is_Integer for c in poly.all_coeffs()):
        raise NotLinearInBatch(f"size {expr} is not linear or quadratic in the dynamic size")
    return {"sym": [int(c) for c in poly.all_coeffs()]}


def _polynomial_entry(expr, sympy) -> dict:
    unknown = expr.free_symbols - set(_SYMBOLS)
    if unknown:
        raise NotLinearInBatch(f"size {expr} depends on {sorted(map(str, unknown))[0]}, no dynamic size")
    try:
        poly = sympy.Poly(expr, *_SYMBOLS)
    except sympy.PolynomialError:
        raise NotLinearInBatch(f"size {expr} is not a polynomial in the dynamic sizes") from None
    terms = poly.terms()
    if any(e > 2 for powers, _ in terms for e in powers) or not all(c.is_Integer for _, c in terms):
        raise NotLinearInBatch(f"size {expr} is of degree 3 or more in a dynamic size")
    return {"poly": [[int(c), [int(e) for e in powers]] for powers, c in terms]}


def tensor_meta(value) -> dict:
    return {"shape": [size_entry(s) for s in value.shape], "stride": [size_entry(s) for s in value.stride()],
            "offset": size_entry(value.storage_offset()), "dtype": dtype_name(value.dtype)}


def value_meta(value):
    if isinstance(value, torch.Tensor):
        return tensor_meta(value)
    if isinstance(value, (tuple, list)):
        return [value_meta(item) for item in value]
    return None


def encode_arg(value):
    """One argument of a node, as JSON (docs/expert.md: ARG)."""
    if isinstance(value, torch.fx.Node):
        if isinstance(value.meta.get("val"), torch.SymInt):  # a size of a dynamic-batch capture: inlined
            return size_entry(value.meta["val"])
        return {"node": value.name}
    if isinstance(value, torch.SymInt):
        return size_entry(value)
    if isinstance(value, bool) or value is None or isinstance(value, str):
        return value
    if isinstance(value, int):
        return int(value)
    if isinstance(value, float):
        if math.isnan(value):
            return {"float": "nan"}
        if math.isinf(value):
            return {"float": "inf" if value > 0 else "-inf"}
        return float(value)
    if isinstance(value, (tuple, list)):
        return [encode_arg(item) for item in value]
    if isinstance(value, torch.dtype):
        return {"dtype": dtype_name(value)}
    if isinstance(value, torch.device):
        return {"device": value.type}
    if isinstance(value, torch.layout):
        return {"layout": str(value).replace("torch.", "")}
    if isinstance(value, torch.memory_format):
        return {"memory_format": str(value).replace("torch.", "")}
    return {"repr": repr(value)}


def op_name(target) -> str:
    if target is operator.getitem:
        return "getitem"
    if isinstance(target, torch._ops.OpOverload):
        namespace = target.namespace
        return f"{namespace}.{target._schema.name.split('::')[-1]}.{target._overloadname}"
    return getattr(target, "__name__", repr(target))


def _constant_entry(name: str, target: str, value) -> dict:
    entry = {"name": name, "kind": "constant", "target": target, "meta": tensor_meta(value)}
    if value.numel() <= MAX_CONSTANT_ELEMENTS:
        entry["values"] = [encode_arg(item) for item in value.detach().cpu().reshape(-1).tolist()]
    return entry


MUTATED_CONSTANT = "is mutated in the forward method"
# Metadata checks torch.export records (`x.to(device)` is one): nothing to compute.
_CHECKS = (_aten._assert_tensor_metadata.default,)
# A dynamic-batch capture's size arithmetic and range assertions (sizes are inlined where used as linear forms).
_SIZE_OPS = (_aten.sym_size.int, _aten._assert_scalar.default, _aten.sym_constrain_range_for_size.default,
             _aten.sym_constrain_range.default)


def _is_size_node(node) -> bool:
    value = node.meta.get("val")
    return (node.target in _SIZE_OPS or isinstance(value, (torch.SymInt, torch.SymBool, torch.SymFloat))
            or getattr(node.target, "__module__", None) in ("_operator", "operator") and node.target is not operator.getitem)


def graph_ir(exported, inputs: list) -> dict:
    """The JSON IR of a decomposed ExportedProgram whose user inputs are `inputs` (positional)."""
    from torch.export.graph_signature import InputKind, OutputKind

    signature = exported.graph_signature
    kinds = {spec.arg.name: spec for spec in signature.input_specs}
    state_dict = exported.state_dict
    ir = {"format": IR_FORMAT, "version": IR_VERSION, "torch": torch.__version__, "mode": "eval",
          "inputs": [], "state": [], "nodes": [], "outputs": [], "mutations": []}
    position = 0
    for node in exported.graph.nodes:
        if node.op == "placeholder":
            spec = kinds[node.name]
            value = node.meta.get("val")
            if spec.kind == InputKind.USER_INPUT:
                entry = {"name": node.name, "position": position}
                actual = inputs[position] if position < len(inputs) else None
                if isinstance(value, torch.Tensor):
                    entry.update(kind="tensor", meta=tensor_meta(value))
                else:
                    entry.update(kind="scalar", value=encode_arg(actual if value is None else value))
                ir["inputs"].append(entry)
                position += 1
            elif spec.kind in (InputKind.PARAMETER, InputKind.BUFFER):
                kind = "parameter" if spec.kind == InputKind.PARAMETER else "buffer"
                ir["state"].append({"name": node.name, "kind": kind, "target": spec.target,
                                    "meta": tensor_meta(value),
                                    "persistent": bool(getattr(spec, "persistent", True))})
            elif spec.kind in (InputKind.CONSTANT_TENSOR,):
                constant = exported.constants.get(spec.target, state_dict.get(spec.target))
                ir["state"].append(_constant_entry(node.name, spec.target,
                                                   constant if constant is not None else value))
            else:
                raise NotImplementedError(f"input kind {spec.kind.name} of {node.name}")
        elif node.op == "call_function":
            if node.target in _CHECKS and not node.users or _is_size_node(node):
                continue
            ir["nodes"].append({"name": node.name, "op": op_name(node.target),
                                "args": [encode_arg(arg) for arg in node.args],
                                "kwargs": {key: encode_arg(arg) for key, arg in node.kwargs.items()},
                                "meta": value_meta(node.meta.get("val"))})
        elif node.op == "output":
            results = node.args[0]
            for spec, result in zip(signature.output_specs, results):
                if spec.kind == OutputKind.USER_OUTPUT:
                    ir["outputs"].append(encode_arg(result))
                elif spec.kind == OutputKind.BUFFER_MUTATION:
                    ir["mutations"].append({"target": spec.target, "value": encode_arg(result)})
                else:
                    raise NotImplementedError(f"output kind {spec.kind.name}")
        elif node.op == "get_attr":
            raise NotImplementedError(f"get_attr {node.target}")
    fix_recurrent_state_meta(ir)
    return ir


def _dense_meta(meta: dict) -> dict:
    if any(isinstance(size, dict) for size in meta["shape"]):
        raise NotLinearInBatch("a recurrent layer's state does not take a dynamic batch yet")
    stride, step = [], 1
    for size in reversed(meta["shape"]):
        stride.insert(0, step)
        step *= max(int(size), 1)
    return {**meta, "stride": stride, "offset": 0}


def fix_recurrent_state_meta(ir: dict) -> None:
    """h_n (and c_n) of a whole recurrent layer have h0's shape, [layers x directions, batch, hidden].
    torch 2.11's fake CUDA lstm gives them [layers, 1, batch, hidden] (36_LSTMHn on the H200), a shape no
    forward returns: the state outputs of the node and the getitems that take them get h0's shape, dense."""
    metas = {entry["name"]: entry.get("meta") for entry in ir["inputs"] + ir["state"]}
    metas.update({node["name"]: node.get("meta") for node in ir["nodes"]})
    for node in ir["nodes"]:
        if node["op"].split(".")[1:2] not in (["lstm"], ["gru"], ["rnn_tanh"], ["rnn_relu"]):
            continue
        outputs = node.get("meta")
        hx = node["args"][1] if len(node["args"]) > 1 else None
        first = hx[0] if isinstance(hx, list) and hx else hx
        h0 = metas.get(first.get("node")) if isinstance(first, dict) else None
        if not isinstance(outputs, list) or not isinstance(h0, dict):
            continue
        state = _dense_meta(h0)
        for index in range(1, len(outputs)):
            outputs[index] = state
        for user in ir["nodes"]:
            args = user["args"]
            if (user["op"] == "getitem" and len(args) == 2 and args[0] == {"node": node["name"]}
                    and isinstance(args[1], int) and args[1] >= 1):
                user["meta"] = state


def _returns_kind(reference_output) -> str:
    if isinstance(reference_output, torch.Tensor):
        return "tensor"
    if isinstance(reference_output, tuple):
        return "tuple"
    if isinstance(reference_output, list):
        return "list"
    return type(reference_output).__name__


def _tensor_attributes_as_buffers(model) -> None:
    """Plain tensor attributes become non-persistent buffers of this model (which is only exported)."""
    for module in model.modules():
        for name, value in list(vars(module).items()):
            if isinstance(value, torch.Tensor) and not isinstance(value, torch.nn.Parameter):
                delattr(module, name)
                module.register_buffer(name, value, persistent=False)


def batch_shapes(model, inputs: list, sizes: list):
    """torch.export's dynamic_shapes for dynamic sizes [(dim, batch_max), ...]: dim `dim` (0: the batch) of every
    tensor input that has it is one symbol, 1..batch_max, laid out as `model.forward`'s parameters take the inputs
    (a `*inputs` parameter takes the rest as one tuple)."""
    from torch.export import Dim

    symbols = {dim: Dim("batch" if dim == 0 else f"dim{dim}", min=1, max=batch_max) for dim, batch_max in sizes}
    specs = [({dim: symbol for dim, symbol in symbols.items() if x.dim() > dim} or None)
             if isinstance(x, torch.Tensor) else None for x in inputs]
    shapes = []
    for parameter in inspect.signature(model.forward).parameters.values():
        if parameter.kind == inspect.Parameter.VAR_POSITIONAL:
            return tuple(shapes) + (tuple(specs[len(shapes):]),)
        if parameter.kind in (inspect.Parameter.POSITIONAL_ONLY, inspect.Parameter.POSITIONAL_OR_KEYWORD):
            shapes.append(specs[len(shapes)] if len(shapes) < len(specs) else None)
    return tuple(shapes[:len(specs)])


def _exported(model, inputs: list, sizes: list = ()):
    # scaled_dot_product_attention in its math form (the matrix products and softmax egg plans), whatever the
    # device: on CUDA the default dispatch records one fused library op (_scaled_dot_product_efficient_attention
    # for float32 on the H200) that no decomposition breaks up, which would leave the attention to PyTorch.
    with sdpa_kernel([SDPBackend.MATH]):
        with torch.no_grad():
            shapes = batch_shapes(model, inputs, sizes) if sizes else None
            exported = torch.export.export(model, tuple(inputs), dynamic_shapes=shapes, strict=False)
        return decomposed(exported, decomposition_table())


MAX_KEPT_UNDECOMPOSED = 8
_FAILED_NODE = re.compile(r"While executing %(\w+)")


def decomposed(exported, table: dict):
    """`exported` decomposed with `table`. PyTorch runs the module, so a decomposition that fails on one of its ops
    (torch names the node: "While executing %var ...") must not fail the capture: that op is kept undecomposed
    (its table entry dropped, for this capture) and the decomposition runs again. The compiler lowers it when it
    knows the op, else it runs in PyTorch (an extern node). At most MAX_KEPT_UNDECOMPOSED ops are kept so."""
    table, kept = dict(table), []
    while True:
        try:
            return exported.run_decompositions(table)
        except Exception as error:  # torch raises RuntimeError, AssertionError, TypeError... from a decomposition
            target = None if MUTATED_CONSTANT in str(error) else _failed_target(exported, str(error))
            if target is None or target not in table or len(kept) >= MAX_KEPT_UNDECOMPOSED:
                raise
            table.pop(target)
            kept.append(target)


def _failed_target(exported, message: str):
    match = _FAILED_NODE.search(message)
    if match is None:
        return None
    for node in exported.graph.nodes:
        if node.name == match.group(1) and node.op == "call_function":
            return node.target
    return None


def _dynamic_symbols(exported, sizes: list) -> list:
    """The symbol of each dynamic size [(dim, batch_max), ...] in the exported program: dim `dim` of the first
    user input tensor that has one; NotLinearInBatch when export fixed it to a number."""
    from torch.export.graph_signature import InputKind

    kinds = {spec.arg.name: spec.kind for spec in exported.graph_signature.input_specs}
    values = [node.meta.get("val") for node in exported.graph.nodes
              if node.op == "placeholder" and kinds.get(node.name) == InputKind.USER_INPUT]
    symbols = []
    for dim, _ in sizes:
        value = next((v for v in values if isinstance(v, torch.Tensor) and v.dim() > dim), None)
        size = value.shape[dim] if value is not None else None
        if not isinstance(size, torch.SymInt) or not size.node.expr.is_Symbol:
            raise NotLinearInBatch(f"the forward specializes the {loader.dim_name(dim)} to one size")
        symbols.append(size.node.expr)
    return symbols


def _dynamic_entry(exported, symbols: list, sizes: list, inputs: list) -> dict:
    """The IR's "dynamic": each size's dimension, its range as torch.export proved it (a forward may narrow ours)
    and the example's size; one size flat ({"dim", "axis", "min", "max", "example"}), several as {"dims": [...]}."""
    entries = []
    for symbol, (dim, batch_max) in zip(symbols, sizes):
        bounds = exported.range_constraints.get(symbol)
        lower = int(bounds.lower) if bounds is not None else 1
        upper = int(bounds.upper) if bounds is not None and bounds.upper.is_integer else batch_max
        entries.append({"dim": "batch" if dim == 0 else f"dim{dim}", "axis": dim,
                        "example": loader.example_batch(inputs, dim),
                        "min": max(lower, 1), "max": min(upper, batch_max)})
    return entries[0] if len(entries) == 1 else {"dims": entries}


def capture(model, inputs: list, batch_max: int = 0, dim: int = 0, sizes: list = ()) -> dict:
    """Export and decompose `model` on `inputs`; the IR, with `returns` saying how the forward packs outputs and
    `settings` the plain attributes its forward read (egg_worker.settings), whose values the graph holds.
    `batch_max` > 0: dim `dim` of every tensor input that has it (0: the batch) is one symbol from 1 to batch_max,
    and every size that depends on it is written as the linear form {"sym": [a, d]}; the IR's "dynamic" gives its
    dimension ("dim": "batch" or "dim1"..., "axis": the index) and range. `sizes` [(dim, batch_max), ...] gives
    several dynamic sizes instead (their sizes as {"poly": ...}, "dynamic": {"dims": [...]})."""
    sizes = list(sizes) or ([(dim, batch_max)] if batch_max else [])
    try:
        exported = _exported(model, inputs, sizes)
    except RuntimeError as error:
        # A plain tensor attribute that forward reassigns (33_VanillaRNN's `self.hidden`) is a constant the
        # decomposition refuses to see mutated; as a buffer its new value is a mutation (ModelNew writes it back
        # into the attribute). Attributes forward only reads stay lifted constants.
        if MUTATED_CONSTANT not in str(error):
            raise
        _tensor_attributes_as_buffers(model)
        exported = _exported(model, inputs, sizes)
    with torch.no_grad(), gpulock.held("capture forward"), settings.recording(model) as reads:
        reference_output = model(*inputs)
    symbols = _dynamic_symbols(exported, sizes) if sizes else []
    _SYMBOLS[:] = symbols if len(symbols) > 1 else []
    try:
        ir = graph_ir(exported, inputs)
    finally:
        _SYMBOLS.clear()
    ir["returns"] = _returns_kind(reference_output)
    ir["settings"] = reads.entries()
    if sizes:
        ir["dynamic"] = _dynamic_entry(exported, symbols, sizes, inputs)
    return ir


def handle_capture(request: dict) -> dict:
    task = loader.load_task(_field(request, "task"), loader.precision_name(request.get("precision")))
    device = loader.resolve_device(request.get("device"))
    init_seed = int(request.get("init_seed", 42))
    seed = int(request.get("seed", 42))
    with gpulock.held("capture inputs"):  # export traces with fake tensors: only these and the one real forward use the GPU
        model = loader.build_model(task.Model, task, device, init_seed)
        inputs = loader.make_inputs(task, seed, device)
    dynamic = request.get("dynamic") or {}
    try:
        sizes = loader.dynamic_fields(request)
    except (TypeError, ValueError) as error:
        raise loader.RequestError(f"bad capture request: {loader.one_line(error)}") from None
    name = " and ".join(loader.dim_name(dim) for dim, _ in sizes) or "batch"
    try:
        resolved = []
        for dim, batch_max in sizes:
            one = loader.dim_name(dim)
            try:
                example = loader.example_batch(inputs, dim)
            except loader.TaskError as error:
                raise NotLinearInBatch(str(error)) from None
            batch_max = batch_max or example
            if example < 2:
                raise NotLinearInBatch(f"the task's inputs have {one} 1, a size torch.export keeps fixed (its "
                                       f"inputs need a {one} of 2 or more)")
            if batch_max < 2:
                raise NotLinearInBatch(f"a range of {one} sizes 1..{batch_max} holds one size (--max-batch sets "
                                       "a larger one)")
            resolved.append((dim, batch_max))
        ir = capture(model, inputs, sizes=resolved)
    except NotLinearInBatch as error:
        return {"status": "unsupported", "reason": f"no dynamic {name}: {error}"}
    except Exception as error:
        if dynamic and "onstraint" in str(error):  # torch.export: the forward fixes the size it was given
            return {"status": "unsupported",
                    "reason": f"no dynamic {name}: the forward fixes the {name} size ({loader.one_line(error)})"}
        return {"status": "unsupported", "reason": f"capture failed: {loader.one_line(error)}"}
    finally:
        del model, inputs
        gpulock.release_memory()
    ir["task"] = task.path
    ir["device"] = device.type
    return {"status": "ok", "graph": ir}


def _field(request: dict, name: str):
    value = request.get(name)
    if not isinstance(value, str) or not value:
        raise loader.RequestError(f"capture needs a string field {name!r}")
    return value
