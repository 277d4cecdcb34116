"""Python language features inside compiled functions, run eagerly and compiled over several
calls with changing inputs and changing Python state: everything the caller can see must be
the same (outputs and their structure, printed text, logged records, mutated state), or the
call runs eagerly with a warning. Each test is a divergence found by an adversarial review,
minimized."""
import contextlib
import io
import logging
import warnings

import numpy as np
import pytest

import tracegrad as tg


def _t(seed, *shape, requires_grad=False):
    a = np.random.default_rng(seed).standard_normal(shape).astype(np.float32)
    return tg.tensor(a, requires_grad=requires_grad)


def _runs(fn, make, calls=5, state=lambda: None):
    """[(output values, printed text, state)] per call, eager then compiled; the compiled
    function; the messages of the warnings it issued."""
    results, issued = [], []
    for compiled in (False, True):
        f = tg.compile(fn) if compiled else fn
        rec = []
        for i in range(calls):
            buf = io.StringIO()
            with contextlib.redirect_stdout(buf), warnings.catch_warnings(record=True) as w:
                warnings.simplefilter("always")
                out = f(*make(i))
            issued += [str(x.message) for x in w if compiled]
            rec.append((_plain(out), buf.getvalue(), state()))
        results.append(rec)
    return results[0], results[1], f, issued


def _plain(x):
    if isinstance(x, tg.Tensor):
        return x.tolist()
    if isinstance(x, (list, tuple)):
        return type(x)(_plain(v) for v in x) if type(x) in (list, tuple) else \
            type(x)(*[_plain(v) for v in x])
    if isinstance(x, dict):
        return {k: _plain(v) for k, v in x.items()}
    return x


# -- print and logging (Note [Prints replayed] in compiler/print_replay.py) --

def test_a_print_of_python_values_prints_on_every_cached_call():
    def f(x, n):
        print("step", n, x.shape, [1, 2], sep="|", end="!\n")
        return x * 2

    eager, compiled, cf, issued = _runs(f, lambda i: (_t(i, 3), i % 2))
    assert compiled == eager and eager[3][1] == "step|1|torch.Size([3])|[1, 2]!\n"
    assert cf.stats.traces == 2 and cf.stats.eager_calls == 0 and not issued


def test_prints_replay_in_order_and_into_the_stdout_of_each_call():
    def f(x):
        print("a")
        y = x * 2
        print("b", flush=True)
        return y

    cf = tg.compile(f)
    for i in range(3):
        buf = io.StringIO()
        with contextlib.redirect_stdout(buf):
            cf(_t(i, 2))
        assert buf.getvalue() == "a\nb\n"
    assert cf.stats.traces == 1 and cf.stats.eager_calls == 0


def test_a_print_of_a_tensor_runs_eagerly_and_prints_its_values():
    def f(x):
        y = x * 2
        print(y)
        y.add_(1)                          # printed before the write, as eager prints
        return y

    eager, compiled, _, issued = _runs(f, lambda i: (_t(i, 3, requires_grad=True),))
    assert compiled == eager and any("print() of a tensor" in m for m in issued)


def test_a_print_of_a_list_holding_a_tensor_runs_eagerly():
    def f(x):
        print("parts", [x[0], 2])
        return x + 1

    eager, compiled, _, issued = _runs(f, lambda i: (_t(i, 3),))
    assert compiled == eager and any("print() of a tensor" in m for m in issued)


def test_logging_inside_logs_on_every_call():
    records = []

    class Keep(logging.Handler):
        def emit(self, record):
            records.append(record.getMessage())

    log = logging.getLogger("tracegrad.tests.adversarial_python")
    log.handlers[:], log.propagate = [Keep()], False
    log.setLevel(logging.INFO)

    def f(x):
        log.info("shape %s", tuple(x.shape))
        return x * 2

    counts = []
    for compiled in (False, True):
        records.clear()
        g = tg.compile(f) if compiled else f
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            for i in range(4):
                g(_t(i, 3))
        counts.append(list(records))
    assert counts[0] == counts[1] == ["shape (3,)"] * 4


# -- what a compiled function is and returns --

