"""tracegrad.linalg's solvers and decompositions against PyTorch: values (float32 and float64,
batched), float64 gradients and gradients of gradients by finite differences, compiled ==
eager on the numpy and JAX backends (values and gradients), PyTorch's errors (singular,
not positive-definite, non-square, integer input) eagerly and compiled, and a small Gaussian
process regression trained with Adam.
"""
import numpy as np
import pytest

import tracegrad as tg

torch = pytest.importorskip("torch")
pytestmark = pytest.mark.filterwarnings("ignore:torch.cholesky is deprecated")


def _general(rng, shape):
    """Well-conditioned square matrices: noise plus n on the diagonal."""
    n = shape[-1]
    return rng.standard_normal(shape) + n * np.eye(n)


def _spd_of(m, X):
    """An SPD matrix built from any square `X` (so finite differences stay symmetric)."""
    n = X.shape[-1]
    return X @ X.mT + n * m.eye(n, dtype=X.dtype)


class C:
    """A case: `f(m, *tensors)` with m the library (tracegrad or torch); `makers` build the
    float64 numpy inputs from a Generator."""

    def __init__(self, name, f, *makers, rtol32=1e-4, fd=True):
        self.name, self.f, self.makers, self.rtol32, self.fd = name, f, makers, rtol32, fd

    def arrays(self, seed=0):
        rng = np.random.default_rng(seed)
        return [mk(rng) for mk in self.makers]


def G(*shape):
    return lambda rng: _general(rng, shape)


def SPD(*shape):
    def make(rng):
        x = rng.standard_normal(shape)
        return x @ np.swapaxes(x, -1, -2) + shape[-1] * np.eye(shape[-1])
    return make


def R(*shape):
    return lambda rng: rng.standard_normal(shape)


SOLVER_CASES = [
    C("inv", lambda m, a: m.linalg.inv(a), G(3, 4, 4)),
    C("inverse", lambda m, a: m.inverse(a) + a.inverse(), G(4, 4)),
    C("det", lambda m, a: m.linalg.det(a), G(2, 3, 3)),
    C("det_alias", lambda m, a: m.det(a) * a.det(), G(3, 3)),
    C("slogdet", lambda m, a: m.linalg.slogdet(a).logabsdet * m.linalg.slogdet(a)[0],
      G(2, 4, 4)),
    C("slogdet_alias", lambda m, a: m.slogdet(a)[1] + a.slogdet().logabsdet, G(3, 3)),
    C("logdet", lambda m, a: m.logdet(_spd_of(m, a)) + _spd_of(m, a).logdet(), R(2, 3, 3)),
    C("solve", lambda m, a, b: m.linalg.solve(a, b), G(2, 4, 4), R(2, 4, 3)),
    C("solve_vector", lambda m, a, b: m.linalg.solve(a, b), G(2, 4, 4), R(2, 4)),
    C("solve_1d", lambda m, a, b: m.linalg.solve(a, b), G(4, 4), R(4)),
    C("solve_broadcast", lambda m, a, b: m.linalg.solve(a, b), G(4, 4), R(3, 4, 2)),
    C("solve_right", lambda m, a, b: m.linalg.solve(a, b, left=False), G(2, 4, 4),
      R(2, 3, 4)),
    C("cholesky", lambda m, x: m.linalg.cholesky(_spd_of(m, x)), R(2, 4, 4)),
    # A itself the leaf: PyTorch's gradient is symmetrized (finite differences of one
    # entry see only the triangle read, so no gradcheck here)
    C("cholesky_direct", lambda m, a: m.linalg.cholesky(a), SPD(2, 4, 4), fd=False),
    C("cholesky_upper", lambda m, x: m.linalg.cholesky(_spd_of(m, x), upper=True), R(4, 4)),
    C("cholesky_method", lambda m, x: _spd_of(m, x).cholesky(), R(3, 3)),
    C("solve_triangular_lower", lambda m, a, b: m.linalg.solve_triangular(a, b, upper=False),
      G(2, 4, 4), R(2, 4, 3)),
    C("solve_triangular_upper", lambda m, a, b: m.linalg.solve_triangular(a, b, upper=True),
      G(4, 4), R(3, 4, 2)),
    C("solve_triangular_right_unit",
      lambda m, a, b: m.linalg.solve_triangular(a, b, upper=True, left=False,
                                                unitriangular=True), G(2, 4, 4), R(2, 3, 4)),
    C("cholesky_solve", lambda m, x, b: m.cholesky_solve(b, m.linalg.cholesky(_spd_of(m, x))),
      R(2, 4, 4), R(2, 4, 2)),
    C("cholesky_solve_upper",
      lambda m, x, b: m.cholesky_solve(b, m.linalg.cholesky(_spd_of(m, x), upper=True),
                                       upper=True), R(4, 4), R(4, 3)),
]


