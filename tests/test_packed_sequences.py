"""Packed sequences (`nn.utils.rnn`) and the recurrent modules over them, and LSTM
projections (`proj_size`), against PyTorch with copied weights: packing and unpacking
(values, batch sizes, indices, dtypes, gradients to the padded input), every error PyTorch
raises, `RNN`/`LSTM`/`GRU` on a `PackedSequence` (outputs, final states at each sequence's
true last step in the caller's order, gradients of every parameter, the input and the
initial states), and the same under `tracegrad.compile` (numpy and JAX backends), where
other lengths must take another path, never the first call's.
"""
import itertools

import numpy as np
import pytest

import tracegrad as tg
from tracegrad.nn.utils import rnn as R

torch = pytest.importorskip("torch")
TR = torch.nn.utils.rnn

TOL = {"float32": dict(rtol=2e-4, atol=2e-5), "float64": dict(rtol=1e-9, atol=1e-11)}


def _np(t):
    return t.detach().numpy() if hasattr(t, "detach") else np.asarray(t)


def _close(got, ref, dtype="float64", what=""):
    np.testing.assert_allclose(_np(got).astype(float), _np(ref).astype(float),
                               err_msg=what, **TOL[dtype])


def _pair(cell, *args, dtype="float64", **kw):
    """The same recurrent module in torch and tracegrad (torch's initial weights)."""
    torch.manual_seed(0)
    tm = getattr(torch.nn, cell)(*args, **kw).to(getattr(torch, dtype))
    gm = getattr(tg.nn, cell)(*args, **kw).to(getattr(tg, dtype))
    gm.load_state_dict({k: tg.tensor(v.detach().numpy().copy())
                        for k, v in tm.state_dict().items()})
    return tm, gm


# ---------------------------------------------------------------------------------------
# packing and unpacking
# ---------------------------------------------------------------------------------------
@pytest.mark.parametrize("batch_first", [False, True])
@pytest.mark.parametrize("enforce_sorted,lengths", [
    (True, [5, 3, 3, 1]), (False, [2, 5, 1, 3]), (False, [3, 3, 1, 3, 3, 2])])
@pytest.mark.parametrize("as_", ["list", "tensor", "int32"])
def test_pack_and_pad_match_torch(batch_first, enforce_sorted, lengths, as_):
    rng = np.random.default_rng(0)
    B, T = len(lengths), 6
    x = rng.normal(size=(B, T, 2) if batch_first else (T, B, 2))
    w = rng.normal(size=(B, 7, 2) if batch_first else (7, B, 2))
    got = {}
    for lib, U in [(torch, TR), (tg, R)]:
        lens = {"list": lengths, "tensor": lib.tensor(lengths),
                "int32": lib.tensor(lengths, dtype=lib.int32)}[as_]
        xx = lib.tensor(x, requires_grad=True)
        p = U.pack_padded_sequence(xx, lens, batch_first=batch_first,
                                   enforce_sorted=enforce_sorted)
        out, out_lens = U.pad_packed_sequence(p, batch_first=batch_first, padding_value=-2.0,
                                              total_length=7)
        (out * lib.tensor(w)).sum().backward()
        assert str(p.batch_sizes.dtype) == "torch.int64"
        assert str(out_lens.dtype) == "torch.int64"
        got[lib] = [p.data, p.batch_sizes, p.sorted_indices, p.unsorted_indices, out,
                    out_lens, xx.grad]
    for a, b in zip(got[torch], got[tg]):
        assert (a is None) == (b is None)
        if a is not None:
            assert tuple(a.shape) == tuple(b.shape)
            _close(b, a)
    grad = _np(got[tg][-1])                       # zero at every padding position
    for i, n in enumerate(lengths):
        pad = grad[i, n:] if batch_first else grad[n:, i]
        assert not pad.any()


