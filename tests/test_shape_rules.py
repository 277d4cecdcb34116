"""Shape rules (Note [Shape rules] in tracegrad/ops/shape_rules.py) against real kernels.

- Every op-table entry (tests/op_table.py) and a few programs for primitives the table does
  not reach (convolution, losses, RNG, no_grad writes, ...) is traced and compiled; for every
  node of the raw trace, of each stage of the compiled path (functionalize, the pipeline, the
  VJP graph) and of its final forward and backward programs, the rule applied to the
  operands' types must give the output type recorded from the kernel's result, and `verify`
  must accept the graph. Together they must reach every primitive that has a rule.
- `verify` rejects a graph whose node types disagree with the rules, naming node and shapes.
- Every primitive declares a rule, except an explicit allowlist of data-dependent ones.
Hand-written edge cases per category, against numpy and PyTorch: test_shape_rules_cases.py.
"""
import warnings
import zlib

import numpy as np
import pytest

import tracegrad as tg
from tracegrad.tracing.custom_function import OPAQUE
from op_table import OPS, flat_outputs, to_lib
from tracegrad.ir import IRError, verify
from tracegrad.ir.types import TensorType
from tracegrad.ops.primitive import REGISTRY
from tracegrad.ops.shape_rules import BoolShape, operand_shapes

# Primitives without a rule: their result's shape is data (the allowlist of the coverage test).
DATA_DEPENDENT = {
    "nonzero": "one row per nonzero element: how many is data",
}
# Declared but never dispatched by any op, so no traced graph can contain them: checked
# against their kernels in test_shape_rules_cases.py.
NOT_TRACEABLE = {"prod_except"}


# ---------------- graphs from real traces ----------------

def _loss(outs):
    loss = None
    for k, o in enumerate(outs):
        if o.dtype.is_floating_point and o.requires_grad:
            term = (o * (1.5 + k)).sum()
            loss = term if loss is None else loss + term
    return loss


def graphs_of(fn, args):
    """[(what, Graph)]: the raw trace of `fn(*args)`, each stage of its compiled path and the
    final forward and backward programs. `fn` returns a list of tensors."""
    def with_loss(*a):
        outs = fn(*a)
        return outs, _loss(outs)
    out = [("raw", tg.trace(with_loss, *args))]
    cf = tg.compile(with_loss)
    cf(*args)
    for path in cf.programs:
        out += [(name, g) for name, g in path.stages]
        out.append(("forward", path.forward))
        if path.backward is not None:
            out.append(("backward", path.backward))
    return out


def check_graph(what, g):
    """Every node's rule agrees with its recorded output shape; returns the primitives seen."""
    seen = set()
    for i, n in enumerate(g.nodes):
        rule = n.prim.shape_rule
        if rule is None and n.prim in OPAQUE:
            continue             # a user's autograd.Function: its forward decides the shape
        if rule is None:
            assert n.prim.name in DATA_DEPENDENT, f"{what}: {n.prim.name} has no shape rule"
            continue
        shapes = operand_shapes(n.inputs)
        got = rule(shapes, n.attrs)
        if got is None:          # only a boolean mask may make a shape data-dependent
            assert any(isinstance(s, BoolShape) for s in shapes[1:]), (what, i, n.prim.name)
            continue
        assert tuple(got) == n.output.type.shape, (
            f"{what}: node {i} {n.prim.name}{tuple(shapes)} {n.attrs}: rule gives {got}, "
            f"kernel gave {n.output.type.shape}")
        seen.add(n.prim.name)
    assert verify(g)
    return seen


def _op_program(info, sample):
    """(fn over the sample's tensor arguments, those tensors): other arguments are fixed."""
    args = [to_lib(tg, a, requires_grad=info.differentiable) for a in sample.args]
    pos = [i for i, a in enumerate(args) if isinstance(a, tg.Tensor)]

    def fn(*ts):
        full = list(args)
        for i, t in zip(pos, ts):
            full[i] = t
        return flat_outputs(info.op(tg, *full, **sample.kwargs))
    return fn, [args[i] for i in pos]


