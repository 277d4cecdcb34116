"""Check mode: every call runs eagerly and compiled, and any difference raises.

`tg.compile(fn, check=True)` (or `TRACEGRAD_CHECK=1` in the environment when `compile` is
called) turns a silent divergence between the compiled program and eager execution into a
`CompileMismatchError` naming the first difference and the guards of the path that ran.

Note [Check mode]
`checked_call(cf, args, kwargs)`:
1. collects the tensors a call can touch: the tensor leaves of the arguments (through lists,
   tuples, dicts, modules' parameters and buffers, and plain objects' attributes) and the
   tensors the state scan finds (closures, globals, `self`, module state);
2. snapshots each one's array, contents, version, `requires_grad`, `grad_fn` and `.grad`
   (object and contents), tracegrad's random generators (the default one, and any found in
   the arguments, closure cells or globals the function names), the Python values at the
   places the state scan guards (a counter `self.calls += 1` must count once), the entries
   of the lists, dicts and sets reachable from the arguments (`batch["n"] += 1` into a
   caller's dict must happen once) and of the containers the scan guards by length (an
   optimizer's `state`: buffers the eager run creates are gone again for the compiled
   run), and the attributes of objects whose bound
   methods the function holds (`after = [sched.step]`);
3. runs `cf.fn` eagerly and records its outputs, the gradients of the sum of its floating
   outputs that require grad w.r.t. every collected tensor that requires grad
   (`autograd.grad(..., retain_graph=True)`, so the graph stays usable), and the state of
   every collected tensor after the call; then restores the snapshot;
4. runs the compiled call, records the same, and compares in order: raised exception (its
   PyTorch builtin type; an error the compiled call raises at compile time where eager's
   backward raises the same type is a match, as API.md promises such errors early),
   outputs (structure, shape, dtype, requires_grad, is_leaf, identity with an input, values),
   gradients, then each tensor's contents, version, requires_grad and `.grad`.
Floating values (arrays, and Python floats such as a returned `loss.item()`) compare with
rtol=1e-5, atol=1e-6 (rtol=1e-4, atol=1e-5 on the JAX backend; NaN equals NaN): the compiled
program may reorder or fuse float arithmetic; everything else compares exactly. On a match the
compiled results are returned (state as the compiled call left it). On a mismatch the snapshot is
restored (the call leaves no effect) and the error is raised.

The user's hooks on the collected leaves are muted during the comparison's backward; hooks
registered inside the function on intermediate tensors run there too. A call that advances an
iterator from outside the function (`next(batches)`) is not checked: its eager run is the
result, with a warning (an iterator cannot be rewound). Caveats: other Python side effects of
the function (prints, warnings, appends to objects' lists) happen twice; objects reached only
through deeper state than the scan walks are neither restored nor compared; concurrent checked calls
on shared state (threads) may see each other's snapshots: check mode is a debugging aid.
Inside another function's trace a checked function runs inline, as any compiled one does.
"""
import collections
import contextlib
import dataclasses
import inspect
import threading

import numpy as np

from .._errors import CompileMismatchError, user_stacklevel
from .._tensor import Tensor
from .state_kinds import probe

RTOL, ATOL = 1e-5, 1e-6
# XLA reorders and fuses float32 sums more freely: a gradient that cancels to about zero
# (a bias before BatchNorm) differs from eager's by a few ulps of the terms it sums, ~1e-6
JAX_RTOL, JAX_ATOL = 1e-4, 1e-5
_MAX_OBJECT_DEPTH = 4
_local = threading.local()


def _in_check():
    """True while a checked call runs its compiled half (the real call path)."""
    return getattr(_local, "depth", 0) > 0


@contextlib.contextmanager
def _inside():
    _local.depth = getattr(_local, "depth", 0) + 1
    try:
        yield
    finally:
        _local.depth -= 1


