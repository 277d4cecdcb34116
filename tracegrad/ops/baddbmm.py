"""baddbmm: `beta * input + alpha * (batch1 @ batch2)` as one primitive (BaddbmmBackward0).

`input` broadcasts to the product's shape (it is never broadcast the other way). With
`beta=0` the input is ignored (nan and inf in it do not propagate), as in PyTorch; its
gradient is then zero.
"""
import numpy as np

from .._dispatch import dispatch
from .._errors import TracegradRuntimeError, op_error
from . import elementwise as E
from .primitive import Primitive


def _baddbmm_kernel(input, batch1, batch2, beta, alpha):
    prod = np.matmul(batch1, batch2)
    if alpha != 1:
        prod = np.multiply(prod, alpha, out=prod, casting="unsafe")
    if beta == 0:
        return prod
    return np.add(prod, input if beta == 1 else input * beta, out=prod, casting="unsafe")


def _baddbmm_vjp(g, ins, out, n):
    from .linalg import _mT, matmul
    from .shape import sum_to
    _, b1, b2 = ins
    a = n.attrs
    gi = sum_to(E.mul(g, a["beta"]), n.shapes[0]) if n.needs[0] else None
    ga = E.mul(g, a["alpha"]) if a["alpha"] != 1 else g
    g1 = matmul(ga, _mT(b2)) if n.needs[1] else None
    g2 = matmul(_mT(b1), ga) if n.needs[2] else None
    return (gi, g1, g2)


def _baddbmm_shape(shapes, attrs):
    a, b = shapes[1], shapes[2]
    return (a[0], a[1], b[2])


BADDBMM = Primitive("baddbmm", E._quiet(_baddbmm_kernel), vjp=_baddbmm_vjp,
                    saves_for={1: (2,), 2: (1,)}, shape_rule=_baddbmm_shape, layout="c")


def baddbmm(input, batch1, batch2, *, beta=1, alpha=1):
    """`beta * input + alpha * bmm(batch1, batch2)`; input broadcasts to (b, n, p)."""
    for name, t in (("batch1", batch1), ("batch2", batch2)):
        if t.ndim != 3:
            raise op_error(TracegradRuntimeError, "baddbmm", f"{name} must be a 3D tensor")
    if batch2.shape[0] != batch1.shape[0] or batch2.shape[1] != batch1.shape[2]:
        raise op_error(TracegradRuntimeError, "baddbmm",
                       "Expected size for first two dimensions of batch2 tensor to be: "
                       f"[{batch1.shape[0]}, {batch1.shape[2]}] but got: "
                       f"[{batch2.shape[0]}, {batch2.shape[1]}].")
    if not input.dtype is batch1.dtype is batch2.dtype:
        raise op_error(TracegradRuntimeError, "baddbmm",
                       f"Input dtypes must be the same, got: input {_n(input)}, batch1: "
                       f"{_n(batch1)}, batch2: {_n(batch2)}")
    out = (batch1.shape[0], batch1.shape[1], batch2.shape[2])
    _check_expand(input.shape, out)
    return dispatch(BADDBMM, (input, batch1, batch2), {"beta": beta, "alpha": alpha})


def _n(t):
    return {"float32": "float", "float64": "double", "int64": "long", "int32": "int",
            "float16": "half"}.get(t.dtype.name, t.dtype.name)


def _check_expand(shape, out):
    shape = tuple(shape)
    pad = (1,) * (len(out) - len(shape)) + shape
    for i, (s, o) in enumerate(zip(pad, out)):
        if len(shape) > len(out) or (s != 1 and s != o):
            raise op_error(TracegradRuntimeError, "baddbmm",
                           f"The expanded size of the tensor ({o}) must match the existing size "
                           f"({s}) at non-singleton dimension {i}.  Target sizes: {list(out)}."
                           f"  Tensor sizes: {list(shape)}")
