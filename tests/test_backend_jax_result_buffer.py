"""A plain JAX program's small user results in one buffer (Note [One result buffer] in
backends/jax/result_buffer.py): the results must be what separate results gave (values,
shapes, dtypes, fresh writable owning arrays sharing no memory), and programs whose results
differ in dtype, are large, or are not plain keep one result per array.
"""
import numpy as np
import pytest

jax = pytest.importorskip("jax")

import tracegrad as tg  # noqa: E402


def _path(comp):
    (entry,) = [e for e in comp.entries.values() if e.paths]
    (path,) = entry.paths
    return path


def _fresh(arrays):
    for a in arrays:
        assert type(a) is np.ndarray and a.flags.writeable and a.flags.owndata
        assert a.flags.c_contiguous and a.base is None
    for i, a in enumerate(arrays):
        for b in arrays[i + 1:]:
            assert not np.shares_memory(a, b)


def several(x, w):
    h = (x * w).sin()
    return h.sum(), h * 2.0, (h.reshape(2, 3) + 1.0).tanh(), (w * 3.0).exp()


def test_several_results_of_one_dtype_equal_eager_and_separate_results():
    x0 = np.linspace(-1, 1, 6).astype(np.float32)
    w0 = np.linspace(0.1, 0.6, 6).astype(np.float32)
    comp = tg.compile(several, backend="jax")
    for _ in range(3):
        x, w = tg.tensor(x0, requires_grad=True), tg.tensor(w0, requires_grad=True)
        outs = comp(x, w)
        (outs[0] + outs[1].sum() + outs[2].sum() + outs[3].sum()).backward()
        ex, ew = tg.tensor(x0, requires_grad=True), tg.tensor(w0, requires_grad=True)
        eouts = several(ex, ew)
        (eouts[0] + eouts[1].sum() + eouts[2].sum() + eouts[3].sum()).backward()
        for o, e in zip(outs, eouts):
            assert o.shape == e.shape and o.dtype == e.dtype
            np.testing.assert_allclose(o.detach().numpy(), e.detach().numpy(), rtol=1e-5, atol=1e-6)
        np.testing.assert_allclose(x.grad.numpy(), ex.grad.numpy(), rtol=1e-5, atol=1e-6)
        np.testing.assert_allclose(w.grad.numpy(), ew.grad.numpy(), rtol=1e-5, atol=1e-6)
        _fresh([o._data for o in outs] + [x.grad._data, w.grad._data])
    path = _path(comp)
    fwd, bwd = path.forward_program, path.backward_program
    assert fwd._unpack is not None and bwd._unpack is not None
    # the same program's general call gives the same results
    args = [x0, w0]
    a, b = fwd.fn(*args), fwd(*args)
    for p, q in zip(a[:fwd.writable], b[:fwd.writable]):
        assert p.shape == q.shape and p.dtype == q.dtype
        np.testing.assert_array_equal(p, q)
    _fresh(a[:fwd.writable])
    _fresh(b[:fwd.writable])


def test_writing_into_a_result_does_not_change_another():
    comp = tg.compile(several, backend="jax")
    x = tg.tensor(np.linspace(-1, 1, 6).astype(np.float32))
    w = tg.tensor(np.linspace(0.1, 0.6, 6).astype(np.float32))
    outs = comp(x, w)
    before = [o.numpy().copy() for o in outs]
    outs[1].add_(100.0)
    outs[0].mul_(0.0)
    np.testing.assert_array_equal(outs[2].numpy(), before[2])
    np.testing.assert_array_equal(outs[3].numpy(), before[3])
    np.testing.assert_array_equal(outs[1].numpy(), before[1] + 100.0)


def test_the_speculated_loss_and_gradients_come_in_one_buffer():
    def loss_fn(x, w):
        return ((x * w).sin() * 1.5 + w).tanh().sum()
    x0 = np.linspace(-1, 1, 5).astype(np.float32)
    w0 = np.linspace(0.2, 0.7, 5).astype(np.float32)
    comp = tg.compile(loss_fn, backend="jax")
    x, w = tg.tensor(x0, requires_grad=True), tg.tensor(w0, requires_grad=True)
    ex, ew = tg.tensor(x0, requires_grad=True), tg.tensor(w0, requires_grad=True)
    eloss = loss_fn(ex, ew)
    eloss.backward()
    for _ in range(4):
        x.grad = w.grad = None
        loss = comp(x, w)
        loss.backward()
        assert loss.shape == () and loss.dtype == tg.float32
        np.testing.assert_allclose(loss.item(), eloss.item(), rtol=1e-6)
        np.testing.assert_allclose(x.grad.numpy(), ex.grad.numpy(), rtol=1e-5, atol=1e-7)
        np.testing.assert_allclose(w.grad.numpy(), ew.grad.numpy(), rtol=1e-5, atol=1e-7)
        _fresh([loss._data, x.grad._data, w.grad._data])
    spec = _path(comp).speculation
    assert spec.program is not None and spec.program._unpack is not None


def test_results_of_two_dtypes_or_large_are_separate():
    def mixed(x):
        return x.sum(), (x > 0).sum(), x * 2.0

    def large(x):
        return x * 2.0, x + 1.0

    x = tg.tensor(np.linspace(-1, 1, 6).astype(np.float32))
    comp = tg.compile(mixed, backend="jax")
    got, ref = comp(x), mixed(x)
    for o, e in zip(got, ref):
        assert o.dtype == e.dtype
        np.testing.assert_array_equal(o.numpy(), e.numpy())
    assert _path(comp).forward_program._unpack is None
    big = tg.tensor(np.linspace(-1, 1, 4096).astype(np.float32))
    comp = tg.compile(large, backend="jax")
    for o, e in zip(comp(big), large(big)):
        np.testing.assert_array_equal(o.numpy(), e.numpy())
    assert _path(comp).forward_program._unpack is None