def test_pack_sequence_unpack_sequence_unpad_sequence():
    rng = np.random.default_rng(1)
    arrays = [rng.normal(size=(n, 2)) for n in (2, 4, 1, 4)]
    for enforce in (False,):
        ps = [U.pack_sequence([lib.tensor(a) for a in arrays], enforce_sorted=enforce)
              for lib, U in [(torch, TR), (tg, R)]]
        _close(ps[1].data, ps[0].data)
        assert ps[1].batch_sizes.tolist() == ps[0].batch_sizes.tolist()
        assert ps[1].sorted_indices.tolist() == ps[0].sorted_indices.tolist()
        for a, b in zip(TR.unpack_sequence(ps[0]), R.unpack_sequence(ps[1])):
            _close(b, a)
    ints = R.pack_sequence([tg.tensor([1, 2, 3]), tg.tensor([4, 5]), tg.tensor([6])])
    assert ints.data.tolist() == [1, 4, 6, 2, 5, 3] and ints.data.dtype == tg.int64
    assert [s.tolist() for s in R.unpack_sequence(ints)] == [[1, 2, 3], [4, 5], [6]]
    padded = np.arange(12.).reshape(3, 4)
    for bf in (True, False):
        src = padded if bf else padded.T.copy()
        ref = TR.unpad_sequence(torch.tensor(src), torch.tensor([3, 1, 4]), batch_first=bf)
        got = R.unpad_sequence(tg.tensor(src), tg.tensor([3, 1, 4]), batch_first=bf)
        assert [s.tolist() for s in got] == [s.tolist() for s in ref]


def test_packed_sequence_is_a_named_tuple_with_conversions():
    p = R.pack_sequence([tg.tensor([1., 2.]), tg.tensor([3.])])
    assert isinstance(p, tuple) and p._fields == ("data", "batch_sizes", "sorted_indices",
                                                  "unsorted_indices")
    data, batch_sizes, s, u = p
    assert s is None and u is None and batch_sizes.tolist() == [2, 1]
    assert p.to(tg.float32) is p and p.float() is p
    d = p.double()
    assert d.data.dtype == tg.float64 and d.batch_sizes is p.batch_sizes
    assert p.to(tg.float64).data.dtype == tg.float64 and p.long().data.dtype == tg.int64
    assert p.to("cpu") is p and p.cpu() is p and not p.is_cuda and not p.is_pinned()
    q = R.PackedSequence((p.data, p.batch_sizes))                 # (data, batch_sizes)
    assert q.data is p.data and q.unsorted_indices is None
    r = R.PackedSequence(p.data, p.batch_sizes, tg.tensor([2, 0, 1]))
    assert r.unsorted_indices.tolist() == [1, 2, 0]               # inverted when not given
    assert repr(p).startswith("PackedSequence(data=tensor([1., 3., 2.]), batch_sizes=")


def _error(lib, U, call):
    try:
        call(lib, U)
    except Exception as e:              # noqa: BLE001 - the type is what is compared
        return e
    raise AssertionError("no error")


