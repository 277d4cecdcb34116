"""Lowering rules of the selection, ordering, scan, structure, normalization, activation,
pooling, binary cross-entropy and sampling primitives (ops/gather_scatter.py, sort.py, scan.py,
structure.py, baddbmm.py, normalization.py, activation.py, pool.py, bce.py, sampling.py, and
`data` from ops/shape.py).

Each rule follows its numpy kernel step by step, so results agree exactly where the kernel's
result is exact: the order of sort/argsort/topk (stable; descending keeps ties in position
order; NaN is the largest value), max-pool indices (first maximum in window order, the last
NaN when a window holds NaNs), scatter with repeated indices (the last write wins, as numpy's
assignment), and multinomial samples. Index operands are bounds-checked at run time
(`ctx.check`: a call that indexes out of range re-runs on numpy and raises eager's error), as
are binary_cross_entropy's input range and multinomial's weights.

Multinomial is a random draw whose distribution reads traced values (the weights): its raw
random numbers (uniform or exponential, of a static shape) are drawn on the host from the
generator exactly as the kernel draws them, and the rule turns them into samples (Note [Host
draws] in lower.py).
"""
import jax.numpy as jnp
import numpy as np
from jax import lax

from ...ops.activation import SILU
from ...ops.baddbmm import BADDBMM
from ...ops.grad_scale import GRAD_SCALE_BACKWARD, GRAD_SCALED
from ...ops.bce import BCE, BCE_LOGITS
from ...ops.normalization import LAYER_NORM
from ...ops import pool as P
from ...ops.sampling import MULTINOMIAL
from ...ops.scan import CUMPROD, CUMSUM, acc_float
from ...ops.gather_scatter import (GATHER, INDEX_SELECT, MASKED_FILL, MASKED_FILL_TENSOR, SCATTER,
                           SCATTER_ADD, SCATTER_VALUE)
from ...ops.shape import DATA
from ...ops.scatter_reduce import SCATTER_REDUCE, _identity as _reduce_identity
from ...ops.sort import ARGSORT, SORT, SORT_STABLE, TOPK, TOPK_INDICES
from ...ops.structure import FLIP, TRIL, TRIU
from .table import Unsupported, host_draw, register, simple

_HI = lax.Precision.HIGHEST

simple(DATA, lambda x: x)


# ---------------- gather / scatter / index_select / masked_fill ----------------
def _in_range(ctx, index, size):
    """Runtime check: every index in [0, size) (negative indices are out of bounds too)."""
    if index.size:
        ctx.check(jnp.any((index < 0) | (index >= size)))


def _along(index, dim):
    """The index tuple of ops/gather_scatter.py's Note [Along a dim]: static positions, `index` in
    `dim`."""
    grid = list(np.indices(index.shape, sparse=True))
    grid[dim] = index
    return tuple(grid)


def _corner(a, shape):
    if tuple(a.shape) == tuple(shape):
        return a
    return a[tuple(slice(0, s) for s in shape)]


@register(GATHER)
def _gather(ctx, node, x, index):
    dim = node.attrs["dim"]
    if x.ndim == 0:
        _in_range(ctx, index, 1)
        return jnp.broadcast_to(x, index.shape)
    _in_range(ctx, index, x.shape[dim])
    return x[_along(index, dim)]


def _last_writes(x_shape, key, n):
    """For `n` updates at index tuple `key` (broadcast to the updates' shape), a bool per
    update: no later update (in C order) writes the same element. numpy's assignment keeps
    the last write; XLA's scatter does not promise which one it keeps."""
    shape = jnp.broadcast_shapes(*[jnp.shape(k) for k in key])
    flat = jnp.ravel_multi_index(tuple(jnp.broadcast_to(k, shape) for k in key), x_shape,
                                 mode="clip").reshape(-1)
    pos = jnp.arange(n)
    last = jnp.full((int(np.prod(x_shape, dtype=np.int64)),), -1, pos.dtype).at[flat].max(pos)
    return (last[flat] == pos).reshape(shape)


@register(SCATTER, SCATTER_VALUE)
def _scatter(ctx, node, x, index, src):
    dim = node.attrs["dim"]
    if x.ndim == 0:
        _in_range(ctx, index, 1)
        if not index.size:
            return x
        return jnp.asarray(src).reshape(-1)[-1] if jnp.ndim(src) else jnp.asarray(src)
    _in_range(ctx, index, x.shape[dim])
    key = _along(index, dim)
    vals = jnp.broadcast_to(jnp.asarray(src if jnp.ndim(src) == 0 else
                                        _corner(src, index.shape)).astype(x.dtype), index.shape)
    keep = _last_writes(x.shape, key, index.size)
    drop = tuple(jnp.where(keep, k, x.shape[d]) if d == dim else k for d, k in enumerate(key))
    return x.at[drop].set(vals, mode="drop")