def checked_call(cf, args, kwargs):
    """Run `cf` eagerly and compiled on the same state; raise on any difference."""
    from .._dispatch import trace_hook
    if trace_hook.get() is not None:     # inside another function's trace: the call runs
        with _inside():                  # inline (recorded once), nothing to compare
            return cf(*args, **kwargs)
    from ..ops.generator import _entropy_replay
    from .state_iterators import advanced
    tensors, places, gens, owners, iterators = _involved(cf, args, kwargs)
    snap = _Snapshot(tensors, places, gens, owners, _argument_containers(args, kwargs))
    with _entropy_replay() as seeds:      # Note [Fresh entropy in check mode] (ops/generator.py)
        eager = _record(lambda: cf.fn(*args, **kwargs), tensors)
    moved = advanced(iterators)
    if moved is not None:
        # an iterator from outside cannot be put back: a second run would take the next
        # items. The eager run stands as the call's result (Note [Check mode])
        _warn_unchecked(cf, f"it advances {moved}, a Python iterator from outside the "
                        "function, which check mode cannot rewind for a second run")
        if eager.error is not None:
            raise eager.error
        return eager.result
    snap.restore()
    eager_calls = cf.stats.eager_calls
    with _inside(), seeds.replaying():
        compiled = _record(lambda: cf(*args, **kwargs), tensors)
    tol = (JAX_RTOL, JAX_ATOL) if cf.backend == "jax" else (RTOL, ATOL)
    diff = _first_difference(eager, compiled, tol)
    if diff is not None:
        snap.restore()
        ran_eagerly = cf.stats.eager_calls != eager_calls
        raise CompileMismatchError(_message(cf, diff, ran_eagerly)) from (
            compiled.error or eager.error)
    if compiled.error is not None:
        raise compiled.error
    return compiled.result


# -- what a call can touch --

def _involved(cf, args, kwargs):
    """([(name, tensor)] without repeats: argument leaves, then state the scan finds;
    the scan's guarded places of Python state; random generators the call may draw from)."""
    from ..ops.generator import Generator, default_generator
    found, seen, gens = [], set(), {id(default_generator): default_generator}

    def add(name, t):
        if isinstance(t, Generator):
            gens[id(t)] = t
        elif id(t) not in seen:
            seen.add(id(t))
            found.append((name, t))

    module = getattr(cf, "module", None)
    names = _param_names(cf.fn if module is None else module.forward, len(args))
    for i, a in enumerate(args):
        _walk(a, names[i], add, set(), 0)
    for k, v in kwargs.items():
        _walk(v, f"argument '{k}'", add, set(), 0)
    from .state import scan
    objects = [(f"argument {i}", a) for i, a in enumerate(list(args) + list(kwargs.values()))
               if not isinstance(a, (Tensor, bool, int, float, str, type(None)))]
    scanned = scan(module if module is not None else cf.fn, objects)
    bindings, places = scanned.bindings, scanned.guards
    for gs in bindings.values():
        add(gs[0].where, gs[0].expected)
    if module is not None:
        for n, t in list(module.named_parameters()) + list(module.named_buffers()):
            add(n, t)
    values = _reachable(getattr(cf.fn, "__func__", cf.fn))
    for name, v in values:
        if isinstance(v, Generator):
            add(name, v)
    return (found, places, list(gens.values()), _method_owners(v for _, v in values),
            scanned.iterators)


def _warn_unchecked(cf, why):
    """Say once per compiled function that check mode ran a call eagerly only."""
    import warnings
    if getattr(cf, "_check_warned", False):
        return
    cf._check_warned = True
    warnings.warn(f"tracegrad.compile(check=True): '{cf.name}' was not checked: {why}; "
                  "such calls run eagerly only.", UserWarning, stacklevel=user_stacklevel())


