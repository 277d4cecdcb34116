"""Ops the real programs of `test_real_programs_dropin.py` found missing, each checked
against PyTorch (values, dtypes, gradients, error types), by float64 finite differences, and
compiled == eager on the numpy and JAX backends (helpers of `test_ops_training_more.py`)."""
import numpy as np
import pytest

import tracegrad as tg
from test_ops_training_more import _np, _torch, check_like_torch, raises_like


# ---------------- fmod ----------------
def _fmod_arrays(dtype):
    rng = np.random.default_rng(0)
    x = (rng.standard_normal((3, 4)) * 4).astype(dtype)
    y = (np.abs(rng.standard_normal((4,))) + 0.5).astype(dtype) * np.array([1, -1, 1, -1])
    return [x, y.astype(dtype)]


def test_fmod_tensor_like_torch():
    check_like_torch(lambda m, x, y: m.fmod(x, y), None, arrays=_fmod_arrays)


def test_fmod_scalar_and_method_like_torch():
    check_like_torch(lambda m, x: x.fmod(1.5) + m.fmod(x, -0.7), [(5, 3)])


def test_fmod_ints_inplace_and_errors():
    torch = _torch()
    for m in (torch, tg):
        a = m.tensor([-7, 7, -3, 3])
        assert m.fmod(a, 3).tolist() == [-1, 1, 0, 0]
        assert m.fmod(a, 2.5).dtype == m.float32
        assert m.fmod(m.tensor([5.0]), m.tensor([0.0])).isnan().all()
        b = m.tensor([-5.5, 5.5])
        b.fmod_(2)
        assert b.tolist() == [-1.5, 1.5]
    raises_like(lambda m: m.fmod(m.tensor([5]), 0))
    t = tg.tensor([1.0, 2.0], requires_grad=True)
    assert type(tg.fmod(t, tg.tensor([1.5, 1.5]))).__name__ == "Tensor"
    assert tg.fmod(t, tg.tensor(1.5)).grad_fn.name() == "FmodBackward1"
    assert tg.fmod(t, 1.5).grad_fn.name() == "FmodBackward0"


# ---------------- bincount ----------------
def test_bincount_like_torch():
    torch = _torch()
    for m in (torch, tg):
        x = m.tensor([1, 3, 1, 0, 3, 3])
        assert m.bincount(x).tolist() == [1, 2, 0, 3]
        assert x.bincount(minlength=6).tolist() == [1, 2, 0, 3, 0, 0]
        assert m.bincount(m.tensor([], dtype=m.int64)).tolist() == []
        assert m.bincount(m.tensor([], dtype=m.int64), minlength=2).tolist() == [0, 0]
        w = m.tensor([0.5, 1.0, 2.0, 1.0, 1.0, 1.0])
        out = m.bincount(x, weights=w)
        assert out.dtype == m.float32 and out.tolist() == [1.0, 2.5, 0.0, 3.0]
        assert m.bincount(x, weights=m.tensor([1, 2, 3, 4, 5, 6])).dtype == m.float64
        assert m.bincount(x).dtype == m.int64
    raises_like(lambda m: m.bincount(m.tensor([-1, 2])))
    raises_like(lambda m: m.bincount(m.tensor([[1]])))
    raises_like(lambda m: m.bincount(m.tensor([1.0])))
    raises_like(lambda m: m.bincount(m.tensor([1, 2]), weights=m.tensor([1.0])))


def test_bincount_compiles_with_a_guard_on_its_length():
    f = tg.compile(lambda x: tg.bincount(x, minlength=3) * 2)
    assert f(tg.tensor([0, 1, 1])).tolist() == [2, 4, 0]
    assert f(tg.tensor([2, 1, 1])).tolist() == [0, 4, 2]
    assert f(tg.tensor([4, 1, 1])).tolist() == [0, 4, 0, 0, 2]
    assert f.stats.eager_calls == 0


# ---------------- Tensor.where ----------------
def test_tensor_where_method_like_torch():
    check_like_torch(lambda m, x, y: x.where(x > 0, y) + x.where(x < 0.5, 2.0), [(3, 4), (4,)])


# ---------------- RNN / LSTM / GRU and their cells ----------------
def _same_module(m, make, dtype):
    """`make(m.nn)` with PyTorch's initial weights, in library `m`."""
    torch = _torch()
    torch.manual_seed(0)
    tmod = make(torch.nn).to(getattr(torch, dtype))
    if m is torch:
        return tmod
    mod = make(m.nn).to(getattr(m, dtype))
    mod.load_state_dict({k: tg.tensor(v.detach().numpy().copy())
                         for k, v in tmod.state_dict().items()})
    return mod


