"""`Number`: a Python float (an argument, or a float tensor's `.item()`) traced as a runtime
value instead of a constant.

Note [Numbers read per call]
A learning rate, a temperature or a loss weight passed as a Python float changes from call
to call. Traced as a constant, each new value would be a new entry key and a re-trace
(torch.compile users know the recompiles). Once a float argument has changed between two
calls whose keys differ in nothing else (compiler/dynamic_numbers.py), the trace passes the
function a `Number` in its place: it holds the call's value, and the compiled program reads
the value per call as a captured 0-d float64 input (the tracer's scalar sources, the same
machinery optimizers' hyper-parameters use).

A `Number` must behave exactly as the float would, or make the path depend on the float's
value; never silently bake the trace's value in:
- arithmetic with numbers (+ - * /, unary - + abs) gives a `Number` computed by a traced
  float64 op, which rounds exactly as Python's float arithmetic (IEEE double); division by a
  zero raises ZeroDivisionError as Python does, and dividing by a `Number` guards that it
  is not zero;
- meeting a tensor in an elementwise arithmetic primitive (`x * lr`, `p.add_(g, alpha=-lr)`)
  it becomes a 0-d tensor cast to the dtype eager casts the Python number to (the tensor's
  floating dtype, else the default dtype: `_dispatch._scalar`), so the op computes what
  eager computes;
- a comparison or `bool()` becomes a guard on its outcome (two paths for `if lr > 0.5`,
  not one per value);
- copied into a new floating tensor (`tensor([lr, 0.9])`, `full((3,), lr)`, `full_like`,
  `new_full`: ops/creation.py) it is its 0-d value cast to that dtype, as numpy casts the
  float; so is an operand of `where(c, x, lr)` (`traced_scalar`);
- everything else takes the concrete value (`float()`, `int()`, `round()`, formatting,
  hashing, numpy's `__array__` and ufuncs (`np.float32(s) * lr` computes as with the
  float: a weak scalar to numpy), attributes such as `is_integer`, any other primitive, any
  attribute of a primitive): a guard on the exact value, after which the argument is keyed
  by value again (`exact` below);
- `isinstance(lr, float)` holds (`__class__`), so user code checking it takes the branch
  the float would.
What cannot be checked from here is checked by the compiler after the trace: a `Number`
still referenced when the trace ends (stored in an object, a list, a closure, returned
inside a custom object) escaped, and a `Number` used while the trace was not recording
(`unsafe`); either keeps the path from being cached. Then every `Number` is frozen: it
behaves as the plain float of its value from then on, which is what eager stored.

Note [Numbers taken from tensors]
`loss.item()` at the end of a training step differs on every call. As a guard on its exact
value (what `item()` records elsewhere) each call would be a new path, and past
`cache_limit` the step would run eagerly for good. So inside a compiled function's trace
(`Tracer.item_numbers`, switched on by compiler/function.py), `.item()` of a floating
tensor, called from user code (tracegrad's own `.item()`s, in optimizers and schedulers,
keep their guards), gives a `Number` rooted at a float64 copy of the traced value
(`Numbers.taken`; an integer tensor's gives an `Integer`: Note [Integers read per call]
in integers.py). Every use keeps the rules above: arithmetic is traced in float64,
comparisons guard their outcome, any other use guards the exact value, a Number stored
anywhere escapes and the path is not cached (and `.item()` gives plain floats, guarded, in
that function's later traces). A `Number` among the leaves of the returned value is not
made concrete but becomes an extra program output (`split_outputs`), converted back to a
Python float on each call. float64 holds every float16/bfloat16/float32 value exactly, so
that float is bit-equal to eager's `.item()`. Only `.item()`: `float(t)` must return a real
float (Python checks the type `__float__` returns); a bool tensor's `.item()` stays a
guard on its value (two paths at most).
Code naming `type` keeps the guards too (`type(v) is float` fails for a stand-in:
`DynamicFloats.items_per_call`).
"""
import collections
import operator
import sys

import numpy as np

from .. import _dispatch

_EXACT_INT = 2 ** 53                 # ints beyond this do not convert to float64 exactly


