"""Matrix products with a bias, as single primitives: `addmm` and the 2-D `linear`.

PyTorch runs `nn.Linear` on a batch of vectors as one `addmm(bias, x, weight.t())` node
(`AddmmBackward0`) and, without a bias, as one `mm` node (`MmBackward0`). Here each is one
primitive too, so an eager layer costs one dispatch and one backward node instead of three
(`t`, `mm`, `add`). `linear` takes the weight as stored, (out, in), and multiplies by its
transpose inside the kernel; the graph therefore has no `TBackward0` node between the
product and the weight's `AccumulateGrad` (the one visible difference from PyTorch's graph).

The wrappers check PyTorch's rules (equal dtypes, sizes), so the primitives declare no dtype
rule: dispatch hands the arrays to the kernels as they are. Operands of `linear`:
(bias, input, weight), in the order of `addmm(bias, input, weight.t())`
so `next_functions` lines up with PyTorch's; `linear_nobias`: (input, weight). `addmm`:
(input, mat1, mat2) with attributes `beta`, `alpha`. The VJPs are written with tracegrad
ops (`mm`, `t`, `sum_to`, `mul` and `mm_tn`, the weight gradient `g.T @ x` as one primitive
with its own VJP), so they differentiate again. `linear` below (behind
`nn.functional.linear`) folds N-D inputs around these primitives as PyTorch does.
"""
import numpy as np

from .._dispatch import dispatch
from .._errors import TracegradRuntimeError, op_error
from . import elementwise as E
from .linalg import MM
from . import shape as S
from . import shape_rules as SR
from .primitive import Primitive, overload_of
from .shape import sum_to, t


def _linear_kernel(b, x, w):
    out = np.matmul(x, w.T)
    if b.ndim <= 1 or out.shape == b.shape:
        np.add(out, b, out=out)               # the composite's `(x @ w.T) + b`, in place
        return out
    return out + b


def _linear_nobias_kernel(x, w):
    return np.matmul(x, w.T)


def _linear_vjp(g, ins, out, n):
    _, x, w = ins
    nb, nx, nw = n.needs
    gb = sum_to(g, n.shapes[0]) if nb else None
    gx = dispatch(MM, (g, w)) if nx else None
    gw = dispatch(MM_TN, (g, x)) if nw else None
    return gb, gx, gw


def _linear_nobias_vjp(g, ins, out, n):
    x, w = ins
    nx, nw = n.needs
    return (dispatch(MM, (g, w)) if nx else None, dispatch(MM_TN, (g, x)) if nw else None)


def _mm_tn_kernel(a, b):
    return np.matmul(a.T, b)


def _mm_tn_vjp(gg, ins, out, n):
    # out = a.T @ b: d a = b @ gg.T (a linear_nobias), d b = a @ gg
    a, b = ins
    na, nb = n.needs
    return (dispatch(LINEAR_NOBIAS, (b, gg)) if na else None,
            dispatch(MM, (a, gg)) if nb else None)


def _mm_tn_shape(shapes, attrs):
    return (shapes[0][1], shapes[1][1])


# `a.T @ b` without a transposed view: a weight's gradient `g.T @ x` in one dispatch
MM_TN = Primitive("mm_tn", E._quiet(_mm_tn_kernel), vjp=_mm_tn_vjp, saves_for={0: (1,), 1: (0,)},
                  grad_fn_name="MmBackward0", shape_rule=_mm_tn_shape, layout="c")


def _linear_shape(shapes, attrs):
    """(rows of input, rows of weight): the bias broadcasts into it."""
    return (shapes[-2][0], shapes[-1][0])


LINEAR = Primitive("linear", E._quiet(_linear_kernel), vjp=_linear_vjp,
                   saves_for={1: (2,), 2: (1,)}, grad_fn_name="AddmmBackward0",
                   shape_rule=_linear_shape, layout="c")
LINEAR_NOBIAS = Primitive("linear_nobias", E._quiet(_linear_nobias_kernel), vjp=_linear_nobias_vjp,
                          saves_for={0: (1,), 1: (0,)},
                          grad_fn_name="MmBackward0", shape_rule=_linear_shape, layout="c")


