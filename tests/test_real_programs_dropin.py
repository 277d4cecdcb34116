"""Real PyTorch programs as drop-ins: each program is a function `run(torch, ...)` written the
way tutorials and research code write it, run once with PyTorch (the oracle), once with
`tracegrad` eagerly and once with its training step under `tracegrad.compile`; losses per
step, final parameters and gradients must agree at float tolerance.

Both libraries start from the same weights (PyTorch's initial `state_dict`, copied) and see
the same data (numpy arrays). Randomness the two libraries draw differently (dropout masks,
`randn_like`, `sample`) is either switched off for the comparison (`p=0`) or injected as an
argument, and exercised on its own for shapes and eager == compiled.
"""
import numpy as np
import pytest

import tracegrad as tg

torch_ = pytest.importorskip("torch")

TOL = {"float32": dict(rtol=2e-4, atol=2e-5), "float64": dict(rtol=1e-9, atol=1e-10)}

# float32 is what the programs train in; float64 (bit-level agreement at higher
# precision) runs with `-m slow`, keeping the default suite within its budget
DTYPES = ["float32", pytest.param("float64", marks=pytest.mark.slow)]


def _np(t):
    return t.detach().numpy() if hasattr(t, "detach") else np.asarray(t)


def copy_state(src, dst):
    """Load torch module `src`'s state into tracegrad module `dst` (same names)."""
    dst.load_state_dict({k: tg.tensor(v.detach().numpy().copy())
                         for k, v in src.state_dict().items()})


def compare(ref, got, dtype, what=""):
    """`ref` and `got`: dicts of name -> array-like (or lists of them)."""
    assert ref.keys() == got.keys(), (what, ref.keys() ^ got.keys())
    for k in ref:
        np.testing.assert_allclose(np.asarray(got[k], dtype=float),
                                   np.asarray(ref[k], dtype=float),
                                   err_msg=f"{what} {k}", **TOL[dtype])


def snapshot(model, losses, extra=None):
    out = {"loss": [float(v) for v in losses]}
    for n, p in model.named_parameters():
        out["param " + n] = _np(p)
        if p.grad is not None:
            out["grad " + n] = _np(p.grad)
    for n, b in model.named_buffers():
        out["buffer " + n] = _np(b)
    out.update(extra or {})
    return out


def three_ways(program, dtype, **kw):
    """Run `program(m, dtype, compiled, **kw)` on torch, tracegrad eager, tracegrad compiled
    and compare all against torch."""
    ref = program(torch_, dtype, False, **kw)
    eager = program(tg, dtype, False, **kw)
    compare(ref, eager, dtype, "eager")
    comp = program(tg, dtype, True, **kw)
    compare(ref, comp, dtype, "compiled")
    return ref


def _dt(m, dtype):
    return getattr(m, dtype)


def _seed_torch():
    torch_.manual_seed(0)


def _build(m, make, dtype):
    """The model made by `make(m)`, with torch's initial weights in both libraries."""
    _seed_torch()
    tmodel = make(torch_).to(_dt(torch_, dtype))
    if m is torch_:
        return tmodel
    model = make(m).to(_dt(m, dtype))
    copy_state(tmodel, model)
    return model


# ------------------------------------------------------------------------------------------
# 1. a small CNN classifier: conv / batch norm / pooling / dropout, label smoothing, SGD then
#    Adam, then eval() accuracy under no_grad
# ------------------------------------------------------------------------------------------
def make_cnn(torch, p_drop=0.0):
    # Note: convolutions before a BatchNorm have no bias, as in ResNet: such a bias's gradient
    # is rounding noise (the norm removes it), which Adam amplifies to a different step in
    # each library.
    nn = torch.nn
    return nn.Sequential(
        nn.Conv2d(1, 4, 3, padding=1, bias=False), nn.BatchNorm2d(4), nn.ReLU(), nn.MaxPool2d(2),
        nn.Conv2d(4, 8, 3, padding="same", bias=False), nn.BatchNorm2d(8), nn.ReLU(),
        nn.MaxPool2d(2), nn.Dropout(p_drop), nn.Flatten(), nn.Linear(8 * 2 * 2, 16),
        nn.ReLU(), nn.Dropout(p_drop), nn.Linear(16, 3))


