"""`JaxProgram`: one lowered graph, jit-compiled once, with the numpy Program's interface.

`program(*input_arrays) -> list of output arrays` (numpy arrays; None stays None). A call
draws the graph's random numbers on the host (Note [Host draws] in lower.py), runs the
compiled XLA executable under 64-bit mode when the graph has 64-bit values (only for the
duration of the call: `jax.enable_x64`, never the global flag), walks guards and runtime
checks in program order (Note [Guards in a jitted program]), and converts the results:
the first `writable` outputs (what users receive, gradients) become fresh writable numpy
arrays; the rest (saved values, input mutations, values kept for double backward) stay jax
arrays: the backward program takes saved values as they are, without a round trip through
the host (which costs tens of microseconds per array), and the compiler's other readers
(`np.copyto` of a mutation, `np.asarray` of a kept value) accept them.

A runtime check that fails (division of integers by zero, an index out of range) means the
XLA result is not eager's: the generators are rewound and that call runs the numpy program
built from the same graph, which raises eager's error.

`data_parallel=True` shards dimension 0 of every tensor argument (role "arg") divisible by
the device count over a one-axis `Mesh` of `jax.devices()`, and replicates everything else
(captured tensors: parameters, buffers); XLA's partitioner inserts the collectives (the
gradient all-reduce of a training step).
"""
import time

import jax
import numpy as np

from ...ir.interpret import GuardFailed, guard_outcome, same_outcome
from .lower import lower


class JaxProgram:
    """An executable graph on XLA (see module docstring)."""

    quiet = False

    def __init__(self, graph, name=None, writable=None, data_parallel=False):
        self.graph = graph
        self.name = name or graph.name
        self.lowered = lower(graph)              # raises Unsupported: caller falls back
        self.writable = len(graph.outputs) if writable is None else writable
        self.data_parallel = data_parallel
        self._numpy = None
        self.filename = f"<tracegrad-jax-{self.name}>"
        self._line_sites = {}
        specs, shardings = self._specs()
        jitted = jax.jit(self.lowered.fn, in_shardings=shardings) if shardings else \
            jax.jit(self.lowered.fn)
        t0 = time.perf_counter()
        with jax.enable_x64(self.lowered.x64):
            traced = jitted.trace(*specs)
            self.jaxpr = traced.jaxpr
            t1 = time.perf_counter()
            self.executable = traced.lower().compile()
        self.trace_seconds = t1 - t0
        self.compile_seconds = time.perf_counter() - t1
        self._events = self._order_events()
        self.fn = self.__call__

    # -- building --
    def _specs(self):
        g, low = self.graph, self.lowered
        types = [v.type for v in g.inputs] + [n.output.type for n in low.host_nodes]
        shardings = None
        if self.data_parallel:
            from jax.sharding import Mesh, NamedSharding, PartitionSpec as P
            devs = jax.devices()
            mesh = Mesh(np.array(devs), ("batch",))
            roles = [v.role for v in g.inputs] + [None] * len(low.host_nodes)
            shardings = tuple(
                NamedSharding(mesh, P("batch") if r == "arg" and t.shape
                              and t.shape[0] % len(devs) == 0 else P())
                for r, t in zip(roles, types))
        with jax.enable_x64(low.x64):
            specs = [jax.ShapeDtypeStruct(t.shape, t.dtype.np) for t in types]
        return specs, shardings

    def _order_events(self):
        """Guards and checks, in the order the numpy program would meet them."""
        ev = [(gd.position, 0, "guard", k) for k, gd in enumerate(self.graph.guards)]
        ev += [(p, 1, "check", k) for k, p in enumerate(self.lowered.check_positions or ())]
        return [(kind, k) for _, _, kind, k in sorted(ev)]

    # -- running --
    def __call__(self, *arrays):
        low = self.lowered
        snap = None
        if low.host_nodes:
            snap = [(g, g._rng, g._rng.bit_generator.state, g._seed) for g in low.generators()]
            arrays = arrays + tuple(low.host_draws())
        with jax.enable_x64(low.x64):
            outs, gvals, cvals = self.executable(*arrays)
        if self._events:
            guards = self.graph.guards
            for kind, k in self._events:
                if kind == "guard":
                    gd = guards[k]
                    actual = guard_outcome(gd.kind, np.asarray(gvals[k]))
                    if not same_outcome(actual, gd.expected):
                        raise GuardFailed(k, actual)
                elif bool(cvals[k]):
                    return self._on_numpy(arrays[:len(self.graph.inputs)], snap)
        w = self.writable
        if w >= len(outs):
            return [None if o is None else np.array(o) for o in outs]
        return [None if o is None else np.array(o) for o in outs[:w]] + outs[w:]

    def _on_numpy(self, arrays, snap):
        for gen, r, state, seed in snap or ():       # the numpy program draws again
            gen._rng, gen._seed = r, seed
            r.bit_generator.state = state
        if self._numpy is None:
            from ...codegen import build
            self._numpy = build(self.graph, self.name + "_numpy")
        return self._numpy(*[np.asarray(a) for a in arrays])

    def failed(self, e):
        """Errors from XLA are raised as they are (numpy-backend errors come translated)."""
        return e

    @property
    def code(self):
        """The lowered program as jax prints it (`jax.make_jaxpr` text)."""
        return str(self.jaxpr)

    def __repr__(self):
        return f"<JaxProgram {self.name}: {len(self.graph.nodes)} nodes>"