def _reachable(fn):
    """[(name, value)]: `fn`'s closure cells and the globals its code names."""
    out = []
    for cell in getattr(fn, "__closure__", None) or ():
        try:
            out.append(("closure", cell.cell_contents))
        except ValueError:
            pass
    g, code = getattr(fn, "__globals__", {}), getattr(fn, "__code__", None)
    out += [(nm, g[nm]) for nm in (code.co_names if code is not None else ()) if nm in g]
    return out


def _method_owners(values):
    """Objects whose bound methods the function can call (`after = [sched.step]`), among
    `values` and one level into their containers: the state scan guards such a callable by
    identity only, so their attributes are snapshotted here (a scheduler stepped by the
    eager run must not be stepped twice)."""
    import types
    out, seen = [], set()
    for v in values:
        items = list(v.values()) if isinstance(v, dict) else (
            list(v) if isinstance(v, (list, tuple)) else [v])
        for m in items:
            owner = getattr(m, "__self__", None) if isinstance(m, types.MethodType) else None
            if (owner is not None and id(owner) not in seen and hasattr(owner, "__dict__")
                    and not callable(probe(owner, "named_parameters"))):
                seen.add(id(owner))
                out.append(owner)
    return out


def _walk(x, name, add, seen, depth):
    from ..ops.generator import Generator
    if isinstance(x, (Tensor, Generator)):
        add(name, x)
        return
    if id(x) in seen or depth > _MAX_OBJECT_DEPTH or isinstance(x, (str, bytes, type)):
        return
    seen.add(id(x))
    if isinstance(x, (list, tuple)):
        for i, v in enumerate(x):
            _walk(v, f"{name}[{i}]", add, seen, depth + 1)
    elif isinstance(x, dict):
        for k, v in x.items():
            _walk(v, f"{name}[{k!r}]", add, seen, depth + 1)
    elif callable(probe(x, "named_parameters")) and callable(probe(x, "named_buffers")):
        for n, t in list(x.named_parameters()) + list(x.named_buffers()):
            add(f"{name}.{n}", t)
    elif hasattr(x, "__dict__") and not callable(x) and not inspect.ismodule(x):
        for k, v in list(vars(x).items()):
            _walk(v, f"{name}.{k}", add, seen, depth + 1)


def _argument_containers(args, kwargs):
    """The lists, dicts and sets reachable from the arguments (as `_walk` walks them): the
    eager run's assignments into them are undone before the compiled run."""
    found, seen = [], set()

    def walk(x, depth):
        if (id(x) in seen or depth > _MAX_OBJECT_DEPTH or isinstance(x, Tensor)
                or isinstance(x, (str, bytes, type))):
            return
        seen.add(id(x))
        if isinstance(x, (list, dict, set, collections.deque)):
            found.append(x)
        if isinstance(x, (list, tuple, set, collections.deque)):
            for v in list(x):
                walk(v, depth + 1)
        elif isinstance(x, dict):
            for v in list(x.values()):
                walk(v, depth + 1)
    for a in list(args) + list(kwargs.values()):
        walk(a, 0)
    return found


def _param_names(fn, n):
    try:
        params = [p for p in inspect.signature(fn).parameters.values()
                  if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)]
    except (TypeError, ValueError):
        params = []
    names = [f"argument '{p.name}'" for p in params]
    return names + [f"args[{i}]" for i in range(len(names), n)]


# -- snapshot and restore --

