"""Three stateless layers as composites: `F.gumbel_softmax` (a differentiable sample of a
categorical, straight-through with `hard=True`), `F.pdist` (pairwise distances of rows) and
`F.local_response_norm` (AlexNet's normalization across nearby channels).

gumbel_softmax draws its noise with `rand_like` (tracegrad's generator: reproducible under
`manual_seed`, drawn on every compiled call), as Gumbel(0, 1) = -log(E), E = -log(1 - U)
~ Exponential(1), E clamped to the smallest normal number so it is never 0.
"""
import warnings

import numpy as np

from .. import ops as O
from .._errors import TracegradRuntimeError, TracegradValueError, op_error


def gumbel_softmax(logits, tau=1, hard=False, eps=1e-10, dim=-1):
    """`softmax((logits + g) / tau, dim)` with g ~ Gumbel(0, 1); with `hard`, the one-hot
    of its argmax in the forward pass and the soft sample's gradient (straight-through)."""
    if eps != 1e-10:
        warnings.warn("`eps` parameter is deprecated and has no effect.", stacklevel=2)
    u = O.rand_like(logits)
    tiny = float(np.finfo(logits.dtype.np).tiny)
    exp = O.clamp(O.neg(O.log1p(O.neg(u))), min=tiny)
    gumbels = O.div(O.sub(logits, O.log(exp)), tau)
    y_soft = O.softmax(gumbels, dim)
    if not hard:
        return y_soft
    index = O.max(y_soft, dim, keepdim=True)[1]
    y_hard = O.scatter(O.zeros_like(logits), dim, index, value=1.0)
    return O.add(O.sub(y_hard, y_soft.detach()), y_soft)


def pdist(input, p=2):
    """p-norm distances between the rows of input (N, M): the N(N-1)/2 pairs i < j in
    row-major order, as `torch.nn.functional.pdist`."""
    if input.ndim != 2:
        raise op_error(TracegradRuntimeError, "pdist",
                       f"pdist only supports 2D tensors, got: {input.ndim}D")
    if p < 0:
        raise op_error(TracegradRuntimeError, "pdist", "pdist only supports non-negative p "
                       "values")
    n = input.shape[0]
    i, j = np.triu_indices(n, 1)
    diff = O.sub(O.index_select(input, 0, O.tensor(i.astype(np.int64))),
                 O.index_select(input, 0, O.tensor(j.astype(np.int64))))
    return O.norm(diff, p, dim=1)


def local_response_norm(input, size, alpha=1e-4, beta=0.75, k=1.0):
    """`input / (k + alpha * mean of input**2 over `size` neighbouring channels) ** beta`,
    the window centred on each channel (zero-padded, counted in the mean)."""
    if input.ndim < 3:
        raise TracegradValueError("Expected 3D or higher dimensionality                      "
                                  f"    input (got {input.ndim} dimensions)")
    if input.numel() == 0:
        return input
    c = input.shape[1]
    sq = O.mul(input, input)
    zeros = O.zeros_like(O.narrow(sq, 1, 0, 1))
    lo, hi = size // 2, (size - 1) // 2
    padded = O.cat([zeros] * lo + [sq] + [zeros] * hi, 1) if lo or hi else sq
    total = None
    for s in range(size):
        part = O.narrow(padded, 1, s, c)
        total = part if total is None else O.add(total, part)
    div = O.pow(O.add(O.mul(O.div(total, float(size)), alpha), k), beta)
    return O.div(input, div)
