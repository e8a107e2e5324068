"""``luminal.compile``: a module or function compiled ahead of time, called with no Dynamo, and saved
to / loaded from one package file.

    compiled = luminal.compile(model, (x,), dynamic_shapes=None, options={"strict": True})
    y = compiled(x)             # one C++ call: parameters bound once, inputs checked by the core
    compiled.save("model.luminal")
    loaded = luminal.load("model.luminal")   # no torch.export, no search; no Python model needed

The model is exported once with torch.export (the backend's Core ATen decomposition), with its
parameters and buffers as program inputs: they are bound by pointer (never copied) and read anew
on every call, so ``param.data = other`` or ``load_state_dict`` is seen by the next call; assigning a
new Parameter, buffer or submodule (``model.fc.weight = nn.Parameter(...)``) is seen through
torch's module registration hooks and rebinds before the next call (a changed dtype or shape
raises). The graph compiles through the same core path as the backend, under the same options and
failure policy: without ``strict`` what luminal cannot run runs in eager with one
LuminalFallbackWarning (per partition when it can), ``strict=True`` raises.

The package (``save``) is a zip file, stored uncompressed:
    luminal_module/format           "luminal-module 2"
    luminal_module/meta.json        input and output structure and specs, state names and roles, options
    luminal_module/program.pt2      the PT2 archive (Core ATen; the state are its first inputs)
    luminal_module/state.json       the parameters and buffers, in state order: name, dtype ("float32"),
                                    sizes, strides (elements), entry and its byte count
    luminal_module/state/<k>.bin    state tensor k's bytes (little-endian), from its first element to its
                                    last as its strides reach: torch-free, so that the C++ runner
                                    (csrc/runner, luminal-run) loads packages too
    luminal_module/cache/<path>     on-disk cache entries (CUDA kernels and tuned choices) this module
                                    used, relative to the cache root; installed there when loaded

Packages of format "luminal-module 1" (state.pt, a torch.save of the state) still load here.

Layer: beside backend, above fallback (export -> compiled -> export_cache -> fallback -> aot).
"""

from __future__ import annotations

import inspect
import json
import os
import re
import threading
import warnings
import weakref
import zipfile
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, replace
from pathlib import Path
from typing import Any, cast

import torch
import torch.utils._pytree as pytree

from luminal import _C, package_files, pt2
from luminal._C import LuminalError, LuminalInputsOverlapError, LuminalLazyInputError, LuminalStreamCaptureError
from luminal.aot_constants import CONSTANT_PREFIX, LiftedConstant, lift_constants
from luminal.compiled import CompiledFunction, compile_exported
from luminal.decompositions import decomposition_table
from luminal.export import _EXPORT_OPTIONS, CallLayout, ExportedGraph, _luminal_export, _serialize, output_spec
from luminal.fallback import compile_partly
from luminal.package_files import PREFIX
from luminal.policy import (
    EagerPath,
    LuminalWarning,
    Options,
    describe_error,
    first_line,
    parse_options,
    report_core_notices,
    run_in_eager,
)

__all__ = ["LuminalModule", "compile", "export_count", "load"]

_FORMAT = "luminal-module 2"
_FORMAT_TORCH_STATE = "luminal-module 1"  # older packages: the state as state.pt (torch.save)

# Calls the graph cannot take by pointer but eager can (the module's other calls stay compiled):
# inputs that overlap one updated in place, lazy conjugate/negative bits, a CUDA graph capture.
_CALLS_FOR_EAGER = (LuminalInputsOverlapError, LuminalLazyInputError, LuminalStreamCaptureError)

_count_lock = threading.Lock()
_exports = 0


def export_count() -> int:
    """How many times luminal.compile has run torch.export in this process (a load runs none)."""
    return _exports


# ------------------------------------------------------------------------------------------------
# Specs
# ------------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class TensorSpec:
    """What a call must pass (or a parameter must be) at one place: None in `shape` is dynamic."""

    name: str  # "argument [1][0]", "parameter 'fc.weight'"
    dtype: str  # "torch.float32"
    shape: tuple[int | None, ...]
    device: str  # "cpu", "cuda:0"

    def describe(self) -> str:
        dims = ", ".join("*" if d is None else str(d) for d in self.shape)
        return f"{self.dtype.removeprefix('torch.')}[{dims}] on {self.device}"

    def mismatch(self, value: Any) -> str | None:
        """Why `value` does not fit, naming expected and got; None when it fits."""
        if not isinstance(value, torch.Tensor):
            return f"{self.name} must be a tensor ({self.describe()}), got {type(value).__name__}"
        got = _describe(value)
        if str(value.dtype) != self.dtype:
            return f"{self.name} must have dtype {self.dtype}, got {got} (expected {self.describe()})"
        if value.dim() != len(self.shape):
            return f"{self.name} must have {len(self.shape)} dimensions, got {got} (expected {self.describe()})"
        for d, (size, expected) in enumerate(zip(value.shape, self.shape, strict=True)):
            if expected is not None and size != expected:
                return (
                    f"{self.name} dimension {d} must be {expected}, got {got} (expected {self.describe()}; "
                    "pass dynamic_shapes to luminal.compile to allow other sizes)"
                )
        if str(value.device) != self.device:
            return f"{self.name} must be on {self.device}, got {got}"
        return None


