"""In-place random fills as Tensor methods, with PyTorch's names, defaults and argument
checks: `normal_(mean=0, std=1)`, `uniform_(from=0, to=1)` (what GPT-style init code writes:
`module.weight.data.normal_(0.0, 0.02)`), `bernoulli_(p=0.5)`, `exponential_(lambd=1)`,
`geometric_(p)`, `random_([from,] to)`, `cauchy_(median=0, sigma=1)`,
`log_normal_(mean=1, std=2)`.

Each is `copy_` of a fresh draw from tracegrad's generator (`rand`, `randn` or `randint`,
transformed by ordinary ops), so it is an ordinary in-place op: it bumps the version,
refuses a leaf that requires grad in grad mode (PyTorch's error), and under `compile` draws
anew on every call, on either backend. The numbers differ from PyTorch's; the
distributions are the same.
"""
import math

import numpy as np

from .. import _dtype as D
from .._errors import (TracegradNotImplementedError, TracegradRuntimeError, TracegradTypeError,
                       op_error)
from . import creation as C
from . import elementwise as E


def _check_leaf(self, op):
    """PyTorch names the fill itself (`normal_`), not the `copy_` it is built on."""
    from .._errors import InplaceError
    from .._mode import is_grad_enabled
    if self.requires_grad and self.is_leaf and is_grad_enabled():
        raise op_error(InplaceError, op, "a leaf Variable that requires grad is being used in "
                       "an in-place operation.", "Wrap the update in `with torch.no_grad():`, "
                       "or clone the tensor first.")


def _fail(op, message, kind=TracegradRuntimeError):
    raise op_error(kind, op, message)


# the C++ type names some of PyTorch's messages print
_C_TYPES = {"int64": "long int", "int32": "int", "int16": "short int", "int8": "signed char",
            "uint8": "unsigned char", "bool": "bool"}


def _continuous(self, op, name, c_type=False):
    if not self.is_floating_point():
        t = _C_TYPES[self.dtype.name] if c_type else D.scalar_type_name(self.dtype)
        _fail(op, f"{name} distribution is a continuous probability distribution. dtype must "
                  f"be a floating point but you specified {t}")


def normal_(self, mean=0.0, std=1.0, *, generator=None):
    """Fill with samples of N(mean, std^2).

    >>> tracegrad.empty(3).normal_(0.0, 0.02).shape
    torch.Size([3])
    """
    _check_leaf(self, "normal_")
    if std < 0:
        _fail("normal_", f"normal expects std >= 0.0, but found std {std:g}")
    z = C.randn(tuple(self.shape), dtype=self.dtype, generator=generator)
    return self.copy_(z * std + mean)


def uniform_(self, *args, generator=None, **kwargs):
    """Fill with samples of U(from, to) (PyTorch's argument names `from` and `to`)."""
    _check_leaf(self, "uniform_")
    lo, hi = (list(args) + [None, None])[:2]
    lo = kwargs.pop("from", 0.0) if lo is None else lo
    hi = kwargs.pop("to", 1.0) if hi is None else hi
    if kwargs:
        raise TypeError(f"uniform_() got an unexpected keyword argument '{next(iter(kwargs))}'")
    if lo > hi:
        _fail("uniform_", f"uniform_ expects to return a [from, to) range, but found "
                          f"from={lo:g} > to={hi:g}")
    u = C.rand(tuple(self.shape), dtype=self.dtype, generator=generator)
    return self.copy_(u * (hi - lo) + lo)


def bernoulli_(self, p=0.5, *, generator=None):
    """Fill with 0/1 draws, each 1 with probability `p` (a number or a tensor).

    A tensor `p` broadcasts to `self`; `self` may have an integer or bool dtype."""
    _check_leaf(self, "bernoulli_")
    from .._tensor import Tensor
    if isinstance(p, Tensor):
        probs = p.detach().expand(tuple(self.shape))
        from .sampling import bernoulli
        return self.copy_(bernoulli(probs.to(probs.dtype if probs.is_floating_point()
                                             else D.float32), generator=generator))
    if not 0 <= p <= 1:
        _fail("bernoulli_", f"bernoulli_ expects p to be in [0, 1], but got p={p:g}")
    u = C.rand(tuple(self.shape), generator=generator)
    return self.copy_(E.lt(u, p))


