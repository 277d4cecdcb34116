"""Note [The name type] (compiler/state_unread.py): a tensor's `.type(dtype)` method does
not keep `.item()`s and changing numbers as guards on their values (d2l's `accuracy`:
`y_hat.type(y.dtype) == y`); the builtin `type`, by its name or an alias, still does."""
import tracegrad as tg
from _differential import compare


def accuracy(y_hat, y):
    # d2l's
    if len(y_hat.shape) > 1 and y_hat.shape[1] > 1:
        y_hat = y_hat.argmax(axis=1)
    cmp = y_hat.type(y.dtype) == y
    return cmp.type(y.dtype).sum()


def test_the_tensor_type_method_keeps_numbers_per_call():
    def make(comp):
        w = tg.nn.Parameter(tg.randn(4, 3))

        def step(X, y, epoch):
            y_hat = X @ w
            loss = tg.nn.functional.cross_entropy(y_hat, y)
            loss.backward()
            return loss.item() * epoch, accuracy(y_hat, y)
        return comp(step), {"w": w}

    def calls(step, objs, i):
        tg.manual_seed(i)
        return step(tg.randn(5, 4), tg.randint(0, 3, (5,)), i + 1)
    stats = compare(make, calls, n=5)
    assert stats.eager_calls == 0 and stats.traces == 2 and stats.cache_hits == 3, str(stats)


def _builtin_type(v):
    return type(v) is float


def _type_by_alias(v):
    kind = type
    return kind(v) is float


def test_the_builtin_type_still_sees_a_real_float():
    for check in (_builtin_type, _type_by_alias):
        def make(comp):
            def f(x):
                v = x.sum().item()
                return check(v), v
            return comp(f), {}
        compare(make, lambda f, objs, i: f(tg.full((2,), float(i))), n=4)
