"""The tracer: runs a function eagerly on real inputs while recording every primitive into
a Graph (raw form: views alias, in-place nodes overwrite; see passes/functionalize.py).

It plugs into the single dispatch point (`_dispatch.trace_hook`). Each recorded node runs the
eager path for its concrete value, so user code behaves exactly as in eager mode (even
autograd inside the traced function works, its VJP ops being recorded too).

Note [Inputs, captures and constants]
- Explicit arguments are registered up front (`add_arg`).
- A tensor the tracer has never seen (a closure variable, a global, a module parameter) is a
  *captured* input, read by reference: the compiled program reads its current data each call.
- Tensors made by creation functions inside the traced function are constants or `full`
  nodes, never captures.
- Python reading a concrete value out of a traced tensor (`bool`, `item`, `float`, `int`,
  `tolist`, `numpy`) records a Guard; data-dependent output shapes record `shape` guards.

Note [Traced values]
The traced call must cost about what the eager call costs in memory, so the tracer owns no
intermediate: the eager program frees what it drops, as it would untraced.
- Tables keyed by `id()` (`env`, `by_data`, `snapshots`, `grad_of`) lose an entry when its
  object dies (a weak reference's callback), so a new object reusing the id is never
  mistaken for it. Only inputs and what the compiler reads after the trace are kept.
- `values` (Value -> array, for the passes) holds floating arrays weakly: a pass finds the
  arrays still alive when it runs (inputs, outputs, the outputs' autograd history), and
  uses a placeholder of the right type for the others; VJP rules never decide anything
  from float data, so types are all they need. Other dtypes (masks, indices: what
  data-dependent shapes and valid indices come from) are kept, and small.
- Before an in-place write, a value sharing the target's memory would silently change:
  a kept (non-float) one is copied, a floating one is forgotten. Nothing copies inputs
  up front or parameters before an optimizer overwrites them.

Note [Backward into the graph outside]
A `backward()` or `autograd.grad()` inside the traced function runs the eager engine, whose
gradient rules are recorded like any op. The nodes the trace itself created stand for the
same computation on every call; a node made before the call (the `grad_fn` of a non-leaf
argument, or of a tensor a closure holds) does not: the next call's argument has another
graph behind it (other saved tensors, other ops, other hooks), yet the trace recorded the
first one's gradient rules, with its saved tensors as constants. So a backward reaching
such a node is an eager effect: those calls run eagerly, with a warning. Nodes are told
apart by their sequence number (autograd/graph.py): `seq0` is taken when the trace starts.
A leaf's AccumulateGrad reached (`leaves_reached`) ran that leaf's gradient hooks, which
the path then checks on every call (compiler/trace_plan.py `_hook_checks`); the hooks are
taken when the leaf is first reached, before they run (`hooks_ran`): Note [Hooks changed
by the call] in compiler/trace_plan.py.
"""
import weakref

import numpy as np

from .. import _dispatch, _mode
from .._dtype import is_float_np
from .._errors import user_site
from .._tensor import Tensor
from .._tensor_storage import _root
from ..autograd.graph import _seq as _autograd_seq
from ..ops.primitive import Primitive
from ..ops.shape import CLONE, DETACH, INDEX, INDEX_PUT, NONZERO
from ..ir.graph import Graph, Guard, Node
from ..ir.types import TensorType
from .flatten import flatten
from .numbers import has_number, replace


def _constant_kernel(value):
    return value.copy()


def _constant_shape(shapes, attrs):
    """The baked-in array's shape (Note [Shape rules] in ops/shape_rules.py)."""
    return np.shape(attrs["value"])


CONSTANT = Primitive("constant", _constant_kernel, shape_rule=_constant_shape)


