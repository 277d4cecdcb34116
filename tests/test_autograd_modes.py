"""Grad modes (no_grad, enable_grad, set_grad_enabled, inference_mode) and inference tensors.

Covers each mode as context manager, decorator (with and without parentheses where PyTorch
allows it) and plain call, nesting, thread-locality, and the inference-tensor rules of the
"Autograd mechanics" note. Every test runs on tracegrad and torch through `lib`.
"""
import threading

import numpy as np
import pytest

import tracegrad as tg


@pytest.fixture(autouse=True)
def _restore_grad_mode(lib):
    # set_grad_enabled(False) as a plain call must not leak into other tests
    yield
    lib.set_grad_enabled(True)


def _leaf(lib):
    return lib.ones(2, requires_grad=True)


# ---------------------------------------------------------------- default mode

def test_default_mode_records(lib):
    assert lib.is_grad_enabled() and not lib.is_inference_mode_enabled()
    assert (_leaf(lib) * 2).requires_grad


# ---------------------------------------------------------------- no_grad / enable_grad

def test_no_grad_context_results_do_not_require_grad(lib):
    x = _leaf(lib)
    with lib.no_grad():
        assert not lib.is_grad_enabled()
        y = x * 2
    assert lib.is_grad_enabled()
    assert not y.requires_grad and y.grad_fn is None and y.is_leaf


def test_no_grad_results_are_usable_later_in_grad_mode(lib):
    x = _leaf(lib)
    with lib.no_grad():
        c = x * 2
    (c * x).sum().backward()
    np.testing.assert_allclose(x.grad.numpy(), [2.0, 2.0])


def test_no_grad_decorator_with_parentheses(lib):
    @lib.no_grad()
    def f(x):
        assert not lib.is_grad_enabled()
        return x * 2
    assert not f(_leaf(lib)).requires_grad
    assert lib.is_grad_enabled()


def test_no_grad_bare_decorator(lib):
    @lib.no_grad
    def f(x):
        return x * 2
    assert not f(_leaf(lib)).requires_grad
    assert f.__name__ == "f"


def test_decorated_function_keeps_metadata(lib):
    @lib.no_grad()
    def documented(x):
        """doc"""
        return x
    assert documented.__name__ == "documented" and documented.__doc__ == "doc"


@pytest.mark.parametrize("mode", ["no_grad", "inference_mode", "set_grad_enabled"])
def test_decorated_generator_runs_each_step_in_the_mode(lib, mode):
    # PyTorch re-enters the mode every time the generator resumes, and leaves it at each
    # yield, so the consumer's code between steps keeps its own mode
    deco = lib.set_grad_enabled(False) if mode == "set_grad_enabled" else getattr(lib, mode)()

    @deco
    def steps(x):
        for _ in range(2):
            got = yield (lib.is_grad_enabled(), (x * 2).requires_grad)
            assert got == "sent"

    x = _leaf(lib)
    gen = steps(x)
    assert next(gen) == (False, False)
    assert lib.is_grad_enabled() and not lib.is_inference_mode_enabled()
    assert (x * 2).requires_grad
    assert gen.send("sent") == (False, False)
    with pytest.raises(StopIteration):
        gen.send("sent")
    assert lib.is_grad_enabled()


def test_no_grad_restores_mode_after_exception(lib):
    with pytest.raises(ValueError):
        with lib.no_grad():
            raise ValueError
    assert lib.is_grad_enabled()


def test_enable_grad_inside_no_grad(lib):
    x = _leaf(lib)
    with lib.no_grad():
        with lib.enable_grad():
            assert lib.is_grad_enabled()
            y = x * 2
        assert not lib.is_grad_enabled()
    assert y.requires_grad


def test_enable_grad_as_decorators(lib):
    @lib.enable_grad()
    def f(x):
        return x * 2

    @lib.enable_grad
    def g(x):
        return x * 2
    with lib.no_grad():
        assert f(_leaf(lib)).requires_grad
        assert g(_leaf(lib)).requires_grad
        assert not lib.is_grad_enabled()