_CHECKED = {}        # ("op" | "extra", name) -> primitives checked (the coverage test reuses)


def op_table_prims(info):
    """Check every sample of `info` in every dtype; the primitives whose rules were checked."""
    if ("op", info.name) in _CHECKED:
        return _CHECKED["op", info.name]
    seen = set()
    for dtype in info.dtypes:
        rng = np.random.default_rng(zlib.crc32(f"shape/{info.name}/{dtype}".encode()))
        for sample in info.samples(rng, dtype):
            fn, ts = _op_program(info, sample)
            for what, g in graphs_of(fn, ts):
                seen |= check_graph(f"{info.name}{sample} {dtype} [{what}]", g)
    _CHECKED["op", info.name] = seen
    return seen


@pytest.mark.parametrize("info", [pytest.param(i, id=i.name) for i in OPS])
def test_rules_match_kernels_on_op_table(info):
    op_table_prims(info)


def _arr(*shape, dtype=np.float64, seed=0):
    return np.random.default_rng(seed).standard_normal(shape).astype(dtype)


def _t(*shape, grad=True, seed=0):
    return tg.tensor(_arr(*shape, seed=seed), requires_grad=grad)


def _conv(x, w):
    F = tg.nn.functional
    return [F.conv2d(x, w, stride=2, padding=1, dilation=1),
            F.conv2d(x, w, stride=(1, 2), padding=(0, 2), dilation=2),
            F.conv2d(x, w, padding="same")]


def _losses(x, y):
    F = tg.nn.functional
    t = tg.tensor([0, 2, 1, 2])
    lp = x.log_softmax(1)
    return [F.nll_loss(lp, t), F.nll_loss(lp, t, reduction="none"),
            F.nll_loss(lp, t, weight=tg.tensor([1.0, 2.0, 0.5], dtype=tg.float64),
                       reduction="sum", ignore_index=1),
            F.mse_loss(x, y), F.mse_loss(x, y, reduction="none"),
            F.mse_loss(x, y, reduction="sum")]


def _random(x):
    g = tg.Generator(3)
    g.manual_seed(5)
    r = tg.rand(2, 3, generator=g, dtype=tg.float64)
    n = tg.randn((3,), generator=g, dtype=tg.float64)
    i = tg.randint(0, 4, (2, 1), generator=g)
    return [x * r + n, i, tg.nn.functional.dropout(x, 0.5), tg.randperm(5, generator=g)]


def _logic(x, y):
    a, b = x > 0, y < 0
    return [tg.any(a), tg.all(b, 1, keepdim=True), a.any(0), tg.logical_or(a, b).float(),
            tg.logical_not(a).float(), (a ^ b).float(), ((x > 1) | b).all()]


def _unary_extras(x):
    F = tg.nn.functional
    y = x.clone()
    y.neg_()
    z = x.reshape(1, 2, 1, 3).squeeze((0, 2))
    return [F.gelu(x), F.gelu(x, approximate="tanh"), tg.erf(x), y, z, x.detach() * x]


def _nograd_writes(x, w):
    y = x * 2.0
    with tg.no_grad():
        y.mul_(3.0)                  # autograd keeps y's history: a nograd_write
        w.add_(1.0)                  # an input update, optimizer style
    d = x.detach()
    d.add_(1.0)                      # through a detached alias
    e = x.data
    e.mul_(2.0)                      # through `.data` (a version counter of its own)
    return [y * x, d, e]


def _fused(x, w, b, x4):
    """linear/addmm in every layout PyTorch records, and the losses' fused nodes."""
    F = tg.nn.functional
    t4 = tg.tensor([[[0, 2], [1, 2]], [[2, 1], [0, 0]]])
    t = tg.tensor([0, 2, 1, 2])
    x3 = x4.reshape(2, 4, 3)
    return [F.linear(x, w, b), F.linear(x, w), F.linear(x[0], w), F.linear(x3, w, b),
            F.linear(x3.transpose(0, 1), w, b), tg.addmm(b, x, w.t(), beta=0.5, alpha=2.0),
            F.cross_entropy(x4, t4), F.cross_entropy(x4, t4, reduction="none"),
            F.cross_entropy(x, t, label_smoothing=0.2), F.cross_entropy(x, x.softmax(1))]


