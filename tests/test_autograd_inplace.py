"""In-place operations with autograd: version counters, saved-tensor checks, leaf rules, and
correct gradients through in-place ops on views (graph rebasing, as in PyTorch).

Rule tests run on tracegrad and torch via the `lib` fixture; gradient tests run one program
on both libraries and compare `.grad` (skipped without torch) and a finite-difference check.
"""
import numpy as np
import pytest

import tracegrad as tg


def _np(t):
    return t.detach().numpy()


def _grads_both(program, *arrays):
    """Run `program(lib, *leaves)` on tracegrad and torch; compare the leaves' grads."""
    torch = pytest.importorskip("torch")
    out = []
    for lib in (tg, torch):
        leaves = [lib.tensor(a, dtype=lib.float64, requires_grad=True) for a in arrays]
        program(lib, *leaves).backward()
        out.append([None if t.grad is None else _np(t.grad) for t in leaves])
    for ours, ref in zip(*out):
        assert (ours is None) == (ref is None)
        if ref is not None:
            np.testing.assert_allclose(ours, ref, rtol=1e-12, atol=1e-12)
    return out[0]


def _fd_check(program, *arrays, eps=1e-6):
    """Finite differences of the scalar `program` against tracegrad's gradients."""
    leaves = [tg.tensor(a, dtype=tg.float64, requires_grad=True) for a in arrays]
    program(tg, *leaves).backward()
    for k, a in enumerate(arrays):
        num = np.zeros(a.size)
        for i in range(a.size):
            vals = []
            for s in (eps, -eps):
                shifted = [b.copy() for b in arrays]
                shifted[k].reshape(-1)[i] += s
                with tg.no_grad():
                    ts = [tg.tensor(b, dtype=tg.float64) for b in shifted]
                    vals.append(float(program(tg, *ts)))
            num[i] = (vals[0] - vals[1]) / (2 * eps)
        np.testing.assert_allclose(_np(leaves[k].grad).reshape(-1), num, rtol=1e-6, atol=1e-8)


# ---------------------------------------------------------------- version counter

@pytest.mark.parametrize("op", ["add_", "sub_", "mul_", "div_", "pow_", "zero_", "fill_",
                                "copy_", "clamp_", "exp_", "relu_", "sigmoid_", "tanh_"])
def test_every_inplace_op_bumps_version(lib, op):
    x = lib.ones(3)
    args = {"add_": (1.0,), "sub_": (1.0,), "mul_": (2.0,), "div_": (2.0,), "pow_": (2.0,),
            "fill_": (3.0,), "copy_": (lib.zeros(3),), "clamp_": (0.0, 0.5)}.get(op, ())
    assert x._version == 0
    assert getattr(x, op)(*args) is x
    assert x._version == 1


@pytest.mark.parametrize("stmt", ["x += 1", "x -= 1", "x *= 2", "x /= 2", "x[0] = 5.0",
                                  "x[1:] = 0.0", "x[[0, 2]] = 1.0"])
def test_augmented_assignment_and_setitem_bump_version(lib, stmt):
    x = lib.ones(3)
    exec(stmt, {"x": x})
    assert x._version == 1


def test_out_of_place_ops_do_not_bump_version(lib):
    x = lib.ones(3)
    _ = x + 1, x * 2, x.exp(), x[0], x.view(3)
    assert x._version == 0


def test_views_share_version_counter_with_base(lib):
    base = lib.ones(2, 3)
    v1, v2 = base[0], base.t()
    v1.add_(1)
    assert base._version == v1._version == v2._version == 1
    base.mul_(2)
    assert v1._version == v2._version == 2


def test_view_of_view_shares_version(lib):
    base = lib.ones(4, 4)
    v = base[1:][:, 2]
    v.zero_()
    assert base._version == 1
    assert float(base.sum()) == 16 - 3


# ---------------------------------------------------------------- saved-tensor version check

