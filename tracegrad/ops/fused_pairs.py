"""Kernels for pairs of adjacent primitives that generated code may run as one call.

Note [Fused pairs]
Some primitives almost always come in a fixed pair, and their two kernels redo work the
pair does not need. Cross-entropy's gradient is the main one: `nll_loss_backward` builds a
dense (N, C) array with one nonzero per row (the target's `c = -g / N`), and
`log_softmax_backward` then sums each row back to `c` and computes `grad - exp(y) * c`: nine
numpy calls where four do. Eager execution keeps the two primitives (the autograd graph
PyTorch users inspect has both nodes), so a fused kernel must give *their* result bit for
bit. It does, by IEEE arithmetic, when the row sum is `c` itself and `c < 0`:
- each row of the dense array sums to exactly `c` (zeros and one `c`);
- off the target, eager computes `0 - exp(y) * c`, which is `exp(y) * (-c)` exactly (a
  product's sign is symmetric, and `0 - x` is `-x`, +0 included since `-c > 0`);
- at the target, eager computes `c - exp(y) * c`, which is `exp(y) * (-c) + c` exactly
  (subtraction is the addition of the negation).
Anything else (class weights, an ignored target, targets out of range, `c >= 0` or NaN,
other dtypes or layouts) runs the two kernels as eager does. `codegen.build` substitutes a
pair only where the first result feeds nothing but the second, on the next line, with no
memory-plan decision about either and no guard between them; the graph itself (drawn,
verified, replayed for double backward) keeps both nodes. A pair kernel may carry
`specialize(first_node, second_node)`, the pair's form of Note [Static kernels] (in
primitive.py): a kernel of the two nodes' operands with their attributes baked in, or None
(the cross-entropy one is in static_loss.py).
"""
import numpy as np

from . import fused_backward as FB
from . import loss as L


def _cross_entropy_backward(g, t, w, y, reduction, ignore_index, shape, dim):
    """`log_softmax_backward(nll_loss_backward(g, t, w, ...), y, dim)`, bitwise."""
    if (reduction != "none" and dim == 1 and len(shape) == 2 and g.ndim == 0
            and y.shape == tuple(shape) and y.dtype == g.dtype
            and L._plain_targets(t, w, shape[1], ignore_index)):
        dt = g.dtype
        coef = dt.type(-1) / dt.type(t.shape[0]) if reduction == "mean" else dt.type(-1)
        c = np.multiply(coef, g)                 # the target's entry, as the first kernel
        if c < 0:
            r = np.exp(y)
            np.multiply(r, -c, out=r)
            r[L._arange(shape[0]), t] += c
            return r
    dense = L._nll_backward_kernel(g, t, w, reduction, ignore_index, shape)
    return FB._log_softmax_backward_kernel(dense, y, dim)


# (first primitive's name, second's) -> kernel(first's operands, second's other operands,
# **first's attributes, **second's attributes)
PAIRS = {("nll_loss_backward", "log_softmax_backward"): _cross_entropy_backward}
