"""One compiled control-flow path: the runtime of a finished compilation record.

`CompiledPath(record)` takes a `PathRecord` the pipeline finished (Note [Compilation record]
in record.py) and keeps what a call needs: the programs, the captured tensors and the
checks on them, the output layout and the effects replayed around the program. `resolve()`
checks that a call may take this path; `run()` executes the forward program on the current
input arrays, copies input mutations back (bumping versions as eager in-place ops would),
wraps fresh output tensors and attaches one `CompiledFunctionBackward` node when gradients
can flow. The record stays reachable as `path.record` for introspection (`explain`, dumps,
drawings) and for the differentiable backward (replay.py).
"""
import numpy as np

from .._dispatch import EAGER_WRITES, dispatch
from ..ops.shape import DATA
from .._tensor import Tensor, edge_of
from .backward_node import CompiledFunctionBackward, ConsumedBackward
from .remat_writes import remat_saved
from .replay import replay_backward
from .runner import build_runner
from .speculation import Speculation
from .._effects import attr_now, is_number
from .._errors import RerunEagerly
from ..ir.interpret import GuardFailed
from .._tensor_storage import _root
from .state_guards import checker, first_failing
from .trace_plan import leaf_hooks
from .tensor_places import read as read_place
from .warning_replay import recorded, would_raise