def cnn_program(torch, dtype, compiled, steps=4):
    F = torch.nn.functional
    model = _build(torch, make_cnn, dtype)
    rng = np.random.default_rng(1)
    X = torch.tensor(rng.standard_normal((12, 1, 8, 8)), dtype=_dt(torch, dtype))
    Y = torch.tensor(rng.integers(0, 3, 12))
    sgd = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9, nesterov=True,
                          weight_decay=1e-4)
    adam = torch.optim.Adam(model.parameters(), lr=1e-2)

    def step(opt, x, y):
        opt.zero_grad()
        loss = F.cross_entropy(model(x), y, label_smoothing=0.1)
        loss.backward()
        opt.step()
        return loss

    if compiled:
        step = tg.compile(step)
    losses = []
    model.train()
    for k in range(steps):
        opt = sgd if k < steps // 2 else adam
        idx = slice(4 * (k % 3), 4 * (k % 3) + 4)
        losses.append(step(opt, X[idx], Y[idx]).item())
    model.eval()
    with torch.no_grad():
        logits = model(X)
        acc = (logits.argmax(dim=1) == Y).float().mean().item()
        probs = F.softmax(logits, dim=-1)
    return snapshot(model, losses, {"acc": acc, "probs": _np(probs)})


@pytest.mark.parametrize("dtype", DTYPES)
def test_cnn_classifier(dtype):
    three_ways(cnn_program, dtype)


def test_cnn_with_dropout_trains_eager_equals_compiled():
    def run(compiled):
        tg.manual_seed(0)
        model = make_cnn(tg, p_drop=0.3)
        opt = tg.optim.Adam(model.parameters(), lr=1e-2)
        x, y = tg.randn(6, 1, 8, 8), tg.tensor([0, 1, 2, 0, 1, 2])

        def step(x, y):
            opt.zero_grad()
            loss = tg.nn.functional.cross_entropy(model(x), y, label_smoothing=0.05)
            loss.backward()
            opt.step()
            return loss
        f = tg.compile(step) if compiled else step
        return [f(x, y).item() for _ in range(3)], _np(model[-1].weight)
    (le, we), (lc, wc) = run(False), run(True)
    np.testing.assert_allclose(lc, le, rtol=1e-6)
    np.testing.assert_allclose(wc, we, rtol=1e-5, atol=1e-6)


# ------------------------------------------------------------------------------------------
# 2. a char-level language model: Embedding -> 2-layer LSTM (batch_first) -> Linear, with
#    truncated BPTT (the state carried and detached), gradient clipping; then greedy sampling
# ------------------------------------------------------------------------------------------
TEXT = "hello world, hello tracegrad. the quick brown fox jumps over the lazy dog. "
VOCAB = sorted(set(TEXT))


class CharRNN:
    """A factory (so torch and tracegrad each build their own nn.Module subclass)."""

    @staticmethod
    def make(torch, cell="LSTM", hidden=12, layers=2, bidirectional=False):
        nn = torch.nn

        class Model(nn.Module):
            def __init__(self):
                super().__init__()
                self.embed = nn.Embedding(len(VOCAB), 8)
                self.rnn = getattr(nn, cell)(8, hidden, num_layers=layers, batch_first=True,
                                             bidirectional=bidirectional)
                self.head = nn.Linear(hidden * (2 if bidirectional else 1), len(VOCAB))

            def forward(self, x, state=None):
                out, state = self.rnn(self.embed(x), state)
                return self.head(out), state
        return Model()


