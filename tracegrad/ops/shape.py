"""Shape primitives: views (reshape family, permute family, expand, slicing), copies (cat,
stack, repeat, clone, dtype conversion), and indexing (basic views, advanced gathers, and
item assignment).

Views declare `aliases=0`: their output shares the operand's numpy memory and version
counter, and records how to replay itself from the base (see Note [Views and versions] in
`_tensor.py`). `view_scatter` is the out-of-place inverse of a view chain: it is what an
in-place op through a view records on the base (PyTorch's CopySlices).
"""
import warnings

import numpy as np

from .. import _dtype as D
from .. import _dispatch
from .._dispatch import dispatch
from .._errors import (TracegradIndexError, TracegradRuntimeError, TracegradTypeError,
                       TracegradValueError, op_error)
from .._tensor import Tensor, _wrap_dim, from_array
from .elementwise import _quiet
from . import shape_rules as SR
from .primitive import Primitive, overload_of, promote


def _plain(arr):
    return from_array(np.asarray(arr))


def _shape_args(args):
    if len(args) == 1 and isinstance(args[0], (tuple, list, np.ndarray)):
        args = tuple(args[0])
    return tuple(int(a) for a in args)


# ---------------- broadcasting and its inverse ----------------
_SUM_TO = {}                    # (from shape, to shape) -> the kernel for that pair
_add_reduce = np.add.reduce     # ufunc.reduce directly: np.sum's wrapper costs microseconds


def _sum_to_kernel(x, shape):
    f = _SUM_TO.get((x.shape, shape))
    return (f or _sum_to_static(x.shape, shape))(x)


def _sum_to_static(from_shape, shape):
    """The sum_to kernel for one operand shape, cached (Note [Static kernels])."""
    lead = len(from_shape) - len(shape)
    axes = tuple(range(lead)) + tuple(lead + i for i, s in enumerate(shape)
                                      if s == 1 and from_shape[lead + i] != 1)
    if not axes:
        def f(x):
            return x.reshape(shape).copy()      # never a view: outputs own their memory
    elif len(axes) == lead:
        def f(x):                               # only leading axes: already the right shape
            return _add_reduce(_c_order(x), axis=axes)
    else:
        def f(x):
            return _add_reduce(_c_order(x), axis=axes, keepdims=True).reshape(shape)
    if len(_SUM_TO) > 4096:                     # many distinct shapes: don't grow forever
        _SUM_TO.clear()
    _SUM_TO[(from_shape, shape)] = f
    return f


def _c_order(x):
    """Note [Reductions in C order]
    numpy adds a reduction's terms in the order its iterator walks memory, so the same
    numbers laid out transposed sum to a different last bit. Gradients reaching `sum_to`
    (the gradient of a broadcast operand) can be laid out differently in eager execution
    and in a compiled program (eager's autograd accumulates a view's gradient in its
    base's coordinates; the functional graph in the view's), so a permuted operand is
    reduced as a C-ordered copy: the same sum either way. Broadcast (stride-0) operands
    and C-ordered ones, the usual cases, are reduced as they are."""
    if x.flags.c_contiguous or 0 in x.strides:
        return x
    return np.ascontiguousarray(x)


def _sum_to_specialize(node):
    return _sum_to_static(node.inputs[0].type.shape, node.attrs["shape"])


def _expand_kernel(x, shape):
    return np.broadcast_to(x, shape)


SUM_TO = Primitive("sum_to_size", _quiet(_sum_to_kernel),
                   vjp=lambda g, i, o, n: (expand(g, n.shapes[0]),), grad_fn_name="SumBackward1",
                   specialize=_sum_to_specialize, shape_rule=SR.attr_shape)
EXPAND = Primitive("expand", _expand_kernel, aliases=0,
                   vjp=lambda g, i, o, n: (sum_to(g, n.shapes[0]),), shape_rule=SR.attr_shape)


def sum_to(x, shape):
    """Sum `x` down to `shape` (the inverse of broadcasting), as used by every VJP."""
    shape = tuple(shape)
    if tuple(x.shape) == shape:
        return x
    return dispatch(SUM_TO, (x,), {"shape": shape})


def expand(input, *sizes):
    """Broadcast view to `sizes` (-1 keeps a dimension); no memory is copied."""
    sizes = _shape_args(sizes)
    nd = len(sizes)
    if nd < input.ndim:
        raise op_error(TracegradRuntimeError, "expand",
                       f"the number of sizes provided ({nd}) must be greater or equal to the "
                       f"number of dimensions in the tensor ({input.ndim})")
    old = (1,) * (nd - input.ndim) + tuple(input.shape)
    new = []
    for i, (s, o) in enumerate(zip(sizes, old)):
        if s == -1:
            if i < nd - input.ndim:
                raise op_error(TracegradRuntimeError, "expand",
                               "The expanded size of the tensor (-1) isn't allowed in a leading,"
                               " non-existing dimension 0")
            s = o
        if o != 1 and s != o:
            raise op_error(TracegradRuntimeError, "expand",
                           f"The expanded size of the tensor ({s}) must match the existing size "
                           f"({o}) at non-singleton dimension {i}.  Target sizes: {list(sizes)}."
                           f"  Tensor sizes: {list(input.shape)}")
        new.append(s)
    new = tuple(new)
    if new == tuple(input.shape):
        return dispatch(EXPAND, (input,), {"shape": new}) if input.requires_grad else input
    return dispatch(EXPAND, (input,), {"shape": new})


