"""The backward engine: iterative reverse traversal of the grad_fn graph.

Note [Ordering]
Every node gets a global, increasing sequence number at creation, and a node's inputs were
always created before it. Processing ready nodes highest-sequence-first therefore visits a
node only after every reachable consumer has contributed to its gradient, with no separate
dependency-count pass and no recursion (a 10,000-op chain needs no deep stack). Engine state
is local to one call, so concurrent calls from threads on separate graphs never interact;
accumulation into a shared leaf takes that leaf's lock.

Note [Leaf accumulation order]
PyTorch's engine runs a node once all its inputs arrived (dependency counts), highest
sequence number first, and gives every `AccumulateGrad` the highest priority: a leaf's
gradient is accumulated, and its hooks run, right after the last node feeding it; leaves
made ready by one node run in the order its binary heap pops equal keys (`tie_order`:
`cat([l0, l1, l2, l3])` runs l0, l2, l1, l3). The order of the other nodes is the same as
ours (each node comes after all its consumers either way). Accumulating every leaf at the
end, as this engine once did, ordered leaves by `id()`, which differed from PyTorch and
between eager and compiled calls (a compiled call's backward is one node). Since the order
is observable only through hooks, the dependency counts are taken once some gradient hook
was ever registered (`HOOKED`). A compiled call's node gives its leaves eager's order
(`acc_rank`, `leaf_ranks`).
"""
import heapq

from .. import _effects, _mode
from .._dtype import _FROM_NP
from .._errors import TracegradRuntimeError, op_error
from .._tensor import Tensor, accumulator, edge_of
from .anomaly_mode import STATE as _ANOMALY, check_outputs as _check_anomaly
from .graph import HOOKED, AccumulateGrad


def _root_edge(t, i):
    if not t.requires_grad:
        raise op_error(TracegradRuntimeError, "backward",
                       f"element {i} of tensors does not require grad and does not have a "
                       "grad_fn", "Make sure an input has requires_grad=True and the "
                       "computation ran with grad enabled (not under no_grad).")
    return edge_of(t)


def _needed(roots, targets):
    """Nodes from which some target node is reachable (iterative DFS)."""
    need = {}
    order, stack, seen = [], [n for n, _ in roots], set()
    while stack:
        n = stack.pop()
        if id(n) in seen:
            continue
        seen.add(id(n))
        order.append(n)
        stack.extend(e[0] for e in n.edges if e is not None)
    tids = {id(t) for t in targets}
    for n in sorted(order, key=lambda n: n.seq):
        need[id(n)] = id(n) in tids or any(e is not None and need.get(id(e[0]), False)
                                           for e in n.edges)
    return need


