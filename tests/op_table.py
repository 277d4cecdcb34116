"""The op table: one `OpInfo` per public op of API.md section 1, driving every op test.

An entry says how to call the op (`op(m, *args, **kwargs)`, where `m` is the `tracegrad`
module, the `torch` module, or `numpy` when the same spelling works there), its numpy
reference, which inputs to try (shapes with broadcasting, Python scalars and numpy arrays on
either side, dtypes, and a domain that keeps finite differences away from kinks and ties),
the dtype PyTorch's promotion gives, and whether it is differentiable (to second order).

Sample arguments are numpy arrays (become tensors), `Raw` arrays (stay numpy arrays, to test
reflected operators) or plain Python values (scalars, shapes, dims). Tests import `OPS` and
the helpers `call`, `to_lib`, `expected_dtype`, `flat_outputs`. To check compiled == eager,
compile `lambda *t: info.op(tg, *t, **sample.kwargs)` over the tensor arguments, e.g.:

    for info in OPS:
        for sample in info.samples(np.random.default_rng(0), "float64"):
            args, eager = call(tg, info, sample, requires_grad=True)
"""
from dataclasses import dataclass, field
from typing import Callable

import numpy as np

F16, F32, F64 = "float16", "float32", "float64"
I32, I64, B = "int32", "int64", "bool"
FLOATS = (F32, F64)
NUMERIC = (F32, F64, I64, I32)
INTS = (I64, I32)


class Raw:
    """A numpy array passed to the op as a numpy array (not converted to a tensor)."""

    def __init__(self, a):
        self.a = a

    def __repr__(self):
        return f"Raw({self.a.dtype}{list(self.a.shape)})"


@dataclass
class Sample:
    args: tuple
    kwargs: dict = field(default_factory=dict)
    torch: bool = True             # False: PyTorch rejects numpy operands (we accept them)

    def __repr__(self):
        def d(a):
            if isinstance(a, np.ndarray):
                return f"{a.dtype}{list(a.shape)}"
            return repr(a)
        parts = [d(a) for a in self.args] + [f"{k}={v!r}" for k, v in self.kwargs.items()]
        return "(" + ", ".join(parts) + ")"


@dataclass
class OpInfo:
    name: str
    op: Callable                   # op(m, *args, **kwargs), m = tracegrad or torch
    ref: Callable = None           # numpy reference; None: op(numpy, ...)
    samples: Callable = None       # samples(rng, dtype) -> list[Sample]
    dtypes: tuple = FLOATS
    out: object = "promote"        # result dtype rule, see expected_dtype
    differentiable: bool = True
    second_order: bool = True
    grad_fn: bool = True           # compare grad_fn class names with torch
    variants: tuple = ()           # other spellings (method/function/operator), same result
    inplace: bool = False          # the op mutates a clone of args[0] and returns it

    def __repr__(self):
        return self.name

    def reference(self, *args, **kwargs):
        if self.ref is None:
            return self.op(np, *args, **kwargs)
        return self.ref(*args, **kwargs)


# ---------------- input generation ----------------

def make(rng, shape, dtype, domain="real"):
    """Random array of `dtype`; `domain` keeps values where the op is smooth."""
    if dtype == B:
        return np.asarray(rng.random(shape) < 0.5)
    if dtype in INTS:
        lo, hi = {"pos": (1, 4), "small": (0, 3)}.get(domain, (-5, 5))
        a = rng.integers(lo, hi + 1, shape)
        if domain in ("nokink", "nonzero"):
            a = np.where(a == 0, 2, a)
        return np.asarray(a, dtype=dtype)
    if domain == "pos":
        a = rng.uniform(0.5, 2.5, shape)
    elif domain == "nokink":                    # away from 0 (abs, relu, sign, divisors)
        a = rng.uniform(0.25, 2.0, shape) * rng.choice([-1.0, 1.0], shape)
    elif domain == "unit":                      # inside (-1, 1) (asin, acos, atanh)
        a = rng.uniform(-0.85, 0.85, shape)
    elif domain == "gt1":                       # above 1 (acosh)
        a = rng.uniform(1.2, 3.0, shape)
    elif domain == "frac":                      # away from integers and halves (floor, round)
        a = rng.integers(-3, 4, shape) + rng.choice([0.12, 0.27, 0.63, 0.88], shape)
    else:
        a = rng.standard_normal(shape) * 1.5
    return np.asarray(a, dtype=dtype)


SHAPES = [(), (3,), (2, 3), (2, 1, 3)]
PAIRS = [((), ()), ((3,), (3,)), ((2, 3), (3,)), ((2, 1, 3), (4, 3)), ((2, 3), ()),
         ((), (2, 3)), ((4, 1), (1, 3))]


def unary_samples(domain="real", shapes=SHAPES, **kwargs):
    def gen(rng, dtype):
        return [Sample((make(rng, s, dtype, domain),), dict(kwargs)) for s in shapes]
    return gen


def _scalars(dtype, domain):
    if dtype == B:
        return [True]
    if domain == "pos":
        return [2, 1.5]
    if domain in ("nokink", "nonzero"):
        return [-2, 1.5]
    return [3, -1.5] if dtype in FLOATS else [3, 2.5]


def binary_samples(da="real", db="real", scalars=None, raw=True, reflected=True, raw_dtype=F64):
    """Tensor-tensor over PAIRS, tensor-scalar, scalar-tensor, numpy-array-tensor."""
    def gen(rng, dtype):
        out = [Sample((make(rng, sa, dtype, da), make(rng, sb, dtype, db))) for sa, sb in PAIRS]
        x = make(rng, (2, 3), dtype, da)
        y = make(rng, (2, 3), dtype, db)
        for s in (scalars(dtype) if scalars else _scalars(dtype, db)):
            out.append(Sample((x, s)))
        if reflected:
            # positive on the left: keeps `2 ** x` real
            for s in ([s for s in scalars(dtype) if s > 0] if scalars else _scalars(dtype, da)):
                out.append(Sample((s, y)))
        if raw:
            out.append(Sample((Raw(make(rng, (3,), dtype, da)), y), torch=False))
            out.append(Sample((x, Raw(make(rng, (2, 3), raw_dtype or dtype, db))),
                              torch=False))
        return out
    return gen


def mixed_dtype_samples(da="real", db="real"):
    """Tensor-tensor pairs of different dtypes (promotion across tensors and zero-dim)."""
    def gen(rng, dtype):
        other = I32 if dtype in FLOATS else F32
        return [Sample((make(rng, (2, 3), dtype, da), make(rng, (3,), other, db))),
                Sample((make(rng, (2, 3), dtype, da), make(rng, (), F64, db))),
                Sample((make(rng, (), I64, da), make(rng, (3,), dtype, db)))]
    return gen


