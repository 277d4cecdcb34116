"""`autograd.Function` (the whole ctx API) and `autograd.gradcheck` / `gradgradcheck`.

Function classes are defined per library by `_functions(lib)` so each test runs the same
user code on tracegrad and (when installed) torch through the `lib` fixture.
"""
import re
from types import SimpleNamespace

import numpy as np
import pytest

import tracegrad as tg


def _np(t):
    return t.detach().numpy()


def _functions(lib):
    F = lib.autograd.Function

    class MyExp(F):
        @staticmethod
        def forward(ctx, x):
            r = x.exp()
            ctx.save_for_backward(r)
            return r

        @staticmethod
        def backward(ctx, g):
            (r,) = ctx.saved_tensors
            return g * r

    class Cube(F):
        @staticmethod
        def forward(ctx, x):
            ctx.save_for_backward(x)
            return x ** 3

        @staticmethod
        def backward(ctx, g):
            (x,) = ctx.saved_tensors
            return g * 3 * x ** 2          # differentiable ops: double backward works

    class ScaleAdd(F):
        """(a * k + b, a * b) with a non-tensor argument k."""
        @staticmethod
        def forward(ctx, a, k, b):
            ctx.k = k
            ctx.needs = ctx.needs_input_grad
            ctx.save_for_backward(a, b)
            return a * k + b, a * b

        @staticmethod
        def backward(ctx, g1, g2):
            a, b = ctx.saved_tensors
            ga = g1 * ctx.k + g2 * b if ctx.needs_input_grad[0] else None
            gb = g1 + g2 * a if ctx.needs_input_grad[2] else None
            return ga, None, gb

    class DoubleInPlace(F):
        @staticmethod
        def forward(ctx, x):
            x.mul_(2)
            ctx.mark_dirty(x)
            return x

        @staticmethod
        def backward(ctx, g):
            return g * 2

    class MaxWithIndex(F):
        @staticmethod
        def forward(ctx, x):
            i = x.argmax()
            ctx.mark_non_differentiable(i)
            ctx.save_for_backward(x, i)
            return x.max(), i

        @staticmethod
        def backward(ctx, g, gi):
            x, i = ctx.saved_tensors
            out = x * 0
            out[i] = g
            return out

    class Pair(F):
        """Two outputs; records what backward received for the unused one."""
        seen = []

        @staticmethod
        def forward(ctx, x, materialize):
            ctx.set_materialize_grads(materialize)
            return x * 1, x * 2

        @staticmethod
        def backward(ctx, g1, g2):
            Pair.seen.append(g2)
            return (g1 if g2 is None else g1 + 2 * g2), None

    class NoGrad(F):
        @staticmethod
        def forward(ctx, x):
            return x * 2

        @staticmethod
        def backward(ctx, g):
            return None

    class TooFew(F):
        @staticmethod
        def forward(ctx, x, y):
            return x * y

        @staticmethod
        def backward(ctx, g):
            return g

    class TooMany(F):
        @staticmethod
        def forward(ctx, x):
            return x * 2

        @staticmethod
        def backward(ctx, g):
            return g, g

    class WrongSin(F):
        """Deliberately wrong: claims d sin = sin."""
        @staticmethod
        def forward(ctx, x):
            ctx.save_for_backward(x)
            return x.sin()

        @staticmethod
        def backward(ctx, g):
            (x,) = ctx.saved_tensors
            return g * x.sin()

    class Identity(F):
        @staticmethod
        def forward(ctx, x):
            return x

        @staticmethod
        def backward(ctx, g):
            return g * 5

    return SimpleNamespace(**{k: v for k, v in locals().items() if isinstance(v, type)})


# ---------------------------------------------------------------- basics

def test_apply_forward_and_backward(lib):
    fn = _functions(lib)
    x = lib.tensor([0.0, 1.0], requires_grad=True)
    y = fn.MyExp.apply(x)
    np.testing.assert_allclose(_np(y), np.exp([0.0, 1.0]), rtol=1e-6)
    y.sum().backward()
    np.testing.assert_allclose(_np(x.grad), np.exp([0.0, 1.0]), rtol=1e-6)