def test_a_compiled_generator_function_runs_eagerly_and_yields_each_calls_values():
    def gen(x):
        for k in range(3):
            yield x * k

    cg = tg.compile(gen)
    with pytest.warns(UserWarning, match="generator"):
        first = cg(_t(0, 2))
    for i in range(1, 4):
        x = _t(i, 2)
        assert [v.tolist() for v in cg(x)] == [v.tolist() for v in gen(x)]
    assert [v.tolist() for v in first] == [v.tolist() for v in gen(_t(0, 2))]
    assert cg.stats.traces == 0


def test_a_returned_set_is_a_new_set_of_each_calls_values():
    def f(x, n):
        return {n, n + 1}, frozenset({"a"}), {x * 2}

    eager, compiled, cf, _ = _runs(f, lambda i: (_t(i, 2), i % 2),
                                   calls=4)
    for (e, _, _), (c, _, _) in zip(eager, compiled):
        assert type(c[0]) is set and c[:2] == e[:2] and type(c[1]) is frozenset
        assert [t.tolist() for t in c[2]] == [t.tolist() for t in e[2]]
    a, b = cf(_t(0, 2), 0)[0], cf(_t(0, 2), 0)[0]
    # (n becomes an int read per call, then hashing it into the set keys it by value)
    assert a is not b and cf.stats.traces <= 3


def test_returning_a_function_runs_eagerly_and_returns_eagers_closure():
    def f(x):
        y = x * 2
        return y, (lambda z: z + y)

    cf = tg.compile(f)
    with pytest.warns(UserWarning, match="returns a function object"):
        cf(_t(0, 2))
    for i in range(1, 4):
        x = _t(i, 2)
        (y, add), (ye, adde) = cf(x), f(x)
        assert add(tg.ones(2)).tolist() == adde(tg.ones(2)).tolist()


# -- copies made inside (Note [Copying and pickling a tensor] in _tensor_storage.py) --

@pytest.mark.parametrize("how", ["copy", "pickle", "deepcopy"])
def test_a_tensor_copied_inside_holds_each_calls_values(how):
    import copy
    import pickle
    copier = {"copy": copy.copy, "deepcopy": copy.deepcopy,
              "pickle": lambda t: pickle.loads(pickle.dumps(t))}[how]

    def f(x):
        y = copier(x)
        y.mul_(2)
        return y + x

    eager, compiled, _, _ = _runs(f, lambda i: (_t(i, 3),))
    assert compiled == eager


def test_copy_and_pickle_give_a_new_leaf_as_pytorch_does():
    import copy
    import pickle
    torch = pytest.importorskip("torch")
    for lib in (tg, torch):
        x = lib.ones(3, requires_grad=True)
        z = x * 2
        z.note = "kept"
        for y in (copy.copy(z), pickle.loads(pickle.dumps(z))):
            assert y.is_leaf and y.requires_grad and y.grad_fn is None
            assert y.tolist() == [2.0, 2.0, 2.0] and y.note == "kept"
        assert copy.copy(z).data_ptr() == z.data_ptr()


def test_a_module_deep_copied_inside_is_copied_from_each_calls_parameters():
    import copy

    def run(compiled):
        tg.manual_seed(0)
        lin = tg.nn.Linear(3, 2)

        def f(x):
            half = copy.deepcopy(lin)
            with tg.no_grad():
                for p in half.parameters():
                    p.mul_(0.5)
            return lin(x) + half(x)

        g = tg.compile(f) if compiled else f
        outs = []
        for i in range(5):
            outs.append(g(_t(i, 4, 3)).tolist())
            with tg.no_grad():
                lin.weight.add_(0.25)      # the module copied changes between calls
        return outs

    assert run(True) == run(False)


# -- objects with __getattr__ (Note [Probing user objects] in compiler/state_kinds.py) --

class _Lookup:
    """Attributes looked up in a dict: a missing name raises KeyError, as such code does."""

    def __init__(self, **values):
        self.values, self.asked = dict(values), 0

    def __getattr__(self, name):
        vars(self)["asked"] += 1
        return vars(self)["values"][name]


