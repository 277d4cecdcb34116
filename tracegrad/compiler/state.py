"""The Python state a compiled path depends on besides its arguments (Note [Captured state]).

Note [Captured state]
A traced function reads more than its arguments: tensors and Python values reached through
closure cells, globals, module attributes, and containers or plain objects held there.
Eager execution reads their current values on every call; a compiled path read them once,
while tracing. So before tracing, `scan` walks what the function can reach:
- its closure cells and the globals its code names (nested functions and lambdas included);
- one level into lists, tuples and dicts (up to MAX_ITEMS entries) and into the attributes
  of plain objects found there;
- user functions found there (up to MAX_DEPTH calls deep), scanned the same way;
- for an `nn.Module` (compiled, or reached): every submodule, parameter, buffer and attribute.
It records, as `StateGuard`s checked on every cache hit:
- *bindings*: every place each tensor was found; a path keeps those of the tensors it
  captured and checks that each place still holds that very tensor (`params[0] = new` must
  re-trace, and so must `cfg["w"] = new` when a closure cell holds the old one too);
- *identity guards* on every container, object, function and submodule walked (rebinding
  `cfg = {...}` or `model.fc = Linear(...)` must re-trace, not read the old one);
- *value guards* on every Python scalar (bool, int, float, complex, str, None): a changed
  `lr = 0.01` re-traces, as a changed scalar argument does;
- *length guards* on the attribute dicts of modules and user objects (Note [New attributes]).
A failing guard re-traces with a reason naming the place ("global 'scale' changed: 2.0 ->
5.0"), except for an optimizer's state or groups replaced by `load_state_dict` with ones
of the same structure: the path is re-bound to them (Note [Optimizer state reloaded] in
state_rebind.py). Arguments that are objects (modules, plain objects, `self` of a compiled method, a
compiled callable object) are walked the same way, as are class attributes of user classes,
the attributes a function names in a user module it reads (`cfg.LR`), library callables
bound to a name (`act = tg.relu`, guarded by identity), numpy arrays (by value), and the
forward-hook dicts of modules. Containers are guarded by identity *and* length, so an
appended item or an added hook re-traces. Plain data nested deeper than MAX_NEST or in
containers longer than MAX_ITEMS is guarded by a deep copy (Note [Data beyond the walk]);
other reads beyond this reach (values behind calls, objects or tensors nested deeper) are
not guarded: pass such values as arguments. A function
that changes number state it reads (a call counter, a running loss) reads it per call and
writes it back after each cached call (Note [Numbers written to Python state] in
place_writes.py); one that changes other state it reads runs eagerly after two such traces. After the trace, guards on what
user code cannot have read are dropped (compiler/state_unread.py), and those on the
attributes of library objects that only methods the trace did not run read
(compiler/state_method_reads.py).

This file is the walk; the guards and their per-call check are compiler/state_guards.py,
what the walk meets (user or library code, plain data) compiler/state_kinds.py, iterators
compiler/state_iterators.py.
"""
import collections
import collections.abc as abc
import copy
import functools
import os
import types
import weakref

import numpy as np

from .._tensor import Tensor
from .foreign_rng import GENERATORS, fingerprint
from .state_guards import _LEN, _MISSING, _SCALARS, StateGuard, _short
from .state_iterators import progress
from .state_kinds import (MAX_DEPTH, MAX_ITEMS, MAX_NEST, _dotted, _is_compiled_function,
                          _is_library_name, _is_module,
                          _is_plain_object, _is_user, _is_user_class, _names, _plain_data, _pure)
from .state_method_reads import declared_reads
from .state_slots import SlotView, slot_names

# nn.Module's own registries: walked above (parameters, buffers, submodules, hooks) or not
# state a forward reads (a compiled module's compiled function)
# (the with_kwargs / always_call flag dicts follow the hook dicts: Note [Module hook
# registries] in nn/_module_hooks.py)
_HOOK_REGISTRIES = ("_forward_hooks", "_forward_pre_hooks", "_backward_hooks",
                    "_backward_pre_hooks")
_MODULE_INTERNALS = frozenset(_HOOK_REGISTRIES + (
    "_parameters", "_buffers", "_modules", "_non_persistent_buffers_set", "_orig_mod",
    "_compiled", "_compiled_call_impl", "_forward_pre_hooks_with_kwargs", "_forward_hooks_with_kwargs",
    "_forward_hooks_always_called"))
# Note [Container kinds]
# Containers are recognised by kind, not by exact type: a list subclass, an OrderedDict or
# defaultdict, a deque (walked like lists and dicts: their items by place, their length)
# and sets or other mutable collections (only their length: their items have no place) are
# containers too, so mutating one is reported (`_effects.watch_python`) or guarded. Exact
# types alone let `q = deque(maxlen=2); q.append(x)` or `seen = set(); seen.add(k)` in a
# closure change on every eager call while a cached path replayed the first call's contents.
MUTABLE_COLLECTIONS = (set, bytearray, abc.MutableSet, abc.MutableSequence, abc.MutableMapping)


