"""The model families people train, written as tutorials write them (sequence models with
truncated BPTT and packed batches, attention with padding masks and dropout, a VAE, a GAN
with two optimizers, a ResNet block with BatchNorm and random flips, EmbeddingBag, graph
message passing, a contrastive loss, activation checkpointing), each trained for a few
steps eagerly and compiled from the same seed; compiled must equal eager bit for bit
(numpy backend) or to float rounding (JAX): returned values, every parameter and `.grad`,
buffers, optimizer state, the RNG state, warnings and errors. A few also run against
PyTorch itself from the same weights.

The first tests are defects this review found (each fails without its fix); the
parametrised `FAMILIES` are probes that passed, kept as regression guards, with the number
of traces each is expected to need (a family that re-traced on every call would show)."""
import warnings

import numpy as np
import pytest

import tracegrad as tg
from _differential import compare as _compare

nn, F = tg.nn, tg.nn.functional
P = nn.utils.rnn
D = tg.float64


def _sgd_step(opt, loss_fn):
    def step(*args):
        opt.zero_grad()
        loss = loss_fn(*args)
        loss.backward()
        opt.step()
        return loss
    return step


# ---------------- defects found ----------------
def test_argument_none_after_a_tensor_rekeys_instead_of_crashing():
    """The last-hit key check read `a._data` before testing the argument's type: a call
    passing None where the last call passed a tensor raised AttributeError."""
    f = tg.compile(lambda x, m: x * 2 if m is None else x * m)
    x = tg.ones(2)
    outs = [f(x, m).tolist() for m in (None, tg.full((2,), 3.0), None, tg.full((2,), 3.0),
                                        None, 5, "a" if False else None)]
    assert outs == [[2.0, 2.0], [3.0, 3.0]] * 2 + [[2.0, 2.0], [5.0, 5.0], [2.0, 2.0]]
    assert f.stats.traces == 3 and f.stats.eager_calls == 0


def test_float_passed_through_star_args_is_read_per_call():
    """`def step(*batch)` with a temperature that changes every call re-traced per value
    (the *args tuple made the call non-flat, so the float stayed keyed by value) and after
    `cache_limit` values ran eagerly; it is now read per call as for `def step(x, t)`."""
    w = tg.tensor([1.0, 2.0], requires_grad=True)

    def by_name(x, t):
        return (x * w / t).sum()

    def star(*batch):
        x, t = batch
        return (x * w / t).sum()

    def rest(x, *more):
        return (x * w / more[0]).sum() + len(more)
    temps = [0.07 + 0.01 * i for i in range(12)]
    for fn, extra in ((by_name, 0), (star, 0), (rest, 1)):
        c = tg.compile(fn)
        with warnings.catch_warnings():
            warnings.simplefilter("error")
            got = [c(tg.ones(2), t).item() for t in temps]
        assert got == [fn(tg.ones(2), t).item() for t in temps]
        w.grad = None
        c(tg.ones(2), 0.5).backward()
        assert w.grad.tolist() == [2.0, 2.0]
        assert c.stats.traces == 2 and c.stats.eager_calls == 0, (fn.__name__, c.stats)
        assert "read per call" in str(c.stats.retraces[0])
    c = tg.compile(rest)                 # another number of *args: another entry
    assert [c(tg.ones(2), 0.5).item(), c(tg.ones(2), 0.5, 9.0).item()] == [7.0, 8.0]


def _mha(comp):
    mha = nn.MultiheadAttention(8, 2, dropout=0.2, batch_first=True).to(D)
    opt = tg.optim.SGD(mha.parameters(), lr=0.1)

    def loss(q, kv, pad, am):
        o, w = mha(q, kv, kv, key_padding_mask=pad, attn_mask=am)
        return o.pow(2).mean() + w.sum()
    return [comp(_sgd_step(opt, loss))], dict(mha=mha, opt=opt)


def _mha_calls(steps, objs, i):
    g = np.random.RandomState(i)
    pad = np.arange(6)[None, :] >= g.randint(3, 7, 2)[:, None]
    am = tg.tensor(g.rand(4, 6) < 0.2) if i % 2 else None     # a mask every other batch
    return steps[0](tg.tensor(g.randn(2, 4, 8)), tg.tensor(g.randn(2, 6, 8)), tg.tensor(pad), am)