@register(SCATTER_ADD)
def _scatter_add(ctx, node, x, index, src):
    dim = node.attrs["dim"]
    if x.ndim == 0:
        _in_range(ctx, index, 1)
        return x + jnp.sum(_corner(src, index.shape))
    _in_range(ctx, index, x.shape[dim])
    return x.at[_along(index, dim)].add(_corner(src, index.shape))   # repeats accumulate


@register(INDEX_SELECT)
def _index_select(ctx, node, x, index):
    dim = node.attrs["dim"]
    if x.ndim == 0:
        _in_range(ctx, index, 1)
        return x.reshape(1)[index.reshape(-1)].reshape(index.shape)
    _in_range(ctx, index, x.shape[dim])
    return jnp.take(x, index, axis=dim)


@register(MASKED_FILL, MASKED_FILL_TENSOR)
def _masked_fill(ctx, node, x, mask, value):
    return jnp.where(mask, jnp.asarray(value).astype(x.dtype), x)


# ---------------- sort / argsort / topk ----------------
def _order(ctx, x, dim, descending):
    """ops/sort.py's `_order`: a stable argsort; descending sorts the flipped input so ties
    keep ascending positions."""
    it = jnp.int64 if ctx.x64 else jnp.int32
    if x.ndim == 0:
        return jnp.zeros((), it)
    if not descending:
        return jnp.argsort(x, axis=dim, stable=True).astype(it)
    rev = jnp.argsort(jnp.flip(x, dim), axis=dim, stable=True)
    return (x.shape[dim] - 1 - jnp.flip(rev, dim)).astype(it)


def _take(x, idx, dim):
    return x if x.ndim == 0 else jnp.take_along_axis(x, idx, axis=dim)


def _first(idx, k, dim):
    return idx if idx.ndim == 0 else lax.slice_in_dim(idx, 0, k, axis=dim)


@register(SORT, SORT_STABLE)
def _sort(ctx, node, x):
    a = node.attrs
    return _take(x, _order(ctx, x, a["dim"], a["descending"]), a["dim"])


@register(ARGSORT)
def _argsort(ctx, node, x):
    return _order(ctx, x, node.attrs["dim"], node.attrs["descending"])


def _topk_indices(ctx, node, x):
    a = node.attrs
    return _first(_order(ctx, x, a["dim"], a["largest"]), a["k"], a["dim"])


register(TOPK_INDICES)(_topk_indices)


@register(TOPK)
def _topk(ctx, node, x):
    return _take(x, _topk_indices(ctx, node, x), node.attrs["dim"])


# ---------------- scans / structure / baddbmm ----------------
def _acc(ctx, x):
    if jnp.issubdtype(x.dtype, jnp.integer) or x.dtype == jnp.bool_:
        return jnp.int64 if ctx.x64 else jnp.int32
    return x.dtype


@register(CUMSUM)
def _cumsum(ctx, node, x):
    if x.ndim == 0:
        return x.astype(_acc(ctx, x))
    if jnp.issubdtype(x.dtype, jnp.floating):
        return _sequential_scan(ctx, node, x, jnp.add)
    return jnp.cumsum(x, axis=node.attrs["dim"], dtype=_acc(ctx, x))


@register(CUMPROD)
def _cumprod(ctx, node, x):
    if x.ndim == 0:
        return x.astype(_acc(ctx, x))
    if jnp.issubdtype(x.dtype, jnp.floating):
        return _sequential_scan(ctx, node, x, jnp.multiply)
    return jnp.cumprod(x, axis=node.attrs["dim"], dtype=_acc(ctx, x))


def scan_needs_x64(node):
    """A float32 scan accumulates in float64 (`acc_float`): its program runs with x64."""
    return node.prim in (CUMSUM, CUMPROD) and node.output.type.dtype.name == "float32"


def _sequential_scan(ctx, node, x, op):
    """A floating cumsum/cumprod as the numpy kernel computes it (ops/scan.py): element by
    element along the dim, in PyTorch's accumulation dtype, each result rounded (XLA's own
    cumsum adds in a tree order, which moved float16 results by an ulp)."""
    acc = np.dtype(acc_float(np.dtype(x.dtype)))
    if acc == np.float64 and not ctx.x64:
        raise Unsupported(node.prim, "a float64 accumulation outside x64 mode")
    dim = node.attrs["dim"]
    xs = jnp.moveaxis(x, dim, 0).astype(acc)

    def step(c, v):
        c = op(c, v)
        return c, c
    init = jnp.zeros if op is jnp.add else jnp.ones
    _, ys = lax.scan(step, init(xs.shape[1:], acc), xs, unroll=8)
    return jnp.moveaxis(ys, 0, dim).astype(x.dtype)


