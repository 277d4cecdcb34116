"""Which of the state scan's guards a finished trace may drop (compiler/state.py scans).

The scan (Note [Captured state]) guards everything a function can reach. After the trace,
what the user's code could not have read is known: plain attributes no code names (Note
[Unread attributes]), hyper-parameters an optimizer reads per call that user code never
reads itself (Note [Hyper-parameters unread]), and the state of gradient hooks the trace
did not run (Note [Gradient hooks' state]). Their guards would only re-trace for nothing.
"""
import dis
import re
import types

from .state_kinds import _is_user_class


# Note [Unread attributes]
# The scan guards every attribute of the plain objects it reaches, because Python reads of
# `obj.attr` are invisible to the tracer. But a trainer object whose compiled method never
# looks at `self.losses` (appended to after each call) or `self.sched` (a scheduler
# stepped once an epoch, outside) would then re-trace on every call and, past
# `cache_limit`, run eagerly for good. Python code can only read an attribute by naming
# it: so an attribute holding plain data (numbers, strings, and lists, tuples and dicts of
# them) is not guarded when
# - no user code the trace ran (replayed calls included) names it, as an attribute, a
#   global or inside a string constant (`hasattr(self, "lr")`, `"{0.lr}".format(self)`),
#   nor names `__dict__`, `vars`, `getattr`, `dir`, `setattr`, `format`, `attrgetter`,
#   `__reduce_ex__` or `__getstate__` (which reach attributes by computed names); the
#   methods of custom autograd Functions the trace applied count as run (their `backward`
#   is traced when the backward program is built);
# - user code called no method of the object's class from a library (a scheduler's
#   `get_last_lr()` reads `_last_lr`: Note [Reads of replayed state]) -- methods written
#   by the user are user code, whose names count;
# - user code called no Python code of another library (it could read any attribute of an
#   object handed to it); tracegrad's own functions read tensors and modules. The traced
#   function and the methods of module classes from installed packages count as user
#   code (a model from a package reads `self.config.dropout`).
# Modules' attributes are always guarded (their library forward methods read them) but for
# those their classes declare only some methods read (Note [Attributes only some methods
# read] in state_method_reads.py), and so is any container another kept guard also holds.
_DYNAMIC = frozenset(("__dict__", "vars", "getattr", "dir", "setattr", "delattr",
                      "__getattribute__", "format", "format_map", "attrgetter",
                      "__reduce_ex__", "__getstate__"))
_WORD = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")


# Note [The name type]
# A float stand-in (Note [Numbers taken from tensors]) is no `float` to `type(v)`, so code
# naming the builtin `type` keeps guards on floats. A tensor's `.type(dtype)` method is
# no such use: d2l's `accuracy` computes `y_hat.type(y.dtype) == y`, and took every
# `.item()` of its function back to a guard on the value (a re-trace per epoch). Only
# loading the name (a global, builtin, local or closure `type`) or the string "type"
# (`getattr(builtins, "type")`) counts; an attribute `x.type` does not.
_ATTRIBUTE_OPS = frozenset(("LOAD_ATTR", "LOAD_METHOD", "STORE_ATTR", "DELETE_ATTR",
                            "LOAD_SUPER_ATTR"))


def names_type(codes):
    """Whether `codes` or the code nested in them name the builtin `type` (Note [The name
    type])."""
    stack = list(codes)
    while stack:
        c = stack.pop()
        for k in c.co_consts:
            if type(k) is str and k == "type":
                return True
            if isinstance(k, types.CodeType):
                stack.append(k)
        if "type" not in c.co_names + c.co_varnames + c.co_cellvars + c.co_freevars:
            continue
        if any(ins.argval == "type" and ins.opname not in _ATTRIBUTE_OPS
               for ins in dis.get_instructions(c)):
            return True
    return False


def all_names(codes):
    """The names of `codes` and their nested code, and every identifier inside their string
    constants (`"{0.lr}".format(self)` and `"%(lr)s" % ...` read `lr` too)."""
    out, stack = set(), list(codes)
    while stack:
        c = stack.pop()
        out.update(c.co_names)
        for k in c.co_consts:
            if type(k) is str:
                out.update(k.split() if k.isidentifier() else _WORD.findall(k))
            elif isinstance(k, types.CodeType):
                stack.append(k)
    return out