class _Snapshot:
    def __init__(self, tensors, places=(), gens=(), owners=(), containers=()):
        self.owners = [(o, dict(vars(o))) for o in owners]
        self.items = [(t, _tensor_state(t)) for _, t in tensors]
        # Python state the scan guards (`self.calls`, a global `lr`): a function changing it
        # must not see the eager run's change in the compiled run
        self.places = [(g, g.current()) for g in places
                       if g.holder is not None and g.mode != "len"]
        # containers whose length the scan guards (an optimizer's `state`, a module's hook
        # dicts): their entries, so entries the eager run added are gone for the compiled run
        self.containers = [(g.holder, _shallow(g.holder)) for g in places if g.mode == "len"]
        self.containers += [(c, _shallow(c)) for c in containers]
        self.gens = [(g, g._rng, g._rng.bit_generator.state, g._seed) for g in gens]

    def restore(self):
        for t, (arr, data, version, rg, fn, nr, grad, gdata) in self.items:
            t._data = arr
            if arr.flags.writeable:
                np.copyto(arr, data, casting="unsafe")
            t._vc.v = version
            t._rg, t._grad_fn, t._output_nr = rg, fn, nr
            t._grad = grad
            if grad is not None and gdata is not None and grad._data.flags.writeable:
                np.copyto(grad._data, gdata, casting="unsafe")
        for o, attrs in self.owners:
            d = vars(o)
            d.clear()
            d.update(attrs)
        for h, entries in self.containers:
            _refill(h, entries)
        for g, v in self.places:
            _put(g, v)
        for gen, rng, state, seed in self.gens:
            gen._rng, gen._seed = rng, seed
            rng.bit_generator.state = state


def _shallow(h):
    return list(h.items()) if isinstance(h, dict) else list(h)


def _refill(h, entries):
    """Put container `h`'s entries back as `_shallow` saw them (same objects, same order)."""
    try:
        if isinstance(h, dict):
            now = list(h.items())     # compared by identity: `==` of tensor values raises
            if len(now) != len(entries) or any(
                    a[0] is not b[0] or a[1] is not b[1] for a, b in zip(now, entries)):
                h.clear()
                h.update(entries)
        elif isinstance(h, list):
            h[:] = entries
        elif isinstance(h, set):
            h.clear()
            h.update(entries)
        elif isinstance(h, collections.deque):
            h.clear()
            h.extend(entries)
    except (TypeError, AttributeError):
        pass                       # an immutable container (tuple): nothing to put back


def _put(guard, v):
    from .state_guards import _MISSING
    h, k = guard.holder, guard.key
    try:
        if k is None:
            if v is not _MISSING:
                h.cell_contents = v
        elif v is _MISSING:
            if isinstance(h, dict):
                h.pop(k, None)
        elif guard.current() is not v:
            h[k] = v
    except (TypeError, IndexError, AttributeError, ValueError):
        pass                       # an immutable or shrunk holder: nothing to put back


def _tensor_state(t):
    g = t._grad
    return (t._data, np.array(t._data, copy=True), t._vc.v, t._rg, t._grad_fn, t._output_nr,
            g, None if g is None else np.array(g._data, copy=True))


# -- one run, recorded --

@dataclasses.dataclass
class _Run:
    result: object = None
    error: BaseException = None
    outputs: list = dataclasses.field(default_factory=list)    # [(where, facts)]
    grads: list = dataclasses.field(default_factory=list)      # [(where, array or None)]
    state: list = dataclasses.field(default_factory=list)      # [(where, facts)]


def _record(call, tensors):
    run = _Run()
    versions = {id(t): t._vc.v for _, t in tensors}
    try:
        run.result = call()
    except Exception as e:           # compared: both runs must raise the same type
        run.error = e
        return run
    index = {id(t): name for name, t in tensors}
    flat = []
    _flatten_out(run.result, "output", flat)
    for where, o in flat:
        run.outputs.append((where, _out_facts(o, index)))
    run.grads = _grads(flat, tensors)
    for name, t in tensors:
        g = t._grad
        run.state.append((name, {
            "contents": np.array(t._data, copy=True),
            "version change": t._vc.v - versions[id(t)],
            "requires_grad": t._rg,
            ".grad": None if g is None else np.array(g._data, copy=True)}))
    return run


