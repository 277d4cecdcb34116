"""`loss.backward()` on a speculating compiled call's loss, straight from the stash
(Note [Backward from the stash]).

Note [Backward from the stash]
A training loop's `loss.backward()` after a speculating compiled call (Note [Speculative
backward] in speculation.py) has little left to do: the node holds the input gradients
already, and each goes to a leaf's `.grad`. The general route to them is long: `Tensor.
backward` -> `autograd.backward` (argument lists, the seed `ones` made and wrapped) ->
`run_backward` (the root's edge) -> `_one_node` (Note [One node feeding leaves] in engine.py)
-> `apply_and_release` -> `apply` -> `_apply` (which then finds the seed equal to one and
the stash usable): about 6 us of the 200-op chain's step on the JAX backend, beside the
accumulation itself.

`backward_from_stash(t)` takes the short route when `t.backward()` was called with every
argument at its default and each question of the general route has the answer that leads
to the stash: `t` is the node's only cotangent output, a 0-d tensor of the output's dtype
(so the seed `_make_grads` would make is exactly one), not a view; no hook on the node, no
anomaly detection, no enclosing trace; every edge leads to a distinct leaf's accumulator
without pre-hooks; the node is not released, has no deferred in-place error, its saved and
checked tensors kept their versions, and no eager in-place write ran since the call. Then
it does what the general route does, in the same order: speculation stays on, the stash is
taken and marked used, the gradients are wrapped (`_fresh_gradients`), the node releases
its saved values (when eager's graph would have held some, Note [Second backward]), and
each gradient is accumulated into its leaf with grad mode off (leaf hooks, `.grad`
accumulation and adoption unchanged). Otherwise it returns False having changed nothing,
and the general route runs (raising the version error, the freed-graph error, ... as it
always did).
"""
from .. import _effects, _mode
from .._dispatch import EAGER_WRITES
from ..autograd.anomaly_mode import STATE as _ANOMALY
from ..autograd.engine import accumulate_into_leaves, only_plain_leaves
from .backward_node import CompiledFunctionBackward, _fresh_gradients

_set_grad = _mode._grad_enabled.set
_reset_grad = _mode._grad_enabled.reset


def backward_from_stash(t):
    """`t.backward()` done from the stash of `t`'s compiled node; False (nothing done) when
    the general route must run (see the Note)."""
    node = t._grad_fn
    if type(node) is not CompiledFunctionBackward or t._base is not None:
        return False
    stash = node.stash
    if stash is None or node.released or node.pre_hooks or node.hooks:
        return False
    path = node.path
    part = path.part
    k = part.cotangent_outputs[0]
    d = t._data
    if t._output_nr != k or d.shape != () or d.dtype != node.out_meta[k][1] \
            or path.deferred_errors or node.spec_box[1] != EAGER_WRITES[0] \
            or _ANOMALY["enabled"] or _effects.active() is not None:
        return False
    for vc, v, _ in node.checks:
        if vc.v != v:
            return False
    if not only_plain_leaves(node):
        return False
    # the general route from here on, with its answers known
    path.speculation.on = True
    node.stash = None
    node.spec_box[0] = True
    grads = _fresh_gradients(stash)
    if path.eager_saves:                     # Note [Second backward] in backward_node.py
        node.release()
    token = _set_grad(False)
    try:
        accumulate_into_leaves(node, grads, False)
    finally:
        _reset_grad(token)
    return True