def test_modifying_saved_output_raises_naming_the_op(lib):
    a = lib.ones(2, requires_grad=True)
    b = a.exp()
    b.add_(1)
    with pytest.raises(RuntimeError, match=r"output 0 of Exp, is at version 1; expected "
                                           r"version 0 instead"):
        b.sum().backward()


def test_modifying_saved_input_raises(lib):
    a = lib.ones(2, requires_grad=True)
    b = a * 1
    c = b * b
    b.add_(1)
    with pytest.raises(RuntimeError, match="modified by an inplace operation"):
        c.sum().backward()


@pytest.mark.parametrize("stmt", ["y.mul_(y)", "y.div_(y)", "y[0].mul_(y[1])", "y.pow_(y)"])
def test_inplace_op_reading_its_own_target_saves_the_old_version(lib, stmt):
    """`y.mul_(y)` saves `other`, the very storage it then overwrites: the saved operand
    holds the version before the write, so backward raises (it used to give a wrong
    gradient silently, from the new contents)."""
    x = lib.tensor([[0.5, 2.0], [1.5, 3.0]], requires_grad=True)
    y = x * 1
    exec(stmt)
    with pytest.raises(RuntimeError, match="modified by an inplace operation"):
        y.sum().backward()


def test_inplace_op_reading_an_unsaved_alias_of_its_target_is_fine(lib):
    x = lib.tensor([[0.5, 2.0], [1.5, 3.0]], requires_grad=True)
    y = x * 1
    y[0].add_(y[1])                       # AddBackward0 saves nothing
    y.sum().backward()
    np.testing.assert_array_equal(x.grad.numpy(), [[1.0, 1.0], [2.0, 2.0]])


def test_saved_tensor_error_message_prefix_equals_torch():
    torch = pytest.importorskip("torch")
    msgs = []
    for lib in (torch, tg):
        a = lib.ones(2, requires_grad=True)
        b = a.exp()
        b.add_(1)
        with pytest.raises(RuntimeError) as e:
            b.sum().backward()
        msgs.append(str(e.value))
    prefix = msgs[0].split("which is")[0]
    assert prefix.startswith("one of the variables needed for gradient computation")
    # the whole sentence up to the hint, node name included ("Exp", not ExpBackward0)
    assert msgs[1].split(" Hint")[0] == msgs[0].split(" Hint")[0]


def test_inplace_after_op_that_saved_its_output_raises(lib):
    x = lib.tensor([0.1, 0.2], requires_grad=True)
    y = x.exp()
    y.sigmoid_().pow_(2)                  # sigmoid_ saved its output; pow_ overwrote it
    with pytest.raises(RuntimeError, match="output 0 of Sigmoid, "):
        y.sum().backward()


def test_inplace_on_value_not_saved_is_fine(lib):
    a = lib.tensor([1.0, 2.0], requires_grad=True)
    b = a + 1                  # AddBackward0 saves nothing
    c = b + 1
    b.mul_(3)                  # MulBackward0 saves the scalar only
    (b + c).sum().backward()
    np.testing.assert_allclose(_np(a.grad), [4.0, 4.0])


# ---------------------------------------------------------------- leaf rules

def test_inplace_on_leaf_requiring_grad_raises(lib):
    x = lib.ones(2, requires_grad=True)
    with pytest.raises(RuntimeError, match="a leaf Variable that requires grad is being used "
                                           "in an in-place operation"):
        x.add_(1)


def test_setitem_on_leaf_requiring_grad_raises(lib):
    x = lib.ones(2, requires_grad=True)
    with pytest.raises(RuntimeError, match="leaf Variable that requires grad"):
        x[0] = 2.0


def test_inplace_on_leaf_under_no_grad_is_allowed(lib):
    x = lib.ones(2, requires_grad=True)
    with lib.no_grad():
        x.add_(1)
        x[0] = 5.0
    assert x.is_leaf and x.requires_grad and x._version == 2
    np.testing.assert_allclose(_np(x), [5.0, 2.0])


