"""An op that fails on its values inside a compiled program (an index out of range, an integer
division by zero, a target out of range) leaves exactly eager's state and raises eager's
error: Note [Errors inside compiled programs] in tracegrad/codegen.py."""
import warnings

import numpy as np
import pytest

import tracegrad as tg
import tracegrad.nn as nn
import tracegrad.nn.functional as F

BACKENDS = ["numpy", "jax"]


def _backend(name):
    if name == "jax":
        pytest.importorskip("jax")
    return name


def _outcome(fn, args):
    try:
        out = fn(*args)
    except Exception as e:                   # noqa: BLE001 - the error is the outcome
        return None, (type(e), str(e))
    return out, None


def _same_runs(make, calls, backend):
    """Run `make()`'s program eagerly and compiled, each on fresh state, over `calls`
    (argument makers; some fail): errors equal, outcomes and `state()` bitwise equal (on
    the JAX backend within float tolerance)."""
    same = (np.testing.assert_array_equal if backend == "numpy" else
            lambda a, b, err_msg="": np.testing.assert_allclose(a, b, rtol=2e-5, atol=1e-6,
                                                               err_msg=err_msg))
    results = []
    for compiled in (False, True):
        tg.manual_seed(0)
        fn, state = make()
        if compiled:
            fn = tg.compile(fn, backend=backend)
        seen = []
        with warnings.catch_warnings():
            warnings.simplefilter("error")   # no eager fallback for good
            for args in calls:
                out, err = _outcome(fn, args())
                seen.append((None if out is None else out.detach().numpy().copy(), err,
                             [None if s is None else s.detach().numpy().copy()
                              for s in state()]))
        results.append((seen, fn))
    (eager, _), (comp, cf) = results
    for k, ((eo, ee, es), (co, ce, cs)) in enumerate(zip(eager, comp)):
        assert ee == ce, f"call {k}: {ee} != {ce}"
        assert (eo is None) == (co is None)
        if eo is not None:
            same(eo, co)
        for a, b in zip(es, cs):
            assert (a is None) == (b is None), f"call {k}"
            if a is not None:
                same(a, b, err_msg=f"call {k}")
    return cf


@pytest.mark.parametrize("backend", BACKENDS)
def test_in_place_updates_before_a_failing_index_are_eagers(backend):
    """`x.add_(1)` runs before the index fails in eager: the caller sees it, and a write
    after the failing op (`mul_`) does not happen."""
    backend = _backend(backend)
    x = tg.ones(3)

    def make():
        x.copy_(tg.ones(3))

        def f(x, idx):
            x.add_(1)
            y = x[idx] * 2
            x.mul_(3)
            return y
        return f, lambda: [x]
    good, bad = (lambda: (x, tg.tensor([1]))), (lambda: (x, tg.tensor([5])))
    cf = _same_runs(make, [good, good, bad, good], backend)
    assert cf.stats.traces == 1


@pytest.mark.parametrize("backend", BACKENDS)
def test_integer_division_by_zero_names_the_line_of_the_division(backend):
    backend = _backend(backend)

    def f(x, d):
        x.mul_(2)
        return x // d                        # the line the error names
    cf = tg.compile(f, backend=backend)
    for d in ([1, 1, 1], [1, 2, 1]):
        cf(tg.arange(3), tg.tensor(d))
    x = tg.arange(3)
    with pytest.raises(RuntimeError, match="ZeroDivisionError") as ei:
        cf(x, tg.tensor([1, 0, 1]))
    line = f.__code__.co_firstlineno + 2
    assert f"test_compile_runtime_errors.py:{line} in f" in str(ei.value)
    assert x.tolist() == [0, 2, 4]           # eager's mul_ ran before the failing op
    assert cf(tg.arange(3), tg.tensor([1, 1, 1])).tolist() == [0, 2, 4]


@pytest.mark.parametrize("backend", BACKENDS)
def test_training_step_with_a_bad_target_leaves_eagers_parameters_grads_and_state(backend):
    """A PyTorch-style step whose targets go out of range on one call: zero_grad already ran
    in eager (`.grad`s are None after the error), nothing was updated, and the next steps
    continue exactly as eager's."""
    backend = _backend(backend)

    def make():
        model = nn.Sequential(nn.Linear(4, 8), nn.ReLU(), nn.Dropout(0.2), nn.Linear(8, 3))
        opt = tg.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)

        def step(x, y):
            opt.zero_grad()
            loss = F.cross_entropy(model(x), y)
            loss.backward()
            opt.step()
            return loss

        def state():
            ps = list(model.parameters())
            return ps + [p.grad for p in ps] + [opt.state[p].get("momentum_buffer")
                                                for p in ps] + [tg.rand(2)]
        return step, state
    x = tg.randn(6, 4)
    good = lambda: (x, tg.tensor([0, 1, 2, 0, 1, 2]))    # noqa: E731
    bad = lambda: (x, tg.tensor([0, 1, 7, 0, 1, 2]))     # noqa: E731
    _same_runs(make, [good, good, good, bad, good, good], backend)


