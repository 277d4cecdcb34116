"""`tracegrad.compile`: trace once per control-flow path, then run generated programs.

Note [Paths]
Calls are grouped by entry key (compiler/keys.py). Within an entry, each cached path is a
sequence of guard outcomes with its own forward/backward programs. A call runs the path that
last succeeded; a guard that comes out differently raises `GuardFailed(k, actual)` and the
call continues with a path sharing the first k outcomes and the new one, or re-traces the
whole call eagerly (recording a new path) when none exists. Every re-trace is logged on the
`tracegrad` logger with the guard's source line and the expected and actual values. Python
state the function reads (closures, globals, module attributes) is guarded too (Note
[Captured state] in compiler/state.py). Past
`cache_limit` paths the function warns once and runs eagerly (still correct). Cache hits run
concurrently from any thread; misses take a per-function lock, so a path is traced once.

A compiled function called while another function is being traced runs inline, so the outer
trace records its ops. Every CompiledFunction is registered weakly (`compiled_functions()`,
used by `python -m tracegrad explain`); with `TRACEGRAD_DUMP_DIR` set each new path is written
to disk (compiler/dump.py).
"""
import functools
import itertools
import logging
import os
import threading
import types

import numpy as np
import weakref

from .. import _dispatch, _dtype, _mode
from .._tensor import Tensor
from .._errors import RerunEagerly
from ..ir.interpret import GuardFailed
from ..ir.printer import value_names
from ..tracing import Tracer
from ..tracing.custom_function import CLASS_OF, OPAQUE
from ..tracing.forward_memo import MEMO, ForwardMemo, next_attempt
from ..passes import DEFAULT_PIPELINE
from .arguments import check_compile_arguments
from .check import _in_check, checked_call
from ..autograd.anomaly_mode import STATE as _ANOMALY
from .._saved_hooks import ACTIVE as _SAVED_HOOKS, active as saved_hooks_active
from ..nn._global_hooks import ACTIVE as _GLOBAL_HOOKS
from .keys import (alias_eager_reason, alias_groups, describe_difference, entry_key,
                   key_checker)
from .backward_node import eager_saves
from .fused_entry import KEY_MISS, RUN_MISS, fuse
from .hyper_order import written_before_read
from .print_replay import recording_prints
from .warning_replay import recording_warnings
from ..autograd.engine import leaf_ranks
from .path import CompiledPath, prefix_eq, rewind, rng_states
from ..passes.vjp import BackwardDecides
from .pipeline import run_pipeline, stages_for
from .record import Options
from .trace_plan import hooks_changed, record_from_trace
from .._effects import watch_python
from .binding import Binder
from .dynamic_numbers import DynamicFloats, taken_from_tensors
from . import append_replay, place_writes, tensor_places
from ..tracing.numbers import split_outputs
from .state import optimizer_state_growth, owned_holders, scan
from .state_rebind import rebind
from .fallbacks import EagerFallbacks, is_generator_function
from .fullgraph import fullgraph_class
from .tensor_attrs import attr_objects, attrs_written
from .trace_outcome import (check_number_identity, note_call_effects, outputs_of,
                            unread_guards)
from .trace_settle import grad_outputs, settle_state, with_view_bases
from .state_unread import hooks_of, unused_hook_guards

log = logging.getLogger("tracegrad")

_serial = itertools.count()   # orders paths by creation across entries
_registry = []          # weakrefs to every CompiledFunction, in creation order
_listeners = []         # callables told of each new CompiledFunction (the CLI keeps them alive)


def compiled_functions():
    """Every CompiledFunction still alive, in creation order (used by `python -m tracegrad`)."""
    alive = [r() for r in list(_registry)]
    return [f for f in alive if f is not None]


def _register(cf):
    _registry[:] = [r for r in _registry if r() is not None]
    _registry.append(weakref.ref(cf))
    for fn in list(_listeners):
        fn(cf)