class Numbers:
    """The `Number`s one trace made, and what happened to them."""

    def __init__(self, tracer):
        self.tracer = tracer
        self.made = []               # every Number, in creation order
        self.exact = set()           # root positions whose exact value the trace took
        self.unsafe = False          # a Number was used while the trace did not record

    def root(self, tensor, value, position):
        return self._new(tensor, value, frozenset((position,)))

    def taken(self, tensor, value):
        """A Number for `t.item()`, `tensor` the float64 copy of `t` the trace recorded
        (Note [Numbers taken from tensors]). Its root is no argument: taking its exact value
        makes no position static (the guard recorded is the whole story)."""
        return self._new(tensor, value, frozenset((("item", len(self.made)),)))

    def _new(self, tensor, value, roots):
        n = Number(self, tensor, value, roots)
        self.made.append(n)
        return n

    def root_int(self, tensor, value, position, bound):
        """An `Integer` for an int argument (Note [Integers read per call])."""
        return self._new_int(tensor, value, frozenset((position,)), bound)

    def taken_int(self, tensor, value, bound):
        """An `Integer` for an integer tensor's `.item()`, `tensor` its int64 copy."""
        return self._new_int(tensor, value, frozenset((("item", len(self.made)),)), bound)

    def _new_int(self, tensor, value, roots, bound):
        n = Integer(self, tensor, value, roots, bound)
        self.made.append(n)
        return n

    def recording(self):
        hook = _dispatch.trace_hook.get()
        return hook is not None and getattr(hook, "__self__", None) is self.tracer

    def freeze(self):
        for n in self.made:
            n._t = None

    def escaped(self):
        """Whether a Number is still referenced from outside the trace (stored in an object,
        a list, a dict, a closure, a global). Each such reference is replaced by the plain
        float, the very value eager stored (`_put_back`, Note [Numbers put back]). Call with
        the trace finished."""
        out = False
        mine = id(self.made)
        for n in self.made:
            if sys.getrefcount(n) <= 3:      # self.made, n, the argument
                continue
            out = True
            for _ in range(8):               # a tuple rebuilt may hold the Number too
                _put_back(n, n._v, {mine})
                if sys.getrefcount(n) <= 3:
                    break
        return out


def _put_back(old, new, skip):
    """Replace every reference to `old` that a dict (value or key), a list, a set, an
    object's attributes or a closure cell holds by `new`. A tuple or frozenset holding `old`
    cannot change: it is rebuilt with `new` and put back in its own place, in turn (a
    `(lr, step)` appended to a history list), up to 8 tuples deep (Note [Numbers put
    back]).

    Note [Numbers put back]
    A frozen Number behaves as its float, but it is not one: `type(x) is float` fails, and
    C code checking for a real float refuses it (`json.dumps` of a logged history, Decimal).
    So a Number left in the caller's state must be replaced wherever eager would have left
    the float: as a dict key or a set member too (a `seen[lr]` table), in a deque or a
    slot (a `deque(maxlen=100)` of recent rates, a slotted dataclass), and inside the
    tuples user code builds around it (`history.append((lr, loss_value))`), which are
    immutable and so replaced whole, in their own referrers. The referrer lists this
    search makes are referrers too, and are skipped."""
    import gc
    import types
    skip = set(skip)
    pending = [(old, new, 0)]
    while pending:
        old, new, depth = pending.pop(0)
        refs = gc.get_referrers(old)
        skip.add(id(refs))
        for r in refs:
            if id(r) in skip or isinstance(r, types.FrameType):
                continue
            if isinstance(r, dict):
                if _holds(r, old):
                    items = _swapped_pairs(r.items(), old, new)
                    r.clear()
                    r.update(items)
                else:
                    for k, x in list(r.items()):
                        if x is old:
                            r[k] = new
            elif isinstance(r, (list, collections.deque)):
                for i, x in enumerate(r):
                    if x is old:
                        r[i] = new
            elif isinstance(r, set):
                if _holds(r, old):
                    r.discard(old)
                    r.add(new)
            elif isinstance(r, (tuple, frozenset)) and depth < 8:
                if not _holds(r, old):
                    continue
                items = _swapped(r, old, new)
                try:                         # a namedtuple takes its fields
                    rebuilt = type(r)(items) if type(r) in (tuple, frozenset) else \
                        type(r)(*items)
                except Exception:            # noqa: BLE001 - left as it is (frozen)
                    continue
                skip.add(id(rebuilt))
                pending.append((r, rebuilt, depth + 1))
            elif isinstance(r, types.CellType):
                r.cell_contents = new
            else:
                if isinstance(r, BaseException) and r.args is old:
                    r.args = new             # `raise ValueError(lr, "too large")`
                if isinstance(getattr(r, "__dict__", None), dict):
                    d = vars(r)
                    for k, x in list(d.items()):
                        if x is old:
                            d[k] = new
                _put_back_slots(r, old, new)
        del refs


