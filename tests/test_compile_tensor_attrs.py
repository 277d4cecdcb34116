"""Python attributes users put on tensor arguments (Note [Attributes of tensor arguments]
in compiler/tensor_attrs.py): a compiled call reads them as eager does, on every call,
and a function that writes them, or reads objects through them, runs eagerly and loudly."""
import warnings

import numpy as np
import pytest

import tracegrad as tg


def _both(fn, make, calls=4, change=lambda x, i: None, backend="numpy"):
    """Outputs (as arrays) and the argument's public attributes after each call, eager
    and compiled from the same inputs; the compiled function."""
    cf = tg.compile(fn, backend=backend)
    out = []
    for f in (fn, cf):
        x, rec = make(), []
        for i in range(calls):
            change(x, i)
            r = f(x)
            rec.append((r.detach().numpy().copy() if isinstance(r, tg.Tensor) else r,
                        {k: v for k, v in vars(x).items() if not k.startswith("_")}))
        out.append(rec)
    return out[0], out[1], cf


def _assert_same(eager, compiled):
    for (a, da), (b, db) in zip(eager, compiled):
        np.testing.assert_array_equal(a, b)
        assert da.keys() == db.keys()


def _tagged():
    x = tg.ones(3)
    x.tag = 3.0
    return x


@pytest.mark.parametrize("backend", ["numpy", "jax"])
def test_a_changed_number_attribute_is_read_anew(backend):
    if backend == "jax":
        pytest.importorskip("jax")

    def scale(x):
        return x * x.tag

    def change(x, i):
        x.tag = [3.0, 5.0, 5.0, 3.0][i]
    eager, compiled, cf = _both(scale, _tagged, change=change, backend=backend)
    _assert_same(eager, compiled)
    assert cf.stats.traces == 2          # one path per value seen, the third call reuses


def test_an_attribute_added_after_the_first_call_is_seen():
    def f(x):
        return x * 2 if getattr(x, "double", False) else x + 1

    def change(x, i):
        if i == 2:
            x.double = True
    eager, compiled, _ = _both(f, lambda: tg.full((2,), 3.0), change=change)
    _assert_same(eager, compiled)
    assert compiled[2][0].tolist() == [6.0, 6.0]


def test_a_tensor_attribute_replaced_or_a_dict_changed_in_place():
    def masked(x):
        return (x * x.mask).sum() * x.cfg["w"]

    def make():
        x = tg.arange(4.0)
        x.mask, x.cfg = tg.tensor([1.0, 0.0, 1.0, 0.0]), {"w": 1.0}
        return x

    def change(x, i):
        if i == 1:
            x.mask = tg.tensor([0.0, 1.0, 0.0, 1.0])
        if i == 2:
            x.cfg["w"] = 2.0                 # in place: the same dict
        if i == 3:
            x.mask.mul_(3.0)                 # the same tensor, its data changed
    eager, compiled, _ = _both(masked, make, change=change)
    _assert_same(eager, compiled)


def test_writing_an_attribute_of_an_argument_runs_eagerly_and_says_so():
    def count(x):
        x.calls = getattr(x, "calls", 0) + 1
        return x * 2
    with warnings.catch_warnings(record=True) as w:
        warnings.simplefilter("always")
        eager, compiled, cf = _both(count, lambda: tg.ones(2))
    _assert_same(eager, compiled)
    assert [d["calls"] for _, d in compiled] == [1, 2, 3, 4]
    said = [str(x.message) for x in w if "tracegrad.compile" in str(x.message)]
    assert said and "setting Python attribute 'calls' of tensor argument 'x'" in said[0]


def test_an_object_held_by_an_attribute_runs_eagerly():
    class Cfg:
        scale = 2.0

    def f(x):
        return x * x.cfg.scale

    cfg = Cfg()

    def make():
        x = tg.ones(2)
        x.cfg = cfg
        return x

    def change(x, i):
        cfg.scale = float(i + 2)
    with warnings.catch_warnings(record=True) as w:
        warnings.simplefilter("always")
        eager, compiled, _ = _both(f, make, change=change)
    _assert_same(eager, compiled)
    assert any("holding a Cfg object" in str(x.message) for x in w)


def test_engine_attributes_keep_the_fast_path():
    """A leaf whose .grad the engine filled (private `_grad`, `_accum` in its __dict__) is
    still served by the last-key check, with one trace."""
    w = tg.ones(3, requires_grad=True)
    (w * 2).sum().backward()
    assert w.__dict__                    # the engine's own entries
    f = tg.compile(lambda w: (w * w).sum())
    for _ in range(4):
        f(w)
    assert f.stats.traces == 1
    entry = next(iter(f.entries.values()))
    assert entry.check is not None and entry.check((w,))
    w.note = "x"
    assert not entry.check((w,))         # a user attribute sends the call down the full key


def test_attributes_of_tensors_inside_containers_are_keyed():
    def f(xs):
        return sum(x * x.k for x in xs)
    a, b = tg.ones(2), tg.ones(2)
    a.k, b.k = 1.0, 2.0
    cf = tg.compile(f)
    assert cf([a, b]).tolist() == [3.0, 3.0]
    b.k = 5.0
    assert cf([a, b]).tolist() == f([a, b]).tolist() == [6.0, 6.0]


@pytest.mark.parametrize("backend", ["numpy", "jax"])
def test_a_number_attribute_of_a_leaf_with_grad_is_read_anew(backend):
    """The last-key check answers "no public attributes" for the engine's own entries
    (`_grad`, `_accum`) without calling attrs_key: a user's attribute beside them is still
    keyed by value."""
    if backend == "jax":
        pytest.importorskip("jax")

    def scale(x):
        return (x * x.tag).sum()

    cf = tg.compile(scale, backend=backend)
    for f in (scale, cf):
        x = tg.ones(3, requires_grad=True)
        x.tag = 3.0
        got = []
        for i, tag in enumerate([3.0, 3.0, 5.0, 5.0, 2.0]):
            x.tag = tag
            x.grad = None
            f(x).backward()
            got.append((f(x).item(), x.grad.numpy().copy()))
        assert set(x.__dict__) >= {"_grad", "_accum", "tag"}
        if f is scale:
            ref = got
    for (a, ga), (b, gb) in zip(ref, got):
        assert a == b
        np.testing.assert_array_equal(ga, gb)
    assert cf.stats.traces == 3
