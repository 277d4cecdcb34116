"""Linear-algebra primitives: matmul (1-D, 2-D, batched with broadcasting), mm, bmm, dot,
outer and einsum. 1-D operands of matmul are lifted to matrices around one primitive so a
single VJP rule covers every case.
"""
import numpy as np

from .. import _dtype as D
from .._dispatch import dispatch
from .._errors import TracegradRuntimeError, TracegradValueError, op_error
from . import elementwise as E
from . import shape_rules as SR
from .primitive import Primitive, promote
from .shape import permute, sum_to, unsqueeze, squeeze


def _mT(x):
    n = x.ndim
    return permute(x, tuple(range(n - 2)) + (n - 1, n - 2))


def _matmul_vjp(g, ins, out, n):
    x, y = ins
    a, b = n.needs
    gx = sum_to(matmul(g, _mT(y)), n.shapes[0]) if a else None
    gy = sum_to(matmul(_mT(x), g), n.shapes[1]) if b else None
    return (gx, gy)


MATMUL = Primitive("matmul", E._quiet(np.matmul), vjp=_matmul_vjp, saves=(0, 1), dtype_rule=promote,
                   grad_fn_name="BmmBackward0", shape_rule=SR.matmul, layout="c")
MM = Primitive("mm", E._quiet(np.matmul), vjp=_matmul_vjp, saves=(0, 1), dtype_rule=promote,
               shape_rule=SR.matmul, layout="c")


def _dot_vjp(g, ins, out, n):
    x, y = ins
    a, b = n.needs
    return (E.mul(g, y) if a else None, E.mul(g, x) if b else None)


DOT = Primitive("dot", E._quiet(np.dot), vjp=_dot_vjp, saves=(0, 1), dtype_rule=promote,
                shape_rule=SR.dot, layout="c")


def _check_dtypes(op, a, b):
    if a.dtype is not b.dtype:
        raise op_error(TracegradRuntimeError, op,
                       f"expected m1 and m2 to have the same dtype, but got: {a.dtype.name} != "
                       f"{b.dtype.name}", "Convert one operand, e.g. `b.to(a.dtype)`.")


def matmul(input, other):
    """Matrix product with NumPy/PyTorch broadcasting rules for 1-D and batched operands."""
    _check_dtypes("matmul", input, other)
    a, b = input.ndim, other.ndim
    if a == 0 or b == 0:
        raise op_error(TracegradRuntimeError, "matmul",
                       "both arguments to matmul need to be at least 1D, but they are "
                       f"{a}D and {b}D")
    if a == 1 and b == 1:
        return dot(input, other)
    if a == 2 and b == 2:
        return mm(input, other)
    x = unsqueeze(input, 0) if a == 1 else input
    y = unsqueeze(other, -1) if b == 1 else other
    if x.shape[-1] != y.shape[-2]:
        raise op_error(TracegradRuntimeError, "matmul",
                       f"mat1 and mat2 shapes cannot be multiplied ({_mshape(x)} and "
                       f"{_mshape(y)})", "The last dim of the first operand must equal the "
                       "second-to-last dim of the second.")
    r = dispatch(MATMUL, (x, y))
    if a == 1:
        r = squeeze(r, -2)
    if b == 1:
        r = squeeze(r, -1)
    return r


def _mshape(x):
    return f"{x.shape[-2]}x{x.shape[-1]}"


def mm(input, mat2):
    if input.ndim != 2 or mat2.ndim != 2:
        raise op_error(TracegradRuntimeError, "mm", "self must be a matrix" if input.ndim != 2
                       else "mat2 must be a matrix")
    _check_dtypes("mm", input, mat2)
    if input.shape[1] != mat2.shape[0]:
        raise op_error(TracegradRuntimeError, "mm",
                       f"mat1 and mat2 shapes cannot be multiplied ({_mshape(input)} and "
                       f"{_mshape(mat2)})", "The inner dimensions must agree.")
    return dispatch(MM, (input, mat2))


def bmm(input, mat2):
    if input.ndim != 3 or mat2.ndim != 3:
        raise op_error(TracegradRuntimeError, "bmm", "batch1 and batch2 must be 3D tensors")
    if input.shape[0] != mat2.shape[0] or input.shape[2] != mat2.shape[1]:
        raise op_error(TracegradRuntimeError, "bmm",
                       f"Expected size for first two dimensions of batch2 tensor to be: "
                       f"[{input.shape[0]}, {input.shape[2]}] but got: "
                       f"[{mat2.shape[0]}, {mat2.shape[1]}].")
    if input.dtype is not mat2.dtype:
        raise op_error(TracegradRuntimeError, "bmm",
                       f"expected scalar type {D.scalar_type_name(input.dtype)} but found "
                       f"{D.scalar_type_name(mat2.dtype)}",
                       "Convert one operand, e.g. `b.to(a.dtype)`.")
    return matmul(input, mat2)


def dot(input, other):
    if input.ndim != 1 or other.ndim != 1:
        raise op_error(TracegradRuntimeError, "dot",
                       f"1D tensors expected, but got {input.ndim}D and {other.ndim}D tensors")
    _check_dtypes("dot", input, other)
    if input.shape[0] != other.shape[0]:
        raise op_error(TracegradRuntimeError, "dot",
                       "inconsistent tensor size, expected tensor [%d] and src [%d] to have the "
                       "same number of elements, but got %d and %d elements respectively"
                       % (input.shape[0], other.shape[0], input.shape[0], other.shape[0]))
    return dispatch(DOT, (input, other))


