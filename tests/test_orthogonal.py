"""nn.utils.parametrizations.orthogonal and linalg.householder_product against PyTorch:
same initial weight, same parametrized weight, originals and gradients in float64; cached(),
remove_parametrizations, assignment, errors; a compiled training step equals eager."""
import numpy as np
import pytest

import tracegrad as tg
from tracegrad.nn.utils import parametrize
from tracegrad.nn.utils.parametrizations import orthogonal

torch = pytest.importorskip("torch")

MAPS = [None, "matrix_exp", "cayley", "householder"]
SHAPES = [(4, 4), (5, 3), (3, 5)]


def _pair(shape, orthogonal_map, use_trivialization, seed=0):
    """A torch and a tracegrad Linear (float64, no bias) with one weight, both parametrized.
    A rectangular trivialized weight is completed with random columns: tracegrad's `base`
    gets torch's, so the two agree from there on."""
    w = np.random.default_rng(seed).standard_normal(shape)
    tl = torch.nn.Linear(shape[1], shape[0], bias=False).double()
    gl = tg.nn.Linear(shape[1], shape[0], bias=False).double()
    with torch.no_grad():
        tl.weight.copy_(torch.tensor(w))
    with tg.no_grad():
        gl.weight.copy_(tg.tensor(w))
    torch.nn.utils.parametrizations.orthogonal(tl, orthogonal_map=orthogonal_map,
                                               use_trivialization=use_trivialization)
    orthogonal(gl, orthogonal_map=orthogonal_map, use_trivialization=use_trivialization)
    if use_trivialization and shape[0] != shape[1]:
        with tg.no_grad():
            gl.parametrizations.weight[0].base.copy_(
                tg.tensor(tl.parametrizations.weight[0].base.numpy()))
    return tl, gl


def _close(t, g, tol=1e-12):
    np.testing.assert_allclose(g.detach().numpy(), t.detach().numpy(), atol=tol, rtol=0)


@pytest.mark.parametrize("shape", SHAPES)
@pytest.mark.parametrize("orthogonal_map", MAPS)
@pytest.mark.parametrize("use_trivialization", [True, False])
def test_weight_original_and_gradient_match_torch(shape, orthogonal_map, use_trivialization):
    tl, gl = _pair(shape, orthogonal_map, use_trivialization)
    rng = np.random.default_rng(1)
    x, g = rng.standard_normal((2, shape[1])), rng.standard_normal((2, shape[0]))
    (tl(torch.tensor(x)) * torch.tensor(g)).sum().backward()
    (gl(tg.tensor(x)) * tg.tensor(g)).sum().backward()
    _close(tl.weight, gl.weight)
    t_orig, g_orig = tl.parametrizations.weight.original, gl.parametrizations.weight.original
    _close(t_orig, g_orig)
    _close(t_orig.grad, g_orig.grad)
    assert sorted(gl.state_dict()) == sorted(tl.state_dict())
    w = gl.weight.detach()
    small = w @ w.mT if shape[0] < shape[1] else w.mT @ w
    _close(torch.eye(min(shape), dtype=torch.float64), small, 1e-12)


def test_default_map_depends_on_the_shape():
    assert orthogonal(tg.nn.Linear(3, 3)).parametrizations.weight[0].orthogonal_map \
        == "matrix_exp"
    assert orthogonal(tg.nn.Linear(3, 5)).parametrizations.weight[0].orthogonal_map \
        == "householder"


@pytest.mark.parametrize("orthogonal_map", ["matrix_exp", "cayley", "householder"])
def test_sgd_steps_follow_torch_and_stay_orthogonal(orthogonal_map):
    tl, gl = _pair((4, 4), orthogonal_map, True, seed=3)
    topt = torch.optim.SGD(tl.parameters(), lr=0.1)
    gopt = tg.optim.SGD(gl.parameters(), lr=0.1)
    x = np.random.default_rng(4).standard_normal((6, 4))
    for _ in range(3):
        topt.zero_grad()
        gopt.zero_grad()
        (tl(torch.tensor(x)) ** 2).sum().backward()
        (gl(tg.tensor(x)) ** 2).sum().backward()
        topt.step()
        gopt.step()
    _close(tl.weight, gl.weight, 1e-10)
    w = gl.weight.detach()
    _close(torch.eye(4, dtype=torch.float64), w.mT @ w, 1e-12)


def test_batched_weight_and_float32():
    class M(tg.nn.Module):
        def __init__(self):
            super().__init__()
            self.weight = tg.nn.Parameter(tg.randn(2, 5, 3))
    m = orthogonal(M())
    w = m.weight.detach()
    assert w.dtype is tg.float32 and tuple(w.shape) == (2, 5, 3)
    np.testing.assert_allclose((w.mT @ w).numpy(), np.broadcast_to(np.eye(3), (2, 3, 3)),
                               atol=1e-5)


