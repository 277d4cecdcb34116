"""`JaxProgram`: one lowered graph, jit-compiled once, with the numpy Program's interface.

`program(*input_arrays) -> list of output arrays` (numpy arrays; None stays None), or
`program.call_tensors(input_tensors)`, the same for the tensors' arrays after moving large
captured ones to memory XLA reads in place (Note [Aligned host arrays] in aligned.py), and
giving a mutated input the memory of its new value where it can (Note [Adopted results] in
adopt.py); None when the program has neither. A call draws the graph's random numbers on
the host (Note [Host draws] in lower.py), runs the compiled XLA executable on the calling
thread (Note [Synchronous client] in client.py) under 64-bit mode when the graph has 64-bit
values (only for the duration of the call: `jax.enable_x64`, never the global flag), walks
guards and runtime checks (Note [Guards in a jitted program]), and converts the results:
the first `writable` outputs (what users receive, gradients) become fresh writable numpy
arrays (large ones without a copy: adopt.py; small ones of a program that is not plain
copied out of one buffer, with the small new values of mutated inputs as read-only views:
Note [Small results in one buffer] in result_buffer.py); the rest (saved values, large input
mutations, values kept for double backward) stay jax arrays: the backward program takes saved values
as they are, without a round trip through the host (which costs tens of microseconds per
array), and the compiler's other readers (`np.copyto` of a mutation, `np.asarray` of a kept
value) accept them.

A runtime check that fails (division of integers by zero, an index out of range) means the
XLA result is not eager's: the generators are rewound and that call runs the numpy program
built from the same graph, which raises eager's error.

`data_parallel=True` shards dimension 0 of every tensor argument (role "arg") divisible by
the device count over a one-axis `Mesh` of `jax.devices()`, and replicates everything else
(captured tensors: parameters, buffers); XLA's partitioner inserts the collectives (the
gradient all-reduce of a training step).
"""
import contextlib
import time

import jax
import jax.numpy as jnp
import numpy as np
from jax.sharding import SingleDeviceSharding

from ...ir.interpret import GuardFailed
from ...tracing.forward_memo import MEMO, next_attempt
from .adopt import MIN_BYTES as ADOPT_BYTES
from .adopt import adopt, replaceable, static_big, taken, to_host
from .aligned import move_to_aligned
from .client import device
from .lower import guard_holds, lower
from .result_buffer import SmallResults, layout, pack, unpacker
from .small_inputs import SmallInputs, small_positions
from .status import with_status


try:                                     # the x64 mode in effect (context or global flag)
    from jax._src.config import enable_x64 as _X64_STATE
    _X64_STATE.value
except Exception:                        # (a private name: another JAX may lack it)
    _X64_STATE = None
_SAME = contextlib.nullcontext()


def _x64(on):
    """`jax.enable_x64(on)`, or nothing when that mode is already in effect: entering the
    context costs about 1.5 us, a tenth of a small program's call."""
    if _X64_STATE is not None and _X64_STATE.value == on:
        return _SAME
    return jax.enable_x64(on)


