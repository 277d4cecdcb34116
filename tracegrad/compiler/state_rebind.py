"""A cached path re-bound to optimizer state that `load_state_dict` replaced with state of the
same structure, instead of a re-trace (Note [Optimizer state reloaded]).

Note [Optimizer state reloaded]
"Restore the best checkpoint" loops call `opt.load_state_dict(best)` between calls of a
compiled step. The load replaces `opt.state` (a new dict, new per-parameter dicts, new
`exp_avg`, `momentum_buffer`, `step` tensors) and `opt.param_groups` (new group dicts),
so the identity guards of the path (Note [Captured state] in state.py) fail: each load
re-traced, and after `cache_limit` loads the step ran eagerly for good.

On a call whose path fails its Python state check, `rebind` looks at the failing identity
guards on an optimizer's `state` or `param_groups` attribute. When the new object is
*alike* the old one (the same container type; a dict with the same keys in the same order
and default factory, a list or tuple of the same length; a tensor of the same class, shape,
dtype, layout and flags, not a view, with no graph, gradient or hooks), it maps old to new
and follows every guard of the path whose holder was mapped: the place in the new holder
must hold the same object, or an object alike the one expected (mapped in turn). The path
is then copied with every guard moved to the new holders (expecting the new objects), the
captured tensors replaced by their new counterparts, and the holders of the numbers and
tensors it reads per call moved too; every moved guard must hold, the captured tensors
must share memory exactly as the old ones did, and no mapped object may be one the path
uses otherwise (a `.grad` owner, a hooked leaf, a replayed call's object, the holder of an
object's attributes, a place each call writes a number or tensor to, an object returned
as it is). Anything else (a missing `momentum_buffer`, a dtype change, a new key, a tensor
the path does not capture) leaves the path as it was: the call re-traces, as before. The
copy replaces the path in its entry, so a later call checks the new objects by identity
as any path does, and reads nothing stale: the old objects are no longer referenced by it.
Re-binding is tried only when no path of the entry holds as it is, once per call.

Dicts must keep their key order (code iterating one sees it), and the first load does
not: `load_state_dict` rebuilds each group with `params` last, as PyTorch's does. So the
first load re-traces once, and every later load of state like it is re-bound.
"""
import copy
import logging
from collections import defaultdict

from .._tensor import Tensor
from .._tensor_storage import _root
from .runner import build_runner
from .state_guards import StateGuard, checker, first_failing
from .state_slots import SlotView

log = logging.getLogger("tracegrad")

_ROOT_KEYS = ("state", "param_groups")


def rebind(path):
    """A copy of `path` bound to the optimizer state now in place, or None when the state
    that changed is not optimizer state of the same structure (Note [Optimizer state
    reloaded])."""
    from ..optim.optimizer import Optimizer
    guards = path.state_guards
    opt_dicts = {}
    for g in guards:
        if g.mode == "is" and isinstance(g.expected, Optimizer):
            opt_dicts[id(vars(g.expected))] = g.expected
    if not opt_dicts:
        return None
    mapped = {}                          # id(old) -> (old, new)
    for g in guards:
        if g.mode != "is" or id(g.holder) not in opt_dicts or g.key not in _ROOT_KEYS \
                or _holds(g):
            continue
        new = g.current()
        if not _alike(g.expected, new):
            return None
        mapped[id(g.expected)] = (g.expected, new)
    if not mapped:
        return None
    if not _follow(guards, mapped):
        return None
    moved = _moved_guards(guards, mapped)
    if moved is None or first_failing(moved) is not None:
        return None
    captured = _captured(path, mapped)
    if captured is None:
        return None
    place_sources = _move_holders(path.place_sources, mapped)
    scalar_sources = _move_holders(path.scalar_sources, mapped)
    if place_sources is None or scalar_sources is None:
        return None
    fresh = copy.copy(path)
    fresh.__dict__.pop("call", None)     # a generated runner is bound to the old path
    fresh.state_guards = moved
    fresh._state_holds = checker(moved)
    fresh.captured = captured
    fresh.place_sources, fresh.scalar_sources = place_sources, scalar_sources
    fresh.scalar_names = {(id(mapped[h][1]) if h in mapped else h, k): w
                          for (h, k), w in getattr(path, "scalar_names", {}).items()}
    runner = build_runner(fresh)
    if runner is not None:
        fresh.call = runner
    log.info("tracegrad: '%s' re-bound to reloaded optimizer state (%d objects)",
             path.name, len(mapped))
    return fresh


def _holds(g):
    try:
        return g.holds()
    except (ValueError, IndexError, KeyError, TypeError):
        return False


def _alike(old, new):
    """Whether `new` may stand where the path found `old` (the same structure)."""
    if type(old) is not type(new) or old is new:
        return old is new
    if isinstance(old, Tensor):
        return _alike_tensor(old, new)
    if isinstance(old, dict):
        if isinstance(old, defaultdict) and old.default_factory is not new.default_factory:
            return False
        if len(old) != len(new):
            return False
        return all(a is b or (type(a) is type(b) and type(a) in (str, int) and a == b)
                   for a, b in zip(old, new))
    if isinstance(old, (list, tuple)):
        return len(old) == len(new)
    return False


