"""`copy.deepcopy(model.state_dict())` inside a compiled function (the transfer-learning
tutorial keeps its best weights so): each entry is an alias of a whole parameter's storage
(`p.detach()`), copied as a clone when no other tensor of that deepcopy shares the
storage, so the call compiles. Copies of tensors sharing storage, or of a part of one,
still run eagerly, the tracing call included (eager's copies share storage as the
originals did)."""
import copy

import tracegrad as tg
from _differential import compare


def test_deepcopy_of_a_state_dict_compiles():
    def make(comp):
        model = tg.nn.Sequential(tg.nn.Linear(3, 2), tg.nn.BatchNorm1d(2))
        opt = tg.optim.SGD(model.parameters(), lr=0.1)

        def step(x):
            opt.zero_grad()
            loss = model(x).square().mean()
            loss.backward()
            opt.step()
            return loss, copy.deepcopy(model.state_dict())
        return comp(step), {"model": model}

    def calls(step, objs, i):
        loss, wts = step(tg.randn(4, 3))
        with tg.no_grad():                   # the copies own their memory
            for p in objs["model"].parameters():
                p.add_(1.0)
        return loss, [(k, v.detach().clone()) for k, v in wts.items()]
    stats = compare(make, calls, n=5)
    assert stats.eager_calls == 0 and stats.cache_hits >= 3, str(stats)


def test_copies_sharing_storage_stay_eager():
    for pair in (lambda p: {"a": p.detach(), "b": p.detach()},
                 lambda p: {"a": p.detach()[1:]}):
        def make(comp):
            p = tg.nn.Parameter(tg.randn(3))

            def f(x):
                c = copy.deepcopy(pair(p))
                return (x * p).sum(), c
            return comp(f), {"p": p}

        def calls(f, objs, i):
            out, c = f(tg.randn(3))
            first = next(iter(c.values()))
            with tg.no_grad():
                first.mul_(2)                # seen through every copy sharing its storage
            return out, c
        stats = compare(make, calls, n=3, loud="must")
        assert stats.eager_calls > 0
