"""The entry key: what must match, checked with one dict lookup, before a cached trace is
reused: types, shapes, dtypes, requires_grad, leaf-ness, inference flag and C-contiguity of
tensor arguments, which arguments alias, Python scalar values by type and exact value, the
arguments' structure (Note [Binding by name] in binding.py), grad and inference mode, the
active tracegrad.func transforms (_func_levels.py), the default dtype, module training flags
and parameter identities, and the Python attributes users put on tensor arguments (Note
[Attributes of tensor arguments] in tensor_attrs.py)."""
import numpy as np

from .. import _dtype, _func_levels, _mode
from .._tensor import Tensor
from .._tensor_storage import OWNER_BASES, _root
from .binding import scalar_key
from .state_kinds import probe
from .tensor_attrs import attrs_key

# private names the engine keeps on a leaf tensor, none of them keyed (tensor_attrs.py)
_ENGINE_KEYS = frozenset({"_grad", "_accum"})


def entry_key(leaves, struct=None):
    """(key, tensors, aliased): the hashable entry key, the tensor leaves in order, and
    whether two of them share storage (such calls run eagerly: the key only flags it)."""
    parts, tensors, storages = [], [], []
    for x in leaves:
        if isinstance(x, Tensor):
            tensors.append(x)
            storages.append(storage_id(x))
            d = x._data
            g = x._grad_fn
            # memory order decides what a planned program may do (Note [Layouts]); this is
            # passes.layout.in_c_order, inlined: the key is computed on every call. A
            # non-leaf's gradient hooks: Note [Backward into the graph outside] (tracer.py)
            parts.append(("T", d.shape, d.dtype, x._rg, d.ndim < 2 or d.flags.c_contiguous,
                          True if g is None else bool(g.pre_hooks) and _hooked(g),
                          x._inference, type(x),   # a Parameter is not a Tensor to
                          #                  `isinstance` and `type(x)` in the trace
                          attrs_key(x) if x.__dict__ else None))
        elif isinstance(x, (bool, int, float, str, type(None))):
            parts.append(("S", scalar_key(x)))
        elif isinstance(x, np.ndarray):      # the trace baked its values in: key by value
            parts.append(("A", x.shape, x.dtype.str, x.tobytes()))
        else:                                # by identity (the entry keeps `x` alive)
            parts.append(("O", id(x), _module_flags(x)))
    aliased = len(storages) > 1 and len(set(storages)) < len(storages)
    grad = _mode.grad_enabled()
    levels = _func_levels.active()
    if levels:                           # Note [Functions under transforms] (function.py)
        grad = (grad, levels)
    return ((tuple(parts), grad, _mode.inference_enabled(),
             _dtype.get_default_dtype(), struct), tensors, aliased)


def key_checker(key, args):
    """Note [Checking the last key]
    A cache hit computes the entry key (a tuple per argument: shape, dtype, flags), hashes
    it and looks it up: about 3 us of the tiny training step's per-call work. Most calls
    hit the entry the last call used. For an entry whose key came from arguments passed
    positionally (`args`, the call that made it), each a leaf tensor or an object keyed
    by identity that is not a module (a method's `self`), this generates `check(args) ->
    bool`: True exactly when `entry_key` of those arguments would give `key` again (the
    same per-tensor facts, compared inline; the same objects; no two tensors on one
    storage; the same grad mode, inference mode and default dtype). False sends the call
    down the full path, which keys and looks it up as before. None when the key is not
    of that kind."""
    src = key_source(key, args)
    if src is None:
        return None
    lines, env = src
    code = "\n".join(["def check(args):"] + lines + ["    return True"])
    exec(compile(code, "<tracegrad key check>", "exec"), env)
    return env["check"]


