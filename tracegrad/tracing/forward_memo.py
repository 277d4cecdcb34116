"""The custom `forward`s one call of a compiled function already ran, reused when the call
is attempted again, so that the user's Python `forward` runs once per call, as eagerly.

Note [Forwards run once per call]
A compiled program runs each custom Function's `forward` (Note [Opaque Functions] in
custom_function.py). A call can be attempted more than once: a guard after the forward fails
and another cached path or a re-trace runs the call again; an op after it fails on its data
and the call re-runs eagerly (Note [Errors inside compiled programs] in codegen.py); on the
JAX backend a runtime check fails and the program re-runs on numpy before either. Each
attempt would run the forward again, so its Python side effects (a counter, a log line)
would happen two or three times where eager execution has them once.

So a call of a compiled function with custom Functions in its paths carries a `ForwardMemo`
(a context variable: threads and nested calls never share one). Every forward run during
the call is logged with its class, its operands (dtype, shape and bytes, and plain values),
`needs_input_grad`, and what it produced: the result array, or the exception it raised, and
its `ctx` (saved tensors and attributes, tensors given as "operand k", "the result" or a
tensor of its own). An attempt (`next_attempt`) reuses any entry of an earlier attempt
whose class, flags and operands are equal, each at most once, instead of running the
forward: compiled kernels take the result, the eager re-run and the re-trace also get a
`ctx` filled as the forward would have filled it (forwards are deterministic and draw no
random numbers: the tracer records no other). The forward thus runs on the first attempt
that reaches it and never again within the call.

What cannot be reused: a forward whose `ctx` keeps objects other than tensors, plain values
and lists, tuples and dicts of them (an object may hold a program's buffer, which the
program overwrites later), or marks tensors dirty or non-differentiable: it runs again,
with a warning naming the class. Operands not equal bit for bit (a NaN float argument)
never match. (Compiling the backward of a forward that saves a tensor it computed runs
that forward once more, per path: Note [Opaque Functions] in custom_function.py.) The JAX
backend's host callback may run on one of XLA's threads: it finds the memo through its
program (Note [Callbacks behind guards] in backends/jax/callback.py).
"""
import contextvars
import warnings

import numpy as np

from .._tensor import Tensor

MEMO = contextvars.ContextVar("tracegrad_forward_memo", default=None)


class ForwardMemo:
    """The forwards one call ran (Note [Forwards run once per call])."""

    __slots__ = ("entries", "attempt", "used")

    def __init__(self):
        self.entries, self.attempt, self.used = [], 0, set()

    def next_attempt(self):
        self.attempt += 1
        self.used = set()

    def find(self, cls, key):
        for i, e in enumerate(self.entries):
            if (e.cls is cls and e.attempt < self.attempt and i not in self.used
                    and e.key == key):
                self.used.add(i)
                return e
        return None


class _Entry:
    __slots__ = ("cls", "key", "attempt", "result", "error", "ctx")

    def __init__(self, cls, key, attempt):
        self.cls, self.key, self.attempt = cls, key, attempt
        self.result = self.error = self.ctx = None


def next_attempt():
    """Mark the start of another attempt at the current call (a no-op outside one)."""
    memo = MEMO.get()
    if memo is not None:
        memo.next_attempt()


def run_forward(cls, ctx, args, forward, fill_ctx=True):
    """`forward()` (which runs `cls.forward(ctx, *args)`), or what it gave on an earlier
    attempt at this call: its result as a fresh tensor (or operand), its exception raised
    again, and, with `fill_ctx`, `ctx` filled as it filled it."""
    memo = MEMO.get()
    if memo is None:
        return forward()
    key = _key(ctx.needs_input_grad, args)
    if key is None:
        return forward()
    hit = memo.find(cls, key)
    if hit is not None:
        if hit.error is not None:
            raise hit.error
        if not fill_ctx or hit.ctx is not None:
            return _replay(hit, ctx, args, fill_ctx)
        warnings.warn(f"tracegrad.compile: {cls.__name__}.forward runs again for one call "
                      "(a compiled attempt at the call did not finish, and its ctx keeps "
                      "objects other than tensors, plain values and lists, tuples or dicts of "
                      "them, or marks tensors dirty or non-differentiable)",
                      UserWarning, stacklevel=4)
    entry = _Entry(cls, key, memo.attempt)
    try:
        out = forward()
    except Exception as e:
        entry.error = e
        memo.entries.append(entry)
        raise
    if isinstance(out, Tensor):
        entry.result = _spec(out, args, None)
        entry.ctx = _ctx_spec(ctx, args, out)
        memo.entries.append(entry)
    return out