def _method_codes(classes):
    """The code of every function defined on `classes` (a custom Function's `backward`,
    run when a backward program is compiled, after the trace), decorators unwrapped."""
    out = []
    for cls in classes:
        for k in cls.__mro__:
            if not _is_user_class(k):
                continue
            for f in vars(k).values():
                f = getattr(f, "__func__", f)
                while hasattr(f, "__wrapped__"):
                    out.append(getattr(f, "__code__", None))
                    f = f.__wrapped__
                out.append(getattr(f, "__code__", None))
    return [c for c in out if c is not None]


def unread_attribute_guards(scanned, watch, classes=()):
    """The guards of plain-data attributes the trace cannot have read (Note [Unread
    attributes]), to drop from the path's state guards. `classes`: the custom autograd
    Functions the trace applied (their code runs later too)."""
    if not scanned.plain_attrs or watch.foreign_calls:
        return []
    names = all_names(list(watch.user_codes) + _method_codes(classes))
    if names & _DYNAMIC:
        return []
    called = {key for key, *_ in watch.method_calls}
    drop = [gs for obj, k, gs in scanned.plain_attrs if k not in names and id(obj) not in called]
    dropped = {id(g) for gs in drop for g in gs}
    kept_is = {id(g.expected) for g in scanned.guards
               if g.mode == "is" and id(g) not in dropped}
    out = []
    for gs in drop:
        # a container also held by a kept place keeps its length and item guards
        if not any(g.mode == "is" and id(g.expected) in kept_is for g in gs):
            out += gs
    return out


# Note [Hyper-parameters unread]
# An optimizer's step reads its learning rate, momentum, betas, ... (the keys
# `type(opt)._runtime_keys`) through `_effects.hyper`: per call, as program inputs, never
# guarded. Two things follow, both decided from what the user code the trace ran may have
# read itself (`keys_user_code_may_read`):
# - A path whose trace ran `opt.step()` drops the guards on those places unless user code
#   may have read them too (`settle_state` in trace_settle.py): then the value it read is a
#   constant of the trace, which only the guard keeps from going stale. Spelling the key
#   (`g["lr"]`) is one way; reaching items by computed keys is another (`{k: v for k, v in
#   g.items()}` returned for logging, `opt.state_dict()["param_groups"]`), and so is
#   calling another library's code, which may be handed the optimizer: in those cases
#   every key counts as read. (Missing the last two returned the first epoch's lr forever.)
#   Not seen: a group's keys iterated by `for k in g` or unpacked (`{**g}`), then
#   subscripted by a computed key; a dict method call is seen, a bare iteration is not.
# - A path that does not step reaches the optimizer all the same: an evaluation branch of
#   a step that only calls `opt.zero_grad()` (the transfer-learning tutorial's `phase ==
#   "val"`), a trainer's `evaluate` method whose `self` holds the optimizer. The scan
#   guards the scalars of its parameter groups by value, so each epoch's scheduler step
#   re-traced such a path and, past `cache_limit`, made it run eagerly for good, though
#   nothing read them: the only library code that reads those keys during a trace reads
#   them through `hyper`. So their guards are dropped here too, under the same condition.
_STEP_METHODS = frozenset(("zero_grad", "step"))


class _Every(frozenset):
    """Every key: what user code may read when it reaches items by computed keys."""

    def __contains__(self, key):
        return True


def keys_user_code_may_read(scanned, watch):
    """The dict keys the user code the trace ran may have read (Note [Hyper-parameters
    unread]): the string constants it spells; every key when it called a dict method of a
    parameter group (`g.items()`: `_effects.watch_python.dict_reads`) or a library method
    of an optimizer other than zero_grad/step (`state_dict()`), named a way to reach
    attributes by computed names, or called another library's code."""
    opts = {id(o) for o in scanned.optimizers}
    groups = {id(g) for o in scanned.optimizers for g in o.param_groups}
    if watch.foreign_calls or all_names(list(watch.user_codes)) & _DYNAMIC or any(
            key in opts and code.co_name not in _STEP_METHODS
            for key, _, code, *_ in watch.method_calls) or groups & watch.dict_reads:
        return _Every()
    return frozenset(watch.constant_strings())