@pytest.mark.parametrize("kind", ["int", "bool"])
def test_integer_and_bool_results_in_one_buffer(kind):
    def ints(a, b):
        return a + b, a * b, (a - b).abs() - 1

    def bools(a, b):
        return a > b, a < b, (a == b).any(0)

    fn = ints if kind == "int" else bools
    a = tg.tensor(np.array([[1, -2], [3, 4]], np.int32))
    b = tg.tensor(np.array([[5, 6], [-7, 4]], np.int32))
    comp = tg.compile(fn, backend="jax")
    for _ in range(2):
        got, ref = comp(a, b), fn(a, b)
        for o, e in zip(got, ref):
            assert o.dtype == e.dtype and o.shape == e.shape
            np.testing.assert_array_equal(o.numpy(), e.numpy())
        _fresh([o._data for o in got])
    assert _path(comp).forward_program._unpack is not None


# ---- Note [Small results in one buffer]: programs that are not plain ----
N_BIG = 128 * 256            # float32: 128 KB, a result adopted rather than packed


def _mlp_step(compiled):
    tg.manual_seed(0)
    model = tg.nn.Sequential(tg.nn.Linear(256, 128), tg.nn.ReLU(), tg.nn.Linear(128, 10))
    opt = tg.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)

    def step(x, y):
        opt.zero_grad()
        loss = tg.nn.functional.cross_entropy(model(x), y)   # (guards: not plain)
        loss.backward()
        opt.step()
        return loss
    return (tg.compile(step, backend="jax") if compiled else step), model, opt


def test_a_training_step_packs_its_small_results_and_matches_eager():
    rng = np.random.default_rng(0)
    batches = [(tg.tensor(rng.standard_normal((64, 256)).astype(np.float32)),
                tg.tensor(rng.integers(0, 10, 64))) for _ in range(4)]
    runs = {}
    for compiled in (False, True):
        fn, model, opt = _mlp_step(compiled)
        bias = model[2].bias
        view = bias.detach().numpy()             # a view the user holds: sees each step
        ptr = bias.data_ptr()
        losses = [fn(x, y) for x, y in batches]
        assert np.shares_memory(view, bias.detach().numpy()) and bias.data_ptr() == ptr
        runs[compiled] = (losses, model, opt, view)
    (l0, m0, o0, v0), (l1, m1, o1, v1) = runs[False], runs[True]
    np.testing.assert_allclose([t.item() for t in l1], [t.item() for t in l0], rtol=1e-5)
    np.testing.assert_allclose(v1, v0, rtol=1e-4, atol=1e-6)
    for a, b in zip(m0.parameters(), m1.parameters()):
        np.testing.assert_allclose(b.detach().numpy(), a.detach().numpy(), rtol=1e-4, atol=1e-6)
        np.testing.assert_allclose(b.grad.numpy(), a.grad.numpy(), rtol=1e-4, atol=1e-6)
        assert b._version == a._version
        np.testing.assert_allclose(o1.state[b]["momentum_buffer"].numpy(),
                                   o0.state[a]["momentum_buffer"].numpy(), rtol=1e-4, atol=1e-6)
    small = [t._data for t in (l1[-1], m1[0].bias.grad, m1[2].bias.grad, m1[2].weight.grad)]
    _fresh(small)                                # owning, writable, sharing nothing
    for a in small:
        for p in m1.parameters():
            assert not np.shares_memory(a, p.detach().numpy())
    m1[2].bias.grad.add_(1.0)                    # writing one changes nothing else
    np.testing.assert_allclose(m1[2].bias.detach().numpy(), m0[2].bias.detach().numpy(),
                               rtol=1e-4, atol=1e-6)


def test_the_small_results_buffer_is_used_where_it_applies():
    fn, model, opt = _mlp_step(True)
    x, y = tg.randn(64, 256), tg.randint(0, 10, (64,))
    fn(x, y)
    fn(x, y)
    prog = _path(fn).forward_program
    small = prog._small
    assert small is not None and 0 in small.positions         # the loss
    outs = prog.graph.outputs
    assert all(outs[k].type.nbytes < N_BIG for k in small.positions)
    assert not prog._plain()


def _accumulate(i, acc, facc):
    acc.add_(i)                          # small mutated inputs of two dtypes, behind a guard
    facc.add_(1.5)
    if acc.sum() > 0:
        return acc * 2, acc.max(), facc.sum(), i + 1, acc
    return acc, acc.min(), facc.sum(), i, acc


def test_guarded_program_with_small_mutations_of_two_dtypes_matches_eager():
    def fresh():
        return (tg.tensor(np.arange(6, dtype=np.int64)), tg.tensor(np.zeros(6, np.int64)),
                tg.tensor(np.zeros(3, np.float32)))
    comp = tg.compile(_accumulate, backend="jax")
    (ie, ae, fe), (ij, aj, fj) = fresh(), fresh()
    view = aj.numpy()                    # held: the array keeps receiving the new values
    for _ in range(3):
        want, got = _accumulate(ie, ae, fe), comp(ij, aj, fj)
        for u, v in zip(want, got):
            np.testing.assert_array_equal(v.numpy(), u.numpy())
            assert v.dtype == u.dtype and v._version == u._version
        assert got[4] is aj                      # the input itself, as eager returns it
        _fresh([t._data for t in got[:4]])
    np.testing.assert_array_equal(view, ae.numpy())
    assert (aj._version, fj._version) == (ae._version, fe._version)
    assert _path(comp).forward_program._small is not None