def test_multihead_attention_with_an_attn_mask_every_other_batch():
    stats = _compare(_mha, _mha_calls, n=5)
    assert stats[0].traces == 3 and stats[0].eager_calls == 0


def test_index_add_matches_pytorch_values_and_gradients():
    torch = pytest.importorskip("torch")
    g = np.random.RandomState(0)
    for shape, dim, idx, sshape, alpha in (((5, 3), 0, [0, 2, 2, 4], (4, 3), 1),
                                           ((5, 3), 1, [2, 0, 2, 2], (5, 4), 2.5),
                                           ((2, 3, 4), -1, [1, 1], (2, 3, 2), -1),
                                           ((), 0, [0], (), 3), ((3,), 0, [], (0,), 1)):
        a, s, go = g.randn(*shape), g.randn(*sshape), g.randn(*shape)
        res = []
        for lib in (torch, tg):
            x = lib.tensor(a, requires_grad=True)
            src = lib.tensor(s, requires_grad=True)
            i = lib.tensor(np.array(idx, dtype=np.int64))
            y = x.index_add(dim, i, src, alpha=alpha)
            z = (x * 1).index_add_(dim, i, src, alpha=alpha)
            ((y + z) * lib.tensor(go)).sum().backward()
            res.append([t.detach().numpy() for t in (y, z, x.grad, src.grad)])
        for want, got in zip(*res):
            np.testing.assert_allclose(got, want, rtol=1e-12, atol=1e-12)
    x = tg.tensor(g.randn(3, 2), requires_grad=True)
    s = tg.tensor(g.randn(2, 2), requires_grad=True)
    fn = lambda x, s: tg.index_add(x, 0, tg.tensor([2, 2]), s, alpha=0.5) ** 2  # noqa: E731
    assert tg.autograd.gradcheck(fn, (x, s)) and tg.autograd.gradgradcheck(fn, (x, s))


@pytest.mark.parametrize("call, err, msg", [
    (lambda x: x.index_add_(0, tg.tensor([[0]]), tg.ones(1, 2)), IndexError,
     "Index is supposed to be a vector"),
    (lambda x: x.index_add_(0, tg.tensor([0.0]), tg.ones(1, 2)), RuntimeError,
     "Expected dtype int32/int64 for index but got: Float"),
    (lambda x: x.index_add_(0, tg.tensor([0]), tg.ones(1, 2, dtype=D)), RuntimeError,
     "self (Float) and source (Double) must have the same scalar type"),
    (lambda x: x.index_add_(0, tg.tensor([0, 1]), tg.ones(1, 2)), RuntimeError,
     "Number of indices (2) should be equal to source.size(dim): (1), for dim: 0"),
    (lambda x: x.index_add(0, tg.tensor([0]), tg.ones(1, 3)), RuntimeError,
     "source tensor shape must match self tensor shape"),
    (lambda x: x.index_add(0, tg.tensor([5]), tg.ones(1, 2)), RuntimeError,
     "index 5 is out of bounds for dimension 0 with size 3"),
])
def test_index_add_errors_follow_pytorch(call, err, msg):
    with pytest.raises(err, match=msg.replace("(", r"\(").replace(")", r"\)")):
        call(tg.zeros(3, 2))


