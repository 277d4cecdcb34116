"""Reference interpreter over the IR: runs nodes one by one with their numpy kernels.

Slower than generated code and deliberately simple; tests use it to cross-check the code
generator, and passes use it to obtain concrete values for a graph.
"""
import numpy as np

from .graph import Value


class GuardFailed(Exception):
    """A guard's outcome differed from the traced one (carries index and actual outcome)."""

    def __init__(self, index, actual):
        super().__init__(index, actual)
        self.index, self.actual = index, actual


def guard_outcome(kind, arr):
    if kind == "bool":
        return bool(arr.reshape(()).item())
    if kind == "item":
        return arr.reshape(()).item()
    if kind == "float":
        return float(arr.reshape(()).item())
    if kind == "int":
        return int(arr.reshape(()).item())
    if kind == "tolist":
        return arr.tolist()
    if kind == "shape":
        return tuple(arr.shape)
    if kind == "numpy":
        return arr
    raise ValueError(f"unknown guard kind {kind}")


def same_outcome(a, b):
    if isinstance(a, np.ndarray) or isinstance(b, np.ndarray):
        return np.array_equal(a, b, equal_nan=True)
    if isinstance(a, float) and isinstance(b, float) and a != a and b != b:
        return True
    return a == b and type(a) is type(b) or (a == b and not isinstance(a, bool)
                                             and not isinstance(b, bool))


def interpret(graph, inputs, values=None, check_guards=True):
    """Evaluate `graph` on input arrays; returns the output arrays (list).

    `values`, if given, is filled with every computed Value -> array.
    """
    env = dict(zip(graph.inputs, inputs))
    guards = {}
    for k, gd in enumerate(graph.guards):
        guards.setdefault(gd.position, []).append((k, gd))
    for i, n in enumerate(graph.nodes):
        if check_guards:
            _check(guards.get(i, ()), env)
        args = [env[a] if isinstance(a, Value) else a for a in n.inputs]
        res = n.prim.kernel(*args, **n.attrs)
        env[n.output] = np.asarray(res) if not isinstance(res, np.ndarray) else res
    if check_guards:
        _check(guards.get(len(graph.nodes), ()), env)
    if values is not None:
        values.update(env)
    return [env[v] if v is not None else None for v in graph.outputs]


def _check(gds, env):
    for k, gd in gds:
        actual = guard_outcome(gd.kind, env[gd.value])
        if not same_outcome(actual, gd.expected):
            raise GuardFailed(k, actual)
