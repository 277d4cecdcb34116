"""The generated per-path `call` (compiler/runner.py, Note [Runner]) does exactly what the
generic `CompiledPath.resolve` + `run` do: same outputs, same input mutations and version
bumps, same backward node (gradients), inference tensors under inference_mode, the same
errors, the same effects (`.grad` read and written, zero_grad, consumed graphs, runtime
hyper-parameters) and the same misses, with the generic reasons."""
import warnings

import numpy as np
import pytest

import tracegrad as tg
from tracegrad.compiler.path import CompiledPath
from training import sgd_step

RNG = np.random.default_rng(11)
bias = tg.tensor(RNG.standard_normal(3).astype(np.float32))


def _step(w, x, buf):
    loss = ((x @ w).tanh() + bias).pow(2).mean()
    (g,) = tg.autograd.grad(loss, [w])
    with tg.no_grad():
        w -= 0.1 * g
        buf.add_(1)
    return loss.detach(), (x * 2).sum(0)


def _loss(w, x):
    return ((x @ w).sigmoid() * bias).sum(), (x * w.sum()).mean()


def _index(x, i):
    return x[i] * 2


def _args(fn):
    w = tg.tensor(RNG.standard_normal((4, 3)).astype(np.float32), requires_grad=True)
    x = tg.tensor(RNG.standard_normal((5, 4)).astype(np.float32))
    if fn is _step:
        return [w, x, tg.zeros(3)]
    if fn is _loss:
        return [w, x]
    return [x, tg.tensor([0, 4, 1])]


def _clone(args):
    return [tg.tensor(a.detach().numpy().copy(), requires_grad=a.requires_grad) for a in args]


def _state(args, outs):
    return ([o.detach().numpy().copy() for o in outs], [a.detach().numpy().copy() for a in args],
            [a._version for a in args])


@pytest.mark.parametrize("fn", [_step, _loss, _index], ids=lambda f: f.__name__)
def test_generated_runner_equals_generic_run(fn):
    c = tg.compile(fn)
    c(*_args(fn))
    path = c.programs[0]
    assert getattr(path.call, "code", "").startswith("def call(args")   # the generated one
    a1 = _args(fn)
    a2 = _clone(a1)
    (o1, why), o2 = path.call(a1), CompiledPath.run(path, a2)
    assert why is None
    assert all(o.requires_grad == p.requires_grad for o, p in zip(o1, o2))
    s1, s2 = _state(a1, o1), _state(a2, o2)
    for x, y in zip(s1[0] + s1[1], s2[0] + s2[1]):
        np.testing.assert_array_equal(x, y)
    assert s1[2] == s2[2]
    if fn is _loss:
        for outs, args in ((o1, a1), (o2, a2)):
            (outs[0] + outs[1]).backward()
        np.testing.assert_array_equal(a1[0].grad.numpy(), a2[0].grad.numpy())
    if fn is _step:                          # (its backward inside refuses inference mode)
        return
    with tg.inference_mode():                # another entry (the key holds the mode),
        c(*_args(fn))                        # whose path marks its results as inference
        path = next(p for p in c.programs if p is not c.programs[0])
        assert all(o.is_inference() for o in path.call(_args(fn))[0])
        assert all(o.is_inference() for o in CompiledPath.run(path, _args(fn)))


def test_generated_runner_raises_the_eager_error():
    c = tg.compile(_index)
    x, i = _args(_index)
    c(x, i)
    bad = tg.tensor([0, 9, 1])
    with pytest.raises(IndexError) as eager:
        _index(x, bad)
    with pytest.raises(IndexError) as compiled:
        c(x, bad)                           # same entry key: the generated runner runs
    assert type(compiled.value) is type(eager.value)
    assert str(compiled.value) == str(eager.value)
    assert c.stats.traces == 1


def _training(set_to_none=True):
    return sgd_step(set_to_none=set_to_none)