# ---------------- the families (probes that passed) ----------------
def _char_rnn(cls):
    """Embedding with padding_idx, 2-layer RNN with dropout, truncated BPTT (the hidden
    state returned detached and passed back in), clip_grad_norm_, an eval pass."""
    def make(comp):
        emb = nn.Embedding(10, 6, padding_idx=0).to(D)
        r = cls(6, 8, num_layers=2, dropout=0.2, batch_first=True).to(D)
        out = nn.Linear(8, 10).to(D)
        params = list(emb.parameters()) + list(r.parameters()) + list(out.parameters())
        opt = tg.optim.SGD(params, lr=0.5, momentum=0.9)

        def step(x, y, h):
            opt.zero_grad()
            o, h = r(emb(x), h)
            loss = F.cross_entropy(out(o).reshape(-1, 10), y.reshape(-1))
            loss.backward()
            n = nn.utils.clip_grad_norm_(params, 0.5)
            opt.step()
            h = tuple(t.detach() for t in h) if isinstance(h, tuple) else h.detach()
            return loss, h, n

        def evaluate(x):
            r.eval()
            with tg.no_grad():
                res = out(r(emb(x))[0]).argmax(-1)
            r.train()
            return res
        return [comp(step), comp(evaluate)], dict(emb=emb, r=r, out=out, opt=opt, h=[None])

    def calls(steps, objs, i):
        g = np.random.RandomState(i)
        x, y = tg.tensor(g.randint(0, 10, (3, 5))), tg.tensor(g.randint(0, 10, (3, 5)))
        loss, h, n = steps[0](x, y, objs["h"][0])
        objs["h"][0] = h
        return loss, h, n, steps[1](x)
    return make, calls, [2, 1]


def _rnn_layout(cls, batch_first, bidirectional):
    def make(comp):
        r = cls(5, 4, num_layers=2, dropout=0.3, batch_first=batch_first,
                bidirectional=bidirectional).to(D)
        head = nn.Linear(8 if bidirectional else 4, 2).to(D)
        opt = tg.optim.Adam(list(r.parameters()) + list(head.parameters()), lr=0.01)

        def loss(x, y, h0):
            out, _ = r(x, h0)
            return F.mse_loss(head(out[:, -1] if batch_first else out[-1]), y)
        return [comp(_sgd_step(opt, loss))], dict(r=r, head=head, opt=opt)

    def calls(steps, objs, i):
        g = np.random.RandomState(i)
        x = g.randn(3, 4, 5) if batch_first else g.randn(4, 3, 5)
        nd = 4 if bidirectional else 2
        h0 = None if i % 2 else tg.tensor(g.randn(nd, 3, 4))
        if h0 is not None and cls is nn.LSTM:
            h0 = (h0, tg.tensor(g.randn(nd, 3, 4)))
        return steps[0](tg.tensor(x), tg.tensor(g.randn(3, 2)), h0)
    return make, calls, [3]      # h0 given (first step, later steps), h0 None


def _packed(cls, enforce_sorted):
    def make(comp):
        emb = nn.Embedding(10, 4, padding_idx=0).to(D)
        r = cls(4, 5, batch_first=True, bidirectional=True).to(D)
        head = nn.Linear(10, 2).to(D)
        opt = tg.optim.Adam([*emb.parameters(), *r.parameters(), *head.parameters()], lr=0.01)

        def loss(x, lengths, y):
            pk = P.pack_padded_sequence(emb(x), lengths, batch_first=True,
                                        enforce_sorted=enforce_sorted)
            po, h = r(pk)
            out, _ = P.pad_packed_sequence(po, batch_first=True)
            h = h[0] if isinstance(h, tuple) else h
            return F.mse_loss(head(tg.cat([h[-1], h[-2]], -1)), y) + out.pow(2).mean()
        return [comp(_sgd_step(opt, loss))], dict(emb=emb, r=r, head=head, opt=opt)

    def calls(steps, objs, i):
        g = np.random.RandomState(i % 2 + 2)   # two batches, each seen twice
        lens = g.randint(1, 6, 3).tolist()
        if enforce_sorted:
            lens.sort(reverse=True)
        x = np.zeros((3, max(lens)), dtype=np.int64)
        for b, n in enumerate(lens):
            x[b, :n] = g.randint(1, 10, n)
        return steps[0](tg.tensor(x), tg.tensor(lens), tg.tensor(g.randn(3, 2)))
    return make, calls, [3]      # per batch of lengths, plus the first step


