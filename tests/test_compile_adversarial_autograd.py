"""Adversarial review of compiled code combined with autograd features users reach for:
tensor hooks, module hooks, custom autograd Functions, grad modes, views and in-place,
autograd.grad and double backward. Each test is a program written as users write it, run
for several calls (a defect often shows only once the cached path runs) eagerly, compiled,
and on PyTorch when installed; compiled must equal eager bitwise (or run eagerly with a
warning, which these tests allow), and eager must match PyTorch."""
import functools
import warnings

import numpy as np
import pytest

import tracegrad as tg


def _obs(x):
    """A comparable form of what a call gave: arrays for tensors, nested as given."""
    if isinstance(x, (list, tuple)):
        return [_obs(v) for v in x]
    if hasattr(x, "detach") and hasattr(x, "requires_grad"):
        return ("tensor", x.detach().numpy().copy(), x.requires_grad)
    return x


def _same(a, b, exact=True):
    if isinstance(a, list) and isinstance(b, list):
        return len(a) == len(b) and all(_same(x, y, exact) for x, y in zip(a, b))
    if isinstance(a, tuple) and a and a[0] == "tensor":
        if not (isinstance(b, tuple) and b and b[0] == "tensor") or a[2] != b[2]:
            return False
        if exact:
            return a[1].dtype == b[1].dtype and np.array_equal(a[1], b[1], equal_nan=True)
        return a[1].shape == b[1].shape and np.allclose(a[1], b[1], rtol=1e-5, atol=1e-6)
    return a == b


def _run(build, lib, compile_, calls):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        step = build(lib, compile_)
        return [_obs(step(i)) for i in range(calls)]


def check(build, calls=4, torch=True):
    """Run `build(lib, compile)` (which returns `step(i)`) eagerly, compiled and on PyTorch:
    compiled equals eager bitwise on every call, eager equals PyTorch within rounding."""
    eager = _run(build, tg, lambda f, **kw: f, calls)
    compiled = _run(build, tg, lambda f, **kw: tg.compile(f, **kw), calls)
    for i, (e, c) in enumerate(zip(eager, compiled)):
        assert _same(e, c), f"call {i}: compiled {c!r} != eager {e!r}"
    if torch:
        th = pytest.importorskip("torch")
        ref = _run(build, th, lambda f, **kw: f, calls)
        for i, (e, r) in enumerate(zip(eager, ref)):
            assert _same(e, r, exact=False), f"call {i}: eager {e!r} != torch {r!r}"


# -- tensor hooks registered outside, run by a backward() inside --------------------------

def test_a_leaf_hook_counting_its_calls_counts_every_compiled_step():
    def build(lib, compile_):
        w = lib.tensor([1., 2., 3.], requires_grad=True)
        calls = [0]

        def clip(g):
            calls[0] += 1
            return g.clamp(max=1.5)
        w.register_hook(clip)

        @compile_
        def step(x):
            w.grad = None
            loss = (w * x).sum()
            loss.backward()
            return loss
        return lambda i: [step(lib.tensor([1., 2., 3.]) * i), w.grad, calls[0]]
    check(build)


def test_a_leaf_hook_reading_a_setting_changed_between_steps():
    def build(lib, compile_):
        w = lib.tensor([1., 2., 3.], requires_grad=True)
        cfg = {"scale": 1.0}
        w.register_hook(lambda g: g * cfg["scale"])

        @compile_
        def step(x):
            w.grad = None
            (w * x).sum().backward()

        def call(i):
            cfg["scale"] = float(i + 1)
            step(lib.ones(3))
            return [w.grad]
        return call
    check(build)


def test_a_gradient_clipping_object_hook_on_parameters_of_a_training_step():
    def build(lib, compile_):
        class Clipper:
            def __init__(self):
                self.limit = 1.0

            def hook(self, g):
                return g.clamp(-self.limit, self.limit)
        model = lib.nn.Linear(3, 2)
        with lib.no_grad():
            model.weight.copy_(lib.arange(6.).reshape(2, 3) / 10)
            model.bias.fill_(0.1)
        clipper = Clipper()
        for p in model.parameters():
            p.register_hook(clipper.hook)
        opt = lib.optim.SGD(model.parameters(), lr=0.1)

        @compile_
        def train(x, y):
            opt.zero_grad()
            loss = ((model(x) - y) ** 2).mean()
            loss.backward()
            opt.step()
            return loss

        def call(i):
            clipper.limit = [1.0, 0.05, 0.05, 2.0][i]
            loss = train(lib.ones(4, 3) * (i + 1), lib.zeros(4, 2))
            return [loss, model.weight, model.bias]
        return call
    check(build)