def test_grad_fn_is_named_after_the_class(lib):
    fn = _functions(lib)
    y = fn.MyExp.apply(lib.ones(2, requires_grad=True))
    assert type(y.grad_fn).__name__ == "MyExpBackward"
    assert re.fullmatch(r"<torch\.autograd\.function\.MyExpBackward object at 0x[0-9a-f]+>",
                        repr(y.grad_fn))
    assert type(y.grad_fn.next_functions[0][0]).__name__ == "AccumulateGrad"


def test_result_does_not_require_grad_without_grad_inputs(lib):
    fn = _functions(lib)
    y = fn.Cube.apply(lib.tensor(2.0))
    assert not y.requires_grad and y.grad_fn is None


def test_no_graph_under_no_grad(lib):
    fn = _functions(lib)
    with lib.no_grad():
        y = fn.Cube.apply(lib.tensor(2.0, requires_grad=True))
    assert not y.requires_grad


def test_forward_runs_without_recording(lib):
    F = lib.autograd.Function
    seen = []

    class Probe(F):
        @staticmethod
        def forward(ctx, x):
            seen.append((lib.is_grad_enabled(), (x * 2).requires_grad))
            return x * 2

        @staticmethod
        def backward(ctx, g):
            return g * 2
    Probe.apply(lib.ones(1, requires_grad=True))
    assert seen == [(False, False)]


# ---------------------------------------------------------------- ctx API

def test_saved_tensors_are_version_checked(lib):
    fn = _functions(lib)
    x = lib.tensor([0.0, 1.0], requires_grad=True)
    y = fn.MyExp.apply(x)
    y.add_(1)
    with pytest.raises(RuntimeError, match=r"output 0 of MyExp, is at version 1; expected "
                                           r"version 0"):
        y.sum().backward()


def test_saved_input_modified_raises(lib):
    fn = _functions(lib)
    x = lib.tensor([1.0, 2.0], requires_grad=True)
    h = x * 1
    y = fn.Cube.apply(h)
    h.mul_(3)
    with pytest.raises(RuntimeError, match="modified by an inplace operation"):
        y.sum().backward()


def test_saved_tensors_freed_after_backward(lib):
    fn = _functions(lib)
    x = lib.tensor([1.0, 2.0], requires_grad=True)
    y = fn.Cube.apply(x).sum()
    y.backward()
    with pytest.raises(RuntimeError, match="backward through the graph a second time"):
        y.backward()


def test_retain_graph_keeps_saved_tensors(lib):
    fn = _functions(lib)
    x = lib.tensor([1.0, 2.0], requires_grad=True)
    y = fn.Cube.apply(x).sum()
    y.backward(retain_graph=True)
    y.backward()
    np.testing.assert_allclose(_np(x.grad), [6.0, 24.0])


def test_save_for_backward_rejects_non_tensors(lib):
    F = lib.autograd.Function

    class Bad(F):
        @staticmethod
        def forward(ctx, x):
            ctx.save_for_backward(3)
            return x * 1

        @staticmethod
        def backward(ctx, g):
            return g
    with pytest.raises(TypeError, match="argument 0 is of type int"):
        Bad.apply(lib.ones(1, requires_grad=True))


def test_needs_input_grad_and_non_tensor_arguments(lib):
    fn = _functions(lib)
    a = lib.tensor([1.0, 2.0], requires_grad=True)
    b = lib.tensor([3.0, 4.0])
    o1, o2 = fn.ScaleAdd.apply(a, 3.0, b)
    assert o1.grad_fn is o2.grad_fn
    assert tuple(o1.grad_fn.next_functions[1]) == (None, 0)
    (o1.sum() + o2.sum()).backward()
    np.testing.assert_allclose(_np(a.grad), [3.0 + 3.0, 3.0 + 4.0])
    assert b.grad is None


def test_needs_input_grad_values(lib):
    F = lib.autograd.Function
    seen = []

    class Probe(F):
        @staticmethod
        def forward(ctx, a, k, b):
            seen.append(tuple(ctx.needs_input_grad))
            return a * k + b

        @staticmethod
        def backward(ctx, g):
            return g, None, g
    Probe.apply(lib.ones(1, requires_grad=True), 2.0, lib.ones(1))
    Probe.apply(lib.ones(1), 2.0, lib.ones(1, requires_grad=True))
    assert seen == [(True, False, False), (False, False, True)]


