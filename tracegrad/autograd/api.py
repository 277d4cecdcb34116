"""User entry points of autograd: `Tensor.backward`, `autograd.backward`, `autograd.grad`.

Arguments, defaults and errors follow torch.autograd: `retain_graph` defaults to
`create_graph`; a non-scalar output needs an explicit gradient.
"""
from .._errors import TracegradRuntimeError, op_error
from .._tensor import Tensor, from_array
from .engine import run_backward


def _as_list(x):
    if x is None:
        return None
    if isinstance(x, Tensor):
        return [x]
    return list(x)


def _make_grads(outputs, grads):
    out = []
    for i, t in enumerate(outputs):
        g = grads[i] if grads is not None and i < len(grads) else None
        if g is None:
            if t._data.size != 1:
                raise op_error(TracegradRuntimeError, "backward",
                               "grad can be implicitly created only for scalar outputs",
                               "Pass a gradient of the output's shape, e.g. "
                               "`y.backward(torch.ones_like(y))`, or reduce y to a scalar first.")
            import numpy as np
            g = from_array(np.ones(t._data.shape, t._data.dtype))
        elif not isinstance(g, Tensor):
            import numpy as np
            g = from_array(np.asarray(g, dtype=t._data.dtype))
        else:
            if g._data.shape != t._data.shape:
                raise op_error(TracegradRuntimeError, "backward",
                               f"Mismatch in shape: grad_output[{i}] has a shape of "
                               f"{_sz(g.shape)} and output[{i}] has a shape of {_sz(t.shape)}.")
            if g._data.dtype != t._data.dtype and t.dtype.is_floating_point:
                g = g.to(t.dtype)
        out.append(g)
    return out


def _sz(s):
    return f"torch.Size({list(s)})"


def backward(tensors, grad_tensors=None, retain_graph=None, create_graph=False, inputs=None,
             grad_variables=None):
    """Accumulate gradients of `tensors` into the `.grad` of leaves (or of `inputs`)."""
    tensors = _as_list(tensors)
    grads = _make_grads(tensors, _as_list(grad_tensors))
    if retain_graph is None:
        retain_graph = create_graph
    inputs = _as_list(inputs)
    if inputs is not None and len(inputs) == 0:
        raise op_error(TracegradRuntimeError, "backward", "'inputs' argument to backward() "
                       "cannot be empty.")
    run_backward(tensors, grads, retain_graph, create_graph, inputs=inputs)


def grad(outputs, inputs, grad_outputs=None, retain_graph=None, create_graph=False,
         only_inputs=True, allow_unused=None, is_grads_batched=False, materialize_grads=False):
    """Gradients of `outputs` with respect to `inputs`, returned (not accumulated)."""
    outputs = _as_list(outputs)
    inputs = _as_list(inputs)
    if is_grads_batched:
        return _batched_grad(outputs, inputs, _as_list(grad_outputs), retain_graph,
                             create_graph, allow_unused, materialize_grads)
    grads = _make_grads(outputs, _as_list(grad_outputs))
    if retain_graph is None:
        retain_graph = create_graph
    if allow_unused is None:
        allow_unused = materialize_grads
    res = run_backward(outputs, grads, retain_graph, create_graph, inputs=inputs, capture=True,
                       allow_unused=allow_unused)
    if materialize_grads:
        from ..ops.creation import zeros_like
        res = tuple(zeros_like(i) if g is None else g for i, g in zip(inputs, res))
    return res



def _batched_grad(outputs, inputs, grad_outputs, retain_graph, create_graph, allow_unused,
                  materialize_grads):
    """`grad(..., is_grads_batched=True)`: the first dimension of each grad_output is a batch
    of vectors; the result stacks one vector-Jacobian product per vector (PyTorch computes
    them with vmap; one backward each gives the same values)."""
    from ..ops.shape import stack
    if not grad_outputs or any(g is None for g in grad_outputs):
        raise op_error(TracegradRuntimeError, "grad", "is_grads_batched=True needs a batched "
                       "grad_output for every output")
    n = grad_outputs[0].shape[0] if grad_outputs[0].ndim else 0
    if any(g.ndim == 0 or g.shape[0] != n for g in grad_outputs):
        raise op_error(TracegradRuntimeError, "grad", "is_grads_batched=True: every "
                       "grad_output needs the same batch size as its first dimension")
    rows = []
    for b in range(n):
        last = b == n - 1
        rows.append(grad(outputs, inputs, [g[b] for g in grad_outputs],
                         retain_graph=retain_graph if last else True,
                         create_graph=create_graph, allow_unused=allow_unused,
                         materialize_grads=materialize_grads))
    return tuple(None if any(r[k] is None for r in rows) else stack([r[k] for r in rows])
                 for k in range(len(inputs)))
