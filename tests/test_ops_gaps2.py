"""The second batch of PyTorch names real programs hit (torch math and shape composites,
activations, losses and layers): each case runs the same call on tracegrad and PyTorch
(values, dtype, gradients of a random projection of the outputs), checks float64 gradients
by finite differences (tg.autograd.gradcheck), and compiled == eager. The trigonometric
primitives also have op-table rows (tests/op_table.py), which drive numpy, gradient, compile
and JAX checks.
"""
import numpy as np
import pytest

import tracegrad as tg

torch = pytest.importorskip("torch")


def _arr(rng, shape, domain):
    if domain == "unit":
        return rng.uniform(-0.8, 0.8, shape)
    if domain == "pos":
        return rng.uniform(0.5, 2.0, shape)
    if domain == "prob":
        return rng.uniform(0.1, 0.9, shape)
    if domain == "sorted":
        return np.sort(rng.standard_normal(shape), axis=-1)
    if domain == "int":
        return rng.integers(-3, 4, shape)
    return rng.standard_normal(shape)


class C:
    """A case: `f(m, *tensors)` with m the library; tensor specs (shape, domain, grad)."""

    def __init__(self, name, f, *specs, grad=True, compile=True, tol=1e-10):
        self.name, self.f, self.specs = name, f, specs
        self.grad, self.compile, self.tol = grad, compile, tol

    def arrays(self, seed=0):
        rng = np.random.default_rng(seed)
        return [_arr(rng, s, d) for s, d in self.specs]


def _flat(out):
    if isinstance(out, (tuple, list)):
        return [t for o in out for t in _flat(o)]
    return [out]


def _floats(outs):
    return [o for o in outs if o.is_floating_point()]


_NANS = np.where(np.arange(12).reshape(3, 4) % 5 == 1, np.nan, 0.0)

CASES = [
    C("logaddexp", lambda m, a, b: m.logaddexp(a, b), ((2, 3), "real"), ((3,), "real")),
    C("logaddexp2", lambda m, a, b: m.logaddexp2(a, b), ((2, 3), "real"), ((2, 3), "real")),
    C("clamp_min", lambda m, a: m.clamp_min(a, 0.3), ((2, 3), "real")),
    C("clamp_max", lambda m, a: a.clamp_max(-0.2), ((2, 3), "real")),
    C("var_mean", lambda m, a: m.var_mean(a, 1), ((3, 4), "real")),
    C("var_mean_all", lambda m, a: m.var_mean(a, correction=0), ((3, 4), "real")),
    C("std_mean", lambda m, a: m.std_mean(a, dim=(0,), keepdim=True), ((3, 4), "real")),
    C("nansum", lambda m, a: m.nansum(a + m.tensor(_NANS), 1), ((3, 4), "real")),
    C("nanmean", lambda m, a: [m.nanmean(a + m.tensor(_NANS)),
                               a.nanmean(dim=0, keepdim=True)], ((3, 4), "real")),
    C("count_nonzero", lambda m, a: m.count_nonzero(m.relu(a), dim=0), ((3, 4), "real"),
      grad=False),
    C("addcmul", lambda m, a, b, c: m.addcmul(a, b, c, value=0.5), ((2, 3), "real"),
      ((3,), "real"), ((2, 1), "real")),
    C("addcdiv", lambda m, a, b, c: a.addcdiv(b, c, value=-2), ((2, 3), "real"),
      ((2, 3), "real"), ((2, 3), "pos")),
    C("logit", lambda m, a: m.logit(a), ((5,), "prob")),
    C("logit_eps", lambda m, a: m.logit(a * 1.2 - 0.1, eps=0.05), ((6,), "prob")),
    C("cdist", lambda m, a, b: m.cdist(a, b), ((4, 3), "real"), ((5, 3), "real")),
    C("cdist_p1_batched", lambda m, a, b: m.cdist(a, b, p=1.0), ((2, 4, 3), "real"),
      ((2, 5, 3), "real")),
    C("median", lambda m, a: m.median(a), ((7,), "real")),
    C("median_even", lambda m, a: a.median(), ((2, 4), "real")),
    C("median_dim", lambda m, a: m.median(a, 1, keepdim=True), ((3, 4), "real")),
    C("quantile", lambda m, a: m.quantile(a, 0.3), ((9,), "real")),
    C("quantile_dim", lambda m, a: m.quantile(a, m.tensor([0.25, 0.5, 1.0],
                                                              dtype=m.float64), dim=1),
      ((3, 5), "real")),
    C("quantile_interp", lambda m, a: [m.quantile(a, 0.4, dim=0, keepdim=True,
                                                  interpolation=k)
                                       for k in ("lower", "higher", "midpoint", "nearest")],
      ((6, 2), "real")),
    C("searchsorted", lambda m, s, v: [m.searchsorted(s, v), m.searchsorted(s, v, right=True)],
      ((6,), "sorted"), ((2, 3), "real"), grad=False),
    C("searchsorted_batched", lambda m, s, v: m.searchsorted(s, v, side="right"),
      ((2, 6), "sorted"), ((2, 3), "real"), grad=False),
    C("bucketize", lambda m, v, b: [m.bucketize(v, b), m.bucketize(v, b, right=True,
                                                                    out_int32=True)],
      ((2, 3), "int"), ((4,), "sorted"), grad=False),
    C("trapezoid", lambda m, y: [m.trapezoid(y), m.trapezoid(y, dx=0.5, dim=0)],
      ((3, 4), "real")),
    C("trapezoid_x", lambda m, y, x: m.trapezoid(y, x), ((3, 4), "real"), ((4,), "sorted")),
    C("meshgrid", lambda m, a, b: m.meshgrid(a, b, indexing="ij"), ((3,), "real"),
      ((4,), "real")),
    C("meshgrid_xy", lambda m, a, b, c: m.meshgrid([a, b, c], indexing="xy"), ((3,), "real"),
      ((4,), "real"), ((2,), "real")),
    C("rot90", lambda m, a: [m.rot90(a), m.rot90(a, 2), m.rot90(a, -1, [1, 2]),
                             a.rot90(4)], ((2, 3, 4), "real")),
    C("fliplr_flipud", lambda m, a: [m.fliplr(a), m.flipud(a)], ((2, 3), "real")),
    C("movedim", lambda m, a: [m.movedim(a, 0, -1), m.moveaxis(a, (0, 1), (2, 0))],
      ((2, 3, 4), "real")),
    C("tile", lambda m, a: [m.tile(a, (2,)), a.tile((2, 1, 2))], ((2, 3), "real")),
    C("tensordot", lambda m, a, b: [m.tensordot(a, b, dims=1),
                                    m.tensordot(a, b, dims=([0, 1], [1, 0]))],
      ((3, 4), "real"), ((4, 3), "real")),
    C("tensordot_2", lambda m, a, b: m.tensordot(a, b), ((2, 3, 4), "real"),
      ((3, 4, 5), "real")),
    C("kron", lambda m, a, b: m.kron(a, b), ((2, 3), "real"), ((3,), "real")),
    C("diff", lambda m, a, p: [m.diff(a), m.diff(a, n=2, dim=0), a.diff(prepend=p, append=p)],
      ((4, 3), "real"), ((4, 1), "real")),
    C("diff_int", lambda m, a: m.diff(a), ((5,), "int"), grad=False),
    C("block_diag", lambda m, a, b, c: m.block_diag(a, b, c), ((2, 3), "real"),
      ((2,), "real"), ((), "real")),
    C("cartesian_prod", lambda m, a, b: m.cartesian_prod(a, b), ((3,), "real"),
      ((2,), "real")),
]


