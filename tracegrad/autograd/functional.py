"""tracegrad.autograd.functional: PyTorch's `torch.autograd.functional` higher-level API.

`jacobian`, `hessian`, `vjp`, `jvp`, `hvp`, `vhp` with torch's signatures, output nesting and
strict-mode errors. Inputs are a tensor or a tuple of tensors; `func` returns a tensor or a
tuple of tensors. Results follow torch's nesting: a tuple over inputs when `inputs` is a
tuple, a tuple over outputs when the output is, a tuple of tuples `[output][input]` when both
are (for `hessian`, `[input][input]`).

Each call works on fresh aliases of the inputs (`detach().requires_grad_()`, or with
`create_graph=True` a differentiable view of an input that requires grad), so the caller's
tensors are untouched. Without `create_graph`, results are detached.

There is no forward mode: `jvp` and `hvp` use the double-backward trick (as torch itself
does); `strategy="forward-mode"` (which torch supports only with `vectorize=True`) computes
the same Jacobian by reverse mode, and `vectorize` changes nothing but is accepted.
These are plain eager functions built from autograd calls, so inside a `tracegrad.compile`d
function they are traced like any other code.
"""
from .. import _mode
from .._errors import TracegradRuntimeError, TracegradTypeError
from .._tensor import Tensor
from .api import grad as _grad

__all__ = ["jacobian", "hessian", "vjp", "jvp", "hvp", "vhp"]

_STRATEGIES = ("forward-mode", "reverse-mode")


def _as_tuple(x, what, fn):
    """(was a tuple, tuple of tensors), with torch's TypeError for anything else."""
    is_tuple = isinstance(x, tuple)
    items = x if is_tuple else (x,)
    for i, el in enumerate(items):
        if not isinstance(el, Tensor):
            where = f"value at index {i}" if is_tuple else f"given {what}"
            raise TracegradTypeError(
                f"The {what} given to {fn} must be either a Tensor or a tuple of Tensors but "
                f"the {where} has type {type(el)}.")
    return is_tuple, items


def _fresh(tensors, create_graph, need_graph):
    """New tensor objects for `tensors` (see the module docstring)."""
    out = []
    for t in tensors:
        if create_graph and t.requires_grad:
            out.append(t.view_as(t))
        else:
            out.append(t.detach().requires_grad_(need_graph))
    return tuple(out)


def _finish(x, create_graph):
    if isinstance(x, tuple):
        return tuple(_finish(el, create_graph) for el in x)
    return x if create_graph else x.detach()


def _nest(res, *flags):
    """Undo the tuple wrapping: one flag (a tuple), or (outer, inner) for a tuple of tuples."""
    if len(flags) == 1:
        return res if flags[0] else res[0]
    outer, inner = flags
    if outer and inner:
        return res
    if outer:
        return tuple(el[0] for el in res)
    if inner:
        return res[0]
    return res[0][0]


def _check_v(v, ref, ref_is_tuple):
    if len(v) != len(ref):
        if ref_is_tuple:
            raise TracegradRuntimeError(
                f"v is a tuple of invalid length: should be {len(ref)} but got {len(v)}.")
        raise TracegradRuntimeError("The given v should contain a single Tensor.")
    for i, (a, b) in enumerate(zip(v, ref)):
        if a.shape != b.shape:
            where = f"Entry {i} in " if ref_is_tuple else ""
            raise TracegradRuntimeError(
                f"{where}v has invalid size: should be {b.size()} but got {a.size()}.")


_NO_GRAD = {
    "outputs": "Output {i} of the user-provided function does not require gradients. The "
               "outputs must be computed in a differentiable manner from the input when "
               "running in strict mode.",
    "grad_inputs": "The gradient with respect to input {i} is independent of the inputs of "
                   "the user-provided function. This is not allowed in strict mode.",
    "jacobian": "While computing the hessian, found that the jacobian of the user-provided "
                "function with respect to input {i} is independent of the input. This is not "
                "allowed in strict mode. You should ensure that your function is twice "
                "differentiable and that the jacobian depends on the inputs (this would be "
                "violated by a linear function for example).",
    "hessian": "The hessian of the user-provided function with respect to input {i} is "
               "independent of the input. This is not allowed in strict mode. You should "
               "ensure that your function is thrice differentiable and that the hessian "
               "depends on the inputs.",
}

