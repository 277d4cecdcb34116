"""compiled == eager, op by op: every entry of the op table (tests/op_table.py) is wrapped in
a function that also reduces its float outputs to a scalar loss, compiled, and called three
times with new values of the same shapes (the first call traces, later ones run generated
code); outputs (values, dtypes, requires_grad) and gradients must equal eager execution's.
Runs under each memory mode (`debug_nan` poisons dead buffers, so reuse bugs show). Plus
hand-written programs mixing views, in-place writes, indexing and dtypes."""
import zlib

import numpy as np
import pytest

import tracegrad as tg
from op_table import F32, F64, OPS, Raw, flat_outputs, to_lib

MODES = {"balanced": {}, "min_nan": {"memory": "min", "debug_nan": True},
         "off": {"memory": "off"}}


def _rng(info, k):
    return np.random.default_rng(zlib.crc32(f"compile/{info.name}/{k}".encode()))


def _dtypes(info):
    ds = [d for d in (F32, F64) if d in info.dtypes]
    return ds or list(info.dtypes[:1])


def _loss_weights(outs, seed):
    return [np.random.default_rng(seed + k).standard_normal(o.shape)
            for k, o in enumerate(outs)]


def _program(info, kwargs, seed):
    """fn(*args) -> (op outputs, scalar loss over the float outputs that require grad)."""
    def fn(*args):
        outs = flat_outputs(info.op(tg, *args, **kwargs))
        loss = None
        for o, w in zip(outs, _loss_weights(outs, seed)):
            if o.dtype.is_floating_point and o.requires_grad:
                term = (o * tg.tensor(w, dtype=o.dtype)).sum()
                loss = term if loss is None else loss + term
        return outs, loss
    return fn


def _call(info, sample, fn):
    args = [to_lib(tg, a, requires_grad=info.differentiable) for a in sample.args]
    outs, loss = fn(*args)
    grads = None
    if loss is not None:
        loss.backward()
        grads = [a.grad for a in args if isinstance(a, tg.Tensor)]
    return outs, loss, grads


def _same(a, b, what, low_precision=False):
    """Equal up to rounding: a float32 anywhere in the program may change the summation
    order of a float64 gradient (e.g. in-place ops widening into float32 targets)."""
    if a is None or b is None:
        assert a is None and b is None, what
        return
    assert (a.dtype, tuple(a.shape)) == (b.dtype, tuple(b.shape)), what
    assert a.requires_grad == b.requires_grad, f"{what}: requires_grad"
    tol = 1e-5 if a.dtype == tg.float32 or low_precision else 1e-10
    np.testing.assert_allclose(b.detach().numpy(), a.detach().numpy(), rtol=tol, atol=tol,
                               err_msg=what)


def check_op(info, opts, dtypes):
    for dtype in dtypes:
        n = len(info.samples(_rng(info, 0), dtype))
        for si in range(n):
            first = info.samples(_rng(info, 0), dtype)[si]
            cf = tg.compile(_program(info, first.kwargs, 7), **opts)
            eager = _program(info, first.kwargs, 7)
            for call in range(3):
                sample = info.samples(_rng(info, call), dtype)[si]
                e_outs, e_loss, e_grads = _call(info, sample, eager)
                c_outs, c_loss, c_grads = _call(info, sample, cf)
                where = f"{info.name}{sample} call {call}"
                low = any(isinstance(a, np.ndarray) and a.dtype == np.float32
                          for a in sample.args)
                assert len(e_outs) == len(c_outs), where
                for k, (a, b) in enumerate(zip(e_outs, c_outs)):
                    _same(a, b, f"{where}: output {k}")
                _same(e_loss, c_loss, f"{where}: loss")
                for k, (a, b) in enumerate(zip(e_grads or [], c_grads or [])):
                    _same(a, b, f"{where}: grad {k}", low)
            assert cf.stats.calls == 3
            for prog in cf.programs:           # after every pass, scheduling included
                prog.forward.verify()
                if prog.backward is not None:
                    prog.backward.verify()
            if not any(isinstance(a, Raw) for a in first.args):
                assert cf.stats.cache_hits >= 1, f"{info.name}{first}: {cf.stats!r}"