def test_nested_no_grad_restores_each_level(lib):
    with lib.no_grad():
        with lib.enable_grad():
            with lib.no_grad():
                assert not lib.is_grad_enabled()
            assert lib.is_grad_enabled()
        assert not lib.is_grad_enabled()
    assert lib.is_grad_enabled()


def test_no_grad_overrides_requires_grad_of_new_leaves_ops(lib):
    with lib.no_grad():
        w = lib.ones(2, requires_grad=True)     # the flag is kept on leaves
        assert w.requires_grad
        assert not (w + 1).requires_grad


# ---------------------------------------------------------------- set_grad_enabled

@pytest.mark.parametrize("mode", [True, False])
def test_set_grad_enabled_context_manager(lib, mode):
    x = _leaf(lib)
    with lib.set_grad_enabled(mode):
        assert lib.is_grad_enabled() is mode
        y = x * 2
    assert lib.is_grad_enabled()
    assert y.requires_grad is mode


def test_set_grad_enabled_plain_call_takes_effect_immediately(lib):
    lib.set_grad_enabled(False)
    assert not lib.is_grad_enabled()
    assert not (_leaf(lib) * 2).requires_grad
    lib.set_grad_enabled(True)
    assert (_leaf(lib) * 2).requires_grad


def test_set_grad_enabled_decorator_only_affects_the_call(lib):
    @lib.set_grad_enabled(False)
    def f(x):
        assert not lib.is_grad_enabled()
        return x * 2
    assert lib.is_grad_enabled()               # decorating did not switch the mode
    assert not f(_leaf(lib)).requires_grad
    assert lib.is_grad_enabled()


def test_set_grad_enabled_true_inside_no_grad(lib):
    with lib.no_grad():
        with lib.set_grad_enabled(True):
            assert (_leaf(lib) * 2).requires_grad
        assert not lib.is_grad_enabled()


# ---------------------------------------------------------------- inference mode

def test_inference_mode_context(lib):
    x = _leaf(lib)
    with lib.inference_mode():
        assert lib.is_inference_mode_enabled() and not lib.is_grad_enabled()
        y = x * 2
    assert not lib.is_inference_mode_enabled() and lib.is_grad_enabled()
    assert not y.requires_grad and y.grad_fn is None


def test_inference_mode_decorators(lib):
    @lib.inference_mode()
    def f(x):
        return x * 2

    @lib.inference_mode
    def g(x):
        return x * 2
    assert f(lib.ones(2)).is_inference()
    assert g(lib.ones(2)).is_inference()
    assert not lib.is_inference_mode_enabled()


def test_inference_mode_false_is_a_noop_outside(lib):
    with lib.inference_mode(False):
        assert not lib.is_inference_mode_enabled()
        assert not lib.ones(2).is_inference()
        assert (_leaf(lib) * 2).requires_grad


def test_inference_mode_false_inside_inference_mode(lib):
    with lib.inference_mode():
        with lib.inference_mode(False):
            assert not lib.is_inference_mode_enabled()
            assert lib.is_grad_enabled()
            assert not lib.ones(2).is_inference()
        assert lib.is_inference_mode_enabled()


def test_tensors_created_in_inference_mode_are_inference_tensors(lib):
    with lib.inference_mode():
        t = lib.ones(2)
        s = t * 2
    assert t.is_inference() and s.is_inference()
    assert not lib.ones(2).is_inference()


def test_no_grad_tensors_are_not_inference_tensors(lib):
    with lib.no_grad():
        assert not lib.ones(2).is_inference()


def test_inference_tensor_cannot_be_saved_for_backward(lib):
    with lib.inference_mode():
        t = lib.ones(2)
    w = _leaf(lib)
    with pytest.raises(RuntimeError, match="Inference tensors cannot be saved for backward"):
        w * t


def test_inference_tensor_usable_where_nothing_is_saved(lib):
    with lib.inference_mode():
        t = lib.ones(2)
    w = _leaf(lib)
    (w + t).sum().backward()
    np.testing.assert_allclose(w.grad.numpy(), [1.0, 1.0])


