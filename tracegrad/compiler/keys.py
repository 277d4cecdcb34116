"""The entry key: what must match, checked with one dict lookup, before a cached trace is
reused: shapes, dtypes, requires_grad, leaf-ness, inference flag and C-contiguity of tensor
arguments, which arguments alias, Python scalar values by type and exact value, the
arguments' structure (Note [Binding by name] in binding.py), grad and inference mode, the
default dtype, module training flags and parameter identities."""
import numpy as np

from .. import _dtype, _mode
from .._tensor import Tensor
from .._tensor_storage import _root
from .binding import scalar_key


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
                          x._inference))
        elif isinstance(x, (bool, int, float, str, type(None))):
            parts.append(("S", scalar_key(x)))
        elif isinstance(x, np.ndarray):      # the trace baked its values in: key by value
            parts.append(("A", x.shape, x.dtype.str, x.tobytes()))
        else:                                # by identity (the entry keeps `x` alive)
            parts.append(("O", id(x), _module_flags(x)))
    aliased = len(storages) > 1 and len(set(storages)) < len(storages)
    return ((tuple(parts), _mode.grad_enabled(), _mode.inference_enabled(),
             _dtype.get_default_dtype(), struct), tensors, aliased)


def _hooked(node):
    """Whether autograd node `node` has gradient hooks (a removed hook leaves an empty list)."""
    return "with gradient hooks" if any(node.pre_hooks.values()) else False


def storage_id(t):
    """Identity of the memory under tensor `t`: its root numpy array (`.data` and views
    have version counters of their own, but share this)."""
    return id(_root(t._data))


def _module_flags(x):
    modules = getattr(x, "modules", None)
    if modules is None or not callable(modules):
        return None
    try:
        return tuple(m.training for m in modules())
    except TypeError:
        return None


def describe_difference(old, new):
    """Human-readable reason two entry keys differ (for retrace logs)."""
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
        return f"grad mode changed ({og} -> {ng})"
    if oi != ni:
        return f"inference mode changed ({oi} -> {ni})"
    if len(op) != len(np_):
        return f"number of arguments changed ({len(op)} -> {len(np_)})"
    for i, (a, b) in enumerate(zip(op, np_)):
        if a != b:
            if a[0] == "T" and b[0] == "T":
                for name, x, y in zip(("shape", "dtype", "requires_grad",
                                       "C-contiguous layout", "is_leaf (or gradient hooks)",
                                       "inference tensor"),
                                      a[1:], b[1:]):
                    if x != y:
                        return f"argument {i}: {name} changed ({x} -> {y})"
            if a[0] == "A" and b[0] == "A":
                return f"argument {i}: numpy array changed (its values were traced as constants)"
            return f"argument {i} changed ({a[1:]} -> {b[1:]})"
    return "new entry"


def alias_groups(tensors):
    """Note [Arguments sharing memory]
    Tensor arguments that are views of one storage (a language model's `x = data[:, i:i+T]`
    and `y = data[:, i+1:i+T+1]`) are compiled when no tensor among them requires grad and
    the function writes none of its arguments in place (then the program only reads them,
    and which memory they share cannot change what it computes); otherwise the call runs
    eagerly, with a warning. Which arguments share a storage is part of the entry key, so
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
        if any(t.requires_grad or t._base is not None and t._base.requires_grad
               for t in group):
            return "tensor arguments that require grad share memory"
    return None
