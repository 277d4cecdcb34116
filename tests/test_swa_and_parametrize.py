"""optim.swa_utils (AveragedModel with every averaging function, SWALR, update_bn) and
nn.utils.parametrize / parametrizations against PyTorch, and inside compiled training
steps (compiled == eager bitwise, no re-trace per step)."""
import warnings

import numpy as np
import pytest

import tracegrad as tg

nn, F = tg.nn, tg.nn.functional


@pytest.fixture
def torch():
    return pytest.importorskip("torch")


def _U(lib):
    return lib.optim.swa_utils


AVG = {
    "default": lambda U: {},
    "ema_multi": lambda U: dict(multi_avg_fn=U.get_ema_multi_avg_fn(0.9)),
    "ema": lambda U: dict(avg_fn=U.get_ema_avg_fn(0.8)),
    "swa_multi": lambda U: dict(multi_avg_fn=U.get_swa_multi_avg_fn()),
    "swa": lambda U: dict(avg_fn=U.get_swa_avg_fn()),
    "buffers": lambda U: dict(use_buffers=True, multi_avg_fn=U.get_ema_multi_avg_fn(0.7)),
}


def _bn_model(lib, init=None):
    lib.manual_seed(0)
    m = lib.nn.Sequential(lib.nn.Linear(3, 4), lib.nn.BatchNorm1d(4), lib.nn.Linear(4, 2))
    m = m.double()
    if init is not None:
        m.load_state_dict({k: lib.tensor(v) for k, v in init.items()})
    return m


def _swa_run(lib, variant, xs, init=None, anneal="cos"):
    m = _bn_model(lib, init)
    U = _U(lib)
    avg = U.AveragedModel(m, **AVG[variant](U))
    opt = lib.optim.SGD(m.parameters(), lr=0.1)
    sched = U.SWALR(opt, swa_lr=0.05, anneal_epochs=3, anneal_strategy=anneal)
    lrs = []
    for x in xs:
        opt.zero_grad()
        m(lib.tensor(x)).pow(2).mean().backward()
        opt.step()
        sched.step()
        lrs.append(sched.get_last_lr())
        avg.update_parameters(m)
    U.update_bn([lib.tensor(x) for x in xs[:3]], avg)
    return m, avg, sched, lrs


@pytest.mark.parametrize("variant", list(AVG))
def test_averaged_model_swalr_and_update_bn_match_torch(torch, variant):
    rng = np.random.default_rng(0)
    xs = [rng.standard_normal((5, 3)) for _ in range(6)]
    init = {k: v.detach().numpy().copy() for k, v in _bn_model(tg).state_dict().items()}
    ma, aa, sa, la = _swa_run(tg, variant, xs, init, "cos" if variant != "swa" else "linear")
    mb, ab, sb, lb = _swa_run(torch, variant, xs, init, "cos" if variant != "swa" else "linear")
    assert la == lb and sa.state_dict() == sb.state_dict()
    da, db = aa.state_dict(), ab.state_dict()
    assert list(da) == list(db)          # module.0.weight, ..., n_averaged
    for k in da:
        assert str(da[k].dtype) == str(db[k].dtype), k
        np.testing.assert_allclose(da[k].numpy(), db[k].numpy(), rtol=0, atol=1e-14, err_msg=k)
    np.testing.assert_allclose(aa(tg.tensor(xs[0])).detach().numpy(),
                               ab(torch.tensor(xs[0])).detach().numpy(), atol=1e-14)
    assert ma.training and aa.training           # update_bn restores the flags...
    assert aa.module[1].momentum == 0.1          # ... and the momenta


