"""Shape rules shared by primitive declarations: output shapes from operand shapes and attributes.

Note [Shape rules]
A rule is `rule(shapes, attrs) -> tuple`: `shapes` holds one entry per operand (the operand's
shape for a tensor, None for a literal such as a Python number or a Generator), `attrs` is the
node's attribute dict. It returns the output shape without looking at any data, so an IR value
can be typed without running a kernel, and `verify` can check every recorded type. It follows
the numpy kernel exactly (kernels, not PyTorch's documentation, define what a node computes).
A rule returns None where the shape depends on data for these operands (a boolean mask among
`index`'s operands); primitives whose shape always depends on data (`nonzero`) declare none.

A numpy array operand (a literal in the IR, e.g. `x ** np.array(...)`) broadcasts like a
tensor, so it is given its shape too. `operand_shapes` builds `shapes` from IR operands and
wraps a boolean operand's shape in `BoolShape` (a tuple, equal to the plain shape): every
rule treats it as a shape, and the indexing rule can tell a mask, which selects a
data-dependent number of elements, from an integer index.
Eager dispatch never calls rules (its speed is measured); `ir.verify` and tests do.

>>> broadcast([(2, 1), (3,), None], {})
(2, 3)
"""
import numpy as np


class BoolShape(tuple):
    """The shape of a boolean tensor operand (see Note [Shape rules])."""

    __slots__ = ()


def operand_shapes(inputs):
    """The `shapes` argument for IR operands: Values by their types, numpy array literals
    (operands like tensors: `x ** np.array(...)`) by their shapes, other literals as None."""
    out = []
    for a in inputs:
        t = getattr(a, "type", None)
        if t is not None:
            shape, dt = t.shape, t.dtype.np
        elif isinstance(a, np.ndarray):
            shape, dt = a.shape, a.dtype
        else:
            out.append(None)
            continue
        out.append(BoolShape(shape) if dt == np.bool_ else tuple(shape))
    return out


def _wrap(d, ndim):
    """A possibly negative dim as an index into a shape of `ndim` dims (numpy's axis rule)."""
    return d + ndim if d < 0 else d


# ---- elementwise ----

def broadcast(shapes, attrs):
    """numpy broadcasting over every tensor operand; literals broadcast as 0-d."""
    return tuple(np.broadcast_shapes(*[s for s in shapes if s is not None]))


def same(shapes, attrs):
    """Operand 0's shape: unary math, copies, softmax-like ops, in-place writes."""
    return tuple(shapes[0])


def operand(k):
    """The rule "operand k's shape" (e.g. `nograd_write` returns its operand 1)."""
    def rule(shapes, attrs):
        return tuple(shapes[k])
    rule.__name__ = f"operand_{k}"
    return rule


def scalar(shapes, attrs):
    """A 0-d result (a reduction to one number, or a token)."""
    return ()


# ---- shapes given by attributes ----

def attr_shape(shapes, attrs):
    """The `shape` attribute itself: creation, RNG draws, expand, sum_to_size, backward
    scatters."""
    return tuple(attrs["shape"])


