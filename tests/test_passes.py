"""The passes as library functions on Graphs: each is pure (its input graph is unchanged),
keeps the graph valid (`verify`), reports statistics in `pass_log`, and preserves meaning,
checked by running graphs with the reference interpreter against eager execution:
functionalize (in-place/view effects, input mutations, stale saves), cse, dce, vjp (gradients
equal eager autograd's), partition and check_inplace."""
import re

import numpy as np
import pytest

import tracegrad as tg
from tracegrad import passes
from training import sgd_step
from tracegrad.ir import interpret

RNG = np.random.default_rng(0)


def _arr(*shape):
    return RNG.standard_normal(shape).astype(np.float32)


def _functional(fn, *arrays, requires_grad=False):
    ts = [tg.tensor(a.copy(), requires_grad=requires_grad) for a in arrays]
    return passes.functionalize(tg.trace(fn, *ts)).verify()


def _eager(fn, *arrays):
    outs = fn(*[tg.tensor(a.copy()) for a in arrays])
    outs = outs if isinstance(outs, (tuple, list)) else [outs]
    return [o.detach().numpy() for o in outs]


# ---- functionalize ----

def _views_and_writes(x):
    y = x * 1.0
    row = y[1]                 # a view taken before the write ...
    y[:, 0].mul_(10)           # ... write through another view of the same base
    col = y.t()[2]
    col.add_(row[1:])          # write through a transposed view, reading another view
    return y, row * 1.0


def _chained(x):
    y = x.clone()
    v = y.view(6)[2:5]
    v.sub_(1)
    v.mul_(v)                  # reads its own latest contents
    y.t_() if hasattr(y, "t_") else None
    return y.sum(0), v + 0


@pytest.mark.parametrize("fn", [_views_and_writes, _chained])
def test_functionalize_removes_inplace_and_keeps_meaning(fn):
    x = _arr(2, 3)
    raw = tg.trace(fn, tg.tensor(x.copy()))
    before = str(raw)
    fg = passes.functionalize(raw).verify()
    assert str(raw) == before                          # pure: raw graph untouched
    assert not any(n.prim.overwrites for n in fg.nodes)
    for o, e in zip(interpret(fg, [x]), _eager(fn, x)):
        np.testing.assert_allclose(o, e, rtol=1e-6)
    stats = dict(fg.pass_log)["functionalize"]
    assert stats["inplace_rewritten"] >= 2


def test_functionalize_records_input_mutations():
    def f(buf, x):
        buf.add_(x)
        buf[0] = 7.0
        return x * 2
    fg, facts = passes.functionalize_with_facts(tg.trace(f, tg.tensor(_arr(3)), tg.tensor(_arr(3))))
    fg.verify()
    assert [a for a, _ in fg.mutations] == [fg.inputs[0]]
    assert facts.mutation_counts[fg.inputs[0]] == 2
    assert facts.grad_mode_writes == {fg.inputs[0]}    # written with grad mode on
    buf, x = _arr(3), _arr(3)
    final = dict(zip(fg.outputs, interpret(fg, [buf, x])))
    vals = {}
    interpret(fg, [buf, x], values=vals)
    np.testing.assert_allclose(vals[fg.mutations[0][1]], np.concatenate([[7.0], (buf + x)[1:]]))
    assert len(final) == 1


def test_functionalize_marks_stale_saved_operands():
    def f(x):
        y = x.exp()
        y.add_(1)              # exp saved its output: stale now
        return y.sum()
    fg = _functional(f, _arr(3), requires_grad=True)
    (idx, which), (site, saved, final, deferred, writer) = next(iter(fg.stale.items()))
    assert fg.nodes[idx].prim.name == "exp" and which == "out"
    assert (saved, final, deferred, writer) == (0, 1, False, "AddBackward0")
    assert site.startswith(__file__)


# ---- cse / dce ----

def test_cse_merges_pure_duplicates_but_not_random_draws():
    def f(x):
        a = (x * 2).sin()
        b = (x * 2).sin()
        r1, r2 = tg.rand(3), tg.rand(3)
        return a + b + r1 + r2
    fg = _functional(f, _arr(3))
    before = str(fg)
    c = passes.cse(fg).verify()
    assert str(fg) == before
    assert dict(c.pass_log)["cse"]["merged"] == 2
    assert [n.prim.name for n in c.nodes].count("rand") == 2
    assert [n.prim.name for n in c.nodes].count("sin") == 1


def test_cse_respects_attributes_and_literals():
    def f(x):
        return x.sum(0) + x.sum(1).sum() + (x * 2).sum() + (x * 3).sum()
    c = passes.cse(_functional(f, _arr(3, 3))).verify()
    assert dict(c.pass_log)["cse"]["merged"] == 0


