"""Tensor creation: `tensor`, `as_tensor`, `from_numpy`, constant fills, ranges, eye, random
draws (from the generators of ops/generator.py) and the `*_like` variants.

Random draws are primitives (`rand`, `randn`, `randint`, `bernoulli`) taking the generator as
an explicit operand, so a tracer records them as ops instead of baking numbers in.
"""
import functools
import numbers
import operator

import numpy as np

from .. import _dtype as D
from .. import _mode
from .._device import check_device
from .._dispatch import dispatch
from .._rng_guard import check_draw as _check_draw
from .._errors import (TracegradNotImplementedError, TracegradRuntimeError,
                       TracegradTypeError, TracegradValueError, op_error)
from .._tensor import Tensor, from_array
from .._tensor import check_factory_requires_grad as _check_requires_grad
from . import shape_rules as SR
from .generator import default_generator
from .primitive import Primitive


def _size_keyword(factory):
    """`factory(size=(2, 3))` as `factory((2, 3))`: PyTorch's `*size` factories also take
    the shape by keyword (`torch.randn(size=shape)`, as d2l writes it)."""
    @functools.wraps(factory)
    def call(*args, **kwargs):
        if "size" in kwargs:
            if args:
                raise op_error(TracegradTypeError, factory.__name__, f"{factory.__name__}() "
                               "got multiple values for argument 'size'")
            args = (tuple(kwargs.pop("size")),)
        return factory(*args, **kwargs)
    return call


def _shape(size):
    if len(size) == 1 and isinstance(size[0], (tuple, list)):
        size = tuple(size[0])
    if len(size) == 1 and isinstance(size[0], Tensor):
        if size[0].dtype.is_floating_point:
            raise op_error(TracegradTypeError, "zeros", "size must be a tuple of ints, not "
                           "a floating Tensor")
        size = tuple(size[0].reshape(-1).tolist()) if size[0].ndim else (size[0].item(),)
    try:                        # `operator.index`: PyTorch refuses `zeros(2.5)` (int() truncates)
        shape = tuple(s if type(s) is int else operator.index(s) for s in size)
    except TypeError:
        raise op_error(TracegradTypeError, "zeros",
                       f"size must be a tuple of ints, but got {size!r}") from None
    if any(s < 0 for s in shape):
        raise op_error(TracegradRuntimeError, "zeros",
                       f"Trying to create tensor with negative dimension {min(shape)}: "
                       f"{list(shape)}")
    return shape


def _finish(arr, requires_grad):
    return from_array(arr, requires_grad)


def _float(dtype):
    return D.as_dtype(dtype) if dtype is not None else D.get_default_dtype()


def _infer(data, numpy_typed=False):
    """dtype of Python data, as torch.tensor infers it: each tensor its own dtype, a Python
    bool, int or float bool, int64 or the default dtype, promoted together (`tensor([t64[0],
    1])` is float64, `tensor([t16[0], 1.5])` float32). A numpy scalar counts as its own
    dtype with `numpy_typed` (`torch.tensor([np.float64(1.5)])` is float64), else as the
    Python number it holds (`torch.full((2,), np.float64(1.5))` is float32)."""
    out = None
    stack = [data]
    while stack:
        x = stack.pop()
        if isinstance(x, (list, tuple)):
            stack.extend(x)
            continue
        if isinstance(x, Tensor):
            d = x.dtype
        elif numpy_typed and isinstance(x, np.generic) and x.dtype in D._FROM_NP:
            d = D.from_numpy_dtype(x.dtype)
        elif isinstance(x, bool):
            d = D.bool_
        elif isinstance(x, np.bool_):        # counts as a float, as in PyTorch
            d = D.get_default_dtype()
        elif isinstance(x, (numbers.Integral,)):
            d = D.int64
        elif isinstance(x, numbers.Real):
            d = D.get_default_dtype()
        else:
            raise op_error(TracegradTypeError, "tensor",
                           f"Could not infer dtype of {type(x).__name__}")
        out = d if out is None else D.promote_types(out, d)
    return D.get_default_dtype() if out is None else out


def _to_list(data):
    if isinstance(data, Tensor):
        return data._data
    if isinstance(data, (list, tuple)):
        return [_to_list(d) for d in data]
    return data


