"""Small general programs, written as PyTorch users write them, run eagerly and compiled over
several calls with changing inputs: everything the caller can see must be the same
(outputs, the caller's containers and tensors, version counters, generator state, errors).
Each test is a divergence found by an adversarial review, minimized."""
import collections
import itertools
import warnings

import numpy as np
import pytest

import tracegrad as tg
from _differential import assert_same_records, records, view as _view


def _t(seed, *shape, requires_grad=False):
    a = np.random.default_rng(seed).standard_normal(shape).astype(np.float32)
    return tg.tensor(a, requires_grad=requires_grad)


def _both(fn, make, calls=4, backend="numpy", observe=None):
    """[eager records, compiled records], with the generator's state after each call."""
    return records(fn, make, calls, backend, observe, rng=True)[:2]


def _assert_same(recs):
    assert_same_records(*recs)


# -- assignments into the caller's containers (Note [Assignments into argument containers])

def test_item_assignment_into_a_dict_argument_reaches_the_caller():
    def f(batch):
        batch["y"] = batch["x"] * 2           # STORE_SUBSCR: no call a profiler sees
        batch["n"] = batch.get("n", 0) + 1
        return batch["y"].sum()

    with warnings.catch_warnings(record=True) as w:
        warnings.simplefilter("always")
        _assert_same(_both(f, lambda i: ({"x": _t(i, 3, requires_grad=True)},)))
    assert any("argument 'batch'" in str(x.message) for x in w)


@pytest.mark.parametrize("body", ["setitem", "iadd", "delitem", "accumulate"])
def test_list_and_dict_arguments_changed_by_bytecodes(body):
    def f(xs, d):
        if body == "setitem":
            xs[0] = xs[0] * 3
        elif body == "iadd":
            xs += [xs[1] + 1]
        elif body == "delitem":
            del d["b"]
        else:
            d["acc"] = d["acc"] + xs[0].sum()
        return xs[1] * 2

    def make(i):
        return [_t(i, 2), _t(i + 9, 2)], {"b": 1.0, "acc": tg.zeros(())}

    with pytest.warns(UserWarning, match="an assignment into argument"):
        _assert_same(_both(f, make))


# -- an error after in-place updates (Note [Errors inside compiled programs] in codegen.py) --

def test_in_place_update_before_an_out_of_range_index_is_kept_as_eager_keeps_it():
    def f(x, idx):
        y = x * 2
        x.mul_(3)                             # eager applies this before the error below
        z = y[idx]
        x.add_(1)
        return z

    _assert_same(_both(f, lambda i: (tg.ones(3), tg.tensor([[0], [1], [7], [2]][i]))))


def test_update_written_straight_into_the_input_waits_for_the_index_that_may_raise():
    def f(x, w, idx):
        x.mul_(w)                             # elementwise: the plan may write it into x
        return w[idx]

    def make(i):
        return tg.ones(3), tg.full((3,), 2.0), tg.tensor([[0], [1], [7], [2]][i])

    _assert_same(_both(f, make))
    prog = tg.compile(f)
    prog(*make(0))
    assert "out=i0" not in prog.programs[0].forward_program.code


def test_index_put_out_of_range_names_the_op_eager_names():
    def f(x, idx):
        x[idx] = 5.0
        return x * 1

    _assert_same(_both(f, lambda i: (tg.ones(3), tg.tensor([[0], [1], [3], [2]][i]))))


def test_an_error_the_function_catches_itself():
    def f(x, idx):
        try:
            return x[idx] * 2
        except IndexError:                    # eager catches it; a program runs no `except`
            return x[:1] * 0

    _assert_same(_both(f, lambda i: (tg.arange(3.0), tg.tensor([[0], [1], [5], [2]][i]))))


def test_random_draw_before_an_error_advances_the_generator_as_eager():
    def f(x, idx):
        noise = tg.randn(3)
        return x[idx] + noise[0]

    _assert_same(_both(f, lambda i: (_t(i, 3), tg.tensor([[0], [1], [7], [2]][i]))))


@pytest.mark.parametrize("program", ["mutation", "draw"])
def test_errors_after_effects_on_the_jax_backend(program):
    pytest.importorskip("jax")

    def mutation(x, idx):
        y = x * 2
        x.mul_(3)
        return y[idx]

    def draw(x, idx):
        return x[idx] + tg.randn(3)[0]

    fn = mutation if program == "mutation" else draw
    _assert_same(_both(fn, lambda i: (tg.ones(3), tg.tensor([[0], [1], [7], [2]][i])),
                       backend="jax"))


# -- Python reading a tensor's values --

def test_randperm_draws_on_every_call():
    def f(x):
        return x[tg.randperm(4)]

    _assert_same(_both(f, lambda i: (tg.arange(4.0),), calls=5))


@pytest.mark.parametrize("read", ["asarray", "array_item", "str", "fstring"])
def test_python_reading_values_through_numpy_or_printing_is_a_guard(read):
    def f(x):
        if read == "asarray":
            s = float(np.asarray(x).sum())
        elif read == "array_item":
            s = float(np.array(x)[0])
        elif read == "str":
            s = float(len(str(x)))
        else:
            s = float(len(f"{x}"))
        return x * s

    _assert_same(_both(f, lambda i: (tg.tensor([[1.0, 2.0], [3.0, 40.0], [1.0, 2.0]][i % 3]),),
                       calls=5))


