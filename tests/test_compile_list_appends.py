"""Appends to the caller's lists inside a compiled function (Note [Appends to the caller's
lists] in compiler/append_replay.py): a list the traced code only appends to grows on every
cached call, with that call's values, as eagerly; a list it also reads, or an item no call
can rebuild, keeps the step eager, loudly."""
import pytest

import tracegrad as tg
import tracegrad.nn as nn
import tracegrad.nn.functional as F
from _differential import compare

HISTORY = []


class Trainer:
    def __init__(self, comp, body):
        self.model = nn.Linear(3, 1)
        self.opt = tg.optim.SGD(self.model.parameters(), lr=0.1, momentum=0.9)
        self.losses, self.hist, self.count = [], [], 0
        self.body = body
        self.step = comp(self.step)

    def step(self, x, y):
        loss = F.mse_loss(self.model(x), y)
        self.opt.zero_grad()
        loss.backward()
        self.opt.step()
        return self.body(self, loss)


def _make(body):
    def make(comp):
        HISTORY.clear()
        t = Trainer(comp, body)
        return t.step, {"model": t.model, "opt": t.opt,
                        "lists": _Lists(t)}
    return make


class _Lists:
    """The trainer's lists and the global one, compared by contents (values and types)."""

    def __init__(self, t):
        self.t = t

    def _view(self):
        def one(v):
            if isinstance(v, tg.Tensor):
                return ("T", v.detach().numpy().tobytes(), v.requires_grad)
            return (type(v).__name__, repr(v))
        return [[one(v) for v in lst] for lst in (self.t.losses, self.t.hist, HISTORY)]

    def __eq__(self, other):
        return self._view() == other._view()


def _calls(step, objs, i):
    return step(tg.randn(4, 3), tg.randn(4, 1))


def _body_item(t, loss):
    t.losses.append(loss.item())
    t.hist.append(loss.detach())
    HISTORY.append("step")
    return loss


def _body_counter(t, loss):
    t.count += 1
    t.losses.append(t.count)
    t.losses.append(loss.item() * 2)
    return loss


@pytest.mark.parametrize("body", [_body_item, _body_counter], ids=["item", "counter"])
def test_lists_only_appended_to_compile_and_grow_each_call(body):
    stats = compare(_make(body), _calls, n=6)
    assert stats.eager_calls == 0 and stats.cache_hits >= 3, stats


def _body_reads_len(t, loss):
    t.losses.append(loss.item())
    return loss * len(t.losses)


def _body_reads_last(t, loss):
    t.losses.append(loss.item())
    return loss + t.losses[-1]


def _body_returns_list(t, loss):
    t.losses.append(loss.item())
    return loss, t.losses


def _body_tuple(t, loss):
    t.losses.append((t.count, loss.item()))
    return loss


def _body_graph(t, loss):
    t.hist.append(loss * 2)              # keeps the graph: not replayed
    return loss


def _body_getattr(t, loss):
    getattr(t, "losses").append(loss.item())
    return loss


def _body_alias(t, loss):
    lst = t.losses
    lst.append(loss.item())
    return loss


@pytest.mark.parametrize("body", [_body_reads_len, _body_reads_last, _body_returns_list,
                                  _body_tuple, _body_graph, _body_getattr, _body_alias])
def test_lists_also_read_or_holding_what_no_call_rebuilds_run_eagerly(body):
    compare(_make(body), _calls, n=5, loud="must")


def test_list_appends_on_the_jax_backend():
    pytest.importorskip("jax")
    runs = []
    for comp in (lambda f: f, lambda f: tg.compile(f, backend="jax")):
        tg.manual_seed(0)
        t = Trainer(comp, _body_item)
        for _ in range(5):
            t.step(tg.randn(4, 3), tg.randn(4, 1))
        runs.append(t)
    e, c = runs
    assert len(c.losses) == len(c.hist) == 5 and all(type(v) is float for v in c.losses)
    assert c.losses == pytest.approx(e.losses, rel=1e-5)
    assert len({id(h) for h in c.hist}) == 5
    assert c.step.stats.eager_calls == 0 and c.step.stats.cache_hits == 3, c.step.stats


def test_the_caller_clearing_or_rebinding_the_list_between_calls():
    def calls(step, objs, i):
        t = objs["lists"].t
        if i == 2:
            t.losses.clear()
        if i == 4:
            t.losses = [0.5]                 # another list: the next call appends to it
        return step(tg.randn(4, 3), tg.randn(4, 1))
    compare(_make(_body_item), calls, n=7)


def test_lists_in_a_history_dict_only_appended_to():
    def body(t, loss):
        t.history["loss"].append(loss.item())
        t.history["count"].append(len(t.history["seen"]))    # another entry, only read
        return loss

    def make(comp):
        HISTORY.clear()
        t = Trainer(comp, body)
        t.history = {"loss": [], "count": [], "seen": [1, 2]}
        return t.step, {"model": t.model, "opt": t.opt, "history": t.history}

    stats = compare(make, _calls, n=6)
    assert stats.eager_calls == 0 and stats.cache_hits >= 3, stats


@pytest.mark.parametrize("read", ["len", "get", "items", "return"])
def test_a_history_dict_also_read_runs_eagerly(read):
    def body(t, loss):
        t.history["loss"].append(loss.item())
        if read == "len":
            return loss * len(t.history["loss"])
        if read == "get":
            return loss * len(t.history.get("loss"))
        if read == "items":
            return loss * sum(len(v) for _, v in t.history.items())
        return loss, t.history

    def make(comp):
        HISTORY.clear()
        t = Trainer(comp, body)
        t.history = {"loss": []}
        return t.step, {"model": t.model, "opt": t.opt, "history": t.history}

    compare(make, _calls, n=5, loud="must")