def _checked_ints(values, inferred, want):
    """Python numbers converted into integer dtype `want` as PyTorch converts them: an
    integer must fit (an unsigned dtype also takes negatives down to -max, which wrap:
    `tensor([-2], dtype=uint8)` is 254); a float must lie within the dtype's range (NaN and
    inf never do) and is truncated. numpy refuses every negative for uint8 and clips or
    wraps floats silently."""
    try:
        raw = np.array(values, dtype=inferred.np)
    except OverflowError:                 # past int64: PyTorch fails unpacking it, as here
        raise op_error(TracegradValueError, "tensor", "Overflow when unpacking long long") \
            from None
    info = np.iinfo(want.np)
    if raw.dtype.kind == "f":
        bad = np.isnan(raw) | (raw < info.min) | (raw > info.max)
    else:
        low = info.min if info.min else -int(info.max)
        bad = (raw < low) | (raw > info.max)
    if bad.any():
        raise op_error(TracegradRuntimeError, "tensor",
                       f"value cannot be converted to type {want.name} without overflow")
    with np.errstate(all="ignore"):
        return raw.astype(want.np)


def tensor(data, dtype=None, device=None, requires_grad=False, pin_memory=False):
    """A new tensor holding a copy of `data` (nested lists, numbers, numpy arrays, tensors)."""
    check_device(device)
    from .._dispatch import trace_hook
    if trace_hook.get() is not None and _holds_tensor(data):
        return _traced_tensor(data, dtype, requires_grad)
    if isinstance(data, Tensor):
        arr = data._data.copy()
    elif isinstance(data, (np.ndarray, np.generic)):    # numpy scalars keep their dtype too
        arr = np.array(data, copy=True)
        if arr.dtype not in D._FROM_NP:
            arr = arr.astype(D.from_numpy_dtype(arr.dtype).np)
    else:
        inferred = _infer(data, numpy_typed=True)
        want = D.as_dtype(dtype) if dtype else inferred
        try:
            arr = (_checked_ints(_to_list(data), inferred, want) if want.category == 1
                   else np.array(_to_list(data), dtype=want.np))
        except TracegradValueError:
            raise
        except ValueError as e:
            raise op_error(TracegradValueError, "tensor", str(e)) from None
        except OverflowError as e:        # `tensor([300], dtype=uint8)`: PyTorch refuses too
            raise op_error(TracegradRuntimeError, "tensor", "value cannot be converted to type "
                           f"{str(e).rsplit(' ', 1)[-1]} without overflow") from None
    if dtype is not None:
        arr = arr.astype(D.as_dtype(dtype).np, copy=False)
    return _finish(arr, requires_grad)


def _holds_tensor(data):
    if isinstance(data, (list, tuple)):
        return any(_holds_tensor(d) for d in data)
    return isinstance(data, Tensor) or _live_number(data)


def _live_number(x):
    """A float or int the trace reads per call (Note [Numbers read per call], Note
    [Integers read per call]), still live: `tensor([lr, 0.9])` copies its traced 0-d value
    instead of baking the value in."""
    from ..tracing.numbers import STAND_INS
    return type(x) in STAND_INS and x._t is not None and x._owner.recording()


def _traced_copy(n, want):
    """The traced 0-d value of live stand-in `n` in dtype `want`, or None where a cast could
    differ from eager's conversion of the number (an int into a float or a narrower int:
    the exact value is then taken)."""
    if n._t.dtype is want or (want.is_floating_point and n._t.is_floating_point()):
        from .shape import to_dtype
        return to_dtype(n._t, want)
    return None


def _traced_tensor(data, dtype, requires_grad):
    """`tensor(...)` of tensors while tracing: record the copy (detach, cast, stack) so the
    compiled program reads those tensors on every call instead of baking today's values in."""
    from .shape import clone, stack, to_dtype
    want = D.as_dtype(dtype) if dtype is not None else _infer(data, numpy_typed=True)

    def build(d):
        if isinstance(d, Tensor):
            return clone(to_dtype(d.detach(), want))
        if _live_number(d):
            t = _traced_copy(d, want)
            if t is not None:
                return clone(t)
            return tensor(float(d) if isinstance(d, float) else int(d),   # its exact value
                          dtype=want)                                   # (NaN: numpy's error)
        if isinstance(d, (list, tuple)):
            return stack([build(x) for x in d])
        return tensor(d, dtype=want)
    t = build(data)
    if requires_grad:
        _check_requires_grad(t)
        t.requires_grad_(True)
    return t