EXTRA = {
    "fused": (_fused, lambda: [_t(4, 3), _t(5, 3, seed=1), _t(5, seed=2), _t(2, 3, 2, 2)]),
    "conv2d": (_conv, lambda: [_t(2, 3, 7, 6), _t(4, 3, 3, 2, seed=1)]),
    "losses": (_losses, lambda: [_t(4, 3), _t(4, 3, seed=1)]),
    "random": (_random, lambda: [_t(2, 3)]),
    "logic": (_logic, lambda: [_t(2, 3), _t(2, 3, seed=1)]),
    "unary_extras": (_unary_extras, lambda: [_t(2, 3)]),
    "nograd_writes": (_nograd_writes, lambda: [_t(2, 3), _t(2, 3, grad=False)]),
    # Embedding(scale_grad_by_freq=True): grad_scaled, its backward primitive through a
    # create_graph gradient
    "grad_scaled": (lambda w: [tg.autograd.grad(
        tg.nn.functional.embedding(tg.tensor([[0, 1, 1]]), w, scale_grad_by_freq=True)
        .pow(2).sum(), w, create_graph=True)[0]], lambda: [_t(3, 2)]),
    # div with a rounding_mode: div_floor / div_trunc and their zero backward
    "div_rounding": (lambda x, y: [tg.div(x, y, rounding_mode="floor"),
                                   tg.div(x, 0.7, rounding_mode="trunc"),
                                   tg.div(tg.tensor([7, -7]), 2, rounding_mode="trunc")],
                     lambda: [_t(2, 3), _t(3, seed=1)]),
    "multinomial": (lambda p: [tg.multinomial(p.softmax(-1), 2),
                               tg.multinomial(p[0].exp(), 5, True)], lambda: [_t(2, 3)]),
}


def _nn_new(x4, x3, p):
    """Layer norm, SiLU, pooling (and, through a create_graph gradient, their backward
    primitives' own VJPs), binary cross-entropy."""
    F = tg.nn.functional
    outs = [F.layer_norm(x3, (3,)), F.layer_norm(x3, (2, 3), x3[0], x3[1]), F.silu(x3),
            F.silu(x3 * 1.0, inplace=True), F.max_pool2d(x4, 2, 1, 1, ceil_mode=True),
            F.avg_pool2d(x4, 3, 2, 1, count_include_pad=False), F.adaptive_avg_pool2d(x4, (2, 3)),
            F.max_pool2d(x4, 2, return_indices=True)[1].double()]
    for pool in (lambda t: F.max_pool2d(t, 2), lambda t: F.avg_pool2d(t, 2),
                 lambda t: F.adaptive_avg_pool2d(t, 3)):
        g, = tg.autograd.grad((pool(x4) ** 2).sum(), x4, create_graph=True)
        outs.append(g)
    t = p.detach().sigmoid()
    outs += [F.binary_cross_entropy(p.sigmoid(), t), F.binary_cross_entropy(p.sigmoid(), t,
             reduction="none"), F.binary_cross_entropy_with_logits(p, t, pos_weight=t[0],
                                                                   reduction="sum")]
    return outs


def _inplace_math(x):
    y = x.exp() + 1.0
    z = x * 1.0
    return [y.log1p_(), (x.exp() * 1.0).log2_(), z.expm1_(), (x * 1.0).fmod_(0.7)]


EXTRA["inplace_math"] = (_inplace_math, lambda: [_t(2, 3)])


def _diagonals(x):
    return [x.diagonal(), tg.diagonal(x * 2.0, offset=1), (x * 1.0).diagonal(-1, 0, 1) * 3]


EXTRA["diagonal"] = (_diagonals, lambda: [_t(3, 4)])


