"""`Tensor.register_post_accumulate_grad_hook`: hooks that run after a leaf's `.grad` has
been updated by backward (PyTorch's way to step an optimizer per parameter during backward).

Note [Post-accumulate-grad hooks]
A post hook lives in the leaf's gradient-hook list (`_leaf_hooks`, the list `register_hook`
keeps and installs as the AccumulateGrad's pre-hooks) wrapped in `PostAccumulateHook`,
which does nothing as a pre-hook. Keeping it in that one list means everything that already
watches a leaf's hooks watches these too: a compiled path that ran backward into the leaf
checks on every call that the leaf's hook list is the one it traced with (trace_plan.py
`_hook_checks`), so a post hook registered or removed between calls is a different
program, never silently skipped. After accumulating, AccumulateGrad calls them in
registration order with the tensor (`hook(t)`, under the backward's grad mode); a hook
returning a Tensor is PyTorch's RuntimeError ("should return None"), anything else but None
its TypeError. `autograd.grad` accumulates nothing and
so runs none. Inside a traced function, a backward that reaches a leaf with post hooks runs
them and reports an effect: the calls run eagerly, with a warning (Note [Effects]), since
what a hook does (often an in-place optimizer step) is arbitrary Python.
"""
from .. import _effects
from .._errors import TracegradRuntimeError, TracegradTypeError
from .._tensor import Tensor


class PostAccumulateHook:
    """A post-accumulate-grad hook in a leaf's hook list: a no-op as a gradient pre-hook."""

    __slots__ = ("fn",)

    def __init__(self, fn):
        self.fn = fn

    def __call__(self, grad):
        return None


def run_post_hooks(var, hooks):
    """Call the post-accumulate-grad hooks among `hooks` (a leaf's list) with `var`."""
    posts = [h for h in hooks if type(h) is PostAccumulateHook]
    if not posts:
        return
    _effects.note("hook", "a post-accumulate-grad hook (register_post_accumulate_grad_hook)",
                  var)
    for h in posts:
        r = h.fn(var)
        if isinstance(r, Tensor):
            raise TracegradRuntimeError("Tensor post accumulate grad hooks should return None.")
        if r is not None:
            raise TracegradTypeError(
                f"expected Variable, but hook returned '{type(r).__name__}'")