class JaxProgram:
    """An executable graph on XLA (see module docstring)."""

    quiet = False
    rerun_on_error = False       # Note [Errors inside compiled programs] in codegen.py
    fn_is_call = True            # `fn` is `__call__`, or a faster equal (Note [Plain calls])

    def __init__(self, graph, name=None, writable=None, data_parallel=False, pack_out=None,
                 pack_in=None, follow_inputs=False, mutated=()):
        self.graph = graph
        self.device = None               # (single-device programs: below)
        self.name = name or graph.name
        self.lowered = lower(graph)              # raises Unsupported: caller falls back
        self.writable = len(graph.outputs) if writable is None else writable
        self.data_parallel = data_parallel
        self.pack_out, self.pack_in = pack_out, pack_in    # Note [Packed saved values]
        self._numpy = None
        self.filename = f"<tracegrad-jax-{self.name}>"
        self._line_sites = {}
        fn = self._packing_fn()
        specs, shardings = self._specs()
        cpu = jax.default_backend() == "cpu"
        # results handed over without a copy (adopt.py): single-device programs on the CPU
        self._adopt = cpu and shardings is None and not follow_inputs
        packed = [k for k, (t, _) in enumerate(getattr(self, "_out_slots", ())) if t != 0]
        self._bigs = (None if any(k < self.writable for k in packed) else
                      [static_big(v) for v in graph.outputs[:self.writable]])
        fn = self._one_buffer(fn, self.writable)     # Note [One result buffer]
        fn = self._small_buffer(fn, [k for _, k in mutated])
        fn = with_status(fn, graph.guards)           # Note [One status transfer]
        if shardings is not None:
            jitted = jax.jit(fn, in_shardings=shardings)
        elif follow_inputs:                      # see below
            jitted = jax.jit(fn)
        else:                                    # Note [Synchronous client] in client.py
            self.device = device()
            one = SingleDeviceSharding(self.device)
            jitted = jax.jit(fn, in_shardings=one, out_shardings=one)
        t0 = time.perf_counter()
        with jax.enable_x64(self.lowered.x64):
            traced = jitted.trace(*specs)
            self.jaxpr = traced.jaxpr
            t1 = time.perf_counter()
            self.executable = traced.lower().compile()
        self.trace_seconds = t1 - t0
        self.compile_seconds = time.perf_counter() - t1
        # `follow_inputs`: the inputs' shardings are XLA's choice (saved values of a sharded
        # forward), so calls go through `jax.jit`, which compiles for the shardings it meets
        self._call = jitted if follow_inputs else self.executable
        from .aligned import MIN_BYTES        # arrays worth moving (aligned.py)
        self._movable = [i for i, v in enumerate(graph.inputs)
                         if cpu and v.role in ("captured", "arg")
                         and v.type.dtype.np.itemsize * int(np.prod(v.type.shape)) >= MIN_BYTES]
        self._rebind = [(pos, k) for pos, k in mutated      # (of the input's own type)
                        if self._adopt and graph.outputs[k] is not None
                        and graph.outputs[k].type.nbytes >= ADOPT_BYTES
                        and graph.outputs[k].type.shape == graph.inputs[pos].type.shape
                        and graph.outputs[k].type.dtype == graph.inputs[pos].type.dtype]
        if not self._movable and not self._rebind:   # callers pass arrays: nothing to do
            self.call_tensors = None
        self._alias_candidates()
        self.fn = self._fast() or self.__call__

    def _alias_candidates(self):
        """Note [Results that may be arguments]
        A result jax forwards from an argument has that argument's memory, so it is copied
        rather than adopted (Note [Adopted results] in adopt.py), which is asked per call by
        data address. Only an argument of a result's byte size can be forwarded as that
        result, so only those addresses are read: `_alias_at` (positions in the executable's
        arguments) and `_alias_inputs` (positions in the graph's inputs, for `call_tensors`).
        Reading every argument's address cost about 1 us apiece, twice per call: 20 to 40 us
        of a training step's 18 arguments, where two or four arguments can be results.
        None: every argument (the results' sizes are not known: packed user results)."""
        g = self.graph
        if self._bigs is None:
            self._alias_at = self._alias_inputs = None
            return
        sizes = {v.type.nbytes for v, b in zip(self._user_values(), self._bigs) if b}
        sizes.update(g.outputs[k].type.nbytes for _, k in self._rebind)
        self._alias_at = [i for i, t in enumerate(self._input_types()) if t.nbytes in sizes]
        self._alias_inputs = [i for i, v in enumerate(g.inputs) if v.type.nbytes in sizes]

    def _plain(self):
        """Whether a call is only the executable and numpy copies of the first `writable`
        results (Note [Plain calls]): nothing drawn on the host, packed, called back, guarded
        or checked, no result adopted, every user result present."""
        low, g = self.lowered, self.graph
        return (self.writable > 0 and _X64_STATE is not None and not low.host_nodes
                and not low.opaque and self.pack_in is None and self.pack_out is None
                and not g.guards and low.n_checks == 0 and self._adopt
                and self._bigs is not None and not any(self._bigs)
                and all(v is not None for v in self._user_values()))

    def _user_values(self):
        """The IR values of the first `writable` results."""
        return self.graph.outputs[:self.writable]

    def _one_buffer(self, fn, w):
        """`fn` returning its first `w` results (the user values) in one buffer when the
        program is plain and they fit (Note [One result buffer] in result_buffer.py). The
        choice is made while tracing (whether the program is plain is known once its
        runtime checks were counted), and sets `_unpack` (None: one result per array)."""
        self._unpack = None
        if self.pack_out is not None or self.pack_in is not None:    # (never plain)
            return fn

        def one_buffer(*arrays):
            outs, gv, cv = fn(*arrays)
            lay = layout(self._user_values()) if self._plain() else None
            if lay is None:
                self._unpack = None
                return outs, gv, cv
            self._unpack = unpacker(lay)
            return [pack(outs[:w], lay)] + list(outs[w:]), gv, cv
        return one_buffer

    def _small_buffer(self, fn, mutated):
        """`fn` returning its small user results and small mutated inputs' new values in
        one buffer when the program is not plain (Note [Small results in one buffer] in
        result_buffer.py); decided while tracing, as `_one_buffer`, and sets `_small` (None:
        one result per array)."""
        self._small = None
        if self.pack_out is not None or self.pack_in is not None or not self._adopt:
            return fn
        plan = SmallResults.plan_for(self.graph.outputs, self.writable, mutated, ADOPT_BYTES)
        if plan is None:
            return fn

        def small_buffer(*arrays):
            outs, gv, cv = fn(*arrays)
            if self._unpack is not None or self._plain():
                self._small = None
                return outs, gv, cv
            self._small = plan
            return plan.pack(outs), gv, cv
        return small_buffer

    def _fast(self):
        """Note [Plain calls]
        `__call__` asks per call what the program needs (host draws, packing, a memo for
        callbacks, guards, runtime checks, adopted results) and goes through
        `Compiled.__call__`: on the 200-op chain that is about 5 us beside the executable's
        14. A plain program (`_plain`) gets a closure doing only what it needs: the x64 mode
        (entered when it is not in effect already), small inputs that repeat passed as
        device arrays (Note [Small inputs] in small_inputs.py), the executable's C++ entry
        point (`Compiled._call`, made by its first call), and numpy copies of the first
        `writable` results (copied out of one buffer when they fit: Note [One result
        buffer] in result_buffer.py), the rest passed on as they are. Same results as
        `__call__`, which remains the entry point of everything else."""
        if not self._plain():
            return None
        x64, w, exe = self.lowered.x64, self.writable, self.executable
        state, array, cpp = _X64_STATE, np.array, [None]
        unpack = self._unpack
        small = small_positions(self._input_types())     # Note [Small inputs]
        swap = SmallInputs(small, self.device).swap if small else None

        def fast(*arrays):
            if state.value != x64:               # (rarely: a graph of 64-bit values)
                with jax.enable_x64(x64):
                    return fast(*arrays)
            if swap is not None:
                arrays = swap(list(arrays))
            call = cpp[0]
            if call is None:                     # (its first call makes the C++ entry)
                outs = exe(*arrays)[0]
                cpp[0] = getattr(exe, "_call", None) or exe
            else:
                outs = call(*arrays)[0]
            if unpack is not None:               # Note [One result buffer]
                return unpack(outs[0]) + outs[1:]
            return [array(o) for o in outs[:w]] + outs[w:]
        return fast

    # -- building --
    def _packing_fn(self):
        """`lowered.fn` with small saved values packed on the way out (forward) or unpacked
        on the way in (backward): Note [Packed saved values] in saved.py."""
        low, n_in = self.lowered, len(self.graph.inputs)
        if self.pack_out is not None:
            groups, packed = self.pack_out.groups, self.pack_out.fwd_packed
            n_out = len(self.graph.outputs)
            rest = [i for i in range(n_out) if i not in packed]
            where = {i: (0, j) for j, i in enumerate(rest)}
            where.update({f: (1, gi) for gi, (_, m) in enumerate(groups) for f, *_ in m})
            self._out_slots = [where[i] for i in range(n_out)]

            def fn(*arrays):
                outs, gv, cv = low.fn(*arrays)
                bufs = [jnp.concatenate([outs[f].reshape(-1) for f, *_ in m])
                        for _, m in groups]
                return [outs[i] for i in rest], bufs, gv, cv
            return fn
        if self.pack_in is not None:
            groups, packed = self.pack_in.groups, self.pack_in.bwd_packed
            plain = [i for i in range(n_in) if i not in packed]
            self._in_take = plain + [m[0][1] for _, m in groups]

            def fn(*arrays):
                full = [None] * n_in
                for i, a in zip(plain, arrays):
                    full[i] = a
                bufs = arrays[len(plain):len(plain) + len(groups)]
                for (_, m), buf in zip(groups, bufs):
                    for _, b, shape, off, size in m:
                        full[b] = buf[off:off + size].reshape(shape)
                return low.fn(*full, *arrays[len(plain) + len(groups):])
            return fn
        return low.fn

    def _input_types(self):
        g, low = self.graph, self.lowered
        types = [v.type for v in g.inputs]
        if self.pack_in is not None:
            from ... import _dtype as D
            from ...ir.types import TensorType
            types = [types[i] for i in self._in_take[:len(types) - len(self.pack_in.bwd_packed)]]
            types += [TensorType((sum(x[4] for x in m),), D._FROM_NP[np.dtype(dt)])
                      for dt, m in self.pack_in.groups]
        return types + low.host_types()

    def _specs(self):
        g, low = self.graph, self.lowered
        types = self._input_types()
        shardings = None
        if self.data_parallel:
            from jax.sharding import Mesh, NamedSharding
            from jax.sharding import PartitionSpec as P
            devs = jax.devices()
            mesh = Mesh(np.array(devs), ("batch",))
            roles = [v.role for v in g.inputs] if self.pack_in is None else []
            roles += [None] * (len(types) - len(roles))
            shardings = tuple(
                NamedSharding(mesh, P("batch") if r == "arg" and t.shape
                              and t.shape[0] % len(devs) == 0 else P())
                for r, t in zip(roles, types))
        with jax.enable_x64(low.x64):
            specs = [jax.ShapeDtypeStruct(t.shape, t.dtype.np) for t in types]
        return specs, shardings

    # -- running --
    def call_tensors(self, inputs):
        """`self(*[t._data for t in inputs])`, after moving the large captured tensors'
        arrays to aligned memory where that cannot be observed (aligned.py)."""
        for i in self._movable:
            move_to_aligned(inputs[i])
        swap = [(pos, k) for pos, k in self._rebind if replaceable(inputs[pos])]
        res = self.fn(*[t._data for t in inputs])
        seen = None
        for pos, k in swap:                      # a mutated input takes its new value's
            r, t = res[k], inputs[pos]           # memory (Note [Adopted results]); of its
            if type(r) is np.ndarray:            # type (`_rebind`), unless the call ran
                continue                         # on numpy
            if seen is None:                     # Note [Results that may be arguments]
                at = self._alias_inputs
                seen = taken(t._data for t in inputs) if at is None else \
                    taken([inputs[i]._data for i in at])
            r.block_until_ready()
            p = r.unsafe_buffer_pointer()
            if p not in seen:                    # not an argument passed through
                seen.add(p)
                res[k] = t._data = adopt(r)
        return res

    def __call__(self, *arrays):
        low = self.lowered
        snap = None
        given = arrays
        if low.host_nodes:
            snap = [(g, g._rng, g._rng.bit_generator.state, g._seed) for g in low.generators()]
            arrays = arrays + tuple(low.host_draws())
        if self.pack_in is not None:
            take = self._in_take
            arrays = [arrays[i] for i in take] + list(arrays[len(self.graph.inputs):])
        memo = MEMO.get() if low.opaque else None
        if memo is not None:             # Note [Forwards run once per call] in forward_memo.py:
            low.memo_lock.acquire()      # host callbacks may run on XLA's threads, so they
            low.memo_cell[0] = memo      # find this call's memo here
        try:
            with _x64(low.x64):
                if self.pack_out is not None:
                    rest, bufs, gvals, cvals = self._call(*arrays)
                    outs = [rest[j] if t == 0 else bufs[j] for t, j in self._out_slots]
                else:
                    outs, gvals, cvals = self._call(*arrays)
            if gvals:                            # Note [One status transfer]
                bad, look = np.asarray(cvals).tolist()
                if not look:                     # every guard held
                    gvals = None
            else:
                bad = cvals is not None and bool(cvals)  # (waits for every callback's flag)
        finally:
            if memo is not None:
                low.memo_cell[0] = None
                low.memo_lock.release()
        if bad:
            return self._on_numpy(given, snap)
        if gvals:
            for k, (gd, val) in enumerate(zip(self.graph.guards, gvals)):
                holds, actual = guard_holds(gd, val)
                if not holds:
                    raise GuardFailed(k, actual)
        w = self.writable
        if self._unpack is not None:             # Note [One result buffer]
            return self._unpack(outs[0]) + list(outs[1:])
        if self._small is not None:              # Note [Small results in one buffer]
            outs = self._small.spread(outs)
        user = (to_host(outs[:w], arrays, self._bigs, self._alias_at) if self._adopt
                else [None if o is None else np.array(o) for o in outs[:w]])
        if all(o is None for o in user):     # nothing waited for the results: XLA may still
            jax.block_until_ready(outs)      # be reading arguments in place (aligned.py)
        return user + outs[w:] if w < len(outs) else user

    def _on_numpy(self, arrays, snap):
        for gen, r, state, seed in snap or ():       # the numpy program draws again
            gen._rng, gen._seed = r, seed
            r.bit_generator.state = state
        if self._numpy is None:
            from ...codegen import build
            self._numpy = build(self.graph, self.name + "_numpy")
        # (no memory plan: it writes into no input, so its error reruns the call eagerly,
        # Note [Errors inside compiled programs] in codegen.py, when this is a forward program)
        self._numpy.rerun_on_error = self.rerun_on_error
        arrays = [np.asarray(a) for a in arrays]
        next_attempt()                   # Note [Forwards run once per call] in forward_memo.py
        if self.pack_in is not None:                 # saved values arrive packed
            arrays = self.pack_in.host_saved(0, arrays)
        outs = self._numpy(*arrays)
        if self.pack_out is not None:                # the backward program takes them packed
            for _, m in self.pack_out.groups:
                buf = np.concatenate([np.asarray(outs[f]).reshape(-1) for f, *_ in m])
                for f, *_ in m:
                    outs[f] = buf
        return outs

    def failed(self, e):
        """Errors from XLA are raised as they are (numpy-backend errors come translated)."""
        return e

    @property
    def code(self):
        """The lowered program as jax prints it (`jax.make_jaxpr` text)."""
        return str(self.jaxpr)

    def __repr__(self):
        return f"<JaxProgram {self.name}: {len(self.graph.nodes)} nodes>"