def test_dce_removes_dead_code_and_keeps_roots():
    def f(x):
        x.exp() * 5                     # unused
        tg.rand(2)                      # unused but advances the generator: kept
        if (x.sum() > 100):            # guard value kept
            pass
        return x + 1
    fg = _functional(f, _arr(3))
    d = passes.dce(fg).verify()
    names = [n.prim.name for n in d.nodes]
    assert "exp" not in names and "rand" in names and "gt" in names
    assert dict(d.pass_log)["dce"]["removed"] == 2
    assert d.guards[0].value in {n.output for n in d.nodes}


def test_dce_keeps_input_mutations():
    def f(buf):
        buf.mul_(2)
        return buf.sum() * 0
    d = passes.dce(_functional(f, _arr(3))).verify()
    assert d.mutations and "mul" in [n.prim.name for n in d.nodes]


# ---- vjp ----

def _grads_eager(fn, arrays):
    ts = [tg.tensor(a.copy(), requires_grad=True) for a in arrays]
    out = fn(*ts)
    out.backward()
    return [t.grad.numpy() if t.grad is not None else None for t in ts]


def _grads_ir(fn, arrays, wrt_mask=None):
    ts = [tg.tensor(a.copy(), requires_grad=True) for a in arrays]
    fg = passes.dce(passes.cse(passes.functionalize(tg.trace(fn, *ts))))
    wrt = [v for v, m in zip(fg.inputs, wrt_mask or [True] * len(arrays)) if m]
    vr = passes.vjp(fg, wrt)
    vr.graph.verify()
    vals = {}
    outs = interpret(fg, arrays, values=vals)
    cts = [np.ones_like(outs[k]) for k in vr.cotangent_outputs]
    saved = [vals[v] for v in vr.saved]
    return vr, interpret(vr.graph, cts + saved)


def _reused(x, w):
    h = x @ w
    return (h * h + h.tanh() + h).sum() + (w * w).sum()


def _broadcasting(x, b):
    return ((x + b) * b).relu().mean()


def _indexing(x, w):
    y = x[[0, 2, 2]] * w[1:]
    z = y.clone()
    z[0] = 0.0
    return z.exp().sum() + x[x > 0].sum()


@pytest.mark.parametrize("fn,shapes", [(_reused, [(2, 3), (3, 3)]),
                                       (_broadcasting, [(2, 3), (3,)]),
                                       (_indexing, [(3, 3), (4, 3)])])
def test_vjp_matches_eager_gradients(fn, shapes):
    arrays = [_arr(*s) for s in shapes]
    vr, grads = _grads_ir(fn, arrays)
    for g, e in zip(grads, _grads_eager(fn, arrays)):
        np.testing.assert_allclose(g, e, rtol=1e-5, atol=1e-6)
    assert dict(vr.graph.pass_log)["vjp"]["differentiated"] == len(vr.differentiated)


def test_vjp_skips_inputs_without_grad_and_unreachable_nodes():
    def f(x, w, c):
        side = (c * 3).exp()                 # nothing needs its gradient
        return (x * w).sum() + side.sum()
    arrays = [_arr(3), _arr(3), _arr(3)]
    vr, grads = _grads_ir(f, arrays, wrt_mask=[True, False, False])
    assert len(grads) == 1
    np.testing.assert_allclose(grads[0], arrays[1])
    assert "exp" not in [n.prim.name for n in vr.graph.nodes]


def test_vjp_casts_gradient_to_operand_dtype():
    def f(x, y):
        return (x * y).sum()               # f32 * f64 -> f64
    x, y = tg.ones(3, requires_grad=True), tg.ones(3, dtype=tg.float64, requires_grad=True)
    fg = passes.functionalize(tg.trace(f, x, y))
    vr = passes.vjp(fg, list(fg.inputs))
    assert [str(g.type) for g in vr.grads] == ["f32[3]", "f64[3]"]


def test_vjp_is_pure():
    fg = _functional(_reused, _arr(2, 3), _arr(3, 3), requires_grad=True)
    before = str(fg)
    passes.vjp(fg, list(fg.inputs))
    assert str(fg) == before


# ---- partition ----

