"""numpy's floating-point warnings switched off around kernels: the switch that eager
dispatch, quiet kernels and generated programs share (Note [Quiet kernels])."""
import contextvars

import numpy as np

# Note [Quiet kernels]
# PyTorch returns inf/nan silently where numpy warns, so some kernels run with numpy's
# warnings off. `with np.errstate(all="ignore")` costs about 1 us per call (it builds a new
# error-state object each time), more than the kernel itself on small tensors. numpy keeps
# its error state in a context variable; we set it directly to a cached "ignore all" state
# derived from the caller's current one (so buffer size and error callback are kept), and
# restore it after. Where that private variable is missing we use the public errstate.
#
# Setting and resetting a context variable still costs ~0.3 us (each builds a new context
# mapping and a token), as much as a kernel on a small tensor. Eager dispatch runs a quiet
# primitive's bare kernel (`Primitive.quiet`) instead inside a prepared Context in which the
# error state is already "ignore all" (`quiet_context`): entering one is one pointer swap.
# The contexts start empty, so they keep no caller's values alive, and a kernel (numpy code
# only) reads no other context variable. A Context can be entered by one thread at a time
# and not recursively; when it is busy, `run_quiet` falls back to setting the variable.
try:
    from numpy._core._ufunc_config import _extobj_contextvar as _NP_ERRSTATE
except ImportError:                                    # pragma: no cover (other numpy)
    _NP_ERRSTATE = None
_IGNORING = {}                   # numpy error state -> the same state with all errors ignored
_CONTEXTS = {}                   # numpy error state -> a Context holding its _IGNORING state


def _ignoring(cur):
    if len(_IGNORING) > 64:      # states made by many `np.errstate` blocks: don't grow forever
        _IGNORING.clear()
    with np.errstate(all="ignore"):
        ign = _IGNORING[cur] = _NP_ERRSTATE.get()
    return ign


def quiet_enter():
    """Turn numpy's warnings off until `quiet_exit(token)` (one switch for a whole program)."""
    cur = _NP_ERRSTATE.get()
    return _NP_ERRSTATE.set(_IGNORING.get(cur) or _ignoring(cur))


def quiet_exit(token):
    _NP_ERRSTATE.reset(token)


def context_busy(e):
    """Whether RuntimeError `e` is `Context.run` refusing a context entered already."""
    return str(e).startswith("cannot enter context")


def run_quiet(f, arrays, attrs, cur, busy=False):
    """`f(*arrays, **attrs)` with numpy's warnings off, called under error state `cur`: what
    dispatch's inlined `_CONTEXTS[cur].run(...)` leaves out (the first use of a state, a
    context entered already by another thread or further up this one)."""
    if not busy:
        ctx = _CONTEXTS.get(cur)
        if ctx is None:
            if len(_CONTEXTS) > 64:
                _CONTEXTS.clear()
            ign = _IGNORING.get(cur) or _ignoring(cur)
            ctx = _CONTEXTS[cur] = contextvars.Context()
            ctx.run(_NP_ERRSTATE.set, ign)
        try:
            return ctx.run(f, *arrays, **attrs)
        except RuntimeError as e:
            if not context_busy(e):
                raise
    token = _NP_ERRSTATE.set(_IGNORING.get(cur) or _ignoring(cur))
    try:
        return f(*arrays, **attrs)
    finally:
        _NP_ERRSTATE.reset(token)


def quiet_kernel(f):
    """Kernel wrapper: IEEE results (inf, nan) without numpy warnings, as PyTorch does."""
    if _NP_ERRSTATE is None:
        def k(*a, **kw):
            with np.errstate(all="ignore"):
                return f(*a, **kw)
    else:
        get = _NP_ERRSTATE.get
        # ufuncs of one or two operands (most quiet kernels): a fixed signature, no packing
        if type(f) is np.ufunc and f.nin == 1:
            def k(x, out=None):
                cur = get()
                ctx = _CONTEXTS.get(cur)
                if ctx is not None:
                    try:
                        return ctx.run(f, x) if out is None else ctx.run(f, x, out=out)
                    except RuntimeError as e:
                        if not context_busy(e):
                            raise
                return run_quiet(f, (x,), {} if out is None else {"out": out}, cur,
                                 busy=ctx is not None)
        elif type(f) is np.ufunc and f.nin == 2:
            def k(x, y, out=None):
                cur = get()
                ctx = _CONTEXTS.get(cur)
                if ctx is not None:
                    try:
                        return ctx.run(f, x, y) if out is None else ctx.run(f, x, y, out=out)
                    except RuntimeError as e:
                        if not context_busy(e):
                            raise
                return run_quiet(f, (x, y), {} if out is None else {"out": out}, cur,
                                 busy=ctx is not None)
        else:
            def k(*a, **kw):
                return run_quiet(f, a, kw, get())
        k.quiet_raw = f          # codegen binds `f` and quiets a whole program at once
    k.__name__ = getattr(f, "__name__", "kernel")
    k.accepts_out = getattr(f, "accepts_out", False) or type(f) is np.ufunc
    return k
