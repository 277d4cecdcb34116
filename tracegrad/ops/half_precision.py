"""Which primitives compute float16 operands in float32 and round once, as PyTorch does.

Note [Half precision computed in float]
PyTorch's CPU kernels compute a float16 tensor's values in float32 ("opmath") and round
each result once. numpy's float16 loops do too for one ufunc, but a kernel made of several
ufuncs (sigmoid is negate, exp, add, reciprocal) rounds after each, which moves results by
an ulp or more, and for some far more: float16 gelu(-3) came out 8% off, sinc(-6) 3e-4
where PyTorch gives 0. So the kernels of the primitives below, given a float16 operand,
compute on its float32 copy and round the result to float16 (into `out=` when the memory
plan gives one). The kernel object is the one eager dispatch and generated code both call,
so compiled numpy programs stay bitwise equal to eager; the JAX lowering reads the same
flag (`Primitive.half_in_float`) and lowers such a node on float32 operands, its result
cast back to the node's float16 type.
"""
import numpy as np

from . import activation, elementwise, reduction, special_more, special_prim  # noqa: F401
from .primitive import REGISTRY

_F16 = np.dtype(np.float16)
_F32 = np.dtype(np.float32)

HALF_IN_FLOAT = ("sigmoid", "rsqrt", "softmax", "log_softmax", "gelu", "silu", "erfinv",
                 "sinc")


def in_float(kernel):
    """`kernel` computing a float16 first operand in float32, its result rounded once."""
    def k(x, *rest, **kw):
        if getattr(x, "dtype", None) != _F16:
            return kernel(x, *rest, **kw)
        out = kw.pop("out", None)
        r = np.asarray(kernel(x.astype(_F32), *rest, **kw))
        with np.errstate(over="ignore"):      # past float16's range: inf, quietly
            r = r.astype(_F16)
        if out is None:
            return r
        np.copyto(out, r)
        return out
    k.__name__ = getattr(kernel, "__name__", "kernel")
    if getattr(kernel, "accepts_out", False):
        k.accepts_out = True
    raw = getattr(kernel, "quiet_raw", None)      # Note [Quiet programs] in codegen.py
    if raw is not None:
        k.quiet_raw = in_float(raw)
    return k


for _name in HALF_IN_FLOAT:
    _prim = REGISTRY[_name]
    _prim.set_kernel(in_float(_prim.kernel))
    _prim.half_in_float = True
