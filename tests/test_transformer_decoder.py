"""`TransformerDecoderLayer`, `TransformerDecoder` and the encoder-decoder `Transformer`
against PyTorch with copied weights: values and input gradients (float32 and float64),
parameter gradients, float64 finite differences, compiled == eager (numpy and JAX), masks
(causal, padding, memory), `norm_first`, `batch_first`, activations, repr, state_dict keys,
errors; and a seq2seq model trained 5 steps with AdamW, the whole step compiled, with the
losses PyTorch computes.
"""
import numpy as np
import pytest

import tracegrad as tg
from test_ops_training_more import _np, _torch, check_like_torch, raises_like
from test_ops_real_gaps import _same_module
from test_nn_layers3 import compare_param_grads, same_repr_and_keys


def _dt(x):
    return str(x.dtype).split(".")[-1]


def _act(m, name):
    return {"relu": "relu", "gelu": "gelu", "callable": m.nn.functional.silu,
            "default": None}[name]


DEC_CASES = [dict(), dict(norm_first=True, activation="gelu", batch_first=True),
             dict(batch_first=True, activation="callable", bias=False)]


def _layer_kwargs(m, kw):
    kw = dict(kw)
    if "activation" in kw:
        kw["activation"] = _act(m, kw["activation"])
    return kw


def _masks(m, masks, bf, dtype, t_len=4, s_len=5):
    if masks == "none":
        return {}
    if masks == "causal":
        return dict(tgt_mask=m.nn.Transformer.generate_square_subsequent_mask(t_len,
                                                                              dtype=dtype),
                    tgt_is_causal=True)
    tgt_pad = m.tensor([[False, False, False, True], [False, False, True, True]])
    mem_pad = m.tensor([[False, False, False, False, True], [False, True, False, False, True]])
    mem_mask = m.zeros(t_len, s_len, dtype=dtype)
    mem_mask[0, 1] = float("-inf")
    return dict(tgt_key_padding_mask=tgt_pad, memory_key_padding_mask=mem_pad,
                memory_mask=mem_mask)


@pytest.mark.parametrize("kw", DEC_CASES)
@pytest.mark.parametrize("masks", ["none", "causal", "padding"])
def test_decoder_layer_like_torch(kw, masks):
    bf = kw.get("batch_first", False)
    mods = {}

    def fn(m, tgt, memory):
        key = (m.__name__, _dt(tgt))
        if key not in mods:
            mods[key] = _same_module(m, lambda nn: nn.TransformerDecoderLayer(
                8, 2, dim_feedforward=12, dropout=0.0, **_layer_kwargs(m, kw)), key[1])
        return mods[key](tgt, memory, **_masks(m, masks, bf, tgt.dtype))
    shapes = [(2, 4, 8), (2, 5, 8)] if bf else [(4, 2, 8), (5, 2, 8)]
    check_like_torch(fn, shapes, gradcheck=masks == "none",
                     jax=masks == "causal" and bf)
    if masks == "padding":
        compare_param_grads(lambda nn: nn.TransformerDecoderLayer(
            8, 2, dim_feedforward=12, dropout=0.0, **_layer_kwargs(
                tg if nn is tg.nn else _torch(), kw)),
            shapes, call=lambda mod, t, mem: mod(t, mem, **_masks(
                tg if isinstance(t, tg.Tensor) else _torch(), masks, bf, t.dtype)))


def test_decoder_layer_repr_keys_and_unbatched():
    torch = _torch()
    make = lambda nn: nn.TransformerDecoderLayer(8, 2, 16)         # noqa: E731
    tm, gm = same_repr_and_keys(make)
    assert [n for n, _ in gm.named_parameters()] == [n for n, _ in tm.named_parameters()]
    check_like_torch(lambda m, t, mem: _same_module(m, lambda nn: nn.TransformerDecoderLayer(
        8, 2, 12, dropout=0.0), _dt(t))(t, mem), [(4, 8), (5, 8)], compiled=False, jax=False,
        gradcheck=False)
    raises_like(lambda m: m.nn.TransformerDecoderLayer(8, 2, activation="tanh"))
    raises_like(lambda m: m.nn.TransformerDecoderLayer(8, 3))
    x = np.zeros((4, 2, 8))
    raises_like(lambda m: m.nn.TransformerDecoderLayer(8, 2)(m.tensor(x), m.tensor(x[:, :, :6])))
    assert torch.nn.TransformerDecoderLayer(8, 2).norm_first is False


