"""Numbers a traced call writes into Python state: replayed by each cached call.

Note [Numbers written to Python state]
A training step keeps counters and running values on objects: `self.steps += 1`,
`self.last_loss = loss.item()`, `self.ema = 0.9 * self.ema + 0.1 * loss.item()`, a
`global_step` in a config dict. Such a place is guarded by value (Note [Captured state] in
state.py), and a trace that changes it is not cached (replaying its path would skip the
write), so before this every such step ran eagerly from its second call. Now:
- A trace that changes only number places (a float or an int, not a bool, in an object's
  attribute dict or a list or dict, before and after: `number_place` in
  dynamic_numbers.py) makes them *dynamic* (`widen`): the next trace reads each through a
  stand-in (a `Number` or an `Integer`, Note [Float attributes that change] in
  dynamic_numbers.py), so nothing it computes from the place is a constant.
- When that trace returns, each dynamic place holding a stand-in of the trace other than
  its own is a *written place* (`collect`): the stand-in's traced value becomes an extra
  output of the program, and the place gets the plain number eager stored. A place holding
  a plain number (or None, a bool, a str) that the trace wrote is written that constant
  (it came from constants and guarded values, as a path's constant outputs do), unless
  the trace made calls that are replayed after each cached call (a scheduler's step()):
  such a call may have written the place from state it owns, not guarded. Nor when
  another Python thread ran during the trace and no code the trace ran can store to that
  key (`_may_store`): that thread wrote it (`cfg.lr = 5.0` while the trace read it), and
  a path writing that constant would undo the caller's later values on every call.
  Anything else written there (a list, an object, such a constant) keeps the path from
  being cached. (`owned` are the replayed objects' own places, not those of the
  functions they hold: a LambdaLR's lambda reads the trainer's step counter the
  function increments, and does not write it.)
- A stand-in written into a number place the trace did not read through a stand-in (its
  first trace: `self.last_loss = loss.item()` with the place still keyed by value) gets
  its plain value there too, and the place becomes dynamic for the next trace; that trace
  is not cached, but its `.item()` stand-ins stay on (`fresh`: not an escape).
- Each cached call writes its places after its program ran, when the path's outputs are
  rebuilt (`with_writes`), in the order the trace left them. A call that fails before
  that (an error inside the program reruns the call eagerly) writes nothing twice.
"""
import dis

from ..tracing.numbers import STAND_INS, _fresh
from .append_replay import APPEND, CONSTANTS as _CONSTANTS
from .dynamic_numbers import number_place



def widen(floats, changed):
    """The reason to trace again with stand-ins at the places `changed` (the trace's own
    broken guards) when each is a number place (`number_place`) not found to need its
    value; None otherwise (the trace changed state it reads: not cached)."""
    if floats.typed or not changed or not all(number_place(g) for g in changed):
        return None
    keys = [(id(g.holder), g.key) for g in changed]
    if any(k in floats.static_places for k in keys):
        return None
    for k, g in zip(keys, changed):
        floats.places[k] = (g.holder, g.key)
    said = " and ".join(g.where for g in changed)
    return (f"it changes {said}, which it also reads: read per call and written back by "
            "each call from now on")