def test_format_spec_on_a_zero_dim_tensor_formats_its_value():
    loss = tg.tensor(1.5)                     # as PyTorch: the value's own format
    assert f"{loss:.2f}" == "1.50" and f"{loss}" == "1.5" and f"{tg.tensor(3)}" == "3"
    assert f"{tg.tensor([1.0, 2.0])}" == str(tg.tensor([1.0, 2.0]))
    with pytest.raises(TypeError):
        f"{tg.tensor([1.0, 2.0]):.2f}"

    @tg.compile
    def label(x):
        return f"{x.sum():.1f}"

    assert [label(tg.tensor([v, 1.0])) for v in (1.0, 2.0, 1.0)] == ["2.0", "3.0", "2.0"]


# -- tensor attributes set inside --

def test_requires_grad_attribute_set_on_an_argument_on_every_call():
    def f(x):
        x.requires_grad = True
        return x * 2

    _assert_same(_both(f, lambda i: (_t(i, 3),),
                       observe=lambda a, o: (_view(o), a[0].requires_grad)))


def test_assigning_data_of_an_argument_runs_eagerly_with_a_warning():
    def f(x):
        x.data = x.data * 2
        return x * 1

    with pytest.warns(UserWarning, match="assigning .data"):
        _assert_same(_both(f, lambda i: (_t(i, 3, requires_grad=True),)))


def test_returned_data_has_its_own_version_counter():
    def f(x):
        return x.data

    def observe(args, out):
        with tg.no_grad():
            args[0].add_(1)                   # bumps x's version, not out's
        return _view(out), args[0]._version

    _assert_same(_both(f, lambda i: (_t(i, 2, 3, requires_grad=True),), observe=observe))


# -- generators used inside --

def test_generator_state_restored_inside_runs_eagerly_with_a_warning():
    def f(x):
        state = tg.default_generator.get_state()
        a = tg.randn(2)
        tg.default_generator.set_state(state)   # b repeats a's draw, on every call
        return x + a, x + tg.randn(2)

    with pytest.warns(UserWarning, match="get_state|set_state"):
        _assert_same(_both(f, lambda i: (tg.zeros(2),)))


def test_fresh_seed_inside_is_not_replayed_as_a_constant():
    @tg.compile
    def f(x):
        tg.seed()
        return x + tg.randn(2)

    with pytest.warns(UserWarning, match="seed"):
        draws = [f(tg.zeros(2)).tolist() for _ in range(3)]
    assert draws[0] != draws[1] != draws[2]


def test_seeded_generator_made_inside_draws_the_same_on_every_call():
    def f(x):
        gen = tg.Generator(5)
        return x + tg.randn(2, generator=gen), x + tg.rand(2, generator=tg.Generator(6))

    _assert_same(_both(f, lambda i: (tg.zeros(2),)))


def test_numpy_operand_of_another_dtype_is_cast_as_eager_casts_it():
    def f(x, w):
        return x * np.arange(3), (w + np.ones(3, dtype=np.float64)).sum()

    def make(i):
        return _t(i, 3, requires_grad=True), _t(i + 5, 3)

    _assert_same(_both(f, make))
    x = _t(0, 3, requires_grad=True)
    tg.compile(f)(x, _t(1, 3))[0].sum().backward()
    assert x.grad.dtype == tg.float32 and x.grad.tolist() == [0.0, 1.0, 2.0]


# -- containers of other kinds (Note [Container kinds]) --

def _calls(make, calls=4):
    """The eager and the compiled results of `fn` over `calls` calls, each from fresh state:
    `make()` -> (function, observe); `observe()` is what the caller sees after the calls."""
    out = []
    for compiled in (False, True):
        f, observe = make()
        g = tg.compile(f) if compiled else f
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            res = [_view(g(_t(i, 2))) for i in range(calls)]
        out.append((res, observe()))
    return out


@pytest.mark.parametrize("kind", ["deque", "set", "list_subclass", "defaultdict"])
def test_closure_containers_of_other_kinds_change_as_in_eager(kind):
    class Log(list):
        pass

    def make():
        if kind == "deque":
            q = collections.deque(maxlen=2)

            def f(x):
                q.append(x * 1)              # a moving window of the last two inputs
                return sum(q)
            return f, lambda: len(q)
        if kind == "set":
            seen = set()

            def f(x):
                seen.add(len(seen))
                return x * len(seen)
            return f, lambda: sorted(seen)
        if kind == "list_subclass":
            count = Log([0.0])

            def f(x):
                count[0] = count[0] + 1
                return x * count[0]
            return f, lambda: list(count)
        hist = collections.defaultdict(list)

        def f(x):
            hist["loss"].append(x.sum())
            return x * len(hist["loss"])
        return f, lambda: len(hist["loss"])

    eager, compiled = _calls(make)
    assert eager == compiled


