"""Randomized programs (hypothesis): a small generator of straight-line code over elementwise,
reduction, matmul and in-place ops, with data-dependent `if t.sum() > 0:` branches and
bounded `while` loops on tensor values. Each program is compiled and called several times on
new inputs (so different paths are taken and cached paths reused); values and gradients must
equal eager execution's, and PyTorch's running the very same program."""
import numpy as np
import pytest

hypothesis = pytest.importorskip("hypothesis")
from hypothesis import HealthCheck, example, given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402

import tracegrad as tg  # noqa: E402

UNARY = {
    "tanh": lambda a: a.tanh(),
    "sigmoid": lambda a: a.sigmoid(),
    "sin": lambda a: a.sin(),
    "relu": lambda a: a.relu(),
    "neg": lambda a: -a,
    "square": lambda a: a * a,
    "softexp": lambda a: a.tanh().exp(),
    "softmax": lambda a: a.softmax(-1),
    "t": lambda a: a.t(),
    "flip": lambda a: a[[2, 1, 0]],
}
BINARY = {
    "add": lambda a, b: a + b,
    "sub": lambda a, b: a - b,
    "mul": lambda a, b: a * b,
    "matmul": lambda a, b: (a @ b) * 0.3,
    "max": lambda a, b: tg.maximum(a, b),
    "where": lambda a, b: tg.where(a > b, a, b * 0.5),
}
REDUCE = {
    "sum0": lambda a: a.sum(0, keepdim=True),
    "mean1": lambda a: a.mean(1, keepdim=True),
    "amax1": lambda a: a.amax(1, keepdim=True),
    "norm": lambda a: a.norm() * 0.1,
    "lse0": lambda a: a.logsumexp(0, keepdim=True),
}


def _stmt(n_vars):
    """One statement reading earlier variables (indices < n_vars)."""
    var = st.integers(0, n_vars - 1)
    return st.one_of(
        st.tuples(st.just("unary"), st.sampled_from(sorted(UNARY)), var),
        st.tuples(st.just("binary"), st.sampled_from(sorted(BINARY)), var, var),
        st.tuples(st.just("reduce"), st.sampled_from(sorted(REDUCE)), var, var),
        st.tuples(st.just("if"), var, st.sampled_from(sorted(UNARY)),
                  st.sampled_from(sorted(UNARY)), var),
        st.tuples(st.just("while"), var, st.floats(0.5, 8.0)),
        st.tuples(st.just("inplace"), st.sampled_from(["mul_", "add_", "row", "mask"]), var,
                  var),
    )


@st.composite
def programs(draw):
    n = draw(st.integers(2, 7))
    stmts = [draw(_stmt(2 + k)) for k in range(n)]
    outs = draw(st.lists(st.integers(0, n + 1), min_size=1, max_size=3, unique=True))
    return stmts, outs


def run_program(prog, x, w, binary=None):
    """Interpret a generated program with tracegrad ops (traced when compiled); `binary`
    replaces BINARY to run the very same program on PyTorch tensors."""
    binary = BINARY if binary is None else binary
    stmts, outs = prog
    env = [x, w]
    for s in stmts:
        kind = s[0]
        if kind == "unary":
            env.append(UNARY[s[1]](env[s[2]]))
        elif kind == "binary":
            env.append(binary[s[1]](env[s[2]], env[s[3]]))
        elif kind == "reduce":
            env.append(REDUCE[s[1]](env[s[2]]) + env[s[3]])
        elif kind == "if":
            c, f, g, a = env[s[1]], UNARY[s[2]], UNARY[s[3]], env[s[4]]
            if c.sum() > 0:                              # a data-dependent branch
                env.append(f(a))
            else:
                env.append(g(a) + 1.0)
        elif kind == "while":
            v, limit, k = env[s[1]], s[2], 0
            while v.abs().sum() < limit and k < 4:      # bounded data-dependent loop
                v = v * 1.5 + 0.25
                k += 1
            env.append(v)
        else:
            op, a, b = s[1], env[s[2]].clone(), env[s[3]]
            if op == "mul_":
                a.mul_(b.tanh())
            elif op == "add_":
                a.add_(b)
            elif op == "row":
                a[1].mul_(b[0])                          # in-place through a view
            else:
                a[b > 0.5] = 0.0                         # masked write
            env.append(a)
    return [env[i] for i in outs]


