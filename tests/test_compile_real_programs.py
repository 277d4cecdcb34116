"""Whole programs of the kind tutorials and papers show, written as PyTorch users write them
(`import tracegrad as torch`), compiled == eager bit for bit, step after step: outputs,
parameters, `.grad`s, buffers, optimizer and scheduler state and the generator's state after
each step, with no eager fallback. Also the defects an adversarial review of such programs
found: arguments that are views of one tensor, and 0-d parameters under SGD/Adam."""
import math
import warnings

import numpy as np
import pytest

import tracegrad as torch

nn, F = torch.nn, torch.nn.functional


def _flat(v, out):
    if isinstance(v, torch.Tensor):
        out.append(("T", str(v.dtype), tuple(v.shape), v.requires_grad,
                    v.detach().numpy().tobytes()))
    elif isinstance(v, dict):
        for k in sorted(v, key=str):
            out.append(("K", str(k)))
            _flat(v[k], out)
    elif isinstance(v, (list, tuple)):
        out.append(("L", len(v)))
        for x in v:
            _flat(x, out)
    elif not callable(v):
        out.append(v)


def _run(make, compiled, steps=6):
    torch.manual_seed(0)
    st = make()
    f = torch.compile(st["step"]) if compiled else st["step"]
    seen = []
    with warnings.catch_warnings():
        warnings.simplefilter("error")           # no fallback warning, no numpy warning
        for k in range(steps):
            torch.manual_seed(100 + k)
            out = f(*st["data"](k))
            if "carry" in st:
                st["carry"]["h"] = out[1]
            _flat(out, seen)
            for m in st.get("modules", []):
                for t in list(m.parameters()) + list(m.buffers()):
                    _flat(t, seen)
                    _flat(t.grad, seen)
            for o in st.get("opts", []):
                _flat(o.state_dict(), seen)
            for s in st.get("scheds", []):
                _flat(s.state_dict(), seen)
            _flat(torch.rand(1), seen)
    return seen, getattr(f, "stats", None)


# -- a char-level language model: a hand-written GRU cell, truncated BPTT ---------------------
class GRUCell(nn.Module):
    def __init__(self, i, h):
        super().__init__()
        self.ih, self.hh = nn.Linear(i, 3 * h), nn.Linear(h, 3 * h)

    def forward(self, x, h):
        ir, iz, inn = self.ih(x).chunk(3, 1)
        hr, hz, hn = self.hh(h).chunk(3, 1)
        r, z = torch.sigmoid(ir + hr), torch.sigmoid(iz + hz)
        return (1 - z) * torch.tanh(inn + r * hn) + z * h


class CharRNN(nn.Module):
    def __init__(self, V=7, E=6, H=8):
        super().__init__()
        self.emb, self.cell, self.head = nn.Embedding(V, E), GRUCell(E, H), nn.Linear(H, V)
        self.drop = nn.Dropout(0.1)

    def forward(self, x, h):
        outs = []
        for t in range(x.size(1)):
            h = self.cell(self.emb(x[:, t]), h)
            outs.append(h)
        return self.head(self.drop(torch.stack(outs, 1))), h


def _char_rnn():
    model = CharRNN()
    opt = torch.optim.Adam(model.parameters(), lr=3e-3)
    carry = {"h": torch.zeros(2, 8)}
    text = torch.randint(0, 7, (2, 100))

    def step(x, y, h):
        h = h.detach()                   # truncated BPTT: the carried state has no history
        opt.zero_grad()
        logits, h = model(x, h)
        loss = F.cross_entropy(logits.reshape(-1, 7), y.reshape(-1))
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 0.5)
        opt.step()
        return loss, h
    # x and y: overlapping views of one tensor (Note [Arguments sharing memory])
    return dict(modules=[model], opts=[opt], step=step, carry=carry,
                data=lambda k: (text[:, 5 * k:5 * k + 5], text[:, 5 * k + 1:5 * k + 6],
                                carry["h"]))


