"""The primitive declaration: everything tracegrad knows about one operation, in one place.

Note [One table]
A `Primitive` holds the numpy kernel, the dtype rule (which dtype operands are cast to), the
shape rule (the output shape, computed without running anything), the VJP rule written with
tracegrad ops (so it runs eagerly, is recorded by the tracer, and differentiates again for
higher-order gradients), which saved values the VJP reads, the effects (`overwrites`: input
positions written in place; `aliases`: the input the output shares storage with) and the
PyTorch grad_fn name. Eager execution, tracing, the VJP pass, code generation, drawing and
the IR verifier all read this declaration; nothing about an op lives elsewhere.

Shape rule signature: `shape_rule(shapes, attrs) -> tuple`, where `shapes` has one entry
per operand (the operand's shape, a tuple, for a tensor or numpy array; None for a literal
such as a Python number or a Generator) and `attrs` is the node's attribute dict. It returns
the output shape from those alone (never from data), raises nothing for valid operands, and
returns None where the shape depends on data for these operands (`index` with a boolean
mask: a mask's shape arrives as `BoolShape`). Every primitive declares one except the always
data-dependent `nonzero`; the shared rules (n-ary broadcasting, reductions over `dims`/`dim`
with `keepdim`, indexing keys, ...) live in `ops/shape_rules.py` (Note [Shape rules]), rules
only one op needs next to its kernel. `overload_of` keeps the rule; an `inplace_of` variant's
output is operand 0's shape. `ir.verify` checks every node's type against the rule; eager
dispatch never calls it.

VJP signature: `vjp(g, ins, out, node) -> tuple` with one gradient (or None) per operand.
`ins` holds the saved operands (None where not saved), `out` the saved output
(when `saves_out`), and `node` gives `attrs`, operand `shapes` and `needs` (which operands
need a gradient).

Which operands are saved: `saves` (always), or `saves_for={operand: operands its gradient
reads}`, so a node keeps only what the gradients it will compute need. PyTorch's
MulBackward0 keeps `self` only when `other` requires grad; overwriting `self` in place
afterwards is then no error, and users rely on that.

Note [Static kernels]
Eager execution learns shapes, dtypes and index layouts anew on every call; a compiled
program knows them in advance. `specialize(node)`, when declared, receives an IR node (typed
operands, attributes) and returns a kernel with those facts worked out once, or None to keep
the generic kernel. The specialized kernel takes the node's operands only (its
attributes are baked in), plus `out=` when the generic kernel accepts it; it computes
exactly what the generic kernel computes, and runs with numpy's warnings already off when
the generic kernel is quiet. Code generation uses it; eager dispatch and the reference IR
interpreter keep the generic kernel, so tests comparing them check every specialization.
"""
import numpy as np

from .. import _dtype as D
from . import shape_rules as SR

REGISTRY = {}