class Stats:
    """Counters of a compiled function (`.stats`)."""

    def __init__(self):
        self.calls = 0
        self.cache_hits = 0
        self.traces = 0
        self.eager_calls = 0
        self.retraces = []          # reasons, in order
        self.rebinds = 0            # paths re-bound to reloaded optimizer state (Note
        #                             [Optimizer state reloaded] in state_rebind.py)

    def __repr__(self):
        return (f"Stats(calls={self.calls}, cache_hits={self.cache_hits}, traces={self.traces},"
                f" eager_calls={self.eager_calls}, retraces={self.retraces!r})")

    def __str__(self):
        lines = [f"calls={self.calls} cache_hits={self.cache_hits} traces={self.traces} "
                 f"eager_calls={self.eager_calls} retraces={len(self.retraces)}"
                 + (f" rebinds={self.rebinds}" if self.rebinds else "")]
        lines += [f"  retrace {k + 1}: {r}" for k, r in enumerate(self.retraces)]
        return "\n".join(lines)


_UNBUILT = object()          # an entry's key check, not built yet
_MISS = object()             # _serve: no cached path fits this call


class _Entry:
    def __init__(self, key):
        self.key = key
        self.paths = []
        self.last = None
        self.eager = None           # a reason: calls with this key run eagerly
        self.check = _UNBUILT       # Note [Checking the last key] in keys.py
        self.all_tensors = False    # every argument of the checked call is a tensor
        self.solo = None            # Note [One path, no draws]
        self.fast = None            # Note [Fused entry] in fused_entry.py


# Note [One path, no draws]
# A call the last entry's key check accepts normally runs `_serve` -> `_run_cached`, which
# loops over the entry's paths (the last one first, another on a failed guard or Python
# state that no longer holds), snapshotting random generators to rewind. An entry with one
# path whose programs draw from no generator has nothing to choose or rewind: the call
# runs that path directly, and on any miss (a failed guard, state that changed) falls
# through to the keyed lookup below, exactly where `_serve` would have sent it. About 1 us
# of the tiny training step's per-call work. When the path's runner is generated and every
# argument is a tensor, the key check and the runner are one function (Note [Fused entry]
# in fused_entry.py).


