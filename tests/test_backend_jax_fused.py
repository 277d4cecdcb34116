"""The JAX backend on the fused primitives (backends/jax/rules_fused.py; `dropout_noise` drawn
on the host): each program runs on XLA with no numpy fallback and agrees with the numpy
backend (values and gradients); a training step written the PyTorch way (zero_grad, backward,
step inside the compiled function) gives the same losses and parameters; nll target checks
raise eager's IndexError.
"""
import warnings

import numpy as np
import pytest

jax = pytest.importorskip("jax")

import tracegrad as tg  # noqa: E402
from tracegrad.backends.jax.lower import HOST_PRIMS, rule_for  # noqa: E402
from tracegrad.ops import dropout as DR  # noqa: E402
from tracegrad.ops import fused_backward as FB  # noqa: E402
from tracegrad.ops import linear as LI  # noqa: E402
from tracegrad.ops import loss as LS  # noqa: E402

FUSED = [LI.LINEAR, LI.LINEAR_NOBIAS, LI.ADDMM, LI.MM_TN, LI.UNSAFE_VIEW, LI.SQUEEZE_ROW,
         LS.MUL_SCALAR, LS.DIV_SCALAR, FB.LOG_SOFTMAX_BACKWARD, FB.SOFTMAX_BACKWARD,
         FB.GELU_BACKWARD, LS.NLL_LOSS_BACKWARD, LS.NLL_LOSS2D, LS.NLL_LOSS2D_BACKWARD]


def _on_jax(cf):
    from tracegrad.backends.jax.program import JaxProgram
    return cf.programs and all(isinstance(p.forward_program, JaxProgram) for p in cf.programs)


def test_every_fused_primitive_lowers_and_dropout_noise_is_a_host_draw():
    assert all(rule_for(p) is not None for p in FUSED)
    assert DR.DROPOUT_NOISE in HOST_PRIMS


def _pytorch_style_step():
    nn = tg.nn
    tg.manual_seed(0)
    model = nn.Sequential(nn.Linear(12, 32), nn.ReLU(), nn.Dropout(0.25), nn.Linear(32, 5))
    opt = tg.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
    loss_fn = nn.CrossEntropyLoss()

    def step(x, y):
        opt.zero_grad()
        loss = loss_fn(model(x), y)
        loss.backward()
        opt.step()
        return loss
    return model, step


def test_pytorch_style_training_step_with_dropout_matches_numpy_backend():
    results = []
    for backend in ("numpy", "jax"):
        model, step = _pytorch_style_step()
        cf = tg.compile(step, backend=backend)
        rng = np.random.default_rng(1)
        tg.manual_seed(7)
        with warnings.catch_warnings():
            warnings.simplefilter("error")              # no numpy fallback warning
            losses = [cf(tg.tensor(rng.standard_normal((16, 12)).astype(np.float32)),
                         tg.tensor(rng.integers(0, 5, 16))).item() for _ in range(5)]
        results.append((losses, [p.detach().numpy().copy() for p in model.parameters()], cf))
    (ln, pn, cn), (lj, pj, cj) = results
    np.testing.assert_allclose(lj, ln, rtol=1e-5, atol=1e-5)
    for a, b in zip(pn, pj):
        np.testing.assert_allclose(b, a, rtol=1e-5, atol=1e-5)
    assert _on_jax(cj)
    assert cj.stats.eager_calls == 0


def _f_linear3d(x, w, b):
    return (tg.nn.functional.linear(x, w, b).sin().sum()
            + tg.nn.functional.gelu(tg.nn.functional.linear(x, w)).sum()
            + tg.nn.functional.linear(x[0, 0], w).sum())


def _f_addmm(x, w, b):
    m = x[0]
    return (tg.addmm(b, m, w.t(), beta=0.5, alpha=2.0).sum()
            + tg.addmm(b, m, w.t(), beta=0).exp().sum()
            + tg.nn.functional.gelu(m, approximate="tanh").sum())


