"""PyTorch's remaining in-place elementwise methods (`abs_`, `sqrt_`, `atan2_`, `eq_`,
`logical_and_`, `cumsum_`, ...) and their `torch.xxx_` function spellings.

Each is the out-of-place op written into the tensor by `write_result` (composite_missing.py),
the mechanism `frac_` and `lerp_` use: PyTorch's cast and broadcast errors, one version
bump, and `copy_`'s view (CopySlices) rules. Before computing, the target is checked as
every in-place op checks it (leaf that requires grad, inference tensor: `_check_target`)
and a tensor operand against it (partial overlap: `_overlap.check_overlap`); the op then
reads a clone of the target when autograd records (`_source`). No new primitives: tracing,
gradients to any order and the JAX lowering come from the ops composed. Where an in-place
primitive already exists (`mul_`, `sub_`, `div_`) the alias calls it instead.

Differences from PyTorch, all towards working: `acosh_`, `asinh_`, `atanh_` (and arc-
spellings) are differentiable (PyTorch raises NotImplementedError at backward); an
operand equal to the target (`x.atan2_(x)`) is differentiated (PyTorch's saved value goes
stale); `logical_not_` / `logical_and_` / `logical_or_` / `logical_xor_` on a leaf that
requires grad raise like every other in-place op (PyTorch lets them through).

>>> x = tensor([-1.0, 4.0]); x.abs_().sqrt_()
tensor([1., 2.])
"""
from .. import _dtype as D
from .. import _mode
from .._overlap import check_overlap
from .._errors import (TracegradNotImplementedError, TracegradRuntimeError,
                       TracegradTypeError, op_error)
from .._tensor import Tensor
from . import elementwise as E
from .composite_missing import write_result
from .inplace_shape import _check_target


def _source(name, self):
    """What the out-of-place op reads: a clone when autograd records, since the op may save
    its input for backward and the write that follows would make that saved value stale
    (PyTorch's in-place formulas save the original self the same way). A leaf that requires
    grad, or an inference tensor, is refused first, naming the op (copy_ would again)."""
    _check_target(name, self)
    if self.requires_grad and _mode.is_grad_enabled():
        return self.clone()
    return self


def _unary_(name, fn):
    def method(self):
        return write_result(name, self, fn(_source(name, self)))
    method.__name__ = name
    method.__doc__ = f"`{name[:-1]}` in place (bumps `_version`; returns self)."
    return method


def _no_bool(name, kernel, self):
    if self.dtype is D.bool_:
        raise op_error(TracegradNotImplementedError, name,
                       f'"{kernel}" not implemented for \'Bool\'')


def _tensor_other(name, other, position=1):
    if not isinstance(other, Tensor):
        raise TracegradTypeError(f"{name}(): argument 'other' (position {position}) must be "
                                 f"Tensor, not {type(other).__name__}")


# PyTorch takes only a Tensor `other` for these (no Scalar overload)
_TENSOR_ONLY = {"atan2_", "arctan2_", "logical_and_", "logical_or_", "logical_xor_"}


class _Writes:
    """What `check_overlap` reads of a primitive: its name, and that it writes every element
    elementwise (Note [Overlapping in-place operands] in _overlap.py)."""
    writes = "all"

    def __init__(self, name):
        self.name = name


def _check_operand(name, self, other):
    if isinstance(other, Tensor):
        check_overlap(_Writes(name), (self, other), {})


def _binary_(name, fn):
    def method(self, other):
        if name in _TENSOR_ONLY:
            _tensor_other(name, other)
        _check_operand(name, self, other)
        src = _source(name, self)
        return write_result(name, self, fn(src, src if other is self else other))
    method.__name__ = name
    method.__doc__ = f"`{name[:-1]}(self, other)` written into self (returns self)."
    return method


def logical_xor(input, other):
    """True where exactly one of `input`, `other` is nonzero (NaN counts as nonzero).

    >>> logical_xor(tensor([0.0, 1.0, 2.0]), tensor([1.0, 1.0, 0.0]))
    tensor([ True, False,  True])
    """
    _tensor_other("logical_xor", other, 2)
    return E.ne(E.ne(input, 0), E.ne(other, 0))


def _unaries():
    from . import trig_prim as T
    from .fmod_prim import trunc
    from .special_more import exp2
    return {"abs_": E.abs, "absolute_": E.abs, "acos_": T.acos, "acosh_": T.acosh,
            "asin_": T.asin, "asinh_": T.asinh, "atan_": T.atan, "atanh_": T.atanh,
            "arccos_": T.acos, "arccosh_": T.acosh, "arcsin_": T.asin, "arcsinh_": T.asinh,
            "arctan_": T.atan, "arctanh_": T.atanh, "ceil_": E.ceil, "floor_": E.floor,
            "trunc_": trunc, "fix_": trunc, "cos_": E.cos, "cosh_": T.cosh, "sin_": E.sin,
            "sinh_": T.sinh, "tan_": T.tan, "exp2_": exp2, "log_": E.log, "log10_": T.log10,
            "sqrt_": E.sqrt, "rsqrt_": E.rsqrt, "square_": E.square,
            "reciprocal_": E.reciprocal, "sign_": E.sign, "logical_not_": E.logical_not,
            "bitwise_not_": E.bitwise_not}


def _binaries():
    from . import trig_prim as T
    return {"atan2_": T.atan2, "arctan2_": T.atan2, "xlogy_": E.xlogy,
            "remainder_": E.remainder, "floor_divide_": E.floor_divide,
            "eq_": E.eq, "ne_": E.ne, "lt_": E.lt, "le_": E.le, "gt_": E.gt, "ge_": E.ge,
            "not_equal_": E.ne, "greater_": E.gt, "greater_equal_": E.ge, "less_": E.lt,
            "less_equal_": E.le, "logical_and_": E.logical_and, "logical_or_": E.logical_or,
            "logical_xor_": logical_xor, "bitwise_and_": E.bitwise_and,
            "bitwise_or_": E.bitwise_or, "bitwise_xor_": E.bitwise_xor}


