"""The identity guards on the items of a list or tuple a compiled function loops over are
checked in one pass (Note [Checking many items at once] in compiler/state_guards.py), and a
slot or function `__code__` guard reads the attribute directly: every change the line-by-line
check saw must still be seen (a cached path must never run with stale Python state).
"""
import numpy as np
import pytest

import tracegrad as tg
from tracegrad.compiler.state_guards import _MISSING, StateGuard, _item_batches, checker


def _double(x):
    return x * 2.0


def _inc(x):
    return x + 1.0


OPS = [_double, _inc] * 6            # 12 items: checked as one batch


def _chain(x):
    for op in OPS:
        x = op(x)
    return x


def _eager(x0):
    x = x0
    for op in OPS:
        x = op(x)
    return x


@pytest.fixture
def ops():
    saved = list(OPS)
    yield OPS
    OPS[:] = saved


@pytest.mark.parametrize("change", ["replace", "shrink", "grow", "same_code_new_fn",
                                    "code_swap"])
def test_changes_to_a_looped_global_list_are_seen(ops, change):
    comp = tg.compile(_chain)
    x = tg.tensor(np.arange(3, dtype=np.float32))
    np.testing.assert_allclose(comp(x).numpy(), _eager(x.numpy()))
    comp(x)
    assert comp.stats.cache_hits >= 1
    if change == "replace":
        ops[5] = lambda t: t - 3.0
    elif change == "shrink":
        del ops[-1]
    elif change == "grow":
        ops.append(_double)
    elif change == "same_code_new_fn":
        ops[0] = lambda t: t * 2.0       # equal behaviour, another object: re-traced
    elif change == "code_swap":
        saved = _inc.__code__
        _inc.__code__ = (lambda x: x - 1.0).__code__
    try:
        traces = comp.stats.traces
        np.testing.assert_allclose(comp(x).numpy(), _eager(x.numpy()))
        assert comp.stats.traces == traces + 1
    finally:
        if change == "code_swap":
            _inc.__code__ = saved


def test_batch_covers_only_lists_with_items_zero_to_n():
    a, b = list(range(100, 120)), list(range(200, 220))
    guards = [StateGuard(a, k, a[k], "is", f"a[{k}]") for k in range(len(a))]
    guards += [StateGuard(b, k, b[k], "is", f"b[{k}]") for k in range(1, len(b))]  # no 0
    batches = _item_batches(guards)
    assert list(batches) == [id(a)]
    check = checker(guards)
    assert check()
    b[3] = object()
    assert not check()
    b[3] = 203
    assert check()
    a[19] = object()
    assert not check()
    a[19] = 119
    del a[-1]
    assert not check()                   # shorter: the item guard would raise IndexError
    a.append(119)
    a.append(999)                        # longer: items past n are not guarded
    assert check()


def test_two_expectations_for_one_item_are_both_checked():
    a = [object() for _ in range(10)]
    guards = [StateGuard(a, k, a[k], "is", f"a[{k}]") for k in range(10)]
    other = object()
    guards.append(StateGuard(a, 4, other, "is", "a[4] again"))
    assert _item_batches(guards) == {}
    check = checker(guards)
    assert not check()                   # a[4] cannot be two objects
    a[4] = other
    assert not check()


def test_slot_and_code_guards_read_through_getattr():
    class Cfg:
        __slots__ = ("scale", "unset")

        def __init__(self):
            self.scale = 2.0

    from tracegrad.compiler.state_slots import SlotView
    cfg = Cfg()
    view = SlotView(cfg)
    guards = [StateGuard(view, "scale", 2.0, "eq", "cfg.scale"),
              StateGuard(view, "unset", _MISSING, "is", "cfg.unset")]
    check = checker(guards)
    assert check()
    cfg.scale = 3.0
    assert not check()
    cfg.scale = 2.0
    cfg.unset = 1
    assert not check()
    del cfg.unset
    assert check()


