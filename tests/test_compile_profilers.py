"""Compiled functions under a profiler (Note [Primitives unwatched] in _dispatch.py): a
trace's effect watcher is a profile hook too; `cProfile` (a C profiler, which
`sys.setprofile` cannot take back) or a Python profile function active around compiled
calls keeps working, and is the profiler again after each call."""
import cProfile
import sys

import tracegrad as tg


def _training_step():
    m = tg.nn.Linear(3, 2)
    opt = tg.optim.SGD(m.parameters(), lr=0.1)

    @tg.compile
    def step(x):
        opt.zero_grad()
        loss = m(x).sum()
        loss.backward()
        opt.step()
        return loss
    return step


def test_cprofile_around_traced_and_cached_calls():
    step = _training_step()
    pr = cProfile.Profile()
    pr.enable()
    try:
        for _ in range(4):               # traces, then cached calls
            step(tg.ones(2, 3))
        still = sys.getprofile()
    finally:
        pr.disable()
    assert still is pr                   # re-installed after each trace
    assert step.stats.traces == 2 and step.stats.cache_hits == 2
    assert sys.getprofile() is None


def test_a_python_profile_function_is_restored_and_sees_user_code():
    seen = []

    def prof(frame, event, arg):
        if event == "call":
            seen.append(frame.f_code.co_name)
    step = _training_step()
    sys.setprofile(prof)
    try:
        for _ in range(3):
            step(tg.ones(2, 3))
        assert sys.getprofile() is prof
    finally:
        sys.setprofile(None)
    assert "step" in seen                # (the generated program is named after the function)