def _rnn_fn(make, lstm, dtype_of=lambda x: str(x.dtype).split(".")[-1]):
    mods = {}

    def fn(m, x, *state):
        key = (m.__name__, dtype_of(x))
        if key not in mods:
            mods[key] = _same_module(m, make, key[1])
        hx = None if not state else (tuple(state) if lstm else state[0])
        out, st = mods[key](x, hx)
        flat = [out] + (list(st) if isinstance(st, tuple) else [st])
        return m.cat([f.reshape(-1) for f in flat])
    return fn


RNN_CASES = [     # kind, constructor keywords, input shape, pass a state, check on JAX
    ("LSTM", dict(num_layers=2, batch_first=True), (2, 3, 3), True, True),
    ("LSTM", dict(bidirectional=True), (3, 2, 3), False, False),
    ("LSTM", dict(num_layers=2, bidirectional=True, bias=False), (3, 3), True, False),
    ("GRU", dict(num_layers=2, bidirectional=True, batch_first=True), (2, 3, 3), True, True),
    ("GRU", dict(), (4, 3), False, False),
    ("RNN", dict(nonlinearity="relu", num_layers=2), (3, 2, 3), True, False),
    ("RNN", dict(bidirectional=True, batch_first=True), (2, 3, 3), False, False),
]


@pytest.mark.parametrize("kind,kw,shape,with_state,jax", RNN_CASES)
def test_rnn_modules_like_torch(kind, kw, shape, with_state, jax):
    make = lambda nn: getattr(nn, kind)(3, 4, **kw)      # noqa: E731
    lstm = kind == "LSTM"
    dirs = 2 if kw.get("bidirectional") else 1
    shapes = [shape]
    if with_state:
        h = (kw.get("num_layers", 1) * dirs,) + ((shape[0 if kw.get("batch_first") else 1],)
                                                 if len(shape) == 3 else ()) + (4,)
        shapes += [h, h] if lstm else [h]
    check_like_torch(_rnn_fn(make, lstm), shapes, jax=False)
    if jax:         # JAX compiles the unrolled loop slowly: the full check is opt-in (slow)
        pytest.importorskip("jax")


@pytest.mark.slow
@pytest.mark.parametrize("kind,kw,shape,with_state,jax", [c for c in RNN_CASES if c[-1]])
def test_rnn_modules_on_jax(kind, kw, shape, with_state, jax):
    from test_ops_training_more import _arrays, check_compiled
    make = lambda nn: getattr(nn, kind)(3, 4, **kw)      # noqa: E731
    check_compiled(_rnn_fn(make, kind == "LSTM"), _arrays([shape], "float64"), backend="jax")


@pytest.mark.parametrize("kind", ["RNNCell", "LSTMCell", "GRUCell"])
@pytest.mark.parametrize("batched", [True, False])
def test_rnn_cells_like_torch(kind, batched):
    lstm = kind == "LSTMCell"
    mods = {}

    def fn(m, x, h, c=None):
        key = (m.__name__, str(x.dtype))
        if key not in mods:
            mods[key] = _same_module(m, lambda nn: getattr(nn, kind)(3, 4),
                                     str(x.dtype).split(".")[-1])
        cell = mods[key]
        out = cell(x, (h, c) if lstm else h)
        out2 = cell(x)                                    # default zero state
        flat = (list(out) + list(out2)) if lstm else [out, out2]
        return m.cat([f.reshape(-1) for f in flat])
    hs = [(2, 4), (2, 4)] if lstm else [(2, 4)]
    shapes = [(2, 3)] + hs
    if not batched:
        shapes = [s[1:] for s in shapes]
    check_like_torch(fn, shapes, jax=batched and lstm)


