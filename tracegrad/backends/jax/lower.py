"""Lowering: an IR Graph becomes one Python function over jax.numpy, ready for `jax.jit`.

    lowered = lower(graph)
    outs, guard_values, checks = lowered.fn(*input_arrays, *host_arrays)

Every node runs its rule from `RULES` (table.py); the result is cast to the node's IR dtype
and its shape checked against the IR type, so a rule that disagrees with the numpy kernel is
caught when the path is built (the path then falls back to numpy), never at run time.

Note [Host draws]
tracegrad's Generator stays the source of truth for randomness: random nodes (`rand`, `randn`,
`randint`, `randperm`, `dropout_noise`, `manual_seed`) are not lowered. `host_draws(arrays)`
runs them on the host with their numpy kernels, in program order, before the jitted call,
and their results enter the program as extra inputs. Masks and samples are therefore the
numpy backend's, bit for bit, and `manual_seed` reproduces runs. A draw whose distribution
reads traced values (`multinomial`'s weights) is split (`DRAWS`, table.py): its raw random
numbers, of a static shape, are drawn on the host the way its kernel draws them, and its
rule, inside the program, turns them into the sample (reading them as `ctx.draws[node]`).

Note [Data-dependent shapes]
A boolean mask selects as many elements as it has True values: data, which XLA cannot make a
shape of. But a path is specialised to the count seen while tracing (the tracer guards the
result's shape), so a rule gives the result its traced static shape (`jnp.nonzero(mask,
size=count)`) and reports the shape the numpy program would have produced with
`ctx.actual_shape(value, dims)`; the shape guard compares that. When the count differs the
guard fails and the call re-traces, before anything computed with the wrong count is used.

Note [Guards in a jitted program]
A jitted program cannot stop half-way. The lowered function returns, besides the outputs,
the value behind every guard and one flag, True when any runtime check failed. The host
first reads the flag: when set, the call is re-run by the numpy program, which meets guards
and errors in program order itself. Otherwise it walks the guards in order and raises
`GuardFailed(k, actual)` at the first whose outcome differs, exactly as the numpy program
would have. Nothing the program computed is visible before that walk
(input mutations are copied back by the caller afterwards, and the caller restores the
generators), so computing past a failing guard is harmless.
"""
import threading

import jax.numpy as jnp
import numpy as np

from ...ir.graph import Value
from ...ir.interpret import guard_outcome, same_outcome
from ...ops import creation as K
from ...ops import generator as G
from ...ops.dropout import DROPOUT_NOISE
from . import rules_elementwise, rules_misc, rules_reduction, rules_shape  # noqa: F401
from . import rules_fused, rules_more, rules_linalg, rules_special  # noqa: F401
from . import rules_math_more  # noqa: F401,E402
from ...tracing.custom_function import OPAQUE
from .callback import opaque_rule
from .rules_more import scan_needs_x64
from .table import DRAWS, RULES, Unsupported

HOST_PRIMS = frozenset([K.RAND, K.RANDN, K.RANDINT, K.RANDPERM, G.SEED, DROPOUT_NOISE])
_WIDE = ("float64", "int64")


class LoweringError(Exception):
    """A rule's result disagrees with the IR type of its node (the path falls back)."""


class Ctx:
    """What a rule may use besides its operands: runtime checks and the x64 mode."""

    def __init__(self, x64):
        self.x64 = x64
        self.checks = []            # (node position, 0-d bool: True = rerun on numpy)
        self.position = 0
        self.shapes = {}            # Value -> its actual shape, where that is data (masks)
        self.mask_counts = {}       # mask Value -> traced number of True elements
        self.draws = {}             # node of a split draw -> its host-drawn random numbers
        self.guards = []            # (Guard, its traced value) of the guards met so far

    def check(self, bad):
        self.checks.append((self.position, jnp.asarray(bad, dtype=bool).reshape(())))

    def actual_shape(self, value, dims):
        """Record the shape `value` really has on this call (Note [Data-dependent shapes])."""
        self.shapes[value] = dims


def _float32(a):
    """A float16 operand as float32 (Note [Half precision computed in float] in
    ops/half_precision.py); anything else as it is."""
    return a.astype(jnp.float32) if getattr(a, "dtype", None) == jnp.float16 else a


def rule_for(prim):
    """The lowering rule of `prim` (an in-place variant lowers as its functional op; a custom
    Function's opaque primitive as a host callback, callback.py)."""
    r = RULES.get(prim)
    if r is None and prim.functional is not None:
        r = RULES.get(prim.functional)
    if r is None and prim in OPAQUE:
        r = opaque_rule
    return r