def broadcast_to(input, shape):
    return expand(input, tuple(shape))


def broadcast_tensors(*tensors):
    shapes = [tuple(t.shape) for t in tensors]
    try:
        shape = np.broadcast_shapes(*shapes)
    except ValueError:
        raise _broadcast_error("broadcast_tensors", shapes) from None
    return tuple(expand(t, shape) for t in tensors)


def _broadcast_error(op, shapes):
    """PyTorch's error for shapes that do not broadcast, naming the first clash (numpy's
    ValueError would escape `except RuntimeError`)."""
    out = ()
    for s in shapes:
        n = max(len(out), len(s))
        a, b = (1,) * (n - len(out)) + out, (1,) * (n - len(s)) + s
        for d, (x, y) in enumerate(zip(a, b)):
            if x != y and x != 1 and y != 1:
                return op_error(TracegradRuntimeError, op, f"The size of tensor a ({x}) must "
                                f"match the size of tensor b ({y}) at non-singleton dimension "
                                f"{d}")
        out = tuple(y if x == 1 else x for x, y in zip(a, b))
    return op_error(TracegradRuntimeError, op, f"shapes {shapes} cannot be broadcast together")


# ---------------- reshape family (views) ----------------
def _reshape_kernel(x, shape):
    try:
        return np.reshape(x, shape, copy=False)
    except ValueError:
        # `view`/`reshape` check the layout before dispatching, so only replayed view chains
        # reach here (CopySlices' VJP on a strided gradient, compiled programs whose arrays
        # are laid out differently); there the values are what matters: copy.
        return np.reshape(x, shape)


def _reshape_vjp(g, i, o, n):
    return (reshape(g, n.shapes[0]),)


VIEW = Primitive("view", _reshape_kernel, aliases=0, vjp=_reshape_vjp, shape_rule=SR.reshape)
RESHAPE_ALIAS = Primitive("reshape_alias", _reshape_kernel, aliases=0, vjp=_reshape_vjp,
                          grad_fn_name="ViewBackward0", shape_rule=SR.reshape)
SQUEEZE = Primitive("squeeze", _reshape_kernel, aliases=0, vjp=_reshape_vjp,
                    shape_rule=SR.reshape)
SQUEEZE_DIM = overload_of(SQUEEZE, "squeeze_dim", "SqueezeBackward1")      # squeeze(x, 1)
SQUEEZE_DIMS = overload_of(SQUEEZE, "squeeze_dims", "SqueezeBackward2")    # squeeze(x, (0, 1))
UNSQUEEZE = Primitive("unsqueeze", _reshape_kernel, aliases=0, vjp=_reshape_vjp,
                      shape_rule=SR.reshape)


def _infer_shape(shape, numel, op):
    shape = list(shape)
    neg = [i for i, s in enumerate(shape) if s == -1]
    if len(neg) > 1:
        raise op_error(TracegradRuntimeError, op, "only one dimension can be inferred")
    known = 1
    for s in shape:
        if s != -1:
            if s < 0:
                raise op_error(TracegradRuntimeError, op, f"invalid shape dimension {s}")
            known *= s
    if neg:
        if known == 0 or numel % known:
            raise op_error(TracegradRuntimeError, op,
                           f"shape '{shape}' is invalid for input of size {numel}")
        shape[neg[0]] = numel // known
    elif known != numel:
        raise op_error(TracegradRuntimeError, op,
                       f"shape '{shape}' is invalid for input of size {numel}",
                       "The new shape must have the same number of elements.")
    return tuple(shape)


def _viewable(arr, shape):
    if arr.flags.c_contiguous:
        return True
    try:
        np.reshape(arr, shape, copy=False)
        return True
    except ValueError:
        return False


def view(input, *shape):
    """A view with a new shape; raises if the memory layout does not allow one."""
    if len(shape) == 1 and isinstance(shape[0], D.dtype):
        raise op_error(TracegradRuntimeError, "view", "view(dtype) is not supported")
    shape = _infer_shape(_shape_args(shape), input._data.size, "view")
    if not _viewable(input._data, shape):
        raise op_error(TracegradRuntimeError, "view",
                       "view size is not compatible with input tensor's size and stride (at "
                       "least one dimension spans across two contiguous subspaces).",
                       "Use .reshape(...) instead.")
    return dispatch(VIEW, (input,), {"shape": shape})


