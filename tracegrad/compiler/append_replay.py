"""Appends to the caller's lists in a compiled function: replayed by each cached call.

Note [Appends to the caller's lists]
`self.losses.append(loss.item())` or `history.append(acc)` in a training step mutates a
list the caller holds. Mutating state the caller can see is an effect a cached call would
skip, so such a step used to run eagerly. A list that the traced code only appends to can
be kept right instead: each cached call appends, after its program, what the trace
appended, with this call's values. `collect` decides, per list `append` was called on:
- no other mutating method was called on it, and it is not an argument (an argument's
  contents are part of the entry key);
- every place the state scan found it is an attribute or a global (a str key of a dict)
  whose name the code the trace ran (user code, and other libraries' Python code it called)
  loads only to call `.append` on it at once: no other read (`len(self.losses)`,
  `self.losses[-1]`, iterating, passing it on), no assignment or deletion of that name,
  no string constant equal to it (`getattr(self, "losses")`) and no reflection (`vars`,
  `__dict__`, `getattr`, copying or pickling); or it is an entry of a dict found only at
  such names (`self.history["loss"].append(v)`), which that code loads only to subscript
  with a string constant, appending at once to this entry, and never reads otherwise
  (`.get`, `.items()`, iterating, passing it on). So the path reads nothing of the list,
  and the scan's guards on its length and items are dropped: it grows on every call;
- each item appended is a number stand-in of the trace (`loss.item()`, a counter read per
  call: a program output converted to the Python number on each call), an immutable
  constant (int, float, bool, str, None), or a tensor of the trace that does not require
  grad (`loss.detach()`: a program output, a fresh tensor each call).
The list must have grown by exactly the appends the trace made (another thread's
appends during the trace are not the function's to replay).
Otherwise the mutation stays an eager effect, as before. The items the trace appended are
left in the list as eager left them (stand-ins replaced by their plain numbers).
A path that leaves such a list alone (an evaluation path beside the training path that
appends to it) reads nothing of it either, by the same check on the names of the code it
ran (`unread_lists`): the guards on its contents are dropped there too, so alternating
paths do not re-trace because the other one's list grew.
"""
import dis

from .._tensor import Tensor
from ..tracing.numbers import STAND_INS, _fresh

APPEND = object()                # the key of a write that appends (place_writes.with_writes)
CONSTANTS = (int, float, bool, str, type(None))   # immutable values a call can write again
_REFLECTION = frozenset(("__dict__", "vars", "getattr", "setattr", "delattr", "globals",
                         "locals", "deepcopy", "copy", "pickle", "dumps", "dump", "save",
                         "__getattribute__"))
_STORES = frozenset(("STORE_ATTR", "DELETE_ATTR", "STORE_GLOBAL", "DELETE_GLOBAL",
                     "STORE_NAME", "DELETE_NAME", "STORE_FAST", "DELETE_FAST", "STORE_DEREF",
                     "DELETE_DEREF", "LOAD_CONST"))
_THEN_APPEND = frozenset(("LOAD_METHOD", "LOAD_ATTR"))


def collect(tracer, watch, guards, arguments):
    """[(list, [(fresh tensor or None, constant, is_number)])] for each list whose appends
    cached calls replay (Note [Appends to the caller's lists]); their mutation effects are
    taken off `tracer`. `guards`: the scan's guards; `arguments`: ids of the containers
    passed as arguments. Call while the trace records."""
    if not watch.appends:
        return []
    codes = list(watch.user_codes) + list(watch.foreign_calls)
    out = []
    for cid, (lst, start, effects) in list(watch.appends.items()):
        if cid in watch.mutated or cid in arguments:
            continue
        if not _reached_only_to_append(lst, guards, codes, watch):
            continue
        new = lst[start:]
        if len(new) != len(effects):     # another thread appended too: not the trace's
            continue
        if any(not _replayable(v, tracer) for v in new):
            continue
        items, plain = [], []
        for v in new:
            if type(v) in STAND_INS:
                t = _fresh(v)
                if t is None:
                    break
                items.append((t, None, True))
                plain.append(v._v)
            elif isinstance(v, Tensor):
                items.append((v, None, False))
                plain.append(v)
            else:
                items.append((None, v, False))
                plain.append(v)
        else:
            lst[start:] = plain          # what eager appended
            tracer.effects[:] = [e for e in tracer.effects if all(e is not x for x in effects)]
            out.append((lst, items))
    return out


