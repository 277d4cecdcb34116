"""layout: which values of a graph may not be in C (row-major) memory order.

Note [Layouts]
numpy gives the result of an elementwise kernel, a reduction or a cast the memory order of
its operands (order "K"): `tanh(x.t())` comes back column-major. A later order-dependent
kernel (a float sum, a matmul) then adds in that order. A memory plan that hands the same
kernel a row-major buffer (`out=`) changes the order, and the sum can differ from eager
execution in its last bit. So the plan gives `out=` only to values that are in C order in
eager execution too: `reordered_values` finds the others, conservatively.

Measured (numpy 2.4): only a reordering of axes makes a result leave C order. Slices,
selects, broadcasts (expand), reshapes, and operands of mixed orders all give C-ordered
results; a transpose/permute view, or an argument that is not C-contiguous, gives a non-C
result, and so does every value computed from one without passing through a kernel that
always writes C order (matmul: `Primitive.layout == "c"`). Values of fewer than two
dimensions are always in C order.
"""


def in_c_order(a):
    """Whether numpy array `a` is in C order as Note [Layouts] counts it (fewer than two
    dimensions always are)."""
    return a.ndim < 2 or a.flags.c_contiguous


def reordered_values(g, reordered_inputs=()):
    """The Values of `g` that may not be in C order (Note [Layouts]).

    `reordered_inputs`: indexes of graph inputs whose arrays may not be C-contiguous."""
    out = {g.inputs[k] for k in reordered_inputs}
    for n in g.nodes:
        v = n.output
        if len(v.type.shape) < 2 or n.prim.layout == "c":
            continue
        if n.prim.layout == "reorders" or any(a in out for a in n.value_inputs()):
            out.add(v)
    return out
