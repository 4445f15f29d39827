"""Reduced-size copies of KernelBench tasks, so CPU tests (Triton's interpreter) can run real tasks.

`reduce_task(path, preset="aligned", max_elements=65536)` -> ReducedTask. Its `source` is the task's text with the
literal values of the size globals replaced (module-level assignments of ints, or tuples/lists of ints, to public
names, and int literals inside `get_inputs`), one header comment line added and every other byte unchanged.
Integers <= 16 are kept; equal old values get equal new values. `mapping` gives each rewritten global's new value
(and `get_inputs:<old>` for a literal of get_inputs). The first candidate sizing that validates is returned: the
Model builds seeded, get_inputs makes at most `max_elements` tensor elements and the forward pass (CPU, no_grad)
returns non-empty, finite tensors of the dtypes and ranks the unreduced task returns (found on the meta device).
Raises ReduceError (one line) when the file is unusable or nothing validates. Runs task code in this process.
With `widths` (whole models) the image can shrink under a classifier built for the full image: a Linear whose
in_features is a product of literals (`nn.Linear(512 * 7 * 7, 4096)`) gets the trailing equal small factors of that
product (the final feature map's side) rewritten so that it equals the flattened size the reduced image gives, which
the failing forward's shape error tells (mapping key `model:512 * 7 * 7`, value the new product's text); a pool
given its window alone (`nn.AvgPool2d(7)`) that outgrows the reduced final map gets its side (`pool:7`); and an
input's image side is tried held at a floor (8 to 64) while all else shrinks, for pools that need a large image.
A parameter default of the classes that must divide a feature map at every stage (Swin's `window_size=7`) is
shrunk with the image: when the forward fails with a view/reshape shape naming a small default's value (`shape
'[1, 1, 7, 1, 7, 1]' is invalid`), the defaults of that parameter name and value all step down by one until the view
fits (mapping key `default:window_size=7`, value the new default); a candidate so fitted that still fails (a
window clamped to a 1x1 final map) is tried again with its image side doubled and its batch divided by 4.
CLI: `python -m egg_worker.reduce TASK.py --out OUT.py [--preset aligned|odd] [--max-elements N]` writes OUT.py
and prints the mapping as one JSON line; on failure one line on stderr and exit 2.
"""

import argparse
import ast
import contextlib
import dataclasses
import importlib.util
import io
import itertools
import json
import math
import operator
import os
import re
import sys
import warnings

import torch

from egg_worker.loader import one_line

SMALL_LIMIT = 16  # integers up to this are dims, kernel sizes, strides, groups, padding: kept as they are
BLOCK_MULTIPLE = 16  # the odd preset avoids multiples of this, so kernels meet sizes that are no block multiple
MIN_DIVISOR = 2  # a small integer from 2 up can be a divisibility constraint (1 divides everything)
DEFAULT_MAX_ELEMENTS = 65536
INIT_SEED = 0
MAX_FULL_VALIDATIONS = 64  # candidates that fit the budget and get a Model built; bounds the time per task (a
# whole model that no candidate of a budget fits, as Swin V2 at 4096 input elements, tries this many)
RAISE_FLOORS = (8, 16, 32, 64)  # lower bounds tried when a conv or pool needs bigger sizes
LAST_RESORT_TIERS = ((2, 1, 1), (1, 1, 1))  # for the values left to shrink when one size must stay as it is
EXIT_BAD_INPUT = 2
# Errors saying a size is too small: any candidate no bigger in every value fails the same way.
TOO_SMALL_ERROR = re.compile(r"too small|can't be greater than|smaller than", re.IGNORECASE)
GET_INPUTS = "get_inputs"
GET_INIT_INPUTS = "get_init_inputs"
MODEL_CODE = "model"  # integer literals in the task's classes (layer widths), rewritten only with widths=True
BATCH_GLOBAL = "batch_size"  # with widths=True reduced even when small (whole models at a fixed image size)
TASK_NAMES = ("Model", GET_INPUTS, GET_INIT_INPUTS)
# A Linear's input of the wrong width, on the CPU and on the meta device: (its features, the in_features expected).
LINEAR_MISMATCH = (re.compile(r"mat1 and mat2 shapes cannot be multiplied \((\d+)x(\d+) and (\d+)x(\d+)\)"),
                   re.compile(r"must have same reduction dim, but got \[(\d+), (\d+)\] X \[(\d+), (\d+)\]"))
# A pool whose window is bigger than its input (channels x spatial sides), on the CPU and on the meta device.
POOL_TOO_SMALL = re.compile(r"Given input size: \((\d+(?:x\d+)+)\)\. Calculated output size: \([\dx]+\)\. "
                            r"Output size is too small")
# A view/reshape to a shape that does not fit its input (Swin's window partition of a map no window multiple).
VIEW_INVALID = re.compile(r"shape '\[([-\d, ]+)\]' is invalid for input of size \d+")
IMAGE_GROWTH = 4  # a square image's elements when its side doubles: the batch is divided by this (_widened)
DEFAULT_KEY = "default"  # mapping key prefix of a class parameter default shrunk to fit a view (`default:name=7`)
# Pools whose window, given alone (stride = window), is the whole final feature map (MobileNetV1's AvgPool2d(7)).
WHOLE_MAP_POOLS = frozenset(f"{kind}Pool{dims}d" for kind in ("Avg", "Max") for dims in (1, 2, 3))

