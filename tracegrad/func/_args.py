"""Argument plumbing shared by the `tracegrad.func` transforms.

- `normalize_argnums`: an int or a tuple of ints, checked like torch.func (negative counts from
  the end); errors are RuntimeErrors with torch.func's wording.
- `Primals`: the differentiated arguments (each a tensor or a tuple/list/dict of tensors) as
  fresh leaves the transform differentiates with respect to. The caller's tensors are never
  modified: one that does not require grad is replaced by `detach().requires_grad_()` (a new
  tensor object over the same storage); one that does (a nested transform's input, or a
  parameter) by a differentiable view of it, so gradients keep flowing to outer levels.
- `depends_on_outer`: does a result reach any tensor requiring grad other than our own leaves?
  Only then are gradients recorded with `create_graph=True` (higher order, or a closure over
  a parameter); otherwise results come back detached, as torch.func returns them.
"""
from collections import deque

from .._errors import TracegradRuntimeError, TracegradValueError, op_error
from .._tensor import Tensor
from ..autograd.graph import AccumulateGrad
from ..tracing import flatten


def _err(cls, msg):
    """torch.func's message, plus the user's file:line."""
    return op_error(cls, None, msg)


def normalize_argnums(argnums, n_args):
    """(tuple of non-negative argument positions, whether `argnums` was a single int)."""
    single = isinstance(argnums, int) and not isinstance(argnums, bool)
    nums = (argnums,) if single else argnums
    if not isinstance(nums, tuple) or not all(
            isinstance(a, int) and not isinstance(a, bool) for a in nums):
        raise _err(TracegradRuntimeError,
            f"argnums must be int or Tuple[int, ...], got: {type(argnums)}")
    if not nums:
        raise _err(TracegradRuntimeError, "argnums must be non-empty")
    out = []
    for a in nums:
        if not -n_args <= a < n_args:
            raise _err(TracegradRuntimeError,
                f"Got argnum={a}, but only {n_args} positional inputs")
        out.append(a % n_args)
    if len(set(out)) != len(out):
        raise _err(TracegradRuntimeError, f"argnums elements must be unique, got {argnums}")
    return tuple(out), single


class Primals:
    """The differentiated arguments, replaced by leaves of this transform level.

    `connect`: grad mode was on when the transform was called, so arguments requiring grad
    get a differentiable alias (results may flow to outer levels) instead of a detached one.
    """

    def __init__(self, args, argnums, connect):
        self.args = list(args)
        self.argnums = argnums
        self.leaves = []            # our leaves, in argnums order then pytree order
        self.builds = []            # per argnum: rebuild its structure from a leaf list
        self.counts = []
        for a in argnums:
            leaves, build = flatten(self.args[a])
            mine = [_own_leaf(t, connect) for t in leaves]
            self.args[a] = build(mine)
            self.leaves += mine
            self.builds.append(build)
            self.counts.append(len(mine))

    def structure(self, flat):
        """Per argnum, `flat` (one item per leaf) rebuilt in that argument's structure."""
        out, k = [], 0
        for build, n in zip(self.builds, self.counts):
            out.append(build(list(flat[k:k + n])))
            k += n
        return out


def _own_leaf(t, connect):
    if not isinstance(t, Tensor):
        raise _err(TracegradValueError,
            f"Thing passed to transform API must be Tensor, got {type(t)}")
    if connect and t.requires_grad:
        return t.view_as(t)          # differentiable alias: outer levels see through it
    return t.detach().requires_grad_()


def depends_on_outer(tensors, own):
    """True if any of `tensors` reaches a leaf requiring grad that is not one of `own`."""
    own_ids = {id(t) for t in own}
    seen = set()
    todo = deque(t.grad_fn for t in tensors if isinstance(t, Tensor) and t.grad_fn is not None)
    for t in tensors:
        if isinstance(t, Tensor) and t.requires_grad and t.grad_fn is None \
                and id(t) not in own_ids:
            return True
    while todo:
        fn = todo.popleft()
        if id(fn) in seen:
            continue
        seen.add(id(fn))
        if isinstance(fn, AccumulateGrad):
            if id(fn.variable) not in own_ids:
                return True
            continue
        for e in getattr(fn, "edges", ()):
            if e is not None and e[0] is not None:
                todo.append(e[0])
    return False


def split_aux(result, has_aux, api):
    """(output, aux) of `f`'s result, checking the `(output, aux)` convention."""
    if not has_aux:
        return result, None
    if not (isinstance(result, tuple) and len(result) == 2):
        raise _err(TracegradRuntimeError,
            f"{api}(f)(*args): output of function f should be a tuple: (output, aux) "
            "if has_aux is True")
    return result


def check_scalar(out, api):
    """grad needs a Tensor with 0 dimensions (torch.func's error otherwise)."""
    if not isinstance(out, Tensor):
        raise _err(TracegradRuntimeError,
            f"{api}(f)(*args): Expected f(*args) to return a Tensor, got {type(out)}")
    if out.dim() != 0:
        raise _err(TracegradRuntimeError,
            f"{api}(f)(*args): Expected f(*args) to return a scalar Tensor, got tensor with "
            f"{out.dim()} dims. Maybe you wanted to use the vjp or jacrev APIs instead?")


def tensor_leaves(obj, what):
    """The leaves of an output pytree, which must all be tensors."""
    leaves, build = flatten(obj)
    for x in leaves:
        if not isinstance(x, Tensor):
            raise _err(TracegradRuntimeError,
                f"{what}: Expected f to return only Tensors, got unsupported type {type(x)}")
    return leaves, build


def detach_tree(obj):
    """`obj` with every tensor leaf detached (other leaves as they are)."""
    leaves, build = flatten(obj)
    return build([x.detach() if isinstance(x, Tensor) else x for x in leaves])
