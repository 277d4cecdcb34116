"""The guards on Python state a compiled path checks on every call (Note [Captured state]
in compiler/state.py): `StateGuard` (one place and what it must still hold), `checker`
(all of a path's guards as one generated function), and the first failing guard's reason.
"""
import collections
import keyword
import math
import operator
import types

import numpy as np

from .._tensor import Tensor
from .state_slots import SlotView

_SCALARS = (bool, int, float, complex, str, type(None))
_MISSING = object()
_LEN = object()         # key of a length guard
_MAPPINGS = (dict, types.MappingProxyType, SlotView)   # places read by .get(key, _MISSING)


class StateGuard:
    """`holder[key]` (a dict, list, tuple or closure cell with key None; the container's
    length with key _LEN) must still hold `expected`, by `mode`: "is" (the same object),
    "eq" (an equal value of the same type), "len", "array" (the same numpy array with
    the same values: `expected` is (array, snapshot)) or "data" (the same container of
    plain data with equal contents: (container, deep copy), Note [Data beyond the walk])."""

    __slots__ = ("holder", "key", "expected", "mode", "where", "current")

    def __init__(self, holder, key, expected, mode, where):
        self.holder, self.key, self.expected = holder, key, expected
        self.mode, self.where = mode, where
        self.current = _getter(holder, key)     # () -> what the place holds now

    @property
    def same(self):
        return self.mode == "is"

    def holds(self):
        cur, exp = self.current(), self.expected
        if self.mode == "is":
            return cur is exp
        if self.mode == "array":
            return cur is exp[0] and _array_eq(cur, exp[1])
        if self.mode == "data":
            return cur is exp[0] and cur == exp[1]
        if _signed_float(exp):
            return _same_float(cur, exp)
        return cur is exp or (type(cur) is type(exp) and cur == exp)

    def reason(self):
        cur = self.current()
        now = "deleted" if cur is _MISSING else _short(cur)
        if self.mode == "is":
            return f"{self.where} was rebound to another object ({now})"
        if self.mode == "len":
            return f"{self.where} changed length: {self.expected} -> {now}"
        if self.mode == "array":
            return f"{self.where} (a numpy array) changed"
        if self.mode == "data":
            return f"{self.where} changed in place"
        return f"{self.where} changed: {_short(self.expected)} -> {now}"

    def describe(self):
        if self.mode == "len":
            return f"len({self.where}) == {self.expected}"
        exp = self.expected[1] if self.mode in ("array", "data") else self.expected
        return f"{self.where} {'is' if self.mode == 'is' else '=='} {_short(exp)}"


def _array_eq(a, snap):
    return a.shape == snap.shape and a.dtype == snap.dtype and np.array_equal(a, snap)


def checker(guards):
    """A generated `() -> bool`: True while every guard holds (the per-call check).

    One line per guard, its holder and expected value bound as globals: a third of the
    cost of calling each guard's getter. On False, `first_failing` says which and why.
    Note [Checking many items at once]: the identity guards on items 0..n-1 of one list
    or tuple (a global list of layers or ops looped over) are checked by one C-level pass,
    `all(map(is_, holder, expected))` after `len(holder) >= n`: the same answer as n
    lines (a shorter holder is an IndexError there, False here; items past n are not
    checked by either), at about a third of the cost. A slot (SlotView) or a function's
    `__code__` is read with `getattr(obj, name, _M)` directly, as SlotView.get does."""
    if not guards:
        return lambda: True
    lines, env = checker_source(guards)
    exec(compile("\n".join(["def check():"] + lines + ["    return True"]),
                 "<tracegrad state guards>", "exec"), env)
    return env["check"]