def _sym(m, x):
    return x + x.mT


def _cols(v):
    """Eigen/singular vectors as columns, each times its first entry: sign-free."""
    return v * v[..., :1, :]


DECOMP_CASES = [
    C("qr", lambda m, a: m.linalg.qr(a), R(2, 5, 3)),
    C("qr_square_complete", lambda m, a: m.linalg.qr(a, mode="complete"), R(4, 4)),
    C("qr_named", lambda m, a: m.linalg.qr(a).R * 2 + m.linalg.qr(a).Q.sum(), R(4, 3)),
    C("eigh", lambda m, x: (lambda r: (r.eigenvalues, _cols(r.eigenvectors)))(
        m.linalg.eigh(_sym(m, x))), R(2, 4, 4)),
    C("eigh_upper", lambda m, x: (lambda r: (r[0], _cols(r[1])))(
        m.linalg.eigh(_sym(m, x), UPLO="U")), R(3, 3)),
    C("eigvalsh", lambda m, x: m.linalg.eigvalsh(_sym(m, x)), R(2, 4, 4)),
    C("svd_tall", lambda m, a: (lambda r: (_cols(r.U), r.S, _cols(r.Vh.mT)))(
        m.linalg.svd(a, full_matrices=False)), R(2, 5, 3)),
    C("svd_wide", lambda m, a: (lambda r: (_cols(r[0]), r[1], _cols(r[2].mT)))(
        m.linalg.svd(a, full_matrices=False)), R(3, 5)),
    # PyTorch differentiates only the first k columns of U / rows of Vh here
    C("svd_full_matrices", lambda m, a: (lambda r: (_cols(r[0]), r[1], _cols(r[2].mT)))(
        m.linalg.svd(a)), R(2, 4, 3), fd=False),
    C("svdvals", lambda m, a: m.linalg.svdvals(a), R(2, 3, 5)),
]
FUNCTION_CASES = [
    C("matrix_exp_small", lambda m, a: m.linalg.matrix_exp(a * 0.1), R(2, 3, 3)),
    C("matrix_exp_scaled", lambda m, a: m.linalg.matrix_exp(a * 2), R(4, 4)),
    C("matrix_exp_alias", lambda m, a: m.matrix_exp(a) + a.matrix_exp(), R(3, 3)),
    C("pinv_tall", lambda m, a: m.linalg.pinv(a), R(2, 5, 3)),
    C("pinv_wide", lambda m, a: m.pinverse(a), R(3, 4)),
    C("pinv_hermitian", lambda m, x: m.linalg.pinv(_sym(m, x), hermitian=True), R(2, 3, 3)),
    C("matrix_norm_nuc", lambda m, a: m.linalg.matrix_norm(a, ord="nuc"), R(2, 3, 4)),
    C("matrix_norm_2_dims", lambda m, a: m.linalg.matrix_norm(a, ord=2, dim=(0, 2),
                                                              keepdim=True), R(2, 3, 4)),
    C("norm_minus2", lambda m, a: m.linalg.norm(a, ord=-2), R(4, 3)),
    C("lstsq", lambda m, a, b: m.linalg.lstsq(a, b).solution, R(2, 5, 3), R(2, 5, 2)),
    C("lstsq_gelsd_vector", lambda m, a, b: m.linalg.lstsq(a, b, driver="gelsd"), R(5, 3),
      R(5)),
    C("lstsq_wide", lambda m, a, b: m.linalg.lstsq(a, b, driver="gelss")[0], R(3, 5),
      R(3, 2)),
    C("matrix_power", lambda m, a: m.linalg.matrix_power(a, 5) + a.matrix_power(-2)
      + m.matrix_power(a, 1), G(2, 3, 3), rtol32=1e-3),
    C("multi_dot", lambda m, v, a, b, w: m.linalg.multi_dot([v, a, b, w]), R(3), R(3, 4),
      R(4, 2), R(2)),
    C("cholesky_inverse", lambda m, x: m.cholesky_inverse(m.linalg.cholesky(_spd_of(m, x)))
      + m.linalg.cholesky(_spd_of(m, x), upper=True).cholesky_inverse(upper=True), R(2, 3, 3)),
    C("inv_ex", lambda m, a: m.linalg.inv_ex(a), G(2, 3, 3)),
    C("cholesky_ex", lambda m, x: m.linalg.cholesky_ex(_spd_of(m, x), upper=True), R(2, 3, 3)),
]
CASES = SOLVER_CASES + DECOMP_CASES + FUNCTION_CASES
IDS = [c.name for c in CASES]


