"""Issue 10, family 5: a compiled call's outputs are rebuilt on every call, whatever their
structure (dataclasses, namedtuples, custom objects, dicts, `x.shape`/`Size`, Python numbers
computed from tensors), never the first call's objects; the harness checks values, structure
and that each non-tensor output is a fresh object (tests/soundness_harness.py)."""
import collections
import dataclasses

import pytest

import tracegrad as tg
from soundness_harness import State, check_same


@dataclasses.dataclass
class Out:
    loss: object
    logits: object
    n: int = 0


Pair = collections.namedtuple("Pair", ["value", "grad_norm"])


class Result:
    def __init__(self, loss, parts):
        self.loss = loss
        self.parts = parts


def _w(env, s, n=3):
    s.w = env.randn(n, seed=1, requires_grad=True)
    s.args = lambda i: ((env.randn(n, seed=i),), {})


def test_returned_dataclass_is_rebuilt_each_call():
    def make(env):
        s = State()
        _w(env, s)
        s.fn = lambda x: Out(loss=(x * s.w).sum(), logits=x * s.w, n=3)
        return s
    check_same(None, make, torch=True)


def test_returned_namedtuple():
    def make(env):
        s = State()
        _w(env, s)
        s.fn = lambda x: Pair((x * s.w).sum(), (x * s.w).norm())
        return s
    check_same(None, make, torch=True)


def test_returned_custom_object():
    def make(env):
        s = State()
        _w(env, s)
        s.fn = lambda x: Result((x * s.w).sum(), [x * s.w, {"sq": (x * s.w) ** 2}])
        return s
    check_same(None, make, torch=True)


def test_returned_object_mutated_by_the_caller_does_not_leak_into_the_next_call():
    def make(env):
        s = State()
        _w(env, s)
        s.fn = lambda x: {"loss": (x * s.w).sum(), "extra": []}

        def backward(i, out):
            out["extra"].append(i)          # the caller decorates the result
            out["loss"].backward()
        s.backward = backward
        return s
    check_same(None, make, torch=True)


def test_returned_shape():
    def make(env):
        s = State()
        s.args = lambda i: ((env.randn(2 + i % 2, 3, seed=i),), {})
        s.fn = lambda x: x.shape
        return s
    check_same(None, make, calls=4, torch=True)


def test_returned_tensor_and_its_shape():
    def make(env):
        s = State()
        _w(env, s)
        s.fn = lambda x: (x * s.w, (x * s.w).shape, x.size(0))
        return s
    check_same(None, make, torch=True)


def test_returned_python_float_computed_from_a_tensor():
    def make(env):
        s = State()
        _w(env, s)

        def f(x):
            loss = (x * s.w).sum()
            return loss, float(loss.detach()), loss.item() > 0
        s.fn = f
        return s
    check_same(None, make, torch=True)


def test_returned_input_is_the_same_object():
    def make(env):
        s = State(same=[])

        def f(x):
            x.mul_(2)
            return x
        s.fn = f

        def args(i):
            s.last = env.randn(3, seed=i)
            return (s.last,), {}
        s.args = args

        def backward(i, out):
            s.same.append(out is s.last)
        s.backward = backward
        s.observe = lambda: list(s.same)
        return s
    check_same(None, make, torch=True, versions=True)


def test_output_aliasing_a_view_of_the_input():
    def make(env):
        s = State()
        s.args = lambda i: ((env.randn(2, 3, seed=i),), {})

        def f(x):
            v = x[0]
            return v, x

        def backward(i, out):
            out[0].add_(100.0)                  # writes through the view into x
        s.fn = f
        s.backward = backward
        return s
    check_same(None, make, torch=True, versions=True)


def test_nested_output_structure_changes_with_a_python_flag():
    def make(env):
        s = State()
        _w(env, s)
        s.args = lambda i: ((env.randn(3, seed=i), i % 2 == 0), {})
        s.fn = lambda x, full: ({"y": x * s.w, "aux": (x,)} if full else [x * s.w])
        return s
    check_same(None, make, torch=True)


def test_an_output_that_cannot_be_rebuilt_is_refused_at_trace_time_or_fresh():
    """A generator or an open file cannot be rebuilt: compiling must raise at trace time (a
    TypeError/RuntimeError family error), or give a fresh correct object each call."""
    def f(x):
        y = x * 2
        return (t for t in (y, y + 1))
    c = tg.compile(f)
    try:
        first = list(c(tg.ones(2)))
    except (TypeError, RuntimeError):
        return
    second = list(c(tg.full((2,), 3.0)))
    assert [t.tolist() for t in first] == [[2.0, 2.0], [3.0, 3.0]]
    assert [t.tolist() for t in second] == [[6.0, 6.0], [7.0, 7.0]]


def test_torch_size_output_is_a_size():
    torch = pytest.importorskip("torch")
    c = tg.compile(lambda x: x.shape)
    outs = [c(tg.ones(2, 3)), c(tg.ones(2, 3)), c(tg.ones(4, 1))]
    assert [tuple(o) for o in outs] == [(2, 3), (2, 3), (4, 1)]
    assert all(type(o).__name__ == type(torch.ones(2).shape).__name__ for o in outs)