_FOLD_OPERATORS = {ast.Add: operator.add, ast.Sub: operator.sub, ast.Mult: operator.mul,
                   ast.FloorDiv: operator.floordiv, ast.Mod: operator.mod}
_module_numbers = itertools.count()


class ReduceError(Exception):
    """The task cannot be reduced; str() is the one-line reason."""


@dataclasses.dataclass(frozen=True)
class Preset:
    """Target sizes by rank: `tiers` for the largest values (one tier per budget step, biggest first), `rest` for
    the others; `avoid` is a multiple new sizes should not be, where their constraints allow (0: none)."""

    tiers: tuple
    rest: tuple
    avoid: int = 0


PRESETS = {
    "aligned": Preset(tiers=((64, 48, 32), (32, 24, 16), (16, 12, 8), (8, 6, 4), (4, 3, 2)), rest=(8, 6, 4, 2)),
    "odd": Preset(tiers=((45, 37, 29), (29, 23, 19), (19, 13, 11), (11, 7, 5), (5, 3, 2)),
                  rest=(11, 9, 7, 5, 3, 2), avoid=BLOCK_MULTIPLE),
}


@dataclasses.dataclass(frozen=True)
class Slot:
    """One literal to rewrite: its byte span in the source, its value, the globals it is assigned to (none for a
    literal of get_inputs), and whether it is live (not overwritten by a later module-level assignment)."""

    start: int
    end: int
    value: object
    names: tuple
    live: bool = True
    where: str = ""  # a literal of no global: GET_INPUTS or MODEL_CODE


@dataclasses.dataclass(frozen=True)
class Product:
    """A Linear's in_features written as a product of integer literals in the task's classes (`512 * 7 * 7`): the
    expression's byte span and each factor's (start, end, value), left to right."""

    start: int
    end: int
    factors: tuple


@dataclasses.dataclass
class TaskSizes:
    path: str
    source: bytes
    slots: list
    small_globals: frozenset  # integers 2..16 among the size globals
    small_code: frozenset  # integers 2..16 anywhere in the file
    batches: frozenset = frozenset()  # with widths: a batch global's value, however small (reduced too)
    products: tuple = ()  # with widths: the Linear in_features written as products of literals
    pools: tuple = ()  # with widths: (start, end, value) of each pool window given alone as a literal
    defaults: tuple = ()  # with widths: ((name, value), ((start, end), ...)) of the classes' small int defaults
    widths: bool = False  # read with widths (a whole model: its class literals are sizes too)

    @property
    def large_values(self) -> list:
        """Distinct integers > SMALL_LIMIT in the slots, and the batches, largest first."""
        return sorted({v for slot in self.slots if slot.live for v in _leaves(slot.value) if v > SMALL_LIMIT}
                      | self.batches, reverse=True)


@dataclasses.dataclass
class ReducedTask:
    """The reduced copy's text, the rewritten globals with their new values, and its input tensor elements."""

    source: str
    mapping: dict
    input_elements: int
    values: dict  # old integer -> new integer


@dataclasses.dataclass
class Outcome:
    ok: bool
    elements: int = -1  # -1: the inputs were never counted
    error: str = ""
    module: object = None
    fatal: bool = False  # no sizing can help (e.g. a module the task imports is missing)


# ---- reading the task ------------------------------------------------------------------------------------------

def _leaves(value):
    """The leaves of a (nested) tuple/list: its integers for a size value, its tensors for a result."""
    if isinstance(value, (tuple, list)):
        for item in value:
            yield from _leaves(item)
    else:
        yield value


def _is_size(value) -> bool:
    if isinstance(value, (tuple, list)):
        return len(value) > 0 and all(_is_size(item) for item in value)
    return type(value) is int


def fold(node):
    """The value of a literal-only expression (numbers, tuples, lists, + - * // %), or None."""
    if isinstance(node, ast.Constant):
        return node.value if type(node.value) in (int, float) else None
    if isinstance(node, (ast.Tuple, ast.List)):
        items = [fold(element) for element in node.elts]
        if any(item is None for item in items):
            return None
        return tuple(items) if isinstance(node, ast.Tuple) else items
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.USub):
        operand = fold(node.operand)
        return -operand if type(operand) in (int, float) else None
    if isinstance(node, ast.BinOp) and type(node.op) in _FOLD_OPERATORS:
        left, right = fold(node.left), fold(node.right)
        if left is None or right is None:
            return None
        try:
            return _FOLD_OPERATORS[type(node.op)](left, right)
        except (TypeError, ZeroDivisionError):
            return None
    return None


class _Spans:
    """Byte offsets of AST nodes (ast columns count UTF-8 bytes)."""

    def __init__(self, source: bytes):
        self.line_starts = [0]
        for line in source.splitlines(keepends=True):
            self.line_starts.append(self.line_starts[-1] + len(line))

    def of(self, node) -> tuple:
        return (self.line_starts[node.lineno - 1] + node.col_offset,
                self.line_starts[node.end_lineno - 1] + node.end_col_offset)


def _value_slots(node, names: tuple, spans: _Spans) -> list:
    """Slots for an assigned value: a tuple/list display element by element, a literal expression as a whole."""
    if isinstance(node, (ast.Tuple, ast.List)):
        return [slot for element in node.elts for slot in _value_slots(element, names, spans)]
    value = fold(node)
    return [Slot(*spans.of(node), value, names)] if _is_size(value) else []