class CompiledFunction(EagerFallbacks):
    """A function compiled by `tracegrad.compile` (callable like the original)."""

    def __new__(cls, *args, fullgraph=False, **kwargs):
        if fullgraph and cls is CompiledFunction:    # Note [Full graph] in fullgraph.py
            cls = _FullGraph
        return super().__new__(cls)

    def __init__(self, fn, cache_limit=8, passes=None, backend="numpy", name=None,
                 memory="balanced", debug_nan=False, check=False, data_parallel=False,
                 fullgraph=False):
        if memory not in ("off", "balanced", "min"):
            raise ValueError(f"memory must be 'off', 'balanced' or 'min', got {memory!r}")
        self.memory = memory
        self.debug_nan = debug_nan
        self.check = check                   # check mode (compiler/check.py)
        check_compile_arguments(fn, backend)
        if backend == "jax":
            from ..backends.jax import require_jax
            require_jax()
        if data_parallel and backend != "jax":
            raise ValueError("data_parallel=True needs backend='jax'")
        self.backend, self.data_parallel = backend, data_parallel
        self.options = dict(cache_limit=cache_limit, passes=passes, backend=backend,
                            name=name, memory=memory, debug_nan=debug_nan, check=check,
                            data_parallel=data_parallel, fullgraph=fullgraph)
        self.fullgraph = fullgraph
        self.fn = fn
        self.cache_limit = cache_limit
        self.pipeline = tuple(DEFAULT_PIPELINE if passes is None else passes)
        self.name = name or getattr(fn, "__name__", type(fn).__name__)
        self.entries = {}
        self.stats = Stats()
        self._warned = False
        self._last_key = None
        self._hit = None                 # Note [Checking the last key] in keys.py
        self._paths_added = 0                # paths in all entries (`_n_paths`)
        self._opaque = False     # a path runs custom forwards (Note [Forwards run once per call])
        self._trace_lock = threading.RLock()
        self._fresh_reason = "first call"     # why a call finding no entry traces
        self.module = None
        self.binder = Binder(fn)
        self._floats = DynamicFloats()       # Note [Float arguments that change]
        self._generator = is_generator_function(fn)   # Note [Generator functions]
        functools.update_wrapper(self, fn, updated=())
        _register(self)

    @property
    def programs(self):
        """Every cached path (across entries), in creation order."""
        return sorted((p for e in self.entries.values() for p in e.paths),
                      key=lambda p: getattr(p, "serial", 0))

    def reset(self, reason):
        """Drop every cached path (`tracegrad.compiler.reset()`); the next call traces for
        `reason`."""
        with self._trace_lock:
            self.entries, self._hit, self._last_key = {}, None, None
            self._floats, self._paths_added = DynamicFloats(), 0
            self._fresh_reason = reason

    def _n_paths(self):
        return self._paths_added

    def __call__(self, *args, **kwargs):
        if self.check and not _in_check():
            return checked_call(self, args, kwargs)
        self.stats.calls += 1
        if _ANOMALY["enabled"]:              # Note [Anomaly mode and compile]
            return self._anomaly_call(args, kwargs)
        if _SAVED_HOOKS[0] and saved_hooks_active():   # Note [Saved tensors hooks]
            return self._saved_hooks_call(args, kwargs)
        if _GLOBAL_HOOKS[0]:                 # Note [Global module hooks] (nn/_global_hooks.py)
            return self._global_hooks_call(args, kwargs)
        if self._generator:                  # Note [Generator functions] in fallbacks.py
            return self._generator_call(args, kwargs)
        if _dispatch.trace_hook.get() is not None:
            # Called while another function is being traced: run inline so the outer trace
            # records our ops (a nested program's outputs would otherwise become constants).
            self.stats.eager_calls += 1
            return self.fn(*args, **kwargs)
        # Note [Forwards run once per call] (a try costs nothing until it raises)
        token = MEMO.set(ForwardMemo()) if self._opaque and MEMO.get() is None else None
        try:
            entry = self._hit
            fast = entry.fast if entry is not None and not kwargs and entry.eager is None \
                else None
            if fast is not None:                 # Note [Fused entry] in fused_entry.py
                try:
                    out = fast(args)
                except GuardFailed:              # (the path put back what it changed)
                    out = RUN_MISS
                except RerunEagerly as e:        # Note [Errors inside compiled programs]
                    self._last_key = entry.key
                    self._log_rerun()
                    return self._rerun(e, args, kwargs)
                if out is not KEY_MISS:
                    self._last_key = entry.key
                    if out is not RUN_MISS:
                        self.stats.cache_hits += 1
                        return out
            elif entry is not None and not kwargs and entry.eager is None and \
                    entry.check(args):
                # the entry the last call hit, with its key unchanged (Note [Checking the
                # last key] in keys.py): no keying, no lookup
                self._last_key = entry.key
                tensors = args if entry.all_tensors else [a for a in args
                                                          if isinstance(a, Tensor)]
                path = entry.solo
                if path is not None:             # Note [One path, no draws]
                    next_attempt()
                    try:
                        outs, bad = path.call(tensors)
                    except GuardFailed:          # (the path put back what it changed)
                        bad = True
                    except RerunEagerly as e:    # Note [Errors inside compiled programs]
                        self._log_rerun()
                        return self._rerun(e, args, kwargs)
                    if bad is None:
                        self.stats.cache_hits += 1
                        return outs[0] if path.single else path.rebuild_outputs(outs)
                else:
                    out = self._serve(entry, tensors, args, kwargs)
                    if out is not _MISS:
                        return out
            leaves, struct, containers = self.binder.bind(args, kwargs)
            if leaves is None:                   # arguments that do not fit: Python's error
                next_attempt()
                return self.fn(*args, **kwargs)
            key, tensors, aliased = entry_key(leaves, struct)
            if self._floats.dynamic:         # Note [Float arguments that change]
                key = self._floats.key(key, leaves, struct)
            if self.module is not None:
                key = key + (tuple(m.training for m in self.module.modules()),)
            if aliased:                          # Note [Arguments sharing memory]
                why = alias_eager_reason(tensors)
                if why is not None:
                    self._warn_alias(why)
                    self.stats.eager_calls += 1
                    next_attempt()
                    return self.fn(*args, **kwargs)
                key = (key[0] + (("aliases", alias_groups(tensors)),),) + key[1:]
            n_seen = self._n_paths()
            entry = self.entries.get(key)
            wider = None
            if entry is None and self._last_key is not None:
                names = (self.binder.leaf_names(args, kwargs) if struct is not None
                         else None) or _arg_names(self.fn, len(leaves))
                wider = self._floats.widen(self._last_key, key, leaves, struct, names)
                if wider is not None:
                    key = wider[0]
                    entry = self.entries.get(key)
            if entry is not None and entry.eager is not None:
                self.stats.eager_calls += 1      # see CompiledPath.eager_reason
                next_attempt()
                return self.fn(*args, **kwargs)
            reason = None
            if entry is None:
                reason = (self._fresh_reason if not self.entries else
                          wider[1] if wider is not None else
                          describe_difference(self._last_key, key, self.binder.names)
                          if self._last_key
                          else "new entry")
            else:
                out, reason = self._run_cached(entry, tensors)
                if reason is None:
                    self.stats.cache_hits += 1
                    self._last_key = key
                    if entry.check is _UNBUILT:
                        entry.check = (key_checker(key, args) if self.module is None
                                       and not kwargs else None)
                        # the check fixes each argument's type: all tensors stay so
                        entry.all_tensors = all(isinstance(a, Tensor) for a in args)
                        entry.fast = fuse(entry, args) if entry.check is not None else None
                    self._hit = entry if entry.check is not None else None
                    return out
                if type(reason) is RerunEagerly:
                    return self._rerun(reason, args, kwargs)
            self._last_key = key
            with self._trace_lock:
                # Threads that miss together trace one at a time; a path another thread added
                # while this one waited is tried first, so each path is traced once.
                if self._n_paths() != n_seen:
                    entry = self.entries.get(key)
                    if entry is not None and entry.eager is not None:
                        self.stats.eager_calls += 1
                        next_attempt()
                        return self.fn(*args, **kwargs)
                    if entry is not None:
                        out = self._serve(entry, tensors, args, kwargs)
                        if out is not _MISS:
                            return out
                return self._trace(key, entry, args, kwargs, leaves, reason, containers)
        finally:
            if token is not None:
                MEMO.reset(token)

    def _serve(self, entry, tensors, args, kwargs):
        """The call's result from a cached path of `entry` (or from its eager rerun), or
        _MISS when no path fits and the call must trace."""
        out, reason = self._run_cached(entry, tensors)
        if reason is None:
            self.stats.cache_hits += 1
            return out
        if type(reason) is RerunEagerly:
            return self._rerun(reason, args, kwargs)
        return _MISS

    def retarget(self, fn, reason):
        """Compile `fn` from now on instead of `self.fn`, dropping every cached path (Note
        [Forward replaced] in compiler/module.py); the next call re-traces for `reason`."""
        with self._trace_lock:
            self.fn, self.binder, self._floats = fn, Binder(fn), DynamicFloats()
            self.entries, self._hit, self._last_key = {}, None, None
            self._fresh_reason = reason

    def _run_cached(self, entry, tensors):
        """Run the cached path that fits this call: (outputs, None), or (None, why none does).

        The last path that ran is tried first; a path whose Python state no longer holds
        gives way to any other path of the entry whose state does (a global flipping between
        two values alternates between two paths instead of re-tracing), and a failed tensor
        guard to a path sharing the outcomes before it (Note [Paths])."""
        path = entry.last
        tried = set()
        first_bad = None
        stale = []                       # paths whose Python state no longer holds
        while path is not None:
            tried.add(id(path))
            next_attempt()
            rng = rng_states(path)
            try:
                outs, bad = path.call(tensors)
            except RerunEagerly as e:            # Note [Errors inside compiled programs]
                rewind(rng)                     # in codegen.py: eager raises eager's error
                self._log_rerun()
                return None, e
            except GuardFailed as gf:
                rewind(rng)                     # undo draws made before the failed guard
                prefix = path.outcomes[:gf.index] + [gf.actual]
                nxt = next((p for p in entry.paths if id(p) not in tried
                            and prefix_eq(p.outcomes, prefix)), None)
                if nxt is None:
                    gd = path.guards[gf.index]
                    v = value_names(path.part.forward).get(gd.value, "?")
                    return None, (f"guard {gd.kind}(%{v}) at {gd.site}: expected "
                                  f"{gd.expected!r}, got {gf.actual!r}")
                path = nxt
                continue
            if bad is not None:
                first_bad = first_bad or bad
                if stale is not None:
                    stale.append(path)
                path = next((p for p in entry.paths if id(p) not in tried), None)
                if path is None and stale:   # no path holds as it is: one re-bound to
                    path = self._rebound(entry, stale)   # reloaded optimizer state?
                    stale = None             # (once per call)
                continue
            entry.last = path
            return path.rebuild_outputs(outs), None
        return None, first_bad or getattr(entry, "unstable_reason", "no path")

    def _rebound(self, entry, stale):
        """The first of the `stale` paths of `entry` that can be re-bound to reloaded
        optimizer state (Note [Optimizer state reloaded] in state_rebind.py), put in its
        place in the entry; or None. Its fused check is built again on the entry's next
        keyed hit (Note [Fused entry])."""
        for old in stale:
            fresh = rebind(old)
            if fresh is not None:
                self._replace_path(entry, old, fresh)
                self.stats.rebinds += 1
                return fresh
        return None

    def _replace_path(self, entry, old, fresh):
        with self._trace_lock:
            entry.paths = [fresh if p is old else p for p in entry.paths]
            if entry.last is old:
                entry.last = fresh
            if entry.solo is old:
                entry.solo = fresh
            entry.fast = None
            entry.check = _UNBUILT
            if self._hit is entry:
                self._hit = None

    def _log_rerun(self):
        log.info("tracegrad: '%s' failed inside its compiled program before writing into "
                 "any input; running the call eagerly", self.name)

    def _trace(self, key, entry, args, kwargs, leaves, reason, containers=()):
        """Run the call eagerly while recording it, and cache the path (Note [Paths])."""
        if self._n_paths() >= self.cache_limit:
            return self._over_limit(args, kwargs, reason)
        if entry is not None and entry.paths:    # Note [Float attributes that change]
            reason = self._floats.widen_places(entry) or reason
        if self._n_paths():              # a re-trace: some path exists (a failed trace adds none)
            log.info("tracegrad: re-tracing '%s' (path %d): %s", self.name,
                     self._n_paths() + 1, reason)
            self.stats.retraces.append(reason)
        self.stats.traces += 1
        next_attempt()
        positions = self._floats.positions(key) if self._floats.dynamic else ()
        tracer, scanned, out, outs, build, n_args, read_keys = self._record(
            args, kwargs, leaves, containers, positions)
        if tracer.numbers is not None:       # Note [Float arguments that change]
            late = any(CLASS_OF.get(n.prim) is not None for n in tracer.graph.nodes)
            _, bad, fresh = tracer.place_writes or ((), (), ())
            for h, k in fresh:               # Note [Numbers written to Python state]
                if (id(h), k) not in self._floats.static_places:
                    self._floats.places[(id(h), k)] = (h, k)
            for h, k in bad:                 # what no cached call can write: by value
                self._floats.static_places[(id(h), k)] = (h, k)
                self._floats.places.pop((id(h), k), None)
            settled = self._floats.settle(tracer.numbers, positions, tracer.placed, late)
            if bad or fresh:
                settled = False
            if not settled and (late or not any(e.eager for e in tracer.effects)):
                return out           # (a path that runs eagerly anyway is stored as one)
            if self._floats.static.intersection(positions):
                key = self._floats.valued(key, leaves)
                entry = self.entries.get(key)
        if tracer.uncached and not any(e.eager for e in tracer.effects):
            log.info("tracegrad: '%s' not cached: %s", self.name, tracer.uncached)
            return out               # Note [Lazy parameters under compile]: the next trace
        #                              reads what this call stored
        outs, build = with_view_bases(tracer, outs, build)   # Note [Bases of returned views]
        grad_sets = grad_outputs(tracer, outs)
        reached = [o for o, _ in grad_sets] + tracer.leaves_reached
        # Note [Gradient hooks' state] in state_unread.py
        scanned.unread = scanned.unread | unused_hook_guards(
            scanned, {id(t) for t in reached})
        attrs_written(tracer, key, leaves, self.binder.names, self.name)
        unseen = next((t for t in reached if id(t) not in scanned.hook_guards
                       and t.__dict__.get("_leaf_hooks")), None)
        if unseen is not None:               # hooks whose state the scan could not walk
            tracer.note_effect("hook", "gradient hooks of a tensor reached only through "
                               "state the scan does not walk", unseen,
                               site=f"{self.name}")
        changed_hooks = hooks_changed(tracer)    # Note [Hooks changed by the call]
        if changed_hooks is not None:            # (trace_plan.py)
            tracer.note_effect("hook", "a gradient hook registered or removed while the "
                               "function's backward ran (a hook removing itself when it "
                               "fires), which a compiled program does not replay",
                               changed_hooks, site=f"{self.name}")
        state_guards, runtime, changed = settle_state(
            tracer, scanned, read_keys, tracer.placed)
        written_before_read(tracer, runtime)   # Note [Hyper-parameters written in a call]
        if entry is None:
            entry = self.entries[key] = _Entry(key)
            # objects keyed by id() must outlive the entry, or a new object could reuse the id
            entry.keep = [x for x in leaves if not isinstance(
                x, (Tensor, np.ndarray, bool, int, float, str, type(None)))] + [
                v for x in leaves if isinstance(x, Tensor) for v in attr_objects(x)]
        if changed and not any(e.eager for e in tracer.effects):
            growth = optimizer_state_growth(changed, scanned)
            return self._not_cached(entry, changed, out, growth)   # (an effect says more)
        entry.unstable = 0
        options = Options(passes=tuple(self.pipeline), memory=self.memory,
                          poison=self.debug_nan, backend=self.backend,
                          data_parallel=self.data_parallel)
        record = record_from_trace(self.name, tracer, outs, build, options, n_args,
                                   state_guards, grad_sets)
        ins = [t for _, t in tracer.args + tracer.captured]
        saves = eager_saves(outs, ins)
        ranks = leaf_ranks(outs, ins)        # Note [Leaf accumulation order] in engine.py
        del tracer, outs, grad_sets          # the record keeps what compiling needs
        try:
            path = CompiledPath(run_pipeline(record, stages_for(options)))
        except BackwardDecides as e:         # a custom Function's backward branching on
            entry.eager = str(e)             # values: eager runs it on every call
            self._say_eager(f"tracegrad.compile: '{self.name}' runs eagerly for arguments "
                            f"like these: {e}")
            return out
        path.eager_saves = saves             # Note [Second backward] in backward_node.py
        path.acc_rank = [ranks[i] if i is not None else None for i in path._edge_inputs]
        path.scalar_names = {(id(g.holder), g.key): g.where for g in runtime}
        if positions:
            names = _arg_names(self.fn, len(leaves))
            path.scalar_names.update({(id(self._floats.holder), i): f"argument '{names[i]}'"
                                      for i in positions})
        self._store(entry, path, reason)
        return out

    def _record(self, args, kwargs, leaves, containers, positions=()):
        """Trace one call: the tracer, what the state scan found, the outputs, and the
        string constants of the user code the trace ran (`settle_state`). The floats at
        `positions` are passed as Numbers (Note [Float arguments that change])."""
        tracer = Tracer(self.name)
        names = self.binder.leaf_names(args, kwargs)      # `batch[0]`, `packed.data`
        if names is None or len(names) != len(leaves):
            names = _arg_names(self.fn, len(leaves))
        objects = [(names[i] if i < len(names) else f"a{i}", x) for i, x in enumerate(leaves)
                   if not isinstance(x, (Tensor, bool, int, float, str, type(None)))]
        scanned = scan(self.module if self.module is not None else self.fn, objects)
        tracer.names.update(scanned.names)
        n_args = 0
        for i, x in enumerate(leaves):
            if isinstance(x, Tensor):
                tracer.add_arg(x, names[i] if i < len(names) else f"a{i}")
                n_args += 1
        hooks_of(scanned, [(x, names[i] if i < len(names) else f"a{i}")
                           for i, x in enumerate(leaves) if isinstance(x, Tensor)])
        external = set(containers) | scanned.containers
        before = self.binder.snapshot(args, kwargs) if containers else []
        arrays = [(names[i] if i < len(names) else f"a{i}", x, x.copy())
                  for i, x in enumerate(leaves) if isinstance(x, np.ndarray)]
        grad_mode = _mode.grad_enabled()
        default_dtype = _dtype.get_default_dtype()
        call_args, call_kwargs = args, kwargs
        placed = tracer.placed = self._floats.place_numbers(tracer) if self._floats.places \
            else ()
        swapped = ()
        if positions:
            _, call_args, call_kwargs, swapped = self._floats.substitute(
                tracer, self.binder, args, kwargs, leaves, positions, names)
        # Note [Numbers taken from tensors] in tracing/numbers.py
        tracer.item_numbers = self._floats.items_per_call(_codes_of(self.fn),
                                                          scanned.float_names())
        number_outs, appends, stored = {}, (), ()
        with tracer, watch_python(tracer, external, _codes_of(self.fn)) as watch, \
                recording_warnings(tracer), recording_prints(tracer):  # Notes [Warnings
            #                                         replayed], [Prints replayed]
            try:
                alone = threading.active_count() == 1
                out = self.fn(*call_args, **call_kwargs)
                if tracer.numbers is not None:
                    out, number_outs = split_outputs(out)
                    # Note [Numbers written to Python state] in place_writes.py
                    alone = alone and threading.active_count() == 1
                    tracer.place_writes = place_writes.collect(
                        tracer.numbers, placed, scanned.guards,
                        owned_holders([o for o, *_ in tracer.replays]), bool(tracer.replays),
                        None if alone else list(watch.user_codes) + list(watch.foreign_calls))
                # Note [Appends to the caller's lists] in append_replay.py
                appends = append_replay.collect(tracer, watch, scanned.guards,
                                                set(containers))
                # Note [Tensors written to Python state] in tensor_places.py
                stored, tracer.place_sources = tensor_places.collect(
                    tracer, scanned.bindings, self._floats.rebound)
            except BaseException as e:
                if tracer.numbers is not None:
                    if isinstance(e, TypeError) and taken_from_tensors(tracer.numbers):
                        e.add_note(f"tracegrad.compile: while '{self.name}' was traced, a "
                                   "float tensor's .item() gave a stand-in for the float, "
                                   "which C code taking only a real float refuses; later "
                                   "calls take plain floats (Note [Numbers taken from "
                                   "tensors])")
                    elif isinstance(e, TypeError) and tracer.numbers.made:
                        e.add_note(f"tracegrad.compile: while '{self.name}' was traced, a "
                                   "float or int it reads per call (an argument, or Python "
                                   "state that changes between calls) was a stand-in, which "
                                   "C code taking only a real number (json.dumps, "
                                   "struct.pack) refuses; this call's Python effects ran up "
                                   "to the error, and later calls key that number by value "
                                   "(Note [Float arguments that change])")
                    self._floats.failed(tracer.numbers, positions,
                                        self._floats.restore(placed))
                raise
            finally:
                if placed:
                    placed = tracer.placed = self._floats.restore(placed)
                if swapped:                  # the caller's own numbers back in place
                    self._floats.restore(swapped)
            del call_args, call_kwargs
        numbers = tracer.numbers
        scanned.missed_globals(watch.first_globals)   # Note [Globals of code the scan missed]
        check_number_identity(self.name, self._floats, watch, numbers, positions, placed)
        code = getattr(self.fn, "__code__", None)
        site = code and f"{code.co_filename}:{code.co_firstlineno} in {self.name}"
        note_call_effects(tracer, scanned, site, grad_mode, default_dtype, before,
                          before and self.binder.snapshot(args, kwargs), arrays)
        read_keys = unread_guards(tracer, scanned, watch, appends, containers)
        outs, build = outputs_of(self.name, tracer, scanned, out, site, arrays, number_outs,
                                 appends, stored, containers)
        return tracer, scanned, out, outs, build, n_args, read_keys

    def _store(self, entry, path, reason):
        entry.paths.append(path)
        self._paths_added += 1
        if not self._opaque:
            self._opaque = any(n.prim in OPAQUE for n in path.part.forward.nodes)
        entry.last = path
        rng_states(path)                     # finds the generators its draws use, once
        entry.solo = path if len(entry.paths) == 1 and not path._generators else None
        entry.fast = None                    # (built with the key check, for one path)
        path.trace_reason = reason
        if path.eager_reason is None and entry.key[0] and entry.key[0][-1][0] == "aliases":
            n = path.n_args
            if any(pos < n for pos, _ in path.part.mutations):
                path.eager_reason = ("two tensor arguments share memory and the function "
                                     "writes one of them in place")
        if path.eager_reason is not None:
            entry.eager = path.eager_reason
            self._say_eager(f"tracegrad.compile: '{self.name}' runs eagerly for arguments "
                            f"like these: {path.eager_reason}")
        path.serial = next(_serial)
        if os.environ.get("TRACEGRAD_DUMP_DIR"):
            from .dump import dump_path      # never raises: a failed dump only logs
            dump_path(self, path)

    def explain(self, code=False):
        """A readable report: per path, its guards with source lines, IR and pass stats
        (compiler/explain.py); `code=True` adds the generated source."""
        from .explain import explain
        return explain(self, code=code)

    def to_dot(self, **options):
        """A graphviz.Digraph of every cached path (see `tracegrad.viz.to_dot`)."""
        from .. import viz
        return viz.to_dot(self, **options)

    def _repr_svg_(self):
        from .. import viz                   # notebook display; None (text) without `dot`
        return viz.svg(self)

    def _tracegrad_drawing(self, color_by=None):
        """What `tracegrad.viz` draws for a compiled function: every cached path."""
        from ..viz.ir import function_drawing
        return function_drawing(self, color_by)

    def __repr__(self):
        return f"<compiled {self.name}: {self._n_paths()} path(s)>"

    def __reduce__(self):
        """Note [Copying compiled objects]: a compiled function is copied or pickled as its
        function and options, never its cache (paths hold locks, generated code and
        references to the objects it traced against). A module-level `@compile def` is
        pickled by name, like the function it replaces; `copy.deepcopy` gives a new compiled
        function of a deep copy of `fn` (the same function, for a plain `def`)."""
        import sys
        mod = sys.modules.get(getattr(self, "__module__", None) or "")
        qualname = getattr(self, "__qualname__", "")
        obj = mod
        for part in qualname.split(".") if mod is not None and qualname else ["<none>"]:
            obj = getattr(obj, part, None)
        if obj is self:
            return qualname
        return (_remake_function, (self.fn, self.options))

    def __deepcopy__(self, memo):
        import copy
        return _remake_function(copy.deepcopy(self.fn, memo), self.options)

    def __get__(self, obj, objtype=None):
        if obj is None:
            return self
        # a bound method like any other (`a.f.__name__`, `a.f.stats`, `a.f.explain()` read
        # through to the compiled function; `a.f.__self__` is `a`)
        return types.MethodType(self, obj)

    def __getattr__(self, name):
        module = self.__dict__.get("module")
        if module is not None:
            return getattr(module, name)
        raise AttributeError(f"'CompiledFunction' object has no attribute {name!r}")