@register(TRIL)
def _tril(ctx, node, x):
    return jnp.tril(x, node.attrs["diagonal"])


@register(TRIU)
def _triu(ctx, node, x):
    return jnp.triu(x, node.attrs["diagonal"])


@register(FLIP)
def _flip(ctx, node, x):
    dims = tuple(node.attrs["dims"])
    return x if x.ndim == 0 or not dims else jnp.flip(x, dims)


@register(BADDBMM)
def _baddbmm(ctx, node, inp, b1, b2):
    beta, alpha = node.attrs["beta"], node.attrs["alpha"]
    prod = jnp.matmul(b1, b2, precision=_HI)
    dt = prod.dtype
    if alpha != 1:
        prod = (prod * alpha).astype(dt)
    if beta == 0:                       # input ignored: its nan and inf do not propagate
        return prod
    return (prod + (inp if beta == 1 else inp * beta)).astype(dt)


# ---------------- layer norm / silu / binary cross-entropy ----------------
@register(LAYER_NORM)
def _layer_norm(ctx, node, x, w, b):
    k, eps = node.attrs["ndim"], node.attrs["eps"]
    axes = tuple(range(x.ndim - k, x.ndim))
    acc = jnp.float32 if x.dtype == jnp.float16 else x.dtype   # half accumulates in float
    xa = x.astype(acc)
    xc = xa - jnp.mean(xa, axis=axes, keepdims=True, dtype=acc)
    var = jnp.mean(xc * xc, axis=axes, keepdims=True, dtype=acc)
    y = xc * (1.0 / jnp.sqrt(var + jnp.asarray(eps, acc)))
    if not isinstance(w, (int, float)):
        y = y * w
    if not isinstance(b, (int, float)):
        y = y + b
    return y.astype(x.dtype)


@register(SILU)
def _silu(ctx, node, x):
    return x / (1.0 + jnp.exp(-x))


def _reduce(loss, reduction):
    if reduction == "none":
        return loss
    return jnp.sum(loss) if reduction == "sum" else jnp.mean(loss, dtype=loss.dtype)


@register(BCE)
def _bce(ctx, node, x, t, w):
    if x.size:                          # eager raises: input outside [0, 1] (or NaN)
        ctx.check(~jnp.all((x >= 0) & (x <= 1)))
    lx = jnp.maximum(jnp.log(x), -100.0)
    l1x = jnp.maximum(jnp.log1p(-x), -100.0)
    loss = ((t - 1.0) * l1x - t * lx) * w
    return _reduce(loss.astype(x.dtype), node.attrs["reduction"])


@register(BCE_LOGITS)
def _bce_logits(ctx, node, x, t, w, pw):
    lw = (pw - 1.0) * t + 1.0
    sp = jnp.maximum(-x, 0.0) + jnp.log1p(jnp.exp(-jnp.abs(x)))
    loss = ((1.0 - t) * x + lw * sp) * w
    return _reduce(jnp.asarray(loss).astype(x.dtype), node.attrs["reduction"])


# ---------------- pooling ----------------
def _windows(x, a, low):
    """ops/pool.py's `_max_windows`: (*, OH, OW, kh*kw) window values of the padded input,
    in window order."""
    (kh, kw), (sh, sw), (dh, dw) = a["kernel_size"], a["stride"], a["dilation"]
    oh, ow = P._out_hw(x.shape[-2:], a)
    pads = []
    for n, o, k, s, p, d in zip(x.shape[-2:], (oh, ow), a["kernel_size"], a["stride"],
                                a["padding"], a["dilation"]):
        need = (o - 1) * s + d * (k - 1) + 1
        pads.append((p, max(0, need - n - p)))
    xp = jnp.pad(x, ((0, 0),) * (x.ndim - 2) + tuple(pads), constant_values=low)
    wins = [xp[..., i * dh:i * dh + sh * (oh - 1) + 1:sh, j * dw:j * dw + sw * (ow - 1) + 1:sw]
            for i in range(kh) for j in range(kw)]
    return jnp.stack(wins, -1), oh, ow


