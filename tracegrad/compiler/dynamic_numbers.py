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
code is known by then), and a trace with Numbers that ran such code is not cached.

Only flat calls take part (every argument a direct parameter: no containers), so a
position is the binder's leaf index, the same in the key and in the call.
"""
import threading

from ..tracing.numbers import Numbers

DYNAMIC = ("S", ("f", "read per call"))   # a dynamic float's part of the entry key


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

    def key(self, key, leaves, struct):
        """`key` with the dynamic float positions of this call typed, not valued; the
        holder gets the call's leaves. `key` itself when there are none."""
        if struct is not None or not self.dynamic:
            return key
        parts = list(key[0])
        hit = False
        for i in self.dynamic:
            if i < len(leaves) and type(leaves[i]) is float:
                parts[i] = DYNAMIC
                hit = True
        if not hit:
            return key
        self.holder.set(leaves)
        return (tuple(parts),) + key[1:]

    def widen(self, last, key, leaves, struct, names):
        """(key, reason) when `key` differs from the last call's key `last` only in the
        values of float arguments: those become dynamic. None otherwise."""
        if struct is not None or last is None or len(last) != len(key) or \
                last[1:] != key[1:] or self.typed:
            return None
        old, new = last[0], key[0]
        if len(old) != len(new):
            return None
        changed = []
        for i, (a, b) in enumerate(zip(old, new)):
            if a == b:
                continue
            if (a[0] != "S" or b[0] != "S" or a[1][0] != "f" or b[1][0] != "f"
                    or i in self.static or type(leaves[i]) is not float):
                return None
            changed.append(i)
        if not changed:
            return None
        self.dynamic.update(changed)
        said = [f"'{names[i]}'" if i < len(names) else f"{i}" for i in changed]
        said = (f"float argument {said[0]} changed value" if len(said) == 1 else
                f"float arguments {', '.join(said[:-1])} and {said[-1]} changed value")
        return self.key(key, leaves, struct), (
            f"{said}: read per call from now on (no re-trace for new values)")

    def positions(self, key):
        """The leaf positions `key` has typed as dynamic floats."""
        return [i for i, p in enumerate(key[0]) if p == DYNAMIC]

    def substitute(self, tracer, binder, args, kwargs, leaves, positions, names):
        """(numbers, args, kwargs) with a `Number` in place of each float at `positions`."""
        numbers = tracer.numbers = Numbers(tracer)
        made = {}
        for i in positions:
            name = names[i] if i < len(names) else f"a{i}"
            t = tracer.scalar_source(self.holder, i, leaves[i], name=name)
            made[i] = numbers.root(t, leaves[i], i)
        if not kwargs and len(args) == len(leaves):
            return numbers, tuple(made.get(i, a) for i, a in enumerate(args)), {}
        ba = binder.sig.bind(*args, **kwargs)
        ba.apply_defaults()
        for i, name in enumerate(list(ba.arguments)):
            if i in made:
                ba.arguments[name] = made[i]
        return numbers, ba.args, ba.kwargs

    def settle(self, numbers, positions):
        """After the trace: whether its path may be cached; positions whose value it took
        become static. Every Number is frozen to its value."""
        escaped = numbers.escaped()
        numbers.freeze()
        if escaped or numbers.unsafe:
            self._make_static(positions)
            return False
        self._make_static(numbers.exact)
        return True

    def asks_type(self, numbers):
        """The user code a trace ran names `type`: no float becomes dynamic from now on,
        and a trace that passed Numbers is not cached."""
        self.typed = True
        if numbers is not None:
            numbers.unsafe = True

    def failed(self, numbers, positions):
        """The trace raised: its Numbers are frozen and its positions static."""
        numbers.freeze()
        self._make_static(positions)

    def _make_static(self, positions):
        self.static.update(positions)
        self.dynamic.difference_update(positions)

    def valued(self, key, leaves):
        """`key` with the static positions among its dynamic parts keyed by value again."""
        from .binding import scalar_key
        parts = list(key[0])
        for i, p in enumerate(parts):
            if p == DYNAMIC and i in self.static:
                parts[i] = ("S", scalar_key(leaves[i]))
        return (tuple(parts),) + key[1:]
