"""The MLP training step the benchmarks compare, written once per implementation.

A step is: forward (`x @ W + b` then relu or tanh per hidden layer), softmax cross-entropy,
backward, and SGD with learning rate `LR`. The hand-written numpy step is the limit: it
updates each parameter as soon as its gradient exists, works in place where it can and
drops each activation after its last use.
"""
import numpy as np

LR = 0.01
MOMENTUM = 0.9


def make_params(sizes, seed=0):
    """[W0, b0, W1, b1, ...] as float32 numpy arrays (scaled normal weights, zero biases)."""
    rng = np.random.default_rng(seed)
    ps = []
    for a, b in zip(sizes[:-1], sizes[1:]):
        ps.append((rng.standard_normal((a, b)) / np.sqrt(a)).astype(np.float32))
        ps.append(np.zeros(b, np.float32))
    return ps


def numpy_step(ps, x, y, act="relu", bufs=None):
    """Hand-written forward, cross-entropy, backward and in-place SGD; returns the loss.

    With `bufs` (zero arrays like `ps`), SGD with momentum as `optim.SGD(momentum=0.9)`
    applies it (buffers start at zero, so the first step's buffer is the gradient)."""
    n_layers = len(ps) // 2
    acts = [x]
    h = x
    for i in range(n_layers):
        h = h @ ps[2 * i]
        h += ps[2 * i + 1]
        if i < n_layers - 1:
            if act == "tanh":
                np.tanh(h, out=h)
            else:
                np.maximum(h, 0, out=h)
        acts.append(h)
    n = x.shape[0]
    rows = np.arange(n)
    h -= h.max(axis=1, keepdims=True)
    picked = h[rows, y]
    np.exp(h, out=h)
    s = h.sum(axis=1, keepdims=True)
    loss = float((np.log(s).ravel() - picked).mean())
    g = h
    g /= s
    g[rows, y] -= 1
    g /= n
    for i in range(n_layers - 1, -1, -1):
        a = acts[i]
        gw = a.T @ g
        gb = g.sum(axis=0)
        if i > 0:
            g2 = g @ ps[2 * i].T
            if act == "tanh":
                g2 *= 1 - a * a
            else:
                g2 *= a > 0
            g = g2
        if bufs is None:
            gw *= LR
            ps[2 * i] -= gw
            ps[2 * i + 1] -= LR * gb
        else:
            for k, gk in zip((2 * i, 2 * i + 1), (gw, gb)):
                bufs[k] *= MOMENTUM
                bufs[k] += gk
                ps[k] -= LR * bufs[k]
        acts[i + 1] = None
    return loss


def tg_loss(tg, ps, x, y, act="relu"):
    h = x
    n_layers = len(ps) // 2
    for i in range(n_layers):
        h = h @ ps[2 * i] + ps[2 * i + 1]
        if i < n_layers - 1:
            h = h.tanh() if act == "tanh" else h.relu()
    return -h.log_softmax(dim=1)[tg.arange(x.shape[0]), y].mean()


def tg_compiled_body(tg, act="relu"):
    """The step as a user writes it for `tracegrad.compile`: loss, grads, in-place SGD."""
    def step(ps, x, y):
        loss = tg_loss(tg, ps, x, y, act)
        grads = tg.autograd.grad(loss, ps)
        with tg.no_grad():
            for p, g in zip(ps, grads):
                p -= LR * g
        return loss.detach()
    return step


def tg_eager_step(tg, ps, x, y, act="relu"):
    loss = tg_loss(tg, ps, x, y, act)
    for p in ps:
        p.grad = None
    loss.backward()
    with tg.no_grad():
        for p in ps:
            p -= LR * p.grad
    return loss


def torch_step(torch, ps, x, y, act="relu"):
    h = x
    n_layers = len(ps) // 2
    for i in range(n_layers):
        h = h @ ps[2 * i] + ps[2 * i + 1]
        if i < n_layers - 1:
            h = h.tanh() if act == "tanh" else h.relu()
    loss = torch.nn.functional.cross_entropy(h, y)
    for p in ps:
        p.grad = None
    loss.backward()
    with torch.no_grad():
        for p in ps:
            p -= LR * p.grad
    return loss


def numpy_momentum_step(ps, bufs, x, y, act="relu"):
    """`numpy_step` with SGD momentum."""
    return numpy_step(ps, x, y, act, bufs=bufs)


def tg_module_step(tg, sizes, act, params, backend):
    """The step as a PyTorch user writes it, compiled whole: `nn.Sequential`, `optim.SGD`
    with momentum, zero_grad / backward / step inside, the loss returned as is. `params` as
    `make_params` gives them (W as (in, out)). Returns (step, model)."""
    nn = tg.nn
    mods = []
    n = len(sizes) - 1
    for i in range(n):
        lin = nn.Linear(sizes[i], sizes[i + 1])
        with tg.no_grad():
            lin.weight.copy_(tg.tensor(np.ascontiguousarray(params[2 * i].T)))
            lin.bias.copy_(tg.tensor(params[2 * i + 1]))
        mods.append(lin)
        if i < n - 1:
            mods.append(nn.Tanh() if act == "tanh" else nn.ReLU())
    model = nn.Sequential(*mods)
    opt = tg.optim.SGD(model.parameters(), lr=LR, momentum=MOMENTUM)
    loss_fn = nn.CrossEntropyLoss()

    def step(x, y):
        opt.zero_grad()
        loss = loss_fn(model(x), y)
        loss.backward()
        opt.step()
        return loss
    return tg.compile(step, backend=backend), model