@pytest.mark.parametrize("where", ["closure", "argument"])
@pytest.mark.parametrize("check", [False, True])
def test_an_object_with_a_dict_getattr_is_never_asked_what_eager_does_not_ask(where, check):
    obj = _Lookup(w=_t(9, 3))

    def f(x, o=None):
        return x * (o or obj).w

    cf = tg.compile(f, check=check)
    for i in range(4):
        x = _t(i, 3)
        args = (x, obj) if where == "argument" else (x,)
        assert cf(*args).tolist() == (x * obj.values["w"]).tolist()
    assert obj.asked == 4                      # the function's reads, as eagerly


# -- what a compiled call returns (Note [Rebuilt outputs] in tracing/tracer.py) --

def test_a_container_returned_twice_is_one_object_as_in_eager():
    def f(x):
        out = [x * 2]
        return out, {"same": out}

    cf = tg.compile(f)
    for i in range(3):
        a, d = cf(_t(i, 2))
        assert a is d["same"]
        a.append(None)                         # a caller's change shows through both
        assert len(d["same"]) == 2
    assert cf.stats.cache_hits == 2


def test_a_returned_defaultdict_keeps_its_factory():
    import collections

    def f(named):
        groups = collections.defaultdict(list)
        for k, v in named.items():
            groups[k[0]].append(v * 2)
        return groups

    eager, compiled, cf, _ = _runs(f, lambda i: ({"ab": _t(i, 2), "ac": _t(i, 2), "b": _t(i, 1)},))
    assert compiled == eager
    out = cf({"ab": _t(0, 2), "b": _t(0, 1)})
    assert type(out) is collections.defaultdict and out["new"] == []


def test_a_returned_dataclass_is_not_built_again_by_its_init():
    import dataclasses

    @dataclasses.dataclass
    class Scaled:
        x: object
        big: object = dataclasses.field(init=False)

        def __post_init__(self):
            self.big = self.x * 10

    def f(x):
        s = Scaled(x)
        s.big = s.big + 1                      # changed after __post_init__
        s.note = "set later"
        return s

    eager, compiled, cf, _ = _runs(f, lambda i: (_t(i, 2),))
    strip = [[(o.x.tolist(), o.big.tolist(), o.note)] for o, _, _ in eager]
    assert [[(o.x.tolist(), o.big.tolist(), o.note)] for o, _, _ in compiled] == strip
    assert cf.stats.cache_hits == 4


def test_a_parameter_argument_is_keyed_apart_from_a_plain_tensor():
    def f(x):
        return isinstance(x, tg.nn.Parameter), type(x).__name__, x * 2

    cf = tg.compile(f)
    for i in range(4):
        x = _t(i, 3, requires_grad=True)
        if i % 2:
            x = tg.nn.Parameter(x.detach())
        got, want = cf(x), f(x)
        assert got[:2] == want[:2] and got[2].tolist() == want[2].tolist()


def test_a_dict_keyed_by_a_tensor_made_inside_runs_eagerly_with_its_key():
    def f(x):
        y = x * 2
        return {y: "doubled"}, y

    cf = tg.compile(f)
    with warnings.catch_warnings(record=True) as w:
        warnings.simplefilter("always")
        for i in range(3):
            d, y = cf(_t(i, 3))
            assert list(d) == [y] and list(d)[0] is y
    assert any("keyed by a tensor" in str(x.message) for x in w)


def test_an_enum_member_returned_stays_compiled():
    import enum

    class Sign(enum.Enum):
        POS = 1
        NEG = -1

    def f(x):
        return (Sign.POS if x.sum() > 0 else Sign.NEG), x * 2

    eager, compiled, cf, issued = _runs(f, lambda i: (_t(i, 3),), calls=6)
    assert compiled == eager and cf.stats.eager_calls == 0 and not issued


# -- values that differ on every call (Note [Entropy and wall clocks] in _effects.py) --

@pytest.mark.parametrize("source", ["datetime", "today", "urandom", "uuid", "secrets",
                                    "localtime"])
