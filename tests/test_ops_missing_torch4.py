"""PyTorch names a drop-in program still missed (fourth batch): the 3-D layers (`Conv3d`,
`ConvTranspose3d`, `MaxPool3d`, `AvgPool3d`, `AdaptiveAvgPool3d`, their lazy forms,
`F.avg_pool3d`, `F.adaptive_avg_pool3d`) and the shared convolution rank checks.

Each is checked against PyTorch (values, gradients, reprs, state_dict keys, error types),
by float64 finite differences, and compiled (numpy and JAX backends) against eager.
"""
import numpy as np
import pytest

import tracegrad as tg
import tracegrad.nn as nn
import tracegrad.nn.functional as F
from tracegrad.autograd import gradcheck, gradgradcheck

torch = pytest.importorskip("torch")

R = np.random.default_rng(44)


def _n(*shape):
    return R.standard_normal(shape)


def _pair(a):
    """The same float64 array as a torch and a tracegrad leaf requiring grad."""
    return torch.tensor(a, requires_grad=True), tg.tensor(a.copy(), requires_grad=True)


def _close(t, g, tol=1e-9):
    np.testing.assert_allclose(g.detach().numpy(), t.detach().numpy(), rtol=tol, atol=tol)


def _backward_both(ot, og):
    cot = R.standard_normal(tuple(ot.shape))
    ot.backward(torch.tensor(cot))
    og.backward(tg.tensor(cot))


def _jax_program_used(cf):
    from tracegrad.backends.jax.program import JaxProgram
    return all(isinstance(p.forward_program, JaxProgram) for p in cf.programs)


def _compiled_matches_eager(fn, arrays, backend):
    """fn(*leaves) -> tensor: compiled (called twice) equals eager in value and grads."""
    if backend == "jax":
        pytest.importorskip("jax")
    cf = tg.compile(fn, backend=backend)
    for _ in range(2):
        args = [tg.tensor(a.copy(), requires_grad=True) for a in arrays]
        ref = [tg.tensor(a.copy(), requires_grad=True) for a in arrays]
        out, want = cf(*args), fn(*ref)
        np.testing.assert_allclose(out.detach().numpy(), want.detach().numpy(), rtol=1e-6,
                                   atol=1e-6)
        (out * out).sum().backward()
        (want * want).sum().backward()
        for a, r in zip(args, ref):
            np.testing.assert_allclose(a.grad.numpy(), r.grad.numpy(), rtol=1e-6, atol=1e-6)
    assert cf.stats.traces == 1 and cf.stats.eager_calls == 0
    if backend == "jax":
        assert _jax_program_used(cf)


# ---------------- 3-D layers ----------------

LAYERS_3D = [
    ("Conv3d", (2, 4, 3), {}),
    ("Conv3d_all_args", (2, 4, (1, 2, 3)), dict(stride=2, padding=1, dilation=2, groups=2,
                                                bias=False, padding_mode="reflect")),
    ("Conv3d_same_circular", (2, 4, 3), dict(padding="same", padding_mode="circular")),
    ("Conv3d_same_replicate", (2, 2, (3, 1, 2)), dict(padding="same",
                                                      padding_mode="replicate")),
    ("ConvTranspose3d", (2, 4, 3), dict(stride=2, padding=1, output_padding=1)),
    ("ConvTranspose3d_groups", (2, 4, 2), dict(groups=2, bias=False, dilation=2)),
    ("MaxPool3d", (2,), {}),
    ("MaxPool3d_all_args", ((2, 2, 3),), dict(stride=1, padding=1, dilation=2,
                                              ceil_mode=True)),
    ("AvgPool3d", (2,), {}),
    ("AvgPool3d_all_args", ((2, 3, 2),), dict(stride=(1, 1, 2), padding=1, ceil_mode=True,
                                              count_include_pad=False, divisor_override=3)),
    ("AvgPool3d_ceil_pad", (3,), dict(stride=2, padding=1, ceil_mode=True)),
    ("AdaptiveAvgPool3d", ((2, None, 3),), {}),
    ("AdaptiveAvgPool3d_int", (4,), {}),
]