def _key(needs, args):
    key = [tuple(needs)]
    for a in args:
        if isinstance(a, Tensor):
            d = a._data
            key.append((d.dtype.str, d.shape, np.ascontiguousarray(d).tobytes()))
        elif isinstance(a, float) and a != a:
            return None                  # NaN: never equal to itself
        else:
            key.append((type(a), a))
    return tuple(key)


def _spec(t, args, out):
    """How to give `t` back: ("arg", k), ("out",), ("copy", array) or ("own", t)."""
    if t is None:
        return None
    for k, a in enumerate(args):
        if a is t:
            return ("arg", k)
    if out is None or t is out:      # the result: the program owns its buffer
        return ("out",) if out is not None else ("copy", np.array(t._data))
    # a compiled program may later write into its operands' and result's buffers
    arrays = [a._data for a in args if isinstance(a, Tensor)] + [out._data]
    if any(np.shares_memory(t._data, a) for a in arrays):
        return ("copy", np.array(t._data))
    return ("own", t)


def _ctx_spec(ctx, args, out):
    """`ctx`'s saved tensors and attributes as specs, or None when they cannot be given back
    without running forward again."""
    if ctx._dirty or ctx._non_diff:
        return None
    from .custom_function import _CTX_STATE
    saved = None if ctx._saved is None else tuple(_spec(t, args, out) for t in ctx._saved)
    attrs = {k: _value_spec(v, args, out) for k, v in vars(ctx).items() if k not in _CTX_STATE}
    if any(v is None for v in attrs.values()):
        return None
    return saved, attrs


def _value_spec(v, args, out, depth=0):
    """A ctx attribute: a tensor, a list, tuple or dict of such, or a plain value; None for
    anything else (an object may hold a compiled program's buffer)."""
    if isinstance(v, Tensor):
        return ("tensor", _spec(v, args, out))
    if type(v) in (list, tuple) and depth < 8:
        items = [_value_spec(x, args, out, depth + 1) for x in v]
        return None if None in items else ("seq", type(v), items)
    if type(v) is dict and depth < 8:
        items = {k: _value_spec(x, args, out, depth + 1) for k, x in v.items()}
        return None if None in items.values() else ("dict", items)
    from .custom_function import is_plain
    return ("value", v) if is_plain(v) else None


def _replay(entry, ctx, args, fill_ctx):
    out = _give(entry.result, args, None)
    if fill_ctx:
        saved, attrs = entry.ctx
        for k, v in attrs.items():
            setattr(ctx, k, _give_value(v, args, out))
        if saved is not None:
            ctx._saved = tuple(_give(s, args, out) for s in saved)
    return out


def _give_value(spec, args, out):
    kind = spec[0]
    if kind == "tensor":
        return _give(spec[1], args, out)
    if kind == "seq":
        return spec[1](_give_value(x, args, out) for x in spec[2])
    if kind == "dict":
        return {k: _give_value(x, args, out) for k, x in spec[1].items()}
    v = spec[1]
    return type(v)(v) if type(v) is set else v      # anew, as forward makes it anew


def _give(spec, args, out):
    if spec is None:
        return None
    kind = spec[0]
    if kind == "arg":
        return args[spec[1]]
    if kind == "out":
        return out
    if kind == "own":
        return spec[1]
    return Tensor._wrap(np.array(spec[1]))
