"""The one place primitives execute: eager (kernel + autograd node) or tracing (a hook).

`dispatch(prim, args, attrs)` is called by every op. When a tracer is active (a context
variable set by `tracegrad.ir`), the call is handed to it; otherwise the numpy kernel runs
and, if grad mode is on and an operand requires grad, a grad_fn node is recorded with the
values the primitive's VJP declared it saves. In-place primitives (`prim.overwrites`) also
check PyTorch's in-place rules, bump the version counter, and rebase views (CopySlices).
"""

import re
import sys

import numpy as np

from . import _mode
from ._dtype import (_FROM_NP, BF16_NP, can_cast, is_float_np, python_number, scalar_type_name,
                     wrap_int)
from ._errors import InplaceError, TracegradRuntimeError, op_error
from . import _tensor
from ._tensor import Tensor, edge_of, stale_view_check
from ._tensor_storage import _root


class _layers:
    """Installed by the primitive table at import (Note [Layers] in _tensor.py):
    `VIEW_SCATTER`, the primitive that writes an in-place result through a view."""
    VIEW_SCATTER = None

# A tracer installs a callable here; dispatch hands every call to it while it is set.
from ._effects import trace_hook, watch_python   # the one "is a trace active" variable (Note [Effects])
from . import _saved_hooks
from ._overlap import check_overlap
from ._quiet import _CONTEXTS as _QUIET_CONTEXTS, _NP_ERRSTATE, context_busy, run_quiet
from ._saved_hooks import ACTIVE as _SAVED_HOOKS
_get_hook = trace_hook.get
_errstate_get = _NP_ERRSTATE.get if _NP_ERRSTATE is not None else None
_getprofile, _setprofile = sys.getprofile, sys.setprofile
_WATCH_EVENT = watch_python._event
_grad_on = _mode.grad_enabled
_inference_on = _mode.inference_enabled
EMPTY = {}
_wrap = Tensor._wrap
_new = object.__new__
_VersionCounter = _tensor.VersionCounter
_FLOATS = frozenset(np.dtype(t) for t in (np.float16, np.float32, np.float64))


# Note [Per-op cost]
# Eager runs this code once per op, and on small tensors its Python bytecode costs more than
# the numpy kernel. So the hot path is written flat: one- and two-operand calls (nearly all)
# are unrolled rather than looped, dtype objects are compared with `is` before `==` (the
# dtype rules return an operand's own dtype object), no temporary lists are built, and rare
# cases (views, inference mode, non-tensor saved values) leave through a branch.

def _cast(a, want):
    """Operand `a` as the kernel receives it: a tensor's data (or a numpy array) in `want`."""
    if isinstance(a, Tensor):
        a = a._data
    elif not isinstance(a, np.ndarray):
        if isinstance(a, np.generic):     # a numpy scalar is a Python number (weak dtype),
            return a.item()               # never a float64/int64 operand numpy would widen to
        if type(a) is not float and isinstance(a, float):
            return float(a)               # a traced Number met outside the trace's recording
        if type(a) is not int and type(a) is not bool and isinstance(a, int):
            return int(a)                 # an Integer's (or an int subclass's) exact value
        if type(a) is int and want is not None and want.kind in "iu" and want.itemsize < 8:
            return wrap_int(a, want)
        return a                          # Python numbers and attributes go in as they are
    dt = a.dtype
    return a if want is None or dt is want or dt == want else a.astype(want)


# Note [Scalar operands]
# numpy converts a Python number operand on every ufunc call (NEP 50 weak promotion), which
# costs more than the arithmetic on small arrays. For elementwise primitives with a
# promotion rule on float tensors, dispatch passes instead a cached read-only 0-d array of
# the tensor's dtype: numpy computes exactly what it would from the number (the same single
# rounding into that dtype, the same loop). Zeros (the cache would confuse 0.0 with -0.0),
# nan and numbers that do not fit the dtype are passed as they are.
_SCALARS = {}                     # (number, dtype) -> read-only 0-d array