ERRORS = {
    "not sorted": lambda m, U: U.pack_padded_sequence(m.zeros(5, 3, 2), [3, 5, 2]),
    "not sorted tensor": lambda m, U: U.pack_padded_sequence(m.zeros(5, 3, 2),
                                                             m.tensor([5, 3, 4])),
    "zero length": lambda m, U: U.pack_padded_sequence(m.zeros(5, 3, 2), [5, 3, 0]),
    "zero length unsorted": lambda m, U: U.pack_padded_sequence(
        m.zeros(5, 3, 2), [0, 3, 5], enforce_sorted=False),
    "negative": lambda m, U: U.pack_padded_sequence(m.zeros(5, 3, 2), [5, 3, -1]),
    "len mismatch": lambda m, U: U.pack_padded_sequence(m.zeros(5, 3, 2), [5, 3]),
    "batch_first mismatch": lambda m, U: U.pack_padded_sequence(m.zeros(5, 3, 2), [5, 3, 2],
                                                                batch_first=True),
    "2-D lengths": lambda m, U: U.pack_padded_sequence(m.zeros(5, 3, 2),
                                                       m.tensor([[5, 3, 2]])),
    "empty": lambda m, U: U.pack_padded_sequence(m.zeros(0, 3, 2), [1, 1, 1]),
    "total_length": lambda m, U: U.pad_packed_sequence(
        U.pack_padded_sequence(m.zeros(5, 3, 2), [5, 3, 2]), total_length=4),
    "rnn packed data 3-D": lambda m, U: m.nn.GRU(2, 4)(
        U.PackedSequence(m.zeros(10, 1, 2), m.tensor([3, 3, 2, 1, 1]))),
    "rnn packed input size": lambda m, U: m.nn.GRU(3, 4)(
        U.pack_padded_sequence(m.zeros(5, 3, 2), [5, 3, 2])),
    "rnn packed hidden": lambda m, U: m.nn.GRU(2, 4)(
        U.pack_padded_sequence(m.zeros(5, 3, 2), [5, 3, 2]), m.zeros(1, 2, 4)),
    "rnn dtype": lambda m, U: m.nn.LSTM(2, 4)(m.zeros(5, 3, 2, dtype=m.float64)),
    "proj negative": lambda m, U: m.nn.LSTM(2, 4, proj_size=-1),
    "proj too big": lambda m, U: m.nn.LSTM(2, 4, proj_size=4),
    "proj for GRU": lambda m, U: m.nn.GRU(2, 4, proj_size=2),
    "proj for RNN": lambda m, U: m.nn.RNN(2, 4, proj_size=0),
    "unpad lengths mismatch": lambda m, U: U.unpad_sequence(m.zeros(3, 2), m.tensor([1, 1]),
                                                            batch_first=True),
}


@pytest.mark.parametrize("case", sorted(ERRORS))
def test_errors_match_torch(case):
    ref = _error(torch, TR, ERRORS[case])
    got = _error(tg, R, ERRORS[case])
    assert isinstance(got, type(ref)), (type(got), type(ref), got)
    assert str(ref) in str(got), (str(got), str(ref))


def test_errors_where_torch_has_none_or_an_internal_one():
    with pytest.raises(RuntimeError, match="exceeds the padded length"):   # torch reads past
        R.pack_padded_sequence(tg.zeros(5, 3, 2), [6, 3, 2])              # the end
    p = R.pack_padded_sequence(tg.zeros(5, 3, 2), [5, 3, 2])
    with pytest.raises(RuntimeError, match=r"Expected hidden\[0\] size \(1, 3, 4\), got "
                                           r"\[1, 2, 4\]"):
        tg.nn.LSTM(2, 4)(p, (tg.zeros(1, 2, 4), tg.zeros(1, 3, 4)))
    with pytest.raises(RuntimeError, match=r"Expected hidden\[1\] size \(1, 3, 4\), got "
                                           r"\[1, 3, 3\]"):
        tg.nn.LSTM(2, 4, proj_size=3)(p, (tg.zeros(1, 3, 3), tg.zeros(1, 3, 3)))


