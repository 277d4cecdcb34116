"""optim.swa_utils (AveragedModel with every averaging function, SWALR, update_bn) and
nn.utils.parametrize / parametrizations against PyTorch, and inside compiled training
steps (compiled == eager bitwise, no re-trace per step)."""
import warnings

import numpy as np
import pytest

import tracegrad as tg

nn, F = tg.nn, tg.nn.functional


@pytest.fixture
def torch():
    return pytest.importorskip("torch")


def _U(lib):
    return lib.optim.swa_utils


AVG = {
    "default": lambda U: {},
    "ema_multi": lambda U: dict(multi_avg_fn=U.get_ema_multi_avg_fn(0.9)),
    "ema": lambda U: dict(avg_fn=U.get_ema_avg_fn(0.8)),
    "swa_multi": lambda U: dict(multi_avg_fn=U.get_swa_multi_avg_fn()),
    "swa": lambda U: dict(avg_fn=U.get_swa_avg_fn()),
    "buffers": lambda U: dict(use_buffers=True, multi_avg_fn=U.get_ema_multi_avg_fn(0.7)),
}


def _bn_model(lib, init=None):
    lib.manual_seed(0)
    m = lib.nn.Sequential(lib.nn.Linear(3, 4), lib.nn.BatchNorm1d(4), lib.nn.Linear(4, 2))
    m = m.double()
    if init is not None:
        m.load_state_dict({k: lib.tensor(v) for k, v in init.items()})
    return m


def _swa_run(lib, variant, xs, init=None, anneal="cos"):
    m = _bn_model(lib, init)
    U = _U(lib)
    avg = U.AveragedModel(m, **AVG[variant](U))
    opt = lib.optim.SGD(m.parameters(), lr=0.1)
    sched = U.SWALR(opt, swa_lr=0.05, anneal_epochs=3, anneal_strategy=anneal)
    lrs = []
    for x in xs:
        opt.zero_grad()
        m(lib.tensor(x)).pow(2).mean().backward()
        opt.step()
        sched.step()
        lrs.append(sched.get_last_lr())
        avg.update_parameters(m)
    U.update_bn([lib.tensor(x) for x in xs[:3]], avg)
    return m, avg, sched, lrs


@pytest.mark.parametrize("variant", list(AVG))
def test_averaged_model_swalr_and_update_bn_match_torch(torch, variant):
    rng = np.random.default_rng(0)
    xs = [rng.standard_normal((5, 3)) for _ in range(6)]
    init = {k: v.detach().numpy().copy() for k, v in _bn_model(tg).state_dict().items()}
    ma, aa, sa, la = _swa_run(tg, variant, xs, init, "cos" if variant != "swa" else "linear")
    mb, ab, sb, lb = _swa_run(torch, variant, xs, init, "cos" if variant != "swa" else "linear")
    assert la == lb and sa.state_dict() == sb.state_dict()
    da, db = aa.state_dict(), ab.state_dict()
    assert list(da) == list(db)          # module.0.weight, ..., n_averaged
    for k in da:
        assert str(da[k].dtype) == str(db[k].dtype), k
        np.testing.assert_allclose(da[k].numpy(), db[k].numpy(), rtol=0, atol=1e-14, err_msg=k)
    np.testing.assert_allclose(aa(tg.tensor(xs[0])).detach().numpy(),
                               ab(torch.tensor(xs[0])).detach().numpy(), atol=1e-14)
    assert ma.training and aa.training           # update_bn restores the flags...
    assert aa.module[1].momentum == 0.1          # ... and the momenta


def test_update_bn_restores_eval_mode_and_skips_models_without_batchnorm(torch):
    m = _bn_model(tg).eval()
    _U(tg).update_bn([tg.randn(4, 3, dtype=tg.float64)], m)
    assert not m.training and int(m[1].num_batches_tracked) == 1
    lin = nn.Linear(2, 2)
    _U(tg).update_bn([tg.randn(3, 2)], lin)        # nothing to do
    # batches may be (input, target) pairs
    _U(tg).update_bn([(tg.randn(4, 3, dtype=tg.float64), tg.zeros(4))], m)
    assert int(m[1].num_batches_tracked) == 1