def char_rnn_program(torch, dtype, compiled, cell="LSTM", steps=3, bidirectional=False):
    F = torch.nn.functional
    model = _build(torch, lambda m: CharRNN.make(m, cell, bidirectional=bidirectional), dtype)
    ids = torch.tensor([VOCAB.index(c) for c in TEXT])
    opt = torch.optim.Adam(model.parameters(), lr=3e-3)
    seq = 8

    def step(x, y, state):
        opt.zero_grad()
        logits, state = model(x, state)
        loss = F.cross_entropy(logits.reshape(-1, logits.size(-1)), y.reshape(-1))
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        return loss, state

    if compiled:
        step = tg.compile(step)
    state, losses = None, []
    for k in range(steps):
        chunk = ids[k * seq: k * seq + 2 * seq + 1]
        x = torch.stack([chunk[:seq], chunk[seq:2 * seq]])
        y = torch.stack([chunk[1:seq + 1], chunk[seq + 1:2 * seq + 1]])
        loss, state = step(x, y, state)
        state = (tuple(s.detach() for s in state) if isinstance(state, tuple)
                 else state.detach())
        losses.append(loss.item())
    with torch.no_grad():                       # greedy generation, one char at a time
        x, st, out = ids[:1].view(1, 1), None, []
        for _ in range(6):
            logits, st = model(x, st)
            x = logits[:, -1].argmax(-1, keepdim=True)
            out.append(int(x))
    return snapshot(model, losses, {"sampled": out})


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("cell", ["LSTM", "GRU", "RNN"])
def test_char_rnn_language_model(cell, dtype):
    three_ways(char_rnn_program, dtype, cell=cell)


def test_char_rnn_bidirectional_lstm():
    three_ways(char_rnn_program, "float64", cell="LSTM", steps=2, bidirectional=True)


# ------------------------------------------------------------------------------------------
# 3. a 1-D conv net for sequences: Conv1d with padding modes, pooling, interpolate
# ------------------------------------------------------------------------------------------
def make_conv1d(torch):
    nn = torch.nn

    class Net(nn.Module):
        def __init__(self):
            super().__init__()
            self.c1 = nn.Conv1d(2, 6, 5, padding=2, padding_mode="reflect")
            self.c2 = nn.Conv1d(6, 6, 3, padding="same", padding_mode="circular", dilation=2)
            self.c3 = nn.Conv1d(6, 4, 3, stride=2, padding=1)
            self.pool = nn.MaxPool1d(2)
            self.fc = nn.Linear(4, 1)

        def forward(self, x):
            F = torch.nn.functional
            h = F.relu(self.c1(x))
            h = self.pool(h)
            h = F.gelu(self.c2(h)) + h
            h = F.interpolate(h, scale_factor=2, mode="linear", align_corners=False)
            h = F.avg_pool1d(torch.tanh(self.c3(h)), kernel_size=2)
            h = F.interpolate(h, size=7, mode="nearest")
            return self.fc(h.mean(dim=-1)).squeeze(-1)
    return Net()


def conv1d_program(torch, dtype, compiled, steps=3):
    F = torch.nn.functional
    model = _build(torch, make_conv1d, dtype)
    rng = np.random.default_rng(3)
    X = torch.tensor(rng.standard_normal((5, 2, 16)), dtype=_dt(torch, dtype))
    Y = torch.tensor(rng.standard_normal(5), dtype=_dt(torch, dtype))
    opt = torch.optim.AdamW(model.parameters(), lr=1e-2, weight_decay=0.01)

    def step(x, y):
        opt.zero_grad()
        loss = F.mse_loss(model(x), y)
        loss.backward()
        opt.step()
        return loss

    if compiled:
        step = tg.compile(step)
    losses = [step(X, Y).item() for _ in range(steps)]
    return snapshot(model, losses)


@pytest.mark.parametrize("dtype", DTYPES)
def test_conv1d_sequence_regressor(dtype):
    three_ways(conv1d_program, dtype)


