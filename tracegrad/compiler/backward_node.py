"""`CompiledFunctionBackward`: the one grad_fn a compiled call's outputs share.

It is an ordinary node of the eager graph, so compiled and eager code compose: the engine
hands it the output gradients, it runs the compiled backward program on the saved arrays,
and the input gradients flow on to leaves' `.grad`, hooks and further eager nodes.

With `create_graph=True` (grad mode on during backward) it runs the path's backward graph
through eager dispatch, recomputing the saved values that depend on inputs requiring grad
from those inputs, so the gradient it returns is itself differentiable (exact double
backward; Note [Differentiable backward] in replay.py).
"""
import warnings

import numpy as np

from .. import _mode
from ..autograd.anomaly_mode import STATE as _ANOMALY
from ..passes.check_inplace import fresh
from . import remat_writes
from .speculation import is_one, unwritten
from .._errors import TracegradRuntimeError, op_error, user_stacklevel
from .._tensor import Tensor, edge_of
from ..autograd.graph import FREED_MSG, Node, _seq, _version_error


def _fresh_gradients(res):
    """Wrap the program's gradients. An array the program made for this call alone (it owns
    its memory and is not returned twice) is marked `_owned`: the leaf's AccumulateGrad may
    adopt it as `.grad` instead of copying it (PyTorch steals such gradients too)."""
    out, seen = [], set()
    for r in res:
        if r is None:
            out.append(None)
            continue
        a = np.asarray(r)
        t = Tensor._wrap(a)
        if a.flags.owndata and id(a) not in seen and isinstance(r, np.ndarray):
            t._owned = True
        seen.add(id(a))
        out.append(t)
    return tuple(out)


class ConsumedBackward(Node):
    """The grad_fn of an output whose graph the compiled function already ran backward
    through (Note [Effects] in _effects.py): the program keeps no saved values for it, and
    a second backward raises PyTorch's error, as eager does. Prints eager's node name.

    Its edges lead to `leaves`, the inputs requiring grad the output was computed from, as
    eager's graph does: `autograd.grad(loss, [p])` must reach it (and raise) exactly when
    eager's would; they are made only when the engine asks (a call pays for a list)."""
    __slots__ = ("eager_name", "leaves", "_given")

    @property
    def edges(self):
        if getattr(self, "leaves", None):
            return tuple(edge_of(t) for t in self.leaves)
        return self._given

    @edges.setter
    def edges(self, value):
        self._given = value

    def name(self):
        return self.eager_name

    def __repr__(self):
        return f"<{self.eager_name} object at {id(self):#x}>"

    def apply(self, grads):
        raise TracegradRuntimeError(FREED_MSG)


def consumed_node(name, leaves):
    """A released `ConsumedBackward` printing as `name`, its edges leading to `leaves`: what
    `ConsumedBackward(None, None, (), (), (), ())` then setting `eager_name`, `released`
    and `leaves` gives, without Node.__init__ and the `edges` setter (two Python calls of a
    compiled training step's per-call work; tests/test_compile_fused_entry.py checks that
    every slot agrees)."""
    n = _new(ConsumedBackward)
    n.prim = n.attrs = n.saved = n.versions = n.out_saved = None
    n.pre_hooks = n.hooks = n.metadata = None
    n._given = n.shapes = n.dtypes = n.needs = ()
    n.seq = next(_seq)
    n.released, n.n_outputs = True, 1
    n.eager_name, n.leaves = name, leaves
    return n


_new = object.__new__