def test_multiple_outputs_each_get_their_output_nr(lib):
    fn = _functions(lib)
    a = lib.tensor([1.0, 2.0], requires_grad=True)
    b = lib.tensor([3.0, 4.0], requires_grad=True)
    o1, o2 = fn.ScaleAdd.apply(a, 2.0, b)
    o2.sum().backward()                      # only the second output is used
    np.testing.assert_allclose(_np(a.grad), [3.0, 4.0])
    np.testing.assert_allclose(_np(b.grad), [1.0, 2.0])


def test_mark_dirty_returns_input_and_bumps_version(lib):
    fn = _functions(lib)
    a = lib.tensor([1.0, 2.0], requires_grad=True)
    c = a.clone()
    v0 = c._version
    d = fn.DoubleInPlace.apply(c)
    assert d is c
    assert c._version > v0
    assert type(c.grad_fn).__name__ == "DoubleInPlaceBackward"
    np.testing.assert_allclose(_np(c), [2.0, 4.0])
    (d * d).sum().backward()
    np.testing.assert_allclose(_np(a.grad), 2 * 2 * np.array([2.0, 4.0]))


def test_mark_dirty_on_leaf_requiring_grad_raises(lib):
    fn = _functions(lib)
    with pytest.raises(RuntimeError, match="leaf Variable that requires grad"):
        fn.DoubleInPlace.apply(lib.ones(2, requires_grad=True))


def test_mark_non_differentiable(lib):
    fn = _functions(lib)
    x = lib.tensor([1.0, 3.0, 2.0], requires_grad=True)
    m, i = fn.MaxWithIndex.apply(x)
    assert m.requires_grad and not i.requires_grad
    assert int(i) == 1
    m.backward()
    np.testing.assert_allclose(_np(x.grad), [0.0, 1.0, 0.0])


def test_unused_output_grad_is_materialized_as_zeros(lib):
    fn = _functions(lib)
    fn.Pair.seen.clear()
    x = lib.tensor([1.0, 2.0], requires_grad=True)
    o1, _ = fn.Pair.apply(x, True)
    o1.sum().backward()
    (g2,) = fn.Pair.seen
    np.testing.assert_allclose(_np(g2), [0.0, 0.0])
    np.testing.assert_allclose(_np(x.grad), [1.0, 1.0])


def test_set_materialize_grads_false_passes_none(lib):
    fn = _functions(lib)
    fn.Pair.seen.clear()
    x = lib.tensor([1.0, 2.0], requires_grad=True)
    o1, _ = fn.Pair.apply(x, False)
    o1.sum().backward()
    assert fn.Pair.seen == [None]
    np.testing.assert_allclose(_np(x.grad), [1.0, 1.0])


def test_backward_returning_none_gives_no_grad(lib):
    fn = _functions(lib)
    x = lib.tensor([1.0, 2.0], requires_grad=True)
    fn.NoGrad.apply(x).sum().backward()
    assert x.grad is None


def test_too_few_gradients_raises(lib):
    fn = _functions(lib)
    a = lib.ones(2, requires_grad=True)
    with pytest.raises(RuntimeError, match=r"returned an incorrect number of gradients "
                                           r"\(expected 2, got 1\)"):
        fn.TooFew.apply(a, a).sum().backward()


def test_too_many_gradients_raises(lib):
    fn = _functions(lib)
    with pytest.raises(RuntimeError, match=r"returned an incorrect number of gradients "
                                           r"\(expected 1, got 2\)"):
        fn.TooMany.apply(lib.ones(2, requires_grad=True)).sum().backward()


def test_extra_none_gradients_are_allowed(lib):
    F = lib.autograd.Function

    class ExtraNone(F):
        @staticmethod
        def forward(ctx, x):
            return x * 2

        @staticmethod
        def backward(ctx, g):
            return g * 2, None
    x = lib.ones(2, requires_grad=True)
    ExtraNone.apply(x).sum().backward()
    np.testing.assert_allclose(_np(x.grad), [2.0, 2.0])


