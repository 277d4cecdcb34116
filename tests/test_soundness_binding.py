"""Issue 10, family 3: arguments are bound by name, not position; dict keys, defaults,
`**kwargs`, and scalars that compare equal but are not the same (-0.0 and 0.0, nan, True and
1, 1 and 1.0) keep their identity in the cache key (tests/soundness_harness.py)."""
import math

from soundness_harness import State, check_same


def _loss(pred, target):
    return ((pred - 2 * target) ** 2).mean()


def test_keyword_arguments_in_another_order_than_the_first_call():
    def make(env):
        s = State()

        def args(i):
            p = env.randn(4, seed=i, requires_grad=True)
            t = env.randn(4, seed=100 + i)
            return [((p, t), {}), ((), {"pred": p, "target": t}),
                    ((), {"target": t, "pred": p}), ((p,), {"target": t})][i]
        s.args = args
        s.fn = _loss
        return s
    check_same(None, make, calls=4, torch=True)


def test_keyword_arguments_that_both_require_grad_swap_order():
    def make(env):
        s = State()

        def args(i):
            a = env.randn(3, seed=i, requires_grad=True)
            b = env.randn(3, seed=10 + i, requires_grad=True)
            return ((), {"pred": a, "target": b} if i % 2 else {"target": b, "pred": a})
        s.args = args
        s.fn = _loss
        return s
    check_same(None, make, calls=4, torch=True)


def test_defaults_applied_and_overridden_by_keyword():
    def f(x, scale=2.0, shift=0.0):
        return x * scale + shift

    def make(env):
        s = State()

        def args(i):
            x = env.randn(3, seed=i, requires_grad=True)
            return [((x,), {}), ((x,), {"shift": 2.0}), ((x, 2.0), {}), ((x,), {"scale": 0.0,
                                                                              "shift": 2.0})][i]
        s.args = args
        return s
    check_same(f, make, calls=4, torch=True)


def test_optional_tensor_argument_given_positionally_by_name_or_not_at_all():
    def f(x, y=None, *, z=None):
        out = x * 2
        if y is not None:
            out = out + y
        if z is not None:
            out = out * z
        return out

    def make(env):
        s = State()

        def args(i):
            x, y = env.randn(3, seed=i, requires_grad=True), env.randn(3, seed=50 + i)
            return [((x,), {}), ((x,), {"z": y}), ((x, y), {}), ((x,), {"y": y})][i]
        s.args = args
        return s
    check_same(f, make, calls=4, torch=True)


def test_var_keyword_arguments_with_different_names():
    def f(x, **opts):
        return x * opts.get("a", 1.0) - opts.get("b", 0.0)

    def make(env):
        s = State()
        s.args = lambda i: ((env.randn(3, seed=i, requires_grad=True),),
                            [{"a": 3.0}, {"b": 3.0}, {"a": 3.0}, {"b": 3.0}][i])
        return s
    check_same(f, make, calls=4, torch=True)


def test_dict_argument_with_the_same_keys_in_another_order():
    def f(batch):
        return (batch["x"] * 3 - batch["y"]).sum()

    def make(env):
        s = State()

        def args(i):
            x = env.randn(3, seed=i, requires_grad=True)
            y = env.randn(3, seed=20 + i, requires_grad=True)
            return (({"x": x, "y": y} if i % 2 == 0 else {"y": y, "x": x}),), {}
        s.args = args
        return s
    check_same(f, make, calls=4, torch=True)


def test_dict_argument_with_other_keys_of_the_same_count():
    def f(batch):
        out = 0
        for k, v in batch.items():
            out = out + (v * (3.0 if k == "x" else 1.0)).sum()
        return out

    def make(env):
        s = State()

        def args(i):
            a = env.randn(3, seed=i, requires_grad=True)
            b = env.randn(3, seed=20 + i, requires_grad=True)
            return (({"x": a, "y": b} if i % 2 == 0 else {"u": a, "v": b}),), {}
        s.args = args
        return s
    check_same(f, make, calls=4, torch=True)


def test_negative_zero_scalar_keeps_its_sign():
    def f(x, s):
        return 1 / (x * s)

    def make(env):
        st = State()
        st.args = lambda i: ((env.tensor([1.0, 2.0, 3.0], requires_grad=True),
                              [0.0, -0.0, 0.0, -0.0][i]), {})
        return st
    check_same(f, make, calls=4, torch=True)


def test_negative_zero_read_by_python():
    def f(x, s):
        return x * math.copysign(1.0, s)

    def make(env):
        st = State()
        st.args = lambda i: ((env.randn(3, seed=i, requires_grad=True),
                              [0.0, -0.0, -0.0, 0.0][i]), {})
        return st
    check_same(f, make, calls=4, torch=True)


def test_nan_scalar_argument():
    def f(x, s):
        return x + s if s == s else x * 0.5

    def make(env):
        st = State()
        st.args = lambda i: ((env.randn(3, seed=i, requires_grad=True),
                              [1.0, math.nan, 1.0, math.nan][i]), {})
        return st
    check_same(f, make, calls=4, torch=True)


def test_true_and_one_and_one_point_zero_are_different_scalars():
    def make(env):
        s = State()
        s.args = lambda i: ((env.randn(3, seed=i), [1, True, 1.0, 1][i]), {})
        s.fn = lambda x, k: (x * 0 + env.lib.full((3,), k), type(k).__name__)
        return s
    check_same(None, make, calls=4, torch=True)


def test_isinstance_bool_branch():
    def f(x, flag):
        return x * 2 if isinstance(flag, bool) else x * flag * 5

    def make(env):
        s = State()
        s.args = lambda i: ((env.randn(3, seed=i, requires_grad=True), [True, 1, True, 1][i]), {})
        return s
    check_same(f, make, calls=4, torch=True)


def test_string_argument_selects_a_reduction():
    def f(x, reduction="mean"):
        return x.sum() if reduction == "sum" else x.mean()

    def make(env):
        s = State()
        kws = [{}, {"reduction": "sum"}, {"reduction": "mean"}, {"reduction": "sum"}]
        s.args = lambda i: ((env.randn(4, seed=i, requires_grad=True),), kws[i])
        return s
    check_same(f, make, calls=4, torch=True)


def test_varargs_of_tensors():
    def f(*xs):
        out = xs[0]
        for k, x in enumerate(xs[1:], 2):
            out = out + k * x
        return out

    def make(env):
        s = State()
        s.args = lambda i: (tuple(env.randn(3, seed=10 * i + j, requires_grad=True)
                                  for j in range(2 + i % 2)), {})
        return s
    check_same(f, make, calls=4, torch=True)


def test_the_same_tensor_passed_twice_by_keyword_and_position():
    def f(a, b):
        a.mul_(2)
        return a + b

    def make(env):
        s = State()

        def args(i):
            x = env.randn(3, seed=i)
            y = env.randn(3, seed=10 + i)
            return [((x, y), {}), ((x,), {"b": x}), ((), {"b": y, "a": x}),
                    ((), {"a": x, "b": x})][i]
        s.args = args
        return s
    check_same(f, make, calls=4, torch=True)
