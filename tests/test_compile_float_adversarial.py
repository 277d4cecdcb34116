"""Adversarial programs for floats read per call (Note [Numbers read per call] in
tracing/numbers.py, Notes [Float arguments that change] and [Float attributes that change]
in compiler/dynamic_numbers.py): the float changes every call, and the compiled function
must compute, store and raise what eager does."""
import json
import warnings

import numpy as np
import pytest

import tracegrad as tg
from test_compile_float_arguments import check

VALUES = [0.1, 0.05, 0.07, 0.02, 0.2, 0.3]


def _calls(make, values=VALUES):
    """Run `make()`'s function compiled over `values`: (results, state)."""
    fn, state = make()
    cf = tg.compile(fn)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        out = [cf(state["x"], v) for v in values]
    return out, state


# -- a float meeting a Python number a Number's traced arithmetic does not take --
def test_huge_int_times_a_float_argument():
    """`lr * 2**60`: an int past 2**53 is Python's to round (eager gives a float), not a
    TypeError."""
    check(lambda: ((lambda x, lr: x * (lr * 2 ** 60 / 2 ** 60) + (2 ** 60 * lr > 1e16)),
                   {"x": tg.randn(3)}))


def test_float_subclass_operand():
    class Weight(float):
        pass
    w = Weight(0.5)
    check(lambda: ((lambda x, lr: x * (lr * w) + (w - lr) + (lr < w)), {"x": tg.randn(3)}))


def test_int_too_large_for_a_float_raises_eager_overflow():
    check(lambda: ((lambda x, lr: x * (lr * 10 ** 400)), {"x": tg.randn(3)}))


# -- a float stored where a dict, list, object or cell repair does not reach --
def test_a_float_inside_a_tuple_in_a_history_list_is_a_float():
    def make():
        s = {"x": tg.randn(3), "log": [], "named": []}

        def f(x, lr):
            s["log"].append((lr, (1, lr)))
            return x * lr
        return f, s
    check(make)
    _, s = _calls(make)
    assert [v for v, _ in s["log"]] == VALUES
    assert all(type(v) is float and type(w[1]) is float for v, w in s["log"])
    json.dumps(s["log"])


def test_a_float_as_a_dict_key_or_set_member_is_a_float():
    def make():
        s = {"x": tg.randn(3), "seen": set(), "table": {}}

        def f(x, lr):
            s["seen"].add(lr)
            s["table"][lr] = len(s["table"])
            return x * lr
        return f, s
    check(make)
    _, s = _calls(make)
    assert all(type(v) is float for v in s["seen"]) and s["seen"] == set(VALUES)
    assert all(type(v) is float for v in s["table"]) and list(s["table"]) == VALUES
    json.dumps(sorted(s["seen"]))


def test_a_trace_that_raises_after_storing_the_float_leaves_a_float():
    """The path where the float is too large stores it, then raises: eager's state holds
    the float, and so must the compiled function's, though that trace was not kept."""
    def make():
        s = {"x": tg.randn(3), "hist": [], "table": {}}

        def f(x, lr):
            if lr > 0.5:
                s["hist"].append(lr)
                s["table"][lr] = (lr, 1)
                raise ValueError("learning rate too large")
            return x * lr
        return f, s
    values = [0.1, 0.2, 0.7, 0.3, 0.8, 0.9]
    check(make, values)
    fn, s = make()
    cf = tg.compile(fn)
    for v in values:
        try:
            cf(s["x"], v)
        except ValueError:
            pass
    assert s["hist"] == [0.7, 0.8, 0.9] and all(type(v) is float for v in s["hist"])
    assert all(type(k) is float and type(v[0]) is float for k, v in s["table"].items())


def test_a_float_in_a_deque_or_a_slot_is_a_float():
    """Recent learning rates in a bounded deque, the current one in a slotted dataclass:
    eager leaves floats there, and so must an escaped Number's repair."""
    import collections
    import dataclasses

    @dataclasses.dataclass(slots=True)
    class Status:
        lr: float = 0.0

    class Slotted:
        __slots__ = ("lr",)

    def make():
        s = {"x": tg.randn(3), "recent": collections.deque(maxlen=3), "status": Status(),
             "slotted": Slotted()}

        def f(x, lr):
            s["recent"].append(lr)
            s["status"].lr = lr * 2
            s["slotted"].lr = lr
            return x * lr
        return f, s
    fn, s = make()
    cf = tg.compile(fn)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        for k, v in enumerate(VALUES):
            cf(s["x"], v)
            assert list(s["recent"]) == VALUES[max(0, k - 2): k + 1]
            assert all(type(r) is float for r in s["recent"]), k
            assert type(s["status"].lr) is float and s["status"].lr == v * 2, k
            assert type(s["slotted"].lr) is float and s["slotted"].lr == v, k


def _helper_asking_type(x, lr):
    return x * 2 if type(lr) is float else x * 100


def test_code_naming_type_first_reached_on_a_new_path_never_returns_a_silent_result():
    """`type(lr) is float` first runs in a trace that passed a Number (the branch for a large
    rate, after two small ones made `lr` dynamic): that trace's result is not eager's, so
    the call raises instead of returning it, and later calls key `lr` by value."""
    x = tg.randn(3)

    def f(x, lr):
        if lr > 0.5:
            return _helper_asking_type(x, lr)
        return x * lr
    cf = tg.compile(f)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        for v in (0.1, 0.2):
            assert np.array_equal(cf(x, v).numpy(), f(x, v).numpy())
        try:
            out = cf(x, 0.7)
        except RuntimeError as e:
            assert "naming `type`" in str(e)
        else:                            # never a silent wrong result
            assert np.array_equal(out.numpy(), f(x, 0.7).numpy())
        for v in (0.8, 0.3, 0.9, 0.1):
            assert np.array_equal(cf(x, v).numpy(), f(x, v).numpy()), v


def test_json_of_a_float_read_per_call():
    # C code that requires a real float (json's encoder) refuses a Number with a TypeError
    # eager never raises: a function whose code names it keys its floats by value
    # (REAL_NUMBER_ONLY in compiler/dynamic_numbers.py)
    def make():
        s = {"x": tg.randn(3), "log": []}

        def f(x, lr):
            s["log"].append(json.dumps({"lr": lr}))
            return x * lr
        return f, s
    check(make)


def test_an_error_raised_with_the_float_carries_a_float():
    """`raise ValueError(lr, ...)` on a path traced with a Number: the exception's args hold
    the plain float, as eager's do."""
    def f(x, lr):
        if lr > 0.5:
            raise ValueError(lr, "learning rate too large")
        return x * lr
    cf = tg.compile(f)
    x = tg.randn(3)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        cf(x, 0.1)
        cf(x, 0.2)
        with pytest.raises(ValueError) as e:
            cf(x, 0.7)
    assert e.value.args == (0.7, "learning rate too large") and type(e.value.args[0]) is float