def _scalar(v, dt):
    arr = _SCALARS.get((v, dt))
    if arr is not None:
        return arr
    if not v or v != v:
        return v
    try:
        with np.errstate(all="ignore"):
            arr = np.asarray(v, dt)
    except OverflowError:         # an int beyond float64: numpy reports it from the kernel
        return v
    if not np.isfinite(arr):
        return v
    arr.flags.writeable = False
    if len(_SCALARS) >= 1024:     # a program with ever-new numbers: don't grow forever
        _SCALARS.clear()
    _SCALARS[(v, dt)] = arr
    return arr


def _arrays(prim, args):
    """The kernel's operands: tensors' data, cast to the dtype the primitive's rule picks."""
    if prim.float_fast:
        # the common cases, where the rule would answer the operands' own float dtype
        if len(args) == 2:
            a, b = args
            if isinstance(a, Tensor):
                x = a._data
                dt = x.dtype
                if isinstance(b, Tensor):
                    y = b._data
                    if y.dtype is dt and dt in _FLOATS:
                        return x, y
                elif (type(b) is float or type(b) is int) and dt in _FLOATS:
                    if not prim.elementwise or prim.dtype_rule is None:
                        return x, b
                    c = _SCALARS.get((b, dt))
                    return x, (_scalar(b, dt) if c is None else c)
            elif (type(a) is float or type(a) is int) and isinstance(b, Tensor):   # 1.0 - y
                y = b._data
                dt = y.dtype
                if dt in _FLOATS:
                    if not prim.elementwise or prim.dtype_rule is None:
                        return a, y
                    return _scalar(a, dt), y
        elif len(args) == 1:
            a = args[0]
            if isinstance(a, Tensor):
                x = a._data
                if x.dtype in _FLOATS:
                    return (x,)
        elif len(args) == 3 and prim.dtype_rule is None and not prim.elementwise and (
                BF16_NP is None or not isinstance(a := args[0], Tensor)
                or a._data.dtype != BF16_NP):
            # fused ops whose wrappers checked the dtypes (linear, nll_loss): no cast
            a, b, c = args
            return (a._data if isinstance(a, Tensor) else _cast(a, None),
                    b._data if isinstance(b, Tensor) else _cast(b, None),
                    c._data if isinstance(c, Tensor) else _cast(c, None))
    rule = prim.dtype_rule
    want = None if rule is None else rule(args)
    out = []
    for a in args:          # a loop, not a comprehension: `want` would become a cell
        if type(a) is list or type(a) is tuple:   # numpy would take it; PyTorch refuses
            err = _operand_type_error(prim, args)
            if err is not None:
                raise err
        out.append(_cast(a, want))
    if BF16_NP is not None and prim.aliases is None and prim not in BF16_STORAGE_OPS:
        for x in out:
            if type(x) is np.ndarray and x.dtype == BF16_NP:
                raise _bf16_arithmetic(prim)
    return tuple(out)


# Note [bfloat16 arithmetic]
# bfloat16 tensors are storage (Note [bfloat16] in _dtype.py): the primitives that move or
# convert values without computing new ones register here; any other primitive given a
# bfloat16 operand raises, eagerly and while tracing alike, rather than compute what numpy's
# ml_dtypes loops give (which differs from PyTorch's float32-then-round results).
BF16_STORAGE_OPS = set()

# How many eager in-place writes have run, through any alias: `.data` and `detach()` tensors
# too, whose writes other tensors' version counters never see. A compiled call's stashed
# gradients are used only when no write ran between its forward and its backward (Note
# [Speculative backward] in compiler/speculation.py).
EAGER_WRITES = [0]
# The array owning each eagerly written memory (its `.base` root, by id) -> EAGER_WRITES just
# after its last write, and the count at which this map was last emptied (it is bounded):
# Note [Inputs written before a recomputing backward] in compiler/remat_writes.py.
WRITTEN = {}
WRITTEN_CLEARED = [0]