def _leaves(x0, w0):
    """Fresh leaves requiring grad over copies of the two input arrays."""
    return tg.tensor(x0, requires_grad=True), tg.tensor(w0, requires_grad=True)


def _eager_and_compiled(fn, cf, x0, w0, call):
    """[what `call(f, x, w)` returns, or the InplaceError type it raised] for `fn` and its
    compiled `cf`, each on fresh leaves (eager may refuse at backward; compiled then
    refuses too, maybe earlier)."""
    got = []
    for f in (fn, cf):
        x, w = _leaves(x0, w0)
        try:
            got.append(call(f, x, w))
        except tg.InplaceError as e:
            got.append(type(e))
    return got


def _call(fn, prog, x0, w0):
    x, w = _leaves(x0, w0)
    outs = fn(prog, x, w)
    loss = sum(((o * (k + 1)).sum() for k, o in enumerate(outs)), tg.tensor(0.0,
                                                                              dtype=tg.float64))
    loss.backward()
    return [o.detach().numpy() for o in outs], x.grad, w.grad


def _close(a, b):
    if a is None or b is None:
        assert a is None and b is None
        return
    a = a.numpy() if hasattr(a, "numpy") else a
    b = b.numpy() if hasattr(b, "numpy") else b
    np.testing.assert_allclose(a, b, rtol=1e-9, atol=1e-12)


@settings(max_examples=60, deadline=None, derandomize=True,
          suppress_health_check=[HealthCheck.too_slow])
@given(prog=programs(), seed=st.integers(0, 2 ** 16))
def test_random_programs_compiled_equal_eager(prog, seed):
    rng = np.random.default_rng(seed)
    cf = tg.compile(run_program, cache_limit=64)
    for call in range(4):
        x0, w0 = rng.standard_normal((2, 3, 3))
        if call == 3:
            x0, w0 = prev                                # a repeated input: a cache hit
        prev = (x0, w0)
        e_outs, e_gx, e_gw = _call(run_program, prog, x0, w0)
        c_outs, c_gx, c_gw = _call(cf, prog, x0, w0)
        assert len(e_outs) == len(c_outs)
        for a, b in zip(e_outs, c_outs):
            _close(a, b)
        _close(e_gx, c_gx)
        _close(e_gw, c_gw)
    assert cf.stats.cache_hits >= 1
    assert cf.stats.traces == len(cf.programs)


@settings(max_examples=30, deadline=None, derandomize=True,
          suppress_health_check=[HealthCheck.too_slow])
@given(prog=programs(), seed=st.integers(0, 2 ** 16))
def test_random_programs_compiled_match_torch(prog, seed):
    """The third side of compiled == eager == PyTorch: the same generated programs (with
    their data-dependent `if` and `while`) run on PyTorch give the compiled values and
    gradients."""
    torch = pytest.importorskip("torch")
    binary = dict(BINARY, max=lambda a, b: torch.maximum(a, b),
                  where=lambda a, b: torch.where(a > b, a, b * 0.5))
    rng = np.random.default_rng(seed)
    cf = tg.compile(run_program, cache_limit=64)
    for _ in range(3):
        x0, w0 = rng.standard_normal((2, 3, 3))
        c_outs, c_gx, c_gw = _call(cf, prog, x0, w0)
        xt = torch.tensor(x0, requires_grad=True)
        wt = torch.tensor(w0, requires_grad=True)
        t_outs = run_program(prog, xt, wt, binary)
        sum(((o * (k + 1)).sum() for k, o in enumerate(t_outs)),
            torch.tensor(0.0, dtype=torch.float64)).backward()
        assert len(c_outs) == len(t_outs)
        for a, b in zip(c_outs, t_outs):
            np.testing.assert_allclose(a, b.detach().numpy(), rtol=1e-7, atol=1e-9)
        for g, gt in ((c_gx, xt.grad), (c_gw, wt.grad)):
            assert (g is None) == (gt is None)
            if g is not None:
                np.testing.assert_allclose(g.numpy(), gt.numpy(), rtol=1e-7, atol=1e-9)