def test_partition_saves_what_backward_reads():
    def f(x, w):
        return (x @ w).tanh().sum()
    fg = _functional(f, _arr(4, 3), _arr(3, 2), requires_grad=True)
    vr = passes.vjp(fg, list(fg.inputs))
    part = passes.partition(fg, vr)
    part.forward.verify()
    part.backward.verify()
    # tanh's output is saved (a forward output); x and w are inputs read by reference
    assert part.n_user == 1
    assert len(part.forward.outputs) == 1 + len(part.saved) - len(part.saved_from_input)
    assert sorted(part.saved_from_input.values()) == [0, 1]
    read = {a for n in part.backward.nodes for a in n.value_inputs()}
    assert set(part.backward.inputs[len(part.cotangent_outputs):]) <= read
    x, w = _arr(4, 3), _arr(3, 2)
    fwd = interpret(part.forward, [x, w])
    it = iter(fwd[1:])
    saved = [[x, w][part.saved_from_input[k]] if k in part.saved_from_input else next(it)
             for k in range(len(part.saved))]
    gx, gw = interpret(part.backward, [np.float32(1.0)] + saved)
    ex, ew = _grads_eager(f, [x, w])
    np.testing.assert_allclose(gx, ex, rtol=1e-5)
    np.testing.assert_allclose(gw, ew, rtol=1e-5)


def test_partition_appends_input_mutations():
    def f(buf, x):
        buf.add_(x)
        return x.sum()
    fg = _functional(f, _arr(3), _arr(3))
    part = passes.partition(fg)
    assert part.mutations == [(0, 1)]
    assert part.backward is None
    buf, x = _arr(3), _arr(3)
    outs = interpret(part.forward, [buf, x])
    np.testing.assert_allclose(outs[-1], buf + x)


# ---- check_inplace ----

def test_check_inplace_returns_eager_error_for_stale_saved_value():
    """Eager raises it only when backward runs: the pass returns it, never raises
    (Note [Inplace errors wait for backward]), with the outputs whose gradient reaches it."""
    def f(x):
        y = x.sigmoid()
        y.mul_(2)
        return y.sum(), x.exp()
    fg = _functional(f, _arr(3), requires_grad=True)
    vr = passes.vjp(fg, list(fg.inputs))
    errors = passes.check_inplace(fg, vr.differentiated, set(fg.inputs))
    assert len(errors) == 1 and isinstance(errors[0], tg.InplaceError)
    assert "modified by an inplace operation" in str(errors[0])
    assert str(errors[0]).endswith("(e.g. `x = x + 1` instead of `x += 1`).")
    assert errors.reaches == [frozenset({0})]
    x = tg.tensor(_arr(3), requires_grad=True)
    loss, _ = f(x)
    with pytest.raises(tg.InplaceError) as ei:
        loss.backward()
    assert str(ei.value) == str(errors[0])


def test_check_inplace_accepts_when_stale_value_not_needed():
    def f(x, w):
        y = x * 2
        y.mul_(w)                  # mul saved x and 2: nothing stale is read
        return y.sum()
    fg = _functional(f, _arr(3), _arr(3), requires_grad=True)
    vr = passes.vjp(fg, list(fg.inputs))
    assert passes.check_inplace(fg, vr.differentiated) == []
    # a stale value whose node is never differentiated is fine too
    fg = _functional(lambda x: x.exp().add_(1).sum(), _arr(3))
    assert passes.check_inplace(fg, set()) == []


def test_check_inplace_defers_overwrites_under_no_grad():
    """An optimizer-style update of a saved value: eager fails only if backward runs."""
    def f(x, w):
        y = x * 2
        loss = (y * w).sum()       # mul saved y
        with tg.no_grad():
            y.mul_(0.5)
        return loss
    fg = _functional(f, _arr(3), _arr(3), requires_grad=True)
    vr = passes.vjp(fg, list(fg.inputs))
    deferred = passes.check_inplace(fg, vr.differentiated)
    assert len(deferred) == 1 and isinstance(deferred[0], tg.InplaceError)
    assert deferred.stats == {"overwritten_saves": len(fg.stale), "read_by_backward": 1,
                              "deferred_to_backward": 1}


def test_partition_and_check_inplace_report_statistics_to_explain():
    def f(x, w):
        y = x * 2
        y.mul_(w)                  # overwrites mul's saved input; the gradient never reads it
        return y.sum()
    fg = _functional(f, _arr(3), _arr(3), requires_grad=True)
    vr = passes.vjp(fg, list(fg.inputs))
    assert passes.check_inplace(fg, vr.differentiated).stats["read_by_backward"] == 0
    part = passes.partition(fg, vr)
    name, stats = part.forward.pass_log[-1]
    assert name == "partition" and stats["saved"] == len(part.saved) > 0
    assert stats["saved_bytes"] == sum(v.type.nbytes for k, v in enumerate(part.saved)
                                       if k not in part.saved_from_input)
    c = tg.compile(f)
    c(tg.tensor(_arr(3), requires_grad=True), tg.tensor(_arr(3)))
    text = c.explain()
    assert "check_inplace" in text and "read_by_backward=0" in text
    assert re.search(r"partition .*saved=\d+, saved_inputs=\d+, saved_bytes=\d+", text)


