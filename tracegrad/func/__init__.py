"""tracegrad.func: functional transforms, like `torch.func` and JAX.

- `grad(f, argnums=0, has_aux=False)`: the gradient of a scalar-valued `f`.
- `value_and_grad(f, ...)` (JAX order: `(value, grad)`) and `grad_and_value(f, ...)`
  (torch.func order: `(grad, value)`).
- `vjp(f, *primals, has_aux=False)` -> `(out, vjp_fn)`; `vjp_fn(cotangents)` -> tuple.
- `jacrev(f, argnums=0, has_aux=False)`: the Jacobian by reverse mode.
- `jvp(f, primals, tangents)` -> `(out, jvp_out)`, `jacfwd`, `hessian` (func/_forward.py:
  exact, from reverse mode by the double-VJP trick; tracegrad has no forward mode).
- `functional_call(module, params_and_buffers, args)`: run a module with other tensors in
  place of its parameters and buffers (func/_functional_call.py).
- `stack_module_state(models)`: stacked parameters and buffers for ensembling
  (func/_stack_state.py).
- `vmap(f, in_dims=0, out_dims=0)`: torch.func.vmap's semantics by looping over the batch
  with a compiled `f` (Note [vmap by looping] in func/_vmap.py).

`argnums` is an int or a tuple of ints; a differentiated argument may be a tensor or a
tuple/list/dict of tensors (the gradient has the same structure). Inputs are differentiated
whether or not they require grad, and the caller's tensors are never modified.

Compiled by default: each transformed function runs a `tracegrad.compile`d implementation
(`transformed.compiled.stats`, `.explain()`), so repeated calls with the same shapes re-use
one generated program. Pass `compile=False` to run eagerly.

Higher order: transforms nest (`grad(grad(f))`, `jacrev(grad(f))`) in both modes; an inner
transform called while an outer one is traced runs inline in the outer trace. When an
argument requires grad (an outer transform's input, or a parameter), results stay connected
to it (recorded with `create_graph=True`), exactly as torch.func returns them; otherwise
results are plain tensors that do not require grad.
"""
from ._forward import hessian, jacfwd, jvp
from ._functional_call import functional_call
from ._transforms import grad, grad_and_value, jacrev, value_and_grad, vjp
from ._stack_state import stack_module_state
from ._vmap import vmap

__all__ = ["grad", "value_and_grad", "grad_and_value", "vjp", "jacrev", "functional_call", "jvp",
           "jacfwd", "hessian", "vmap", "stack_module_state"]