def reshape(input, *shape):
    """Like `view` when the layout allows it, otherwise a copy (as in PyTorch)."""
    shape = _infer_shape(_shape_args(shape), input._data.size, "reshape")
    if not _viewable(input._data, shape):
        input = clone(input)
    return dispatch(RESHAPE_ALIAS, (input,), {"shape": shape})


def flatten(input, start_dim=0, end_dim=-1):
    if input.ndim == 0:
        return reshape(input, (1,))
    s = _wrap_dim(start_dim, input.ndim, "flatten")
    e = _wrap_dim(end_dim, input.ndim, "flatten")
    if s > e:
        raise op_error(TracegradRuntimeError, "flatten",
                       "flatten() has invalid args: start_dim cannot come after end_dim")
    shp = tuple(input.shape)
    n = 1
    for d in shp[s:e + 1]:
        n *= d
    return reshape(input, shp[:s] + (n,) + shp[e + 1:])


def squeeze(input, dim=None):
    shp = tuple(input.shape)
    if dim is None:
        new = tuple(s for s in shp if s != 1)
        prim = SQUEEZE
    else:
        many = isinstance(dim, (tuple, list))
        prim = SQUEEZE_DIMS if many else SQUEEZE_DIM
        dims = dim if many else (dim,)
        dims = {_wrap_dim(d, input.ndim, "squeeze") for d in dims} if input.ndim else set()
        new = tuple(s for i, s in enumerate(shp) if not (i in dims and s == 1))
    return dispatch(prim, (input,), {"shape": new})


def unsqueeze(input, dim):
    d = _wrap_dim(dim, input.ndim + 1, "unsqueeze")
    shp = list(input.shape)
    shp.insert(d, 1)
    return dispatch(UNSQUEEZE, (input,), {"shape": tuple(shp)})


# ---------------- permute family (views) ----------------
def _permute_kernel(x, perm):
    return x.transpose(perm)             # the method: np.transpose's wrapper costs ~1 us


def _permute_vjp(g, i, o, n):
    inv = tuple(np.argsort(n.attrs["perm"]).tolist())
    return (permute(g, inv),)


PERMUTE = Primitive("permute", _permute_kernel, aliases=0, vjp=_permute_vjp,
                    shape_rule=SR.permute, layout="reorders")
TRANSPOSE = Primitive("transpose", _permute_kernel, aliases=0, vjp=_permute_vjp,
                      shape_rule=SR.permute, layout="reorders")
T_ = Primitive("t", _permute_kernel, aliases=0, vjp=_permute_vjp, grad_fn_name="TBackward0",
               shape_rule=SR.permute, layout="reorders")


def permute(input, *dims):
    dims = _shape_args(dims)
    if len(dims) != input.ndim:
        raise op_error(TracegradRuntimeError, "permute",
                       f"number of dims don't match in permute (got {len(dims)} dims for a "
                       f"tensor of {input.ndim} dims)")
    perm = tuple(_wrap_dim(d, input.ndim, "permute") for d in dims)
    if len(set(perm)) != len(perm):
        raise op_error(TracegradRuntimeError, "permute", "repeated dim in permute")
    return dispatch(PERMUTE, (input,), {"perm": perm})


def transpose(input, dim0, dim1):
    n = input.ndim
    perm = list(range(n))
    if n:
        a, b = _wrap_dim(dim0, n, "transpose"), _wrap_dim(dim1, n, "transpose")
        perm[a], perm[b] = perm[b], perm[a]
    return dispatch(TRANSPOSE, (input,), {"perm": tuple(perm)})


swapaxes = transpose


def t(input):
    if input.ndim > 2:
        raise op_error(TracegradRuntimeError, "t",
                       f"t() expects a tensor with <= 2 dimensions, but self is {input.ndim}D",
                       "Use .transpose(dim0, dim1) or .mT for batched matrices.")
    return dispatch(T_, (input,), {"perm": tuple(range(input.ndim))[::-1]})


# ---------------- copies ----------------
def _clone_kernel(x):
    # C order: `contiguous()` and `reshape()` rely on a clone being C-contiguous
    # (np.array's default order='K' would keep a permuted layout).
    return np.array(x, copy=True, order="C")


CLONE = Primitive("clone", _clone_kernel, vjp=lambda g, i, o, n: (g,), shape_rule=SR.same)


def clone(input, *, memory_format=None):
    return dispatch(CLONE, (input,))


def contiguous(input, memory_format=None):
    return input if input._data.flags.c_contiguous else clone(input)