def test_inplace_on_view_of_leaf_raises(lib):
    x = lib.ones(2, 2, requires_grad=True)
    with pytest.raises(RuntimeError, match="a view of a leaf Variable that requires grad"):
        x[0].mul_(2)


def test_inplace_on_leaf_without_grad_stays_leaf(lib):
    x = lib.ones(2)
    x.add_(1)
    assert x.is_leaf and not x.requires_grad and x.grad_fn is None


def test_inplace_with_grad_operand_makes_non_leaf(lib):
    w = lib.tensor([2.0, 3.0], requires_grad=True)
    x = lib.ones(2)
    x.mul_(w)
    assert not x.is_leaf and x.requires_grad
    assert type(x.grad_fn).__name__ == "MulBackward0"
    x.sum().backward()
    np.testing.assert_allclose(_np(w.grad), [1.0, 1.0])


# ---------------------------------------------------------------- gradients through in-place ops

def test_inplace_mul_needing_overwritten_input():
    def prog(lib, x, w):
        y = x * 1
        y.mul_(w)
        return (y * y).sum()
    x, w = np.array([1.0, -2.0, 3.0]), np.array([0.5, 4.0, -1.0])
    g = _grads_both(prog, x, w)
    np.testing.assert_allclose(g[1], 2 * (x * w) * x)
    _fd_check(prog, x, w)


def test_inplace_chain_on_non_leaf():
    def prog(lib, x):
        y = x.sin()                       # SinBackward0 saves x, not y
        y.mul_(2).add_(x).pow_(2).sigmoid_()
        return y.sum()
    _grads_both(prog, np.array([0.1, -0.5, 0.7]))
    _fd_check(prog, np.array([0.1, -0.5, 0.7]))


def test_inplace_on_views_of_non_leaf():
    def prog(lib, x, w):
        y = x * 1
        y[0].mul_(2)
        y[1:] += w
        return (y * y).sum()
    x, w = np.array([[1.0, 2.0], [3.0, 4.0], [5.0, 6.0]]), np.array([0.5, -1.0])
    g = _grads_both(prog, x, w)
    np.testing.assert_allclose(g[1], 2 * (x[1:] + w).sum(0))
    _fd_check(prog, x, w)


def test_inplace_on_simple_view_example_from_brief():
    def prog(lib, x, w):
        y = x * 1
        y[0].mul_(2)
        y[1:] += w
        return y.sum()
    x, w = np.array([1.0, 2.0, 3.0]), np.array([1.0, 1.0])
    g = _grads_both(prog, x, w)
    np.testing.assert_allclose(g[0], [2.0, 1.0, 1.0])
    np.testing.assert_allclose(g[1], [1.0, 1.0])


def test_inplace_on_chain_of_views():
    def prog(lib, x):
        y = x * 1
        v = y[1:].t()[0]           # view of a view of a view
        v.exp_()
        return (y ** 2).sum()
    _grads_both(prog, np.arange(6.0).reshape(3, 2) / 5)
    _fd_check(prog, np.arange(6.0).reshape(3, 2) / 5)


def test_view_created_before_inplace_sees_rebased_graph():
    def prog(lib, x, w):
        y = x * 1
        a = y[0]                   # created before the in-place op on another view
        b = y[:, 1]
        y[1].mul_(w)
        return (a * 3).sum() + (b ** 2).sum() + (y * y).sum()
    x, w = np.array([[1.0, 2.0], [3.0, 4.0]]), np.array([2.0, -1.0])
    _grads_both(prog, x, w)
    _fd_check(prog, x, w)


def test_view_grad_fn_after_base_inplace(lib):
    x = lib.ones(2, 2, requires_grad=True)
    y = x * 1
    v = y[0]
    y.add_(1)
    assert v._version == 1
    (v * 1).sum().backward()
    np.testing.assert_allclose(_np(x.grad), [[1.0, 1.0], [0.0, 0.0]])