def _addmm_kernel(c, a, b, beta, alpha):
    out = np.matmul(a, b)
    if alpha != 1:
        np.multiply(out, out.dtype.type(alpha), out=out)
    if beta == 0:                  # PyTorch ignores `input` then (nan and inf included)
        return out
    c = c if beta == 1 else np.multiply(c, c.dtype.type(beta))
    return out + c


def _addmm_vjp(g, ins, out, n):
    _, a, b = ins
    beta, alpha = n.attrs["beta"], n.attrs["alpha"]
    nc, na, nb = n.needs
    gc = sum_to(g if beta == 1 else E.mul(g, beta), n.shapes[0]) if nc else None
    ga = dispatch(MM, (g, t(b))) if na else None
    gb = dispatch(MM, (t(a), g)) if nb else None
    if alpha != 1:
        ga = None if ga is None else E.mul(ga, alpha)
        gb = None if gb is None else E.mul(gb, alpha)
    return gc, ga, gb


def _addmm_shape(shapes, attrs):
    return (shapes[1][0], shapes[2][1])


ADDMM = Primitive("addmm", E._quiet(_addmm_kernel), vjp=_addmm_vjp,
                  saves_for={1: (2,), 2: (1,)}, grad_fn_name="AddmmBackward0",
                  shape_rule=_addmm_shape, layout="c")


def _fail(op, msg, fix=None):
    raise op_error(TracegradRuntimeError, op, msg, fix)


def _dtype_name(t):
    return {"float32": "Float", "float64": "Double", "float16": "Half"}.get(
        t.dtype.name, t.dtype.name.capitalize())


def _check_bias(op, bias, rows, cols):
    """PyTorch's expand check of addmm's `input` against the (rows, cols) product."""
    shape = tuple(bias.shape)
    if len(shape) > 2:
        _fail(op, f"expand(torch.{bias.type()[6:]}{{{list(shape)}}}, size=[{rows}, {cols}]): "
              "the number of sizes provided (2) must be greater or equal to the number of "
              f"dimensions in the tensor ({len(shape)})")
    padded = (1,) * (2 - len(shape)) + shape
    for i, (s, want) in enumerate(zip(padded, (rows, cols))):
        if s != 1 and s != want:
            _fail(op, f"The expanded size of the tensor ({want}) must match the existing size "
                  f"({s}) at non-singleton dimension {i}.  Target sizes: [{rows}, {cols}].  "
                  f"Tensor sizes: {list(shape)}", "The bias must broadcast to the output.")


def _check_addmm(op, c, a, b_rows, b_cols, b):
    """PyTorch's checks of addmm, in its order: dtypes, inner sizes, the bias's shape."""
    if a.dtype is not b.dtype:
        _fail(op, f"mat1 and mat2 must have the same dtype, but got {_dtype_name(a)} and "
              f"{_dtype_name(b)}", "Convert one operand, e.g. `b.to(a.dtype)`.")
    if c.dtype is not b.dtype:
        _fail(op, f"self and mat2 must have the same dtype, but got {_dtype_name(c)} and "
              f"{_dtype_name(b)}", "Convert the bias/input, e.g. `c.to(mat2.dtype)`.")
    if a.shape[1] != b_rows:
        _fail(op, f"mat1 and mat2 shapes cannot be multiplied ({a.shape[0]}x{a.shape[1]} and "
              f"{b_rows}x{b_cols})", "The inner dimensions must agree.")
    _check_bias(op, c, a.shape[0], b_cols)


