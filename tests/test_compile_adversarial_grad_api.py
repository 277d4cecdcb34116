"""Adversarial review of the autograd API used inside compiled functions: tensor and module
hooks, custom autograd Functions (both `forward(ctx, ...)` and the PyTorch 2.x
`forward` / `setup_context` split), `autograd.grad` with `create_graph`, anomaly detection,
and the state these read changed between calls. Each test is a divergence found by running
a program as users write it eagerly and compiled (numpy, and `backend="jax"` where marked)
over several calls with changes between them; compiled must equal eager (values, `.grad`,
`requires_grad`, whether `grad_fn` is None, errors raised), or run eagerly with a warning,
and eager must match PyTorch when it is installed."""
import warnings

import numpy as np
import pytest

import tracegrad as tg


def _obs(x):
    """A comparable form of what a call gave: (array, requires_grad, grad_fn is None) for
    tensors, nested as given; an exception as ("raised", its builtin base type)."""
    if isinstance(x, (list, tuple)):
        return [_obs(v) for v in x]
    if hasattr(x, "detach") and hasattr(x, "requires_grad"):
        return ("tensor", x.detach().numpy().copy(), x.requires_grad, x.grad_fn is None)
    return x


def _same(a, b, rtol):
    if isinstance(a, list) and isinstance(b, list):
        return len(a) == len(b) and all(_same(x, y, rtol) for x, y in zip(a, b))
    if isinstance(a, tuple) and a and a[0] == "tensor":
        if not (isinstance(b, tuple) and b and b[0] == "tensor") or a[2:] != b[2:]:
            return False
        if rtol == 0:
            return a[1].dtype == b[1].dtype and np.array_equal(a[1], b[1], equal_nan=True)
        return a[1].shape == b[1].shape and np.allclose(a[1], b[1], rtol=rtol, atol=rtol,
                                                        equal_nan=True)
    return a == b


def _run(build, lib, compile_, calls):
    out = []
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        step = build(lib, compile_)
        for i in range(calls):
            try:
                out.append(_obs(step(i)))
            except Exception as e:           # the type eager raises; the next call must work
                out.append(("raised", RuntimeError if isinstance(e, RuntimeError)
                            else type(e)))
    return out


def _backward(y):
    """Run `y.backward()`; what it raised (its builtin base type), or None."""
    try:
        y.backward()
    except RuntimeError:
        return "RuntimeError"
    return None


def _identity(f=None, **_):
    return f


def check(build, calls=4, torch=True, backends=("numpy",)):
    """Run `build(lib, compile)` (which returns `step(i)`) eagerly, compiled on each backend
    and on PyTorch: compiled equals eager on every call (bitwise on numpy), eager equals
    PyTorch within rounding."""
    eager = _run(build, tg, _identity, calls)
    for backend in backends:
        compiled = _run(build, tg, lambda f, **kw: tg.compile(f, backend=backend, **kw), calls)
        rtol = 0 if backend == "numpy" else 1e-5
        for i, (e, c) in enumerate(zip(eager, compiled)):
            assert _same(e, c, rtol), f"{backend} call {i}: compiled {c!r} != eager {e!r}"
    if torch:
        th = pytest.importorskip("torch")
        ref = _run(build, th, _identity, calls)
        for i, (e, r) in enumerate(zip(eager, ref)):
            assert _same(e, r, 1e-5), f"call {i}: eager {e!r} != torch {r!r}"


def _jax():
    pytest.importorskip("jax")
    return ("numpy", "jax")


# -- custom Functions ------------------------------------------------------------------------

@pytest.mark.parametrize("jax", [False, True], ids=["numpy", "jax"])
def test_a_function_class_attribute_changed_between_calls_reaches_its_backward(jax):
    """`Scale.factor` is named only by the Function's own methods, which the state scan
    walked after the class: the attribute had no guard, and the cached backward kept the
    first call's factor."""
    def build(lib, compile_):
        class Scale(lib.autograd.Function):
            factor = 1.0

            @staticmethod
            def forward(ctx, x):
                return x * Scale.factor

            @staticmethod
            def backward(ctx, g):
                return g * Scale.factor
        w = lib.tensor([1., 2., 3.], requires_grad=True)
        f = compile_(lambda x: Scale.apply(w * x).sum())

        def step(i):
            Scale.factor = [1.0, 2.0, 2.0, 0.5][i]
            w.grad = None
            y = f(lib.ones(3))
            y.backward()
            return [y, w.grad]
        return step
    check(build, backends=_jax() if jax else ("numpy",))


class _Config:
    factor = 2.0


def _times_factor(cfg, x):
    return x * cfg.factor