def as_tensor(data, dtype=None, device=None):
    """Like `tensor`, but shares memory with a numpy array or tensor when no conversion."""
    check_device(device)
    if isinstance(data, Tensor):
        return data if dtype is None or D.as_dtype(dtype) is data.dtype else data.to(dtype)
    if isinstance(data, np.ndarray) and (dtype is None or D.as_dtype(dtype).np == data.dtype):
        return from_numpy(data)
    return tensor(data, dtype=dtype)


def from_numpy(ndarray):
    """A tensor sharing memory with `ndarray` (writes to one show in the other)."""
    if not isinstance(ndarray, np.ndarray):
        raise op_error(TracegradTypeError, "from_numpy",
                       f"expected np.ndarray (got {type(ndarray).__name__})")
    D.from_numpy_dtype(ndarray.dtype)
    return from_array(ndarray)


def _full_kernel(shape, fill_value, dtype):
    return np.full(shape, fill_value, dtype=dtype)


FULL = Primitive("full", _full_kernel, shape_rule=SR.attr_shape)


def _fill(value, size, dtype, requires_grad, default=None):
    d = D.as_dtype(dtype) if dtype is not None else (default or D.get_default_dtype())
    copy = _traced_copy(value, d) if _live_number(value) else None
    if copy is not None:             # `full((3,), lr)`: the traced value (Note [Numbers read
        from .shape import clone, expand                                  # per call])
        t = clone(expand(copy, *_shape(size)))
    else:
        t = dispatch(FULL, (), {"shape": _shape(size), "fill_value": value, "dtype": d.np})
    if requires_grad:
        _check_requires_grad(t)
        t.requires_grad_(True)
    return t


@_size_keyword
def zeros(*size, dtype=None, device=None, requires_grad=False, out=None):
    check_device(device)
    if out is not None:                  # written into `out` (ops/out_arg.py)
        from .out_arg import write_out
        return write_out("zeros", out, _fill(0, size, dtype or out.dtype, False), ())
    return _fill(0, size, dtype, requires_grad)


@_size_keyword
def ones(*size, dtype=None, device=None, requires_grad=False, out=None):
    check_device(device)
    if out is not None:                  # written into `out` (ops/out_arg.py)
        from .out_arg import write_out
        return write_out("ones", out, _fill(1, size, dtype or out.dtype, False), ())
    return _fill(1, size, dtype, requires_grad)


@_size_keyword
def empty(*size, dtype=None, device=None, requires_grad=False, out=None):
    check_device(device)
    if out is not None:                  # written into `out` (ops/out_arg.py)
        from .out_arg import write_out
        return write_out("empty", out, _fill(0, size, dtype or out.dtype, False), ())
    return _fill(0, size, dtype, requires_grad)


def full(size, fill_value, *, dtype=None, device=None, requires_grad=False):
    check_device(device)
    if isinstance(fill_value, Tensor):
        fill_value = fill_value.item()
    default = _infer(fill_value)
    return _fill(fill_value, (size,) if not isinstance(size, (tuple, list)) else tuple(size),
                 dtype, requires_grad, default)


def eye(n, m=None, *, dtype=None, device=None, requires_grad=False):
    check_device(device)
    for name, v in (("n", n), ("m", m)):
        if v is not None and v < 0:
            raise op_error(TracegradRuntimeError, "eye",
                           f"{name} must be greater or equal to 0, got {v}")
    return _finish(np.eye(n, m if m is not None else n, dtype=_float(dtype).np), requires_grad)


def arange(start, end=None, step=1, *, dtype=None, device=None, requires_grad=False):
    check_device(device)
    if end is None:
        start, end = 0, start
    vals = [v.item() if isinstance(v, Tensor) else v for v in (start, end, step)]
    if vals[2] == 0:
        raise op_error(TracegradRuntimeError, "arange", "step must be nonzero")
    if (vals[1] - vals[0]) * vals[2] < 0:      # PyTorch refuses; numpy gives an empty range
        raise op_error(TracegradRuntimeError, "arange", "upper bound and lower bound "
                       "inconsistent with step sign")
    d = D.as_dtype(dtype) if dtype is not None else _infer(vals)
    if d is D.bool_:
        d = D.int64
    n = int(np.ceil((vals[1] - vals[0]) / vals[2]))
    arr = (vals[0] + np.arange(max(n, 0)) * vals[2]).astype(d.np)
    return _finish(arr, requires_grad)