@pytest.mark.parametrize("name,args,kwargs", LAYERS_3D, ids=[c[0] for c in LAYERS_3D])
@pytest.mark.parametrize("batched", [True, False])
def test_3d_layers_match_torch(name, args, kwargs, batched):
    cls = name.split("_")[0]
    mt = getattr(torch.nn, cls)(*args, **kwargs).double()
    mg = getattr(nn, cls)(*args, **kwargs).double()
    assert repr(mg) == repr(mt)
    assert list(mg.state_dict()) == list(mt.state_dict())
    for (k, pt), pg in zip(mt.state_dict().items(), mg.state_dict().values()):
        assert tuple(pg.shape) == tuple(pt.shape), k
    mg.load_state_dict({k: tg.tensor(v.numpy()) for k, v in mt.state_dict().items()})
    x = _n(2, 2, 5, 6, 7) if batched else _n(2, 5, 6, 7)
    xt, xg = _pair(x)
    ot, og = mt(xt), mg(xg)
    _close(ot, og)
    _backward_both(ot, og)
    _close(xt.grad, xg.grad)
    for pt, pg in zip(mt.parameters(), mg.parameters()):
        _close(pt.grad, pg.grad)


@pytest.mark.parametrize("cls,transposed", [("Conv3d", False), ("ConvTranspose3d", True)])
def test_3d_conv_init_bounds_as_torch(cls, transposed):
    m = getattr(nn, cls)(4, 8, 3)
    fan_in = (8 if transposed else 4) * 27            # weight.shape[1] * kernel volume
    bound = 1 / np.sqrt(fan_in)
    assert tuple(m.weight.shape) == ((4, 8, 3, 3, 3) if transposed else (8, 4, 3, 3, 3))
    w = m.weight.detach().numpy()
    assert np.abs(w).max() <= bound and np.abs(w).max() > 0.8 * bound
    assert np.abs(m.bias.detach().numpy()).max() <= bound


@pytest.mark.parametrize("cls,out", [("LazyConv3d", (1, 4, 3, 3, 3)),
                                     ("LazyConvTranspose3d", (1, 4, 7, 7, 7))])
def test_lazy_3d_convs_become_their_modules(cls, out):
    m = getattr(nn, cls)(4, 3)
    y = m(tg.ones(1, 2, 5, 5, 5))
    assert tuple(y.shape) == out
    assert type(m).__name__ == cls[4:] and m.in_channels == 2
    t = getattr(torch.nn, cls)(4, 3)
    t(torch.ones(1, 2, 5, 5, 5))
    assert repr(m) == repr(t)


def test_conv_transpose3d_output_size():
    mg, mt = nn.ConvTranspose3d(2, 3, 3, stride=2), torch.nn.ConvTranspose3d(2, 3, 3, stride=2)
    x = _n(1, 2, 3, 4, 5).astype(np.float32)
    want = mt(torch.tensor(x), output_size=[8, 10, 12]).shape
    assert tuple(mg(tg.tensor(x), output_size=[8, 10, 12]).shape) == tuple(want)


POOL_3D = [
    ("avg_k2", lambda m, x: m.nn.functional.avg_pool3d(x, 2)),
    ("avg_pad_stride", lambda m, x: m.nn.functional.avg_pool3d(x, 3, 2, 1)),
    ("avg_ceil", lambda m, x: m.nn.functional.avg_pool3d(x, (2, 3, 2), (1, 2, 3), (1, 1, 0),
                                                          ceil_mode=True)),
    ("avg_exclude_pad", lambda m, x: m.nn.functional.avg_pool3d(
        x, 3, 2, 1, ceil_mode=True, count_include_pad=False)),
    ("avg_divisor", lambda m, x: m.nn.functional.avg_pool3d(x, (3, 2, 3), 2, 1,
                                                             divisor_override=5)),
    ("adaptive_int", lambda m, x: m.nn.functional.adaptive_avg_pool3d(x, 2)),
    ("adaptive_none", lambda m, x: m.nn.functional.adaptive_avg_pool3d(x, (2, None, 3))),
    ("adaptive_up", lambda m, x: m.nn.functional.adaptive_avg_pool3d(x, (7, 8, 9))),
    ("adaptive_uneven", lambda m, x: m.nn.functional.adaptive_avg_pool3d(x, (3, 4, 5))),
]


