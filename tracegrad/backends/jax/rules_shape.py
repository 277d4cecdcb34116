"""Lowering rules of the shape and indexing primitives (ops/shape.py).

Views become values (the functional IR has no writes left, so a view is just its contents).
Index keys hold slices, ints, None, Ellipsis and `Slot(k)` placeholders for the k-th index
operand; jax indexes like numpy, so a key lowers by filling its slots. Integer index arrays
are bounds-checked at run time (numpy raises where XLA would clamp): a call that indexes out of
range re-runs on the numpy backend and raises eager's IndexError. A boolean mask selects a
data-dependent number of elements: it is lowered for the count seen while tracing, which the
path's shape guard checks (Note [Data-dependent shapes] in lower.py); a mask mixed with other
index arrays is unsupported.
`view_scatter` (a write through a chain of views) becomes one scatter at static flat
positions, found by running the chain's numpy kernels on `arange` at lowering time.
"""
import importlib

import jax.numpy as jnp
import numpy as np

from ...ops import diagonal_view as DG
from ...ops import shape as S
from .table import Unsupported, register, simple

AST = importlib.import_module("tracegrad.ops.as_strided")   # ops.as_strided names the function


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
    dtype = np.dtype(node.attrs["dtype"])
    if dtype.kind in "iu" and jnp.issubdtype(x.dtype, jnp.floating):
        return _float_to_int(x, dtype)
    return x.astype(dtype)


def _float_to_int(x, dtype):
    """numpy's (and PyTorch's, on x86) conversion of floats to an integer dtype, where XLA's
    saturates: a NaN, infinite or out-of-range value becomes the most negative value of a
    64- or 32-bit integer (truncation, `cvtt*2si`), and narrower integers take the 32-bit
    result modulo their width (`-1.0` -> uint8 255, `300.0` -> 44, NaN -> 0)."""
    if x.dtype.itemsize < 4:                 # float16, bfloat16: exact in float32
        x = x.astype(jnp.float32)
    wide = np.dtype(np.int64 if dtype.itemsize == 8 else np.int32)
    info = np.iinfo(wide)
    bad = jnp.isnan(x) | (x >= -float(info.min)) | (x < float(info.min))
    out = jnp.where(bad, jnp.asarray(info.min, wide), x.astype(wide))
    return out if wide == dtype else out.astype(dtype)


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


def _fill_key(ctx, node, shape, key, idx, count=None):
    """The jax index tuple for `key` with its slots filled by `idx`; bounds-checks integer
    index arrays against the dimension each one indexes. A boolean mask becomes the index
    arrays of its first `count` True elements (Note [Data-dependent shapes] in lower.py)."""
    out = []
    consumed = sum(_width(k, idx) for k in key if k is not None and k is not Ellipsis)
    dim = 0
    for k in key:
        if k is Ellipsis:
            dim += len(shape) - consumed
            out.append(k)
        elif k is None:
            out.append(k)
        elif isinstance(k, (S.Slot, np.ndarray)):
            a = idx[k.k] if isinstance(k, S.Slot) else jnp.asarray(k)
            if a.dtype == jnp.bool_:
                if count is None:
                    raise Unsupported(node.prim, "a boolean mask selects a data-dependent count")
                out += list(jnp.nonzero(a, size=count, fill_value=0))
                dim += a.ndim
                continue
            n = shape[dim]
            ctx.check(jnp.any((a < -n) | (a >= n)))
            out.append(a)
            dim += 1
        else:
            out.append(k)
            dim += 1
    return tuple(out)


def _width(k, idx):
    """How many dimensions key entry `k` consumes."""
    a = idx[k.k] if isinstance(k, S.Slot) else k
    return a.ndim if getattr(a, "dtype", None) == jnp.bool_ else 1


def _mask_of(node, key, idx):
    """The one boolean mask operand of an index key (None when there is none); Unsupported
    when a mask is combined with other index arrays (their broadcast is not handled)."""
    masks = [k for k in key if isinstance(k, S.Slot) and idx[k.k].dtype == jnp.bool_]
    masks += [k for k in key if isinstance(k, np.ndarray) and k.dtype == np.bool_]
    if not masks:
        return None
    if len([k for k in key if isinstance(k, (S.Slot, np.ndarray))]) > 1:
        raise Unsupported(node.prim, "a boolean mask together with other index arrays")
    return masks[0]