@pytest.mark.parametrize("info", [pytest.param(i, id=i.name) for i in OPS])
def test_op_compiled_equals_eager(info):
    check_op(info, MODES["balanced"], _dtypes(info))


@pytest.mark.parametrize("info", [pytest.param(i, id=i.name) for i in OPS])
def test_op_compiled_equals_eager_min_memory_poisoned(info):
    """Recomputation in backward and NaN-poisoned dead buffers: one dtype per op."""
    check_op(info, MODES["min_nan"], _dtypes(info)[-1:])


@pytest.mark.slow
@pytest.mark.parametrize("mode", ["min_nan", "off"])
@pytest.mark.parametrize("info", [pytest.param(i, id=i.name) for i in OPS])
def test_op_compiled_equals_eager_all_modes(info, mode):
    check_op(info, MODES[mode], _dtypes(info))


# ---- hand-written programs ----

def _views_inplace(x, w):
    y = x * 1.5
    y[0].add_(w)                       # in-place on a view of a non-leaf
    y[1:].add_(y[0])                   # reads another (disjoint) view of the same base
    y.t()[0].sub_(1.0)                 # through a transposed view
    z = y.view(-1)
    z[::2] = w.sum()                   # setitem with a strided slice
    return y.sum(1), z


def _indexing(x, w):
    i = tg.tensor([2, 0, 2])
    a = x[i]                           # integer array
    b = x[:, [0, 2]]                   # mixed
    c = x[x > 0]                       # bool mask: data-dependent shape
    d = x.clone()
    d[d < 0] = 0.0                     # masked setitem
    d[1] = w                           # row assignment
    return a.sum(0) * w + b.sum() + c.sum() + d.prod(0)


def _cat_stack_split(x, w):
    parts = x.split(1, 0)
    c = tg.cat([parts[0], x, parts[1]], 0)
    s = tg.stack([w, w * 2], 1)
    a, b = c.chunk(2, 1)[0], c.chunk(2, 1)[1]
    return c.sum(0), s.max(1).values, a.sum() - b.mean(), tg.unbind(s, 1)[1]


def _reductions(x, w):
    return (x.sum(0, keepdim=True) * x.mean(1, keepdim=True) + x.amax(1, keepdim=True),
            x.softmax(1).log_softmax(0), x.var(0), x.std(1, correction=0),
            x.logsumexp(0), x.norm(dim=1), x.max(0).values * x.min(1).values.sum(),
            x.argmax(1), x.cumsum(0) if hasattr(x, "cumsum") else x)


def _matmuls(x, w):
    m = x @ x.t()                                       # 2d @ 2d
    v = x @ w                                           # 2d @ 1d
    b = x.unsqueeze(0).expand(2, 3, 3) @ x.t()          # batched @ 2d
    e = tg.einsum("ij,jk->ik", x, m)
    return m.sum() + v.sum() + b.sum() + (w @ w) + e.mean() + tg.mm(x, x).trace() \
        if hasattr(tg.Tensor, "trace") else m.sum() + v.sum() + b.sum() + (w @ w) + e.mean()


def _mixed(x, w):
    d = w.double().sum()                                 # f64 0-dim
    n = tg.arange(3)                                     # int64 tensor
    k = n * 0.5 + n // 2                                 # int with float scalar -> f32
    return x * d, (x + k) * (n > 0), (n + 1).float() / 2 + w, x.to(tg.float64) @ w.double()


PROGRAMS = [_views_inplace, _indexing, _cat_stack_split, _reductions, _matmuls, _mixed]


def _flat(out):
    return [o for o in (out if isinstance(out, (tuple, list)) else [out])]


