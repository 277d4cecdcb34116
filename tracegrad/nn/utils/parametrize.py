"""`tracegrad.nn.utils.parametrize`: express a module's parameter or buffer as a function of
other tensors, with PyTorch's API, names and checks.

`register_parametrization(module, "weight", P)` removes `module.weight` from its registry,
moves it into `module.parametrizations.weight` (a `ParametrizationList` holding `P` and
the tensor `original`, or `original0, original1, ...` when `P.right_inverse` returns
several) and turns `weight` into a property of a per-module subclass
(`ParametrizedLinear`): reading it computes `P(original)` every time (once per
`with cached():` block), assigning to it stores `right_inverse(value)` into the originals.
Names therefore match PyTorch's: `parametrizations.weight.original` in `named_parameters()`
and `state_dict()`, buffers of `P` as `parametrizations.weight.0._u`.

Under `tracegrad.compile` the property is ordinary library code: the trace records the
parametrization's ops on the originals (program inputs), so gradients reach them and
in-place buffer updates a parametrization makes (spectral_norm's power iteration) are
replayed on every call.
"""
from collections.abc import Sequence
from contextlib import contextmanager
from copy import deepcopy

from ... import _effects
from ..._errors import TracegradValueError
from ..._mode import no_grad
from ..._tensor import Tensor
from .._containers_extra import ModuleDict
from ..container import ModuleList
from ..parameter import Parameter

__all__ = ["cached", "ParametrizationList", "register_parametrization", "is_parametrized",
           "remove_parametrizations", "type_before_parametrizations"]

_cache_enabled = 0
_cache = {}


_entered_by = []      # the tracer active when each open cached() block was entered


@contextmanager
def cached():
    """Compute each parametrized tensor once inside the block (e.g. a weight used at every
    step of an RNN), instead of at every access.

    Note [Caches around compiled calls]
    A block opened inside a compiled function lives and dies within one call: the trace
    records the one computation and its reuses. A block opened outside, around compiled
    calls, holds tensors from one call for the next ones (and for reads after them), which
    a cached path would neither fill nor read: a compiled call reading the cache then runs
    eagerly, with a warning."""
    global _cache, _cache_enabled
    _cache_enabled += 1
    _entered_by.append(_effects.active())
    try:
        yield
    finally:
        _entered_by.pop()
        _cache_enabled -= 1
        if not _cache_enabled:
            _cache = {}


def _register_parameter_or_buffer(module, name, x):
    if isinstance(x, Parameter):
        module.register_parameter(name, x)
    else:
        module.register_buffer(name, x)


def _maybe_set(dest, src):
    """`dest.set_(src)`: `dest` (kept: optimizers and users hold it) takes src's data."""
    if src is not dest:
        dest.data = src.detach()


def _right_inverse_of(module, value):
    if not hasattr(module, "right_inverse"):
        return value, False
    try:
        return module.right_inverse(value), True
    except NotImplementedError:
        return value, False