def test_compiled_function_sees_a_slot_change():
    class Cfg:
        __slots__ = ("scale",)

    cfg = Cfg()
    cfg.scale = 2.0

    def f(x):
        return x * cfg.scale

    comp = tg.compile(f)
    x = tg.tensor([1.0, 2.0])
    comp(x)
    comp(x)
    cfg.scale = 5.0
    np.testing.assert_allclose(comp(x).numpy(), [5.0, 10.0])


# ---- Note [Guard lines]: empties tested together, plain dicts read by subscript ----
def test_still_empty_containers_are_checked_together():
    import collections
    from tracegrad.compiler.state_guards import _LEN
    holders = [{}, collections.OrderedDict(), collections.defaultdict(list), [], ()]
    holders += [{} for _ in range(20)]          # more than one line of them
    guards = [StateGuard(h, _LEN, 0, "len", f"h{k}") for k, h in enumerate(holders)]
    check = checker(guards)
    assert check()
    for h in holders[:4] + holders[-1:]:
        if isinstance(h, dict):
            h["k"] = 1
        else:
            h.append(1)
        assert not check()
        h.clear()
        assert check()


def test_a_plain_dict_key_removed_or_rebound_fails_the_check_and_a_defaultdict_is_not_filled():
    import collections
    w, b = object(), object()
    d = {"weight": w, "bias": b, "training": True}
    od = collections.OrderedDict(weight=w)
    dd = collections.defaultdict(dict, {"state": w})
    guards = [StateGuard(d, "weight", w, "is", "m.weight"),
              StateGuard(d, "training", True, "eq", "m.training"),
              StateGuard(od, "weight", w, "is", "od.weight"),
              StateGuard(dd, "absent", _MISSING, "is", "dd['absent']")]
    check = checker(guards)
    assert check()
    assert "absent" not in dd                 # reading the guard never calls __missing__
    del d["weight"]
    assert not check()                        # a KeyError answers False, never raises
    d["weight"] = w
    d["training"] = 1                         # equal, another type: not the same value
    assert not check()
    d["training"] = True
    del od["weight"]
    assert not check()
    od["weight"] = w
    dd["absent"] = {}
    assert not check()
    del dd["absent"]
    assert check()


def test_a_hook_registered_on_a_submodule_after_cached_calls_runs():
    model = tg.nn.Sequential(tg.nn.Linear(3, 2), tg.nn.ReLU())
    comp = tg.compile(lambda x: model(x).sum())
    x = tg.tensor(np.ones((2, 3), np.float32))
    comp(x)
    comp(x)
    assert comp.stats.cache_hits >= 1
    handle = model[1].register_forward_hook(lambda m, i, o: o * 10)
    try:
        want = model(x).sum().item()
        assert comp(x).item() == want
    finally:
        handle.remove()
    assert comp(x).item() == model(x).sum().item()


def test_attribute_guard_lines_read_the_attribute_and_a_deleted_one_fails():
    """Note [Attribute guard lines]: a guard expecting an object reads `h.name`; the
    attribute deleted, or a function's `__code__` replaced, fails the check; a guard
    expecting the attribute missing still passes while it is."""
    class Cfg:
        __slots__ = ("scale", "unset")

    from tracegrad.compiler.state_guards import checker_source
    from tracegrad.compiler.state_slots import SlotView
    cfg = Cfg()
    cfg.scale = 2.0

    def fn(x):
        return x + 1

    code = fn.__code__
    guards = [StateGuard(SlotView(cfg), "scale", 2.0, "eq", "cfg.scale"),
              StateGuard(SlotView(cfg), "unset", _MISSING, "is", "cfg.unset"),
              StateGuard(SlotView(fn), "__code__", code, "is", "fn.__code__")]
    lines, _ = checker_source(guards)
    text = "\n".join(lines)
    assert ".scale" in text and ".__code__" in text and "'unset', _M" in text
    check = checker(guards)
    assert check()
    del cfg.scale
    assert not check()
    cfg.scale = 2.0
    assert check()
    fn.__code__ = (lambda x: x - 1).__code__
    assert not check()
    fn.__code__ = code
    assert check()