def _assignment_slots(node, spans: _Spans) -> list:
    targets = node.targets if isinstance(node, ast.Assign) else [node.target]
    if node.value is None:
        return []
    if len(targets) == 1 and isinstance(targets[0], (ast.Tuple, ast.List)):
        return _unpacking_slots(targets[0], node.value, spans)
    if not all(isinstance(target, ast.Name) for target in targets):
        return []
    names = tuple(target.id for target in targets)
    return [] if any(name.startswith("_") for name in names) else _value_slots(node.value, names, spans)


def _unpacking_slots(target, value, spans: _Spans) -> list:
    """`d, h, w = 16, 32, 32`: each element of the value is a slot of its own name."""
    if not isinstance(value, (ast.Tuple, ast.List)) or len(value.elts) != len(target.elts):
        return []
    slots = []
    for name, element in zip(target.elts, value.elts):
        if isinstance(name, ast.Name) and not name.id.startswith("_"):
            slots.extend(_value_slots(element, (name.id,), spans))
    return slots


def _assigned_names(node) -> set:
    targets = node.targets if isinstance(node, ast.Assign) else [node.target]
    return {name.id for target in targets for name in ast.walk(target) if isinstance(name, ast.Name)}


def _module_slots(tree, spans: _Spans) -> list:
    """Slots of the module-level assignments; one whose names are all assigned again later is not live."""
    statements = [node for node in tree.body if isinstance(node, (ast.Assign, ast.AnnAssign))]
    slots = []
    for index, node in enumerate(statements):
        later = set().union(*(_assigned_names(other) for other in statements[index + 1:]))
        slots += [dataclasses.replace(slot, live=not set(slot.names) <= later)
                  for slot in _assignment_slots(node, spans)]
    return slots


def _literal_slots(tree, spans: _Spans, where: str) -> list:
    """Integer literals > SMALL_LIMIT inside the function `where` (get_inputs: `torch.rand(batch_size, 3, 224,
    224)`; get_init_inputs: `[32, num_classes]`), or inside the task's classes for MODEL_CODE
    (`nn.Conv2d(64, 192, 3)`, `nn.Linear(512 * 7 * 7, 4096)`, `img_size=224`)."""
    slots = []
    for node in tree.body:
        if isinstance(node, ast.ClassDef) if where == MODEL_CODE else (
                isinstance(node, ast.FunctionDef) and node.name == where):
            for inner in ast.walk(node):
                if isinstance(inner, ast.Constant) and type(inner.value) is int and inner.value > SMALL_LIMIT:
                    slots.append(Slot(*spans.of(inner), inner.value, (), where=where))
    return slots


def _factors(node):
    """The integer literals multiplied by `node` (a * b * c), or None when it is anything else."""
    if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Mult):
        left, right = _factors(node.left), _factors(node.right)
        return None if left is None or right is None else left + right
    if isinstance(node, ast.Constant) and type(node.value) is int:
        return [node]
    return None


def _linear_products(tree, spans: _Spans) -> tuple:
    """The in_features of the Linear layers of the task's classes written as a product of literals."""
    products = []
    for node in tree.body:
        if not isinstance(node, ast.ClassDef):
            continue
        for call in ast.walk(node):
            if not isinstance(call, ast.Call) or getattr(call.func, "id", getattr(call.func, "attr", "")) != "Linear":
                continue
            argument = call.args[0] if call.args else next(
                (keyword.value for keyword in call.keywords if keyword.arg == "in_features"), None)
            factors = _factors(argument)
            if factors and len(factors) > 1:
                products.append(Product(*spans.of(argument),
                                        tuple((*spans.of(factor), factor.value) for factor in factors)))
    return tuple(products)


def _whole_map_pools(tree, spans: _Spans) -> tuple:
    """(start, end, value) of the window of each pool of the task's classes called with one int literal <=
    SMALL_LIMIT alone (`nn.AvgPool2d(7)`: no stride, padding or other argument)."""
    pools = []
    for node in tree.body:
        if not isinstance(node, ast.ClassDef):
            continue
        for call in ast.walk(node):
            if (isinstance(call, ast.Call) and getattr(call.func, "id", getattr(call.func, "attr", "")) in
                    WHOLE_MAP_POOLS and len(call.args) == 1 and not call.keywords
                    and isinstance(call.args[0], ast.Constant) and type(call.args[0].value) is int
                    and call.args[0].value <= SMALL_LIMIT):  # a larger window is a size widths rewrites
                pools.append((*spans.of(call.args[0]), call.args[0].value))
    return tuple(pools)


def _small_defaults(tree, spans: _Spans) -> tuple:
    """The int literal defaults 2..SMALL_LIMIT of the parameters of the functions of the task's classes, grouped by
    (parameter name, value) in order of first appearance: ((name, value), ((start, end), ...)) (Swin's
    `window_size=7`, the default of its block and of its Model)."""
    groups = {}
    for node in tree.body:
        if not isinstance(node, ast.ClassDef):
            continue
        for function in ast.walk(node):
            if not isinstance(function, (ast.FunctionDef, ast.AsyncFunctionDef)):
                continue
            arguments = function.args
            positional = arguments.posonlyargs + arguments.args
            pairs = list(zip(positional[len(positional) - len(arguments.defaults):], arguments.defaults))
            pairs += [(argument, default) for argument, default in zip(arguments.kwonlyargs, arguments.kw_defaults)
                      if default is not None]
            for argument, default in pairs:
                if (isinstance(default, ast.Constant) and type(default.value) is int
                        and MIN_DIVISOR <= default.value <= SMALL_LIMIT):
                    groups.setdefault((argument.arg, default.value), []).append(spans.of(default))
    return tuple((key, tuple(spans_)) for key, spans_ in groups.items())


