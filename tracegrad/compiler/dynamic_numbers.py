"""Which float arguments a compiled function reads per call instead of keying by value.

Note [Float arguments that change]
A float argument is traced as a constant (keyed by its exact value) until a call differs
from the last one only in the values of float arguments: the same tensors' shapes and
flags, the same other arguments, modes and structure. From then on those positions are
*dynamic*: the entry key holds the float's type there, not its value, the trace passes a
`Number` in its place (Note [Numbers read per call] in tracing/numbers.py), and each call
hands its floats to the path through `CallNumbers`. A trace that took such a float's exact
value (formatting it, `int(lr)`, an attribute of a primitive such as a dropout
probability) makes the position static again, for good: that path is stored under the key
holding the value, where the guard it recorded always holds. A trace whose Numbers escaped
(still referenced when it returned) or were used while it was not recording is not
cached, and its positions become static too: such a function keeps the behaviour of a
path per value, as it must. `type(lr) is float` is the one question a Number answers
differently from a float, and nothing intercepts it: a function whose traces ran user code
naming `type` never makes a float dynamic (a float changes only after a first trace, whose
code is known by then). Nor does one naming C code that takes only a real int or float
(`json.dumps({"step": self.step})`, `struct.pack`: `REAL_NUMBER_ONLY`), which a stand-in
would make raise; reached by a function's Python code (a logging library's), the call
that first gives it a stand-in raises, with a note, and later calls key numbers by value.
Nor does one comparing a number literal by identity (`self.step is 0`, true eagerly for
CPython's small ints): `compares_number_identity`. A trace with Numbers that first reaches such code on a new path
(`if lr > 0.5: return helper(x, lr)`) has already run it with a Number, and its result may
be wrong: it is not cached, and the call raises rather than return it (loud, never silent);
its Python effects have run once, as eager's would.

A position is the binder's leaf index, the same in the key and in the call. Numbers inside
the containers passed take part too (a list of rewards or of loss weights, a config dict's
entries): when the entry key's structure is the same and only such numbers changed, those
in a list or dict (not a tuple: a trace cannot put a stand-in into it) become dynamic, and
a trace puts the stand-in into the caller's container for its duration and the very number
back afterwards (`swappable`, `Binder.leaf_places`); the container's contents are compared before and
after by identity, as for any container argument, so that swap is invisible.

Int arguments take part the same way (an `epoch`, a diffusion step `t`): once a call
differs from the last only in the values of int (or float) arguments, those positions are
read per call, as int64, and the trace passes an `Integer` (Note [Integers read per call]
in tracing/integers.py). An int used in `range`, as an index or a shape, formatted or
hashed gives its exact value, which makes the position static as above: such an int
keeps a path per value. Only plain ints of at most 2**61 in magnitude are read per call
(a larger one, or a bool, is keyed by value); an int position stays an int position (a
float arriving there is a new key).

Note [Float attributes that change]
The same holds for a float the function reads from Python state, guarded by value (Note
[Captured state] in state.py): a module's `self.temperature`, a loss weight annealed
between steps (`model.kl_weight = min(1, step / 1000)`), a config dict's entry, a global.
When every cached path of the call's entry fails only because such floats changed (an
"eq" guard on a dict or list place whose old and new values are both floats), the places
become dynamic: the next trace puts a `Number` there for its duration (the value read per
call through a scalar source, the place's guard becoming a runtime read as an optimizer's
learning rate is), and puts the very float object back afterwards. The trace sees the
Number wherever it reads the place, so nothing it computed is a stale constant; what
would be (an exact use, an escape, a write to the place by the function itself, which the
state scan reports as a change) keys the place by value again, for good. So does a path
with a custom Function: its backward is traced when the backward program is built, after
the float is back in its place, and would bake it in.
"""
import dis
import threading
import types

from ..tracing.numbers import Numbers
from .binding import swappable

DYNAMIC = ("S", ("f", "read per call"))   # a dynamic float's part of the entry key
DYNAMIC_INT = ("S", ("i", "read per call"))   # a dynamic int's
from .._effects import INT_READ_LIMIT as _INT_LIMIT  # ints read per call are at most
#   this: Note [Headroom of ints read per call] in _effects.py