def test_cached_assignment_and_remove():
    tl, gl = _pair((4, 4), "cayley", True, seed=5)
    with parametrize.cached():
        first = gl.weight
        assert gl.weight is first
    q = tg.linalg.qr(tg.randn(4, 4, dtype=tg.float64))[0]
    gl.weight = q                                       # orthogonal: kept as the weight
    _close(torch.tensor(q.numpy()), gl.weight)
    w = gl.weight.detach().clone()
    parametrize.remove_parametrizations(gl, "weight", leave_parametrized=True)
    assert not parametrize.is_parametrized(gl)
    assert isinstance(gl.weight, tg.nn.Parameter)
    _close(torch.tensor(w.numpy()), gl.weight)


def test_errors_match_torch():
    with pytest.raises(ValueError, match="Expected a matrix or batch of matrices"):
        orthogonal(tg.nn.Linear(3, 3), "bias")
    with pytest.raises(ValueError, match="has no parameter or buffer with name 'wieght'"):
        orthogonal(tg.nn.Linear(3, 3), "wieght")
    with pytest.raises(ValueError, match='orthogonal_map has to be one of "matrix_exp"'):
        orthogonal(tg.nn.Linear(3, 3), orthogonal_map="expm")
    m = orthogonal(tg.nn.Linear(3, 3), use_trivialization=False)
    with pytest.raises(NotImplementedError, match="use_trivialization=False"):
        m.weight = tg.eye(3)
    with pytest.raises(ValueError, match=r"Expected a matrix or batch of matrices of shape"):
        orthogonal(tg.nn.Linear(3, 3)).weight = tg.eye(4)


@pytest.mark.parametrize("backend", ["numpy", "jax"])
@pytest.mark.parametrize("orthogonal_map", ["matrix_exp", "cayley", "householder"])
def test_compiled_training_step_equals_eager(backend, orthogonal_map):
    if backend == "jax":
        pytest.importorskip("jax")

    def make():
        tg.manual_seed(0)
        net = tg.nn.Sequential(tg.nn.Linear(4, 4), tg.nn.Tanh(), tg.nn.Linear(4, 3))
        orthogonal(net[0], orthogonal_map=orthogonal_map)
        return net, tg.optim.SGD(net.parameters(), lr=0.1)

    def step(net, opt, x):
        opt.zero_grad()
        loss = (net(x) ** 2).mean()
        loss.backward()
        opt.step()
        return loss

    x = tg.randn(8, 4)
    eager, compiled = make(), make()
    run = tg.compile(step) if backend == "numpy" else tg.compile(step, backend="jax")
    for _ in range(3):
        want, got = step(*eager, x), run(*compiled, x)
        np.testing.assert_allclose(got.item(), want.item(), rtol=1e-5)
    for p, q in zip(eager[0].parameters(), compiled[0].parameters()):
        np.testing.assert_allclose(q.detach().numpy(), p.detach().numpy(), atol=1e-5)


# ---- linalg.householder_product ----

@pytest.mark.parametrize("shape,k", [((5, 3), 3), ((4, 4), 2), ((2, 6, 4), 3)])
def test_householder_product_and_its_gradient_match_torch(shape, k):
    rng = np.random.default_rng(0)
    a, tau = rng.standard_normal(shape), rng.standard_normal(shape[:-2] + (k,))
    ta, tt = torch.tensor(a, requires_grad=True), torch.tensor(tau, requires_grad=True)
    ga, gt = tg.tensor(a, requires_grad=True), tg.tensor(tau, requires_grad=True)
    tq, gq = torch.linalg.householder_product(ta, tt), tg.linalg.householder_product(ga, gt)
    _close(tq, gq)
    g = rng.standard_normal(tq.shape)
    (tq * torch.tensor(g)).sum().backward()
    (gq * tg.tensor(g)).sum().backward()
    _close(ta.grad, ga.grad, 1e-11)
    _close(tt.grad, gt.grad, 1e-11)


def test_householder_product_second_order_and_geqrf():
    rng = np.random.default_rng(2)
    args = (tg.tensor(rng.standard_normal((4, 3)), requires_grad=True),
            tg.tensor(rng.standard_normal(2), requires_grad=True))
    assert tg.autograd.gradcheck(tg.linalg.householder_product, args)
    assert tg.autograd.gradgradcheck(tg.linalg.householder_product, args)
    x = rng.standard_normal((5, 3))
    (ta, tt), (ga, gt) = torch.geqrf(torch.tensor(x)), tg.geqrf(tg.tensor(x))
    _close(ta, ga)
    _close(tt, gt)
    _close(torch.linalg.householder_product(ta, tt), tg.orgqr(ga, gt))
    with pytest.raises(RuntimeError, match="greater than or equal to input.shape"):
        tg.linalg.householder_product(tg.randn(3, 4), tg.randn(2))