def _describe(value: torch.Tensor) -> str:
    return f"{str(value.dtype).removeprefix('torch.')}{list(value.shape)} on {value.device}"


def _spec(name: str, example: torch.Tensor, fake: Any) -> TensorSpec:
    shape = tuple(None if isinstance(s, torch.SymInt) else int(s) for s in getattr(fake, "shape", example.shape))
    return TensorSpec(name, str(example.dtype), shape, str(example.device))


# ------------------------------------------------------------------------------------------------
# The model as a function of flat tensors
# ------------------------------------------------------------------------------------------------
class _FlatModel(torch.nn.Module):
    """The model as a function of (its state tensors, then the tensor leaves of the call's
    arguments): what is exported and, for eager fallbacks, what runs. The model is held outside
    the module tree, so that export lifts none of its parameters (they come in as inputs)."""

    def __init__(self, model: Callable[..., Any], names: Sequence[str], in_spec: Any, leaves: Sequence[Any]) -> None:
        super().__init__()
        self.__dict__["wrapped"] = model
        self.names = tuple(names)
        self.in_spec = in_spec
        self.tensor_leaves = tuple(k for k, leaf in enumerate(leaves) if isinstance(leaf, torch.Tensor))
        self.constant_leaves = [None if isinstance(leaf, torch.Tensor) else leaf for leaf in leaves]
        # After export: the program's leading inputs that export had lifted as constants
        # (aot_constants), passed first and ignored here (the model reads its own).
        self.lifted = 0

    def forward(self, *tensors: Any) -> Any:
        tensors = tensors[self.lifted :]
        state = dict(zip(self.names, tensors[: len(self.names)], strict=True))
        leaves = list(self.constant_leaves)
        for position, value in zip(self.tensor_leaves, tensors[len(self.names) :], strict=True):
            leaves[position] = value
        args = pytree.tree_unflatten(leaves, self.in_spec)
        model = self.__dict__["wrapped"]
        if isinstance(model, torch.nn.Module):
            return torch.func.functional_call(model, state, tuple(args))
        return model(*args)


def _training_flags(model: Callable[..., Any] | None) -> tuple[bool, ...]:
    if not isinstance(model, torch.nn.Module):
        return ()
    return tuple(module.training for module in model.modules())


def _state(model: Callable[..., Any]) -> tuple[list[str], list[torch.Tensor], list[str]]:
    """The model's parameters, then buffers (tied ones once): names, tensors and roles."""
    if not isinstance(model, torch.nn.Module):
        return [], [], []
    parameters = list(model.named_parameters())
    buffers = list(model.named_buffers())
    names = [n for n, _ in parameters] + [n for n, _ in buffers]
    tensors = [t for _, t in parameters] + [t for _, t in buffers]
    roles = ["parameter"] * len(parameters) + ["buffer"] * len(buffers)
    return names, tensors, roles


def _flat_dynamic_shapes(model: Callable[..., Any], example_inputs: tuple[Any, ...], dynamic_shapes: Any) -> list[Any]:
    """torch.export's dynamic_shapes (by position, or a dict by forward's parameter names) as one
    entry per tensor leaf of the arguments: None or {dim: Dim}."""
    if dynamic_shapes is None:
        return [None] * sum(isinstance(x, torch.Tensor) for x in pytree.tree_leaves(example_inputs))
    if isinstance(dynamic_shapes, dict):
        function = model.forward if isinstance(model, torch.nn.Module) else model
        try:
            bound = inspect.signature(function).bind(*example_inputs)
        except TypeError as error:
            raise LuminalError(f"dynamic_shapes by name: {error}") from error
        unknown = sorted(set(dynamic_shapes) - set(bound.arguments))
        if unknown:
            raise LuminalError(f"dynamic_shapes names {unknown}, which are not arguments of the model")
        dynamic_shapes = tuple(dynamic_shapes.get(name) for name in bound.arguments)
    flat: list[Any] = []
    _flatten_shapes(dynamic_shapes, example_inputs, "dynamic_shapes", flat)
    return flat