def note_write(a):
    """Count an eager in-place write into array `a`."""
    EAGER_WRITES[0] += 1
    a = _root(a)
    if len(WRITTEN) >= 1 << 16:
        WRITTEN.clear()
        WRITTEN_CLEARED[0] = EAGER_WRITES[0]
    WRITTEN[id(a)] = EAGER_WRITES[0]


def _bf16_arithmetic(prim):
    return op_error(TracegradRuntimeError, prim.name, "tracegrad keeps bfloat16 tensors as "
                    "storage only: this op would compute on bfloat16 values, which numpy cannot "
                    "do as PyTorch does (in float32, rounding each result)",
                    "Convert first, e.g. `x.float()`, and back with `.bfloat16()` if needed.")


def dispatch(prim, args, attrs=EMPTY):
    """Execute primitive `prim` on operands `args` (Tensors or Python numbers)."""
    hook = _get_hook()
    if hook is not None:
        watcher = _getprofile()
        if getattr(watcher, "__func__", None) is not _WATCH_EVENT:   # (a user's profiler
            return hook(prim, _numbers(args), attrs)                # stays as it is)
        # Note [Primitives unwatched]: recording and running one primitive calls no user
        # code, so the trace's effect watcher (a profile hook, _effects.watch_python) is
        # off meanwhile: its callback on each of our own calls was 40% of a trace's time
        _setprofile(None)
        try:
            return hook(prim, _numbers(args), attrs)
        finally:
            _setprofile(watcher)
    if prim.overwrites:
        return run_inplace(prim, args, attrs)
    # Eager execution of a functional primitive, written here rather than called: one
    # Python call less per op (see Note [Per-op cost]).
    if len(args) == 1 and prim.float_fast and type(a := args[0]) is Tensor \
            and a._data.dtype in _FLOATS:           # _arrays' unary case, inlined
        arrays = (a._data,)
    else:
        arrays = _arrays(prim, args)
    quiet = prim.quiet
    try:
        if quiet is None:
            res = prim.kernel(*arrays, **attrs) if attrs else prim.kernel(*arrays)
        else:            # Note [Quiet kernels]: the kernel inside a quiet Context
            cur = _errstate_get()
            ctx = _QUIET_CONTEXTS.get(cur)
            if ctx is None:
                res = run_quiet(quiet, arrays, attrs, cur)
            else:
                try:            # (`ctx.run(f, *arrays)` would cost 0.15 us more)
                    if attrs:
                        res = ctx.run(quiet, *arrays, **attrs)
                    elif len(arrays) == 2:
                        res = ctx.run(quiet, arrays[0], arrays[1])
                    elif len(arrays) == 1:
                        res = ctx.run(quiet, arrays[0])
                    else:
                        res = ctx.run(quiet, *arrays)
                except RuntimeError as e:
                    if not context_busy(e):
                        raise
                    res = run_quiet(quiet, arrays, attrs, cur, busy=True)
    except TracegradRuntimeError:
        raise
    except (ValueError, IndexError, TypeError, OverflowError) as e:
        raise _translate(prim, e, args) from None
    if type(res) is not np.ndarray:
        res = np.asarray(res)
    out = _new(Tensor)                  # Tensor._wrap(res), inlined
    out._data = res
    out._vc = vc = _new(_VersionCounter)
    vc.v = 0
    out._rg = False
    out._grad_fn = None
    out._base = None
    out._output_nr = 0
    out._inference = False
    if prim.aliases is not None:
        _alias(prim, args, attrs, out)
    if _inference_on():
        # A view (or detach) keeps its source's kind: views of normal tensors stay normal.
        out._inference = True if prim.aliases is None else args[prim.aliases]._inference
        return out
    if prim.nondiff or not _grad_on() or res.dtype not in _FLOATS and not is_float_np(res.dtype):
        return out
    # `_rg` is where `requires_grad` is stored
    if len(args) == 2:
        a, b = args
        needs = (isinstance(a, Tensor) and a._rg, isinstance(b, Tensor) and b._rg)
    elif len(args) == 1:
        a = args[0]
        needs = (isinstance(a, Tensor) and a._rg,)
    else:
        needs = tuple([isinstance(a, Tensor) and a._rg for a in args])
    if True in needs:
        record(prim, args, attrs, out, needs)
    return out