def _flatten_out(x, where, out, depth=0):
    """[(where, leaf)] of an output: tensors and other values, with the type of every
    container or object on the way (so a different structure is a difference)."""
    if isinstance(x, Tensor):
        out.append((where, x))
    elif isinstance(x, (list, tuple)) and not hasattr(x, "_fields"):
        out.append((where + " (type)", type(x)))
        for i, v in enumerate(x):
            _flatten_out(v, f"{where}[{i}]", out, depth + 1)
    elif isinstance(x, tuple):                          # namedtuple
        out.append((where + " (type)", type(x)))
        for k in x._fields:
            _flatten_out(getattr(x, k), f"{where}.{k}", out, depth + 1)
    elif isinstance(x, dict):
        out.append((where + " (keys)", list(x.keys())))
        for k, v in x.items():
            _flatten_out(v, f"{where}[{k!r}]", out, depth + 1)
    elif dataclasses.is_dataclass(x) and not isinstance(x, type):
        out.append((where + " (type)", type(x)))
        for f in dataclasses.fields(x):
            _flatten_out(getattr(x, f.name), f"{where}.{f.name}", out, depth + 1)
    elif isinstance(x, np.ndarray):
        out.append((where, np.array(x, copy=True)))
    elif (hasattr(x, "__dict__") and not callable(x) and not inspect.ismodule(x)
          and depth < _MAX_OBJECT_DEPTH):
        # another object: the same type with equal attributes (eager's and the compiled
        # call's are never the same object)
        out.append((where + " (type)", type(x)))
        for k, v in list(vars(x).items()):
            _flatten_out(v, f"{where}.{k}", out, depth + 1)
    else:
        out.append((where, x))


def _out_facts(o, index):
    if not isinstance(o, Tensor):
        return {"value": o}
    return {"shape": tuple(o.shape), "dtype": o.dtype, "requires_grad": o.requires_grad,
            "is_leaf": o.is_leaf, "is an input": index.get(id(o)),
            "values": np.array(o._data, copy=True)}


def _grads(flat, tensors):
    from .. import autograd
    outs = [o for _, o in flat if isinstance(o, Tensor) and o.requires_grad
            and o.is_floating_point()]
    wrt = [(n, t) for n, t in tensors if t.requires_grad]
    if not outs or not wrt:
        return []
    muted = _mute_leaf_hooks(t for _, t in tensors)
    try:
        total = outs[0].sum()
        for o in outs[1:]:
            total = total + o.sum()
        gs = autograd.grad(total, [t for _, t in wrt], retain_graph=True, allow_unused=True)
    except Exception as e:
        # which check fires first may differ (a freed graph, a stale saved value): compare
        # only the PyTorch builtin type
        return [("backward", f"raised {_builtin(type(e)).__name__}")]
    finally:
        for lst, hooks in muted:
            lst[:] = hooks
    return [(f"d(sum of outputs)/d({n})", None if g is None else np.array(g._data, copy=True))
            for (n, _), g in zip(wrt, gs)]


def _mute_leaf_hooks(tensors):
    """Empty the hook lists of the collected leaves for the comparison's own backward (the
    user's hooks on them run for the user's backward only); returns what to put back."""
    muted = []
    for t in tensors:
        lst = t.__dict__.get("_leaf_hooks")
        if lst:
            muted.append((lst, list(lst)))
            lst[:] = []
    return muted


# -- comparison --

def _first_difference(eager, compiled, tol=(RTOL, ATOL)):
    """(where, eager value, compiled value) of the first difference, or None."""
    if compiled.error is not None and eager.error is None and _backward_raised(
            eager, compiled.error):
        return None          # raised at compile time where eager raises in backward
    if (eager.error is None) != (compiled.error is None) or (
            eager.error is not None and
            _builtin(type(eager.error)) is not _builtin(type(compiled.error))):
        return ("the call's outcome", _outcome(eager), _outcome(compiled))
    if eager.error is not None:
        return None
    for a, b in ((eager.outputs, compiled.outputs), (eager.grads, compiled.grads),
                 (eager.state, compiled.state)):
        if [w for w, _ in a] != [w for w, _ in b]:
            return ("the structure of the results", [w for w, _ in a], [w for w, _ in b])
        for (where, x), (_, y) in zip(a, b):
            d = _differs(x, y, tol)
            if d is not None:
                what, ex, got = d
                return (f"{where} ({what})" if what else where, ex, got)
    return None


