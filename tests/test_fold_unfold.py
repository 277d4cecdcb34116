"""`nn.functional.unfold` / `fold` and `nn.Unfold` / `nn.Fold` against PyTorch: values over
kernel sizes, dilations, paddings and strides (batched and unbatched), gradients to second
order, grad_fn names, errors (type and message), module reprs, and compiled (numpy and jax)
== eager, forward and backward."""
import numpy as np
import pytest

import tracegrad as tg
import tracegrad.nn.functional as F

torch = pytest.importorskip("torch")
TF = torch.nn.functional
RNG = np.random.default_rng(3)

CONFIGS = [  # kernel_size, dilation, padding, stride
    (2, 1, 0, 1), ((2, 3), (1, 2), 1, (2, 1)), (3, 1, 1, 2), ((1, 2), 2, (0, 2), (1, 3)),
    (1, 1, 0, 1), ((3, 2), (2, 1), (2, 0), 1),
]


def _args(cfg):
    k, d, p, s = cfg
    return dict(kernel_size=k, dilation=d, padding=p, stride=s)


@pytest.mark.parametrize("cfg", CONFIGS)
@pytest.mark.parametrize("shape", [(2, 3, 7, 8), (3, 6, 5), (0, 2, 5, 5)])
def test_unfold_and_fold_match_torch(cfg, shape):
    a = RNG.normal(size=shape)
    u = F.unfold(tg.tensor(a), **_args(cfg))
    tu = TF.unfold(torch.tensor(a), **_args(cfg))
    assert tuple(u.shape) == tuple(tu.shape)
    np.testing.assert_array_equal(u.numpy(), tu.numpy())
    cols = RNG.normal(size=tuple(tu.shape))
    f = F.fold(tg.tensor(cols), shape[-2:], **_args(cfg))
    tf = TF.fold(torch.tensor(cols), shape[-2:], **_args(cfg))
    assert tuple(f.shape) == tuple(tf.shape)
    np.testing.assert_allclose(f.numpy(), tf.numpy(), rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize("cfg", CONFIGS[:3])
def test_gradients_match_torch_and_gradcheck(cfg):
    a = RNG.normal(size=(2, 2, 6, 7))
    x = tg.tensor(a, requires_grad=True)
    tx = torch.tensor(a, requires_grad=True)
    u, tu = F.unfold(x, **_args(cfg)), TF.unfold(tx, **_args(cfg))
    assert type(u.grad_fn).__name__ == type(tu.grad_fn).__name__ == "Im2ColBackward0"
    w = RNG.normal(size=tuple(tu.shape))
    (u * tg.tensor(w)).sum().backward()
    (tu * torch.tensor(w)).sum().backward()
    np.testing.assert_allclose(x.grad.numpy(), tx.grad.numpy(), rtol=1e-12)
    c = tg.tensor(w, requires_grad=True)
    tc = torch.tensor(w, requires_grad=True)
    f, tf = F.fold(c, (6, 7), **_args(cfg)), TF.fold(tc, (6, 7), **_args(cfg))
    assert type(f.grad_fn).__name__ == type(tf.grad_fn).__name__ == "Col2ImBackward0"
    (f * f).sum().backward()
    (tf * tf).sum().backward()
    np.testing.assert_allclose(c.grad.numpy(), tc.grad.numpy(), rtol=1e-12)
    small = tg.tensor(RNG.normal(size=(1, 2, 4, 5)), requires_grad=True)
    assert tg.autograd.gradcheck(lambda t: F.unfold(t, **_args(cfg)) ** 2, (small,))
    assert tg.autograd.gradgradcheck(lambda t: F.unfold(t, **_args(cfg)) ** 2, (small,))
    cols = tg.tensor(RNG.normal(size=tuple(F.unfold(small, **_args(cfg)).shape)),
                     requires_grad=True)
    assert tg.autograd.gradgradcheck(lambda t: F.fold(t, (4, 5), **_args(cfg)) ** 2, (cols,))


def test_fold_of_unfold_counts_overlaps():
    x = tg.ones(1, 1, 4, 4)
    counts = F.fold(F.unfold(x, 2), (4, 4), 2)
    np.testing.assert_array_equal(counts[0, 0].numpy(), [[1, 2, 2, 1], [2, 4, 4, 2],
                                                         [2, 4, 4, 2], [1, 2, 2, 1]])


def test_modules_and_reprs():
    u, tu = tg.nn.Unfold((2, 3), dilation=(1, 2), padding=1, stride=(2, 1)), \
        torch.nn.Unfold((2, 3), dilation=(1, 2), padding=1, stride=(2, 1))
    f, tfm = tg.nn.Fold((5, 6), 2), torch.nn.Fold((5, 6), 2)
    assert repr(u) == repr(tu) and repr(f) == repr(tfm)
    a = RNG.normal(size=(2, 3, 5, 6))
    np.testing.assert_array_equal(u(tg.tensor(a)).numpy(), tu(torch.tensor(a)).numpy())
    c = RNG.normal(size=(2, 12, 20))
    np.testing.assert_allclose(f(tg.tensor(c)).numpy(), tfm(torch.tensor(c)).numpy())


ERRORS = [
    (lambda m: m.nn.functional.unfold(m.zeros(2, 3, 5, 6), 7), "unfold"),
    (lambda m: m.nn.functional.unfold(m.zeros(2, 3, 5, 6), 2, stride=0), "stride"),
    (lambda m: m.nn.functional.unfold(m.zeros(2, 3, 5, 6), 2, padding=-1), "padding"),
    (lambda m: m.nn.functional.unfold(m.zeros(2, 3, 5, 6), 2, dilation=0), "dilation"),
    (lambda m: m.nn.functional.unfold(m.zeros(2, 3, 5, 6), 0), "kernel"),
    (lambda m: m.nn.functional.unfold(m.zeros(1, 2, 3, 4, 5), 2), "5-d"),
    (lambda m: m.nn.functional.unfold(m.zeros(2, 0, 5, 6), 2), "empty channels"),
    (lambda m: m.nn.functional.fold(m.zeros(2, 12, 19), (5, 6), 2), "blocks"),
    (lambda m: m.nn.functional.fold(m.zeros(2, 13, 20), (5, 6), 2), "divisible"),
    (lambda m: m.nn.functional.fold(m.zeros(12, 19), (5, 6), 2), "unbatched blocks"),
    (lambda m: m.nn.functional.fold(m.zeros(2, 12, 20), (5, 6, 7), 2), "output_size"),
    (lambda m: m.nn.functional.fold(m.zeros(2, 12, 20), (5, 6), (2, 2, 2)), "kernel_size"),
    (lambda m: m.nn.functional.fold(m.zeros(2, 12, 0), (1, 1), 2), "zero blocks"),
]


@pytest.mark.parametrize("case", range(len(ERRORS)))
def test_errors_match_torch(case):
    fn, _ = ERRORS[case]
    with pytest.raises(Exception) as theirs:
        fn(torch)
    with pytest.raises(type(theirs.value)) as ours:
        fn(tg)
    assert str(theirs.value).split("\n")[0] in str(ours.value)


def test_integer_input_is_not_implemented_like_torch():
    with pytest.raises(NotImplementedError, match="im2col_out_cpu\" not implemented for 'Long'"):
        F.unfold(tg.tensor([[[[1, 2], [3, 4]]]]), 1)
    with pytest.raises(NotImplementedError, match="col2im_out_cpu\" not implemented for 'Long'"):
        F.fold(tg.zeros(1, 4, 1, dtype=tg.int64), (2, 2), 2)


@pytest.mark.parametrize("backend", ["numpy", "jax"])
def test_compiled_matches_eager(backend):
    if backend == "jax":
        pytest.importorskip("jax")
    conv_w = tg.tensor(RNG.normal(size=(4, 3 * 6)), requires_grad=True)

    def step(x):
        cols = F.unfold(x, (2, 3), dilation=(1, 2), padding=1, stride=(2, 1))
        y = conv_w @ cols                                       # im2col convolution
        back = F.fold(cols * 0.5, x.shape[-2:], (2, 3), dilation=(1, 2), padding=1,
                      stride=(2, 1))
        return (y * y).mean() + (back * x).sum()

    for dtype in (tg.float32, tg.float64):
        conv_w.data = conv_w.data.to(dtype)
        x = tg.tensor(RNG.normal(size=(2, 3, 6, 7)), dtype=dtype, requires_grad=True)
        cf = tg.compile(step, backend=backend)
        for _ in range(2):
            out = cf(x)
            out.backward()
            gx, gw = x.grad.clone(), conv_w.grad.clone()
            x.grad = conv_w.grad = None
            ref = step(x)
            ref.backward()
            tol = 1e-5 if dtype == tg.float32 else 1e-12
            np.testing.assert_allclose(out.item(), ref.item(), rtol=tol)
            np.testing.assert_allclose(gx.numpy(), x.grad.numpy(), rtol=tol, atol=tol)
            np.testing.assert_allclose(gw.numpy(), conv_w.grad.numpy(), rtol=tol, atol=tol)
            x.grad = conv_w.grad = None