class Primitive:
    """One operation of the primitive table (see Note [One table])."""

    __slots__ = ("name", "kernel", "vjp", "grad_fn_name", "saves", "saves_out", "dtype_rule",
                 "overwrites", "aliases", "is_view", "functional", "node_cls", "nondiff",
                 "shape_rule", "doc", "impure", "elementwise", "float_fast", "saves_for",
                 "_saves_by_need", "specialize", "layout", "may_raise", "half_in_float",
                 "writes", "quiet")

    def __init__(self, name, kernel, *, vjp=None, grad_fn_name=None, saves=(), saves_out=False,
                 dtype_rule=None, overwrites=(), aliases=None, is_view=None, functional=None,
                 nondiff=False, shape_rule=None, doc="", impure=False,
                 elementwise=False, saves_for=None, specialize=None, layout=None,
                 may_raise=False, writes=None):
        if name in REGISTRY:
            raise ValueError(f"primitive {name!r} declared twice")
        self.name = name
        self.set_kernel(kernel)
        self.vjp = vjp
        self.grad_fn_name = grad_fn_name or (_camel(name) + "Backward0")
        self.saves_for = saves_for
        self._saves_by_need = None
        if saves_for is not None:
            saves = sorted({k for ks in saves_for.values() for k in ks})
            self._saves_by_need = _by_need(saves_for)
        self.saves = tuple(saves)             # every operand some gradient may read
        self.saves_out = saves_out
        self.dtype_rule = dtype_rule
        # dispatch may skip the rule when operands are one float dtype and Python numbers
        self.float_fast = dtype_rule is None or getattr(dtype_rule, "keeps_float", False)
        self.overwrites = tuple(overwrites)
        self.aliases = aliases
        self.is_view = (aliases is not None) if is_view is None else is_view
        self.functional = functional
        self.nondiff = nondiff or vjp is None
        self.shape_rule = shape_rule
        self.doc = doc
        self.impure = impure          # never removed or merged by passes (RNG draws)
        self.elementwise = elementwise  # output[i] depends on operand[i] only: may write in place
        self.specialize = specialize  # Note [Static kernels]
        # memory order of the result (Note [Layouts] in passes/layout.py): None = that of its
        # operands, "reorders" = a view with its axes reordered, "c" = always C order
        self.layout = layout
        # its kernel may fail on its operands' values (an index out of range, an integer
        # division by zero): shapes and dtypes are checked while tracing, values only when
        # the program runs (Note [Errors inside compiled programs] in codegen.py); "integer":
        # only when its result is an integer (a division by zero, a negative power)
        self.may_raise = may_raise
        self.half_in_float = False    # Note [Half precision computed in float] (half_precision.py)
        # how an in-place primitive writes operand 0 (Note [Overlapping in-place operands] in
        # _overlap.py): "all" every element, elementwise; "indexed" through an index
        # (`x[idx] = v`, `scatter_`: PyTorch refuses an operand that is the target, too);
        # "slice" operand 1 into the view `operand0[key]` of a basic index (`x[1] = v`:
        # PyTorch writes through that view); None when it writes nothing in place
        if writes is None and overwrites:
            writes = "all"
        assert writes in (None, "all", "indexed", "slice"), writes
        self.writes = writes
        from ..autograd.graph import node_class
        self.node_cls = node_class(self.grad_fn_name)     # see Note [Monomorphic nodes]
        REGISTRY[name] = self

    def set_kernel(self, kernel):
        """Use `kernel`; `quiet` is it without its warnings switch, which dispatch then does
        itself, one Python call less per op (Note [Quiet kernels] in _quiet.py)."""
        self.kernel = kernel
        self.quiet = getattr(kernel, "quiet_raw", None)

    def __repr__(self):
        return f"<primitive {self.name}>"

    def saved_for(self, needs):
        """The operands a node keeps when `needs[i]` says operand i needs a gradient."""
        if self._saves_by_need is None:
            return self.saves
        return self._saves_by_need[tuple(bool(x) for x in needs)]

    def __reduce__(self):
        return (REGISTRY.__getitem__, (self.name,))


def _by_need(saves_for):
    """{needs tuple: operands saved} for every combination of needs (a table, so dispatch
    pays one dict lookup)."""
    import itertools
    n = max(list(saves_for) + [k for ks in saves_for.values() for k in ks]) + 1
    table = {}
    for needs in itertools.product((False, True), repeat=n):
        table[needs] = tuple(sorted({k for i, need in enumerate(needs) if need
                                     for k in saves_for.get(i, ())}))
    return table


def _camel(name):
    return "".join(p.capitalize() for p in name.strip("_").split("_"))


def may_fail(node):
    """Whether `node`'s kernel may fail on its operands' values (`Primitive.may_raise`)."""
    m = node.prim.may_raise
    return m is True or (m == "integer" and node.output.type.dtype.np.kind in "iub")