def _run(fn, x0, w0, rg):
    x = tg.tensor(x0, requires_grad=rg)
    w = tg.tensor(w0, requires_grad=rg)
    outs = _flat(fn(x, w))
    if rg:
        loss = sum((o.double() * (k + 1)).sum() for k, o in enumerate(outs)
                   if o.requires_grad)
        loss.backward()
    return outs, (x.grad, w.grad)


@pytest.mark.parametrize("rg", [True, False], ids=["grad", "nograd"])
@pytest.mark.parametrize("fn", PROGRAMS, ids=[f.__name__ for f in PROGRAMS])
def test_program_compiled_equals_eager(fn, rg):
    rng = np.random.default_rng(3)
    cf = tg.compile(fn, debug_nan=True)
    for call in range(4):
        x0 = rng.standard_normal((3, 3)).astype(np.float32)
        w0 = rng.standard_normal(3).astype(np.float32)
        e_outs, e_grads = _run(fn, x0, w0, rg)
        c_outs, c_grads = _run(cf, x0, w0, rg)
        assert len(e_outs) == len(c_outs)
        for k, (a, b) in enumerate(zip(e_outs, c_outs)):
            _same(a, b, f"{fn.__name__} call {call} output {k}")
        for k, (a, b) in enumerate(zip(e_grads, c_grads)):
            _same(a, b, f"{fn.__name__} call {call} grad {k}")
    assert cf.stats.cache_hits >= 1


def test_compiled_matches_torch_on_mixed_program():
    torch = pytest.importorskip("torch")
    rng = np.random.default_rng(5)
    x0, w0 = rng.standard_normal((3, 3)).astype(np.float32), rng.standard_normal(3).astype(
        np.float32)
    cf = tg.compile(_views_inplace)
    for _ in range(2):
        ours, _ = _run(cf, x0, w0, True)
    xt = torch.tensor(x0, requires_grad=True)
    wt = torch.tensor(w0, requires_grad=True)
    theirs = _views_inplace(xt, wt)
    loss = sum((o.double() * (k + 1)).sum() for k, o in enumerate(theirs))
    loss.backward()
    for a, b in zip(ours, theirs):
        np.testing.assert_allclose(a.detach().numpy(), b.detach().numpy(), rtol=1e-5)
    x, w = tg.tensor(x0, requires_grad=True), tg.tensor(w0, requires_grad=True)
    outs = cf(x, w)
    sum((o.double() * (k + 1)).sum() for k, o in enumerate(outs)).backward()
    np.testing.assert_allclose(x.grad.numpy(), xt.grad.numpy(), rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(w.grad.numpy(), wt.grad.numpy(), rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("pipeline", [[], ["cse"], ["dce", "cse", "dce"]],
                         ids=["none", "cse", "dce_cse_dce"])
def test_custom_pass_pipelines_give_eager_results(pipeline):
    passes = [getattr(tg.passes, name) for name in pipeline]

    def f(x, w):
        y = (x @ w).tanh()
        return (y * y).sum() + (x @ w).tanh().sum()
    cf = tg.compile(f, passes=passes)
    rng = np.random.default_rng(0)
    for _ in range(3):
        x0, w0 = rng.standard_normal((3, 2)), rng.standard_normal((2, 2))
        ws = [tg.tensor(w0, requires_grad=True) for _ in range(2)]
        outs = [fn(tg.tensor(x0), w) for fn, w in zip((f, cf), ws)]
        for o in outs:
            o.backward()
        np.testing.assert_allclose(outs[1].item(), outs[0].item(), rtol=1e-12)
        np.testing.assert_allclose(ws[1].grad.numpy(), ws[0].grad.numpy(), rtol=1e-12)
    names = [n for n, _ in cf.programs[0].forward.pass_log]
    assert names[0] == "functionalize" and names[1:1 + len(pipeline)] == pipeline
