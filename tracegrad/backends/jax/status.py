"""A compiled program's runtime checks and path guards answered in one transfer (Note [One
status transfer]).

Note [One status transfer]
A lowered program returns its guards' values (to choose the path, Note [Guards]) and one
flag for all its runtime checks (Note [Errors inside compiled programs] in codegen.py).
Reading each back is one device-to-host conversion of a jax Array, about 10 to 20 us of
Python apiece: a training step with three guards (the loss's target checks) spent more on
them than on the rest of its Python. So where a program has guards, its result ends with
one bool pair instead, `[some check failed, some guard may have failed]`, computed in the
program: a guard on a scalar (kinds bool, int, float, item, whose expected value is a
Python number) is compared there, exactly as `same_outcome` compares it on the host (NaN
equals NaN; a bool guard is `value != 0`); any other guard counts as "may have failed".
Only when that second flag is set does the host read the guards' values and decide as
before, raising GuardFailed with the actual value; so a path is never kept on a guard the
host would have refused.
"""
import numbers

import jax.numpy as jnp
import numpy as np

_SCALAR_KINDS = ("bool", "int", "float", "item")


def _in_graph(gd, val):
    """A jax bool: guard `gd` holds for `val`; None when only the host can tell."""
    exp = gd.expected
    if gd.kind not in _SCALAR_KINDS or type(exp) not in (bool, int, float) \
            or getattr(val, "size", 0) != 1:
        return None
    v = jnp.reshape(val, ())
    kind = np.dtype(v.dtype).kind
    if gd.kind == "bool":
        return (v != 0) == exp if type(exp) is bool else None
    if gd.kind == "float" and kind != "f" or gd.kind == "int" and kind not in "iub":
        return None                   # (a conversion the host does, compared there)
    if gd.kind == "item" and (kind == "f") != (type(exp) is float):
        return None
    if type(exp) is float and exp != exp:
        return jnp.isnan(v)
    if isinstance(exp, numbers.Integral) and kind in "iu":
        info = np.iinfo(v.dtype)
        if not info.min <= exp <= info.max:
            return None
    return v == exp


def status(guards, gvals, bad):
    """`[bad, some guard may have failed]` as one jax bool array."""
    holds = [_in_graph(gd, v) for gd, v in zip(guards, gvals)]
    may_fail = (jnp.asarray(True) if any(h is None for h in holds)
                else ~jnp.all(jnp.stack(holds)))
    return jnp.stack([jnp.asarray(False) if bad is None else bad, may_fail])


def with_status(fn, guards):
    """`fn` (results ..., guard values, check flag) with the check flag replaced by the
    status pair when there are guards (Note [One status transfer]); `fn` itself otherwise."""
    if not guards:
        return fn

    def with_pair(*arrays):
        *rest, gv, cv = fn(*arrays)
        return (*rest, gv, status(guards, gv, cv))
    return with_pair