class ParametrizationList(ModuleList):
    """The parametrizations of one tensor, applied in order to its original(s)."""

    def __init__(self, modules, original, unsafe=False):
        if len(modules) == 0:
            raise TracegradValueError("ParametrizationList requires one or more modules.")
        super().__init__(modules)
        self.unsafe = unsafe
        shape, dtype = original.shape, original.dtype
        with no_grad():
            new = original
            for module in reversed(self):
                new, _ = _right_inverse_of(module, new)
        if not isinstance(new, (Tensor, Sequence)):
            raise TracegradValueError("'right_inverse' must return a Tensor or a Sequence of "
                                      f"tensors (list, tuple...). Got {type(new).__name__}")
        self.is_tensor = isinstance(new, Tensor)
        self.ntensors = 1 if self.is_tensor else len(new)
        if self.is_tensor:
            if original.dtype != new.dtype:
                raise TracegradValueError(
                    "When `right_inverse` outputs one tensor, it may not change the dtype.\n"
                    f"original.dtype: {original.dtype}\n"
                    f"right_inverse(original).dtype: {new.dtype}")
            with no_grad():
                _maybe_set(original, new)
            _register_parameter_or_buffer(self, "original", original)
        else:
            for i, part in enumerate(new):
                if not isinstance(part, Tensor):
                    raise TracegradValueError(
                        "'right_inverse' must return a Tensor or a Sequence of tensors (list, "
                        f"tuple...). Got element {i} of the sequence with type "
                        f"{type(part).__name__}.")
                if isinstance(original, Parameter):
                    part = Parameter(part, original.requires_grad)
                part.requires_grad_(original.requires_grad)
                _register_parameter_or_buffer(self, f"original{i}", part)
        if not self.unsafe:
            _check_result(self(), "Registering a parametrization may not change the {what} of "
                          "the tensor, unless `unsafe` flag is enabled.\n"
                          "unparametrized {what}: {old}\nparametrized {what}: {new}",
                          shape, dtype)

    def right_inverse(self, value):
        """Store `value` as the parametrized tensor: the originals become its preimage."""
        with no_grad():
            for module in reversed(self):
                if not hasattr(module, "right_inverse"):
                    raise RuntimeError(f"parametrization {type(module).__name__} does not "
                                       "implement right_inverse.")
                value = module.right_inverse(value)
            if self.is_tensor:
                if not isinstance(value, Tensor):
                    raise TracegradValueError("`right_inverse` should return a tensor. Got "
                                              f"{type(value).__name__}")
                if value.dtype != self.original.dtype:
                    raise TracegradValueError(
                        f"The tensor returned by `right_inverse` has dtype {value.dtype} "
                        f"while `original` has dtype {self.original.dtype}")
                _maybe_set(self.original, value)
                return
            if not isinstance(value, Sequence):
                raise TracegradValueError("'right_inverse' must return a sequence of tensors. "
                                          f"Got {type(value).__name__}.")
            if len(value) != self.ntensors:
                raise TracegradValueError("'right_inverse' must return a sequence of tensors of "
                                          f"length {self.ntensors}. Got a sequence of length "
                                          f"{len(value)}.")
            for i, t in enumerate(value):
                orig = getattr(self, f"original{i}")
                if not isinstance(t, Tensor):
                    raise TracegradValueError(
                        "'right_inverse' must return a sequence of tensors or reference-type "
                        f"opaques. Got element {i} of type {type(t).__name__}.")
                if orig.dtype != t.dtype:
                    raise TracegradValueError(f"Tensor {i} returned by `right_inverse` has dtype "
                                              f"{t.dtype} while `original{i}` has dtype "
                                              f"{orig.dtype}")
                _maybe_set(orig, t)

    def forward(self):
        if self.is_tensor:
            x = self[0](self.original)
        else:
            x = self[0](*(getattr(self, f"original{i}") for i in range(self.ntensors)))
        i = 1
        while hasattr(self, str(i)):
            x = self[i](x)
            i += 1
        return x


def _check_result(x, template, shape, dtype, name=None):
    """A parametrization's output must be a tensor of the original's shape and dtype."""
    if not isinstance(x, Tensor):
        raise TracegradValueError(f"A parametrization must return a tensor. Got "
                                  f"{type(x).__name__}.")
    for what, old, new in (("dtype", dtype, x.dtype), ("shape", shape, x.shape)):
        if old != new:
            raise TracegradValueError(template.format(what=what, old=old, new=new, name=name))


def _inject_new_class(module):
    """Give `module` a class of its own (`Parametrized<Class>`) to hang properties on."""
    cls = module.__class__

    def getstate(self):
        raise RuntimeError("Serialization of parametrized modules is only supported through "
                           "state_dict(). See:\nhttps://pytorch.org/tutorials/beginner/"
                           "saving_loading_models.html#saving-loading-a-general-checkpoint-"
                           "for-inference-and-or-resuming-training")
    def default_deepcopy(self, memo):
        # (pickling is refused above; `copy.deepcopy`, as AveragedModel does, still works)
        obj = memo.get(id(self))
        if obj is not None:
            return obj
        replica = self.__new__(self.__class__)
        memo[id(self)] = replica
        replica.__dict__ = deepcopy(self.__dict__, memo)
        return replica

    def _load_from_state_dict(self, state_dict, prefix, *args):
        # renames of old checkpoint keys (weight_norm's `weight_g`, `weight_v`), made before
        # the keys reach this module's children (PyTorch: a load_state_dict pre-hook)
        for rename in self.__dict__.get("_state_dict_renames", ()):
            rename(state_dict, prefix)
        cls._load_from_state_dict(self, state_dict, prefix, *args)

    dct = {"__getstate__": getstate, "_load_from_state_dict": _load_from_state_dict}
    if not hasattr(cls, "__deepcopy__"):
        dct["__deepcopy__"] = default_deepcopy
    module.__class__ = type(f"Parametrized{cls.__name__}", (cls,), dct)