def run_backward(tensors, grads, retain_graph, create_graph, inputs=None, capture=False,
                 allow_unused=False):
    """Backpropagate `grads` from `tensors`.

    With `capture`, returns the gradients of `inputs` instead of accumulating into `.grad`
    (autograd.grad). With `inputs` and no capture, only those tensors' .grad are updated.
    """
    roots = [_root_edge(t, i) for i, t in enumerate(tensors)]
    if inputs is None and len(roots) == 1 and roots[0][0].leaf_sink:
        if _one_node(roots[0], grads[0], retain_graph, create_graph):
            return None
    targets = None
    captured = None
    if inputs is not None:
        targets = {}
        for k, t in enumerate(inputs):
            if not t.requires_grad:
                raise op_error(TracegradRuntimeError, "grad",
                               f"One of the differentiated Tensors does not require grad")
            node, nr = edge_of(t)
            targets.setdefault(id(node), []).append((k, nr, t))
        captured = [None] * len(inputs)
        need = _needed(roots, [e for e in (edge_of(t)[0] for t in inputs)])
    else:
        need = None
    buffers = {}
    heap = []
    deps = _acc_dependencies(roots) if HOOKED[0] and targets is None else None
    pend, ready = {}, []                 # Note [Leaf accumulation order]
    for (node, nr), g in zip(roots, grads):
        if deps is not None and node.ready_first:
            _deliver(deps, pend, ready, node, g)
        else:
            _add(buffers, heap, node, nr, g)
    prev = _mode._grad_enabled.set(bool(create_graph))
    # this loop runs once per graph node: keep lookups in locals, calls off the common path
    # heap entries: (-seq, id(node), node, gradient buffer); `buffers` maps id(node) to the
    # buffer of a node still waiting in the heap, where further gradients accumulate
    heappop, heappush, find = heapq.heappop, heapq.heappush, buffers.get
    tracer = _effects.active()          # a backward() inside a traced function
    anomaly = _ANOMALY["enabled"]
    try:
        if ready:
            _run_ready(ready, None, create_graph, tracer)
        while heap:
            _, key, node, gs = heappop(heap)
            del buffers[key]
            if need is not None and not need.get(key, False):
                continue
            if tracer is not None:
                tracer.note_backward_node(node, False)
            if node.pre_hooks:
                gs = _pre_hooks(node, gs)
            if targets is not None:
                for k, nr, t in targets.get(id(node), ()):
                    g = gs[nr]
                    uses = getattr(getattr(node, "path", None), "inner_uses", None)
                    if uses and any(gs[j] is not None for j in uses.get(nr, ())):
                        _output_target_error(node, nr, uses[nr])
                    if capture:
                        captured[k] = g
                    elif g is not None:
                        _accumulate_target(t, g, create_graph)
                if isinstance(node, AccumulateGrad) or not any(
                        need.get(id(e[0]), False) for e in node.edges if e is not None):
                    continue
            elif isinstance(node, AccumulateGrad):
                if gs[0] is not None:
                    node.accumulate(gs[0], create_graph)
                continue
            if gs[0] is None and node.n_outputs == 1:
                continue
            if tracer is not None:
                tracer.note_backward_node(node, True)
            consume = None if retain_graph else getattr(node, "apply_and_release", None)
            out = consume(gs) if consume is not None else node.apply(gs)
            if anomaly:
                _check_anomaly(node, out)
            if node.hooks:
                for h in node.hooks:
                    r = h(tuple(out), tuple(gs))
                    if r is not None:
                        out = r
            if not retain_graph:
                node.release()
            for e, g, dt in zip(node.edges, out, node.dtypes):
                if e is None or g is None:
                    continue
                if dt is not None and g._data.dtype is not dt and g._data.dtype != dt:
                    g = g.to(_FROM_NP[dt])
                nxt, nr = e
                key = id(nxt)
                if need is not None and not need.get(key, False):
                    continue
                if deps is not None and key in deps:
                    _deliver(deps, pend, ready, nxt, g)
                    continue
                buf = find(key)
                if buf is None:                         # _add, inlined
                    if nxt.n_outputs == 1:
                        buf = [g]
                    else:
                        buf = [None] * nxt.n_outputs
                        buf[nr] = g
                    buffers[key] = buf
                    heappush(heap, (-nxt.seq, key, nxt, buf))
                else:
                    buf[nr] = g if buf[nr] is None else buf[nr] + g
            if ready:
                _run_ready(ready, node, create_graph, tracer)
        if pend:         # leaves some skipped node (a None gradient) never counted down
            _run_ready([(n, gs[0]) for n, gs in pend.values()], None, create_graph, tracer)
    finally:
        _mode._grad_enabled.reset(prev)
    if capture:
        for k, g in enumerate(captured):
            if g is None and not allow_unused:
                raise op_error(TracegradRuntimeError, "grad",
                               f"The differentiated Tensor at index {k} appears to not have been "
                               "used in the graph. Set allow_unused=True if this is the desired "
                               "behavior.")
        return tuple(captured)
    return None


def _one_node(root, g, retain_graph, create_graph):
    """Note [One node feeding leaves]
    The most common backward of a compiled call: one root on a compiled call's node
    (`leaf_sink`) whose every edge leads to a distinct leaf's accumulator, with no hook on
    the node or the leaves, no anomaly detection, no enclosing trace, no `inputs=`. The
    general loop would pop the node, run it, push each leaf and pop it again; here it runs
    the node and accumulates into each leaf in edge order (with no hook anywhere on the
    way, the order cannot be observed). Returns False, having done nothing, when the graph
    is not of that shape."""
    node, nr = root
    if node.pre_hooks or node.hooks or _ANOMALY["enabled"] or _effects.active() is not None \
            or not only_plain_leaves(node):
        return False
    if node.n_outputs == 1:
        gs = [g]
    else:
        gs = [None] * node.n_outputs
        gs[nr] = g
    prev = _mode._grad_enabled.set(bool(create_graph))
    try:
        if g is None:
            return True
        out = node.apply(gs) if retain_graph else node.apply_and_release(gs)
        if not retain_graph:
            node.release()
        accumulate_into_leaves(node, out, create_graph)
    finally:
        _mode._grad_enabled.reset(prev)
    return True


def only_plain_leaves(node):
    """Whether every edge of `node` leads to a distinct leaf accumulator without pre-hooks
    (then the order of accumulation cannot be observed)."""
    seen = []
    for e in node.edges:
        if e is not None:
            nxt = e[0]
            if type(nxt) is not AccumulateGrad or nxt.pre_hooks or nxt in seen:
                return False
            seen.append(nxt)
    return True


