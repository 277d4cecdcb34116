"""Views, aliasing and in-place ops, run eagerly, compiled (numpy and JAX backends) and in
PyTorch: what a caller sees of outputs that alias inputs, of writes through views, and of
in-place operands that overlap the written memory must agree. Each test is a divergence an
adversarial review found, minimized."""
import numpy as np
import pytest

import tracegrad as tg
from _differential import assert_same_records, records

BACKENDS = ["numpy", "jax"]


def _backend(name):
    if name == "jax":
        pytest.importorskip("jax")
    return name


def _err(e):
    """An error as a comparable (builtin type, message without tracegrad's op prefix)."""
    builtin = next(c for c in type(e).__mro__ if c.__module__ == "builtins")
    msg = str(e).split("\n")[0]
    return builtin.__name__, msg.split(": ", 1)[1] if ": unsupported" in msg else msg


# -- Note [Overlapping in-place operands] (tracegrad/_overlap.py) --

def _set(key, value):
    """`x[key] = value(x)`; a callable `key` is computed from `x` (a mask)."""
    def f(x):
        x[key(x) if callable(key) else key] = value(x)
    return f


OVERLAPS = {            # in-place writes reading the memory they write
    "add_t": lambda x: x.add_(x.t()),
    "iadd_T": lambda x: x.__iadd__(x.T),
    "t_target": lambda x: x.t().add_(x),
    "mul_row_broadcast": lambda x: x.mul_(x[0]),
    "sub_shifted_rows": lambda x: x[1:].sub_(x[:-1]),
    "copy_t": lambda x: x.copy_(x.t()),
    "copy_shifted_in_row": lambda x: x[0, 1:].copy_(x[0, :-1]),
    "setitem_shifted_rows": _set(slice(1, None), lambda x: x[:-1]),
    "pow_t": lambda x: x.pow_(x.t()),
    "adv_setitem_row": _set([0, 1], lambda x: x[2]),
    "adv_setitem_self": _set([0, 1, 2, 3], lambda x: x),
    "mask_setitem_row": _set(lambda x: x[:, 0] > 5, lambda x: x[0]),
    "scatter_self": lambda x: x.scatter_(0, x.new_zeros((1, 4)).long(), x[1:2]),
    "scatter_add_self": lambda x: x.scatter_add_(0, x.new_zeros((1, 4)).long(), x[1:2]),
    "index_add_self": lambda x: x.index_add_(0, x.new_zeros(1).long(), x[1:2]),
}
ALLOWED = {             # the same memory, but PyTorch allows it
    "add_self": lambda x: x.add_(x),
    "add_same_block": lambda x: x.add_(x.view(16).view(4, 4)),
    "t_both": lambda x: x.t().add_(x.t()),
    "copy_self": lambda x: x.copy_(x),
    "copy_expanded": lambda x: x.copy_(x[0].expand(4, 4)),
    "mul_disjoint_row": lambda x: x[:3].mul_(x[3]),
    "setitem_disjoint_row": _set(0, lambda x: x[1]),
    "setitem_disjoint_halves": _set(slice(None, 2), lambda x: x[2:]),
    "setitem_same_row": _set(0, lambda x: x[0]),
    "setitem_interleaved": _set(slice(None, None, 2), lambda x: x[1::2]),
    "masked_fill_own_element": lambda x: x.masked_fill_(x > 5, x[0, 0]),
    "mask_setitem_own_element": _set(lambda x: x > 5, lambda x: x[0, 0]),
    "fill_own_element": lambda x: x.fill_(x[0, 0]),
}


def _run(module, fn):
    x = module.arange(16.0).reshape(4, 4)
    try:
        fn(x)
    except Exception as e:                    # noqa: BLE001 -- compared with PyTorch's
        return _err(e)
    return x.tolist()


@pytest.mark.parametrize("name", sorted(OVERLAPS) + sorted(ALLOWED))
def test_overlapping_in_place_operands_as_pytorch(name):
    torch = pytest.importorskip("torch")
    fn = {**OVERLAPS, **ALLOWED}[name]
    got, want = _run(tg, fn), _run(torch, fn)
    assert got == want
    assert (name in OVERLAPS) == (got[0] == "RuntimeError")


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("name", ["add_t", "setitem_shifted_rows", "mul_row_broadcast",
                                  "adv_setitem_row", "setitem_disjoint_row", "copy_self"])
def test_overlapping_in_place_operands_compiled_as_eager(name, backend):
    fn = {**OVERLAPS, **ALLOWED}[name]

    def f(x):
        fn(x)
        return x * 2

    def make(i):
        return (tg.arange(16.0).reshape(4, 4) * (i + 1),)

    eager, compiled, _ = records(f, make, 4, _backend(backend))
    assert_same_records(eager, compiled)


@pytest.mark.parametrize("backend", BACKENDS)
def test_overlap_verdict_follows_the_layout_of_a_non_contiguous_argument(backend):
    # both arguments are 3x3 and not C-contiguous (one entry key); x.t() overlaps x
    # partially only when x is one dense block (the transposed one), so eager raises on
    # every other call and the compiled program must not skip that check
    def f(x):
        x.add_(x.t())
        return x.sum()

    def make(i):
        if i % 2 == 0:
            return (tg.arange(18.0).reshape(3, 6)[:, ::2],)
        return (tg.arange(9.0).reshape(3, 3).t(),)

    eager, compiled, _ = records(f, make, 4, _backend(backend))
    assert eager[1][0] == "TracegradRuntimeError"
    assert_same_records(eager, compiled)