def test_update_bn_restores_eval_mode_and_skips_models_without_batchnorm(torch):
    m = _bn_model(tg).eval()
    _U(tg).update_bn([tg.randn(4, 3, dtype=tg.float64)], m)
    assert not m.training and int(m[1].num_batches_tracked) == 1
    lin = nn.Linear(2, 2)
    _U(tg).update_bn([tg.randn(3, 2)], lin)        # nothing to do
    # batches may be (input, target) pairs
    _U(tg).update_bn([(tg.randn(4, 3, dtype=tg.float64), tg.zeros(4))], m)
    assert int(m[1].num_batches_tracked) == 1


@pytest.mark.parametrize("make", [
    lambda lib, o: _U(lib).SWALR(o, swa_lr=[0.1, 0.2]),
    lambda lib, o: _U(lib).SWALR(o, swa_lr=0.1, anneal_strategy="exp"),
    lambda lib, o: _U(lib).SWALR(o, swa_lr=0.1, anneal_epochs=-1),
    lambda lib, o: _U(lib).SWALR(o, swa_lr=0.1, anneal_epochs=2.0),
    lambda lib, o: _U(lib).get_ema_multi_avg_fn(1.5),
    lambda lib, o: _U(lib).get_ema_avg_fn(-0.1),
    lambda lib, o: _U(lib).AveragedModel(lib.nn.Linear(2, 2), avg_fn=_U(lib).get_swa_avg_fn(),
                                         multi_avg_fn=_U(lib).get_swa_multi_avg_fn()),
])
def test_swa_errors_match_torch(torch, make):
    errs = []
    for lib in (torch, tg):
        o = lib.optim.SGD([lib.zeros(2, requires_grad=True)], lr=0.1)
        with pytest.raises(Exception) as e:
            make(lib, o)
        errs.append(e.value)
    assert isinstance(errs[1], type(errs[0]))
    assert str(errs[1]).splitlines()[0] == str(errs[0])


def test_swalr_state_dict_round_trips_through_torch(torch):
    runs = []
    for lib in (tg, torch):
        o = lib.optim.SGD([lib.zeros(2, requires_grad=True)], lr=0.1)
        s = _U(lib).SWALR(o, swa_lr=0.01, anneal_epochs=4, anneal_strategy="linear")
        for _ in range(2):
            o.step()
            s.step()
        runs.append((o, s))
    (oa, sa), (ob, sb) = runs
    assert sa.state_dict() == sb.state_dict()
    o = tg.optim.SGD([tg.zeros(2, requires_grad=True)], lr=0.1)
    s = _U(tg).SWALR(o, swa_lr=0.01)
    o.load_state_dict(oa.state_dict())
    s.load_state_dict(sb.state_dict())
    for _ in range(4):
        ob.step()
        sb.step()
        o.step()
        s.step()
        assert s.get_last_lr() == sb.get_last_lr()


@pytest.mark.parametrize("variant", ["default", "ema_multi", "swa_multi", "ema"])
def test_compiled_step_averaging_the_model_equals_eager(variant):
    out = []
    for compiled in (False, True):
        tg.manual_seed(0)
        model = nn.Sequential(nn.Linear(4, 6), nn.Tanh(), nn.Linear(6, 3))
        avg = _U(tg).AveragedModel(model, **AVG[variant](_U(tg)))
        opt = tg.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
        sched = _U(tg).SWALR(opt, 0.05, anneal_epochs=3)

        def step(x, y):
            opt.zero_grad()
            loss = F.cross_entropy(model(x), y)
            loss.backward()
            opt.step()
            sched.step()
            avg.update_parameters(model)
            return loss
        f = tg.compile(step) if compiled else step
        seen = []
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            for _ in range(6):
                seen.append(f(tg.randn(5, 4), tg.randint(0, 3, (5,))).item())
                seen += [p.detach().numpy().tobytes() for p in avg.parameters()]
                seen += [avg.n_averaged.item(), sched.get_last_lr()]
        out.append((seen, getattr(f, "stats", None)))
    (eager, _), (comp, stats) = out
    assert comp == eager
    assert stats.traces <= 2 and stats.eager_calls == 0, str(stats)