def test_lstm_weight_gradients_names_repr_and_errors():
    torch = _torch()
    make = lambda nn: nn.LSTM(3, 4, num_layers=2, bidirectional=True, batch_first=True)  # noqa
    x = np.random.default_rng(1).standard_normal((2, 5, 3))
    got = {}
    for m in (torch, tg):
        mod = _same_module(m, make, "float64")
        out, (h, c) = mod(m.tensor(x))
        (out.pow(2).sum() + h.sum() + c.tanh().sum()).backward()
        got[m.__name__] = {n: _np(p.grad) for n, p in mod.named_parameters()}
        assert repr(mod) == "LSTM(3, 4, num_layers=2, batch_first=True, bidirectional=True)"
        assert len(mod.all_weights) == 4 and len(mod.all_weights[0]) == 4
        mod.flatten_parameters()
    assert list(got["torch"]) == list(got["tracegrad"])
    for n in got["torch"]:
        np.testing.assert_allclose(got["tracegrad"][n], got["torch"][n], rtol=1e-10, atol=1e-12)
    raises_like(lambda m: m.nn.LSTM(3, 4)(m.zeros(2, 5, 4)))
    raises_like(lambda m: m.nn.LSTM(3, 4)(m.zeros(2, 5, 4, 3)))
    raises_like(lambda m: m.nn.GRU(3, 4)(m.zeros(5, 2, 3), m.zeros(2, 2, 4)))
    raises_like(lambda m: m.nn.LSTM(3, 4)(m.zeros(5, 2, 3), (m.zeros(1, 2, 4), m.zeros(1, 3, 4))))
    raises_like(lambda m: m.nn.RNN(3, 4, nonlinearity="gelu"))
    raises_like(lambda m: m.nn.LSTM(3, 4, dropout=1.5))
    raises_like(lambda m: m.nn.LSTMCell(3, 4)(m.zeros(2, 5)))
    assert repr(tg.nn.GRU(3, 4, bias=False)) == repr(torch.nn.GRU(3, 4, bias=False))
    relu = dict(nonlinearity="relu")
    assert repr(tg.nn.RNN(3, 4, **relu)) == repr(torch.nn.RNN(3, 4, **relu))
    assert repr(tg.nn.GRUCell(3, 4)) == repr(torch.nn.GRUCell(3, 4))


def test_lstm_init_range_and_dropout_between_layers():
    tg.manual_seed(0)
    mod = tg.nn.LSTM(3, 16, num_layers=2, dropout=0.5)
    for p in mod.parameters():
        assert float(p.abs().max()) <= 0.25 and float(p.std()) > 0.1
    x = tg.randn(6, 2, 3)
    mod.eval()
    a, _ = mod(x)
    b, _ = mod(x)
    assert (a == b).all()                                # no dropout in eval
    mod.train()
    tg.manual_seed(1)
    c, _ = mod(x)
    tg.manual_seed(2)
    d, _ = mod(x)
    assert not (c == d).all()                            # dropout between the layers
    with pytest.warns(UserWarning, match="non-zero dropout expects num_layers greater"):
        tg.nn.GRU(3, 4, dropout=0.2)


def test_lstm_language_model_step_compiles_to_one_path():
    tg.manual_seed(0)
    emb, lstm, head = tg.nn.Embedding(7, 4), tg.nn.LSTM(4, 6, batch_first=True), tg.nn.Linear(6, 7)
    params = list(emb.parameters()) + list(lstm.parameters()) + list(head.parameters())
    opt = tg.optim.SGD(params, lr=0.1)

    def step(x, y, h, c):
        opt.zero_grad()
        out, (h, c) = lstm(emb(x), (h, c))
        loss = tg.nn.functional.cross_entropy(head(out).flatten(0, 1), y.flatten())
        loss.backward()
        opt.step()
        return loss, h.detach(), c.detach()
    f = tg.compile(step)
    x = tg.randint(0, 7, (2, 5))
    h, c = tg.zeros(1, 2, 6), tg.zeros(1, 2, 6)
    for _ in range(3):
        loss, h, c = f(x, x.roll(1, 1), h, c)
    assert f.stats.traces <= 2 and f.stats.eager_calls == 0    # .grad None, then set


# ---------------- F.pad modes, conv1d, 1-D pooling, interpolate ----------------
@pytest.mark.parametrize("mode", ["reflect", "replicate", "circular"])
@pytest.mark.parametrize("shape,pad", [((2, 3, 5), (2, 1)), ((3, 5), (0, 3)),
                                       ((1, 2, 4, 5), (1, 2, 3, 0)), ((2, 4, 5), (-1, 2))])
def test_pad_modes_like_torch(mode, shape, pad):
    check_like_torch(lambda m, x: m.nn.functional.pad(x, pad, mode=mode), [shape],
                     jax=mode == "reflect" and len(pad) == 4)