def _encoder(causal, norm_first):
    def make(comp):
        layer = nn.TransformerEncoderLayer(8, 2, dim_feedforward=16, dropout=0.1,
                                           batch_first=True, norm_first=norm_first)
        enc = nn.TransformerEncoder(layer, 2, enable_nested_tensor=False).to(D)
        head = nn.Linear(8, 3).to(D)
        opt = tg.optim.AdamW([*enc.parameters(), *head.parameters()], lr=1e-3)

        def loss(x, pad, y):
            mask = (nn.Transformer.generate_square_subsequent_mask(x.shape[1], dtype=D)
                    if causal else None)
            h = enc(x, mask=mask, src_key_padding_mask=pad, is_causal=causal or None)
            return F.cross_entropy(head(h.mean(1)), y, label_smoothing=0.1)

        def evaluate(x, pad):
            enc.eval()
            with tg.no_grad():
                r = enc(x, src_key_padding_mask=pad)
            enc.train()
            return r
        return [comp(_sgd_step(opt, loss)), comp(evaluate)], dict(enc=enc, head=head, opt=opt)

    def calls(steps, objs, i):
        g = np.random.RandomState(i)
        x = tg.tensor(g.randn(3, 5, 8))
        pad = tg.tensor(np.arange(5)[None, :] >= g.randint(2, 6, 3)[:, None])
        return steps[0](x, pad, tg.tensor(g.randint(0, 3, 3))), steps[1](x, pad)
    return make, calls, [2, 1]


def _sdpa(causal):
    def make(comp):
        lin = nn.Linear(8, 24).to(D)
        opt = tg.optim.SGD(lin.parameters(), lr=0.01)

        def loss(x):
            q, k, v = lin(x).reshape(2, 5, 3, 2, 4).permute(2, 0, 3, 1, 4)
            o = F.scaled_dot_product_attention(q, k, v, dropout_p=0.3, is_causal=causal)
            return o.pow(2).sum()
        return [comp(_sgd_step(opt, loss))], dict(lin=lin, opt=opt)
    return make, lambda s, o, i: s[0](tg.tensor(np.random.RandomState(i).randn(2, 5, 8))), [2]


def _vae(kind):
    Dist = tg.distributions

    def make(comp):
        enc = nn.Sequential(nn.Linear(6, 8), nn.ReLU(), nn.Linear(8, 4)).to(D)
        dec = nn.Sequential(nn.Linear(2, 8), nn.ReLU(), nn.Linear(8, 6)).to(D)
        opt = tg.optim.Adam([*enc.parameters(), *dec.parameters()], lr=1e-2)

        def loss(x, beta):
            mu, logvar = enc(x).chunk(2, dim=-1)
            std = tg.exp(0.5 * logvar)
            if kind == "randn_like":
                z = mu + std * tg.randn_like(std)
                kl = -0.5 * tg.sum(1 + logvar - mu.pow(2) - logvar.exp())
            else:
                q = Dist.Normal(mu, std)
                z = q.rsample()
                kl = Dist.kl_divergence(q, Dist.Normal(tg.zeros_like(mu),
                                                       tg.ones_like(std))).sum()
            rec = F.binary_cross_entropy_with_logits(dec(z), x, reduction="sum")
            return (rec + beta * kl) / x.shape[0]

        def sample(n):
            with tg.no_grad():
                return tg.sigmoid(dec(tg.randn(n, 2, dtype=D)))
        return [comp(_sgd_step(opt, loss)), comp(sample)], dict(enc=enc, dec=dec, opt=opt)

    def calls(steps, objs, i):
        x = tg.tensor((np.random.RandomState(i).rand(4, 6) > 0.5).astype(np.float64))
        return steps[0](x, 0.1 * (i + 1)), steps[1](3)     # beta changes every call
    return make, calls, [2, 1]


def _gan():
    def make(comp):
        G = nn.Sequential(nn.Linear(3, 8), nn.LeakyReLU(0.2), nn.Linear(8, 4)).to(D)
        Dn = nn.Sequential(nn.Linear(4, 8), nn.LeakyReLU(0.2), nn.Dropout(0.3),
                           nn.Linear(8, 1)).to(D)
        oG = tg.optim.Adam(G.parameters(), lr=2e-3, betas=(0.5, 0.999))
        oD = tg.optim.Adam(Dn.parameters(), lr=2e-3, betas=(0.5, 0.999))
        crit = nn.BCEWithLogitsLoss()

        def d_step(real):
            oD.zero_grad()
            fake = G(tg.randn(real.shape[0], 3, dtype=D))
            ones = tg.ones(real.shape[0], 1, dtype=D)
            lossD = crit(Dn(real), ones * 0.9) + crit(Dn(fake.detach()), tg.zeros_like(ones))
            lossD.backward()
            oD.step()
            return lossD, fake

        def g_step(n):
            oG.zero_grad()
            lossG = crit(Dn(G(tg.randn(n, 3, dtype=D))), tg.ones(n, 1, dtype=D))
            lossG.backward()
            oG.step()
            return lossG
        return [comp(d_step), comp(g_step)], dict(G=G, Dn=Dn, oG=oG, oD=oD)

    def calls(steps, objs, i):
        return steps[0](tg.tensor(np.random.RandomState(i).randn(5, 4))), steps[1](5)
    return make, calls, [2, 2]