def test_a_leaf_hook_collecting_gradients_in_a_list():
    def build(lib, compile_):
        w = lib.tensor([1., 2., 3.], requires_grad=True)
        seen = []
        w.register_hook(lambda g: seen.append(g.clone()))

        @compile_
        def step(x):
            w.grad = None
            (w * x).sum().backward()
        return lambda i: [step(lib.ones(3) * i), len(seen), seen[-1]]
    check(build)


def test_a_hook_on_a_leaf_argument_reached_by_autograd_grad_inside():
    def build(lib, compile_):
        w = lib.tensor([1., 2., 3.], requires_grad=True)

        @compile_
        def grad_of(w, x):
            g, = lib.autograd.grad((w * x).sum(), [w])
            return g

        def call(i):
            handle = w.register_hook(lambda g: g * 10) if i % 2 else None
            g = grad_of(w, lib.ones(3))
            if handle is not None:
                handle.remove()
            return [g]
        return call
    check(build)


def test_a_hook_reading_state_on_a_leaf_reached_by_autograd_grad_inside():
    def build(lib, compile_):
        w = lib.tensor([1., 2., 3.], requires_grad=True)
        k = {"v": 2.0}
        w.register_hook(lambda g: g * k["v"])

        @compile_
        def grad_of(w, x):
            g, = lib.autograd.grad((w * x).sum(), [w])
            return g

        def call(i):
            k["v"] = float(i)
            return [grad_of(w, lib.ones(3))]
        return call
    check(build)


def test_logging_hooks_on_parameters_do_not_make_a_compiled_forward_retrace():
    model = tg.nn.Linear(3, 2)
    norms = []
    for p in model.parameters():
        p.register_hook(lambda g: norms.append(float(g.norm())))

    @tg.compile
    def loss_of(x):
        return model(x).sum()
    for i in range(5):
        loss_of(tg.ones(4, 3) * i).backward()
    assert loss_of.stats.traces == 1 and len(norms) == 10


# -- backward() inside through the graph of a non-leaf argument built outside --------------

def test_backward_inside_through_an_argument_computed_outside():
    def build(lib, compile_):
        x = lib.tensor([1., 2.], requires_grad=True)

        @compile_
        def energy(a):
            (a * a).sum().backward()
            return a.detach() * 2

        def call(i):
            x.grad = None
            scale = lib.tensor([1., 2.]) * (i + 1)
            out = energy(x * scale)
            return [out, x.grad]
        return call
    check(build)


def test_backward_inside_through_arguments_from_other_graphs_each_call():
    def build(lib, compile_):
        x = lib.tensor([1., 2.], requires_grad=True)

        @compile_
        def energy(a):
            (a * a).sum().backward()

        def call(i):
            x.grad = None
            energy((x * 2).exp() if i % 2 else (x * 3).sin())
            return [x.grad]
        return call
    check(build)


def test_backward_inside_through_an_argument_with_a_hook_registered_outside():
    def build(lib, compile_):
        x = lib.tensor([1., 2.], requires_grad=True)
        k = [1.0]

        @compile_
        def energy(a):
            (a * a).sum().backward()

        def call(i):
            x.grad = None
            a = x * 3
            k[0] = i + 1.0
            if i != 2:
                a.register_hook(lambda g: g * k[0])
            energy(a)
            return [x.grad]
        return call
    check(build)


# -- custom autograd.Function ---------------------------------------------------------------

def test_a_custom_backward_branching_on_gradient_values():
    def build(lib, compile_):
        class ClippedScale(lib.autograd.Function):
            @staticmethod
            def forward(ctx, x, k):
                ctx.k = k
                ctx.save_for_backward(x)
                return x * k

            @staticmethod
            def backward(ctx, g):
                gx = g * ctx.k
                if (gx.abs().sum() > 5).item():       # Python control flow on values
                    gx = gx * 0.5
                return gx, None

        @compile_
        def loss_of(x, k):
            return ClippedScale.apply(x, k).pow(2).sum()
        x = lib.tensor([1., 2., 3.], requires_grad=True)

        def call(i):
            x.grad = None
            loss = loss_of(x, [1.0, 2.0, 2.0, 0.5][i])
            loss.backward()
            return [loss, x.grad]
        return call
    check(build)


# -- grad modes -----------------------------------------------------------------------------

def _outcome(fn):
    try:
        fn()
        return "ok"
    except RuntimeError:
        return "RuntimeError"


def test_a_result_made_under_inference_mode_inside_stays_an_inference_tensor():
    def build(lib, compile_):
        @compile_
        def features(x):
            with lib.inference_mode():
                frozen = x * 2
            return frozen, x * 3
        x = lib.tensor([1., 2.], requires_grad=True)

        def call(i):
            frozen, live = features(x)

            def update():                    # outside inference mode: eager refuses
                frozen.add_(1)
            seen = [frozen.clone(), live, frozen.is_inference(), live.is_inference()]
            return seen + [_outcome(update)]
        return call
    check(build)


