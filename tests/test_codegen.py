"""Code generation: generated programs agree with the reference interpreter on forward and
backward graphs of many functions (with and without a memory plan), guards are checked
inline, the source carries the user's line comments, and errors inside generated code name
the user's line and show the generated source in tracebacks."""
import linecache
import traceback

import numpy as np
import pytest

import tracegrad as tg
from tracegrad import passes
from tracegrad.ir import GuardFailed, interpret

RNG = np.random.default_rng(1)


def _mlp(x, w, b):
    return ((x @ w + b[:2]).tanh() ** 2).mean()


def _views(x, w, b):
    y = x * w.sum()
    y[0, 1:].mul_(b[:2].sum())
    return (y.t().reshape(-1) * 3).softmax(0).max()


def _reductions(x, w, b):
    return x.logsumexp(1).sum() + w.var() + x.abs().amax(0).sum() + b.norm() * w.std(0).sum()


def _indexing(x, w, b):
    idx = tg.tensor([1, 0, 1])
    z = x[idx] @ w[:, [0, 1]]
    z2 = tg.where(z > 0, z, z * b[:2].sum())
    return tg.cat([z2, z.exp()], 0).sum() + x[x > 0.5].sum()


def _mixed_dtypes(x, w, b):
    d = tg.tensor(2.0, dtype=tg.float64)
    n = tg.tensor([1, 2, 3])
    return (x.sum(0) * d + n * 0.5).sum() + (w * b.double()[:2].sum()).sum()


def _stack_split(x, w, b):
    parts = x.split([1, 1], 0)
    s = tg.stack([parts[0], parts[1] * 2, b.unsqueeze(0)], 0)
    return (s.sum(1) @ w).relu().sum() + s.chunk(3, 2)[1].prod()


FUNCS = [_mlp, _views, _reductions, _indexing, _mixed_dtypes, _stack_split]


def _args():
    return [RNG.standard_normal(s).astype(np.float32) for s in ((2, 3), (3, 2), (3,))]


def _pipeline(fn, arrays):
    ts = [tg.tensor(a, requires_grad=True) for a in arrays]
    fg = passes.dce(passes.cse(passes.functionalize(tg.trace(fn, *ts))))
    vals = {}
    interpret(fg, arrays, values=vals)
    vr = passes.vjp(fg, list(fg.inputs), values=vals)
    return fg, passes.partition(fg, vr), vals


def _assert_same(a, b):
    assert len(a) == len(b)
    for x, y in zip(a, b):
        x, y = np.asarray(x), np.asarray(y)
        assert x.dtype == y.dtype and x.shape == y.shape
        np.testing.assert_allclose(x, y, rtol=1e-6, atol=1e-7)


@pytest.mark.parametrize("fn", FUNCS, ids=[f.__name__ for f in FUNCS])
def test_generated_code_matches_interpreter(fn):
    arrays = _args()
    fg, part, _ = _pipeline(fn, arrays)
    prog = tg.build(fg)
    for _ in range(5):                 # new data: same results, or the same guard fails
        new = [a + RNG.standard_normal(a.shape).astype(a.dtype) * 0.3 for a in arrays]
        try:
            want = interpret(fg, new)
        except GuardFailed as e:
            with pytest.raises(GuardFailed) as ei:
                prog(*new)
            assert (ei.value.index, ei.value.actual) == (e.index, e.actual)
            continue
        _assert_same(prog(*[a.copy() for a in new]), want)
    fwd = tg.build(part.forward)
    _assert_same(fwd(*arrays), interpret(part.forward, arrays))
    outs = interpret(part.forward, arrays)
    it = iter(outs[part.n_user:])
    saved = [arrays[part.saved_from_input[k]] if k in part.saved_from_input else next(it)
             for k in range(len(part.saved))]
    cts = [np.ones(fg.outputs[k].type.shape, fg.outputs[k].type.dtype.np)
           for k in part.cotangent_outputs]
    bwd = tg.build(part.backward)
    _assert_same(bwd(*cts, *saved), interpret(part.backward, cts + saved))