class Effect:
    """One effect of the traced function (Note [Effects]): `kind`, a readable `message`,
    the user's `site`, whether calls must run eagerly (`eager`), and the tensor concerned."""

    __slots__ = ("kind", "message", "site", "eager", "tensor")

    def __init__(self, kind, message, site, eager, tensor):
        self.kind, self.message, self.site = kind, message, site
        self.eager, self.tensor = eager, tensor

    def describe(self):
        return f"{self.message} at {self.site}" if self.site else self.message


def _hooked(node):
    return bool(node.pre_hooks) and any(node.pre_hooks.values())


def same_number(a, b):
    """Two hyper-parameter values that compute alike (NaN equals NaN)."""
    return a is b or a == b or (a != a and b != b)


class Tracer:
    """Records dispatches into `self.graph`; keeps concrete values for later passes."""

    def __init__(self, name="graph", phase="fwd"):
        self.graph = Graph(name)
        self.grads_before = []   # [(tensor, .grad, copy of its data)] for inputs needing grad
        self.phase = phase
        self.printing = 0        # inside print() (_effects.watch_python): repr is no guard
        self.printed = 0         # tensors formatted inside print() (Note [Prints replayed])
        self.env = {}            # id(tensor) -> Value (latest definition), while it lives
        self.keep = []           # objects the tracer's findings refer to (inputs, effects)
        # Value -> concrete ndarray (Note [Traced values]): floats while alive, others kept
        self.values = weakref.WeakValueDictionary()
        self._kept = {}          # Value -> non-float array (held: Note [Traced values])
        self._watched = {}       # id(object) -> weak reference clearing the id-keyed tables
        self.captured = []       # [(Value, tensor)] implicit inputs
        self.args = []           # [(Value, tensor)] explicit inputs
        self.names = {}          # id(tensor) -> preferred name for captured inputs
        self.site = None         # when set, recorded as every node's site (VJP pass)
        self.by_data = {}        # id(ndarray) -> Value of the node that produced that array
        self.snapshots = {}      # id(copy) -> (Value, node index): see _adopt_snapshot
        self.effects = []        # [Effect] what the function did besides values (Note [Effects])
        self.grad_of = {}        # id(grad tensor) -> owner tensor: `.grad` reads (sources)
        self.grad_none = []      # owner tensors whose `.grad` was read as None
        self.sources = {}        # Value of a captured input -> owner tensor (its `.grad`)
        self.numpy_reads = []    # [(tensor, its Value then, copy of its data)]: `.numpy()`
        self.grad_sets = []      # tensors whose `.grad` the function assigned
        self.grad_some = []      # owners whose `.grad` was read as a tensor (not None)
        self.grad_cleared_first = []  # owners whose `.grad` the trace first set to None
        self.grad_cleared_at = {}  # id(owner) -> (nodes, guards) recorded before that
        self.grad_read_ids = set()  # owners whose `.grad` was read other than by zero_grad
        self.scalar_sources = {}  # Value of a captured 0-d input -> (holder, key, index, len,
        #                           narrow: numpy float32 values allowed, _effects.hyper)
        self.scalar_tensors = {}  # (id(holder), key, index) -> that input's tensor
        self.hyper_first = {}    # (id(holder), key, index) -> (holder, key, index, value first
        #                          read): `hyper_source`, Note [Hyper-parameters written in a call]
        self.numbers = None      # numbers.Numbers: float arguments read per call, if any
        self.placed = ()         # [(holder, key, float, Number)]: Numbers put into places
        self.uncached = None     # why this trace's path must not be kept (the next one will be)
        self.place_writes = None  # (writes, ok, fresh): compiler/place_writes.py
        self.place_sources = {}  # captured Value -> (holder, key): compiler/tensor_places.py
        self.item_numbers = False  # `.item()` of a floating tensor gives a Number (Note
        #                            [Numbers taken from tensors] in numbers.py)
        self.replays = []        # [(obj, method, args, kwargs, attributes it rewrote)]
        self.replaying = 0       # inside a replayed call (`_effects.replayed`)
        self.setting_reads = {}  # (id(holder), key) -> (holder, key, value, where): settings
        #                          read (Note [Settings read and set] in _effects.py)
        self.settings_set = set()  # (id(holder), key) of settings the trace set
        self.mode_replays = []   # [(module, Module.train, (mode,), {})]: train()/eval() calls
        self.setting_mode = False
        self.input_ids = set()   # ids of argument and captured tensors
        self.start_versions = {}  # id(input tensor) -> its version when the trace met it
        self.attr_reads = {}     # (id(tensor), attr) -> (tensor, attr, value): see note_attr_read
        self.seq0 = next(_autograd_seq)  # autograd nodes numbered below: made before the trace
        self.leaves_reached = []  # leaves a backward() inside reached (their hooks ran)
        self.hooks_ran = {}       # id(leaf) -> its gradient hooks when first reached

    # -- inputs --
    def add_arg(self, t, name=None, role="arg"):
        v = self.graph.add_input(TensorType.of(t._data), name, role)
        if t._rg:
            g = t._grad
            self.grads_before.append((t, g, None if g is None else g._data.copy()))
        self._bind(t, v)
        self.keep.append(t)
        (self.captured if role == "captured" else self.args).append((v, t))
        self.input_ids.add(id(t))
        self.start_versions[id(t)] = t._vc.v
        owner = self.grad_of.get(id(t)) if role == "captured" else None
        if owner is not None:
            self.sources[v] = owner
        return v

    # -- effects (Note [Effects] in _effects.py) --
    def note_backward_node(self, node, applying):
        """A backward() or autograd.grad() inside the trace reaches `node` (`applying`: and
        runs its gradient rule; before that, its hooks) (Note [Backward into the graph
        outside])."""
        if node.seq < 0:                     # a leaf's AccumulateGrad: its hooks ran
            var = node.variable
            if var is not None and all(var is not t for t in self.leaves_reached):
                self.leaves_reached.append(var)
                self.keep.append(var)
                # Note [Hooks changed by the call] in compiler/trace_plan.py
                self.hooks_ran[id(var)] = tuple(var.__dict__.get("_leaf_hooks") or ())
        elif node.seq < self.seq0 and (applying or _hooked(node)) and not any(
                e.kind == "outside graph" for e in self.effects):
            what = "backward through" if applying else "the gradient hooks of"
            self.note_effect("outside graph", f"{what} {node.name()}, an autograd node of a "
                             "tensor computed before the call (its graph outside the "
                             "function)")

    def note_effect(self, kind, message, tensor=None, eager=True, site=None):
        self.effects.append(Effect(kind, message, site or user_site(), eager, tensor))
        if tensor is not None:
            self.keep.append(tensor)

    def unread_argument(self, t):
        """Whether `t` is an explicit argument of the trace that no recorded node has read
        yet (its `detach_()` then equals one before the program: Note [detach_ of an
        argument] in compiler/trace_plan.py)."""
        v = self.env.get(id(t))
        if v is None or not any(a is t for _, a in self.args):
            return False
        return not any(v in n.value_inputs() for n in self.graph.nodes)

    def check_numpy_writes(self):
        """Report writes made through arrays `x.numpy()` returned (a Python-level write
        the IR never saw: the tensor's data changed while its recorded value did not)."""
        for t, v, before in self.numpy_reads:
            if self.env.get(id(t)) is v and not np.array_equal(t._data, before, equal_nan=True):
                self.note_effect("numpy", "a write through the array x.numpy() returned", t,
                                 site=None)

    def scalar_source(self, holder, key, value, index=None, narrow=False, name=None):
        """A Python number read per call from `holder[key]` (or item `index` of the tuple
        there, whose length is then checked too), as a captured 0-d tensor: float64, or
        int64 where `narrow` is "int" (an int argument read per call: Note [Integers read
        per call] in integers.py)."""
        t = self.scalar_tensors.get((id(holder), key, index))
        if t is None:
            t = self.scalar_tensors[(id(holder), key, index)] = Tensor._wrap(
                np.array(value, dtype=np.int64 if narrow == "int" else np.float64))
            name = name or (str(key) if index is None else f"{key}{index}")
            v = self.add_arg(t, name, role="captured")
            n = None if index is None else len(holder[key])
            self.scalar_sources[v] = (holder, key, index, n, narrow)
        return t

    def hyper_source(self, holder, key, value, index=None, narrow=False):
        """`scalar_source` for an optimizer's hyper-parameter (`_effects.hyper`). A place read
        again after the call changed it (a scheduler stepped between two `opt.step()`s) is
        not one runtime value: the call computes with the value it holds now, and calls like
        it run eagerly (Note [Hyper-parameters written in a call] in compiler/hyper_order.py)."""
        k = (id(holder), key, index)
        first = self.hyper_first.get(k)
        if first is None:
            self.hyper_first[k] = (holder, key, index, value)
        elif not same_number(first[3], value):
            self.note_effect("hyper", f"the hyper-parameter {key!r} changed from {first[3]!r} "
                             f"to {value!r} between two reads in one call (a scheduler's or "
                             "the code's change between two optimizer steps)")
            return value
        return self.scalar_source(holder, key, value, index, narrow)

    def scalar_places(self):
        return [(h, k) for h, k, *_ in self.scalar_sources.values()]

    def note_replay(self, obj, method, args, kwargs, changed=()):
        """A Python-only call replayed after each compiled call (`_effects.replayed`) and
        the attributes of `obj` it rewrote (Note [Reads of replayed state])."""
        self.replays.append((obj, method, args, kwargs, frozenset(changed)))

    def note_attr_read(self, t, attr, value):
        """Guard an attribute Python read from a tensor from outside the trace (its value
        decided something: a branch on `w.requires_grad`, `type(x.grad_fn)`, ...)."""
        if id(t) in self.env and id(t) not in self.input_ids:
            return                           # made by the trace: the same on every call
        if attr == "_version":               # checked before a call: the version then
            value = self.start_versions.get(id(t), value)
        key = (id(t), attr)
        if key not in self.attr_reads:
            self.attr_reads[key] = (t, attr, value)
            self.keep.append(t)

    def note_layout_read(self, root):
        """The layout of the memory owned by numpy array `root` decided something (an
        in-place op's overlap check): guard the strides of the inputs on it that the entry
        key leaves open (it keys C-contiguity only)."""
        from .._tensor_storage import _root
        for _, t in self.args + self.captured:
            d = t._data
            if d.ndim > 1 and not d.flags.c_contiguous and _root(d) is root:
                self.note_attr_read(t, "stride", tuple(s // d.itemsize for s in d.strides))

    def note_grad_set(self, owner, old=None):
        """`owner.grad` was assigned (it was `old`). A first assignment of None to a `.grad`
        whose value the trace never used can happen before the program runs (zero_grad:
        the old gradients are freed before the step computes new ones, as eagerly)."""
        if all(o is not owner for o in self.grad_sets):
            self.grad_sets.append(owner)
            self.keep.append(owner)
            if owner._grad is None and (old is None or id(old) not in self.env):
                self.grad_cleared_first.append(owner)
                self.grad_cleared_at[id(owner)] = (len(self.graph.nodes),
                                                   len(self.graph.guards))

    def grad_results(self):
        """[(owner, final .grad)] for every `.grad` the function assigned (Note [Effects])."""
        return [(o, o._grad) for o in self.grad_sets]

    def note_grad_read(self, owner, g, clearing=False):
        """`owner.grad` read while tracing: a captured `.grad` is re-read per call.
        `clearing`: read by zero_grad only to set it to None (Note [Clearing before the
        program] in compiler/trace_plan.py)."""
        if any(o is owner for o in self.grad_sets):
            return                           # the function set it: traced state, no source
        self.keep.append(owner)
        if not clearing:
            self.grad_read_ids.add(id(owner))
        if g is None:
            self.grad_none.append(owner)
            return
        if all(o is not owner for o in self.grad_some):
            self.grad_some.append(owner)     # Python saw a gradient: it must be there
        if id(g) not in self.env:
            self.grad_of[id(g)] = owner      # (not kept: zero_grad frees it, as eagerly)
            self._watch(g)

    def _bind(self, t, v):
        self.env[id(t)] = v
        self._watch(t)
        self.set_value(v, t._data)

    def set_value(self, v, arr):
        """Record `v`'s concrete array (Note [Traced values])."""
        arr = np.asarray(arr)
        if arr.dtype.kind not in "fc":
            self._kept[v] = arr
        self.values[v] = arr

    def _watch(self, obj):
        """Forget `obj`'s id in the id-keyed tables once it dies (Note [Traced values])."""
        k = id(obj)
        if k in self._watched:
            return
        tables = (self.env, self.by_data, self.snapshots, self.grad_of)
        watched = self._watched

        def forget(ref):
            if watched.get(k) is ref:
                del watched[k]
                for table in tables:
                    table.pop(k, None)
        try:
            self._watched[k] = weakref.ref(obj, forget)
        except TypeError:                    # no weak reference to it: kept, id stays unique
            self.keep.append(obj)

    def live_tensors(self):
        """The tensors the trace met that are still alive."""
        found = (r() for r in list(self._watched.values()))
        return [t for t in found if isinstance(t, Tensor)]

    def value_of(self, t):
        v = self.env.get(id(t))
        if v is None:
            v = self._rewrapped(t)
        if v is None:
            v = self.add_arg(t, self.names.get(id(t)), role="captured")
        return v

    def _rewrapped(self, t):
        """A new Tensor object over data the trace already knows, not a capture.

        Eager autograd re-wraps what it saved: a node's saved output is kept as its bare
        array and wrapped afresh when the VJP runs, and an in-place op saves a copy of the
        overwritten operand. Under `autograd.grad` inside a traced function those tensors
        must read the traced values, never be baked in as captured constants."""
        v = self.by_data.get(id(t._data))
        if v is None:
            snap = self.snapshots.pop(id(t), None)
            if snap is None:
                return None
            pre, idx = snap
            v = self.graph.new_value(pre.type)
            self.graph.nodes.insert(idx, Node(CLONE, (pre,), {}, v, self.graph.nodes[idx].site,
                                              self.phase))
            for gd in self.graph.guards:
                if gd.position > idx:
                    gd.position += 1
            for k, (p, i) in self.snapshots.items():
                if i >= idx:
                    self.snapshots[k] = (p, i + 1)
            self.set_value(v, t._data)
        self.env[id(t)] = v
        self._watch(t)
        return v

    def constant(self, t):
        """A tensor created from data inside the traced function."""
        owner = self._memory_owner(t._data)
        if owner is not None:                # Note [Tensors over a traced tensor's memory]
            self.note_effect("numpy", "a tensor made over the memory of another tensor "
                             "(torch.from_numpy(x.numpy()), as_tensor of such an array), "
                             "which the compiled program would copy", owner)
        v = self.graph.add_node(CONSTANT, (), {"value": t._data.copy()},
                                TensorType.of(t._data), self.site or user_site(), self.phase)
        self._bind(t, v)
        self.by_data[id(t._data)] = v        # the same array wrapped again is this constant
        self._watch(t._data)

    def _memory_owner(self, arr):
        """The argument, captured tensor or tensor read with `.numpy()` whose memory `arr`
        lies in, or None.

        Note [Tensors over a traced tensor's memory]
        `y = torch.from_numpy(x.numpy())` aliases `x` eagerly: an in-place op on `x` later
        in the function (or the caller's, after it returns) shows in `y`. The trace records
        `y` as a constant holding the values it had then, guarded by `x`'s values, so a
        cached call would return and compute with a copy. Such calls run eagerly."""
        root = _root(arr)
        for _, o in self.args + self.captured:
            if _root(o._data) is root:
                return o
        for o, _, _ in self.numpy_reads:
            if _root(o._data) is root:
                return o
        return None

    # -- the dispatch hook --
    def record(self, prim, args, attrs):
        if self.numbers is not None and has_number(args, attrs):
            args, attrs = replace(prim, args, attrs)   # Note [Numbers read per call]
        func = prim.functional or prim
        rule = func.dtype_rule
        want = rule(args) if rule is not None else None
        ins, arrays = [], []                 # operands, and their arrays (cast) or literals
        for a in args:
            if isinstance(a, Tensor):
                v, arr = self.value_of(a), a._data
                if want is not None and arr.dtype != want:
                    v, arr = self._cast(v, arr, want)
                ins.append(v)
                arrays.append(arr)
            elif want is not None and isinstance(a, np.ndarray) and a.dtype != want:
                # a numpy operand: eager casts it to the op's dtype before the kernel
                # (`_dispatch._cast`), so the program must too, or numpy would promote
                v, arr = self._cast(a, a, want)
                ins.append(v)
                arrays.append(arr)
            else:
                ins.append(a)
                arrays.append(a)
        if func is INDEX_PUT:
            self._guard_mask_counts(args[2:])
        if prim.overwrites and ins[0] is not self.env.get(id(args[0])):
            return self._record_widening_inplace(prim, args, attrs, ins, arrays)
        if prim.overwrites:
            self._before_write(args[0])
            out = _dispatch.run_inplace(prim, args, attrs)
            self._adopt_snapshot(out, ins[0])
        else:
            out = _dispatch.run(prim, args, attrs)
        v = self.graph.add_node(prim, ins, attrs, TensorType.of(out._data),
                                self.site or user_site(), self.phase)
        if prim.overwrites and not _mode.is_grad_enabled():
            self.graph.nograd_writes.add(v)
        elif (not _mode.is_grad_enabled() and self.phase == "fwd" and not prim.nondiff
              and is_float_np(out._data.dtype)
              and any(isinstance(a, Tensor) and a.requires_grad for a in args)):
            # computed under no_grad: the result has no history, so gradients stop here
            self.set_value(v, out._data)
            v = self.graph.add_node(DETACH, (v,), {}, TensorType.of(out._data),
                                    self.site or user_site(), self.phase)
        self._bind(out, v)
        self.by_data[id(out._data)] = v
        self._watch(out._data)
        if (prim is NONZERO or prim is INDEX) and (prim is NONZERO or any(
                isinstance(a, Tensor) and a._data.dtype == np.bool_ for a in args[1:])):
            self._guard(v, "shape", tuple(out._data.shape))
        return out

    def record_result(self, prim, args, attrs, out):
        """Record a node of `prim` whose result `out` was computed outside dispatch (a custom
        Function's forward, Note [Opaque Functions]), and give `out` its eager grad_fn."""
        if self.numbers is not None and has_number(args, attrs):
            args, attrs = replace(prim, args, attrs)
        ins = [self.value_of(a) if isinstance(a, Tensor) else a for a in args]
        needs = tuple(isinstance(a, Tensor) and a.requires_grad for a in args)
        if _mode.is_grad_enabled() and any(needs):
            _dispatch.record(prim, tuple(args), attrs, out, needs)
        v = self.graph.add_node(prim, ins, attrs, TensorType.of(out._data),
                                self.site or user_site(), self.phase)
        self._bind(out, v)
        self.by_data[id(out._data)] = v
        self._watch(out._data)
        return out

    def _guard_mask_counts(self, index_tensors):
        """`x[mask] = v`: how many elements a mask selects decides how `v` broadcasts and the
        shapes of the backward program, so it is guarded like `x[mask]`'s result shape."""
        for m in index_tensors:
            if isinstance(m, Tensor) and m._data.dtype == np.bool_:
                arr = NONZERO.kernel(m._data)
                v = self.graph.add_node(NONZERO, (self.value_of(m),), {}, TensorType.of(arr),
                                        self.site or user_site(), self.phase)
                self.set_value(v, arr)
                self._guard(v, "shape", tuple(arr.shape))

    def _adopt_snapshot(self, target, pre):
        """Remember the copy eager autograd saved of `target` before an in-place write.

        Only if a VJP later reads it (autograd inside the traced function) does it become a
        `clone(pre)` node, inserted just before the in-place node (see `_rewrapped`)."""
        node = target._grad_fn
        base = target._base
        if base is not None:                 # the write was recorded on the base
            scatter = base._grad_fn
            edges = getattr(scatter, "edges", ())
            node = edges[1][0] if len(edges) > 1 and edges[1] is not None else None
        saved = getattr(node, "saved", None)
        if saved and isinstance(saved[0], Tensor) and id(saved[0]) not in self.env \
                and id(saved[0]) not in self.snapshots:
            self._watch(saved[0])            # eager's autograd owns the copy, not the trace
            self.snapshots[id(saved[0])] = (pre, len(self.graph.nodes))

    def _record_widening_inplace(self, prim, args, attrs, ins, arrays):
        """`x.add_(y)` with `y` wider than `x`: eager computes in the wider dtype and casts the
        result back into `x`. Record exactly that (the functional op on the cast operands,
        then `copy_` into `x`), so the overwritten operand is `x` itself, not a cast of it."""
        from ..ops.shape import COPY_
        target = args[0]
        pre = self.env[id(target)]
        site = self.site or user_site()
        res = np.asarray(prim.functional.kernel(*arrays, **attrs))
        r = self.graph.add_node(prim.functional, ins, attrs, TensorType.of(res), site, self.phase)
        self.set_value(r, res)
        self._before_write(target)
        out = _dispatch.run_inplace(prim, args, attrs)
        self._adopt_snapshot(out, pre)
        v = self.graph.add_node(COPY_, (pre, r), {"key": (Ellipsis,)}, TensorType.of(out._data),
                                site, self.phase)
        if not _mode.is_grad_enabled():
            self.graph.nograd_writes.add(v)
        self._bind(out, v)
        self.by_data[id(out._data)] = v
        self._watch(out._data)
        return out

    def _cast(self, v, arr, want):
        from ..ops.shape import TO_COPY
        arr = arr.astype(want)
        cv = self.graph.add_node(TO_COPY, (v,), {"dtype": np.dtype(want)}, TensorType.of(arr),
                                 self.site or user_site(), self.phase)
        self.set_value(cv, arr)
        return cv, arr

    def _before_write(self, target):
        """Before an in-place write, recorded values sharing the target's memory would change
        under the passes: kept ones are copied, floating ones forgotten (Note [Traced
        values])."""
        mem = target._data
        for v, arr in list(self.values.items()):
            if np.may_share_memory(arr, mem):
                if v in self._kept:
                    self._kept[v] = arr = arr.copy()
                    self.values[v] = arr
                else:
                    del self.values[v]

    def grad_writes(self):
        """Inputs whose `.grad` the traced function changed (`backward()` inside it): a
        Python-level side effect no compiled program replays."""
        out = []
        for t, g, data in self.grads_before:
            now = t._grad
            if now is not g or (g is not None and not np.array_equal(g._data, data)):
                out.append(t)
        return out

    def new_leaves(self, outputs):
        """Tensors created inside the traced function as leaves that require grad (e.g.
        `tg.zeros(3, requires_grad=True)`) and that the outputs expose: returned, or reached
        by the outputs' autograd graphs. Eager fills their `.grad`; programs cannot."""
        given = {id(t) for _, t in self.args} | {id(t) for _, t in self.captured}
        leaves = {id(t) for t in self.live_tensors() if t._rg
                  and t._grad_fn is None and t._base is None and id(t) not in given}
        if not leaves:
            return []
        found = [o for o in outputs if id(o) in leaves]
        stack = [o._grad_fn for o in outputs if isinstance(o, Tensor) and o._grad_fn]
        seen = set()
        while stack:
            node = stack.pop()
            if id(node) in seen:
                continue
            seen.add(id(node))
            ref = getattr(node, "_var", None)         # AccumulateGrad of a leaf (weakly)
            var = ref() if ref is not None else None
            if var is not None and id(var) in leaves:
                found.append(var)
            stack.extend(e[0] for e in (getattr(node, "edges", None) or ())
                         if e is not None and e[0] is not None)
        return found

    # -- guards --
    def observe(self, t, kind, result):
        v = self.value_of(t)
        if kind == "numpy":
            result = np.array(result, copy=True)
        elif kind in ("int", "float"):       # `int(t)` observes the raw item: normalize
            result = int(result) if kind == "int" else float(result)
        self._guard(v, kind, result)

    def item_number(self, t, value):
        """What `t.item()` returns while `item_numbers` is on: for a floating tensor, a
        `Number` holding `value` whose traced value is a float64 copy of `t` (exact: every
        floating dtype widens to float64 without rounding); for an integer tensor (not
        uint64), an `Integer` over an int64 copy (Note [Integers read per call] in
        integers.py); otherwise (a bool) `value`, guarded as `observe` guards it (Note
        [Numbers taken from tensors] in numbers.py)."""
        from .numbers import Numbers
        if type(value) is int and t._data.dtype.kind in "iu" and t._data.dtype.itemsize < 8 \
                or t._data.dtype == np.int64:    # Note [Integers read per call]
            if self.numbers is None:
                self.numbers = Numbers(self)
            src = t.detach()
            src = src.clone() if src._data.dtype == np.int64 else src.long()
            info = np.iinfo(t._data.dtype)
            return self.numbers.taken_int(src, value, max(-int(info.min), int(info.max)))
        if type(value) is not float or not is_float_np(t._data.dtype):
            self.observe(t, "item", value)
            return value
        if self.numbers is None:
            self.numbers = Numbers(self)
        src = t.detach()                 # a copy: a later in-place write to `t` must
        src = src.clone() if src._data.dtype == np.float64 else src.double()   # not reach it
        return self.numbers.taken(src, value)

    def _guard(self, v, kind, expected):
        self.graph.guards.append(Guard(v, kind, expected, user_site(), len(self.graph.nodes)))

    # -- running --
    def __enter__(self):
        self._token = _dispatch.trace_hook.set(self.record)
        return self

    def __exit__(self, *exc):
        _dispatch.trace_hook.reset(self._token)
        return False


def trace(fn, *example_args, name=None, **example_kwargs):
    """Run `fn` on the example arguments and return the recorded raw Graph.

    >>> g = tracegrad.trace(lambda x: (x * 2).sum(), tracegrad.ones(3))
    >>> print(g)   # graph <lambda>(%x: f32[3]) -> (%1) { ... }
    """
    import inspect
    tracer = Tracer(name or getattr(fn, "__name__", "graph"))
    try:
        names = list(inspect.signature(fn).parameters)
    except (TypeError, ValueError):
        names = []
    leaves, _ = flatten((example_args, example_kwargs))
    for i, x in enumerate(leaves):
        if isinstance(x, Tensor):
            nm = names[i] if i < len(names) and len(leaves) == len(example_args) else f"a{i}"
            tracer.add_arg(x, nm)
    with tracer:
        out = fn(*example_args, **example_kwargs)
    outs, _ = flatten(out)
    tracer.graph.outputs = [tracer.value_of(o) for o in outs if isinstance(o, Tensor)]
    tracer.graph.tracer = tracer
    tracer.graph.values = tracer.values      # lets passes see data-dependent shapes
    return tracer.graph
