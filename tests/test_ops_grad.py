"""Gradients of every differentiable op-table entry, in float64, by finite differences along
random directions: first order against the numpy reference, second order (the gradient of
`<grad f, u>` built with `create_graph=True`) against differences of our own first-order
gradients. Also `tracegrad.autograd.gradcheck`/`gradgradcheck` on a few ops, and the count of
ops passing the second-order check (printed; run with `-s` to see it)."""
import zlib

import numpy as np
import pytest

import tracegrad as tg
from op_table import F64, OPS, flat_outputs, np_args, to_lib

EPS1, EPS2 = 1e-6, 1e-5
DIFF = [pytest.param(i, id=i.name) for i in OPS if i.differentiable and F64 in i.dtypes]
SECOND = [pytest.param(i, id=i.name) for i in OPS if i.second_order and F64 in i.dtypes]


def _rng(info, salt):
    return np.random.default_rng(zlib.crc32(f"{info.name}/{salt}".encode()))


def _float_positions(sample):
    return [i for i, a in enumerate(sample.args)
            if isinstance(a, np.ndarray) and a.dtype.kind == "f"]


def _run(info, sample, arrays):
    """Run the op with `arrays` (numpy, at the float positions) as leaves requiring grad."""
    args = list(sample.args)
    for i, a in arrays.items():
        args[i] = a
    targs = [to_lib(tg, a, requires_grad=i in arrays) for i, a in enumerate(args)]
    leaves = [targs[i] for i in arrays]
    outs = [o for o in flat_outputs(info.op(tg, *targs, **sample.kwargs))
            if o.dtype.is_floating_point]
    return leaves, outs


def _loss(outs, ws):
    total = None
    for o, w in zip(outs, ws):
        term = (o * tg.tensor(w)).sum()
        total = term if total is None else total + term
    return total


def _ref_loss(info, sample, arrays, ws):
    args = list(np_args(sample))
    for i, a in arrays.items():
        args[i] = a
    refs = flat_outputs(info.reference(*args, **sample.kwargs))
    refs = [np.asarray(r, dtype=np.float64) for r in refs
            if np.asarray(r).dtype.kind == "f"]
    return sum(float(np.sum(r * w)) for r, w in zip(refs, ws))


def _dot(gs, vs):
    return sum(float(np.sum(g.numpy() * v)) for g, v in zip(gs, vs) if g is not None)


def _samples(info, salt=""):
    for sample in info.samples(_rng(info, "samples" + salt), F64):
        pos = _float_positions(sample)
        if pos:
            yield sample, pos


def check_first_order(info, salt=""):
    rng = _rng(info, "first" + salt)
    for sample, pos in _samples(info, salt):
        x = {i: sample.args[i] for i in pos}
        leaves, outs = _run(info, sample, x)
        ws = [rng.standard_normal(o.shape) for o in outs]
        loss = _loss(outs, ws)
        assert loss.requires_grad, f"{info.name}{sample}: output does not require grad"
        grads = tg.autograd.grad(loss, leaves, allow_unused=True)
        for g, leaf in zip(grads, leaves):
            assert g is None or (g.shape == leaf.shape and g.dtype is tg.float64), (
                f"{info.name}{sample}: grad shape/dtype {g.shape}/{g.dtype}")
        vs = [rng.standard_normal(x[i].shape) for i in pos]
        hi = _ref_loss(info, sample, {i: np.asarray(x[i] + EPS1 * v) for i, v in zip(pos, vs)}, ws)
        lo = _ref_loss(info, sample, {i: np.asarray(x[i] - EPS1 * v) for i, v in zip(pos, vs)}, ws)
        fd = (hi - lo) / (2 * EPS1)
        an = _dot(grads, vs)
        assert abs(an - fd) <= 1e-6 + 1e-5 * abs(fd), f"{info.name}{sample}: {an} vs fd {fd}"


def _h(info, sample, x, ws, us, create_graph):
    """h(x) = <grad L(x), u>, as a tensor (create_graph) or a float."""
    leaves, outs = _run(info, sample, x)
    grads = tg.autograd.grad(_loss(outs, ws), leaves, allow_unused=True,
                             create_graph=create_graph)
    if not create_graph:
        return _dot(grads, us)
    h = None
    for g, u in zip(grads, us):
        if g is not None:
            term = (g * tg.tensor(u)).sum()
            h = term if h is None else h + term
    return leaves, h


