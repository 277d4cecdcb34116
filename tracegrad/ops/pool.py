"""Pooling primitives over (*, H, W), batched (N, C, H, W) or unbatched (C, H, W): max pooling
and (adaptive) average pooling.

Max pooling. `max_pool2d` (grad_fn MaxPool2DWithIndicesBackward0) returns the window maxima;
`max_pool2d_indices` (not differentiable) the flat position `h * W + w` of each maximum in its
input plane, the first one in window order on ties, the last NaN winning as in PyTorch. The VJP
routes gradients through two mutually adjoint linear primitives over those indices:
`max_pool2d_backward` (scatter-add into the input plane) and `max_pool2d_gather`, so gradients
of every order come from these declarations.

Average pooling is separable: each output is the mean over a rectangle whose rows depend only
on the output row and whose columns only on the output column, and PyTorch's divisor is a
product of a row count and a column count. So `avg_pool2d(x) = Ah @ x @ Aw.T` with
(OH, H) and (OW, W) weight matrices built from the attributes; its adjoint is
`Ah.T @ g @ Aw`. `avg_pool2d` / `adaptive_avg_pool2d` and their `_backward` primitives are
each other's VJP (AvgPool2DBackward0, AdaptiveAvgPool2DBackward0).

Attributes are tuples of Python ints (pairs for (h, w)) and bools; `input_size` is (H, W).
"""
import numpy as np

from .._dispatch import dispatch
from .elementwise import _quiet
from .primitive import Primitive


def out_len(n, k, s, p, d, ceil_mode):
    """PyTorch's pooling output length for one spatial dim."""
    span = n + 2 * p - d * (k - 1) - 1 + (s - 1 if ceil_mode else 0)
    out = span // s + 1
    if ceil_mode and (out - 1) * s >= n + p:
        out -= 1
    return out


def _out_hw(size, a):
    return tuple(out_len(n, k, s, p, d, a["ceil_mode"]) for n, k, s, p, d in
                 zip(size, a["kernel_size"], a["stride"], a["padding"], a.get("dilation", (1, 1))))


# ---------------- max pooling ----------------

def _max_windows(x, kernel_size, stride, padding, dilation, ceil_mode):
    """(window values (*, OH, OW, kh*kw), OH, OW) of the input padded with -inf (integers:
    the dtype's minimum; every window holds at least one real element)."""
    a = {"kernel_size": kernel_size, "stride": stride, "padding": padding,
         "dilation": dilation, "ceil_mode": ceil_mode}
    oh, ow = _out_hw(x.shape[-2:], a)
    pads = []
    for n, o, k, s, p, d in zip(x.shape[-2:], (oh, ow), kernel_size, stride, padding, dilation):
        need = (o - 1) * s + d * (k - 1) + 1
        pads.append((p, max(0, need - n - p)))
    low = -np.inf if x.dtype.kind == "f" else np.iinfo(x.dtype).min
    xp = np.pad(x, ((0, 0),) * (x.ndim - 2) + tuple(pads), constant_values=low)
    (kh, kw), (sh, sw), (dh, dw) = kernel_size, stride, dilation
    span = (dh * (kh - 1) + 1, dw * (kw - 1) + 1)
    win = np.lib.stride_tricks.sliding_window_view(xp, span, axis=(-2, -1))
    win = win[..., :sh * (oh - 1) + 1:sh, :sw * (ow - 1) + 1:sw, ::dh, ::dw]
    return win.reshape(win.shape[:-2] + (kh * kw,)), oh, ow


def _argmax(win):
    """First maximum of each window; in a window holding NaNs, the last NaN (PyTorch's CPU
    rule: a value replaces the maximum when greater, or when it is NaN)."""
    nan = np.isnan(win)
    local = np.argmax(win, axis=-1)
    if nan.any():
        last = win.shape[-1] - 1 - np.argmax(nan[..., ::-1], axis=-1)
        local = np.where(nan.any(-1), last, local)
    return local


def _max_kernel(x, kernel_size, stride, padding, dilation, ceil_mode):
    win, _, _ = _max_windows(x, kernel_size, stride, padding, dilation, ceil_mode)
    local = _argmax(win)
    return np.take_along_axis(win, local[..., None], -1)[..., 0].astype(x.dtype, copy=True)


def _indices_kernel(x, kernel_size, stride, padding, dilation, ceil_mode):
    win, oh, ow = _max_windows(x, kernel_size, stride, padding, dilation, ceil_mode)
    local = _argmax(win)
    kw = kernel_size[1]
    i, j = np.divmod(local, kw)
    rows = np.arange(oh)[:, None] * stride[0] - padding[0] + i * dilation[0]
    cols = np.arange(ow)[None, :] * stride[1] - padding[1] + j * dilation[1]
    return (rows * x.shape[-1] + cols).astype(np.int64)