# -- a VAE with the reparameterization trick ----------------------------------------------
class VAE(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc1, self.fc21, self.fc22 = nn.Linear(12, 16), nn.Linear(16, 3), nn.Linear(16, 3)
        self.fc3, self.fc4 = nn.Linear(3, 16), nn.Linear(16, 12)

    def forward(self, x):
        h = F.relu(self.fc1(x.view(-1, 12)))
        mu, logvar = self.fc21(h), self.fc22(h)
        z = mu + torch.randn_like(mu) * torch.exp(0.5 * logvar)
        return torch.sigmoid(self.fc4(F.relu(self.fc3(z)))), mu, logvar


def _vae():
    model = VAE()
    opt = torch.optim.Adam(model.parameters(), lr=1e-2)

    def step(x):
        opt.zero_grad()
        recon, mu, logvar = model(x)
        bce = F.binary_cross_entropy(recon, x.view(-1, 12), reduction="sum")
        kld = -0.5 * torch.sum(1 + logvar - mu.pow(2) - logvar.exp())
        loss = bce + kld
        loss.backward()
        opt.step()
        return loss
    return dict(modules=[model], opts=[opt], step=step, data=lambda k: (torch.rand(5, 12),))


# -- SimCLR's InfoNCE loss ------------------------------------------------------------------
def _simclr():
    enc = nn.Sequential(nn.Linear(10, 16), nn.BatchNorm1d(16), nn.ReLU(), nn.Linear(16, 4))
    opt = torch.optim.SGD(enc.parameters(), lr=0.1, momentum=0.9, weight_decay=1e-4)
    sched = torch.optim.lr_scheduler.CosineAnnealingLR(opt, T_max=8)

    def augment(x):
        return x * (torch.rand_like(x) > 0.2).float() + 0.1 * torch.randn_like(x)

    def step(x, temperature=0.5):
        opt.zero_grad()
        z = F.normalize(torch.cat([enc(augment(x)), enc(augment(x))], 0), dim=1)
        n = x.shape[0]
        sim = (z @ z.t() / temperature).masked_fill(torch.eye(2 * n, dtype=torch.bool),
                                                    float("-inf"))
        labels = torch.cat([torch.arange(n, 2 * n), torch.arange(0, n)])
        loss = F.cross_entropy(sim, labels)
        loss.backward()
        opt.step()
        sched.step()
        return loss
    return dict(modules=[enc], opts=[opt], scheds=[sched], step=step,
                data=lambda k: (torch.randn(6, 10),))


# -- REINFORCE: sampled actions, log-probabilities, normalized returns -----------------------
def _reinforce():
    policy = nn.Sequential(nn.Linear(4, 16), nn.ReLU(), nn.Linear(16, 3))
    opt = torch.optim.Adam(policy.parameters(), lr=1e-2)
    W = torch.randn(3, 4) * 0.3

    def step(s):
        logps, rewards = [], []
        for t in range(4):
            probs = F.softmax(policy(s), dim=-1)
            a = torch.multinomial(probs, 1)
            logps.append(torch.log(probs.gather(1, a)).squeeze(1))
            rewards.append(-(s ** 2).sum(1) + a.squeeze(1).float() * 0.1)
            s = s + 0.1 * W[a.squeeze(1)]
        R, returns = torch.zeros_like(rewards[0]), []
        for r in reversed(rewards):
            R = r + 0.9 * R
            returns.insert(0, R)
        returns = torch.stack(returns, 1)
        returns = (returns - returns.mean()) / (returns.std() + 1e-8)
        loss = -(torch.stack(logps, 1) * returns).sum(1).mean()
        opt.zero_grad()
        loss.backward()
        opt.step()
        return loss
    return dict(modules=[policy], opts=[opt], step=step, data=lambda k: (torch.randn(4, 4),))


# -- Bayesian linear regression: evidence maximisation over 0-d log-precisions --------------
class BLR(nn.Module):
    def __init__(self):
        super().__init__()
        self.log_alpha = nn.Parameter(torch.zeros(()))
        self.log_beta = nn.Parameter(torch.zeros(()))
        self.register_buffer("w_mean", torch.zeros(2))

    def forward(self, x, y):
        N = x.shape[0]
        Phi = torch.stack([torch.ones_like(x), x], 1)
        a, b = self.log_alpha.exp(), self.log_beta.exp()
        A = a * torch.eye(2) + b * Phi.t() @ Phi
        det = A[0, 0] * A[1, 1] - A[0, 1] * A[1, 0]
        Ainv = torch.stack([torch.stack([A[1, 1], -A[0, 1]]),
                            torch.stack([-A[1, 0], A[0, 0]])]) / det
        m = b * Ainv @ Phi.t() @ y
        E = b / 2 * ((y - Phi @ m) ** 2).sum() + a / 2 * (m @ m)
        ll = torch.log(a) + N / 2 * torch.log(b) - E - 0.5 * torch.log(det) \
            - N / 2 * math.log(2 * math.pi)
        with torch.no_grad():
            self.w_mean.copy_(m)
        return -ll / N


def _blr():
    model = BLR()
    opt = torch.optim.Adam(model.parameters(), lr=0.1)
    sched = torch.optim.lr_scheduler.StepLR(opt, 3, gamma=0.5)

    def step(x, y):
        opt.zero_grad()
        loss = model(x, y)
        loss.backward()
        opt.step()
        sched.step()
        return loss

    def data(k):
        x = torch.rand(20) * 4 - 2
        return x, 0.5 - 1.2 * x + 0.3 * torch.randn(20)
    return dict(modules=[model], opts=[opt], scheds=[sched], step=step, data=data)


PROGRAMS = {"char_rnn_truncated_bptt_sliced_batches": _char_rnn, "vae": _vae,
            "simclr_info_nce": _simclr, "reinforce": _reinforce,
            "bayesian_linear_regression_evidence": _blr}


@pytest.mark.parametrize("name", sorted(PROGRAMS))
def test_real_program_compiled_equals_eager(name):
    eager, _ = _run(PROGRAMS[name], False)
    comp, stats = _run(PROGRAMS[name], True)
    assert len(eager) == len(comp)
    for k, (a, b) in enumerate(zip(eager, comp)):
        assert a == b, f"{name}: value {k} differs"
    assert stats.eager_calls == 0 and stats.cache_hits >= 4, str(stats)


# -- the defects, reduced -------------------------------------------------------------------
@pytest.mark.parametrize("make_opt", [
    lambda ps: torch.optim.SGD(ps, lr=0.1),
    lambda ps: torch.optim.SGD(ps, lr=0.1, momentum=0.9, dampening=0.1, weight_decay=0.01),
    lambda ps: torch.optim.SGD(ps, lr=0.1, momentum=0.9, nesterov=True),
    lambda ps: torch.optim.Adam(ps, lr=0.1),
    lambda ps: torch.optim.AdamW(ps, lr=0.1, weight_decay=0.1, amsgrad=True)])
def test_a_zero_dim_parameter_is_updated_in_its_own_precision(make_opt):
    """A compiled step reads the learning rate (and betas, momentum, ...) per call as a 0-d
    float64 tensor; against a 0-d float32 parameter that promoted the update to float64,
    where eager's Python float keeps it float32 (Note [Hyper-parameters meet zero-dim
    tensors])."""
    def train(compiled):
        log_scale = nn.Parameter(torch.zeros(()))
        opt = make_opt([log_scale])

        def step(x):
            opt.zero_grad()
            loss = (log_scale.exp() * x).sum()
            loss.backward()
            opt.step()
            return loss
        f = torch.compile(step) if compiled else step
        x = torch.tensor([0.3, -2.0])
        seen = []
        for _ in range(4):
            _flat([f(x), log_scale, opt.state_dict()], seen)
        return seen, f
    (eager, _), (comp, f) = train(False), train(True)
    assert eager == comp
    assert f.stats.eager_calls == 0


def test_arguments_that_are_views_of_one_tensor_compile():
    """`x = data[i:i+T]`, `y = data[i+1:i+T+1]`: once every such call ran eagerly, silently."""
    def loss_fn(w, x, y):
        return ((x.float() * w - y.float()) ** 2).mean()
    f = torch.compile(loss_fn)
    data, w = torch.arange(20), torch.ones(4, requires_grad=True)
    for i in range(5):
        got = f(w, data[i:i + 4], data[i + 1:i + 5])
        assert got.item() == loss_fn(w, data[i:i + 4], data[i + 1:i + 5]).item()
    assert f.stats.eager_calls == 0 and f.stats.traces == 1, str(f.stats)


def test_views_of_one_tensor_written_in_place_run_eagerly_with_a_warning():
    def f(x, y):
        x.add_(1)
        return (x * y).sum()
    results = []
    for g in (f, torch.compile(f)):
        d = torch.arange(10.)
        with warnings.catch_warnings(record=True) as w:
            warnings.simplefilter("always")
            results.append(([g(d[0:5], d[2:7]).item() for _ in range(3)], d.tolist()))
        if g is not f:
            assert any("share memory" in str(x.message) for x in w)
            assert g.stats.eager_calls == 2
    assert results[0] == results[1]


def test_the_same_tensor_twice_stays_eager_and_says_why():
    w = torch.randn(4, requires_grad=True)
    f = torch.compile(lambda a, b: (a * b).sum())
    with pytest.warns(UserWarning, match="runs eagerly .*passed as two"):
        f(w, w).backward()
    assert np.array_equal(w.grad.numpy(), (w.detach() * 2).numpy())


def _sharing_loss(p, t):
    return ((p[:2] - t[:2]) ** 2).sum() + p.sin().sum() * t.mean()


def _distilled(lin):
    out = lin(torch.randn(4, 3))
    return (out, out.detach()), list(lin.parameters())


@pytest.mark.parametrize("share", ["distill", "leaf_and_view", "leaf_and_detached",
                                   "two_views", "view_of_detached"])
def test_arguments_sharing_memory_that_require_grad_compile(share):
    """A prediction and its own detached copy (distillation, consistency losses), a leaf
    and its view, two views of a leaf: the program only reads them, so where they share
    memory cannot change what it computes (Note [Arguments sharing memory])."""
    def make(lin):
        if share == "distill":
            return _distilled(lin)
        w = torch.randn(6, 3, requires_grad=True)
        pair = {"leaf_and_view": (w, w[1:3]), "leaf_and_detached": (w, w.detach()),
                "two_views": (w[:3], w[3:]), "view_of_detached": (w, w.detach()[::2])}
        return pair[share], [w]
    runs = []
    for compiled in (False, True):
        torch.manual_seed(0)
        lin = torch.nn.Linear(3, 3)
        f = torch.compile(_sharing_loss) if compiled else _sharing_loss
        rec = []
        with warnings.catch_warnings():
            warnings.simplefilter("error")
            for _ in range(4):
                args, leaves = make(lin)
                out = f(*args)
                out.backward()
                rec.append([out.detach().numpy()] + [x.grad.numpy().copy() for x in leaves])
                lin.zero_grad()
        runs.append(rec)
    for e, c in zip(*runs):
        for a, b in zip(e, c):
            np.testing.assert_array_equal(a, b)
    assert f.stats.eager_calls == 0 and f.stats.traces == 1, str(f.stats)


def test_an_alias_written_after_the_call_fails_backward_as_eagerly():
    for f in (_sharing_loss, torch.compile(_sharing_loss)):
        w = torch.randn(4, 3, requires_grad=True)
        for _ in range(2):
            t = w.detach()
            loss = f(w, t)
            t.add_(1.0)                  # the same version counter as w's
            with pytest.raises(RuntimeError, match="modified by an inplace operation"):
                loss.backward()


def test_normalize_matches_torch():
    torch_ = pytest.importorskip("torch")
    x = np.random.default_rng(0).standard_normal((4, 5)).astype(np.float32)
    x[1] = 0
    w = np.random.default_rng(1).standard_normal((4, 5)).astype(np.float32)
    for kw in [{}, {"dim": 0}, {"p": 1, "dim": -1}, {"p": 3.0, "dim": 1, "eps": 1e-3}]:
        a, b = torch.tensor(x, requires_grad=True), torch_.tensor(x, requires_grad=True)
        ya, yb = F.normalize(a, **kw), torch_.nn.functional.normalize(b, **kw)
        (ya * torch.tensor(w)).sum().backward()
        (yb * torch_.tensor(w)).sum().backward()
        np.testing.assert_allclose(ya.detach().numpy(), yb.detach().numpy(), atol=1e-6)
        np.testing.assert_allclose(a.grad.numpy(), b.grad.numpy(), atol=1e-6)