def _small(values) -> frozenset:
    return frozenset(v for v in values if MIN_DIVISOR <= v <= SMALL_LIMIT)


def read_task(path: str, widths: bool = False) -> TaskSizes:
    """The size slots of a task file (with `widths`, the integer literals of its classes too); ReduceError when it
    cannot be read or parsed."""
    try:
        with open(path, "rb") as task_file:
            source = task_file.read()
        source.decode("utf-8")
        tree = ast.parse(source, filename=path)
    except (OSError, SyntaxError, ValueError) as error:
        raise ReduceError(f"cannot read task {path}: {one_line(error)}") from None
    spans = _Spans(source)
    slots = _module_slots(tree, spans)
    batches = frozenset(slot.value for slot in slots if widths and slot.live and BATCH_GLOBAL in slot.names
                        and type(slot.value) is int and slot.value >= MIN_DIVISOR)
    small_globals = _small(v for slot in slots if slot.live for v in _leaves(slot.value)) - batches
    code_ints = (node.value for node in ast.walk(tree) if isinstance(node, ast.Constant) and type(node.value) is int)
    slots += _literal_slots(tree, spans, GET_INPUTS)
    products = pools = defaults = ()
    if widths:
        slots += _literal_slots(tree, spans, MODEL_CODE) + _literal_slots(tree, spans, GET_INIT_INPUTS)
        products, pools = _linear_products(tree, spans), _whole_map_pools(tree, spans)
        defaults = _small_defaults(tree, spans)
    return TaskSizes(path, source, slots, small_globals, _small(code_ints), batches, products, pools, defaults, widths)


# ---- writing the reduced copy ----------------------------------------------------------------------------------

def _apply(value, values: dict):
    if isinstance(value, tuple):
        return tuple(_apply(item, values) for item in value)
    if isinstance(value, list):
        return [_apply(item, values) for item in value]
    return values.get(value, value)


def render(value) -> str:
    """Python literal text of an int or a (nested) tuple/list of ints."""
    if isinstance(value, tuple):
        items = ", ".join(render(item) for item in value)
        return f"({items},)" if len(value) == 1 else f"({items})"
    if isinstance(value, list):
        return "[" + ", ".join(render(item) for item in value) + "]"
    return str(value)


def _edits(sizes: TaskSizes, values: dict, fixes: dict) -> list:
    """(start, end, new bytes) of each slot whose value changes under `values` (old int -> new int) and of each
    literal in `fixes` (its start -> (end, new int): a product factor or a pool window)."""
    edits = [(slot.start, slot.end, render(_apply(slot.value, values)).encode()) for slot in sizes.slots
             if _apply(slot.value, values) != slot.value]
    return edits + [(start, end, str(new).encode()) for start, (end, new) in fixes.items()]


def _edited(text: bytes, edits, offset: int = 0) -> bytes:
    for start, end, new in sorted(edits, reverse=True):
        text = text[:start - offset] + new + text[end - offset:]
    return text


def rewrite(sizes: TaskSizes, values: dict, fixes: dict = None) -> str:
    """The task source with each slot whose value changes under `values` (old int -> new int) replaced, and each
    literal in `fixes` (its start -> (end, new int))."""
    return _edited(sizes.source, _edits(sizes, values, fixes or {})).decode("utf-8")


def _changed_slots(sizes: TaskSizes, values: dict) -> list:
    return [slot for slot in sizes.slots if _apply(slot.value, values) != slot.value]


def _mapping(sizes: TaskSizes, values: dict, module, fixes: dict) -> dict:
    """Rewritten global -> its value in the validated module; `get_inputs:<old>` -> new for get_inputs literals
    (`model:<old>` for those of the classes, `get_init_inputs:<old>` for those of get_init_inputs); `model:<old
    product text>` -> the new product's text for a Linear's in_features fitted to the reduced image,
    `pool:<old window>` -> the new window of a whole-map pool, and `default:<name>=<old>` -> the new value of the
    class parameter defaults shrunk to fit a view."""
    mapping = {}
    for slot in _changed_slots(sizes, values):
        for name in slot.names:
            mapping[name] = getattr(module, name)
        if not slot.names:
            mapping[f"{slot.where}:{slot.value}"] = values[slot.value]
    edits = _edits(sizes, values, fixes)
    for product in sizes.products:
        if any(start in fixes for start, _, _ in product.factors):
            inside = [edit for edit in edits if product.start <= edit[0] and edit[1] <= product.end]
            old = sizes.source[product.start:product.end]
            mapping[f"{MODEL_CODE}:{old.decode()}"] = _edited(old, inside, product.start).decode()
    for start, _, value in sizes.pools:
        if start in fixes:
            mapping[f"pool:{value}"] = fixes[start][1]
    for (name, value), group in sizes.defaults:
        if group[0][0] in fixes:
            mapping[f"{DEFAULT_KEY}:{name}={value}"] = fixes[group[0][0]][1]
    return mapping


def header(path: str, preset: str, mapping: dict) -> str:
    return f"# Reduced copy of {path} (egg_worker.reduce, preset {preset}): {json.dumps(mapping, default=repr)}\n"


# ---- choosing sizes --------------------------------------------------------------------------------------------

