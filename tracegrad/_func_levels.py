"""Which `tracegrad.func` transforms are active around the running code (a contextvar, so
threads and tasks each see their own), for the checks torch.func makes of a custom
`autograd.Function` applied under a transform (autograd/function.py):

- any transform: the Function must use the `setup_context` style;
- `vmap` (and `jacfwd`/`hessian`, which torch computes with vmap): it must set
  `generate_vmap_rule = True` or define a `vmap` staticmethod;
- forward mode (`jvp`, `jacfwd`, `hessian`): with an input that carries a tangent, it must
  define a `jvp` staticmethod.

The active levels are part of a compiled function's entry key (compiler/keys.py), so a
path traced outside a transform is not reused inside one, where applying a Function may
raise. `batched` holds the batch elements vmap is running the function on, for the check
that Python does not take a number from a value computed from them (func/_vmap_scalars.py).
Kept free of imports: autograd/function.py, Tensor methods and the compiler read it.
"""
import contextlib
import contextvars

_levels = contextvars.ContextVar("tracegrad_func_levels", default=())
_batched = contextvars.ContextVar("tracegrad_vmap_batched", default=())

GRAD, VMAP, FORWARD = "grad", "vmap", "jvp"


def active():
    """The kinds of the active transforms, outermost first (empty outside transforms)."""
    return _levels.get()


@contextlib.contextmanager
def level(*kinds):
    """Run the body as inside transform(s) of `kinds` (GRAD, VMAP, FORWARD)."""
    token = _levels.set(_levels.get() + kinds)
    try:
        yield
    finally:
        _levels.reset(token)


def batched_tensors():
    """The batch elements of the active vmaps (empty outside vmap)."""
    return _batched.get()


@contextlib.contextmanager
def batched(tensors):
    """Run the body as vmap's function body on batch elements `tensors`."""
    token = _batched.set(_batched.get() + tuple(tensors))
    try:
        yield
    finally:
        _batched.reset(token)
