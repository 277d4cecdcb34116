"""Helpers of `Module`: name checks, state_dict entry copying, zero_grad, hook handles.

Kept apart from `module.py` so that file holds only the Module contract; `optim` reuses
`_zero_grad` and `_typename` so modules and optimizers reset gradients identically.
"""
from collections import namedtuple

from .. import _effects, _mode
from .._effects import _get_hook
from .._errors import TracegradTypeError
from .._tensor import Size, Tensor


class _IncompatibleKeys(namedtuple("IncompatibleKeys", ["missing_keys", "unexpected_keys"])):
    """What `load_state_dict` returns: the keys it could not match."""

    def __repr__(self):
        if not self.missing_keys and not self.unexpected_keys:
            return "<All keys matched successfully>"
        return super().__repr__()

    __str__ = __repr__


def _typename(obj):
    if isinstance(obj, Tensor):
        return obj.type()
    t = type(obj)
    return t.__name__ if t.__module__ == "builtins" else f"{t.__module__}.{t.__qualname__}"


def _check_name(kind, name, module, registry):
    if not isinstance(name, str):
        raise TracegradTypeError(f"{kind} name should be a string. Got {_typename(name)}")
    if "." in name:
        raise KeyError(f'{kind} name can\'t contain "."')
    if name == "":
        raise KeyError(f'{kind} name can\'t be empty string ""')
    if hasattr(module, name) and name not in registry:
        raise KeyError(f"attribute '{name}' already exists")


def _indent(text, n):
    first, *rest = text.split("\n")
    return "\n".join([first] + [" " * n + line for line in rest])


def _copy_entry(key, param, value, errors, assign_to=None):
    """Copy one state_dict value into `param` in place, recording problems in `errors`.
    `assign_to=(module, name)` (`load_state_dict(..., assign=True)`): put the checkpoint's
    tensor itself there instead, its dtype and storage kept (a parameter becomes a
    Parameter on that storage keeping `param`'s requires_grad), as PyTorch does."""
    if not hasattr(value, "shape") or not hasattr(value, "__array__"):
        errors.append(f'While copying the parameter named "{key}", expected torch.Tensor or '
                      f"Tensor-like object from checkpoint but received {type(value)}")
        return
    shape = tuple(value.shape)
    if len(param.shape) == 0 and shape == (1,):
        value = value[0]              # old checkpoints stored scalars as 1-element vectors
        shape = ()
    if shape != tuple(param.shape):
        errors.append(f"size mismatch for {key}: copying a param with shape {Size(shape)} from "
                      f"checkpoint, the shape in current model is {param.shape}.")
        return
    if assign_to is not None and isinstance(value, Tensor):
        _assign_entry(*assign_to, param, value)
        return
    try:
        with _mode.no_grad():
            param.copy_(value)
    except Exception as ex:  # noqa: BLE001  (reported like PyTorch, all errors at once)
        errors.append(f'While copying the parameter named "{key}", whose dimensions in the '
                      f"model are {param.size()} and whose dimensions in the checkpoint are "
                      f"{value.shape}, an exception occurred : {ex.args}.")


def _assign_entry(module, name, param, value):
    from .parameter import Parameter
    if name in module._parameters:
        if isinstance(value, Parameter):
            value.requires_grad_(param.requires_grad)
        else:
            value = Parameter(value, requires_grad=param.requires_grad)
    setattr(module, name, value)


def _zero_grad(p, set_to_none):
    g = p._grad
    if _get_hook() is not None:              # inside a trace: the read decides the clearing
        _effects.grad_read(p, g, clearing=set_to_none)
    if g is None:
        return
    if set_to_none:
        p.grad = None
        return
    g = p.grad
    if g.grad_fn is not None:
        g.detach_()
    else:
        g.requires_grad_(False)
    with _mode.no_grad():
        g.zero_()


class _Handle:
    """Removable handle for module hooks (`handle.remove()`); removing also drops the id
    from the flag dicts (`with_kwargs`, `always_call`) it was added to."""

    _next = 0

    def __init__(self, registry, key, extra=()):
        self._registry, self._key, self._extra = registry, key, extra
        self.id = key

    @classmethod
    def add(cls, registry, hook, prepend=False, *flags):
        cls._next += 1
        key = cls._next
        registry[key] = hook
        if prepend:
            registry.move_to_end(key, last=False)
        extra = tuple(f for f in flags if f is not None)
        for f in extra:
            f[key] = True
        return cls(registry, key, extra)

    def remove(self):
        self._registry.pop(self._key, None)
        for f in self._extra:
            f.pop(self._key, None)

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.remove()