def _numbers(args):
    """Operands with numpy scalars turned into Python numbers (see `_cast`), so a traced
    program records the literal eager execution computes with, and promotes as eager does
    (`np.True_` is a float there, never a Python bool: `python_number`)."""
    for a in args:
        if isinstance(a, np.generic):
            return tuple([python_number(a) if isinstance(a, np.generic) else a for a in args])
    return args


def run(prim, args, attrs):
    """Eager execution of a functional primitive past the trace hook (how the tracer runs
    what it records)."""
    token = trace_hook.set(None)
    try:
        return dispatch(prim, args, attrs)
    finally:
        trace_hook.reset(token)


def _alias(prim, args, attrs, out):
    """`out` shares the storage of operand `prim.aliases` (views, detach)."""
    src = args[prim.aliases]
    out._vc = src._vc
    if src._inference:              # a view of an inference tensor is one, in any mode
        out._inference = True
    if prim.is_view:
        base = src._base
        out._base = root = src if base is None else base
        out._view_chain = src._view_chain + ((prim, attrs),)
        if root._shape_epoch:           # Note [Shape changed in place] (ops/inplace_shape.py)
            out._base_epoch = root._shape_epoch
        out._fn_version = src._vc.v
        if src._multi_view is not None:     # Note [Multi-output views]: views of it too
            out._multi_view = (prim.grad_fn_name.replace("Backward0", ""), 0)


def _version(prim, t):
    """The version of saved value `t` (0 for non-tensors), refusing inference tensors."""
    if not isinstance(t, Tensor):
        return 0
    if t._inference:
        raise op_error(TracegradRuntimeError, prim.name,
                       "Inference tensors cannot be saved for backward.",
                       "To work around you can make a clone to get a normal "
                       "tensor and use it in autograd.")
    return t._vc.v


def _saved_values(saves, args, override):
    """The operands a node keeps: those in `saves`, replaced from `override` ({index: value})."""
    return tuple([override[i] if override and i in override else a if i in saves else None
                  for i, a in enumerate(args)])


def _versions(prim, saved):
    return tuple([_version(prim, t) for t in saved])


