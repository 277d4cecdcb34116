"""`Integer`: a Python int (an int argument, or an integer tensor's `.item()`) traced as a
runtime value instead of a constant, the int sibling of `Number` (tracing/numbers.py).

Note [Integers read per call]
`correct = (pred == y).sum().item()` returned from an eval step, `n += ...` accumulated, an
`epoch` or a diffusion step `t` used in `1 - t / T`: each new value would be a new path if
the int were a constant. An `Integer` holds the call's value and traces it as an int64 0-d
tensor. It must give exactly what the int gives, or make the path depend on the value:
- `+ - *`, unary `- + abs`, `//` and `%` with ints (another Integer, an int literal, a
  bool) are traced in int64, which computes Python's results (numpy's integer floor
  division and remainder round and sign as Python's do) as long as nothing overflows. Each
  Integer carries a static bound on its magnitude (`_b`: an int64 `.item()` may be any
  int64, an int argument or counter is at most 2**61 (Note [Headroom of ints read per
  call] in _effects.py), a literal its own size); where the bound of a
  result could pass 2**62, the trace guards a float64 estimate of the result below 2**62
  (the estimate's error is far below the 2**62 of headroom int64 has left), and where that
  guard fails takes the exact values instead, in Python's arbitrary-precision ints.
  A zero divisor of `//` or `%` is guarded nonzero (a zero raises Python's own error).
- `**` with an exponent >= 0 (guarded for an Integer exponent) is traced in int64 the same
  way; a negative exponent gives a float in Python and takes the exact values.
- `/` (true division) gives a `Number`: both ints converted to float64 exactly (guarded to
  at most 2**53, where float64 holds every int), divided with IEEE division, which rounds
  exactly as Python's correctly rounded int division; an int meeting a float or a `Number`
  (`n * 0.5`, `lr * n`) likewise becomes a `Number` of its exact float64 value first.
- a comparison or `bool()` is a guard on its outcome;
- meeting a tensor in an elementwise arithmetic primitive it becomes a 0-d tensor of the
  tensor's dtype (a bool tensor's: int64), guarded to fit that dtype exactly (eager casts
  the int to it), as `replace` in numbers.py does for a `Number`;
- `tensor(n)` (int64) and `full(size, n)` (int64) copy its traced value (ops/creation.py),
  and `where(c, x, n)` casts it to the result dtype where that cast is exact;
- everything else takes the exact value with a guard on it: `range(n)`, `lst[n]`, shapes,
  `int()`, `float()`, formatting and hashing, bit operations, numpy, `float ** n` (numpy's
  power is not the C library's `pow` Python calls: measured, about 5% of results differ in
  the last bit), a primitive's attribute (`clamp(min=n)`, `dropout(p)`). `__index__`
  returns the real int, so C code that demands one (`range`, `bytes(n)`, `'%x' % n`) works.
- `isinstance(n, int)` holds (`__class__`); `type(n) is int` does not, which is why code
  naming `type` keeps the guards (compiler/dynamic_numbers.py), as for `Number`.
Integers share their owner (`Numbers`) with `Number`s: escapes, unsafe use, freezing and
exact values are tracked alike, and a returned Integer becomes a program output converted
back to a Python int on each call (`split_outputs`).
"""
import operator

LIMIT = 2 ** 62                  # int64 results are kept below this (headroom to 2**63)
_AFTER_CHECK = LIMIT + 2 ** 13   # a bound a passed float64 estimate check leaves
_EXACT_FLOAT = 2 ** 53           # ints up to this convert to float64 exactly
INT64 = 2 ** 63