def _scatter_kernel(g, idx, input_size):
    lead = g.shape[:-2]
    planes, plane = int(np.prod(lead)), input_size[0] * input_size[1]
    base = (np.arange(planes, dtype=np.int64) * plane).reshape(lead + (1, 1))
    flat = np.bincount((idx + base).ravel(), weights=g.ravel(), minlength=planes * plane)
    return flat.astype(g.dtype).reshape(lead + tuple(input_size))


def _gather_kernel(g, idx):
    lead = g.shape[:-2]
    vals = np.take_along_axis(g.reshape(lead + (-1,)), idx.reshape(lead + (-1,)), -1)
    return vals.reshape(idx.shape)


def _max_vjp(g, ins, out, n):
    idx = dispatch(MAX_POOL2D_INDICES, (ins[0],), n.attrs)
    return (max_pool2d_backward(g, idx, n.shapes[0][-2:]),)


def _scatter_vjp(g, ins, out, n):
    return (dispatch(MAX_POOL2D_GATHER, (g, ins[1])), None)


def _gather_vjp(g, ins, out, n):
    return (max_pool2d_backward(g, ins[1], n.shapes[0][-2:]), None)


def _pool_shape(shapes, attrs):
    """(*, H, W) -> (*, OH, OW)."""
    return tuple(shapes[0][:-2]) + _out_hw(shapes[0][-2:], attrs)


def _scatter_shape(shapes, attrs):
    return tuple(shapes[0][:-2]) + tuple(attrs["input_size"])


def _gather_shape(shapes, attrs):
    return tuple(shapes[1])


MAX_POOL2D = Primitive("max_pool2d", _max_kernel, vjp=_max_vjp, saves=(0,),
                       grad_fn_name="MaxPool2DWithIndicesBackward0", shape_rule=_pool_shape)
MAX_POOL2D_INDICES = Primitive("max_pool2d_indices", _indices_kernel, nondiff=True,
                               shape_rule=_pool_shape)
MAX_POOL2D_BACKWARD = Primitive("max_pool2d_backward", _scatter_kernel, vjp=_scatter_vjp,
                                saves=(1,), shape_rule=_scatter_shape,
                                grad_fn_name="MaxPool2DWithIndicesBackwardBackward0")
MAX_POOL2D_GATHER = Primitive("max_pool2d_gather", _gather_kernel, vjp=_gather_vjp, saves=(1,),
                              shape_rule=_gather_shape, grad_fn_name="GatherBackward0")


def max_pool2d_backward(g, idx, input_size):
    """Scatter-add `g` into planes of `input_size` at the flat positions `idx`."""
    return dispatch(MAX_POOL2D_BACKWARD, (g, idx),
                    {"input_size": tuple(int(i) for i in input_size)})


def _max_attrs(kernel_size, stride, padding, dilation, ceil_mode):
    return {"kernel_size": kernel_size, "stride": stride, "padding": padding,
            "dilation": dilation, "ceil_mode": bool(ceil_mode)}


def max_pool2d(input, kernel_size, stride, padding, dilation, ceil_mode, return_indices=False):
    """The primitive on (*, H, W); pairs of ints already checked (see nn.functional)."""
    a = _max_attrs(kernel_size, stride, padding, dilation, ceil_mode)
    out = dispatch(MAX_POOL2D, (input,), a)
    if return_indices:
        return out, dispatch(MAX_POOL2D_INDICES, (input,), a)
    return out


# ---------------- average pooling ----------------

def _avg_windows(n, o, k, s, p, count_include_pad):
    """((o, n) 0/1 window membership, (o,) divisors) for one spatial dim of avg_pool2d."""
    m, div = np.zeros((o, n)), np.zeros(o)
    for r in range(o):
        start = r * s - p
        end = min(start + k, n + p)
        lo, hi = max(start, 0), min(end, n)
        m[r, lo:hi] = 1.0
        div[r] = end - start if count_include_pad else hi - lo
    return m, div


def _adaptive_windows(n, o):
    """((o, n) membership, divisors): row r covers floor(r*n/o) .. ceil((r+1)*n/o)."""
    m, div = np.zeros((o, n)), np.zeros(o)
    for r in range(o):
        lo, hi = (r * n) // o, -((-(r + 1) * n) // o)
        m[r, lo:hi] = 1.0
        div[r] = hi - lo
    return m, div


def _avg_windows_of(size, a):
    """[(membership, divisors)] for rows and columns, and the divisor override (or None)."""
    if "output_size" in a:
        return [_adaptive_windows(n, o) for n, o in zip(size, a["output_size"])], None
    oh, ow = _out_hw(size, a)
    wins = [_avg_windows(n, o, k, s, p, a["count_include_pad"])
            for n, o, k, s, p in zip(size, (oh, ow), a["kernel_size"], a["stride"],
                                     a["padding"])]
    return wins, a["divisor_override"]


def _avg_matrices(size, a):
    """(Ah, Aw) weight matrices and a final scale: out = Ah @ x @ Aw.T * scale."""
    wins, override = _avg_windows_of(size, a)
    if override:
        return [m for m, _ in wins], 1.0 / override
    return [m / div[:, None] for m, div in wins], 1.0