@pytest.mark.parametrize("make", [
    lambda lib, o: _U(lib).SWALR(o, swa_lr=[0.1, 0.2]),
    lambda lib, o: _U(lib).SWALR(o, swa_lr=0.1, anneal_strategy="exp"),
    lambda lib, o: _U(lib).SWALR(o, swa_lr=0.1, anneal_epochs=-1),
    lambda lib, o: _U(lib).SWALR(o, swa_lr=0.1, anneal_epochs=2.0),
    lambda lib, o: _U(lib).get_ema_multi_avg_fn(1.5),
    lambda lib, o: _U(lib).get_ema_avg_fn(-0.1),
    lambda lib, o: _U(lib).AveragedModel(lib.nn.Linear(2, 2), avg_fn=_U(lib).get_swa_avg_fn(),
                                         multi_avg_fn=_U(lib).get_swa_multi_avg_fn()),
])
def test_swa_errors_match_torch(torch, make):
    errs = []
    for lib in (torch, tg):
        o = lib.optim.SGD([lib.zeros(2, requires_grad=True)], lr=0.1)
        with pytest.raises(Exception) as e:
            make(lib, o)
        errs.append(e.value)
    assert isinstance(errs[1], type(errs[0]))
    assert str(errs[1]).splitlines()[0] == str(errs[0])


def test_swalr_state_dict_round_trips_through_torch(torch):
    runs = []
    for lib in (tg, torch):
        o = lib.optim.SGD([lib.zeros(2, requires_grad=True)], lr=0.1)
        s = _U(lib).SWALR(o, swa_lr=0.01, anneal_epochs=4, anneal_strategy="linear")
        for _ in range(2):
            o.step()
            s.step()
        runs.append((o, s))
    (oa, sa), (ob, sb) = runs
    assert sa.state_dict() == sb.state_dict()
    o = tg.optim.SGD([tg.zeros(2, requires_grad=True)], lr=0.1)
    s = _U(tg).SWALR(o, swa_lr=0.01)
    o.load_state_dict(oa.state_dict())
    s.load_state_dict(sb.state_dict())
    for _ in range(4):
        ob.step()
        sb.step()
        o.step()
        s.step()
        assert s.get_last_lr() == sb.get_last_lr()


@pytest.mark.parametrize("variant", ["default", "ema_multi", "swa_multi", "ema"])
def test_compiled_step_averaging_the_model_equals_eager(variant):
    out = []
    for compiled in (False, True):
        tg.manual_seed(0)
        model = nn.Sequential(nn.Linear(4, 6), nn.Tanh(), nn.Linear(6, 3))
        avg = _U(tg).AveragedModel(model, **AVG[variant](_U(tg)))
        opt = tg.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
        sched = _U(tg).SWALR(opt, 0.05, anneal_epochs=3)

        def step(x, y):
            opt.zero_grad()
            loss = F.cross_entropy(model(x), y)
            loss.backward()
            opt.step()
            sched.step()
            avg.update_parameters(model)
            return loss
        f = tg.compile(step) if compiled else step
        seen = []
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            for _ in range(6):
                seen.append(f(tg.randn(5, 4), tg.randint(0, 3, (5,))).item())
                seen += [p.detach().numpy().tobytes() for p in avg.parameters()]
                seen += [avg.n_averaged.item(), sched.get_last_lr()]
        out.append((seen, getattr(f, "stats", None)))
    (eager, _), (comp, stats) = out
    assert comp == eager
    assert stats.traces <= 2 and stats.eager_calls == 0, str(stats)


# ---------------- nn.utils.parametrize and parametrizations ----------------

def _linear_pair(torch, conv=False):
    a = (tg.nn.Conv2d(2, 3, 3) if conv else tg.nn.Linear(3, 4)).double()
    b = (torch.nn.Conv2d(2, 3, 3) if conv else torch.nn.Linear(3, 4)).double()
    b.load_state_dict({k: torch.tensor(v.detach().numpy()) for k, v in a.state_dict().items()})
    return a, b