@pytest.mark.parametrize("name,fn", POOL_3D, ids=[c[0] for c in POOL_3D])
def test_3d_pools_match_torch(name, fn):
    for shape in ((2, 3, 5, 6, 7), (3, 5, 6, 7)):
        xt, xg = _pair(_n(*shape))
        ot, og = fn(torch, xt), fn(tg, xg)
        _close(ot, og)
        _backward_both(ot, og)
        _close(xt.grad, xg.grad)


@pytest.mark.parametrize("name,fn", [POOL_3D[2], POOL_3D[4], POOL_3D[6]],
                         ids=[POOL_3D[i][0] for i in (2, 4, 6)])
def test_3d_pools_gradcheck(name, fn):
    x = tg.tensor(_n(1, 2, 4, 4, 3), requires_grad=True)
    assert gradcheck(lambda a: fn(tg, a), (x,))
    assert gradgradcheck(lambda a: fn(tg, a), (x,))


def _model_3d(x, w, wt):
    y = F.conv3d(x, w, padding=1)
    y = F.avg_pool3d(F.relu(y) + y, 2, ceil_mode=True)
    y = F.conv_transpose3d(y, wt, stride=2)
    return F.adaptive_avg_pool3d(y, (2, 3, None)) + F.max_pool3d(y, 1)[..., :2, :3, :]


def _pools_3d(x):
    y = F.avg_pool3d(x, 2, ceil_mode=True, count_include_pad=False, padding=1)
    return F.adaptive_avg_pool3d(y, (2, 3, None)) * 2 + F.adaptive_avg_pool3d(x, 2).sum()


@pytest.mark.parametrize("backend", ["numpy", pytest.param("jax", marks=pytest.mark.slow)])
def test_3d_program_compiled_matches_eager(backend):
    _compiled_matches_eager(_model_3d, [_n(1, 2, 3, 4, 3), _n(3, 2, 3, 3, 3),
                                        _n(3, 2, 2, 2, 2)], backend)


@pytest.mark.parametrize("backend", ["numpy", "jax"])
def test_3d_pools_compiled_matches_eager(backend):
    _compiled_matches_eager(_pools_3d, [_n(2, 3, 4, 5, 3)], backend)


RANK_ERRORS = [
    ("conv1d_input", lambda m: m.nn.functional.conv1d(m.ones(1, 1, 3, 3), m.ones(1, 1, 1))),
    ("conv2d_input", lambda m: m.nn.functional.conv2d(m.ones(2, 3), m.ones(1, 1, 1, 1))),
    ("conv3d_weight", lambda m: m.nn.functional.conv3d(m.ones(1, 1, 3, 3, 3),
                                                       m.ones(1, 1, 1, 1))),
    ("conv3d_input", lambda m: m.nn.functional.conv3d(m.ones(1, 3, 3), m.ones(1, 1, 1, 1, 1))),
    ("conv_transpose2d_weight", lambda m: m.nn.functional.conv_transpose2d(
        m.ones(1, 1, 3, 3), m.ones(1, 1, 1))),
    ("conv_transpose3d_input", lambda m: m.nn.functional.conv_transpose3d(
        m.ones(3, 3), m.ones(1, 1, 1, 1, 1))),
    ("avg_pool3d_rank", lambda m: m.nn.functional.avg_pool3d(m.ones(2, 3, 3), 2)),
    ("avg_pool3d_pad", lambda m: m.nn.functional.avg_pool3d(m.ones(1, 2, 3, 3, 3), 2,
                                                            padding=2)),
    ("avg_pool3d_too_small", lambda m: m.nn.functional.avg_pool3d(m.ones(1, 2, 3, 3, 3), 4)),
    ("adaptive_avg_pool3d_rank", lambda m: m.nn.functional.adaptive_avg_pool3d(
        m.ones(2, 3, 3), 2)),
]