def _put_back_slots(obj, old, new):
    """`old` replaced by `new` in the `__slots__` of `obj` (a slotted dataclass holding the
    current learning rate), through the slot descriptors, as a frozen class's __init__
    would."""
    for cls in type(obj).__mro__:
        slots = cls.__dict__.get("__slots__", ())
        for name in (slots,) if isinstance(slots, str) else slots:
            slot = cls.__dict__.get(name)
            if hasattr(slot, "__set__") and getattr(obj, name, None) is old:
                slot.__set__(obj, new)


# (no comprehension in `_put_back` may name `old`: it would make `old` a closure cell of
# `_put_back`, a referrer of `old` that the cell repair would rewrite)
def _holds(container, old):
    return any(x is old for x in container)


def _swapped(items, old, new):
    """The values `items` with `old` replaced by `new`."""
    return [new if x is old else x for x in items]


def _swapped_pairs(items, old, new):
    """The (key, value) pairs `items` with `old` replaced by `new` in either."""
    return [(new if k is old else k, new if x is old else x) for k, x in items]


class Number:
    """A float argument of a traced call (Note [Numbers read per call])."""

    __slots__ = ("_owner", "_t", "_v", "_roots", "__weakref__")

    def __init__(self, owner, tensor, value, roots):
        self._owner, self._t, self._v, self._roots = owner, tensor, value, roots

    @property
    def __class__(self):                 # isinstance(lr, float) as for the float
        return float

    # -- the concrete value, guarded --
    def __float__(self):
        return exact_value(self, float)


    def _outcome(self, test, fn):
        """A Python bool from a comparison: a guard on its outcome only."""
        if self._t is None or not self._owner.recording():
            return fn(float(self))
        return bool(test)

    # -- arithmetic --
    def _binary(self, other, op, reflected):
        if type(other) is Integer:       # Python converts the int to float
            other = _promoted(other)
        if self._t is None:
            o = float(other) if type(other) is Number else other
            return op(o, self._v) if reflected else op(self._v, o)
        o = _operand(other)
        if o is None:
            if _python_number(other):    # an int past 2**53, a float subclass: the value
                f = float(self)
                return op(other, f) if reflected else op(f, other)
            return NotImplemented
        if not self._owner.recording():
            f = float(self)
            o = float(other) if type(other) is Number else other
            return op(o, f) if reflected else op(f, o)
        a, b = (o, self._t) if reflected else (self._t, o)
        res = op(a, b)
        roots = self._roots | (other._roots if type(other) is Number else frozenset())
        return self._owner._new(res, res._data.item(), roots)

    def __add__(self, o): return self._binary(o, operator.add, False)
    def __radd__(self, o): return self._binary(o, operator.add, True)
    def __sub__(self, o): return self._binary(o, operator.sub, False)
    def __rsub__(self, o): return self._binary(o, operator.sub, True)
    def __mul__(self, o): return self._binary(o, operator.mul, False)
    def __rmul__(self, o): return self._binary(o, operator.mul, True)

    def __truediv__(self, o):
        o = _promoted(o)
        if _operand(o) is not None:
            _nonzero(o)
        return self._binary(o, operator.truediv, False)

    def __rtruediv__(self, o):
        o = _promoted(o)
        if _operand(o) is not None:
            _nonzero(self)
        return self._binary(o, operator.truediv, True)

    def __neg__(self):
        return self._binary(-1.0, operator.mul, False) if self._t is not None else -self._v

    def __pos__(self):
        return self

    def __abs__(self):
        if self._t is None or not self._owner.recording():
            return abs(float(self))
        res = abs(self._t)
        return self._owner._new(res, res._data.item(), self._roots)

    # everything else of float's arithmetic takes the value (`//`, `%`, `**`, divmod: their
    # Python rules for signs, zeros and overflow are not numpy's)
    def __floordiv__(self, o): return float(self) // _value(o)
    def __rfloordiv__(self, o): return _value(o) // float(self)
    def __mod__(self, o): return float(self) % _value(o)
    def __rmod__(self, o): return _value(o) % float(self)
    def __divmod__(self, o): return divmod(float(self), _value(o))
    def __rdivmod__(self, o): return divmod(_value(o), float(self))
    def __pow__(self, o, mod=None): return pow(float(self), _value(o), mod)
    def __rpow__(self, o, mod=None): return pow(_value(o), float(self), mod)

    # -- comparisons: guards on the outcome --
    def _compare(self, other, op):
        other = _promoted(other)
        o = _operand(other)
        if o is None:
            return op(float(self), other) if _python_number(other) else NotImplemented
        if self._t is None or not self._owner.recording():
            return op(float(self), _value(other))
        return self._outcome(op(self._t, o), lambda f: op(f, _value(other)))

    def __eq__(self, o): return self._compare(o, operator.eq)
    def __ne__(self, o): return self._compare(o, operator.ne)
    def __lt__(self, o): return self._compare(o, operator.lt)
    def __le__(self, o): return self._compare(o, operator.le)
    def __gt__(self, o): return self._compare(o, operator.gt)
    def __ge__(self, o): return self._compare(o, operator.ge)

    def __bool__(self):
        if self._t is None or not self._owner.recording():
            return bool(float(self))
        return bool(self._t != 0)

    # -- conversions: the exact value --
    def __int__(self): return int(float(self))
    def __trunc__(self): return int(float(self))
    def __floor__(self): return float(self).__floor__()
    def __ceil__(self): return float(self).__ceil__()
    def __round__(self, n=None): return round(float(self), n)
    def __hash__(self): return hash(float(self))
    def __repr__(self): return repr(float(self))
    def __str__(self): return str(float(self))
    def __format__(self, spec): return format(float(self), spec)
    def __reduce__(self): return (float, (float(self),))
    def __copy__(self): return self
    def __deepcopy__(self, memo): return self

    def __array__(self, dtype=None, copy=None):
        return np.asarray(float(self), dtype=dtype)

    def __array_ufunc__(self, ufunc, method, *inputs, **kwargs):
        # numpy meets the exact value as the Python float it is: `np.float32(lr) * v` stays
        # float32 (a Python float is a weak scalar to numpy; an array of it would not be)
        inputs = tuple(float(x) if type(x) is Number else x for x in inputs)
        return getattr(ufunc, method)(*inputs, **kwargs)

    def __getattr__(self, name):         # is_integer(), hex(), real, conjugate(), ...
        if not hasattr(0.0, name):       # a probe (`getattr(x, "_data", None)`) takes no value
            raise AttributeError(f"'float' object has no attribute '{name}'")
        return getattr(float(self), name)


