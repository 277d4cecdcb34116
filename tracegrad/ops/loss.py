"""Loss primitives: `nll_loss` over log-probabilities and `mse_loss`.

PyTorch records each loss as one node (`NllLossBackward0`, `MseLossBackward0`), and a printed
loss shows it (`tensor(2.3026, grad_fn=<NllLossBackward0>)`), so they are primitives here
too, with VJPs written in tracegrad ops (differentiable again, traceable). The argument
checks and layouts live in `nn/_losses.py`.

nll_loss operands: scores (C,), (M, C) or (N, C, H, W) -- the layouts PyTorch's nll_loss and
nll_loss2d (`NllLoss2DBackward0`) take -- targets of the scores' shape without the class dim
(integer), and per-class weights (C,) or the Python number 1.0; attributes `reduction` ("none", "sum", "mean") and `ignore_index`.
'mean' divides by the summed weights of the non-ignored targets (PyTorch's rule). Ignored
rows are masked (never multiplied by zero), so a -inf there poisons neither value nor
gradient. The weights get no gradient (PyTorch does not differentiate them either).
The kernel checks the targets (IndexError "Target 7 is out of bounds."), so a compiled
program checks every call's targets without a guard. The gradient is one primitive too,
`nll_loss_backward` (NllLossBackwardBackward0), whose own VJP is `nll_loss` again.
"""
import numpy as np

from .._dispatch import dispatch
from .._errors import TracegradIndexError, op_error
from . import elementwise as E
from . import shape_rules as SR
from .primitive import Primitive, overload_of, promote


def _row_weights(t, w, ignore_index):
    """(valid rows, safe targets, weight per row: 0 where ignored) as numpy arrays."""
    valid = t != ignore_index
    safe = np.where(valid, t, 0)
    wr = w[safe] if isinstance(w, np.ndarray) else np.ones(t.shape, np.float64)
    return valid, safe, np.where(valid, wr, 0)


def _check_targets(t, classes, ignore_index):
    """Every target not ignored names a class: PyTorch's IndexError otherwise (checked by
    the kernel, so compiled programs check each call's targets too)."""
    bad = (t < 0) | (t >= classes)
    if bad.any():
        bad &= t != ignore_index
        if bad.any():
            raise op_error(TracegradIndexError, "nll_loss",
                           f"Target {int(t[bad][0])} is out of bounds.",
                           f"Targets must lie in [0, {classes}) or equal ignore_index.")


def _plain_targets(t, w, classes, ignore_index):
    """No class weights, no target equal to ignore_index, all in range: every row counts
    with weight 1 (the common case, computed without masks: same numbers)."""
    if isinstance(w, np.ndarray) or 0 <= ignore_index < classes or t.ndim != 1 or not t.size:
        return False
    if t.dtype == np.int64:        # one reduction: a negative target reads as a huge one
        return int(np.maximum.reduce(t.view(np.uint64))) < classes
    return np.minimum.reduce(t) >= 0 and np.maximum.reduce(t) < classes


def _arange(n):
    """`np.arange(n)` (row indexes), one read-only array per n kept (a few small sizes)."""
    a = _ARANGES.get(n)
    if a is None:
        a = np.arange(n)
        a.flags.writeable = False
        if len(_ARANGES) < 64:
            _ARANGES[n] = a
    return a


_ARANGES = {}


def _rows(scores, t):
    """(M, C) scores and (M,) targets of any layout nll_loss takes: (C,) with a 0-d target,
    (N, C) with (N,), (N, C, d1, ...) with (N, d1, ...) (classes moved last)."""
    if scores.ndim == 2:
        return scores, t
    if scores.ndim == 1:
        return scores.reshape(1, -1), t.reshape(1)
    return np.moveaxis(scores, 1, -1).reshape(-1, scores.shape[1]), t.reshape(-1)


