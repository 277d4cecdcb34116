"""check_inplace: refuse, at compile time, programs eager autograd would refuse at backward.

After `functionalize` recorded which saved operands were overwritten later (`graph.stale`)
and `vjp` reported which nodes' rules actually run, any rule that reads an overwritten value
is exactly the case where PyTorch raises "one of the variables needed for gradient
computation has been modified by an inplace operation". We raise the same error (an
`InplaceError`, a RuntimeError) now, naming both source lines and the fix.

One exception: when every overwrite ran under `no_grad` (an optimizer-style update of a value
the forward computation used), eager mode only fails if backward later runs through the
saving node; a compiled function must then still return its results. Those errors are
returned instead, for the compiled backward node to raise when backward runs.
"""
from .._errors import InplaceError
from ..autograd.graph import saved_by
from ..ir.types import Value

_KIND = {"float32": "FloatTensor", "float64": "DoubleTensor", "float16": "HalfTensor",
         "int64": "LongTensor", "int32": "IntTensor", "bool": "BoolTensor"}


def _isval(a):
    return isinstance(a, Value)


class InplaceCheck(list):
    """The deferred errors (a list) and `stats`: what the check looked at."""

    def __init__(self, errors, stats):
        super().__init__(errors)
        self.stats = stats


def check_inplace(g, differentiated, requires_grad=()):
    """Raise InplaceError if a differentiated node needs a value overwritten after it ran.

    `requires_grad`: the graph inputs that require grad (only used to word the message as
    eager does). Returns the deferred errors (overwrites under no_grad; see module
    docstring) as an `InplaceCheck` list whose `stats` count the overwritten values and
    how many of them a gradient reads."""
    prod = {n.output: n for n in g.nodes}
    from .vjp import requires_grad_values
    # what each node keeps depends on which operands need a gradient (mul keeps `self` only
    # for `other`'s gradient); without `requires_grad`, every declared save counts
    req = requires_grad_values(g, requires_grad) if requires_grad else None
    deferred = []
    read = 0
    for (idx, which), stale in sorted(g.stale.items(), key=lambda kv: kv[0][0]):
        site, saved_ver, final_ver = stale[:3]
        later = len(stale) > 3 and stale[3]
        last_fn = stale[4] if len(stale) > 4 else None
        if idx not in differentiated:
            continue
        n = g.nodes[idx]
        if which == "out":
            if not n.prim.saves_out:
                continue
            v, desc = n.output, f"output 0 of {saved_by(n.prim.grad_fn_name)}"
        else:
            saved = n.prim.saves if req is None else n.prim.saved_for(
                [_isval(a) and a in req for a in n.inputs])
            if which not in saved:
                continue
            v = n.inputs[which]
            p = prod.get(v)
            if p is None:                    # a program input, described as eager would
                desc = ("a leaf tensor" if v in requires_grad
                        else "a tensor that does not require grad")
            else:                            # eager names the overwriting op's node
                desc = f"output 0 of {saved_by(last_fn or p.prim.grad_fn_name)}"
        read += 1
        err = InplaceError(
            "one of the variables needed for gradient computation has been modified by an "
            f"inplace operation: [torch.{_KIND[v.type.dtype.name]} {list(v.type.shape)}], which "
            f"is {desc}, is at version {final_ver}; expected version {saved_ver} instead.\n"
            f"  saved for {n.prim.grad_fn_name} at {n.site}\n"
            f"  overwritten in place at {site}\n"
            "Fix: call .clone() on the value before modifying it in place, or use the "
            "out-of-place op (e.g. `y = y * 2` instead of `y.mul_(2)`).")
        if not later:
            raise err
        deferred.append(err)
    stale = g.stale
    return InplaceCheck(deferred, {"overwritten_saves": len(stale), "read_by_backward": read,
                                   "deferred_to_backward": len(deferred)})