def _to_kernel(x, dtype):
    # silent as PyTorch's: NaN, inf and out-of-range values convert without a warning (the
    # JAX backend computes the same integers, and has no warning to give); a cast that
    # cannot warn (to a float at least as wide, from bool or an integer to float32 or 64: a
    # loss's float64 copy for `.item()`) skips the error-state switch, a third of its cost
    to = np.dtype(dtype)
    k = x.dtype.kind
    if to.kind == "f" and (k in "biu" and to.itemsize >= 4
                           or k == "f" and to.itemsize >= x.dtype.itemsize):
        return x.astype(to)
    with np.errstate(all="ignore"):
        return x.astype(dtype)


TO_COPY = Primitive("to_copy", _to_kernel, vjp=lambda g, i, o, n: (g,),
                    grad_fn_name="ToCopyBackward0", shape_rule=SR.same)


def to_dtype(input, dtype, copy=False):
    dtype = D.as_dtype(dtype)
    if dtype is input.dtype and not copy:
        return input
    return dispatch(TO_COPY, (input,), {"dtype": dtype.np})


DETACH = Primitive("detach", lambda x: x.view(), aliases=0, is_view=False, shape_rule=SR.same)
# `x.data`: an alias like detach, but with a version counter of its own (PyTorch), so
# writes through it never bump `x._version` (functionalize counts writes per counter).
DATA = Primitive("data", lambda x: x.view(), aliases=0, is_view=False, shape_rule=SR.same)

# An in-place write under no_grad, functionalized: the storage's new contents (operand 1),
# seen by autograd as its old contents (operand 0), since eager keeps the tensor's history.
NOGRAD_WRITE = Primitive("nograd_write", lambda old, new: new.view(),
                         vjp=lambda g, ins, out, node: (g, None), aliases=1, is_view=False,
                         shape_rule=SR.operand(1))


def _cat_kernel(*xs, dim):
    return np.concatenate(xs, axis=dim)


def _cat_vjp(g, i, o, n):
    d = n.attrs["dim"]
    out, start = [], 0
    for shp, need in zip(n.shapes, n.needs):
        size = shp[d] if len(shp) else 0
        out.append(narrow(g, d, start, size) if need else None)
        start += size
    return tuple(out)


CAT = Primitive("cat", _cat_kernel, vjp=_cat_vjp, dtype_rule=promote, shape_rule=SR.cat)


def cat(tensors, dim=0):
    """Concatenate along `dim` (type-promoted, like torch.cat)."""
    tensors = tuple(tensors)
    if not tensors:
        raise op_error(TracegradValueError, "cat", "expected a non-empty list of Tensors")
    live = tuple(t for t in tensors if not (t.ndim == 1 and t.shape[0] == 0)) or tensors[:1]
    ref = live[0]
    d = _wrap_dim(dim, ref.ndim, "cat")
    for k, t in enumerate(live):
        if t.ndim != ref.ndim:
            raise op_error(TracegradRuntimeError, "cat",
                           f"Tensors must have same number of dimensions: got {ref.ndim} and "
                           f"{t.ndim}")
        for j in range(ref.ndim):
            if j != d and t.shape[j] != ref.shape[j]:
                raise op_error(TracegradRuntimeError, "cat",
                               f"Sizes of tensors must match except in dimension {d}. Expected "
                               f"size {ref.shape[j]} but got size {t.shape[j]} for tensor number "
                               f"{k} in the list.")
    return dispatch(CAT, live, {"dim": d})


concat = concatenate = cat


def _stack_kernel(*xs, dim):
    return np.stack(xs, axis=dim)


def _stack_vjp(g, i, o, n):
    d = n.attrs["dim"]
    return tuple(select(g, d, k) if need else None for k, need in enumerate(n.needs))


STACK = Primitive("stack", _stack_kernel, vjp=_stack_vjp, dtype_rule=promote,
                  shape_rule=SR.stack)


def stack(tensors, dim=0):
    tensors = tuple(tensors)
    if not tensors:
        raise op_error(TracegradRuntimeError, "stack", "stack expects a non-empty TensorList")
    for k, t in enumerate(tensors):
        if t.shape != tensors[0].shape:
            raise op_error(TracegradRuntimeError, "stack",
                           f"stack expects each tensor to be equal size, but got "
                           f"{list(tensors[0].shape)} at entry 0 and {list(t.shape)} at entry {k}")
    d = _wrap_dim(dim, tensors[0].ndim + 1, "stack")
    return dispatch(STACK, tensors, {"dim": d})


def _repeat_kernel(x, reps):
    return np.tile(x.reshape((1,) * (len(reps) - x.ndim) + x.shape), reps)


def _repeat_vjp(g, i, o, n):
    reps = n.attrs["reps"]
    shp = (1,) * (len(reps) - len(n.shapes[0])) + tuple(n.shapes[0])
    inter = []
    for r, s in zip(reps, shp):
        inter += [r, s]
    from .reduction import sum as rsum
    gs = rsum(reshape(g, tuple(inter)), tuple(range(0, 2 * len(reps), 2)))
    return (reshape(gs, n.shapes[0]),)


