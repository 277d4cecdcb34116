"""A call the last entry's key check accepts runs the entry's only path directly when it
draws no random numbers (Note [One path, no draws] in compiler/function.py). Every way
that path can stop fitting must still send the call where the general loop over paths
would: a guard coming out differently (a second path, then both served), Python state it
read changing, an error inside the program (eager's error), and a path that draws random
numbers never takes the shortcut (a failed guard after a draw rewinds the generator).
"""
import numpy as np
import pytest

import tracegrad as tg


def _branchy(x):
    if x.sum() > 0:
        return x * 2
    return x - 1


def test_a_guard_failing_on_the_shortcut_traces_a_second_path_then_serves_both():
    c = tg.compile(_branchy)
    pos, neg = tg.tensor([1.0, 2.0]), tg.tensor([-1.0, -2.0])
    for x in (pos, pos, pos):
        np.testing.assert_array_equal(c(x).numpy(), _branchy(x).numpy())
    entry = c._hit
    assert entry is not None and entry.solo is entry.paths[0]
    for x in (neg, pos, neg, neg, pos):
        np.testing.assert_array_equal(c(x).numpy(), _branchy(x).numpy())
    assert c.stats.traces == 2
    assert len(entry.paths) == 2 and entry.solo is None     # two paths: the general loop


SCALE = [2.0]


def _scaled(x):
    return x * SCALE[0]


def test_python_state_changing_on_the_shortcut_is_seen():
    c = tg.compile(_scaled)
    x = tg.tensor([1.0, 3.0])
    try:
        for _ in range(3):
            c(x)
        assert c._hit.solo is not None
        SCALE[0] = 5.0
        np.testing.assert_array_equal(c(x).numpy(), [5.0, 15.0])
        np.testing.assert_array_equal(c(x).numpy(), [5.0, 15.0])
    finally:
        SCALE[0] = 2.0
    np.testing.assert_array_equal(c(x).numpy(), [2.0, 6.0])


def _index(x, i):
    return x[i] * 2


def test_an_error_inside_the_program_on_the_shortcut_is_eagers():
    c = tg.compile(_index)
    x, i = tg.tensor([1.0, 2.0, 3.0]), tg.tensor([0, 2, 1])
    c(x, i)
    c(x, i)
    assert c._hit.solo is not None
    bad = tg.tensor([0, 9, 1])
    with pytest.raises(IndexError) as eager:
        _index(x, bad)
    with pytest.raises(IndexError) as compiled:
        c(x, bad)
    assert str(compiled.value) == str(eager.value)
    assert c.stats.eager_calls == 1 and c.stats.traces == 1
    np.testing.assert_array_equal(c(x, i).numpy(), [2.0, 6.0, 4.0])


def _noisy(x):
    y = x + tg.rand(3) * 0.1
    if y.sum() > 0:
        return y * 2
    return y


def test_a_path_drawing_random_numbers_takes_the_general_loop():
    pos, neg = tg.tensor([1.0, 1.0, 1.0]), tg.tensor([-1.0, -1.0, -1.0])
    xs = [pos, pos, pos, pos, neg, neg, pos, neg]   # the guard fails after cache hits
    tg.manual_seed(0)
    want = [_noisy(x).numpy() for x in xs]
    c = tg.compile(_noisy)
    tg.manual_seed(0)
    got = []
    for x in xs:
        got.append(c(x).numpy())
        assert all(e.solo is None for e in c.entries.values())
    for a, b in zip(got, want):        # the draw before the failed guard was rewound
        np.testing.assert_array_equal(a, b)
    assert c.stats.cache_hits >= 4


def test_the_training_step_takes_the_shortcut_and_matches_eager():
    def make():
        tg.manual_seed(0)
        model = tg.nn.Sequential(tg.nn.Linear(4, 8), tg.nn.ReLU(), tg.nn.Linear(8, 3))
        opt = tg.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
        loss_fn = tg.nn.CrossEntropyLoss()

        def step(x, y):
            opt.zero_grad()
            loss = loss_fn(model(x), y)
            loss.backward()
            opt.step()
            return loss
        return model, opt, step
    rng = np.random.default_rng(0)
    batches = [(tg.tensor(rng.standard_normal((6, 4)).astype(np.float32)),
                tg.tensor(rng.integers(0, 3, 6))) for _ in range(6)]
    m_e, _, eager = make()
    m_c, opt_c, step = make()
    c = tg.compile(step)
    for k, (x, y) in enumerate(batches):
        if k == 4:                      # a hyper-parameter changed between steps
            opt_c.param_groups[0]["lr"] = 0.05
            eager_opt(eager).param_groups[0]["lr"] = 0.05
        a, b = c(x, y), eager(x, y)
        assert a.item() == b.item()
    for p, q in zip(m_c.parameters(), m_e.parameters()):
        np.testing.assert_array_equal(p.detach().numpy(), q.detach().numpy())
        np.testing.assert_array_equal(p.grad.numpy(), q.grad.numpy())
    assert c.stats.cache_hits >= 3
    assert any(e.solo is not None for e in c.entries.values())


def eager_opt(step):
    """The optimizer a `make()` step closes over."""
    cells = dict(zip(step.__code__.co_freevars, step.__closure__))
    return cells["opt"].cell_contents