# ---------------------------------------------------------------------------------------
# RNN, LSTM, GRU over packed sequences
# ---------------------------------------------------------------------------------------
def packed_run(lib, U, m, x, hs, lengths, cell, batch_first, enforce_sorted, given_h, w):
    """Pack -> module -> pad; a weighted sum of the output and the final states, backward.
    Returns the values and gradients to compare."""
    xx = lib.tensor(x, requires_grad=True)
    hh = [lib.tensor(h, requires_grad=True) for h in hs]
    p = U.pack_padded_sequence(xx, lib.tensor(lengths), batch_first=batch_first,
                               enforce_sorted=enforce_sorted)
    h0 = None
    if given_h:
        h0 = (hh[0], hh[1]) if cell == "LSTM" else hh[0]
    out, hn = m(p, h0)
    assert type(out).__name__ == "PackedSequence"
    padded, _ = U.pad_packed_sequence(out, batch_first=batch_first)
    hn = list(hn) if cell == "LSTM" else [hn]
    loss = (padded * lib.tensor(w[0][tuple(slice(n) for n in padded.shape)])).sum()
    for h, wh in zip(hn, w[1:]):
        loss = loss + (h * lib.tensor(wh[:, :, :h.shape[-1]])).sum()
    loss.backward()
    got = {"packed": out.data, "padded": padded, "x.grad": xx.grad}
    got.update({f"h_n[{i}]": h for i, h in enumerate(hn)})
    if given_h:
        got.update({f"h0[{i}].grad": hh[i].grad for i in range(len(hn))})
    got.update({n + ".grad": p.grad for n, p in m.named_parameters()})
    return got


def _check_packed(cell, layers, bidirectional, batch_first, enforce_sorted, given_h,
                  proj=0, dtype="float64", lengths=None):
    kw = dict(num_layers=layers, bidirectional=bidirectional, batch_first=batch_first)
    if proj:
        kw["proj_size"] = proj
    tm, gm = _pair(cell, 3, 5, dtype=dtype, **kw)
    lengths = lengths or ([4, 3, 3, 1] if enforce_sorted else [2, 4, 1, 3])
    rng = np.random.default_rng(1)
    B, T, D = len(lengths), max(lengths) + 1, (2 if bidirectional else 1) * layers
    x = rng.normal(size=(B, T, 3) if batch_first else (T, B, 3)).astype(dtype)
    hs = [rng.normal(size=(D, B, proj or 5)).astype(dtype),
          rng.normal(size=(D, B, 5)).astype(dtype)]
    w = [rng.normal(size=(8, 8, 10)), rng.normal(size=(D, B, 5)), rng.normal(size=(D, B, 5))]
    ref = packed_run(torch, TR, tm, x, hs, lengths, cell, batch_first, enforce_sorted,
                     given_h, w)
    got = packed_run(tg, R, gm, x, hs, lengths, cell, batch_first, enforce_sorted,
                     given_h, w)
    assert ref.keys() == got.keys()
    for k in ref:
        assert tuple(got[k].shape) == tuple(ref[k].shape), k
        _close(got[k], ref[k], dtype, k)


GRID = [c for c in itertools.product(["LSTM", "GRU", "RNN"], [(1, False), (2, True),
                                                              (1, True), (2, False)],
                                     [False, True], [True, False], [False, True])
        if (c[1] != (2, False) or c[2] == c[3])]


@pytest.mark.parametrize("cell,shape,batch_first,enforce_sorted,given_h", GRID)
def test_rnn_on_packed_sequence_matches_torch(cell, shape, batch_first, enforce_sorted,
                                              given_h):
    _check_packed(cell, shape[0], shape[1], batch_first, enforce_sorted, given_h)


@pytest.mark.parametrize("cell", ["LSTM", "GRU", "RNN"])
def test_rnn_on_packed_sequence_float32(cell):
    _check_packed(cell, 2, True, True, False, True, dtype="float32")


def test_rnn_on_packed_sequence_ties_and_single_step_and_full_lengths():
    _check_packed("LSTM", 2, True, False, False, True, lengths=[3, 3, 1, 3, 3, 2])
    _check_packed("GRU", 1, True, False, False, True, lengths=[1, 1, 1])
    _check_packed("RNN", 1, True, True, True, True, lengths=[4, 4])


def test_relu_rnn_on_packed_sequence():
    tm, gm = _pair("RNN", 2, 3, nonlinearity="relu", bidirectional=True)
    x = np.random.default_rng(3).normal(size=(4, 3, 2))
    outs = [m(U.pack_padded_sequence(lib.tensor(x), [4, 2, 1])) for lib, U, m in
            [(torch, TR, tm), (tg, R, gm)]]
    _close(outs[1][0].data, outs[0][0].data)
    _close(outs[1][1], outs[0][1])