def _flatten_shapes(spec: Any, value: Any, where: str, out: list[Any]) -> None:
    if isinstance(value, torch.Tensor):
        if spec is None or isinstance(spec, dict):
            out.append(spec)
        elif isinstance(spec, (tuple, list)) and len(spec) == value.dim():
            out.append({d: dim for d, dim in enumerate(spec) if dim is not None} or None)
        else:
            raise LuminalError(f"{where}: expected None, {{dim: Dim}} or one entry per dimension, got {spec!r}")
        return
    if isinstance(value, (tuple, list)):
        if spec is not None and (not isinstance(spec, (tuple, list)) or len(spec) != len(value)):
            raise LuminalError(f"{where}: expected {len(value)} entries to match the inputs, got {spec!r}")
        for k, item in enumerate(value):
            _flatten_shapes(None if spec is None else spec[k], item, f"{where}[{k}]", out)
        return
    if isinstance(value, dict):
        if spec is not None and (not isinstance(spec, dict) or set(spec) - set(value)):
            raise LuminalError(f"{where}: expected a dict with keys among {sorted(value)}, got {spec!r}")
        for key, item in value.items():
            _flatten_shapes(None if spec is None else spec.get(key), item, f"{where}[{key!r}]", out)
        return
    for leaf in pytree.tree_leaves(value):  # other pytree nodes: static
        if isinstance(leaf, torch.Tensor):
            out.append(None)


def _structure(spec: Any, num_leaves: int) -> str | None:
    """The arguments' structure as the C++ fast path walks it ('T' a tensor, '(...)' a tuple,
    '[...]' a list), or None when it holds anything else (dicts)."""
    probe = pytree.tree_unflatten([_Leaf()] * num_leaves, spec)
    if type(probe) is not tuple:
        return None

    def encode(value: Any) -> str | None:
        if isinstance(value, _Leaf):
            return "T"
        if type(value) not in (tuple, list):
            return None
        parts = [encode(item) for item in value]
        if any(p is None for p in parts):
            return None
        open_, close = ("(", ")") if type(value) is tuple else ("[", "]")
        return open_ + "".join(cast(list[str], parts)) + close

    encoded = encode(probe)
    return None if encoded is None else encoded[1:-1]  # the items of the call's argument tuple


class _Leaf:
    pass


def _output_form(spec: pytree.TreeSpec | None) -> str:
    """'tuple' (a flat tuple of tensors), 'single' (one output itself) or 'tree'."""
    if spec is None:
        return "tree"
    probe = list(range(spec.num_leaves))
    rebuilt = pytree.tree_unflatten(probe, spec)
    if type(rebuilt) is tuple and list(rebuilt) == probe:
        return "tuple"
    if spec.num_leaves == 1 and rebuilt == 0:
        return "single"
    return "tree"


# ------------------------------------------------------------------------------------------------
# Parameter replacement
# ------------------------------------------------------------------------------------------------
# Modules of compiled models -> the LuminalModules that bound their state.
_watched: weakref.WeakKeyDictionary[torch.nn.Module, weakref.WeakSet[LuminalModule]] = weakref.WeakKeyDictionary()
_hooks_installed = False
_watch_lock = threading.Lock()


def _on_registration(module: torch.nn.Module, name: str, value: Any) -> None:
    owners = _watched.get(module)
    if owners:
        for owner in list(owners):
            owner._stale = True


def _watch(model: torch.nn.Module, owner: LuminalModule) -> None:
    global _hooks_installed
    with _watch_lock:
        if not _hooks_installed:
            from torch.nn.modules import module as nn_module

            nn_module.register_module_parameter_registration_hook(_on_registration)
            nn_module.register_module_buffer_registration_hook(_on_registration)
            nn_module.register_module_module_registration_hook(_on_registration)
            _hooks_installed = True
        for submodule in model.modules():
            _watched.setdefault(submodule, weakref.WeakSet()).add(owner)


# ------------------------------------------------------------------------------------------------
# The compiled module
# ------------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class _Layout:
    """Everything about a compiled module's calls that a package stores (see LuminalModule.save)."""

    state_names: tuple[str, ...]
    state_roles: tuple[str, ...]
    state_specs: tuple[TensorSpec, ...]
    input_specs: tuple[TensorSpec, ...]  # per tensor leaf of the arguments
    in_spec: str  # treespec_dumps of the arguments' structure
    tensor_positions: tuple[int, ...]  # the leaves that are tensors
    constant_leaves: tuple[Any, ...]  # per leaf: its value when it is no tensor (None for tensors)
    out_spec: str | None
    options: dict[str, Any]


