"""`tracegrad.compile` takes `torch.compile`'s options with PyTorch's meaning:
`fullgraph=True` raises `tracegrad._dynamo.exc.Unsupported` where a call would run eagerly
(Note [Full graph] in compiler/fullgraph.py), `disable=True` returns the function itself,
`mode`/`options` exclude each other, `backend="inductor"` is the default backend."""
import warnings

import pytest

import tracegrad as tg

Unsupported = tg._dynamo.exc.Unsupported


LOG = []


def _effect(x):
    LOG.insert(0, 1)                     # an effect compile cannot replay
    return x * 2


def test_fullgraph_raises_where_the_call_would_run_eagerly():
    f = tg.compile(_effect, fullgraph=True)
    with warnings.catch_warnings():
        warnings.simplefilter("error")       # no warning: the error says it
        for _ in range(2):                   # the tracing call, then the known-eager entry
            with pytest.raises(Unsupported, match=r"fullgraph=True.*list\.insert\(\)"):
                f(tg.ones(2))
    assert issubclass(Unsupported, RuntimeError)
    assert f.stats.eager_calls == 1 and f.stats.traces == 1


def test_fullgraph_compiles_what_compiles_and_reports_the_cache_limit():
    f = tg.compile(lambda x, n: x.repeat(n), fullgraph=True, cache_limit=2)  # n: a size
    assert f(tg.ones(2), 1).tolist() == [1.0, 1.0]
    assert f(tg.ones(2), 1).tolist() == [1.0, 1.0]
    assert f.stats.cache_hits == 1
    f(tg.ones(2), 2)
    with pytest.raises(Unsupported, match="cache_limit=2"):
        f(tg.ones(2), 3)


def test_fullgraph_module_and_inner_compiled_functions():
    m = tg.compile(tg.nn.Linear(2, 2), fullgraph=True)
    assert m(tg.ones(1, 2)).shape == (1, 2)
    inner = tg.compile(lambda x: x + 1, fullgraph=True)
    outer = tg.compile(lambda x: inner(x) * 2, fullgraph=True)
    for _ in range(2):                   # inner runs inline in outer's trace: no error
        assert outer(tg.ones(2)).tolist() == [4.0, 4.0]


def test_fullgraph_keeps_eagers_error_for_a_failing_call():
    f = tg.compile(lambda x, w: x @ w, fullgraph=True)
    f(tg.ones(2, 3), tg.ones(3, 2))
    with pytest.raises(RuntimeError) as e:
        f(tg.ones(2, 3), tg.ones(2, 2))
    assert not isinstance(e.value, Unsupported)


def test_disable_mode_options_and_inductor():
    assert tg.compile(_effect, disable=True) is _effect
    assert tg.compile(disable=True)(_effect) is _effect
    with pytest.raises(RuntimeError, match="Either mode or options"):
        tg.compile(_effect, mode="max-autotune", options={"x": 1})
    f = tg.compile(lambda x: x * 2, backend="inductor", mode="reduce-overhead", dynamic=False)
    assert f.backend == "numpy" and f(tg.ones(1)).tolist() == [2.0]


def test_torch_accepts_the_same_options():
    torch = pytest.importorskip("torch")
    assert torch.compile(_effect, disable=True) is _effect
    with pytest.raises(RuntimeError, match="Either mode or options"):
        torch.compile(_effect, mode="max-autotune", options={"x": 1})
    assert hasattr(torch._dynamo.exc, "Unsupported")
