"""Adversarial first-law review of `tracegrad.func` (grad, vjp, jvp, jacrev, jacfwd, hessian,
vmap, functional_call, stack_module_state) and `autograd.functional` inside compiled
functions, written the way PyTorch's tutorials write them (per-sample gradients, model
ensembling, Jacobians/Hessians, neural tangent kernels).

Each program is written once against a library (`tracegrad` or `torch`) and run for several
calls, an argument's values changed between calls and its batch size once: eager tracegrad
must equal PyTorch 2.x (the oracle, same weights), and compiled (`backend="numpy"` and
`"jax"`) must equal eager: values, `requires_grad`, errors (type and first line)."""
import copy
import warnings

import numpy as np
import pytest

import tracegrad as tg

BACKENDS = ["numpy", "jax"]
NUMPY_THEN_JAX_SLOW = ["numpy", pytest.param("jax", marks=pytest.mark.slow)]
CALLS = 4


def _torch():
    return pytest.importorskip("torch")


def _obs(x):
    """What a caller sees: tensors as (array, requires_grad), containers item by item, an
    error as (builtin type name, first line of the message)."""
    if hasattr(x, "detach") and hasattr(x, "requires_grad"):
        return ("T", x.detach().numpy().copy(), bool(x.requires_grad))
    if isinstance(x, dict):
        return {k: _obs(v) for k, v in x.items()}
    if isinstance(x, (list, tuple)):
        return (type(x).__name__, [_obs(v) for v in x])
    return x


def _same(a, b, tol):
    if isinstance(a, tuple) and a and a[0] == "T":
        return (isinstance(b, tuple) and b and b[0] == "T" and a[2] == b[2]
                and a[1].shape == b[1].shape
                and np.allclose(a[1], b[1], rtol=tol, atol=tol, equal_nan=True))
    if isinstance(a, dict):
        return isinstance(b, dict) and list(a) == list(b) and all(
            _same(a[k], b[k], tol) for k in a)
    if isinstance(a, tuple) and len(a) == 2 and isinstance(a[1], list):
        return (isinstance(b, tuple) and len(b) == 2 and a[0] == b[0]
                and len(a[1]) == len(b[1])
                and all(_same(x, y, tol) for x, y in zip(a[1], b[1])))
    return a == b


def _error(e):
    """(torch-style type name, first line): tracegrad's errors subclass torch's builtins."""
    for base in (NotImplementedError, IndexError, TypeError, ValueError, RuntimeError):
        if isinstance(e, base):
            return ("raised", base.__name__, str(e).split("\n")[0])
    return ("raised", type(e).__name__, str(e).split("\n")[0])


def _run(prog, args, lib, backend=None):
    """[observation] of CALLS calls of `prog(lib)` (compiled with `backend` unless None) on
    `args(lib, i)`; with the compiler's own warnings (it ran eagerly) alongside."""
    lib.manual_seed(0)
    fn = prog(lib)
    if backend is not None:
        fn = tg.compile(fn, backend=backend)
    out = []
    for i in range(CALLS):
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            try:
                out.append(_obs(fn(*args(lib, i))))
            except Exception as e:            # noqa: BLE001 -- compared across runs
                out.append(_error(e))
    return out


def _check(prog, args, backend, oracle=True, tol=1e-5):
    """Eager tracegrad equals torch (when `oracle`) and compiled equals eager, call by call.
    Errors compare by type; eager's message must hold torch's (tracegrad may name the op
    first) and compiled's must equal eager's."""
    if backend == "jax":
        pytest.importorskip("jax")
    eager = _run(prog, args, tg)
    if oracle:
        torch = _torch()
        ref = _run(prog, args, torch)
        for i, (r, e) in enumerate(zip(ref, eager)):
            if isinstance(r, tuple) and r[0] == "raised":
                assert e[:2] == r[:2] and r[2][:60] in e[2], (i, r, e)
            else:
                assert _same(r, e, tol), f"call {i}: torch {r!r}\n eager {e!r}"
    compiled = _run(prog, args, tg, backend)
    for i, (e, c) in enumerate(zip(eager, compiled)):
        assert _same(e, c, tol), f"call {i}: eager {e!r}\n compiled {c!r}"
    return eager


def _t(lib, a):
    return lib.tensor(np.asarray(a, dtype=np.float32))


