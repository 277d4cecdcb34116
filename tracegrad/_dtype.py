"""Dtypes and PyTorch's type-promotion rules.

A `dtype` object wraps a numpy dtype and prints like PyTorch (`torch.float32`). Promotion
follows PyTorch's three tiers: dimensioned tensors outrank zero-dim tensors, which outrank
Python scalars; a lower tier only matters when it belongs to a higher *category*
(bool < integer < floating). A Python float never upcasts a float32 tensor, and an integer
tensor combined with a Python float gives the default float dtype.
"""
import threading

import numpy as np


class dtype:
    """A tensor element type (`tracegrad.float32`, ...). Compares by identity."""

    __slots__ = ("name", "np", "is_floating_point", "is_signed", "itemsize", "category")

    def __init__(self, name, np_dtype, category):
        self.name = name
        self.np = np.dtype(np_dtype)
        self.category = category            # 0 bool, 1 integer, 2 floating
        self.is_floating_point = category == 2
        self.is_signed = self.np.kind in "if" or name == "bfloat16"   # ml_dtypes: kind "V"
        self.itemsize = self.np.itemsize

    def __repr__(self):
        return "torch." + self.name

    def __reduce__(self):
        return (_by_name, (self.name,))


float16 = dtype("float16", np.float16, 2)
float32 = dtype("float32", np.float32, 2)
float64 = dtype("float64", np.float64, 2)
int8 = dtype("int8", np.int8, 1)
int16 = dtype("int16", np.int16, 1)
uint8 = dtype("uint8", np.uint8, 1)
int32 = dtype("int32", np.int32, 1)
int64 = dtype("int64", np.int64, 1)
bool_ = dtype("bool", np.bool_, 0)

# Note [bfloat16]
# numpy has no bfloat16; the ml_dtypes package (which JAX installs) adds one. tracegrad is not
# going to depend on it, so `bfloat16` is real only where ml_dtypes imports, and then only
# as a *storage* type: tensors can be made, converted (`.to`, `.bfloat16()`, `.float()`),
# viewed, indexed, concatenated, printed and saved, with PyTorch's rounding (nearest-even),
# and gradients flow through the conversions. Arithmetic on bfloat16 operands raises
# (Note [bfloat16 arithmetic] in _dispatch.py): PyTorch computes it in float32 and rounds
# each result, which numpy's ml_dtypes loops do not (`x * 3.5` even comes out float32), so a
# result would silently differ. Without ml_dtypes the name exists (programs and docs see the
# same API everywhere) but using it raises an error naming the fix.
try:
    import ml_dtypes as _ml_dtypes
except ImportError:                       # pragma: no cover - depends on the machine
    _ml_dtypes = None


class _MissingDtype(dtype):
    """A dtype whose element type needs a package that is not installed."""

    __slots__ = ("_why",)

    def __init__(self, name, category, why):
        self.name, self.category, self._why = name, category, why
        self.is_floating_point, self.is_signed = category == 2, True
        self.itemsize = 2

    @property
    def np(self):
        from ._errors import TracegradRuntimeError
        raise TracegradRuntimeError(self._why)


if _ml_dtypes is not None:
    bfloat16 = dtype("bfloat16", _ml_dtypes.bfloat16, 2)
    _ALL = (float16, float32, float64, uint8, int8, int16, int32, int64, bool_, bfloat16)
    BF16_NP = bfloat16.np
else:                                     # pragma: no cover - depends on the machine
    bfloat16 = _MissingDtype("bfloat16", 2, "tracegrad.bfloat16 needs the ml_dtypes package "
                             "(numpy has no bfloat16): `pip install ml_dtypes`, or use "
                             "float16/float32")
    _ALL = (float16, float32, float64, uint8, int8, int16, int32, int64, bool_)
    BF16_NP = None
_FROM_NP = {d.np: d for d in _ALL}
# numpy types users may hand us that have a natural PyTorch counterpart
for _np_t, _d in ((np.uint16, int32), (np.uint32, int64), (np.uint64, int64)):
    _FROM_NP.setdefault(np.dtype(_np_t), _d)


def _by_name(name):
    return {d.name: d for d in _ALL}[name]


def is_float_np(np_dtype):
    """Whether a numpy dtype is floating, bfloat16 included (ml_dtypes gives it kind "V")."""
    return np_dtype.kind == "f" or (BF16_NP is not None and np_dtype == BF16_NP)


def from_numpy_dtype(np_dtype):
    """Map a numpy dtype to the tracegrad dtype; raise TypeError for unsupported ones."""
    try:
        return _FROM_NP[np.dtype(np_dtype)]
    except KeyError:
        raise TypeError(
            f"can't convert np.ndarray of type {np.dtype(np_dtype)}. The only supported types "
            "are: float64, float32, float16, int64, int32, int16, int8, uint8, and bool."
        ) from None


_state = threading.local()


def get_default_dtype():
    """The dtype that floating Python numbers and float creation functions produce."""
    return getattr(_state, "default", float32)