def _nll_kernel(scores, t, w, reduction, ignore_index):
    shape = t.shape
    scores, t = _rows(scores, t)
    per = _nll_rows(scores, t, w, reduction, ignore_index)
    return per.reshape(shape) if reduction == "none" and per.shape != shape else per


def _nll_rows(scores, t, w, reduction, ignore_index):
    dt = scores.dtype
    if _plain_targets(t, w, scores.shape[1], ignore_index):
        per = np.negative(scores[_arange(t.shape[0]), t])
        if reduction == "none":
            return per
        total = np.add.reduce(per, dtype=dt)
        return np.asarray(total if reduction == "sum" else total / dt.type(t.shape[0]))
    _check_targets(t, scores.shape[1], ignore_index)
    valid, safe, wr = _row_weights(t, w, ignore_index)
    picked = scores[np.arange(scores.shape[0]), safe]
    with np.errstate(all="ignore"):
        per = np.where(valid, -picked * wr.astype(dt), 0).astype(dt)
        if reduction == "none":
            return per
        total = per.sum(dtype=dt)
        if reduction == "sum":
            return np.asarray(total)
        return np.asarray(total / wr.sum(dtype=dt))


def _nll_vjp(g, ins, out, n):
    _, t, w = ins
    return nll_loss_backward(g, t, w, n.attrs["reduction"], n.attrs["ignore_index"],
                             n.shapes[0]), None, None


def _is_2d(shape):
    """PyTorch's nll_loss2d layout: (N, C, H, W) scores."""
    return len(shape) == 4


def _nll_backward_kernel(g, t, w, reduction, ignore_index, shape):
    """d loss / d scores (of `shape`, any nll_loss layout): `-w[t_i] * g` (over the summed
    weights for 'mean') at each row's target class, zero elsewhere."""
    if len(shape) == 2:
        return _nll_backward_rows(g, t, w, reduction, ignore_index, shape)
    flat_g = g.reshape(-1) if reduction == "none" else g
    if len(shape) == 1:
        return _nll_backward_rows(flat_g, t.reshape(1), w, reduction, ignore_index,
                                  (1, shape[0])).reshape(shape)
    c = shape[1]
    rows = _nll_backward_rows(flat_g, t.reshape(-1), w, reduction, ignore_index, (t.size, c))
    moved = rows.reshape((shape[0],) + tuple(shape[2:]) + (c,))
    return np.ascontiguousarray(np.moveaxis(moved, -1, 1))


def _nll_backward_rows(g, t, w, reduction, ignore_index, shape):
    if _plain_targets(t, w, shape[1], ignore_index):
        dt = g.dtype
        coef = dt.type(-1) / dt.type(t.shape[0]) if reduction == "mean" else dt.type(-1)
        grad = np.zeros(shape, dt)
        grad[_arange(shape[0]), t] = np.multiply(coef, g)
        return grad
    valid, safe, wr = _row_weights(t, w, ignore_index)
    coef = np.negative(wr.astype(g.dtype))
    with np.errstate(all="ignore"):
        if reduction == "mean":
            coef /= wr.sum(dtype=g.dtype)
        rows = np.where(valid, coef * g, 0).astype(g.dtype, copy=False)
    grad = np.zeros(shape, g.dtype)
    grad[np.arange(shape[0]), safe] = rows
    return grad


def _nll_backward_vjp(gg, ins, out, n):
    # linear in g, and its transpose is nll_loss itself (PyTorch: NllLossBackwardBackward0)
    _, t, w = ins
    a = n.attrs
    prim = NLL_LOSS2D if _is_2d(a["shape"]) else NLL_LOSS
    return (dispatch(prim, (gg, t, w), {"reduction": a["reduction"],
                                        "ignore_index": a["ignore_index"]})
            if n.needs[0] else None), None, None


NLL_LOSS_BACKWARD = Primitive("nll_loss_backward", E._quiet(_nll_backward_kernel),
                              vjp=_nll_backward_vjp, saves=(1, 2),
                              grad_fn_name="NllLossBackwardBackward0",
                              shape_rule=SR.attr_shape)   # (its targets passed nll_loss)