def _init(lib, module, seed):
    rs = np.random.RandomState(seed)
    with lib.no_grad():
        for p in module.parameters():
            p.copy_(_t(lib, rs.randn(*p.shape)))
    return module


def _mlp(lib, bn=False, drop=False, seed=42):
    layers = [lib.nn.Linear(6, 5)]
    if bn:
        layers.append(lib.nn.BatchNorm1d(5))
    layers.append(lib.nn.ReLU())
    if drop:
        layers.append(lib.nn.Dropout(0.5))
    layers.append(lib.nn.Linear(5, 3))
    return _init(lib, lib.nn.Sequential(*layers), seed)


def _batch(lib, i):
    """Call i's (x, y): new values each call, a batch of 5 instead of 8 at call 2."""
    rs = np.random.RandomState(i)
    n = 5 if i == 2 else 8
    return _t(lib, rs.randn(n, 6)), lib.tensor(rs.randint(0, 3, size=n))


# -- per-sample gradients (the torch.func tutorial) --

def _per_sample(bn=False, drop=False, randomness="error"):
    def prog(lib):
        F = lib.func
        model = _mlp(lib, bn, drop)
        params = {k: v.detach() for k, v in model.named_parameters()}
        buffers = {k: v.detach() for k, v in model.named_buffers()}

        def loss_fn(params, buffers, x, y):
            out = F.functional_call(model, (params, buffers), (x.unsqueeze(0),))
            return lib.nn.functional.cross_entropy(out, y.unsqueeze(0))
        per_sample = F.vmap(F.grad(loss_fn), in_dims=(None, None, 0, 0),
                            randomness=randomness)

        def step(x, y, scale):
            params["0.weight"] = params["0.weight"] * scale     # the dict changes per call
            return per_sample(params, buffers, x, y)
        return step
    return prog


def _per_sample_args(lib, i):
    return _batch(lib, i) + (1.0 + 0.1 * i,)


@pytest.mark.parametrize("backend", ["numpy", pytest.param("jax", marks=pytest.mark.slow)])
def test_per_sample_gradients_as_the_tutorial_writes_them(backend):
    _check(_per_sample(), _per_sample_args, backend)


@pytest.mark.parametrize("backend", BACKENDS)
def test_per_sample_gradients_of_a_model_with_batchnorm_raise_as_torch(backend):
    out = _check(_per_sample(bn=True), _per_sample_args, backend)
    assert all(o[0] == "raised" for o in out)


@pytest.mark.parametrize("backend", NUMPY_THEN_JAX_SLOW)
def test_per_sample_gradients_with_dropout_need_a_randomness_choice(backend):
    out = _check(_per_sample(drop=True), _per_sample_args, backend)
    assert all(o[:2] == ("raised", "RuntimeError") for o in out)
    # the draws differ from torch's generator: compiled against eager only
    _check(_per_sample(drop=True, randomness="different"), _per_sample_args, backend,
           oracle=False)


# -- model ensembling --

def _ensemble(in_dims):
    def prog(lib):
        F = lib.func
        models = [_mlp(lib, seed=s) for s in (1, 2, 3)]
        params, buffers = F.stack_module_state(models)
        base = copy.deepcopy(models[0])
        if lib is not tg:
            base = base.to("meta")

        def fmodel(params, buffers, x):
            return F.functional_call(base, (params, buffers), (x,))
        ensemble = F.vmap(fmodel, in_dims=in_dims)

        def step(x):
            return ensemble(params, buffers, x), params["0.weight"].requires_grad
        return step
    return prog


@pytest.mark.parametrize("backend", NUMPY_THEN_JAX_SLOW)
@pytest.mark.parametrize("in_dims", [(0, 0, None), (0, 0, 0)])
def test_model_ensembling_with_stack_module_state(backend, in_dims):
    def args(lib, i):
        rs = np.random.RandomState(i)
        n = 6 if i == 2 else 4
        return (_t(lib, rs.randn(3, n, 6) if in_dims[2] == 0 else rs.randn(n, 6)),)
    _check(_ensemble(in_dims), args, backend)