def test_a_class_attribute_named_only_by_a_helper_scanned_later_is_guarded():
    """The same defect without a Function: the class is reached first (`cfg = _Config`), the
    attribute is named by a helper the scan walks afterwards."""
    w = tg.tensor([1., 2., 3.], requires_grad=True)

    def loss(x):
        cfg = _Config
        return _times_factor(cfg, w * x).sum()
    f = tg.compile(loss)
    try:
        for factor in (2.0, 3.0, 3.0, 0.5):
            _Config.factor = factor
            assert f(tg.ones(3)).item() == loss(tg.ones(3)).item()
    finally:
        _Config.factor = 2.0
    assert f.stats.traces == 3


def test_a_function_split_into_forward_and_setup_context():
    """PyTorch 2.x style: `forward(*args)` without ctx and `setup_context(ctx, inputs,
    output)`; tracegrad called forward with a ctx (TypeError)."""
    def build(lib, compile_):
        class MulCos(lib.autograd.Function):
            @staticmethod
            def forward(x, k):
                return x.sin() * k

            @staticmethod
            def setup_context(ctx, inputs, output):
                x, k = inputs
                ctx.k = k
                ctx.save_for_backward(x, output)

            @staticmethod
            def backward(ctx, g):
                x, out = ctx.saved_tensors
                return g * ctx.k * x.cos() + 0 * out, None
        w = lib.tensor([1., 2., 3.], requires_grad=True)
        f = compile_(lambda x, k: MulCos.apply(w * x, k).sum())

        def step(i):
            w.grad = None
            y = f(lib.ones(3) * (i + 1), float(i % 2 + 1))
            y.backward()
            return [y, w.grad]
        return step
    check(build)


def test_a_function_returning_its_input_leaves_the_inputs_other_uses_alone():
    """`forward` returns `x` itself (not marked dirty): the result is a new view carrying the
    Function's backward; `x`'s own history (used again by the caller) must not go through
    it. tracegrad rewired `x` itself, so both uses went through the Function's backward."""
    def build(lib, compile_):
        class Same(lib.autograd.Function):
            @staticmethod
            def forward(ctx, x):
                return x

            @staticmethod
            def backward(ctx, g):
                return g * 5
        w = lib.tensor([1., 2.], requires_grad=True)

        @compile_
        def f(x):
            h = w * x
            o = Same.apply(h)
            return (o * h).sum(), h.grad_fn is o.grad_fn

        def step(i):
            w.grad = None
            y, shared = f(lib.ones(2) * (i + 1))
            y.backward()
            return [y, w.grad, shared]
        return step
    check(build)


# -- anomaly detection -------------------------------------------------------------------------

@pytest.mark.parametrize("jax", [False, True], ids=["numpy", "jax"])
def test_detect_anomaly_inside_a_compiled_training_step(jax):
    """`with detect_anomaly(): loss.backward()` inside the step: the cached path ran the
    compiled backward, which checks no node, and returned NaN gradients where eager raises
    at SqrtBackward0. Such calls now run eagerly (with a warning)."""
    def build(lib, compile_):
        w = lib.tensor([1., 2.], requires_grad=True)

        @compile_
        def step(x):
            with lib.autograd.detect_anomaly():
                y = (w * x).sqrt().sum()
                y.backward()
            return y.detach()

        def call(i):
            w.grad = None
            return [step(lib.tensor([1., -1. if i == 2 else 1.])), w.grad]
        return call
    check(build, backends=_jax() if jax else ("numpy",))


def test_anomaly_detection_turned_on_around_a_compiled_backward_only_warns():
    """Detection turned on only around `backward()` of a compiled call: its one backward
    node cannot check the ops inside (a NaN made by sqrt's backward and dropped by a later
    op goes unseen where eager raises), so it says so, once per path."""
    w = tg.tensor([1., 2.], requires_grad=True)
    f = tg.compile(lambda x: (tg.where(x > 0, w * x, tg.zeros(2)).sqrt() * (x > 0)).sum())
    f(tg.ones(2))
    y = f(tg.tensor([1., -1.]))
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", "Anomaly Detection has been enabled")
        with pytest.warns(UserWarning, match="cannot check the ops inside the compiled"):
            with tg.autograd.detect_anomaly():
                y.backward()
        y = f(tg.tensor([1., -1.]))
        with warnings.catch_warnings():
            warnings.simplefilter("error")
            warnings.filterwarnings("ignore", "Anomaly Detection has been enabled")
            with tg.autograd.detect_anomaly():
                y.backward()            # once per path