_UNUSED = {
    "back": "The output of the user-provided function is independent of input {i}. This is "
            "not allowed in strict mode.",
    "back_trick": "The gradient with respect to the input is independent of entry {i} in the "
                  "grad_outputs when using the double backward trick to compute forward mode "
                  "gradients. This is not allowed in strict mode.",
    "double_back": "The jacobian of the user-provided function is independent of input {i}. "
                   "This is not allowed in strict mode.",
    "double_back_trick": "The hessian of the user-provided function is independent of entry "
                         "{i} in the grad_jacobian. This is not allowed in strict mode as it "
                         "prevents from using the double backward trick to replace forward "
                         "mode AD.",
}


def _strict_requires_grad(tensors, kind, strict):
    if not strict:
        return
    for i, t in enumerate(tensors):
        if t is None:
            raise TracegradRuntimeError(_UNUSED["back"].format(i=i))
        if not t.requires_grad:
            raise TracegradRuntimeError(_NO_GRAD[kind].format(i=i))


def _zeros_for_none(grads, refs, strict, create_graph, stage):
    from ..ops.creation import zeros_like
    out = []
    for i, (g, ref) in enumerate(zip(grads, refs)):
        if g is None:
            if strict:
                raise TracegradRuntimeError(_UNUSED[stage].format(i=i))
            g = zeros_like(ref)
        elif strict and create_graph and not g.requires_grad:
            what = "hessian" if "double" in stage else "jacobian"
            raise TracegradRuntimeError(
                f"The {what} of the user-provided function is independent of input {i}. This "
                "is not allowed in strict mode when create_graph=True.")
        out.append(g)
    return tuple(out)


def _vjp_raw(outputs, inputs, cotangents, create_graph):
    """autograd.grad over the outputs that require grad; None for unused inputs."""
    pairs = [(o, c) for o, c in zip(outputs, cotangents) if o is not None and o.requires_grad]
    if not pairs:
        return (None,) * len(inputs)
    return tuple(_grad([o for o, _ in pairs], list(inputs), [c for _, c in pairs],
                       retain_graph=True, create_graph=create_graph, allow_unused=True))


def _call(func, inputs, fn):
    is_tuple, outputs = _as_tuple(func(*inputs), "outputs of the user-provided function", fn)
    return is_tuple, outputs


def vjp(func, inputs, v=None, create_graph=False, strict=False):
    """`(func(*inputs), v^T J)`: the vector-Jacobian product, one entry per input.

    `v` may be None only when `func` returns a single one-element tensor.

    >>> out, g = tg.autograd.functional.vjp(lambda x: x ** 2, x, tg.ones(3))   # g == 2 * x
    """
    from ..ops.creation import ones_like
    with _mode.enable_grad():
        in_tuple, inputs = _as_tuple(inputs, "inputs", "vjp")
        inputs = _fresh(inputs, create_graph, need_graph=True)
        out_tuple, outputs = _call(func, inputs, "vjp")
        _strict_requires_grad(outputs, "outputs", strict)
        if v is not None:
            v = _fresh(_as_tuple(v, "v", "vjp")[1], create_graph, need_graph=False)
            _check_v(v, outputs, out_tuple)
        else:
            if len(outputs) != 1 or outputs[0].numel() != 1:
                raise TracegradRuntimeError(
                    "The vector v can only be None if the user-provided function returns a "
                    "single Tensor with a single element.")
            v = (ones_like(outputs[0]),)
    with _mode.set_grad_enabled(create_graph or _mode.is_grad_enabled()):
        grads = _vjp_raw(outputs, inputs, v, create_graph)
        res = _zeros_for_none(grads, inputs, strict, create_graph, "back")
    return (_nest(_finish(outputs, create_graph), out_tuple),
            _nest(_finish(res, create_graph), in_tuple))