def test_stack_module_state_leaves_and_errors_as_torch():
    torch = _torch()
    for lib in (tg, torch):
        lib.manual_seed(0)
    got = {}
    for lib in (tg, torch):
        p, b = lib.func.stack_module_state([lib.nn.BatchNorm1d(2), lib.nn.BatchNorm1d(2)])
        got[lib] = [(k, tuple(v.shape), v.requires_grad, v.is_leaf, str(v.dtype)[-7:])
                    for k, v in list(p.items()) + list(b.items())]
    assert got[tg] == got[torch]
    for make in (lambda lib: [],
                 lambda lib: [lib.nn.Linear(2, 2), lib.nn.Linear(2, 2).eval()],
                 lambda lib: [lib.nn.Linear(2, 2), lib.nn.Conv1d(2, 2, 1)],
                 lambda lib: [lib.nn.Linear(2, 2), lib.nn.Linear(2, 2).requires_grad_(False)]):
        with pytest.raises(RuntimeError) as theirs:
            torch.func.stack_module_state(make(torch))
        with pytest.raises(RuntimeError) as ours:
            tg.func.stack_module_state(make(tg))
        assert str(ours.value) == str(theirs.value)


def test_training_a_stacked_ensemble_updates_the_stacked_leaves_not_the_models():
    models = [_mlp(tg, seed=s) for s in (1, 2)]
    before = [p.detach().clone() for p in models[0].parameters()]
    params, buffers = tg.func.stack_module_state(models)
    base = copy.deepcopy(models[0])

    @tg.compile
    def step(x):
        out = tg.func.vmap(lambda p, b, x: tg.func.functional_call(base, (p, b), (x,)),
                           in_dims=(0, 0, None))(params, buffers, x)
        out.pow(2).sum().backward()
        return out
    for i in range(3):
        step(_batch(tg, i)[0])
    assert params["0.weight"].grad is not None and params["0.weight"].grad.shape == (2, 5, 6)
    assert all(p.grad is None for m in models for p in m.parameters())
    assert all(np.array_equal(a.numpy(), p.detach().numpy())
               for a, p in zip(before, models[0].parameters()))


# -- Jacobians, Hessians, Hessian-vector products, NTK --

def _f(lib):
    return lambda x, y: lib.sin(x) * y.exp() + x ** 2 * y


def _hvp_vjp(lib):
    def f(x, y):
        out, fn = lib.func.vjp(lib.func.grad(lambda a: (a.sin() * a ** 2).sum()), x)
        return out, fn(y)
    return f


def _fnet(lib):
    net = _init(lib, lib.nn.Sequential(lib.nn.Linear(3, 4), lib.nn.Tanh(), lib.nn.Linear(4, 2)),
                5)
    params = {k: v.detach() for k, v in net.named_parameters()}

    def fnet_single(params, x):
        return lib.func.functional_call(net, params, (x.unsqueeze(0),)).squeeze(0)
    return params, fnet_single


def _ntk_jacobian(lib):
    params, fnet_single = _fnet(lib)
    F = lib.func

    def ntk(x1, x2):
        jac1 = F.vmap(F.jacrev(fnet_single), (None, 0))(params, x1)
        jac2 = F.vmap(F.jacrev(fnet_single), (None, 0))(params, x2)
        jac1 = [j.flatten(2) for j in jac1.values()]
        jac2 = [j.flatten(2) for j in jac2.values()]
        return lib.stack([lib.einsum("Naf,Mbf->NMab", a, b)
                          for a, b in zip(jac1, jac2)]).sum(0)
    return lambda x, y: ntk(x.reshape(-1, 2)[:, :1].expand(-1, 3), y[:3].reshape(1, 3))


def _ntk_vector_products(lib):
    params, fnet_single = _fnet(lib)
    F = lib.func

    def get_ntk(x1, x2):
        output, vjp_fn = F.vjp(lambda p: fnet_single(p, x1), params)

        def get_ntk_slice(vec):
            return F.jvp(lambda p: fnet_single(p, x2), (params,), vjp_fn(vec))[1]
        basis = lib.eye(output.numel(), dtype=output.dtype).view(output.numel(), -1)
        return F.vmap(get_ntk_slice)(basis)

    def ntk(x1, x2):
        return F.vmap(F.vmap(get_ntk, (None, 0)), (0, None))(x1, x2)
    return lambda x, y: ntk(x.reshape(-1, 2)[:, :1].expand(-1, 3), y[:3].reshape(1, 3))


