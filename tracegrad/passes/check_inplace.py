"""check_inplace: refuse, at compile time, programs eager autograd would refuse at backward.

After `functionalize` recorded which saved operands were overwritten later (`graph.stale`)
and `vjp` reported which nodes' rules actually run, any rule that reads an overwritten value
is exactly the case where PyTorch raises "one of the variables needed for gradient
computation has been modified by an inplace operation". We raise the same error (an
`InplaceError`, a RuntimeError) now, naming both source lines and the fix.
"""
from .._errors import InplaceError

_KIND = {"float32": "FloatTensor", "float64": "DoubleTensor", "float16": "HalfTensor",
         "int64": "LongTensor", "int32": "IntTensor", "bool": "BoolTensor"}


def check_inplace(g, differentiated):
    """Raise InplaceError if a differentiated node needs a value overwritten after it ran."""
    prod = {n.output: n for n in g.nodes}
    for (idx, which), (site, saved_ver, final_ver) in sorted(getattr(g, "stale", {}).items(),
                                                             key=lambda kv: kv[0][0]):
        if idx not in differentiated:
            continue
        n = g.nodes[idx]
        if which == "out":
            if not n.prim.saves_out:
                continue
            v, desc = n.output, f"output 0 of {n.prim.grad_fn_name}"
        else:
            if which not in n.prim.saves:
                continue
            v = n.inputs[which]
            p = prod.get(v)
            desc = f"output 0 of {p.prim.grad_fn_name}" if p is not None else "an input"
        raise InplaceError(
            "one of the variables needed for gradient computation has been modified by an "
            f"inplace operation: [torch.{_KIND[v.type.dtype.name]} {list(v.type.shape)}], which "
            f"is {desc}, is at version {final_ver}; expected version {saved_ver} instead.\n"
            f"  saved for {n.prim.grad_fn_name} at {n.site}\n"
            f"  overwritten in place at {site}\n"
            "Fix: call .clone() on the value before modifying it in place, or use the "
            "out-of-place op (e.g. `y = y * 2` instead of `y.mul_(2)`).")
    return True