def _flat(out):
    return [t for o in out for t in _flat(o)] if isinstance(out, (tuple, list)) else [out]


def _tg(arrays, dtype, rg=False):
    return [tg.tensor(a, dtype=dtype, requires_grad=rg) for a in arrays]


def _proj(outs, seed=1):
    """A fixed random projection of the outputs to a scalar (exercises every gradient)."""
    rng = np.random.default_rng(seed)
    return [rng.standard_normal(tuple(o.shape)) for o in outs]


@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("case", CASES, ids=IDS)
def test_values_and_gradients_match_torch(case, dtype):
    arrays = case.arrays()
    ours = _flat(case.f(tg, *_tg(arrays, getattr(tg, dtype), True)))
    ts = [torch.tensor(a, dtype=getattr(torch, dtype), requires_grad=True) for a in arrays]
    theirs = _flat(case.f(torch, *ts))
    rtol = case.rtol32 if dtype == "float32" else 1e-9
    for o, t in zip(ours, theirs):
        assert o.dtype.name == str(t.dtype).replace("torch.", "")
        np.testing.assert_allclose(o.detach().numpy(), t.detach().numpy(), rtol=rtol,
                                   atol=rtol)
    ws = _proj(ours)
    ins = _tg(arrays, getattr(tg, dtype), True)
    ours = _flat(case.f(tg, *ins))
    sum(( o * tg.tensor(w, dtype=o.dtype)).sum() for o, w in zip(ours, ws)
        if o.requires_grad).backward()
    sum((t * torch.tensor(w, dtype=t.dtype)).sum() for t, w in zip(theirs, ws)
        if t.requires_grad).backward()
    for a, t in zip(ins, ts):
        np.testing.assert_allclose(a.grad.numpy(), t.grad.numpy(), rtol=rtol * 10,
                                   atol=rtol * 10)


@pytest.mark.parametrize("case", [c for c in CASES if c.fd], ids=[c.name for c in CASES if c.fd])
def test_gradcheck_and_gradgradcheck_float64(case):
    ins = _tg(case.arrays(), tg.float64, True)

    def f(*xs):
        return tuple(o for o in _flat(case.f(tg, *xs)) if o.requires_grad)
    assert tg.autograd.gradcheck(f, ins, eps=1e-6, atol=1e-5, rtol=1e-4)
    assert tg.autograd.gradgradcheck(f, ins, eps=1e-6, atol=1e-4, rtol=1e-3)


def _loss(case):
    def loss(*xs):
        outs = [o for o in _flat(case.f(tg, *xs)) if o.is_floating_point()]
        return sum((o * o).sum() * (k + 1) for k, o in enumerate(outs))
    return loss


def _is_jax(cf):
    from tracegrad.backends.jax.program import JaxProgram
    return all(isinstance(p.forward_program, JaxProgram) for p in cf.programs)


# one case per primitive runs on JAX by default (jit compiles are slow); all with -m slow
_JAX_CORE = {"inv", "det", "slogdet", "solve", "cholesky", "solve_triangular_lower", "qr",
             "eigh", "svd_tall", "matrix_exp_small"}
COMPILE_PARAMS = [pytest.param(c, b, id=f"{c.name}-{b}",
                               marks=() if b == "numpy" or c.name in _JAX_CORE
                               else pytest.mark.slow)
                  for c in CASES for b in ("numpy", "jax")]