def test_a_custom_backward_returning_a_gradient_of_the_wrong_shape_raises_at_backward():
    """Eager checks what a Function's backward returns (count, shapes). The compiled VJP rule
    did not: a scalar gradient was broadcast into the input's `.grad`, silently; and a
    backward raising while the backward program was built raised from the forward call."""
    def build(lib, compile_):
        class Sum(lib.autograd.Function):
            broken = False

            @staticmethod
            def forward(ctx, x):
                return x * 2

            @staticmethod
            def backward(ctx, g):
                return g.sum() if Sum.broken else g * 2
        w = lib.tensor([1., 2.], requires_grad=True)
        f = compile_(lambda x: Sum.apply(w * x).sum())

        def step(i):
            Sum.broken = i in (1, 2)
            w.grad = None
            y = f(lib.ones(2) * (i + 1))         # never raises: backward does
            return [y, _backward(y), w.grad]
        return step
    check(build)


def test_a_custom_backward_returning_too_many_gradients_raises_at_backward():
    def build(lib, compile_):
        class Twice(lib.autograd.Function):
            @staticmethod
            def forward(ctx, x):
                return x * 2

            @staticmethod
            def backward(ctx, g):
                return g * 2, g
        w = lib.tensor([1., 2.], requires_grad=True)
        f = compile_(lambda x: Twice.apply(w * x).sum())

        def step(i):
            y = f(lib.ones(2) * (i + 1))
            return [y, _backward(y), w.grad]
        return step
    check(build, calls=3)


# -- hooks on a compiled call's outputs ------------------------------------------------------

@pytest.mark.parametrize("kind", ["hook", "retain_grad"])
def test_a_hook_on_an_output_other_outputs_are_computed_from_refuses_a_partial_gradient(kind):
    """`h, loss = f(x)` with `loss` computed from `h` inside: a hook (or `retain_grad`) put
    on `h` after the call saw only the gradient flowing into `h` from outside, not the part
    from `loss` (one compiled backward node has no edge between its outputs): `h.grad`
    and a replacing hook's effect on `w.grad` differed silently. Now it raises."""
    w = tg.tensor([1., 2.], requires_grad=True)

    def f(x):
        h = (w * x).tanh()
        return h, (h * h).sum()
    compiled = tg.compile(f)
    results = []
    for fn in (f, compiled, compiled):
        w.grad = None
        h, loss = fn(tg.ones(2))
        if kind == "hook":
            h.register_hook(lambda g: g * 0 + 7)
        else:
            h.retain_grad()
        try:
            (loss + h.sum()).backward()
        except RuntimeError as e:
            assert fn is compiled and "computed from it inside the function" in str(e)
            results.append(None)
        else:
            results.append((w.grad.numpy().copy(), None if kind == "hook" else h.grad.numpy()))
    # the tracing call runs eagerly: exact; a cached call raises rather than differ
    for a, b in zip(results[0], results[1]):
        assert a is None and b is None or np.array_equal(a, b)
    assert results[2] is None
    # nothing flowing from the other outputs: the hook sees the whole gradient, compiled too
    for fn in (f, compiled, compiled):
        w.grad = None
        h, loss = fn(tg.ones(2))
        h.register_hook(lambda g: g * 3)
        h.sum().backward()
        expected = 3 * (1 - np.tanh(np.float32([1., 2.])) ** 2)
        np.testing.assert_allclose(w.grad.numpy(), expected, rtol=1e-6)


# -- autograd.grad and .grad -----------------------------------------------------------------

@pytest.mark.parametrize("jax", [False, True], ids=["numpy", "jax"])
def test_autograd_grad_with_batched_grad_outputs_inside(jax):
    """`is_grads_batched=True` (a Jacobian by batched vector-Jacobian products, as users
    compute one row per basis vector) was accepted and ignored: the batched grad_output
    then raised a shape mismatch."""
    def build(lib, compile_):
        w = lib.tensor([1., 2., 3.], requires_grad=True)

        @compile_
        def jacobian(x):
            y = (w * x).sin()
            jac, = lib.autograd.grad(y, w, grad_outputs=lib.eye(3), is_grads_batched=True,
                                     create_graph=True)
            return jac, (jac * lib.eye(3)).sum()

        def step(i):
            w.grad = None
            jac, tr = jacobian(lib.ones(3) * (i + 1))
            tr.backward()
            return [jac, tr, w.grad]
        return step
    check(build, calls=3, backends=_jax() if jax else ("numpy",))


def test_assigning_a_grad_of_another_size_or_dtype_raises_between_compiled_steps():
    """`w.grad = g` with another dtype or size was accepted, and the next step accumulated
    into it (a float64 .grad on a float32 weight); PyTorch raises at the assignment."""
    def build(lib, compile_):
        w = lib.tensor([1., 2.], requires_grad=True)

        @compile_
        def step(x):
            (w * x).sum().backward()
            return w.grad.sum()

        def call(i):
            try:
                if i == 1:
                    w.grad = lib.ones(2, dtype=lib.float64)
                if i == 2:
                    w.grad = lib.ones(3)
            except RuntimeError:
                pass
            return [step(lib.ones(2)), w.grad]
        return call
    check(build)
    w = tg.tensor([1., 2.], requires_grad=True)
    with pytest.raises(TypeError, match="expected to be a Tensor or None"):
        w.grad = [1., 1.]