def jvp(func, inputs, v=None, create_graph=False, strict=False):
    """`(func(*inputs), J v)`: the Jacobian-vector product, one entry per output, by the
    double-backward trick.

    `v` may be None only when the input is a single one-element tensor.
    """
    from ..ops.creation import zeros_like
    with _mode.enable_grad():
        in_tuple, inputs = _as_tuple(inputs, "inputs", "jvp")
        inputs = _fresh(inputs, create_graph, need_graph=True)
        v = _tangents(v, inputs, in_tuple, create_graph, "jvp")
        out_tuple, outputs = _call(func, inputs, "jvp")
        _strict_requires_grad(outputs, "outputs", strict)
        dummy = tuple(zeros_like(o).requires_grad_() for o in outputs)
        grad_inputs = _vjp_raw(outputs, inputs, dummy, create_graph=True)
        _strict_requires_grad(grad_inputs, "grad_inputs", strict)
    with _mode.set_grad_enabled(create_graph or _mode.is_grad_enabled()):
        res = _vjp_raw(grad_inputs, dummy, v, create_graph)
        res = _zeros_for_none(res, outputs, strict, create_graph, "back_trick")
    return (_nest(_finish(outputs, create_graph), out_tuple),
            _nest(_finish(res, create_graph), out_tuple))


def _tangents(v, inputs, in_tuple, create_graph, fn):
    if v is None:
        if len(inputs) != 1 or inputs[0].numel() != 1:
            raise TracegradRuntimeError(
                "The vector v can only be None if the input to the user-provided function is "
                "a single Tensor with a single element.")
        from ..ops.creation import ones_like
        return (ones_like(inputs[0]),)
    v = _fresh(_as_tuple(v, "v", fn)[1], create_graph, need_graph=False)
    _check_v(v, inputs, in_tuple)
    return v


def _check_strategy(strategy, vectorize):
    if strategy not in _STRATEGIES:
        raise AssertionError(
            'Expected strategy to be either "forward-mode" or "reverse-mode". Hint: If your '
            'function has more outputs than inputs, "forward-mode" tends to be more '
            'performant. Otherwise, prefer to use "reverse-mode".')
    if strategy == "forward-mode" and not vectorize:
        raise NotImplementedError(
            "Computing Jacobian using forward-AD or forward-over-reverse Hessian is"
            "only implemented for `vectorize=True`.")


def jacobian(func, inputs, create_graph=False, strict=False, vectorize=False,
             strategy="reverse-mode"):
    """The Jacobian of `func` at `inputs`: per output and per input a tensor of shape
    `output.shape + input.shape`, nested as torch nests it (see the module docstring).

    >>> tg.autograd.functional.jacobian(lambda x: x ** 2, tg.tensor([1., 2.]))  # diag(2, 4)
    """
    from ..ops.creation import eye, zeros
    from ..ops.shape import stack
    _check_strategy(strategy, vectorize)
    with _mode.enable_grad():
        in_tuple, inputs = _as_tuple(inputs, "inputs", "jacobian")
        inputs = _fresh(inputs, create_graph, need_graph=True)
        out_tuple, outputs = _call(func, inputs, "jacobian")
        _strict_requires_grad(outputs, "outputs", strict)
        jac = []
        for i, out in enumerate(outputs):
            n = out.numel()
            rows = [[] for _ in inputs]
            basis = eye(n, dtype=out.dtype) if n and out.requires_grad else None
            for k in range(n):
                grads = ((None,) * len(inputs) if basis is None else
                         _vjp_raw([out], inputs, [basis[k].reshape(out.shape)], create_graph))
                for j, g in enumerate(grads):
                    if g is None:
                        if strict:
                            raise TracegradRuntimeError(
                                f"Output {i} of the user-provided function is independent of "
                                f"input {j}. This is not allowed in strict mode.")
                        g = zeros(tuple(inputs[j].shape), dtype=inputs[j].dtype)
                    elif strict and create_graph and not g.requires_grad:
                        raise TracegradRuntimeError(
                            "The jacobian of the user-provided function is independent of "
                            f"input {j}. This is not allowed in strict mode when "
                            "create_graph=True.")
                    rows[j].append(g)
            jac.append(tuple(
                (stack(r) if r else zeros((0,) + tuple(x.shape), dtype=x.dtype))
                .reshape(tuple(out.shape) + tuple(x.shape)) for r, x in zip(rows, inputs)))
    return _nest(_finish(tuple(jac), create_graph), out_tuple, in_tuple)