def owned_holders(objects):
    """Ids of the dicts and containers reachable from `objects` (the state replayed calls
    rewrite: e.g. a scheduler's own attributes), not through the functions they hold (a
    LambdaLR's lambda closes over the trainer whose step counter it reads: a change
    there is the traced function's, not the replay's) nor through user objects they
    hold (`_replay_owned`)."""
    s = _Scanner()
    s.code = False
    for obj in objects:
        s.value_in(None, None, obj, "owner", 0, force=True)
    # ... but not an optimizer's param groups or state: its traced step reads them (a
    # scheduler's momentum or betas), so their guards must keep failing unless read per
    # call (`_effects.hyper`); only the replayed object's own attributes are its own
    from ..optim.optimizer import Optimizer
    shared = _Scanner()
    for g in s.guards:
        if g.mode == "is" and isinstance(g.expected, Optimizer):
            shared.value_in(None, None, g.expected, "optimizer", 0, force=True)
    return _holders(s) - _holders(shared)


def _replay_owned(obj):
    """Whether `obj`, found inside an object whose call is replayed, is its to write: a
    library object (a scheduler's optimizer, a SequentialLR's schedulers, a user's
    scheduler subclass), not a user's object it merely holds (a trainer a custom scheduler
    reads the step counter of)."""
    from ..optim.lr_scheduler import LRScheduler
    return isinstance(obj, LRScheduler) or type(obj).__module__.split(".")[0] == "tracegrad"


def _holders(scanner):
    return {id(g.holder) for g in scanner.guards} | {
        id(g.holder) for gs in scanner.bindings.values() for g in gs}


def optimizer_state_growth(changed, scanned):
    """Note [Optimizer state growth]
    An optimizer creates a parameter's state (momentum buffer, Adam's moments) the first
    time that parameter has a gradient at `step()`. A trace doing so changed state it reads
    (`opt.state` grew) and is not cached, as for any such change; but unlike a call counter
    it is not a reason to give up compiling: in a step where some parameters only get
    gradients later (a second task head, a layer unfrozen after warm-up) it happens once
    per parameter. True when every change in `changed` is such a growth."""
    from ..optim.optimizer import Optimizer
    states = {id(vars(g.expected).get("state")) for g in scanned.guards
              if g.mode == "is" and isinstance(g.expected, Optimizer)}
    return bool(changed) and all(
        g.key is _LEN and id(g.holder) in states and len(g.holder) > g.expected
        for g in changed)



def scan(target, objects=()):
    """The state a function, bound method, callable object or nn.Module about to be traced
    can reach (Note [Captured state]), plus `objects`: [(name, object)] passed as arguments.

    Returns the scanner: `.bindings` {id(tensor): [StateGuard]}, `.guards` [StateGuard],
    `.names` {id(tensor): name}, `.containers` (ids of the containers walked)."""
    s = _Scanner()
    if _is_module(target):     # its own hooks run eagerly around the compiled forward
        s.module(target, type(target).__name__, 0, hooks=False)
        fwd = target.forward                 # an instance's own forward too
        own = getattr(fwd, "__self__", None) is target      # (the module is walked above)
        s.function(fwd.__func__ if own else fwd, 0)
    elif not isinstance(target, (types.FunctionType, types.MethodType)) and callable(target) \
            and hasattr(target, "__dict__"):
        s.value_in(None, None, target, "self", 0, force=True)     # a callable object
        s.function(type(target).__call__, 0)
    else:
        s.function(target, 0)
    for name, obj in objects:
        s.value_in(None, None, obj, f"argument '{name}'", 0)
    s.settle()
    _name_optimizer_state(s)
    return s


def _name_optimizer_state(s):
    """Name the state tensors of the optimizers walked after their parameters
    (`0.weight.momentum_buffer`, `fc.bias.exp_avg`), so graphs and `explain()` show what
    each is rather than a position."""
    for opt in s.optimizers:
        for p, st in list(vars(opt).get("state", {}).items()):
            base = s.names.get(id(p))
            if base is None or not isinstance(st, dict):
                continue
            for k, t in list(st.items()):
                if isinstance(t, Tensor) and isinstance(k, str):
                    s.names.setdefault(id(t), f"{base}.{k}")


# Note [Names read later]
# A class or a user module reached by the scan has the attributes the scanned code names
# walked (`Model.k`, `cfg.LR`). Code scanned after it may name more: `c = Config` in the
# function and `c.factor` in a helper it calls, or a custom Function whose class attribute
# only its own `forward`/`backward` read (`Scale.factor`, walked after the class). So each
# such holder is walked again once the scan is over, for the names it gained, until
# nothing new is named; without it, a changed `Scale.factor` kept the first call's value
# in a cached backward.


