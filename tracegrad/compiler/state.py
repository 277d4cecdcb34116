"""The Python state a compiled path depends on besides its arguments (Note [Captured state]).

Note [Captured state]
A traced function reads more than its arguments: tensors and Python values reached through
closure cells, globals, module attributes, and containers or plain objects held there.
Eager execution reads their current values on every call; a compiled path read them once,
while tracing. So before tracing, `scan` walks what the function can reach:
- its closure cells and the globals its code names (nested functions and lambdas included);
- one level into lists, tuples and dicts (up to MAX_ITEMS entries) and into the attributes
  of plain objects found there;
- user functions found there (up to MAX_DEPTH calls deep), scanned the same way;
- for an `nn.Module` (compiled, or reached): every submodule, parameter, buffer and attribute.
It records, as `StateGuard`s checked on every cache hit:
- *bindings*: where each tensor was found; a path keeps those of the tensors it captured and
  checks that each place still holds that very tensor (`params[0] = new` must re-trace);
- *identity guards* on every container, object, function and submodule walked (rebinding
  `cfg = {...}` or `model.fc = Linear(...)` must re-trace, not read the old one);
- *value guards* on every Python scalar (bool, int, float, complex, str, None): a changed
  `lr = 0.01` re-traces, as a changed scalar argument does.
A failing guard re-traces with a reason naming the place ("global 'scale' changed: 2.0 ->
5.0"). Reads beyond this reach (deeper nesting, values behind calls) are not guarded: pass
such values as arguments. A function that changes scalar state it reads (a call counter)
re-traces on each call until `cache_limit`, then runs eagerly, which is what eager gives.
"""
import types

from .._tensor import Tensor

MAX_ITEMS = 64          # larger containers are not walked
MAX_DEPTH = 3           # user functions reached through user functions
_SCALARS = (bool, int, float, complex, str, type(None))
_LIBRARIES = ("tracegrad", "numpy", "torch", "builtins", "functools", "typing")
_MISSING = object()


class StateGuard:
    """`holder[key]` (a dict, list, tuple or closure cell with key None) must still hold
    `expected`: the same object (`same`), or an equal value of the same type."""

    __slots__ = ("holder", "key", "expected", "same", "where", "current")

    def __init__(self, holder, key, expected, same, where):
        self.holder, self.key, self.expected = holder, key, expected
        self.same, self.where = same, where
        self.current = _getter(holder, key)     # () -> what the place holds now

    def reason(self):
        cur = self.current()
        now = "deleted" if cur is _MISSING else _short(cur)
        if self.same:
            return f"{self.where} was rebound to another object ({now})"
        return f"{self.where} changed: {_short(self.expected)} -> {now}"

    def describe(self):
        return f"{self.where} {'is' if self.same else '=='} {_short(self.expected)}"


def checker(guards):
    """A generated `() -> bool`: True while every guard holds (the per-call check).

    One line per guard, its holder and expected value bound as globals: a third of the
    cost of calling each guard's getter. On False, `first_failing` says which and why."""
    if not guards:
        return lambda: True
    env, lines = {"_M": _MISSING}, ["def check():", "    try:"]
    for i, g in enumerate(guards):
        env[f"h{i}"], env[f"k{i}"], env[f"e{i}"] = g.holder, g.key, g.expected
        if g.key is None:
            get = f"h{i}.cell_contents"
        elif type(g.holder) is dict:
            get = f"h{i}.get(k{i}, _M)"
        else:
            get = f"h{i}[k{i}]"
        test = f"v is not e{i}" if g.same else (
            f"v is not e{i} and (type(v) is not type(e{i}) or v != e{i})")
        lines += [f"        v = {get}", f"        if {test}: return False"]
    lines += ["    except (ValueError, IndexError):", "        return False", "    return True"]
    exec(compile("\n".join(lines), "<tracegrad state guards>", "exec"), env)
    return env["check"]


def first_failing(guards):
    """The first guard that no longer holds, or None."""
    for g in guards:
        cur, exp = g.current(), g.expected
        if cur is not exp and (g.same or type(cur) is not type(exp) or cur != exp):
            return g
    return None


def _getter(holder, key):
    if key is None:
        def cell():
            try:
                return holder.cell_contents
            except ValueError:
                return _MISSING
        return cell
    if type(holder) is dict:
        return lambda: holder.get(key, _MISSING)
    return lambda: holder[key] if -len(holder) <= key < len(holder) else _MISSING


def _short(x):
    if isinstance(x, Tensor):
        return f"tensor of shape {tuple(x.shape)}"
    r = repr(x)
    return r if len(r) <= 60 else r[:57] + "..."