def key_source(key, args, miss="return False"):
    """(body lines, globals) of `key_checker`'s `check(args)` without its final `return
    True` (the body binds `a0, a1, ...` to the arguments), `miss` run where it answers
    False; or None."""
    parts, grad, inference, default_dtype, struct = key[:5]
    if len(key) != 5 or struct is not None or len(parts) != len(args) or any(
            not (p[0] == "T" and isinstance(a, Tensor) and p[5] is True and not p[8]
                 or p[0] == "O" and p[2] is None and p[1] == id(a))
            for p, a in zip(parts, args)):
        return None
    n = len(args)
    env = {"_root": _root, "_OWN": OWNER_BASES, "_ak": attrs_key, "_ge": _mode.grad_enabled,
           "_lv": _func_levels._levels.get,   # `active()`, without its frame
           "_ie": _mode.inference_enabled, "_dd": _dtype.get_default_dtype, "_G": grad,
           "_I": inference, "_DD": default_dtype, "_ga": getattr,
           "_dds": _dtype._state, "_f32": _dtype.float32, "_EK": _ENGINE_KEYS}
    names = [f"a{i}" for i in range(n)]
    lines = [f"    if len(args) != {n}: {miss}"]
    if n:
        lines.append(f"    {', '.join(names)}{',' if n == 1 else ''} = args")
    tensors = []
    n_tensors = sum(p[0] == "T" for p in parts)
    for i, (p, a) in enumerate(zip(parts, args)):
        if p[0] == "O":                  # an object keyed by identity (`self` of a method;
            env[f"X{i}"] = a             # the entry keeps it alive), not a module
            lines.append(f"    if a{i} is not X{i}: {miss}")
            continue
        tensors.append(f"a{i}")
        _, shape, dtype, rg, c_ok, leaf, inf, _type, _attrs = p
        env.update({f"T{i}": type(a), f"S{i}": shape, f"D{i}": dtype, f"R{i}": rg,
                    f"N{i}": inf})
        cond = (f"d.shape != S{i} or d.dtype is not D{i} or "
                f"a{i}._rg is not R{i} or a{i}._grad_fn is not None or "
                f"a{i}._inference is not N{i}")
        if len(shape) >= 2:              # entry_key's layout bit (1-D and 0-D: always True)
            # (cheaper than comparing `d.strides`: numpy builds that tuple on each read)
            cond += f" or d.flags.c_contiguous is not {bool(c_ok)}"
        # the type first: the argument may now be None or any object without `_data`
        lines += [f"    if type(a{i}) is not T{i}: {miss}",
                  f"    d = a{i}._data", f"    if {cond}: {miss}"]
        if n_tensors > 1:                # the owner's id for the aliasing check below
            lines.append(f"    qa{i} = id(d if type(d.base) in _OWN else _root(d))")
        # still no Python attributes of its own (Note [Attributes of tensor arguments]);
        # the engine's private ones are in most leaves' __dict__: a leaf after backward
        # holds `_grad` and `_accum` alone, answered by a set comparison without a call
        lines.append(f"    if a{i}.__dict__ and not a{i}.__dict__.keys() <= _EK and _ak(a{i}): "
                     f"{miss}")
    # (_dtype.get_default_dtype(), its one line inlined)
    lines.append(f"    if _ge() is not _G or _ie() is not _I or "
                 f"_ga(_dds, 'default', _f32) is not _DD or _lv(): {miss}")
    if len(tensors) > 1:                 # entry_key's `aliased` is False for this key
        # (an array owning its memory, the usual argument, needs no _root call; `q{x}`,
        # the owner's id, is reused by a fused runner: compiler/fused_entry.py)
        owners = ', '.join(f'q{x}' for x in tensors)
        lines.append(f"    if len({{{owners}}}) != {len(tensors)}: {miss}")
    return lines, env


def _hooked(node):
    """Whether autograd node `node` has gradient hooks (a removed hook leaves an empty list)."""
    return "with gradient hooks" if any(node.pre_hooks.values()) else False


def storage_id(t):
    """Identity of the memory under tensor `t`: its root numpy array (`.data` and views
    have version counters of their own, but share this)."""
    return id(_root(t._data))


def _module_flags(x):
    modules = probe(x, "modules")        # Note [Probing user objects] in state_kinds.py
    if modules is None or not callable(modules):
        return None
    try:
        return tuple(m.training for m in modules())
    except TypeError:
        return None