NLL_LOSS2D_BACKWARD = overload_of(NLL_LOSS_BACKWARD, "nll_loss2d_backward",
                                  "NllLoss2DBackwardBackward0")


def nll_loss_backward(g, target, weight, reduction, ignore_index, shape):
    """The gradient of `nll_loss` with respect to its scores (of `shape`), one primitive."""
    prim = NLL_LOSS2D_BACKWARD if _is_2d(shape) else NLL_LOSS_BACKWARD
    return dispatch(prim, (g, target, weight),
                    {"reduction": reduction, "ignore_index": ignore_index,
                     "shape": tuple(shape)})


def _nll_shape(shapes, attrs):
    """One loss per target (the target's shape) for reduction 'none', else a 0-d total."""
    return tuple(shapes[1]) if attrs["reduction"] == "none" else ()


NLL_LOSS = Primitive("nll_loss", E._quiet(_nll_kernel), vjp=_nll_vjp, saves=(1, 2),
                     grad_fn_name="NllLossBackward0", shape_rule=_nll_shape, may_raise=True)
NLL_LOSS2D = overload_of(NLL_LOSS, "nll_loss2d", "NllLoss2DBackward0")   # (N, C, H, W)


def nll_loss(scores, target, weight=None, reduction="mean", ignore_index=-100):
    """Primitive nll_loss on (C,), (M, C) or (N, C, H, W) scores (NllLoss2DBackward0) and
    targets of the scores' shape without the class dim (see the module docstring)."""
    prim = NLL_LOSS2D if scores.ndim == 4 else NLL_LOSS
    return dispatch(prim, (scores, target, 1.0 if weight is None else weight),
                    {"reduction": reduction, "ignore_index": int(ignore_index)})


def _mse_kernel(x, y, reduction):
    d = np.subtract(x, y)
    sq = np.multiply(d, d, out=d)
    if reduction == "none":
        return sq
    return np.asarray(sq.sum() if reduction == "sum" else sq.mean(dtype=sq.dtype))


def _mse_vjp(g, ins, out, n):
    x, y = ins
    reduction = n.attrs["reduction"]
    d = E.sub(x, y)
    scale = 2.0
    if reduction == "mean":
        size = 1
        for s in np.broadcast_shapes(n.shapes[0], n.shapes[1]):
            size *= s
        scale = 2.0 / size
    gd = E.mul(E.mul(d, scale), g)
    a, b = n.needs
    return (E._st(gd, n.shapes[0]) if a else None,
            E._st(E.neg(gd), n.shapes[1]) if b else None)


def _mse_shape(shapes, attrs):
    """The broadcast squared difference for reduction 'none', else a 0-d total."""
    return SR.broadcast(shapes, attrs) if attrs["reduction"] == "none" else ()


MSE_LOSS = Primitive("mse_loss", E._quiet(_mse_kernel), vjp=_mse_vjp, saves=(0, 1),
                     dtype_rule=promote, grad_fn_name="MseLossBackward0", shape_rule=_mse_shape)


def mse_loss(input, target, reduction="mean"):
    """Primitive mse_loss: `(input - target) ** 2` reduced by `reduction`."""
    return dispatch(MSE_LOSS, (input, target), {"reduction": reduction})


# The Tensor-by-number overloads PyTorch's loss code calls (`at::mul(t, 0.9)`): the nodes print
# MulBackward1 / DivBackward1 there, where Python's `t * 0.9` records MulBackward0.
MUL_SCALAR = overload_of(E.MUL, "mul_scalar", "MulBackward1")
DIV_SCALAR = overload_of(E.DIV, "div_scalar", "DivBackward1")
MUL_SCALAR.elementwise = DIV_SCALAR.elementwise = True


def mul_scalar(t, number):
    return dispatch(MUL_SCALAR, (t, number))


def div_scalar(t, number):
    return dispatch(DIV_SCALAR, (t, number))
