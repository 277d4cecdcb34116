"""The selection, ordering, scan and structure ops of issue 12 beyond what the op table checks
(tests/op_table_new.py): gradcheck and gradgradcheck in float64, errors of PyTorch's types
(compared against PyTorch itself), grad_fn printing, compiled == eager over two calls with
different inputs (values and gradients), multinomial's draws and its replay under compile,
and `where`/`einsum`/`bmm`/`repeat`/`F.one_hot` against PyTorch."""
import numpy as np
import pytest

import tracegrad as tg


@pytest.fixture
def torch():
    return pytest.importorskip("torch")


def _x(*shape, seed=0, grad=True, distinct=False):
    rng = np.random.default_rng(seed)
    if distinct:
        n = int(np.prod(shape))
        a = rng.permutation(n).reshape(shape) * 0.5 + rng.uniform(-0.1, 0.1, shape)
    else:
        a = rng.standard_normal(shape)
    return tg.tensor(a, requires_grad=grad)


IDX = [[0, 1, 2, 0], [2, 0, 1, 1]]           # (2, 4), distinct within each column
MASK = [[True, False, True, False], [False, False, True, True], [True, True, False, False]]


def _mask(m):
    return m.tensor(MASK)


# (name, fn(m, *tensors) -> tensor, input builders, grad_fn name) -- `m` is tg or torch
CASES = [
    ("tril", lambda m, x: m.tril(x, -1), [(3, 4)], "TrilBackward0"),
    ("triu", lambda m, x: x.triu(1), [(2, 3, 4)], "TriuBackward0"),
    ("tril_", lambda m, x: (x * 1).tril_(1), [(3, 4)], "TrilBackward0"),
    ("gather", lambda m, x: m.gather(x, 0, m.tensor(IDX)), [(3, 4)], "GatherBackward0"),
    ("gather_dim1", lambda m, x: x.gather(1, m.tensor([[3, 3], [0, 1], [2, 2]])), [(3, 4)],
     "GatherBackward0"),
    ("scatter", lambda m, x, s: m.scatter(x, 0, m.tensor(IDX), s), [(3, 4), (2, 4)],
     "ScatterBackward0"),
    ("scatter_larger_src", lambda m, x, s: x.scatter(1, m.tensor([[3, 0], [1, 2]]), s),
     [(3, 4), (3, 3)], "ScatterBackward0"),
    ("scatter_value", lambda m, x: m.scatter(x, 0, m.tensor(IDX), value=0.5), [(3, 4)],
     "ScatterBackward1"),
    ("scatter_add", lambda m, x, s: m.scatter_add(x, 1, m.tensor([[3, 3], [0, 1], [3, 2]]), s),
     [(3, 4), (3, 2)], "ScatterAddBackward0"),
    ("scatter_", lambda m, x, s: x.clone().scatter_(0, m.tensor(IDX), s), [(3, 4), (2, 4)],
     "ScatterBackward0"),
    ("scatter_add_", lambda m, x, s: (x * 1).scatter_add_(0, m.tensor(IDX), s),
     [(3, 4), (2, 4)], "ScatterAddBackward0"),
    ("index_select", lambda m, x: m.index_select(x, 1, m.tensor([3, 0, 3])), [(3, 4)],
     "IndexSelectBackward0"),
    ("masked_fill", lambda m, x: m.masked_fill(x, _mask(m), -2.0), [(3, 4)],
     "MaskedFillBackward0"),
    ("masked_fill_tensor", lambda m, x, v: x.masked_fill(_mask(m), v), [(3, 4), ()],
     "MaskedFillBackward1"),
    ("masked_fill_", lambda m, x: x.clone().masked_fill_(_mask(m), 3.0), [(3, 4)],
     "MaskedFillBackward0"),
    ("sort", lambda m, x: m.sort(x, 0)[0], [(3, 4)], "SortBackward0"),
    ("sort_desc", lambda m, x: x.sort(descending=True).values, [(3, 4)], "SortBackward0"),
    ("sort_stable", lambda m, x: x.sort(stable=True, dim=0).values, [(3, 4)], "SortBackward1"),
    ("topk", lambda m, x: m.topk(x, 2)[0], [(3, 4)], "TopkBackward0"),
    ("topk_smallest", lambda m, x: x.topk(2, dim=0, largest=False).values, [(3, 4)],
     "TopkBackward0"),
    ("cumsum", lambda m, x: m.cumsum(x, 1), [(3, 4)], "CumsumBackward0"),
    ("cumsum_dim0", lambda m, x: x.cumsum(dim=0), [(3, 4)], "CumsumBackward0"),
    ("cumprod", lambda m, x: m.cumprod(x, 1), [(3, 4)], "CumprodBackward0"),
    ("flip", lambda m, x: m.flip(x, (0, 1)), [(3, 4)], "FlipBackward0"),
    ("flip_method", lambda m, x: x.flip(-1), [(3, 4)], "FlipBackward0"),
    ("repeat_interleave", lambda m, x: m.repeat_interleave(x, 2, dim=1), [(3, 4)],
     "ViewBackward0"),
    ("repeat_interleave_tensor", lambda m, x: x.repeat_interleave(m.tensor([1, 0, 2]), dim=0),
     [(3, 4)], "IndexSelectBackward0"),
    ("baddbmm", lambda m, i, a, b: m.baddbmm(i, a, b, beta=0.5, alpha=2.0),
     [(3, 1), (2, 3, 4), (2, 4, 5)], "BaddbmmBackward0"),
]
IDS = [c[0] for c in CASES]
DISTINCT = {"sort", "sort_desc", "sort_stable", "topk", "topk_smallest"}