REPEAT = Primitive("repeat", _repeat_kernel, vjp=_repeat_vjp, shape_rule=SR.repeat)


def repeat(input, *sizes):
    reps = _shape_args(sizes)
    if len(reps) < input.ndim:
        raise op_error(TracegradRuntimeError, "repeat",
                       "Number of dimensions of repeat dims can not be smaller than number of "
                       "dimensions of tensor")
    return dispatch(REPEAT, (input,), {"reps": reps})


# ---------------- indexing ----------------
class Slot:
    """Placeholder in an index key for the k-th index-tensor operand."""

    __slots__ = ("k",)

    def __init__(self, k):
        self.k = k

    def __repr__(self):
        return f"${self.k}"

    def __eq__(self, other):
        return isinstance(other, Slot) and other.k == self.k

    def __hash__(self):
        return hash(("slot", self.k))


def _fill(key, idx):
    return tuple(idx[k.k] if isinstance(k, Slot) else k for k in key)


def _view_kernel(x, key):
    if Ellipsis not in key:
        key = key + (Ellipsis,)      # always a view, even for a full integer index
    return x[key]


def _view_vjp(g, i, o, n):
    from .creation import zeros
    z = zeros(n.shapes[0], dtype=g.dtype)
    return (dispatch(VIEW_SCATTER, (z, g), {"chain": ((n.prim, n.attrs),)}),)


SLICE = Primitive("slice", _view_kernel, aliases=0, vjp=_view_vjp, shape_rule=SR.index)
SELECT = Primitive("select", _view_kernel, aliases=0, vjp=_view_vjp, shape_rule=SR.index)


def _index_kernel(x, *idx, key):
    out = x[_fill(key, idx)]
    return out if idx else out.copy()    # no index arrays: numpy gives a view; never alias


def _index_backward_kernel(g, *idx, shape, key):
    z = np.zeros(shape, dtype=g.dtype)
    k = _fill(key, idx)
    masks = False
    for i in k:
        if isinstance(i, np.ndarray) and i.dtype == bool:
            masks = True
    if not masks:
        np.add.at(z, k, g)   # repeated indices accumulate
        return z
    k = tuple(np.nonzero(i)[0] if isinstance(i, np.ndarray) and i.dtype == bool and i.ndim == 1
              else i for i in k)
    if any(isinstance(i, np.ndarray) and i.dtype == bool for i in k):
        z[k] += g            # multi-dim masks select each element at most once
    else:
        np.add.at(z, k, g)
    return z


def _key_builder(key):
    """idx -> the index tuple `_fill(key, idx)` builds, for one static key."""
    if [k.k if isinstance(k, Slot) else None for k in key] == list(range(len(key))):
        return lambda idx: idx               # (Slot(0), Slot(1), ...): the operands as they are
    template = list(key)
    slots = [(p, k.k) for p, k in enumerate(key) if isinstance(k, Slot)]

    def build(idx):
        t = template[:]
        for p, k in slots:
            t[p] = idx[k]
        return tuple(t)
    return build


def _index_operands_static(node, first):
    """True when every index operand from `first` on is an integer tensor and the key holds
    no array literal (so no bool mask anywhere): the key's layout is fixed at compile time."""
    return (all(hasattr(v, "type") and v.type.dtype.np.kind in "iu"
                for v in node.inputs[first:])
            and not any(isinstance(k, np.ndarray) for k in node.attrs["key"]))


def _index_specialize(node):
    if len(node.inputs) < 2 or not _index_operands_static(node, 1):
        return None
    build = _key_builder(node.attrs["key"])

    def index(x, *idx):
        return x[build(idx)]
    return index


def _index_backward_specialize(node):
    if not _index_operands_static(node, 1) or not hasattr(node.inputs[0], "type"):
        return None
    build, shape = _key_builder(node.attrs["key"]), node.attrs["shape"]
    dt = node.inputs[0].type.dtype.np

    def index_backward(g, *idx):
        z = np.zeros(shape, dtype=dt)
        np.add.at(z, build(idx), g)          # repeated indices accumulate
        return z
    return index_backward


def _index_vjp(g, ins, o, n):
    idx = ins[1:]
    return (dispatch(INDEX_BACKWARD, (g,) + tuple(idx),
                     {"shape": n.shapes[0], "key": n.attrs["key"]}),) + (None,) * len(idx)


def _index_backward_vjp(g, ins, o, n):
    idx = ins[1:]
    return (dispatch(INDEX, (g,) + tuple(idx), {"key": n.attrs["key"]}),) + (None,) * len(idx)


# a boolean mask operand makes index's shape data-dependent: its rule then returns None
INDEX = Primitive("index", _index_kernel, vjp=_index_vjp, saves=tuple(range(1, 64)),
                  specialize=_index_specialize, shape_rule=SR.index, may_raise=True)