def _input(conv=False):
    rng = np.random.default_rng(0)
    return rng.standard_normal((2, 2, 5, 5) if conv else (5, 3))


def _same_buffers(a, b, names):
    """Copy torch's randomly started power-iteration vectors into tracegrad's module."""
    for n in names:
        tg_buf = a.get_submodule(n.rpartition(".")[0]) if "." in n else a
        getattr(tg_buf, n.rpartition(".")[2]).copy_(
            tg.tensor(b.state_dict()[n].numpy()))


PARAMETRIZE = {
    "weight_norm": (lambda U, m: U.parametrizations.weight_norm(m), []),
    "weight_norm_all": (lambda U, m: U.parametrizations.weight_norm(m, dim=None), []),
    "weight_norm_dim1": (lambda U, m: U.parametrizations.weight_norm(m, dim=1), []),
    "spectral_norm": (lambda U, m: U.parametrizations.spectral_norm(m),
                      ["parametrizations.weight.0._u", "parametrizations.weight.0._v"]),
    "spectral_norm_3": (lambda U, m: U.parametrizations.spectral_norm(m, n_power_iterations=3,
                                                                      dim=1),
                        ["parametrizations.weight.0._u", "parametrizations.weight.0._v"]),
    "legacy_weight_norm": (lambda U, m: U.weight_norm(m), []),
    "legacy_spectral_norm": (lambda U, m: U.spectral_norm(m), ["weight_u", "weight_v"]),
}


@pytest.mark.parametrize("conv", [False, True], ids=["linear", "conv"])
@pytest.mark.parametrize("which", list(PARAMETRIZE))
def test_normalizations_match_torch(torch, which, conv):
    a, b = _linear_pair(torch, conv)
    apply, buffers = PARAMETRIZE[which]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", FutureWarning)
        apply(tg.nn.utils, a)
        apply(torch.nn.utils, b)
    _same_buffers(a, b, buffers)
    assert type(a).__name__ == type(b).__name__
    assert [n for n, _ in a.named_parameters()] == [n for n, _ in b.named_parameters()]
    assert list(a.state_dict()) == list(b.state_dict())
    x = _input(conv)
    for _ in range(3):                       # training mode: power iterations each call
        ya, yb = a(tg.tensor(x)), b(torch.tensor(x))
        ya.pow(2).sum().backward()
        yb.pow(2).sum().backward()
    np.testing.assert_allclose(ya.detach().numpy(), yb.detach().numpy(), atol=1e-12)
    for (n, pa), (_, pb) in zip(a.named_parameters(), b.named_parameters()):
        np.testing.assert_allclose(pa.grad.numpy(), pb.grad.numpy(), atol=1e-11, err_msg=n)
    for k, va in a.state_dict().items():
        np.testing.assert_allclose(va.numpy(), b.state_dict()[k].numpy(), atol=1e-12, err_msg=k)
    a.eval()
    b.eval()
    np.testing.assert_allclose(a(tg.tensor(x)).detach().numpy(),
                               b(torch.tensor(x)).detach().numpy(), atol=1e-12)


@pytest.mark.parametrize("which", ["weight_norm", "spectral_norm"])
def test_remove_parametrizations_leaves_the_value_like_torch(torch, which):
    a, b = _linear_pair(torch)
    apply, buffers = PARAMETRIZE[which]
    apply(tg.nn.utils, a)
    apply(torch.nn.utils, b)
    _same_buffers(a, b, buffers)
    P_tg, P_torch = tg.nn.utils.parametrize, torch.nn.utils.parametrize
    assert P_tg.is_parametrized(a) and P_tg.is_parametrized(a, "weight")
    assert not P_tg.is_parametrized(a, "bias")
    assert P_tg.type_before_parametrizations(a) is tg.nn.Linear
    P_tg.remove_parametrizations(a, "weight")
    P_torch.remove_parametrizations(b, "weight")
    assert type(a) is tg.nn.Linear and not P_tg.is_parametrized(a)
    assert list(a.state_dict()) == list(b.state_dict()) == ["bias", "weight"]
    assert isinstance(a.weight, tg.nn.Parameter)
    np.testing.assert_allclose(a.weight.detach().numpy(), b.weight.detach().numpy(),
                               atol=1e-12)