def _remake_function(fn, options):
    """A fresh CompiledFunction (no cached paths) of `fn` (Note [Copying compiled objects])."""
    return CompiledFunction(fn, **options)


def _codes_of(fn):
    """The code object of the function traced (a bound method's, a partial's), as a set."""
    while isinstance(fn, functools.partial):
        fn = fn.func
    code = getattr(getattr(fn, "__func__", fn), "__code__", None)
    return {code} if code is not None else set()


def _arg_names(fn, n):
    import inspect
    try:
        sig = inspect.signature(fn).parameters.values()
    except (TypeError, ValueError):
        return []
    names = []                   # positional leaves first; `*args` elements `args[k]`
    for p in sig:
        if p.kind is p.VAR_POSITIONAL:
            names += [f"{p.name}[{k}]" for k in range(max(n - len(names), 0))]
            break
        if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD):
            names.append(p.name)
    else:
        names = [p.name for p in sig]
    return names if len(names) >= n else names + [f"a{i}" for i in range(len(names), n)]


# Note [Default dtype left changed]
# `tg.set_default_dtype(tg.float64)` inside the function, not undone before it returns,
# leaves the default changed for the caller's later code, as `set_grad_enabled(False)` does
# grad mode (Note [Grad mode left changed] in trace_settle.py). The entry key fixes the
# default a call starts with, and the trace the one it ends with: each cached call of the
# path sets it again after its program (a replayed call).


_FullGraph = fullgraph_class(CompiledFunction)