@settings(max_examples=25, deadline=None, derandomize=True,
          suppress_health_check=[HealthCheck.too_slow])
@given(prog=programs(), seed=st.integers(0, 2 ** 16))
def test_random_programs_without_grad(prog, seed):
    rng = np.random.default_rng(seed)
    cf = tg.compile(run_program)
    for _ in range(3):
        x0, w0 = rng.standard_normal((2, 3, 3)).astype(np.float32)
        e = run_program(prog, tg.tensor(x0), tg.tensor(w0))
        c = cf(prog, tg.tensor(x0), tg.tensor(w0))
        for a, b in zip(e, c):
            assert not b.requires_grad and a.dtype == b.dtype
            np.testing.assert_allclose(b.numpy(), a.numpy(), rtol=1e-6, atol=1e-6)


# ---- random chains of views and in-place writes ----

VIEWS = [
    lambda t: t[1:] if t.ndim and t.shape[0] > 1 else t.view(t.shape),
    lambda t: t[0] if t.ndim > 1 else t.view(t.shape),
    lambda t: t.t() if t.ndim == 2 else t.unsqueeze(0),
    lambda t: t.unsqueeze(0)[0],
    lambda t: t[..., ::2] if t.ndim else t.view(()),
    lambda t: t.split(1, 0)[0] if t.ndim else t.view(()),
    lambda t: t.reshape(-1),
]
WRITES = [
    lambda v, w: v.mul_(1.5),
    lambda v, w: v.add_(w.sum() * 0.1),
    lambda v, w: v.sub_(v * 0.5),
    lambda v, w: v.copy_(v.exp() * 0.3),
    lambda v, w: v.clamp_(-0.5, 0.7),
    lambda v, w: v.zero_(),
    lambda v, w: v.fill_(0.75),
    lambda v, w: v.mul_(w[0, 0]),
]


def run_views(steps, x, w):
    """Take views of a non-leaf and write through them; return every view and the base."""
    base = x * 1.0
    live = [base]
    reads = []
    for is_view, vi, wi, pick, read in steps:
        t = live[pick % len(live)]
        if is_view:
            live.append(VIEWS[vi](t))
        else:
            WRITES[wi](t, w)
        if read:
            reads.append(live[pick % len(live)] * 1.0)
    return [base * w] + reads + [t * 1.0 for t in live[1:]]


view_steps = st.lists(st.tuples(st.booleans(), st.integers(0, len(VIEWS) - 1),
                                st.integers(0, len(WRITES) - 1), st.integers(0, 99),
                                st.booleans()), min_size=1, max_size=7)


@settings(max_examples=40, deadline=None, derandomize=True,
          suppress_health_check=[HealthCheck.too_slow])
@given(steps=view_steps, seed=st.integers(0, 2 ** 16))
def test_random_view_and_inplace_chains(steps, seed):
    def call(fn, x, w):
        outs = fn(steps, x, w)
        sum(((o * (k + 1)).sum() for k, o in enumerate(outs)), tg.tensor(0.0)).backward()
        return [o.detach().numpy() for o in outs], x.grad, w.grad

    rng = np.random.default_rng(seed)
    cf = tg.compile(run_views)
    for _ in range(3):
        results = _eager_and_compiled(run_views, cf, *rng.standard_normal((2, 3, 3)), call)
        if not isinstance(results[0], tuple) or not isinstance(results[1], tuple):
            assert results[0] == results[1]
            continue
        (e_outs, e_gx, e_gw), (c_outs, c_gx, c_gw) = results
        for a, b in zip(e_outs, c_outs):
            _close(a, b)
        _close(e_gx, c_gx)
        _close(e_gw, c_gw)