INDEX_BACKWARD = Primitive("index_backward", _index_backward_kernel, vjp=_index_backward_vjp,
                           saves=tuple(range(1, 64)), grad_fn_name="IndexPutBackward0",
                           specialize=_index_backward_specialize, shape_rule=SR.attr_shape)


def _index_put_kernel(x, v, *idx, key):
    out = x.copy()
    out[_fill(key, idx)] = v
    return out


def _index_put_vjp(g, ins, o, n):
    idx = ins[2:]
    key = n.attrs["key"]
    gx = gv = None
    if n.needs[0]:
        gx = dispatch(INDEX_PUT, (g, 0.0) + tuple(idx), {"key": key})
    if n.needs[1]:
        from .elementwise import _st
        sel = dispatch(INDEX, (g,) + tuple(idx), {"key": key})
        gv = _st(sel, n.shapes[1])
    return (gx, gv) + (None,) * len(idx)


INDEX_PUT = Primitive("index_put", _quiet(_index_put_kernel), vjp=_index_put_vjp,
                      saves=tuple(range(2, 64)), shape_rule=SR.same, may_raise=True)
from .primitive import inplace_of  # noqa: E402

INDEX_PUT_ = inplace_of(INDEX_PUT, grad_fn_name="CopySlices", writes="slice")
# The same write under the names PyTorch gives its entry points (what grad_fn shows):
INDEX_PUT_ADV_ = inplace_of(INDEX_PUT, "index_put_adv_", "IndexPutBackward0", writes="indexed")  # x[idx] = v
COPY_ = inplace_of(INDEX_PUT, "copy_", "CopyBackwards")
FILL_ = inplace_of(INDEX_PUT, "fill_", "FillBackward2")                 # fill_(number)
FILL_TENSOR_ = inplace_of(INDEX_PUT, "fill_tensor_", "FillBackward3")   # fill_(0-dim tensor)
ZERO_ = inplace_of(INDEX_PUT, "zero_", "ZeroBackward0")


def _view_scatter_kernel(base, src, chain):
    out = base.copy()
    v = out
    for prim, attrs in chain:
        v = prim.kernel(v, **attrs)
    v[...] = src
    return out


def _view_scatter_vjp(g, ins, o, n):
    chain = n.attrs["chain"]
    gb = gs = None
    if n.needs[0]:
        from .creation import zeros
        gb = dispatch(VIEW_SCATTER, (g, zeros(n.shapes[1], dtype=g.dtype)), {"chain": chain})
    if n.needs[1]:
        gs = g
        for prim, attrs in chain:
            gs = dispatch(prim, (gs,), attrs)
        from .elementwise import _st
        gs = _st(gs, n.shapes[1])
    return (gb, gs)


VIEW_SCATTER = Primitive("view_scatter", _view_scatter_kernel, vjp=_view_scatter_vjp,
                         grad_fn_name="CopySlices", shape_rule=SR.same)
_dispatch._layers.VIEW_SCATTER = VIEW_SCATTER   # Note [Layers] in _tensor.py
# they move or convert values, computing none: bfloat16 operands are fine (views are too)
_dispatch.BF16_STORAGE_OPS.update((CLONE, TO_COPY, CAT, STACK, INDEX, INDEX_PUT, VIEW_SCATTER))


_BAD_INDEX = "tensors used as indices must be long, int, byte or bool tensors"


def _byte_mask(k):
    """A uint8 index tensor as PyTorch reads it: a bool mask, with its deprecation warning."""
    warnings.warn("indexing with dtype torch.uint8 is now deprecated, please use a dtype "
                  "torch.bool instead.", UserWarning, stacklevel=4)
    return to_dtype(k, D.bool_)


def _normalize_key(x, key):
    """Split a user index into (basic key, index tensors, is_advanced).

    Index tensors are int64/int32 (a 0-dim one of any integer dtype is an int), bool masks,
    or uint8, which PyTorch still reads as a mask with a deprecation warning; int8/int16
    ones and floats raise IndexError."""
    if not isinstance(key, tuple):
        key = (key,)
    out, tensors, adv = [], [], False
    for k in key:
        if isinstance(k, np.ndarray) and k.dtype == np.uint8:
            k = from_array(k)
        if isinstance(k, Tensor):
            if k.dtype is D.uint8:
                k = _byte_mask(k)
            if k.dtype.is_floating_point or k.ndim and k.dtype in (D.int8, D.int16):
                raise op_error(TracegradIndexError, "index", _BAD_INDEX)
            if k.ndim == 0 and k.dtype is not D.bool_:
                out.append(int(k))          # observed: a guard under the tracer
                continue
            out.append(Slot(len(tensors)))
            tensors.append(k)
            adv = True
        elif isinstance(k, (list, range, np.ndarray)) or isinstance(k, bool):
            arr = np.asarray(k)
            if arr.dtype.kind in "US":
                raise _str_index()
            if arr.dtype.kind == "f":
                raise op_error(TracegradIndexError, "index", _BAD_INDEX)
            if arr.dtype.kind not in "b":
                arr = arr.astype(np.int64)
            out.append(Slot(len(tensors)))
            tensors.append(from_array(arr))
            adv = True
        elif k is None or k is Ellipsis or isinstance(k, slice):
            if isinstance(k, slice):
                k = slice(*(None if v is None else _int(v) for v in (k.start, k.stop, k.step)))
                if k.step is not None and k.step <= 0:
                    raise op_error(TracegradRuntimeError, "index",
                                   "step must be greater than zero")
            out.append(k)
        else:
            out.append(_int(k))
    _check_ints(x, out)
    return tuple(out), tuple(tensors), adv