def _round_up(number: int, step: int, avoid: int) -> int:
    """The smallest multiple of `step` >= number, skipping multiples of `avoid` (if not 0) when step allows it."""
    multiple = -(-number // step) * step
    while avoid and step % avoid and multiple % avoid == 0:
        multiple += step
    return multiple


def _targets(count: int, tier: tuple, preset: Preset) -> list:
    """Target sizes for `count` values, largest first: the tier, then the rest ladder below it."""
    if count == 0:
        return []
    rest = [size for size in preset.rest if size < min(tier)] or [1]
    targets = list(tier[:count]) + rest[:max(0, count - len(tier))]
    return targets + [targets[-1]] * (count - len(targets))


def _divisor_step(divisors: frozenset):
    def step(value: int, chosen: dict) -> int:
        return math.lcm(1, *(d for d in divisors if value % d == 0))
    return step


def _related_step(divisors: frozenset):
    """Like _divisor_step, and a new value is also a multiple of the new value of each smaller value dividing it."""
    def step(value: int, chosen: dict) -> int:
        smaller = (new for old, new in chosen.items() if value % old == 0)
        return math.lcm(_divisor_step(divisors)(value, chosen), *smaller)
    return step


@dataclasses.dataclass(frozen=True)
class Rule:
    """How a ranked candidate rounds its targets: each new value is a multiple of `step(value, chosen so far)`,
    above the new value of the next smaller old value (`strict`) and at least `floor` (or its old value)."""

    step: object
    strict: bool = True
    floor: int = 1
    avoid: int = 0


def ranked(values: list, targets: list, rule: Rule) -> dict:
    """old -> new for `values` (largest first), smallest first so each new value can respect the ones below it."""
    chosen, below = {}, 0
    for value, target in reversed(list(zip(values, targets))):
        lowest = below + 1 if rule.strict else max(below, 1)
        new = _round_up(max(target, lowest, min(rule.floor, value)), rule.step(value, chosen), rule.avoid)
        chosen[value] = min(new, value)
        below = chosen[value]
    return chosen


def _rules(sizes: TaskSizes, preset: Preset) -> list:
    """The rounding rules of one tier, most preferred first. A preset that avoids a multiple tries its targets
    unrounded first (small task integers often divide a size by accident), and ends with the rules not avoiding."""
    by_globals, unrounded = _divisor_step(sizes.small_globals), Rule(_divisor_step(frozenset()))
    rules = [Rule(by_globals), unrounded, Rule(by_globals, strict=False),
             Rule(_divisor_step(sizes.small_globals | sizes.small_code)), Rule(_related_step(sizes.small_globals))]
    if not preset.avoid:
        return rules
    return [dataclasses.replace(rule, avoid=preset.avoid) for rule in [unrounded] + rules] + rules


def _scaled(values: list) -> list:
    """All values divided by a common power of two (rounded up), which keeps their ratios; biggest first."""
    return [{value: max(1, -(-value >> shift)) for value in values} for shift in range(1, max(values).bit_length())]


def _main_candidates(values: list, sizes: TaskSizes, preset: Preset):
    """Tier by tier (biggest first), each rule's ranked candidate; then the scaled ones, biggest first."""
    rules = _rules(sizes, preset)
    for tier in preset.tiers:
        targets = _targets(len(values), tier, preset)
        for rule in rules:
            yield ranked(values, targets, rule)
    yield from _scaled(values)


def _keeping_one(values: list, preset: Preset, rule: Rule):
    """Every value but one shrunk, down to 1 if need be, for a task whose code needs that one size as it is."""
    tiers = preset.tiers + LAST_RESORT_TIERS
    for kept, strict, tier in itertools.product(values, (True, False), tiers):
        others = [value for value in values if value != kept]
        chosen = ranked(others, _targets(len(others), tier, preset), dataclasses.replace(rule, strict=strict))
        yield {**chosen, kept: kept}


def _raising_one(values: list, raised_values, preset: Preset, rule: Rule):
    """Every value but one shrunk, down to 1 if need be, and that one (an image side) only down to a floor: for a
    whole model whose pools need an image of some size while its widths and batch can be tiny."""
    tiers = preset.tiers + LAST_RESORT_TIERS
    for floor, raised in itertools.product(RAISE_FLOORS, raised_values):
        if floor >= raised:
            continue
        others = [value for value in values if value != raised]
        for strict, tier in itertools.product((True, False), tiers):
            chosen = ranked(others, _targets(len(others), tier, preset), dataclasses.replace(rule, strict=strict))
            yield {**chosen, raised: min(raised, _round_up(floor, rule.step(raised, chosen), rule.avoid))}


def candidates(sizes: TaskSizes, preset: Preset, input_sides: frozenset = frozenset()):
    """Candidate old -> new mappings, most preferred first (duplicates possible). `input_sides`: values that size
    the inputs' non-batch dimensions, each tried raised to a floor with all else shrunk (whole models, widths)."""
    values = sizes.large_values
    if not values:
        yield {}
        return
    yield from _main_candidates(values, sizes, preset)
    by_globals = Rule(_divisor_step(sizes.small_globals))
    for floor, tier in itertools.product(RAISE_FLOORS, preset.tiers):
        yield ranked(values, _targets(len(values), tier, preset), dataclasses.replace(by_globals, floor=floor))
    yield from _keeping_one(values, preset, by_globals)
    yield from _raising_one(values, sorted((input_sides & set(values)) - sizes.batches, reverse=True), preset,
                            by_globals)


# ---- validating a candidate ------------------------------------------------------------------------------------

def _load(path: str, source: str):
    """Execute `source` as a fresh module with the task's file name; the caller drops it from sys.modules."""
    name = f"egg_reduced_{next(_module_numbers)}"
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    directory = os.path.dirname(os.path.abspath(path))
    sys.modules[name] = module
    sys.path.insert(0, directory)
    try:
        exec(compile(source, path, "exec"), module.__dict__)
    finally:
        sys.path.remove(directory)
    return module


def _tensors(value) -> list:
    return [leaf for leaf in _leaves(value) if isinstance(leaf, torch.Tensor)]


def signature(output) -> tuple:
    """The kind of a forward result: dtype and rank of each tensor leaf, the type name of any other leaf."""
    return tuple((str(leaf.dtype), leaf.dim()) if isinstance(leaf, torch.Tensor) else type(leaf).__name__
                 for leaf in _leaves(output))


@contextlib.contextmanager
def _quiet():
    """Task code runs without printing to stdout, warning, or moving the caller's CPU random state."""
    with warnings.catch_warnings(), contextlib.redirect_stdout(io.StringIO()), torch.random.fork_rng(devices=[]):
        warnings.simplefilter("ignore")
        yield


def _input_elements(module) -> int:
    """Tensor elements get_inputs makes, counted on the meta device when it can be (nothing allocated)."""
    try:
        with torch.device("meta"):
            inputs = module.get_inputs()
    except Exception:
        inputs = module.get_inputs()
    return sum(tensor.numel() for tensor in _tensors(inputs))


def _meta_forward(module):
    """The forward result on the meta device (cheap: nothing is allocated or computed), or None for recurrent
    layers (on meta they step through time in Python, slower than the CPU); raises what the model raises."""
    with torch.device("meta"):
        model = module.Model(*module.get_init_inputs()).eval()
        inputs = module.get_inputs()
    if any(isinstance(layer, torch.nn.RNNBase) for layer in model.modules()):
        return None
    with torch.no_grad():
        return model(*inputs)


def _meta_check(module) -> tuple:
    """(error, signature) of a meta run: a shape error, or "" and the result's signature (None when meta cannot
    tell: an op without a meta kernel, .item(), recurrent layers)."""
    try:
        output = _meta_forward(module)
    except NotImplementedError:
        return "", None
    except Exception as error:
        message = one_line(error)
        return ("", None) if "meta" in message.lower() else (message, None)
    return "", None if output is None else signature(output)


def _output_problem(output, expected) -> str:
    """Why a forward result is unusable ("" when it is fine); `expected` is the task's signature, if known."""
    tensors = _tensors(output)
    if not tensors:
        return f"forward returned {type(output).__name__}, no tensor"
    if expected is not None and signature(output) != expected:
        return f"forward returned {signature(output)}, the task returns {expected}"
    for tensor in tensors:
        if tensor.numel() == 0:
            return f"forward returned an empty tensor of shape {tuple(tensor.shape)}"
        if (tensor.is_floating_point() or tensor.is_complex()) and not torch.isfinite(tensor).all():
            return "forward returned non-finite values"
    return ""


def _run(module, max_elements: int, expected) -> Outcome:
    missing = [name for name in TASK_NAMES if not hasattr(module, name)]
    if missing:
        return Outcome(False, error=f"task lacks {', '.join(missing)}")
    elements = _input_elements(module)
    if elements > max_elements:
        return Outcome(False, elements, f"{elements} input elements > {max_elements}")
    problem, _ = _meta_check(module)
    if problem:
        return Outcome(False, elements, problem)
    torch.manual_seed(INIT_SEED)
    model = module.Model(*module.get_init_inputs()).eval()
    inputs = module.get_inputs()
    with torch.no_grad():
        problem = _output_problem(model(*inputs), expected)
    return Outcome(not problem, elements, problem, module)


def validate(path: str, source: str, max_elements: int, expected=None) -> Outcome:
    """Whether `source` (a rewritten copy of the task at `path`) builds, fits the budget and runs on the CPU,
    returning results of the `expected` signature (None: any tensors)."""
    module = None
    with _quiet():
        try:
            module = _load(path, source)
            return _run(module, max_elements, expected)
        except Exception as error:
            return Outcome(False, error=one_line(error), fatal=isinstance(error, ImportError))
        finally:
            if module is not None:
                sys.modules.pop(module.__name__, None)


def _input_sides(module) -> frozenset:
    """The non-batch dimensions of the tensors get_inputs makes (on the meta device); empty when it fails."""
    try:
        with torch.device("meta"):
            inputs = module.get_inputs()
    except Exception:
        return frozenset()
    return frozenset(side for tensor in _tensors(inputs) for side in tensor.shape[1:])


def task_facts(sizes: TaskSizes) -> tuple:
    """(signature, input sides) of the unreduced task: its result's signature from a meta run (None when that cannot
    tell) and the non-batch dimensions of its inputs."""
    module = None
    with _quiet():
        try:
            module = _load(sizes.path, sizes.source.decode("utf-8"))
            return _meta_check(module)[1], _input_sides(module)
        except Exception:
            return None, frozenset()
        finally:
            if module is not None:
                sys.modules.pop(module.__name__, None)


def _linear_fix(sizes: TaskSizes, values: dict, fixes: dict, error: str) -> dict:
    """Factor rewrites (start -> (end, new int)) fitting one not yet fitted product to the features a Linear got, when
    `error` says a Linear got the wrong width and a product of the classes is the in_features it expected; {} when
    not. The product's trailing equal factors <= SMALL_LIMIT (the final feature map's side) become the root that
    makes it equal the width the Linear got; its other factors stay as `values` make them."""
    match = next((found for pattern in LINEAR_MISMATCH if (found := pattern.search(error))), None)
    if not match:
        return {}
    got, expected = int(match.group(2)), int(match.group(3))
    for product in sizes.products:
        if any(start in fixes for start, _, _ in product.factors):
            continue
        new = [values.get(value, value) if value > SMALL_LIMIT else value for _, _, value in product.factors]
        if math.prod(new) != expected:
            continue
        run = 0
        while run < len(new) and product.factors[-1 - run][2] <= SMALL_LIMIT and new[-1 - run] == new[-1]:
            run += 1
        rest = math.prod(new[:len(new) - run])
        if not run or got % rest:
            continue
        side = round((got // rest) ** (1 / run))
        if side >= 1 and side ** run == got // rest:
            return {start: (end, side) for start, end, _ in product.factors[len(new) - run:]}
    return {}


def _pool_fix(sizes: TaskSizes, fixes: dict, error: str) -> dict:
    """The window of the one not yet fitted whole-map pool that is bigger than the input `error` says a pool got
    (square, C x s x s, s >= 2), made s (the reduced image's final map); {} when there is no such single pool."""
    match = POOL_TOO_SMALL.search(error)
    sides = {int(side) for side in match.group(1).split("x")[1:]} if match else set()
    if len(sides) != 1:
        return {}
    side = sides.pop()
    if side < MIN_DIVISOR:
        return {}  # a window of 1 would pool nothing
    pools = [(start, end) for start, end, value in sizes.pools if start not in fixes and value > side]
    return {pools[0][0]: (pools[0][1], side)} if len(pools) == 1 else {}


def _default_fix(sizes: TaskSizes, fixes: dict, error: str) -> dict:
    """When `error` is a view/reshape to a shape that does not fit its input and the shape names the current value v
    of a group of small class parameter defaults (Swin's `window_size=7`, which must divide the feature map at every
    stage: `x.view(B, H // 7, 7, W // 7, 7, C)`), that group's defaults all made v - 1 (>= MIN_DIVISOR): the search
    steps it down until the windows fit the reduced image. Once a group is being shrunk, no other is; otherwise the
    value must name exactly one group. {} when there is no such group."""
    match = VIEW_INVALID.search(error)
    if not match:
        return {}
    shape = {int(number) for number in match.group(1).split(",")}
    current = [(group, fixes[group[0][0]][1] if group[0][0] in fixes else value)
               for (_, value), group in sizes.defaults]
    if any(group[0][0] in fixes for group, _ in current):  # a group being shrunk: only it goes on
        current = [(group, value) for group, value in current if group[0][0] in fixes]
    chosen = [(group, value) for group, value in current if value in shape and value > MIN_DIVISOR]
    if len(chosen) != 1:
        return {}
    group, value = chosen[0]
    return {start: (end, value - 1) for start, end in group}


def _fix(sizes: TaskSizes, values: dict, fixes: dict, error: str) -> dict:
    """Literal rewrites (start -> (end, new int)) fitting a whole model to a reduced image, from the error of its
    forward: a Linear's in_features product, a whole-map pool's window or a class parameter default a view needs
    to divide the map (Swin's window_size); {} when none."""
    return (_linear_fix(sizes, values, fixes, error) or _pool_fix(sizes, fixes, error)
            or _default_fix(sizes, fixes, error))


# ---- the search ------------------------------------------------------------------------------------------------

@dataclasses.dataclass
class _Failures:
    """What the rejected candidates say: for pruning the search and for the one-line error."""

    smallest_over_budget: int = 0
    first_error: str = ""
    full_validations: int = 0
    too_small: list = dataclasses.field(default_factory=list)  # candidates that failed for a size too small

    def note(self, values: dict, outcome: Outcome, max_elements: int) -> None:
        if outcome.elements > max_elements:
            if not self.smallest_over_budget or outcome.elements < self.smallest_over_budget:
                self.smallest_over_budget = outcome.elements
            return
        self.full_validations += 1
        self.first_error = self.first_error or outcome.error
        if TOO_SMALL_ERROR.search(outcome.error):
            self.too_small.append(values)

    def hopeless(self, values: dict) -> bool:
        """Whether a candidate is no bigger in any value than one that failed for a size too small."""
        return any(all(values[old] <= failed[old] for old in values) for failed in self.too_small)

    def exhausted(self) -> bool:
        return self.full_validations >= MAX_FULL_VALIDATIONS

    def message(self, path: str, max_elements: int) -> str:
        """The first error of a candidate within the budget (raising the budget may help), else the budget's."""
        if self.full_validations:
            return f"no reduced sizing of {path} validates ({self.full_validations} tried): {self.first_error}"
        return (f"no reduced sizing of {path} fits {max_elements} input elements "
                f"(the smallest tried has {self.smallest_over_budget})")


def _attempt(sizes: TaskSizes, values: dict, max_elements: int, expected) -> tuple:
    """(fixes, source, outcome) of one candidate, its literals fitted (_fix) while its forward's error says how."""
    fixes = {}
    source = rewrite(sizes, values)
    outcome = validate(sizes.path, source, max_elements, expected)
    while not outcome.ok and (more := _fix(sizes, values, fixes, outcome.error)):
        fixes.update(more)
        source = rewrite(sizes, values, fixes)
        outcome = validate(sizes.path, source, max_elements, expected)
    return fixes, source, outcome


def _defaults_fixed(sizes: TaskSizes, fixes: dict) -> bool:
    return any(group[0][0] in fixes for _, group in sizes.defaults)


def _widened(sizes: TaskSizes, values: dict, input_sides: frozenset) -> dict:
    """`values` with each reduced input side (not a batch) doubled, up to its old value, and each batch divided by
    IMAGE_GROWTH (rounded up): for windows shrunk to fit a reduced map (Swin) that still fail because the final
    stage's map is too small for them (a window of 1), one more stage's worth of image at about the same input
    elements. {} when no side can grow."""
    sides = [old for old in (input_sides & set(values)) - sizes.batches if values[old] < old]
    if not sides:
        return {}
    widened = dict(values)
    for old in sides:
        widened[old] = min(old, 2 * values[old])
    for old in sizes.batches & set(values):
        widened[old] = max(1, -(-values[old] // IMAGE_GROWTH))
    return widened


def _search(sizes: TaskSizes, preset: Preset, max_elements: int):
    """(values, fixes, source, outcome) of the first candidate that validates, its Linear products fitted to the
    features they get (fixes: literal start -> (end, new int)); ReduceError when none does. A candidate whose class
    defaults were shrunk to fit a view and still fails is tried again with its image widened (_widened)."""
    seen, failures = set(), _Failures()
    expected, input_sides = task_facts(sizes)
    for values in candidates(sizes, preset, input_sides if sizes.widths else frozenset()):
        key = tuple(sorted(values.items()))
        if key in seen or failures.hopeless(values):
            continue
        seen.add(key)
        fixes, source, outcome = _attempt(sizes, values, max_elements, expected)
        if not outcome.ok and not outcome.fatal and _defaults_fixed(sizes, fixes) \
                and (widened := _widened(sizes, values, input_sides)) \
                and (widened_key := tuple(sorted(widened.items()))) not in seen:
            seen.add(widened_key)
            failures.note(values, outcome, max_elements)
            values = widened
            fixes, source, outcome = _attempt(sizes, values, max_elements, expected)
        if outcome.ok:
            return values, fixes, source, outcome
        if outcome.fatal:
            raise ReduceError(f"cannot reduce {sizes.path}: {outcome.error}")
        failures.note(values, outcome, max_elements)
        if failures.exhausted():
            break
    raise ReduceError(failures.message(sizes.path, max_elements))


def reduce_task(path: str, preset: str = "aligned", max_elements: int = DEFAULT_MAX_ELEMENTS,
                widths: bool = False) -> ReducedTask:
    """A reduced-size copy of the KernelBench task at `path` (see the module docstring); ReduceError if none.
    `widths`: also rewrite the integer literals > 16 of the task's classes (whole models whose layer widths are
    written out, as in VGG, and constructor defaults such as Swin's img_size), equal values alike, the global
    batch_size even when it is small, and a Linear's in_features written as a product of literals fitted to the
    reduced image (VGG's `512 * 7 * 7`), as is a whole-map pool's window (MobileNetV1's `AvgPool2d(7)`) and a class
    parameter default a view needs to divide the map (Swin's `window_size=7`); an input's image side is also tried
    held at a floor with all else shrunk (VGG and DenseNet: one 32x32 image, widths of a few channels)."""
    if preset not in PRESETS:
        raise ReduceError(f"preset must be one of {', '.join(PRESETS)}, not {preset!r}")
    if max_elements < 1:
        raise ReduceError(f"max_elements must be positive, not {max_elements}")
    sizes = read_task(path, widths)
    values, fixes, source, outcome = _search(sizes, PRESETS[preset], max_elements)
    mapping = _mapping(sizes, values, outcome.module, fixes)
    changed = {old: new for old, new in values.items() if old != new}
    return ReducedTask(header(path, preset, mapping) + source, mapping, outcome.elements, changed)


# ---- command line ----------------------------------------------------------------------------------------------

class _Parser(argparse.ArgumentParser):
    def error(self, message):
        print(f"{self.prog}: {message}", file=sys.stderr)
        sys.exit(EXIT_BAD_INPUT)


def main(argv=None) -> int:
    parser = _Parser(prog="python -m egg_worker.reduce", description="Write a reduced-size copy of a KernelBench task.")
    parser.add_argument("task", help="a KernelBench task file")
    parser.add_argument("--out", required=True, help="where to write the reduced copy")
    parser.add_argument("--preset", choices=sorted(PRESETS), default="aligned",
                        help="aligned: sizes like 32, 48, 64; odd: sizes that are not multiples of 16")
    parser.add_argument("--max-elements", type=int, default=DEFAULT_MAX_ELEMENTS,
                        help=f"most input tensor elements (default {DEFAULT_MAX_ELEMENTS})")
    parser.add_argument("--widths", action="store_true",
                        help="also reduce the integer literals of the task's classes (layer widths)")
    args = parser.parse_args(argv)
    try:
        reduced = reduce_task(args.task, args.preset, args.max_elements, args.widths)
        with open(args.out, "w", encoding="utf-8") as out:
            out.write(reduced.source)
    except ReduceError as error:
        print(f"{parser.prog}: {error}", file=sys.stderr)
        return EXIT_BAD_INPUT
    except Exception as error:
        print(f"{parser.prog}: {one_line(error)}", file=sys.stderr)
        return EXIT_BAD_INPUT
    print(json.dumps(reduced.mapping, default=repr))
    return 0


if __name__ == "__main__":
    sys.exit(main())
