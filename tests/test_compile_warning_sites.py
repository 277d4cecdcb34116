"""The compiler's own warnings (a call running eagerly, a cache limit reached) point at the
user's line, however it reached the compiled function: called directly, as a compiled
module, through `tg.func` transforms or in check mode (`user_stacklevel` in _errors.py)."""
import warnings

import pytest

import tracegrad as tg


def _compile_warnings(call):
    with warnings.catch_warnings(record=True) as w:
        warnings.simplefilter("always")
        call()
    return [x for x in w if str(x.message).startswith("tracegrad.compile")]


def _appends(x, log=[]):                 # noqa: B006 (an effect compile cannot replay)
    log.insert(0, 1)
    return (x * x).sum()


class _Logs(tg.nn.Module):
    def __init__(self):
        super().__init__()
        self.lin, self.log = tg.nn.Linear(2, 2), []

    def forward(self, x):
        self.log.insert(0, 1)
        return self.lin(x)


@pytest.mark.parametrize("how", ["direct", "module", "func.grad", "check"])
def test_eager_fallback_warning_names_the_callers_line(how):
    x = tg.ones(2)
    if how == "direct":
        f = tg.compile(_appends)
    elif how == "module":
        f = tg.compile(_Logs())
    elif how == "func.grad":
        f = tg.func.grad(_appends)
    else:
        f = tg.compile(_appends, check=True)
    ws = _compile_warnings(lambda: [f(x) for _ in range(3)])
    assert ws, "expected a warning that the call runs eagerly"
    assert {w.filename for w in ws} == {__file__}, [(w.filename, w.lineno) for w in ws]


def test_cache_limit_warning_names_the_callers_line():
    f = tg.compile(lambda x, n: x.repeat(n), cache_limit=2)     # n: a size, keyed by value
    ws = _compile_warnings(lambda: [f(tg.ones(1), n) for n in range(4)])
    assert [w.filename for w in ws] == [__file__]
