"""Forward-mode transforms: `jvp`, `jacfwd`, `hessian` (torch.func's signatures and results).

tracegrad has no forward-mode autodiff; these are computed exactly from reverse mode:

- `jvp` by the double-VJP trick. With `u` a dummy cotangent (a zero leaf requiring grad),
  `g(u) = J^T u` is linear in `u`, so the VJP of `g` with respect to `u` along the tangent
  `t` is `J t`, the Jacobian-vector product. This needs the first VJP recorded with
  `create_graph=True`, which tracegrad's VJP rules (written in tracegrad ops) support.
- `jacfwd` is the Jacobian, which does not depend on the mode that computes it: the same
  implementation as `jacrev` (one backward pass per output element), with jacfwd's argument
  checks, messages and `randomness` option. With randomness='different', torch draws anew
  per Jacobian column; here the function runs once, so every column sees the same draw.
- `hessian(f, argnums)` is `jacfwd(jacrev(f, argnums), argnums)`, as in torch.func.

Compiled by default, like the other transforms (`compile=False` runs eagerly).
"""
from .. import _func_levels as _levels, _mode
from .._errors import TracegradRuntimeError, TracegradValueError, op_error
from .._rng_guard import forbid_random
from .._tensor import Tensor
from ..autograd.api import grad as _autograd_grad
from ..tracing import flatten
from ._args import Primals, depends_on_outer, detach_tree, normalize_argnums
from ._transforms import _aux_tensors, _compiled, _jacobian, _Transformed, jacrev

_JVP = "jvp(f, primals, tangents)"
RANDOMNESS = ("error", "different", "same")


def _err(cls, msg):
    return op_error(cls, None, msg)


def _spec(obj):
    """A comparable description of a tuple/list/dict nesting (leaves are `*`)."""
    if isinstance(obj, (tuple, list)):
        return (type(obj).__name__, tuple(_spec(x) for x in obj))
    if isinstance(obj, dict):
        return ("dict", tuple((k, _spec(v)) for k, v in obj.items()))
    return "*"


def check_float_primals(leaves):
    for t in leaves:
        if isinstance(t, Tensor) and not (t.dtype.is_floating_point
                                         or getattr(t.dtype, "is_complex", False)):
            raise _err(TracegradValueError,
                f"Expected primal to be floating point or complex, but got: {t.dtype}")


def _check_jvp_args(primals, tangents):
    if not isinstance(primals, tuple):
        raise _err(TracegradRuntimeError,
            f"{_JVP}: Expected primals to be a tuple. E.g. it should be valid to call "
            "f(*primals).")
    if _spec(primals) != _spec(tangents):
        raise _err(TracegradRuntimeError,
            f"{_JVP}: Expected primals and tangents to have the same python structure. For "
            "example, if primals is a tuple of 3 tensors, tangents also must be. Got primals "
            f"with structure {_spec(primals)} and tangents with structure {_spec(tangents)}")
    p_leaves, t_leaves = flatten(primals)[0], flatten(tangents)[0]
    if not p_leaves:
        raise _err(TracegradRuntimeError, f"{_JVP}: Expected primals to contain at least one "
                                          "Tensor.")
    for what, leaves in (("primals", p_leaves), ("tangents", t_leaves)):
        for x in leaves:
            if not isinstance(x, Tensor):
                raise _err(TracegradRuntimeError,
                    f"{_JVP}: Expected {what} to only contain Tensors, got {type(x)}")
    check_float_primals(p_leaves)
    for p, t in zip(p_leaves, t_leaves):
        if tuple(p.shape) != tuple(t.shape):
            raise _err(TracegradRuntimeError,
                "Trying to set a forward gradient that has a different size than that of the "
                "original Tensor, this is not supported. Tensor is of size "
                f"{list(p.shape)} while the given forward gradient is of size {list(t.shape)}.")
    return t_leaves


def _split_jvp_aux(result, has_aux):
    if not has_aux:
        return result, None
    if not (isinstance(result, tuple) and len(result) == 2):
        raise _err(TracegradRuntimeError,
            f"{_JVP}: output of function f should be a tuple: (output, aux) if has_aux is True")
    return result


def jvp_core(outs, leaves, tangents, create_graph):
    """J t for each output in `outs` (tensors), J = d outs / d leaves, by double VJP."""
    from ..ops.creation import zeros_like
    with _mode.enable_grad():
        live = [i for i, o in enumerate(outs) if o.requires_grad]
        us = [zeros_like(outs[i]).requires_grad_() for i in live]
        res = [None] * len(outs)
        if live:
            gs = _autograd_grad([outs[i] for i in live], leaves, us, create_graph=True,
                                allow_unused=True)
            pairs = [(g, t.to(g.dtype)) for g, t in zip(gs, tangents)
                     if g is not None and g.requires_grad]
            if pairs:
                jv = _autograd_grad([g for g, _ in pairs], us, [t for _, t in pairs],
                                    create_graph=create_graph, allow_unused=True)
                for i, j in zip(live, jv):
                    res[i] = j
    return [zeros_like(o) if j is None else j for o, j in zip(outs, res)]