def _differs(x, y, tol=(RTOL, ATOL)):
    if isinstance(x, dict) and isinstance(y, dict):
        for k in x:
            d = _differs(x[k], y.get(k), tol)
            if d is not None:
                return (k if not d[0] else f"{k} {d[0]}", d[1], d[2])
        return None
    if isinstance(x, np.ndarray) or isinstance(y, np.ndarray):
        if not (isinstance(x, np.ndarray) and isinstance(y, np.ndarray)):
            return ("", _short(x), _short(y))
        if x.shape != y.shape or x.dtype != y.dtype:
            return ("", f"{x.dtype}{list(x.shape)}", f"{y.dtype}{list(y.shape)}")
        if x.dtype.kind in "fc":
            ok = np.allclose(y, x, rtol=tol[0], atol=tol[1], equal_nan=True)
        else:
            ok = np.array_equal(x, y)
        return None if ok else ("", _short(x), _short(y))
    if isinstance(x, Tensor) or isinstance(y, Tensor):
        return ("", _short(x), _short(y))
    if isinstance(x, float) and isinstance(y, float) and x != x and y != y:
        return None
    if type(x) is float and type(y) is float:   # a returned `.item()` is computed by the
        # program (Note [Numbers taken from tensors]): compared as floating values are
        return None if abs(y - x) <= tol[1] + tol[0] * abs(x) or x == y else (
            "", _short(x), _short(y))
    try:
        same = type(x) is type(y) and bool(x == y)
    except Exception:                # an `==` that cannot answer: compare identity
        same = x is y
    return None if same else ("", _short(x), _short(y))


def _builtin(cls):
    """The builtin exception class an error stands for (tracegrad errors subclass the one
    PyTorch raises: `InplaceError` -> RuntimeError)."""
    if not cls.__module__.startswith("tracegrad"):
        return cls
    return next(c for c in cls.__mro__ if c.__module__ == "builtins")


def _backward_raised(eager, error):
    return any(w == "backward" and g == f"raised {_builtin(type(error)).__name__}"
               for w, g in eager.grads)


def _outcome(run):
    return "returned" if run.error is None else f"raised {type(run.error).__name__}: {run.error}"


def _short(x):
    if isinstance(x, np.ndarray):
        r = np.array2string(x, threshold=6, precision=6)
    else:
        r = repr(x)
    r = " ".join(r.split())
    return r if len(r) <= 120 else r[:117] + "..."


def _message(cf, diff, ran_eagerly):
    where, want, got = diff
    lines = [f"tracegrad.compile(check=True): '{cf.name}' compiled differs from eager at "
             f"{where}:", f"  eager:    {want}", f"  compiled: {got}"]
    if ran_eagerly:
        lines.append("  (the compiled call ran eagerly: the difference comes from state the "
                     "two runs did not share)")
    lines += _path_lines(cf)
    lines.append("  Fix: pass the differing value as an argument, or report a compiler bug "
                 "with this message.")
    return "\n".join(lines)


def _path_lines(cf, limit=8):
    """The guards of the path the compiled call last ran (short)."""
    try:
        entry = cf.entries.get(cf._last_key)
        path = entry.last if entry is not None else None
        if path is None:
            return []
        from .explain import guard_lines
        g = guard_lines(path, with_source=False)
    except Exception:              # introspection must never hide the mismatch itself
        return []
    if not g:
        return ["  path guards: none (besides the entry key: shapes, dtypes, flags)"]
    more = [f"    ... and {len(g) - limit} more (see .explain())"] if len(g) > limit else []
    return ["  path guards:"] + ["    " + s for s in g[:limit]] + more