def accumulate_into_leaves(node, grads, create_graph):
    """Accumulate `node`'s input gradients `grads` into the leaves its edges lead to, each
    cast to its input's dtype first."""
    for e, g, dt in zip(node.edges, grads, node.dtypes):
        if e is None or g is None:
            continue
        if dt is not None and g._data.dtype is not dt and g._data.dtype != dt:
            g = g.to(_FROM_NP[dt])
        e[0].accumulate(g, create_graph)


def _output_target_error(node, nr, uses):
    """Note [Gradients with respect to an output]
    A compiled function's backward is one autograd node (as with torch.compile). When it
    returns `h` and also computes another returned tensor `loss` from `h`, eager's
    `autograd.grad(loss, h)` (or `loss.backward(inputs=[h])`) gets the gradient flowing
    from `loss` back to `h` inside the function; the compiled node has no such edge, so
    it would report `h` unused or give only what flows from outside. Refuse clearly."""
    raise op_error(TracegradRuntimeError, "grad",
                   f"the gradient with respect to output {nr} of a compiled function "
                   f"({node.name()}) is asked for while output(s) {list(uses)}, computed "
                   "from it inside the function, also get one: a compiled function's "
                   "backward is one node, so the part flowing between its outputs is not "
                   "available",
                   "Compute that output outside the compiled function, or return only the "
                   "tensor you differentiate with respect to and compute the rest from it "
                   "outside.")


def _output_hook_error(node, nr, uses):
    """Note [Gradients with respect to an output], for a hook (or `retain_grad()`) on such
    an output registered after the call: eager's hook sees the whole gradient of `h`, the
    part flowing back from `loss` included; the compiled node has only what flows from
    outside, so the hook would see (and `h.grad` keep) part of it. Refuse clearly."""
    raise op_error(TracegradRuntimeError, "register_hook",
                   f"a hook (or retain_grad) on output {nr} of a compiled function "
                   f"({node.name()}) needs its whole gradient, but output(s) {list(uses)}, "
                   "computed from it inside the function, also get one: a compiled "
                   "function's backward is one node, so the part flowing between its "
                   "outputs is not available",
                   "Register the hook (or call retain_grad()) inside the compiled function, "
                   "or compute the other outputs outside it.")


def _acc_dependencies(roots):
    """{id(AccumulateGrad): the edges into it from the roots and the nodes they reach}."""
    deps, stack, seen = {}, [], set()
    for n, _ in roots:
        if n.ready_first:
            deps[id(n)] = deps.get(id(n), 0) + 1
        stack.append(n)
    while stack:
        n = stack.pop()
        if id(n) in seen:
            continue
        seen.add(id(n))
        for e in n.edges:
            if e is not None:
                m = e[0]
                if m.ready_first:
                    deps[id(m)] = deps.get(id(m), 0) + 1
                if id(m) not in seen:
                    stack.append(m)
    return deps


def _deliver(deps, pend, ready, node, g):
    """Gradient `g` reached `node` (a leaf's accumulator or an error node); it is ready once
    every edge into it delivered (Note [Leaf accumulation order])."""
    key = id(node)
    got = pend.get(key)
    if got is None:
        pend[key] = got = (node, [g])
    elif g is not None and got[1][0] is None:
        got[1][0] = g
    elif g is not None and isinstance(node, AccumulateGrad):   # (an error node only raises)
        got[1][0] = got[1][0] + g
    deps[key] -= 1
    if deps[key] == 0:
        del pend[key]
        ready.append((node, got[1][0]))


def _run_ready(ready, by, create_graph, tracer):
    """Accumulate the leaves `ready` (made ready together, by node `by`) in PyTorch's order:
    `by.acc_order` for a compiled call's node, else its heap's order of equal keys."""
    batch = [ready[k] for k in tie_order(len(ready))]
    ranks = getattr(getattr(by, "path", None), "acc_rank", None)
    if ranks is not None and len(ready) > 1:     # a compiled call's node: eager's order
        at = {id(e[0]): r for e, r in zip(by.edges, ranks) if e is not None and r is not None}
        batch.sort(key=lambda r: at.get(id(r[0]), len(ranks)))
    ready.clear()
    for node, g in batch:
        if tracer is not None:
            tracer.note_backward_node(node, False)
        gs = [g]
        if node.pre_hooks:
            gs = _pre_hooks(node, gs)
        if gs[0] is None:
            continue
        if isinstance(node, AccumulateGrad):
            node.accumulate(gs[0], create_graph)
        else:
            node.apply(gs)               # an error node (_DelayedError): raises