def _jvp(f, primals, tangents, has_aux):
    """Eager core of jvp: (output, jvp_out, aux)."""
    t_leaves = _check_jvp_args(primals, tangents)
    connect = _mode.is_grad_enabled()
    with _mode.enable_grad():
        pr = Primals(primals, tuple(range(len(primals))), connect)
        with _levels.level(_levels.FORWARD):
            result = f(*pr.args)
        out, aux = _split_jvp_aux(result, has_aux)
        outs, build = flatten(out)
        for o in outs:
            if not isinstance(o, Tensor):
                raise _err(TracegradRuntimeError,
                    f"{_JVP}: expected f(*primals) to return only tensors, got unsupported "
                    f"type {type(o)}")
        outer = connect and depends_on_outer(outs + _aux_tensors(aux), pr.leaves)
        jv = jvp_core(outs, pr.leaves, t_leaves, create_graph=outer)
    out, jv = build(outs), build(jv)
    if not outer:
        out, jv, aux = detach_tree(out), detach_tree(jv), detach_tree(aux)
    return out, jv, aux


def jvp(func, primals, tangents, *, strict=False, has_aux=False, compile=True):
    """`(func(*primals), J @ tangents)` (with `has_aux`: `(output, jvp_out, aux)`).

    `primals` is a tuple of arguments (each a tensor or a tuple/list/dict of tensors) and
    `tangents` has the same structure; `jvp_out` has the output's structure. Computed exactly
    by the double-VJP trick (see the module docstring). `strict` is accepted for torch
    compatibility (torch.func ignores it too).

    >>> out, jv = tg.func.jvp(tg.sin, (x,), (tg.ones_like(x),))     # jv == cos(x)
    """
    def impl(primals, tangents):
        return _jvp(func, primals, tangents, has_aux)
    impl.__name__ = impl.__qualname__ = f"jvp_{getattr(func, '__name__', 'f')}"
    run = _compiled("jvp_fwd", func, impl, (has_aux,)) if compile else impl
    if compile and not isinstance(primals, tuple):
        _check_jvp_args(primals, tangents)       # the message, not a compile argument error
    if compile:
        tangents = _unalias(primals, tangents)
    out, jv, aux = run(primals, tangents)
    return (out, jv, aux) if has_aux else (out, jv)


def _unalias(primals, tangents):
    """Tangents with any tensor that is also a primal (`jvp(f, (x,), (x,))`) cloned: the
    compiled implementation would otherwise run eagerly for aliased arguments."""
    ids = {id(p) for p in flatten(primals)[0]}
    leaves, build = flatten(tangents)
    if not any(id(t) in ids for t in leaves):
        return tangents
    return build([t.clone() if id(t) in ids else t for t in leaves])


def _check_randomness(randomness):
    if randomness not in RANDOMNESS:
        raise _err(TracegradRuntimeError,
            "Only allowed values for randomness are 'error', 'different', or 'same'. Got "
            f"{randomness}")


def jacfwd(func, argnums=0, has_aux=False, *, randomness="error", compile=True):
    """The Jacobian of `func` with respect to the arguments at `argnums`, in torch.func.jacfwd's
    structure (the same as jacrev's: per output leaf, per argnum, shape out + in).

    Values equal jacrev's (the Jacobian is computed by reverse mode; see the module
    docstring). `randomness='error'` (the default) makes a random draw inside `func` raise, as
    torch does; 'same' and 'different' allow it (one draw for all columns).

    >>> tg.func.jacfwd(lambda x: x ** 2)(tg.tensor([1., 2.]))   # diag([2., 4.])
    """
    def impl(*args, **kwargs):
        _check_randomness(randomness)
        nums, _ = normalize_argnums(argnums, len(args))
        for a in nums:
            check_float_primals(flatten(args[a])[0])
        with forbid_random(randomness == "error"):
            return _jacobian(func, argnums, has_aux, args, kwargs, api="jacfwd")

    def finish(res):
        jac, aux = res
        return (jac, aux) if has_aux else jac
    return _Transformed("jacfwd", func, impl, (argnums, has_aux, randomness), compile, finish)


def hessian(func, argnums=0, *, compile=True):
    """The Hessian of scalar `func`: `jacfwd(jacrev(func, argnums), argnums)`, as torch.func
    defines it (for a non-scalar output, one Hessian per output element).

    >>> tg.func.hessian(lambda x: (x ** 3).sum())(tg.tensor([1., 2.]))   # diag([6., 12.])
    """
    return jacfwd(jacrev(func, argnums, compile=compile), argnums, compile=compile)
