"""Convolution: the `im2col` / `col2im` primitives, `nn.functional.conv2d` and `nn.Conv2d`.

Forward values are checked against a direct nested-loop numpy reference, gradients by finite
differences (first and second order), compiled against eager, and everything against
PyTorch (skipped without torch): values, gradients, reprs and the exception types of bad
calls.
"""
import math

import numpy as np
import pytest

import tracegrad as tg
from tracegrad import nn
from tracegrad.nn import functional as F

# (x shape, weight shape, kwargs); a 3-D x is unbatched
CONFIGS = [
    ((2, 3, 6, 7), (4, 3, 3, 3), {}),
    ((2, 3, 6, 7), (4, 3, 3, 3), {"bias": False}),
    ((1, 2, 7, 7), (3, 2, 3, 2), {"stride": 2, "padding": 1}),
    ((2, 2, 8, 6), (2, 2, 3, 3), {"stride": (2, 1), "padding": (0, 2), "dilation": (1, 2)}),
    ((2, 4, 5, 5), (6, 2, 3, 3), {"groups": 2, "padding": 1}),
    ((1, 6, 5, 6), (3, 2, 2, 2), {"groups": 3, "stride": 2}),
    ((2, 2, 5, 6), (3, 2, 4, 3), {"padding": "same"}),
    ((1, 2, 6, 6), (3, 2, 3, 3), {"padding": "same", "dilation": 2}),
    ((2, 2, 6, 5), (3, 2, 3, 3), {"padding": "valid", "stride": 3}),
    ((3, 5, 5), (2, 3, 3, 3), {"padding": 1}),
    ((2, 1, 4, 4), (2, 1, 1, 1), {}),
    ((1, 2, 3, 3), (2, 2, 3, 3), {"dilation": 1}),
]
IDS = [f"x{list(x)}-w{list(w)}-{kw}" for x, w, kw in CONFIGS]


def _args(xs, ws, kw, dtype="float64", seed=0):
    rng = np.random.default_rng(seed)
    kw = dict(kw)
    b = rng.standard_normal(ws[0]).astype(dtype) if kw.pop("bias", True) else None
    return (rng.standard_normal(xs).astype(dtype), rng.standard_normal(ws).astype(dtype), b,
            kw)


def _pair(v):
    return tuple(v) if isinstance(v, tuple) else (v, v)