def _dynamic_part(x):
    """The key part of a dynamic position holding `x`, or None (keyed by value)."""
    if type(x) is float:
        return DYNAMIC
    if type(x) is int and -_INT_LIMIT <= x <= _INT_LIMIT:
        return DYNAMIC_INT
    return None


class CallNumbers:
    """The current call's leaves, read by the path's scalar sources (`holder[i]`): one per
    thread, so concurrent calls never read each other's numbers."""

    def __init__(self):
        self._local = threading.local()

    def set(self, leaves):
        self._local.leaves = leaves

    def __getitem__(self, i):
        return self._local.leaves[i]


class DynamicFloats:
    """The policy of one compiled function (Note [Float arguments that change])."""

    def __init__(self):
        self.dynamic = set()         # leaf positions read per call
        self.static = set()          # positions found to need their value: never dynamic
        self.typed = False           # user code the traces ran names `type`
        self.holder = CallNumbers()
        self.places = {}             # (id(holder), key) -> (holder, key): dynamic places
        self.static_places = {}      # the same, of places found to need their value
        self.items = True            # `.item()` gives Numbers (Note [Numbers taken from
        #                              tensors]) until a trace's Numbers escaped
        self.rebound = {}            # places a trace stored another tensor at (Note
        #                              [Tensors written to Python state] in tensor_places.py)

    def key(self, key, leaves, struct):
        """`key` with the dynamic float positions of this call typed, not valued; the
        holder gets the call's leaves. `key` itself when there are none. With containers
        (`struct`), only a leaf a trace can swap is typed (`swappable`)."""
        if not self.dynamic:
            return key
        ok = None if struct is None else swappable(struct)
        parts = list(key[0])
        hit = False
        for i in self.dynamic:
            if ok is not None and i not in ok:
                continue
            part = _dynamic_part(leaves[i]) if i < len(leaves) else None
            if part is not None:
                parts[i] = part
                hit = True
        if not hit:
            return key
        self.holder.set(leaves)
        return (tuple(parts),) + key[1:]

    def widen(self, last, key, leaves, struct, names):
        """(key, reason) when `key` differs from the last call's key `last` only in the
        values of float arguments: those become dynamic. None otherwise. With containers
        (`struct`), only numbers a trace can swap take part (`swappable`)."""
        if last is None or len(last) != len(key) or last[1:] != key[1:] or self.typed:
            return None
        ok = None if struct is None else swappable(struct)
        old, new = last[0], key[0]
        if len(old) != len(new):
            return None
        changed = []
        for i, (a, b) in enumerate(zip(old, new)):
            if a == b:
                continue
            if (a[0] != "S" or b[0] != "S" or i in self.static
                    or ok is not None and i not in ok
                    or not (a[1][0] == b[1][0] == "f" and type(leaves[i]) is float
                            or a[1][0] is b[1][0] is int
                            and _dynamic_part(leaves[i]) is DYNAMIC_INT
                            and -_INT_LIMIT <= a[1][1] <= _INT_LIMIT)):
                return None
            changed.append(i)
        if not changed:
            return None
        self.dynamic.update(changed)
        kinds = {type(leaves[i]).__name__ for i in changed}
        kind = kinds.pop() if len(kinds) == 1 else "number"
        said = [f"'{names[i]}'" if i < len(names) else f"{i}" for i in changed]
        said = (f"{kind} argument {said[0]} changed value" if len(said) == 1 else
                f"{kind} arguments {', '.join(said[:-1])} and {said[-1]} changed value")
        return self.key(key, leaves, struct), (
            f"{said}: read per call from now on (no re-trace for new values)")

    def widen_places(self, entry):
        """The reason to trace with Numbers at the float places whose guards failed, when
        each path of `entry` fails only at such places (Note [Float attributes that
        change]); None otherwise."""
        if entry is None or not entry.paths or self.typed:
            return None
        found = {}
        for path in entry.paths:
            bad = [g for g in path.state_guards if not _holds(g)]
            if not bad or not all(number_place(g) for g in bad):
                return None
            for g in bad:
                k = (id(g.holder), g.key)
                if k in self.static_places:
                    return None
                found[k] = g
        if not found:
            return None
        for k, g in found.items():
            self.places[k] = (g.holder, g.key)
        said = " and ".join(g.reason() for g in found.values())
        kinds = {"int" if type(g.expected) is int else "float" for g in found.values()}
        kind = kinds.pop() if len(kinds) == 1 else "number"
        return f"{said} ({kind}: read per call from now on, no re-trace for new values)"

    def items_per_call(self, codes, names=()):
        """Whether the next trace's `.item()`s give Numbers (Note [Numbers taken from
        tensors] in tracing/numbers.py): not once a trace's Numbers escaped or were used
        outside it (the function then keeps a path per value, as before), nor for code
        naming `type`, where `type(loss.item())` would not be `float`, or C code that takes
        only a real float (`_REAL_FLOAT_ONLY`): the function's own `codes`, and the `names`
        of the code the state scan reached (a module's forward, a helper function it
        names). Such code that only the trace reaches still makes that first trace raise
        (Note [Float arguments that change]); later traces keep the guards."""
        if not self.items or self.typed or _REAL_FLOAT_ONLY & set(names):
            return False
        from .state_unread import all_names, names_type
        return not ((_REAL_FLOAT_ONLY - {"type"}) & all_names(list(codes))
                    or names_type(list(codes)))   # Note [The name type]

    def positions(self, key):
        """The leaf positions `key` has typed as dynamic floats."""
        return [i for i, p in enumerate(key[0]) if p == DYNAMIC or p == DYNAMIC_INT]

    def place_numbers(self, tracer):
        """Put a Number into each dynamic place holding a float now, an Integer where it
        holds an int: [(holder, key, the number, its stand-in)], to `restore` after the
        trace."""
        out = []
        numbers = tracer.numbers
        for k, (holder, key) in list(self.places.items()):
            try:
                value = holder[key]
            except (KeyError, IndexError, TypeError):
                continue
            kind = number_kind(value)
            if kind is None:
                continue
            if numbers is None:
                numbers = tracer.numbers = Numbers(tracer)
            if kind == "i":
                t = tracer.scalar_source(holder, key, value, narrow="int")
                n = numbers.root_int(t, value, ("place",) + k, _INT_LIMIT)
            else:
                t = tracer.scalar_source(holder, key, value, narrow="float")
                n = numbers.root(t, value, ("place",) + k)
            holder[key] = n
            out.append((holder, key, value, n))
        return out

    @staticmethod
    def restore(placed):
        """The floats back where `place_numbers` put Numbers (a place the function itself
        rewrote keeps what it wrote), and `placed` without its Numbers: [(holder, key)]."""
        for holder, key, value, n in placed:
            try:
                if holder[key] is n:
                    holder[key] = value
            except (KeyError, IndexError, TypeError):
                pass
        return [(holder, key) for holder, key, *_ in placed]

    def substitute(self, tracer, binder, args, kwargs, leaves, positions, names):
        """(numbers, args, kwargs, swapped) with a `Number` in place of each float at
        `positions` and an `Integer` in place of each int; those inside the caller's lists
        and dicts are put there (`swapped`: what `restore` takes back out)."""
        numbers = tracer.numbers = tracer.numbers or Numbers(tracer)
        made = {}
        for i in positions:
            name = names[i] if i < len(names) else f"a{i}"
            if type(leaves[i]) is int:
                t = tracer.scalar_source(self.holder, i, leaves[i], narrow="int", name=name)
                made[i] = numbers.root_int(t, leaves[i], i, _INT_LIMIT)
            else:
                t = tracer.scalar_source(self.holder, i, leaves[i], name=name)
                made[i] = numbers.root(t, leaves[i], i)
        flat = binder.bind(args, kwargs)[1] is None      # leaf i is argument i
        if flat and not kwargs and len(args) == len(leaves):
            return numbers, tuple(made.get(i, a) for i, a in enumerate(args)), {}, ()
        where = None if flat else binder.leaf_places(args, kwargs)
        ba = binder.sig.bind(*args, **kwargs)
        ba.apply_defaults()
        swapped = []
        if where is None:                # flat: leaf i is parameter i
            for i, name in enumerate(list(ba.arguments)):
                if i in made:
                    ba.arguments[name] = made[i]
        else:
            for i, n in made.items():
                w = where[i]
                if w[0] == "arg" and type(w) is tuple and len(w) == 2 and w[1] in ba.arguments \
                        and ba.arguments[w[1]] is leaves[i]:
                    ba.arguments[w[1]] = n
                else:                    # an item of a list or dict (Binder.leaf_places)
                    holder, k = w
                    holder[k] = n
                    swapped.append((holder, k, leaves[i], n))
        return numbers, ba.args, ba.kwargs, swapped

    def settle(self, numbers, positions, placed=(), late=False):
        """After the trace (places restored): whether its path may be cached; positions
        and places whose value it took become static. Every Number is frozen. `late`: the
        path runs user code after the trace (a custom Function's backward, traced when the
        backward program is built), which would read the places' plain floats."""
        escaped = numbers.escaped()
        numbers.freeze()
        if escaped or numbers.unsafe or (late and placed):
            self._make_static(positions, placed)
            if taken_from_tensors(numbers):
                self.items = False
            return False
        self._make_static(numbers.exact, placed, exact=True)
        return True

    def asks_type(self, numbers):
        """The user code a trace ran names `type`: no float becomes dynamic from now on,
        and a trace that passed Numbers is not cached."""
        self.typed = True
        if numbers is not None:
            numbers.unsafe = True

    def failed(self, numbers, positions, placed=()):
        """The trace raised: its Numbers are frozen, its positions and places static, and
        those it stored before raising (a history list, a dict keyed by the float) are put
        back as the plain floats eager stored."""
        numbers.escaped()
        numbers.freeze()
        self._make_static(positions, placed)
        if taken_from_tensors(numbers):  # (the error may be a stand-in's: C code taking
            self.items = False           # only a real float, `json.dumps(loss.item())`)

    def _make_static(self, positions, placed=(), exact=False):
        """Positions (and places: all of `placed`, or with `exact` those among the roots
        in `positions`) keyed by value from now on."""
        ints = {i for i in positions if type(i) is int}
        self.static.update(ints)
        self.dynamic.difference_update(ints)
        for holder, key, *_ in placed:
            k = (id(holder), key)
            if not exact or ("place",) + k in positions:
                self.static_places[k] = (holder, key)
                self.places.pop(k, None)

    def valued(self, key, leaves):
        """`key` with the static positions among its dynamic parts keyed by value again."""
        from .binding import scalar_key
        parts = list(key[0])
        for i, p in enumerate(parts):
            if (p == DYNAMIC or p == DYNAMIC_INT) and i in self.static:
                parts[i] = ("S", scalar_key(leaves[i]))
        return (tuple(parts),) + key[1:]