def leaf_ranks(outs, inputs):
    """For each of `inputs`, the position at which eager backward from all of `outs`
    accumulates it among those inputs, or None (not a leaf, or not reached): the order a
    compiled call's node gives the leaves it makes ready together (`acc_rank`, Note [Leaf
    accumulation order]). The graph walked is the one the tracing call built, from the
    outputs down to the inputs."""
    stop = {id(t._grad_fn) for t in inputs if t._grad_fn is not None}
    todo = [o._grad_fn for o in outs if isinstance(o, Tensor) and o._grad_fn is not None]
    nodes, deps = {}, {}
    while todo:
        n = todo.pop()
        if id(n) in nodes or id(n) in stop or isinstance(n, AccumulateGrad):
            continue
        nodes[id(n)] = n
        for e in n.edges:
            if e is not None:
                if isinstance(e[0], AccumulateGrad):
                    deps[id(e[0])] = deps.get(id(e[0]), 0) + 1
                else:
                    todo.append(e[0])
    order = []
    for n in sorted(nodes.values(), key=lambda n: -n.seq):
        ready = []
        for e in n.edges:
            if e is not None and id(e[0]) in deps:
                deps[id(e[0])] -= 1
                if deps[id(e[0])] == 0:
                    ready.append(id(e[0]))
        order += [ready[k] for k in tie_order(len(ready))]
    rank = {k: i for i, k in enumerate(order)}
    return [rank.get(id(t._accum)) if t._grad_fn is None and t._accum is not None else None
            for t in inputs]


_TIES = {}


def tie_order(k):
    """The order a libstdc++ binary heap (PyTorch's ready queue) pops k equal keys pushed
    in order 0..k-1 into it: 0, 1, 2 for three, 0, 2, 1, 3 for four."""
    got = _TIES.get(k)
    if got is not None:
        return got
    h, out = list(range(k)), []
    while h:
        n = len(h) - 1
        value, h[-1] = h[-1], h[0]
        hole = child = 0                 # __adjust_heap: the hole sinks to the right child
        while child < (n - 1) // 2:
            child = 2 * (child + 1)
            h[hole], hole = h[child], child
        if n % 2 == 0 and n >= 2 and child == (n - 2) // 2:
            child = 2 * (child + 1)
            h[hole], hole = h[child - 1], child - 1
        h[hole] = value                  # __push_heap: an equal key never moves up
        out.append(h.pop())
    _TIES[k] = out
    return out


def _add(buffers, heap, node, nr, g):
    key = id(node)
    gs = buffers.get(key)
    if gs is None:
        gs = [None] * node.n_outputs
        gs[nr] = g
        buffers[key] = gs
        heapq.heappush(heap, (-node.seq, key, node, gs))
    else:
        gs[nr] = g if gs[nr] is None else gs[nr] + g


def _pre_hooks(node, gs):
    hooks = node.pre_hooks
    if not hooks:
        return gs
    gs = list(gs)
    uses = getattr(getattr(node, "path", None), "inner_uses", None)
    for nr, fns in hooks.items():
        if nr == -1:
            for fn in list(fns):
                r = fn(tuple(gs))
                if r is not None:
                    gs = list(r)
            continue
        if uses and fns and any(gs[j] is not None for j in uses.get(nr, ())):
            _output_hook_error(node, nr, uses[nr])
        for fn in list(fns):
            g = gs[nr]
            if g is None:
                break
            r = fn(g)
            if r is not None:
                _check_hook_result(fn, g, r)
                gs[nr] = r
    return gs


_TYPE_NAMES = {"float32": "FloatTensor", "float64": "DoubleTensor", "float16": "HalfTensor"}


def _check_hook_result(fn, g, r):
    """A tensor hook may replace the gradient, but not change its shape or dtype (PyTorch)."""
    name = getattr(fn, "__name__", type(fn).__name__)
    if not isinstance(r, Tensor) or tuple(r.shape) != tuple(g.shape):
        raise op_error(TracegradRuntimeError, None,
                       f"hook '{name}' has changed the size of value",
                       f"(expected {list(g.shape)}, got "
                       f"{list(r.shape) if isinstance(r, Tensor) else type(r).__name__}). "
                       "Return a tensor of the gradient's shape, or None to keep it.")
    if r.dtype is not g.dtype:
        was, got = (_TYPE_NAMES.get(t.dtype.name, t.dtype.name) for t in (g, r))
        raise op_error(TracegradRuntimeError, None,
                       f"hook '{name}' has changed the type of value (was torch.{was} got "
                       f"torch.{got})", "Cast the returned gradient back, e.g. `.to(g.dtype)`.")


def _accumulate_target(t, g, create_graph):
    if t.is_leaf:
        accumulator(t).accumulate(g, create_graph)
    elif t._retains_grad:
        return                  # its retain_grad hook (run with the node's pre-hooks) did it
    else:
        old = t._grad
        if old is None:
            t.grad = g.clone() if create_graph else Tensor._wrap(g._data.copy())
        else:
            t.grad = old + g