def _inputs(name, shapes, seed=0):
    return [_x(*s, seed=seed + k, distinct=name in DISTINCT) for k, s in enumerate(shapes)]


@pytest.mark.parametrize("name,fn,shapes,grad_fn", CASES, ids=IDS)
def test_gradcheck_and_gradgradcheck(name, fn, shapes, grad_fn):
    def f(*ts):
        return fn(tg, *ts)
    assert tg.autograd.gradcheck(f, _inputs(name, shapes))
    assert tg.autograd.gradgradcheck(f, _inputs(name, shapes))


@pytest.mark.parametrize("name,fn,shapes,grad_fn", CASES, ids=IDS)
def test_grad_fn_printing_and_gradients_match_torch(name, fn, shapes, grad_fn, torch):
    ours = _inputs(name, shapes)
    theirs = [torch.tensor(t.detach().numpy(), requires_grad=True) for t in ours]
    o, t = fn(tg, *ours), fn(torch, *theirs)
    assert type(t.grad_fn).__name__ == grad_fn          # the table is right about torch
    assert f"grad_fn=<{grad_fn}>" in repr(o)
    assert repr(o.grad_fn).startswith(f"<{grad_fn} object at 0x")
    np.testing.assert_allclose(o.detach().numpy(), t.detach().numpy(), rtol=1e-12)
    w = np.random.default_rng(1).standard_normal(tuple(t.shape))
    (o * tg.tensor(w)).sum().backward()
    if name == "scatter_larger_src":        # torch's own backward rejects this case (see table)
        return
    (t * torch.tensor(w)).sum().backward()
    for a, b in zip(ours, theirs):
        np.testing.assert_allclose(a.grad.numpy(), b.grad.numpy(), rtol=1e-10, atol=1e-12)


@pytest.mark.parametrize("name,fn,shapes,grad_fn", CASES, ids=IDS)
def test_compiled_equals_eager_on_two_calls(name, fn, shapes, grad_fn):
    def loss(*ts):
        y = fn(tg, *ts)
        return y, (y * y.detach().cos()).sum()
    cf = tg.compile(loss)
    for seed in (0, 10):
        eager_in, comp_in = _inputs(name, shapes, seed), _inputs(name, shapes, seed)
        ye, le = loss(*eager_in)
        yc, lc = cf(*comp_in)
        np.testing.assert_allclose(yc.detach().numpy(), ye.detach().numpy(), rtol=1e-12)
        le.backward()
        lc.backward()
        for a, b in zip(comp_in, eager_in):
            np.testing.assert_allclose(a.grad.numpy(), b.grad.numpy(), rtol=1e-12, atol=1e-14)
    assert cf.stats.traces == 1