def test_pad_mode_errors_like_torch():
    raises_like(lambda m: m.nn.functional.pad(m.zeros(1, 2, 3), (3, 1), mode="reflect"))
    raises_like(lambda m: m.nn.functional.pad(m.zeros(1, 2, 3), (4, 1), mode="circular"))
    raises_like(lambda m: m.nn.functional.pad(m.zeros(2, 3), (1, 1, 1, 1), mode="reflect"))
    raises_like(lambda m: m.nn.functional.pad(m.zeros(2, 3), (1, 1), mode="wrap"))


@pytest.mark.parametrize("kw", [dict(), dict(stride=2, padding=1), dict(padding="same",
                                dilation=2), dict(groups=2, padding="valid")])
def test_conv1d_like_torch(kw):
    check_like_torch(lambda m, x, w, b: m.nn.functional.conv1d(x, w, b, **kw),
                     [(2, 4, 7), (6, 4 // kw.get("groups", 1), 3), (6,)],
                     jax="stride" in kw)


@pytest.mark.parametrize("mode", ["zeros", "reflect", "replicate", "circular"])
def test_conv1d_module_padding_modes_like_torch(mode):
    mods = {}

    def fn(m, x):
        key = (m.__name__, str(x.dtype))
        if key not in mods:
            mods[key] = _same_module(m, lambda nn: nn.Conv1d(3, 4, 3, padding="same",
                                                             padding_mode=mode, dilation=2),
                                     str(x.dtype).split(".")[-1])
        return mods[key](x)
    check_like_torch(fn, [(2, 3, 6)], jax=False)
    torch = _torch()
    for kw in (dict(padding=2, padding_mode=mode), dict(stride=2, bias=False, groups=3)):
        assert repr(tg.nn.Conv1d(3, 6, 5, **kw)) == repr(torch.nn.Conv1d(3, 6, 5, **kw))
    raises_like(lambda m: m.nn.Conv1d(3, 6, 5, padding_mode="wrap"))
    raises_like(lambda m: m.nn.Conv1d(3, 6, 5, stride=2, padding="same"))


@pytest.mark.parametrize("kw", [dict(kernel_size=2), dict(kernel_size=3, stride=2, padding=1),
                                dict(kernel_size=2, ceil_mode=True),
                                dict(kernel_size=2, dilation=2)])
def test_max_pool1d_like_torch(kw):
    check_like_torch(lambda m, x: m.nn.functional.max_pool1d(x, **kw), [(2, 3, 7)],
                     jax="stride" in kw)
    torch = _torch()
    x = np.random.default_rng(0).standard_normal((3, 7)).astype("float32")
    tv, ti = torch.nn.functional.max_pool1d(torch.tensor(x), return_indices=True, **kw)
    gv, gi = tg.nn.MaxPool1d(return_indices=True, **kw)(tg.tensor(x))
    assert gi.tolist() == ti.tolist() and gv.tolist() == tv.tolist()
    assert repr(tg.nn.MaxPool1d(**kw)) == repr(torch.nn.MaxPool1d(**kw))


@pytest.mark.parametrize("kw", [dict(kernel_size=2), dict(kernel_size=3, stride=2, padding=1),
                                dict(kernel_size=3, padding=1, count_include_pad=False)])
def test_avg_pool1d_like_torch(kw):
    check_like_torch(lambda m, x: m.nn.functional.avg_pool1d(x, **kw), [(2, 3, 7)],
                     jax="stride" in kw)
    assert repr(tg.nn.AvgPool1d(**kw)) == repr(_torch().nn.AvgPool1d(**kw))


INTERP = [((2, 3, 5), dict(scale_factor=2, mode="nearest")),
          ((2, 3, 5), dict(size=8, mode="nearest")),
          ((2, 3, 5), dict(size=3, mode="nearest")),
          ((2, 3, 5), dict(scale_factor=2.5, mode="linear")),
          ((2, 3, 5), dict(size=9, mode="linear", align_corners=True)),
          ((2, 3, 5), dict(size=2, mode="linear", align_corners=False)),
          ((1, 2, 3, 4), dict(scale_factor=(2, 1.5), mode="bilinear")),
          ((1, 2, 3, 4), dict(size=(5, 7), mode="bilinear", align_corners=True)),
          ((1, 2, 3, 4), dict(scale_factor=3, mode="nearest")),
          ((1, 1, 2, 3, 2), dict(scale_factor=2, mode="trilinear"))]


@pytest.mark.parametrize("shape,kw", INTERP)
def test_interpolate_like_torch(shape, kw):
    check_like_torch(lambda m, x: m.nn.functional.interpolate(x, **kw), [shape],
                     jax=kw.get("mode") == "bilinear")


def test_interpolate_upsample_module_and_errors():
    torch = _torch()
    for kw in (dict(scale_factor=2, mode="linear"), dict(size=(3, 4)),
               dict(scale_factor=(2, 3), mode="bilinear", align_corners=True)):
        assert repr(tg.nn.Upsample(**kw)) == repr(torch.nn.Upsample(**kw))
    x = np.random.default_rng(0).standard_normal((1, 2, 3, 3)).astype("float32")
    np.testing.assert_allclose(_np(tg.nn.Upsample(scale_factor=2, mode="bilinear")(
        tg.tensor(x))), _np(torch.nn.Upsample(scale_factor=2, mode="bilinear")(
            torch.tensor(x))), rtol=1e-6, atol=1e-6)
    F = "nn.functional"
    raises_like(lambda m: m.nn.functional.interpolate(m.zeros(1, 2, 3)))
    raises_like(lambda m: m.nn.functional.interpolate(m.zeros(1, 2, 3), size=4,
                                                      scale_factor=2))
    raises_like(lambda m: m.nn.functional.interpolate(m.zeros(1, 2, 3), size=4,
                                                      align_corners=True))
    raises_like(lambda m: m.nn.functional.interpolate(m.zeros(1, 2, 3), size=(4, 4)))
    del F


# ---------------- TransformerEncoderLayer / TransformerEncoder ----------------
ENC_CASES = [dict(), dict(norm_first=True, activation="gelu", batch_first=True),
             dict(batch_first=True, activation="gelu", bias=False)]


@pytest.mark.parametrize("kw", ENC_CASES)
@pytest.mark.parametrize("masks", ["none", "causal", "padding"])
def test_transformer_encoder_layer_like_torch(kw, masks):
    mods = {}
    bf = kw.get("batch_first", False)

    def fn(m, x):
        key = (m.__name__, str(x.dtype))
        if key not in mods:
            mods[key] = _same_module(m, lambda nn: nn.TransformerEncoderLayer(
                8, 2, dim_feedforward=12, dropout=0.0, **kw), str(x.dtype).split(".")[-1])
        layer = mods[key]
        if masks == "causal":
            mask = m.nn.Transformer.generate_square_subsequent_mask(4, dtype=x.dtype)
            return layer(x, src_mask=mask, is_causal=True)
        if masks == "padding":
            pad = m.tensor([[False, False, False, True], [False, False, True, True]])
            return layer(x, src_key_padding_mask=pad)
        return layer(x)
    check_like_torch(fn, [(2, 4, 8) if bf else (4, 2, 8)], gradcheck=masks == "none",
                     jax=masks == "causal" and bf)


def test_transformer_encoder_stack_eval_and_mask_detection():
    torch = _torch()
    x = np.random.default_rng(0).standard_normal((2, 5, 8))
    outs = {}
    for m in (torch, tg):
        def make(nn):
            layer = nn.TransformerEncoderLayer(8, 2, 16, dropout=0.1, batch_first=True)
            return nn.TransformerEncoder(layer, num_layers=2, norm=nn.LayerNorm(8),
                                         enable_nested_tensor=False)
        enc = _same_module(m, make, "float64")
        assert [n for n, _ in enc.named_parameters()][:3] == [
            "layers.0.self_attn.in_proj_weight", "layers.0.self_attn.in_proj_bias",
            "layers.0.self_attn.out_proj.weight"]
        enc.eval()
        mask = m.nn.Transformer.generate_square_subsequent_mask(5, dtype=m.float64)
        with m.no_grad():                    # PyTorch takes its fused fast path here
            outs[m.__name__] = [_np(enc(m.tensor(x))), _np(enc(m.tensor(x), mask=mask))]
    for a, b in zip(outs["tracegrad"], outs["torch"]):
        np.testing.assert_allclose(a, b, rtol=1e-9, atol=1e-10)
    assert tg.nn.Transformer.generate_square_subsequent_mask(3).tolist() == \
        torch.nn.Transformer.generate_square_subsequent_mask(3).tolist()
    raises_like(lambda m: m.nn.TransformerEncoderLayer(8, 2, activation="tanh"))
    layer = tg.nn.TransformerEncoderLayer(8, 2, dropout=0.5)
    enc = tg.nn.TransformerEncoder(layer, 2)
    assert enc.layers[0] is not layer and enc.layers[0].linear1.weight is not \
        enc.layers[1].linear1.weight


# ---------------- torch.distributions ----------------
def _pos(dtype):
    rng = np.random.default_rng(3)
    return [rng.standard_normal((3, 4)).astype(dtype),
            (np.abs(rng.standard_normal((3, 4))) + 0.5).astype(dtype),
            rng.standard_normal((3, 4)).astype(dtype)]


def test_normal_log_prob_entropy_cdf_kl_like_torch():
    def fn(m, loc, scale, x):
        D = m.distributions
        n = D.Normal(loc, scale)
        q = D.Normal(x, scale * 2)
        return m.stack([n.log_prob(x), n.entropy(), n.cdf(x), D.kl_divergence(n, q),
                        n.variance, n.stddev, n.mean])
    check_like_torch(fn, None, arrays=_pos)


def test_bernoulli_log_prob_entropy_kl_like_torch():
    def arrays(dtype):
        rng = np.random.default_rng(4)
        return [(rng.standard_normal((2, 5)) * 3).astype(dtype),
                rng.uniform(0.05, 0.95, (2, 5)).astype(dtype)]

    def fn(m, logits, probs):
        D = m.distributions
        v = m.tensor([[1, 0, 0, 1, 1], [0, 1, 1, 1, 0]], dtype=logits.dtype)
        a, b = D.Bernoulli(logits=logits), D.Bernoulli(probs=probs)
        return m.stack([a.log_prob(v), b.log_prob(v), a.entropy(), b.entropy(),
                        D.kl_divergence(a, b), D.kl_divergence(b, a), a.probs, b.logits,
                        a.variance])
    check_like_torch(fn, None, arrays=arrays)


def test_categorical_log_prob_entropy_kl_like_torch():
    def arrays(dtype):
        rng = np.random.default_rng(5)
        return [rng.standard_normal((3, 4)).astype(dtype),
                rng.uniform(0.1, 1.0, (3, 4)).astype(dtype)]

    def fn(m, logits, w):
        D = m.distributions
        a, b = D.Categorical(logits=logits), D.Categorical(probs=w)
        v = m.tensor([[0, 3, 1], [2, 2, 0]])             # sample shape (2,) x batch (3,)
        return m.cat([a.log_prob(v).reshape(-1), b.log_prob(v).reshape(-1), a.entropy(),
                      b.entropy(), D.kl_divergence(a, b), a.probs.reshape(-1),
                      b.logits.reshape(-1)])
    check_like_torch(fn, None, arrays=arrays)


def test_uniform_like_torch():
    def arrays(dtype):
        return [np.array([0.0, -1.0], dtype), np.array([2.0, 3.0], dtype)]

    def fn(m, lo, hi):
        D = m.distributions
        u = D.Uniform(lo, hi)
        x = m.tensor([1.0, 0.5], dtype=lo.dtype)
        return m.stack([u.log_prob(x), u.entropy(), u.cdf(x), u.mean, u.variance,
                        D.kl_divergence(u, D.Uniform(lo - 1, hi + 1))])
    check_like_torch(fn, None, arrays=arrays)


def test_distribution_errors_shapes_and_reprs_like_torch():
    torch = _torch()
    # validate_args=True: importing torch._dynamo (any earlier torch.compile / torch.func
    # use) turns PyTorch's default validation off for the whole process
    on = dict(validate_args=True)
    raises_like(lambda m: m.distributions.Normal(m.zeros(2), m.tensor([1.0, -1.0]), **on))
    raises_like(lambda m: m.distributions.Bernoulli(probs=m.tensor([1.5]), **on))
    raises_like(lambda m: m.distributions.Bernoulli())
    raises_like(lambda m: m.distributions.Categorical(probs=m.tensor([0.2, 0.8]),
                                                      logits=m.tensor([0.0, 1.0])))
    raises_like(lambda m: m.distributions.Bernoulli(probs=m.tensor([0.5]), **on).log_prob(
        m.tensor([0.3])))
    raises_like(lambda m: m.distributions.Categorical(logits=m.zeros(3), **on).log_prob(
        m.tensor([3])))
    raises_like(lambda m: m.distributions.kl_divergence(
        m.distributions.Normal(0.0, 1.0), m.distributions.Bernoulli(probs=m.tensor(0.5))))
    for m in (torch, tg):
        D = m.distributions
        c = D.Categorical(logits=m.zeros(2, 3))
        assert repr(c) == "Categorical(logits: torch.Size([2, 3]))"
        assert tuple(c.batch_shape) == (2,) and tuple(c.sample((4,)).shape) == (4, 2)
        assert tuple(c.param_shape) == (2, 3)
        n = D.Normal(0.0, 1.0)
        assert tuple(n.batch_shape) == () and n.sample().dtype == m.float32
        assert n.log_prob(m.tensor(0.5)).dtype == m.float32
        assert D.Normal(m.zeros(2, dtype=m.float64), 1.0).sample().dtype == m.float64
        assert repr(D.Bernoulli(probs=m.tensor([0.3]))) == "Bernoulli(probs: tensor([0.3000]))"
        assert not D.Normal(m.zeros(2), m.ones(2), validate_args=False).has_rsample is False


def test_sampling_statistics_and_rsample_gradient():
    D = tg.distributions
    tg.manual_seed(0)
    loc = tg.tensor([1.0, -2.0], requires_grad=True)
    scale = tg.tensor([0.5, 2.0], requires_grad=True)
    s = D.Normal(loc, scale).rsample((4000,))
    np.testing.assert_allclose(_np(s.mean(0)), [1.0, -2.0], atol=0.1)
    np.testing.assert_allclose(_np(s.std(0)), [0.5, 2.0], rtol=0.06)
    s.mean().backward()
    np.testing.assert_allclose(_np(loc.grad), [0.5, 0.5], rtol=1e-4)
    b = D.Bernoulli(probs=tg.tensor([0.2, 0.9])).sample((4000,))
    np.testing.assert_allclose(_np(b.mean(0)), [0.2, 0.9], atol=0.03)
    c = D.Categorical(probs=tg.tensor([0.1, 0.6, 0.3])).sample((4000,))
    np.testing.assert_allclose(_np(tg.bincount(c, minlength=3)) / 4000, [0.1, 0.6, 0.3],
                               atol=0.03)
    u = D.Uniform(tg.tensor(2.0), tg.tensor(4.0)).sample((1000,))
    assert float(u.min()) >= 2.0 and float(u.max()) < 4.0


def test_policy_gradient_step_compiles_and_samples_anew_each_call():
    D = tg.distributions
    tg.manual_seed(0)
    w = tg.zeros(3, 4, requires_grad=True)
    x = tg.randn(8, 3)

    def step(x):
        pol = D.Categorical(logits=x @ w)
        a = pol.sample()
        loss = -(pol.log_prob(a) * (a == 2).float()).mean()
        loss.backward()
        return a
    f = tg.compile(step)
    draws = [f(x).tolist() for _ in range(4)]
    assert len({tuple(d) for d in draws}) > 1             # a fresh draw per call
    assert f.stats.eager_calls == 0 and f.stats.traces <= 2


def test_bernoulli_and_normal_functions_like_torch():
    torch = _torch()
    for m in (torch, tg):
        assert m.bernoulli(m.tensor([0.0, 1.0])).tolist() == [0.0, 1.0]
        assert m.tensor([1.0, 0.0], dtype=m.float64).bernoulli().dtype == m.float64
        assert tuple(m.normal(m.zeros(3), m.ones(2, 1)).shape) == (2, 3)
        assert m.normal(m.zeros(3, dtype=m.float64), 1.0).dtype == m.float64
        assert tuple(m.normal(0.0, m.ones(2)).shape) == (2,)
    raises_like(lambda m: m.bernoulli(m.tensor([2.0])))
    tg.manual_seed(0)
    assert abs(float(tg.bernoulli(tg.full((4000,), 0.25)).mean()) - 0.25) < 0.03


# ---------------- conv_transpose2d / ConvTranspose2d ----------------
@pytest.mark.parametrize("kw", [dict(), dict(stride=2, padding=1, output_padding=1),
                                dict(groups=2, stride=(2, 1), dilation=2)])
def test_conv_transpose2d_like_torch(kw):
    g = kw.get("groups", 1)
    check_like_torch(lambda m, x, w, b: m.nn.functional.conv_transpose2d(x, w, b, **kw),
                     [(2, 4, 3, 4), (4, 3, 3, 2), (3 * g,)], jax="stride" in kw and g == 1)


def test_conv_transpose2d_unbatched_module_output_size_repr_and_errors():
    torch = _torch()
    x = np.random.default_rng(0).standard_normal((2, 3, 3)).astype("float32")
    outs = []
    for m in (torch, tg):
        mod = _same_module(m, lambda nn: nn.ConvTranspose2d(2, 4, 3, stride=2, padding=1),
                           "float32")
        outs.append([_np(mod(m.tensor(x))), _np(mod(m.tensor(x)[None], output_size=(6, 6)))])
        assert repr(mod) == "ConvTranspose2d(2, 4, kernel_size=(3, 3), stride=(2, 2), " \
            "padding=(1, 1))"
    for a, b in zip(*outs):
        np.testing.assert_allclose(b, a, rtol=1e-5, atol=1e-6)
    kw = dict(stride=2, padding=1, output_padding=1, groups=2, bias=False, dilation=2)
    assert repr(tg.nn.ConvTranspose2d(4, 6, 3, **kw)) == repr(torch.nn.ConvTranspose2d(4, 6, 3,
                                                                                        **kw))
    raises_like(lambda m: m.nn.functional.conv_transpose2d(m.zeros(1, 3, 4, 4),
                                                           m.zeros(2, 3, 3, 3)))
    raises_like(lambda m: m.nn.functional.conv_transpose2d(m.zeros(1, 2, 4, 4),
                                                           m.zeros(2, 3, 3, 3),
                                                           output_padding=1))
    raises_like(lambda m: m.nn.ConvTranspose2d(2, 4, 3, padding_mode="reflect"))
    raises_like(lambda m: m.nn.ConvTranspose2d(2, 4, 3, stride=2)(m.zeros(1, 2, 3, 3),
                                                                  output_size=(9, 9)))


# ---------------- Unflatten, trunc, normal_ / uniform_ ----------------
def test_unflatten_like_torch():
    check_like_torch(lambda m, x: m.nn.Unflatten(1, (2, -1))(x).unflatten(2, (3, 1)),
                     [(2, 6, 2)])
    assert repr(tg.nn.Unflatten(1, (2, 3))) == repr(_torch().nn.Unflatten(1, (2, 3)))
    raises_like(lambda m: m.zeros(2, 6).unflatten(1, (4, 2)))
    raises_like(lambda m: m.zeros(2, 6).unflatten(2, (3, 2)))


def test_trunc_like_torch():
    check_like_torch(lambda m, x: m.trunc(x * 3) + x.trunc() * x, [(3, 4)], gradcheck=False)
    torch = _torch()
    for m in (torch, tg):
        assert m.trunc(m.tensor([-7, 7])).tolist() == [-7, 7]
        assert m.tensor([-1.5, 2.5]).trunc().tolist() == [-1.0, 2.0]


def test_normal_and_uniform_fill_in_place_like_torch():
    torch = _torch()
    for m in (torch, tg):
        w = m.zeros(2000, requires_grad=True)
        with pytest.raises(RuntimeError):
            w.normal_()
        w.data.normal_(1.0, 0.02)
        assert abs(float(w.detach().mean()) - 1.0) < 0.01
        assert 0.018 < float(w.detach().std()) < 0.022
        u = m.empty(2000, dtype=m.float64).uniform_(-2, 3)
        assert u.dtype == m.float64 and float(u.min()) >= -2 and float(u.max()) < 3
        u2 = m.empty(100).uniform_(**{"from": 5, "to": 6})
        assert float(u2.min()) >= 5 and float(u2.max()) < 6
        with m.no_grad():
            w.uniform_()
        assert float(w.detach().max()) < 1


@pytest.mark.parametrize("mode", ["reflect", "replicate", "circular"])
@pytest.mark.parametrize("kw", [dict(padding=1), dict(padding=(2, 1), stride=2),
                                dict(padding="same", dilation=(1, 2))])
def test_conv2d_module_padding_modes_like_torch(mode, kw):
    mods = {}

    def fn(m, x):
        key = (m.__name__, str(x.dtype))
        if key not in mods:
            mods[key] = _same_module(m, lambda nn: nn.Conv2d(2, 3, 3, padding_mode=mode, **kw),
                                     str(x.dtype).split(".")[-1])
        return mods[key](x)
    check_like_torch(fn, [(2, 2, 5, 6)], jax=False, gradcheck=kw.get("stride") == 2)
    assert repr(tg.nn.Conv2d(2, 3, 3, padding_mode=mode, **kw)) == \
        repr(_torch().nn.Conv2d(2, 3, 3, padding_mode=mode, **kw))