class _Scanner:
    def __init__(self):
        self.bindings, self.guards, self.names = {}, [], {}
        self.seen = set()
        self.containers = set()
        self.code_names = set()          # attribute names the scanned code reads
        self.codes = []                  # the scanned code objects
        self.iterators = []              # [(iterator, where, progress)] (Note [Iterators])
        self.generators = []             # [(generator, where, state)] (Note [Foreign
        #                                  generators] in foreign_rng.py)
        self.plain_attrs = []            # [(object, attribute, its guards)]: plain data
        self.method_attrs = []           # [(library object, attribute, its guards)]: those
        #                                  its class says only some methods read (Note
        #                                  [Attributes only some methods read])
        self.again = set()               # ids of what the walk reached more than once
        self.optimizers = []             # optimizers walked (Note [Hyper-parameters unread])
        self.hook_guards = {}            # {id(leaf): (leaf, [its hooks' guards])}
        self.classes = set()             # ids of the classes whose methods are guarded
        self.code = True                 # walk into the state of functions found
        self.class_list = []             # and those classes
        self.named = []                  # classes and user modules (Note [Names read later])

    def function(self, fn, depth):
        owner = getattr(fn, "__self__", None)
        fn = getattr(fn, "__func__", fn)
        if owner is not None and not isinstance(owner, types.ModuleType):
            self.value_in(None, None, owner, "self", depth, force=True)
        code = getattr(fn, "__code__", None)
        if code is None or id(code) in self.seen:
            return
        self.seen.add(id(code))
        self.defaults(fn, getattr(fn, "__qualname__", "function"), depth)
        self.function_attributes(fn, getattr(fn, "__qualname__", "function"), depth)
        names = _names(code)
        self.code_names.update(names)
        self.codes.append(code)
        for nm, cell in zip(code.co_freevars, fn.__closure__ or ()):
            try:
                v = cell.cell_contents
            except ValueError:
                continue
            self.value_in(cell, None, v, f"closure variable '{nm}'", depth, name=nm)
        g = getattr(fn, "__globals__", {})
        if "globals" in names:               # Note [Data read by computed names]
            names = sorted(set(names) | public_data(g))
        for nm in names:
            if nm in g:
                self.value_in(g, nm, g[nm], f"global '{nm}'", depth, name=nm)

    def defaults(self, fn, where, depth):
        """The default values and the code of user function `fn` (Note [Defaults of
        functions called])."""
        view = SlotView(fn)
        if isinstance(getattr(fn, "__code__", None), types.CodeType):
            self.guard(view, "__code__", fn.__code__, "is", f"{where}.__code__")
        for attr in ("__defaults__", "__kwdefaults__"):
            v = getattr(fn, attr, None)
            if v is not None:
                self.value_in(view, attr, v, f"{where}.{attr}", depth, nest=2)

    def function_attributes(self, fn, where, depth):
        """Note [Function attributes]
        A function's own attributes are state like a plain object's: a setting kept on a
        helper (`helper.scale = 2.0`, changed between calls) or a call counter on the
        function itself (`f.calls = getattr(f, "calls", 0) + 1`). Eager code reads them on
        every call; a path read them once. Guarded as a plain object's attributes are, the
        number of them too (one added re-traces). Dunder entries (`__wrapped__`, set by
        functools.wraps) are the decorator's, not state the code reads."""
        d = getattr(fn, "__dict__", None)
        if d is None or len(d) > MAX_ITEMS:
            return
        self.guards.append(StateGuard(d, _LEN, len(d), "len", f"{where} attributes"))
        for k, x in list(d.items()):
            if not k.startswith("__"):
                self.value_in(d, k, x, f"{where}.{k}", depth, nest=MAX_NEST - 1)

    def float_names(self):
        """The names of the scanned code, with `type` only where it names the builtin
        (Note [The name type] in state_unread.py): for `items_per_call`."""
        from .state_unread import names_type
        if "type" in self.code_names and not names_type(self.codes):
            return self.code_names - {"type"}
        return self.code_names

    def missed_globals(self, first_globals):
        """After the trace: the globals named by user code it ran that the scan did not
        reach, at their values when that code was first called (Note [Globals of code the
        scan missed])."""
        methods = None
        for code, g, values, free in first_globals:
            if id(code) in self.seen:
                continue
            self.seen.add(id(code))
            self.code_names.update(_names(code))
            self.codes.append(code)
            for nm, v in values.items():
                self.value_in(g, nm, v, f"global '{nm}'", 0, name=nm)
            if free:                             # a method's closure (a class made in a
                if methods is None:              # function): the cells of its function
                    methods = {id(f.__code__): f for k in self.class_list
                               for f in list(vars(k).values())
                               if isinstance(f, types.FunctionType)}
                fn = methods.get(id(code))
                for nm, cell in zip(code.co_freevars, getattr(fn, "__closure__", None) or ()):
                    if nm in free:
                        self.value_in(cell, None, free[nm], f"closure variable '{nm}'", 0,
                                      name=nm)
        self.settle()

    def guard(self, holder, key, v, mode, where):
        if holder is not None:
            self.guards.append(StateGuard(holder, key, v, mode, where))

    def value_in(self, holder, key, v, where, depth, name=None, nest=MAX_NEST, force=False):
        """Record `v` found at `holder[key]` (no guard on the place when holder is None)."""
        if isinstance(v, Tensor):
            if holder is not None:           # every place: user code may read any of them
                self.bindings.setdefault(id(v), []).append(
                    StateGuard(holder, key, v, "is", where))
            if name:                         # a module's name for it beats a list position
                self.names.setdefault(id(v), name)
            if v.__dict__.get("_leaf_hooks"):
                self.leaf_hooks(v, where, depth)
            if v.__dict__ and id(v) not in self.seen:      # Note [Attributes of tensors]
                self.seen.add(id(v))
                d = v.__dict__
                for k, x in list(d.items()):
                    if not k.startswith("_"):
                        self.value_in(d, k, x, f"{where}.{k}", depth, nest=min(nest, 2) - 1)
            return
        if isinstance(v, _SCALARS):
            self.guard(holder, key, v, "eq", where)
            return
        if isinstance(v, np.ndarray):
            self.guard(holder, key, (v, v.copy()), "array", where)
            return
        if id(v) in self.seen:
            self.again.add(id(v))
            self.guard(holder, key, v, "is", where)
            return
        if isinstance(v, abc.Iterator):
            self.iterators.append((v, where, progress(v)))
        if isinstance(v, GENERATORS):
            self.seen.add(id(v))
            self.generators.append((v, where, fingerprint(v)))
        if isinstance(v, types.ModuleType):
            self.guard(holder, key, v, "is", where)
            if not _is_library_name(v.__name__):
                self.seen.add(id(v))
                self.user_module(v, where, depth)
            elif v is os and self.code_names & _ENVIRON_READS:
                self.environ()
            elif v.__name__.split(".")[0] == "tracegrad" and id(v) not in self.seen:
                self.seen.add(id(v))             # Note [Patched library functions]
                self.named.append(("library", v, where, depth, set()))
                self._named_attrs(self.named[-1])
            return
        if isinstance(v, type):
            self.guard(holder, key, v, "is", where)
            if _is_user_class(v) and id(v) not in self.seen:
                self.seen.add(id(v))
                self.class_attrs(v, where, depth)
                if _is_custom_function(v) and depth < MAX_DEPTH:   # Note [Custom Functions'
                    for fn in _function_methods(v):                # state]
                        self.function(fn, depth + 1)
            return
        self.guard(holder, key, v, "is", where)
        if _is_module(v):
            self.seen.add(id(v))
            self.module(v, name or where, depth)
        elif isinstance(v, types.FunctionType) and _is_user(v):
            if depth < MAX_DEPTH and self.code:
                self.function(v, depth + 1)
        elif (isinstance(v, types.MethodType) and _is_user(v.__func__)) or (
                isinstance(v, functools.partial)):
            if self.code:
                self.callable_state(v, where, depth)     # Note [Module registries]