def unread_lists(watch, guards, arguments, appended):
    """The caller's lists (other than `appended`) that this trace left alone and whose
    names the code it ran loads only to append to them (another path's history list, a
    training path's when this one evaluates): it read nothing of them either, so the
    guards on their contents are dropped too (`dropped_guards`), and alternating paths
    do not re-trace because the other path's list grew."""
    codes = list(watch.user_codes) + list(watch.foreign_calls)
    named = set().union(*(c.co_names for c in codes)) if codes else set()
    seen, out = {id(x) for x in appended}, []
    for g in guards:
        lst = g.expected
        if g.mode != "is" or type(lst) is not list or id(lst) in seen:
            continue
        seen.add(id(lst))
        if id(lst) in watch.mutated or id(lst) in arguments or id(lst) in watch.appends:
            continue
        places = _places(lst, guards)
        if not places or not all(type(k) is str and k in named for _, k in places):
            continue
        if _reached_only_to_append(lst, guards, codes, watch):
            out.append(lst)
    return out


def dropped_guards(lists, guards):
    """Ids of the scan's guards on the contents of `lists` (their length, items, a deep
    copy of them): a path that replays their appends reads none of it."""
    ids = {id(x) for x in lists}
    return {id(g) for g in guards
            if id(g.holder) in ids
            or g.mode == "data" and isinstance(g.expected, tuple) and id(g.expected[0]) in ids}


def _replayable(v, tracer):
    if type(v) in STAND_INS:
        return v._owner is tracer.numbers and v._t is not None
    if isinstance(v, Tensor):
        return not v.requires_grad and id(v) in tracer.env
    return type(v) in CONSTANTS


def _reached_only_to_append(lst, guards, codes, watch):
    """Whether every place the scan found `lst` at is an attribute or a global that `codes`
    load only to append to it, or an entry of a dict (`history["loss"]`) found only at
    such names that `codes` load only to subscript with a string constant (appending to
    `lst` when that constant is its key) and never read otherwise."""
    places = _places(lst, guards)
    if not places:
        return False
    for holder, key in places:
        outer = _places(holder, guards)
        if outer is None:                # an attribute or a global: holder is a namespace
            if not _only_appended(codes, key):
                return False
            continue
        if not outer:                    # a dict found in a closure cell, a list, ...
            return False
        if type(key) is not str or id(holder) in watch.dict_reads or id(holder) in watch.mutated:
            return False
        if any(_places(h, guards) is not None for h, _ in outer):   # (one level only)
            return False
        if not all(_only_appended(codes, name, key) for _, name in outer):
            return False
    return True


def _places(obj, guards):
    """[(holder, key)] of the places the scan found `obj` at (None when none), or [] when
    one is not a str key of a dict (a list item, a closure cell): then no rule here
    applies."""
    out = []
    for g in guards:
        if g.mode == "is" and g.expected is obj:
            if not isinstance(g.holder, dict) or type(g.key) is not str:
                return []
            out.append((g.holder, g.key))
    return out or None


def _only_appended(codes, name, entry=None):
    """Whether each of `codes` loads `name` only to call `.append` on it at once (or, with
    `entry`, only to subscript it with a string constant, calling `.append` at once on
    item `entry`), never stores, deletes or spells it as a string, and names no
    reflection."""
    for code in codes:
        if _REFLECTION.intersection(code.co_names):
            return False
        if name not in code.co_names and name not in code.co_varnames \
                and name not in code.co_cellvars and name not in code.co_freevars \
                and name not in code.co_consts:
            continue
        ins = list(dis.get_instructions(code))
        for i, x in enumerate(ins):
            if x.argval != name or type(x.argval) is not str:
                continue
            if x.opname in _STORES:
                return False
            if x.opname.startswith("LOAD_"):
                nxt = ins[i + 1:i + 4]
                if entry is not None:
                    if len(nxt) < 2 or nxt[0].opname != "LOAD_CONST" \
                            or type(nxt[0].argval) is not str \
                            or nxt[1].opname != "BINARY_SUBSCR":
                        return False
                    if nxt[0].argval != entry:
                        continue         # another entry, read: guarded as usual
                    nxt = nxt[2:]
                if not nxt or nxt[0].opname not in _THEN_APPEND or nxt[0].argval != "append":
                    return False
    return True