class _Block(nn.Module):
    def __init__(self, c, momentum):
        super().__init__()
        self.c1 = nn.Conv2d(c, c, 3, padding=1, bias=False)
        self.b1 = nn.BatchNorm2d(c, momentum=momentum)
        self.c2 = nn.Conv2d(c, c, 3, padding=1, bias=False)
        self.b2 = nn.BatchNorm2d(c, momentum=momentum)

    def forward(self, x):
        return F.relu(self.b2(self.c2(F.relu(self.b1(self.c1(x))))) + x)


class _Net(nn.Module):
    def __init__(self, momentum):
        super().__init__()
        self.stem = nn.Conv2d(2, 4, 3, padding=1)
        self.block = _Block(4, momentum)
        self.pool = nn.AdaptiveAvgPool2d((1, 1))
        self.fc = nn.Linear(4, 3)

    def forward(self, x):
        x = F.interpolate(x, scale_factor=2, mode="bilinear", align_corners=False)
        return self.fc(tg.flatten(self.pool(self.block(self.stem(x))), 1))


def _resnet(momentum):
    """BatchNorm (cumulative average when momentum=None), a flip chosen by a random draw
    (`if tg.rand(1) < 0.5`, torchvision's RandomHorizontalFlip: two paths), weight decay
    on the weights only, label smoothing, an eval pass."""
    def make(comp):
        net = _Net(momentum).to(D)
        decay = [p for p in net.parameters() if p.ndim > 1]
        rest = [p for p in net.parameters() if p.ndim == 1]
        opt = tg.optim.SGD([{"params": decay, "weight_decay": 5e-4},
                            {"params": rest, "weight_decay": 0.0}],
                           lr=0.05, momentum=0.9, nesterov=True)
        crit = nn.CrossEntropyLoss(label_smoothing=0.1)

        def step(x, y):
            if tg.rand(1) < 0.5:
                x = tg.flip(x, dims=[3])
            opt.zero_grad()
            loss = crit(net(x), y)
            loss.backward()
            opt.step()
            return loss

        def evaluate(x):
            net.eval()
            with tg.no_grad():
                r = net(x).argmax(1)
            net.train()
            return r
        return [comp(step), comp(evaluate)], dict(net=net, opt=opt)

    def calls(steps, objs, i):
        g = np.random.RandomState(i)
        x = tg.tensor(g.randn(3, 2, 4, 4))
        return steps[0](x, tg.tensor(g.randint(0, 3, 3))), steps[1](x)
    return make, calls, [3, 1]


def _bag(mode):
    def make(comp):
        bag = nn.EmbeddingBag(10, 4, mode=mode).to(D)
        fc = nn.Linear(4, 2).to(D)
        opt = tg.optim.Adagrad([*bag.parameters(), *fc.parameters()], lr=0.1)
        loss = lambda text, offsets, y: F.cross_entropy(fc(bag(text, offsets)), y)  # noqa: E731
        return [comp(_sgd_step(opt, loss))], dict(bag=bag, fc=fc, opt=opt)

    def calls(steps, objs, i):
        g = np.random.RandomState(i % 2 + 2)   # two batches of different lengths, twice
        lens = g.randint(1, 4, 3)
        offsets = np.concatenate([[0], np.cumsum(lens)[:-1]])
        return steps[0](tg.tensor(g.randint(0, 10, int(lens.sum()))), tg.tensor(offsets),
                        tg.tensor(g.randint(0, 2, 3)))
    return make, calls, [3]