# Python's own errors name an operand's type ("'float' object cannot be interpreted as an
# integer"): a Number's must read as the float's
Number.__name__ = Number.__qualname__ = "float"


def _operand(x):
    """`x` as an operand of a Number's traced arithmetic, or None: not a number it takes."""
    t = type(x)
    if t is Number:
        return x._t if x._t is not None else x._v
    if t is float or t is bool:
        return x
    if t is int:
        return x if -_EXACT_INT <= x <= _EXACT_INT else None
    return None


def _python_number(x):
    """An int or float `_operand` does not take (an int past 2**53, a subclass of either):
    Python's own arithmetic with the float's exact value gives what eager gives (the rounding
    of a huge int, an OverflowError, a subclass's operator), where returning NotImplemented
    would raise a TypeError eager never raises."""
    return type(x) is not Number and isinstance(x, (int, float))


def _value(x):
    return float(x) if type(x) is Number else int(x) if type(x) is Integer else x


def _promoted(x):
    """An `Integer` as the `Number` of its exact float64 value (Python converts an int
    meeting a float), or its exact int where that is not exact; anything else as it is."""
    if type(x) is not Integer:
        return x
    n = x.as_number()
    return n if n is not None else x.__index__()


def _nonzero(divisor):
    """Python raises ZeroDivisionError where numpy gives inf: a zero divisor raises now, and
    a Number divisor is guarded nonzero (a call where it is zero re-traces, and raises)."""
    if type(divisor) is Number and divisor._t is not None and divisor._owner.recording():
        if divisor._v == 0:
            raise ZeroDivisionError("float division by zero")
        bool(divisor._t != 0)
    elif _value(divisor) == 0:
        raise ZeroDivisionError("float division by zero")


# -- Numbers meeting primitives (tracer.record) --
def _arithmetic():
    from ..ops import elementwise as E
    return frozenset((E.ADD, E.SUB, E.MUL, E.DIV, E.RSUB))


_ARITHMETIC = None


def has_number(args, attrs):
    for a in args:
        if _holds_stand_in(a):
            return True
    if attrs:
        for v in attrs.values():
            if _holds_stand_in(v):
                return True
    return False


def _holds_stand_in(v):
    """A stand-in, or a tuple, list, dict or slice holding one at any depth (an index
    `x[:n]`, a padding `((n, n),)`)."""
    t = type(v)
    if t is Number or t is Integer:
        return True
    if t is tuple or t is list:
        return any(_holds_stand_in(i) for i in v)
    if t is slice:
        return _holds_stand_in((v.start, v.stop, v.step))
    if t is dict:
        return any(_holds_stand_in(i) for i in v.values())
    return False


