"""`tracegrad.compiler.reset / disable / is_compiling`: the `torch.compiler` functions user
code calls, with PyTorch's meaning wherever a path without graph breaks can give it."""
import warnings

import numpy as np
import pytest

import tracegrad as tg


def test_disable_keeps_the_functions_python_running_on_every_call():
    seen = []

    @tg.compiler.disable
    def log_metric(v):
        seen.append(v.item())

    def step(x):
        y = (x * 2).sum()
        log_metric(y)
        return y

    c = tg.compile(step)
    with pytest.warns(UserWarning, match="'log_metric', marked with tracegrad.compiler.disable"):
        outs = [c(tg.ones(2) * i).item() for i in range(4)]
    assert outs == [0.0, 4.0, 8.0, 12.0]
    assert seen == outs                   # eager's side effects, one per call
    assert c.stats.traces == 1 and c.stats.eager_calls == 3


def test_disable_with_arguments_and_on_methods_keeps_names_and_results():
    class Logger:
        def __init__(self):
            self.n = 0

        @tg.compiler.disable(reason="logging")
        def bump(self, by=1):
            """Count a call."""
            self.n += by
            return self.n

    lg = Logger()
    assert Logger.bump.__name__ == "bump" and Logger.bump.__doc__ == "Count a call."
    c = tg.compile(lambda x: x + lg.bump(by=2))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        outs = [c(tg.zeros(1)).item() for _ in range(3)]
    assert outs == [2.0, 4.0, 6.0] and lg.n == 6


def test_is_compiling_is_true_in_the_trace_and_on_cached_calls_false_eagerly():
    def f(x):
        return x + 1 if tg.compiler.is_compiling() else x - 1

    c = tg.compile(f)
    assert f(tg.zeros(1)).item() == -1.0
    assert [c(tg.zeros(1)).item() for _ in range(3)] == [1.0, 1.0, 1.0]
    assert c.stats.traces == 1
    assert tg.compiler.is_compiling() is False
    assert tg.compiler.is_dynamo_compiling() is False


def test_reset_drops_every_path_and_the_next_call_traces_again():
    scale = {"k": 2.0}

    def f(x):
        return x * scale["k"]

    a, b = tg.compile(f), tg.compile(lambda x: x.exp())
    for _ in range(2):
        a(tg.ones(2))
        b(tg.ones(2))
    assert a.stats.traces == 1 and a.stats.cache_hits == 1
    tg.compiler.reset()
    assert a.programs == [] and b.programs == []
    np.testing.assert_array_equal(a(tg.ones(2)).numpy(), [2.0, 2.0])
    assert a.stats.traces == 2
    assert "traced because: tracegrad.compiler.reset() was called" in a.explain()
    b(tg.ones(2))
    assert b.stats.traces == 2


def test_reset_restarts_the_cache_limit():
    c = tg.compile(lambda x, n: x * n, cache_limit=2)
    for n in (1, 2):
        c(tg.ones(1), n)
    tg.compiler.reset()
    with warnings.catch_warnings():
        warnings.simplefilter("error")       # no "cache limit reached" fallback
        for n in (3, 4):
            assert c(tg.ones(1), n).item() == n
    assert c.stats.eager_calls == 0


def test_names_match_torch_compiler():
    torch = pytest.importorskip("torch")
    for name in ("reset", "disable", "is_compiling", "is_dynamo_compiling"):
        assert hasattr(torch.compiler, name) and hasattr(tg.compiler, name)


def test_dynamo_names_scripts_call():
    import tracegrad as torch
    torch._dynamo.reset()
    old = torch._dynamo.config.cache_size_limit
    assert old == torch._dynamo.config.recompile_limit == 8
    try:
        torch._dynamo.config.cache_size_limit = 2
        c = torch.compile(lambda x, n: x.repeat(n))     # (n's value is needed: a path each)
        with pytest.warns(UserWarning, match="reached cache_limit=2"):
            for n in range(3):
                c(torch.ones(1), n)
        assert torch.compile(lambda x: x, cache_limit=5).cache_limit == 5
    finally:
        torch._dynamo.config.recompile_limit = old
    assert torch.compile(lambda x: x).cache_limit == 8
    m = torch.compile(torch.nn.Linear(2, 2))
    assert isinstance(m, torch._dynamo.OptimizedModule)
    assert torch._dynamo.is_compiling() is False