def _run(m, case, arrays, requires_grad):
    ts = [m.tensor(a) if a.dtype.kind != "f" else
          m.tensor(a, requires_grad=requires_grad) for a in arrays]
    return ts, _flat(case.f(m, *ts))


def _project(outs, seed=1):
    rng = np.random.default_rng(seed)
    total = 0.0
    for o in _floats(outs):
        w = rng.standard_normal(tuple(o.shape))
        keep = ~np.isnan(o.detach().numpy())
        total = total + (o.nan_to_num(0.0) * o.new_tensor(w * keep)).sum()
    return total


@pytest.mark.parametrize("case", CASES, ids=lambda c: c.name)
def test_matches_torch(case):
    arrays = case.arrays()
    ts, outs = _run(tg, case, arrays, case.grad)
    tts, touts = _run(torch, case, arrays, case.grad)
    assert len(outs) == len(touts)
    for o, t in zip(outs, touts):
        assert tuple(o.shape) == tuple(t.shape), case.name
        assert str(o.dtype) == str(t.dtype), case.name
        np.testing.assert_allclose(o.detach().numpy(), t.detach().numpy(), rtol=1e-9,
                                   atol=1e-12, equal_nan=True, err_msg=case.name)
    if not case.grad:
        return
    _project(outs).backward()
    _project(touts).backward()
    for a, b in zip(ts, tts):
        if b.grad is not None:
            np.testing.assert_allclose(a.grad.numpy(), b.grad.numpy(), rtol=1e-9, atol=1e-12,
                                       err_msg=case.name)


@pytest.mark.parametrize("case", [c for c in CASES if c.grad], ids=lambda c: c.name)
def test_gradcheck(case):
    arrays = case.arrays(seed=3)
    floats = [k for k, a in enumerate(arrays) if a.dtype.kind == "f"]

    def fn(*xs):
        args = list(tg.tensor(a) for a in arrays)
        for k, x in zip(floats, xs):
            args[k] = x
        return tuple(o for o in _floats(_flat(case.f(tg, *args)))
                     if not np.isnan(o.detach().numpy()).any())
    xs = [tg.tensor(arrays[k], requires_grad=True) for k in floats]
    assert tg.autograd.gradcheck(fn, xs, eps=1e-6, atol=1e-5, rtol=1e-3)


@pytest.mark.parametrize("case", [c for c in CASES if c.compile], ids=lambda c: c.name)
def test_compiled_equals_eager(case):
    arrays = case.arrays(seed=5)

    def fn(*ts):
        outs = _flat(case.f(tg, *ts))
        return tuple(outs) + ((_project(outs),) if case.grad else ())
    ts, eager = _run(tg, case, arrays, case.grad)
    eager = fn(*ts)
    if case.grad:
        eager[-1].backward()
    eager_grads = [t.grad for t in ts]
    cts = [tg.tensor(a) if a.dtype.kind != "f" else tg.tensor(a, requires_grad=case.grad)
           for a in arrays]
    compiled = tg.compile(fn)(*cts)
    if case.grad:
        compiled[-1].backward()
    for o, c in zip(eager, compiled):
        assert o.dtype == c.dtype and o.shape == c.shape
        np.testing.assert_allclose(o.detach().numpy(), c.detach().numpy(), rtol=1e-12,
                                   equal_nan=True)
    for g, t in zip(eager_grads, cts):
        if g is not None:
            np.testing.assert_allclose(g.numpy(), t.grad.numpy(), rtol=1e-12, atol=1e-14)