def combine(*gens):
    def gen(rng, dtype):
        return [s for g in gens for s in g(rng, dtype)]
    return gen


# ---------------- result dtype (PyTorch promotion, an independent oracle) ----------------

_CAT = {B: 0, I32: 1, I64: 1, F16: 2, F32: 2, F64: 2}
_WIDTH = {B: 0, I32: 1, I64: 2, F16: 1, F32: 2, F64: 3}


def _promote2(a, b):
    if _CAT[a] != _CAT[b]:
        return a if _CAT[a] > _CAT[b] else b
    return a if _WIDTH[a] >= _WIDTH[b] else b


def result_dtype(args, default=F32):
    """Three tiers: dimensioned tensors > zero-dim tensors > Python scalars, by category."""
    tiers = [None, None]
    scal = -1
    for a in args:
        if isinstance(a, Raw):
            a = a.a
        if isinstance(a, np.ndarray):
            k = 0 if a.ndim else 1
            d = str(a.dtype)
            tiers[k] = d if tiers[k] is None else _promote2(tiers[k], d)
        elif isinstance(a, bool):
            scal = max(scal, 0)
        elif isinstance(a, int):
            scal = max(scal, 1)
        elif isinstance(a, float):
            scal = max(scal, 2)
    res = tiers[0]
    if tiers[1] is not None and (res is None or _CAT[tiers[1]] > _CAT[res]):
        res = tiers[1]
    if scal >= 0 and (res is None or scal > _CAT[res]):
        res = (B, I64, default)[scal]
    return res


def expected_dtype(info, sample, default=F32):
    """The dtype name PyTorch gives the (first) output of `info` on `sample`."""
    rule, args = info.out, sample.args
    if callable(rule):
        return rule(args, default)
    first = next(a for a in args if isinstance(a, np.ndarray))
    if rule == "promote":
        return result_dtype(args, default)
    if rule == "float":
        d = result_dtype(args, default)
        return d if _CAT[d] == 2 else default
    if rule == "same":
        return str(first.dtype)
    if rule == "sum":
        return str(first.dtype) if _CAT[str(first.dtype)] == 2 else I64
    return rule                     # a fixed dtype name, e.g. "bool" or "int64"


# ---------------- running an op in a library ----------------

def to_lib(m, a, requires_grad=False):
    """Sample argument -> argument for library `m` (tracegrad/torch)."""
    if isinstance(a, Raw):
        return a.a
    if isinstance(a, np.ndarray):
        t = m.tensor(a.copy())
        if requires_grad and a.dtype.kind == "f":
            t.requires_grad_(True)
        return t
    return a


def np_args(sample):
    return tuple(a.a if isinstance(a, Raw) else a for a in sample.args)


def flat_outputs(out):
    """An op's result as a list of tensors/arrays (tuple results flattened)."""
    return list(out) if isinstance(out, (tuple, list)) else [out]


def call(m, info, sample, requires_grad=False):
    """Run `info` on `sample` in library `m`: (the arguments passed, the flat outputs).

    `requires_grad`: True makes every floating tensor argument a leaf requiring grad; a set
    of argument positions makes only those.
    """
    args = [to_lib(m, a, requires_grad if isinstance(requires_grad, bool) else
                   i in requires_grad) for i, a in enumerate(sample.args)]
    return args, flat_outputs(info.op(m, *args, **sample.kwargs))


def _copy(x):
    return x.copy() if isinstance(x, np.ndarray) else x.clone()


def _ip(method):
    """In-place method call on a clone (leaves requiring grad can't be mutated)."""
    def f(m, x, *args, **kwargs):
        t = _copy(x)
        r = getattr(t, method)(*args, **kwargs)
        if r is not t:
            raise AssertionError(f"{method} must return self")
        return t
    return f


def _iop(sym):
    def f(m, x, y):
        t = _copy(x)
        ref = t
        if sym == "+":
            t += y
        elif sym == "-":
            t -= y
        elif sym == "*":
            t *= y
        else:
            t /= y
        if t is not ref:
            raise AssertionError(f"x {sym}= y must update x in place")
        return t
    return f


def _setitem(m, x, v, key):
    """Item assignment on a clone; `key` may hold index tensors."""
    t = _copy(x)
    t[key] = v
    return t


def _ax(x, dim):
    """numpy axis for a torch dim (0-d tensors accept dim 0 / -1)."""
    return None if x.ndim == 0 else dim


def _np_inplace(f):
    """Reference of an in-place op: the out-of-place result cast back to the target dtype."""
    def ref(x, *a, **kw):
        return np.asarray(f(x, *a, **kw)).astype(x.dtype)
    return ref


