"""The transforms: `grad`, `value_and_grad`, `grad_and_value`, `vjp`, `jacrev`.

Each transform has an eager implementation (`_value_and_grad`, `_jacobian`): run `f` on
fresh leaves (func/_args.py), then `autograd.grad`. With `compile=True` (the default) that
implementation is itself wrapped in `tracegrad.compile`, so the value and the gradient
become one generated forward program, traced on the first call and reused while shapes,
dtypes and the data-dependent decisions match (see `.stats` of the compiled function,
reachable as `transformed.compiled`). A transform called while another function is being
traced (nested transforms, a transform inside `@compile`) runs inline in that trace.

The compiled implementation is cached per (transform, f, options), so `grad(f)(x)` written
inside a loop re-uses one compiled function instead of re-tracing each time.
"""
import contextlib
import functools
import threading
from collections import OrderedDict

from .. import _func_levels as _levels, _mode
from .._errors import TracegradRuntimeError, TracegradValueError, op_error
from .._tensor import Tensor
from ..autograd.api import grad as _autograd_grad
from ..tracing import flatten
from ._args import (Primals, check_scalar, depends_on_outer, detach_tree, normalize_argnums,
                    split_aux, tensor_leaves)

_CACHE_SIZE = 64
_cache = OrderedDict()
_cache_lock = threading.Lock()


def _compiled(kind, f, impl, options):
    """The (cached) `tracegrad.compile` of `impl`, the eager implementation of kind(f)."""
    from ..compiler import compile as tg_compile
    key = (kind, f, options)
    try:
        hash(key)
    except TypeError:
        return tg_compile(impl)
    with _cache_lock:
        cf = _cache.get(key)
        if cf is None:
            cf = _cache[key] = tg_compile(impl)
            while len(_cache) > _CACHE_SIZE:
                _cache.popitem(last=False)
        else:
            _cache.move_to_end(key)
    return cf


def _named(impl, kind, f):
    """Give `impl` f's signature (readable IR input names) and a name like `grad_loss`."""
    functools.update_wrapper(impl, f, updated=())
    impl.__name__ = impl.__qualname__ = f"{kind}_{getattr(f, '__name__', 'f')}"
    return impl


def _aux_tensors(aux):
    return [x for x in flatten(aux)[0] if isinstance(x, Tensor)] if aux is not None else []


def _grads_or_zeros(outputs, leaves, grad_outputs, create_graph, retain_graph=None):
    """d outputs / d leaves, zeros for leaves the outputs do not depend on."""
    from ..ops.creation import zeros_like
    pairs = [(o, g) for o, g in zip(outputs, grad_outputs) if o.requires_grad]
    if pairs:
        res = _autograd_grad([o for o, _ in pairs], leaves, [g for _, g in pairs],
                             retain_graph=retain_graph, create_graph=create_graph,
                             allow_unused=True)
    else:
        res = [None] * len(leaves)
    return [zeros_like(x) if g is None else g for g, x in zip(res, leaves)]


def _value_and_grad(f, argnums, has_aux, api, args, kwargs):
    """Eager core of grad/value_and_grad: (value, grads in argnums structure, aux)."""
    nums, single = normalize_argnums(argnums, len(args))
    connect = _mode.is_grad_enabled()
    with _mode.enable_grad():
        pr = Primals(args, nums, connect)
        with _levels.level(_levels.GRAD):
            result = f(*pr.args, **kwargs)
        out, aux = split_aux(result, has_aux, api)
        check_scalar(out, api)
        outer = connect and depends_on_outer([out] + _aux_tensors(aux), pr.leaves)
        grads = _grads_or_zeros([out], pr.leaves, [None], create_graph=outer)
    per_arg = pr.structure(grads)
    g = per_arg[0] if single else tuple(per_arg)
    if not outer:
        out, aux = out.detach(), detach_tree(aux)
    return out, g, aux


