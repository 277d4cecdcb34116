"""First-law review of the learning-rate schedulers not covered elsewhere (harness:
tests/_optim_review.py): each stepped inside and outside a compiled step, compared eager
against compiled (numpy and JAX backends) and eager against PyTorch; warm restarts with
fractional epochs and ReduceLROnPlateau.

The parametrised programs are probes, kept as regression guards (their JAX sweeps are
marked slow: `-m slow`)."""
import pytest

import tracegrad as tg
from _optim_review import Program, _data, _model, _train

nn, F = tg.nn, tg.nn.functional


# -- schedulers ----------------------------------------------------------------------------

def _sgd_m(lib, m):
    return lib.optim.SGD(m.parameters(), lr=0.1, momentum=0.9)


def _two_groups(lib, m):
    ps = list(m.parameters())
    return lib.optim.SGD([{"params": ps[:2]}, {"params": ps[2:], "lr": 0.03}], lr=0.1,
                         momentum=0.9)


def _adam(lib, m):
    return lib.optim.Adam(m.parameters(), lr=0.01)


SCHEDULERS = {
    "MultiStepLR": (_sgd_m, lambda lib, o: lib.optim.lr_scheduler.MultiStepLR(o, [1, 3, 3], 0.5)),
    "ExponentialLR 2 groups": (_two_groups,
                               lambda lib, o: lib.optim.lr_scheduler.ExponentialLR(o, 0.7)),
    "LinearLR": (_adam, lambda lib, o: lib.optim.lr_scheduler.LinearLR(o, 0.2, 1.0, 4)),
    "ConstantLR": (_two_groups, lambda lib, o: lib.optim.lr_scheduler.ConstantLR(o, 0.3, 3)),
    "PolynomialLR": (_adam, lambda lib, o: lib.optim.lr_scheduler.PolynomialLR(o, 4, 2.0)),
    "CosineAnnealingWarmRestarts": (
        _sgd_m, lambda lib, o: lib.optim.lr_scheduler.CosineAnnealingWarmRestarts(o, 2, 2,
                                                                                  0.001)),
    "CyclicLR SGD momentum": (
        _sgd_m, lambda lib, o: lib.optim.lr_scheduler.CyclicLR(o, 0.01, 0.1, step_size_up=2,
                                                               base_momentum=0.8,
                                                               max_momentum=0.95)),
    "CyclicLR exp_range 2 groups": (
        _two_groups, lambda lib, o: lib.optim.lr_scheduler.CyclicLR(
            o, [0.01, 0.02], [0.1, 0.05], step_size_up=1, step_size_down=2,
            mode="exp_range", gamma=0.9)),
    "CyclicLR Adam betas": (
        _adam, lambda lib, o: lib.optim.lr_scheduler.CyclicLR(o, 0.001, 0.01, step_size_up=2,
                                                              mode="triangular2")),
    "SequentialLR": (_sgd_m, lambda lib, o: lib.optim.lr_scheduler.SequentialLR(
        o, [lib.optim.lr_scheduler.LinearLR(o, 0.1, 1.0, 2),
            lib.optim.lr_scheduler.ExponentialLR(o, 0.8)], [2])),
    "ChainedScheduler": (_adam, lambda lib, o: lib.optim.lr_scheduler.ChainedScheduler(
        [lib.optim.lr_scheduler.ConstantLR(o, 0.5, 2),
         lib.optim.lr_scheduler.ExponentialLR(o, 0.9)])),
    "OneCycleLR Adam": (_adam, lambda lib, o: lib.optim.lr_scheduler.OneCycleLR(
        o, 0.05, total_steps=8)),
}


@pytest.mark.parametrize("inside", [True, False], ids=["inside", "outside"])
@pytest.mark.parametrize("name", list(SCHEDULERS))
def test_scheduler_compiled_equals_eager(name, inside):
    o, s = SCHEDULERS[name]
    Program.compare(_train(o, s, inside))


@pytest.mark.slow            # the JAX sweep: the defects' JAX tests above run by default
@pytest.mark.parametrize("name", list(SCHEDULERS))
def test_scheduler_on_jax_equals_eager(name):
    pytest.importorskip("jax")
    o, s = SCHEDULERS[name]
    Program.compare(_train(o, s), backend="jax")


@pytest.mark.parametrize("name", list(SCHEDULERS))
def test_scheduler_eager_equals_torch(name):
    o, s = SCHEDULERS[name]
    _train(o, s).against_torch()


def _warm_restarts(inside):
    """CosineAnnealingWarmRestarts stepped with fractional epochs, 3 batches an epoch."""
    def build(lib, dtype):
        m = _model(lib, dtype)
        opt = _sgd_m(lib, m)
        sched = lib.optim.lr_scheduler.CosineAnnealingWarmRestarts(opt, 1, 2)

        def step(x, y, epoch):
            opt.zero_grad()
            loss = lib.nn.functional.cross_entropy(m(x), y)
            loss.backward()
            opt.step()
            if inside:
                sched.step(epoch)
            return loss
        return step, dict(m=m, opt=opt, sched=sched)

    def call(lib, step, objs, i, dtype):
        epoch = i // 3 + (i % 3) / 3
        out = step(*_data(lib, i, dtype), epoch)
        if not inside:
            objs["sched"].step(epoch)
        return out
    return Program(build, call, n=8)


@pytest.mark.parametrize("inside", [True, False], ids=["inside", "outside"])
def test_warm_restarts_with_fractional_epochs(inside):
    p = _warm_restarts(inside)
    p.compare()
    p.against_torch()


def _plateau(inside, mode="min"):
    def build(lib, dtype):
        m = _model(lib, dtype)
        opt = _sgd_m(lib, m)
        sched = lib.optim.lr_scheduler.ReduceLROnPlateau(opt, mode, factor=0.5, patience=0,
                                                         threshold=0.5)

        def step(x, y):
            opt.zero_grad()
            loss = lib.nn.functional.cross_entropy(m(x), y)
            loss.backward()
            opt.step()
            if inside:
                sched.step(loss.item())
            return loss
        return step, dict(m=m, opt=opt, sched=sched)

    def call(lib, step, objs, i, dtype):
        out = step(*_data(lib, i, dtype))
        if not inside:
            objs["sched"].step(out.item())
        return out
    return Program(build, call, n=8)


@pytest.mark.parametrize("inside", [True, False], ids=["inside", "outside"])
def test_reduce_on_plateau(inside):
    p = _plateau(inside)
    p.compare(loud=inside)
    p.against_torch()