def describe_difference(old, new, names=()):
    """Human-readable reason two entry keys differ (for retrace logs); `names`: the
    function's parameter names, used when the arguments are flat (leaf i is parameter i)."""
    if len(old) > 5 and len(new) > 5 and old[5] != new[5]:
        return f"module training flags changed ({old[5]} -> {new[5]})"
    if old[3] != new[3]:
        return f"default dtype changed ({old[3]} -> {new[3]})"
    if old[4] != new[4]:
        return "the arguments' structure changed (keyword names, containers or dict keys)"
    (op, og, oi), (np_, ng, ni) = old[:3], new[:3]
    oa, na = (ps[-1][1] if ps and ps[-1][0] == "aliases" else None for ps in (op, np_))
    if oa != na:
        return f"which tensor arguments share memory changed ({oa} -> {na})"
    op, np_ = (ps[:-1] if a is not None else ps for ps, a in ((op, oa), (np_, na)))
    if og != ng:
        ol, nl = (g[1] if isinstance(g, tuple) else () for g in (og, ng))
        if ol != nl:
            return f"active tracegrad.func transforms changed ({ol} -> {nl})"
        return f"grad mode changed ({og} -> {ng})"
    if oi != ni:
        return f"inference mode changed ({oi} -> {ni})"
    if len(op) != len(np_):
        return f"number of arguments changed ({len(op)} -> {len(np_)})"
    for i, (a, b) in enumerate(zip(op, np_)):
        if a != b:
            if new[4] is None and i < len(names):
                i = f"{i} ('{names[i]}')"
            if a[0] == "T" and b[0] == "T":
                for name, x, y in zip(("shape", "dtype", "requires_grad",
                                       "C-contiguous layout", "is_leaf (or gradient hooks)",
                                       "inference tensor", "type", "Python attributes"),
                                      a[1:], b[1:]):
                    if x != y:
                        return f"argument {i}: {name} changed ({x} -> {y})"
            if a[0] == "A" and b[0] == "A":
                return f"argument {i}: numpy array changed (its values were traced as constants)"
            if a[0] == "S" and b[0] == "S":
                return f"argument {i} changed ({_scalar_text(a[1])} -> {_scalar_text(b[1])})"
            if a[0] == "O" and b[0] == "O":      # keyed by identity (`_module_flags`)
                if a[1] != b[1]:
                    return (f"argument {i} is another object than when traced (an object "
                            "argument such as a module or optimizer keys its own entry)")
                return f"argument {i}: its modules' training flags changed ({a[2]} -> {b[2]})"
            return f"argument {i} changed ({a[1:]} -> {b[1:]})"
    return "new entry"


def _scalar_text(k):
    """A scalar's key (binding.scalar_key) as the user wrote the value."""
    if k[0] == "f":
        return ("a float read per call" if k[1] == "read per call" else
                k[1] if k[1] == "nan" else repr(float.fromhex(k[1])))
    if k[0] == "i":                      # a dynamic int (compiler/dynamic_numbers.py)
        return "an int read per call"
    return f"{k[1]!r}"


def alias_groups(tensors):
    """Note [Arguments sharing memory]
    Tensor arguments that are views of one storage (a language model's `x = data[:, i:i+T]`
    and `y = data[:, i+1:i+T+1]`; a prediction and its own `.detach()` in a distillation
    loss; two views of one parameter) are compiled when the function writes none of its
    arguments in place (then the program only reads them, and which memory they share
    cannot change what it computes, nor the gradients it gives each: an in-place write
    after the call still fails their backward through the shared version counter, as
    eagerly); otherwise, and for one tensor passed twice, the call runs eagerly, with a
    warning. Which arguments share a storage is part of the entry key, so
    a call sharing differently is keyed (and checked) anew; where in the storage each view
    lies is not, since a program that only reads its arguments computes the same from any
    layout the rest of the key allows. This is that pattern: per tensor argument, the index
    of the first argument on its storage."""
    first = {}
    return tuple(first.setdefault(storage_id(t), k) for k, t in enumerate(tensors))


def alias_eager_reason(tensors):
    """Why a call whose tensor arguments share memory runs eagerly, or None (it compiles:
    Note [Arguments sharing memory])."""
    roots = {}
    for t in tensors:
        roots.setdefault(storage_id(t), []).append(t)
    for group in roots.values():
        if len(group) < 2:
            continue
        if len({id(t) for t in group}) < len(group):
            return "the same tensor is passed as two arguments"
    return None