# A module keeps its parameters, buffers and submodules in three dicts (`_parameters`,
# `_buffers`, `_modules`), not in its attribute dict, so `Note [New attributes]` does not
# see them grow: `layers.append(nn.Linear(...))` on a ModuleList, `heads["b"] = ...` on a
# ModuleDict, or `register_buffer("extra", t)` under a forward that iterates
# `self.children()` / `self.buffers()` left a cached path running the old set of layers.
# So each registry's length is guarded, and its entries are guarded even when they hold
# None (`Linear(bias=False)` registers `bias` as None: a later `m.bias = Parameter(...)`
# fills that entry without changing any length).


# Note [Callables' state]
        elif _is_compiled_function(v):           # Note [Compiled functions called]
            self.value_in(None, None, v.fn, f"{where}.fn", depth, force=True)
        elif isinstance(v, weakref.ref) and type(v) is weakref.ref:
            target = v()                         # Note [Weak references]
            if target is not None:
                self.value_in(None, None, target, f"{where}()", depth, nest=nest - 1)
        elif isinstance(v, (types.MethodType, types.BuiltinFunctionType)) or (
                callable(v) and not force and not _is_plain_object(v, callable_ok=True)):
            return                           # library callables: identity is enough
        elif nest <= 0 or (isinstance(v, (list, tuple, dict)) and len(v) > MAX_ITEMS):
            self.data_beyond(holder, key, v, where)      # Note [Data beyond the walk]
        elif isinstance(v, (list, tuple, dict, collections.deque)):
            self.container(v, where, depth, nest)   # subclasses too (Note [Container kinds])
        elif isinstance(v, MUTABLE_COLLECTIONS):
            if v is os.environ:
                self.environ()
            self.seen.add(id(v))                  # a set: its mutators are effects and its
            self.containers.add(id(v))            # length is guarded; items not walked
            self.guards.append(StateGuard(v, _LEN, len(v), "len", where))
        elif force or _is_plain_object(v, callable_ok=True) and (
                self.code or _replay_owned(v)):
            self.plain_object(v, where, depth, nest)

    def environ(self):
        """Guard the environment's contents (Note [Environment variables])."""
        if ("environ",) not in self.seen:
            self.seen.add(("environ",))
            self.guards.append(StateGuard(vars(os), "environ",
                                          (os.environ, dict(os.environ)), "data", "os.environ"))

    def data_beyond(self, holder, key, v, where):
        """Guard `v`, plain data nested deeper or larger than the walk goes, by a deep
        copy of its contents (Note [Data beyond the walk])."""
        if type(v) in (list, tuple, dict) and _plain_data(v):
            if holder is None:               # an item of a tuple: its own place
                holder, key = [v], 0
            self.guards.append(StateGuard(holder, key, (v, copy.deepcopy(v)), "data", where))

    def leaf_hooks(self, t, where, depth):
        """The gradient hooks registered on leaf `t` (Note [Gradient hooks' state] in
        state_unread.py)."""
        if id(t) in self.hook_guards:
            return
        n = len(self.guards)
        self.hook_guards[id(t)] = (t, None)
        for k, h in enumerate(list(t.__dict__.get("_leaf_hooks") or ())):
            self.callable_state(h, f"gradient hook {k} of {where}", depth)
        self.hook_guards[id(t)] = (t, self.guards[n:])

    def callable_state(self, h, where, depth):
        """What a callable the traced code may call reads (Note [Callables' state])."""
        if depth >= MAX_DEPTH:
            return
        if isinstance(h, functools.partial):
            self.callable_state(h.func, where, depth + 1)
            for k, a in enumerate(h.args):
                self.value_in(None, None, a, f"{where}.args[{k}]", depth + 1)
            for k, a in (h.keywords or {}).items():
                self.value_in(h.keywords, k, a, f"{where}.keywords[{k!r}]", depth + 1)
        elif isinstance(h, (types.FunctionType, types.MethodType)):
            if _is_user(getattr(h, "__func__", h)):
                self.function(h, depth + 1)      # a bound method: its `self` too
        elif callable(h) and _is_plain_object(h, callable_ok=True) and id(h) not in self.seen:
            self.value_in(None, None, h, where, depth, force=True)   # and its __call__

    def container(self, v, where, depth, nest):
        if len(v) > MAX_ITEMS:
            return
        self.seen.add(id(v))
        mutable = not isinstance(v, tuple)
        if mutable:
            self.containers.add(id(v))
            self.guards.append(StateGuard(v, _LEN, len(v), "len", where))
        items = v.items() if isinstance(v, dict) else enumerate(v)
        for k, x in list(items):
            self.value_in(v if mutable else None, k, x,
                          f"{where}[{_short(k)}]", depth, nest=nest - 1)

    def plain_object(self, v, where, depth, nest):
        self.seen.add(id(v))
        if getattr(type(v), "_runtime_keys", None) is not None:   # an optimizer
            self.optimizers.append(v)
        d = getattr(v, "__dict__", None)
        if d is not None and len(d) > MAX_ITEMS:
            return
        if d is not None and _is_user_class(type(v)):          # Note [New attributes]
            self.guards.append(StateGuard(d, _LEN, len(d), "len", where))
        places = [(d, k, x) for k, x in list((d or {}).items())]
        if _is_user_class(type(v)):          # Note [Slots] in state_slots.py
            view = SlotView(v)
            places += [(view, k, view.get(k, _MISSING)) for k in slot_names(type(v))]
        declared = declared_reads(type(v))
        for holder, k, x in places:
            if not k.startswith("__"):
                n = len(self.guards)
                self.value_in(holder, k, x, f"{where}.{k}", depth, nest=nest - 1)
                if _pure(x, nest - 1):       # Note [Unread attributes]
                    self.plain_attrs.append((v, k, self.guards[n:]))
                if k in declared and holder is d:
                    self.method_attrs.append((v, k, self.guards[n:]))
        cls = type(v)
        self.class_methods(cls)
        self.instance_class_attrs(cls, depth)
        call = getattr(cls, "__call__", None)
        if callable(v) and isinstance(call, types.FunctionType) and _is_user(call) \
                and depth < MAX_DEPTH:
            self.function(call, depth + 1)

    def class_methods(self, cls):
        """Guard the methods of `cls` and of the user classes it inherits from (Note
        [Methods of user classes])."""
        if id(cls) in self.classes:
            return
        self.classes.add(id(cls))
        self.class_list.append(cls)
        user = [k for k in cls.__mro__ if _is_user_class(k)]
        names = {n for k in user for n, f in list(vars(k).items()) if isinstance(f, _METHODS)}
        for k in user:
            cd = k.__dict__
            for name in sorted(names):
                self.guards.append(StateGuard(cd, name, cd.get(name, _MISSING), "is",
                                              f"{k.__name__}.{name}"))
                if isinstance(cd.get(name), types.FunctionType):
                    self.defaults(cd[name], f"{k.__name__}.{name}", MAX_DEPTH)

    def instance_class_attrs(self, cls, depth):
        """The data attributes of `cls` and of the user classes it inherits from, read
        through an instance (`self.k`, `self.WEIGHTS[0]`): Note [Class attributes]."""
        self.shadowing(cls)
        for k in cls.__mro__:
            if not _is_user_class(k) or ("attrs", id(k)) in self.seen:
                continue
            self.seen.add(("attrs", id(k)))
            cd = k.__dict__
            for nm, x in list(cd.items()):
                if not nm.startswith("__") and (isinstance(x, _CLASS_DATA)
                                                or _is_plain_object(x)):
                    self.value_in(cd, nm, x, f"{k.__name__}.{nm}", depth, nest=2)

    def shadowing(self, cls):
        """Guard that no user class earlier in `cls`'s MRO gains a data attribute that a
        later one defines (Note [Shadowed class attributes])."""
        if ("shadow", id(cls)) in self.seen:
            return
        self.seen.add(("shadow", id(cls)))
        user = [k for k in cls.__mro__ if _is_user_class(k)]
        for i, k in enumerate(user):
            cd = k.__dict__
            later = {nm for b in user[i + 1:] for nm, x in list(vars(b).items())
                     if not nm.startswith("__") and nm not in cd
                     and (isinstance(x, _CLASS_DATA) or _is_plain_object(x))}
            for nm in sorted(later):
                self.guards.append(StateGuard(cd, nm, _MISSING, "is", f"{k.__name__}.{nm}"))

    def class_attrs(self, cls, where, depth):
        """The attributes of a user class (`Model.k`) that the scanned code names (now, and
        once the scan is over: Note [Names read later])."""
        self.named.append(("class", cls, where, depth, set()))
        self._named_attrs(self.named[-1])

    def user_module(self, m, where, depth):
        """The attributes of a user module (`cfg.LR`) that the scanned code names (now, and
        once the scan is over: Note [Names read later])."""
        self.named.append(("module", m, f"{m.__name__}", depth, set()))
        self._named_attrs(self.named[-1])

    def _named_attrs(self, entry):
        """Walk the attributes of one class or user module that the code scanned so far
        names and that were not walked yet; True when it walked any."""
        kind, obj, where, depth, done = entry
        d = vars(obj)
        names = self.code_names
        if kind != "library" and names & _BY_NAME:   # Note [Data read by computed names]
            names = names | public_data(d)
        new = sorted(n for n in names - done if n in d and not n.startswith("__"))
        done.update(new)
        for nm in new:
            x = d[nm]
            if kind == "class" and not isinstance(
                    x, (Tensor, np.ndarray, list, tuple, dict) + _SCALARS):
                continue
            if kind == "module" and isinstance(x, types.ModuleType):
                continue
            if kind == "library":                # Note [Patched library functions]
                if not nm.startswith("_") and isinstance(x, _LIBRARY_READS):
                    self.value_in(d, nm, x, f"{where}.{nm}", depth)
                continue
            self.value_in(d, nm, x, f"{where}.{nm}", depth, nest=2)
        return bool(new)

    def settle(self):
        """Note [Names read later]: walk the attributes of the classes and user modules
        reached that code scanned after them names, until nothing new is named."""
        while any([self._named_attrs(e) for e in list(self.named)]):
            pass

    def module(self, m, where, depth, hooks=True):
        """Parameters, buffers, hooks and attributes of `m` and of every submodule."""
        d = vars(m)
        self.guards.append(StateGuard(d, _LEN, len(d), "len", where))   # Note [New attributes]
        for reg in ("_parameters", "_buffers", "_modules"):     # Note [Module registries]
            if isinstance(d.get(reg), dict):
                self.guards.append(StateGuard(d[reg], _LEN, len(d[reg]), "len",
                                              f"{where}.{reg}"))
        for reg in ("_parameters", "_buffers"):
            for k, t in d.get(reg, {}).items():
                self.value_in(d[reg], k, t, f"{where}.{k}", depth, name=_dotted(where, k))
        orig = d.get("_orig_mod")            # a compiled module inside: its original's state
        if orig is not None:
            self.value_in(None, None, orig, where, depth)
        for reg in _HOOK_REGISTRIES if hooks else ():
            hooks = d.get(reg)
            if isinstance(hooks, dict):
                self.container(hooks, f"{where}.{reg}", depth, 1)
                for k, h in list(hooks.items()):
                    self.callable_state(h, f"{where}.{reg}[{k}]", depth)
        declared = declared_reads(type(m))
        for k, x in d.items():              # `training` and `self._scale` too
            if k not in _MODULE_INTERNALS and not k.startswith("__"):
                n = len(self.guards)
                self.value_in(d, k, x, f"{where}.{k}", depth, name=_dotted(where, k))
                if k in declared:            # Note [Attributes only some methods read]
                    self.method_attrs.append((m, k, self.guards[n:]))
        cls = type(m)
        self.class_methods(cls)
        self.instance_class_attrs(cls, depth)
        if _is_user_class(cls):
            fwd = cls.__dict__.get("forward")
            if isinstance(fwd, types.FunctionType) and depth < MAX_DEPTH:
                self.function(fwd, depth + 1)
        for k, child in d.get("_modules", {}).items():
            self.value_in(d["_modules"], k, child, f"{where}.{k}", depth)