def test_a_hook_on_the_grad_fn_of_a_compiled_output_says_what_it_sees():
    """`y.grad_fn.register_hook(fn)`: eager's node is SumBackward0, whose grad_inputs is the
    gradient of `w * x`; the compiled call's node stands for the whole function, so the
    hook silently got the gradient of `w` instead. It now warns; a pre-hook of a node
    with one output sees what eager's sees, and stays quiet."""
    w = tg.tensor([1., 2.], requires_grad=True)
    f = tg.compile(lambda x: (w * x).sum())
    two = tg.compile(lambda x: ((w * x).sin(), (w * x).cos()))
    for i in range(3):
        y = f(tg.ones(2) * (i + 1))
        a, b = two(tg.ones(2))
        if i == 0:
            continue                         # the tracing call returns eager's graph
        with warnings.catch_warnings():
            warnings.simplefilter("error")
            y.grad_fn.register_prehook(lambda go: (go[0] * 3,))
        with pytest.warns(UserWarning, match="grad_inputs are the gradients of the compiled"):
            y.grad_fn.register_hook(lambda gi, go: None)
        with pytest.warns(UserWarning, match="grad_outputs are the gradients of all 2"):
            a.grad_fn.register_prehook(lambda go: None)
        w.grad = None
        y.backward()
        np.testing.assert_array_equal(w.grad.numpy(), [3. * (i + 1)] * 2)


# -- saved tensors hooks -------------------------------------------------------------------

def _fp16_hooks(lib, log):
    """Hooks keeping float16 copies; `log`: a list they record into, or None (no Python
    effect a trace would see)."""
    def pack(t):
        if log is not None:
            log.append(("pack", tuple(t.shape)))
        return t.to(lib.float16)

    def unpack(t):
        if log is not None:
            log.append(("unpack", tuple(t.shape)))
        return t.to(lib.float32)
    return lib.autograd.graph.saved_tensors_hooks(pack, unpack)


@pytest.mark.parametrize("logged", [True, False], ids=["logged", "quiet"])
@pytest.mark.parametrize("where", ["inside", "around the call"])
def test_saved_tensors_hooks_compressing_activations(where, logged):
    """Activation compression (`saved_tensors_hooks` storing float16 copies) did not exist;
    with it, compiled calls made under the hooks or entering them run eagerly (a compiled
    program keeps arrays, not packed values): gradients then see the float16 rounding and
    every pack/unpack happens, as eagerly and on PyTorch."""
    def build(lib, compile_):
        w = lib.tensor([1., 2.], requires_grad=True)
        log = [] if logged else None

        @compile_
        def f(x):
            if where == "inside":
                with _fp16_hooks(lib, log):
                    return (w * x).sin().exp().sum()
            return (w * x).sin().exp().sum()

        def call(i):
            w.grad = None
            if where == "inside":
                z = f(lib.ones(2) * (i + 1) / 3)
            else:
                with _fp16_hooks(lib, log):
                    z = f(lib.ones(2) * (i + 1) / 3)
            z.backward()
            return [z, w.grad, list(log or ())]
        return call
    check(build, backends=_jax() if where == "inside" else ("numpy",))


def test_save_on_cpu_with_double_backward_and_a_custom_function():
    """The unpacked tensors keep the autograd identity of the saved ones (a leaf's
    accumulator, an op's grad_fn), so a gradient penalty through them reaches `w`; a
    custom Function's saved tensors go through the hooks too, without version checks."""
    def build(lib, compile_):
        class Square(lib.autograd.Function):
            @staticmethod
            def forward(ctx, x):
                ctx.save_for_backward(x)
                return x * x

            @staticmethod
            def backward(ctx, g):
                x, = ctx.saved_tensors
                return 2 * x * g
        w = lib.tensor([1., 2.], requires_grad=True)

        @compile_
        def f(x):
            with lib.autograd.graph.save_on_cpu():
                y = (w * x).tanh()
                z = (y * y).sum() + Square.apply(w * x).sum()
            g, = lib.autograd.grad(z, w, create_graph=True)
            return z, g

        def call(i):
            w.grad = None
            z, g = f(lib.ones(2) * (i + 1) / 3)
            (g.sum() + z).backward()
            return [z, g, w.grad]
        return call
    check(build)
    packs = []
    x = tg.tensor([1., 2.], requires_grad=True) * 1
    with tg.autograd.graph.saved_tensors_hooks(lambda t: packs.append(t) or t.clone(),
                                               lambda t: t):
        y = (x * x).sum()
    with tg.no_grad():
        x.add_(1)                        # the clone was saved: no version error, old values
    y.backward()
    assert len(packs) == 2
