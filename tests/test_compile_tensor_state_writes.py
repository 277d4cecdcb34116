"""Tensors a compiled function stores into Python state (Note [Tensors written to Python
state] in compiler/tensor_places.py): a batch norm written from scratch that rebinds its
running statistics, an EMA that rebinds its shadow tensors. Each cached call reads the
tensor the last call stored and stores its own, as eagerly."""
import pytest

import tracegrad as tg
import tracegrad.nn as nn
import tracegrad.nn.functional as F
from _differential import compare


def batch_norm(X, gamma, beta, moving_mean, moving_var, eps, momentum):
    # the from-scratch batch norm of the Dive into Deep Learning book
    if not tg.is_grad_enabled():
        X_hat = (X - moving_mean) / tg.sqrt(moving_var + eps)
    else:
        mean = X.mean(dim=0)
        var = ((X - mean) ** 2).mean(dim=0)
        X_hat = (X - mean) / tg.sqrt(var + eps)
        moving_mean = (1.0 - momentum) * moving_mean + momentum * mean
        moving_var = (1.0 - momentum) * moving_var + momentum * var
    return gamma * X_hat + beta, moving_mean.data, moving_var.data


class BatchNorm(nn.Module):
    def __init__(self, n, buffers=False):
        super().__init__()
        self.gamma = nn.Parameter(tg.ones(n))
        self.beta = nn.Parameter(tg.zeros(n))
        if buffers:
            self.register_buffer("moving_mean", tg.zeros(n))
            self.register_buffer("moving_var", tg.ones(n))
        else:
            self.moving_mean, self.moving_var = tg.zeros(n), tg.ones(n)

    def forward(self, X):
        Y, self.moving_mean, self.moving_var = batch_norm(
            X, self.gamma, self.beta, self.moving_mean, self.moving_var, eps=1e-5,
            momentum=0.1)
        return Y


def _net(buffers=False):
    return nn.Sequential(nn.Linear(3, 4), BatchNorm(4, buffers), nn.ReLU(), nn.Linear(4, 1))


def _sgd_step(net, model=None):
    """The training step as users write it, on `model` (default: `net`) with SGD on `net`."""
    opt = tg.optim.SGD(net.parameters(), lr=0.1)
    model = model or net

    def step(x, y):
        loss = F.mse_loss(model(x), y)
        opt.zero_grad()
        loss.backward()
        opt.step()
        return loss
    return step, opt


def _stats(net):
    bn = net[1]
    return [bn.moving_mean, bn.moving_var]


@pytest.mark.parametrize("buffers", [False, True], ids=["attributes", "buffers"])
def test_a_batch_norm_rebinding_its_statistics_compiles(buffers):
    def make(comp):
        net = _net(buffers)
        step, opt = _sgd_step(net)
        return comp(step), {"net": net, "opt": opt}

    def calls(step, objs, i):
        return step(tg.randn(8, 3), tg.randn(8, 1)), _stats(objs["net"])

    stats = compare(make, calls, n=6)
    assert stats.eager_calls == 0 and stats.cache_hits == 4, stats


def test_training_and_eval_calls_of_a_compiled_model_alternate_without_re_tracing():
    def make(comp):
        net = _net()
        cnet = comp(net)
        step, opt = _sgd_step(net, cnet)
        return [step, cnet], {"net": net, "opt": opt}

    def calls(steps, objs, i):
        loss = steps[0](tg.randn(8, 3), tg.randn(8, 1))
        with tg.no_grad():                   # evaluation reads the statistics just stored
            pred = steps[1](tg.randn(8, 3))
        return loss, pred, _stats(objs["net"])

    stats = compare(make, calls, n=6)
    assert stats[1].traces == 2 and stats[1].cache_hits == 10, stats


def test_an_ema_rebinding_its_shadow_tensors_compiles():
    class EMA:
        def __init__(self, model, decay=0.9):
            self.model, self.decay = model, decay
            self.shadow = {n: p.detach().clone() for n, p in model.named_parameters()}

        def update(self):
            for n, p in self.model.named_parameters():
                self.shadow[n] = self.decay * self.shadow[n] + (1 - self.decay) * p.detach()

    def make(comp):
        m = nn.Linear(3, 2)
        opt = tg.optim.SGD(m.parameters(), lr=0.1)
        ema = EMA(m)

        def step(x, y):
            loss = F.mse_loss(m(x), y)
            opt.zero_grad()
            loss.backward()
            opt.step()
            ema.update()
            return loss
        return comp(step), {"m": m, "opt": opt, "shadow": ema.shadow}

    stats = compare(make, lambda step, objs, i: step(tg.randn(4, 3), tg.randn(4, 2)), n=6)
    assert stats.eager_calls == 0 and stats.cache_hits == 4, stats