def test_list_subclass_argument_appended_to_reaches_the_caller():
    class Batch(list):
        pass

    def f(x, out):
        out.append(x * 2)
        return x * len(out)

    def make(i):
        return _t(i, 2), Batch()

    with pytest.warns(UserWarning, match="append"):
        _assert_same(_both(f, make, observe=lambda a, o: (_view(o), _view(list(a[1])))))


# -- iterators from outside (Note [Iterators]) --

@pytest.mark.parametrize("kind", ["list", "generator", "count", "loader"])
def test_next_on_an_iterator_from_outside_advances_it_on_every_call(kind):
    def make():
        if kind == "list":
            it = iter([_t(i, 2) for i in range(6)])
        elif kind == "generator":
            it = (_t(i, 2) for i in range(6))
        elif kind == "count":
            it = (tg.full((2,), float(k)) for k in itertools.count())
        else:
            data = tg.utils.data.TensorDataset(_t(0, 12, 2))
            it = iter(tg.utils.data.DataLoader(data, batch_size=2))

        def step(w):
            batch = next(it)                  # as a training step taking the next batch
            x = batch[0] if isinstance(batch, list) else batch
            return (x * w).sum()
        return step, lambda: next(it)

    records = []
    for compiled in (False, True):
        step, rest = make()
        f = tg.compile(step) if compiled else step
        with warnings.catch_warnings(record=True) as w:
            warnings.simplefilter("always")
            records.append(([_view(f(_t(9, 2))) for _ in range(4)], _view(rest())))
        if compiled:
            assert any("a Python iterator from outside" in str(x.message) for x in w)
    assert records[0] == records[1]


def test_shuffled_loader_iterated_inside_reshuffles_every_call():
    data = tg.utils.data.TensorDataset(_t(0, 6, 2), _t(1, 6))
    w = _t(5, 2)
    records = []
    for compiled in (False, True):
        loader = tg.utils.data.DataLoader(data, batch_size=2, shuffle=True)

        def epoch():
            return [(x @ w - y).tolist() for x, y in loader]

        f = tg.compile(epoch) if compiled else epoch
        tg.manual_seed(0)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            records.append([f() for _ in range(3)] + [tg.rand(()).item()])
    assert records[0] == records[1]


def test_printing_a_tensor_inside_is_traced_once_and_printed_every_call():
    @tg.compile
    def f(x):
        print(x)                              # no guard per value: calls run eagerly, with
        #                                       a warning (Note [Prints replayed])
        return x * 2

    with pytest.warns(UserWarning, match="print"):
        outs = [f(tg.full((2,), float(i))).tolist() for i in range(3)]
    assert outs == [[0.0, 0.0], [2.0, 2.0], [4.0, 4.0]] and f.stats.traces == 1


# -- a second backward (Note [Second backward]) --

@pytest.mark.parametrize("saves", [False, True])
def test_second_backward_without_retain_graph_as_in_eager(saves):
    def f(x):
        return (x * x).sum() if saves else (x + 1).sum()

    def observe(args, out):
        out.backward()
        try:
            out.backward()                   # eager raises only when values were saved
        except RuntimeError as e:
            second = str(e).split(".")[0]
        else:
            second = "ran"
        return second, _view(args[0].grad)

    _assert_same(_both(f, lambda i: (_t(i, 3, requires_grad=True),), observe=observe))


def test_gradients_cleared_by_zero_grad_come_back_when_the_step_raises_before_it():
    def run(compiled):
        w = tg.ones(3, requires_grad=True)
        opt = tg.optim.SGD([w], lr=0.1)

        def step(x, idx):
            y = x[idx]                        # raises before zero_grad on the 4th call
            opt.zero_grad()
            loss = (w * y).sum()
            loss.backward()
            opt.step()
            return loss

        f = tg.compile(step) if compiled else step
        seen = []
        for idx in ([0, 1, 2], [1, 2, 0], [2, 1, 0], [0, 5, 1], [0, 1, 2]):
            try:
                f(tg.arange(3.0), tg.tensor(idx))
            except IndexError as e:
                seen.append(type(e).__name__)
            seen.append((_view(w), None if w.grad is None else _view(w.grad)))
        return seen

    assert run(False) == run(True)


def test_requires_grad_set_after_the_op_that_raises_stays_unset():
    def f(x, idx):
        y = x[idx] * 2
        x.requires_grad_()                    # eager never gets here on the raising call
        return y * x[0]

    _assert_same(_both(f, lambda i: (tg.arange(3.0), tg.tensor([[0], [1], [5], [2]][i])),
                       observe=lambda a, o: (_view(o), a[0].requires_grad)))


def test_a_gradient_rule_that_refuses_raises_at_backward_as_in_eager():
    def f(x):
        return tg.einsum("ii->i", x @ x.t())  # its gradient (a diagonal) is not supported

    def observe(args, out):
        try:
            out.sum().backward()
        except ValueError as e:
            return _view(out), str(e)
        return _view(out), "no error"

    with pytest.warns(UserWarning, match="the gradient cannot be derived"):
        _assert_same(_both(f, lambda i: (_t(i, 2, 3, requires_grad=True),), observe=observe))