@pytest.mark.parametrize("case,backend", COMPILE_PARAMS)
def test_compiled_matches_eager(case, backend):
    if backend == "jax":
        pytest.importorskip("jax")
    arrays = case.arrays(seed=2)
    loss = _loss(case)
    cf = tg.compile(loss, backend=backend)
    for _ in range(2):                                   # tracing call, then compiled call
        eager_in, comp_in = _tg(arrays, tg.float64, True), _tg(arrays, tg.float64, True)
        e, c = loss(*eager_in), cf(*comp_in)
        e.backward()
        c.backward()
        np.testing.assert_allclose(c.item(), e.item(), rtol=1e-10)
        for a, b in zip(comp_in, eager_in):
            np.testing.assert_allclose(a.grad.numpy(), b.grad.numpy(), rtol=1e-8, atol=1e-10)
    if backend == "jax":
        assert _is_jax(cf)


# ---------------- errors ----------------
_SING = np.array([[1., 2., 3.], [2., 4., 6.], [1., 0., 1.]])
_NOT_PD = np.array([[1., 2.], [2., 1.]])
_NAN = np.array([[1., np.nan], [np.nan, 1.]])

ERROR_CASES = [
    ("inv_singular", lambda m, a: m.linalg.inv(a), [_SING]),
    ("inv_singular_batch", lambda m, a: m.linalg.inv(a), [np.stack([np.eye(3), _SING])]),
    ("inv_zeros", lambda m, a: m.inverse(a), [np.zeros((2, 2))]),
    ("solve_singular", lambda m, a, b: m.linalg.solve(a, b), [_SING, np.ones(3)]),
    ("solve_singular_batch", lambda m, a, b: m.linalg.solve(a, b),
     [np.stack([np.eye(3), _SING]), np.ones((2, 3, 1))]),
    ("cholesky_not_pd", lambda m, a: m.linalg.cholesky(a), [_NOT_PD]),
    ("cholesky_not_pd_batch", lambda m, a: m.linalg.cholesky(a),
     [np.stack([np.eye(2), _NOT_PD])]),
    ("cholesky_negative", lambda m, a: m.linalg.cholesky(a), [np.diag([-1., 1.])]),
    ("cholesky_nan", lambda m, a: m.linalg.cholesky(a), [np.array([[1., np.nan],
                                                                  [np.nan, 1.]])]),
    ("inv_nonsquare", lambda m, a: m.linalg.inv(a), [np.ones((2, 3))]),
    ("det_nonsquare", lambda m, a: m.linalg.det(a), [np.ones((2, 3))]),
    ("slogdet_nonsquare", lambda m, a: m.linalg.slogdet(a), [np.ones((2, 3))]),
    ("cholesky_nonsquare", lambda m, a: m.linalg.cholesky(a), [np.ones((2, 3))]),
    ("solve_nonsquare", lambda m, a, b: m.linalg.solve(a, b), [np.ones((2, 3)), np.ones(2)]),
    ("solve_incompatible", lambda m, a, b: m.linalg.solve(a, b), [np.eye(3), np.ones(2)]),
    ("inv_1d", lambda m, a: m.linalg.inv(a), [np.ones(3)]),
    ("solve_triangular_1d_B", lambda m, a, b: m.linalg.solve_triangular(a, b, upper=True),
     [np.eye(2), np.ones(2)]),
    ("solve_triangular_incompatible",
     lambda m, a, b: m.linalg.solve_triangular(a, b, upper=False), [np.eye(2), np.ones((3, 1))]),
    ("svd_nan", lambda m, a: m.linalg.svd(a), [np.stack([np.eye(2), _NAN])]),
    ("pinv_nan", lambda m, a: m.linalg.pinv(a), [_NAN]),
    ("qr_1d", lambda m, a: m.linalg.qr(a), [np.ones(3)]),
    ("qr_bad_mode", lambda m, a: m.linalg.qr(a, mode="x"), [np.eye(2)]),
    ("svd_1d", lambda m, a: m.linalg.svd(a), [np.ones(3)]),
    ("eigh_1d", lambda m, a: m.linalg.eigh(a), [np.ones(3)]),
    ("eigh_nonsquare", lambda m, a: m.linalg.eigh(a), [np.ones((2, 3))]),
    ("eigh_bad_uplo", lambda m, a: m.linalg.eigh(a, UPLO="X"), [np.eye(2)]),
    ("matrix_exp_nonsquare", lambda m, a: m.linalg.matrix_exp(a), [np.ones((2, 3))]),
    ("matrix_exp_1d", lambda m, a: m.linalg.matrix_exp(a), [np.ones(3)]),
    ("pinv_1d", lambda m, a: m.linalg.pinv(a), [np.ones(3)]),
    ("lstsq_1d", lambda m, a, b: m.linalg.lstsq(a, b), [np.ones(3), np.ones(3)]),
    ("matrix_power_nonsquare", lambda m, a: m.linalg.matrix_power(a, 2), [np.ones((2, 3))]),
    ("matrix_power_singular", lambda m, a: m.linalg.matrix_power(a, -1), [np.zeros((2, 2))]),
    ("multi_dot_one", lambda m, a: m.linalg.multi_dot([a]), [np.ones(3)]),
    ("multi_dot_3d", lambda m, a, b: m.linalg.multi_dot([a, b]), [np.ones((2, 3, 3)),
                                                                  np.ones((3, 2))]),
    ("cholesky_inverse_1d", lambda m, a: m.cholesky_inverse(a), [np.ones(3)]),
    ("lstsq_driver", lambda m, a, b: m.linalg.lstsq(a, b, driver="x"), [np.eye(3), np.eye(3)]),
    ("lstsq_rows", lambda m, a, b: m.linalg.lstsq(a, b), [np.ones((5, 3)), np.ones((4, 2))]),
]
INT_CASES = [
    ("inv", lambda m, a: m.linalg.inv(a)),
    ("inverse", lambda m, a: m.inverse(a)),
    ("det", lambda m, a: m.linalg.det(a)),
    ("slogdet", lambda m, a: m.linalg.slogdet(a)),
    ("cholesky", lambda m, a: m.linalg.cholesky(a)),
    ("solve", lambda m, a: m.linalg.solve(a, a)),
    ("qr", lambda m, a: m.linalg.qr(a)),
    ("svd", lambda m, a: m.linalg.svd(a)),
    ("svdvals", lambda m, a: m.linalg.svdvals(a)),
    ("eigh", lambda m, a: m.linalg.eigh(a)),
    ("eigvalsh", lambda m, a: m.linalg.eigvalsh(a)),
    ("matrix_exp", lambda m, a: m.linalg.matrix_exp(a)),
    ("pinv", lambda m, a: m.linalg.pinv(a)),
    ("matrix_power_negative", lambda m, a: m.linalg.matrix_power(a, -1)),
    ("cholesky_inverse", lambda m, a: m.cholesky_inverse(a)),
]