def test_compiled_index_outputs_of_sort_and_topk():
    def f(x):
        v, i = x.sort(dim=0, descending=True)
        tv, ti = tg.topk(x, 2)
        return v, i, tv, ti, x.argsort(), x.cumsum(0)
    cf = tg.compile(f)
    for seed in (0, 1):
        x = _x(3, 4, seed=seed, grad=False, distinct=True)
        for a, b in zip(cf(x), f(x)):
            assert a.dtype is b.dtype
            np.testing.assert_array_equal(a.numpy(), b.numpy())
    assert f(x)[1].dtype is tg.int64 and f(x)[3].dtype is tg.int64


def test_repeat_interleave_counts_guard_the_compiled_shape():
    """The counts fix the result's shape: new counts re-trace, the same counts reuse."""
    cf = tg.compile(lambda x, r: x.repeat_interleave(r, dim=0) * 2)
    x = _x(3, 2, grad=False)
    for counts in ([1, 0, 2], [2, 2, 2], [1, 0, 2]):
        r = tg.tensor(counts)
        want = np.repeat(x.numpy(), counts, axis=0) * 2
        np.testing.assert_array_equal(cf(x, r).numpy(), want)
    assert cf.stats.traces == 2


def test_sort_and_topk_return_named_pairs_and_stable_ties(torch):
    x = [[3.0, 1.0, 3.0, 2.0, 1.0], [float("nan"), 0.0, 5.0, 0.0, -1.0]]
    for kw in ({}, {"descending": True}, {"stable": True}, {"descending": True, "stable": True}):
        ours, theirs = tg.tensor(x).sort(**kw), torch.tensor(x).sort(**{"stable": True, **kw})
        np.testing.assert_array_equal(ours.values.numpy(), theirs.values.numpy())
        np.testing.assert_array_equal(ours.indices.numpy(), theirs.indices.numpy())
        assert ours.indices.dtype is tg.int64
    r = tg.tensor(x).topk(3)
    assert repr(r).startswith("torch.return_types.topk(\nvalues=tensor(")
    assert repr(tg.tensor(x).sort()).startswith("torch.return_types.sort(")
    t = torch.tensor(x).topk(3)
    np.testing.assert_array_equal(r.values.numpy(), t.values.numpy())      # nan is largest
    values, indices = r
    assert values is r[0] and indices is r.indices


def test_masked_fill_casts_the_value_and_broadcasts_like_torch(torch):
    a = tg.masked_fill(tg.arange(4), tg.tensor([True, False, True, False]), 2.7)
    assert a.dtype is tg.int64 and a.tolist() == [2, 1, 2, 3]
    b = tg.masked_fill(tg.ones(3), tg.ones(2, 3, dtype=tg.bool), 2.5)
    tb = torch.masked_fill(torch.ones(3), torch.ones(2, 3, dtype=torch.bool), 2.5)
    assert b.shape == tuple(tb.shape)
    y = tg.zeros(2, 3)
    v0 = y._version
    assert y.masked_fill_(tg.tensor([True, False, True]), 1.0) is y
    assert y._version == v0 + 1 and y.tolist() == [[1, 0, 1], [1, 0, 1]]


def test_scatter_add_accumulates_repeated_indices():
    x = tg.zeros(5)
    out = tg.scatter_add(x, 0, tg.tensor([1, 1, 3, 1]), tg.tensor([1.0, 2.0, 3.0, 4.0]))
    assert out.tolist() == [0.0, 7.0, 0.0, 3.0, 0.0]


# ---------------- errors, checked against torch ----------------
def _i(m, v):
    return m.tensor(v)