JACOBIANS = {
    "jacrev": lambda lib: lib.func.jacrev(_f(lib)),
    "jacfwd": lambda lib: lib.func.jacfwd(_f(lib)),
    "jacrev_argnums": lambda lib: lib.func.jacrev(_f(lib), argnums=(0, 1)),
    "jacfwd_argnums": lambda lib: lib.func.jacfwd(_f(lib), argnums=(0, 1)),
    "jacrev_has_aux": lambda lib: lib.func.jacrev(
        lambda a, b: (_f(lib)(a, b), _f(lib)(a, b).sum()), has_aux=True),
    "jacrev_chunk_size": lambda lib: lib.func.jacrev(_f(lib), chunk_size=2),
    "hessian": lambda lib: lib.func.hessian(lambda a, b: _f(lib)(a, b).sum()),
    "hessian_argnums": lambda lib: lib.func.hessian(lambda a, b: _f(lib)(a, b).sum(),
                                                    argnums=(0, 1)),
    "jacrev_of_jacrev": lambda lib: lib.func.jacrev(lib.func.jacrev(_f(lib))),
    "vmap_of_jacrev": lambda lib: lambda x, y: lib.func.vmap(lib.func.jacrev(
        lambda v: lib.tanh(v * v.sum())))(lib.stack([x, y])),
    "hvp_jvp_of_grad": lambda lib: lambda x, y: lib.func.jvp(
        lib.func.grad(lambda a: (a.sin() * a ** 2).sum()), (x,), (y,)),
    "hvp_vjp_of_grad": _hvp_vjp,
    "jvp_has_aux": lambda lib: lambda x, y: lib.func.jvp(
        lambda a, b: (_f(lib)(a, b), a * 2), (x, y), (y, x), has_aux=True),
    "grad_argnums_has_aux": lambda lib: lib.func.grad(
        lambda a, b: (_f(lib)(a, b).sum(), b), argnums=(0, 1), has_aux=True),
    "grad_of_a_vector_raises": lambda lib: lib.func.grad(_f(lib)),
    "ntk_by_jacobians": _ntk_jacobian,
    "ntk_by_vector_products": _ntk_vector_products,
}


SLOW = {"jacrev_of_jacrev"}


def _pair(lib, i):
    rs = np.random.RandomState(i)
    n = 6 if i == 2 else 4
    return _t(lib, rs.randn(n)), _t(lib, rs.randn(n))


@pytest.mark.parametrize("backend", NUMPY_THEN_JAX_SLOW)
@pytest.mark.parametrize("name", [pytest.param(n, marks=pytest.mark.slow) if n in SLOW else n
                                  for n in JACOBIANS])
def test_jacobians_and_hessians(name, backend):
    _check(JACOBIANS[name], _pair, backend)


def test_jacrev_chunk_size_is_checked_as_torch_checks_it():
    torch = _torch()
    for bad in (0, -1):
        with pytest.raises(ValueError) as theirs:
            torch.func.jacrev(torch.sin, chunk_size=bad)
        with pytest.raises(ValueError) as ours:
            tg.func.jacrev(tg.sin, chunk_size=bad)
        assert str(ours.value).startswith(str(theirs.value))


# -- vmap details --

def _vmap_args(lib, i):
    rs = np.random.RandomState(i)
    n = 6 if i == 2 else 4
    return _t(lib, rs.randn(n, 3)), _t(lib, rs.randn(3, n))


def _inplace_batched(lib):
    def f(a):
        a.mul_(2)
        return a

    def g(x, y):
        x = x.clone()
        return lib.func.vmap(f)(x), x
    return g


def _inplace_unbatched_argument(lib):
    def f(a, b):
        a.add_(b)
        return a

    def g(x, y):
        x = x.clone()
        return lib.func.vmap(f, in_dims=(0, None))(x, y[:, 0]), x
    return g


