"""Issue 10, family 8: Python side effects and Python randomness inside a compiled function
(print, appends to lists, writes to dicts and attributes, writes and reads through
`x.numpy()`, `random`/`numpy.random` draws deciding values or loop lengths). Each is either
replayed on every call (compiled == eager) or reported by a UserWarning naming its source
line at trace time: never silently different. Each side effect's line carries a `# side:...`
marker; `check_same(..., allow_warning=line)` accepts a difference only with that warning."""
import contextlib
import io
import random

import numpy as np

import tracegrad as tg
from soundness_harness import State, check_same, line_of

LOG = []
CACHE = {}
COUNTER = 0


def _line(marker):
    return line_of(marker, __file__)


def _xs(env, s, rg=True):
    s.args = lambda i: ((env.randn(3, seed=i, requires_grad=rg),), {})


def _printing(x):
    print("batch of", x.shape[0])  # side:print
    return x * 2


def test_print_inside():
    def make(env):
        s = State(printed=[])
        inner = env.compile(_printing)

        def call(x):
            buf = io.StringIO()
            with contextlib.redirect_stdout(buf):
                out = inner(x)
            s.printed.append(buf.getvalue())
            return out
        s.call = call
        _xs(env, s)
        s.observe = lambda: list(s.printed)
        return s
    check_same(None, make, allow_warning=_line("side:print"))


def _appending(x):
    y = (x * 3).sum()
    LOG.append(x.shape[0])  # side:append
    return y


def test_list_append_of_a_python_value():
    def make(env):
        LOG.clear()
        s = State()
        _xs(env, s)
        s.observe = lambda: list(LOG)
        return s
    check_same(_appending, make, allow_warning=_line("side:append"))


def _history(x):
    y = x.tanh()
    LOG.append(y.detach())  # side:history
    return y.sum()


def test_list_append_of_a_tensor_history():
    def make(env):
        LOG.clear()
        s = State()
        _xs(env, s)
        s.observe = lambda: [t.numpy().round(5).tolist() for t in LOG]
        return s
    check_same(_history, make, allow_warning=_line("side:history"))


def _caching(x):
    y = x * 2
    CACHE["last"] = y  # side:dict
    return y + 1


def test_dict_write_of_an_intermediate():
    def make(env):
        CACHE.clear()
        s = State()
        _xs(env, s)
        s.observe = lambda: CACHE["last"].detach().numpy().round(5).tolist()
        return s
    check_same(_caching, make, allow_warning=_line("side:dict"))


def test_attribute_write_on_self():
    def make(env):
        class Counter:
            def __init__(self):
                self.calls = 0
                self.last = None

            def __call__(self, x):
                self.calls += 1  # side:attr
                self.last = x.detach() * 1
                return x * 2

        s = State(obj=Counter())
        s.fn = s.obj
        _xs(env, s)
        s.observe = lambda: (s.obj.calls, s.obj.last.numpy().round(5).tolist())
        return s
    check_same(None, make, allow_warning=_line("side:attr"))


def _numpy_write(x):
    x.numpy()[0] = 0.0  # side:numpy-write
    return x * 2


def test_write_through_numpy_view_of_an_input():
    def make(env):
        s = State()
        _xs(env, s, rg=False)
        return s
    check_same(_numpy_write, make, allow_warning=_line("side:numpy-write"), versions=True)


def _numpy_read(x):
    k = float(x.numpy().sum())  # side:numpy-read
    return x * k


def test_read_through_numpy_into_a_python_scalar():
    def make(env):
        s = State()
        _xs(env, s, rg=False)
        return s
    check_same(_numpy_read, make, allow_warning=_line("side:numpy-read"))


def _random_depth(x, w):
    for _ in range(random.randint(1, 4)):  # side:randint
        x = (x * w).tanh()
    return x.sum()


def test_random_randint_decides_the_loop_length():
    def make(env):
        s = State(w=env.randn(3, seed=1, requires_grad=True))
        s.args = lambda i: ((env.randn(3, seed=i), s.w), {})
        return s
    check_same(_random_depth, make, calls=6, allow_warning=_line("side:randint"))


def _random_scale(x):
    return x * np.random.rand()  # side:nprandom


def test_numpy_random_scalar():
    def make(env):
        s = State()
        _xs(env, s)
        return s
    check_same(_random_scale, make, allow_warning=_line("side:nprandom"))


def _random_dropout(x):
    keep = [random.random() > 0.3 for _ in range(3)]  # side:python-dropout
    return x * tg.tensor(keep, dtype=tg.float32)


def test_python_random_mask():
    def make(env):
        s = State()
        _xs(env, s)
        return s
    check_same(_random_dropout, make, allow_warning=_line("side:python-dropout"))


def test_model_with_random_depth_trains_like_eager():
    """The issue's example: depth drawn with Python's random per step; after several SGD
    steps the weights must equal eager's, or a warning named the line at trace time."""
    def make(env):
        s = State(w=env.randn(3, seed=1, requires_grad=True))
        s.args = lambda i: ((env.randn(3, seed=i), s.w), {})

        def backward(i, out):
            out.backward()
            with env.lib.no_grad():
                s.w -= 0.2 * s.w.grad
            s.w.grad = None
        s.backward = backward
        return s
    check_same(_random_depth, make, calls=6, allow_warning=_line("side:randint"))


def _counting(x):
    global COUNTER
    COUNTER += 1  # side:counter
    return x * COUNTER


def test_global_call_counter():
    def make(env):
        global COUNTER
        COUNTER = 0
        s = State()
        _xs(env, s)
        s.observe = lambda: COUNTER
        return s
    check_same(_counting, make, calls=5, allow_warning=_line("side:counter"))
