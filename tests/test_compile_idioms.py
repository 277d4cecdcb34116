"""Training code as people write it, compiled == eager bit for bit, step after step.

Each idiom builds its model, optimizer and data from a seed twice: one copy runs eagerly,
the other through `tg.compile`, with the same changes made between steps (a validation
pass in eval mode, a learning rate set by hand, a weight edited under no_grad). Outputs,
parameters, buffers and `.grad`s must be bitwise equal after every step, and the compiled
copy must not have fallen back to eager execution. The idioms are the ones an adversarial
review ran (a GAN with a gradient penalty, a CNN with batch norm, an RNN whose length
depends on the data, masked attention, an EMA of the weights, momentum buffers carved out
of one flat tensor, a trainer class with a compiled method).
"""
import numpy as np
import pytest

import tracegrad as tg

nn, F = tg.nn, tg.nn.functional


def _gan():
    G = nn.Sequential(nn.Linear(2, 8), nn.LeakyReLU(0.2), nn.Linear(8, 2))
    D = nn.Sequential(nn.Linear(2, 8), nn.LeakyReLU(0.2), nn.Linear(8, 1))
    og = tg.optim.Adam(G.parameters(), lr=1e-2, betas=(0.5, 0.9))
    od = tg.optim.Adam(D.parameters(), lr=1e-2, betas=(0.5, 0.9))

    def step(real, z):
        fake = G(z)
        od.zero_grad()
        bce = F.binary_cross_entropy_with_logits
        n = real.shape[0]
        d_loss = bce(D(fake.detach()), tg.zeros(n, 1)) + bce(D(real), tg.ones(n, 1))
        eps = tg.rand(real.shape[0], 1)
        xi = (eps * real + (1 - eps) * fake.detach()).requires_grad_(True)
        gr, = tg.autograd.grad(D(xi).sum(), xi, create_graph=True)
        d_loss = d_loss + ((gr.norm(dim=1) - 1) ** 2).mean()
        d_loss.backward()
        od.step()
        og.zero_grad()
        g_loss = bce(D(fake), tg.ones(n, 1))
        g_loss.backward()
        og.step()
        return d_loss.detach(), g_loss.detach()
    return [G, D], step, lambda k: (tg.randn(6, 2), tg.randn(6, 2)), None


def _cnn():
    m = nn.Sequential(nn.Conv2d(1, 4, 3, padding=1), nn.BatchNorm2d(4), nn.ReLU(),
                      nn.MaxPool2d(2), nn.Dropout(0.2), nn.Flatten(), nn.Linear(64, 3))
    opt = tg.optim.SGD(m.parameters(), lr=0.05, momentum=0.9, weight_decay=1e-4)

    def step(x, y):
        m.train()
        opt.zero_grad()
        loss = F.cross_entropy(m(x), y)
        loss.backward()
        opt.step()
        return loss

    def between(k):                       # a validation pass in eval mode
        m.eval()
        with tg.no_grad():
            m(tg.randn(2, 1, 8, 8))
    return [m], step, lambda k: (tg.randn(5, 1, 8, 8), tg.randint(0, 3, (5,))), between


def _rnn():
    cell = nn.Linear(6, 3)
    opt = tg.optim.SGD(cell.parameters(), lr=0.1)

    def step(xs):
        opt.zero_grad()
        h = tg.zeros(2, 3)
        for t in range(xs.shape[0]):
            h = tg.tanh(cell(tg.cat([xs[t], h], dim=1)))
            if h.abs().max() > 0.95:
                break
        loss = h.pow(2).sum()
        loss.backward()
        opt.step()
        return loss, t
    return [cell], step, lambda k: (tg.randn(3 + k % 3, 2, 3) * (1 + 2 * (k % 2)),), None


def _attention():
    q, ln = nn.Linear(8, 8), nn.LayerNorm(8)
    opt = tg.optim.AdamW(list(q.parameters()) + list(ln.parameters()), lr=1e-2)

    def step(x, lens):
        opt.zero_grad()
        h = ln(x)
        a = q(h) @ h.transpose(1, 2) / 8 ** 0.5
        mask = tg.arange(5)[None, :] >= lens[:, None]
        a = a.masked_fill(mask[:, None, :], float("-inf"))
        loss = F.gelu(tg.softmax(a, dim=-1) @ h).pow(2).mean()
        loss.backward()
        opt.step()
        return loss
    lens = [[5, 3], [5, 3], [1, 5], [2, 2], [5, 3]]
    return [q, ln], step, lambda k: (tg.randn(2, 5, 8), tg.tensor(lens[k % 5])), None