def _gnn(kind):
    """Message passing over an edge list whose length changes between batches."""
    def make(comp):
        lin, msg, out = (nn.Linear(4, 4).to(D), nn.Linear(4, 4).to(D),
                         nn.Linear(4, 1).to(D))
        opt = tg.optim.RMSprop([*lin.parameters(), *msg.parameters(), *out.parameters()],
                               lr=0.01)

        def loss(x, src, dst, y):
            h = lin(x)
            m = msg(h[src])
            if kind == "index_add_":
                agg = tg.zeros_like(h).index_add_(0, dst, m)
            else:
                agg = tg.zeros_like(h).scatter_add_(0, dst.unsqueeze(1).expand(-1, 4), m)
            deg = tg.zeros(x.shape[0], dtype=D).index_add(0, dst, tg.ones(dst.shape[0],
                                                                          dtype=D))
            h = F.relu(h + agg / deg.clamp(min=1).unsqueeze(1))
            return F.mse_loss(out(h).squeeze(1), y)
        return [comp(_sgd_step(opt, loss))], dict(lin=lin, msg=msg, out=out, opt=opt)

    def calls(steps, objs, i):
        g = np.random.RandomState(i)
        E = 5 + i % 2
        return steps[0](tg.tensor(g.randn(6, 4)), tg.tensor(g.randint(0, 6, E)),
                        tg.tensor(g.randint(0, 6, E)), tg.tensor(g.randn(6)))
    return make, calls, [3]


def _contrastive():
    def make(comp):
        enc = nn.Sequential(nn.Linear(5, 8), nn.ReLU(), nn.Dropout(0.1),
                            nn.Linear(8, 4)).to(D)
        opt = tg.optim.SGD(enc.parameters(), lr=0.1, momentum=0.9, weight_decay=1e-4)

        def loss(a, b, temperature):
            za, zb = F.normalize(enc(a), dim=1), F.normalize(enc(b), dim=1)
            logits = za @ zb.T / temperature
            labels = tg.arange(a.shape[0])
            return (F.cross_entropy(logits, labels) + F.cross_entropy(logits.T, labels)) / 2
        return [comp(_sgd_step(opt, loss))], dict(enc=enc, opt=opt)

    def calls(steps, objs, i):
        g = np.random.RandomState(i)
        return steps[0](tg.tensor(g.randn(4, 5)), tg.tensor(g.randn(4, 5)), 0.07 + 0.01 * i)
    return make, calls, [2]      # the temperature is read per call, never a re-trace


def _learned_initial_state():
    """An LSTM whose initial (h, c) are parameters expanded to the batch (which changes)."""
    def make(comp):
        r = nn.LSTM(3, 4, batch_first=True).to(D)
        holder = nn.Module()
        holder.h0 = nn.Parameter(tg.zeros(1, 1, 4, dtype=D))
        holder.c0 = nn.Parameter(tg.zeros(1, 1, 4, dtype=D))
        opt = tg.optim.Adam([*r.parameters(), *holder.parameters()], lr=0.1)

        def loss(x):
            B = x.shape[0]
            o, _ = r(x, (holder.h0.expand(1, B, 4).contiguous(),
                         holder.c0.expand(1, B, 4).contiguous()))
            return o.pow(2).sum()
        return [comp(_sgd_step(opt, loss))], dict(r=r, holder=holder, opt=opt)

    def calls(steps, objs, i):
        return steps[0](tg.tensor(np.random.RandomState(i).randn(2 + i % 2, 3, 3)))
    return make, calls, [3]


def _dropout_flag():
    """`F.dropout(x, p, training=self.training)` with the step switching train/eval."""
    class M(nn.Module):
        def __init__(self):
            super().__init__()
            self.lin = nn.Linear(4, 4)

        def forward(self, x):
            return F.dropout(self.lin(x), 0.5, training=self.training)

    def make(comp):
        m = M().to(D)
        opt = tg.optim.SGD(m.parameters(), lr=0.1)

        def step(x, train):
            m.train(train)
            opt.zero_grad()
            loss = m(x).pow(2).sum()
            loss.backward()
            opt.step()
            return loss
        return [comp(step)], dict(m=m, opt=opt)
    return make, lambda s, o, i: s[0](tg.ones(2, 4, dtype=D), bool(i % 2)), [3]