class Integer:
    """An int traced as a runtime value (Note [Integers read per call])."""

    __slots__ = ("_owner", "_t", "_v", "_roots", "_b", "__weakref__")

    def __init__(self, owner, tensor, value, roots, bound):
        self._owner, self._t, self._v, self._roots, self._b = owner, tensor, value, roots, bound

    @property
    def __class__(self):                 # isinstance(n, int) as for the int
        return int

    def _live(self):
        return self._t is not None and self._owner.recording()

    # -- the concrete value, guarded --
    def __index__(self):
        return exact_value(self, int)

    __int__ = __trunc__ = __floor__ = __ceil__ = __index__

    def __round__(self, n=None):
        return round(self.__index__(), n) if n is not None else self.__index__()

    def __float__(self):
        return float(self.__index__())

    def __complex__(self):
        return complex(self.__index__())

    def __hash__(self): return hash(self.__index__())
    def __repr__(self): return repr(self.__index__())
    def __str__(self): return str(self.__index__())
    def __format__(self, spec): return format(self.__index__(), spec)
    def __reduce__(self): return (int, (self.__index__(),))
    def __copy__(self): return self
    def __deepcopy__(self, memo): return self

    def __array__(self, dtype=None, copy=None):
        import numpy as np
        return np.asarray(self.__index__(), dtype=dtype)

    def __array_ufunc__(self, ufunc, method, *inputs, **kwargs):
        inputs = tuple(exact(x) for x in inputs)      # numpy meets the int itself
        return getattr(ufunc, method)(*inputs, **kwargs)

    def __getattr__(self, name):         # bit_length(), real, numerator, to_bytes, ...
        if not hasattr(0, name):
            raise AttributeError(f"'int' object has no attribute '{name}'")
        return getattr(self.__index__(), name)

    # -- helpers --
    def _new(self, t, roots, bound):
        return self._owner._new_int(t, int(t._data.reshape(()).item()), roots, bound)

    def _within(self, lo, hi):
        """Whether the value lies in [lo, hi]: from the static bound, else a guard."""
        if -self._b >= lo and self._b <= hi:
            return True
        if not bool((self._t >= lo) & (self._t <= hi)):
            return False
        self._b = min(self._b, max(-lo, hi))     # what the path's guard now ensures
        return True

    def as_number(self):
        """This int as a `Number` of its exact float64 value, or None where it may not be
        exact (past 2**53: the guard failed) or the trace does not record."""
        if not self._live() or not self._within(-_EXACT_FLOAT, _EXACT_FLOAT):
            return None
        t = self._t.double()
        return self._owner._new(t, float(self._v), self._roots)

    def cast_for(self, like):
        """A 0-d tensor of this int as eager casts it to meet tensor `like` in an arithmetic
        primitive (a bool tensor's: int64), or None (then the exact value is taken)."""
        import numpy as np
        dt = like._data.dtype
        return self._t if dt == np.bool_ else self.cast_to(dt)

    def cast_to(self, dt):
        """A 0-d tensor of this int in numpy dtype `dt`, where the cast is exact (guarded),
        or None."""
        import numpy as np
        from .._dtype import _FROM_NP
        try:
            if dt.kind in "iu":
                info = np.iinfo(dt)
                lo, hi = int(info.min), int(info.max)
            elif dt.kind == "f" or dt.name == "bfloat16":
                m = 2 ** (np.finfo(dt).nmant + 1)
                lo, hi = -m, m
            else:
                return None
        except (TypeError, ValueError):
            return None
        if not self._within(lo, hi):
            return None
        return self._t if dt == np.int64 else self._t.to(_FROM_NP[np.dtype(dt)])

    # -- int arithmetic, traced in int64 --
    def _int_op(self, other, op, reflected, bound, estimate, zero_check=False):
        if not self._live():
            return _plain(op, self, other, reflected)
        o = _int_operand(other)
        if o is None:
            return self._mixed(other, op, reflected)
        ot, ob = o
        a, b = (ot, self._t) if reflected else (self._t, ot)
        ba, bb = (ob, self._b) if reflected else (self._b, ob)
        if zero_check and not _nonzero(b):
            return _plain(op, self, other, reflected)     # Python's ZeroDivisionError
        limit = bound(ba, bb)
        if limit > LIMIT:
            est = estimate(_f64(a), _f64(b))
            if not bool(abs(est) < float(LIMIT)):
                return _plain(op, self, other, reflected)   # exact, in Python ints
            limit = _AFTER_CHECK
        roots = self._roots | (other._roots if type(other) is Integer else frozenset())
        return self._new(op(a, b), roots, limit)

    def __add__(self, o): return self._int_op(o, operator.add, False, _sum, operator.add)
    def __radd__(self, o): return self._int_op(o, operator.add, True, _sum, operator.add)
    def __sub__(self, o): return self._int_op(o, operator.sub, False, _sum, operator.sub)
    def __rsub__(self, o): return self._int_op(o, operator.sub, True, _sum, operator.sub)
    def __mul__(self, o): return self._int_op(o, operator.mul, False, _prod, operator.mul)
    def __rmul__(self, o): return self._int_op(o, operator.mul, True, _prod, operator.mul)

    def __floordiv__(self, o):
        return self._int_op(o, operator.floordiv, False, _first, operator.truediv, True)

    def __rfloordiv__(self, o):
        return self._int_op(o, operator.floordiv, True, _first, operator.truediv, True)

    def __mod__(self, o):
        return self._int_op(o, operator.mod, False, _second, _first, True)

    def __rmod__(self, o):
        return self._int_op(o, operator.mod, True, _second, _first, True)

    def __divmod__(self, o): return (self // o, self % o)
    def __rdivmod__(self, o): return (o // self, o % self)

    def __pow__(self, o, mod=None):
        if mod is not None or not _nonnegative_exponent(o):
            return _plain(lambda a, b: pow(a, b, mod), self, o, False)
        return self._int_op(o, operator.pow, False, _power, operator.pow)

    def __rpow__(self, o, mod=None):
        if mod is not None or _int_operand(o) is None or not _nonnegative_exponent(self):
            return _plain(lambda a, b: pow(a, b, mod), self, o, True)
        return self._int_op(o, operator.pow, True, _power, operator.pow)

    def __truediv__(self, o): return self._divide(o, False)
    def __rtruediv__(self, o): return self._divide(o, True)

    def _divide(self, other, reflected):
        if not self._live():
            return _plain(operator.truediv, self, other, reflected)
        o = _int_operand(other)
        if o is None:
            return self._mixed(other, operator.truediv, reflected)
        divisor = self._t if reflected else o[0]
        if not _nonzero(divisor):
            return _plain(operator.truediv, self, other, reflected)   # Python's error
        x, y = self.as_number(), _as_number(other)
        if x is None or y is None:
            return _plain(operator.truediv, self, other, reflected)
        return y / x if reflected else x / y       # IEEE division of exact float64s

    def _mixed(self, other, op, reflected):
        """An int meeting anything but an int: a float or a `Number` (the int becomes a
        `Number` first, as Python converts it to float), a tensor or an array (theirs to
        answer), or anything else (the exact value)."""
        from .numbers import Number
        if type(other) is float or type(other) is Number:
            x = self.as_number()
            if x is not None:
                return op(other, x) if reflected else op(x, other)
        elif _defers(other):
            return NotImplemented
        return _plain(op, self, other, reflected)

    def __neg__(self):
        if not self._live():
            return -self._v
        return self._int_op(0, operator.sub, True, _sum, operator.sub)

    def __pos__(self):
        return self

    def __abs__(self):
        if not self._live():
            return abs(self._v)
        if self._b > LIMIT and not bool(abs(self._t.double()) < float(LIMIT)):
            return abs(self.__index__())
        return self._new(abs(self._t), self._roots, min(self._b, _AFTER_CHECK))

    def __invert__(self): return ~self.__index__()
    def __and__(self, o): return _plain(operator.and_, self, o, False)
    def __rand__(self, o): return _plain(operator.and_, self, o, True)
    def __or__(self, o): return _plain(operator.or_, self, o, False)
    def __ror__(self, o): return _plain(operator.or_, self, o, True)
    def __xor__(self, o): return _plain(operator.xor, self, o, False)
    def __rxor__(self, o): return _plain(operator.xor, self, o, True)
    def __lshift__(self, o): return _plain(operator.lshift, self, o, False)
    def __rlshift__(self, o): return _plain(operator.lshift, self, o, True)
    def __rshift__(self, o): return _plain(operator.rshift, self, o, False)
    def __rrshift__(self, o): return _plain(operator.rshift, self, o, True)

    # -- comparisons: guards on the outcome --
    def _compare(self, other, op):
        if not self._live():
            return _plain(op, self, other, False)
        o = _int_operand(other)
        if o is not None:
            return bool(op(self._t, o[0]))
        from .numbers import Number
        if type(other) is float or type(other) is Number:
            x = self.as_number()
            if x is not None:
                return op(x, other)
        elif _defers(other):
            return NotImplemented
        return _plain(op, self, other, False)

    def __eq__(self, o): return self._compare(o, operator.eq)
    def __ne__(self, o): return self._compare(o, operator.ne)
    def __lt__(self, o): return self._compare(o, operator.lt)
    def __le__(self, o): return self._compare(o, operator.le)
    def __gt__(self, o): return self._compare(o, operator.gt)
    def __ge__(self, o): return self._compare(o, operator.ge)

    def __bool__(self):
        if not self._live():
            return bool(self.__index__())
        return bool(self._t != 0)


# Python's own errors name an operand's type: an Integer's must read as the int's
Integer.__name__ = Integer.__qualname__ = "int"


def exact(x):
    """`x`'s exact value if it is a stand-in (guarded), else `x`."""
    from .numbers import Number
    t = type(x)
    if t is Integer:
        return x.__index__()
    if t is Number:
        return float(x)
    return x


def _plain(op, self, other, reflected):
    """The operation on exact values (guarded), as Python computes it."""
    a, b = self.__index__(), exact(other)
    return op(b, a) if reflected else op(a, b)


def _int_operand(x):
    """(a tensor or an int, bound on its magnitude) of an int operand, or None."""
    t = type(x)
    if t is Integer:
        return (x._t, x._b) if x._t is not None else (x._v, abs(x._v))
    if t is int:
        return (x, abs(x)) if -LIMIT <= x <= LIMIT else None
    if t is bool:
        return int(x), int(x)
    return None


def _as_number(x):
    """An int operand as a `Number` or a float (exact), or None."""
    if type(x) is Integer:
        return x.as_number() if x._t is not None else float(x._v)
    v = int(x)
    return float(v) if -_EXACT_FLOAT <= v <= _EXACT_FLOAT else None


def _f64(x):
    """A float64 estimate of an int operand (for overflow checks only)."""
    return x.double() if not isinstance(x, int) else float(x)


def _nonzero(x):
    """Whether a divisor (a traced int64 tensor or an int) is nonzero: a guard on the
    outcome for a tensor."""
    return bool(x != 0)


def _nonnegative_exponent(e):
    if type(e) is Integer:
        return e._t is not None and e._owner.recording() and bool(e._t >= 0)
    return type(e) in (int, bool) and e >= 0 and _int_operand(e) is not None


def _defers(x):
    """A tensor or an array: its reflected operator answers (and casts the int)."""
    import numpy as np
    from .._tensor import Tensor
    return isinstance(x, (Tensor, np.ndarray))


def _sum(a, b): return a + b
def _prod(a, b): return a * b
def _first(a, b): return a
def _second(a, b): return b


def _power(a, b):
    if a <= 1:
        return 1
    return a ** b if b <= 64 else INT64 * 2



def exact_value(n, guard):
    """Stand-in `n`'s concrete value where Python needs it: a guard on the exact value
    (`guard(tensor)`, `float` or `int`) while its trace records; used outside it, the trace
    is unsafe to cache. Either way its roots are now keyed by value."""
    if n._t is None:
        return n._v
    owner = n._owner
    if owner.recording():
        guard(n._t)
    else:
        owner.unsafe = True
    owner.exact |= n._roots
    return n._v