def test_a_result_made_with_inference_mode_off_inside_a_call_under_inference_mode():
    def build(lib, compile_):
        @compile_
        def f(x):
            with lib.inference_mode(False):
                a = x * 2
            return a, x + 1
        x = lib.tensor([1., 2.])

        def call(i):
            with lib.inference_mode():
                a, b = f(x * (i + 1))
            return [a, b, a.is_inference(), b.is_inference()]
        return call
    check(build)


def test_autograd_grad_inside_with_respect_to_an_argument_with_a_hook_added_later():
    def build(lib, compile_):
        w = lib.tensor([1., 2.], requires_grad=True)

        @compile_
        def slope(x):
            g, = lib.autograd.grad((x.sin() * x).sum(), x)
            return g

        def call(i):
            x = w * 1
            if i % 2:
                x.register_hook(lambda g: g * 10)
            return [slope(x)]
        return call
    check(build)


def test_gradient_penalty_of_a_compiled_critic_inside_a_compiled_step():
    def build(lib, compile_):
        critic = lib.nn.Sequential(lib.nn.Linear(2, 3), lib.nn.Tanh(), lib.nn.Linear(3, 1))
        with lib.no_grad():
            for k, p in enumerate(critic.parameters()):
                p.copy_(lib.linspace(-1, 1, p.numel()).reshape(p.shape) * (k + 1) / 3)
        opt = lib.optim.SGD(critic.parameters(), lr=0.1)

        @compile_
        def step(x):
            opt.zero_grad()
            out = critic(x)
            g, = lib.autograd.grad(out.sum(), x, create_graph=True)
            loss = out.mean() + 10 * ((g.norm(dim=1) - 1) ** 2).mean()
            loss.backward()
            opt.step()
            return loss

        def call(i):
            x = (lib.ones(4, 2) * (i + 1) / 4).requires_grad_()
            return [step(x), critic[0].weight, critic[2].bias]
        return call
    check(build)


def test_hessian_vector_product_of_a_compiled_loss():
    def build(lib, compile_):
        @compile_
        def loss_of(x):
            return (x.sin() * x).sum()
        x = lib.tensor([1., 2., 3.], requires_grad=True)

        def call(i):
            g, = lib.autograd.grad(loss_of(x), x, create_graph=True)
            hv, = lib.autograd.grad(g, x, grad_outputs=lib.tensor([1., 0., -1.]) * (i + 1))
            return [g, hv]
        return call
    check(build)


def test_autograd_grad_inside_with_respect_to_a_non_leaf_argument_stays_compiled():
    w = tg.tensor([1., 2.], requires_grad=True)

    @tg.compile
    def slope(x):
        g, = tg.autograd.grad((x.sin() * x).sum(), x, create_graph=True)
        return (g * g).sum()
    with warnings.catch_warnings():
        warnings.simplefilter("error")       # no reason to run eagerly: x's node only
        for i in range(3):                   # receives the gradient
            slope(w * (i + 1)).backward()
    assert slope.stats.cache_hits == 2 and slope.stats.eager_calls == 0


SETTINGS = {"scale": 2.0}


def test_a_custom_function_reading_a_global_setting_in_its_backward():
    def build(lib, compile_):
        class Scaled(lib.autograd.Function):
            @staticmethod
            def forward(ctx, x):
                return x * SETTINGS["scale"]

            @staticmethod
            def backward(ctx, g):
                return g * SETTINGS["scale"]

        @compile_
        def loss_of(x):
            return Scaled.apply(x).sum()
        x = lib.tensor([1., 2.], requires_grad=True)

        def call(i):
            SETTINGS["scale"] = float(i + 1)
            x.grad = None
            loss = loss_of(x)
            loss.backward()
            return [loss, x.grad]
        return call
    try:
        check(build)
    finally:
        SETTINGS["scale"] = 2.0


# -- module hooks and other callables holding state ------------------------------------------

class _Scaler:
    def __init__(self):
        self.k = 1.0

    def hook(self, module, inputs, output):
        return output * self.k

    def __call__(self, module, inputs, output):
        return output * self.k


def _relu_net(lib):
    m = lib.nn.Sequential(lib.nn.Linear(2, 2), lib.nn.ReLU())
    with lib.no_grad():
        m[0].weight.copy_(lib.tensor([[1., -2.], [3., 4.]]))
        m[0].bias.fill_(0.)
    return m


@pytest.mark.parametrize("kind", ["bound method", "callable object", "partial"])
def test_a_forward_hook_holding_a_setting_on_a_submodule_of_a_compiled_model(kind):
    def build(lib, compile_):
        m = _relu_net(lib)
        model = compile_(m)
        scaler, k = _Scaler(), [1.0]
        hook = {"bound method": scaler.hook, "callable object": scaler,
                "partial": functools.partial(lambda mod, i, o, k: o * k[0], k=k)}[kind]
        m[1].register_forward_hook(hook)

        def call(i):
            scaler.k = k[0] = float(i + 1)
            out = model(lib.ones(1, 2))
            out.sum().backward()
            return [out, m[0].weight.grad]
        return call
    check(build)


