"""Variants of a model's configuration for the evaluate op's `variants` check (docs/harness.md, "Variants").

A kernel must not bake in a value that a user can set: `float_init_variant` gives other init arguments (every
float argument changed), `change_float_attributes` changes every plain float attribute of a built model and its
submodules. The harness builds the reference and the candidate the same way and compares them.
"""

import torch

SKIPPED_ATTRIBUTES = ("training",)


def _other_float(value: float) -> float:
    return value * 2.0 if value != 0.0 else 0.5


def _is_float(value) -> bool:
    return isinstance(value, float) and not isinstance(value, bool)


def float_init_variant(init_inputs: list):
    """The init arguments with every float argument changed, or None when there is none."""
    if not any(_is_float(value) for value in init_inputs):
        return None
    return [_other_float(value) if _is_float(value) else value for value in init_inputs]


def float_attributes(model: torch.nn.Module) -> list:
    """'path.name' of every plain public float attribute of the model and its submodules."""
    names = []
    for prefix, module in model.named_modules(remove_duplicate=False):
        for name, value in vars(module).items():
            if not name.startswith("_") and name not in SKIPPED_ATTRIBUTES and _is_float(value):
                names.append(f"{prefix}.{name}" if prefix else name)
    return names


def change_float_attributes(model: torch.nn.Module, names: list) -> torch.nn.Module:
    """The model with each named float attribute changed as `float_init_variant` changes arguments."""
    for dotted in names:
        *path, name = dotted.split(".")
        owner = model.get_submodule(".".join(path)) if path else model
        value = getattr(owner, name, None)
        if _is_float(value):
            setattr(owner, name, _other_float(value))
    return model