def _ema():
    m = nn.Sequential(nn.Linear(3, 16), nn.ReLU(), nn.Linear(16, 2))
    ema = nn.Sequential(nn.Linear(3, 16), nn.ReLU(), nn.Linear(16, 2))
    ema.load_state_dict(m.state_dict())
    opt = tg.optim.AdamW(m.parameters(), lr=0.01, weight_decay=0.1)

    def step(x, y):
        opt.zero_grad()
        out = m(x)
        loss = F.cross_entropy(out, y)
        loss.backward()
        opt.step()
        with tg.no_grad():
            for pe, p in zip(ema.parameters(), m.parameters()):
                pe.mul_(0.99).add_(p, alpha=0.01)
            acc = (out.argmax(1) == y).float().mean()
        return loss, acc

    def between(k):
        if k == 2:
            opt.param_groups[0]["lr"] = 0.003
    return [m, ema], step, lambda k: (tg.randn(6, 3), tg.randint(0, 2, (6,))), between


def _flat_buffers():
    W = tg.randn(16, 16, requires_grad=True)
    b = tg.randn(16, requires_grad=True)
    flat = tg.zeros(16 * 16 + 16 + 8)
    bw, bb = flat[:256].view(16, 16), flat[256:272]

    def step(x):
        W.grad = b.grad = None
        loss = (x @ W + b).tanh().pow(2).mean()
        loss.backward()
        with tg.no_grad():
            bw.mul_(0.9).add_(W.grad)
            bb.mul_(0.9).add_(b.grad)
            W.sub_(bw * 0.1)
            b.sub_(bb * 0.1)
            flat[-8:].mul_(0.5).add_(flat[:8])
        return loss
    holder = nn.Module()
    holder.register_buffer("flat", flat)
    holder.W, holder.b = nn.Parameter(W), nn.Parameter(b)
    return [holder], step, lambda k: (tg.randn(8, 16),), None


def _shared_module():
    """One module applied twice in one loss, with `sum` and `mean` seeds: the seeds' expanded
    (stride-0) gradients reach a matmul as eager's views (Note [Folded layouts])."""
    D = nn.Sequential(nn.Linear(2, 8), nn.LeakyReLU(0.2), nn.Linear(8, 1))

    def step(real, fake):
        D.zero_grad()
        loss = D(fake).sum() + D(real).mean()
        loss.backward()
        return loss.detach()
    return [D], step, lambda k: (tg.randn(6, 2), tg.randn(6, 2)), None


class _Trainer:
    def __init__(self):
        self.model = nn.Linear(3, 2)
        self.opt = tg.optim.SGD(self.model.parameters(), lr=0.1)
        self.clip, self.scale = None, 1.0

    def step(self, x, y):
        self.opt.zero_grad()
        loss = F.mse_loss(self.model(x), y) * self.scale
        loss.backward()
        if self.clip is not None:
            nn.utils.clip_grad_norm_(self.model.parameters(), self.clip)
        self.opt.step()
        return loss


def _trainer():
    t = _Trainer()

    def between(k):
        if k == 2:
            t.clip = 0.1
        if k == 3:
            t.scale = 2.0
    return [t.model], t.step, lambda k: (tg.randn(4, 3) * 5, tg.randn(4, 2)), between


IDIOMS = {"gan_gradient_penalty": _gan, "cnn_batchnorm2d_train_inside": _cnn,
          "rnn_data_dependent_length": _rnn, "masked_attention": _attention,
          "ema_of_weights": _ema, "flat_momentum_buffers": _flat_buffers,
          "shared_module_sum_and_mean": _shared_module,
          "trainer_method": _trainer}


def _run(make, compiled, steps=8):
    tg.manual_seed(0)
    modules, step, data, between = make()
    f = tg.compile(step) if compiled else step
    seen = []
    for k in range(steps):
        if between is not None:
            between(k)
        tg.manual_seed(100 + k)
        args = data(k)
        out = f(*args)
        out = out if isinstance(out, tuple) else (out,)
        seen += [o.detach().numpy().copy() if isinstance(o, tg.Tensor) else o for o in out]
        for m in modules:
            for t in list(m.parameters()) + list(m.buffers()):
                seen.append(t.detach().numpy().copy())
                seen.append(None if t.grad is None else t.grad.numpy().copy())
    return seen, getattr(f, "stats", None)


def _bits(v):
    if isinstance(v, np.ndarray):
        return ("array", v.dtype.str, v.shape, v.tobytes())
    return v


@pytest.mark.parametrize("name", sorted(IDIOMS))
def test_idiom_compiled_equals_eager(name):
    eager, _ = _run(IDIOMS[name], False)
    comp, stats = _run(IDIOMS[name], True)
    assert len(eager) == len(comp)
    for k, (a, b) in enumerate(zip(eager, comp)):
        assert _bits(a) == _bits(b), f"{name}: value {k} differs"
    assert stats.eager_calls == 0, str(stats)
    assert stats.cache_hits >= 1, str(stats)