def checker_source(guards, miss="return False", prefix=""):
    """(lines, globals) of `checker`'s body without its final `return True`: statements at
    one indent running `miss` where it answers False; the globals it binds are named with
    `prefix` (so the lines can go into another generated function)."""
    P = prefix
    env = {"_M": _MISSING, "_aeq": _array_eq, "_all": all, "_map": map, "_is": operator.is_}
    lines = ["    try:"]
    batched = _item_batches(guards)
    for b, (holder, expected) in enumerate(batched.values()):
        env[f"{P}bh{b}"], env[f"{P}be{b}"] = holder, expected
        lines.append(f"        if len({P}bh{b}) < {len(expected)} or not "
                     f"_all(_map(_is, {P}bh{b}, {P}be{b})): {miss}")
    skip = {id(g) for g in guards if id(g.holder) in batched and g.mode == "is"
            and type(g.key) is int}
    empty = []                   # Note [Guard lines]: holders that must still be empty
    for i, g in enumerate(guards):
        if id(g) in skip:
            continue
        env[f"{P}h{i}"], env[f"{P}k{i}"], env[f"{P}e{i}"] = g.holder, g.key, g.expected
        if g.key is _LEN and g.expected == 0 and type(g.expected) is int \
                and type(g.holder) in _TRUTH_IS_LEN:
            empty.append(f"{P}h{i}")
            continue
        # Note [Guard lines]: a str or int key is a constant of the line, not a global
        key = repr(g.key) if type(g.key) in (str, int) else f"{P}k{i}"
        h, e = f"{P}h{i}", f"{P}e{i}"
        if g.key is _LEN:
            get = f"len({h})"
        elif g.key is None:
            get = f"{h}.cell_contents"
        elif type(g.holder) is SlotView:
            env[h] = g.holder.obj
            if _plain_name(g.key) and g.expected is not _MISSING:
                get = f"{h}.{g.key}"     # Note [Attribute guard lines]
            else:
                get = f"getattr({h}, {key}, _M)"
        elif type(g.holder) in _PLAIN_DICTS and g.expected is not _MISSING:
            # (a missing key: KeyError, so False)
            get = f"{h}[{key}]"
        elif isinstance(g.holder, _MAPPINGS):
            get = f"{h}.get({key}, _M)"
        else:
            get = f"{h}[{key}]"
        if g.mode == "is" or g.mode == "eq" and _singleton(g.expected):
            # (Note [Guard lines]: the value guard on True, False or None is an identity)
            lines.append(f"        if {get} is not {e}: {miss}")
            continue
        if g.key is _LEN and type(g.expected) is int:    # `len` gives an int: `!=` is exact
            lines.append(f"        if {get} != {g.expected}: {miss}")
            continue
        if g.mode == "eq" and _signed_float(g.expected):    # Note [Zeros and NaNs guarded]
            env["_sf"] = _same_float     # (the same object: the same float; no call)
            lines += [f"        v = {get}", f"        if v is not {e} and not _sf(v, {e}): {miss}"]
            continue
        test = {"array": f"v is not {e}[0] or not _aeq(v, {e}[1])",
                "data": f"v is not {e}[0] or v != {e}[1]"}.get(
            g.mode, f"v is not {e} and (type(v) is not type({e}) or v != {e})")
        lines += [f"        v = {get}", f"        if {test}: {miss}"]
    for k in range(0, len(empty), 16):
        lines.append(f"        if {' or '.join(empty[k:k + 16])}: {miss}")
    lines += ["    except (ValueError, IndexError, KeyError, TypeError, AttributeError):",
              f"        {miss}"]
    return lines, env


# Note [Attribute guard lines]
# A slot or a function's `__code__` guarded to hold an object is read as `h.name`, not
# `getattr(h, 'name', _M)`: the same lookup, without a call of the builtin (a loop over
# 60 functions of a global list checks 60 `__code__` guards per call: ~1 us fewer). An
# attribute gone raises AttributeError where getattr gave _M: both fail the check (the
# except clause answers a miss). A guard expecting the attribute to be missing keeps
# getattr, whose default is what it compares with.
def _plain_name(key):
    return type(key) is str and key.isidentifier() and not keyword.iskeyword(key)


# Note [Zeros and NaNs guarded]
# A float guarded by value is the same float only bit for bit where `==` says otherwise:
# `-0.0 == 0.0` (a global `scale = -0.0` after `0.0` kept a path whose zeros have the
# other sign: `x * scale` differs from eager bitwise) and `nan != nan` (a NaN re-traced on
# every call). Guards expecting a zero or a NaN compare the sign and NaN-ness too.
def _signed_float(x):
    return type(x) is float and (x == 0.0 or x != x)