class _Symmetric(tg.nn.Module):
    def forward(self, X):
        return X.triu() + X.triu(1).transpose(-1, -2)

    def right_inverse(self, A):
        return A.triu()


class _Scale(tg.nn.Module):
    def forward(self, X):
        return X * 2.0


def test_a_custom_parametrization_with_right_inverse_chaining_and_cache():
    m = tg.nn.Linear(3, 3).double()
    w0 = m.weight
    P = tg.nn.utils.parametrize
    P.register_parametrization(m, "weight", _Symmetric())
    assert m.parametrizations.weight.original is w0            # the same Parameter object
    W = m.weight
    np.testing.assert_array_equal(W.detach().numpy(), W.detach().numpy().T)
    # assigning stores right_inverse(value) into the original
    S = tg.tensor([[1.0, 2.0, 3.0], [2.0, 4.0, 5.0], [3.0, 5.0, 6.0]], dtype=tg.float64)
    with tg.no_grad():
        m.weight = S
    np.testing.assert_array_equal(m.weight.detach().numpy(), S.numpy())
    # a second parametrization on the same tensor applies after the first
    P.register_parametrization(m, "weight", _Scale())
    np.testing.assert_array_equal(m.weight.detach().numpy(), 2 * S.numpy())
    assert len(m.parametrizations.weight) == 2
    # inside cached() the tensor is computed once
    with P.cached():
        assert m.weight is m.weight
    assert m.weight is not m.weight
    # gradients reach the original through the parametrization
    m(tg.ones(2, 3, dtype=tg.float64)).sum().backward()
    assert m.parametrizations.weight.original.grad is not None
    with pytest.raises(RuntimeError, match="does not implement right_inverse"):
        with tg.no_grad():
            m.weight = S
    P.remove_parametrizations(m, "weight", leave_parametrized=False)
    np.testing.assert_array_equal(m.weight.detach().numpy(), np.triu(S.numpy()))


@pytest.mark.parametrize("make", [
    lambda lib, m: lib.nn.utils.parametrize.register_parametrization(m, "nope", _tm(lib)),
    lambda lib, m: lib.nn.utils.parametrize.register_parametrization(m, "weight", _row(lib)),
    lambda lib, m: lib.nn.utils.parametrize.remove_parametrizations(m, "weight"),
    lambda lib, m: lib.nn.utils.parametrizations.spectral_norm(m, n_power_iterations=0),
    lambda lib, m: lib.nn.utils.parametrizations.spectral_norm(m, dim=2),
    lambda lib, m: lib.nn.utils.parametrizations.spectral_norm(m, name="nope"),
    lambda lib, m: lib.nn.utils.remove_weight_norm(m),
    lambda lib, m: lib.nn.utils.remove_spectral_norm(m),
    lambda lib, m: lib.nn.utils.spectral_norm(lib.nn.utils.spectral_norm(m)),
])
def test_parametrize_errors_match_torch(torch, make):
    errs = []
    for lib in (torch, tg):
        m = lib.nn.Linear(3, 4)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", FutureWarning)
            with pytest.raises(Exception) as e:
                make(lib, m)
        errs.append(e.value)
    assert isinstance(errs[1], type(errs[0])), (errs[1], errs[0])
    # messages name the module with its repr; compare the text around it
    a, b = str(errs[1]).splitlines()[0], str(errs[0]).splitlines()[0]
    assert a.split("(")[0] == b.split("(")[0] and a.split(")")[-1] == b.split(")")[-1], (a, b)


def _tm(lib):
    return lib.nn.Identity()