def outer(input, vec2):
    for name, t in (("self", input), ("vec2", vec2)):
        if t.ndim != 1:
            raise op_error(TracegradRuntimeError, "outer", f"outer: Expected 1-D argument "
                           f"{name}, but got {t.ndim}-D")
    return E.mul(unsqueeze(input, 1), unsqueeze(vec2, 0))


ger = outer


# ---- einsum ----
def _parse(eq, nops):
    eq = eq.replace(" ", "")
    if "..." in eq:
        raise ValueError("einsum with '...' is not supported yet; write the dimensions out")
    if "->" in eq:
        lhs, rhs = eq.split("->")
    else:
        lhs = eq
        letters = lhs.replace(",", "")
        rhs = "".join(sorted(c for c in set(letters) if letters.count(c) == 1))
    ins = lhs.split(",")
    if len(ins) > nops:         # PyTorch: RuntimeError for too few operands, ValueError too many
        raise op_error(TracegradRuntimeError, "einsum", "einsum(): fewer operands were provided "
                       "than specified in the equation")
    if len(ins) < nops:
        raise op_error(TracegradValueError, "einsum", f"Number of einsum subscripts, {len(ins)}, "
                       f"must be equal to the number of operands, {nops}.")
    return ins, rhs


def _einsum_kernel(*xs, eq):
    out = np.einsum(eq, *xs, optimize=len(xs) > 2)
    # "ij->ji" gives a view of the operand; einsum is not an aliasing primitive
    return out.copy() if any(np.may_share_memory(out, x) for x in xs) else out


def _einsum_vjp(g, ins, out, n):
    subs, rhs = _parse(n.attrs["eq"], len(ins))
    grads = []
    for i, (need, s) in enumerate(zip(n.needs, subs)):
        if not need:
            grads.append(None)
            continue
        others = [(subs[j], ins[j]) for j in range(len(ins)) if j != i]
        avail = set(rhs) | set("".join(o[0] for o in others))
        target = "".join(c for c in dict.fromkeys(s) if c in avail)
        eq = ",".join([rhs] + [o[0] for o in others]) + "->" + target
        gi = einsum(eq, g, *[o[1] for o in others])
        sizes = dict(zip(s, n.shapes[i]))
        tshape = tuple(sizes[c] for c in target)
        if tuple(gi.shape) != tshape:               # a size-1 dim broadcast against others
            gi = sum_to(gi, tshape)
        grads.append(_restore(gi, target, s, n.shapes[i]))
    return tuple(grads)


def _restore(gi, target, s, shape):
    """Expand a gradient over subscripts `target` back to operand subscripts `s`."""
    if target == s:
        return gi
    from .shape import expand, reshape
    uniq = "".join(dict.fromkeys(s))
    sizes = {c: shape[s.index(c)] for c in uniq}
    if len(uniq) != len(s):
        raise ValueError("einsum gradient with a repeated index inside one operand (a "
                         "diagonal) is not supported")
    view = tuple(sizes[c] if c in target else 1 for c in s)
    perm_src = "".join(c for c in s if c in target)
    if perm_src != target:
        gi = einsum(target + "->" + perm_src, gi)
    return expand(reshape(gi, view), shape)


def _einsum_shape(shapes, attrs):
    """Each output subscript's size from the operands carrying it (np.einsum broadcasts a
    size-1 dim against the others)."""
    subs, rhs = _parse(attrs["eq"], len(shapes))
    size = {}
    for s, shape in zip(subs, shapes):
        for c, n in zip(s, shape):
            if size.get(c, 1) == 1:
                size[c] = n
    return tuple(size[c] for c in rhs)


EINSUM = Primitive("einsum", E._quiet(_einsum_kernel), vjp=_einsum_vjp, saves=tuple(range(64)),
                   dtype_rule=promote, shape_rule=_einsum_shape)


def einsum(equation, *operands):
    """Einstein summation (explicit or implicit output; no '...')."""
    if len(operands) == 1 and isinstance(operands[0], (list, tuple)):
        operands = tuple(operands[0])
    equation = _expand_ellipsis(equation.replace(" ", ""), operands)
    _parse(equation, len(operands))
    return dispatch(EINSUM, tuple(operands), {"eq": equation})


def _expand_ellipsis(eq, operands):
    """'...' spelled out with unused letters (right-aligned, broadcasting like numpy); an
    implicit output lists the ellipsis dims first, as PyTorch does."""
    if "..." not in eq:
        return eq
    lhs, arrow, rhs = eq.partition("->")
    terms = lhs.split(",")
    if len(terms) != len(operands):
        return eq                                   # _parse reports the count mismatch
    n = max((op.ndim - len(t) + 3 for t, op in zip(terms, operands) if "..." in t), default=0)
    free = [c for c in "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz" if c not in eq]
    ell = "".join(free[:n])
    terms = [t.replace("...", ell[n - (op.ndim - len(t) + 3):] if n else "")
             for t, op in zip(terms, operands)]
    if arrow:
        rhs = rhs.replace("...", ell)
    else:
        letters = "".join(terms).replace(",", "")
        rhs = ell + "".join(sorted(c for c in set(letters) if letters.count(c) == 1
                                   and c not in ell))
    return ",".join(terms) + "->" + rhs