@pytest.mark.parametrize("name,fn", RANK_ERRORS, ids=[e[0] for e in RANK_ERRORS])
def test_3d_and_rank_errors_match_torch_types(name, fn):
    with pytest.raises(Exception) as want:
        fn(torch)
    with pytest.raises(want.type):
        fn(tg)


def test_conv_rank_messages_name_the_op_and_the_ranks():
    with pytest.raises(RuntimeError, match=r"Expected 4D \(unbatched\) or 5D \(batched\) "
                       r"input to conv_transpose3d, but got input of size: \[3, 3\]"):
        F.conv_transpose3d(tg.ones(3, 3), tg.ones(1, 1, 1, 1, 1))
    with pytest.raises(RuntimeError, match=r"expected a 5D weight \(out_channels, "
                       r"in_channels/groups, kD, kH, kW\), but got weight of size \[1, 1, 1, 1\]"):
        F.conv3d(tg.ones(1, 1, 3, 3, 3), tg.ones(1, 1, 1, 1))


# ---------------- CTC loss ----------------

def _log_softmax(x):
    return x - np.log(np.exp(x).sum(-1, keepdims=True))


_LP = _log_softmax(_n(6, 3, 5))
_PADDED = np.array([[1, 2, 2], [3, 1, 0], [4, 4, 4]])
_CONCAT = np.array([1, 2, 2, 3, 1, 4, 4, 4])
_IMPOSSIBLE = np.array([[1, 2, 2], [3, 3, 3], [4, 4, 4]])     # 3 3 3 needs 5 frames

CTC = [
    ("mean", _LP, _PADDED, (6, 5, 6), (3, 2, 3), {}),
    ("none", _LP, _PADDED, (6, 5, 6), (3, 2, 3), dict(reduction="none")),
    ("sum_unnormalised", _n(6, 3, 5), _PADDED, (6, 5, 6), (3, 2, 3), dict(reduction="sum")),
    ("tensor_lengths_empty_target", _LP, _PADDED, np.array([6, 5, 6]), np.array([3, 2, 0]),
     {}),
    ("concatenated", _LP, _CONCAT, (6, 5, 6), (3, 2, 3), dict(reduction="none")),
    ("concatenated_tensor_lengths", _LP, _CONCAT, np.array([6, 5, 6]), np.array([3, 2, 3]),
     dict(reduction="none")),
    ("infinite", _LP, _IMPOSSIBLE, (6, 3, 6), (3, 3, 3), dict(reduction="none")),
    ("zero_infinity", _LP, _IMPOSSIBLE, (6, 3, 6), (3, 3, 3), dict(reduction="none",
                                                                   zero_infinity=True)),
    ("zero_infinity_mean", _LP, _IMPOSSIBLE, (6, 3, 6), (3, 3, 3), dict(zero_infinity=True)),
    ("blank_last", _LP, np.array([[0, 2, 2], [3, 0, 3], [1, 1, 1]]), (6, 3, 6), (3, 3, 3),
     dict(reduction="none", blank=4)),
    ("unbatched", _LP[:, 0], np.array([1, 2, 2]), (6,), (3,), dict(reduction="none")),
    ("unbatched_tensor_lengths", _LP[:, 0], np.array([1, 2, 2]), np.array(6), np.array(3), {}),
]


def _as(m, v):
    return m.tensor(v) if isinstance(v, np.ndarray) else v


@pytest.mark.parametrize("name,lp,targets,il,tl,kw", CTC, ids=[c[0] for c in CTC])
def test_ctc_loss_matches_torch(name, lp, targets, il, tl, kw):
    """Values and gradients (PyTorch's: exp(log_probs) - posterior; NaN for an infinite
    loss on the frames used), with F.ctc_loss and nn.CTCLoss."""
    for module in (False, True):
        lt, lg = _pair(lp)
        if module:
            ot = torch.nn.CTCLoss(**kw)(lt, _as(torch, targets), _as(torch, il), _as(torch, tl))
            og = nn.CTCLoss(**kw)(lg, _as(tg, targets), _as(tg, il), _as(tg, tl))
        else:
            ot = torch.nn.functional.ctc_loss(lt, _as(torch, targets), _as(torch, il),
                                              _as(torch, tl), **kw)
            og = F.ctc_loss(lg, _as(tg, targets), _as(tg, il), _as(tg, tl), **kw)
        assert tuple(og.shape) == tuple(ot.shape)
        _close(ot, og)
        _backward_both(ot, og)
        np.testing.assert_allclose(lg.grad.numpy(), lt.grad.numpy(), rtol=1e-9, atol=1e-9)