# (record keeps comprehensions out of its body: they would turn its locals into cells,
# which every call then allocates)
def record(prim, args, attrs, out, needs, saved_override=None):
    """Attach a new grad_fn node for `prim` to `out`."""
    n = len(args)
    if n > 2:
        edges, shapes, dtypes = [], [], []
        for a, need in zip(args, needs):        # _meta, inlined
            if isinstance(a, Tensor):
                d = a._data
                shapes.append(d.shape)
                dtypes.append(d.dtype)
                edges.append(None if not need else (a._grad_fn, a._output_nr)
                             if a._base is None and a._grad_fn is not None else edge_of(a))
            else:
                edges.append(None)
                shapes.append(())
                dtypes.append(None)
        node = prim.node_cls(prim, attrs, tuple(edges), tuple(shapes), tuple(dtypes), needs)
    else:
        # _meta unrolled for one or two operands (see Note [Per-op cost])
        a = args[0]
        if isinstance(a, Tensor):
            d = a._data
            sa, da = d.shape, d.dtype
            if not needs[0]:
                ea = None
            elif a._base is None and a._grad_fn is not None:    # edge_of's common case
                ea = (a._grad_fn, a._output_nr)
            else:
                ea = edge_of(a)
        else:
            ea, sa, da = None, (), None
        if n == 1:
            node = prim.node_cls(prim, attrs, (ea,), (sa,), (da,), needs)
        else:
            b = args[1]
            if isinstance(b, Tensor):
                d = b._data
                sb, db = d.shape, d.dtype
                if not needs[1]:
                    eb = None
                elif b._base is None and b._grad_fn is not None:
                    eb = (b._grad_fn, b._output_nr)
                else:
                    eb = edge_of(b)
            else:
                eb, sb, db = None, (), None
            node = prim.node_cls(prim, attrs, (ea, eb), (sa, sb), (da, db), needs)
    saves = prim.saves
    if saves:
        if prim._saves_by_need is not None:   # only what the needed gradients read (mul)
            saves = prim._saves_by_need[needs]
        if saved_override is None and len(saves) == n:
            saved = args if type(args) is tuple else tuple(args)   # every operand (mul...)
        elif saved_override is None and n == 2 and len(saves) == 1:  # one of two (x * 1.5)
            saved = (args[0], None) if saves == (0,) else (None, args[1])
        else:
            saved = _saved_values(saves, args, saved_override)
        node.saved = saved
        # _version inlined for plain tensors, Python numbers and unsaved operands (None)
        if len(saved) == 2:
            a, b = saved
            va = a._vc.v if type(a) is Tensor and not a._inference else (
                0 if a is None or type(a) is float else _version(prim, a))
            vb = b._vc.v if type(b) is Tensor and not b._inference else (
                0 if b is None or type(b) is float else _version(prim, b))
            node.versions = (va, vb)
        elif len(saved) == 1 and type(saved[0]) is Tensor and not saved[0]._inference:
            node.versions = (saved[0]._vc.v,)                        # sin, log...
        else:
            node.versions = _versions(prim, saved)
    if prim.saves_out:
        node.out_saved = (out._data, out._vc, out._vc.v)
    out._rg = True
    out._grad_fn = node
    out._output_nr = 0
    if _SAVED_HOOKS[0]:                  # Note [Saved tensors hooks] in _saved_hooks.py
        _saved_hooks.pack_node(node, out)
    return node


def run_inplace(prim, args, attrs):
    """Eager execution of an in-place primitive (operand 0 is overwritten)."""
    target = args[0]
    grad_on = _grad_on() and not prim.nondiff
    _check_inplace_target(prim, target, grad_on)
    check_overlap(prim, args, attrs)        # Note [Overlapping in-place operands]
    func = prim.functional
    arrays = _arrays(func, args)
    try:
        res = func.kernel(*arrays, **attrs)
    except (ValueError, IndexError, TypeError, OverflowError) as e:
        raise _translate(prim, e, args) from None
    res = np.asarray(res)
    tdata = target._data
    if res.dtype != tdata.dtype and not can_cast(_FROM_NP[res.dtype], _FROM_NP[tdata.dtype]):
        raise op_error(TracegradRuntimeError, prim.name,
                       f"result type {scalar_type_name(_FROM_NP[res.dtype])} can't be cast to "
                       f"the desired output type {scalar_type_name(_FROM_NP[tdata.dtype])}.",
                       "Convert the tensor first, e.g. `x = x.float()`.")
    if res.shape != tdata.shape:
        raise op_error(TracegradRuntimeError, prim.name,
                       f"output with shape {list(tdata.shape)} doesn't match the broadcast "
                       f"shape {list(res.shape)}.",
                       "In-place ops cannot grow a tensor; use the out-of-place op.")
    needs = None
    if grad_on and is_float_np(tdata.dtype):
        needs = tuple(isinstance(a, Tensor) and a.requires_grad for a in args)
        base = target._base
        if base is not None and base.requires_grad:
            needs = (True,) + needs[1:]
        if not any(needs):
            needs = None
    old = None
    if needs is not None and 0 in prim.saved_for(needs):
        old = Tensor._wrap(tdata.copy(order="K"), target.requires_grad, target.grad_fn)
        old._output_nr = target._output_nr
    try:
        if res.dtype == tdata.dtype:
            np.copyto(tdata, res)
        else:                        # float64 -> float32 may overflow: inf, silently (PyTorch)
            with np.errstate(all="ignore"):
                np.copyto(tdata, res, casting="unsafe")
    except ValueError:
        if tdata.flags.writeable:
            raise
        raise _read_only_error(prim, tdata) from None
    before = target._vc.v
    target._vc.v += 1
    note_write(tdata)
    if needs is None:
        return target
    base = target._base
    if base is not None:
        node = _rebase_view(prim, args, attrs, target, needs, old)
        if base._retains_grad:          # the base's grad_fn is now CopySlices
            base._move_retain_grad()
    else:
        node = record(prim, args, attrs, target, needs, {0: old} if old is not None else None)
        if target._retains_grad:
            target._move_retain_grad()
    _saved_before_write(node, args, target._vc, before)
    return target