def _same_float(v, e):
    return type(v) is float and (v != v and e != e or v == e and math.copysign(1.0, v)
                                 == math.copysign(1.0, e))


# Note [Guard lines]
# A training step checks ~120 guards per call, ~35 ns each line by line, so each line is
# made as cheap as the same answer allows: an identity guard is one line (`if h['bias']
# is not e: return False`, no local); a str or int key is a constant of the line; a plain
# `dict` or `OrderedDict` (no `__missing__`) is read by subscript, whose KeyError on a
# missing key answers False as `.get(key, _M)` did; a length guard compares with its int
# as a constant (`len` always gives an int, so `!=` answers as the generic test does); and
# the ~40 "still empty" guards (a module's hook dicts, `_buffers`, ...) on builtin
# containers, whose truth is their length, are tested together, `if h1 or h2 or ...:
# return False`. About a third of the check's time on the tiny training step. A value
# guard expecting True, False or None (`nesterov`, `foreach`, a module's `weight`) is an
# identity line: no other value of their types exists, so "the same type and equal" is
# "is".
_PLAIN_DICTS = (dict, collections.OrderedDict)


def _singleton(x):
    """True, False or None: the only values of their types, so a value of the same type
    and equal is this very object (Note [Guard lines])."""
    return x is True or x is False or x is None
_TRUTH_IS_LEN = (dict, collections.OrderedDict, collections.defaultdict, list, tuple)


_MIN_BATCH = 8           # fewer identity guards on one list: the lines cost no more


def _item_batches(guards):
    """{id(holder): (holder, expected items in index order)} for each list or tuple whose
    identity guards cover exactly the items 0..n-1, n >= _MIN_BATCH (Note [Checking many
    items at once])."""
    by, mixed = {}, set()
    for g in guards:
        if g.mode == "is" and type(g.key) is int and type(g.holder) in (list, tuple):
            items = by.setdefault(id(g.holder), (g.holder, {}))[1]
            if items.get(g.key, g.expected) is not g.expected:
                mixed.add(id(g.holder))      # two expectations for one item: line by line
            items[g.key] = g.expected
    out = {}
    for hid, (holder, items) in by.items():
        n = len(items)
        if n >= _MIN_BATCH and hid not in mixed and all(k in items for k in range(n)):
            out[hid] = (holder, tuple(items[k] for k in range(n)))
    return out


def first_failing(guards):
    """The first guard that no longer holds, or None."""
    for g in guards:
        try:
            if not g.holds():
                return g
        except (ValueError, IndexError, KeyError, TypeError):
            return g
    return None


def _getter(holder, key):
    if key is _LEN:
        return lambda: len(holder)
    if key is None:
        def cell():
            try:
                return holder.cell_contents
            except ValueError:
                return _MISSING
        return cell
    if isinstance(holder, _MAPPINGS):
        return lambda: holder.get(key, _MISSING)
    return lambda: holder[key] if -len(holder) <= key < len(holder) else _MISSING


def _short(x):
    if isinstance(x, Tensor):
        return f"tensor of shape {tuple(x.shape)}"
    if isinstance(x, np.ndarray):
        return f"array of shape {x.shape}"
    if not isinstance(x, _SCALARS + (list, tuple, dict, type, types.FunctionType)):
        return f"<{type(x).__name__} object>"
    try:
        r = repr(x)
    except Exception:
        r = f"<{type(x).__name__}>"
    r = " ".join(r.split())
    return r if len(r) <= 60 else r[:57] + "..."


def changed_by_trace(guards, owned):
    """(dropped, changed): guards that no longer hold right after the trace, split into
    those on state that replayed calls own (dropped: replaying rewrites it) and the others
    (the function changed Python state it reads; a cached path would not)."""
    dropped, changed = [], []
    for g in guards:
        try:
            holds = g.holds()
        except (ValueError, IndexError, KeyError, TypeError):
            holds = False
        if not holds:
            (dropped if id(g.holder) in owned else changed).append(g)
    return dropped, changed