@pytest.mark.parametrize("fn", FUNCS, ids=[f.__name__ for f in FUNCS])
def test_generated_code_with_memory_plan_matches_interpreter(fn):
    plan_memory = pytest.importorskip("tracegrad.passes.plan_memory").plan_memory
    arrays = _args()
    _, part, _ = _pipeline(fn, arrays)
    for g in (part.forward, part.backward):
        ins = arrays if g is part.forward else None
        if ins is None:
            outs = interpret(part.forward, arrays)
            it = iter(outs[part.n_user:])
            saved = [arrays[part.saved_from_input[k]] if k in part.saved_from_input
                     else next(it) for k in range(len(part.saved))]
            ins = [np.ones(g.inputs[k].type.shape, g.inputs[k].type.dtype.np)
                   for k in range(len(part.cotangent_outputs))] + saved
        plan = plan_memory(g, protected_inputs=set(range(len(g.inputs))))
        prog = tg.build(g, plan=plan, poison=True)
        before = [np.array(a, copy=True) for a in ins]
        _assert_same(prog(*ins), interpret(g, before))
        for a, b in zip(ins, before):              # inputs are never written
            np.testing.assert_array_equal(a, b)


def test_code_has_user_line_comments_and_kernels_as_globals():
    arrays = _args()
    fg, _, _ = _pipeline(_mlp, arrays)
    prog = tg.build(fg)
    assert prog.code.startswith("def _mlp(")
    assert "test_codegen.py:" in prog.code
    assert "# test_codegen.py:" in [ln for ln in prog.code.splitlines() if "k_mm" in ln][0]
    assert "return [" in prog.code


def test_guards_checked_inline():
    def f(x):
        if x.sum() > 0:
            return x * 2
        return x - 1
    fg = passes.functionalize(tg.trace(f, tg.ones(3)))
    prog = tg.build(fg)
    np.testing.assert_allclose(prog(np.ones(3, np.float32))[0], 2.0)
    with pytest.raises(GuardFailed) as ei:
        prog(-np.ones(3, np.float32))
    assert (ei.value.index, ei.value.actual) == (0, False)
    with pytest.raises(GuardFailed) as ei2:
        interpret(fg, [-np.ones(3, np.float32)])
    assert (ei2.value.index, ei2.value.actual) == (0, False)


@pytest.mark.parametrize("kind,fn,good,bad", [
    ("item", lambda x: x * x.sum().item(), [1.0, 2.0], [1.0, 3.0]),
    ("int", lambda x: x * int(x.sum()), [1.0, 2.0], [2.0, 2.0]),
    ("tolist", lambda x: x * len(x.tolist()), [1.0, 2.0], [1.0, 2.5]),
    ("shape", lambda x: x[x > 0].sum(), [1.0, -2.0], [1.0, 2.0]),
])
def test_each_guard_kind_in_generated_code(kind, fn, good, bad):
    fg = passes.functionalize(tg.trace(fn, tg.tensor(good)))
    assert fg.guards[0].kind == kind
    prog = tg.build(fg)
    _assert_same(prog(np.array(good, np.float32)), interpret(fg, [np.array(good, np.float32)]))
    with pytest.raises(GuardFailed):
        prog(np.array(bad, np.float32))


def test_error_inside_generated_code_names_user_line_and_shows_source():
    def f(x, w):
        return (x @ w).sum()
    fg = passes.functionalize(tg.trace(f, tg.ones(2, 3), tg.ones(3, 4)))
    prog = tg.build(fg)
    with pytest.raises(RuntimeError) as ei:         # what eager dispatch raises for mm
        prog(np.ones((2, 3), np.float32), np.ones((5, 4), np.float32))
    assert isinstance(ei.value, tg.TracegradRuntimeError)
    assert str(ei.value).startswith("mm: ")
    assert f"(at {__file__}:" in str(ei.value)
    notes = "\n".join(getattr(ei.value, "__notes__", []))
    assert "test_codegen.py" in notes and "compiled code of 'f'" in notes
    tb = "".join(traceback.format_exception(ei.value))
    assert "<tracegrad-f-" in tb
    assert "k_mm" in tb or "k_matmul" in tb        # the generated line, via linecache
    assert linecache.getlines(prog.filename)


def test_output_is_fresh_for_reused_inputs():
    """A program returning an input unchanged, and repeated programs, never share state."""
    def f(x):
        return x, x * 2
    fg = passes.functionalize(tg.trace(f, tg.ones(2)))
    prog = tg.build(fg)
    a = np.ones(2, np.float32)
    r1 = prog(a)
    r2 = prog(a)
    assert r1[1] is not r2[1]
    np.testing.assert_array_equal(r1[1], r2[1])