def _raised(fn):
    try:
        fn()
    except Exception as e:     # noqa: BLE001
        return e
    raise AssertionError("no error raised")


def _same_error(ours, theirs):
    assert isinstance(ours, RuntimeError) and isinstance(theirs, RuntimeError)
    assert isinstance(ours, tg.linalg.LinAlgError) == isinstance(theirs,
                                                                 torch.linalg.LinAlgError)
    assert str(ours).split("\n")[0] == str(theirs), (str(ours), str(theirs))


@pytest.mark.parametrize("name,f,arrays", ERROR_CASES, ids=[c[0] for c in ERROR_CASES])
def test_errors_match_torch_eager_and_compiled(name, f, arrays):
    theirs = _raised(lambda: f(torch, *[torch.tensor(a) for a in arrays]))
    _same_error(_raised(lambda: f(tg, *[tg.tensor(a) for a in arrays])), theirs)
    for backend in ("numpy", "jax"):
        if backend == "jax":
            pytest.importorskip("jax")
        cf = tg.compile(lambda *xs: _flat(f(tg, *xs))[0] * 2, backend=backend)
        for _ in range(2):
            _same_error(_raised(lambda: cf(*[tg.tensor(a) for a in arrays])), theirs)


RUNTIME_CASES = [
    ("svd_nan", lambda m, a, b: (m.linalg.svdvals(a) * 2).sum(),
     np.array([[1., np.nan, 0.], [np.nan, 1., 0.], [0., 0., 1.]])),
    ("solve_inv", lambda m, a, b: (m.linalg.solve(a, b) + m.linalg.inv(a)).sum(), _SING),
    ("cholesky", lambda m, a, b: (m.linalg.cholesky(a) @ b).sum(), np.eye(3) - 2),
]