def _max_local(x, a):
    """(windows, position in its window of each maximum): the first maximum; the last NaN
    in a window holding NaNs."""
    low = -jnp.inf if jnp.issubdtype(x.dtype, jnp.floating) else jnp.iinfo(x.dtype).min
    win, oh, ow = _windows(x, a, low)
    local = jnp.argmax(win, axis=-1)
    if jnp.issubdtype(x.dtype, jnp.floating):
        nan = jnp.isnan(win)
        last = win.shape[-1] - 1 - jnp.argmax(nan[..., ::-1], axis=-1)
        local = jnp.where(nan.any(-1), last, local)
    return win, local, oh, ow


@register(P.MAX_POOL2D)
def _max_pool(ctx, node, x):
    win, local, _, _ = _max_local(x, node.attrs)
    return jnp.take_along_axis(win, local[..., None], -1)[..., 0]


@register(P.MAX_POOL2D_INDICES)
def _max_pool_indices(ctx, node, x):
    a = node.attrs
    _, local, oh, ow = _max_local(x, a)
    i, j = jnp.divmod(local, a["kernel_size"][1])
    rows = jnp.arange(oh)[:, None] * a["stride"][0] - a["padding"][0] + i * a["dilation"][0]
    cols = jnp.arange(ow)[None, :] * a["stride"][1] - a["padding"][1] + j * a["dilation"][1]
    return rows * x.shape[-1] + cols


@register(P.MAX_POOL2D_BACKWARD)
def _max_pool_backward(ctx, node, g, idx):
    """Scatter-add into the input planes; accumulates in float64 as the kernel's bincount."""
    size = tuple(node.attrs["input_size"])
    lead = g.shape[:-2]
    planes = int(np.prod(lead, dtype=np.int64))
    acc = jnp.float64 if ctx.x64 else g.dtype
    out = jnp.zeros((planes, size[0] * size[1]), acc)
    out = out.at[jnp.arange(planes)[:, None], idx.reshape(planes, -1)].add(
        g.reshape(planes, -1).astype(acc))
    return out.astype(g.dtype).reshape(lead + size)


@register(P.MAX_POOL2D_GATHER)
def _max_pool_gather(ctx, node, g, idx):
    lead = g.shape[:-2]
    vals = jnp.take_along_axis(g.reshape(lead + (-1,)), idx.reshape(lead + (-1,)), -1)
    return vals.reshape(idx.shape)


def _avg_attrs(node):
    a = dict(node.attrs)
    a.pop("input_size", None)
    return a


@register(P.AVG_POOL2D, P.ADAPTIVE_AVG_POOL2D)
def _avg_pool(ctx, node, x):
    a = _avg_attrs(node)
    if not jnp.issubdtype(x.dtype, jnp.floating):
        return _avg_pool_int(ctx, node, x, a)
    (mh, mw), scale = P._avg_matrices(x.shape[-2:], a)
    out = _window_sums(mh, x, mw)
    return out * jnp.asarray(scale, x.dtype) if scale != 1.0 else out


def _window_sums(mh, x, mw):
    """`mh @ x @ mw.T` with each window's own inf/nan (Note [Pooling by matmul] in pool.py)."""
    dt = x.dtype

    def mm(a, v, b):
        return jnp.matmul(jnp.matmul(jnp.asarray(a, dt), v, precision=_HI),
                          jnp.asarray(b.T, dt), precision=_HI)
    inh, inw = (mh != 0).astype(np.float32), (mw != 0).astype(np.float32)
    pos, neg, nan = (mm(inh, m.astype(dt), inw) > 0
                     for m in (jnp.isposinf(x), jnp.isneginf(x), jnp.isnan(x)))
    out = mm(mh, jnp.where(jnp.isfinite(x), x, jnp.zeros_like(x)), mw)
    out = jnp.where(pos, jnp.inf, jnp.where(neg, -jnp.inf, out))
    return jnp.where(nan | pos & neg, jnp.nan, out).astype(dt)