class CompiledPath:
    """A specialization for one entry key and one sequence of guard outcomes."""

    def __init__(self, record):
        self.record = rec = record
        self.name = rec.name
        self.backend = rec.options.backend
        self.n_args = rec.inputs.n_args
        self.captured = list(rec.inputs.captured)
        self.captured_meta = [_meta(t) for t in self.captured]
        # where captured tensors are bound, and the Python state read while tracing: each
        # must still hold on a call (Note [Captured state] in compiler/state.py)
        self.state_guards = rec.state_guards
        self._state_holds = checker(self.state_guards)
        vars(self).update(vars(rec.effects))   # sources, replayed effects, .grad plan
        self.eager_reason = rec.eager_reason
        self.replays = rec.replays
        self.warnings = recorded(rec.replays)   # Note [Warnings replayed]
        self.forward_program = rec.forward_program
        if self.forward_program is not None:  # Note [Errors inside compiled programs]
            self.forward_program.rerun_on_error = True
        self.backward_program = rec.backward_program
        self.part, self.wrt, self.replay = rec.part, rec.wrt, rec.replay
        self.deferred_errors = rec.deferred_errors
        self.guards = list(rec.functional.guards)
        self.outcomes = [gd.expected for gd in self.guards]
        self.consumed = rec.outputs.consumed
        self.out_requires = rec.outputs.requires
        if rec.host_saved is not None:
            self.host_saved = rec.host_saved
        self._layout()
        self.speculation = None             # Note [Speculative backward]
        if getattr(rec, "backend_note", None) == "jax" and self.backward_program is not None:
            from ..backends.jax.speculative import fusable, speculative_program
            if fusable(self):
                self.speculation = Speculation(lambda: speculative_program(self))
        fast = build_runner(self)
        if fast is not None:                # Note [Runner]: straight-line `call` when it can
            self.call = fast

    def _layout(self):
        """Per-call facts fixed at compile time, so `run` and `_attach` stay cheap."""
        rec, part = self.record, self.part
        facts, outs = rec.facts, rec.outputs
        # output k -> (input position, view chain): returned as that input (or a view of it)
        self.alias_out = {k: r for k, r in enumerate(facts.roots) if r is not None}
        # output k is a view of output j (replayed after attaching, so gradients flow), or
        # shares memory with another output in a way eager never would (copied)
        self.copy_out = {k for k, v in enumerate(facts.views) if v == ("copy",)}
        # the same tensor returned twice: output k is output j (eager returns one object)
        first = {}
        self.dup_out = {k: first.setdefault(v, k) for k, v in enumerate(rec.raw.outputs)
                        if first.setdefault(v, k) != k}
        # (a repeat of a view is the view made for its first occurrence, not another one:
        # `v = loss.detach(); return loss, v, v`, or v appended twice to a caller's list)
        self.view_out = {k: v[1:] for k, v in enumerate(facts.views)
                         if v is not None and v[0] == "view" and k not in self.dup_out}
        self.dup_of_view = {k: j for k, j in self.dup_out.items() if j in self.view_out}
        # passes may merge distinct results (cse: `x.clone(), x.clone()`): copy the repeats
        fwd_outs = part.forward.outputs[:part.n_user]
        self.copy_out |= {k for k, v in enumerate(fwd_outs) if v in fwd_outs[:k]
                          and k not in self.dup_out}
        # outputs whose memory backward reads (saved as is, or a view of a saved value): an
        # in-place change to them must fail backward, as eager's version check would
        from ..passes.liveness import liveness
        storage = liveness(part.forward).storage_of
        behind = {storage.get(v) for v in part.forward.outputs[part.n_user:]}
        # and those backward recomputes instead (passes/remat.py): eager saved them, so an
        # in-place change to such an output between forward and backward raises eagerly
        behind |= {storage.get(v) for v in part.recomputed}
        self.checked_out = {k for k, v in enumerate(fwd_outs)
                            if v is not None and storage.get(v) in behind}
        self.remat_saved = remat_saved(part)   # Note [Inputs written before a recomputing
                                               # backward] in remat_writes.py
        # a consumed output's grad_fn leads to the inputs requiring grad it was computed from
        fg, wrt = rec.functional, set(self.wrt)
        self.consumed_leaves = {k: sorted(_inputs_behind(fg, fg.outputs[k]) & wrt)
                                for k in self.consumed}
        self.out_build, self.single = outs.build, outs.single
        self.out_is_tensor, self.out_consts = outs.is_tensor, outs.consts
        ins = rec.functional.inputs
        self.wrt_shapes = tuple(ins[i].type.shape for i in self.wrt)
        self.wrt_dtypes = tuple(ins[i].type.dtype.np for i in self.wrt)
        n_saved_fwd = len(part.saved) - len(part.saved_from_input)
        self._saved_slice = slice(part.n_user, part.n_user + n_saved_fwd)
        self._mut_start = part.n_user + n_saved_fwd
        # fresh outputs the trace made under inference_mode (inside the function too)
        self.inference_out = [k for k, inf in enumerate(outs.inference[:part.n_user])
                              if inf and k not in self.alias_out and k not in self.dup_out]
        # Note [Versions of fresh outputs]
        # Eagerly, a result changed in place before it is returned (`y = x * 2; y.add_(1)`,
        # `z = x.clone(); z[0] = 3`) has a version counter past 0; a compiled call wraps a
        # fresh array, so each such output gets the version the trace saw it return with
        # (the path fixes the in-place ops run, so the count is the same on every call).
        versions = outs.versions[:part.n_user]
        self.out_versions = {k: v for k, v in enumerate(versions)
                             if v and k not in self.alias_out and k not in self.dup_out
                             and k not in self.view_out}
        # outputs needing more than "wrap a fresh tensor": repeats, input aliases, copies
        self._plain_outs = not (self.dup_out or self.alias_out or self.copy_out)
        # input position per wrt input whose gradient the backward program computes
        self._edge_inputs = [i if g is not None else None for i, g in zip(self.wrt, part.grads)]
        self._grad_outs = [k for k, req in enumerate(self.out_requires)
                           if req and k not in self.alias_out and k not in self.dup_out
                           and k not in self.view_out]
        self._generators = None              # rng_states below
        self.eager_saves = True              # set by the trace (Note [Second backward])

    # -- a call: checks, then the run --
    def call(self, args):
        """(outputs, None) when this path may serve the call, else (None, why not)."""
        captured, bad = self.resolve(args)
        if bad is not None:
            return None, bad
        return self.run(args, captured), None

    def _miss(self, args):
        """A generated `call`'s check failed: the generic one says why (Note [Runner])."""
        return CompiledPath.call(self, args)

    # -- checks before running --
    def resolve(self, args=()):
        """(captured tensors for this call, None) when captured tensors and guarded Python
        state still match, else (None, why not)."""
        if self.warnings and would_raise(self.warnings):
            return None, ("a warning the function issues is an error under the warning "
                          "filters now (Note [Warnings replayed])")
        if not (self.captured or self.state_guards or self.attr_guards or self.grad_none
                or self.grad_some or self.hook_checks):
            return self.captured, None
        for r, hooks in self.hook_checks:
            now = leaf_hooks(args[r[1]] if type(r) is tuple else r)
            if len(now) != len(hooks) or any(a is not b for a, b in zip(now, hooks)):
                return None, (f"the gradient hooks of a tensor the function runs backward "
                              f"into changed ({len(hooks)} -> {len(now)} hooks, or others)")
        for r, attr, value in self.attr_guards:
            t = args[r[1]] if type(r) is tuple else r
            if attr_now(t, attr) != value:
                who = "argument " + str(r[1]) if type(r) is tuple else "a tensor"
                return None, (f"{attr} of {who} read by the function changed: {value} -> "
                              f"{attr_now(t, attr)}")
        captured = self.captured
        if self.sources or self.grad_none or self.grad_some or self.scalar_sources \
                or self.place_sources:
            captured, bad = self._read_sources(args)
            if bad is not None:
                return None, bad
        if args and captured and _shares_storage(args, captured):
                return None, "an argument shares memory with a captured tensor"
        if not self._state_holds():
            bad = first_failing(self.state_guards)
            if bad is not None:
                return None, bad.reason()
        for t, m in zip(captured, self.captured_meta):
            if _meta(t) != m:
                return None, f"captured tensor changed: {m} -> {_meta(t)}"
        return captured, None

    def _read_sources(self, args):
        def owner(r):
            return args[r[1]] if type(r) is tuple else r
        for r in self.grad_none:
            if owner(r)._grad is not None:
                return None, "a .grad that was None when traced is set now"
        for r in self.grad_some:
            if owner(r)._grad is None:
                return None, "a .grad the function found set when traced is None now"
        captured = list(self.captured)
        for j, r in self.sources:
            g = owner(r)._grad
            if g is None:
                return None, "a .grad read by the function is None now"
            captured[j] = g
        for j, holder, key in self.place_sources:   # Note [Tensors written to Python state]
            t = read_place(holder, key)
            if t is None:
                return None, f"{key!r} no longer holds a tensor"
            captured[j] = t
        for j, holder, key, index, n, narrow in self.scalar_sources:
            value = holder.get(key) if isinstance(holder, dict) else holder[key]
            if index is not None:
                if type(value) not in (tuple, list) or len(value) != n:   # (a list
                    return None, f"{key!r} is no longer a tuple of {n} ({value!r})"  # too)
                value = value[index]
            if not is_number(value, narrow):
                return None, f"{key!r} is no longer a number ({value!r})"
            captured[j] = Tensor._wrap(np.array(
                value, dtype=np.int64 if narrow == "int" else np.float64))
        return captured, None

    # -- running --
    def run(self, args, captured=None):
        if captured is None:
            captured = self.captured
        inputs = list(args) + captured if captured else list(args)
        flags = [(inputs[p], inputs[p]._rg, inputs[p]._grad_fn) for p, _ in self.pre_effects]
        grads = [(inputs[p], inputs[p]._grad) for p in self.pre_clear_held]
        for pos, flag in self.pre_effects:   # replayed effects (Note [Effects])
            if flag == "detach":             # Note [detach_ of an argument]
                inputs[pos].detach_()
            else:
                inputs[pos].requires_grad_(flag)
        for pos in self.pre_clear:           # zero_grad first: old gradients go before
            inputs[pos]._grad = None         # the program computes new ones
        call = getattr(self.forward_program, "call_tensors", None)   # JAX: aligned inputs
        try:
            res = (call(inputs) if call is not None
                   else self.forward_program(*[t._data for t in inputs]))
        except (RerunEagerly, GuardFailed):  # Note [Errors inside compiled programs]:
            for t, rg, fn in reversed(flags):   # the call starts again from its own state
                t._rg, t._grad_fn = rg, fn
            for t, g in grads:
                t._grad = g
            raise
        part = self.part
        n_user = part.n_user
        if part.mutations:
            for (pos, count), arr in zip(part.mutations, res[self._mut_start:]):
                t = inputs[pos]
                if arr is not t._data:       # the plan may have written it in place already
                    np.copyto(t._data, arr, casting="unsafe")
                t._vc.v += count
        wrap, asarray = Tensor._wrap, np.asarray
        if self._plain_outs:
            outs = [wrap(asarray(a)) for a in res[:n_user]]
        else:
            outs = []
            for k, arr in enumerate(res[:n_user]):
                if k in self.dup_out:
                    outs.append(outs[self.dup_out[k]])
                elif k in self.alias_out:
                    pos, chain = self.alias_out[k]
                    t = inputs[pos]
                    for prim, attrs in chain:    # a real view (shared version counter, _base)
                        t = _view(prim, t, attrs)
                    outs.append(t)
                else:
                    outs.append(wrap(np.array(arr) if k in self.copy_out else asarray(arr)))
        for k in self.inference_out:         # results made under inference_mode are
            outs[k]._inference = True        # inference tensors, as in eager
        for k, v in self.out_versions.items():   # Note [Versions of fresh outputs]
            outs[k]._vc.v = v
        if part.backward is not None:
            keep = self.replay.keep
            self._attach(inputs, outs, res[self._saved_slice],
                         res[len(res) - len(keep):] if keep else ())
        if self.view_out:
            for k, (j, chain) in self.view_out.items():
                t = outs[j]
                for prim, attrs in chain:    # a real view of the returned output j
                    t = _view(prim, t, attrs)
                outs[k] = t
            for k, j in self.dup_of_view.items():
                outs[k] = outs[j]
        for k in self.post_retain:
            if outs[k].requires_grad:
                outs[k].retain_grad()
        for pos in self.retain_inputs:       # `a.retain_grad()` on a non-leaf argument
            if inputs[pos].requires_grad:
                inputs[pos].retain_grad()
        for k, name in self.consumed.items():
            node = ConsumedBackward(None, None, (), (), (), ())
            node.eager_name, node.released = name, True
            node.leaves = [inputs[i] for i in self.consumed_leaves[k]]
            outs[k]._grad_fn, outs[k]._rg = node, True
        for pos, k in self.grad_set_plan:
            inputs[pos]._grad = None if k is None else outs[k]
        for obj, method, a, k in self.replays:  # Python-only calls (`_effects.replayed`)
            method(obj, *a, **k)
        return outs

    def _attach(self, inputs, outs, saved_fwd, kept):
        part = self.part
        edges, needs = [], []
        for i in self._edge_inputs:
            t = None if i is None else inputs[i]
            if t is not None and t._rg:
                edges.append(edge_of(t))
                needs.append(True)
            else:
                edges.append(None)
                needs.append(False)
        node = CompiledFunctionBackward(None, None, tuple(edges), self.wrt_shapes,
                                        self.wrt_dtypes, tuple(needs), n_outputs=len(outs))
        node.path = self
        checks = []
        if part.saved_from_input:
            it = iter(saved_fwd)
            saved = []
            for k in range(len(part.saved)):
                if k in part.saved_from_input:
                    t = inputs[part.saved_from_input[k]]
                    saved.append(t._data)
                    checks.append((t._vc, t._vc.v, t._data))
                else:
                    saved.append(next(it))
        else:
            saved = saved_fwd
        node.saved_arrays = saved
        if self.remat_saved:             # Note [Inputs written before a recomputing backward]
            node.written_at = EAGER_WRITES[0]
        node.kept_arrays = [np.asarray(a) for a in kept] if kept else []
        node.inputs = inputs
        node.out_meta = [(o._data.shape, o._data.dtype) for o in outs]
        checked = self.checked_out
        for k in self._grad_outs:
            o = outs[k]
            o._grad_fn = node
            o._output_nr = k
            o._rg = True
            # (version counter, version, data), never the tensor: the output holds this
            # node as its grad_fn, and a reference back would make a cycle per call
            if k in checked:
                checks.append((o._vc, o._vc.v, o._data))
        node.checks = checks
        node.stash = None
        return node

    def unreached(self, grads):
        """Note [Gradients of outputs not reached]
        Eager backward from some outputs of a function leaves `.grad` None on an input
        that only the other outputs are differentiably computed from: no graph path leads
        there. The compiled backward is one program over all outputs, fed zeros for the
        outputs without a gradient, so it computes zeros for such an input. This gives the
        positions (in `wrt` order, the backward program's results) that no output with a
        gradient in `grads` reaches, which the node returns as None, as eager does. The
        per-output reach is computed on the first backward that needs it."""
        reach = self.__dict__.get("_reach")
        if reach is None:
            fg, pos = self.record.functional, {w: j for j, w in enumerate(self.wrt)}
            reach = self._reach = {
                k: {pos[i] for i in _inputs_behind(fg, fg.outputs[k]) if i in pos}
                for k in self.part.cotangent_outputs}
        hit = set()
        for k, r in reach.items():
            if grads[k] is not None:
                hit |= r
        return [j for j in range(len(self.wrt)) if j not in hit]

    def eager_backward(self, node, grads):
        """Differentiable backward of one call (Note [Differentiable backward], replay.py)."""
        return replay_backward(self, node.inputs, grads, node.saved_arrays, node.kept_arrays)

    def rebuild_outputs(self, outs):
        if self.single:
            return outs[0]
        it = iter(outs)
        return self.out_build([next(it) if is_t else c
                               for is_t, c in zip(self.out_is_tensor, self.out_consts)])

    # -- introspection: what `.programs` entries show (compiler/explain.py) --
    @property
    def raw(self):
        """The traced IR Graph, before any pass."""
        return self.record.raw

    @property
    def functional(self):
        """The functional forward IR Graph, after the user's passes (before differentiation)."""
        return self.record.functional

    @property
    def stages(self):
        """[(stage, IR Graph after it)]: the graphs the pipeline made, in order."""
        return self.record.stages

    @property
    def log(self):
        """[(stage, stats)]: what each pipeline stage reported (compiler/pipeline.py)."""
        return self.record.log

    @property
    def forward_plan(self):
        return self.record.forward_plan

    @property
    def backward_plan(self):
        return self.record.backward_plan

    @property
    def backend_note(self):
        return self.record.backend_note

    @property
    def forward(self):
        """The forward program's IR Graph, after every pass."""
        return self.part.forward

    @property
    def backward(self):
        """The backward program's IR Graph (None when no gradient can flow)."""
        return self.part.backward

    @property
    def code(self):
        """Generated source of the forward and backward programs, clearly separated."""
        from .explain import path_code
        return path_code(self)

    @property
    def memory(self):
        """A `MemoryStats`: naive, saved and input bytes (plus plan figures when planned)."""
        from .explain import memory_stats
        return memory_stats(self)

    def _repr_svg_(self):
        from .. import viz                   # notebook display; None (text) without `dot`
        return viz.svg(self)

    def _tracegrad_drawing(self, color_by=None):
        """What `tracegrad.viz` draws for a path (viz knows drawings, not the compiler)."""
        from ..viz.ir import path_drawing
        return path_drawing(self, color_by)


