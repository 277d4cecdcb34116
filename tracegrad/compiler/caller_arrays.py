"""The caller's numpy arrays a traced call touched: one it wrote into, or one a returned
tensor's memory lies in. A cached path cannot reproduce either (it replays recorded ops on
its own copy of the values), so such calls run eagerly (compiler/function.py)."""
from .._tensor import Tensor


def written_array(arrays):
    """The name of the first numpy array argument whose contents the traced call changed,
    or None.

    Note [Writes into numpy array arguments]
    A numpy array argument keys the entry by its contents (compiler/keys.py): the trace
    bakes its values in. A write into it (`torch.from_numpy(arr).add_(x)`, `arr[0] = v`,
    `np.asarray(t)` of a tensor over it) changes the caller's array, which a cached path,
    replaying only recorded ops on its own copy of the values, would not: such calls run
    eagerly, with a warning."""
    for name, a, before in arrays:
        if a.shape != before.shape or a.tobytes() != before.tobytes():
            return name
    return None


# Note [Numpy arrays returned]
# `return loss, preds.numpy()` (or `np.asarray(t) * 2`) hands the caller a numpy array the
# IR never saw being made: a cached path could only return the very object the trace
# returned, holding the first call's values. So such calls run eagerly, with a warning
# naming the reason, and return what eager returns; so do calls returning any other object
# a strict `flatten` cannot rebuild per call (a module, a function, a generator, an object
# with slots): eager returns it, so an error would be a difference too.


def returns_callers_array(outs, arrays, guards):
    """What numpy array of the caller's (an argument, or one the state scan found: a global,
    a closure's, a module's attribute) an output tensor's memory lies in, or None.

    Note [Tensors over the caller's arrays]
    `return torch.from_numpy(buf)` (or `as_tensor`) eagerly returns a tensor over `buf`'s
    memory: a later write to either shows in the other. The trace records it as a constant
    guarded by `buf`'s values, and a cached call would return a copy. Such calls run
    eagerly, with a warning."""
    from .._tensor_storage import _root
    roots = {id(_root(a)): f"numpy array argument '{name}'" for name, a, _ in arrays}
    for g in guards:
        if g.mode == "array":
            roots.setdefault(id(_root(g.expected[0])), f"the numpy array at {g.where}")
    if not roots:
        return None
    for o in outs:
        if isinstance(o, Tensor):
            where = roots.get(id(_root(o._data)))
            if where is not None:
                return where
    return None