class _Transformed:
    """A transformed function; `.compiled` is its CompiledFunction (None if compile=False)."""

    def __init__(self, kind, f, impl, options, compile, finish):
        self.kind, self.f, self._finish = kind, f, finish
        self._impl = _named(impl, kind, f)
        self.compiled = _compiled(kind, f, self._impl, options) if compile else None
        functools.update_wrapper(self, f, updated=())

    def __call__(self, *args, **kwargs):
        run = self.compiled if self.compiled is not None else self._impl
        return self._finish(run(*args, **kwargs))

    def __repr__(self):
        return f"<tracegrad.func.{self.kind} of {getattr(self.f, '__name__', self.f)!r}>"


def grad(f, argnums=0, has_aux=False, *, compile=True):
    """The gradient of scalar-valued `f` with respect to the arguments at `argnums`.

    `argnums`: an int (the result has that argument's structure: a tensor, or a tuple/list/
    dict of tensors) or a tuple of ints (a tuple of such results). With `has_aux`, `f`
    returns `(output, aux)` and the transform returns `(grad, aux)`. Inputs need not require
    grad; the caller's tensors are never modified. `compile=False` runs eagerly.

    >>> tg.func.grad(lambda x: (x ** 3).sum())(tg.tensor([1., 2.]))   # tensor([ 3., 12.])
    """
    def impl(*args, **kwargs):
        return _value_and_grad(f, argnums, has_aux, "grad_and_value", args, kwargs)

    def finish(res):
        _, g, aux = res
        return (g, aux) if has_aux else g
    return _Transformed("grad", f, impl, (argnums, has_aux), compile, finish)


def value_and_grad(f, argnums=0, has_aux=False, *, compile=True):
    """Like JAX: `(value, grad)`, or `((value, aux), grad)` with `has_aux`."""
    def impl(*args, **kwargs):
        return _value_and_grad(f, argnums, has_aux, "grad_and_value", args, kwargs)

    def finish(res):
        v, g, aux = res
        return ((v, aux), g) if has_aux else (v, g)
    return _Transformed("value_and_grad", f, impl, (argnums, has_aux), compile, finish)


def grad_and_value(f, argnums=0, has_aux=False, *, compile=True):
    """Like torch.func: `(grad, value)`, or `(grad, (value, aux))` with `has_aux`."""
    def impl(*args, **kwargs):
        return _value_and_grad(f, argnums, has_aux, "grad_and_value", args, kwargs)

    def finish(res):
        v, g, aux = res
        return (g, (v, aux)) if has_aux else (g, v)
    return _Transformed("grad_and_value", f, impl, (argnums, has_aux), compile, finish)


def vjp(f, *primals, has_aux=False, compile=True):
    """`(out, vjp_fn)` (or `(out, vjp_fn, aux)`): `vjp_fn(cotangents)` returns one gradient
    per primal (a tuple), cotangents having `out`'s structure; it may be called repeatedly.

    Compiled: `f` runs as a `tracegrad.compile`d function (cached per `f`) whose backward
    program `vjp_fn` runs.
    """
    from ..compiler import CompiledFunction
    run = _compiled("vjp", f, f, ()) if compile and not isinstance(f, CompiledFunction) else f
    connect = _mode.is_grad_enabled()
    pr = Primals(primals, tuple(range(len(primals))), connect)
    with _mode.enable_grad(), _levels.level(_levels.GRAD):
        result = run(*pr.args)
    out, aux = split_aux(result, has_aux, "vjp")
    outs, _ = tensor_leaves(out, "vjp(f, *primals)")
    outer = connect and depends_on_outer(outs + _aux_tensors(aux), pr.leaves)

    def vjp_fn(cotangents):
        cts, _ = flatten(cotangents)
        if len(cts) != len(outs):
            raise op_error(
                TracegradRuntimeError, None,
                "Expected pytree structure of cotangents to be the same as pytree structure "
                f"of outputs to the function: got {len(cts)} cotangent(s) for {len(outs)} "
                "output(s)")
        with _mode.enable_grad() if outer else contextlib.nullcontext():
            grads = _grads_or_zeros(outs, pr.leaves, cts, create_graph=outer, retain_graph=True)
        return tuple(pr.structure(grads))

    if not outer:
        out, aux = detach_tree(out), detach_tree(aux)
    return (out, vjp_fn, aux) if has_aux else (out, vjp_fn)