def _avg_pool_int(ctx, node, x, a):
    """Exact int64 window sums divided with truncation (the kernel's integer rule)."""
    if not ctx.x64:
        raise Unsupported(node.prim, "integer average pooling needs 64-bit sums")
    ((mh, dh), (mw, dw)), override = P._avg_windows_of(x.shape[-2:], a)
    i64 = jnp.int64
    total = jnp.matmul(jnp.matmul(jnp.asarray(mh, i64), x.astype(i64)), jnp.asarray(mw.T, i64))
    div = np.int64(override) if override else np.outer(dh, dw).astype(np.int64)
    return jnp.sign(total) * (jnp.abs(total) // jnp.asarray(div))


@register(P.AVG_POOL2D_BACKWARD, P.ADAPTIVE_BACKWARD)
def _avg_pool_backward(ctx, node, g):
    (mh, mw), scale = P._avg_matrices(tuple(node.attrs["input_size"]), _avg_attrs(node))
    out = _window_sums(mh.T, g, mw.T)
    return out * jnp.asarray(scale, g.dtype) if scale != 1.0 else out


# ---------------- multinomial ----------------
def _noise_spec(node):
    """Shape and dtype of the raw random numbers the kernel draws for `node`."""
    shape = node.inputs[1].type.shape
    rows = int(np.prod(shape[:-1], dtype=np.int64))
    if node.attrs["replacement"]:
        return (rows, node.attrs["num_samples"]), np.float64
    return (rows, shape[-1]), np.float64


@host_draw(MULTINOMIAL, _noise_spec)
def _multinomial_noise(node):
    """The kernel's own draw (same calls on the same generator, so the same numbers)."""
    gen, (shape, _) = node.inputs[0], _noise_spec(node)
    if node.attrs["replacement"]:
        return gen._rng.random(shape)
    return gen._rng.exponential(size=shape)


@register(MULTINOMIAL)
def _multinomial(ctx, node, gen, weights):
    if not ctx.x64:
        raise Unsupported(node.prim, "the kernel computes in float64")
    noise, a = ctx.draws[node], node.attrs
    p = weights.astype(jnp.float64)
    rows = p.reshape(-1, p.shape[-1])
    ctx.check(~jnp.all(jnp.isfinite(rows)) | jnp.any(rows < 0)
              | jnp.any(jnp.sum(rows, -1) <= 0))          # eager raises
    if a["replacement"]:
        cdf = _sequential_cumsum(rows)
        cdf = cdf / cdf[:, -1:]
        idx = jnp.sum(cdf[:, None, :] <= noise[:, :, None], -1)
        idx = jnp.minimum(idx, rows.shape[1] - 1)
    else:
        keys = noise / rows                               # zero weight: key inf, chosen last
        idx = jnp.argsort(keys, axis=1, stable=True)[:, :a["num_samples"]]
    return idx.astype(jnp.int64).reshape(p.shape[:-1] + (a["num_samples"],))


def _sequential_cumsum(rows):
    """Running sums along axis 1 added left to right, as numpy's cumsum (XLA's cumsum adds
    in another order, and a rounding difference could move a sample across a boundary)."""
    def step(acc, col):
        acc = acc + col
        return acc, acc
    _, cols = lax.scan(step, jnp.zeros(rows.shape[:1], rows.dtype), rows.T, unroll=8)
    return cols.T


# ---------------- scatter_reduce (ops/scatter_reduce.py) ----------------
@register(SCATTER_REDUCE)
def _scatter_reduce(ctx, node, x, index, src):
    dim, reduce, inc = (node.attrs[k] for k in ("dim", "reduce", "include_self"))
    squeeze = x.ndim == 0
    if squeeze:
        x, index, src, dim = x.reshape(1), index.reshape(-1), jnp.reshape(src, -1), 0
        src = src[:index.size]
    _in_range(ctx, index, x.shape[dim])
    key = _along(index, dim)
    s = _corner(src, index.shape).astype(x.dtype)
    if not inc:
        x = x.at[key].set(jnp.asarray(_reduce_identity(reduce, np.dtype(x.dtype)), x.dtype))
    at = x.at[key]
    out = {"sum": at.add, "mean": at.add, "prod": at.multiply, "amax": at.max,
           "amin": at.min}[reduce](s)
    if reduce == "amax" or reduce == "amin":       # XLA's max/min drop NaN; numpy's keep it
        if jnp.issubdtype(x.dtype, jnp.floating):
            nan = jnp.zeros(x.shape, bool).at[key].max(jnp.isnan(s)) | jnp.isnan(x)
            out = jnp.where(nan, jnp.nan, out)
    if reduce == "mean":
        count = jnp.full(x.shape, 1 if inc else 0, jnp.int32).at[key].add(1)
        count = jnp.maximum(count, 1)
        out = ((out / count).astype(x.dtype) if jnp.issubdtype(x.dtype, jnp.floating)
               else jnp.floor_divide(out, count.astype(x.dtype)))
    return out.reshape(()) if squeeze else out


register(GRAD_SCALED)(lambda ctx, node, x, scale: x)    # the scaling is its VJP's
register(GRAD_SCALE_BACKWARD)(lambda ctx, node, g, scale: g * scale)