ERRORS = [
    ("tril_1d", lambda m: m.tril(m.ones(3))),
    ("triu_1d", lambda m: m.ones(3).triu()),
    ("tril__1d", lambda m: m.ones(3).tril_()),
    ("topk_k_too_big", lambda m: m.ones(3, 4).topk(5)),
    ("topk_k_negative", lambda m: m.ones(3, 4).topk(-1)),
    ("topk_bad_dim", lambda m: m.ones(3, 4).topk(1, dim=2)),
    ("sort_bad_dim", lambda m: m.ones(3, 4).sort(dim=-3)),
    ("argsort_bad_dim", lambda m: m.ones(3).argsort(dim=1)),
    ("gather_bad_dim", lambda m: m.gather(m.ones(3, 4), 2, _i(m, IDX))),
    ("gather_float_index", lambda m: m.gather(m.ones(3, 4), 0, m.ones(2, 4))),
    ("gather_out_of_bounds", lambda m: m.gather(m.ones(3, 4), 0, _i(m, [[0, 3]]))),
    ("gather_negative_index", lambda m: m.gather(m.ones(3, 4), 0, _i(m, [[0, -1]]))),
    ("gather_ndim", lambda m: m.gather(m.ones(3, 4), 0, _i(m, [0, 1]))),
    ("gather_index_too_big", lambda m: m.gather(m.ones(3, 4), 0, m.zeros(2, 5, dtype=m.int64))),
    ("scatter_dtype", lambda m: m.scatter(m.ones(3, 4), 0, _i(m, IDX),
                                          m.ones(2, 4, dtype=m.float64))),
    ("scatter_src_too_small", lambda m: m.scatter(m.ones(3, 4), 0, _i(m, IDX), m.ones(1, 4))),
    ("scatter_out_of_bounds", lambda m: m.scatter(m.ones(3, 4), 0, _i(m, [[5, 0]]),
                                                  m.ones(1, 2))),
    ("scatter_add_bad_dim", lambda m: m.scatter_add(m.ones(3, 4), -3, _i(m, IDX), m.ones(2, 4))),
    ("scatter_float_index", lambda m: m.ones(3, 4).scatter_(0, m.ones(2, 4), 1.0)),
    ("masked_fill_long_mask", lambda m: m.ones(3).masked_fill(_i(m, [1, 0, 1]), 0.0)),
    ("masked_fill_1d_value", lambda m: m.ones(3).masked_fill(_i(m, [True, False, True]),
                                                             m.ones(1))),
    ("masked_fill__broadcast", lambda m: m.ones(3).masked_fill_(m.ones(2, 3, dtype=m.bool),
                                                                1.0)),
    ("cumsum_bad_dim", lambda m: m.cumsum(m.ones(3, 4), 2)),
    ("cumprod_bad_dim", lambda m: m.ones(3).cumprod(-2)),
    ("flip_repeated_dim", lambda m: m.ones(3, 4).flip([0, 0])),
    ("flip_bad_dim", lambda m: m.flip(m.ones(3, 4), (2,))),
    ("flip_int_dims", lambda m: m.flip(m.ones(3, 4), 0)),
    ("repeat_interleave_negative", lambda m: m.ones(3).repeat_interleave(-1)),
    ("repeat_interleave_counts_size", lambda m: m.ones(3, 2).repeat_interleave(
        _i(m, [1, 2]), dim=0)),
    ("repeat_interleave_negative_counts", lambda m: m.ones(3).repeat_interleave(
        _i(m, [1, -2, 1]), dim=0)),
    ("repeat_interleave_bad_dim", lambda m: m.ones(3).repeat_interleave(2, dim=1)),
    ("baddbmm_2d_batch", lambda m: m.baddbmm(m.ones(5), m.ones(3, 4), m.ones(2, 4, 5))),
    ("baddbmm_mismatch", lambda m: m.baddbmm(m.ones(2, 3, 5), m.ones(2, 3, 4), m.ones(2, 3, 5))),
    ("baddbmm_input_shape", lambda m: m.baddbmm(m.ones(4, 5), m.ones(2, 3, 4), m.ones(2, 4, 5))),
    ("baddbmm_dtype", lambda m: m.baddbmm(m.ones(2, 3, 5, dtype=m.float64), m.ones(2, 3, 4),
                                          m.ones(2, 4, 5))),
    ("multinomial_int", lambda m: m.multinomial(_i(m, [1, 2]), 1)),
    ("multinomial_3d", lambda m: m.multinomial(m.ones(2, 2, 2), 1)),
    ("multinomial_zero_samples", lambda m: m.multinomial(m.ones(3), 0)),
    ("multinomial_too_many", lambda m: m.multinomial(m.ones(3), 4)),
    ("multinomial_negative", lambda m: m.multinomial(_i(m, [-1.0, 2.0]), 1)),
    ("multinomial_inf", lambda m: m.multinomial(_i(m, [1.0, float("inf")]), 1)),
    ("multinomial_zero_sum", lambda m: m.multinomial(m.zeros(2), 1)),
]