def ref_conv2d(x, w, b=None, stride=1, padding=0, dilation=1, groups=1):
    """Direct definition: out[n, o, i, j] = sum over one group's channels and the kernel."""
    unbatched = x.ndim == 3
    x = x[None] if unbatched else x
    (sh, sw), (dh, dw) = _pair(stride), _pair(dilation)
    oc, cg, kh, kw = w.shape
    if padding == "same":
        pads = [(t // 2, t - t // 2) for t in (dh * (kh - 1), dw * (kw - 1))]
    else:
        pads = [(p, p) for p in _pair(0 if padding == "valid" else padding)]
    xp = np.pad(x, [(0, 0), (0, 0)] + pads)
    oh = (xp.shape[2] - dh * (kh - 1) - 1) // sh + 1
    ow = (xp.shape[3] - dw * (kw - 1) - 1) // sw + 1
    out = np.zeros((x.shape[0], oc, oh, ow), dtype=x.dtype)
    for o in range(oc):
        g = o // (oc // groups)
        for i in range(oh):
            for j in range(ow):
                patch = xp[:, g * cg:(g + 1) * cg, i * sh:i * sh + dh * (kh - 1) + 1:dh,
                           j * sw:j * sw + dw * (kw - 1) + 1:dw]
                out[:, o, i, j] = np.einsum("nchw,chw->n", patch, w[o])
    if b is not None:
        out += b[:, None, None]
    return out[0] if unbatched else out


def _tg(a, rg=False):
    return None if a is None else tg.tensor(a, requires_grad=rg)


# ---------------- forward against numpy ----------------
@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("xs,ws,kw", CONFIGS, ids=IDS)
def test_forward_matches_numpy_reference(xs, ws, kw, dtype):
    x, w, b, kw = _args(xs, ws, kw, dtype)
    out = F.conv2d(_tg(x), _tg(w), _tg(b), **kw)
    ref = ref_conv2d(x.astype(np.float64), w.astype(np.float64), b, **kw)
    assert out.dtype is getattr(tg, dtype)
    assert tuple(out.shape) == ref.shape
    tol = 1e-5 if dtype == "float32" else 1e-12
    np.testing.assert_allclose(out.numpy(), ref, rtol=tol, atol=tol)


def test_im2col_and_col2im_are_adjoint():
    rng = np.random.default_rng(1)
    attrs = dict(kernel_size=(2, 3), stride=(2, 1), padding=((1, 0), (2, 1)), dilation=(1, 2))
    x = rng.standard_normal((2, 3, 5, 6))
    cols = tg.im2col(tg.tensor(x), **attrs)
    y = rng.standard_normal(tuple(cols.shape))
    back = tg.col2im(tg.tensor(y), (5, 6), **attrs)
    assert tuple(back.shape) == x.shape
    np.testing.assert_allclose((cols.numpy() * y).sum(), (x * back.numpy()).sum(), rtol=1e-12)


def test_im2col_output_owns_its_memory():
    x = tg.randn(1, 2, 4, 4)
    cols = tg.im2col(x, 1)                   # 1x1 kernel: numpy could hand back a view
    assert not np.shares_memory(cols.numpy(), x.numpy())
    assert cols.numpy().flags.c_contiguous


def test_grad_fn_names():
    x = tg.randn(1, 2, 4, 4, requires_grad=True)
    cols = tg.im2col(x, 2)
    assert type(cols.grad_fn).__name__ == "Im2ColBackward0"
    assert type(tg.col2im(cols, (4, 4), 2).grad_fn).__name__ == "Col2ImBackward0"


# ---------------- finite differences ----------------
GRAD_CONFIGS = [                           # small: finite differences take every Jacobian
    ((1, 2, 4, 5), (3, 2, 2, 3), {}),
    ((1, 2, 5, 4), (2, 2, 2, 2), {"stride": (2, 1), "padding": (0, 1), "dilation": (1, 2)}),
    ((1, 4, 3, 3), (4, 2, 2, 2), {"groups": 2, "padding": 1}),
    ((1, 2, 4, 4), (2, 2, 2, 3), {"padding": "same", "dilation": 2, "bias": False}),
    ((2, 3, 3), (2, 2, 2, 2), {"padding": 1}),
]


@pytest.mark.parametrize("xs,ws,kw", GRAD_CONFIGS,
                         ids=[f"x{list(x)}-w{list(w)}-{kw}" for x, w, kw in GRAD_CONFIGS])
def test_gradcheck_first_and_second_order(xs, ws, kw):
    x, w, b, kw = _args(xs, ws, kw)
    ins = [_tg(a, True) for a in (x, w, b) if a is not None]

    def fn(x, w, *b):
        return F.conv2d(x, w, *b, **kw)
    assert tg.autograd.gradcheck(fn, ins)
    assert tg.autograd.gradgradcheck(fn, ins)


def test_gradgradcheck_im2col_col2im():
    x = tg.randn(1, 2, 4, 5, dtype=tg.float64, requires_grad=True)
    attrs = dict(kernel_size=(2, 2), stride=2, padding=1, dilation=(1, 2))
    assert tg.autograd.gradgradcheck(lambda t: tg.im2col(t, **attrs), (x,))
    cols = tg.randn(1, 8, 9, dtype=tg.float64, requires_grad=True)
    assert tg.autograd.gradgradcheck(lambda t: tg.col2im(t, (4, 5), **attrs), (cols,))


# ---------------- compiled == eager ----------------
def _net():
    tg.manual_seed(0)
    return nn.Sequential(nn.Conv2d(2, 4, 3, padding=1), nn.Tanh(),
                         nn.Conv2d(4, 6, 3, stride=2, groups=2), nn.ReLU(),
                         nn.Conv2d(6, 3, 2, padding="same", dilation=2, bias=False))


def _grads(net):
    return [p.grad.numpy().copy() for p in net.parameters()]


def test_compiled_matches_eager_values_and_grads():
    net = _net()
    x = tg.randn(2, 2, 9, 9, dtype=tg.float32, requires_grad=True)

    def loss(x):
        return (net(x) ** 2).mean()
    compiled = tg.compile(loss)
    for _ in range(2):                       # the trace, then the cached program
        net.zero_grad()
        x.grad = None
        got = compiled(x)
        got.backward()
        got_g, got_x = _grads(net), x.grad.numpy().copy()
        net.zero_grad()
        x.grad = None
        want = loss(x)
        want.backward()
        np.testing.assert_allclose(got.item(), want.item(), rtol=1e-6)
        for a, b in zip(got_g + [got_x], _grads(net) + [x.grad.numpy()]):
            np.testing.assert_allclose(a, b, rtol=1e-5, atol=1e-7)
    assert "im2col" in str(compiled.programs[0].forward)
    assert "col2im" in str(compiled.programs[0].backward)


def test_compiled_second_order_matches_eager():
    rng = np.random.default_rng(3)
    x0, w0 = rng.standard_normal((1, 2, 5, 5)), rng.standard_normal((3, 2, 2, 2))

    def penalty(x, w):
        y = F.conv2d(x, w, stride=2, padding=1)
        (gx,) = tg.autograd.grad((y ** 2).sum(), (x,), create_graph=True)
        return (gx ** 2).sum()
    results = []
    for fn in (penalty, tg.compile(penalty)):
        x, w = _tg(x0, True), _tg(w0, True)
        v = fn(x, w)
        v.backward()
        results.append((v.item(), w.grad.numpy().copy()))
    np.testing.assert_allclose(results[0][0], results[1][0], rtol=1e-10)
    np.testing.assert_allclose(results[0][1], results[1][1], rtol=1e-10)


# ---------------- nn.Conv2d ----------------
def test_conv2d_module_init_bounds_and_seed():
    tg.manual_seed(1)
    m = nn.Conv2d(4, 6, (3, 2), groups=2)
    assert tuple(m.weight.shape) == (6, 2, 3, 2) and tuple(m.bias.shape) == (6,)
    bound = 1 / math.sqrt(2 * 3 * 2)
    assert np.abs(m.weight.detach().numpy()).max() <= bound
    assert np.abs(m.bias.detach().numpy()).max() <= bound
    tg.manual_seed(1)
    np.testing.assert_array_equal(nn.Conv2d(4, 6, (3, 2), groups=2).weight.detach().numpy(),
                                  m.weight.detach().numpy())
    assert nn.Conv2d(1, 2, 3, bias=False, dtype=tg.float64).weight.dtype is tg.float64
    assert [n for n, _ in m.named_parameters()] == ["weight", "bias"]


@pytest.mark.parametrize("kwargs", [dict(groups=0), dict(groups=4), dict(padding="same", stride=2),
                                    dict(padding="full"), dict(padding_mode="wrap")])
def test_conv2d_module_rejects_bad_arguments(kwargs):
    with pytest.raises(ValueError):
        nn.Conv2d(6, 4, 3, **kwargs)


def test_padding_mode_message_lists_the_modes():
    with pytest.raises(ValueError, match="padding_mode must be one of .'zeros', 'reflect'"):
        nn.Conv2d(2, 2, 3, padding_mode="wrap")


# ---------------- errors ----------------
BAD_CALLS = [
    ("channels", (2, 3, 5, 5), (4, 2, 3, 3), {}, "expected input"),
    ("groups-channels", (2, 3, 5, 5), (4, 3, 3, 3), {"groups": 2}, "channels"),
    ("groups-weight", (2, 4, 5, 5), (3, 2, 3, 3), {"groups": 2}, "divisible by 2"),
    ("same-strided", (2, 3, 5, 5), (4, 3, 3, 3), {"padding": "same", "stride": 2},
     "strided convolutions"),
    ("kernel-too-big", (2, 3, 5, 5), (4, 3, 3, 3), {"dilation": 3}, "Kernel size"),
    ("bad-padding-string", (2, 3, 5, 5), (4, 3, 3, 3), {"padding": "full"}, "padding string"),
    ("2d-input", (3, 5), (4, 3, 3, 3), {}, "3D \\(unbatched\\) or 4D"),
    ("stride-0", (2, 3, 5, 5), (4, 3, 3, 3), {"stride": 0}, "non-positive stride"),
    ("negative-padding", (2, 3, 5, 5), (4, 3, 3, 3), {"padding": -1}, "negative padding"),
    ("stride-3-values", (2, 3, 5, 5), (4, 3, 3, 3), {"stride": (1, 1, 1)}, "list of 2 values"),
]


@pytest.mark.parametrize("name,xs,ws,kw,match", BAD_CALLS, ids=[c[0] for c in BAD_CALLS])
def test_bad_calls_raise_runtime_error_naming_conv2d(name, xs, ws, kw, match):
    x, w = tg.randn(*xs), tg.randn(*ws)
    with pytest.raises(RuntimeError, match=match) as e:
        F.conv2d(x, w, **kw)
    assert isinstance(e.value, tg.TracegradError) and str(e.value).startswith("conv2d: ")


def test_bias_and_dtype_mismatches():
    x, w = tg.randn(1, 2, 4, 4), tg.randn(3, 2, 2, 2)
    with pytest.raises(RuntimeError, match="bias to be 1-dimensional with 3 elements"):
        F.conv2d(x, w, tg.randn(4))
    with pytest.raises(RuntimeError, match="Input type \\(float64\\) and weight type"):
        F.conv2d(x.double(), w)


def test_error_leaves_state_usable():
    m = nn.Conv2d(2, 3, 3)
    good = tg.randn(1, 2, 5, 5)
    with pytest.raises(RuntimeError):
        m(tg.randn(1, 4, 5, 5))
    m(good).sum().backward()
    assert tuple(m.weight.grad.shape) == (3, 2, 3, 3)
    compiled = tg.compile(lambda x: m(x).sum())
    want = compiled(good).item()
    with pytest.raises(RuntimeError):
        compiled(tg.randn(1, 4, 5, 5))
    assert compiled(good).item() == pytest.approx(want)
    with pytest.raises(RuntimeError):
        compiled(tg.randn(1, 2, 2, 2))       # smaller than the kernel
    assert compiled(good).item() == pytest.approx(want)


# ---------------- PyTorch oracle ----------------
def _torch():
    return pytest.importorskip("torch")


@pytest.mark.filterwarnings("ignore:Using padding='same'")   # torch: even kernels copy
@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("xs,ws,kw", CONFIGS, ids=IDS)
def test_functional_matches_torch_values_and_grads(xs, ws, kw, dtype):
    torch = _torch()
    x, w, b, kw = _args(xs, ws, kw, dtype, seed=5)
    g = np.random.default_rng(6).standard_normal(ref_conv2d(x, w, b, **kw).shape).astype(dtype)
    ours = [_tg(a, True) for a in (x, w, b)]
    theirs = [None if a is None else torch.tensor(a, requires_grad=True) for a in (x, w, b)]
    out = F.conv2d(*ours, **kw)
    want = torch.nn.functional.conv2d(*theirs, **kw)
    out.backward(tg.tensor(g))
    want.backward(torch.tensor(g))
    tol = dict(rtol=1e-4, atol=1e-5) if dtype == "float32" else dict(rtol=1e-10, atol=1e-12)
    np.testing.assert_allclose(out.detach().numpy(), want.detach().numpy(), **tol)
    for a, t in zip(ours, theirs):
        if a is not None:
            np.testing.assert_allclose(a.grad.numpy(), t.grad.numpy(), **tol)


def test_second_order_matches_torch():
    torch = _torch()
    x, w, b, kw = _args((2, 4, 6, 6), (4, 2, 3, 3), {"groups": 2, "stride": 2, "padding": 1})
    results = []
    for lib, F_ in ((tg, F), (torch, torch.nn.functional)):
        xt, wt = lib.tensor(x, requires_grad=True), lib.tensor(w, requires_grad=True)
        y = F_.conv2d(xt, wt, lib.tensor(b), **kw)
        (gx,) = lib.autograd.grad((y ** 3).sum(), (xt,), create_graph=True)
        (gx ** 2).sum().backward()
        results.append((xt.grad.numpy(), wt.grad.numpy()))
    for a, t in zip(*results):
        np.testing.assert_allclose(a, t, rtol=1e-9, atol=1e-10)


MODULE_ARGS = [
    (3, 8, 3, {}),
    (4, 6, (3, 2), dict(stride=2, padding=1, dilation=(2, 1), groups=2, bias=False)),
    (2, 4, 4, dict(padding="same")),
    (2, 4, 3, dict(padding="valid", stride=(1, 2))),
]


@pytest.mark.filterwarnings("ignore:Using padding='same'")
@pytest.mark.parametrize("cin,cout,k,kw", MODULE_ARGS)
def test_conv2d_module_matches_torch(cin, cout, k, kw):
    torch = _torch()
    ours = nn.Conv2d(cin, cout, k, **kw)
    theirs = torch.nn.Conv2d(cin, cout, k, **kw)
    assert repr(ours) == repr(theirs)
    theirs.load_state_dict({n: torch.from_numpy(v.detach().numpy().copy())
                            for n, v in ours.state_dict().items()})
    x = np.random.default_rng(2).standard_normal((2, cin, 7, 8)).astype("float32")
    for batch in (x, x[0]):                           # batched and unbatched
        ours.zero_grad()
        theirs.zero_grad()
        a, t = ours(tg.tensor(batch)), theirs(torch.tensor(batch))
        np.testing.assert_allclose(a.detach().numpy(), t.detach().numpy(), rtol=1e-5, atol=1e-5)
        (a ** 2).sum().backward()
        (t ** 2).sum().backward()
        for (n, p), (_, q) in zip(ours.named_parameters(), theirs.named_parameters()):
            np.testing.assert_allclose(p.grad.numpy(), q.grad.numpy(), rtol=1e-4, atol=1e-4,
                                       err_msg=n)


def test_default_init_distribution_matches_torch():
    torch = _torch()
    tg.manual_seed(0)
    torch.manual_seed(0)
    ours, theirs = nn.Conv2d(16, 32, 3), torch.nn.Conv2d(16, 32, 3)
    for p, q in zip(ours.parameters(), theirs.parameters()):
        q = q.detach().numpy()
        bound = 1 / math.sqrt(16 * 9)
        p = p.detach().numpy()
        assert np.abs(p).max() <= bound and np.abs(q).max() <= bound
        assert p.std() == pytest.approx(q.std(), rel=0.3)


@pytest.mark.parametrize("name,xs,ws,kw,match", BAD_CALLS, ids=[c[0] for c in BAD_CALLS])
def test_bad_calls_raise_what_torch_raises(name, xs, ws, kw, match):
    torch = _torch()
    with pytest.raises(Exception) as theirs:
        torch.nn.functional.conv2d(torch.randn(*xs), torch.randn(*ws), **kw)
    with pytest.raises(Exception) as ours:
        F.conv2d(tg.randn(*xs), tg.randn(*ws), **kw)
    assert isinstance(ours.value, type(theirs.value))


@pytest.mark.parametrize("kwargs", [dict(groups=0), dict(groups=4), dict(padding="same", stride=2),
                                    dict(padding="full")])
def test_module_bad_arguments_raise_what_torch_raises(kwargs):
    torch = _torch()
    with pytest.raises(Exception) as theirs:
        torch.nn.Conv2d(6, 4, 3, **kwargs)
    with pytest.raises(Exception) as ours:
        nn.Conv2d(6, 4, 3, **kwargs)
    assert isinstance(ours.value, type(theirs.value))


class _WSConv(nn.Conv2d):
    """Weight-standardised convolution, written as PyTorch users subclass Conv2d."""

    def forward(self, x):
        w = self.weight
        w = (w - w.mean(dim=(1, 2, 3), keepdim=True)) / (w.std(dim=(1, 2, 3), keepdim=True)
                                                          + 1e-5)
        return self._conv_forward(x, w, self.bias)


@pytest.mark.parametrize("mode", ["zeros", "reflect"])
def test_subclass_calling_conv_forward_matches_torch_and_compiles(mode):
    torch = pytest.importorskip("torch")

    class TorchWS(torch.nn.Conv2d):
        def forward(self, x):
            w = self.weight
            w = (w - w.mean(dim=(1, 2, 3), keepdim=True)) / (
                w.std(dim=(1, 2, 3), keepdim=True) + 1e-5)
            return self._conv_forward(x, w, self.bias)

    tg.manual_seed(0)
    m = _WSConv(3, 4, 3, padding=1, padding_mode=mode).double()
    t = TorchWS(3, 4, 3, padding=1, padding_mode=mode).double()
    t.load_state_dict({k: torch.tensor(v.detach().numpy()) for k, v in m.state_dict().items()})
    x = np.random.default_rng(0).standard_normal((2, 3, 6, 5))
    compiled = tg.compile(m)
    for run in (m, compiled, compiled):
        m.zero_grad()
        out = run(tg.tensor(x))
        out.square().sum().backward()
        t.zero_grad()
        ref = t(torch.tensor(x))
        ref.square().sum().backward()
        np.testing.assert_allclose(out.detach().numpy(), ref.detach().numpy(), rtol=1e-10)
        np.testing.assert_allclose(m.weight.grad.numpy(), t.weight.grad.numpy(), rtol=1e-9)