def _inject_property(module, tensor_name):
    if hasattr(module, tensor_name):
        raise AssertionError(f"Module already has an attribute named '{tensor_name}'")

    def get_parametrized(self):
        parametrization = self.parametrizations[tensor_name]
        if not _cache_enabled:
            return parametrization()
        tracer = _effects.active()
        if tracer is not None and _entered_by[0] is not tracer:
            _effects.note("python", "a parametrized tensor read inside a "
                          "nn.utils.parametrize.cached() block opened outside the compiled "
                          "function (Note [Caches around compiled calls])")
        key = (id(self), tensor_name)
        tensor = _cache.get(key)
        if tensor is None:
            tensor = _cache[key] = parametrization()
        return tensor

    def set_original(self, value):
        self.parametrizations[tensor_name].right_inverse(value)

    setattr(module.__class__, tensor_name, property(get_parametrized, set_original))


_CHAINED = ("Registering a parametrization may not change the {what} of the tensor, unless "
            "the `unsafe` flag is enabled.\nmodule.{name}.{what}: {old}\n"
            "parametrization(module.{name}).{what}: {new}")
_INVERSE = ("The tensor returned by parametrization.right_inverse must have the same {what} "
            "as module.{name}, unless the `unsafe` flag is enabled.\nmodule.{name}.{what}: "
            "{old}\nreturned {what}: {new}")


def register_parametrization(module, tensor_name, parametrization, *, unsafe=False):
    """Parametrize `module.<tensor_name>` (a parameter, a buffer, or an already
    parametrized tensor, whose list it extends) by the module `parametrization`.

    >>> class Symmetric(nn.Module):                                   # doctest: +SKIP
    ...     def forward(self, X): return X.triu() + X.triu(1).transpose(-1, -2)
    >>> register_parametrization(layer, "weight", Symmetric())          # doctest: +SKIP
    """
    parametrization.train(module.training)
    if is_parametrized(module, tensor_name):
        if not unsafe:
            y = getattr(module, tensor_name)
            x = parametrization(y)
            _check_result(x, _CHAINED, y.shape, y.dtype, tensor_name)
            if hasattr(parametrization, "right_inverse"):
                try:
                    z = parametrization.right_inverse(x)
                except NotImplementedError:
                    pass
                else:
                    if not isinstance(z, Tensor):
                        raise TracegradValueError("parametrization.right_inverse must return a "
                                                  f"tensor. Got: {type(z).__name__}")
                    _check_result(z, _INVERSE, y.shape, y.dtype, tensor_name)
        module.parametrizations[tensor_name].append(parametrization)
        module.parametrizations[tensor_name].unsafe |= unsafe
    elif tensor_name in module._buffers or tensor_name in module._parameters:
        original = getattr(module, tensor_name)
        plist = ParametrizationList([parametrization], original, unsafe=unsafe)
        delattr(module, tensor_name)
        if not is_parametrized(module):
            _inject_new_class(module)
            module.parametrizations = ModuleDict()
        _inject_property(module, tensor_name)
        module.parametrizations[tensor_name] = plist
    else:
        raise TracegradValueError(f"Module '{module}' does not have a parameter, a buffer, or "
                                  f"a parametrized element with name '{tensor_name}'")
    return module


def is_parametrized(module, tensor_name=None):
    """Whether `module` has any parametrization (or one on `tensor_name`)."""
    parametrizations = getattr(module, "parametrizations", None)
    if parametrizations is None or not isinstance(parametrizations, ModuleDict):
        return False
    if tensor_name is None:
        return len(parametrizations) > 0
    return tensor_name in parametrizations


def remove_parametrizations(module, tensor_name, leave_parametrized=True):
    """Undo `register_parametrization` on `tensor_name`: the tensor becomes a plain
    parameter (or buffer) again, holding its current parametrized value
    (`leave_parametrized=True`) or its original."""
    if not is_parametrized(module, tensor_name):
        raise TracegradValueError(f"Module {module} does not have a parametrization on "
                                  f"{tensor_name}")
    plist = module.parametrizations[tensor_name]
    if plist.is_tensor:
        original = plist.original
        if leave_parametrized:
            with no_grad():
                t = getattr(module, tensor_name)
                _maybe_set(original, t)
    else:
        if not leave_parametrized:
            raise TracegradValueError("Cannot leave unparametrized (`leave_parametrized=False`) "
                                      "a tensor that is parametrized in terms of a sequence of "
                                      "tensors.")
        t = getattr(module, tensor_name)
        original = Parameter(t.detach(), t.requires_grad) if t.requires_grad else t
    delattr(module.__class__, tensor_name)
    del module.parametrizations[tensor_name]
    _register_parameter_or_buffer(module, tensor_name, original)
    if not is_parametrized(module):
        delattr(module, "parametrizations")
        module.__class__ = module.__class__.__bases__[0]
    return module


def type_before_parametrizations(module):
    """The class `module` had before it was parametrized."""
    if is_parametrized(module):
        return module.__class__.__bases__[0]
    return type(module)