def set_default_dtype(d):
    """Set the default floating dtype (float32 or float64, as in PyTorch)."""
    if not isinstance(d, dtype) or not d.is_floating_point:
        raise TypeError(f"only floating-point types are supported as the default type, got {d!r}")
    _state.default = d


_CAT_ORDER = {}
for _a in _ALL:
    for _b in _ALL:
        # Across categories the higher category's dtype wins (int32 + float32 -> float32,
        # int64 + float16 -> float16); numpy would widen to float64 instead.
        if {_a.name, _b.name} == {"bfloat16", "float16"}:
            _CAT_ORDER[_a, _b] = float32      # neither holds the other (numpy refuses)
            continue
        _CAT_ORDER[_a, _b] = (from_numpy_dtype(np.promote_types(_a.np, _b.np))
                              if _a.category == _b.category
                              else (_a if _a.category > _b.category else _b))


_SCALAR_NAMES = {"float16": "Half", "float32": "Float", "float64": "Double", "int32": "Int",
                 "int64": "Long", "int16": "Short", "int8": "Char", "uint8": "Byte",
                 "bool": "Bool", "bfloat16": "BFloat16"}


def scalar_type_name(d):
    """PyTorch's C++ scalar-type name used in its error messages (`Float`, `Long`, ...)."""
    return _SCALAR_NAMES[d.name]


def tensor_type_name(d):
    """PyTorch's legacy tensor-type name (`FloatTensor`, `ByteTensor`, ...)."""
    return _SCALAR_NAMES[d.name] + "Tensor"


# the IR's and the drawings' short spelling of each dtype (`f32[4,3]`, `u8[2]`)
_SHORT_NAMES = {"float16": "f16", "float32": "f32", "float64": "f64", "int64": "i64",
                "int32": "i32", "int16": "i16", "int8": "i8", "uint8": "u8", "bool": "bool",
                "bfloat16": "bf16"}


def wrap_int(v, np_dtype):
    """Python int `v` wrapped into the range of a narrow integer numpy dtype, as PyTorch
    converts a scalar operand (`int8_tensor + 300` adds 44, `uint8_tensor < 1000` compares
    with 232); numpy would raise OverflowError instead."""
    bits = np_dtype.itemsize * 8
    low = -(1 << (bits - 1)) if np_dtype.kind == "i" else 0
    return (v - low) % (1 << bits) + low


def promote_types(a, b):
    """The smallest dtype both `a` and `b` can be cast to (torch.promote_types)."""
    if a is b:
        return a
    try:
        return _CAT_ORDER[a, b]
    except KeyError:
        a.np, b.np                        # bfloat16 without ml_dtypes: its error names the fix
        raise


def can_cast_public(from_, to):
    """`torch.can_cast(from_, to)`: whether PyTorch's casting rules allow `from_` into `to`
    (within a kind or up: never floating into integer, nor anything but bool into bool).

    >>> tg.can_cast(tg.int32, tg.float16), tg.can_cast(tg.float64, tg.int64)
    (True, False)
    """
    for pos, (name, d) in enumerate((("from_", from_), ("to", to)), 1):
        if not isinstance(d, dtype):
            raise TypeError(f"can_cast(): argument '{name}' (position {pos}) must be "
                            f"torch.dtype, not {type(d).__name__}")
    return can_cast(from_, to)


def python_number(x):
    """A numpy scalar as the Python number PyTorch takes it for: its value, where `np.bool_`
    counts as a float (`int_tensor * np.True_` is float32; see `scalar_category`)."""
    return float(x) if isinstance(x, np.bool_) else x.item()


def scalar_category(x):
    """0 bool, 1 integer, 2 floating. numpy scalars count as Python numbers, as in PyTorch
    (`np.int64(3)` is an integer; `np.bool_` counts as a float there)."""
    if isinstance(x, bool):
        return 0
    if isinstance(x, (int, np.integer)):
        return 1
    return 2


def result_type(tensors_dims, zero_dims, scalars):
    """PyTorch promotion over three tiers of operands.

    `tensors_dims`, `zero_dims`: dtypes of dimensioned and zero-dim tensors; `scalars`: Python
    numbers. Returns the result dtype.
    """
    res = None
    for d in tensors_dims:
        res = d if res is None else promote_types(res, d)
    zres = None
    for d in zero_dims:
        zres = d if zres is None else promote_types(zres, d)
    if zres is not None and (res is None or zres.category > res.category):
        res = zres if res is None else (promote_types(res, zres) if res.category == zres.category
                                        else zres)
    if scalars:
        cat = max(scalar_category(s) for s in scalars)
        if res is None or cat > res.category:
            res = (bool_, int64, get_default_dtype())[cat]
    return res


def can_cast(frm, to):
    """PyTorch's same-kind casting rule for in-place results (float into int is refused)."""
    return frm.category <= to.category


def as_dtype(d):
    """Accept a tracegrad dtype, a numpy dtype, or a Python type: `float` is float64 (as in
    PyTorch, whatever the default dtype), `int` int64, `bool` bool."""
    if isinstance(d, dtype):
        return d
    if d is float:
        return float64
    if d is int:
        return int64
    if d is bool:
        return bool_
    return from_numpy_dtype(d)