@pytest.mark.parametrize("name,fn", ERRORS, ids=[e[0] for e in ERRORS])
def test_errors_match_torch(name, fn, torch):
    with pytest.raises(Exception) as theirs:
        fn(torch)
    with pytest.raises(Exception) as ours:
        fn(tg)
    assert isinstance(ours.value, tg.TracegradError), repr(ours.value)
    builtin = next(c for c in type(theirs.value).__mro__ if c.__module__ == "builtins")
    assert isinstance(ours.value, builtin), (repr(ours.value), repr(theirs.value))
    first = str(theirs.value).split("\n")[0]
    assert first in str(ours.value), (str(ours.value), first)
    assert "test_ops_new.py" in str(ours.value), "the message must point at the user's line"


@pytest.mark.parametrize("bad", [
    lambda x: x.scatter_(0, tg.tensor([[0, 7]]), 1.0),
    lambda x: x.scatter_add_(1, tg.tensor([[0, -1]]), tg.ones(1, 2)),
    lambda x: x.masked_fill_(tg.ones(2, 2, 3, dtype=tg.bool), 1.0),
])
def test_failed_inplace_ops_leave_the_target_unchanged(bad):
    x = tg.zeros(2, 3)
    with pytest.raises(RuntimeError):
        bad(x)
    assert x.tolist() == [[0.0] * 3] * 2 and x._version == 0


# ---------------- multinomial ----------------
def test_multinomial_frequencies_shapes_and_zero_weights():
    g = tg.Generator().manual_seed(0)
    p = tg.tensor([[0.2, 0.0, 0.8], [1.0, 1.0, 2.0]], dtype=tg.float64)
    draws = tg.multinomial(p, 20000, replacement=True, generator=g)
    assert draws.dtype is tg.int64 and draws.shape == (2, 20000)
    freq = np.stack([np.bincount(r, minlength=3) / 20000 for r in draws.numpy()])
    np.testing.assert_allclose(freq, [[0.2, 0.0, 0.8], [0.25, 0.25, 0.5]], atol=0.015)
    once = tg.multinomial(tg.tensor([1.0, 0.0, 3.0, 2.0]), 3, generator=g)
    assert once.shape == (3,) and len(set(once.tolist())) == 3 and 1 not in once.tolist()
    firsts = [tg.multinomial(tg.tensor([1.0, 3.0]), 1, generator=g).item() for _ in range(4000)]
    assert abs(np.mean(firsts) - 0.75) < 0.03              # without replacement, first draw
    perm = tg.multinomial(tg.ones(2, 5), 5)
    assert sorted(perm[0].tolist()) == list(range(5)) == sorted(perm[1].tolist())


def test_multinomial_follows_the_generator_and_method():
    p = tg.tensor([0.1, 0.5, 0.4])
    a = tg.multinomial(p, 6, True, generator=tg.Generator().manual_seed(4))
    b = p.multinomial(6, replacement=True, generator=tg.Generator().manual_seed(4))
    assert a.tolist() == b.tolist()
    tg.manual_seed(9)
    c = tg.multinomial(p, 2)
    tg.manual_seed(9)
    assert tg.multinomial(p, 2).tolist() == c.tolist()
    w = tg.tensor([1.0, 2.0], requires_grad=True)
    assert not tg.multinomial(w, 1).requires_grad


def test_compiled_multinomial_draws_anew_each_call_like_eager():
    def f(logits):
        return tg.multinomial(logits.softmax(-1), 3, replacement=True)
    cf = tg.compile(f)
    x = tg.zeros(2, 50)
    tg.manual_seed(123)
    eager = [f(x).numpy().copy() for _ in range(4)]
    tg.manual_seed(123)
    compiled = [cf(x).numpy().copy() for _ in range(4)]
    for a, b in zip(eager, compiled):
        np.testing.assert_array_equal(a, b)
    assert len({c.tobytes() for c in compiled}) == 4
    assert cf.stats.traces == 1 and cf.stats.cache_hits == 3
    g = tg.Generator()
    cg = tg.compile(lambda x, gen: tg.multinomial(x, 4, generator=gen))
    w = tg.ones(10)
    g.manual_seed(2)
    want = [tg.multinomial(w, 4, generator=g).tolist() for _ in range(2)]
    g.manual_seed(2)
    assert [cg(w, g).tolist() for _ in range(2)] == want