@pytest.mark.parametrize("backend", BACKENDS)
def test_random_draws_before_the_failing_op_are_eagers(backend):
    """Dropout draws, then the index fails: the generator has advanced as eager's did, no
    more (the compiled draw is rewound, the eager run draws once)."""
    backend = _backend(backend)

    def make():
        def f(x, idx):
            return F.dropout(x, 0.5)[idx]
        return f, lambda: [tg.rand(3)]
    x = tg.ones(4)
    _same_runs(make, [lambda: (x, tg.tensor([1])), lambda: (x, tg.tensor([1])),
                      lambda: (x, tg.tensor([9])), lambda: (x, tg.tensor([2]))], backend)


def test_a_write_planned_into_an_input_waits_for_the_last_op_that_may_fail():
    """The memory plan writes an update into its input only after every op that may fail
    on its values (the call could not rerun eagerly otherwise)."""
    def f(p, g, x, idx):
        with tg.no_grad():
            p.sub_(g * 0.1)                  # nothing reads p after: it could write into p
        return x[idx].sum()
    cf = tg.compile(f)
    p, g, x = tg.ones(5), tg.ones(5), tg.ones(5)
    cf(p, g, x, tg.tensor([1]))
    lines = cf.programs[0].forward_program.code.splitlines()
    index = next(i for i, ln in enumerate(lines) if "k_index" in ln)
    assert not any("out=i0" in ln for ln in lines[:index])
    with pytest.raises(IndexError):
        cf(p, g, x, tg.tensor([8]))
    np.testing.assert_allclose(p.numpy(), np.float32(1) - np.float32(0.1) * 2)  # eager's


def test_requires_grad_flag_set_inside_is_eagers_after_a_failure():
    def make():
        w = tg.ones(3)

        def f(idx):
            w.requires_grad_()
            return (w * 2)[idx].sum()
        return f, lambda: [tg.tensor(float(w.requires_grad)), w.grad]
    _same_runs(make, [lambda: (tg.tensor([0]),), lambda: (tg.tensor([4]),),
                      lambda: (tg.tensor([1]),)], "numpy")


class _CheckedSqrt(tg.autograd.Function):
    """A custom Function that refuses negative values, as user code does."""

    @staticmethod
    def forward(ctx, x):
        if (x < 0).any():
            raise ValueError("negative input")
        return x.sqrt()

    @staticmethod
    def backward(ctx, g):
        return g


def test_custom_function_raising_on_values_after_an_update_leaves_eagers_state():
    def make():
        buf = tg.zeros(3)

        def f(x, g):
            with tg.no_grad():
                buf.add_(g)                  # nothing reads buf after: may write in place
            return _CheckedSqrt.apply(x).sum()
        return f, lambda: [buf]
    ok, neg = (lambda: (tg.ones(3), tg.ones(3))), (lambda: (-tg.ones(3), tg.ones(3)))
    _same_runs(make, [ok, ok, neg, ok], "numpy")


def test_a_guard_failing_inside_a_step_gives_the_cleared_grads_back():
    """zero_grad clears `.grad` before the program; a guard failing inside it sends the
    call to another path or a re-trace, which must start from the call's own `.grad`s (the
    step reads them before its zero_grad)."""
    def make():
        w = tg.ones(3, requires_grad=True)
        opt = tg.optim.SGD([w], lr=0.1)

        def step(x):
            scale = 1.0 if w.grad is None else 0.5
            opt.zero_grad()
            y = (w * x).sum() * scale
            if (x.sum() > 0).item():         # a guard inside the program
                y = y * 3
            y.backward()
            opt.step()
            return y
        return step, lambda: [w, w.grad]
    pos, neg = (lambda: (tg.ones(3),)), (lambda: (-tg.ones(3),))
    _same_runs(make, [pos, pos, neg, pos, neg, neg], "numpy")


def test_a_step_starting_with_zero_grad_frees_the_old_grads_before_its_program():
    """Note [Clearing before the program] in compiler/trace_plan.py: keeping the old `.grad`s
    for a failed call to give back is needed only when eager could see them; a step that
    starts with zero_grad frees them first, so a warm step grows by far less than they
    take (here 2 MiB)."""
    import gc
    import tracemalloc
    model = nn.Sequential(*[nn.Linear(256, 256) for _ in range(8)])
    opt = tg.optim.SGD(model.parameters(), lr=0.01)

    def step(x, y):
        opt.zero_grad()
        loss = F.cross_entropy(model(x), y)
        loss.backward()
        opt.step()
        return loss
    cf = tg.compile(step, check=False)       # (check mode runs every call twice)
    x, y = tg.randn(2, 256), tg.tensor([1, 2])
    for _ in range(3):
        cf(x, y)
    gc.collect()
    tracemalloc.start()
    try:
        cf(x, y)                             # its .grads are traced: their freeing counts
        before = tracemalloc.get_traced_memory()[0]
        tracemalloc.reset_peak()
        cf(x, y)
        growth = tracemalloc.get_traced_memory()[1] - before
    finally:
        tracemalloc.stop()
    assert cf.stats.traces == 2          # (the first call found no .grads)
    assert growth < 2 ** 20, growth