@pytest.mark.parametrize("backend", ["numpy", "jax"])
@pytest.mark.parametrize("name,f,bad", RUNTIME_CASES, ids=[c[0] for c in RUNTIME_CASES])
def test_compiled_program_raises_only_on_the_call_whose_matrix_is_bad(name, f, bad, backend):
    """A compiled path traced on good matrices meets a singular (not positive-definite) one
    at run time: eager's error, and the path keeps working after it."""
    if backend == "jax":
        pytest.importorskip("jax")
    cf = tg.compile(lambda a, b: f(tg, a, b), backend=backend)
    good, b = np.eye(3) * 2, np.ones((3, 3))
    for _ in range(2):
        r = cf(tg.tensor(good, requires_grad=True), tg.tensor(b))
        r.backward()
        assert r.item() == pytest.approx(f(tg, tg.tensor(good), tg.tensor(b)).item())
    theirs = _raised(lambda: f(torch, torch.tensor(bad), torch.tensor(b)))
    _same_error(_raised(lambda: cf(tg.tensor(bad, requires_grad=True), tg.tensor(b))), theirs)
    r = cf(tg.tensor(good, requires_grad=True), tg.tensor(b))
    assert r.item() == pytest.approx(f(tg, tg.tensor(good), tg.tensor(b)).item())
    assert cf.stats.traces == 1                 # the bad call ran the compiled program


@pytest.mark.parametrize("name,f", INT_CASES, ids=[c[0] for c in INT_CASES])
def test_integer_input_raises_like_torch(name, f):
    theirs = _raised(lambda: f(torch, torch.eye(2, dtype=torch.long)))
    ours = _raised(lambda: f(tg, tg.eye(2, dtype=tg.int64)))
    assert isinstance(ours, RuntimeError)
    assert isinstance(ours, NotImplementedError) == isinstance(theirs, NotImplementedError)
    assert str(ours).split("\n")[0] == str(theirs)
    cf = tg.compile(lambda a: f(tg, a))
    assert str(_raised(lambda: cf(tg.eye(2, dtype=tg.int64)))).split("\n")[0] == str(theirs)


BACKWARD_ERRORS = [
    ("qr_complete_tall", lambda m, a: m.linalg.qr(a, mode="complete")[0].sum()),
    ("qr_r_mode", lambda m, a: m.linalg.qr(a, mode="r")[1].sum()),
]


@pytest.mark.parametrize("name,f", BACKWARD_ERRORS, ids=[c[0] for c in BACKWARD_ERRORS])
def test_backward_errors_match_torch(name, f):
    a = np.random.default_rng(0).standard_normal((4, 3))
    ta = torch.tensor(a, requires_grad=True)
    theirs = _raised(lambda: f(torch, ta).backward())
    ours = _raised(lambda: f(tg, tg.tensor(a, requires_grad=True)).backward())
    assert isinstance(ours, RuntimeError)
    assert str(ours).split("\n")[0] == str(theirs)


EX_CASES = [
    ("inv_ex", lambda m, a, **kw: m.linalg.inv_ex(a, **kw), np.stack([np.eye(3), _SING])),
    ("cholesky_ex", lambda m, a, **kw: m.linalg.cholesky_ex(a, **kw),
     np.stack([np.eye(2), _NOT_PD, np.diag([-1., 1.])])),
]


@pytest.mark.parametrize("name,f,a", EX_CASES, ids=[c[0] for c in EX_CASES])
def test_ex_variants_report_info_like_torch_eager_and_compiled(name, f, a):
    """info as PyTorch's (int32, per batch element); the failed matrices' results are NaN
    here (PyTorch leaves LAPACK's partial result); check_errors=True raises PyTorch's error."""
    res, ref = f(tg, tg.tensor(a)), f(torch, torch.tensor(a))
    assert res.info.dtype is tg.int32
    np.testing.assert_array_equal(res.info.numpy(), ref.info.numpy())
    np.testing.assert_array_equal(res[0].numpy()[0], ref[0].numpy()[0])
    assert np.isnan(res[0].numpy()[1:]).all()
    theirs = _raised(lambda: f(torch, torch.tensor(a), check_errors=True))
    _same_error(_raised(lambda: f(tg, tg.tensor(a), check_errors=True)), theirs)
    for backend in ("numpy", "jax"):
        if backend == "jax":
            pytest.importorskip("jax")
        cf = tg.compile(lambda x: tuple(f(tg, x)), backend=backend)
        good = np.stack([np.eye(a.shape[-1]) * 2] * len(a))
        for x in (good, a, good):
            got, want = cf(tg.tensor(x)), f(tg, tg.tensor(x))
            np.testing.assert_array_equal(got[0].numpy(), want[0].numpy())
            np.testing.assert_array_equal(got[1].numpy(), want[1].numpy())
        assert cf.stats.traces == 1