# Note [New attributes]
# The guards above cover the attributes an object has when the trace starts. One the trace
# *creates* (`self.feat = h` in a forward that stashes an activation, `holder.last = loss`,
# `self.calls = getattr(self, "calls", 0) + 1`) has no guard, so a cached path would skip
# the assignment and leave the first call's value there for good. The length of the
# attribute dict of every module and user object walked is guarded too: a trace that adds
# one breaks it, which is a change of state the function reads (`changed_by_trace`): that
# call is not cached and such calls run eagerly, as for an attribute it rebinds. (Library
# objects that are not modules, optimizers and schedulers, are left out: they add private
# bookkeeping attributes on first use, and their state is handled by `hyper`/`replayed`.)


# Note [Module registries]
# A module keeps its parameters, buffers and submodules in three dicts (`_parameters`,
# `_buffers`, `_modules`), not in its attribute dict, so `Note [New attributes]` does not
# see them grow: `layers.append(nn.Linear(...))` on a ModuleList, `heads["b"] = ...` on a
# ModuleDict, or `register_buffer("extra", t)` under a forward that iterates
# `self.children()` / `self.buffers()` left a cached path running the old set of layers.
# So each registry's length is guarded, and its entries are guarded even when they hold
# None (`Linear(bias=False)` registers `bias` as None: a later `m.bias = Parameter(...)`
# fills that entry without changing any length).