UNARY = {n: _unary_(n, f) for n, f in _unaries().items()}


_plain_trunc_, _plain_square_ = UNARY["trunc_"], UNARY["square_"]


def _trunc_(name):
    def method(self):
        _no_bool(name, "trunc_vml_cpu", self)
        return _plain_trunc_(self)
    method.__name__ = name
    method.__doc__ = "`trunc` in place (round toward zero)."
    return method


def square_(self):
    """`square` in place (a bool tensor's square is an integer: PyTorch's cast error)."""
    if self.dtype is D.bool_:
        raise op_error(TracegradRuntimeError, "square_",
                       "result type Long can't be cast to the desired output type Bool")
    return _plain_square_(self)


UNARY.update(trunc_=_trunc_("trunc_"), fix_=_trunc_("fix_"), square_=square_)
BINARY = {n: _binary_(n, f) for n, f in _binaries().items()}


def logit_(self, eps=None):
    """`logit(self, eps)` in place."""
    from .composite_math import logit
    return write_result("logit_", self, logit(_source("logit_", self), eps))


def round_(self, *, decimals=0):
    """`round(self, decimals=decimals)` in place."""
    return write_result("round_", self, E.round(_source("round_", self), decimals=decimals))


def negative_(self):
    """Alias of `neg_`."""
    return self.neg_()


def multiply_(self, other):
    """Alias of `mul_`."""
    return self.mul_(other)


def subtract_(self, other, *, alpha=1):
    """Alias of `sub_`."""
    return self.sub_(other, alpha=alpha)


def true_divide_(self, other):
    """Alias of `div_`."""
    return self.div_(other)


def divide_(self, other, *, rounding_mode=None):
    """`div_` with PyTorch's `rounding_mode` (None, "trunc" or "floor")."""
    if rounding_mode is None:
        return self.div_(other)
    _check_operand("divide_", self, other)
    res = E.div(_source("divide_", self), other, rounding_mode=rounding_mode)
    return write_result("divide_", self, res)


def clamp_min_(self, min):
    """`clamp_(min=min)`."""
    return self.clamp_(min=min)


def clamp_max_(self, max):
    """`clamp_(max=max)`."""
    return self.clamp_(max=max)


def _scan_(name, self, dim, dtype):
    from . import scan
    _no_bool(name, f"{name[:-1]}_out_cpu", self)
    if dtype is not None and D.as_dtype(dtype) is not self.dtype:
        have, want = (D.scalar_type_name(d).lower() for d in (self.dtype, D.as_dtype(dtype)))
        raise op_error(TracegradRuntimeError, name, f"Bad in-place call: input tensor dtype "
                       f"{have} and output tensor dtype {want} should match")
    return write_result(name, self, getattr(scan, name[:-1])(_source(name, self), dim))


def cumsum_(self, dim, dtype=None):
    """`cumsum(self, dim)` in place (`dtype`, if given, must be self's)."""
    return _scan_("cumsum_", self, dim, dtype)


def cumprod_(self, dim, dtype=None):
    """`cumprod(self, dim)` in place (`dtype`, if given, must be self's)."""
    return _scan_("cumprod_", self, dim, dtype)


METHODS = dict(UNARY, **BINARY, logit_=logit_, round_=round_, negative_=negative_,
               multiply_=multiply_, subtract_=subtract_, true_divide_=true_divide_,
               divide_=divide_, clamp_min_=clamp_min_, clamp_max_=clamp_max_,
               cumsum_=cumsum_, cumprod_=cumprod_)


# ---- torch.xxx_ functions (PyTorch has these only for unary ops and a few others) ----

def _nn_inplace(name):
    def fn(input, *args, **kwargs):
        from ..nn import functional as F
        return getattr(F, name)(input, *args, **kwargs)
    fn.__name__ = name
    fn.__doc__ = f"`torch.{name}`: `nn.functional.{name}`."
    return fn


def _method_fn(name):
    def fn(input, *args, **kwargs):
        if not isinstance(input, Tensor):
            raise TracegradTypeError(f"{name}(): argument 'input' (position 1) must be "
                                     f"Tensor, not {type(input).__name__}")
        return getattr(input, name)(*args, **kwargs)
    fn.__name__ = name
    fn.__doc__ = f"`torch.{name}(input, ...)` is `input.{name}(...)`."
    return fn


# the names torch has as functions (torch.abs_, torch.relu_, torch.zero_, ...)
FUNCTION_NAMES = """abs_ acos_ acosh_ asin_ asinh_ atan_ atanh_ arccos_ arccosh_ arcsin_
arcsinh_ arctan_ arctanh_ ceil_ floor_ round_ trunc_ fix_ cos_ cosh_ sin_ sinh_ tan_ exp2_ log_
log10_ log1p_ log2_ erf_ erfc_ expm1_ exp_ i0_ sinc_ sqrt_ rsqrt_ square_ reciprocal_ neg_
negative_ logit_ xlogy_ clamp_min_ clamp_max_ clip_ nan_to_num_ relu_ sigmoid_ tanh_ zero_
fill_ detach_""".split()
NN_FUNCTION_NAMES = "selu_ celu_ threshold_ rrelu_".split()


def functions():
    """{name: function} for the `torch.xxx_` spellings (installed by the root package)."""
    out = {n: _method_fn(n) for n in FUNCTION_NAMES}
    out.update({n: _nn_inplace(n) for n in NN_FUNCTION_NAMES})
    return out