def test_decoder_stack_detects_a_causal_mask_and_copies_layers():
    torch = _torch()
    rng = np.random.default_rng(0)
    t, mem = rng.standard_normal((2, 5, 8)), rng.standard_normal((2, 6, 8))
    outs = {}
    for m in (torch, tg):
        def make(nn):
            layer = nn.TransformerDecoderLayer(8, 2, 16, dropout=0.1, batch_first=True)
            return nn.TransformerDecoder(layer, num_layers=2, norm=nn.LayerNorm(8))
        dec = _same_module(m, make, "float64").eval()
        mask = m.nn.Transformer.generate_square_subsequent_mask(5, dtype=m.float64)
        outs[m.__name__] = [_np(dec(m.tensor(t), m.tensor(mem))),
                            _np(dec(m.tensor(t), m.tensor(mem), tgt_mask=mask))]
        assert repr(dec).count("TransformerDecoderLayer") == 1      # "(0-1): 2 x ..."
    for a, b in zip(outs["tracegrad"], outs["torch"]):
        np.testing.assert_allclose(a, b, rtol=1e-9, atol=1e-10)
    layer = tg.nn.TransformerDecoderLayer(8, 2)
    dec = tg.nn.TransformerDecoder(layer, 3)
    assert dec.layers[0] is not layer and dec.layers[0].linear1.weight is not \
        dec.layers[1].linear1.weight
    assert repr(dec) == repr(torch.nn.TransformerDecoder(torch.nn.TransformerDecoderLayer(8, 2),
                                                          3))


# ---------------- the full Transformer ----------------
TF_CASES = [dict(), dict(batch_first=True, norm_first=True, activation="gelu")]


@pytest.mark.parametrize("kw", TF_CASES)
def test_transformer_like_torch_with_masks(kw):
    bf = kw.get("batch_first", False)
    mods = {}

    def make(m):
        return lambda nn: nn.Transformer(8, 2, 2, 2, 12, dropout=0.0, **kw)

    def fn(m, src, tgt):
        key = (m.__name__, _dt(src))
        if key not in mods:
            mods[key] = _same_module(m, make(m), key[1])
        mask = m.nn.Transformer.generate_square_subsequent_mask(4, dtype=src.dtype)
        src_pad = m.tensor([[False] * 5, [False, False, False, True, True]])
        return mods[key](src, tgt, tgt_mask=mask, src_key_padding_mask=src_pad,
                         memory_key_padding_mask=src_pad)
    shapes = [(2, 5, 8), (2, 4, 8)] if bf else [(5, 2, 8), (4, 2, 8)]
    check_like_torch(fn, shapes, gradcheck=False, jax=False)   # JAX: the decoder layer's test
    compare_param_grads(make(None), shapes)


def test_transformer_repr_state_dict_init_and_errors():
    torch = _torch()
    tm, gm = same_repr_and_keys(lambda nn: nn.Transformer(8, 2, 2, 1, 16))
    # PyTorch's init: xavier-uniform on every matrix (bound sqrt(6 / (fan_in + fan_out)))
    w = gm.decoder.layers[0].linear1.weight
    assert float(w.abs().max()) <= (6 / (8 + 16)) ** 0.5
    assert float(gm.encoder.layers[0].self_attn.in_proj_bias.abs().max()) == 0.0
    assert gm.d_model == 8 and gm.nhead == 2 and gm.batch_first is False
    src = np.zeros((5, 2, 8))
    te, ge = raises_like(lambda m: m.nn.Transformer(8, 2, 1, 1, 16)(
        m.tensor(src), m.tensor(np.zeros((4, 3, 8)))))
    assert str(te) in str(ge)
    te, ge = raises_like(lambda m: m.nn.Transformer(8, 2, 1, 1, 16)(
        m.tensor(src), m.tensor(np.zeros((4, 2, 6)))))
    assert str(te) in str(ge)
    custom = tg.nn.Linear(2, 2)
    assert tg.nn.Transformer(8, 2, 1, 1, 16, custom_decoder=custom).decoder is custom
    # unbatched (S, E) input
    check_like_torch(lambda m, s, t: _same_module(m, lambda nn: nn.Transformer(
        8, 2, 1, 1, 12, dropout=0.0), _dt(s))(s, t), [(5, 8), (4, 8)], gradcheck=False,
        compiled=False, jax=False)
    assert torch is not None


def test_transformer_gradcheck_float64():
    m = tg.nn.Transformer(4, 2, 1, 1, 6, dropout=0.0).double()
    rng = np.random.default_rng(0)
    src = tg.tensor(rng.standard_normal((3, 2, 4)), requires_grad=True)
    tgt = tg.tensor(rng.standard_normal((2, 2, 4)), requires_grad=True)
    mask = tg.nn.Transformer.generate_square_subsequent_mask(2, dtype=tg.float64)
    assert tg.autograd.gradcheck(lambda s, t: m(s, t, tgt_mask=mask), [src, tgt])