def test_a_stored_tensor_that_requires_grad_keeps_the_call_eager():
    # a hidden state kept with its graph (no detach): each call's graph reaches the last
    def make(comp):
        cell = nn.RNNCell(3, 4)
        box = {"h": tg.zeros(2, 4)}

        def f(x):
            box["h"] = cell(x, box["h"])
            return box["h"].sum()
        return comp(f), {"cell": cell, "box": box}

    def calls(step, objs, i):
        out = step(tg.randn(2, 3))
        if i % 2:
            objs["box"]["h"] = objs["box"]["h"].detach()
        return out
    compare(make, calls, n=5, loud="must")


class _Attention(nn.Module):
    # d2l's attention keeps its weights for plotting: written in forward, then read
    def __init__(self):
        super().__init__()
        self.q = nn.Linear(3, 3)

    def forward(self, x):
        self.attention_weights = tg.softmax(self.q(x) @ x.transpose(1, 2), dim=-1)
        return tg.bmm(self.attention_weights, x)


@pytest.mark.parametrize("backward_through_stored", [False, True])
def test_a_stored_tensor_that_requires_grad_and_is_not_read_compiles(backward_through_stored):
    # the stored weights are a program output: requires_grad and a gradient through them
    # (the caller's loss uses them) as eagerly
    def make(comp):
        m = _Attention()
        opt = tg.optim.SGD(m.parameters(), lr=0.1)

        def step(x):
            opt.zero_grad()
            loss = m(x).square().mean()
            loss.backward()
            opt.step()
            return loss
        return comp(step), {"m": m, "opt": opt}

    def calls(step, objs, i):
        out = step(tg.randn(2, 4, 3))
        w = objs["m"].attention_weights
        if backward_through_stored:
            (w ** 2).sum().backward()
        return out, w, w.requires_grad, w.grad_fn is None
    stats = compare(make, calls, n=5)
    assert stats.eager_calls == 0 and stats.cache_hits >= 3, str(stats)


def test_a_tensor_read_through_two_places_one_rebound_keeps_the_call_eager():
    def make(comp):
        class Holder:
            pass
        h = Holder()
        t = tg.ones(3)
        h.a, h.b = t, t                      # one tensor, two places

        def f(x):
            out = x * h.b
            h.a = h.a * 2
            return out + h.a
        return comp(f), {"h": h.__dict__}
    compare(make, lambda step, objs, i: step(tg.ones(3)), n=5, loud=True)


def test_the_caller_replacing_the_stored_tensor_between_calls():
    def make(comp):
        state = {"avg": tg.zeros(3)}

        def f(x):
            state["avg"] = 0.5 * state["avg"] + 0.5 * x
            return state["avg"].sum()
        return comp(f), {"state": state}

    def calls(step, objs, i):
        if i == 3:
            objs["state"]["avg"] = tg.full((3,), 10.0)    # same shape: read per call
        if i == 5:
            objs["state"]["avg"] = tg.zeros(1)            # another shape: broadcasts
        return step(tg.ones(3) * i)
    stats = compare(make, calls, n=7)
    assert stats.eager_calls == 0, stats


def test_a_batch_norm_rebinding_its_statistics_on_the_jax_backend():
    pytest.importorskip("jax")
    runs = []
    for comp in (lambda f: f, lambda f: tg.compile(f, backend="jax")):
        tg.manual_seed(0)
        net = _net()
        step = comp(_sgd_step(net)[0])
        losses = [step(tg.randn(8, 3), tg.randn(8, 1)).item() for _ in range(5)]
        runs.append((losses, [s.numpy().copy() for s in _stats(net)], step))
    (le, se, _), (lc, sc, step) = runs
    assert lc == pytest.approx(le, rel=1e-5)
    for a, b in zip(se, sc):
        assert b == pytest.approx(a, rel=1e-5, abs=1e-6)
    assert step.stats.eager_calls == 0 and step.stats.cache_hits == 3, step.stats


def test_an_eval_path_that_only_reads_what_the_training_path_rebinds():
    class Center(nn.Module):
        def __init__(self):
            super().__init__()
            self.lin = nn.Linear(3, 3)
            self.running = tg.zeros(3)

        def forward(self, x):
            h = self.lin(x)
            if self.training:
                mean = h.mean(0)
                self.running = 0.9 * self.running + 0.1 * mean.detach()
                return h - mean
            return h - self.running              # reads the tensor the last step stored

    def make(comp):
        net = Center()
        opt = tg.optim.SGD(net.parameters(), lr=0.1)
        cnet = comp(net)

        def step(x):
            net.train()
            loss = cnet(x).pow(2).mean()
            opt.zero_grad()
            loss.backward()
            opt.step()
            net.eval()
            with tg.no_grad():
                return loss, cnet(x * 2)
        return [step, cnet], {"net": net, "opt": opt, "running": net.__dict__}

    stats = compare(make, lambda steps, objs, i: steps[0](tg.randn(4, 3)), n=6)
    assert stats[1].traces == 2 and stats[1].cache_hits == 10, stats