def _window_sums(mh, x, mw):
    """`mh @ x @ mw.T`, with each window's inf and nan its own (Note [Pooling by matmul])."""
    dt = x.dtype
    out = np.matmul(np.matmul(mh.astype(dt), x), mw.T.astype(dt))
    if np.isfinite(x).all():
        return out
    inh, inw = (mh != 0).astype(dt), (mw != 0).astype(dt)

    def hits(mask):             # how many of the masked entries each window holds
        return np.matmul(np.matmul(inh, mask.astype(dt)), inw.T) > 0
    pos, neg, nan = hits(np.isposinf(x)), hits(np.isneginf(x)), hits(np.isnan(x))
    out = np.matmul(np.matmul(mh.astype(dt), np.where(np.isfinite(x), x, 0)), mw.T.astype(dt))
    out[pos] = np.inf
    out[neg] = -np.inf
    out[nan | pos & neg] = np.nan
    return out


# Note [Pooling by matmul]
# Average pooling sums windows with two matrix products by 0/1 (or 1/divisor) membership
# matrices: one BLAS call instead of a loop over windows. But 0 * inf is nan, so an inf or nan
# would spread to every window of its rows and columns. When the input is not all finite,
# the finite part is pooled by matmul and each window then takes the IEEE sum of the
# non-finite values it holds (nan if any nan or both signs of inf, else that inf), as a
# window-by-window sum (PyTorch's kernel) gives.


def _avg_kernel(x, **a):
    if x.dtype.kind != "f":
        return _avg_int_kernel(x, a)
    (mh, mw), scale = _avg_matrices(x.shape[-2:], a)
    out = _window_sums(mh, x, mw)
    return out * np.asarray(scale, x.dtype) if scale != 1.0 else out


def _avg_int_kernel(x, a):
    """Integer inputs: exact window sums, divided with truncation (PyTorch's integer rule)."""
    ((mh, dh), (mw, dw)), override = _avg_windows_of(x.shape[-2:], a)
    total = np.matmul(np.matmul(mh.astype(np.int64), x.astype(np.int64)), mw.T.astype(np.int64))
    div = np.int64(override) if override else np.outer(dh, dw).astype(np.int64)
    return (np.sign(total) * (np.abs(total) // div)).astype(x.dtype)


def _avg_backward_kernel(g, input_size, **a):
    (mh, mw), scale = _avg_matrices(tuple(input_size), a)
    out = _window_sums(mh.T, g, mw.T)
    return out * np.asarray(scale, g.dtype) if scale != 1.0 else out


def _avg_vjp(g, ins, out, n):
    back = ADAPTIVE_BACKWARD if "output_size" in n.attrs else AVG_POOL2D_BACKWARD
    return (dispatch(back, (g,), dict(n.attrs, input_size=tuple(n.shapes[0][-2:]))),)


def _avg_backward_vjp(g, ins, out, n):
    a = dict(n.attrs)
    del a["input_size"]
    return (dispatch(ADAPTIVE_AVG_POOL2D if "output_size" in a else AVG_POOL2D, (g,), a),)


def _adaptive_shape(shapes, attrs):
    return tuple(shapes[0][:-2]) + tuple(attrs["output_size"])


AVG_POOL2D = Primitive("avg_pool2d", _quiet(_avg_kernel), vjp=_avg_vjp, shape_rule=_pool_shape,
                       grad_fn_name="AvgPool2DBackward0")
AVG_POOL2D_BACKWARD = Primitive("avg_pool2d_backward", _quiet(_avg_backward_kernel),
                                vjp=_avg_backward_vjp, shape_rule=_scatter_shape,
                                grad_fn_name="AvgPool2DBackwardBackward0")
ADAPTIVE_AVG_POOL2D = Primitive("adaptive_avg_pool2d", _quiet(_avg_kernel), vjp=_avg_vjp,
                                shape_rule=_adaptive_shape,
                                grad_fn_name="AdaptiveAvgPool2DBackward0")
ADAPTIVE_BACKWARD = Primitive("adaptive_avg_pool2d_backward", _quiet(_avg_backward_kernel),
                              vjp=_avg_backward_vjp, shape_rule=_scatter_shape,
                              grad_fn_name="AdaptiveAvgPool2DBackwardBackward0")


def avg_pool2d(input, kernel_size, stride, padding, ceil_mode, count_include_pad,
               divisor_override):
    """The primitive on (*, H, W); arguments already checked (see nn.functional)."""
    return dispatch(AVG_POOL2D, (input,), {
        "kernel_size": kernel_size, "stride": stride, "padding": padding,
        "ceil_mode": bool(ceil_mode), "count_include_pad": bool(count_include_pad),
        "divisor_override": None if divisor_override is None else int(divisor_override)})


def adaptive_avg_pool2d(input, output_size):
    """The primitive on (*, H, W) with `output_size` a pair of ints."""
    return dispatch(ADAPTIVE_AVG_POOL2D, (input,), {"output_size": tuple(output_size)})