def _missing_ops(x, s):
    """Bitwise shifts (and their in-place forms), scatter_reduce and as_strided
    (ops/shift_prim.py, scatter_reduce.py, as_strided.py), with the second-order graph of
    scatter_reduce's VJP."""
    a = tg.tensor([[1, -2, 3], [4, 5, -6]])
    c = a.clone()
    c <<= 2
    c >>= tg.tensor([1, 64, 0])
    i = tg.tensor([[0, 2, 0, 1], [1, 1, 0, 2]])
    outs = [(a << tg.tensor([1, 64, -1])).double(), (3 >> a.abs()).double(), c.double()]
    for r in ("sum", "prod", "mean", "amax", "amin"):
        outs.append(x.scatter_reduce(1, i, s, r, include_self=r != "mean"))
    y = x * 1.0
    y.scatter_reduce_(1, i, s, "prod", include_self=False)
    g, = tg.autograd.grad((x.scatter_reduce(1, i, s, "prod") ** 2).sum(), x, create_graph=True)
    w = (s * 1.0).as_strided((3, 3), (1, 2), 1)      # as_strided (ops/as_strided.py)
    z = s * 2.0
    z.as_strided((2, 2), (2, 1)).mul_(3.0)
    return outs + [y, g, w * 2.0, z]


EXTRA["missing_ops"] = (_missing_ops, lambda: [_t(2, 3), _t(2, 4, seed=1)])
EXTRA["nn_new"] = (_nn_new, lambda: [_t(1, 2, 5, 6), _t(2, 2, 3, seed=1), _t(2, 3, seed=2)])


class _Cube(tg.autograd.Function):
    @staticmethod
    def forward(ctx, x):
        ctx.save_for_backward(x)
        return x ** 3

    @staticmethod
    @tg.autograd.function.once_differentiable
    def backward(ctx, g):
        x, = ctx.saved_tensors
        return g * 3 * x * x


def _linalg(a, x, b):
    """Every linalg primitive (ops/linalg_solvers.py, linalg_decomp.py, linalg_functions.py)."""
    L = tg.linalg
    spd = x @ x.mT + 3 * tg.eye(3, dtype=x.dtype)
    return [L.inv(a), L.det(a), L.slogdet(a).logabsdet, L.slogdet(a).sign, L.solve(a, b),
            L.solve_triangular(a, b, upper=True), L.cholesky(spd), L.qr(a).Q,
            L.qr(a.detach(), mode="r").R, L.eigh(spd).eigenvectors, L.svd(a).S,
            L.matrix_exp(a * 0.1), *L.inv_ex(a), *L.cholesky_ex(spd)]


EXTRA["linalg"] = (_linalg, lambda: [
    tg.tensor(_arr(2, 3, 3) * 0.1 + 3 * np.eye(3), requires_grad=True), _t(3, 3, seed=1),
    _t(2, 3, 2, seed=2)])


# a once_differentiable backward, recorded in the backward program (autograd/function.py)
EXTRA["once_differentiable"] = (lambda x: [_Cube.apply(x)], lambda: [_t(2, 3)])


def _special(x, m):
    """Special functions (ops/special_*.py), their in-place variants, mode and the
    parameterised draws of ops/random_dists.py."""
    S = tg.special
    p = x.sigmoid()
    outs = [x.lgamma(), x.digamma(), tg.polygamma(2, x), x.erfc(), (p * 2 - 1).erfinv(),
            S.entr(p), S.xlog1py(x, p), S.xlog1py(x, 0.5), S.xlog1py(2.0, p), S.ndtri(p),
            S.log_ndtr(x), S.sinc(x), tg.i0(x), S.i1(x), S.i0e(x), S.i1e(x)]
    for name in ("lgamma_", "digamma_", "erfc_", "erf_", "sinc_", "i0_"):
        outs.append(getattr(x * 1.0, name)())
    outs += [(p * 0.5).erfinv_(), (x * 1.0).polygamma_(1)]
    v, i = tg.mode(m, 1)
    outs += [v, i.double(), tg.poisson(p.detach() * 3), D._standard_gamma(p + 0.5)]
    return outs


