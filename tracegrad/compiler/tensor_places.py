"""Tensors a traced call stores into Python state: read from the place and written back by
each cached call.

Note [Tensors written to Python state]
A batch norm written from scratch keeps its running statistics by rebinding them,
`Y, self.moving_mean, self.moving_var = batch_norm(X, ..., self.moving_mean, ...)`, and an
EMA by `self.shadow[name] = decay * self.shadow[name] + (1 - decay) * p.detach()`. The
state scan binds each captured tensor to the places it was found (Note [Captured state]
in state.py), and a trace that rebinds one changed state it reads: before this, such a
step ran eagerly from its second call. Now `collect` looks, after the trace, at every
place where the scan found a tensor and that holds another one now:
- the new tensor must be one the trace computed (a program value), and the place a dict
  entry or a list item (an attribute, a buffer, an entry of a user dict); it may require
  grad only when the trace did not read the tensor it replaces (`self.attention_weights
  = softmax(scores)`, d2l's attention: a program output like a returned one, its
  `grad_fn` the call's); a stored tensor that requires grad and is read by the next call
  (a hidden state kept with its graph) chains the calls' graphs, which stays eager's;
- the tensor the place held before may have been read by the trace (a captured input);
  then every place it was found at must be rewritten, and the program reads that input
  from the place on each call (`place_sources`: the tensor the last call stored), its
  shape, dtype and flags checked as for any captured tensor;
- the new tensor becomes an extra output of the program, stored at the place after each
  call (place_writes.with_writes), a fresh tensor per call as eagerly.
A place the trace rebinds to anything else is still a change of state the function reads:
not cached, and eager after two such traces.
"""
from .._tensor import Tensor


def collect(tracer, bindings, rebound):
    """([(holder, key, new tensor)], {captured Value: (holder, key)}) for the places the
    trace rebound that cached calls can rebind; their guards are taken out of `bindings`
    (the scan's {id(tensor): [StateGuard]}), so the trace no longer counts as changing
    them. `rebound`: the places earlier traces of the function rebound, {(id(holder), key):
    (holder, key)}, updated here; a captured tensor found only at such places is read from
    there too when this trace leaves it in place (an eval-mode path reading the running
    statistics that the training path rebinds on every call). Call after the trace
    returned."""
    captured = {id(t): v for v, t in tracer.captured}
    found = {}                           # id(old tensor) -> [guards whose place changed]
    for tid, gs in bindings.items():
        for g in gs:
            if g.mode != "is" or not isinstance(g.holder, (dict, list)):
                continue
            try:
                now = g.current()
            except (ValueError, IndexError, KeyError, TypeError):
                continue
            if now is not g.expected:
                found.setdefault(tid, []).append((g, now))
    writes, sources, done = [], {}, set()
    for tid, changed in found.items():
        gs = bindings[tid]
        if any(not _storable(now, tracer, tid in captured) for _, now in changed):
            continue
        if tid in captured:              # read by the trace: every place must be rewritten
            if len(changed) != len(gs) or len({(id(g.holder), g.key)
                                                for g, _ in changed}) != 1:
                continue
            g = changed[0][0]
            sources[captured[tid]] = (g.holder, g.key)
        for g, now in changed:
            place = (id(g.holder), g.key)
            if place not in done:
                done.add(place)
                writes.append((g.holder, g.key, now))
        bindings[tid] = [g for g in gs if all(g is not c for c, _ in changed)]
    rebound.update({(id(h), k): (h, k) for h, k, _ in writes})
    for tid, v in captured.items():
        gs = bindings.get(tid)
        if v in sources or not gs or tid in found:
            continue
        places = {(id(g.holder), g.key) for g in gs}
        if len(places) == 1 and places <= rebound.keys() and all(g.mode == "is" for g in gs):
            sources[v] = (gs[0].holder, gs[0].key)
            bindings[tid] = []
    return writes, sources


def _storable(t, tracer, read):
    return isinstance(t, Tensor) and not (read and t.requires_grad) and id(t) in tracer.env


def read(holder, key):
    """The tensor at `holder[key]` for a call, or None (missing or not a tensor)."""
    try:
        t = holder[key]
    except (KeyError, IndexError, TypeError):
        return None
    return t if isinstance(t, Tensor) else None