def _str_index():
    """PyTorch reads a str index as data for a new index tensor, and refuses it with a
    TypeError (`batch["x"]` on a tensor where a dict was meant)."""
    return op_error(TracegradTypeError, "index", "new(): invalid data type 'str'")


def _int(v):
    if isinstance(v, Tensor):
        return int(v.item())
    if isinstance(v, str):
        raise _str_index()
    try:
        return int(v.__index__())
    except AttributeError:
        raise op_error(TracegradIndexError, "index",
                       "only integers, slices (`:`), ellipsis (`...`), None and long or byte "
                       "Variables are valid indices (got " + type(v).__name__ + ")") from None


def _check_ints(x, key):
    dim = 0
    consumed = sum(1 for k in key if k is not None and k is not Ellipsis)
    if consumed > x.ndim and not any(isinstance(k, Slot) for k in key):
        raise op_error(TracegradIndexError, "index",
                       f"too many indices for tensor of dimension {x.ndim}")
    for k in key:
        if k is Ellipsis:
            dim += x.ndim - consumed
        elif k is None:
            continue
        elif isinstance(k, int):
            n = x.shape[dim]
            if not -n <= k < n:
                raise op_error(TracegradIndexError, "index",
                               f"index {k} is out of bounds for dimension {dim} with size {n}")
            dim += 1
        else:
            dim += 1


def getitem(x, key):
    """`x[key]`: basic indexing gives a view; integer-array / bool-mask indexing a copy."""
    k, tensors, adv = _normalize_key(x, key)
    if not adv:
        return _basic(x, k)
    x, k = _ints_first(x, k)
    return dispatch(INDEX, (x,) + tensors, {"key": k})


def _basic(x, k):
    """The view basic indexing with key `k` (ints, slices, None, Ellipsis) gives."""
    if any(i is None for i in k):
        return _with_new_axes(x, k)
    prim = SELECT if any(isinstance(i, int) for i in k) else SLICE
    return dispatch(prim, (x,), {"key": k})


def _ints_first(x, k):
    """(view, remaining key) for an advanced key holding integers or new axes.

    PyTorch applies integer indices (and `None`) as views before the advanced step, so
    `x[:, 0, :, idx]` indexes `x.select(1, 0)` with `[:, :, idx]`; numpy would treat the 0
    as one more index array and, the two being apart, move their dimension to the front."""
    if not any(type(i) is int or i is None for i in k):
        return x, k
    view = _basic(x, tuple(slice(None) if isinstance(i, Slot) else i for i in k))
    rest = tuple(slice(None) if i is None else i for i in k if type(i) is not int)
    return view, rest


def _with_new_axes(x, k):
    """Basic indexing with `None`s, recorded as PyTorch records it: left to right, one
    unsqueeze per new axis and one select/slice per other entry (full slices are free)."""
    covered = x.ndim - sum(1 for i in k if i is not None and i is not Ellipsis)
    y, pos = x, 0                    # pos: the dim of `y` the next entry applies to
    for i in k:
        if i is None:
            y = unsqueeze(y, pos)
            pos += 1
        elif i is Ellipsis:
            pos += covered
        elif isinstance(i, slice):
            if i != slice(None):
                y = dispatch(SLICE, (y,), {"key": (slice(None),) * pos + (i,)})
            pos += 1
        else:
            y = dispatch(SELECT, (y,), {"key": (slice(None),) * pos + (i,)})
    return y