@pytest.mark.parametrize("driver", [None, "gels", "gelsy", "gelsd", "gelss"])
def test_lstsq_fields_match_torch_for_each_driver(driver):
    rng = np.random.default_rng(0)
    deficient = np.zeros((5, 3))
    deficient[:, 0] = 1
    for a, b in ((rng.standard_normal((2, 5, 3)), rng.standard_normal((2, 5, 2))),
                 (deficient, np.ones((5, 2)))):
        if driver == "gels" and a is deficient:      # QR without pivoting: PyTorch raises
            theirs = _raised(lambda: torch.linalg.lstsq(torch.tensor(a), torch.tensor(b),
                                                        driver=driver))
            _same_error(_raised(lambda: tg.linalg.lstsq(tg.tensor(a), tg.tensor(b),
                                                        driver=driver)), theirs)
            continue
        ours = tg.linalg.lstsq(tg.tensor(a), tg.tensor(b), driver=driver)
        theirs = torch.linalg.lstsq(torch.tensor(a), torch.tensor(b), driver=driver)
        for o, t, name in zip(ours, theirs, ("solution", "residuals", "rank", "sv")):
            assert tuple(o.shape) == tuple(t.shape), name
            assert o.dtype.name == str(t.dtype).replace("torch.", ""), name
            if name in ("solution", "rank") and a is deficient and driver in (None, "gelsy"):
                # PyTorch's gelsy varies between runs here (solution 0 or 1, rank 0 or 1):
                # ours must be the true rank, 1
                if name == "rank":
                    assert int(o) == 1
                continue
            np.testing.assert_allclose(o.numpy(), t.numpy(), atol=1e-12, err_msg=name)


def test_pinv_of_rank_deficient_matrices_matches_torch():
    for a, kw in ((np.ones((3, 3)), {}), (np.ones((3, 3)), {"atol": 0.5}),
                  (np.diag([1., 1e-20, 2.]), {}), (np.diag([3., 1., 2.]), {"rtol": 0.5})):
        np.testing.assert_allclose(tg.linalg.pinv(tg.tensor(a), **kw).numpy(),
                                   torch.linalg.pinv(torch.tensor(a), **kw).numpy(),
                                   atol=1e-12)


REPEATED = [np.eye(3), np.diag([1., 1., 2.]), np.ones((3, 3)) + np.eye(3)]
SPECTRAL = [
    ("eigvalsh", lambda m, a: (m.linalg.eigvalsh(a) ** 2).sum()),
    ("eigh_values", lambda m, a: m.linalg.eigh(a).eigenvalues.exp().sum()),
    ("svdvals", lambda m, a: (m.linalg.svdvals(a) ** 3).sum()),
    ("svdvals_tall", lambda m, a: m.linalg.svdvals(a[:, :2]).sum()),
    ("nuclear_norm", lambda m, a: m.linalg.matrix_norm(a, ord="nuc")),
]


@pytest.mark.parametrize("name,f", SPECTRAL, ids=[c[0] for c in SPECTRAL])
def test_spectral_gradients_at_repeated_values_match_torch(name, f):
    """Note [Repeated values]: a symmetric function of the eigenvalues (singular values) has
    a gradient at repeated values; PyTorch computes it, and so must we (no NaN)."""
    for a in REPEATED:
        ours, theirs = tg.tensor(a, requires_grad=True), torch.tensor(a, requires_grad=True)
        f(tg, ours).backward()
        f(torch, theirs).backward()
        np.testing.assert_allclose(ours.grad.numpy(), theirs.grad.numpy(), atol=1e-12)


def test_matrix_power_of_integers_and_zero_power_like_torch():
    for a, n in ((np.eye(2, dtype=np.int64) * 2, 3), (np.ones((2, 2, 2)), 0),
                 (np.arange(4).reshape(2, 2), 2)):
        ours = tg.linalg.matrix_power(tg.tensor(a), n)
        theirs = torch.linalg.matrix_power(torch.tensor(a), n)
        assert ours.dtype.name == str(theirs.dtype).replace("torch.", "")
        np.testing.assert_array_equal(ours.numpy(), theirs.numpy())