def _row(lib):
    class Row(lib.nn.Module):
        def forward(self, X):
            return X[0]
    return Row()


def test_state_dict_from_torch_loads_into_a_parametrized_model(torch):
    a, b = _linear_pair(torch)
    tg.nn.utils.parametrizations.weight_norm(a)
    torch.nn.utils.parametrizations.weight_norm(b)
    with torch.no_grad():
        b.parametrizations.weight.original0.mul_(1.5)
    a.load_state_dict({k: tg.tensor(v.numpy()) for k, v in b.state_dict().items()})
    np.testing.assert_allclose(a.weight.detach().numpy(), b.weight.detach().numpy(),
                               atol=1e-12)


def test_optimizer_trajectory_on_parametrized_weights_matches_torch(torch):
    a, b = _linear_pair(torch)
    for lib, m in ((tg, a), (torch, b)):
        lib.nn.utils.parametrizations.weight_norm(m)
    _same_buffers(a, b, [])
    x = _input()
    for lib, m in ((tg, a), (torch, b)):
        opt = lib.optim.Adam(m.parameters(), lr=0.05)
        for _ in range(5):
            opt.zero_grad()
            m(lib.tensor(x)).pow(2).mean().backward()
            opt.step()
    for k, va in a.state_dict().items():
        np.testing.assert_allclose(va.numpy(), b.state_dict()[k].numpy(), atol=1e-12)


def _compiled_vs_eager(setup, whole_model=False, steps=6):
    out = []
    for compiled in (False, True):
        tg.manual_seed(0)
        model = nn.Sequential(nn.Linear(4, 6), nn.Tanh(), nn.Linear(6, 3))
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", FutureWarning)
            setup(model)
        opt = tg.optim.Adam(model.parameters(), lr=0.01)
        sched = tg.optim.lr_scheduler.ExponentialLR(opt, 0.9)
        fwd = tg.compile(model) if compiled and whole_model else model

        def step(x, y):
            opt.zero_grad()
            loss = F.cross_entropy(fwd(x), y)
            loss.backward()
            opt.step()
            sched.step()
            return loss
        f = tg.compile(step) if compiled and not whole_model else step
        seen = []
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            for _ in range(steps):
                seen.append(f(tg.randn(5, 4), tg.randint(0, 3, (5,))).item())
                # parameters and the power iteration's buffers, updated on every call
                seen += [v.detach().numpy().tobytes() for v in model.state_dict().values()]
        stats = getattr(fwd if whole_model else f, "stats", None)
        out.append((seen, stats, [str(w.message) for w in caught]))
    return out


@pytest.mark.parametrize("whole_model", [False, True], ids=["step", "model"])
@pytest.mark.parametrize("which", ["weight_norm", "spectral_norm", "both"])
def test_compiled_training_with_parametrizations_equals_eager(which, whole_model):
    P = nn.utils.parametrizations

    def setup(model):
        if which in ("weight_norm", "both"):
            P.weight_norm(model[0])
        if which in ("spectral_norm", "both"):
            P.spectral_norm(model[2])
    (eager, _, _), (comp, stats, _) = _compiled_vs_eager(setup, whole_model)
    assert comp == eager
    assert stats.traces <= 2 and stats.eager_calls == 0, str(stats)


def test_compiled_step_with_legacy_hooks_compiles_and_equals_eager():
    """The hook-based forms rebind `module.weight` in a forward pre-hook before the forward
    reads it: the new tensor is a program output stored on the module by each call (Note
    [Tensors written to Python state])."""
    def setup(model):
        nn.utils.weight_norm(model[0])
        nn.utils.spectral_norm(model[2])
    (eager, _, _), (comp, stats, msgs) = _compiled_vs_eager(setup)
    assert comp == eager
    assert stats.eager_calls == 0 and stats.cache_hits > 0, (stats, msgs)


