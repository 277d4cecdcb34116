"""Adversarial first-law tests of the mechanisms that write a compiled call's results into
Python state (Notes [Numbers written to Python state] in compiler/place_writes.py,
[Appends to the caller's lists] in compiler/append_replay.py, [Tensors written to Python
state] in compiler/tensor_places.py): programs written the way users write them, run for
several calls eagerly and compiled (numpy and JAX backends), with the state compared by
value, type and object identity."""
import pytest

import tracegrad as tg
import tracegrad.nn as nn
from _differential import compare

BACKENDS = ["numpy", pytest.param("jax", marks=pytest.mark.slow)]


def _backend(backend):
    if backend == "jax":
        pytest.importorskip("jax")


class _Seen:
    """What a caller can observe of a value: tensors by bytes, dtype and flags, numbers
    by type and repr, containers item by item (compared by equality in `compare`)."""

    def __init__(self, get):
        self.get = get

    def __eq__(self, other):
        return _view(self.get()) == _view(other.get())

    def __repr__(self):
        return repr(_view(self.get()))


class _Log:
    """A training log the step appends to (compared through `_Seen`, never by itself)."""

    def __init__(self):
        self.hist = []

    def __eq__(self, other):
        return True


def _view(v):
    if isinstance(v, tg.Tensor):
        return ("T", v.detach().numpy().round(5).tobytes(), str(v.dtype), v.requires_grad)
    if isinstance(v, dict):
        return {k: _view(x) for k, x in v.items()}
    if isinstance(v, (list, tuple)):
        return type(v).__name__, [_view(x) for x in v]
    if isinstance(v, float):
        return "float", f"{v:.6g}"
    return type(v).__name__, repr(v)


@pytest.mark.parametrize("backend", BACKENDS)
def test_a_detached_loss_appended_twice_is_one_object_as_eagerly(backend):
    # `v = loss.detach()` is a view of the returned loss: a cached call made a fresh
    # view for each repeat of it, so the list held two objects where eager holds one
    _backend(backend)

    def make(comp):
        m = nn.Linear(2, 1)
        log = _Log()

        def step(x):
            loss = m(x).pow(2).mean()
            v = loss.detach()
            log.hist.append(v)
            log.hist.append(v)
            return loss

        return comp(step), {"m": m, "hist": _Seen(lambda: log.hist), "log": log}

    def calls(step, objs, i):
        out = step(tg.randn(3, 2))
        hist = objs["log"].hist
        return _Seen(lambda: out), len(hist), hist[-1] is hist[-2]

    stats = compare(make, calls, n=6, backend=backend)
    assert stats.cache_hits == 5, stats


def test_a_view_returned_twice_is_one_object():
    w = tg.ones(3, requires_grad=True)

    def f(x):
        y = x * w
        v = y[1:]
        return y, v, v

    g = tg.compile(f)
    for _ in range(4):
        y, a, b = g(tg.ones(3))
        assert a is b
    assert g.stats.cache_hits == 3, g.stats


def _run_with_a_thread(comp, other, later):
    """Calls of `f` (reads cfg["lr"], sleeps while traced for a 5-long x) with `other`
    running in a thread during the first call with a 5-long x, then calls with the
    (lr, scale) of `later` set first; what the caller sees."""
    import threading
    import time
    cfg = {"lr": 1.0, "scale": 1.0}

    def f(x):
        y = x * cfg["lr"]
        if x.shape[0] == 5:
            time.sleep(0.2)              # (a trace's Python runs; a cached call's does not)
            if cfg["scale"] > 2.0:
                cfg["scale"] = 1.0       # a constant the function itself writes
        return y * cfg["scale"]

    g = comp(f)
    seen = []
    for lr in (1.0, 2.0, 3.0):           # the place becomes read per call
        cfg["lr"] = lr
        seen.append(g(tg.ones(2)).tolist())
    t = threading.Thread(target=other, args=(cfg,))
    t.start()
    seen.append(g(tg.ones(5)).tolist())
    t.join()
    seen.append(dict(cfg))
    for lr, scale in later:
        cfg["lr"], cfg["scale"] = lr, scale
        seen.append((g(tg.ones(5)).tolist(), dict(cfg)))
    return seen, getattr(g, "stats", None)