def setitem(x, key, value, prim=None):
    """`x[key] = value`: an in-place op on `x` (bumps its version; differentiable).

    `prim` (an `inplace_of(INDEX_PUT)` variant) names the entry point: copy_, fill_, zero_.
    """
    if (not isinstance(value, Tensor) or value.ndim == 0) and any(
            isinstance(i, Tensor) and i.dtype is D.uint8
            for i in (key if isinstance(key, tuple) else (key,))):
        raise op_error(TracegradRuntimeError, "index_put_", "masked_fill_ only supports boolean "
                       "masks, but got mask with dtype unsigned char",
                       "Use a bool mask: `m.bool()`.")
    if prim is None and isinstance(value, (np.floating, np.bool_)) and not isinstance(
            value, float):                   # PyTorch takes np.float64 (a float) and numpy
        raise op_error(TracegradTypeError, "index_put_",   # integers (they have __index__)
                       f"can't assign a numpy.{type(value).__name__} to a "
                       f"torch.{D.tensor_type_name(x.dtype)}",
                       "Pass a Python number: `x[i] = float(v)`.")
    k, tensors, adv = _normalize_key(x, key)
    if isinstance(value, Tensor):
        if value.dtype is not x.dtype:
            value = to_dtype(value, x.dtype)
    elif isinstance(value, (list, tuple, np.ndarray)):
        value = from_array(np.asarray(value, dtype=x._data.dtype))
    if prim is None:
        prim = INDEX_PUT_ADV_ if adv else INDEX_PUT_
    if adv:
        view, k = _ints_first(x, k)
        if view is not x:                # written through the view, as PyTorch does
            dispatch(prim, (view, value) + tensors, {"key": k})
            return
    dispatch(prim, (x, value) + tensors, {"key": k})


def narrow(input, dim, start, length):
    d = _wrap_dim(dim, input.ndim, "narrow")
    n = input.shape[d]
    start = int(start)
    if not -n <= start <= n:    # PyTorch's checks; a slice would silently come out short
        raise op_error(TracegradIndexError, "narrow", "start out of range (expected to be in "
                       f"range of [{-n}, {n}], but got {start})")
    if start < 0:
        start += n
    if length < 0:
        raise op_error(TracegradRuntimeError, "narrow", "narrow(): length must be non-negative.")
    if start + length > n:
        raise op_error(TracegradRuntimeError, "narrow", f"start ({start}) + length ({length}) "
                       f"exceeds dimension size ({n}).")
    key = (slice(None),) * d + (slice(start, start + length),)
    return dispatch(SLICE, (input,), {"key": key})


def select(input, dim, index):
    d = _wrap_dim(dim, input.ndim, "select")
    return dispatch(SELECT, (input,), {"key": (slice(None),) * d + (int(index),)})


def split(tensor, split_size_or_sections, dim=0):
    d = _wrap_dim(dim, tensor.ndim, "split")
    n = tensor.shape[d]
    if isinstance(split_size_or_sections, int):
        s = split_size_or_sections
        if s < 0 or s == 0 and n:
            raise op_error(TracegradRuntimeError, "split",
                           f"split_size can only be 0 if dimension size is 0, but got dimension "
                           f"size of {n}" if s == 0 else
                           f"split expects split_size be non-negative, but got split_size={s}",
                           "Pass a positive size, or a list of sizes summing to the dimension.")
        sizes = [min(s, n - i) for i in range(0, n, s)] if s > 0 else [n]
    else:
        sizes = list(split_size_or_sections)
        if sum(sizes) != n:
            raise op_error(TracegradRuntimeError, "split",
                           f"split_with_sizes expects split_sizes to sum exactly to {n} (input "
                           f"tensor's size at dimension {d}), but got split_sizes={sizes}")
    out, start = [], 0
    for s in sizes:
        out.append(narrow(tensor, d, start, s))
        start += s
    return _multi_output(out, "Split" if isinstance(split_size_or_sections, int)
                         else "SplitWithSizes")


def _multi_output(views, name):
    """Note [Multi-output views]
    PyTorch refuses an in-place write, with grad mode on, into a view that `unbind`,
    `split` or `chunk` returned (or a view of one) when its base requires grad: their
    backward cannot see such writes. The views carry (function, output number) so that
    `_dispatch._check_inplace_target` raises PyTorch's error; views created with grad mode
    off carry nothing, as in PyTorch."""
    from .. import _mode
    if _mode.is_grad_enabled():
        for k, v in enumerate(views):
            v._multi_view = (name, k)
    return tuple(views)


def chunk(input, chunks, dim=0):
    d = _wrap_dim(dim, input.ndim, "chunk")
    if chunks <= 0:
        raise op_error(TracegradRuntimeError, "chunk",
                       f"chunk expects `chunks` to be greater than 0, got: {chunks}")
    n = input.shape[d]
    size = -(-n // chunks) if chunks > 0 else n
    return split(input, max(size, 1), d) if n else (input,)


def unbind(input, dim=0):
    d = _wrap_dim(dim, input.ndim, "unbind")
    return _multi_output([select(input, d, i) for i in range(input.shape[d])], "Unbind")


def _nonzero_kernel(x):
    return np.argwhere(x).astype(np.int64)


# no shape rule: how many elements are nonzero is data (Note [Shape rules])
NONZERO = Primitive("nonzero", _nonzero_kernel)


def nonzero(input, *, as_tuple=False):
    r = dispatch(NONZERO, (input,))
    if as_tuple:
        return tuple(select(r, 1, i) for i in range(input.ndim))
    return r