# Note [Methods of user classes]
# A module's forward, and every method it calls (`self.block(x)`, `self.helper(x)`), is
# looked up on the class at each eager call: `Net.forward = patched_forward` or
# `Block.helper = ...` between calls (a monkeypatch, an adapter library rewriting a model's
# class) changes what eager runs, while a cached path replays the old code. So for each
# module and plain object the scan walks, the methods of its class and of the user classes
# it inherits from are guarded by identity, on every one of those classes (absent where
# it is inherited: `Sub.forward = f` on a subclass that only inherited `forward` before).
# Not the class dicts' lengths: reading `cls.__annotations__` adds an entry. Library
# classes (`nn.Linear`) are not guarded: patch an instance or a user subclass instead.
_METHODS = (types.FunctionType, staticmethod, classmethod, property, functools.partialmethod)


# Note [Class attributes]
# A module or plain object reads its class's data through `self` as it reads its own:
# `self.scale`, `self.CLASS_WEIGHTS[1]`, `self.cfg["p"]`, also when a user base class
# defines them. Eager reads them on every call, so they are guarded like instance
# attributes: scalars, tensors and arrays, lists, tuples and dicts, and plain objects of
# user classes (a shared `cfg = Config()`), up to two levels deep (a class-level table
# changed in place between calls, `Aug.cfg["scale"] = 2.0`, must re-trace). Only scalars
# and tensors of the object's own class used to be, so a changed class-level list, dict or
# config object, or anything set on a base class, left a cached path stale.
_CLASS_DATA = (Tensor, np.ndarray, list, tuple, dict) + _SCALARS