VMAPS = {
    "nested_tuple_in_dims": lambda lib: lambda x, y: lib.func.vmap(
        lambda a, bc: a * bc[0] + bc[1].sum(), in_dims=(0, (1, None)))(x, (y, y)),
    "dict_in_dims": lambda lib: lambda x, y: lib.func.vmap(
        lambda d: d["a"] * d["b"].sum(), in_dims=({"a": 0, "b": None},))({"a": x, "b": y}),
    "out_dims_1": lambda lib: lambda x, y: lib.func.vmap(lambda a: a.outer(a), out_dims=1)(x),
    "out_dims_tuple": lambda lib: lambda x, y: lib.func.vmap(
        lambda a: (a * 2, a.sum()), out_dims=(1, 0))(x),
    "out_dims_none": lambda lib: lambda x, y: lib.func.vmap(
        lambda a, b: (a * 2, b), in_dims=(0, None), out_dims=(0, None))(x, y),
    "out_dims_none_of_a_batched_output": lambda lib: lambda x, y: lib.func.vmap(
        lambda a: a * 2, out_dims=None)(x),
    "negative_dims": lambda lib: lambda x, y: lib.func.vmap(
        lambda a, b: a * b, in_dims=(-2, -1), out_dims=-1)(x, y),
    "batch_size_mismatch": lambda lib: lambda x, y: lib.func.vmap(lambda a, b: a * b)(x, y),
    "in_dim_out_of_range": lambda lib: lambda x, y: lib.func.vmap(lambda a: a, in_dims=2)(x),
    "nested_vmap": lambda lib: lambda x, y: lib.func.vmap(lib.func.vmap(
        lambda a, b: a * b, in_dims=(0, None)), in_dims=(0, None))(x, y[:, 0]),
    "keyword_arguments_unbatched": lambda lib: lambda x, y: lib.func.vmap(
        lambda a, scale=1.0: a * scale)(x, scale=y[0, 0]),
    "chunk_size": lambda lib: lambda x, y: lib.func.vmap(lambda a: a.sin(), chunk_size=2)(x),
    "random_draw_under_randomness_error": lambda lib: lambda x, y: lib.func.vmap(
        lambda a: a + lib.rand(3))(x),
    "inplace_on_the_batched_input": _inplace_batched,
    "inplace_on_a_batched_view_with_an_unbatched_value": _inplace_unbatched_argument,
    "backward_through_vmap": lambda lib: lambda x, y: _backward_through(lib, x),
    "vmap_of_grad": lambda lib: lambda x, y: lib.func.vmap(lib.func.grad(
        lambda a: (a ** 3).sum()))(x),
    # Note [Numbers from batched values]: torch raises; tracegrad too while it records
    "item_of_a_batched_value": lambda lib: lambda x, y: lib.func.vmap(
        lambda a: a * a.sum().item())(x),
    "float_of_a_batched_value": lambda lib: lambda x, y: lib.func.vmap(
        lambda a: a * float(a.sum()))(x),
    "control_flow_on_a_batched_value": lambda lib: lambda x, y: lib.func.vmap(
        lambda a: a * 2 if a.sum() > 0 else a)(x),
    "item_under_grad_under_vmap": lambda lib: lambda x, y: lib.func.vmap(lib.func.grad(
        lambda a: (a * a.sum().item()).sum()))(x),
    "item_of_an_unbatched_value": lambda lib: lambda x, y: lib.func.vmap(
        lambda a, b: a * b.sum().item(), in_dims=(0, None))(x, y),
    "control_flow_on_an_unbatched_value": lambda lib: lambda x, y: lib.func.vmap(
        lambda a, b: a * 2 if b.sum() > 0 else a, in_dims=(0, None))(x, y),
}


def _backward_through(lib, x):
    x = x.detach().requires_grad_()
    r = lib.func.vmap(lambda a: (a ** 2).sum())(x)
    r.sum().backward()
    return r, x.grad


@pytest.mark.parametrize("backend", NUMPY_THEN_JAX_SLOW)
@pytest.mark.parametrize("name", list(VMAPS))
def test_vmap_details(name, backend):
    _check(VMAPS[name], _vmap_args, backend)


@pytest.mark.parametrize("randomness", ["same", "different"])
def test_vmap_random_draws_compiled_as_eager(randomness):
    # the streams differ from torch's generator: compiled against eager only
    _check(lambda lib: lambda x, y: lib.func.vmap(lambda a: a + lib.rand(3),
                                                  randomness=randomness)(x),
           _vmap_args, "numpy", oracle=False)


def test_vmap_inplace_into_an_unbatched_tensor_raises_in_both():
    """torch raises (a batched value into an unbatched tensor); tracegrad, which loops,
    raises its own clear error instead of writing once per element."""
    def prog(lib):
        def f(a, b):
            b.add_(a)
            return b
        return lambda x, y: lib.func.vmap(f, in_dims=(0, None))(x, y[:, 0].clone())
    eager = _check(prog, _vmap_args, "numpy", oracle=False)
    assert all(o[:2] == ("raised", "RuntimeError") for o in eager)