def collect(numbers, placed, guards, owned=frozenset(), replayed=False, threads=None):
    """The places written by the trace that just returned: ([(holder, key, fresh tensor or
    None, constant)], bad, fresh) with `placed` the dynamic places' (holder, key, value
    before, stand-in), `guards` the scan's value guards. Call while the trace records.
    `bad`: places holding what no cached call can replay, [(holder, key)]. `fresh`: number
    places the trace wrote a stand-in into without reading them through one. `owned`: ids
    of the holders that calls replayed after the program rewrite (a scheduler's step()
    setting a param group's momentum): their places are the replay's to write. `replayed`:
    the trace made calls replayed after each cached call, which may have written a place
    from state they own (a scheduler's `last_epoch`): no constant written there is known
    to be the trace's own. `threads`: None when no other Python thread ran during the
    trace, else the code objects the trace ran (a constant is the trace's own only where
    one of them may store to that key)."""
    writes, bad, mine = [], [], set()
    for holder, key, _, n in placed:
        mine.add((id(holder), key))
        if id(holder) in owned:
            continue
        try:
            now = holder[key]
        except (KeyError, IndexError, TypeError):
            bad.append((holder, key))    # deleted: a cached call cannot replay that
            continue
        if now is n:
            continue
        if type(now) in STAND_INS and now._owner is numbers:
            t = _fresh(now)
            if t is None:
                bad.append((holder, key))
                continue
            holder[key] = now._v
            writes.append((holder, key, t, None))
        elif type(now) in _CONSTANTS and not replayed \
                and (threads is None or _may_store(threads, holder, key)):
            writes.append((holder, key, None, now))
        else:
            bad.append((holder, key))
    fresh = []
    for g in guards:
        if (id(g.holder), g.key) in mine or g.mode != "eq" or id(g.holder) in owned \
                or not isinstance(g.holder, (dict, list)):
            continue
        try:
            now = g.holder[g.key]
        except (KeyError, IndexError, TypeError):
            continue
        if type(now) in STAND_INS and now._owner is numbers:
            g.holder[g.key] = now._v
            mine.add((id(g.holder), g.key))
            fresh.append((g.holder, g.key))
    return writes, bad, fresh


_SUBSCR_STORES = frozenset(("STORE_SUBSCR", "DELETE_SUBSCR"))
_NAME_STORES = frozenset(("STORE_ATTR", "STORE_GLOBAL", "STORE_NAME", "STORE_DEREF"))
_WRITERS = frozenset(("setattr", "__setattr__", "__setitem__", "__dict__", "vars",
                      "globals", "update", "setdefault", "exec", "eval"))


def _may_store(codes, holder, key):
    """Whether one of `codes` may have stored `holder[key]` itself: a store to that name
    (`self.key = v`, `global key`), a subscript store of that constant key (`d["key"] = v`,
    `d["key"] += 1`) or of a computed one, or a writer that takes the key as data
    (`setattr`, `d.update`)."""
    for code in codes:
        if _WRITERS.intersection(code.co_names):
            return True
        ops = list(dis.get_instructions(code))
        for i, x in enumerate(ops):
            if x.opname in _NAME_STORES and x.argval == key:
                return True
            if x.opname in _SUBSCR_STORES:
                const = _constant_key(ops, i)
                if not isinstance(holder, dict) or const is _COMPUTED or const == key:
                    return True
    return False


_COMPUTED = object()


def _constant_key(ops, i):
    """The constant key of the subscript store `ops[i]`, or _COMPUTED."""
    if ops[i - 1].opname == "LOAD_CONST":            # d["key"] = v
        return ops[i - 1].argval
    if ops[i - 1].opname == "SWAP":                  # d["key"] += v: the key is copied
        for j in range(i - 2, 0, -1):
            if ops[j].opname == "LOAD_CONST" and ops[j + 1].opname == "COPY":
                return ops[j].argval
    return _COMPUTED


def with_writes(outs, build, writes):
    """(outs, build) with the tensors `writes` store after the flat results `outs`, and
    `build` making the writes first, in order. Each write (holder, key, tensor or None,
    constant, number) stores that tensor's leaf, or the constant when there is none, at
    `holder[key]`; with key `APPEND`, appends it to the list `holder` (Note [Appends to the
    caller's lists]). `number`: the tensor is a 0-d float64 or int64 holding a Python
    number, stored as that number."""
    n, plan, extra = len(outs), [], []
    for holder, key, t, const, number in writes:
        k = None
        if t is not None:
            k = n + len(extra)
            extra.append(t)
        conv = (int if t._data.dtype.kind in "iu" else float) if number else None
        plan.append((holder, key, k, const, conv, key is APPEND))

    def rebuild(leaves):
        for holder, key, k, const, conv, append in plan:
            v = const if k is None else leaves[k] if conv is None else conv(leaves[k]._data)
            if append:
                holder.append(v)
            else:
                holder[key] = v
        return build(leaves[:n])
    rebuild.writes = [(h, key, k, c, conv) for h, key, k, c, conv, _ in plan]
    return list(outs) + extra, rebuild