@pytest.mark.parametrize("set_to_none", [True, False])
def test_generated_call_replays_the_training_idiom_like_the_generic_run(set_to_none):
    x = tg.tensor(RNG.standard_normal((5, 4)).astype(np.float32))
    y = tg.tensor([0, 2, 1, 1, 0])
    runs = []
    for generated in (True, False):
        model, opt, step = _training(set_to_none)
        c = tg.compile(step)
        losses = []
        for k in range(6):
            if k == 3:
                opt.param_groups[0]["lr"] = 0.05        # a runtime number: no re-trace
            if not generated:
                for p in c.programs:
                    p.call = CompiledPath.call.__get__(p)   # the generic resolve + run
            losses.append(c(x, y).item())
        assert c.stats.traces <= 2
        if generated:
            assert all(hasattr(p.call, "code") for p in c.programs)
        runs.append((losses, [p.detach().numpy().copy() for p in model.parameters()],
                     [p.grad.numpy().copy() for p in model.parameters()],
                     [s["momentum_buffer"].numpy().copy() for s in opt.state.values()]))
    for a, b in zip(runs[0][1:], runs[1][1:]):
        for u, v in zip(a, b):
            np.testing.assert_array_equal(u, v)
    assert runs[0][0] == runs[1][0]
    # and both equal eager
    model, opt, step = _training(set_to_none)
    eager = []
    for k in range(6):
        if k == 3:
            opt.param_groups[0]["lr"] = 0.05
        eager.append(step(x, y).item())
    assert eager == runs[0][0]
    for u, v in zip(model.parameters(), runs[0][1]):
        np.testing.assert_array_equal(u.detach().numpy(), v)


def test_generated_call_misses_with_the_generic_reason():
    model, opt, step = _training()
    c = tg.compile(step)
    x = tg.tensor(RNG.standard_normal((5, 4)).astype(np.float32))
    y = tg.tensor([0, 2, 1, 1, 0])
    c(x, y)
    c(x, y)
    path = c.programs[-1]
    assert hasattr(path.call, "code")
    opt.param_groups[0]["lr"] = "fast"           # not a number any more
    outs, why = path.call([x, y])
    assert outs is None and why == CompiledPath.resolve(path, [x, y])[1]
    assert "no longer a number" in why
    opt.param_groups[0]["lr"] = 0.1
    w = model[0].weight
    with tg.no_grad():
        model[0].weight = tg.nn.Parameter(w.detach().t().contiguous().t())   # not C order
    outs, why = path.call([x, y])
    assert outs is None and why is not None
    model[0].weight = w
    # an argument sharing memory with a captured tensor
    outs, why = path.call([model[0].bias.detach(), y])
    assert outs is None and why is not None


@pytest.mark.parametrize("number", [float, np.float64, np.float32, int])
def test_a_learning_rate_of_any_number_type_is_read_per_call(number):
    """A learning rate computed with numpy (`np.cos(...)` in a hand-written schedule) is a
    number like a Python float: read per call, never a re-trace, equal to eager."""
    x = tg.tensor(RNG.standard_normal((5, 4)).astype(np.float32))
    y = tg.tensor([0, 2, 1, 1, 0])
    results = []
    for compiled in (False, True):
        model, opt, step = _training()
        f = tg.compile(step) if compiled else step
        losses = []
        for k in range(8):
            lr = 0.05 + 0.01 * np.cos(k) if number is not int else k % 2
            opt.param_groups[0]["lr"] = number(lr)
            losses.append(f(x, y).item())
        results.append((losses, [p.detach().numpy().copy() for p in model.parameters()]))
        if compiled:
            assert f.stats.traces <= 2 and f.stats.eager_calls == 0
    assert results[0][0] == results[1][0]
    for a, b in zip(results[0][1], results[1][1]):
        np.testing.assert_array_equal(a, b)


def _compare_with_eager(make, calls, change):
    """Run `make()`'s step eagerly and compiled over `calls` calls, `change(opt, k)` before
    each; the losses and parameters must be identical."""
    x = tg.tensor(RNG.standard_normal((5, 4)).astype(np.float32))
    y = tg.tensor([0, 2, 1, 1, 0])
    runs = []
    for compiled in (False, True):
        model, opt, step = make()
        f = tg.compile(step) if compiled else step
        losses = []
        for k in range(calls):
            change(opt, k)
            out = f(x, y)
            losses.append(out.item() if isinstance(out, tg.Tensor) else out)
        runs.append((losses, [p.detach().numpy().copy() for p in model.parameters()]))
    assert runs[0][0] == runs[1][0]
    for a, b in zip(runs[0][1], runs[1][1]):
        np.testing.assert_array_equal(a, b)
    return f