class LuminalModule:
    """What luminal.compile and luminal.load return: call it like the model (positional arguments
    with the example inputs' structure). Outputs never require grad (inference)."""

    def __init__(
        self,
        function: Callable[..., Any],
        layout: _Layout,
        state: list[torch.Tensor],
        model: Callable[..., Any] | None,
        eager: EagerPath | None,
        archive: bytes | None,
        journal_start: int,
        loaded: bool,
        exports: int,
    ) -> None:
        self._function = function
        self._layout = layout
        self._state = state
        self._model = model
        self._eager = eager
        self._archive = archive
        self._journal_start = journal_start
        self._loaded = loaded
        self._exports = exports
        self._in_spec = pytree.treespec_loads(layout.in_spec)
        self._out_spec = None if layout.out_spec is None else pytree.treespec_loads(layout.out_spec)
        self._tensor_leaves = list(layout.tensor_positions)
        self._stale = False
        self._constants: tuple[LiftedConstant, ...] = ()  # compile() sets them: the state's leading tensors
        # Autocast on the program's device when it was exported (now, for compile(); a package is
        # taken as exported without): a call under another state runs in eager, whose dtypes differ.
        self._autocast_device = _device_type(layout)
        self._autocast = False if loaded else torch.is_autocast_enabled(self._autocast_device)
        self._eager_reason: str | None = None
        self._checked = False  # the first call checks its inputs in Python and may go to eager
        self._fast: Callable[..., Any] | None = None  # graph.call, after the first call succeeded
        self._graph = function._graph if isinstance(function, CompiledFunction) else None
        if self._graph is not None:
            self._graph.set_fixed_inputs(state)
        # The modules' training flags the graph was exported with (dropout, batch norm): the root's
        # is checked per call (model.train() / .eval() set it), all of them off the fast path.
        self._training = _training_flags(model)
        self._root: torch.nn.Module | None = model if isinstance(model, torch.nn.Module) else None
        self._root_training = self._root.training if self._root is not None else False
        if isinstance(model, torch.nn.Module):
            _watch(model, self)

    # -- calls ------------------------------------------------------------------------------------
    def __call__(self, *args: Any) -> Any:
        fast = self._fast
        root = self._root
        if self._constants and any(constant.replaced() for constant in self._constants):
            self._stale = True
        if (
            fast is not None
            and not self._stale
            and not torch.is_grad_enabled()
            and (root is None or root.training is self._root_training)
            and torch.is_autocast_enabled(self._autocast_device) is self._autocast
        ):
            try:
                return fast(*args)
            except LuminalError as error:
                return self._failed_call(args, error)
        return self._call(args)

    def _call(self, args: tuple[Any, ...]) -> Any:
        if self._stale:
            self._rebind()
        tensors = self._flatten(args)
        if self._eager_reason is not None:
            return self._run_eager(args, tensors)
        if _training_flags(self._model) != self._training:
            reason = (
                "the model's training mode changed since it was compiled (model.train() / .eval()); the "
                "compiled graph keeps the mode it was exported in"
            )
            if self._eager is None or self._eager.strict:
                raise LuminalError(f"luminal.compile: {reason}: compile it again")
            self._eager.warn_once("training", f"luminal: a call runs in eager: {reason}")
            return self._run_eager(args, tensors)
        if torch.is_autocast_enabled(self._autocast_device) is not self._autocast:
            state = "on" if self._autocast else "off"
            reason = (
                f"autocast ({self._autocast_device}) was {state} when the module was compiled and is not now; the "
                "compiled graph keeps the dtypes it was exported with"
            )
            if self._eager is None or self._eager.strict:
                raise LuminalError(f"luminal.compile: {reason}: compile it again")
            self._eager.warn_once("autocast", f"luminal: a call runs in eager: {reason}")
            return self._run_eager(args, tensors)
        if torch.is_grad_enabled() and any(t.requires_grad for t in [*self._state, *tensors]):
            reason = "grad mode is on and the inputs or parameters require grad; luminal is inference-only"
            if self._eager is None:
                raise LuminalError(f"{reason}: call it under torch.no_grad() or torch.inference_mode()")
            self._eager.warn_once("grad", f"luminal: a call runs in eager: {reason}")
            return self._run_eager(args, tensors)
        if not self._checked:
            self._check(tensors)
        try:
            outputs = self._run(tensors)
        except _CALLS_FOR_EAGER as error:
            return self._eager_only_call(args, tensors, error)
        except LuminalError as error:
            problem = self._mismatch(tensors)
            if problem is not None:
                raise LuminalError(problem) from error
            if self._checked or self._eager is None or self._eager.strict:
                raise self._named(error) from error
            self._eager_reason = f"its first call failed: {first_line(error)}"
            self._eager.warn_once("first call", f"luminal: this module runs in eager: {self._eager_reason}")
            return self._run_eager(args, tensors)
        finally:
            report_core_notices()
        if not self._checked:
            self._checked = True
            self._fast = self._fast_path()
        return outputs

    def _run(self, tensors: list[Any]) -> Any:
        """A call by the general path: the program's inputs in a list, the outputs rebuilt here
        (graph.call's argument structure and output form belong to the fast path)."""
        if self._graph is None:
            return self._function(*self._state, *tensors)
        outputs = self._graph.run([*self._state, *tensors])
        return tuple(outputs) if self._out_spec is None else pytree.tree_unflatten(outputs, self._out_spec)

    def _fast_path(self) -> Callable[..., Any] | None:
        """graph.call with the arguments' structure and the output form set in C++: one C++ call."""
        if self._graph is None or self._function.__class__ is not CompiledFunction:
            return None
        if len(self._tensor_leaves) != len(self._layout.constant_leaves):
            return None  # constants among the arguments: checked in Python
        structure = _structure(self._in_spec, self._in_spec.num_leaves)
        form = _output_form(self._out_spec)
        if structure is None or form == "tree":
            return None
        self._graph.set_argument_structure(structure)
        self._graph.set_call_layout([], form == "tuple", [], form == "single")
        return self._graph.call

    def _failed_call(self, args: tuple[Any, ...], error: LuminalError) -> Any:
        tensors = self._flatten(args)
        problem = self._mismatch(tensors)
        if problem is not None:
            raise LuminalError(problem) from error
        if isinstance(error, _CALLS_FOR_EAGER):
            return self._eager_only_call(args, tensors, error)
        raise self._named(error) from error

    def _eager_only_call(self, args: tuple[Any, ...], tensors: list[Any], error: LuminalError) -> Any:
        """A call that eager can take but the graph cannot by pointer (see _CALLS_FOR_EAGER)."""
        if self._eager is None:
            raise self._named(error) from error
        self._eager.warn_once(type(error).__name__, f"luminal: a call runs in eager: {first_line(self._named(error))}")
        return self._run_eager(args, tensors)

    def _run_eager(self, args: tuple[Any, ...], tensors: list[Any]) -> Any:
        assert self._eager is not None
        return self._eager(*self._state, *tensors)

    def _flatten(self, args: tuple[Any, ...]) -> list[Any]:
        leaves, spec = pytree.tree_flatten(args)
        if spec != self._in_spec:
            raise LuminalError(
                f"luminal.compile: the call's arguments have the structure {spec}, but the module was compiled "
                f"for {self._in_spec}"
            )
        tensor_leaves = set(self._tensor_leaves)
        for k, (leaf, expected) in enumerate(zip(leaves, self._layout.constant_leaves, strict=True)):
            if k not in tensor_leaves and (type(leaf) is not type(expected) or leaf != expected):
                raise LuminalError(
                    f"argument leaf {k} is {leaf!r}, but the module was compiled for {expected!r} (a constant)"
                )
        return [leaves[k] for k in self._tensor_leaves]

    def _mismatch(self, tensors: list[Any]) -> str | None:
        for spec, value in zip(self._layout.input_specs, tensors, strict=True):
            problem = spec.mismatch(value)
            if problem is not None:
                return f"luminal.compile: {problem}"
        return None

    def _check(self, tensors: list[Any]) -> None:
        problem = self._mismatch(tensors)
        if problem is not None:
            raise LuminalError(problem)
        for spec, value in zip(self._layout.state_specs, self._state, strict=True):
            problem = spec.mismatch(value)
            if problem is not None:
                raise LuminalError(f"luminal.compile: {problem}")

    def _named(self, error: LuminalError) -> LuminalError:
        """The core's error with its program input numbers (#k 'name') as the caller's names."""
        names = [spec.name for spec in self._layout.state_specs + self._layout.input_specs]

        def rename(match: re.Match[str]) -> str:
            k = int(match.group(1))
            return names[k] if k < len(names) else match.group(0)

        message = re.sub(r"input #(\d+)(?: '[^']*')?", rename, str(error).strip())
        return type(error)(f"luminal.compile: {message}")

    # -- parameters -------------------------------------------------------------------------------
    def _rebind(self) -> None:
        """After a parameter, buffer or submodule of the model was assigned: bind the model's state
        anew (by name), checking each tensor against what the graph was compiled for."""
        model = self._model
        assert isinstance(model, torch.nn.Module)
        self._stale = False
        names, tensors, _ = _state(model)
        constants = self._rebound_constants()
        names = [c.name for c in constants] + names
        tensors = [c.tensor for c in constants] + tensors
        if tuple(names) != self._layout.state_names:
            missing = sorted(set(self._layout.state_names) - set(names))
            added = sorted(set(names) - set(self._layout.state_names))
            raise LuminalError(
                f"luminal.compile: the model's parameters and buffers changed since it was compiled (missing: "
                f"{missing}, new: {added}); compile it again"
            )
        for spec, tensor in zip(self._layout.state_specs, tensors, strict=True):
            problem = spec.mismatch(tensor)
            if problem is not None:
                raise LuminalError(f"luminal.compile: {problem} (it was replaced after compiling; compile again)")
        self._state = tensors
        self._constants = tuple(constants)
        if self._graph is not None:
            self._graph.set_fixed_inputs(tensors)
        _watch(model, self)

    def _rebound_constants(self) -> list[LiftedConstant]:
        """The lifted constants with what the model holds now (an attribute assigned anew)."""
        rebound = []
        for constant in self._constants:
            current = constant.current()
            if current is None:
                raise LuminalError(
                    f"luminal.compile: the model's {constant.name[len(CONSTANT_PREFIX) :]} is no tensor any more; "
                    "compile it again"
                )
            rebound.append(replace(constant, tensor=current))
        return rebound

    # -- introspection ----------------------------------------------------------------------------
    def stats(self) -> dict[str, Any]:
        stats = dict(self._function.stats()) if hasattr(self._function, "stats") else {}
        if self._eager_reason is not None:
            stats.update(fallback=True, eager_reason=self._eager_reason, luminal_node_share=0.0)
        used = _C.cache_journal_since(self._journal_start)  # this process's, since the compile began
        stats["aot"] = {
            "loaded": self._loaded,
            "exports": self._exports,
            "fast_path": self._fast is not None,
            # On-disk cache entries (kernels, tuned choices) read as hits and built anew: a loaded
            # package whose entries were installed builds none.
            "cache_entries_read": sum(not written for _, written in used),
            "cache_entries_written": sum(written for _, written in used),
        }
        return stats

    def ir(self, optimized: bool = True) -> str:
        return str(self._function.ir(optimized)) if hasattr(self._function, "ir") else ""

    def cuda_source(self) -> str:
        return str(self._function.cuda_source()) if hasattr(self._function, "cuda_source") else ""

    # -- packages ---------------------------------------------------------------------------------
    def save(self, path: str | os.PathLike[str]) -> None:
        """Writes the package (see the module's docstring): loads with no export and no search."""
        if self._archive is None or self._graph is None or self._eager_reason is not None:
            reason = self._eager_reason or "parts of it run in eager"
            raise LuminalError(f"luminal.compile: only a module luminal runs whole can be saved ({reason})")
        if self._stale:
            self._rebind()
        specs = self._layout.state_specs + self._layout.input_specs
        if not self._checked and any(spec.device.startswith("cuda") for spec in specs):
            warnings.warn(
                "luminal.compile: this module is saved before its first call: on CUDA its kernels are compiled "
                "and its choices measured at the first call, so the package carries none and the loaded module "
                "builds them at its first call (call it once before saving)",
                LuminalWarning,
                stacklevel=2,
            )
        meta = asdict(self._layout)
        meta["format"] = _FORMAT
        meta["torch"] = torch.__version__
        state_index, state_entries = package_files.encode_state(self._layout.state_names, self._state)
        entries = package_files.cache_entries(self._journal_start)
        meta["cache_entries"] = sorted(entries)
        target = Path(path)
        temporary = target.with_name(f".{target.name}.{os.getpid()}.tmp")
        try:
            with zipfile.ZipFile(temporary, "w", zipfile.ZIP_STORED) as package:
                package.writestr(PREFIX + "format", _FORMAT)
                package.writestr(PREFIX + "meta.json", json.dumps(meta, indent=1))
                package.writestr(PREFIX + "program.pt2", self._archive)
                package.writestr(PREFIX + "state.json", json.dumps(state_index, indent=1))
                for name, data in state_entries.items():
                    package.writestr(PREFIX + name, data)
                for relative, data in entries.items():
                    package.writestr(PREFIX + "cache/" + relative, data)
            os.replace(temporary, target)
        finally:
            temporary.unlink(missing_ok=True)