def _special_inputs():
    return [_t(2, 3), tg.tensor([[1.0, 2.0, 2.0], [0.5, 0.5, 3.0]], dtype=tg.float64,
                                requires_grad=True)]


from tracegrad.ops import random_dists as D  # noqa: E402
EXTRA["special"] = (_special, _special_inputs)


def _missing_ops3(x, s):
    """The primitives of ops/elementwise_more.py, shape_more.py (unfold), scan_more.py,
    igamma_prim.py, lu_factorization.py and binomial, with the in-place forms."""
    i, j = tg.tensor([[4, -6, 0], [9, 5, 7]]), tg.tensor([[6, 4, 0], [3, 10, -14]])
    k, m = i.clone(), i.clone()
    k.gcd_(j)
    m.lcm_(j)
    xd = x.detach()
    h = xd.clone()
    h.heaviside_(tg.tensor(0.5, dtype=xd.dtype))
    y, z, a, b = x * 1.0, x * 1.0, xd.abs() + 0.5, x.abs() + 0.1
    y.copysign_(s[:, :3])
    z.nextafter_(s[:, :3])
    p, q = a.clone(), a.clone()
    p.igamma_(b.detach())
    q.igammac_(b.detach())
    mx, imx = tg.cummax(x, 1)
    mn, imn = tg.cummin(x, 0)
    mant, ex = tg.frexp(x)
    return [tg.signbit(x).double(), tg.gcd(i, j).double(), tg.lcm(i, j).double(), k.double(),
            m.double(), tg.heaviside(xd, xd[0]), h, tg.copysign(x, s[:, :3]), y,
            tg.nextafter(x, s[:, :3]), z, mant, ex.double(), x.unfold(1, 2, 1), mx,
            imx.double(), mn, imn.double(), tg.logcumsumexp(x, 1), tg.igamma(a, b),
            tg.igammac(a, b), p, q, tg.binomial(xd.abs() * 3, xd.sigmoid()),
            *_lu_parts(x[:, :2] + 2 * tg.eye(2, dtype=x.dtype), s[:, :2])]


def _lu_parts(a, b):
    """ops/lu_factorization.py: the factor, its pivots and row orders (also in backward)."""
    LU, piv = tg.linalg.lu_factor(a)
    P, L, U = tg.lu_unpack(LU, piv)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        x = tg.lu_solve(b, LU, piv)
    return [LU, piv.double(), P, L, U, x]


EXTRA["missing_ops3"] = (_missing_ops3, lambda: [_t(2, 3), _t(2, 4, seed=1)])


def extra_prims(name):
    if ("extra", name) in _CHECKED:
        return _CHECKED["extra", name]
    fn, make = EXTRA[name]
    seen = set()
    for what, g in graphs_of(fn, make()):
        seen |= check_graph(f"{name} [{what}]", g)
    _CHECKED["extra", name] = seen
    return seen


@pytest.mark.parametrize("name", list(EXTRA))
def test_rules_match_kernels_on_extra_programs(name):
    extra_prims(name)


def test_traced_graphs_reach_every_rule():
    """The two tests above check each rule on at least one real node (so a rule that is wrong
    for every input cannot hide behind a lack of samples). Run after them, it reuses their
    results; run alone, it checks everything itself."""
    seen = set()
    for info in OPS:
        seen |= op_table_prims(info)
    for name in EXTRA:
        seen |= extra_prims(name)
    missing = {n for n, p in REGISTRY.items() if p.shape_rule is not None} - seen
    assert missing == NOT_TRACEABLE, f"no traced node checks the rules of {sorted(missing)}"


# ---------------- verify ----------------

def _real_graph():
    def f(x, w):
        return ((x @ w).relu().sum(0, keepdim=True) * 2.0).softmax(1)
    return tg.trace(f, _t(4, 3), _t(3, 5, seed=1))