def _saved_before_write(node, args, vc, before):
    """An operand sharing the written storage (`y.mul_(y)`, `y[0].mul_(y[1])`) is saved, as in
    PyTorch, before the write: at the old version, so backward finds it overwritten instead
    of reading the new contents as if they were the operand."""
    saved, versions = node.saved, node.versions
    if not saved or versions is None:
        return
    stale = [k for k in range(1, min(len(args), len(saved)))
             if saved[k] is args[k] and getattr(args[k], "_vc", None) is vc]
    if stale:
        versions = list(versions)
        for k in stale:
            versions[k] = before
        node.versions = tuple(versions)


def _check_inplace_target(prim, t, grad_on):
    if t._inference and not _inference_on():
        raise op_error(InplaceError, prim.name,
                       "Inplace update to inference tensor outside InferenceMode is not "
                       "allowed.", "You can make a clone to get a normal tensor before doing "
                       "inplace update.")
    if not grad_on:
        return
    if t._multi_view is not None and t._base is not None and t._base.requires_grad:
        name, k = t._multi_view
        raise op_error(InplaceError, prim.name,
                       f"Output {k} of {name} is a view and is being modified inplace. This "
                       "view is the output of a function that returns multiple views. Such "
                       "functions do not allow the output views to be modified inplace.",
                       "You should replace the inplace operation by an out-of-place one.")
    if t.requires_grad and t._grad_fn is None and t._base is None:
        if prim.writes == "slice":    # `x[1] = v`: PyTorch writes through the view x[1]
            raise op_error(InplaceError, prim.name,
                           "a view of a leaf Variable that requires grad is being used in an "
                           "in-place operation.", "Wrap the update in `with torch.no_grad():`, "
                           "or clone the leaf first.")
        raise op_error(InplaceError, prim.name,
                       "a leaf Variable that requires grad is being used in an in-place "
                       "operation.", "Wrap the update in `with torch.no_grad():`, or clone the "
                       "tensor first.")
    b = t._base
    if b is not None and b.requires_grad and b._grad_fn is None:
        raise op_error(InplaceError, prim.name,
                       "a view of a leaf Variable that requires grad is being used in an "
                       "in-place operation.", "Wrap the update in `with torch.no_grad():`, or "
                       "clone the leaf first.")


def _rebase_view(prim, args, attrs, view, needs, old):
    """In-place op on a view: record it on the base (CopySlices) and re-derive the view.

    base_new = view_scatter(base_old, f(view_old, *others)) -- every step a real node, so
    gradients (and gradients of gradients) flow through the ordinary machinery.
    """
    S = _layers
    base = view._base
    stale_view_check(view)
    view_old = Tensor._wrap(view._data, view.requires_grad, view.grad_fn)
    view_old._output_nr = view._output_nr
    f_out = Tensor._wrap(view._data)
    f_out._vc = view._vc             # a saved result (`view.tanh_()`) sees later writes
    node = record(prim.functional, (view_old,) + tuple(args[1:]), attrs, f_out, needs,
                  {0: old} if old is not None else None)
    base_old = Tensor._wrap(base._data, base.requires_grad, base._grad_fn)
    base_old._output_nr = base._output_nr
    chain = view._view_chain
    record(S.VIEW_SCATTER, (base_old, f_out), {"chain": chain}, base, (base.requires_grad,
                                                                        True))
    view._regenerate()
    return node