@pytest.mark.parametrize("reduction", ["none", "mean"])
def test_ctc_loss_gradcheck_after_log_softmax(reduction):
    x = tg.tensor(_n(5, 2, 4), requires_grad=True)

    def f(a):
        return F.ctc_loss(a.log_softmax(2), tg.tensor([[1, 2], [3, 3]]), (5, 4), (2, 2),
                          reduction=reduction)
    assert gradcheck(f, (x,))
    assert gradgradcheck(f, (x,))


def test_ctc_loss_gradient_is_torchs_not_the_log_probs_one():
    """Note [PyTorch's CTC gradient]: a frame no alignment can use still gets exp(lp)."""
    lt, lg = _pair(_LP)
    torch.nn.functional.ctc_loss(lt, torch.tensor(_PADDED), (4, 5, 6), (3, 2, 3),
                                 reduction="sum").backward()
    F.ctc_loss(lg, tg.tensor(_PADDED), (4, 5, 6), (3, 2, 3), reduction="sum").backward()
    np.testing.assert_allclose(lg.grad.numpy(), lt.grad.numpy(), rtol=1e-9, atol=1e-9)
    assert np.all(lg.grad.numpy()[4:, 0] == 0)         # past input_lengths[0]: no gradient


def test_ctc_module_repr_and_attributes():
    m = nn.CTCLoss(blank=2, reduction="sum", zero_infinity=True)
    assert repr(m) == repr(torch.nn.CTCLoss()) == "CTCLoss()"
    assert (m.blank, m.reduction, m.zero_infinity) == (2, "sum", True)


CTC_ERRORS = [
    ("input_too_long", lambda m: m.nn.functional.ctc_loss(
        m.zeros(5, 2, 4), m.tensor([[1, 1], [1, 2]]), (6, 5), (1, 2))),
    ("target_too_long", lambda m: m.nn.functional.ctc_loss(
        m.zeros(5, 2, 4), m.tensor([[1, 1], [1, 2]]), (5, 5), (3, 2))),
    ("lengths_size", lambda m: m.nn.functional.ctc_loss(
        m.zeros(5, 2, 4), m.tensor([[1, 1], [1, 2]]), (5,), (1, 2))),
    ("negative_target_length", lambda m: m.nn.functional.ctc_loss(
        m.zeros(5, 2, 4), m.tensor([[1, 1], [1, 2]]), (5, 5), (1, -1))),
    ("blank_range", lambda m: m.nn.functional.ctc_loss(
        m.zeros(5, 2, 4), m.tensor([[1, 1], [1, 2]]), (5, 5), (1, 2), blank=4)),
    ("reduction", lambda m: m.nn.functional.ctc_loss(
        m.zeros(5, 2, 4), m.tensor([[1, 1], [1, 2]]), (5, 5), (1, 2), reduction="foo")),
]


@pytest.mark.parametrize("name,fn", CTC_ERRORS, ids=[e[0] for e in CTC_ERRORS])
def test_ctc_errors_match_torch_types(name, fn):
    with pytest.raises(Exception) as want:
        fn(torch)
    with pytest.raises(want.type):
        fn(tg)


def _ctc_program(lp):
    return F.ctc_loss(lp.log_softmax(2), tg.tensor(_PADDED), tg.tensor([6, 5, 6]), (3, 2, 3),
                      reduction="none", zero_infinity=True) * 1.0


@pytest.mark.parametrize("backend", ["numpy", "jax"])
def test_ctc_compiled_matches_eager(backend):
    _compiled_matches_eager(_ctc_program, [_n(6, 3, 5)], backend)
