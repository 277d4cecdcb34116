"""Issue 10, family 2: tensor attributes a compiled function reads (`.grad`, `is_leaf`,
`grad_fn`, `requires_grad`, `.data`, `_version`) are read per call, as eagerly, never baked
in from the first call. Same program eagerly, compiled and on PyTorch
(tests/soundness_harness.py)."""
import pytest
from soundness_harness import State, check_same, init_params


def _mlp(env, seed=3):
    lib = env.lib
    return init_params(env, lib.nn.Sequential(lib.nn.Linear(4, 3), lib.nn.Tanh(),
                                              lib.nn.Linear(3, 1)), seed)


def _grads_from_a_batch(env, model, i):
    """Eager forward/backward outside the compiled function: new `.grad`s each call."""
    model.zero_grad()
    x = env.randn(5, 4, seed=10 + i)
    (model(x) ** 2).mean().backward()


def test_hand_written_sgd_step_reads_each_calls_grad():
    def make(env):
        s = State(model=_mlp(env))
        params = list(s.model.parameters())

        def sgd_step(lr):
            with env.lib.no_grad():
                for p in params:
                    p -= lr * p.grad
        s.fn = sgd_step
        s.before = lambda i: _grads_from_a_batch(env, s.model, i)
        s.args = lambda i: ((0.1,), {})
        return s
    check_same(None, make, calls=4, torch=True)


def test_hand_written_sgd_with_momentum_buffers_in_a_dict():
    def make(env):
        s = State(model=_mlp(env), buf={})
        params = list(s.model.parameters())

        def step(lr, mom):
            with env.lib.no_grad():
                for k, p in enumerate(params):
                    b = s.buf.get(k)
                    b = p.grad.clone() if b is None else b * mom + p.grad
                    s.buf[k] = b
                    p.add_(b, alpha=-lr)
        s.fn = step
        s.before = lambda i: _grads_from_a_batch(env, s.model, i)
        s.args = lambda i: ((0.1,), {"mom": 0.9})
        return s
    check_same(None, make, calls=4, torch=True)


def test_compiled_optimizer_step_sgd():
    def make(env):
        s = State(model=_mlp(env))
        s.opt = env.lib.optim.SGD(s.model.parameters(), lr=0.1, momentum=0.9)
        s.fn = s.opt.step
        s.before = lambda i: _grads_from_a_batch(env, s.model, i)
        return s
    check_same(None, make, calls=4, torch=True)


def test_compiled_optimizer_step_adam():
    def make(env):
        s = State(model=_mlp(env))
        s.opt = env.lib.optim.Adam(s.model.parameters(), lr=0.05)
        s.fn = s.opt.step
        s.before = lambda i: _grads_from_a_batch(env, s.model, i)
        return s
    check_same(None, make, calls=4, torch=True)


def test_grad_accumulates_across_calls_when_backward_is_inside():
    """A training step that forgets zero_grad: `.grad` grows call after call eagerly."""
    def make(env):
        s = State(model=_mlp(env))
        s.args = lambda i: ((env.randn(5, 4, seed=i),), {})

        def step(x):
            loss = (s.model(x) ** 2).mean()
            loss.backward()
            with env.lib.no_grad():
                for p in s.model.parameters():
                    p -= 0.05 * p.grad
            return loss.detach()
        s.fn = step
        return s
    check_same(None, make, calls=4, torch=True)


def test_branch_on_grad_is_none():
    def make(env):
        s = State(w=env.randn(3, seed=1, requires_grad=True))
        s.args = lambda i: ((env.randn(3, seed=i),), {})

        def f(x):
            if s.w.grad is None:
                return (s.w * x).sum()
            return (s.w * x * s.w.grad).sum()
        s.fn = f
        return s
    check_same(None, make, calls=4, torch=True)


def test_branch_on_is_leaf():
    def make(env):
        s = State()

        def args(i):
            x = env.randn(3, seed=i, requires_grad=True)
            return ((x if i % 2 == 0 else x * 1.0),), {}
        s.args = args
        s.fn = lambda x: x * 2 if x.is_leaf else x * 3
        return s
    check_same(None, make, calls=4, torch=True)


def test_branch_on_grad_fn():
    def make(env):
        s = State()

        def args(i):
            x = env.randn(3, seed=i, requires_grad=True)
            return ((x.exp() if i % 2 else x),), {}
        s.args = args

        def f(x):
            if x.grad_fn is None:
                return x.sin()
            return x.cos()
        s.fn = f
        return s
    check_same(None, make, calls=4, torch=True)


def test_branch_on_grad_fn_name():
    def make(env):
        s = State()

        def args(i):
            x = env.randn(3, seed=i, requires_grad=True)
            return (((x * 2) if i % 2 else (x + 2)),), {}
        s.args = args

        def f(x):
            if type(x.grad_fn).__name__.startswith("Mul"):
                return x * 10
            return x - 10
        s.fn = f
        return s
    check_same(None, make, calls=4, torch=True)