def _alike_tensor(old, new):
    a, b = old._data, new._data
    if (a.shape != b.shape or a.dtype != b.dtype or old._rg or new._rg
            or old._grad_fn is not None or new._grad_fn is not None
            or old._base is not None or new._base is not None
            or bool(old._inference) != bool(new._inference)):
        return False
    if a.ndim >= 2 and a.flags.c_contiguous != b.flags.c_contiguous:
        return False
    # no gradient, hooks or Python attributes on either (a state tensor has none)
    return not vars(old) and not vars(new)


def _follow(guards, mapped):
    """Map, from the roots in `mapped`, every object found at a guarded place of a mapped
    holder: the same object, or one alike the one expected. False when one is not."""
    grew = True
    while grew:
        grew = False
        for g in guards:
            if id(g.holder) not in mapped or g.mode != "is":
                continue
            if id(g.key) in mapped:       # (a mapped object used as a key)
                return False
            holder = mapped[id(g.holder)][1]
            try:
                now = holder[g.key]
            except (KeyError, IndexError, TypeError):
                return False
            if now is g.expected:
                continue
            if id(g.expected) in mapped:
                if mapped[id(g.expected)][1] is not now:
                    return False
                continue
            if not _alike(g.expected, now):
                return False
            mapped[id(g.expected)] = (g.expected, now)
            grew = True
    return True


def _moved_guards(guards, mapped):
    """The path's guards with mapped holders and expected objects replaced, or None when a
    guard depends on a mapped object in a way that cannot move (an object's attributes)."""
    attrs = {id(vars(o)) for o, _ in mapped.values() if hasattr(o, "__dict__")}
    out = []
    for g in guards:
        h = g.holder
        if id(h) in attrs or (type(h) is SlotView and id(h.obj) in mapped) \
                or id(g.key) in mapped:      # (`d[state_tensor]`: looked up by the old one)
            return None
        if g.mode in ("array", "data"):
            if id(h) in mapped or id(g.expected[0]) in mapped:
                return None
            out.append(g)
            continue
        exp = g.expected
        if g.mode == "is" and id(exp) in mapped:
            exp = mapped[id(exp)][1]
        if id(h) not in mapped and exp is g.expected:
            out.append(g)
            continue
        out.append(StateGuard(mapped[id(h)][1] if id(h) in mapped else h, g.key, exp,
                              g.mode, g.where))
    return out


def _captured(path, mapped):
    """The path's captured tensors with mapped ones replaced, or None when a mapped object
    is one the path uses other than as optimizer state, or the new tensors share memory
    otherwise than the old ones did."""
    olds = [o for o, _ in mapped.values()]
    caps = {id(t) for t in path.captured}
    if any(isinstance(o, Tensor) and id(o) not in caps for o in olds):
        return None
    used = set()
    for r in list(path.grad_none) + list(path.grad_some) + [r for _, r in path.sources] \
            + [r for r, _ in path.hook_checks] + [r for r, *_ in path.attr_guards]:
        used.add(id(r))
    for obj, method, a, kw in path.replays:
        used.update(id(x) for x in (obj, *a, *kw.values()))
    # the places each call writes numbers or tensors to (place_writes.with_writes), and
    # objects returned as they are
    used.update(id(w[0]) for w in getattr(path.out_build, "writes", ()))
    _ids_within(path.out_consts, used, 3)
    if any(id(o) in used or hasattr(o, "__dict__") and id(vars(o)) in used for o in olds):
        return None
    new = [mapped[id(t)][1] if id(t) in mapped else t for t in path.captured]
    # (input positions: the arguments, then the captured tensors)
    positions = {p for p, _ in path.pre_effects} | set(path.pre_clear) \
        | set(getattr(path, "retain_inputs", ())) | {p for p, _ in path.grad_set_plan}
    scalar = {j for j, *_ in path.scalar_sources}
    for j, t in enumerate(path.captured):
        if id(t) in mapped and (path.n_args + j) in positions:
            return None
    if _sharing(path.captured, scalar) != _sharing(new, scalar):
        return None
    return new


def _ids_within(x, ids, depth):
    """Add to `ids` those of `x` and of what it holds (`depth` levels of containers)."""
    ids.add(id(x))
    if depth and isinstance(x, (list, tuple, dict, set, frozenset)):
        for v in (list(x.keys()) + list(x.values()) if isinstance(x, dict) else x):
            _ids_within(v, ids, depth - 1)


def _sharing(tensors, skip):
    """Which tensors share memory: the partition of their positions by root array."""
    groups = {}
    for j, t in enumerate(tensors):
        if j not in skip:
            groups.setdefault(id(_root(t._data)), []).append(j)
    return sorted(groups.values())


def _move_holders(sources, mapped):
    """(captured index, holder, key, ...) entries with mapped holders replaced, or None when
    a key is a mapped object."""
    out = []
    for j, holder, key, *rest in sources:
        if id(key) in mapped:
            return None
        if id(holder) in mapped:
            holder = mapped[id(holder)][1]
        out.append((j, holder, key, *rest))
    return out