def test_a_number_another_thread_writes_during_a_trace_is_not_written_by_later_calls():
    # the trace found cfg["lr"] rewritten (by the other thread) and took it for a constant
    # the function writes: every cached call then set it back to 5.0 over the caller's 7.0
    import time

    def other(cfg):
        for _ in range(500):             # until the trace has its stand-in in the place
            if type(cfg["lr"]) is not float:
                break
            time.sleep(0.002)
        cfg["lr"] = 5.0

    later = ((7.0, 1.0), (8.0, 1.0), (9.0, 1.0))
    eager, _ = _run_with_a_thread(lambda f: f, other, later)
    compiled, stats = _run_with_a_thread(tg.compile, other, later)
    assert compiled == eager, (compiled, eager)


def test_a_constant_the_function_writes_is_still_replayed_while_another_thread_runs():
    import threading
    stop = threading.Event()

    def idle(cfg):
        stop.wait(5)

    def run(comp):
        t = threading.Thread(target=idle, args=(None,))
        t.start()
        try:
            return _run_with_a_thread(comp, lambda cfg: None,
                                      ((7.0, 3.0), (8.0, 0.5), (9.0, 4.0), (6.0, 5.0)))
        finally:
            stop.set()
            t.join()

    eager, _ = run(lambda f: f)
    stop.clear()
    compiled, stats = run(tg.compile)
    assert compiled == eager, (compiled, eager)
    assert stats.eager_calls == 0 and stats.cache_hits >= 2, stats


def test_items_another_thread_appends_during_a_trace_are_not_replayed():
    # the trace took everything past the list's old length for its own appends: each
    # cached call appended the other thread's "other" again
    import threading
    import time

    def run(comp):
        log = _Log()

        def f(x):
            log.hist.append(x.sum().item())
            if x.shape[0] == 5:
                time.sleep(0.2)          # (a trace's Python runs; a cached call's does not)
            return x * 2

        g = comp(f)
        g(tg.ones(2))
        g(tg.ones(2))

        def other():
            for _ in range(500):         # until the trace has appended
                if len(log.hist) > 2:
                    break
                time.sleep(0.002)
            log.hist.append("other")

        t = threading.Thread(target=other)
        t.start()
        g(tg.ones(5))
        t.join()
        for i in range(3):
            g(tg.ones(5) * i)
        return log.hist

    with pytest.warns(UserWarning, match="runs eagerly"):
        compiled = run(tg.compile)
    assert compiled == run(lambda f: f) == [2.0, 2.0, 5.0, "other", 0.0, 5.0, 10.0]


@pytest.mark.parametrize("where", ["state", "arguments"])
def test_a_counter_logged_with_json_dumps_runs_as_eagerly(where):
    # the second trace read the counter through a stand-in, which json's C encoder
    # refuses: that call raised a TypeError eager never raises
    import json

    def make(comp):
        log = _Log()
        log.step, log.lr = 0, 1.0

        def from_state(x):
            log.step += 1
            log.lr = log.lr * 0.5
            return x * log.lr, json.dumps({"step": log.step, "lr": log.lr})

        def from_arguments(x, step, lr):
            return x * lr, json.dumps({"step": step, "lr": lr})

        fn = from_state if where == "state" else from_arguments
        return comp(fn), {"log": _Seen(lambda: (log.step, log.lr))}

    def calls(step, objs, i):
        if where == "state":
            return step(tg.ones(2))
        return step(tg.ones(2), i, 0.1 * i)

    compare(make, calls, n=6, loud=True)


@pytest.mark.parametrize("use", ["statistics", "timedelta", "deque"])
def test_a_counter_given_to_c_code_taking_only_real_numbers_runs_as_eagerly(use):
    # statistics' type() coercion, timedelta's and deque's C argument checks refused the
    # stand-in with a TypeError eager never raises
    import collections
    import datetime
    import statistics

    def make(comp):
        log = _Log()
        log.step, log.lr = 0, 1.0

        def step(x):
            log.step += 1
            log.lr = log.lr * 0.5
            if use == "statistics":
                seen = statistics.mean([log.lr, 1.0])
            elif use == "timedelta":
                seen = datetime.timedelta(seconds=log.lr).total_seconds()
            else:
                seen = collections.deque([1, 2, 3], maxlen=log.step % 3 + 1).maxlen
            return x * log.lr, seen

        return comp(step), {"log": _Seen(lambda: (log.step, log.lr))}

    compare(make, lambda step, objs, i: step(tg.ones(2)), n=6, loud=True)