def check_second_order(info, salt=""):
    rng = _rng(info, "second" + salt)
    for sample, pos in _samples(info, salt):
        x = {i: sample.args[i] for i in pos}
        _, outs = _run(info, sample, x)
        ws = [rng.standard_normal(o.shape) for o in outs]
        us = [rng.standard_normal(x[i].shape) for i in pos]
        vs = [rng.standard_normal(x[i].shape) for i in pos]
        leaves, h = _h(info, sample, x, ws, us, True)
        an = 0.0
        if h is not None and h.requires_grad:
            an = _dot(tg.autograd.grad(h, leaves, allow_unused=True), vs)
        hi = _h(info, sample, {i: np.asarray(x[i] + EPS2 * v) for i, v in zip(pos, vs)}, ws, us, False)
        lo = _h(info, sample, {i: np.asarray(x[i] - EPS2 * v) for i, v in zip(pos, vs)}, ws, us, False)
        fd = (hi - lo) / (2 * EPS2)
        assert abs(an - fd) <= 1e-5 + 1e-4 * abs(fd), f"{info.name}{sample}: {an} vs fd {fd}"


@pytest.mark.parametrize("info", DIFF)
def test_first_order_matches_finite_differences(info):
    check_first_order(info)


SECOND_RESULTS = {}


@pytest.mark.parametrize("info", SECOND)
def test_second_order_matches_finite_differences(info):
    SECOND_RESULTS[info.name] = False
    check_second_order(info)
    SECOND_RESULTS[info.name] = True


@pytest.mark.slow
@pytest.mark.parametrize("seed", range(5))
def test_gradients_on_more_random_inputs(seed):
    for p in DIFF:
        check_first_order(p.values[0], f"/{seed}")
    for p in SECOND:
        check_second_order(p.values[0], f"/{seed}")


def _x(*shape, seed=0, positive=False):
    a = np.random.default_rng(seed).standard_normal(shape)
    return tg.tensor(np.abs(a) + 0.5 if positive else a, requires_grad=True)


GRADCHECK = [
    ("mul", lambda a, b: a * b, lambda: (_x(2, 3), _x(3, seed=1))),
    ("div", lambda a, b: a / b, lambda: (_x(2, 3), _x(3, seed=1, positive=True))),
    ("matmul", lambda a, b: a @ b, lambda: (_x(2, 2, 3), _x(3, 2, seed=1))),
    ("softmax", lambda a: a.softmax(-1), lambda: (_x(2, 4),)),
    ("logsumexp", lambda a: a.logsumexp(1), lambda: (_x(2, 4),)),
    ("std", lambda a: a.std(0), lambda: (_x(3, 2),)),
    ("cat_index", lambda a, b: tg.cat([a, b])[[0, 2, 2]], lambda: (_x(2, 3), _x(1, 3, seed=1))),
    ("einsum", lambda a, b: tg.einsum("ij,jk->ik", a, b), lambda: (_x(2, 3), _x(3, 2, seed=1))),
]


@pytest.mark.parametrize("name,fn,inputs", GRADCHECK, ids=[g[0] for g in GRADCHECK])
def test_gradcheck(name, fn, inputs):
    assert tg.autograd.gradcheck(fn, inputs())
    assert tg.autograd.gradgradcheck(fn, inputs())


def test_gradcheck_detects_a_wrong_gradient():
    class Wrong(tg.autograd.Function):
        @staticmethod
        def forward(ctx, x):
            return x * x

        @staticmethod
        def backward(ctx, g):
            return g            # should be 2 * x * g
    assert not tg.autograd.gradcheck(Wrong.apply, (_x(3),), raise_exception=False)


def test_second_order_count():
    """How many ops pass the second-order check (the closing note reports this number)."""
    for p in SECOND:
        info = p.values[0]
        if info.name not in SECOND_RESULTS:
            try:
                check_second_order(info)
                SECOND_RESULTS[info.name] = True
            except AssertionError:
                SECOND_RESULTS[info.name] = False
    passed = sorted(n for n, ok in SECOND_RESULTS.items() if ok)
    failed = sorted(n for n, ok in SECOND_RESULTS.items() if not ok)
    print(f"\nsecond-order gradient checks: {len(passed)} of {len(SECOND)} ops pass")
    assert not failed, f"second-order failures: {failed}"
    assert len(passed) == len(SECOND)
