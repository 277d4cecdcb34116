"""Numbers inside the lists and dicts passed to a compiled function are read per call once
they change, as top-level float and int arguments are (Note [Float arguments that change]
in compiler/dynamic_numbers.py): a list of rewards, a dict of loss weights. Each call is
eager's, the caller's containers hold their own numbers after every call, and what needs
a number's exact value keeps a path per value."""
import warnings

import numpy as np
import pytest

import tracegrad as tg


def _returns(x, rewards, gamma=0.9):
    R, out = 0.0, []
    for r in reversed(rewards):
        R = r + gamma * R
        out.insert(0, R)
    rets = tg.tensor(out)
    return (x * (rets - rets.mean())).sum()


def _weighted(x, cfg):
    return (x * cfg["w"]).sum() + cfg["b"] * x.mean() + cfg["n"] * 2


def _run(fn, calls, backend="numpy"):
    cf = tg.compile(fn, backend=backend)
    for args in calls:
        before = [list(a) if isinstance(a, list) else dict(a) if isinstance(a, dict) else a
                  for a in args]
        want = fn(*args).numpy()
        got = cf(*args).numpy()
        if backend == "numpy":
            np.testing.assert_array_equal(got, want)
        else:
            np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6)
        for a, b in zip(args, before):       # the caller's containers hold what they held
            if isinstance(a, (list, dict)):
                assert a == b and all(type(u) is type(v) for u, v in zip(
                    a.values() if isinstance(a, dict) else a,
                    b.values() if isinstance(b, dict) else b))
    return cf


@pytest.mark.parametrize("backend", ["numpy", "jax"])
def test_a_list_of_rewards_is_read_per_call(backend):
    if backend == "jax":
        pytest.importorskip("jax")
    x = tg.ones(3)
    calls = [(x, [0.1 * i, 1.0 - 0.2 * i, 0.5 * i]) for i in range(6)]
    cf = _run(_returns, calls, backend)
    assert cf.stats.traces == 2, cf.stats
    assert "'rewards[0]'" in cf.stats.retraces[0] and "read per call" in cf.stats.retraces[0]


def test_a_dict_of_weights_with_an_int_is_read_per_call():
    x = tg.arange(4.0)
    calls = [(x, {"w": 0.5 + i, "b": -0.25 * i, "n": i}) for i in range(5)]
    cf = _run(_weighted, calls)
    assert cf.stats.traces == 2, cf.stats


def test_numbers_in_a_tuple_keep_a_path_per_value():
    x = tg.ones(2)
    calls = [(x, (0.5 * i, 1.0)) for i in range(3)]
    cf = _run(lambda x, t: x * t[0] + t[1], calls)
    assert cf.stats.traces == 3


def test_a_number_used_exactly_keys_by_value_and_stays_right():
    def f(x, ws):
        return x * ws[0] if f"{ws[0]:.1f}" != "1.0" else x * 100
    x = tg.ones(2)
    cf = _run(f, [(x, [0.5 * i]) for i in range(5)])
    assert cf.stats.eager_calls == 0


def test_the_length_changing_traces_anew_and_a_mutation_stays_eager():
    x = tg.ones(3)
    cf = _run(lambda x, rs: _returns(x[:len(rs)], rs), [(x, [0.1 * i] * (2 + i // 3)) for i in range(6)])
    assert cf.stats.traces <= 4

    def grows(x, rs):
        rs.append(rs[-1] * 2)
        return x * rs[0]
    cf = tg.compile(grows)
    for i in range(4):
        a, b = [0.5 * i + 1, 1.0], [0.5 * i + 1, 1.0]
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            assert cf(x, a).tolist() == grows(x, b).tolist()
        assert a == b


def test_an_error_in_the_trace_puts_the_numbers_back():
    def f(x, ws):
        if ws[1] < 0:
            raise ValueError("negative")
        return x * ws[0]
    cf = tg.compile(f)
    x = tg.ones(2)
    cf(x, [1.0, 1.0])
    cf(x, [2.0, 1.0])                    # ws[0] read per call from now on
    ws = [3.0, -1.0]
    with pytest.raises(ValueError, match="negative"):
        cf(x, ws)
    assert ws == [3.0, -1.0] and all(type(v) is float for v in ws)
    assert cf(x, [4.0, 2.0]).tolist() == [4.0, 4.0]


def test_a_stored_list_holds_plain_floats():
    kept = []

    def f(x, ws):
        kept.append(ws)
        return x * ws[0]
    cf = tg.compile(f)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        for i in range(3):
            cf(tg.ones(1), [float(i)])
    assert all(type(w[0]) is float for w in kept)