@pytest.mark.parametrize("given_h", [False, True])
@pytest.mark.parametrize("shape", [(1, False), (2, True)])
@pytest.mark.parametrize("packed", [False, True])
def test_lstm_proj_size_matches_torch(packed, shape, given_h):
    if packed:
        _check_packed("LSTM", shape[0], shape[1], True, False, given_h, proj=2)
        return
    tm, gm = _pair("LSTM", 3, 5, num_layers=shape[0], bidirectional=shape[1], proj_size=2,
                   batch_first=True)
    D = (2 if shape[1] else 1) * shape[0]
    rng = np.random.default_rng(4)
    x, h0, c0 = rng.normal(size=(2, 4, 3)), rng.normal(size=(D, 2, 2)), rng.normal(size=(D, 2, 5))
    res = []
    for lib, m in [(torch, tm), (tg, gm)]:
        xx = lib.tensor(x, requires_grad=True)
        out, (h, c) = m(xx, (lib.tensor(h0), lib.tensor(c0)) if given_h else None)
        ((out * 2).sum() + (h ** 2).sum() + (c * 3).sum()).backward()
        res.append([out, h, c, xx.grad] + [p.grad for p in m.parameters()])
    for a, b in zip(*res):
        assert tuple(a.shape) == tuple(b.shape)
        _close(b, a)


def test_lstm_proj_size_parameters_and_init_like_torch():
    kw = dict(num_layers=2, bidirectional=True, proj_size=3)
    for bias in (True, False):
        torch.manual_seed(0)
        tm = torch.nn.LSTM(2, 4, bias=bias, **kw)
        gm = tg.nn.LSTM(2, 4, bias=bias, **kw)
        assert [(n, tuple(p.shape)) for n, p in gm.named_parameters()] == \
            [(n, tuple(p.shape)) for n, p in tm.named_parameters()]
        assert [[tuple(p.shape) for p in g] for g in gm.all_weights] == \
            [[tuple(p.shape) for p in g] for g in tm.all_weights]
        assert repr(gm) == repr(tm)
        bound = 1 / 4 ** 0.5                             # U(-1/sqrt(hidden), 1/sqrt(hidden))
        for p in gm.parameters():
            assert p.abs().max().item() <= bound and p.abs().max().item() > bound / 3
    assert gm.proj_size == 3 and tg.nn.LSTM(2, 4).proj_size == 0


def test_dropout_between_layers_on_packed_input():
    tm, gm = _pair("LSTM", 3, 4, num_layers=2, dropout=1.0)     # layer 2 sees zeros only
    seqs = [np.random.default_rng(5).normal(size=(n, 3)) for n in (3, 2)]
    outs = [m(U.pack_sequence([lib.tensor(s) for s in seqs])) for lib, U, m in
            [(torch, TR, tm), (tg, R, gm)]]
    _close(outs[1][0].data, outs[0][0].data)
    _close(outs[1][1][0], outs[0][1][0])
    gm.eval()                                                   # no dropout in eval mode
    tm.eval()
    outs = [m(U.pack_sequence([lib.tensor(s) for s in seqs])) for lib, U, m in
            [(torch, TR, tm), (tg, R, gm)]]
    _close(outs[1][0].data, outs[0][0].data)


def test_embedding_on_packed_token_ids_then_lstm():
    """The other common idiom: pack the token ids, embed `packed.data`, re-wrap."""
    tm, gm = _pair("LSTM", 3, 4, bidirectional=True)
    torch.manual_seed(1)
    temb = torch.nn.Embedding(9, 3).double()
    gemb = tg.nn.Embedding(9, 3).double()
    gemb.weight.data = tg.tensor(temb.weight.detach().numpy().copy())
    res = []
    for lib, U, emb, m in [(torch, TR, temb, tm), (tg, R, gemb, gm)]:
        p = U.pack_sequence([lib.tensor(t) for t in ([1, 2], [3, 4, 5], [6])],
                            enforce_sorted=False)
        p = U.PackedSequence(emb(p.data), p.batch_sizes, p.sorted_indices,
                             p.unsorted_indices)
        out, (h, c) = m(p)
        (out.data.sum() + (h * c).sum()).backward()
        res.append([out.data, h, c, emb.weight.grad] + [q.grad for q in m.parameters()])
    for a, b in zip(*res):
        _close(b, a)