def scan(target):
    """(bindings {id(tensor): StateGuard}, guards [StateGuard], names {id(tensor): name})
    for a function, bound method or nn.Module about to be traced (Note [Captured state])."""
    s = _Scanner()
    if _is_module(target):
        s.module(target, type(target).__name__, 0)
        s.function(type(target).forward, 0)
    else:
        s.function(target, 0)
    return s.bindings, s.guards, s.names


class _Scanner:
    def __init__(self):
        self.bindings, self.guards, self.names = {}, [], {}
        self.seen = set()

    def function(self, fn, depth):
        owner = getattr(fn, "__self__", None)
        fn = getattr(fn, "__func__", fn)
        if owner is not None and not isinstance(owner, types.ModuleType):
            self.value_in(None, None, owner, "self", depth)
        code = getattr(fn, "__code__", None)
        if code is None or id(code) in self.seen:
            return
        self.seen.add(id(code))
        for nm, cell in zip(code.co_freevars, fn.__closure__ or ()):
            try:
                v = cell.cell_contents
            except ValueError:
                continue
            self.value_in(cell, None, v, f"closure variable '{nm}'", depth, name=nm)
        g = getattr(fn, "__globals__", {})
        for nm in _names(code):
            if nm in g:
                self.value_in(g, nm, g[nm], f"global '{nm}'", depth, name=nm)

    def value_in(self, holder, key, v, where, depth, name=None, nested=True):
        """Record `v` found at `holder[key]` (no guard when holder is None)."""
        def guard(same):
            if holder is not None:
                self.guards.append(StateGuard(holder, key, v, same, where))
        if isinstance(v, Tensor):
            if holder is not None and id(v) not in self.bindings:
                self.bindings[id(v)] = StateGuard(holder, key, v, True, where)
                if name:
                    self.names.setdefault(id(v), name)
            return
        if isinstance(v, _SCALARS):
            guard(False)
            return
        if isinstance(v, (types.ModuleType, type)) or id(v) in self.seen:
            return
        if _is_module(v):
            guard(True)
            self.seen.add(id(v))
            self.module(v, name or where, depth)
        elif isinstance(v, types.FunctionType) and _is_user(v) and depth < MAX_DEPTH:
            guard(True)
            self.function(v, depth + 1)
        elif not nested:
            return
        elif type(v) in (list, tuple, dict) and len(v) <= MAX_ITEMS:
            guard(True)
            self.seen.add(id(v))
            items = v.items() if type(v) is dict else enumerate(v)
            for k, x in items:
                self.value_in(v if type(v) is not tuple else None, k, x, f"{where}[{k!r}]",
                              depth, nested=False)
        elif _is_plain_object(v):
            guard(True)
            self.seen.add(id(v))
            d = vars(v)
            if len(d) <= MAX_ITEMS:
                for k, x in list(d.items()):
                    if not k.startswith("__"):
                        self.value_in(d, k, x, f"{where}.{k}", depth, nested=False)

    def module(self, m, where, depth):
        """Parameters, buffers and scalar attributes of `m` and of every submodule."""
        d = vars(m)
        for reg in ("_parameters", "_buffers"):
            for k, t in d.get(reg, {}).items():
                if t is not None:
                    self.value_in(d[reg], k, t, f"{where}.{k}", depth, name=_dotted(where, k))
        for k, x in d.items():
            if not k.startswith("_") and k != "training" and isinstance(x, _SCALARS):
                self.value_in(d, k, x, f"{where}.{k}", depth)
        for k, child in d.get("_modules", {}).items():
            if child is not None:
                self.value_in(d["_modules"], k, child, f"{where}.{k}", depth)


def _dotted(where, k):
    """Parameter names as `named_parameters` gives them (`0.weight`, `fc.bias`)."""
    return k if "." not in where else where.split(".", 1)[1] + "." + k


def _names(code):
    """Global names read by `code` and by the code objects nested in it."""
    out = list(code.co_names)
    for c in code.co_consts:
        if isinstance(c, types.CodeType):
            out += _names(c)
    return out


def _is_module(v):
    return callable(getattr(v, "named_parameters", None)) and "_modules" in getattr(
        v, "__dict__", {})


def _is_user(fn):
    return not (fn.__module__ or "builtins").startswith(_LIBRARIES)


def _is_plain_object(v):
    t = type(v)
    return (hasattr(v, "__dict__") and not callable(v)
            and not (t.__module__ or "builtins").startswith(_LIBRARIES))