def test_wrong_gradient_shape_raises(lib):
    F = lib.autograd.Function

    class BadShape(F):
        @staticmethod
        def forward(ctx, x):
            return x.sum()

        @staticmethod
        def backward(ctx, g):
            return lib.ones(3)
    with pytest.raises(RuntimeError, match="returned an invalid gradient at index 0"):
        BadShape.apply(lib.ones(2, requires_grad=True)).backward()


def test_returning_an_input_gives_a_new_non_leaf(lib):
    fn = _functions(lib)
    x = lib.tensor([1.0], requires_grad=True)
    y = fn.Identity.apply(x)
    assert y is not x and not y.is_leaf and x.is_leaf
    y.sum().backward()
    np.testing.assert_allclose(_np(x.grad), [5.0])


def test_double_backward_through_function(lib):
    fn = _functions(lib)
    x = lib.tensor(2.0, requires_grad=True)
    (g,) = lib.autograd.grad(fn.Cube.apply(x), x, create_graph=True)
    assert g.item() == pytest.approx(12.0)
    (h,) = lib.autograd.grad(g, x)
    assert float(h) == pytest.approx(12.0)


def test_function_composes_with_builtin_ops(lib):
    fn = _functions(lib)
    x = lib.tensor([0.5, -1.0], requires_grad=True)
    y = (fn.MyExp.apply(x * 2) + x).sum()
    y.backward()
    np.testing.assert_allclose(_np(x.grad), 2 * np.exp([1.0, -2.0]) + 1, rtol=1e-6)


# ---------------------------------------------------------------- gradcheck

def _d(lib, *shape, seed=0):
    rng = np.random.default_rng(seed)
    return lib.tensor(rng.standard_normal(shape), dtype=lib.float64, requires_grad=True)


def test_gradcheck_passes_on_builtin_ops(lib):
    a, b = _d(lib, 3, 2), _d(lib, 2, 4, seed=1)
    assert lib.autograd.gradcheck(lambda a, b: (a @ b).tanh() * a.sum(), (a, b))


def test_gradcheck_on_a_non_contiguous_input(lib):
    # a transposed leaf: perturbing a flattened copy would leave the input unchanged
    x = _d(lib, 3, 2).detach().t().requires_grad_()
    assert not x.is_contiguous()
    assert lib.autograd.gradcheck(lambda a: (a * a * a[:, :1]).sum(1), (x,))
    assert lib.autograd.gradgradcheck(lambda a: (a * a).sum(1), (x,))


def test_gradcheck_passes_on_correct_function(lib):
    fn = _functions(lib)
    assert lib.autograd.gradcheck(fn.Cube.apply, (_d(lib, 4),))
    assert lib.autograd.gradcheck(lambda a, b: fn.ScaleAdd.apply(a, 1.5, b),
                                  (_d(lib, 3), _d(lib, 3, seed=2)))


def test_gradcheck_raises_on_wrong_function(lib):
    fn = _functions(lib)
    with pytest.raises(RuntimeError, match="Jacobian mismatch"):
        lib.autograd.gradcheck(fn.WrongSin.apply, (_d(lib, 3),))


def test_gradcheck_returns_false_when_not_raising(lib):
    fn = _functions(lib)
    assert lib.autograd.gradcheck(fn.WrongSin.apply, (_d(lib, 3),),
                                  raise_exception=False) is False


def test_gradgradcheck_passes_on_correct_function(lib):
    fn = _functions(lib)
    assert lib.autograd.gradgradcheck(fn.Cube.apply, (_d(lib, 3),))
    assert lib.autograd.gradgradcheck(lambda x: (x.sin() * x).sum(), (_d(lib, 3),))


def test_gradgradcheck_fails_on_wrong_second_derivative(lib):
    F = lib.autograd.Function

    class CubeBadGrad(F):
        """First derivative right, but computed with detached x: second derivative wrong."""
        @staticmethod
        def forward(ctx, x):
            ctx.save_for_backward(x)
            return x ** 3

        @staticmethod
        def backward(ctx, g):
            (x,) = ctx.saved_tensors
            return g * 3 * x.detach() ** 2
    assert lib.autograd.gradcheck(CubeBadGrad.apply, (_d(lib, 3),))
    assert lib.autograd.gradgradcheck(CubeBadGrad.apply, (_d(lib, 3),),
                                      raise_exception=False) is False
