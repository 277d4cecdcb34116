"""`tracegrad.utils.checkpoint.checkpoint`: activation checkpointing, PyTorch's two variants
with their observable behaviour (tracegrad does not need the memory it saves, but programs
that use it must run and give PyTorch's values, gradients and side effects).

Note [Checkpoint recomputation]
PyTorch runs a checkpointed function twice: once forward, once again during backward to
rebuild what it did not keep. The second run is visible: a BatchNorm inside updates its
running statistics twice, a counter in the function counts two calls. Both runs see the
same random numbers (the CPU generator state is saved and restored around the second,
`preserve_rng_state=True`), so dropout masks agree and the gradient equals the plain one.
- use_reentrant=True (the default when not passed, with PyTorch's warning): a custom
  `autograd.Function`: forward under no_grad, so with no tensor input requiring grad the
  output requires none (PyTorch's warning "None of the inputs have requires_grad=True");
  its backward re-runs the function with grad on detached inputs and backpropagates
  through that, into the inputs and into any parameters it uses. No keyword arguments.
- use_reentrant=False: the function runs with grad, as a plain call; the second run happens
  when backward first reaches one of its outputs (a pre-hook), for its side effects.
Inside a traced function either variant runs the call eagerly, with a warning: the second
run happens during backward, which a compiled program would not repeat.
"""
import contextlib
import warnings

from .. import _effects, _mode
from .._tensor import Tensor
from ..autograd.function import Function

__all__ = ["checkpoint", "checkpoint_sequential"]


def noop_context_fn():
    return contextlib.nullcontext(), contextlib.nullcontext()


def checkpoint(function, *args, use_reentrant=None, context_fn=noop_context_fn,
               determinism_check="default", debug=False, preserve_rng_state=True, **kwargs):
    """`function(*args, **kwargs)`, recomputed during backward (Note [Checkpoint
    recomputation])."""
    if use_reentrant is None:
        warnings.warn("torch.utils.checkpoint: the use_reentrant parameter should be passed "
                      "explicitly. Starting in PyTorch 2.9, calling checkpoint without "
                      "use_reentrant will raise an exception. use_reentrant=False is "
                      "recommended, but if you need to preserve the current default behavior, "
                      "you can pass use_reentrant=True. Refer to docs for more details on the "
                      "differences between the two variants.", stacklevel=2)
        use_reentrant = True
    _effects.note("checkpoint", "utils.checkpoint.checkpoint() (the function runs again "
                                "during backward)")
    if use_reentrant:
        if context_fn is not noop_context_fn or debug:
            raise ValueError("Passing `context_fn` or `debug` is only supported when "
                             "use_reentrant=False.")
        if kwargs:
            raise ValueError("Unexpected keyword arguments: " + ",".join(kwargs))
        return _Reentrant.apply(function, preserve_rng_state, *args)
    return _non_reentrant(function, preserve_rng_state, args, kwargs)


def _rng_state(preserve):
    from ..random import get_rng_state
    return get_rng_state() if preserve else None


@contextlib.contextmanager
def _replaying(state):
    """The generator at `state` inside the block, back where it was after it."""
    if state is None:
        yield
        return
    from ..random import get_rng_state, set_rng_state
    now = get_rng_state()
    set_rng_state(state)
    try:
        yield
    finally:
        set_rng_state(now)


class _Reentrant(Function):
    @staticmethod
    def forward(ctx, run_function, preserve_rng_state, *args):
        if not any(isinstance(a, Tensor) and a.requires_grad for a in args):
            warnings.warn("None of the inputs have requires_grad=True. Gradients will be None",
                          stacklevel=5)
        ctx.run_function, ctx.rng = run_function, _rng_state(preserve_rng_state)
        ctx.args = args
        with _mode.no_grad():
            return run_function(*args)

    @staticmethod
    def backward(ctx, *grads):
        from ..autograd import backward
        inputs = [a.detach().requires_grad_(a.requires_grad) if isinstance(a, Tensor) else a
                  for a in ctx.args]
        with _replaying(ctx.rng), _mode.enable_grad():
            outputs = ctx.run_function(*inputs)
        outputs = outputs if isinstance(outputs, tuple) else (outputs,)
        pairs = [(o, g) for o, g in zip(outputs, grads)
                 if isinstance(o, Tensor) and o.requires_grad]
        if not pairs:
            raise RuntimeError("none of output has requires_grad=True, this checkpoint() is "
                               "not necessary")
        backward([o for o, _ in pairs], [g for _, g in pairs])
        return (None, None) + tuple(a.grad if isinstance(a, Tensor) else None for a in inputs)


def _non_reentrant(function, preserve_rng_state, args, kwargs):
    rng = _rng_state(preserve_rng_state)
    out = function(*args, **kwargs)
    flat = out if isinstance(out, (tuple, list)) else (out,)
    nodes = {id(o.grad_fn): o.grad_fn for o in flat
             if isinstance(o, Tensor) and o.grad_fn is not None}
    fired = set()

    def recompute(grads):
        key = id(recompute.node)
        if not fired or key in fired:          # first output reached in this backward
            fired.clear()
            with _replaying(rng), _mode.enable_grad():
                function(*args, **kwargs)
        fired.add(key)

    for node in nodes.values():
        hook = _bind(recompute, node)
        node.register_prehook(hook)
    return out


def _bind(recompute, node):
    def hook(grads):
        recompute.node = node
        recompute(grads)
    return hook


def checkpoint_sequential(functions, segments, input, use_reentrant=None, **kwargs):
    """Run `functions` (a list of modules or functions, or an `nn.Sequential`) in order
    on `input`, checkpointing the first `segments - 1` of `segments` equal runs of them
    (the last run, with the remainder, is not checkpointed), as PyTorch does."""
    if use_reentrant is None:
        warnings.warn("torch.utils.checkpoint.checkpoint_sequential: the use_reentrant "
                      "parameter should be passed explicitly. In version 2.9 we will raise "
                      "an exception if use_reentrant is not passed. use_reentrant=False is "
                      "recommended, but if you need to preserve the current default "
                      "behavior, you can pass use_reentrant=True. Refer to docs for more "
                      "details on the differences between the two variants.", stacklevel=2)
        use_reentrant = True
    preserve = kwargs.pop("preserve_rng_state", True)
    if kwargs:
        raise ValueError("Unexpected keyword arguments: " + ",".join(kwargs))
    from ..nn import Sequential
    if isinstance(functions, Sequential):
        functions = list(functions.children())
    size = len(functions) // segments
    end = -1
    for start in range(0, size * (segments - 1), size):
        end = start + size - 1
        input = checkpoint(_run(functions, start, end), input, use_reentrant=use_reentrant,
                           preserve_rng_state=preserve)
    return _run(functions, end + 1, len(functions) - 1)(input)


def _run(functions, start, end):
    def forward(input):
        for j in range(start, end + 1):
            input = functions[j](input)
        return input
    return forward