def test_a_counter_compared_with_a_literal_by_identity_runs_as_eagerly():
    # `self.step is 3` is True eagerly (CPython's small ints); a stand-in is never 3
    import warnings

    def make(comp):
        log = _Log()
        log.step = 0
        ns = {"log": log}
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", SyntaxWarning)   # ("is" with a literal)
            exec("def step(x):\n"
                 "    log.step += 1\n"
                 "    third = log.step is 3\n"
                 "    return x * 2, third\n", ns)
        return comp(ns["step"]), {"log": _Seen(lambda: log.step)}

    compare(make, lambda step, objs, i: step(tg.ones(2)), n=6, loud=True)


@pytest.mark.parametrize("eval_reads", [False, True])
def test_training_and_evaluation_paths_appending_to_different_lists(eval_reads):
    # each path kept a guard on the length of the list only the other path appends to:
    # alternating them re-traced on every call (up to cache_limit, then eagerly)
    def make(comp):
        m = nn.Linear(2, 1)
        log = _Log()
        log.train_hist, log.eval_hist = [], []

        def step(x, train):
            loss = m(x).pow(2).mean()
            if train:
                log.train_hist.append(loss.item())
            else:
                log.eval_hist.append(loss.item())
            return loss, None

        def reading(x, train):           # a path that reads the other list keeps its guard
            loss = m(x).pow(2).mean()
            if train:
                log.train_hist.append(loss.item())
                return loss, None
            log.eval_hist.append(loss.item())
            return loss, len(log.train_hist)

        fn = reading if eval_reads else step
        return comp(fn), {"m": m, "log": _Seen(lambda: (log.train_hist, log.eval_hist))}

    def calls(step, objs, i):
        loss, seen = step(tg.randn(3, 2), i % 3 != 0)
        return _Seen(lambda: loss), seen

    stats = compare(make, calls, n=12, loud=eval_reads)
    if not eval_reads:
        assert stats.traces == 2 and stats.cache_hits == 10, stats


class _WarmUp(tg.optim.lr_scheduler.LRScheduler):
    """A user's scheduler reading the trainer's step counter it holds."""

    def __init__(self, opt, log):
        self.log = log
        super().__init__(opt)

    def get_lr(self):
        return [base / (1 + self.log.step) for base in self.base_lrs]


@pytest.mark.parametrize("how", ["lambda", "comparison", "subclass"])
@pytest.mark.parametrize("backend", BACKENDS)
def test_a_scheduler_reading_the_step_counter_the_function_increments(backend, how):
    # the scheduler's lambda closes over the trainer (or the scheduler holds it), so the
    # trainer's attributes counted as the replayed step()'s own: cached calls never
    # incremented `step` and the learning rate stayed frozen
    _backend(backend)
    import tracegrad.nn.functional as F

    def make(comp):
        m = nn.Linear(3, 1)
        opt = tg.optim.SGD(m.parameters(), lr=0.1)
        log = _Log()
        log.step = 0
        if how == "comparison":          # (no stand-in escapes)
            sched = tg.optim.lr_scheduler.LambdaLR(
                opt, lambda epoch: 1.0 if log.step > 3 else 0.5)
        elif how == "lambda":
            sched = tg.optim.lr_scheduler.LambdaLR(opt, lambda epoch: 1.0 / (1 + log.step))
        else:
            sched = _WarmUp(opt, log)

        def step(x, y):
            loss = F.mse_loss(m(x), y)
            opt.zero_grad()
            loss.backward()
            opt.step()
            log.step += 1
            sched.step()
            return loss

        return comp(step), {"m": m, "opt": opt, "sched": sched,
                            "log": _Seen(lambda: log.step)}

    def calls(step, objs, i):
        loss = step(tg.randn(4, 3), tg.randn(4, 1))
        return _Seen(lambda: loss)

    compare(make, calls, n=7, backend=backend, loud=True)