# Note [Globals of code the scan missed]
# The scan before the trace reaches the functions it can name: through globals and
# closures, MAX_DEPTH calls deep, and the forwards of modules. It cannot name a method
# called on `self` (`self.helper(x)` reading a global `SCALE` or `USE_NORM`), nor code
# deeper than MAX_DEPTH, so a global such code read was not guarded and a cached path kept
# its first value. So the Python monitor of the trace (`_effects.watch_python`) records,
# when each user function first runs outside replayed calls (a custom Function's forward
# runs again on every call: it reads its globals itself), the globals its code names and
# their values then, and its free variables; after the trace, those of code the scan
# missed are walked like the scan's own (the closure cells of a method of a class made
# inside a function, found on the classes walked), each from its value on entry, so a
# trace that changed one is not cached, as for the others.


# Note [Defaults of functions called]
# A function's defaults are read at each call: `helper(x)` with `def helper(x, k=2.0)`
# reads `helper.__defaults__`, which `helper.__defaults__ = (5.0,)`, a mutated
# `__kwdefaults__` dict, or a default dict changed in place (`def f(x, cfg={...})`) change
# between calls. So the defaults of each user function scanned, and of the methods of the
# user classes walked, are walked like attributes (the tuple by identity, its items by
# value). The compiled function's own defaults are its binder's (compiler/binding.py).
# Their `__code__` is guarded by identity too: a hot reload (IPython's `%autoreload`)
# replaces the code of the existing function objects, which keep their identity.


# Note [Attributes of tensors]
# A parameter or buffer can carry Python attributes of its own (`self.w.scale = 2.0`, a
# quantization flag, `p.group = "decoder"`) that a forward reads. Those a tensor the scan
# reaches has when the trace starts (public names only: the engine keeps `_grad` and
# `_accum` there) are walked like an object's attributes.