def inplace_of(prim, name=None, grad_fn_name=None, writes="all"):
    """Declare the in-place variant of a functional primitive: same math, writes operand 0
    (`writes`: how, see `Primitive.writes`)."""
    def kernel(target, *rest, **attrs):
        res = prim.kernel(target, *rest, **attrs)
        if res.dtype == target.dtype:
            np.copyto(target, res)
        else:                     # a narrowing cast may overflow: inf, silently (PyTorch)
            with np.errstate(all="ignore"):
                np.copyto(target, res, casting="unsafe")
        return target
    # the result is the overwritten operand: its shape, whatever the functional rule says
    return Primitive(name or prim.name + "_", kernel, vjp=prim.vjp,
                     grad_fn_name=grad_fn_name or prim.grad_fn_name, saves=prim.saves,
                     saves_out=prim.saves_out, dtype_rule=prim.dtype_rule, overwrites=(0,),
                     functional=prim, nondiff=prim.nondiff, saves_for=prim.saves_for,
                     shape_rule=SR.same, may_raise=prim.may_raise, writes=writes)


def overload_of(prim, name, grad_fn_name, kernel=None):
    """Declare another PyTorch overload of `prim`: identical math, its own grad_fn name.

    PyTorch names a node after the overload that ran (`x.sum()` records SumBackward0,
    `x.sum(0)` SumBackward1); users and tools read those names, so we keep them. `kernel`
    replaces prim's where the overload differs only at the edges (pow_tensor's integer
    powers).
    """
    return Primitive(name, kernel or prim.kernel, vjp=prim.vjp, grad_fn_name=grad_fn_name,
                     saves=prim.saves, saves_out=prim.saves_out, dtype_rule=prim.dtype_rule,
                     aliases=prim.aliases, is_view=prim.is_view, nondiff=prim.nondiff,
                     shape_rule=prim.shape_rule, doc=prim.doc, saves_for=prim.saves_for,
                     specialize=prim.specialize, layout=prim.layout, may_raise=prim.may_raise)


# ---- dtype rules: map operands to the numpy dtype they are cast to before the kernel ----

def _operand_dtype(args):
    dims, zero, scal = [], [], []
    for a in args:
        d = getattr(a, "_data", None)
        if d is None and isinstance(a, np.ndarray):
            d = a                   # numpy operands promote like tensors (as PyTorch does)
        if d is not None:
            (dims if d.ndim else zero).append(D.from_numpy_dtype(d.dtype))
        elif a is not None and not isinstance(a, (str, tuple, list, slice)):
            scal.append(a)
    return D.result_type(dims, zero, scal)


def promote(args):
    """PyTorch type promotion over all operands (Tensors and Python numbers)."""
    a0 = args[0]
    d0 = getattr(a0, "_data", None)
    if d0 is not None and len(args) == 2:           # fast path: tensor op tensor/scalar
        b = args[1]
        db = getattr(b, "_data", None)
        if db is not None:
            if db.dtype == d0.dtype:
                return d0.dtype
        elif type(b) is float and d0.dtype.kind == "f" or type(b) is int and d0.dtype.kind in "fi":
            return d0.dtype
    elif d0 is not None and len(args) == 1:
        return d0.dtype
    elif len(args) == 2:                            # fast path: scalar op tensor (1.0 - y)
        db = getattr(args[1], "_data", None)
        if db is not None and (type(a0) is float and db.dtype.kind == "f"
                               or type(a0) is int and db.dtype.kind in "fi"):
            return db.dtype
    return _operand_dtype(args).np


def promote_float(args):
    """Promotion, then integers and bools become the default float (true division, exp...)."""
    d = promote(args)
    return d if d.kind == "f" or D.is_float_np(d) else D.get_default_dtype().np


# What dispatch relies on to skip calling these rules (see `float_fast` above): with every
# tensor operand of one float dtype and the other operands Python floats or ints, they
# return that dtype.
promote.keeps_float = promote_float.keeps_float = True


def promote_tail(args):
    """Promotion over operands 1.. only (operand 0 is a bool condition, as in `where`)."""
    return promote(args[1:])