# ------------------------------------------------------------------------------------------
# 4. a tiny causal transformer: Embedding + learned positions, hand-written attention with a
#    triu mask and masked_fill, then nn.TransformerEncoderLayer (norm_first, gelu)
# ------------------------------------------------------------------------------------------
def make_gpt(torch, d=16, heads=2, vocab=11, ctx=8):
    nn, F = torch.nn, torch.nn.functional

    class Block(nn.Module):
        def __init__(self):
            super().__init__()
            self.ln1, self.ln2 = nn.LayerNorm(d), nn.LayerNorm(d)
            # no qkv bias (as LLaMA): a key bias's gradient is rounding noise (softmax
            # ignores a per-query shift) that Adam would amplify differently per library
            self.qkv, self.proj = nn.Linear(d, 3 * d, bias=False), nn.Linear(d, d)
            self.mlp = nn.Sequential(nn.Linear(d, 4 * d), nn.GELU(), nn.Linear(4 * d, d))

        def forward(self, x):
            B, T, C = x.shape
            q, k, v = self.qkv(self.ln1(x)).split(C, dim=2)
            q, k, v = (t.view(B, T, heads, C // heads).transpose(1, 2) for t in (q, k, v))
            att = (q @ k.transpose(-2, -1)) / (k.size(-1) ** 0.5)
            mask = torch.triu(torch.ones(T, T, dtype=torch.bool), diagonal=1)
            att = F.softmax(att.masked_fill(mask, float("-inf")), dim=-1)
            y = (att @ v).transpose(1, 2).contiguous().view(B, T, C)
            x = x + self.proj(y)
            return x + self.mlp(self.ln2(x))

    class GPT(nn.Module):
        def __init__(self):
            super().__init__()
            self.tok = nn.Embedding(vocab, d)
            self.pos = nn.Parameter(torch.zeros(1, ctx, d))
            self.block = Block()
            self.layer = nn.TransformerEncoderLayer(d, heads, dim_feedforward=32, dropout=0.0,
                                                    activation="gelu", batch_first=True,
                                                    norm_first=True)
            self.ln = nn.LayerNorm(d)
            self.head = nn.Linear(d, vocab, bias=False)

        def forward(self, idx):
            T = idx.size(1)
            x = self.block(self.tok(idx) + self.pos[:, :T])
            causal = nn.Transformer.generate_square_subsequent_mask(T)
            x = self.layer(x, src_mask=causal.to(x.dtype), is_causal=True)
            return self.head(self.ln(x))
    return GPT()


def gpt_program(torch, dtype, compiled, steps=3):
    F = torch.nn.functional
    model = _build(torch, make_gpt, dtype)
    rng = np.random.default_rng(4)
    data = torch.tensor(rng.integers(0, 11, (3, 9)))
    opt = torch.optim.AdamW(model.parameters(), lr=3e-3, betas=(0.9, 0.95))

    def step(idx):
        logits = model(idx[:, :-1])
        loss = F.cross_entropy(logits.view(-1, logits.size(-1)), idx[:, 1:].reshape(-1))
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()
        return loss

    if compiled:
        step = tg.compile(step)
    losses = [step(data).item() for _ in range(steps)]
    model.eval()
    with torch.no_grad():
        top = torch.topk(F.softmax(model(data[:1, :5])[0, -1], -1), 3)
    out = snapshot(model, losses, {"topv": _np(top.values), "topi": _np(top.indices)})
    if dtype == "float32":      # the key part of in_proj_bias: see the Note in Block
        for k in ("param layer.self_attn.in_proj_bias", "grad layer.self_attn.in_proj_bias"):
            out[k] = np.delete(out[k], np.s_[16:32])
    return out


@pytest.mark.parametrize("dtype", DTYPES)
def test_tiny_causal_transformer(dtype):
    three_ways(gpt_program, dtype)


# ------------------------------------------------------------------------------------------
# 5. a VAE: reparameterization (noise injected for the comparison), BCE-with-logits summed,
#    KL term
# ------------------------------------------------------------------------------------------
def make_vae(torch):
    nn, F = torch.nn, torch.nn.functional

    class VAE(nn.Module):
        def __init__(self):
            super().__init__()
            self.enc = nn.Linear(12, 10)
            self.mu, self.logvar = nn.Linear(10, 3), nn.Linear(10, 3)
            self.dec = nn.Sequential(nn.Linear(3, 10), nn.ReLU(), nn.Linear(10, 12))

        def reparameterize(self, mu, logvar, eps=None):
            std = torch.exp(0.5 * logvar)
            eps = torch.randn_like(std) if eps is None else eps
            return mu + eps * std

        def forward(self, x, eps=None):
            h = F.relu(self.enc(x))
            mu, logvar = self.mu(h), self.logvar(h)
            return self.dec(self.reparameterize(mu, logvar, eps)), mu, logvar
    return VAE()


def vae_loss(torch, logits, x, mu, logvar):
    F = torch.nn.functional
    bce = F.binary_cross_entropy_with_logits(logits, x, reduction="sum")
    bce2 = F.binary_cross_entropy(torch.sigmoid(logits), x, reduction="sum")
    kld = -0.5 * torch.sum(1 + logvar - mu.pow(2) - logvar.exp())
    return (bce + bce2) / 2 + kld


def vae_program(torch, dtype, compiled, steps=3):
    model = _build(torch, make_vae, dtype)
    rng = np.random.default_rng(5)
    X = torch.tensor((rng.random((6, 12)) > 0.5).astype(np.float64), dtype=_dt(torch, dtype))
    opt = torch.optim.Adam(model.parameters(), lr=1e-2)

    def step(x, eps):
        opt.zero_grad()
        logits, mu, logvar = model(x, eps)
        loss = vae_loss(torch, logits, x, mu, logvar)
        loss.backward()
        opt.step()
        return loss

    if compiled:
        step = tg.compile(step)
    losses = []
    for k in range(steps):
        eps = torch.tensor(rng.standard_normal((6, 3)), dtype=_dt(torch, dtype))
        losses.append(step(X, eps).item())
    return snapshot(model, losses)


@pytest.mark.parametrize("dtype", DTYPES)
def test_vae(dtype):
    three_ways(vae_program, dtype)


def test_vae_with_randn_like_eager_equals_compiled():
    def run(compiled):
        tg.manual_seed(0)
        model = make_vae(tg)
        opt = tg.optim.Adam(model.parameters(), lr=1e-2)
        x = (tg.rand(4, 12) > 0.5).float()

        def step(x):
            opt.zero_grad()
            logits, mu, logvar = model(x)         # eps = torch.randn_like(std)
            loss = vae_loss(tg, logits, x, mu, logvar)
            loss.backward()
            opt.step()
            return loss
        f = tg.compile(step) if compiled else step
        return [f(x).item() for _ in range(3)]
    np.testing.assert_allclose(run(True), run(False), rtol=1e-6)


# ------------------------------------------------------------------------------------------
# 6. a GAN step: two optimizers, .detach() of the fake batch for the discriminator
# ------------------------------------------------------------------------------------------
def make_gan(torch):
    nn = torch.nn
    G = nn.Sequential(nn.Linear(4, 16), nn.LeakyReLU(0.2), nn.Linear(16, 2))
    D = nn.Sequential(nn.Linear(2, 16), nn.LeakyReLU(0.2), nn.Linear(16, 1))
    return nn.ModuleDict({"G": G, "D": D})


def gan_program(torch, dtype, compiled, steps=3):
    nets = _build(torch, make_gan, dtype)
    G, D = nets["G"], nets["D"]
    crit = torch.nn.BCEWithLogitsLoss()
    opt_g = torch.optim.Adam(G.parameters(), lr=2e-3, betas=(0.5, 0.999))
    opt_d = torch.optim.Adam(D.parameters(), lr=2e-3, betas=(0.5, 0.999))
    rng = np.random.default_rng(6)

    def step(real, z):
        ones = torch.ones(real.size(0), 1, dtype=real.dtype)
        zeros = torch.zeros_like(ones)
        fake = G(z)
        opt_d.zero_grad()
        loss_d = crit(D(real), ones) + crit(D(fake.detach()), zeros)
        loss_d.backward()
        opt_d.step()
        opt_g.zero_grad()
        loss_g = crit(D(fake), ones)
        loss_g.backward()
        opt_g.step()
        return loss_d, loss_g

    if compiled:
        step = tg.compile(step)
    losses = []
    for _ in range(steps):
        real = torch.tensor(rng.standard_normal((8, 2)) + 2.0, dtype=_dt(torch, dtype))
        z = torch.tensor(rng.standard_normal((8, 4)), dtype=_dt(torch, dtype))
        ld, lg = step(real, z)
        losses += [ld.item(), lg.item()]
    return snapshot(nets, losses)


@pytest.mark.parametrize("dtype", DTYPES)
def test_gan(dtype):
    three_ways(gan_program, dtype)


# ------------------------------------------------------------------------------------------
# 7. regression with torch.distributions: Normal likelihood with a learned scale, Bernoulli
#    logistic regression, a Categorical policy-gradient style loss
# ------------------------------------------------------------------------------------------
def dist_program(torch, dtype, compiled, steps=4):
    D = torch.distributions
    dt = _dt(torch, dtype)
    rng = np.random.default_rng(7)
    X = torch.tensor(rng.standard_normal((16, 3)), dtype=dt)
    y = torch.tensor(rng.standard_normal(16), dtype=dt)
    b = torch.tensor((rng.random(16) > 0.5).astype(np.float64), dtype=dt)
    a = torch.tensor(rng.integers(0, 4, 16))
    w = torch.zeros(3, dtype=dt, requires_grad=True)
    log_sigma = torch.zeros((), dtype=dt, requires_grad=True)
    W = torch.tensor(rng.standard_normal((3, 4)) * 0.1, dtype=dt, requires_grad=True)
    params = [w, log_sigma, W]
    opt = torch.optim.SGD(params, lr=0.05)

    def step(X, y, b, a):
        opt.zero_grad()
        mean = X @ w
        nll = -D.Normal(mean, log_sigma.exp()).log_prob(y).mean()
        bern = D.Bernoulli(logits=mean)
        nll = nll - bern.log_prob(b).mean() - 0.1 * bern.entropy().mean()
        pol = D.Categorical(logits=X @ W)
        adv = torch.where(a % 2 == 0, 1.0, -0.5).to(X.dtype)
        loss = nll - (pol.log_prob(a) * adv).mean() - 0.01 * pol.entropy().mean()
        kl = D.kl_divergence(D.Normal(mean, torch.ones_like(mean)),
                             D.Normal(torch.zeros_like(mean), torch.ones_like(mean)))
        loss = loss + 0.01 * kl.mean()
        loss.backward()
        opt.step()
        return loss

    if compiled:
        step = tg.compile(step)
    losses = [step(X, y, b, a).item() for _ in range(steps)]
    out = {"loss": losses}
    for i, p in enumerate(params):
        out[f"p{i}"], out[f"g{i}"] = _np(p), _np(p.grad)
    probs = D.Categorical(logits=X @ W).probs
    out["probs"] = _np(probs)
    return out


@pytest.mark.parametrize("dtype", DTYPES)
def test_distributions_regression(dtype):
    three_ways(dist_program, dtype)


def test_distribution_sampling_shapes_and_rsample_gradients():
    for m in (torch_, tg):
        D = m.distributions
        m.manual_seed(0)
        mu = m.zeros(3, requires_grad=True)
        n = D.Normal(mu, m.ones(3))
        s = n.rsample((5,))
        assert tuple(s.shape) == (5, 3) and s.requires_grad
        s.sum().backward()
        np.testing.assert_allclose(_np(mu.grad), [5.0] * 3)
        assert not n.sample().requires_grad
        c = D.Categorical(probs=m.tensor([0.0, 1.0, 0.0]))
        assert c.sample((4,)).tolist() == [1, 1, 1, 1]
        bern = D.Bernoulli(probs=m.tensor([0.0, 1.0]))
        assert bern.sample().tolist() == [0.0, 1.0]
        assert tuple(n.mean.shape) == (3,) and tuple(n.stddev.shape) == (3,)


# ------------------------------------------------------------------------------------------
# 8. the tensor ops users hit in data wrangling: k-NN by topk/sort, gather, scatter_add
#    class means, cumsum, index_select, one_hot, where, fmod
# ------------------------------------------------------------------------------------------
def wrangling_program(torch, dtype, compiled):
    F = torch.nn.functional
    dt = _dt(torch, dtype)
    rng = np.random.default_rng(8)
    pts = torch.tensor(rng.standard_normal((10, 3)), dtype=dt, requires_grad=True)
    lab = torch.tensor(rng.integers(0, 3, 10))

    def prog(pts, lab):
        d2 = ((pts[:, None, :] - pts[None, :, :]) ** 2).sum(-1)
        d2 = d2 + torch.eye(10, dtype=pts.dtype) * 1e3
        vals, idx = torch.topk(d2, k=3, dim=1, largest=False)
        nn_lab = torch.gather(lab.expand(10, 10), 1, idx)
        votes = F.one_hot(nn_lab, num_classes=3).sum(1)
        sums = torch.zeros(3, 3, dtype=pts.dtype).scatter_add(
            0, lab[:, None].expand(10, 3), pts)
        counts = torch.bincount(lab, minlength=3).clamp(min=1).to(pts.dtype)
        means = sums / counts[:, None]
        s, order = torch.sort(pts[:, 0], descending=True)
        ranked = pts.index_select(0, order)
        wrapped = torch.fmod(ranked * 3.0, 1.5) + torch.remainder(ranked, 0.7)
        csum = torch.cumsum(wrapped, dim=0)
        gated = torch.where(csum > 0, csum, 0.1 * csum).where(csum.abs() < 5, csum.tanh())
        loss = gated.pow(2).mean() + vals.sqrt().sum() + means.norm() + s[:3].sum()
        return loss, votes.argmax(1)

    f = tg.compile(prog) if compiled else prog
    loss, pred = f(pts, lab)
    loss.backward()
    return {"loss": [loss.item()], "pred": _np(pred), "grad": _np(pts.grad)}


@pytest.mark.parametrize("dtype", DTYPES)
def test_tensor_wrangling(dtype):
    three_ways(wrangling_program, dtype)


# ------------------------------------------------------------------------------------------
# 9. a DCGAN-style step: ConvTranspose2d generator from a latent via Unflatten, BatchNorm,
#    strided-conv discriminator, DCGAN's weights_init with `.data.normal_`
# ------------------------------------------------------------------------------------------
def make_dcgan(torch):
    nn = torch.nn

    def weights_init(m):
        if isinstance(m, (nn.Conv2d, nn.ConvTranspose2d)):
            m.weight.data.normal_(0.0, 0.02)
        elif isinstance(m, nn.BatchNorm2d):
            m.weight.data.normal_(1.0, 0.02)
            m.bias.data.uniform_(-0.01, 0.01)

    G = nn.Sequential(nn.Linear(3, 8 * 2 * 2), nn.Unflatten(1, (8, 2, 2)),
                      nn.ConvTranspose2d(8, 4, 4, stride=2, padding=1, bias=False),
                      nn.BatchNorm2d(4), nn.ReLU(True),
                      nn.ConvTranspose2d(4, 1, 4, stride=2, padding=1, bias=False), nn.Tanh())
    D = nn.Sequential(nn.Conv2d(1, 4, 4, stride=2, padding=1, bias=False),
                      nn.LeakyReLU(0.2, inplace=True), nn.Conv2d(4, 1, 4, stride=2, padding=1),
                      nn.Flatten(), nn.Linear(4, 1))
    nets = nn.ModuleDict({"G": G, "D": D})
    nets.apply(weights_init)
    return nets


def dcgan_program(torch, dtype, compiled, steps=2):
    F = torch.nn.functional
    nets = _build(torch, make_dcgan, dtype)
    G, D = nets["G"], nets["D"]
    opt_g = torch.optim.Adam(G.parameters(), lr=2e-3, betas=(0.5, 0.999))
    opt_d = torch.optim.Adam(D.parameters(), lr=2e-3, betas=(0.5, 0.999))
    rng = np.random.default_rng(9)

    def step(real, z):
        fake = G(z)
        opt_d.zero_grad()
        d_real, d_fake = D(real), D(fake.detach())
        loss_d = F.binary_cross_entropy_with_logits(d_real, torch.ones_like(d_real)) + \
            F.binary_cross_entropy_with_logits(d_fake, torch.zeros_like(d_fake))
        loss_d.backward()
        opt_d.step()
        opt_g.zero_grad()
        out = D(fake)
        loss_g = F.binary_cross_entropy_with_logits(out, torch.ones_like(out))
        loss_g.backward()
        opt_g.step()
        return loss_d, loss_g

    if compiled:
        step = tg.compile(step)
    losses = []
    for _ in range(steps):
        real = torch.tensor(np.tanh(rng.standard_normal((4, 1, 8, 8))), dtype=_dt(torch, dtype))
        z = torch.tensor(rng.standard_normal((4, 3)), dtype=_dt(torch, dtype))
        ld, lg = step(real, z)
        losses += [ld.item(), lg.item()]
    return snapshot(nets, losses)


@pytest.mark.parametrize("dtype", DTYPES)
def test_dcgan(dtype):
    three_ways(dcgan_program, dtype)