# ------------------------------------------------------------------------------------------------
# compile
# ------------------------------------------------------------------------------------------------
def compile(  # noqa: A001  (luminal.compile, as the issue names it)
    model: torch.nn.Module | Callable[..., Any],
    example_inputs: Any,
    dynamic_shapes: Any = None,
    options: dict[str, Any] | None = None,
) -> LuminalModule:
    """Exports ``model`` on ``example_inputs`` (a tuple of positional arguments: tensors, lists and
    tuples of them, dicts) and compiles it; returns a LuminalModule whose calls go straight to the
    compiled graph. ``dynamic_shapes`` is torch.export's (by position or by argument name): those
    dimensions may change between calls; every other size, dtype and device must match the
    example's, or the call raises a LuminalError naming the argument. ``options`` are the backend's
    (``strict``, ``megakernel``, ``min_partition_size``)."""
    global _exports
    settings = parse_options(dict(options or {}))
    if not isinstance(example_inputs, tuple):
        example_inputs = (example_inputs,)
    journal_start = _C.cache_journal_size()
    leaves, in_spec = pytree.tree_flatten_with_path(example_inputs)
    paths = [f"argument {pytree.keystr(path)}" for path, _ in leaves]
    values = [value for _, value in leaves]
    for name, value in zip(paths, values, strict=True):
        if not isinstance(value, (torch.Tensor, int, float, bool, str, type(None))):
            raise LuminalError(f"luminal.compile: {name} is a {type(value).__name__}; it takes tensors and constants")
    names, state, roles = _state(model)
    flat = _FlatModel(model, names, in_spec, values)
    tensors = [v for v in values if isinstance(v, torch.Tensor)]
    tensor_paths = [p for p, v in zip(paths, values, strict=True) if isinstance(v, torch.Tensor)]
    shapes = [None] * len(state) + _flat_dynamic_shapes(model, example_inputs, dynamic_shapes)
    eager = EagerPath(flat.forward, settings.strict)
    try:
        program = _export(flat, _unaliased([t.detach() for t in state] + tensors), shapes)
        with _count_lock:
            _exports += 1
    except LuminalError:
        raise
    except Exception as error:  # torch.export raises many types
        if settings.strict:
            raise LuminalError(f"luminal.compile: torch.export failed: {describe_error(error)}") from error
        reason = f"torch.export failed: {first_line(error)}"
        layout = _layout(names, roles, state, [], tensor_paths, in_spec, values, None, settings)
        function = run_in_eager(flat.forward, reason, settings, error)
        return LuminalModule(function, layout, state, model, eager, None, journal_start, False, 0)
    devices = [t.device for t in tensors] or [t.device for t in state]
    constants = lift_constants(program, model, devices[0] if devices else None)
    flat.lifted = len(constants)
    names = [c.name for c in constants] + names
    state = [c.tensor for c in constants] + state
    roles = ["buffer"] * len(constants) + roles
    fakes = [n.meta.get("val") for n in program.graph.nodes if n.op == "placeholder"]
    user_fakes = fakes[len(fakes) - len(tensors) :]
    archive = _serialize(program)
    exported = ExportedGraph(
        archive=archive,
        layout=CallLayout(tuple(range(len(state) + len(tensors)))),
        input_roles=tuple(roles) + ("user",) * len(tensors),
        out_spec=output_spec(program),
        program=program,
    )
    layout = _layout(names, roles, state, user_fakes, tensor_paths, in_spec, values, exported.out_spec, settings)
    function = _compile(flat, exported, state + tensors, settings)
    saved = archive if isinstance(function, CompiledFunction) else None
    module = LuminalModule(function, layout, state, model, eager, saved, journal_start, False, 1)
    module._constants = tuple(constants)
    return module