def test_gradcheck_and_gradgradcheck_through_pack_lstm_pad():
    tg.manual_seed(0)
    m = tg.nn.LSTM(1, 2, bidirectional=True, proj_size=1).double()
    rng = np.random.default_rng(0)
    x = tg.tensor(rng.normal(size=(2, 2, 1)), requires_grad=True)
    h0 = tg.tensor(rng.normal(size=(2, 2, 1)), requires_grad=True)
    c0 = tg.tensor(rng.normal(size=(2, 2, 2)), requires_grad=True)

    def f(x, h0, c0):
        p = R.pack_padded_sequence(x, [1, 2], enforce_sorted=False)
        out, (h, c) = m(p, (h0, c0))
        return R.pad_packed_sequence(out, padding_value=0.5)[0], h, c
    assert tg.autograd.gradcheck(f, (x, h0, c0))
    assert tg.autograd.gradgradcheck(f, (x, h0, c0))


# ---------------------------------------------------------------------------------------
# under tracegrad.compile
# ---------------------------------------------------------------------------------------
def _compiled_program(backend, cell="LSTM", layers=2, proj=2, dropout=0.0):
    """`f(x, lengths, h0, c0)` over a packed bidirectional layer stack, eager and compiled,
    and a runner returning the loss, lengths and every gradient."""
    tg.manual_seed(0)
    kw = dict(num_layers=layers, bidirectional=True, batch_first=True, dropout=dropout)
    if proj:
        kw["proj_size"] = proj
    m = getattr(tg.nn, cell)(3, 5, **kw).double()

    def f(x, lengths, h0, c0):
        p = R.pack_padded_sequence(x, lengths, batch_first=True, enforce_sorted=False)
        out, hn = m(p, (h0, c0) if cell == "LSTM" else h0)
        o, lens = R.pad_packed_sequence(out, batch_first=True)
        h = hn[0] + hn[1].sum() if cell == "LSTM" else hn
        return (o ** 2).sum() + (h * 3).sum(), lens

    rng = np.random.default_rng(0)
    D = 2 * layers
    data = [rng.normal(size=(4, 5, 3)), rng.normal(size=(D, 4, proj or 5)),
            rng.normal(size=(D, 4, 5))]

    def run(fn, lengths):
        for p in m.parameters():
            p.grad = None
        args = [tg.tensor(a, requires_grad=True) for a in data]
        tg.manual_seed(7)
        loss, lens = fn(args[0], lengths, args[1], args[2])
        loss.backward()
        return [loss, lens] + [a.grad for a in args] + [p.grad for p in m.parameters()]
    return f, tg.compile(f, backend=backend), run


def _same(a, b):
    assert len(a) == len(b)
    for u, v in zip(a, b):
        assert (u is None) == (v is None)
        if u is not None:
            np.testing.assert_allclose(_np(v), _np(u), rtol=1e-12, atol=1e-12)


def test_compiled_equals_eager_and_other_lengths_retrace():
    f, cf, run = _compiled_program("numpy")
    lengths = tg.tensor([3, 5, 1, 3])
    for lens in [lengths, tg.tensor([2, 5, 1, 3]), [5, 5, 2, 1], [5, 5, 2, 1], [5, 4, 2, 1],
                 lengths, tg.tensor([3, 5, 1, 3])]:
        _same(run(f, lens), run(cf, lens))
    stats = cf.stats
    assert stats.traces == 4 and stats.cache_hits == 3, stats
    lengths[0] = 4                             # the same tensor, other values: a new path
    _same(run(f, lengths), run(cf, lengths))
    assert cf.stats.traces == 5
    assert "guard tolist" in str(cf.stats)