def test_scalar_temporaries_read_by_guards_stay_numpy_scalars():
    """`while y.norm() < 1000`: the norm and the comparison feed only a guard, so the program
    keeps them as numpy scalars and compares with an operator (no array round trip); a 0-d
    result that is returned is still a fresh 0-d array."""
    @tg.compile
    def f(x):
        y = x * 2
        while y.norm() < 100:
            y = y * 2
        return y, y.sum() * 3
    for x0 in ([0.8, -1.3, 0.4], [5.0, 1.0, 0.0], [-20.0, 0.5, 1.0]):
        x = tg.tensor(x0, requires_grad=True)
        y, s = f(x)
        ye, se = f.__wrapped__(tg.tensor(x0))
        np.testing.assert_array_equal(y.detach().numpy(), ye.numpy())
        assert isinstance(s._data, np.ndarray) and s._data.shape == ()
        assert s.item() == se.item()
        (s + y.sum()).backward()
        xe = tg.tensor(x0, requires_grad=True)
        ye2, se2 = f.__wrapped__(xe)
        (se2 + ye2.sum()).backward()
        np.testing.assert_array_equal(x.grad.numpy(), xe.grad.numpy())
    code = f.programs[0].code
    compare = [ln for ln in code.splitlines() if "< 100)" in ln]
    assert compare and all("_asarray" not in ln and "k_lt" not in ln for ln in compare)
    assert [ln for ln in code.splitlines() if "k_norm" in ln and "_asarray" not in ln]


def test_program_switches_numpy_error_state_once_and_restores_it():
    """Quiet kernels (log of a negative, division by zero) stay silent inside a program, as
    in eager; the caller's numpy error state is back afterwards, also after an error."""
    @tg.compile
    def f(x, idx):
        return (x.log() + x / 0).sum() + x[idx].sum()
    x = tg.tensor([-1.0, 0.0, 2.0])
    before = np.geterr()
    with np.errstate(all="raise"):
        inside = np.geterr()
        out = f(x, tg.tensor([0, 2]))
        eager = f.__wrapped__(x, tg.tensor([0, 2]))
        assert np.geterr() == inside
        with pytest.raises(IndexError) as ei:          # raised inside the compiled program,
            f(x, tg.tensor([0, 5]))                     # then by the call run eagerly
        assert "test_codegen.py:229 in f" in str(ei.value)
        assert np.geterr() == inside
    assert np.geterr() == before
    assert np.isnan(out.item()) and np.isnan(eager.item())
    assert f.programs[0].forward_program.quiet


def _static_kernel_cases(x, w, b):
    idx = tg.tensor([2, 0, 2])                               # repeated: gradients accumulate
    col = tg.tensor([1, 1])
    s = (x + b).sum() + (x * w.t()[:1]).mean() + x.mean(1, keepdim=True).sum()
    s = s + x[:, idx].sum() + x[col, 1:].pow(2).sum() + x[col][..., None].mean((0, 2)).sum()
    return s + (x.unsqueeze(0) * b).mean((0, 1)).sum() + (w * x[0, None, :2]).sum()


def test_static_kernels_equal_generic_kernels_bit_for_bit():
    """Note [Static kernels]: each specialized kernel computes exactly what its generic
    kernel computes, on the operands a real forward and backward program feed it."""
    arrays = [RNG.standard_normal(s).astype(np.float32) for s in ((2, 3), (3, 2), (3,))]
    fg, part, vals = _pipeline(_static_kernel_cases, arrays)
    seen = set()
    for g, ins in ((fg, arrays), (part.backward, None)):
        if ins is None:
            outs = interpret(part.forward, arrays)
            it = iter(outs[part.n_user:])
            saved = [arrays[part.saved_from_input[k]] if k in part.saved_from_input
                     else next(it) for k in range(len(part.saved))]
            ins = [np.ones(v.type.shape, v.type.dtype.np)
                   for v in g.inputs[:len(part.cotangent_outputs)]] + saved
        env = {}
        interpret(g, ins, values=env)
        for n in g.nodes:
            static = n.prim.specialize(n) if n.prim.specialize is not None else None
            if static is None:
                continue
            args = [env[a] if hasattr(a, "type") else a for a in n.inputs]
            want = np.asarray(n.prim.kernel(*args, **n.attrs))
            got = np.asarray(static(*args))
            assert got.dtype == want.dtype and got.shape == want.shape, n
            assert got.tobytes() == want.tobytes(), n
            seen.add(n.prim.name)
    assert seen >= {"sum_to_size", "index", "index_backward", "mean"}