@pytest.mark.parametrize("kind", ["bound method", "partial"])
def test_a_callable_held_in_a_closure_reads_its_object_on_every_call(kind):
    def build(lib, compile_):
        scaler = _Scaler()
        act = (scaler.hook if kind == "bound method"
               else functools.partial(scaler.hook, None, ()))

        @compile_
        def f(x):
            return (act(None, (), x) if kind == "bound method" else act(x)).sum()

        def call(i):
            scaler.k = float(i + 1)
            return [f(lib.ones(2))]
        return call
    check(build)


def test_set_grad_enabled_called_as_a_function_inside_leaves_the_mode_changed():
    def build(lib, compile_):
        w = lib.tensor([1., 2.], requires_grad=True)

        @compile_
        def f(x, training):
            lib.set_grad_enabled(training)   # not a `with` block: the mode stays set
            return w * x

        def call(i):
            try:
                y = f(lib.ones(2), i % 2 == 1)
                return [y, lib.is_grad_enabled()]
            finally:
                lib.set_grad_enabled(True)
        return call
    check(build)


def test_a_hooked_leaf_reached_only_through_deeply_nested_state():
    def build(lib, compile_):
        w = lib.tensor([1., 2.], requires_grad=True)
        registry = {"a": {"b": {"c": {"d": {"e": [w]}}}}}    # deeper than the scan walks
        k = [1.0]
        w.register_hook(lambda g: g * k[0])

        @compile_
        def grad_of(x):
            p = registry["a"]["b"]["c"]["d"]["e"][0]
            p.grad = None
            (p * x).sum().backward()
            return p.grad

        def call(i):
            k[0] = float(i + 1)
            return [grad_of(lib.ones(2))]
        return call
    check(build)


def test_retain_grad_inside_on_a_non_leaf_argument_is_replayed_on_every_call():
    def build(lib, compile_):
        w = lib.tensor([1., 2.], requires_grad=True)

        @compile_
        def energy(a):
            a.retain_grad()
            return (a * a).sum()

        def call(i):
            a = w * (i + 1)
            energy(a).backward()
            return [a.grad, w.grad]
        return call
    check(build)


def test_retain_grad_inside_on_a_non_leaf_tensor_the_function_reads_from_a_closure():
    def build(lib, compile_):
        w = lib.tensor([1., 2.], requires_grad=True)
        hidden = {"h": None}

        @compile_
        def energy(x):
            h = hidden["h"]
            h.retain_grad()
            return (h * x).sum()

        def call(i):
            hidden["h"] = w * (i + 1)
            energy(lib.ones(2) * (i + 1)).backward()
            return [hidden["h"].grad, w.grad]
        return call
    check(build)


# -- gradients with respect to a returned tensor the function also computes with ------------

def _hidden_and_loss(lib, compile_):
    @compile_
    def f(x, w):
        h = x * w
        return h, (h * h).sum()
    return f


@pytest.mark.parametrize("ask", ["autograd.grad", "backward(inputs)", "allow_unused"])
def test_the_gradient_with_respect_to_an_output_other_outputs_are_computed_from(ask):
    def build(lib, compile_):
        f = _hidden_and_loss(lib, compile_)

        def call(i):
            x = lib.tensor([1., 2.], requires_grad=True)
            w = lib.tensor([3., 4.], requires_grad=True)
            h, loss = f(x, w)
            if ask == "backward(inputs)":
                h.retain_grad()
                loss.backward(inputs=[h])
                return h.grad
            g, = lib.autograd.grad(loss, h, allow_unused=ask == "allow_unused")
            return g
        return call
    eager = build(tg, lambda fn: fn)
    for i in range(3):
        np.testing.assert_array_equal(eager(i).numpy(), [6., 16.])
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        compiled = build(tg, tg.compile)
        for i in range(3):                   # never silently None or a partial gradient
            try:
                g = compiled(i)
            except RuntimeError as e:
                assert "output 0 of a compiled function" in str(e)
            else:
                np.testing.assert_array_equal(g.numpy(), [6., 16.])


def test_the_gradient_with_respect_to_an_output_nothing_inside_uses_stays_exact():
    def build(lib, compile_):
        f = _hidden_and_loss(lib, compile_)
        x = lib.tensor([1., 2.], requires_grad=True)
        w = lib.tensor([3., 4.], requires_grad=True)

        def call(i):
            h, loss = f(x, w * (i + 1))
            g, = lib.autograd.grad((h * 3).sum(), h)
            return [g, loss]
        return call
    check(build)