def _views_with_loss(steps, x, w):
    outs = run_views(steps, x, w)
    return [o.detach() for o in outs], sum(((o * (k + 1)).sum() for k, o in enumerate(outs)),
                                           tg.tensor(0.0))


@settings(max_examples=60, deadline=None, derandomize=True,
          suppress_health_check=[HealthCheck.too_slow])
@given(steps=view_steps, seed=st.integers(0, 2 ** 16))
# `bt = base.t(); bt.mul_(w[0, 0])`, read through the view: both causes below
@example(steps=[(True, 2, 0, 0, False), (False, 0, 7, 1, True)], seed=0)
@example(steps=[(True, 2, 0, 0, False), (False, 0, 7, 1, False), (False, 0, 0, 0, True)],
         seed=1)
def test_random_view_and_inplace_chains_with_their_loss_inside_are_bitwise_eager(steps, seed):
    """In-place writes through views, the loss inside: eager's bits. Two causes of last-bit
    differences were found this way: eager saved an in-place op's old value as a C-ordered
    copy where the compiled program keeps the view's own order (now `order="K"` in both),
    and a view's gradient is accumulated in its base's coordinates eagerly but in the
    view's compiled (Note [Reductions in C order] in ops/shape.py)."""
    def call(fn, x, w):
        outs, loss = fn(steps, x, w)
        loss.backward()
        return [_bits_of(o) for o in outs + [x.grad, w.grad]]

    rng = np.random.default_rng(seed)
    cf = tg.compile(_views_with_loss)
    for _ in range(3):
        got = _eager_and_compiled(_views_with_loss, cf, *rng.standard_normal((2, 3, 3)), call)
        assert got[0] == got[1]


def test_writes_through_detached_aliases_keep_eager_gradients():
    def f(x, w):
        base = x * 1.0
        base.copy_(base.exp() * 0.3)
        d = base.detach()
        d.zero_()                      # values change, base's history does not
        e = base.detach()
        e.mul_(w[0])                   # e gets its own history (through w)
        return base * w, d * 1.0, e * 2.0
    cf = tg.compile(f)
    for _ in range(3):
        got = _call(lambda p, x, w: f(x, w), None, *np.random.default_rng(0).standard_normal(
            (2, 3)))
        want = _call(lambda p, x, w: cf(x, w), None, *np.random.default_rng(0).standard_normal(
            (2, 3)))
        for a, b in zip(got[0], want[0]):
            _close(a, b)
        _close(got[1], want[1])
        _close(got[2], want[2])
    assert cf.stats.cache_hits == 2


def _with_loss(prog, x, w):
    outs = run_program(prog, x, w)
    loss = sum(((o * (k + 1)).sum() for k, o in enumerate(outs)),
               tg.tensor(0.0, dtype=tg.float64))
    return [o.detach() for o in outs], loss


def _bits_of(t):
    if t is None:
        return None
    a = np.asarray(t.numpy() if hasattr(t, "numpy") else t)
    return a.dtype.str, a.shape, a.tobytes()


@settings(max_examples=60, deadline=None, derandomize=True,
          suppress_health_check=[HealthCheck.too_slow])
@given(prog=programs(), seed=st.integers(0, 2 ** 16))
def test_random_programs_with_their_loss_inside_are_bitwise_eager(prog, seed):
    """With the whole loss inside the compiled function, values and gradients are eager's
    bit for bit (Note [CSE before differentiation]: merging the two branches' `x * x`
    before differentiating had summed their gradients in another order). Outside, the
    compiled backward is one node: an input that also gets gradient from outside it adds
    its contributions in another order than eager's (as with torch.compile), so the test
    above compares to 1e-9."""
    rng = np.random.default_rng(seed)
    cf = tg.compile(_with_loss, cache_limit=64)
    for _ in range(4):
        x0, w0 = rng.standard_normal((2, 3, 3))
        got = []
        for fn in (_with_loss, cf):
            x, w = _leaves(x0, w0)
            outs, loss = fn(prog, x, w)
            loss.backward()
            got.append([_bits_of(o) for o in outs + [loss.detach(), x.grad, w.grad]])
        assert got[0] == got[1]
