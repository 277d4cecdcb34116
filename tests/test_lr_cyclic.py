"""CosineAnnealingWarmRestarts and CyclicLR against PyTorch: every lr (and the momentum or
beta1 CyclicLR cycles) equal over 25 steps, fractional `step(epoch)`, `state_dict()` equal
to torch's and loadable from it, errors; and inside a compiled training step (replayed,
compiled == eager bitwise, no re-trace per step)."""
import warnings

import numpy as np
import pytest

import tracegrad as tg

nn, F = tg.nn, tg.nn.functional


@pytest.fixture
def torch():
    return pytest.importorskip("torch")


def _S(lib):
    return lib.optim.lr_scheduler


SCHEDS = {
    "sgdr": lambda lib, o: _S(lib).CosineAnnealingWarmRestarts(o, 3),
    "sgdr_mult": lambda lib, o: _S(lib).CosineAnnealingWarmRestarts(o, 2, T_mult=2,
                                                                      eta_min=0.001),
    "tri": lambda lib, o: _S(lib).CyclicLR(o, 0.01, 0.1, 4),
    "tri2": lambda lib, o: _S(lib).CyclicLR(o, [0.01, 0.02], 0.1, 3, 5, mode="triangular2"),
    "exp": lambda lib, o: _S(lib).CyclicLR(o, 0.01, 0.1, 3, mode="exp_range", gamma=0.9,
                                           base_momentum=0.7),
    "fn": lambda lib, o: _S(lib).CyclicLR(o, 0.01, 0.1, 2, scale_fn=lambda x: 0.5 ** x,
                                          scale_mode="iterations", cycle_momentum=False),
}
OPTS = {"sgd": ("SGD", dict(lr=0.1, momentum=0.9)), "adam": ("Adam", dict(lr=0.1))}


def _run(lib, make, opt="sgd", epochs=None, steps=25):
    name, kw = OPTS[opt]
    o = getattr(lib.optim, name)([{"params": [lib.zeros(2, requires_grad=True)]},
                                  {"params": [lib.zeros(1, requires_grad=True)], "lr": 0.05}],
                                 **kw)
    s = make(lib, o)
    seen = []
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        for k in range(steps):
            o.step()
            s.step() if epochs is None else s.step(epochs[k])
            seen.append((s.get_last_lr(), [g.get("momentum", g.get("betas"))
                                          for g in o.param_groups]))
    return seen, s, o


@pytest.mark.parametrize("opt", list(OPTS))
@pytest.mark.parametrize("which", list(SCHEDS))
def test_schedule_matches_torch(torch, which, opt):
    a, sa, _ = _run(tg, SCHEDS[which], opt)
    b, sb, _ = _run(torch, SCHEDS[which], opt)
    assert a == b
    da, db = sa.state_dict(), sb.state_dict()
    assert da == db


@pytest.mark.parametrize("which", ["sgdr", "sgdr_mult"])
def test_fractional_epochs_match_torch(torch, which):
    epochs = [0.37 * k + 0.1 for k in range(25)]        # per-batch annealing
    a, sa, _ = _run(tg, SCHEDS[which], epochs=epochs)
    b, sb, _ = _run(torch, SCHEDS[which], epochs=epochs)
    assert a == b and sa.state_dict() == sb.state_dict()
    assert sa.last_epoch == int(epochs[-1])


@pytest.mark.parametrize("which", list(SCHEDS))
def test_state_dict_from_torch_resumes_the_schedule(torch, which):
    _, sb, ob = _run(torch, SCHEDS[which], steps=7)
    # a fresh tracegrad scheduler loading torch's state continues as torch's does
    o = tg.optim.SGD([{"params": [tg.zeros(2, requires_grad=True)]},
                      {"params": [tg.zeros(1, requires_grad=True)]}], lr=0.1, momentum=0.9)
    s = SCHEDS[which](tg, o)
    s.load_state_dict(sb.state_dict())
    assert s.state_dict() == sb.state_dict()
    for _ in range(5):
        sb.step()
        s.step()
        assert s.get_last_lr() == sb.get_last_lr()
    if which.startswith(("tri", "exp")):          # the cycled momentum too
        assert [g["momentum"] for g in o.param_groups] == [g["momentum"] for g in
                                                           ob.param_groups]


@pytest.mark.parametrize("make", [
    lambda lib, o: _S(lib).CosineAnnealingWarmRestarts(o, 0),
    lambda lib, o: _S(lib).CosineAnnealingWarmRestarts(o, 2.0),
    lambda lib, o: _S(lib).CosineAnnealingWarmRestarts(o, 2, T_mult=0),
    lambda lib, o: _S(lib).CosineAnnealingWarmRestarts(o, 2, eta_min="0"),
    lambda lib, o: _S(lib).CosineAnnealingWarmRestarts(o, 2).step(-1),
    lambda lib, o: _S(lib).CyclicLR(o, 0.01, 0.1, mode="sine"),
    lambda lib, o: _S(lib).CyclicLR(o, [0.01, 0.02, 0.03], 0.1),
    lambda lib, o: _S(lib).CyclicLR(lib.optim.Adagrad(o.param_groups[0]["params"]), 0.01, 0.1),
    lambda lib, o: _S(lib).CyclicLR(object(), 0.01, 0.1),
])
def test_errors_match_torch(torch, make):
    errs = []
    for lib in (torch, tg):
        o = lib.optim.SGD([lib.zeros(2, requires_grad=True)], lr=0.1, momentum=0.9)
        with pytest.raises(Exception) as e:
            make(lib, o)
        errs.append(e.value)
    assert isinstance(errs[1], type(errs[0])), (errs[1], errs[0])
    assert str(errs[1]).splitlines()[0] == str(errs[0])


def test_get_lr_outside_step_warns_like_torch(torch):
    for lib in (torch, tg):
        o = lib.optim.SGD([lib.zeros(2, requires_grad=True)], lr=0.1, momentum=0.9)
        s = _S(lib).CyclicLR(o, 0.01, 0.1, 3)
        with pytest.warns(UserWarning, match="get_last_lr"):
            s.get_lr()


@pytest.mark.parametrize("which,opt", [("sgdr", "sgd"), ("tri2", "sgd"), ("exp", "adam"),
                                       ("tri", "adam")])
def test_compiled_step_with_the_scheduler_inside_equals_eager(which, opt):
    name, kw = OPTS[opt]
    out = []
    for compiled in (False, True):
        tg.manual_seed(0)
        model = nn.Sequential(nn.Linear(4, 6), nn.Tanh(), nn.Linear(6, 3))
        o = getattr(tg.optim, name)([{"params": model[0].parameters()},
                                     {"params": model[2].parameters(), "lr": 0.05}], **kw)
        s = SCHEDS[which](tg, o)

        def step(x, y):
            o.zero_grad()
            loss = F.cross_entropy(model(x), y)
            loss.backward()
            o.step()
            s.step()
            return loss
        f = tg.compile(step) if compiled else step
        seen = []
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            for _ in range(8):
                seen.append(f(tg.randn(5, 4), tg.randint(0, 3, (5,))).item())
                seen += [p.detach().numpy().tobytes() for p in model.parameters()]
                seen.append(s.get_last_lr())
        out.append((seen, getattr(f, "stats", None)))
    (eager, _), (comp, stats) = out
    assert comp == eager
    assert stats.traces <= 2 and stats.eager_calls == 0, str(stats)
    assert np.isfinite(eager[0])