@pytest.mark.parametrize("cell", ["GRU", "RNN"])
def test_compiled_equals_eager_gru_rnn_with_dropout(cell):
    f, cf, run = _compiled_program("numpy", cell=cell, proj=0, dropout=0.5)
    for lens in [[5, 2, 2, 4], [1, 1, 1, 1], [5, 2, 2, 4]]:
        _same(run(f, lens), run(cf, lens))
    assert cf.stats.traces == 2


def test_compiled_module_takes_and_returns_packed_sequences():
    tg.manual_seed(0)
    m = tg.nn.GRU(3, 4, bidirectional=True).double()
    cm = tg.compile(m)
    rng = np.random.default_rng(0)
    for lengths in [(2, 4, 3), (2, 4, 3), (4, 4, 1)]:
        p = R.pack_sequence([tg.tensor(rng.normal(size=(n, 3))) for n in lengths],
                            enforce_sorted=False)
        (out, h), (ref, rh) = cm(p), m(p)
        assert isinstance(out, R.PackedSequence)
        assert out.batch_sizes.tolist() == ref.batch_sizes.tolist()
        assert out.sorted_indices.tolist() == ref.sorted_indices.tolist()
        _same([out.data, h], [ref.data, rh])
    assert cm.stats.traces == 2 and cm.stats.cache_hits == 1


def test_compiled_lengths_computed_from_a_padding_mask():
    tg.manual_seed(0)
    emb = tg.nn.Embedding(10, 3, padding_idx=0).double()
    rnn = tg.nn.LSTM(3, 4).double()

    def g(tokens):
        lengths = (tokens != 0).sum(1)
        p = R.pack_padded_sequence(emb(tokens).transpose(0, 1), lengths, enforce_sorted=False)
        _, (h, _) = rnn(p)
        return h.sum()
    cg = tg.compile(g)
    for toks in [[[1, 2, 0], [3, 0, 0]], [[1, 2, 3], [3, 0, 0]], [[1, 2, 0], [3, 0, 0]]]:
        t = tg.tensor(toks)
        assert g(t).item() == cg(t).item()
    assert cg.stats.traces == 2 and cg.stats.cache_hits == 1


LENGTHS = [3, 2, 1]


def test_compiled_lengths_from_a_global_list_and_a_module_attribute_are_guarded():
    tg.manual_seed(0)
    gru = tg.nn.GRU(2, 3).double()

    class Holder(tg.nn.Module):
        def __init__(self):
            super().__init__()
            self.gru, self.lengths = gru, [3, 2, 1]

        def forward(self, x):
            p = R.pack_padded_sequence(x, self.lengths, enforce_sorted=False)
            return self.gru(p)[1].sum()

    def f(x):
        return gru(R.pack_padded_sequence(x, LENGTHS, enforce_sorted=False))[1].sum()
    holder = Holder()
    cf, ch = tg.compile(f), tg.compile(holder)
    x = tg.tensor(np.random.default_rng(0).normal(size=(3, 3, 2)))
    try:
        for new in ([3, 2, 1], [1, 3, 2], [1, 3, 2]):
            LENGTHS[:] = holder.lengths[:] = new
            assert cf(x).item() == f(x).item() and ch(x).item() == holder(x).item()
    finally:
        LENGTHS[:] = [3, 2, 1]
    assert cf.stats.traces == ch.stats.traces == 2


def test_compiled_jax_backend_equals_eager():
    pytest.importorskip("jax")                   # short sequences: XLA compiles each path
    f, cf, run = _compiled_program("jax", cell="RNN", layers=1, proj=0)
    for lens in [[2, 1, 1, 2], tg.tensor([1, 2, 2, 2])]:
        _same(run(f, lens), run(cf, lens))
    assert cf.stats.traces == 2


