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


# -- Note [Containers returned as they are]: an object that existed before the call is
# returned as that very object, as eager does, never a rebuilt copy

def _returning_existing():
    """(name, make() -> (fn, args, the object eager returns)) for each place a returned
    object can come from."""
    def state_dict_of_optimizer():
        m = tg.nn.Linear(2, 2)
        opt = tg.optim.SGD(m.parameters(), lr=0.1, momentum=0.9)

        def step(x):
            opt.zero_grad()
            m(x).sum().backward()
            opt.step()
            return opt.state[m.weight]
        return step, (tg.ones(2),), lambda: opt.state[m.weight]

    def global_dict():
        cfg = {"scale": 2.0, "w": tg.ones(2)}

        def f(x):
            return x * cfg["scale"], cfg
        return f, (tg.ones(2),), lambda: cfg

    def argument_dict():
        batch = {"x": tg.ones(2)}
        return (lambda d: d), (batch,), lambda: batch

    def argument_list_with_output():
        xs = [tg.ones(2)]
        return (lambda xs: (xs[0] * 2, xs)), (xs,), lambda: xs

    def user_object():
        class Box:
            pass
        box = Box()
        box.w = tg.ones(2)
        return (lambda x: (x + box.w, box)), (tg.ones(2),), lambda: box

    def history_list():
        hist = []

        def f(x):
            loss = (x * 2).sum()
            hist.append(loss.detach())
            return hist
        return f, (tg.ones(2),), lambda: hist
    return [(f.__name__, f) for f in (state_dict_of_optimizer, global_dict, argument_dict,
                                      argument_list_with_output, user_object, history_list)]


def _find(out, obj):
    if out is obj:
        return True
    if isinstance(out, (tuple, list)):
        return any(_find(o, obj) for o in out)
    return False


@pytest.mark.parametrize("name,make", _returning_existing())
def test_an_object_that_existed_before_the_call_is_returned_as_that_object(name, make):
    fn, args, expected = make()
    assert _find(fn(*args), expected())                # eager: the very object
    fn2, args2, expected2 = make()
    c = tg.compile(fn2)
    with pytest.warns(UserWarning, match="runs eagerly"):   # loud, never a silent copy
        for _ in range(4):
            assert _find(c(*args2), expected2()), name  # compiled: the same, every call


def test_containers_the_function_builds_stay_compiled_and_fresh():
    def f(x):
        return {"y": x * 2}, [x + 1]
    c = tg.compile(f)
    outs = [c(tg.ones(2)) for _ in range(3)]
    assert c.stats.eager_calls == 0 and c.stats.cache_hits == 2
    assert outs[1][0] is not outs[2][0] and outs[1][1] is not outs[2][1]