def _inputs_behind(g, v):
    """Positions of `g`'s inputs that value `v` is differentiably computed from (not through
    a primitive without a gradient; through `nograd_write`, only the value it keeps)."""
    from ..ops.shape import NOGRAD_WRITE
    prod = g.producers()
    pos = {x: i for i, x in enumerate(g.inputs)}
    seen, stack, out = set(), [v], set()
    while stack:
        x = stack.pop()
        if x in seen:
            continue
        seen.add(x)
        if x in pos:
            out.add(pos[x])
            continue
        n = prod.get(x)
        if n is None or n.prim.nondiff:
            continue
        stack.extend(n.value_inputs()[:1] if n.prim is NOGRAD_WRITE else n.value_inputs())
    return out


def _shares_storage(args, captured):
    """Whether an argument shares memory with a captured tensor (by root array: `.data`
    and views have version counters of their own)."""
    roots = {id(_root(t._data)) for t in captured}
    return any(id(_root(t._data)) in roots for t in args)


def _meta(t):
    d = t._data                  # (in_c_order and requires_grad, inlined: checked per call)
    return (d.shape, d.dtype, t._rg, d.ndim < 2 or d.flags.c_contiguous)


def _view(prim, t, attrs):
    """Output view `prim(t)` made again after a call, as eager made it: `.data` shares the
    memory but not the version counter (`_get_data` in _tensor_methods.py)."""
    v = dispatch(prim, (t,), attrs)
    if prim is DATA:
        v._vc = type(t._vc)()
    return v


def rng_states(path):
    """Snapshot of the generators the path's random draws use (empty for most paths): a
    guard failing after a draw must not advance them, or eager's sequence is lost."""
    gens = path._generators
    if not gens:
        if gens is not None:
            return ()
        from ..ops.generator import Generator
        found = {id(a): a for n in path.part.forward.nodes if n.prim.impure
                 for a in n.inputs if isinstance(a, Generator)}
        gens = path._generators = list(found.values())
    return [(g, g._rng, g._rng.bit_generator.state, g._seed) for g in gens]


def rewind(rng):
    """Put the generators back as `rng_states` found them."""
    for gen, r, state, seed in rng:
        gen._rng, gen._seed = r, seed
        r.bit_generator.state = state


def prefix_eq(outcomes, prefix):
    from ..ir.interpret import same_outcome
    if len(outcomes) < len(prefix):
        return False
    return all(same_outcome(a, b) for a, b in zip(outcomes, prefix))