# ---------------- existing ops PyTorch programs lean on ----------------
def _same(ours, theirs):
    assert ours.dtype.name == str(theirs.dtype).replace("torch.", "")
    assert tuple(ours.shape) == tuple(theirs.shape)
    np.testing.assert_allclose(ours.numpy().astype(float), theirs.numpy().astype(float),
                               rtol=1e-6)


def test_where_einsum_bmm_repeat_one_hot_match_torch(torch):
    c = [True, False, True]
    x = np.arange(6.0).reshape(2, 3)
    for m_fn in [lambda m: m.where(m.tensor(c), 1.0, 0.0),
                 lambda m: m.where(m.tensor(c), 1, 0),
                 lambda m: m.where(m.tensor(c), m.tensor([1, 2, 3]), 0.5),
                 lambda m: m.where(m.tensor(c), m.tensor(x, dtype=m.float32),
                                   m.tensor([1.0, 2.0, 3.0], dtype=m.float64)),
                 lambda m: m.einsum("...ij,...jk->...ik", m.tensor(np.ones((2, 3, 4))),
                                    m.tensor(np.ones((4, 5)))),
                 lambda m: m.einsum("b...,b...->b", m.tensor(x), m.tensor(x)),
                 lambda m: m.einsum("ij,kj->ik", m.tensor(x), m.tensor(x)),
                 lambda m: m.bmm(m.tensor(np.ones((2, 3, 4))), m.tensor(np.ones((2, 4, 5)))),
                 lambda m: m.tensor(x).repeat(2, 1, 2),
                 lambda m: m.tensor(x).repeat(0, 1),
                 lambda m: m.nn.functional.one_hot(m.tensor([0, 2]), 4),
                 lambda m: m.nn.functional.one_hot(m.tensor([[0], [2]]))]:
        _same(m_fn(tg), m_fn(torch))
    for bad in [lambda m: m.tensor(x).repeat(2),
                lambda m: m.bmm(m.ones(2, 3, 4), m.ones(3, 4, 5)),
                lambda m: m.bmm(m.ones(2, 3, 4), m.ones(2, 4, 5, dtype=m.float64)),
                lambda m: m.nn.functional.one_hot(m.tensor([0, 2]), 2),
                lambda m: m.nn.functional.one_hot(m.tensor([0, -1]), 3),
                lambda m: m.where(m.tensor([1, 0]), 1.0, 0.0)]:
        with pytest.raises(RuntimeError) as theirs:
            bad(torch)
        with pytest.raises(RuntimeError) as ours:
            bad(tg)
        assert str(theirs.value).split("\n")[0] in str(ours.value)


def test_einsum_with_ellipsis_has_gradients(torch):
    a, b = _x(2, 3, 4), _x(4, 5, seed=1)
    assert tg.autograd.gradcheck(lambda a, b: tg.einsum("...ij,...jk->...ik", a, b), (a, b))
    ta, tb = (torch.tensor(t.detach().numpy(), requires_grad=True) for t in (a, b))
    torch.einsum("...ij,...jk->...ik", ta, tb).sum().backward()
    tg.einsum("...ij,...jk->...ik", a, b).sum().backward()
    np.testing.assert_allclose(a.grad.numpy(), ta.grad.numpy(), rtol=1e-12)
    np.testing.assert_allclose(b.grad.numpy(), tb.grad.numpy(), rtol=1e-12)


# ---------------- shape rules on edge operands ----------------
def _rule_and_kernel(name, operands, **attrs):
    from tracegrad.ops.primitive import REGISTRY
    from tracegrad.ops.shape_rules import operand_shapes
    p = REGISTRY[name]
    got = p.shape_rule(operand_shapes(operands), attrs)
    return got, np.shape(p.kernel(*operands, **attrs))


