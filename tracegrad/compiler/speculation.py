"""Speculative backward: a compiled call computes its input gradients with its forward.

Note [Speculative backward]
A training loop on a compiled loss does `loss = f(x, w); loss.backward()`: two XLA calls
per iteration on the JAX backend (the forward program, then the backward program from the
node), each costing about 10 us of dispatch on a small machine, plus the conversions around
them. When the path's only differentiable output is a floating scalar and the last call of
the path was followed by a backward whose gradient for that output was exactly one (the
default `backward()`), the next call speculates: it runs one XLA program (SpeculativeProgram,
backends/jax/speculative.py) computing the forward's results and the input gradients for a seed
of one, and stashes the gradients on the call's CompiledFunctionBackward node.

The node's backward uses the stash only where the normal backward program would have been
given the same values, i.e. after every check the normal backward makes, in the same order
(freed graph, anomaly warning, version counters of the saved inputs and of the checked
outputs: an in-place change between forward and backward still raises eager's error), when
grad mode is off (no create_graph: double backward replays the graph differentiably, as
without speculation), and when the incoming gradient is a 0-d array of the output's dtype
equal to one (so a hook on the loss or node that changes it, a `gradient=` other than one,
or `autograd.grad(loss, ..., grad_outputs=g)` run the normal program). What the engine does
with the returned gradients is unchanged (hooks on inputs, `retain_grad`, accumulation into
`.grad`, `autograd.grad` subsets, `inputs=`). A stash is used at most once: a second
backward (`retain_graph=True`) runs the normal program, since the first may have adopted
the stashed arrays as `.grad` and the user may have written into them since. Nor is it used
after any eager in-place write ran since the call (`_dispatch.EAGER_WRITES`): a write through
`.data` or `detach()` of a saved input passes its version counter, and eager's backward reads
the new contents (so does the backward program, reading the input's array). A write through
a `numpy()` view passes even that count: such a write between forward and backward is the
one a speculating call does not see.

The forward results come from the fused program: equal to the forward program's within
float tolerance (XLA may fuse differently), as the JAX backend already promises against
the numpy backend; in the measured cases they are bitwise equal.

Adaptivity: a call speculates only when the previous call's node saw a backward with a
gradient of one (`Speculation.on`), and a speculative call whose gradients were never
used by the time the path is called again (no backward: an evaluation loop) turns it off,
so an eval loop pays for one fused call at most, then a flag check per call. Memory: the
stashed gradients live until the backward uses them or the node dies. The fused program is
compiled by the first call that speculates (the second call of a training loop), not by
the tracing call: a path never differentiated this way never pays for it. `explain()`
says whether it was built and whether the path is speculating.

Measured on the 200-op chain of bench/backends.py (shape (4,), 2 shared cores), with Note
[One node feeding leaves] (engine.py) and the x64 saving of JaxProgram: a training
iteration went from 0.42 to 0.30 us per op in a loop of its own (min over rounds; medians
0.45 and 0.31), from 0.53-0.58 to 0.44-0.45 inside the bench's interleaved rounds; the
eval-only call is unchanged (29-30 us). The fused program's XLA call costs 14.4 us against
10.0 (forward) plus 14.8 (backward). A 64-32-10 MLP loss with `.backward()` outside: 248
instead of 308 us per step. Packing the small results into one buffer to save transfers
was tried and dropped: XLA's call of the chain's program became 113 us instead of 14.
"""


from .._dispatch import EAGER_WRITES


def unwritten(box):
    """Whether no eager in-place write ran since the stash in `box` was made."""
    return box[1] == EAGER_WRITES[0]


class Speculation:
    """Per-path speculation state (see the Note). `build()` makes the fused program; the
    runner asks `start()` per call, the node reports each backward with `backward(one)`."""
    __slots__ = ("build", "program", "on", "box", "failed")

    def __init__(self, build):
        self.build = build           # () -> SpeculativeProgram or None
        self.program = None
        self.on = False              # the last call was followed by a backward seeded with one
        self.box = None              # [used] of the last speculative call's stash
        self.failed = False

    def start(self):
        """The program this call runs when it speculates, else None."""
        if not self.on:
            return None
        box = self.box
        if box is not None and not box[0]:   # the last stash went unused: stop guessing
            self.on, self.box = False, None
            return None
        prog = self.program
        if prog is None and not self.failed:
            try:
                prog = self.program = self.build()
            except Exception:                # a program XLA will not fuse: never again
                prog = None
            if prog is None:
                self.failed = True
        return prog

    def stashed(self, node, grads):
        """The speculative call's `grads` are kept on `node` until its backward."""
        node.stash = grads
        node.spec_box = self.box = [False, EAGER_WRITES[0]]


def is_one(g, dtype):
    """Whether gradient tensor `g` is exactly the default seed of a scalar output of numpy
    dtype `dtype`: 0-d, that dtype, equal to one."""
    d = g._data
    return d.shape == () and d.dtype == dtype and d.item() == 1