def hessian(func, inputs, create_graph=False, strict=False, vectorize=False,
            outer_jacobian_strategy="reverse-mode"):
    """The Hessian of scalar `func` at `inputs`: shape `input.shape + input.shape`, or with
    tuple inputs a tuple of tuples `[i][j]` of shape `inputs[i].shape + inputs[j].shape`.

    >>> tg.autograd.functional.hessian(lambda x: (x ** 3).sum(), tg.tensor([1., 2.]))
    """
    _check_strategy(outer_jacobian_strategy, vectorize)
    in_tuple, inputs = _as_tuple(inputs, "inputs", "hessian")

    def scalar(*xs):
        out_tuple, outs = _call(func, xs, "hessian")
        _strict_requires_grad(outs, "outputs", strict)
        if out_tuple:
            raise TracegradRuntimeError("The function given to hessian should return a single "
                                        "Tensor")
        if outs[0].numel() != 1:
            raise TracegradRuntimeError("The Tensor returned by the function given to hessian "
                                        "should contain a single element")
        return outs[0].squeeze()

    def gradient(*xs):
        g = jacobian(scalar, xs, create_graph=True)
        _strict_requires_grad(g, "jacobian", strict)
        return g

    res = jacobian(gradient, inputs, create_graph, strict, vectorize,
                   strategy=outer_jacobian_strategy)
    return _nest(res, in_tuple, in_tuple)


def _scalar_output(func, inputs, strict, fn):
    out_tuple, outputs = _call(func, inputs, fn)
    _strict_requires_grad(outputs, "outputs", strict)
    if out_tuple:
        raise TracegradRuntimeError(f"The function given to {fn} should return a single Tensor")
    if outputs[0].numel() != 1:
        raise TracegradRuntimeError(
            f"The Tensor returned by the function given to {fn} should contain a single element")
    return outputs


def hvp(func, inputs, v=None, create_graph=False, strict=False):
    """`(func(*inputs), H v)`: the Hessian-vector product of scalar `func` (double-backward
    trick), one entry per input."""
    from ..ops.creation import ones_like, zeros_like
    with _mode.enable_grad():
        in_tuple, inputs = _as_tuple(inputs, "inputs", "hvp")
        inputs = _fresh(inputs, create_graph, need_graph=True)
        v = _tangents(v, inputs, in_tuple, create_graph, "hvp")
        outputs = _scalar_output(func, inputs, strict, "hvp")
        jac = _vjp_raw(outputs, inputs, [ones_like(outputs[0])], create_graph=True)
        _strict_requires_grad(jac, "jacobian", strict)
        dummy = tuple(zeros_like(x).requires_grad_() for x in inputs)
        double = _vjp_raw(jac, inputs, dummy, create_graph=True)
        _strict_requires_grad(jac, "hessian", strict)
    with _mode.set_grad_enabled(create_graph or _mode.is_grad_enabled()):
        res = _vjp_raw(double, dummy, v, create_graph)
        res = _zeros_for_none(res, inputs, strict, create_graph, "double_back_trick")
    return (_finish(outputs[0], create_graph), _nest(_finish(res, create_graph), in_tuple))


def vhp(func, inputs, v=None, create_graph=False, strict=False):
    """`(func(*inputs), v^T H)`: the vector-Hessian product of scalar `func`, one entry per
    input."""
    from ..ops.creation import ones_like
    with _mode.enable_grad():
        in_tuple, inputs = _as_tuple(inputs, "inputs", "vhp")
        inputs = _fresh(inputs, create_graph, need_graph=True)
        v = _tangents(v, inputs, in_tuple, create_graph, "vhp")
        outputs = _scalar_output(func, inputs, strict, "vhp")
        jac = _vjp_raw(outputs, inputs, [ones_like(outputs[0])], create_graph=True)
        _strict_requires_grad(jac, "jacobian", strict)
    with _mode.set_grad_enabled(create_graph or _mode.is_grad_enabled()):
        res = _vjp_raw(jac, inputs, v, create_graph)
        res = _zeros_for_none(res, inputs, strict, create_graph, "double_back")
    return (_finish(outputs[0], create_graph), _nest(_finish(res, create_graph), in_tuple))