def unread_hyper_guards(scanned, read_keys):
    """The guards on optimizer hyper-parameters the trace cannot have read (Note
    [Hyper-parameters unread]), to drop from the path's state guards. `read_keys`:
    `keys_user_code_may_read`."""
    out = []
    for opt in scanned.optimizers:
        groups = {id(g) for g in opt.param_groups}
        out += [g for g in scanned.guards if id(g.holder) in groups
                and g.key in type(opt)._runtime_keys and g.key not in read_keys]
    return out


# Note [Optimizer state unread]
# The scan guards the Python numbers in an optimizer's per-parameter state as it guards any
# reachable data. LBFGS keeps its counters and its last step length and loss there
# (`func_evals`, `n_iter`, `t`, `prev_loss`) and grows lists of history (`old_dirs`), all
# rewritten by every `opt.step(closure)`. The natural way to compile an LBFGS loop
# compiles the closure (forward and backward) and steps outside; the closure's call of
# `opt.zero_grad()` reaches the optimizer, so each step made the closure re-trace and, past
# `cache_limit`, run eagerly for good, though nothing it ran read that state. The guards on
# the state's numbers and containers are dropped when user code called no library method of
# the optimizer other than `zero_grad` (its `step`, `state_dict()`, ... do read them; an
# LBFGS step inside the trace is an eager effect anyway) and may not have read their keys
# itself (`keys_user_code_may_read`: the keys it spells, or every key). Tensors kept there
# stay bound as captured tensors are (Note [Captured state]).

def unread_state_guards(scanned, watch, read_keys):
    """The guards on optimizers' per-parameter state the trace cannot have read (Note
    [Optimizer state unread]), to drop from the path's state guards."""
    out = []
    called = {key for key, _, code, *_ in watch.method_calls if code.co_name != "zero_grad"}
    for opt in scanned.optimizers:
        if id(opt) in called:
            continue
        states = [s for s in opt.state.values() if isinstance(s, dict)]
        keyed = {id(s) for s in states}
        inner = {id(v) for s in states for k, v in s.items()
                 if k not in read_keys and isinstance(v, (list, tuple, dict))}
        out += [g for g in scanned.guards
                if id(g.holder) in keyed and g.key not in read_keys and g.mode != "len"
                or id(g.holder) in inner]
    return out


# Note [Gradient hooks' state]
# A hook registered outside on a leaf (`w.register_hook(lambda g: g * cfg["s"])`) runs
# inside the trace when the function runs backward into that leaf, and becomes part of
# the program (trace_plan.py `_hook_checks`). What the hook's own code reads (its closure,
# the globals it names) is state of the path like the function's: a changed scale must
# re-trace, and a hook counting its calls (`n[0] += 1`) or logging (`log.append(g)`)
# changes state it reads or mutates a container from outside, so such calls run eagerly.
# The hooks of every tensor the scan reaches (arguments included: `hooks_of`) are walked
# like user functions; their guards are kept only for the leaves the trace ran backward
# into (`unused_hook_guards`), so a hook that only an eager backward outside runs (a
# compiled forward with hooks logging gradients) never makes the forward re-trace.

def hooks_of(scanned, args):
    """Walk the gradient hooks of the tensor arguments [(tensor, name)] too (Note [Gradient
    hooks' state])."""
    for t, name in args:
        if t.__dict__.get("_leaf_hooks"):
            scanned.leaf_hooks(t, f"argument '{name}'", 0)


def unused_hook_guards(scanned, ran_into):
    """Ids of the guards of hooks on leaves outside `ran_into` (ids of the leaves the trace
    ran backward into): the trace did not run those hooks."""
    return {id(g) for k, (t, gs) in scanned.hook_guards.items() if k not in ran_into
            for g in gs or ()}