def test_verify_rejects_a_node_typed_with_a_wrong_shape():
    g = _real_graph()
    assert verify(g)
    k = next(i for i, n in enumerate(g.nodes) if n.prim.name == "sum_dim")
    n = g.nodes[k]
    n.output.type = TensorType((5,), n.output.type.dtype)       # the rule says (1, 5)
    with pytest.raises(IRError) as e:
        verify(g)
    msg = str(e.value)
    assert f"{g.name}: node {k} (sum_dim)" in msg and "(5,)" in msg and "(1, 5)" in msg, msg
    assert "(4, 5)" in msg and "keepdim=True" in msg, msg        # operands and attributes
    assert "shape rule" in msg and "type its output" in msg, msg        # how to fix it


def test_verify_names_operands_a_rule_rejects():
    g = _real_graph()
    n = next(n for n in g.nodes if n.prim.name == "mm")
    n.inputs[1].type = TensorType((7, 5), n.inputs[1].type.dtype)    # 4x3 @ 7x5
    with pytest.raises(IRError, match=r"node 0 \(mm\) has operand shapes \(\(4, 3\), \(7, 5\)\)"):
        verify(g)


def test_verify_does_not_change_the_graph():
    g = _real_graph()
    before = (str(g), [n.output.type for n in g.nodes], [n.attrs for n in g.nodes])
    verify(g)
    assert (str(g), [n.output.type for n in g.nodes], [n.attrs for n in g.nodes]) == before


def test_verify_accepts_masked_indexing():
    """A mask's result shape is data: the rule declines (None) and verify accepts it."""
    g = tg.trace(lambda x: x[x > 0].sum(), _t(2, 3))
    n = next(n for n in g.nodes if n.prim.name == "index")
    assert n.prim.shape_rule(operand_shapes(n.inputs), n.attrs) is None
    assert verify(g)


def test_eager_tracing_and_compiled_calls_never_run_shape_rules(monkeypatch):
    """Rules are for verify and tests: eager dispatch and compiled programs (hot paths, whose
    speed is measured) must not pay for them (outside TRACEGRAD_VERIFY, which the suite sets)."""
    monkeypatch.setenv("TRACEGRAD_VERIFY", "0")
    calls = []

    def counting(rule):
        def wrapped(shapes, attrs):
            calls.append(1)
            return rule(shapes, attrs)
        return wrapped
    for p in REGISTRY.values():
        if p.shape_rule is not None:
            monkeypatch.setattr(p, "shape_rule", counting(p.shape_rule))

    def f(x, w):
        y = tg.nn.functional.conv2d(x, w).relu().sum(1)
        return (y @ tg.ones(4, 2, dtype=x.dtype)).softmax(0)
    x, w = _t(1, 2, 6, 6), _t(3, 2, 3, 3, seed=1)
    f(x, w).sum().backward()
    cf = tg.compile(f)
    for _ in range(2):
        cf(x, w).sum().backward()
    assert not calls
    verify(cf.programs[0].forward)
    assert calls


# ---------------- coverage ----------------

def test_every_primitive_has_a_rule_except_data_dependent_ones():
    from tracegrad.tracing.custom_function import OPAQUE     # user Functions, not the table
    missing = {n for n, p in REGISTRY.items() if p.shape_rule is None and p not in OPAQUE}
    assert missing == set(DATA_DEPENDENT), (
        f"without a shape rule: {sorted(missing - set(DATA_DEPENDENT))}; "
        f"allowlisted but declaring one: {sorted(set(DATA_DEPENDENT) - missing)}")


def test_overloads_keep_and_inplace_variants_take_operand_0():
    for name, p in REGISTRY.items():
        if p.functional is not None:                   # in-place: the target's shape
            assert p.shape_rule([(2, 3), (3,), None], {}) == (2, 3), name
    pairs = [("sum", "sum_dim"), ("mean", "mean_dim"), ("prod", "prod_dim"),
             ("pow", "pow_tensor"), ("pow", "pow_scalar_base"), ("round", "round_decimals"),
             ("remainder", "remainder_tensor"), ("squeeze", "squeeze_dim"),
             ("squeeze", "squeeze_dims")]
    for a, b in pairs:
        assert REGISTRY[b].shape_rule is REGISTRY[a].shape_rule, b