def exponential_(self, lambd=1.0, *, generator=None):
    """Fill with samples of Exp(lambd): -log(1 - U) / lambd."""
    _check_leaf(self, "exponential_")
    _continuous(self, "exponential_", "Exponential")
    if not lambd > 0:
        _fail("exponential_", f"exponential_ expects lambda > 0.0, but found lambda={lambd:g}")
    u = C.rand(tuple(self.shape), dtype=self.dtype, generator=generator)
    return self.copy_(E.div(E.neg(E.log1p(E.neg(u))), lambd))


def geometric_(self, p, *, generator=None):
    """Fill with the trial of the first success (1, 2, ...) at success probability `p`."""
    _check_leaf(self, "geometric_")
    if not 0 < p < 1:
        _fail("geometric_", f"geometric_ expects p to be in (0, 1), but got p={p:g}")
    u = C.rand(tuple(self.shape), dtype=D.float64, generator=generator)
    return self.copy_(E.ceil(E.div(E.log1p(E.neg(u)), math.log1p(-p))).clamp(min=1))


def cauchy_(self, median=0.0, sigma=1.0, *, generator=None):
    """Fill with samples of Cauchy(median, sigma): median + sigma * tan(pi * (U - 1/2))."""
    _check_leaf(self, "cauchy_")
    _continuous(self, "cauchy_", "Cauchy", c_type=True)
    if not sigma > 0:
        _fail("cauchy_", f"cauchy_ expects sigma > 0.0, but found sigma={sigma:g}")
    u = C.rand(tuple(self.shape), dtype=self.dtype, generator=generator)
    return self.copy_(E.add(E.mul(E.mul(E.sub(u, 0.5), math.pi).tan(), sigma), median))


def log_normal_(self, mean=1.0, std=2.0, *, generator=None):
    """Fill with exp of N(mean, std^2) samples."""
    _check_leaf(self, "log_normal_")
    if not self.is_floating_point():
        _fail("log_normal_", f"\"log_normal_cpu\" not implemented for "
                             f"'{D.scalar_type_name(self.dtype)}'", TracegradNotImplementedError)
    if not std > 0:
        _fail("log_normal_", f"log_normal_ expects std > 0.0, but found std={std:g}")
    z = C.randn(tuple(self.shape), dtype=self.dtype, generator=generator)
    return self.copy_(E.exp(E.add(E.mul(z, std), mean)))


def _default_to(dtype):
    """`random_()`'s exclusive bound: every integer the dtype holds exactly."""
    if dtype.is_floating_point:
        return 2 ** (np.finfo(dtype.np).nmant + 1) + 1
    if dtype.np == np.bool_:
        return 2
    return int(np.iinfo(dtype.np).max) + 1


def random_(self, *args, generator=None, **kwargs):
    """Fill with integers drawn uniformly from [from, to).

    `random_(to)`: [0, to); `random_()`: every integer the dtype represents exactly, from 0."""
    _check_leaf(self, "random_")
    if len(args) > 2 or any(not isinstance(a, (int, np.integer)) or isinstance(a, bool)
                            for a in args):
        raise TracegradTypeError(f"random_() received an invalid combination of arguments - "
                                 f"got ({', '.join(type(a).__name__ for a in args)})")
    lo, hi = (0, None) if not args else (0, args[0]) if len(args) == 1 else args
    lo, hi = kwargs.pop("from", lo), kwargs.pop("to", hi)
    if kwargs:
        raise TypeError(f"random_() got an unexpected keyword argument '{next(iter(kwargs))}'")
    hi = _default_to(self.dtype) if hi is None else int(hi)
    if lo >= hi:
        _fail("random_", f"random_ expects 'from' to be less than 'to', but got from={lo} >= "
                         f"to={hi}")
    if not self.is_floating_point() and hi - 1 > _default_to(self.dtype) - 1:
        _fail("random_", f"to - 1 is out of bounds for {_C_TYPES[self.dtype.name]}")
    r = C.randint(lo, hi, tuple(self.shape), dtype=D.int64, generator=generator)
    return self.copy_(r)