@pytest.mark.slow
def test_compiled_jax_backend_lstm_with_projections():
    pytest.importorskip("jax")
    f, cf, run = _compiled_program("jax", layers=1, proj=2)
    lengths = tg.tensor([3, 5, 1, 3])
    _same(run(f, lengths), run(cf, lengths))
    lengths[1] = 2
    _same(run(f, lengths), run(cf, lengths))


# ---------------------------------------------------------------------------------------
# a real program: a variable-length sequence classifier
# ---------------------------------------------------------------------------------------
def make_classifier(lib):
    nn = lib.nn
    U = TR if lib is torch else R

    class Classifier(nn.Module):
        """Embedding -> packed bidirectional LSTM -> both directions' last states ->
        Linear."""

        def __init__(self, vocab=12, dim=6, hidden=8, classes=3):
            super().__init__()
            self.embed = nn.Embedding(vocab, dim, padding_idx=0)
            self.lstm = nn.LSTM(dim, hidden, batch_first=True, bidirectional=True)
            self.head = nn.Linear(2 * hidden, classes)

        def forward(self, tokens, lengths):
            packed = U.pack_padded_sequence(self.embed(tokens), lengths, batch_first=True,
                                            enforce_sorted=False)
            out, (h, _) = self.lstm(packed)
            padded, _ = U.pad_packed_sequence(out, batch_first=True)
            return self.head(lib.cat([h[0], h[1]], -1)) + 0.1 * padded.mean()
    return Classifier()


def classifier_program(lib, dtype, compiled):
    torch.manual_seed(0)
    tmodel = make_classifier(torch).to(getattr(torch, dtype))
    model = tmodel
    if lib is tg:
        model = make_classifier(tg).to(getattr(tg, dtype))
        model.load_state_dict({k: tg.tensor(v.detach().numpy().copy())
                               for k, v in tmodel.state_dict().items()})
    opt = lib.optim.Adam(model.parameters(), lr=0.01)

    def step(tokens, lengths, labels):
        opt.zero_grad()
        loss = lib.nn.functional.cross_entropy(model(tokens, lengths), labels)
        loss.backward()
        opt.step()
        return loss

    if compiled:
        step = tg.compile(step)
    rng = np.random.default_rng(0)
    batches = []
    for _ in range(2):
        lengths = rng.integers(1, 7, size=5)
        tokens = np.zeros((5, 6), dtype=np.int64)
        for i, n in enumerate(lengths):
            tokens[i, :n] = rng.integers(1, 12, size=n)
        batches.append((tokens, lengths, rng.integers(0, 3, size=5)))
    losses = []
    for k in range(5):
        tokens, lengths, labels = batches[k % 2]
        loss = step(lib.tensor(tokens), lib.tensor(lengths), lib.tensor(labels))
        losses.append(float(loss.detach()))
    params = {n: _np(p).copy() for n, p in model.named_parameters()}
    return losses, params, (step.stats if compiled else None)


@pytest.mark.parametrize("dtype", ["float64", "float32"])
def test_sequence_classifier_trains_like_torch(dtype):
    ref, ref_params, _ = classifier_program(torch, dtype, False)
    eager, eager_params, _ = classifier_program(tg, dtype, False)
    comp, comp_params, stats = classifier_program(tg, dtype, True)
    _close(eager, ref, dtype, "eager losses")
    _close(comp, eager, dtype, "compiled losses")
    for n in ref_params:
        _close(eager_params[n], ref_params[n], dtype, n)
        _close(comp_params[n], eager_params[n], dtype, n)
    # a path per batch's lengths, and one more for the call that first finds Adam's state
    assert stats.traces == 3 and stats.cache_hits == 2, stats
    assert all("tolist(%lengths)" in r for r in stats.retraces), stats