def test_a_learning_rate_the_function_also_reads_directly_is_never_stale():
    """The optimizer reads lr per call (a runtime number), but user code that reads the
    same place directly bakes it into the trace: that read keeps its guard (found in review:
    the guard was dropped and the compiled loss kept the first lr)."""
    def make():
        model, opt, step = sgd_step()

        def scaled(x, y):
            loss = step(x, y)
            return loss * opt.param_groups[0]["lr"]
        return model, opt, scaled

    def change(opt, k):
        opt.param_groups[0]["lr"] = 0.1 * (k + 1)
    f = _compare_with_eager(make, 4, change)
    # after the first change the place is read per call, by the optimizer and by the user
    # code alike (Note [Float attributes that change]): never stale, never re-traced
    assert f.stats.traces == 3 and "read per call" in f.stats.retraces[0]


def test_a_user_optimizer_reading_lr_directly_is_never_stale():
    class Logged(tg.optim.SGD):
        def step(self, closure=None):
            for g in self.param_groups:          # a direct read, scaling the gradients
                for p in g["params"]:
                    p.grad.mul_(1.0 + g["lr"])
            return super().step(closure)

    def make():
        return sgd_step(make_opt=lambda ps: Logged(ps, lr=0.1, momentum=0.9))

    def change(opt, k):
        opt.param_groups[0]["lr"] = 0.05 * (k + 1)
    _compare_with_eager(make, 4, change)


def test_adam_betas_rewritten_every_step_are_runtime_values():
    def make():
        return sgd_step(make_opt=lambda ps: tg.optim.Adam(ps, lr=0.01, amsgrad=True))

    def change(opt, k):
        opt.param_groups[0]["betas"] = (0.95 - 0.01 * k, 0.999 - 0.0001 * (k % 3))
    f = _compare_with_eager(make, 7, change)
    assert f.stats.traces <= 2 and f.stats.eager_calls == 0
    # not a pair any more: eager's unpacking error, compiled too
    _, opt, _ = make()
    for p in f.programs:
        assert any(k == "betas" for _, _, k, *_ in p.scalar_sources)
    model, opt, step = make()
    c = tg.compile(step)
    x = tg.tensor(RNG.standard_normal((5, 4)).astype(np.float32))
    y = tg.tensor([0, 2, 1, 1, 0])
    c(x, y)
    c(x, y)
    opt.param_groups[0]["betas"] = (0.9, 0.99, 0.5)
    with pytest.raises(ValueError, match="too many values to unpack"):
        step(x, y)
    with pytest.raises(ValueError, match="too many values to unpack"):
        c(x, y)


def test_freezing_and_unfreezing_a_layer_between_steps():
    """Fine-tuning: `requires_grad_(False)` on a weight between compiled steps (found in
    review: the re-trace crashed in the VJP pass, whose rule got no operands when only the
    bias needed a gradient)."""
    def make():
        return sgd_step()

    def change(opt, k):
        w = opt.param_groups[0]["params"][0]
        w.requires_grad_(k not in (2, 3, 4))
        if not w.requires_grad:
            w.grad = None
    f = _compare_with_eager(make, 7, change)
    assert f.stats.eager_calls == 0


def test_linear_with_only_its_bias_requiring_grad_compiles():
    w, x = tg.randn(3, 4), tg.randn(5, 4)
    b = tg.zeros(3, requires_grad=True)
    f = tg.compile(lambda x: tg.nn.functional.linear(x, w, b).pow(2).sum())
    f(x).backward()
    g = b.grad.numpy().copy()
    b.grad = None
    tg.nn.functional.linear(x, w, b).pow(2).sum().backward()
    np.testing.assert_array_equal(g, b.grad.numpy())


def test_returning_loss_item_is_exact_and_compiles():
    """`return loss.item()`: the number is an output of the program, read per call (Note
    [Numbers taken from tensors]), not a guard failing on the next call: the values stay
    exact, nothing runs eagerly and no warning is issued."""
    def make():
        model, opt, step = sgd_step()
        return model, opt, lambda x, y: step(x, y).item()
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        f = _compare_with_eager(make, 12, lambda opt, k: None)
    assert f.stats.eager_calls == 0 and f.stats.traces <= 2