FAMILIES = {
    "char_rnn_lstm": _char_rnn(nn.LSTM), "char_rnn_gru": _char_rnn(nn.GRU),
    "char_rnn_rnn": _char_rnn(nn.RNN),
    "lstm_seq_first_bidir": _rnn_layout(nn.LSTM, False, True),
    "gru_batch_first": _rnn_layout(nn.GRU, True, False),
    "packed_lstm_unsorted": _packed(nn.LSTM, False), "packed_gru_sorted": _packed(nn.GRU, True),
    "encoder_padding": _encoder(False, False), "encoder_causal_norm_first": _encoder(True, True),
    "sdpa_causal_dropout": _sdpa(True), "vae_randn_like": _vae("randn_like"),
    "vae_distributions": _vae("normal"), "gan": _gan(), "resnet_bn": _resnet(0.1),
    "resnet_bn_cumulative": _resnet(None), "embedding_bag": _bag("mean"),
    "gnn_index_add": _gnn("index_add_"), "gnn_scatter_add": _gnn("scatter_add_"),
    "contrastive": _contrastive(), "lstm_learned_initial_state": _learned_initial_state(),
    "dropout_training_flag": _dropout_flag(),
}


@pytest.mark.parametrize("name", sorted(FAMILIES))
def test_family_compiled_equals_eager(name):
    make, calls, traces = FAMILIES[name]
    stats = _compare(make, calls, n=4)
    assert [s.traces for s in stats] == traces
    assert all(s.eager_calls == 0 for s in stats)


@pytest.mark.slow
@pytest.mark.parametrize("name", sorted(FAMILIES))
def test_family_compiled_equals_eager_jax(name):
    pytest.importorskip("jax")
    make, calls, traces = FAMILIES[name]
    stats = _compare(make, calls, n=4, backend="jax")
    assert [s.traces for s in stats] == traces


def test_checkpoint_in_a_compiled_step_runs_eagerly_and_says_so():
    """utils.checkpoint re-runs its function during backward: the step runs eagerly, with
    a warning, and gives eager's results."""
    from tracegrad.utils.checkpoint import checkpoint

    def make(comp):
        a = nn.Sequential(nn.Linear(4, 8), nn.Tanh(), nn.Dropout(0.2)).to(D)
        b = nn.Linear(8, 1).to(D)
        opt = tg.optim.SGD([*a.parameters(), *b.parameters()], lr=0.1)
        loss = lambda x, y: F.mse_loss(  # noqa: E731
            b(checkpoint(a, x, use_reentrant=False)).squeeze(1), y)
        return [comp(_sgd_step(opt, loss))], dict(a=a, b=b, opt=opt)

    def calls(steps, objs, i):
        g = np.random.RandomState(i)
        x = tg.tensor(g.randn(3, 4), requires_grad=True)
        return steps[0](x, tg.tensor(g.randn(3))), x.grad
    stats = _compare(make, calls, n=3, loud="must")
    assert stats[0].eager_calls >= 2