# Note [Data read by computed names]
# `getattr(cfg, key)` reads an attribute of a config module or class whose name is a
# value (a string in a variable or an argument), which no code names: the scan walked
# only the attributes the code names, so `cfg.SCALE = 3.0` between calls left a cached
# path stale. When the scanned code names `getattr`, `vars` or `__dict__`, the public data
# attributes (numbers, strings, tensors, arrays, lists, tuples, dicts) of the user modules
# and classes it reaches are walked too.
_BY_NAME = frozenset(("getattr", "vars", "__dict__"))
# Likewise code naming `globals` (`globals()[name]`) has the public data of its module's
# globals walked.


def public_data(d):
    """The names of the public data values in namespace `d` (Note [Data read by computed
    names])."""
    return {n for n, x in list(d.items()) if not n.startswith("_") and isinstance(x, _CLASS_DATA)}


# Note [Compiled functions called]
# A compiled function called by another one being traced runs inline (its ops join the
# outer trace), so the outer path depends on what the inner function reads: its closure
# and globals are walked as the function it compiles (`inner.fn`), not left behind the
# CompiledFunction object's identity.


# Note [Weak references]
# A module that points back at its parent or a shared registry through `weakref.ref(obj)`
# (to avoid a reference cycle) reads `self._parent().scale`: the referent is walked as
# if held directly (the reference itself is guarded by identity), so its attributes are
# guarded like any other object's.


# Note [Patched library functions]
# `F.relu(x)` or `tg.matmul(a, b)` looks the function up in the library module on every
# eager call. Rebinding it between calls (`F.relu = my_relu`, a test or an experiment
# patching one activation, `unittest.mock.patch("tracegrad.nn.functional.gelu", ...)`)
# changes what eager runs, while a cached path replayed the old function. So for each
# tracegrad module the scanned code reaches by name (`tg`, `F`, `tg.nn.functional`), the
# public functions and submodules it names are guarded by identity (cheap: one `is` each,
# only for names the code uses). Patching a function that a library method calls inside
# (`nn.ReLU.forward` calls `F.relu`) is not seen: patch it where user code reads it.
_LIBRARY_READS = (types.FunctionType, types.BuiltinFunctionType, types.ModuleType,
                  functools.partial)


# Note [Shadowed class attributes]
# `self.SCALE` finds the first class in the MRO that defines SCALE. Setting it later on a
# class that comes earlier (`Child.SCALE = 7.0` when only `Base.SCALE` existed) changes what
# eager reads without touching the guarded `Base.SCALE`, so each user class is guarded not
# to hold the data attributes that its later user bases define (as methods are guarded
# absent where inherited: Note [Methods of user classes]).


# Note [Callables' state]
# A callable the traced code may call reads state of its own: a bound method its object's
# attributes (`self.k`), a callable object its attributes and its `__call__`'s globals, a
# `functools.partial` its bound arguments. Such callables held in state (a global
# `act = scaler.apply`), registered as a module's forward hooks or pre-hooks, or as a
# leaf's gradient hooks (Note [Gradient hooks' state] in state_unread.py) are walked as
# user functions are, so a changed `scaler.k` re-traces rather than a cached path keeping
# the first value.

# Note [Custom Functions' state]
# A custom autograd.Function is one opaque node: its `forward` runs on every compiled call,
# but its `backward` is recorded once, when the path's backward program is built (Note
# [Opaque Functions] in tracing/custom_function.py). What the backward's code reads (a
# global `G["scale"]`, a closure) is state of the path like the traced function's own: a
# Function class the scan reaches has its methods but `forward` walked, so a changed
# setting re-traces instead of a cached backward keeping the first value.

def _is_custom_function(cls):
    from ..autograd.function import Function
    return issubclass(cls, Function)


# `forward` (and `setup_context`) run on every compiled call, reading their state then:
# only what the recorded backward reads needs guards (and a forward appending to a list
# the caller holds is a per-call effect, not a change of state read)
_RUN_PER_CALL = frozenset(("forward", "setup_context"))


def _function_methods(cls):
    """The user-written methods of a Function class (staticmethods, classmethods, plain)
    whose code a compiled call does not run again."""
    out = []
    for k in cls.__mro__:
        if not _is_user_class(k):
            continue
        for name, f in vars(k).items():
            f = getattr(f, "__func__", f)
            while hasattr(f, "__wrapped__"):     # once_differentiable and other decorators
                f = f.__wrapped__
            if isinstance(f, types.FunctionType) and not name.startswith("__") and \
                    name not in _RUN_PER_CALL:
                out.append(f)
    return out


# Note [Environment variables]
# `float(os.environ.get("AUG_SCALE", 1))` or `os.getenv("DEBUG")` inside a step is read on
# every eager call; `os` is a library module, whose attributes the scan does not walk, and
# `os.environ` (reached as `from os import environ` too) a mapping whose length alone was
# guarded, so a variable changed between calls left a cached path on the first value. When
# the scanned code names `environ` or `getenv` on `os`, or holds `os.environ` itself, the
# environment's contents are guarded by a copy ("data"). (Only then: the check costs a
# copy of the environment per call.)
_ENVIRON_READS = frozenset(("environ", "getenv"))
