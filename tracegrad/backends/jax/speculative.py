"""`SpeculativeProgram`: a path's forward and backward programs as one XLA call, seeded with ones.

Built by `speculative_program(path)` for the speculation of Note [Speculative backward]
(compiler/speculation.py): one jitted function running the forward graph, then the backward
graph with the gradient of the path's single scalar output set to one. A call returns what
the forward program returns, followed by the input gradients (fresh writable numpy arrays,
as the backward program's). When the forward's runtime checks fail, the call reruns on the
numpy forward program (JaxProgram.__call__) and returns the forward's results alone: the
caller then has no gradients to keep; so does a call whose backward part fails a runtime
check of its own (its backward program, run later, meets the failure as it always does).

Only plain paths fuse (`fusable`): one cotangent output, a floating scalar; no host draws,
no opaque callbacks, no packed saved values, no data parallelism; a backward program with
no guards of its own, and the same 64-bit mode as the forward.
"""
import time

import jax
import jax.numpy as jnp
import numpy as np
from jax.sharding import SingleDeviceSharding

from .adopt import static_big
from .program import JaxProgram
from .status import with_status


def fusable(path):
    """Whether `path`'s JaxPrograms can be fused (see the module docstring)."""
    part, fwd, bwd = path.part, path.forward_program, path.backward_program
    if not isinstance(fwd, JaxProgram) or not isinstance(bwd, JaxProgram):
        return False
    if len(part.cotangent_outputs) != 1 or path.deferred_errors:
        return False
    out = part.forward.outputs[part.cotangent_outputs[0]]
    if out is None or out.type.shape != () or np.dtype(out.type.dtype.np).kind != "f":
        return False
    lf, lb = fwd.lowered, bwd.lowered
    return (fwd.pack_out is None and bwd.pack_in is None and not fwd.data_parallel
            and not lf.host_nodes and not lb.host_nodes and not lf.opaque and not lb.opaque
            and lf.x64 == lb.x64 and not bwd.graph.guards)


class SpeculativeProgram(JaxProgram):
    """The forward JaxProgram of a path, returning the ones-seeded input gradients too."""

    def __init__(self, path):
        fwd, bwd, part = path.forward_program, path.backward_program, path.part
        self.__dict__.update(fwd.__dict__)       # the forward's layout, checks and guards
        self.name = fwd.name + "_speculative"
        self._numpy = None
        self.n_grads = n_g = len(bwd.graph.outputs)
        w = fwd.writable
        ct = part.forward.outputs[part.cotangent_outputs[0]].type
        seed_dtype = ct.dtype.np
        saved_at, j = [], part.n_user         # backward's saved inputs, in the forward
        for k in range(len(part.saved)):
            if k in part.saved_from_input:
                saved_at.append(("in", part.saved_from_input[k]))
            else:
                saved_at.append(("out", j))
                j += 1
        lf, lb = fwd.lowered, bwd.lowered
        self.lowered_backward = lb
        self.writable = w + n_g
        self._bigs = ([static_big(v) for v in fwd.graph.outputs[:w]]
                      + [static_big(v) for v in bwd.graph.outputs])
        self._w_fwd = w
        self._alias_candidates()                 # (of these results)

        def fn(*arrays):
            outs, gv, cv = lf.fn(*arrays)
            saved = [arrays[i] if kind == "in" else outs[i] for kind, i in saved_at]
            grads, _, bad = lb.fn(jnp.ones((), seed_dtype), *saved)
            # the user's outputs and the gradients first: they become numpy arrays; the
            # backward's runtime checks last
            tail = [bad] if bad is not None else []
            return list(outs[:w]) + list(grads) + list(outs[w:]) + tail, gv, cv

        fn = self._one_buffer(fn, w + n_g)       # Note [One result buffer]
        self._small = None                       # (the forward's plan is not for these)
        fn = with_status(fn, self.graph.guards)  # Note [One status transfer]
        one = SingleDeviceSharding(self.device)      # (the forward's)
        jitted = jax.jit(fn, in_shardings=one, out_shardings=one)
        specs, _ = fwd._specs()
        t0 = time.perf_counter()
        with jax.enable_x64(lf.x64):
            traced = jitted.trace(*specs)
            self.jaxpr = traced.jaxpr
            self.executable = traced.lower().compile()
        self.compile_seconds = time.perf_counter() - t0
        self._call = self.executable
        self.fn = self._fast() or self.__call__

    def _plain(self):
        return JaxProgram._plain(self) and self.lowered_backward.n_checks == 0

    def _user_values(self):
        return (self.graph.outputs[:self._w_fwd]
                + list(self.lowered_backward.graph.outputs))

    def _fast(self):
        """Note [Plain calls] in program.py, with `__call__`'s reordering: the forward's
        results, then the gradients."""
        fast = JaxProgram._fast(self)
        if fast is None:
            return None
        w, n_g = self._w_fwd, self.n_grads
        wg = w + n_g

        def reordered(*arrays):
            res = fast(*arrays)
            return res[:w] + res[wg:] + res[w:wg]
        return reordered

    def __call__(self, *arrays):
        res = JaxProgram.__call__(self, *arrays)
        if type(res) is _Forward:                # rerun on numpy: no gradients
            return list(res)
        w, n_g = self._w_fwd, self.n_grads
        if self.lowered_backward.n_checks and bool(res.pop()):
            return res[:w] + res[w + n_g:]       # the backward program will meet them
        # back to the forward's order, the gradients last
        return res[:w] + res[w + n_g:] + res[w:w + n_g]

    def _on_numpy(self, arrays, snap):
        return _Forward(JaxProgram._on_numpy(self, arrays, snap))


class _Forward(list):
    """The forward program's results alone (a rerun on numpy)."""


def speculative_program(path):
    """A SpeculativeProgram for `path`, or None when it cannot have one."""
    if not fusable(path):
        return None
    return SpeculativeProgram(path)

