"""`CompiledFunctionBackward`: the one grad_fn a compiled call's outputs share.

It is an ordinary node of the eager graph, so compiled and eager code compose: the engine
hands it the output gradients, it runs the compiled backward program on the saved arrays,
and the input gradients flow on to leaves' `.grad`, hooks and further eager nodes.

With `create_graph=True` (grad mode on during backward) it runs the path's backward graph
through eager dispatch, recomputing the saved values that depend on inputs requiring grad
from those inputs, so the gradient it returns is itself differentiable (exact double
backward; Note [Differentiable backward] in replay.py).
"""
import numpy as np

from .. import _mode
from .._errors import TracegradRuntimeError
from .._tensor import Tensor
from ..autograd.graph import FREED_MSG, Node, _version_error


class ConsumedBackward(Node):
    """The grad_fn of an output whose graph the compiled function already ran backward
    through (Note [Effects] in _effects.py): the program keeps no saved values for it, and
    a second backward raises PyTorch's error, as eager does. Prints eager's node name."""
    __slots__ = ("eager_name",)

    def name(self):
        return self.eager_name

    def __repr__(self):
        return f"<{self.eager_name} object at {id(self):#x}>"

    def apply(self, grads):
        raise TracegradRuntimeError(FREED_MSG)


class CompiledFunctionBackward(Node):
    __slots__ = ("path", "saved_arrays", "kept_arrays", "checks", "inputs", "out_meta")

    def apply(self, grads):
        if self.released:
            raise TracegradRuntimeError(FREED_MSG)
        if self.path.deferred_errors:          # see passes/check_inplace.py: a fresh copy,
            err = self.path.deferred_errors[0]  # tracebacks must not pile up across calls
            raise type(err)(str(err))
        for vc, v, data in self.checks:
            if vc.v != v:
                t = Tensor._wrap(data)
                t._vc = vc
                raise _version_error(t, v, self)
        path = self.path
        part = path.part
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
        res = path.backward_program(*cts, *self.saved_arrays)
        out = []
        for r in res:
            out.append(None if r is None else Tensor._wrap(np.asarray(r)))
        return tuple(out)

    def release(self):
        self.released = True
        self.saved_arrays = self.kept_arrays = None
