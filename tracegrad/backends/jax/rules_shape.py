"""Lowering rules of the shape and indexing primitives (ops/shape.py).

Views become values (the functional IR has no writes left, so a view is just its contents).
Index keys hold slices, ints, None, Ellipsis and `Slot(k)` placeholders for the k-th index
operand; jax indexes like numpy, so a key lowers by filling its slots. Integer index arrays
are bounds-checked at run time (numpy raises where XLA would clamp): a call that indexes out of
range re-runs on the numpy backend and raises eager's IndexError. A boolean mask selects a
data-dependent number of elements, which XLA cannot express: those nodes are unsupported.
`view_scatter` (a write through a chain of views) becomes one scatter at static flat
positions, found by running the chain's numpy kernels on `arange` at lowering time.
"""
import jax.numpy as jnp
import numpy as np

from ...ops import shape as S
from .table import Unsupported, register, simple


@register(S.SUM_TO)
def _sum_to(ctx, node, x):
    shape = tuple(node.attrs["shape"])
    lead = x.ndim - len(shape)
    axes = tuple(range(lead)) + tuple(lead + i for i, s in enumerate(shape)
                                      if s == 1 and x.shape[lead + i] != 1)
    return jnp.sum(x, axis=axes, keepdims=True).reshape(shape) if axes else x.reshape(shape)


@register(S.EXPAND)
def _expand(ctx, node, x):
    return jnp.broadcast_to(x, tuple(node.attrs["shape"]))


@register(S.VIEW, S.RESHAPE_ALIAS, S.SQUEEZE, S.SQUEEZE_DIM, S.SQUEEZE_DIMS, S.UNSQUEEZE)
def _reshape(ctx, node, x):
    return jnp.reshape(x, tuple(node.attrs["shape"]))


@register(S.PERMUTE, S.TRANSPOSE, S.T_)
def _permute(ctx, node, x):
    return jnp.transpose(x, tuple(node.attrs["perm"]))


simple(S.CLONE, lambda x: x)
simple(S.DETACH, lambda x: x)
simple(S.NOGRAD_WRITE, lambda old, new: new)


@register(S.TO_COPY)
def _to(ctx, node, x):
    return x.astype(node.attrs["dtype"])


@register(S.CAT)
def _cat(ctx, node, *xs):
    return jnp.concatenate(xs, axis=node.attrs["dim"])


@register(S.STACK)
def _stack(ctx, node, *xs):
    return jnp.stack(xs, axis=node.attrs["dim"])


@register(S.REPEAT)
def _repeat(ctx, node, x):
    reps = tuple(node.attrs["reps"])
    return jnp.tile(x.reshape((1,) * (len(reps) - x.ndim) + x.shape), reps)


@register(S.SLICE, S.SELECT)
def _view(ctx, node, x):
    key = tuple(node.attrs["key"])
    if Ellipsis not in key:
        key = key + (Ellipsis,)
    return x[key]


def _fill_key(ctx, node, shape, key, idx):
    """The jax index tuple for `key` with its slots filled by `idx`; bounds-checks integer
    index arrays against the dimension each one indexes."""
    out = []
    consumed = sum(1 for k in key if k is not None and k is not Ellipsis)
    dim = 0
    for k in key:
        if k is Ellipsis:
            dim += len(shape) - consumed
            out.append(k)
        elif k is None:
            out.append(k)
        elif isinstance(k, S.Slot):
            a = idx[k.k]
            if a.dtype == jnp.bool_:
                raise Unsupported(node.prim, "a boolean mask selects a data-dependent count")
            n = shape[dim]
            ctx.check(jnp.any((a < -n) | (a >= n)))
            out.append(a)
            dim += 1
        elif isinstance(k, np.ndarray):
            if k.dtype == np.bool_:
                raise Unsupported(node.prim, "a boolean mask selects a data-dependent count")
            out.append(jnp.asarray(k))
            dim += 1
        else:
            out.append(k)
            dim += 1
    return tuple(out)


@register(S.INDEX)
def _index(ctx, node, x, *idx):
    return x[_fill_key(ctx, node, x.shape, node.attrs["key"], idx)]


@register(S.INDEX_BACKWARD)
def _index_backward(ctx, node, g, *idx):
    shape = tuple(node.attrs["shape"])
    key = _fill_key(ctx, node, shape, node.attrs["key"], idx)
    return jnp.zeros(shape, g.dtype).at[key].add(g)        # repeated indices accumulate


@register(S.INDEX_PUT)
def _index_put(ctx, node, x, v, *idx):
    key = _fill_key(ctx, node, x.shape, node.attrs["key"], idx)
    return x.at[key].set(jnp.asarray(v).astype(x.dtype))


@register(S.VIEW_SCATTER)
def _view_scatter(ctx, node, base, src):
    pos = np.arange(base.size, dtype=np.int32 if base.size < 2 ** 31 else np.int64)
    pos = pos.reshape(base.shape)
    for prim, attrs in node.attrs["chain"]:
        pos = np.asarray(prim.kernel(pos, **attrs))
    vals = jnp.broadcast_to(jnp.asarray(src).astype(base.dtype), pos.shape)
    flat = base.reshape(-1).at[jnp.asarray(pos.reshape(-1))].set(vals.reshape(-1))
    return flat.reshape(base.shape)


@register(S.NONZERO)
def _nonzero(ctx, node, x):
    raise Unsupported(node.prim, "how many elements are nonzero is data")