def linspace(start, end, steps, *, dtype=None, device=None, requires_grad=False):
    check_device(device)
    if steps < 0:
        raise op_error(TracegradRuntimeError, "linspace", "number of steps must be non-negative")
    return _finish(np.linspace(start, end, steps).astype(_float(dtype).np), requires_grad)


def logspace(start, end, steps, base=10.0, *, dtype=None, requires_grad=False):
    return _finish((base ** np.linspace(start, end, steps)).astype(_float(dtype).np),
                   requires_grad)


# ---------------- random draws (the generators: ops/generator.py) ----------------
def _rand_kernel(gen, shape, dtype):
    return gen._rng.random(shape, dtype=np.float64).astype(dtype, copy=False) \
        if dtype != np.float32 else gen._rng.random(shape, dtype=np.float32)


def _randn_kernel(gen, shape, dtype):
    return gen._rng.standard_normal(shape, dtype=np.float64).astype(dtype, copy=False) \
        if dtype != np.float32 else gen._rng.standard_normal(shape, dtype=np.float32)


def _randint_kernel(gen, low, high, shape, dtype):
    return gen._rng.integers(low, high, shape).astype(dtype, copy=False)


RAND = Primitive("rand", _rand_kernel, impure=True, shape_rule=SR.attr_shape)
RANDN = Primitive("randn", _randn_kernel, impure=True, shape_rule=SR.attr_shape)
RANDINT = Primitive("randint", _randint_kernel, impure=True, shape_rule=SR.attr_shape)


def _random(prim, size, dtype, requires_grad, generator, **attrs):
    d = _float(dtype) if prim is not RANDINT else (D.as_dtype(dtype) if dtype else D.int64)
    if prim is not RANDINT and not d.is_floating_point:     # PyTorch's kernel names
        kernel = "normal_kernel_cpu" if prim is RANDN else "check_uniform_bounds"
        raise op_error(TracegradNotImplementedError, prim.name, f'"{kernel}" not implemented '
                       f"for '{D.scalar_type_name(d)}'")
    _check_draw()
    t = dispatch(prim, (generator or default_generator,),
                 dict(attrs, shape=_shape(size), dtype=d.np))
    if requires_grad:
        _check_requires_grad(t)
        t.requires_grad_(True)
    return t


@_size_keyword
def rand(*size, generator=None, dtype=None, device=None, requires_grad=False):
    """Uniform [0, 1) samples."""
    check_device(device)
    return _random(RAND, size, dtype, requires_grad, generator)


@_size_keyword
def randn(*size, generator=None, dtype=None, device=None, requires_grad=False):
    """Standard normal samples."""
    check_device(device)
    return _random(RANDN, size, dtype, requires_grad, generator)


def randint(low=0, high=None, size=None, *, generator=None, dtype=None, device=None,
            requires_grad=False):
    check_device(device)
    if size is None:
        low, high, size = 0, low, high
    if int(low) >= int(high):
        raise op_error(TracegradRuntimeError, "randint", f"random_ expects 'from' to be less "
                       f"than 'to', but got from={int(low)} >= to={int(high)}")
    return _random(RANDINT, (size,) if isinstance(size, int) else tuple(size), dtype,
                   requires_grad, generator, low=int(low), high=int(high))


def _randperm_kernel(gen, shape, dtype):
    return gen._rng.permutation(shape[0]).astype(dtype, copy=False)


# a draw like the others (impure, the generator an input): a compiled call draws anew
RANDPERM = Primitive("randperm", _randperm_kernel, impure=True, shape_rule=SR.attr_shape)


def _count(n, op):
    n = int(n)
    if n < 0:
        raise op_error(TracegradRuntimeError, op,
                       f"Trying to create tensor with negative dimension {n}: [{n}]")
    return n


def randperm(n, *, generator=None, dtype=None, device=None, requires_grad=False):
    """A random permutation of 0..n-1 (int64 unless `dtype` says otherwise)."""
    check_device(device)
    d = D.as_dtype(dtype) if dtype else D.int64
    _check_draw()
    t = dispatch(RANDPERM, (generator or default_generator,),
                 dict(shape=(_count(n, "randperm"),), dtype=d.np))
    if requires_grad:
        _check_requires_grad(t)
        t.requires_grad_(True)
    return t