def _device_type(layout: _Layout) -> str:
    """The device type the program runs on ("cuda" or "cpu"): its inputs', else its state's."""
    for spec in layout.input_specs + layout.state_specs:
        return "cuda" if spec.device.startswith("cuda") else "cpu"
    return "cpu"


def _layout(
    names: list[str],
    roles: list[str],
    state: list[torch.Tensor],
    input_fakes: list[Any],
    tensor_paths: list[str],
    in_spec: Any,
    values: list[Any],
    out_spec: pytree.TreeSpec | None,
    options: Options,
) -> _Layout:
    tensors = [v for v in values if isinstance(v, torch.Tensor)]
    fakes = input_fakes if len(input_fakes) == len(tensors) else [None] * len(tensors)
    return _Layout(
        state_names=tuple(names),
        state_roles=tuple(roles),
        state_specs=tuple(_spec(f"{role} '{n}'", t, None) for n, role, t in zip(names, roles, state, strict=True)),
        input_specs=tuple(_spec(p, t, f) for p, t, f in zip(tensor_paths, tensors, fakes, strict=True)),
        in_spec=pytree.treespec_dumps(in_spec),
        tensor_positions=tuple(k for k, v in enumerate(values) if isinstance(v, torch.Tensor)),
        constant_leaves=tuple(None if isinstance(v, torch.Tensor) else v for v in values),
        out_spec=None if out_spec is None else pytree.treespec_dumps(out_spec),
        options=asdict(options),
    )