def test_logdet_of_negative_and_singular_matrices_is_nan_and_minus_inf():
    for a in (np.diag([-1., 1.]), np.zeros((2, 2)), np.diag([2., 3.])):
        np.testing.assert_equal(tg.logdet(tg.tensor(a)).item(),
                                torch.logdet(torch.tensor(a)).item())


def test_solve_triangular_with_zero_diagonal_gives_inf_nan_like_torch():
    a, b = np.zeros((2, 2)), np.ones((2, 1))
    np.testing.assert_equal(
        tg.linalg.solve_triangular(tg.tensor(a), tg.tensor(b), upper=True).numpy(),
        torch.linalg.solve_triangular(torch.tensor(a), torch.tensor(b), upper=True).numpy())


def test_grad_fn_names_and_named_tuples():
    a = tg.tensor(_general(np.random.default_rng(0), (3, 3)), requires_grad=True)
    assert type(tg.linalg.inv(a).grad_fn).__name__ == "LinalgInvExBackward0"
    assert type(tg.linalg.det(a).grad_fn).__name__ == "LinalgDetBackward0"
    assert type(tg.linalg.solve(a, a).grad_fn).__name__ == "LinalgSolveExBackward0"
    assert type(tg.linalg.slogdet(a).logabsdet.grad_fn).__name__ == "LinalgSlogdetBackward0"
    assert repr(tg.linalg.slogdet(a)).startswith("torch.return_types.linalg_slogdet(\nsign=")
    assert issubclass(tg.linalg.LinAlgError, RuntimeError)


# ---------------- a real program: Gaussian process regression ----------------
def _gp_data():
    rng = np.random.default_rng(3)
    x = np.sort(rng.uniform(-3, 3, 24))
    y = np.sin(x) + 0.1 * rng.standard_normal(24)
    return x, y


def _gp_nlml(m, x, y, log_ls, log_sf, log_sn):
    """Negative log marginal likelihood of an RBF-kernel GP (Rasmussen & Williams, Alg. 2.1)."""
    d = x.unsqueeze(1) - x.unsqueeze(0)
    K = m.exp(2 * log_sf) * m.exp(-0.5 * d * d / m.exp(2 * log_ls))
    K = K + (m.exp(2 * log_sn) + 1e-6) * m.eye(x.shape[0], dtype=x.dtype)
    L = m.linalg.cholesky(K)
    alpha = m.cholesky_solve(y.unsqueeze(1), L)
    v = m.linalg.solve_triangular(L, y.unsqueeze(1), upper=False)
    fit = 0.5 * (y.unsqueeze(1) * alpha).sum() + 0 * (v * v).sum()
    logdet = m.log(m.diag(L)).sum()
    return fit + logdet + 0.5 * x.shape[0] * np.log(2 * np.pi)


def _train(m, step_fn=None, steps=5, dtype="float64"):
    x, y = _gp_data()
    dt = getattr(m, dtype)
    xt, yt = m.tensor(x, dtype=dt), m.tensor(y, dtype=dt)
    params = [m.tensor(v, dtype=dt, requires_grad=True) for v in (0.0, 0.0, -1.0)]
    opt = m.optim.Adam(params, lr=0.05)

    def step(xt, yt):
        opt.zero_grad()
        loss = _gp_nlml(m, xt, yt, *params)
        loss.backward()
        opt.step()
        return loss
    run = step if step_fn is None else step_fn(step)
    losses = [run(xt, yt).detach().item() for _ in range(steps)]
    return losses, [p.detach().numpy().copy() for p in params]


@pytest.mark.parametrize("backend", ["numpy", "jax"])
def test_gp_regression_trains_compiled_like_eager_and_torch(backend):
    if backend == "jax":
        pytest.importorskip("jax")
    eager = _train(tg)
    compiled = _train(tg, lambda f: tg.compile(f, backend=backend))
    reference = _train(torch)
    np.testing.assert_allclose(compiled[0], eager[0], rtol=1e-10)
    for a, b in zip(compiled[1], eager[1]):
        np.testing.assert_allclose(a, b, rtol=1e-9, atol=1e-12)
    np.testing.assert_allclose(eager[0], reference[0], rtol=1e-9)
    for a, b in zip(eager[1], reference[1]):
        np.testing.assert_allclose(a, b, rtol=1e-8, atol=1e-10)
    assert eager[0][-1] < eager[0][0]
