"""Static kernels (Note [Static kernels] in primitive.py) for a classifier's loss: `log_softmax`,
`nll_loss` and the fused cross-entropy gradient (Note [Fused pairs] in fused_pairs.py).

Each generic kernel spends most of a small step's time deciding what the node's types and
attributes already decide (the scores' rank and dtype, the reduction, a weight that is no
array, an ignore_index outside the classes, the row indexes): a specialized kernel decides
them once when the program is built, and keeps at run time only the checks on values (every
target in range), falling back to the generic kernel when one fails. Each computes with the
generic kernel's numpy calls in the same order, so results are the same bits.

The range check reads the targets as uint64 (a negative one is then huge) and takes the
element at `argmax`: the same maximum as `np.maximum.reduce` (integers: exact, any order),
in a third of its time on a batch of targets (0.3 us against 1.0 us at 32, numpy 2.4).
"""
import numpy as np

from . import fused_pairs as FP
from . import loss as L
from . import reduction as R
from .primitive import REGISTRY

_add_reduce = np.add.reduce
_max_reduce = np.maximum.reduce
_FLOATS = (np.dtype(np.float32), np.dtype(np.float64))


def _type(a):
    """The static type of an IR operand, or None for a literal."""
    return getattr(a, "type", None)


def _log_softmax_specialize(node):
    """`log_softmax` of a non-empty float32/64 operand of rank >= 1 (float16 computes in
    float32: Note [Half precision computed in float]; 0-d and empty keep the generic kernel)."""
    t = _type(node.inputs[0])
    if t is None or t.dtype.np not in _FLOATS or not t.shape or 0 in t.shape:
        return None
    dim = node.attrs["dim"]
    exp, log, sub = np.exp, np.log, np.subtract

    def log_softmax(x):
        s = sub(x, _max_reduce(x, axis=dim, keepdims=True))
        return sub(s, log(_add_reduce(exp(s), axis=dim, keepdims=True)), out=s)
    return log_softmax


def _plain_static(t_type, w, ignore_index, classes):
    """What `loss._plain_targets` decides from types alone: 1-D int64 targets, no weight
    array, an ignore_index no target can equal once all are in range."""
    return (t_type is not None and t_type.dtype.np == np.int64 and len(t_type.shape) == 1
            and t_type.shape[0] > 0 and _type(w) is None and not isinstance(w, np.ndarray)
            and not 0 <= ignore_index < classes)


def _nll_loss_specialize(node):
    """`nll_loss` of (N, C) float32/64 scores, plain targets (see `_plain_static`), reduced."""
    scores, t, w = node.inputs
    st, tt = _type(scores), _type(t)
    reduction, ignore_index = node.attrs["reduction"], node.attrs["ignore_index"]
    if (st is None or len(st.shape) != 2 or st.dtype.np not in _FLOATS
            or reduction not in ("mean", "sum")
            or not _plain_static(tt, w, ignore_index, st.shape[1])):
        return None
    dt = st.dtype.np
    n, classes = tt.shape[0], st.shape[1]
    rows = L._arange(n)
    count = dt.type(n)
    generic = node.prim.kernel
    generic = getattr(generic, "quiet_raw", generic)
    neg, u64 = np.negative, np.uint64
    mean = reduction == "mean"

    def nll_loss(scores, t, w):
        u = t.view(u64)                                  # a negative target reads as huge
        if int(u[u.argmax()]) < classes:
            total = _add_reduce(neg(scores[rows, t]), dtype=dt)
            return np.asarray(total / count if mean else total)
        return generic(scores, t, w, reduction, ignore_index)
    return nll_loss


def _cross_entropy_backward_specialize(first, second):
    """The fused cross-entropy gradient's kernel for these two nodes (Note [Fused pairs]),
    with the conditions the fused kernel checks on types decided here."""
    g, t, w = first.inputs
    y = second.inputs[1]
    a = {**first.attrs, **second.attrs}
    reduction, ignore_index, shape, dim = (a["reduction"], a["ignore_index"], a["shape"],
                                           a["dim"])
    gt, yt = _type(g), _type(y)
    if (gt is None or yt is None or reduction == "none" or dim != 1 or len(shape) != 2
            or gt.shape != () or tuple(yt.shape) != tuple(shape) or yt.dtype != gt.dtype
            or gt.dtype.np not in _FLOATS
            or not _plain_static(_type(t), w, ignore_index, shape[1])
            or _type(t).shape[0] != shape[0]):
        return None
    dt = gt.dtype.np
    coef = dt.type(-1) / dt.type(shape[0]) if reduction == "mean" else dt.type(-1)
    classes = shape[1]
    rows = L._arange(shape[0])
    starts = rows * classes                  # each row's first element in C order
    generic = FP._cross_entropy_backward
    exp, mul, add, u64 = np.exp, np.multiply, np.add, np.uint64

    def cross_entropy_backward(g, t, w, y):
        u = t.view(u64)
        if int(u[u.argmax()]) < classes:
            c = mul(coef, g)
            if c < 0:
                r = exp(y)
                mul(r, -c, out=r)
                if r.flags.c_contiguous:     # the same elements, one flat index: ~40% faster
                    r.reshape(-1)[add(starts, t)] += c
                else:
                    r[rows, t] += c
                return r
        return generic(g, t, w, y, reduction, ignore_index, shape, dim)
    return cross_entropy_backward


R.LOG_SOFTMAX.specialize = _log_softmax_specialize
for _name in ("nll_loss", "nll_loss2d"):
    REGISTRY[_name].specialize = _nll_loss_specialize
FP._cross_entropy_backward.specialize = _cross_entropy_backward_specialize