def test_a_parametrized_model_deep_copies_and_refuses_pickle_like_torch(torch):
    import pickle
    runs = []
    for lib in (tg, torch):
        lib.manual_seed(0)
        m = lib.nn.Linear(3, 4).double()
        lib.nn.utils.parametrizations.weight_norm(m)
        with pytest.raises(RuntimeError, match="only supported through state_dict"):
            pickle.dumps(m)
        avg = lib.optim.swa_utils.AveragedModel(m)        # deep-copies the model
        c = avg.module
        assert type(c).__name__ == "ParametrizedLinear"
        assert c.parametrizations.weight.original0 is not m.parametrizations.weight.original0
        runs.append((m, avg))
    (ma, aa), (mb, ab) = runs
    mb.load_state_dict({k: torch.tensor(v.detach().numpy()) for k, v in ma.state_dict().items()})
    x = _input()
    for lib, m, avg in ((tg, ma, aa), (torch, mb, ab)):
        opt = lib.optim.SGD(m.parameters(), lr=0.1)
        for _ in range(3):
            opt.zero_grad()
            m(lib.tensor(x)).pow(2).mean().backward()
            opt.step()
            avg.update_parameters(m)
    for k, v in aa.state_dict().items():
        np.testing.assert_allclose(v.numpy(), ab.state_dict()[k].numpy(), atol=1e-13, err_msg=k)


@pytest.mark.parametrize("where", ["inside", "outside"])
def test_cached_blocks_inside_and_around_compiled_calls(where):
    """Note [Caches around compiled calls] in nn/utils/parametrize.py: a block inside the
    compiled function compiles; one around compiled calls (the cache outlives a call and is
    read after it) makes them run eagerly, never stale."""
    P = nn.utils.parametrize
    out = []
    for compiled in (False, True):
        tg.manual_seed(0)
        model = nn.Linear(4, 3)
        nn.utils.parametrizations.weight_norm(model)
        opt = tg.optim.SGD(model.parameters(), lr=0.1)

        def step(x):
            opt.zero_grad()
            if where == "inside":
                with P.cached():
                    loss = (model(x) + model(x * 2)).pow(2).mean()
            else:
                loss = (model(x) + model(x * 2)).pow(2).mean()
            loss.backward()
            opt.step()
            return loss
        f = tg.compile(step) if compiled else step
        seen = []
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            for _ in range(4):
                if where == "outside":
                    with P.cached():
                        seen.append(f(tg.randn(2, 4)).item())
                        seen.append(model.weight.detach().numpy().tobytes())   # the cached one
                else:
                    seen.append(f(tg.randn(2, 4)).item())
                seen += [v.detach().numpy().tobytes() for v in model.state_dict().values()]
        out.append((seen, getattr(f, "stats", None), [str(w.message) for w in caught]))
    (eager, _, _), (comp, stats, msgs) = out
    assert comp == eager
    if where == "inside":
        assert stats.eager_calls == 0 and stats.traces <= 2, str(stats)
    else:
        assert stats.eager_calls > 0 and any("cached()" in m for m in msgs)


def test_a_hook_based_weight_norm_checkpoint_loads_into_the_parametrization(torch):
    """As torch's compat pre-hook: `weight_g` / `weight_v` become original0 / original1."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", FutureWarning)
        old = torch.nn.Sequential(torch.nn.Linear(3, 4), torch.nn.Linear(4, 2)).double()
        torch.nn.utils.weight_norm(old[0])
        torch.nn.utils.weight_norm(old[1], dim=None)
    new = nn.Sequential(nn.Linear(3, 4), nn.Linear(4, 2)).double()
    nn.utils.parametrizations.weight_norm(new[0])
    nn.utils.parametrizations.weight_norm(new[1], dim=None)
    result = new.load_state_dict({k: tg.tensor(v.numpy()) for k, v in old.state_dict().items()})
    assert not result.missing_keys and not result.unexpected_keys
    x = np.linspace(-1, 1, 6).reshape(2, 3)
    np.testing.assert_allclose(new(tg.tensor(x)).detach().numpy(),
                               old(torch.tensor(x)).detach().numpy(), atol=1e-14)