def test_wall_clock_and_entropy_read_inside_are_never_frozen(source):
    import datetime
    import os
    import secrets
    import time
    import uuid
    read = {"datetime": lambda: datetime.datetime.now().microsecond,
            "today": lambda: datetime.date.today().toordinal(),
            "urandom": lambda: os.urandom(4)[0],
            "uuid": lambda: uuid.uuid4().int % 97,
            "secrets": lambda: secrets.randbelow(1000),
            "localtime": lambda: time.localtime().tm_sec}[source]

    def f(x):
        return x * 2, read()

    cf = tg.compile(f)
    with warnings.catch_warnings(record=True) as w:
        warnings.simplefilter("always")
        for i in range(3):
            cf(_t(i, 2))
    assert cf.stats.cache_hits == 0 and cf.stats.eager_calls == 2
    assert any("runs eagerly" in str(x.message) for x in w)


# -- attributes of functions (Note [Function attributes] in compiler/state.py) --

def test_a_setting_kept_on_a_helper_function_is_never_stale():
    def helper(x):
        return x * helper.scale

    helper.scale = 1.0

    def f(x):
        return helper(x)

    cf = tg.compile(f)
    for i in range(4):
        helper.scale = float(i)
        x = _t(i, 3)
        assert cf(x).tolist() == f(x).tolist()


def test_a_counter_kept_on_the_function_itself_counts_every_call():
    def run(compiled):
        def f(x):
            f.calls = getattr(f, "calls", 0) + 1
            return x * f.calls

        g = tg.compile(f) if compiled else f
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            outs = [g(_t(i, 3)).tolist() for i in range(4)]
        return outs, f.calls

    assert run(True) == run(False)


# -- layout read by Python (Note [Layout read by Python] in _effects.py) --

@pytest.mark.parametrize("read", ["stride", "storage_offset"])
def test_the_layout_of_an_argument_read_inside_is_a_guard(read):
    base = _t(0, 4, 8)

    def f(x):
        n = x.stride(0) if read == "stride" else x.storage_offset()
        return (x * 2 if n == 1 else x * 3), n

    def arg(i):                                # both non-contiguous 4x4: one key
        return base[:, :4].t() if i % 2 else base[:, i % 3:i % 3 + 4]

    eager, compiled, _, _ = _runs(f, lambda i: (arg(i),), calls=6)
    assert compiled == eager


# -- output and warnings the function redirects or catches itself --

def test_prints_the_function_redirects_go_where_eagers_go():
    log = io.StringIO()

    def f(x):
        with contextlib.redirect_stdout(io.StringIO()):
            print("silenced")                  # into a buffer made by each call
        with contextlib.redirect_stdout(log):
            print("logged")                    # into the caller's log on every call
        print("shown", file=log)
        return x * 2

    eager, compiled, cf, _ = _runs(f, lambda i: (_t(i, 2),), state=lambda: log.getvalue())
    assert [r[1] for r in compiled] == [""] * 5
    assert log.getvalue().count("logged\nshown\n") == 10 and cf.stats.cache_hits == 4


@pytest.mark.parametrize("inner", ["record", "ignore"])
def test_warnings_the_function_catches_itself_stay_caught(inner):
    def f(x):
        with warnings.catch_warnings(record=inner == "record") as w:
            if inner == "ignore":
                warnings.simplefilter("ignore")
            else:
                warnings.simplefilter("always")
            warnings.warn("handled inside")
        return x * (len(w) if inner == "record" else 1)

    cf = tg.compile(f)
    with warnings.catch_warnings(record=True) as outside:
        warnings.simplefilter("always")
        for i in range(5):
            x = _t(i, 2)
            assert cf(x).tolist() == f(x).tolist()
    assert not any("handled inside" in str(m.message) for m in outside)
    if inner == "ignore":
        assert cf.stats.cache_hits == 4


def test_a_compiled_partial_whose_keywords_change_in_place_binds_them_anew():
    import functools

    def f(x, scale, w=None):
        return x * scale + (0 if w is None else w)

    p = functools.partial(f, scale=2.0)
    cp = tg.compile(p)
    for i in range(5):
        p.keywords["scale"] = float(i)
        if i >= 3:
            p.keywords["w"] = tg.full((2,), float(i))   # a keyword added, then replaced
        assert cp(tg.ones(2)).tolist() == p(tg.ones(2)).tolist()