def _masked_dim(prim, shape, key, idx, out_shape):
    """(count, position of the selected dimension in the result) for `x[key]` with one mask,
    from the result's static shape: numpy's result with 1 and with 2 selected elements. A
    zero-dim mask (`s[s > 0]` of a 0-d `s`) selects no dimension this finds: Unsupported
    (the path runs on the numpy backend)."""
    dummy = np.broadcast_to(np.zeros((), np.int8), shape)

    def result(n):
        k2 = []
        for k in key:
            if isinstance(k, (S.Slot, np.ndarray)):
                nd = (idx[k.k] if isinstance(k, S.Slot) else k).ndim
                k2 += [np.zeros(n, np.intp)] * nd
            else:
                k2.append(k)
        return dummy[tuple(k2)].shape
    s1, s2 = result(1), result(2)
    p = next((i for i, (a, b) in enumerate(zip(s1, s2)) if a != b), None)
    if p is None:
        raise Unsupported(prim, "a zero-dim boolean mask")
    rest = int(np.prod(s1, dtype=np.int64))
    if rest == 0:
        return None, p
    return int(np.prod(out_shape, dtype=np.int64)) // rest, p


@register(S.INDEX)
def _index(ctx, node, x, *idx):
    key = node.attrs["key"]
    mask = _mask_of(node, key, idx)
    if mask is None:
        return x[_fill_key(ctx, node, x.shape, key, idx)]
    out_shape = node.output.type.shape
    count, p = _masked_dim(node.prim, x.shape, key, idx, out_shape)
    if count is None:
        raise Unsupported(node.prim, "a boolean mask on an empty selection")
    m = idx[mask.k] if isinstance(mask, S.Slot) else jnp.asarray(mask)
    dims = list(out_shape)
    dims[p] = jnp.count_nonzero(m)
    ctx.actual_shape(node.output, dims)
    return x[_fill_key(ctx, node, x.shape, key, idx, count)]


@register(S.INDEX_BACKWARD)
def _index_backward(ctx, node, g, *idx):
    shape, key = tuple(node.attrs["shape"]), node.attrs["key"]
    count = None
    if _mask_of(node, key, idx) is not None:
        count, _ = _masked_dim(node.prim, shape, key, idx, g.shape)
    key = _fill_key(ctx, node, shape, key, idx, count)
    return jnp.zeros(shape, g.dtype).at[key].add(g)        # repeated indices accumulate


@register(S.INDEX_PUT)
def _index_put(ctx, node, x, v, *idx):
    key = node.attrs["key"]
    mask = _mask_of(node, key, idx)
    v = jnp.asarray(v).astype(x.dtype)
    if mask is not None and isinstance(mask, S.Slot) and len(key) == 1 and v.ndim == 0:
        m = idx[mask.k]                      # `x[mask] = value`: a select, any count
        return jnp.where(m.reshape(m.shape + (1,) * (x.ndim - m.ndim)), v, x)
    count = None
    if mask is not None:
        mv = node.inputs[2 + mask.k] if isinstance(mask, S.Slot) else None
        count = ctx.mask_counts.get(mv)
    return x.at[_fill_key(ctx, node, x.shape, key, idx, count)].set(v)


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
    """Indices of the traced number of nonzero elements (Note [Data-dependent shapes])."""
    if x.ndim == 0:
        raise Unsupported(node.prim, "nonzero of a 0-d tensor")
    count = node.output.type.shape[0]
    ctx.mask_counts[node.inputs[0]] = count
    ctx.actual_shape(node.output, [jnp.count_nonzero(x), x.ndim])
    return jnp.stack(jnp.nonzero(x, size=count, fill_value=0), axis=1)


@register(DG.DIAGONAL)
def _diagonal(ctx, node, x):
    a = node.attrs
    return jnp.diagonal(x, a["offset"], a["dim1"], a["dim2"])


@register(DG.DIAGONAL_BACKWARD)
def _diagonal_backward(ctx, node, g):
    # the flat positions of the diagonal, found on numpy's `arange` at lowering time
    a, shape = node.attrs, tuple(node.attrs["shape"])
    pos = np.diagonal(np.arange(int(np.prod(shape))).reshape(shape), a["offset"], a["dim1"],
                      a["dim2"])
    z = jnp.zeros(int(np.prod(shape)), g.dtype)
    return z.at[pos.reshape(-1)].set(g.reshape(-1)).reshape(shape)


# as_strided (ops/as_strided.py): the input's row-major elements at the view's positions
@register(AST.AS_STRIDED)
def _as_strided(ctx, node, x):
    a = node.attrs
    pos = AST._positions(a["size"], a["stride"], a["offset"])
    return jnp.reshape(x, (-1,))[pos.reshape(-1)].reshape(tuple(a["size"]))