# -- custom autograd.Functions under transforms (Note [Functions under transforms]) --

def _old_style(lib):
    class Double(lib.autograd.Function):
        @staticmethod
        def forward(ctx, x):
            return x * 2

        @staticmethod
        def backward(ctx, g):
            return g * 2
    return Double


def _cube(lib, vmap_rule=None, with_jvp=False):
    """x ** 3 and its derivative, setup_context style; `vmap_rule`: None (no vmap support),
    "generate" or "staticmethod"."""
    class Cube(lib.autograd.Function):
        generate_vmap_rule = vmap_rule == "generate"

        @staticmethod
        def forward(x):
            return x ** 3, 3 * x ** 2

        @staticmethod
        def setup_context(ctx, inputs, output):
            ctx.save_for_backward(inputs[0], output[1])
            ctx.x = inputs[0]

        @staticmethod
        def backward(ctx, g, gd):
            x, d = ctx.saved_tensors
            return g * d + gd * 6 * x

        if vmap_rule == "staticmethod":
            @staticmethod
            def vmap(info, in_dims, x):
                return Cube.apply(x), (in_dims[0], in_dims[0])

        if with_jvp:
            @staticmethod
            def jvp(ctx, t):
                return 3 * ctx.x ** 2 * t, 6 * ctx.x * t
    return Cube


FUNCTIONS = {
    "old_style_under_grad": lambda lib: lambda x, y: lib.func.grad(
        lambda a: _old_style(lib).apply(a).sum())(x),
    "old_style_under_vjp": lambda lib: lambda x, y: lib.func.vjp(
        _old_style(lib).apply, x)[0],
    "old_style_under_vmap": lambda lib: lambda x, y: lib.func.vmap(_old_style(lib).apply)(x),
    "old_style_on_a_constant_under_grad": lambda lib: lambda x, y: lib.func.grad(
        lambda a: (a * _old_style(lib).apply(y)).sum())(x),
    "no_vmap_support_under_vmap": lambda lib: lambda x, y: lib.func.vmap(
        lambda a: _cube(lib).apply(a)[0])(x),
    "no_vmap_support_on_an_unbatched_input": lambda lib: lambda x, y: lib.func.vmap(
        lambda a, b: a + _cube(lib).apply(b)[0], in_dims=(0, None))(x, y),
    "no_vmap_support_under_jacfwd": lambda lib: lambda x, y: lib.func.jacfwd(
        lambda a: _cube(lib, with_jvp=True).apply(a)[0])(x),
    "no_vmap_support_under_hessian": lambda lib: lambda x, y: lib.func.hessian(
        lambda a: _cube(lib, with_jvp=True).apply(a)[0].sum())(x),
    "no_vmap_support_under_grad_and_jacrev": lambda lib: lambda x, y: (
        lib.func.grad(lambda a: _cube(lib).apply(a)[0].sum())(x),
        lib.func.jacrev(lambda a: _cube(lib).apply(a)[0])(x)),
    "generate_vmap_rule": lambda lib: lambda x, y: lib.func.vmap(lib.func.grad(
        lambda a: _cube(lib, "generate").apply(a)[0].sum()))(x.reshape(2, -1)),
    "vmap_staticmethod": lambda lib: lambda x, y: lib.func.vmap(
        lambda a: _cube(lib, "staticmethod").apply(a)[0])(x.reshape(2, -1)),
    "no_jvp_under_jvp": lambda lib: lambda x, y: lib.func.jvp(
        lambda a: _cube(lib).apply(a)[0], (x,), (y,)),
    "no_jvp_on_a_constant_under_jvp": lambda lib: lambda x, y: lib.func.jvp(
        lambda a: a + _cube(lib).apply(y)[0], (x,), (y,)),
    "jvp_staticmethod_under_jvp": lambda lib: lambda x, y: lib.func.jvp(
        lambda a: _cube(lib, with_jvp=True).apply(a)[0], (x,), (y,)),
    "jvp_and_vmap_rule_under_jacfwd": lambda lib: lambda x, y: lib.func.jacfwd(
        lambda a: _cube(lib, "generate", with_jvp=True).apply(a)[0])(x),
}