class CompiledFunctionBackward(Node):
    __slots__ = ("path", "saved_arrays", "kept_arrays", "checks", "inputs", "out_meta",
                 "stash", "spec_box", "written_at")
    leaf_sink = True                     # Note [One node feeding leaves] in engine.py

    def apply(self, grads, consume=False):
        """The input gradients for output gradients `grads`. With `consume` (the engine
        releases this node afterwards: no retain_graph) the saved values are handed to the
        program, which frees each at its last use (Note [Owned inputs] in codegen.py).
        An input no output with a gradient reaches gets None (Note [Gradients of outputs
        not reached] in path.py)."""
        res = self._apply(grads, consume)
        if len(grads) > 1 and any(grads[k] is None for k in self.path.part.cotangent_outputs):
            res = list(res)
            for j in self.path.unreached(grads):
                res[j] = None
            res = tuple(res)
        return res

    def _apply(self, grads, consume):
        if self.released:
            raise op_error(TracegradRuntimeError, None, FREED_MSG)  # as eager, with the site
        if self.path.deferred_errors:
            err = self.deferred_error(grads)
            if err is not None:
                raise err
        if _ANOMALY["enabled"]:
            _warn_anomaly(self.path)
        for vc, v, data in self.checks:
            if vc.v != v:
                t = Tensor._wrap(data)
                t._vc = vc
                raise _version_error(t, v, self)
        path = self.path
        part = path.part
        if path.remat_saved:             # Note [Inputs written before a recomputing backward]
            remat_writes.check(self, path.name)
        spec = path.speculation
        if spec is not None:                 # Note [Speculative backward] in speculation.py
            stash, self.stash = self.stash, None
            k = part.cotangent_outputs[0]
            g = grads[k]
            one = g is not None and not _mode.is_grad_enabled() and is_one(g, self.out_meta[k][1])
            spec.on = one
            if stash is not None and one and unwritten(self.spec_box):
                self.spec_box[0] = True
                return _fresh_gradients(stash)
        cts = []
        for k in part.cotangent_outputs:
            g = grads[k]
            if g is None:
                shape, dt = self.out_meta[k]
                cts.append(np.zeros(shape, dt))
            else:
                cts.append(g._data)
        if _mode.is_grad_enabled():
            return path.eager_backward(self, grads)
        prog = path.backward_program
        if getattr(prog, "owned", False):
            refs = cts + list(self.saved_arrays)
            if consume:                      # nothing else holds them: freed as it goes
                self.saved_arrays = self.kept_arrays = None
            res = prog.call_owned(refs)
        else:                                # (a JAX program's `fn`: Note [Plain calls])
            call = prog.fn if getattr(prog, "fn_is_call", False) else prog
            res = call(*cts, *self.saved_arrays)
        return _fresh_gradients(res)

    def register_hook(self, fn):
        _warn_node_hook(self, "register_hook", "its grad_inputs are the gradients of the "
                        "compiled function's inputs that require grad, not those of the "
                        "inputs of the op that made this output in eager execution")
        return super().register_hook(fn)

    def register_prehook(self, fn):
        if len(self.out_meta or ()) > 1:
            _warn_node_hook(self, "register_prehook", "its grad_outputs are the gradients of "
                            f"all {len(self.out_meta)} outputs of the compiled call, which "
                            "share this node, not only of this output")
        return super().register_prehook(fn)

    def deferred_error(self, grads):
        """The in-place error eager backward would raise for output gradients `grads` (a
        fresh copy), or None (Note [Inplace errors wait for backward], check_inplace.py)."""
        errors = self.path.deferred_errors
        for err, reach in zip(errors, getattr(errors, "reaches", ())):
            if reach is None or any(k < len(grads) and grads[k] is not None for k in reach):
                return fresh(err)
        return None

    def apply_and_release(self, grads):
        """`apply`, then `release`: the engine's call when the graph is not retained.
        A deferred in-place error frees the saved values only when eager's backward frees
        some on its way to that error (`frees_graph`): otherwise a second backward raises
        the same error again, as in eager."""
        if self.path.deferred_errors and not self.released:
            err = self.deferred_error(grads)
            if err is not None:
                if err.frees_graph:
                    self.release()
                raise err
        if not self.path.eager_saves:          # nothing eager would free: keep what it has
            return self.apply(grads)
        try:
            return self.apply(grads, consume=True)
        finally:
            self.release()

    def release(self):
        if not self.path.eager_saves:          # Note [Second backward]
            return
        self.released = True
        self.saved_arrays = self.kept_arrays = None


# Note [Hooks on a compiled grad_fn]
# `out.grad_fn` of a compiled call is one node standing for the whole function (as with
# torch.compile), so a hook on the node itself sees other gradients than on eager's node
# for the op that made `out`: a post-hook's grad_inputs are the gradients of the compiled
# function's inputs, and a pre-hook's grad_outputs those of every output sharing the node.
# Tensor hooks (`out.register_hook`) are exact. Node hooks warn, saying what they see.

def _warn_node_hook(node, method, what):
    warnings.warn(f"tracegrad.compile: grad_fn.{method}() on the output of a compiled "
                  f"function ('{node.path.name}'): {what} (Note [Hooks on a compiled "
                  "grad_fn]); register a tensor hook (out.register_hook) instead, or "
                  "the node hook inside the function to run it eagerly.",
                  UserWarning, stacklevel=user_stacklevel())


# Note [Anomaly mode in a compiled backward]
# A call made while anomaly detection is on runs eagerly (Note [Anomaly mode and compile]).
# One made before it was turned on (`with detect_anomaly(): loss.backward()` around the
# backward alone) left one node, whose program has no per-op gradients to check: the
# engine checks only the gradients the whole program returns, so a NaN that an op inside
# makes and a later one drops goes unseen, and a NaN found is named after
# CompiledFunctionBackward, not the op. Such a backward warns once per path, saying so.

def _warn_anomaly(path):
    if getattr(path, "warned_anomaly", False):
        return
    path.warned_anomaly = True
    warnings.warn(f"tracegrad.compile: anomaly detection cannot check the ops inside the "
                  f"compiled backward of '{path.name}' (its forward ran before detection "
                  "was turned on): only the gradients it returns are checked. Call the "
                  "compiled function under detect_anomaly() too, to run it eagerly.",
                  UserWarning, stacklevel=user_stacklevel())


# Note [Second backward]
# Eager autograd raises on a second backward without retain_graph only when a node on the
# way kept saved tensors, which the first backward freed: `x.sum().backward()` twice is
# fine. A compiled call's node stands for the traced graph, so it frees its saved values
# (and refuses a second backward) only when eager's graph for the same outputs held some
# (`eager_saves`, decided on the traced call); otherwise it keeps them, and a second
# backward runs again as eager's does.

def eager_saves(outs, inputs):
    """Whether the eager graph the trace built from `inputs` to `outs` holds saved values
    (a custom Function counts as holding some)."""
    from ..autograd.function import BackwardCFunction
    from ..autograd.graph import AccumulateGrad
    stop = {id(t._grad_fn) for t in inputs if t._grad_fn is not None}
    todo = [o._grad_fn for o in outs if isinstance(o, Tensor) and o._grad_fn is not None]
    seen = set()
    while todo:
        n = todo.pop()
        if id(n) in seen or id(n) in stop or isinstance(n, AccumulateGrad):
            continue
        seen.add(id(n))
        if (not isinstance(n, Node) or isinstance(n, BackwardCFunction)   # custom Function
                or getattr(n, "prim", None) is None or n.saved is not None
                or n.out_saved is not None or n.released):
            return True
        todo.extend(e[0] for e in n.edges if e is not None)
    return False