def _read_only_error(prim, data):
    """In-place write into memory numpy marks read-only: an expanded (stride 0) view, as
    PyTorch refuses it, a view whose elements overlap (`unfold` with step < size: refused
    here, where PyTorch's result depends on its element loop), or a tensor wrapping a
    read-only numpy array."""
    span = sum((n - 1) * abs(st) for st, n in zip(data.strides, data.shape)) + data.itemsize
    if any(st == 0 and n > 1 for st, n in zip(data.strides, data.shape)) or (
            data.size > 1 and span < data.size * data.itemsize):     # overlapping windows
        # (unfold with step < size): PyTorch writes shared elements repeatedly
        return op_error(TracegradRuntimeError, prim.name,
                        "unsupported operation: more than one element of the written-to "
                        "tensor refers to a single memory location (it is an expand or "
                        "broadcast view).", "Please clone() the tensor before performing the "
                        "operation.")
    return op_error(TracegradRuntimeError, prim.name,
                    "the written-to tensor's memory is read-only (it wraps a read-only numpy "
                    "array, or it is a view into overlapping `unfold` windows).",
                    "clone() the tensor first, or pass a writable array.")


_NUMBER_TYPES = (Tensor, np.ndarray, np.generic, int, float, complex)


def _operand_type_error(prim, args):
    """PyTorch's TypeError for an elementwise op given a non-number operand (None, a string,
    a list), or None when every operand is a tensor, an array or a number."""
    from ._errors import TracegradTypeError
    if not prim.elementwise:
        return None
    bad = [type(a).__name__ for a in args if not isinstance(a, _NUMBER_TYPES)]
    if not bad:
        return None
    fix = "Operands must be tensors, numpy arrays or Python numbers" + (
        " (make a tensor of it first: tracegrad.tensor(...))."
        if {"list", "tuple"} & set(bad) else ".")
    return op_error(TracegradTypeError, prim.name,
                    f"unsupported operand type(s): {', '.join(bad)}.", fix)


def _translate(prim, e, args=()):
    """Turn a numpy error inside a kernel into the error PyTorch raises, naming the op."""
    from ._errors import TracegradError, TracegradIndexError, TracegradRuntimeError
    if isinstance(e, TracegradError):
        return e                    # a kernel already raised the right error
    msg = str(e)
    if isinstance(e, TypeError):
        bad = _operand_type_error(prim, args)
        if bad is not None:         # `x + None`, `x * "a"`: PyTorch raises TypeError
            return bad
    if "broadcast" in msg:
        return op_error(TracegradRuntimeError, prim.name,
                        f"shapes cannot be broadcast together ({msg}).",
                        "Check the operands' shapes: trailing dimensions must be equal or 1.")
    if isinstance(e, IndexError):
        # numpy says "axis", PyTorch "dimension" (`x[idx]`: "index 4 is out of bounds for
        # dimension 0 with size 4")
        msg = re.sub(r"out of bounds for axis (\d+)", r"out of bounds for dimension \1", msg)
        return op_error(TracegradIndexError, prim.name, msg)
    if isinstance(e, OverflowError) and " out of bounds for " in msg:
        # numpy: "Python integer 300 out of bounds for uint8" (`where(c, int8_t, 1000)`)
        return op_error(TracegradRuntimeError, prim.name, "value cannot be converted to type "
                        f"{msg.rsplit(' ', 1)[-1]}_t without overflow")
    # numpy's TypeErrors inside a kernel mean "no loop for these dtypes" (`-` on bool):
    # PyTorch raises RuntimeError there; kernels raise TracegradTypeError themselves where
    # PyTorch raises TypeError.
    return op_error(TracegradRuntimeError, prim.name, msg)


_tensor._layers.record = record          # Note [Layers]: the Tensor type calls back into us