@pytest.mark.parametrize("backend", NUMPY_THEN_JAX_SLOW)
@pytest.mark.parametrize("name", list(FUNCTIONS))
def test_custom_functions_under_transforms(name, backend):
    _check(FUNCTIONS[name], _pair, backend)


@pytest.mark.parametrize("backend", BACKENDS)
def test_a_compiled_function_traced_outside_a_transform_then_called_inside_one(backend):
    """The active transforms are part of the entry key: the path traced outside vmap (where
    an old-style Function is fine) is not reused inside vmap, where eager raises."""
    if backend == "jax":
        pytest.importorskip("jax")
    Double = _old_style(tg)

    def f(a):
        return Double.apply(a) + a
    cf = tg.compile(f, backend=backend)
    x = tg.ones(3)
    for fn in (f, cf):
        assert np.array_equal(fn(x).numpy(), [3.0] * 3)
        for transform in (lambda g: tg.func.vmap(g), lambda g: tg.func.vmap(g, compile=False),
                          lambda g: tg.func.jacrev(g, compile=False)):
            with pytest.raises(RuntimeError, match="must override the setup_context"):
                transform(fn)(tg.ones(2, 3))
        assert np.array_equal(fn(x).numpy(), [3.0] * 3)


# -- transforms and compiled code mixed; functional_call details; autograd.functional --

def _grad_and_backward(lib):
    lin = _init(lib, lib.nn.Linear(3, 2), 9)

    def step(x, y):
        lin.zero_grad()
        gx = lib.func.grad(lambda a: lin(a).pow(2).sum())(x)
        loss = (lin(x) * gx.sum()).sum() + lin(y).sum()
        loss.backward()
        return loss, gx, lin.weight.grad.clone(), lin.bias.grad.clone()
    return step


def _compiled_inside(transform):
    def prog(lib):
        def f(a):
            return a.sin() * a[0]
        inner = tg.compile(f) if lib is tg else f
        return lambda x, y: transform(lib, inner)(x)
    return prog


def _tied(lib):
    class Tied(lib.nn.Module):
        def __init__(self):
            super().__init__()
            self.a = lib.nn.Linear(3, 3)
            self.b = lib.nn.Linear(3, 3)
            self.b.weight = self.a.weight

        def forward(self, x):
            return self.b(self.a(x))
    return _init(lib, Tied(), 4)


def _functional_call(params, **kw):
    def prog(lib):
        m = _tied(lib)
        return lambda x, y: lib.func.functional_call(m, params(lib, x, y), (x,), **kw)
    return prog


def _batchnorm_buffers(passed):
    def prog(lib):
        m = lib.nn.BatchNorm1d(3)

        def f(x, y):
            given = ({"running_mean": y[0].clone(), "running_var": y[1].abs() + 1,
                      "num_batches_tracked": lib.tensor(0)} if passed
                     else {"weight": y[0], "bias": y[1]})
            out = lib.func.functional_call(m, given, (x,))
            return out, given, m.running_mean.clone(), m.num_batches_tracked.clone()
        return f
    return prog


def _changing_dict(lib):
    m = lib.nn.Linear(3, 2)
    p = {"weight": _t(lib, np.ones((2, 3))), "bias": _t(lib, np.zeros(2))}

    def f(x, y):
        p["weight"] = p["weight"] + x[:2]
        p["bias"].add_(1.0)
        return lib.func.functional_call(m, p, x)
    return f


def _afunc_hessian_create_graph(lib):
    def f(x, y):
        x = x[0].detach().requires_grad_()
        h = lib.autograd.functional.hessian(lambda a: (a.sin() * a).sum(), x,
                                            create_graph=True)
        h.sum().backward()
        return h, x.grad
    return f