def _f_softmaxes(x, w, b):
    s = tg.nn.functional.softmax(x, dim=-1)
    ls = tg.nn.functional.log_softmax(x, dim=1)
    return (s * s).sum() + (ls * s.detach()).sum()


def _f_losses(x, w, b):
    scores = x.reshape(2, 4, 3, 1)                      # (N, C, H, W): nll_loss2d
    t2 = tg.tensor([[[0], [3], [1]], [[2], [2], [-100]]])
    weight = tg.tensor([1.0, 2.0, 0.5, 1.5])
    t = tg.tensor([1, 0, 3, 3, 2, 1])
    rows = x.reshape(6, 4)
    return (tg.nn.functional.cross_entropy(scores, t2)
            + tg.nn.functional.cross_entropy(scores, t2, weight=weight, reduction="sum")
            + tg.nn.functional.cross_entropy(rows, t, label_smoothing=0.1)
            + tg.nn.functional.nll_loss(rows.log_softmax(1), t, weight=weight,
                                        ignore_index=3, reduction="none").sum())


@pytest.mark.parametrize("fn", [_f_linear3d, _f_addmm, _f_softmaxes, _f_losses])
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_fused_programs_match_numpy_backend(fn, dtype):
    rng = np.random.default_rng(3)
    data = [rng.standard_normal(s).astype(dtype) for s in ((2, 3, 4), (5, 4), (5,))]
    out = []
    for backend in ("numpy", "jax"):
        cf = tg.compile(fn, backend=backend)
        with warnings.catch_warnings():
            warnings.simplefilter("error")
            for _ in range(2):
                args = [tg.tensor(d, requires_grad=True) for d in data]
                loss = cf(*args)
                loss.backward()
        out.append((loss.detach().numpy(), [a.grad.numpy() for a in args if a.grad is not None], cf))
    (ln, gn, _), (lj, gj, cj) = out
    tol = 1e-5 if dtype == np.float32 else 1e-12
    assert lj.dtype == ln.dtype
    np.testing.assert_allclose(lj, ln, rtol=tol, atol=tol)
    assert len(gj) == len(gn) > 0
    for a, b in zip(gn, gj):
        assert a.dtype == b.dtype
        np.testing.assert_allclose(b, a, rtol=tol, atol=tol)
    assert _on_jax(cj)


@pytest.mark.parametrize("scores, target", [((2, 4, 3, 1), (2, 3, 1)), ((3, 4), (3,))])
def test_nll_target_out_of_range_raises_eager_index_error(scores, target):
    def f(x, t):
        return tg.nn.functional.cross_entropy(x, t)
    cf = tg.compile(f, backend="jax")
    x = tg.zeros(*scores)
    cf(x, tg.zeros(*target, dtype=tg.int64))
    for bad in (4, -1):
        t = tg.zeros(*target, dtype=tg.int64)
        t.view(-1)[-1] = bad
        with pytest.raises(IndexError, match=f"Target {bad} is out of bounds"):
            cf(x, t)
    assert _on_jax(cf)


def test_nll_loss_of_a_single_sample_lowers():
    """(C,) scores with a 0-d target: the layout nll_loss and its gradient fold to rows."""
    out = []
    for backend in ("numpy", "jax"):
        cf = tg.compile(lambda x, t: tg.nn.functional.cross_entropy(x, t), backend=backend)
        x = tg.tensor([0.5, -1.0, 2.0, 0.25], requires_grad=True)
        loss = cf(x, tg.tensor(2))
        loss.backward()
        out.append((loss.item(), x.grad.numpy(), cf))
    np.testing.assert_allclose(out[1][0], out[0][0], rtol=1e-6)
    np.testing.assert_allclose(out[1][1], out[0][1], rtol=1e-6, atol=1e-7)
    assert _on_jax(out[1][2])