def _exact_deep(v):
    """`v` with every stand-in in it (at any depth of tuples, lists, dicts and slices)
    replaced by its exact value, guarded."""
    t = type(v)
    if t is Number or t is Integer:
        return _exact(v)
    if t is tuple or t is list:
        return t(_exact_deep(i) for i in v) if _holds_stand_in(v) else v
    if t is slice:
        return slice(_exact(v.start), _exact(v.stop), _exact(v.step))
    if t is dict:
        return {k: _exact_deep(i) for k, i in v.items()} if _holds_stand_in(v) else v
    return v


def replace(prim, args, attrs):
    """(args, attrs) of a primitive about to be recorded, with every live `Number` replaced:
    by a 0-d tensor of the dtype eager would cast the float to, where it is an operand of
    an elementwise arithmetic primitive meeting one tensor; by its exact value elsewhere.
    Called only when `has_number`."""
    global _ARITHMETIC
    if _ARITHMETIC is None:
        _ARITHMETIC = _arithmetic()
    from .._dtype import get_default_dtype
    from .._tensor import Tensor
    func = prim.functional or prim
    tensors = [a for a in args if isinstance(a, Tensor)]
    out = []
    arithmetic = func in _ARITHMETIC and len(args) == 2 and len(tensors) == 1
    for a in args:
        if type(a) is Integer:           # Note [Integers read per call]
            t = a.cast_for(tensors[0]) if arithmetic and a._live() else None
            out.append(t if t is not None else a.__index__())
        elif type(a) is not Number:
            out.append(_exact_deep(a))
        elif a._t is not None and arithmetic:
            like = tensors[0]
            dt = like.dtype if like.is_floating_point() else get_default_dtype()
            out.append(a._t.to(dt))
        else:
            out.append(float(a))
    if attrs:
        attrs = {k: _exact_deep(v) for k, v in attrs.items()}
    return tuple(out), attrs


def _exact(x):
    """A stand-in's exact value (guarded), anything else as it is."""
    t = type(x)
    return float(x) if t is Number else x.__index__() if t is Integer else x


def traced_scalar(x, dtype):
    """`x`, a live stand-in, as a 0-d tensor of numpy `dtype` holding what eager's conversion
    of the number to that dtype holds (a float into a floating dtype; an int where the cast
    is exact: `Integer.cast_to`), or None: not a live stand-in, or its exact value is
    needed. For primitives taking a number operand (`where(c, x, lr)`)."""
    t = type(x)
    if t is Number and x._t is not None and x._owner.recording() \
            and np.dtype(dtype).kind == "f":
        from .._dtype import _FROM_NP
        return x._t.to(_FROM_NP[np.dtype(dtype)])
    if t is Integer and x._live():
        return x.cast_to(np.dtype(dtype))
    return None


def plain(x):
    """`x` (a tuple, list or dict of arguments) with each `Number` in it, at any depth of
    tuples, lists and dicts, replaced by its exact value: for code that runs outside the
    trace (a custom Function's forward)."""
    t = type(x)
    if t is Number or t is Integer:
        return _exact(x)
    if t is tuple or t is list:
        items = [plain(i) for i in x]
        return x if all(a is b for a, b in zip(items, x)) else t(items)
    if t is dict:
        items = {k: plain(v) for k, v in x.items()}
        return x if all(items[k] is v for k, v in x.items()) else items
    return x


def split_outputs(out):
    """(`out` with each `Number` among its leaves replaced by its value, unguarded; {flat
    leaf index: a fresh traced float64 0-d tensor holding that Number's value}): each
    returned Number becomes a program output read per call (Note [Numbers taken from
    tensors]). Call while the trace records (the copies are recorded)."""
    if type(out) in STAND_INS:
        return out._v, {0: _fresh(out)}
    from .flatten import flatten
    leaves, build = flatten(out)
    found = {k: x for k, x in enumerate(leaves) if type(x) in STAND_INS}
    if not found:
        return out, {}
    tensors = {k: _fresh(x) for k, x in found.items()}
    out = build([x._v if type(x) in STAND_INS else x for x in leaves])
    leaves.clear()                   # (flatten's recursive walker keeps it alive until
    found.clear()                    # the next collection: a Number there would escape)
    return out, tensors


def _fresh(n):
    """A new traced float64 tensor of `n`'s value (never a program input itself: a returned
    float argument's Number is the captured input it is read from)."""
    if n._t is None or not n._owner.recording():
        n._owner.unsafe = True
        return None
    return n._t.clone()


from .integers import Integer, exact_value  # noqa: E402  (integers.py imports Number)

STAND_INS = (Number, Integer)

