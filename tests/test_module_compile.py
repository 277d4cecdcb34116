"""`nn.Module.compile()`: PyTorch's in-place form of `compile(module)`. After it,
`model(x)` runs compiled, and everything else a user reads stays as eager gives it: values,
gradients, hooks, training flags, names, copies."""
import copy
import pickle

import numpy as np
import pytest

import tracegrad as tg
from tracegrad import nn


def _net(seed=0):
    tg.manual_seed(seed)
    return nn.Sequential(nn.Linear(4, 8), nn.Tanh(), nn.Dropout(0.25), nn.Linear(8, 3))


def _x(seed=1):
    return tg.tensor(np.random.default_rng(seed).standard_normal((5, 4)).astype(np.float32))


def _stats(model):
    return model.__dict__["_compiled_call_impl"]._compiled.stats


def test_compile_returns_none_and_calls_run_compiled_with_eager_values_and_grads():
    eager, comp = _net(), _net()
    assert comp.compile() is None
    x = _x()
    for mode in ("train", "eval", "train"):
        for m in (eager, comp):
            getattr(m, mode)()
            m.zero_grad()
        tg.manual_seed(7)
        a = eager(x)
        a.sum().backward()
        tg.manual_seed(7)
        b = comp(x)
        b.sum().backward()
        np.testing.assert_array_equal(a.detach().numpy(), b.detach().numpy())
        for p, q in zip(eager.parameters(), comp.parameters()):
            np.testing.assert_array_equal(p.grad.numpy(), q.grad.numpy())
    st = _stats(comp)
    assert st.traces == 2 and st.cache_hits == 1      # one path per training flag


def test_names_parameters_and_state_dict_are_unchanged():
    m = _net()
    names = [n for n, _ in m.named_parameters()]
    keys = list(m.state_dict())
    m.compile()
    assert [n for n, _ in m.named_parameters()] == names
    assert list(m.state_dict()) == keys
    assert [n for n, _ in m.named_modules()] == [n for n, _ in _net().named_modules()]
    m.load_state_dict(_net(3).state_dict())
    ref = _net(3).eval()
    m.eval()
    np.testing.assert_array_equal(m(_x()).detach().numpy(), ref(_x()).detach().numpy())


def test_hooks_added_after_compile_run_on_every_call():
    m = _net().eval()
    m.compile()
    seen = []
    h = m.register_forward_hook(lambda mod, args, out: seen.append(out.detach().numpy().copy()))
    m[0].register_forward_hook(lambda mod, args, out: out * 2)
    ref = _net().eval()
    ref[0].register_forward_hook(lambda mod, args, out: out * 2)
    for _ in range(3):
        np.testing.assert_allclose(m(_x()).detach().numpy(), ref(_x()).detach().numpy(),
                                   rtol=1e-6)
    assert len(seen) == 3
    h.remove()
    m(_x())
    assert len(seen) == 3


def test_training_with_an_eager_optimizer_matches_eager():
    eager, comp = _net(), _net()
    comp.compile()
    opts = [tg.optim.Adam(m.parameters(), lr=1e-2) for m in (eager, comp)]
    y = tg.tensor([0, 2, 1, 1, 0])
    for step in range(5):
        losses = []
        for m, opt in zip((eager, comp), opts):
            tg.manual_seed(step)
            opt.zero_grad()
            loss = nn.functional.cross_entropy(m(_x(step)), y)
            loss.backward()
            opt.step()
            losses.append(loss.item())
        assert losses[0] == losses[1]
    for p, q in zip(eager.parameters(), comp.parameters()):
        np.testing.assert_array_equal(p.detach().numpy(), q.detach().numpy())
    assert _stats(comp).cache_hits == 4


def test_a_compiled_step_calling_the_compiled_module_traces_it_inline():
    m = _net().eval()
    m.compile()
    step = tg.compile(lambda x: m(x).square().mean())
    ref = _net().eval()
    for _ in range(3):
        assert step(_x()).item() == pytest.approx(ref(_x()).square().mean().item(), rel=1e-6)
    assert step.stats.traces == 1


def test_copies_compile_afresh_and_do_not_share_state():
    m = _net().eval()
    m.compile()
    m(_x())
    c = copy.deepcopy(m)
    with tg.no_grad():
        c[0].weight.mul_(2)
    assert not np.array_equal(c(_x()).detach().numpy(), m(_x()).detach().numpy())
    np.testing.assert_array_equal(m(_x()).detach().numpy(), _net().eval()(_x()).detach().numpy())
    assert _stats(c).traces == 1 and _stats(c) is not _stats(m)
    loaded = pickle.loads(pickle.dumps(m))
    np.testing.assert_array_equal(loaded(_x()).detach().numpy(), m(_x()).detach().numpy())


def test_options_pass_through_and_bad_ones_raise_like_compile():
    m = _net().eval()
    m.compile(cache_limit=1, mode="max-autotune", fullgraph=False)
    assert m.__dict__["_compiled_call_impl"]._compiled.cache_limit == 1
    with pytest.raises(Exception, match="invalid backend 'tensorrt'"):
        _net().compile(backend="tensorrt")
    m = _net()
    m.compile(backend="inductor")        # PyTorch's default: the default backend here
    assert m.__dict__["_compiled_call_impl"]._compiled.backend == "numpy"


def test_jax_backend():
    pytest.importorskip("jax")
    m, ref = _net().eval(), _net().eval()
    m.compile(backend="jax")
    for _ in range(2):
        np.testing.assert_allclose(m(_x()).detach().numpy(), ref(_x()).detach().numpy(),
                                   rtol=1e-5, atol=1e-6)
    assert _stats(m).cache_hits == 1
