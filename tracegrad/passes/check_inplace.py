"""check_inplace: find, at compile time, the saved values eager autograd refuses at backward.

After `functionalize` recorded which saved operands were overwritten later (`graph.stale`)
and `vjp` reported which nodes' rules actually run, any rule that reads an overwritten value
is exactly the case where PyTorch raises "one of the variables needed for gradient
computation has been modified by an inplace operation". The errors are returned, never
raised here (Note [Inplace errors wait for backward]).

Note [Inplace errors wait for backward]
Eager autograd checks a saved value's version only when backward unpacks it: the forward
always succeeds (a model with `ReLU(inplace=True)` then `Dropout(inplace=True)` can be run
for inference or logging with grad mode on), and only a backward that reaches the saving
node fails. Whether the overwrite ran under grad mode or under `no_grad` makes no difference.
So a compiled call never raises these errors: each is returned, with the graph outputs whose
gradient reaches the saving node (`InplaceCheck.reaches`), and the compiled backward node
raises it only when a gradient arrives for one of those outputs
(compiler/backward_node.py), before any gradient of the call is accumulated. Eager's engine
may accumulate into a leaf before it meets the error (`w` in `(x.tanh().mul_(2) * w).sum()`:
PyTorch fills `w.grad`, then raises at TanhBackward0); a compiled node cannot stop half way,
so such paths run eagerly, with a warning (`early_input`). The message is eager's, word for word; the two source sites
(where the value was saved, where it was overwritten) go in a note (`add_note`), shown in
tracebacks but not part of `str(err)`. A backward inside the compiled function raises
during the trace itself, which runs the function eagerly.
"""
from .._dtype import tensor_type_name
from .._errors import InplaceError
from ..autograd.graph import saved_by
from ..ir.types import Value




def _isval(a):
    return isinstance(a, Value)


class InplaceCheck(list):
    """The deferred errors (a list, in the order eager backward would meet them), `reaches`
    (per error, the frozenset of graph output positions whose gradient reaches the saving
    node) and `stats`: what the check looked at. Each error's `frees_graph` says whether
    eager's backward frees saved values on its way to the error (a second backward then
    fails with the freed-graph error instead)."""

    def __init__(self, errors, stats, reaches=None):
        super().__init__(errors)
        self.stats = stats
        self.reaches = list(reaches) if reaches is not None else [None] * len(errors)


def fresh(err):
    """A new copy of a deferred error (same type, message and notes): raising the stored
    one again would pile tracebacks up across calls."""
    new = type(err)(str(err))
    new.frees_graph = getattr(err, "frees_graph", None)
    for note in getattr(err, "__notes__", ()):
        new.add_note(note)
    return new


def _reach(g, idx, differentiated, req):
    """(positions of `g.outputs` that node `idx`'s output flows to through differentiated
    nodes only: the outputs whose gradient makes backward run node `idx`'s rule; whether a
    node on the way saves a value: eager backward frees it before reaching node `idx`)."""
    live = {g.nodes[idx].output}
    frees = False
    for j in range(idx + 1, len(g.nodes)):
        n = g.nodes[j]
        if j in differentiated and any(_isval(a) and a in live for a in n.inputs):
            live.update(o for o in (n.output if isinstance(n.output, tuple) else (n.output,))
                        if o is not None)
            saved = n.prim.saves if req is None else n.prim.saved_for(
                [_isval(a) and a in req for a in n.inputs])
            frees = frees or n.prim.saves_out or any(
                k < len(n.inputs) and _isval(n.inputs[k]) for k in saved)
    return frozenset(k for k, v in enumerate(g.outputs) if v is not None and v in live), frees


def check_inplace(g, differentiated, requires_grad=()):
    """The InplaceErrors eager backward raises: a differentiated node needs a value
    overwritten after it ran (Note [Inplace errors wait for backward]).

    `requires_grad`: the graph inputs that require grad (only used to word the message as
    eager does). Returns them as an `InplaceCheck` list whose `reaches` say which outputs'
    gradients hit each, and whose `stats` count the overwritten values and how many of
    them a gradient reads."""
    prod = {n.output: n for n in g.nodes}
    from .vjp import requires_grad_values
    # what each node keeps depends on which operands need a gradient (mul keeps `self` only
    # for `other`'s gradient); without `requires_grad`, every declared save counts
    req = requires_grad_values(g, requires_grad) if requires_grad else None
    found = []
    read = 0
    for (idx, which), stale in sorted(g.stale.items(), key=lambda kv: kv[0][0]):
        site, saved_ver, final_ver = stale[:3]
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
        err = InplaceError(             # eager's wording (autograd/graph.py _version_error)
            "one of the variables needed for gradient computation has been modified by an "
            f"inplace operation: [torch.{tensor_type_name(v.type.dtype)} "
            f"{list(v.type.shape)}], which "
            f"is {desc}, is at version {final_ver}; expected version {saved_ver} instead. "
            f"Hint: the value was saved for {n.prim.grad_fn_name}; clone() it before modifying "
            "it in place, or do the in-place op out of place (e.g. `x = x + 1` instead of "
            "`x += 1`).")
        err.add_note(f"  saved for {n.prim.grad_fn_name} at {n.site}\n"
                     f"  overwritten in place at {site}")
        reach, err.frees_graph = _reach(g, idx, differentiated, req)
        found.append(((-idx, which == "out"), err, reach))
    # eager's engine meets the latest saving node first, and checks a node's saved operands
    # before its saved result: that error is the one raised
    found.sort(key=lambda f: f[0])
    deferred, reaches = [f[1] for f in found], [f[2] for f in found]
    stale = g.stale
    res = InplaceCheck(deferred, {"overwritten_saves": len(stale), "read_by_backward": read,
                                  "deferred_to_backward": len(deferred)}, reaches)
    res.early_input = _early_input(g, differentiated, found, requires_grad)
    return res


def _early_input(g, differentiated, found, requires_grad):
    """An input that requires grad whose gradient eager's engine may accumulate before it
    meets the error (every node it feeds ran later in the forward than the saving node),
    or None (Note [Inplace errors wait for backward]). Conservative: for each output, the
    first error eager meets on its way back is the latest saving node that output reaches."""
    if not found:
        return None
    first = {}
    for key, _, reach in found:
        for k in reach:
            first[k] = max(first.get(k, -1), -key[0])
    if not first:
        return None
    prod = {n.output: j for j, n in enumerate(g.nodes)}
    for k, f in first.items():
        # the differentiated nodes output k's gradient runs through
        on_path, todo = set(), [g.outputs[k]]
        while todo:
            j = prod.get(todo.pop())
            if j is None or j in on_path or j not in differentiated:
                continue
            on_path.add(j)
            todo.extend(a for a in g.nodes[j].inputs if _isval(a))
        for v in g.inputs:
            if v not in requires_grad:
                continue
            users = [j for j in on_path if any(a is v for a in g.nodes[j].inputs)]
            if users and min(users) > f:
                return v
    return None