class Lowered:
    """A graph lowered to `fn`, plus what the host does around the call."""

    def __init__(self, graph):
        self.graph = graph
        self.host_nodes = [n for n in graph.nodes if n.prim in HOST_PRIMS or n.prim in DRAWS]
        for n in graph.nodes:
            if n.prim in HOST_PRIMS:
                if any(isinstance(a, Value) for a in n.inputs):
                    raise Unsupported(n.prim, "a random draw reading traced values")
            elif rule_for(n.prim) is None:
                raise Unsupported(n.prim, "no lowering rule")
        self.opaque = any(n.prim in OPAQUE for n in graph.nodes)
        self.memo_cell = [None]          # the calling call's ForwardMemo (callback.py)
        self.memo_lock = threading.Lock()
        self.x64 = (any(v.type.dtype.name in _WIDE for v in graph.all_values())
                    or any(scan_needs_x64(n) for n in graph.nodes))
        self.wide_ints = {}             # Note [Python ints past jax's integers]
        for n in graph.nodes:
            if n.prim not in HOST_PRIMS:
                wide = _wide_int_operands(n, self.x64)
                if wide:
                    self.wide_ints[n] = wide
        self.n_checks = None            # filled by the first trace of `fn`

    def host_draws(self):
        """Results of the random nodes, drawn now from their generators (Note [Host draws])."""
        out = []
        for n in self.host_nodes:
            if n.prim in DRAWS:
                out.append(DRAWS[n.prim][0](n))
            else:
                out.append(n.prim.kernel(*n.inputs, **n.attrs))
        return out

    def host_types(self):
        """The IR types of `host_draws()`'s arrays (extra inputs of the program)."""
        from ...ir.types import TensorType
        from ... import _dtype as D
        out = []
        for n in self.host_nodes:
            if n.prim in DRAWS:
                shape, dt = DRAWS[n.prim][1](n)
                out.append(TensorType(tuple(shape), D._FROM_NP[np.dtype(dt)]))
            else:
                out.append(n.output.type)
        return out

    def generators(self):
        return list({id(a): a for n in self.host_nodes for a in n.inputs
                     if isinstance(a, G.Generator)}.values())

    def fn(self, *arrays):
        g = self.graph
        n_in = len(g.inputs)
        env = dict(zip(g.inputs, arrays[:n_in]))
        ctx = Ctx(self.x64)
        ctx.memo_cell = self.memo_cell
        for n, a in zip(self.host_nodes, arrays[n_in:]):
            if n.prim in DRAWS:
                ctx.draws[n] = a
            else:
                env[n.output] = a
        at = {}
        for gd in g.guards:
            at.setdefault(gd.position, []).append(gd)
        for i, n in enumerate(g.nodes):
            for gd in at.get(i, ()):     # met before node i (Note [Callbacks behind guards])
                ctx.guards.append((gd, _guard_value(ctx, gd, env)))
            if n.prim in HOST_PRIMS:
                continue
            ctx.position = i
            args = [env[a] if isinstance(a, Value) else a for a in n.inputs]
            wide = self.wide_ints.get(n)
            if wide:
                for k, a in wide.items():
                    args[k] = a
            if n.prim.half_in_float and n.output.type.dtype.np == np.float16:
                args = [_float32(a) for a in args]   # Note [Half precision computed in
            env[n.output] = _typed(rule_for(n.prim)(ctx, n, *args), n)   # float]
        self.n_checks = len(ctx.checks)
        outs = [env[v] if v is not None else None for v in g.outputs]
        guards = [_guard_value(ctx, gd, env) for gd in g.guards]
        bad = None                  # one flag for all checks: one transfer per call
        if ctx.checks:
            bad = jnp.any(jnp.stack([c for _, c in ctx.checks]))
        return outs, guards, bad


def _wide_int_operands(node, x64):
    """{operand position: its replacement} for the Python int literals of `node` that jax
    cannot take as they are.

    Note [Python ints past jax's integers]
    jax turns a Python int operand into a weakly typed int32 (int64 under x64) and raises
    OverflowError when it does not fit ("An overflow was encountered while parsing an
    argument to a jitted computation"), where eager numpy computes `x * 2**40` on a
    float32 tensor by converting the int to float32 (NEP 50: a Python scalar takes the
    tensor's dtype). Next to a floating operand, such an int becomes a numpy scalar of that
    operand's dtype, the same conversion; with only integer operands (where eager wraps
    around or raises as numpy does) the node is not lowered and the path runs on the numpy
    backend."""
    lo, hi = (-2 ** 63, 2 ** 63 - 1) if x64 else (-2 ** 31, 2 ** 31 - 1)
    wide = [k for k, a in enumerate(node.inputs)
            if type(a) is int and not lo <= a <= hi]
    big_attr = any(type(v) is int and not lo <= v <= hi for v in node.attrs.values())
    if not wide and not big_attr:
        return None
    floats = [a.type.dtype.np for a in node.inputs
              if isinstance(a, Value) and np.issubdtype(a.type.dtype.np, np.floating)]
    if big_attr or not floats:
        raise Unsupported(node.prim, "a Python int operand past jax's integer range")
    return {k: np.asarray(node.inputs[k], dtype=floats[0]) for k in wide}


def _guard_value(ctx, gd, env):
    return _shape_of(ctx, gd.value) if gd.kind == "shape" else env[gd.value]


def guard_holds(gd, val):
    """Whether guard `gd` holds for its value `val` as the program computed it."""
    if gd.kind == "shape":                   # Note [Data-dependent shapes]
        actual = tuple(np.asarray(val).tolist())
    else:
        actual = guard_outcome(gd.kind, np.asarray(val))
    return same_outcome(actual, gd.expected), actual


def _shape_of(ctx, v):
    """A shape guard's observed value: the actual shape as an int array."""
    dims = ctx.shapes.get(v, v.type.shape)
    if not dims:
        return jnp.zeros((0,), jnp.int32)
    return jnp.stack([jnp.asarray(d, jnp.int32) for d in dims])


def _typed(r, node):
    want = node.output.type
    r = jnp.asarray(r)
    if r.dtype != want.dtype.np:
        r = r.astype(want.dtype.np)
    if tuple(r.shape) != tuple(want.shape):
        raise LoweringError(f"the rule of '{node.prim.name}' gives shape {tuple(r.shape)}, "
                            f"the IR says {tuple(want.shape)}")
    return r


def lower(graph):
    """`Lowered` for `graph`; raises `Unsupported` naming the first primitive without a rule."""
    return Lowered(graph)