def _unaliased(tensors: list[torch.Tensor]) -> list[torch.Tensor]:
    """The example tensors, each sharing memory with no other: export would otherwise trace the
    aliasing (``f(x, x)`` as ``a + a``) into a program later called with distinct tensors. Export
    reads only their metadata, so a tensor whose storage was already seen is replaced by an
    uninitialized one of the same sizes, strides, dtype and device."""
    seen: set[int] = set()
    distinct = []
    for t in tensors:
        storage = t.untyped_storage().data_ptr() if t.untyped_storage().nbytes() > 0 else None
        if storage is not None and storage in seen:
            t = torch.empty_strided(t.size(), t.stride(), dtype=t.dtype, device=t.device)
        elif storage is not None:
            seen.add(storage)
        distinct.append(t)
    return distinct


def _export(flat: _FlatModel, args: list[torch.Tensor], shapes: list[Any]) -> torch.export.ExportedProgram:
    """torch.export of the flat model, decomposed to Core ATen as the backend does."""
    dynamic = (tuple(shapes),) if any(s is not None for s in shapes) else None
    with _luminal_export(args, dynamic=dynamic is not None), torch.no_grad():
        program = torch.export.export(flat, tuple(args), dynamic_shapes=dynamic, strict=False, **_EXPORT_OPTIONS)
        return program.run_decompositions(decomposition_table())