def test_inplace_on_base_then_use_view():
    def prog(lib, x, w):
        y = x * 2
        v = y[1:]
        y.mul_(w)
        return (v ** 2).sum()
    x, w = np.array([1.0, 2.0, 3.0]), np.array([2.0, 3.0, 4.0])
    _grads_both(prog, x, w)
    _fd_check(prog, x, w)


@pytest.mark.parametrize("index", [0, (slice(None), 1), (slice(0, 2),), (Ellipsis, 0)])
def test_setitem_basic_index_on_non_leaf(index):
    def prog(lib, x, v):
        y = x * 1
        y[index] = v if v.dim() else v
        return (y * y.detach().exp()).sum() + (y ** 3).sum()
    x = np.arange(6.0).reshape(3, 2) / 3
    target_shape = x[index].shape
    v = np.linspace(-1, 1, int(np.prod(target_shape))).reshape(target_shape)
    g = _grads_both(prog, x, v)
    mask = np.ones_like(x)
    mask[index] = 0
    assert np.all(g[0][mask == 0] == 0)      # overwritten entries get no gradient


@pytest.mark.parametrize("index", [[0, 2], ([0, 2], [1, 0]), "mask"])
def test_setitem_advanced_index_on_non_leaf(index):
    x = np.arange(6.0).reshape(3, 2) / 3
    if index == "mask":
        index = x > 0.5
    idx = tuple(index) if isinstance(index, tuple) else index

    def prog(lib, x, v):
        y = x * 2
        key = lib.tensor(idx) if isinstance(idx, np.ndarray) else idx
        y[key] = v
        return (y ** 2 * lib.tensor([1.0, 3.0], dtype=lib.float64)).sum()
    v = np.linspace(-1, 1, x[idx].size).reshape(x[idx].shape)
    _grads_both(prog, x, v)
    _fd_check(prog, x, v)


def test_setitem_scalar_tensor_value_broadcasts():
    def prog(lib, x, s):
        y = x * 1
        y[1:] = s
        return (y * lib.tensor([1.0, 2.0, 3.0], dtype=lib.float64)).sum()
    g = _grads_both(prog, np.array([1.0, 2.0, 3.0]), np.array(0.5))
    assert float(g[1]) == 5.0
    np.testing.assert_allclose(g[0], [1.0, 0.0, 0.0])


def test_copy_into_non_leaf_slice():
    def prog(lib, x, w):
        y = x.clone()
        y[:2].copy_(w * 3)
        return (y.exp()).sum()
    _grads_both(prog, np.array([0.1, 0.2, 0.3]), np.array([0.4, -0.4]))
    _fd_check(prog, np.array([0.1, 0.2, 0.3]), np.array([0.4, -0.4]))


def test_double_backward_through_inplace_view():
    torch = pytest.importorskip("torch")
    res = []
    for lib in (tg, torch):
        x = lib.tensor([0.3, -0.2, 0.5], dtype=lib.float64, requires_grad=True)
        y = x * 1
        y[1:].mul_(x[:2])
        (g,) = lib.autograd.grad((y ** 3).sum(), x, create_graph=True)
        (h,) = lib.autograd.grad(g.sum(), x)
        res.append((_np(g), _np(h)))
    np.testing.assert_allclose(res[0][0], res[1][0], rtol=1e-12)
    np.testing.assert_allclose(res[0][1], res[1][1], rtol=1e-12)


def test_inplace_integer_result_into_float_ok_and_float_into_int_raises(lib):
    x = lib.ones(2)
    x.add_(lib.tensor([1, 2]))
    np.testing.assert_allclose(_np(x), [2.0, 3.0])
    i = lib.ones(2, dtype=lib.int64)
    with pytest.raises(RuntimeError, match="can't be cast"):
        i.add_(1.5)


def test_inplace_cannot_broadcast_target(lib):
    x = lib.ones(2)
    with pytest.raises(RuntimeError):
        x.add_(lib.ones(3, 2))