def _bits(a):
    a = np.ascontiguousarray(a)
    return a.view(np.uint8).tobytes()


@pytest.mark.filterwarnings("ignore:overflow:RuntimeWarning")   # eager's mul warns too
@pytest.mark.parametrize("dtype", [tg.float32, tg.float64, tg.float16])
def test_fold_scalings_merges_exact_chains_bit_identically(dtype):
    """The tutorial loop's backward (ten `* 2`) becomes one `* 1024`, and the gradient is
    bit-identical to eager's for overflowing, subnormal, signed-zero, inf and nan seeds."""
    @tg.compile
    def f(x):
        y = x * 2
        while y.data.norm() < 1000:
            y = y * -2.0
        return y
    x = tg.tensor([0.8, -1.3, 0.4], dtype=dtype, requires_grad=True)
    y = f(x)
    muls = [n for n in f.programs[0].backward.nodes if n.prim.name == "mul"]
    stats = dict(f.programs[0].backward.pass_log)["fold_scalings"]
    assert len(muls) == 1 and abs(muls[0].inputs[1]) == 2.0 ** (stats["merged"] + 1)
    assert stats["merged"] >= 5
    npdt = x.detach().numpy().dtype
    fi = np.finfo(npdt)
    seeds = np.array([fi.max / 3, -fi.tiny / 7, 0.0], dtype=npdt)
    for v in (seeds, np.array([-0.0, np.inf, np.nan], seeds.dtype), -seeds):
        x.grad = None
        f(x).backward(tg.tensor(v))
        xe = tg.tensor(x.detach().numpy(), requires_grad=True)
        f.__wrapped__(xe).backward(tg.tensor(v))
        assert _bits(x.grad.numpy()) == _bits(xe.grad.numpy())


@pytest.mark.parametrize("c", [3.0, 0.5, 2, 1.5])
def test_fold_scalings_leaves_inexact_chains(c):
    def f(x):
        return x * c * c * c
    fg = passes.functionalize(tg.trace(f, tg.ones(3)))
    from tracegrad.passes.fold import fold_scalings
    out = fold_scalings(fg)
    n_mul = sum(n.prim.name == "mul" for n in passes.dce(out).nodes)
    assert n_mul == (1 if c == 2 else 3)
    x = np.array([1e-40, 3e38, 0.7], np.float32)
    with np.errstate(all="ignore"):
        assert _bits(interpret(out, [x])[0]) == _bits(interpret(fg, [x])[0])


def test_fold_scalings_keeps_values_read_elsewhere():
    def f(x):
        y = x * 2
        return y * 4, y
    fg = passes.functionalize(tg.trace(f, tg.ones(3)))
    from tracegrad.passes.fold import fold_scalings
    out = passes.dce(fold_scalings(fg))
    assert sum(n.prim.name == "mul" for n in out.nodes) == 2


def test_drop_clones_drops_only_private_copies_of_fresh_values():
    from tracegrad.passes.fold import drop_clones
    from tracegrad.ops.shape import CLONE

    def f(x, w):
        a = (x * 2).clone()              # fresh, read only by the clone: dropped
        b = x.clone()                    # an input: kept
        c = x.t().clone()                # a view (transposed): kept
        d = (x + 1)
        e = d.clone()                    # d also read below: kept
        return a, b, c, e, d * w, (x.t() * 3).clone()   # not in C order: kept
    x, w = tg.tensor(_arr(2, 3)), tg.tensor(_arr(2, 3))
    fg = passes.functionalize(tg.trace(f, x, w))
    out = drop_clones(fg).verify()
    assert dict(out.pass_log)["drop_clones"] == {"dropped": 1}
    assert sum(n.prim is CLONE for n in out.nodes) == 4
    ref = f(x, w)
    for got, want in zip(interpret(out, [x.numpy(), w.numpy()]), ref):
        assert np.array_equal(got, want.numpy())


def test_gradients_of_a_compiled_step_own_their_memory():
    """The `.grad` a compiled step assigns is a fresh array (its clone dropped, Note in
    passes/fold.py): never shared with a parameter, a buffer, another gradient or the loss."""
    model, opt, step = sgd_step(sizes=(3, 4, 2), act=tg.nn.ReLU)
    step = tg.compile(step)
    x, y = tg.tensor(_arr(5, 3)), tg.tensor([0, 1, 1, 0, 1])
    for _ in range(3):
        loss = step(x, y)
        arrays = [p._data for p in model.parameters()] + [p.grad._data for p in model.parameters()]
        arrays += [s["momentum_buffer"]._data for s in opt.state.values()] + [loss._data]
        for i, a in enumerate(arrays):
            for b in arrays[i + 1:]:
                assert not np.shares_memory(a, b)