def _compile(
    flat: _FlatModel, exported: ExportedGraph, examples: list[torch.Tensor], options: Options
) -> Callable[..., Any]:
    """The backend's policy: the whole graph in luminal, else luminal partitions and eager code
    (one warning), else all in eager (one warning); strict raises."""
    try:
        return compile_exported(exported, options.megakernel)
    except Exception as error:  # noqa: BLE001  (any failure in luminal's core: the policy decides)
        if options.strict:
            if isinstance(error, LuminalError):
                raise
            raise LuminalError(describe_error(error)) from error
        gm = cast(torch.fx.GraphModule, flat)  # the fallback only runs its forward
        return compile_partly(gm, examples, error, exported, options)


# ------------------------------------------------------------------------------------------------
# load
# ------------------------------------------------------------------------------------------------
def load(
    path: str | os.PathLike[str], max_archive_bytes: int | None = None, install_cache_entries: bool = True
) -> LuminalModule | pt2.CompiledProgram:
    """A package written by ``LuminalModule.save`` (returns a LuminalModule: no export, no
    search), or a .pt2 file written by ``torch.export.save`` (compiled as ``luminal.pt2.load``
    does; weights from the archive). Dispatches on the file's content.

    A package's compiled kernels and tuned choices are installed into the cache directory (see the
    README's threat model: load packages only from trusted sources); with
    ``install_cache_entries=False`` they are ignored, and the first call compiles and measures."""
    opened = package_files.open_package(path)
    if opened is None:
        return pt2.load(path, max_archive_bytes)
    with opened as package:
        total = sum(info.file_size for info in package.infolist())
        if max_archive_bytes is not None and total > max_archive_bytes:
            raise LuminalError(f"{path}: the package holds {total} bytes, over max_archive_bytes={max_archive_bytes}")
        meta = json.loads(package.read(PREFIX + "meta.json"))
        if meta.get("format") not in (_FORMAT, _FORMAT_TORCH_STATE):
            raise LuminalError(
                f"{path}: package format {meta.get('format')!r}, this luminal reads {_FORMAT!r} and "
                f"{_FORMAT_TORCH_STATE!r}"
            )
        layout = _layout_from(meta)
        archive = package.read(PREFIX + "program.pt2")
        if meta["format"] == _FORMAT:
            state = package_files.decode_state(package, path, layout.state_names, layout.state_specs)
        else:
            state = package_files.torch_state(package.read(PREFIX + "state.pt"), path, layout.state_names)
        if install_cache_entries:
            package_files.install_cache_entries(package, meta.get("cache_entries", []))
    options = parse_options(layout.options)
    exported = ExportedGraph(
        archive=archive,
        layout=CallLayout(tuple(range(len(state) + len(layout.input_specs)))),
        input_roles=tuple(layout.state_roles) + ("user",) * len(layout.input_specs),
        out_spec=None if layout.out_spec is None else pytree.treespec_loads(layout.out_spec),
    )
    journal_start = _C.cache_journal_size()
    function = compile_exported(exported, options.megakernel)
    return LuminalModule(function, layout, state, None, None, archive, journal_start, True, 0)


def _layout_from(meta: dict[str, Any]) -> _Layout:
    return _Layout(
        state_names=tuple(meta["state_names"]),
        state_roles=tuple(meta["state_roles"]),
        state_specs=tuple(_spec_from(s) for s in meta["state_specs"]),
        input_specs=tuple(_spec_from(s) for s in meta["input_specs"]),
        in_spec=meta["in_spec"],
        tensor_positions=tuple(meta["tensor_positions"]),
        constant_leaves=tuple(meta["constant_leaves"]),
        out_spec=meta["out_spec"],
        options=meta["options"],
    )


def _spec_from(fields: dict[str, Any]) -> TensorSpec:
    return TensorSpec(fields["name"], fields["dtype"], tuple(fields["shape"]), fields["device"])