def test_data_mul_in_place_has_its_own_version_counter():
    def make(env):
        s = State()
        s.args = lambda i: ((env.randn(3, seed=i, requires_grad=True),), {})

        def f(x):
            x.data.mul_(2)
            return x * 1.0
        s.fn = f
        return s
    check_same(None, make, calls=4, torch=True, versions=True)


def test_data_write_after_save_is_not_an_in_place_error():
    """PyTorch: writing through `.data` escapes version checks; backward sees new values."""
    def make(env):
        s = State()
        s.w = env.randn(3, seed=4, requires_grad=True)
        s.args = lambda i: ((env.randn(3, seed=i),), {})

        def f(x):
            y = s.w * s.w * x
            s.w.data.add_(1.0)
            return y
        s.fn = f
        return s
    check_same(None, make, calls=4, torch=True, versions=True)


@pytest.mark.parametrize("after", [".data write", "in-place write"])
def test_data_write_after_save_then_after_the_call(after):
    """Backward reads the saved input when it runs: a `.data` write after the call shows,
    an ordinary in-place write after the call fails backward's version check."""
    def make(env):
        s = State()
        s.w = env.randn(3, seed=4, requires_grad=True)
        s.args = lambda i: ((env.randn(3, seed=i),), {})

        def f(x):
            y = s.w * s.w * x
            s.w.data.add_(1.0)
            return y

        def backward(i, out):
            if after == ".data write":
                s.w.data.mul_(3.0)
            else:
                with env.lib.no_grad():
                    s.w.mul_(3.0)
            out.sum().backward()
        s.fn, s.backward = f, backward
        return s
    check_same(None, make, calls=4, torch=True, versions=True)


@pytest.mark.parametrize("case", ["saved result", "slice of data", "twice", "then in place"])
def test_data_writes_after_save_read_by_backward(case):
    """Backward reads what `.data` writes left in a saved tensor (its result, a slice of its
    storage, several writes); a later ordinary in-place write still fails as eagerly."""
    def make(env):
        s = State()
        s.w = env.randn(3, seed=4, requires_grad=True)
        s.args = lambda i: ((env.randn(3, seed=i, requires_grad=True),), {})

        def f(x):
            if case == "saved result":
                y = (x * s.w).exp()
                y.data.mul_(2.0)
                return y * 1.0
            y = s.w * x * x
            if case == "slice of data":
                s.w.data[1:] = 0.5
            elif case == "twice":
                s.w.data.add_(1.0)
                s.w.data.mul_(x.detach())
            else:
                s.w.data.add_(1.0)
                with env.lib.no_grad():
                    s.w.mul_(2.0)
            return y
        s.fn = f
        return s
    check_same(None, make, calls=4, torch=True, versions=True)


def test_data_write_after_save_with_backward_inside():
    def make(env):
        s = State()
        s.w = env.randn(3, seed=4, requires_grad=True)
        s.args = lambda i: ((env.randn(3, seed=i),), {})

        def step(x):
            s.w.grad = None
            y = (s.w * s.w * x).sum()
            s.w.data.mul_(0.5)
            y.backward()
            return y.detach()
        s.fn = step
        s.backward = lambda i, out: None
        return s
    check_same(None, make, calls=4, torch=True, versions=True)


def test_version_counter_read_inside():
    def make(env):
        s = State(buf=env.randn(3, seed=9))
        s.args = lambda i: ((env.randn(3, seed=i),), {})

        def f(x):
            s.buf.add_(x)
            return s.buf * s.buf._version
        s.fn = f
        return s
    check_same(None, make, calls=4, torch=True, versions=True)


def test_requires_grad_of_a_captured_parameter_toggled_between_calls():
    def make(env):
        s = State(w=env.randn(3, seed=1, requires_grad=True))
        s.args = lambda i: ((env.randn(3, seed=i, requires_grad=True),), {})
        s.before = lambda i: s.w.requires_grad_(i % 2 == 0)
        s.fn = lambda x: (x * s.w).sum() if s.w.requires_grad else (x * 2).sum()
        return s
    check_same(None, make, calls=4, torch=True)


def test_grad_assigned_by_the_user_between_calls():
    def make(env):
        s = State(w=env.randn(3, seed=1, requires_grad=True))
        s.before = lambda i: setattr(s.w, "grad", env.randn(3, seed=50 + i))

        def f():
            with env.lib.no_grad():
                s.w.sub_(s.w.grad * 0.5)
            return s.w * 1.0
        s.fn = f
        return s
    check_same(None, make, calls=4, torch=True)


def test_in_place_on_a_captured_leaf_raises_only_while_it_requires_grad():
    """`w.add_` inside is legal while `w` needs no grad and a RuntimeError once it does (a
    leaf requiring grad used in an in-place op): decided on every call, as eagerly."""
    def make(env):
        s = State(w=env.randn(3, seed=1))
        s.before = lambda i: s.w.requires_grad_(i in (1, 3))
        s.args = lambda i: ((env.randn(3, seed=i),), {})

        def f(x):
            s.w.add_(x)
            return s.w * 2
        s.fn = f
        return s
    check_same(None, make, calls=4, torch=True, versions=True)
