"""The tensors torch.export lifts as constants of a model given to luminal.compile: module attributes
that are plain tensors (neither parameter nor buffer), tensors in lists, globals the forward reads.

Baked into the program, an in-place update of one (``model.scale.mul_(2)``) would go unseen while
eager reads the new values: silent wrong output. They become leading inputs of the program instead,
bound by pointer like the buffers; the ones that are attributes of the model's modules are watched
for reassignment too (``model.scale = other``), which rebinds them."""

from __future__ import annotations

from dataclasses import dataclass

import torch
from torch.export.graph_signature import InputKind, InputSpec

# State names of lifted constants: no parameter or buffer name holds a space.
CONSTANT_PREFIX = "constant "


@dataclass(frozen=True)
class LiftedConstant:
    name: str  # its state name: "constant 'scale'"
    tensor: torch.Tensor  # the model's own tensor (the attribute's object when it is one)
    owner: torch.nn.Module | None  # the module holding it as `attribute`, when it is a module attribute
    attribute: str

    def current(self) -> torch.Tensor | None:
        """What the model holds now (None: the attribute is gone or no tensor)."""
        if self.owner is None:
            return self.tensor
        value = self.owner.__dict__.get(self.attribute)
        return value if isinstance(value, torch.Tensor) else None

    def replaced(self) -> bool:
        return self.owner is not None and self.owner.__dict__.get(self.attribute) is not self.tensor


def lift_constants(
    program: torch.export.ExportedProgram, model: object, device: torch.device | None
) -> list[LiftedConstant]:
    """Turns the program's leading constant-tensor inputs into user inputs (removed from its
    constants); returns them in input order. None are lifted, and all stay in the program as
    before, when constants are not all leading (not what export writes for a model whose state
    comes in as inputs) or one is on another device than the program's `device` (a CPU tensor
    the forward moves to the GPU: the fast call binds device memory only)."""
    specs = program.graph_signature.input_specs
    leading = 0
    while leading < len(specs) and specs[leading].kind == InputKind.CONSTANT_TENSOR:
        leading += 1
    if leading == 0 or any(spec.kind == InputKind.CONSTANT_TENSOR for spec in specs[leading:]):
        return []
    values = [program.constants[spec.target] for spec in specs[:leading] if spec.target is not None]
    if len(values) != leading or any(not isinstance(v, torch.Tensor) or v.device != device for v in values):
        return []
    owners = _tensor_attributes(model)
    lifted = []
    for k in range(leading):
        spec = specs[k]
        assert spec.target is not None
        value = program.constants.pop(spec.target)
        specs[k] = InputSpec(kind=InputKind.USER_INPUT, arg=spec.arg, target=None, persistent=None)
        owner, attribute, path = owners.get(_view_key(value), (None, spec.target, spec.target))
        held = owner.__dict__[attribute] if owner is not None else value
        lifted.append(LiftedConstant(f"{CONSTANT_PREFIX}'{path}'", held, owner, attribute))
    return lifted


def _tensor_attributes(model: object) -> dict[tuple[object, ...], tuple[torch.nn.Module, str, str]]:
    """The plain tensor attributes of the model's modules, by their view (export names the
    constants it lifts from a model read through functional_call lifted_tensor_<n>, so they are
    found by their memory); the first module, attribute and dotted path of each view."""
    found: dict[tuple[object, ...], tuple[torch.nn.Module, str, str]] = {}
    if isinstance(model, torch.nn.Module):
        for prefix, module in model.named_modules():
            for attribute, value in vars(module).items():
                if isinstance(value, torch.Tensor) and not isinstance(value, torch.nn.Parameter):
                    path = f"{prefix}.{attribute}" if prefix else attribute
                    found.setdefault(_view_key(value), (module, attribute, path))
    return found


def _view_key(t: torch.Tensor) -> tuple[object, ...]:
    return (t.data_ptr(), tuple(t.shape), t.stride(), t.dtype, t.device)