def linear2d(input, weight, bias=None):
    """`input @ weight.T + bias` for a matrix `input` (N, in) and weight (out, in): one
    primitive (AddmmBackward0, or MmBackward0 without bias). Checks as PyTorch."""
    x, w = input._data, weight._data
    out_f, in_f = w.shape
    if bias is not None:
        b = bias._data
        dt = w.dtype
        if x.dtype is dt and b.dtype is dt and x.shape[1] == in_f and b.shape == (out_f,):
            return dispatch(LINEAR, (bias, input, weight))       # the common case, checked
        _check_addmm("linear", bias, input, in_f, out_f, weight)
        return dispatch(LINEAR, (bias, input, weight))
    if input.dtype is not weight.dtype:
        _fail("linear", f"expected m1 and m2 to have the same dtype, but got: "
              f"{_c_name(input)} != {_c_name(weight)}")
    if x.shape[1] != in_f:
        _fail("linear", f"mat1 and mat2 shapes cannot be multiplied ({x.shape[0]}x{x.shape[1]} "
              f"and {in_f}x{out_f})", "The inner dimensions must agree.")
    return dispatch(LINEAR_NOBIAS, (input, weight))


def _c_name(t):
    """The C type name PyTorch's mm dtype error uses (float, double, c10::Half)."""
    return {"float32": "float", "float64": "double", "float16": "c10::Half"}.get(
        t.dtype.name, t.dtype.name)


def addmm(input, mat1, mat2, *, beta=1, alpha=1):
    """`beta * input + alpha * (mat1 @ mat2)`, one primitive (AddmmBackward0).

    `input` broadcasts to the (n, p) product; with `beta=0` it is ignored (nan included).

    >>> addmm(tracegrad.zeros(2), tracegrad.ones(3, 4), tracegrad.ones(4, 2)).shape
    torch.Size([3, 2])
    """
    for name, m in (("mat1", mat1), ("mat2", mat2)):
        if m.ndim != 2:
            _fail("addmm", f"{name} must be a matrix, got {m.ndim}-D tensor")
    _check_addmm("addmm", input, mat1, mat2.shape[0], mat2.shape[1], mat2)
    return dispatch(ADDMM, (input, mat1, mat2), {"beta": beta, "alpha": alpha})


# The reshapes PyTorch's matmul folding records around the product. `_unsafe_view` shares
# the product's storage without being an autograd view (an in-place op on the result is an
# ordinary node, not CopySlices); `squeeze_` of a 1-D input's row prints SqueezeBackward4.
UNSAFE_VIEW = Primitive("unsafe_view", S._reshape_kernel, aliases=0, is_view=False,
                        vjp=S._reshape_vjp, grad_fn_name="UnsafeViewBackward0",
                        shape_rule=SR.reshape)
SQUEEZE_ROW = overload_of(S.SQUEEZE, "squeeze_row", "SqueezeBackward4")


def linear(input, weight, bias=None):
    """`nn.functional.linear`: `input @ weight.T + bias` for input (*, in), weight (out, in).

    Recorded as PyTorch 2.x records it: a matrix input is one addmm (or mm) node; a
    contiguous input of another rank with a 1-D bias is viewed as a matrix around one addmm
    (ViewBackward0); otherwise the matmul folding (mm, then UnsafeViewBackward0, or
    SqueezeBackward4 for a vector) followed by an add of the bias (AddBackward0).
    """
    nd = input.ndim
    if nd == 2:
        return linear2d(input, weight, bias)
    if nd == 0 or weight.ndim == 0:
        _fail("linear", "both arguments to linear need to be at least 1D, but they are "
              f"{nd}D and {weight.ndim}D")
    if weight.ndim != 2:
        return None                   # the caller's generic matmul path (a vector weight)
    in_f, out_f = input.shape[-1], weight.shape[0]
    lead = tuple(input.shape[:-1])
    if bias is not None and bias.ndim == 1 and input.is_contiguous():
        out = linear2d(S.reshape(input, (-1, in_f)), weight, bias)
        return S.reshape(out, lead + (out_f,))
    out = linear2d(S.unsqueeze(input, 0) if nd == 1 else S.reshape(input, (-1, in_f)), weight)
    if nd == 1:
        out = dispatch(SQUEEZE_ROW, (out,), {"shape": (out_f,)})
    else:
        out = dispatch(UNSAFE_VIEW, (out,), {"shape": lead + (out_f,)})
    return out if bias is None else E.add(out, bias)