def reshape(shapes, attrs):
    """The `shape` attribute, with at most one -1 inferred from operand 0's element count."""
    shape = tuple(attrs["shape"])
    if -1 not in shape:
        return shape
    known = 1
    for s in shape:
        if s != -1:
            known *= s
    numel = 1
    for s in shapes[0]:
        numel *= s
    return tuple(numel // known if s == -1 else s for s in shape)


def permute(shapes, attrs):
    """`x.transpose(perm)`: dim i of the result is dim perm[i] of the operand."""
    return tuple(shapes[0][p] for p in attrs["perm"])


# ---- reductions ----

def reduce(shapes, attrs):
    """A reduction over `dims` (as numpy's `axis=dims`: () reduces nothing) with `keepdim`."""
    shape = shapes[0]
    dims = {_wrap(d, len(shape)) for d in attrs["dims"]}
    if attrs["keepdim"]:
        return tuple(1 if i in dims else s for i, s in enumerate(shape))
    return tuple(s for i, s in enumerate(shape) if i not in dims)


def reduce_dim(shapes, attrs):
    """A reduction over the single `dim` with `keepdim` (max/min along a dim); a 0-d
    operand stays 0-d."""
    shape = shapes[0]
    if not shape:
        return ()
    return reduce(shapes, {"dims": (attrs["dim"],), "keepdim": attrs["keepdim"]})


def arg_reduce(shapes, attrs):
    """argmax/argmin: `dim` None flattens first (keepdim then gives all ones)."""
    shape = shapes[0]
    if attrs.get("dim") is None:
        return (1,) * len(shape) if attrs.get("keepdim") else ()
    return reduce_dim(shapes, {"dim": attrs["dim"], "keepdim": attrs.get("keepdim", False)})


# ---- joining and tiling ----

def cat(shapes, attrs):
    """Concatenation along `dim`; 1-D empty operands next to higher-dimensional ones are
    skipped (PyTorch's legacy rule, which `cat` applies before the kernel)."""
    ts = [s for s in shapes if s is not None]
    live = [s for s in ts if tuple(s) != (0,)] or ts[:1]
    if any(len(s) != len(live[0]) for s in live):
        raise ValueError(f"cat: operands of different ranks {ts}")
    d = _wrap(attrs["dim"], len(live[0]))
    out = list(live[0])
    out[d] = sum(s[d] for s in live)
    return tuple(out)


def stack(shapes, attrs):
    """`np.stack`: a new dim of length len(operands) at `dim` (wrapped over ndim + 1)."""
    first = tuple(shapes[0])
    d = _wrap(attrs["dim"], len(first) + 1)
    return first[:d] + (len(shapes),) + first[d:]


def repeat(shapes, attrs):
    """`np.tile`: shape and `reps`, both left-padded with ones to one length, multiplied."""
    shape, reps = tuple(shapes[0]), tuple(attrs["reps"])
    n = max(len(shape), len(reps))
    shape = (1,) * (n - len(shape)) + shape
    reps = (1,) * (n - len(reps)) + reps
    return tuple(s * r for s, r in zip(shape, reps))


# ---- matrix products ----

def matmul(shapes, attrs):
    """`np.matmul`: a 1-D operand is a row (left) or column (right) vector whose extra dim is
    dropped from the result; batch dims broadcast."""
    a, b = tuple(shapes[0]), tuple(shapes[1])
    a2 = (1,) + a if len(a) == 1 else a
    b2 = b + (1,) if len(b) == 1 else b
    if a2[-1] != b2[-2]:
        raise ValueError(f"matmul: inner dimensions differ ({a} @ {b})")
    batch = tuple(np.broadcast_shapes(a2[:-2], b2[:-2]))
    out = batch + (a2[-2], b2[-1])
    if len(a) == 1:
        out = out[:-2] + out[-1:]
    if len(b) == 1:
        out = out[:-1]
    return out


def dot(shapes, attrs):
    """`np.dot`: 0-d operands multiply; otherwise a's last dim meets b's second-to-last
    (b's only dim when 1-D)."""
    a, b = tuple(shapes[0]), tuple(shapes[1])
    if not a or not b:
        return a or b
    if a[-1] != b[-1 if len(b) == 1 else -2]:
        raise ValueError(f"dot: inner dimensions differ ({a} . {b})")
    if len(b) == 1:
        return a[:-1]
    return a[:-1] + b[:-2] + b[-1:]


# ---- indexing ----

def index(shapes, attrs):
    """`x[key]` with the key's `Slot`s filled by index operands 1.. (see `index_shape`)."""
    return index_shape(shapes[0], attrs["key"], shapes[1:])


def index_shape(shape, key, slot_shapes):
    """numpy's result shape of `x[key]` for `x` of `shape`; None when a boolean mask operand
    makes it data-dependent.

    Integer arrays (and, when any is present, Python ints too) are advanced indices: their
    shapes broadcast, and the result takes that shape in place of them if they are adjacent
    in the key, or in front of every other dim if anything (even a `None` or an empty
    `...`) separates them.
    """
    items = [_key_item(k, slot_shapes) for k in key]
    if None in items:
        return None
    if ("ell",) not in items:
        items.append(("ell",))                # trailing dims are kept, as by a final `...`
    adv = any(it[0] == "adv" for it in items)
    if adv:                                   # ints join the advanced indices as 0-d arrays
        items = [("adv", (), 1) if it[0] == "int" else it for it in items]
    consumed = sum(it[2] if it[0] == "adv" else 1 for it in items
                   if it[0] in ("adv", "int", "slice"))
    out, dim, adv_shapes, adv_at, runs, prev = [], 0, [], 0, 0, None
    for it in items:
        kind = it[0]
        if kind == "adv":
            adv_shapes.append(it[1])
            dim += it[2]
            if prev != "adv":                 # a new run of adjacent advanced indices
                runs += 1
                adv_at = len(out)
        elif kind == "int":
            dim += 1
        elif kind == "slice":
            out.append(len(range(*it[1].indices(shape[dim]))))
            dim += 1
        elif kind == "new":
            out.append(1)
        else:                                 # "...": the dims no other entry consumes
            n = len(shape) - consumed
            out.extend(shape[dim:dim + n])
            dim += n
        prev = kind
    if not adv:
        return tuple(out)
    at = adv_at if runs == 1 else 0
    return tuple(out[:at]) + tuple(np.broadcast_shapes(*adv_shapes)) + tuple(out[at:])


def _key_item(k, slot_shapes):
    """One key entry as ("new",), ("ell",), ("slice", s), ("int",) or ("adv", shape, dims
    consumed); None for a boolean mask operand (data-dependent)."""
    if k is None:
        return ("new",)
    if k is Ellipsis:
        return ("ell",)
    if isinstance(k, slice):
        return ("slice", k)
    from .shape import Slot                   # (shape.py declares with these rules)
    if isinstance(k, Slot):                   # index operand k.k
        s = slot_shapes[k.k]
        if isinstance(s, BoolShape):
            return None
        return ("adv", tuple(s), 1)
    if isinstance(k, np.ndarray):                               # an array literal in the key
        if k.dtype == np.bool_:
            return ("adv", (int(np.count_nonzero(k)),), k.ndim)
        return ("adv", k.shape, 1)
    return ("int",)