# ---------------- against PyTorch ----------------
def _torch_lstm_lm(torch, steps=3):
    """The same 2-layer LSTM language model (no dropout) trained in PyTorch and compiled
    here from the same weights."""
    g = np.random.RandomState(0)
    batches = [(g.randint(0, 10, (3, 5)), g.randint(0, 10, (3, 5))) for _ in range(steps)]
    tg.manual_seed(0)
    emb, r, out = nn.Embedding(10, 6).to(D), nn.LSTM(6, 8, 2, batch_first=True).to(D), \
        nn.Linear(8, 10).to(D)
    temb, tr, tout = (torch.nn.Embedding(10, 6).double(),
                      torch.nn.LSTM(6, 8, 2, batch_first=True).double(),
                      torch.nn.Linear(8, 10).double())
    for a, b in ((emb, temb), (r, tr), (out, tout)):
        b.load_state_dict({k: torch.tensor(v.numpy()) for k, v in a.state_dict().items()})
    params = [*emb.parameters(), *r.parameters(), *out.parameters()]
    tparams = [*temb.parameters(), *tr.parameters(), *tout.parameters()]
    opt, topt = tg.optim.Adam(params, lr=0.01), torch.optim.Adam(tparams, lr=0.01)

    @tg.compile
    def step(x, y, h):
        opt.zero_grad()
        o, h = r(emb(x), h)
        loss = F.cross_entropy(out(o).reshape(-1, 10), y.reshape(-1))
        loss.backward()
        nn.utils.clip_grad_norm_(params, 0.5)
        opt.step()
        return loss, tuple(t.detach() for t in h)

    h, th = None, None
    for x, y in batches:
        loss, h = step(tg.tensor(x), tg.tensor(y), h)
        topt.zero_grad()
        o, th = tr(temb(torch.tensor(x)), th)
        tloss = torch.nn.functional.cross_entropy(tout(o).reshape(-1, 10),
                                                  torch.tensor(y).reshape(-1))
        tloss.backward()
        torch.nn.utils.clip_grad_norm_(tparams, 0.5)
        topt.step()
        th = tuple(t.detach() for t in th)
        np.testing.assert_allclose(loss.item(), tloss.item(), rtol=1e-10)
    for p, tp in zip(params, tparams):
        np.testing.assert_allclose(p.detach().numpy(), tp.detach().numpy(), rtol=1e-9,
                                   atol=1e-12)
        np.testing.assert_allclose(p.grad.numpy(), tp.grad.numpy(), rtol=1e-9, atol=1e-12)


def test_lstm_language_model_matches_pytorch():
    _torch_lstm_lm(pytest.importorskip("torch"))


def test_resnet_block_with_batchnorm_matches_pytorch():
    torch = pytest.importorskip("torch")
    tg.manual_seed(0)
    net = _Net(None).to(D)
    tnet = _TorchNet(torch).double()
    tnet.load_state_dict({k: torch.tensor(v.numpy()) for k, v in net.state_dict().items()})
    opt = tg.optim.SGD(net.parameters(), lr=0.05, momentum=0.9, weight_decay=5e-4)
    topt = torch.optim.SGD(tnet.parameters(), lr=0.05, momentum=0.9, weight_decay=5e-4)
    crit = nn.CrossEntropyLoss(label_smoothing=0.1)
    tcrit = torch.nn.CrossEntropyLoss(label_smoothing=0.1)
    step = tg.compile(_sgd_step(opt, lambda x, y: crit(net(x), y)))
    g = np.random.RandomState(0)
    for _ in range(3):
        x, y = g.randn(3, 2, 4, 4), g.randint(0, 3, 3)
        loss = step(tg.tensor(x), tg.tensor(y))
        topt.zero_grad()
        tloss = tcrit(tnet(torch.tensor(x)), torch.tensor(y))
        tloss.backward()
        topt.step()
        np.testing.assert_allclose(loss.item(), tloss.item(), rtol=1e-10)
    tsd = tnet.state_dict()
    for k, v in net.state_dict().items():
        np.testing.assert_allclose(v.numpy(), tsd[k].numpy(), rtol=1e-9, atol=1e-12)
    assert step.stats.traces == 2 and step.stats.eager_calls == 0


def _TorchNet(torch):
    tnn, tF = torch.nn, torch.nn.functional

    class Block(tnn.Module):
        def __init__(self):
            super().__init__()
            self.c1 = tnn.Conv2d(4, 4, 3, padding=1, bias=False)
            self.b1 = tnn.BatchNorm2d(4, momentum=None)
            self.c2 = tnn.Conv2d(4, 4, 3, padding=1, bias=False)
            self.b2 = tnn.BatchNorm2d(4, momentum=None)

        def forward(self, x):
            return tF.relu(self.b2(self.c2(tF.relu(self.b1(self.c1(x))))) + x)

    class Net(tnn.Module):
        def __init__(self):
            super().__init__()
            self.stem = tnn.Conv2d(2, 4, 3, padding=1)
            self.block = Block()
            self.pool = tnn.AdaptiveAvgPool2d((1, 1))
            self.fc = tnn.Linear(4, 3)

        def forward(self, x):
            x = tF.interpolate(x, scale_factor=2, mode="bilinear", align_corners=False)
            return self.fc(torch.flatten(self.pool(self.block(self.stem(x))), 1))
    return Net()