# ---------------- a seq2seq model trained with the whole step compiled ----------------
def _seq2seq(m, dtype, vocab=11, d=16):
    nn = m.nn

    class Seq2Seq(nn.Module):
        def __init__(self):
            super().__init__()
            self.src_emb, self.tgt_emb = nn.Embedding(vocab, d), nn.Embedding(vocab, d)
            self.pos = nn.Parameter(m.zeros(1, 8, d, dtype=getattr(m, dtype)))
            self.transformer = nn.Transformer(d, 2, 1, 1, 32, dropout=0.0, batch_first=True)
            self.head = nn.Linear(d, vocab)

        def forward(self, src, tgt_in):
            s = self.src_emb(src) + self.pos[:, :src.shape[1]]
            t = self.tgt_emb(tgt_in) + self.pos[:, :tgt_in.shape[1]]
            mask = nn.Transformer.generate_square_subsequent_mask(tgt_in.shape[1],
                                                                 dtype=getattr(m, dtype))
            return self.head(self.transformer(s, t, tgt_mask=mask, tgt_is_causal=True))
    return Seq2Seq()


@pytest.mark.parametrize("dtype,backend", [
    ("float64", "numpy"), ("float32", "numpy"),
    pytest.param("float64", "jax", marks=pytest.mark.slow)])
def test_seq2seq_transformer_trains_like_torch_compiled_step(dtype, backend):
    if backend == "jax":
        pytest.importorskip("jax")
    torch = _torch()
    torch.manual_seed(0)
    tmodel = _seq2seq(torch, dtype).to(getattr(torch, dtype))
    gmodel = _seq2seq(tg, dtype).to(getattr(tg, dtype))
    gmodel.load_state_dict({k: tg.tensor(v.detach().numpy().copy())
                            for k, v in tmodel.state_dict().items()})
    rng = np.random.default_rng(0)
    data = [(rng.integers(1, 11, (4, 7)), rng.integers(1, 11, (4, 6))) for _ in range(5)]
    losses = {}
    for m, model in ((torch, tmodel), (tg, gmodel)):
        opt = m.optim.AdamW(model.parameters(), lr=3e-3, weight_decay=0.01)

        def step(src, tgt):
            opt.zero_grad()
            logits = model(src, tgt[:, :-1])
            loss = m.nn.functional.cross_entropy(logits.reshape(-1, 11), tgt[:, 1:].reshape(-1))
            loss.backward()
            opt.step()
            return loss
        run = tg.compile(step, backend=backend) if m is tg else step
        losses[m.__name__] = [float(run(m.tensor(s), m.tensor(t))) for s, t in data]
        if m is tg:
            assert run.stats.traces <= 2 and run.stats.eager_calls == 0   # optimizer state
    np.testing.assert_allclose(losses["tracegrad"], losses["torch"],
                               rtol=1e-10 if dtype == "float64" else 1e-5)
    assert losses["torch"][-1] < losses["torch"][0]
    if dtype == "float32":
        return      # Adam amplifies float32 noise in the key-bias gradients (zero exactly)
    for (k, a), (_, b) in zip(gmodel.state_dict().items(), tmodel.state_dict().items()):
        np.testing.assert_allclose(_np(a), _np(b), rtol=1e-7, atol=1e-9, err_msg=k)


def test_activation_flags_and_defaults_like_torch():
    torch = _torch()
    for act in (None, "relu", "gelu", "relu_fn", "gelu_fn", "ReLU", "silu_fn"):
        got = []
        for m in (torch, tg):
            a = {None: None, "relu": "relu", "gelu": "gelu", "relu_fn": m.nn.functional.relu,
                 "gelu_fn": m.nn.functional.gelu, "ReLU": m.nn.ReLU(),
                 "silu_fn": m.nn.functional.silu}[act]
            kw = {} if a is None else dict(activation=a)
            enc = m.nn.TransformerEncoderLayer(8, 2, 16, **kw)
            dec = m.nn.TransformerDecoderLayer(8, 2, 16, **kw)
            got.append((enc.activation_relu_or_gelu, repr(enc) == repr(enc), repr(dec)))
        assert got[0] == got[1], act
    assert tg.nn.Transformer(8, 2, 1, 1, 16).encoder.layers[0].activation_relu_or_gelu == 1