def test_a_consumed_loss_reaches_the_parameters_it_came_from_like_eager():
    """After backward() ran inside, `autograd.grad(loss, [p])` raises the second-time error
    for a parameter the loss came from, and gives None for an unrelated tensor, eagerly and
    compiled alike."""
    x, y = tg.randn(5, 4), tg.tensor([0, 1, 2, 1, 0])
    other = tg.ones(2, requires_grad=True)
    for compiled in (False, True):
        model, opt, step = sgd_step()
        f = tg.compile(step) if compiled else step
        for _ in range(3):
            loss = f(x, y)
            with pytest.raises(RuntimeError, match="second time"):
                tg.autograd.grad(loss, [model[0].weight])
            assert tg.autograd.grad(loss, [other], allow_unused=True) == (None,)


@pytest.mark.parametrize("opt_name", ["sgd", "adam"])
def test_numbers_derived_from_hyper_parameters_follow_every_change(opt_name):
    """What the program computes from hyper-parameters alone (`-lr`, `momentum != 0`,
    `1 - beta1`) is kept between calls while they are unchanged (Note [Memoized scalars] in
    codegen.py) and recomputed when one changes, including back to an earlier value: the
    steps stay identical to eager's through runs of unchanged and changed values."""
    def make():
        if opt_name == "sgd":
            return sgd_step(make_opt=lambda ps: tg.optim.SGD(
                ps, lr=0.1, momentum=0.9, dampening=0.1, weight_decay=0.01))
        return sgd_step(make_opt=lambda ps: tg.optim.AdamW(ps, lr=0.01))

    schedule = [0, 0, 0, 1, 1, 0, 2, 2, 2, 0, 0]

    def change(opt, k):
        g = opt.param_groups[0]
        v = schedule[k]
        g["lr"] = (0.1, 0.05, 0.2)[v] if opt_name == "sgd" else (0.01, 0.02, 0.005)[v]
        if opt_name == "sgd":
            g["momentum"] = (0.9, 0.5, 0.9)[v]
            g["dampening"] = (0.1, 0.0, 0.3)[v]
        else:
            g["betas"] = ((0.9, 0.999), (0.8, 0.99), (0.9, 0.9))[v]
            g["weight_decay"] = (0.01, 0.0, 0.1)[v]
    f = _compare_with_eager(make, len(schedule), change)
    assert f.stats.eager_calls == 0
    assert any("_memo" in p.forward_program.code for p in f.programs)


def test_arrays_swapped_or_reshaped_under_captured_tensors_are_seen():
    """The runner keeps the arrays it found valid (Note [Checked arrays]); a parameter
    given another array (`p.data = ...`), an array reshaped in place through
    `np.asarray(p)`, or an argument sharing memory with the new array, are each seen
    on the next call, as eager sees them."""
    x = tg.tensor(RNG.standard_normal((4, 4)).astype(np.float32))
    runs = []
    for compiled in (False, True):
        w = tg.tensor(np.arange(4, dtype=np.float32), requires_grad=True)

        def f(x):
            return (x * w).sum()
        f = tg.compile(f) if compiled else f
        out = []

        def call(arg):
            w.grad = None
            loss = f(arg)
            loss.backward()
            out.append((loss.item(), w.grad.shape, w.grad.numpy().tolist()))
        call(x)
        call(x)
        w.data = tg.full((4,), 2.0)                      # same shape, new array
        call(x)
        with tg.no_grad():
            w.mul_(2)                                    # in place on the new array
        call(x)
        np.asarray(w).shape = (4, 1)                     # reshaped in place
        call(x)
        call(x)
        np.asarray(w).shape = (4,)
        call(x)
        call(w.detach()[None].expand(4, 4) * 1)
        call(w.detach())                                 # shares the new array
        runs.append(out)
    assert runs[0] == runs[1]


def test_an_argument_sharing_memory_with_a_parameter_given_a_new_array_is_seen():
    """After `w.data = ...`, an argument viewing the new array shares memory with the
    captured `w` the function updates in place: the kept owners (Note [Checked arrays])
    are those of the new array, so the generated call gives way to the generic one, as
    before the swap."""
    w = tg.tensor(np.arange(4, dtype=np.float32))

    def f(x):
        with tg.no_grad():
            w.mul_(2)
        return (x * 1).sum()
    c = tg.compile(f)
    c(tg.ones(4))
    c(tg.ones(4))
    (path,) = c.programs
    assert path.call is not CompiledPath.call.__get__(path)
    outs, why = path.call([w[:2].detach()])
    assert outs is None and why is not None
    w.data = tg.full((4,), 3.0)
    outs, why = path.call([tg.ones(4)])
    assert why is None
    outs, why = path.call([w[1:].detach()])
    assert outs is None and why is not None