RULE_CASES = [
    ("topk", [np.zeros(())], {"k": 1, "dim": 0, "largest": True}),
    ("topk_indices", [np.zeros((3, 4))], {"k": 0, "dim": 1, "largest": False}),
    ("sort", [np.zeros(())], {"dim": 0, "descending": True}),
    ("argsort", [np.zeros((0, 3))], {"dim": 0, "descending": False}),
    ("gather", [np.zeros(()), np.zeros((2,), np.int64)], {"dim": 0}),
    ("gather", [np.zeros((3, 4)), np.zeros((1, 0), np.int64)], {"dim": 1}),
    ("index_select", [np.zeros(()), np.zeros((3,), np.int64)], {"dim": 0}),
    ("index_select", [np.zeros((2, 3)), np.zeros((0,), np.int64)], {"dim": 1}),
    ("scatter_add", [np.zeros((3,)), np.zeros((0,), np.int64), np.zeros((2,))], {"dim": 0}),
    ("masked_fill", [np.zeros((3,)), np.zeros((2, 1), bool), 1.0], {}),
    ("cumsum", [np.zeros(())], {"dim": 0}),
    ("cumprod", [np.zeros((2, 0))], {"dim": 1}),
    ("flip", [np.zeros(())], {"dims": ()}),
    ("tril", [np.zeros((2, 0, 3))], {"diagonal": 5}),
    ("baddbmm", [np.zeros((5,)), np.zeros((2, 3, 4)), np.zeros((2, 4, 5))],
     {"beta": 1, "alpha": 1}),
    ("baddbmm", [np.zeros((1, 1, 1)), np.zeros((1, 0, 4)), np.zeros((1, 4, 2))],
     {"beta": 0, "alpha": 2}),
    ("multinomial", [tg.default_generator, np.ones((2, 3))],
     {"num_samples": 5, "replacement": True}),
    ("multinomial", [tg.default_generator, np.ones((4,))],
     {"num_samples": 4, "replacement": False}),
]


@pytest.mark.parametrize("name,operands,attrs", RULE_CASES,
                         ids=[f"{c[0]}-{k}" for k, c in enumerate(RULE_CASES)])
def test_shape_rules_on_edge_operands(name, operands, attrs):
    got, want = _rule_and_kernel(name, operands, **attrs)
    assert got == want


# ---------------- a PyTorch program, unchanged ----------------
def _attention_step(torch, x, w, k=3):
    """nanoGPT-style: causal self-attention, top-k filtering of the logits, a greedy pick and
    cumulative sums of the sorted probabilities (nucleus sampling's bookkeeping)."""
    T = x.size(1)
    q = x @ w
    att = (q @ x.transpose(-2, -1)) * (1.0 / x.size(-1) ** 0.5)
    mask = torch.tril(torch.ones(T, T)).view(1, T, T)
    att = att.masked_fill(mask[:, :T, :T] == 0, float("-inf"))
    y = torch.softmax(att, dim=-1) @ x
    logits = y[:, -1, :]
    v, _ = torch.topk(logits, k)
    logits = logits.masked_fill(logits < v[:, [-1]], float("-inf"))
    probs = torch.softmax(logits, dim=-1)
    sorted_probs, order = torch.sort(probs, descending=True)
    cum = torch.cumsum(sorted_probs, dim=-1)
    pick = torch.gather(order, -1, torch.argmax(probs, -1, keepdim=True))
    return y, cum, pick


def test_a_gpt_style_program_runs_unchanged(torch):
    rng = np.random.default_rng(0)
    x0, w0 = rng.standard_normal((2, 5, 6)), rng.standard_normal((6, 6))
    res = []
    for m in (torch, tg):
        x, w = m.tensor(x0, requires_grad=True), m.tensor(w0, requires_grad=True)
        y, cum, pick = _attention_step(m, x, w)
        ((y * y).sum() + (cum * cum).sum()).backward()
        res.append((y.detach().numpy(), cum.detach().numpy(), pick.numpy(), x.grad.numpy(),
                    w.grad.numpy()))
    for a, b in zip(*res):
        np.testing.assert_allclose(a, b, rtol=1e-10, atol=1e-12)
    cf = tg.compile(lambda x, w: _attention_step(tg, x, w))
    for seed in (1, 2):
        x1 = rng.standard_normal((2, 5, 6))
        want = _attention_step(tg, tg.tensor(x1), tg.tensor(w0))
        got = cf(tg.tensor(x1), tg.tensor(w0))
        for a, b in zip(got, want):
            np.testing.assert_allclose(a.numpy(), b.numpy(), rtol=1e-12)