def _jacobian(f, argnums, has_aux, args, kwargs, api="jacrev"):
    """Eager core of jacrev (and jacfwd, `api`): one backward pass per output element."""
    from ..ops.creation import eye, zeros
    from ..ops.shape import stack
    nums, single = normalize_argnums(argnums, len(args))
    connect = _mode.is_grad_enabled()
    with _mode.enable_grad():
        pr = Primals(args, nums, connect)
        # torch computes jacfwd by vmap over jvp (Note [Functions under transforms])
        kinds = (_levels.VMAP, _levels.FORWARD) if api == "jacfwd" else (_levels.GRAD,)
        with _levels.level(*kinds):
            result = f(*pr.args, **kwargs)
        if api == "jacfwd":                      # torch's jacfwd runs jvp: its messages
            out, aux = _jacfwd_output(result, has_aux)
        else:
            out, aux = split_aux(result, has_aux, "jacrev")
        outs, build = tensor_leaves(out, "jacrev(f, argnums)")
        outer = connect and depends_on_outer(outs + _aux_tensors(aux), pr.leaves)
        per_out = []
        for o in outs:
            n = o.numel()
            if n == 0 or not o.requires_grad:
                jac = [zeros(tuple(o.shape) + tuple(x.shape), dtype=x.dtype) for x in pr.leaves]
            else:
                basis = eye(n, dtype=o.dtype)
                rows = [_grads_or_zeros([o], pr.leaves, [basis[i].reshape(o.shape)],
                                        create_graph=outer, retain_graph=True)
                        for i in range(n)]
                jac = [stack([r[k] for r in rows]).reshape(tuple(o.shape) + tuple(x.shape))
                       for k, x in enumerate(pr.leaves)]
            per_arg = pr.structure(jac)
            per_out.append(per_arg[0] if single else tuple(per_arg))
    res = build(per_out)
    if not outer:
        res, aux = detach_tree(res), detach_tree(aux)
    return res, aux


def _jacfwd_output(result, has_aux):
    """(output, aux) with torch.func.jacfwd's (that is, jvp's) checks and messages."""
    jvp_api = "jvp(f, primals, tangents)"
    if has_aux and not (isinstance(result, tuple) and len(result) == 2):
        raise op_error(TracegradRuntimeError, None,
            f"{jvp_api}: output of function f should be a tuple: (output, aux) if has_aux "
            "is True")
    out, aux = result if has_aux else (result, None)
    for x in flatten(out)[0]:
        if not isinstance(x, Tensor):
            raise op_error(TracegradRuntimeError, None,
                f"{jvp_api}: expected f(*primals) to return only tensors, got unsupported "
                f"type {type(x)}")
    return out, aux


def jacrev(f, argnums=0, has_aux=False, *, chunk_size=None, compile=True):
    """The Jacobian of `f` by reverse mode: for each output leaf of shape S and each
    differentiated input of shape T, a tensor of shape S + T (a tuple over `argnums` when it
    is a tuple), in the output's structure. With `has_aux`: `(jacobian, aux)`.
    `chunk_size` (None or a positive int) is checked as torch checks it; the result does not
    depend on it (one backward pass per output element either way)."""
    if chunk_size is not None and not (isinstance(chunk_size, int) and chunk_size > 0):
        raise op_error(TracegradValueError, None,
                       "jacrev: `chunk_size` should be greater than 0.")

    def impl(*args, **kwargs):
        return _jacobian(f, argnums, has_aux, args, kwargs)

    def finish(res):
        jac, aux = res
        return (jac, aux) if has_aux else jac
    return _Transformed("jacrev", f, impl, (argnums, has_aux), compile, finish)