def test_clone_of_inference_tensor_is_normal(lib):
    with lib.inference_mode():
        t = lib.ones(2)
    c = t.clone()
    assert not c.is_inference()
    (_leaf(lib) * c).sum().backward()


def test_inplace_on_inference_tensor_outside_inference_mode_raises(lib):
    with lib.inference_mode():
        t = lib.ones(2)
    with pytest.raises(RuntimeError, match="Inplace update to inference tensor outside "
                                           "InferenceMode is not allowed"):
        t.add_(1)


def test_inplace_on_inference_tensor_inside_inference_mode_is_allowed(lib):
    with lib.inference_mode():
        t = lib.ones(2)
        t.add_(1)
    np.testing.assert_allclose(t.numpy(), [2.0, 2.0])


def test_inference_tensor_cannot_require_grad(lib):
    with lib.inference_mode():
        t = lib.ones(2)
    with pytest.raises(RuntimeError, match="Setting requires_grad=True on inference tensor "
                                           "outside InferenceMode is not allowed"):
        t.requires_grad_()


def test_ops_on_grad_leaf_inside_inference_mode_produce_inference_tensors(lib):
    w = _leaf(lib)
    with lib.inference_mode():
        r = w * 2
    assert r.is_inference() and not r.requires_grad


def test_view_of_normal_tensor_in_inference_mode_is_normal(lib):
    x = lib.ones(3)
    with lib.inference_mode():
        v = x[1:]
    assert not v.is_inference()


def test_views_of_an_inference_tensor_taken_outside_are_inference_tensors(lib):
    with lib.inference_mode():
        t = lib.ones(2, 2)
    views = [t[0], t.view(4), t.t(), t.detach(), t.reshape(4)]
    assert all(v.is_inference() for v in views)
    with pytest.raises(RuntimeError, match="Inplace update to inference tensor"):
        t[0].add_(1)                         # a view does not launder the write
    with pytest.raises(RuntimeError, match="Inference tensors cannot be saved"):
        _leaf(lib) * t.view(4)[:2]
    if lib is tg:                            # (PyTorch raises after writing; we before)
        assert t.tolist() == [[1.0, 1.0], [1.0, 1.0]]


# ---------------------------------------------------------------- thread-locality

def _in_thread(fn):
    out = []
    th = threading.Thread(target=lambda: out.append(fn()))
    th.start()
    th.join()
    return out[0]


def test_no_grad_is_not_seen_by_other_threads(lib):
    with lib.no_grad():
        other = _in_thread(lambda: (lib.is_grad_enabled(),
                                    (_leaf(lib) * 2).requires_grad))
        assert not lib.is_grad_enabled()
    assert other == (True, True)


def test_set_grad_enabled_plain_call_is_thread_local(lib):
    lib.set_grad_enabled(False)
    assert _in_thread(lib.is_grad_enabled) is True
    assert not lib.is_grad_enabled()


def test_mode_set_in_thread_does_not_leak_to_caller(lib):
    def work():
        lib.set_grad_enabled(False)
        return lib.is_grad_enabled()
    assert _in_thread(work) is False
    assert lib.is_grad_enabled()


def test_inference_mode_is_thread_local(lib):
    with lib.inference_mode():
        other = _in_thread(lambda: (lib.is_inference_mode_enabled(),
                                    lib.ones(2).is_inference()))
    assert other == (False, False)


def test_concurrent_threads_hold_their_own_mode():
    barrier = threading.Barrier(2)
    seen = {}

    def run(name, ctx):
        with ctx:
            barrier.wait()           # both threads are inside their blocks at once
            seen[name] = (tg.is_grad_enabled(), (tg.ones(1, requires_grad=True) * 2)
                          .requires_grad)
            barrier.wait()
    a = threading.Thread(target=run, args=("nograd", tg.no_grad()))
    b = threading.Thread(target=run, args=("grad", tg.enable_grad()))
    a.start(), b.start()
    a.join(), b.join()
    assert seen == {"nograd": (False, False), "grad": (True, True)}