def normal(mean=0.0, std=1.0, size=None, *, generator=None, dtype=None, device=None,
           requires_grad=False):
    """`mean + std * randn(shape)`: shape `size`, or the broadcast shape of tensor `mean` /
    `std` (in their floating dtype), as `torch.normal(mean, std)`. The factory form
    (float `mean` and `std`, a `size`) takes `dtype` and `requires_grad`, as
    `torch.normal(0, 0.01, size=(2, 1), requires_grad=True)`. Like PyTorch's, the
    draw passes a zero gradient to `mean` and `std` (it is no reparameterized sample:
    `Normal(mean, std).rsample()` is)."""
    from . import elementwise as E
    if not isinstance(std, Tensor) and std < 0:
        raise op_error(TracegradRuntimeError, "normal", f"normal expects std >= 0.0, but found "
                       f"std {std:g}")
    tensors = [t for t in (mean, std) if isinstance(t, Tensor)]
    for t in tensors:
        if not t.is_floating_point():
            raise op_error(TracegradNotImplementedError, "normal", '"normal_kernel_cpu" not '
                           f"implemented for '{D.scalar_type_name(t.dtype)}'")
    if isinstance(std, Tensor) and bool(E.lt(std.detach(), 0).any()):
        raise op_error(TracegradRuntimeError, "normal",
                       "normal expects all elements of std >= 0.0")
    check_device(device)
    if tensors and (dtype is not None or requires_grad):
        raise op_error(TracegradTypeError, "normal", "normal() takes dtype and requires_grad "
                       "only with float mean and std and a size")
    m, s_ = (t.detach() if isinstance(t, Tensor) else t for t in (mean, std))
    if size is None and tensors:
        shape = np.broadcast_shapes(*(tuple(t.shape) for t in tensors))
        dtype = D._FROM_NP[np.result_type(*(t.dtype.np for t in tensors))]
        out = E.add(E.mul(randn(shape, generator=generator, dtype=dtype), s_), m)
    else:
        out = E.add(E.mul(randn(*(size or ()), generator=generator, dtype=dtype), s_), m)
        if requires_grad:
            _check_requires_grad(out)
            out.requires_grad_(True)
    if _mode.is_grad_enabled():            # PyTorch records a node whose gradients are zero
        keep = None
        for t in tensors:
            if t.requires_grad:
                keep = full((), True, dtype=D.bool_) if keep is None else keep
                out = E.where(keep, out, t)
    return out


# ---------------- *_like ----------------
def _like_dtype(t, dtype):
    return D.as_dtype(dtype) if dtype is not None else t.dtype


def zeros_like(input, *, dtype=None, device=None, requires_grad=False, memory_format=None):
    check_device(device)
    return zeros(input.shape, dtype=_like_dtype(input, dtype), requires_grad=requires_grad)


def ones_like(input, *, dtype=None, device=None, requires_grad=False, memory_format=None):
    check_device(device)
    return ones(input.shape, dtype=_like_dtype(input, dtype), requires_grad=requires_grad)


def empty_like(input, *, dtype=None, device=None, requires_grad=False, memory_format=None):
    check_device(device)
    return empty(input.shape, dtype=_like_dtype(input, dtype), requires_grad=requires_grad)


def full_like(input, fill_value, *, dtype=None, device=None, requires_grad=False,
              memory_format=None):
    check_device(device)
    return full(input.shape, fill_value, dtype=_like_dtype(input, dtype),
                requires_grad=requires_grad)


def rand_like(input, *, generator=None, dtype=None, device=None, requires_grad=False,
              memory_format=None):
    check_device(device)
    return rand(input.shape, generator=generator, dtype=_like_dtype(input, dtype),
                requires_grad=requires_grad)


def randn_like(input, *, generator=None, dtype=None, device=None, requires_grad=False,
               memory_format=None):
    check_device(device)
    return randn(input.shape, generator=generator, dtype=_like_dtype(input, dtype),
                 requires_grad=requires_grad)


def randint_like(input, low=0, high=None, *, generator=None, dtype=None, device=None,
                 requires_grad=False, memory_format=None):
    check_device(device)
    if high is None:
        low, high = 0, low
    return randint(low, high, tuple(input.shape), generator=generator,
                   dtype=_like_dtype(input, dtype), requires_grad=requires_grad)


_ = _mode