# names of code a stand-in cannot pass through as the float would: `type(v)`, and C code
# taking only a real float (`json.dumps`, `Decimal(v)`, `struct.pack`, `float.hex(v)`)
_REAL_FLOAT_ONLY = frozenset(("type", "json", "dumps", "dump", "Decimal", "struct", "hex",
                              "statistics", "timedelta", "deque"))
REAL_NUMBER_ONLY = _REAL_FLOAT_ONLY      # names of code where no number is read per call


def compares_number_identity(codes):
    """Whether any of `codes` compares something with a number literal by identity
    (`self.step is 0`: True eagerly for CPython's small ints, never for a stand-in)."""
    stack = list(codes)
    while stack:
        code = stack.pop()
        stack.extend(c for c in code.co_consts if isinstance(c, types.CodeType))
        prev = None
        for ins in dis.get_instructions(code):
            if ins.opname == "IS_OP" and prev is not None and prev.opname == "LOAD_CONST" \
                    and type(prev.argval) in (int, float):
                return True
            prev = ins
    return False


def taken_from_tensors(numbers):
    """Whether any of `numbers` came from a tensor's `.item()` (Note [Numbers taken from
    tensors])."""
    return any(type(r) is tuple and r[0] == "item" for n in numbers.made for r in n._roots)


def _holds(g):
    try:
        return g.holds()
    except (ValueError, IndexError, KeyError, TypeError):
        return False


def number_kind(v):
    """"f" for a float, "i" for a plain int that can be read per call, None otherwise."""
    t = type(v)
    if t is float:
        return "f"
    if t is int and -_INT_LIMIT <= v <= _INT_LIMIT:
        return "i"
    return None


def number_place(g):
    """A value guard on a number (a float, or an int: not a bool) in a dict or a list that
    holds a number of the same kind now."""
    if g.mode != "eq" or not isinstance(g.holder, (dict, list)):
        return False
    kind = number_kind(g.expected)
    if kind is None:
        return False
    try:
        return number_kind(g.current()) == kind
    except (ValueError, IndexError, KeyError, TypeError):
        return False
