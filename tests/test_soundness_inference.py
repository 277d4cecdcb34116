"""Issue 10, family 7: inference tensors are part of the entry key. On a cache hit an
inference tensor passed outside inference mode raises PyTorch's errors (in-place update,
saved for backward) exactly as eagerly, and never is silently updated in place; results
computed from inference tensors carry the same `is_inference()` flag
(tests/soundness_harness.py; the harness records `is_inference()` of every tensor)."""
from soundness_harness import State, check_same


def _maybe_inference(env, i, pattern, rg=False):
    """A fresh input for call i: an inference tensor where `pattern[i]`."""
    if pattern[i]:
        with env.lib.inference_mode():
            return env.randn(3, seed=i)
    return env.randn(3, seed=i, requires_grad=rg)


def test_in_place_update_of_an_inference_tensor_outside_inference_mode():
    def make(env):
        s = State()
        s.args = lambda i: ((_maybe_inference(env, i, [False, False, True, True]),), {})

        def f(x):
            x.add_(1.0)
            return x * 2
        s.fn = f
        return s
    check_same(None, make, torch=True, versions=True)


def test_inference_tensor_saved_for_backward():
    def make(env):
        s = State(w=env.randn(3, seed=9, requires_grad=True))
        s.args = lambda i: ((_maybe_inference(env, i, [False, True, False, True]),), {})
        s.fn = lambda x: (x * s.w).sum()
        return s
    check_same(None, make, torch=True)


def test_inference_tensor_in_a_computation_that_saves_nothing():
    def make(env):
        s = State()
        s.args = lambda i: ((_maybe_inference(env, i, [False, True, True, False]),), {})
        s.fn = lambda x: x * 2 + 1
        return s
    check_same(None, make, torch=True)


def test_compiled_call_inside_inference_mode_then_outside():
    def make(env):
        s = State(w=env.randn(3, seed=9, requires_grad=True))
        inner = env.compile(lambda x: (x * s.w).tanh())

        def call(x, inference):
            if inference:
                with env.lib.inference_mode():
                    return inner(x)
            return inner(x)
        s.call = call
        s.args = lambda i: ((env.randn(3, seed=i), [False, True, False, True][i]), {})
        return s
    check_same(None, make, torch=True)


def test_inference_tensor_captured_from_state_then_updated():
    """A buffer made in inference mode and read by the compiled function: updating it in
    place outside inference mode must raise on every call, as eagerly."""
    def make(env):
        with env.lib.inference_mode():
            buf = env.randn(3, seed=5)
        s = State(buf=buf)

        def f(x):
            s.buf.mul_(0.5)
            return x + s.buf
        s.fn = f
        s.args = lambda i: ((env.randn(3, seed=i),), {})
        return s
    check_same(None, make, torch=True, versions=True)