def _distinct(rng, shape, dtype):
    """Values without ties (max/argmax/sort-like ops), for every dtype."""
    n = int(np.prod(shape, dtype=np.int64))
    if dtype in INTS:
        return np.asarray((rng.permutation(n) - n // 2).reshape(shape), dtype=dtype)
    return np.asarray(rng.permutation(n).reshape(shape) * 0.7 + rng.uniform(-0.2, 0.2, shape)
                      - n * 0.3, dtype=dtype)


def _red_kwargs(ndim, tuples=True):
    kws = [{}, {"dim": 0}, {"dim": -1, "keepdim": True}]
    if tuples:
        if ndim >= 2:
            kws.append({"dim": (0, ndim - 1)})
        if ndim >= 3:
            kws.append({"dim": (0, 2), "keepdim": True})
    return kws


def reduce_samples(domain="real", shapes=((), (4,), (2, 3), (2, 3, 4)), need_dim=False,
                   distinct=False, extra=(), tuples=True):
    def gen(rng, dtype):
        out = []
        for s in shapes:
            x = _distinct(rng, s, dtype) if distinct else make(rng, s, dtype, domain)
            for kw in _red_kwargs(len(s), tuples) + [dict(e) for e in extra]:
                if need_dim and "dim" not in kw:
                    kw = dict(kw, dim=-1)
                out.append(Sample((x,), kw))
        return out
    return gen


def dim_samples(shapes=((4,), (2, 3), (2, 3, 4)), domain="real", distinct=True, keepdim=True):
    """One int dim (plus keepdim) per sample: max/min(dim), argmax, softmax."""
    def gen(rng, dtype):
        out = []
        for s in shapes:
            x = _distinct(rng, s, dtype) if distinct else make(rng, s, dtype, domain)
            kd = {"keepdim": True} if keepdim else {}
            out += [Sample((x,), {"dim": 0}), Sample((x,), {"dim": -1, **kd})]
            if len(s) > 1:
                out.append(Sample((x,), {"dim": 1}))
        return out
    return gen


def fixed(*specs):
    """Samples from explicit specs: each a tuple of `Arr`s and Python values, optionally
    ending with a kwargs dict."""
    def gen(rng, dtype):
        out = []
        for spec in specs:
            args, kw = (spec[:-1], spec[-1]) if isinstance(spec[-1], dict) else (spec, {})
            made = []
            for a in args:
                if isinstance(a, Arr):
                    made.append(a.build(rng, dtype))
                else:
                    made.append(a)
            out.append(_no_raw(Sample(tuple(made), dict(kw))))
        return out
    return gen


class Arr:
    """An array spec inside `fixed`: shape, domain, and optionally a fixed dtype or values."""

    def __init__(self, shape, domain="real", dtype=None, values=None, raw=False):
        self.shape, self.domain, self.dtype, self.values, self.raw = (shape, domain, dtype,
                                                                     values, raw)

    def build(self, rng, dtype):
        d = self.dtype or dtype
        if self.values is not None:
            a = np.asarray(self.values, dtype=d)
        elif self.domain == "distinct":
            a = _distinct(rng, self.shape, d)
        else:
            a = make(rng, self.shape, d, self.domain)
        return Raw(a) if self.raw else a


def _no_raw(sample):
    sample.torch = not any(isinstance(a, Raw) for a in sample.args)
    return sample


A = Arr
ALL = NUMERIC + (B,)


def _where_dtype(args, default):
    return result_dtype(args[1:], default)


def _first_dtype(args, default):
    return str(next(a for a in args if isinstance(a, np.ndarray)).dtype)


def _meth(name):
    return lambda m, x, *a, **kw: getattr(x, name)(*a, **kw)


def _fn(name):
    return lambda m, *a, **kw: getattr(m, name)(*a, **kw)


# ---------------- numpy references that differ in spelling from torch ----------------

def _np_sigmoid(x):
    return 1.0 / (1.0 + np.exp(-np.asarray(x, dtype=np.float64)))


def _np_float(f):
    """Reference computed in float64 (ints become floats like PyTorch's unary float ops)."""
    return lambda x: f(np.asarray(x, dtype=np.float64))


def _np_xlogy(a, b):
    a, b = np.asarray(a, dtype=np.float64), np.asarray(b, dtype=np.float64)
    return np.where(a == 0, 0.0, a * np.log(b))


def _np_reduce(f):
    def ref(x, dim=None, keepdim=False):
        return f(x, axis=_ax(x, dim if dim != () else None), keepdims=keepdim)
    return ref


def _np_sum(x, dim=None, keepdim=False):
    r = np.sum(x, axis=_ax(x, dim), keepdims=keepdim)
    return r


def _np_var(f):
    def ref(x, dim=None, unbiased=True, keepdim=False, correction=None):
        ddof = correction if correction is not None else int(bool(unbiased))
        return f(x.astype(np.float64), axis=_ax(x, dim), ddof=ddof, keepdims=keepdim)
    return ref


def _np_norm(x, p=2, dim=None, keepdim=False):
    a = np.abs(x.astype(np.float64))
    ax = _ax(x, dim)
    if p == np.inf:
        return np.max(a, axis=ax, keepdims=keepdim)
    if p == 0:
        return np.sum(a != 0, axis=ax, keepdims=keepdim).astype(x.dtype)
    return np.sum(a ** p, axis=ax, keepdims=keepdim) ** (1.0 / p)


def _np_lse(x, dim, keepdim=False):
    x = x.astype(np.float64)
    ax = _ax(x, dim)
    return np.log(np.sum(np.exp(x), axis=ax, keepdims=keepdim))


def _np_softmax(x, dim):
    x = x.astype(np.float64)
    if x.ndim == 0:
        return np.ones_like(x)
    e = np.exp(x - x.max(axis=dim, keepdims=True))
    return e / e.sum(axis=dim, keepdims=True)


def _np_log_softmax(x, dim):
    return np.log(_np_softmax(x, dim))


def _np_minmax_dim(f, argf):
    def ref(x, dim, keepdim=False):
        return (f(x, axis=dim, keepdims=keepdim), argf(x, axis=dim, keepdims=keepdim))
    return ref


def _np_arg(f):
    def ref(x, dim=None, keepdim=False):
        if dim is None:
            r = f(x.reshape(-1))
            return np.asarray(r).reshape((1,) * x.ndim if keepdim else ())
        return f(x, axis=_ax(x, dim), keepdims=keepdim)
    return ref


def _np_split(x, s, dim=0):
    n = x.shape[dim]
    sizes = [min(s, n - i) for i in range(0, n, s)] if isinstance(s, int) else list(s)
    return tuple(np.split(x, np.cumsum(sizes)[:-1], axis=dim))


def _np_chunk(x, chunks, dim=0):
    return _np_split(x, -(-x.shape[dim] // chunks), dim)


def _np_squeeze(x, dim=None):
    if dim is None:
        return np.squeeze(x)
    dims = dim if isinstance(dim, tuple) else (dim,)
    dims = tuple(d % x.ndim for d in dims if x.shape[d] == 1)
    return np.squeeze(x, axis=dims)


def _np_flatten(x, start_dim=0, end_dim=-1):
    if x.ndim == 0:
        return x.reshape(1)
    s, e = start_dim % x.ndim, end_dim % x.ndim
    return x.reshape(x.shape[:s] + (-1,) + x.shape[e + 1:])


def _np_clamp(x, min=None, max=None):
    return np.clip(x, min, max)


def _np_relu(x):
    return np.maximum(x, 0).astype(x.dtype)


def _np_round(x, decimals=0):
    return np.round(x, decimals)


# ---------------- the table ----------------

def _binop(name, f, variants, dtypes, da="real", db="real", out="promote", scalars=None,
           raw=True, reflected=True, mixed=True, **kw):
    gen = binary_samples(da, db, scalars, raw, reflected, F64 if mixed else None)
    if mixed:
        gen = combine(gen, mixed_dtype_samples(da, db))
    return OpInfo(name, f, samples=gen, dtypes=dtypes, out=out, variants=variants, **kw)


def _first_is_tensor(f):
    """A variant spelled as a function/method needs a tensor first operand."""
    f.needs_tensor_first = True
    return f


def _v(*fs):
    return tuple(_first_is_tensor(f) for f in fs)


def _bit_scalars(dtype):
    return [True] if dtype == B else [3, True]


def _pow_scalars(dtype):
    return [2, 3] if dtype in INTS else [2, 0.5, -1.5]


def _unop(name, domain="real", dtypes=NUMERIC, out="float", ref=None, **kw):
    return OpInfo(name, _fn(name), ref=ref or _np_float(getattr(np, name)),
                  samples=unary_samples(domain), dtypes=dtypes, out=out,
                  variants=_v(_meth(name)), **kw)


_NONDIFF = dict(differentiable=False, second_order=False)

ARITH = [
    _binop("add", lambda m, a, b: a + b, _v(_fn("add"), _meth("add")), ALL),
    _binop("sub", lambda m, a, b: a - b, _v(_fn("sub"), _meth("sub")), NUMERIC),
    _binop("mul", lambda m, a, b: a * b, _v(_fn("mul"), _meth("mul")), ALL),
    _binop("div", lambda m, a, b: a / b, _v(_fn("div"), _meth("div")), NUMERIC, db="nokink",
           da="nokink", out="float"),
    _binop("floor_divide", lambda m, a, b: a // b, _v(_fn("floor_divide")), NUMERIC,
           da="nokink", db="nokink", **_NONDIFF),
    _binop("remainder", lambda m, a, b: a % b, _v(_fn("remainder")), NUMERIC, da="nokink",
           db="nokink"),
    _binop("fmod", lambda m, a, b: m.fmod(a, b), _v(_fn("fmod"), _meth("fmod")), NUMERIC,
           da="nokink", db="nokink", reflected=False),
    _binop("pow", lambda m, a, b: a ** b, _v(_fn("pow"), _meth("pow")), NUMERIC, da="pos",
           db="small", scalars=_pow_scalars),
    _binop("maximum", lambda m, a, b: m.maximum(a, b), _v(_meth("maximum")), NUMERIC,
           scalars=lambda d: [], raw=False, reflected=False),
    _binop("minimum", lambda m, a, b: m.minimum(a, b), _v(_meth("minimum")), NUMERIC,
           scalars=lambda d: [], raw=False, reflected=False),
    OpInfo("where", lambda m, c, a, b: m.where(c, a, b), dtypes=NUMERIC, out=_where_dtype,
           samples=fixed((A((2, 3), dtype=B), A((2, 3)), A((3,))),
                         (A((2, 1), dtype=B), A((1, 3)), A(())),
                         (A((3,), dtype=B), A((2, 3)), 0.5),
                         (A((2, 3), dtype=B), 2, A((2, 3))))),
    _binop("xlogy", lambda m, a, b: m.xlogy(a, b), _v(_meth("xlogy")), NUMERIC, db="pos",
           out="float", raw=False, ref=_np_xlogy),
    OpInfo("neg", lambda m, x: -x, samples=unary_samples(), dtypes=NUMERIC, out="same",
           variants=_v(_fn("neg"), _meth("neg"), _fn("negative"))),
    OpInfo("abs", lambda m, x: abs(x), samples=unary_samples("nokink"), dtypes=NUMERIC,
           out="same", variants=_v(_fn("abs"), _meth("abs"))),
]

COMPARE = [
    _binop(n, f, _v(_fn(n), _meth(n)), ALL, out=B, **_NONDIFF)
    for n, f in [("eq", lambda m, a, b: a == b), ("ne", lambda m, a, b: a != b),
                 ("lt", lambda m, a, b: a < b), ("le", lambda m, a, b: a <= b),
                 ("gt", lambda m, a, b: a > b), ("ge", lambda m, a, b: a >= b)]
] + [
    _binop("and", lambda m, a, b: a & b, _v(_fn("bitwise_and")), (B, I64), mixed=False,
           scalars=_bit_scalars, **_NONDIFF),
    _binop("or", lambda m, a, b: a | b, _v(_fn("bitwise_or")), (B, I64), mixed=False,
           scalars=_bit_scalars, **_NONDIFF),
    OpInfo("invert", lambda m, x: ~x, samples=unary_samples(), dtypes=(B, I64), out="same",
           variants=_v(_fn("bitwise_not")), **_NONDIFF),
]

MATH = [
    _unop("exp"), _unop("log", "pos"), _unop("log1p", "pos"), _unop("sqrt", "pos"),
    _unop("log2", "pos"), _unop("expm1"),
    _unop("tan", "unit"), _unop("atan"), _unop("sinh"), _unop("cosh"), _unop("asinh"),
    _unop("log10", "pos"),
    _unop("asin", "unit", dtypes=FLOATS, ref=_np_float(np.arcsin)),
    _unop("acos", "unit", dtypes=FLOATS, ref=_np_float(np.arccos)),
    _unop("atanh", "unit", dtypes=FLOATS, ref=_np_float(np.arctanh)),
    _unop("acosh", "gt1", dtypes=FLOATS, ref=_np_float(np.arccosh)),
    OpInfo("atan2", _fn("atan2"),
           ref=lambda a, b: np.arctan2(np.asarray(a, np.float64), np.asarray(b, np.float64)),
           dtypes=NUMERIC, out="float",
           variants=_v(_meth("atan2")),
           samples=fixed((A((2, 3)), A((2, 3), "nokink")), (A((2, 1, 3)), A((4, 3), "nokink")),
                         (A(()), A((3,), "nokink")))),
    _unop("rsqrt", "pos", ref=_np_float(lambda x: 1 / np.sqrt(x))),
    _unop("sin"), _unop("cos"), _unop("tanh"),
    _unop("sigmoid", ref=_np_sigmoid),
    _unop("reciprocal", "nokink", ref=_np_float(lambda x: 1 / x)),
    _unop("relu", "nokink", out="same", ref=_np_relu),
    _unop("sign", "nokink", out="same", ref=np.sign),
    _unop("floor", "frac", out="same", ref=np.floor),
    _unop("ceil", "frac", out="same", ref=np.ceil),
    _unop("round", "frac", out="same", ref=np.round),
    OpInfo("round_decimals", lambda m, x, **kw: m.round(x, **kw), ref=_np_round,
           samples=unary_samples("frac", decimals=1), out="same"),
    OpInfo("clamp", _fn("clamp"), ref=_np_clamp, dtypes=NUMERIC, out="same",
           variants=_v(_meth("clamp"), _fn("clip")),
           samples=lambda rng, d: [
               Sample((make(rng, s, d),), kw) for s in SHAPES
               for kw in ([{"min": -2, "max": 2}, {"min": 1}] if d in INTS else
                          [{"min": -0.5, "max": 0.5}, {"min": 0.25}, {"max": -0.25}])]),
]

def _red(name, ref, dtypes=NUMERIC, out="same", domain="real", **kw):
    sample_kw = {k: kw.pop(k) for k in ("shapes", "need_dim", "distinct", "extra") if k in kw}
    return OpInfo(name, _fn(name), ref=ref, samples=reduce_samples(domain, **sample_kw),
                  dtypes=dtypes, out=out, variants=_v(_meth(name)), **kw)


REDUCE = [
    _red("sum", _np_sum, ALL, out="sum"),
    _red("mean", _np_reduce(np.mean), FLOATS),
    OpInfo("prod", _fn("prod"), ref=_np_reduce(np.prod), dtypes=NUMERIC, out="sum",
           variants=_v(_meth("prod")),
           samples=combine(reduce_samples("nokink", shapes=((), (4,), (2, 3), (2, 2, 2)),
                                          tuples=False),     # torch.prod takes one dim
                           fixed((A(None, values=[[1.5, 0, -2], [0.5, 1.25, 0]]),),
                                 (A(None, values=[[1.5, 0, -2], [0, 1.25, 0]]), {"dim": 1}),
                                 (A(None, values=[0, 2, 0]), {"dim": 0})))),
    _red("amax", _np_reduce(np.amax), distinct=True),
    _red("amin", _np_reduce(np.amin), distinct=True),
    OpInfo("max", lambda m, x: m.max(x), ref=np.max, dtypes=NUMERIC, out="same",
           samples=lambda rng, d: [Sample((_distinct(rng, s, d),)) for s in SHAPES],
           variants=_v(_meth("max"))),
    OpInfo("min", lambda m, x: m.min(x), ref=np.min, dtypes=NUMERIC, out="same",
           samples=lambda rng, d: [Sample((_distinct(rng, s, d),)) for s in SHAPES],
           variants=_v(_meth("min"))),
    OpInfo("max_dim", _fn("max"), ref=_np_minmax_dim(np.max, np.argmax), dtypes=NUMERIC,
           out="same", samples=dim_samples(), variants=_v(_meth("max"))),
    OpInfo("min_dim", _fn("min"), ref=_np_minmax_dim(np.min, np.argmin), dtypes=NUMERIC,
           out="same", samples=dim_samples(), variants=_v(_meth("min"))),
    OpInfo("max_binary", lambda m, a, b: m.max(a, b), ref=np.maximum, dtypes=NUMERIC,
           samples=fixed((A((2, 3)), A((3,))), (A((2, 1)), A((1, 3))))),
    OpInfo("min_binary", lambda m, a, b: m.min(a, b), ref=np.minimum, dtypes=NUMERIC,
           samples=fixed((A((2, 3)), A((3,))), (A((2, 1)), A((1, 3))))),
    OpInfo("argmax", _fn("argmax"), ref=_np_arg(np.argmax), dtypes=NUMERIC, out=I64,
           samples=combine(dim_samples(), fixed((A((), "distinct"),), (A((2, 3), "distinct"),))),
           variants=_v(_meth("argmax")), **_NONDIFF),
    OpInfo("argmin", _fn("argmin"), ref=_np_arg(np.argmin), dtypes=NUMERIC, out=I64,
           samples=combine(dim_samples(), fixed((A((), "distinct"),), (A((2, 3), "distinct"),))),
           variants=_v(_meth("argmin")), **_NONDIFF),
    _red("norm", _np_norm, FLOATS, domain="nokink",
         extra=({"p": 1}, {"p": 3, "dim": 0}, {"p": float("inf")}, {"p": 0})),
    _red("var", _np_var(np.var), FLOATS, shapes=((4,), (2, 3), (2, 3, 4)),
         extra=({"correction": 0}, {"unbiased": False, "dim": -1})),
    _red("std", _np_var(np.std), FLOATS, shapes=((4,), (2, 3), (2, 3, 4)),
         extra=({"correction": 0}, {"unbiased": False, "dim": -1})),
    _red("logsumexp", _np_lse, dtypes=(F32, F64, I64), out="float", need_dim=True),
    OpInfo("softmax", _fn("softmax"), ref=_np_softmax, out="same",
           samples=dim_samples(((), (4,), (2, 3), (2, 3, 4)), distinct=False, keepdim=False),
           variants=_v(_meth("softmax"))),
    OpInfo("log_softmax", _fn("log_softmax"), ref=_np_log_softmax, out="same",
           samples=dim_samples(((), (4,), (2, 3), (2, 3, 4)), distinct=False, keepdim=False),
           variants=_v(_meth("log_softmax"))),
]

LINALG = [
    OpInfo("matmul", lambda m, a, b: a @ b, dtypes=(F32, F64, I64),
           variants=_v(_fn("matmul"), _meth("matmul")),
           samples=fixed((A((3,)), A((3,))), (A((2, 3)), A((3, 4))), (A((3,)), A((3, 4))),
                         (A((2, 3)), A((3,))), (A((5, 2, 3)), A((3, 4))),
                         (A((2, 1, 2, 3)), A((4, 3, 2))), (A((3,)), A((2, 3, 4))),
                         (A((2, 3, 4)), A((4,))), (A((4, 3), raw=True), A((3, 2))))),
    OpInfo("mm", _fn("mm"), ref=np.matmul, dtypes=(F32, F64, I64), variants=_v(_meth("mm")),
           samples=fixed((A((2, 3)), A((3, 4))), (A((1, 3)), A((3, 1))))),
    OpInfo("bmm", _fn("bmm"), ref=np.matmul, dtypes=(F32, F64, I64), variants=_v(_meth("bmm")),
           samples=fixed((A((5, 2, 3)), A((5, 3, 4))),)),
    OpInfo("dot", _fn("dot"), ref=np.dot, dtypes=(F32, F64, I64), variants=_v(_meth("dot")),
           samples=fixed((A((3,)), A((3,))),)),
    OpInfo("outer", _fn("outer"), ref=np.outer, dtypes=(F32, F64, I64),
           variants=_v(_meth("outer")), samples=fixed((A((3,)), A((4,))),)),
    OpInfo("addmm", _fn("addmm"), dtypes=(F32, F64), variants=_v(_meth("addmm")),
           ref=lambda c, a, b, beta=1, alpha=1: beta * c + alpha * (a @ b),
           samples=fixed((A((4,)), A((2, 3)), A((3, 4))), (A((2, 4)), A((2, 3)), A((3, 4))),
                         (A((2, 1)), A((2, 3)), A((3, 4)), {"beta": 0.5, "alpha": 2.0}),
                         (A(()), A((2, 3)), A((3, 4)), {"alpha": -1.5}))),
    OpInfo("linear", lambda m, x, w, *b: m.nn.functional.linear(x, w, *b), dtypes=(F32, F64),
           ref=lambda x, w, *b: x @ w.T + (b[0] if b else 0),
           samples=fixed((A((2, 3)), A((4, 3)), A((4,))), (A((2, 3)), A((4, 3))),
                         (A((2, 5, 3)), A((4, 3)), A((4,))), (A((2, 5, 3)), A((4, 3))),
                         (A((3,)), A((4, 3)), A((4,))), (A((3,)), A((4, 3))),
                         (A((2, 3)), A((4, 3)), A((2, 4))))),
    OpInfo("einsum", lambda m, eq, *xs: m.einsum(eq, *xs), dtypes=(F32, F64),
           samples=fixed(("ij,jk->ik", A((2, 3)), A((3, 4))),
                         ("bij,bjk->bik", A((2, 2, 3)), A((2, 3, 4))),
                         ("i,i->", A((3,)), A((3,))), ("ij->ji", A((2, 3))),
                         ("ij->", A((2, 3))), ("ij,j->i", A((2, 3)), A((3,))),
                         ("ij,jk", A((2, 3)), A((3, 4))), ("i,j->ij", A((2,)), A((3,))),
                         ("ij,jk,kl->il", A((2, 3)), A((3, 4)), A((4, 2))))),
]

_VIEW_X = A((2, 3, 4))


def _shape_op(name, op, ref, samples, out="same", **kw):
    return OpInfo(name, op, ref=ref, samples=fixed(*samples), dtypes=ALL, out=out, **kw)


SHAPE = [
    _shape_op("reshape", lambda m, x, s: m.reshape(x, s), lambda x, s: np.reshape(x, s),
              [(_VIEW_X, (6, 4)), (_VIEW_X, (-1,)), (_VIEW_X, (4, -1, 2)), (A(()), (1, 1)),
               (A((3,)), (3, 1))], variants=_v(_meth("reshape"))),
    _shape_op("view", lambda m, x, s: x.view(s), lambda x, s: np.reshape(x, s),
              [(_VIEW_X, (6, 4)), (_VIEW_X, (-1,)), (A((6,)), (2, 3))],
              variants=_v(lambda m, x, s: x.view(*s))),
    _shape_op("flatten", _fn("flatten"), _np_flatten,
              [(_VIEW_X,), (_VIEW_X, 1), (_VIEW_X, 0, 1), (A(()),)],
              variants=_v(_meth("flatten"))),
    _shape_op("squeeze", _fn("squeeze"), _np_squeeze,
              [(A((2, 1, 3, 1)),), (A((2, 1, 3)), 1), (A((2, 1, 3)), 0), (A((1, 3, 1)), -1)],
              variants=_v(_meth("squeeze"))),
    _shape_op("unsqueeze", _fn("unsqueeze"), lambda x, d: np.expand_dims(x, d),
              [(A((2, 3)), 0), (A((2, 3)), -1), (A((2, 3)), 1), (A(()), 0)],
              variants=_v(_meth("unsqueeze"))),
    _shape_op("transpose", _fn("transpose"), lambda x, a, b: np.swapaxes(x, a, b),
              [(_VIEW_X, 0, 2), (A((2, 3)), -1, 0)], variants=_v(_meth("transpose"))),
    _shape_op("permute", lambda m, x, p: x.permute(*p), lambda x, p: np.transpose(x, p),
              [(_VIEW_X, (2, 0, 1)), (A((2, 3)), (1, 0))],
              variants=_v(lambda m, x, p: m.permute(x, p), lambda m, x, p: x.permute(p))),
    _shape_op("t", _fn("t"), lambda x: x.T, [(A((2, 3)),), (A((3,)),)],
              variants=_v(_meth("t"), lambda m, x: x.T)),
    _shape_op("expand", lambda m, x, s: x.expand(*s),
              lambda x, s: np.broadcast_to(x, tuple(n if n != -1 else x.shape[i - len(s)
                                                                             + x.ndim]
                                                    for i, n in enumerate(s))),
              [(A((1, 3)), (2, 3)), (A((3,)), (4, 3)), (A((2, 1)), (-1, 4)),
               (A(()), (2, 2))], variants=_v(lambda m, x, s: x.expand(s))),
    _shape_op("broadcast_to", lambda m, x, s: m.broadcast_to(x, s), None,
              [(A((1, 3)), (2, 3)), (A((3,)), (2, 4, 3))]),
    _shape_op("repeat", lambda m, x, r: x.repeat(*r), lambda x, r: np.tile(x, r),
              [(A((2, 3)), (2, 1)), (A((3,)), (2, 2)), (A((2, 1)), (1, 2, 3))]),
    _shape_op("cat", lambda m, *xs, dim=0: m.cat(xs, dim=dim),
              lambda *xs, dim=0: np.concatenate(xs, axis=dim), out="promote", samples=
              [(A((2, 3)), A((1, 3))), (A((2, 3)), A((2, 2)), {"dim": 1}),
               (A((2, 3)), A((2, 3)), A((2, 3)), {"dim": -1}),
               (A((2, 3)), A((1, 3), dtype=I64))],
              variants=_v(lambda m, *xs, dim=0: m.concatenate(xs, dim))),
    _shape_op("stack", lambda m, *xs, dim=0: m.stack(xs, dim=dim),
              lambda *xs, dim=0: np.stack(xs, axis=dim),
              [(A((2, 3)), A((2, 3))), (A((2, 3)), A((2, 3)), {"dim": 2}),
               (A(()), A(()), A(()))]),
    _shape_op("split", lambda m, x, s, dim=0: m.split(x, s, dim), _np_split,
              [(A((5, 2)), 2), (A((5, 2)), [1, 4]), (A((2, 6)), 3, {"dim": 1})],
              variants=_v(lambda m, x, s, dim=0: x.split(s, dim))),
    _shape_op("chunk", lambda m, x, n, dim=0: m.chunk(x, n, dim), _np_chunk,
              [(A((6, 2)), 3), (A((5, 2)), 2), (A((2, 7)), 3, {"dim": -1})],
              variants=_v(lambda m, x, n, dim=0: x.chunk(n, dim))),
]

_IDX = A((4,), dtype=I64, values=[2, 0, 2, 1])
_IDX2 = A((2, 2), dtype=I64, values=[[0, 1], [1, 1]])


def _mask(values):
    return A(None, dtype=B, values=values)


INDEX = [
    _shape_op("getitem", lambda m, x, key: x[key], lambda x, key: x[key],
              [(_VIEW_X, 0), (_VIEW_X, -1), (_VIEW_X, (slice(1, None),)),
               (_VIEW_X, (Ellipsis, None)), (_VIEW_X, (slice(None), 1)),
               (_VIEW_X, (slice(None), slice(None, None, 2))), (_VIEW_X, (0, slice(1, 3), -1)),
               (_VIEW_X, (None, 1, Ellipsis, 2)), (A((3,)), 1)]),
    _shape_op("getitem_int_array", lambda m, x, i: x[i], lambda x, i: x[i],
              [(A((3, 4)), _IDX), (A((3, 4)), _IDX2), (A((3,)), _IDX)]),
    _shape_op("getitem_two_arrays", lambda m, x, i, j: x[i, j], lambda x, i, j: x[i, j],
              [(A((3, 4)), _IDX, A((4,), dtype=I64, values=[3, 0, 1, 3])),
               (_VIEW_X, _IDX2, _IDX2)]),
    _shape_op("getitem_mixed", lambda m, x, i: x[:, i], lambda x, i: x[:, i],
              [(_VIEW_X, _IDX), (A((3, 4)), _IDX2)]),
    _shape_op("getitem_list", lambda m, x, key: x[key], lambda x, key: x[key],
              [(A((3, 4)), [0, 2, 0]), (A((3, 4)), ([0, 1], [2, 3]))]),
    _shape_op("getitem_mask", lambda m, x, mk: x[mk], lambda x, mk: x[mk],
              [(A((2, 3)), _mask([[True, False, True], [False, False, True]])),
               (A((3, 2)), _mask([True, False, True])), (A((3,)), _mask([False] * 3))]),
    _shape_op("setitem", _setitem, lambda x, v, key: _setitem(np, x, v, key),
              [(A((3, 4)), A((4,)), 1), (A((3, 4)), A((3, 2)), (slice(None), slice(1, 3))),
               (A((3, 4)), 2.5 , (Ellipsis, 0)), (_VIEW_X, A(()), (0, 1, 2)),
               (A((3, 4)), A((2, 1)), slice(None, None, 2))]),
    _shape_op("setitem_int_array", _setitem, lambda x, v, i: _setitem(np, x, v, i),
              [(A((3, 4)), A((2, 4)), A((2,), dtype=I64, values=[2, 0])),
               (A((5,)), A(()), A((2,), dtype=I64, values=[4, 1]))]),
    _shape_op("setitem_mask", _setitem, lambda x, v, mk: _setitem(np, x, v, mk),
              [(A((2, 3)), 0, _mask([[True, False, True], [False, False, True]])),
               (A((2, 3)), A((3,)), _mask([[True, False, True], [False, True, False]]))]),
]


def _inplace_samples(domain="real", other="real", scalars=(2, -1.5)):
    def gen(rng, dtype):
        x = make(rng, (2, 3), dtype, domain)
        out = [Sample((x, make(rng, s, dtype, other))) for s in ((2, 3), (3,), (), (1, 3))]
        out += [Sample((x, s)) for s in scalars if dtype in FLOATS or isinstance(s, int)]
        if dtype == F32:
            out.append(Sample((x, make(rng, (3,), F64, other))))
        return out
    return gen


def _ip_op(name, method, ref, dtypes=NUMERIC, domain="real", other="real", scalars=(2, -1.5),
           **kw):
    op = method if callable(method) else _ip(method)
    return OpInfo(name, op, ref=_np_inplace(ref), dtypes=dtypes, out=_first_dtype,
                  samples=_inplace_samples(domain, other, scalars), inplace=True, **kw)


def _ip_unary(method, ref, domain="real", **kw):
    return OpInfo(method, _ip(method), ref=_np_inplace(ref), out=_first_dtype, inplace=True,
                  samples=unary_samples(domain, shapes=((), (3,), (2, 3)), **kw))


INPLACE = [
    _ip_op("add_", "add_", np.add),
    _ip_op("sub_", "sub_", np.subtract),
    _ip_op("mul_", "mul_", np.multiply),
    _ip_op("div_", "div_", np.divide, dtypes=FLOATS, other="nokink"),
    _ip_op("pow_", "pow_", np.power, domain="pos", other="small", scalars=(2, 0.5)),
    _ip_op("iadd", _iop("+"), np.add),
    _ip_op("isub", _iop("-"), np.subtract),
    _ip_op("imul", _iop("*"), np.multiply),
    _ip_op("itruediv", _iop("/"), np.divide, dtypes=FLOATS, other="nokink"),
    _ip_op("copy_", "copy_", lambda x, s: np.broadcast_to(s, x.shape), scalars=()),
    OpInfo("zero_", _ip("zero_"), ref=np.zeros_like, dtypes=ALL, out=_first_dtype, inplace=True,
           samples=unary_samples(shapes=((), (2, 3)))),
    OpInfo("fill_", _ip("fill_"), ref=lambda x, v: np.full_like(x, v), dtypes=NUMERIC,
           out=_first_dtype, inplace=True,
           samples=fixed((A((2, 3)), 2), (A(()), 3), (A((3,)), A((), values=1)))),
    _ip_unary("clamp_", _np_clamp, min=-0.5, max=0.5),
    _ip_unary("exp_", np.exp),
    _ip_unary("relu_", _np_relu, "nokink"),
    _ip_unary("sigmoid_", _np_sigmoid),
    _ip_unary("tanh_", np.tanh),
]

OPS = ARITH + COMPARE + MATH + REDUCE + LINALG + SHAPE + INDEX + INPLACE
BY_NAME = {o.name: o for o in OPS}
assert len(BY_NAME) == len(OPS), "duplicate op names in the table"

# Rows for selection, ordering, scans and structure (issue 12) live in their own module.
from op_table_new import NEW  # noqa: E402

OPS = OPS + NEW

# ---------------- nn.functional primitives (layer norm, silu, pooling, BCE) ----------------

def _nnf(name):
    return lambda m, *a, **kw: getattr(m.nn.functional, name)(*a, **kw)


def _np_layer_norm(x, shape, w=None, b=None, eps=1e-5):
    axes = tuple(range(x.ndim - len(shape), x.ndim))
    x64 = np.asarray(x, np.float64)
    mu = x64.mean(axes, keepdims=True)
    y = (x64 - mu) / np.sqrt(((x64 - mu) ** 2).mean(axes, keepdims=True) + eps)
    return (y * (1.0 if w is None else w) + (0.0 if b is None else b)).astype(x.dtype)


def _pool_windows(n, k, s, p, d, ceil_mode):
    """[(start, stop, step) per output position] over the unpadded axis (PyTorch's rule)."""
    span = n + 2 * p - d * (k - 1) - 1
    o = (span + (s - 1 if ceil_mode else 0)) // s + 1
    if ceil_mode and (o - 1) * s >= n + p:
        o -= 1
    return [(i * s - p, i * s - p + d * (k - 1) + 1, d) for i in range(o)]


def _np_pool(x, kernel_size, stride=None, padding=0, dilation=1, ceil_mode=False, kind="max",
             count_include_pad=True, divisor_override=None):
    """Loop reference for max_pool2d / avg_pool2d on (..., H, W)."""
    k2 = lambda v: (v, v) if isinstance(v, int) else tuple(v)     # noqa: E731
    k, s = k2(kernel_size), k2(stride if stride is not None else kernel_size)
    p, d = k2(padding), k2(dilation)
    rows = _pool_windows(x.shape[-2], k[0], s[0], p[0], d[0], ceil_mode)
    cols = _pool_windows(x.shape[-1], k[1], s[1], p[1], d[1], ceil_mode)
    out = np.zeros(x.shape[:-2] + (len(rows), len(cols)), x.dtype)
    for i, (r0, r1, rd) in enumerate(rows):
        for j, (c0, c1, cd) in enumerate(cols):
            ri = [r for r in range(r0, r1, rd) if 0 <= r < x.shape[-2]]
            ci = [c for c in range(c0, c1, cd) if 0 <= c < x.shape[-1]]
            win = x[..., ri, :][..., ci]
            if kind == "max":
                out[..., i, j] = win.max((-2, -1))
                continue
            hs = min(r1, x.shape[-2] + p[0]) - r0
            ws = min(c1, x.shape[-1] + p[1]) - c0
            div = divisor_override or (hs * ws if count_include_pad else len(ri) * len(ci))
            out[..., i, j] = win.sum((-2, -1)) / div
    return out


def _np_adaptive(x, output_size):
    oh, ow = (output_size, output_size) if isinstance(output_size, int) else output_size
    h, w = x.shape[-2:]
    out = np.zeros(x.shape[:-2] + (oh, ow), x.dtype)
    for i in range(oh):
        for j in range(ow):
            r = slice(i * h // oh, -(-(i + 1) * h // oh))
            c = slice(j * w // ow, -(-(j + 1) * w // ow))
            out[..., i, j] = x[..., r, c].mean((-2, -1))
    return out


def _np_bce(x, t, reduction="mean"):
    p, q = 1 / (1 + np.exp(-x)), 1 / (1 + np.exp(-t))
    loss = -(q * np.maximum(np.log(p), -100) + (1 - q) * np.maximum(np.log1p(-p), -100))
    return (loss.mean() if reduction == "mean" else loss).astype(x.dtype)


def _bce_logits(m, x, t, pos_weight=None):
    """Summed BCE with logits; a pos_weight number becomes a constant per-class tensor."""
    if pos_weight is not None:
        pos_weight = m.full((x.shape[-1],), pos_weight, dtype=x.dtype)
    return m.nn.functional.binary_cross_entropy_with_logits(x, t, reduction="sum",
                                                           pos_weight=pos_weight)


def _np_bce_logits(x, t, pos_weight=None):
    lw = 1.0 if pos_weight is None else (pos_weight - 1) * t + 1
    loss = (1 - t) * x + lw * np.log1p(np.exp(-x))
    return np.asarray(loss.sum(), x.dtype)


def _bce(m, x, t, **kw):
    return m.nn.functional.binary_cross_entropy(m.sigmoid(x), m.sigmoid(t), **kw)


_POOL_IN = A((2, 3, 5, 6))
NN_OPS = [
    OpInfo("nn.silu", _nnf("silu"), ref=lambda x: (x / (1 + np.exp(-x))).astype(x.dtype),
           samples=unary_samples(), out="same"),
    OpInfo("nn.layer_norm", _nnf("layer_norm"), ref=_np_layer_norm, out="same",
           samples=fixed((A((2, 3, 4)), (4,)), (A((2, 3, 4)), (3, 4), A((3, 4)), A((3, 4))),
                         (A((5,)), (5,), A((5,)), None, {"eps": 1e-3}))),
    OpInfo("nn.max_pool2d", _nnf("max_pool2d"), ref=_np_pool, out="same",
           samples=fixed((A((2, 3, 5, 6), "distinct"), 2),
                         (A((3, 5, 6), "distinct"), 3, 2, 1, 1, True),
                         (A((1, 2, 6, 6), "distinct"), (2, 3), (1, 2), (1, 1), (2, 1)))),
    OpInfo("nn.avg_pool2d", _nnf("avg_pool2d"),
           ref=lambda x, *a, **kw: _np_pool(x, *a, kind="avg", **kw), out="same",
           samples=fixed((_POOL_IN, 2), (_POOL_IN, 3, 2, 1, {"ceil_mode": True}),
                         (_POOL_IN, 3, 2, 1, {"count_include_pad": False}),
                         (A((3, 5, 6)), (2, 3), 1, (1, 1), {"divisor_override": 4}))),
    OpInfo("nn.adaptive_avg_pool2d", _nnf("adaptive_avg_pool2d"), ref=_np_adaptive,
           out="same", samples=fixed((_POOL_IN, (2, 3)), (_POOL_IN, 4), (A((3, 7, 5)), (3, 2)))),
    OpInfo("nn.binary_cross_entropy", _bce, ref=_np_bce, out="same",
           samples=fixed((A((2, 3)), A((2, 3))), (A((4,)), A((4,)), {"reduction": "none"}))),
    OpInfo("nn.binary_cross_entropy_with_logits", _bce_logits, ref=_np_bce_logits, out="same",
           samples=fixed((A((2, 3)), A((2, 3), "pos")),
                         (A((2, 3)), A((2, 3), "pos"), {"pos_weight": 2.0}))),
]
OPS = OPS + NN_OPS
BY_NAME = {o.name: o for o in OPS}
assert len(BY_NAME) == len(OPS), "duplicate op names in the table"