MIXED = {
    "grad_inside_a_step_that_calls_backward": _grad_and_backward,
    "compiled_function_inside_vmap": _compiled_inside(lambda lib, f: lib.func.vmap(f)),
    "compiled_function_inside_jacrev": _compiled_inside(
        lambda lib, f: lambda x: lib.func.jacrev(f)(x[0])),
    "compiled_function_inside_grad": _compiled_inside(
        lambda lib, f: lib.func.grad(lambda a: f(a).sum())),
    "functional_call_tied_weights": _functional_call(
        lambda lib, x, y: {"a.weight": y[:3], "a.bias": x[0], "b.bias": y[0]}),
    "functional_call_untied": _functional_call(lambda lib, x, y: {"a.weight": y[:3]},
                                               tie_weights=False),
    "functional_call_tied_conflict": _functional_call(
        lambda lib, x, y: {"a.weight": y[:3], "b.weight": x[:3]}),
    "functional_call_strict_missing": _functional_call(lambda lib, x, y: {"a.weight": y[:3]},
                                                       strict=True),
    "functional_call_buffers_passed": _batchnorm_buffers(True),
    "functional_call_buffers_not_passed": _batchnorm_buffers(False),
    "functional_call_dict_changed_between_calls": _changing_dict,
    "autograd_functional_jvp": lambda lib: lambda x, y: lib.autograd.functional.jvp(
        lambda a: a.sin() * a, x, y),
    "autograd_functional_hvp": lambda lib: lambda x, y: lib.autograd.functional.hvp(
        lambda a: (a.sin() * a).sum(), x, y),
    "autograd_functional_vhp": lambda lib: lambda x, y: lib.autograd.functional.vhp(
        lambda a: (a.sin() * a).sum(), x, y),
    "autograd_functional_jacobian_forward_mode": lambda lib: lambda x, y:
        lib.autograd.functional.jacobian(lambda a: a.sin() * a[0], x[0], vectorize=True,
                                         strategy="forward-mode"),
    "autograd_functional_hessian_create_graph": _afunc_hessian_create_graph,
}


@pytest.mark.parametrize("backend", NUMPY_THEN_JAX_SLOW)
@pytest.mark.parametrize("name", list(MIXED))
def test_transforms_mixed_with_compiled_code_and_modules(name, backend):
    _check(MIXED[name], _vmap_args, backend)


# -- .grad None (not zeros) for inputs only outputs without a gradient reach --

def _grads_of(params):
    return {k: None if p.grad is None else p.grad.clone() for k, p in params.items()}


def _per_sample_into_parameters(lib):
    """torch.func.grad of a loss of the model's own parameters (which require grad): the
    per-sample gradients stay connected to them; backward from their sum leaves the last
    bias's `.grad` None (its gradient is a constant), as eager's graph has no path there."""
    model = _mlp(lib)

    def loss(p, x):
        return lib.func.functional_call(model, p, (x.unsqueeze(0),)).sum()

    def step(x, y):
        params = dict(model.named_parameters())
        per_sample = lib.func.vmap(lib.func.grad(loss), in_dims=(None, 0))(params, x)
        sum(g.sum() for g in per_sample.values()).backward()
        grads = _grads_of(params)
        model.zero_grad(set_to_none=True)
        return per_sample, grads
    return step


@pytest.mark.parametrize("backend", BACKENDS)
def test_per_sample_gradients_of_parameters_then_backward(backend):
    def args(lib, i):
        return _batch(lib, i)[:1] + (None,)
    _check(_per_sample_into_parameters, args, backend)


@pytest.mark.parametrize("backend", BACKENDS)
def test_backward_from_one_output_leaves_the_others_inputs_grad_none(backend):
    """One compiled backward program serves all outputs; an input that only an output
    without a gradient is computed from gets None, as eager, not zeros."""
    if backend == "jax":
        pytest.importorskip("jax")

    def f(a, b, c):
        return a * 2 + c, b * 3 + c, (a * b).detach()
    compiled = tg.compile(f, backend=backend)
    for fn in (f, compiled):
        for i in range(3):
            a, b, c = (tg.full((2,), float(i + k), requires_grad=True) for k in range(3))
            o1, o2, o3 = fn(a, b, c)
            (o1.sum() if i != 1 else o2.sum()).backward()
            want_a, want_b = (None, [3.0, 3.0]) if i == 1 else ([2.0, 2.0], None)
            assert (None if a.grad is None else a.grad.tolist()) == want_a
            assert (None if b.grad is None else b.grad.tolist()) == want_b
            assert c.grad.tolist() == [1.0, 1.0]



# -- has_aux: tracegrad accepts any Python value in aux (tests/test_func.py relies on it;
# torch.func raises "Expected tensors"): compiled must agree with eager either way --

def test_has_aux_with_a_python_value_compiled_as_eager():
    _check(lambda lib: lambda x, y: lib.func.grad(
        lambda a: ((a ** 2).sum(), {"n": 3, "m": a.mean()}), has_aux=True)(x),
        _pair, "numpy", oracle=False)
