"""Autograd basics from PyTorch's "Autograd mechanics": leaves, grad_fn graphs, backward/grad.

Every rule is its own test and runs against tracegrad and (when installed) torch through the
`lib` fixture, so each assertion is checked against the oracle too. Hooks, detach and
`.data` live here as well: they are part of how a user steers the recorded graph.
"""
import re
import warnings

import numpy as np
import pytest

import tracegrad as tg


def _np(t):
    return t.detach().numpy()


# ---------------------------------------------------------------- leaves and requires_grad

def test_user_created_tensors_are_leaves(lib):
    x = lib.ones(2, requires_grad=True)
    c = lib.ones(2)
    assert x.is_leaf and c.is_leaf
    assert x.grad_fn is None and c.grad_fn is None


def test_results_of_ops_on_grad_tensors_are_non_leaves(lib):
    x = lib.ones(2, requires_grad=True)
    y = x * 2
    assert not y.is_leaf
    assert y.requires_grad
    assert y.grad_fn is not None


def test_requires_grad_propagates_if_any_input_requires_grad(lib):
    x = lib.ones(2, requires_grad=True)
    c = lib.ones(2)
    assert (x + c).requires_grad
    assert (c + x).requires_grad
    assert not (c * c).requires_grad
    assert (c * c).is_leaf


def test_comparisons_never_require_grad(lib):
    x = lib.ones(2, requires_grad=True)
    r = x > 0
    assert not r.requires_grad and r.grad_fn is None


def test_leaf_grad_accumulates_over_backward_calls(lib):
    x = lib.tensor([1.0, 2.0], requires_grad=True)
    (x * 3).sum().backward()
    np.testing.assert_allclose(_np(x.grad), [3.0, 3.0])
    (x * x).sum().backward()
    np.testing.assert_allclose(_np(x.grad), [5.0, 7.0])


def test_leaf_grad_can_be_reset_to_none(lib):
    x = lib.tensor([1.0, 2.0], requires_grad=True)
    (x * 3).sum().backward()
    x.grad = None
    (x * 2).sum().backward()
    np.testing.assert_allclose(_np(x.grad), [2.0, 2.0])


def test_leaf_grad_has_leaf_shape_and_does_not_require_grad(lib):
    x = lib.ones(2, 3, requires_grad=True)
    (x * 2).sum().backward()
    assert tuple(x.grad.shape) == (2, 3)
    assert not x.grad.requires_grad and x.grad.grad_fn is None


def test_leaf_without_requires_grad_gets_no_grad(lib):
    x = lib.ones(2, requires_grad=True)
    c = lib.ones(2)
    (x * c).sum().backward()
    assert c.grad is None


def test_non_leaf_grad_is_none_and_warns(lib):
    x = lib.ones(2, requires_grad=True)
    y = x * 2
    y.sum().backward()
    with pytest.warns(UserWarning, match="not a leaf Tensor"):
        assert y.grad is None


def test_leaf_grad_access_does_not_warn(lib):
    x = lib.ones(2, requires_grad=True)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert x.grad is None


def test_retain_grad_keeps_non_leaf_grad_without_warning(lib):
    x = lib.tensor([1.0, 2.0], requires_grad=True)
    y = x * x
    y.retain_grad()
    assert y.retains_grad
    (y * 3).sum().backward()
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        np.testing.assert_allclose(_np(y.grad), [3.0, 3.0])
    np.testing.assert_allclose(_np(x.grad), [6.0, 12.0])


def test_retain_grad_accumulates_over_backward_calls(lib):
    x = lib.tensor([1.0, 2.0], requires_grad=True)
    y = x * x
    y.retain_grad()
    z = (y * 3).sum()
    z.backward(retain_graph=True)
    z.backward()
    np.testing.assert_allclose(_np(y.grad), [6.0, 6.0])


def test_retain_grad_follows_the_tensor_through_in_place_ops(lib):
    # PyTorch moves the retain_grad hook to the new grad_fn: .grad is the gradient of the
    # tensor's current value, not of the value before the in-place op
    c = lib.tensor([1.0, 2.0, 3.0])
    x = lib.ones(3, requires_grad=True)
    y = x * 2
    y.retain_grad()
    y.mul_(3)
    y.add_(1)
    z = (y * c).sum()
    z.backward(retain_graph=True)
    z.backward()
    np.testing.assert_allclose(_np(y.grad), [2.0, 4.0, 6.0])
    np.testing.assert_allclose(_np(x.grad), [12.0, 24.0, 36.0])
    y = x * 2                              # in place through a view: base gets CopySlices
    y.retain_grad()
    y[0].mul_(3)
    (y * c).sum().backward()
    np.testing.assert_allclose(_np(y.grad), [1.0, 2.0, 3.0])


def test_retain_grad_follows_a_function_marking_its_input_dirty(lib):
    class Double(lib.autograd.Function):
        @staticmethod
        def forward(ctx, a):
            a.mul_(2)
            ctx.mark_dirty(a)
            return a

        @staticmethod
        def backward(ctx, g):
            return g * 2
    x = lib.ones(2, requires_grad=True)
    y = x * 1
    y.retain_grad()
    Double.apply(y)
    (y * lib.tensor([1.0, 2.0])).sum().backward()
    np.testing.assert_allclose(_np(y.grad), [1.0, 2.0])
    np.testing.assert_allclose(_np(x.grad), [2.0, 4.0])


def test_retain_grad_on_leaf_is_a_noop(lib):
    x = lib.ones(2, requires_grad=True)
    x.retain_grad()
    (x * 2).sum().backward()
    np.testing.assert_allclose(_np(x.grad), [2.0, 2.0])


# ---------------------------------------------------------------- grad_fn structure

def test_grad_fn_names_follow_torch(lib):
    x = lib.ones(2, 2, requires_grad=True)
    y = x + 2
    z = y * y * 3
    out = z.mean()
    assert type(y.grad_fn).__name__ == "AddBackward0"
    assert type(z.grad_fn).__name__ == "MulBackward0"
    assert type(out.grad_fn).__name__ == "MeanBackward0"
    assert y.grad_fn.name() == "AddBackward0"


def test_grad_fn_repr(lib):
    y = lib.ones(2, requires_grad=True) * 2
    assert re.fullmatch(r"<MulBackward0 object at 0x[0-9a-f]+>", repr(y.grad_fn))


def test_next_functions_structure_of_y_times_y_times_3(lib):
    x = lib.ones(2, 2, requires_grad=True)
    y = x + 2
    z = y * y * 3
    nf = z.grad_fn.next_functions
    # (y*y) * 3: the constant operand has no edge
    assert len(nf) == 2
    assert type(nf[0][0]).__name__ == "MulBackward0" and nf[0][1] == 0
    assert nf[1] == (None, 0)
    inner = nf[0][0].next_functions
    # both operands of y*y point at the same AddBackward0 node
    assert inner[0][0] is inner[1][0] is y.grad_fn
    acc = y.grad_fn.next_functions[0][0]
    assert type(acc).__name__ == "AccumulateGrad"
    assert acc.variable is x
    assert y.grad_fn.next_functions[1] == (None, 0)


def test_accumulate_grad_node_is_shared_by_uses_of_a_leaf(lib):
    x = lib.ones(2, requires_grad=True)
    a, b = x * 2, x + 1
    assert a.grad_fn.next_functions[0][0] is b.grad_fn.next_functions[0][0]


def test_repr_of_results_shows_grad_fn(lib):
    x = lib.ones(2, 2, requires_grad=True)
    y = x + 2
    assert repr(y) == "tensor([[3., 3.],\n        [3., 3.]], grad_fn=<AddBackward0>)"
    out = (y * y * 3).mean()
    assert repr(out) == "tensor(27., grad_fn=<MeanBackward0>)"
    assert repr(x) == "tensor([[1., 1.],\n        [1., 1.]], requires_grad=True)"


# ---------------------------------------------------------------- backward()

def test_non_scalar_backward_without_gradient_raises(lib):
    y = lib.ones(3, requires_grad=True) * 2
    with pytest.raises(RuntimeError, match="grad can be implicitly created only for scalar "
                                           "outputs"):
        y.backward()


def test_non_scalar_backward_with_gradient(lib):
    x = lib.tensor([1.0, 2.0, 3.0], requires_grad=True)
    y = x * x
    y.backward(lib.tensor([1.0, 0.1, 0.01]))
    np.testing.assert_allclose(_np(x.grad), [2.0, 0.4, 0.06], rtol=1e-6)


def test_one_element_non_scalar_backward_is_implicit(lib):
    x = lib.tensor([3.0], requires_grad=True)
    (x * x).backward()
    np.testing.assert_allclose(_np(x.grad), [6.0])


def test_backward_on_tensor_without_grad_raises(lib):
    with pytest.raises(RuntimeError, match="does not require grad"):
        lib.ones(()).backward()


def test_second_backward_through_freed_graph_raises(lib):
    x = lib.ones(3, requires_grad=True)
    y = (x * x).sum()
    y.backward()
    with pytest.raises(RuntimeError, match=r"^Trying to backward through the graph a second "
                                           r"time .*retain_graph=True"):
        y.backward()


def test_second_backward_freed_message_equals_torch():
    torch = pytest.importorskip("torch")
    msgs = []
    for lib in (torch, tg):
        y = (lib.ones(3, requires_grad=True).exp()).sum()
        y.backward()
        with pytest.raises(RuntimeError) as e:
            y.backward()
        msgs.append(str(e.value))
    assert msgs[1].startswith(msgs[0][:200])


def test_retain_graph_allows_second_backward(lib):
    x = lib.tensor([1.0, 2.0], requires_grad=True)
    y = (x * x).sum()
    y.backward(retain_graph=True)
    y.backward()
    np.testing.assert_allclose(_np(x.grad), [4.0, 8.0])


def test_graph_without_saved_tensors_can_be_backwarded_twice(lib):
    x = lib.tensor([1.0, 2.0], requires_grad=True)
    y = (x + 1).sum()
    y.backward()
    y.backward()
    np.testing.assert_allclose(_np(x.grad), [2.0, 2.0])


def test_backward_inputs_accumulates_only_into_given_leaves(lib):
    a = lib.tensor([1.0, 2.0], requires_grad=True)
    b = lib.tensor([3.0, 4.0], requires_grad=True)
    (a * b).sum().backward(inputs=[a])
    np.testing.assert_allclose(_np(a.grad), [3.0, 4.0])
    assert b.grad is None


def test_backward_inputs_accepts_a_single_tensor(lib):
    a = lib.tensor([1.0, 2.0], requires_grad=True)
    b = lib.tensor([3.0, 4.0], requires_grad=True)
    (a * b).sum().backward(inputs=b)
    np.testing.assert_allclose(_np(b.grad), [1.0, 2.0])
    assert a.grad is None


def test_backward_inputs_populates_non_leaf_grad(lib):
    a = lib.tensor([1.0, 2.0], requires_grad=True)
    b = lib.tensor([3.0, 4.0], requires_grad=True)
    c = a * b
    (c * c).sum().backward(inputs=[a, c])
    np.testing.assert_allclose(_np(c.grad), [6.0, 16.0])
    np.testing.assert_allclose(_np(a.grad), [18.0, 64.0])
    assert b.grad is None


def test_backward_empty_inputs_raises(lib):
    a = lib.tensor([1.0, 2.0], requires_grad=True)
    with pytest.raises(RuntimeError, match="cannot be empty"):
        (a * 2).sum().backward(inputs=[])


def test_backward_gradient_shape_mismatch_raises(lib):
    y = lib.ones(3, requires_grad=True) * 2
    with pytest.raises(RuntimeError, match="Mismatch in shape"):
        y.backward(lib.ones(2))


def test_autograd_backward_with_grad_tensors(lib):
    x = lib.tensor([1.0, 2.0], requires_grad=True)
    y1, y2 = x * 2, x * x
    lib.autograd.backward([y1, y2], [lib.tensor([1.0, 1.0]), lib.tensor([0.5, 2.0])])
    np.testing.assert_allclose(_np(x.grad), [2.0 + 1.0, 2.0 + 8.0])


def test_autograd_backward_scalar_without_grad_tensors(lib):
    x = lib.tensor([1.0, 2.0], requires_grad=True)
    lib.autograd.backward((x * x).sum())
    np.testing.assert_allclose(_np(x.grad), [2.0, 4.0])


# ---------------------------------------------------------------- autograd.grad

def test_grad_returns_without_accumulating(lib):
    x = lib.tensor([1.0, 2.0], requires_grad=True)
    (g,) = lib.autograd.grad((x * x).sum(), x)
    np.testing.assert_allclose(_np(g), [2.0, 4.0])
    assert x.grad is None


def test_grad_unused_input_raises_without_allow_unused(lib):
    a = lib.tensor([1.0, 2.0], requires_grad=True)
    b = lib.tensor([3.0, 4.0], requires_grad=True)
    with pytest.raises(RuntimeError, match="Tensor at index 1 appears to not have been used "
                                           "in the graph"):
        lib.autograd.grad((a * 2).sum(), [a, b])


def test_grad_allow_unused_returns_none(lib):
    a = lib.tensor([1.0, 2.0], requires_grad=True)
    b = lib.tensor([3.0, 4.0], requires_grad=True)
    ga, gb = lib.autograd.grad((a * 2).sum(), [a, b], allow_unused=True)
    np.testing.assert_allclose(_np(ga), [2.0, 2.0])
    assert gb is None


def test_grad_materialize_grads_gives_zeros(lib):
    a = lib.tensor([1.0, 2.0], requires_grad=True)
    b = lib.tensor([3.0, 4.0], requires_grad=True)
    _, gb = lib.autograd.grad((a * 2).sum(), [a, b], materialize_grads=True)
    np.testing.assert_allclose(_np(gb), [0.0, 0.0])


def test_grad_with_grad_outputs(lib):
    x = lib.tensor([1.0, 2.0], requires_grad=True)
    (g,) = lib.autograd.grad(x * x, x, grad_outputs=lib.tensor([10.0, 100.0]))
    np.testing.assert_allclose(_np(g), [20.0, 400.0])


def test_grad_of_non_leaf_input(lib):
    x = lib.tensor([1.0, 2.0], requires_grad=True)
    h = x * 3
    (g,) = lib.autograd.grad((h * h).sum(), h)
    np.testing.assert_allclose(_np(g), [6.0, 12.0])


def test_grad_multiple_outputs_and_inputs(lib):
    a = lib.tensor(2.0, requires_grad=True)
    b = lib.tensor(3.0, requires_grad=True)
    ga, gb = lib.autograd.grad([a * b, a + b * b], [a, b])
    assert float(ga) == pytest.approx(3.0 + 1.0)
    assert float(gb) == pytest.approx(2.0 + 6.0)


def test_grad_input_that_does_not_require_grad_raises(lib):
    a = lib.tensor([1.0], requires_grad=True)
    c = lib.tensor([1.0])
    with pytest.raises(RuntimeError, match="does not require grad"):
        lib.autograd.grad((a * c).sum(), c)


def test_grad_frees_graph_unless_retained(lib):
    x = lib.tensor([1.0, 2.0], requires_grad=True)
    y = (x * x).sum()
    lib.autograd.grad(y, x, retain_graph=True)
    lib.autograd.grad(y, x)
    with pytest.raises(RuntimeError, match="second time"):
        lib.autograd.grad(y, x)


def test_third_derivative_of_x_to_the_fourth(lib):
    x = lib.tensor(2.0, requires_grad=True)
    (g1,) = lib.autograd.grad(x ** 4, x, create_graph=True)
    (g2,) = lib.autograd.grad(g1, x, create_graph=True)
    (g3,) = lib.autograd.grad(g2, x)
    assert g1.requires_grad and g2.requires_grad and not g3.requires_grad
    assert g1.item() == pytest.approx(4 * 2.0 ** 3)
    assert g2.item() == pytest.approx(12 * 2.0 ** 2)
    assert float(g3) == pytest.approx(24 * 2.0)


@pytest.mark.filterwarnings("ignore:Using backward\\(\\) with create_graph")
def test_create_graph_backward_makes_differentiable_leaf_grad(lib):
    x = lib.tensor([1.0, 2.0], requires_grad=True)
    (x ** 3).sum().backward(create_graph=True)
    assert x.grad.requires_grad
    g = x.grad.clone()
    x.grad = None
    g.sum().backward()
    np.testing.assert_allclose(_np(x.grad), [6.0, 12.0])


@pytest.mark.filterwarnings("ignore:Using backward\\(\\) with create_graph")
def test_create_graph_leaf_grads_are_fresh_tensors(lib):
    # with create_graph, each .grad is its own (writable) tensor, as without it: it aliases
    # neither the gradient the user passed, nor another leaf's .grad, nor an expand view
    x = lib.ones(2, requires_grad=True)
    w = lib.ones(2, requires_grad=True)
    v = lib.tensor([1.0, 2.0])
    (x + w).backward(v, create_graph=True)
    assert x.grad is not w.grad
    v.add_(10)
    with lib.no_grad():
        x.grad.mul_(3)
    np.testing.assert_allclose(_np(x.grad), [3.0, 6.0])
    np.testing.assert_allclose(_np(w.grad), [1.0, 2.0])
    b = lib.ones(3, requires_grad=True)
    b.sum().backward(create_graph=True)          # SumBackward0 expands the gradient
    with lib.no_grad():
        b.grad.zero_()
    np.testing.assert_allclose(_np(b.grad), [0.0, 0.0, 0.0])


@pytest.mark.filterwarnings("ignore:Using backward\\(\\) with create_graph")
def test_create_graph_retained_and_input_grads_are_fresh_tensors(lib):
    x = lib.ones(2, requires_grad=True)
    y = x * 1
    y.retain_grad()
    v = lib.tensor([1.0, 2.0])
    y.backward(v, create_graph=True)
    v.add_(10)
    np.testing.assert_allclose(_np(y.grad), [1.0, 2.0])
    h = x * 1
    u = lib.tensor([3.0, 4.0])
    h.backward(u, inputs=[h], create_graph=True)
    u.add_(10)
    np.testing.assert_allclose(_np(h.grad), [3.0, 4.0])


def _mlp_hvp(lib, w1, b1, w2, xs, v):
    w1, b1, w2 = (lib.tensor(a, dtype=lib.float64, requires_grad=True) for a in (w1, b1, w2))
    xs = lib.tensor(xs, dtype=lib.float64)
    params = [w1, b1, w2]
    loss = (lib.tanh(xs @ w1 + b1) @ w2).pow(2).mean()
    grads = lib.autograd.grad(loss, params, create_graph=True)
    vs = [lib.tensor(a, dtype=lib.float64) for a in v]
    dot = sum((g * vv).sum() for g, vv in zip(grads, vs))
    return [_np(h) for h in lib.autograd.grad(dot, params)]


def test_hessian_vector_product_of_small_mlp_matches_torch():
    torch = pytest.importorskip("torch")
    rng = np.random.default_rng(0)
    w1, b1, w2 = rng.standard_normal((3, 4)), rng.standard_normal(4), rng.standard_normal((4, 2))
    xs = rng.standard_normal((5, 3))
    v = [rng.standard_normal(a.shape) for a in (w1, b1, w2)]
    ours = _mlp_hvp(tg, w1, b1, w2, xs, v)
    ref = _mlp_hvp(torch, w1, b1, w2, xs, v)
    for a, b in zip(ours, ref):
        np.testing.assert_allclose(a, b, rtol=1e-10, atol=1e-12)


def test_hessian_vector_product_matches_finite_differences():
    rng = np.random.default_rng(1)
    w1, b1, w2 = rng.standard_normal((3, 4)), rng.standard_normal(4), rng.standard_normal((4, 2))
    xs = rng.standard_normal((5, 3))
    v = [rng.standard_normal(a.shape) for a in (w1, b1, w2)]

    def grads_at(eps):
        ps = [tg.tensor(a + eps * d, dtype=tg.float64, requires_grad=True)
              for a, d in zip((w1, b1, w2), v)]
        loss = (tg.tanh(tg.tensor(xs) @ ps[0] + ps[1]) @ ps[2]).pow(2).mean()
        return [_np(g) for g in tg.autograd.grad(loss, ps)]
    hv = _mlp_hvp(tg, w1, b1, w2, xs, v)
    hi, lo = grads_at(1e-5), grads_at(-1e-5)
    for h, a, b in zip(hv, hi, lo):
        np.testing.assert_allclose(h, (a - b) / 2e-5, rtol=1e-5, atol=1e-7)


# ---------------------------------------------------------------- hooks

def test_hook_on_leaf_sees_grad_and_can_replace_it(lib):
    x = lib.tensor([1.0, 2.0], requires_grad=True)
    seen = []

    def hook(g):
        seen.append(_np(g).copy())
        return g * 10
    x.register_hook(hook)
    (x * 3).sum().backward()
    np.testing.assert_allclose(seen[0], [3.0, 3.0])
    np.testing.assert_allclose(_np(x.grad), [30.0, 30.0])


def test_hook_on_non_leaf_changes_what_flows_upstream(lib):
    x = lib.tensor([1.0, 2.0], requires_grad=True)
    y = x * x
    y.register_hook(lambda g: g * 0 + 1)
    (y * 5).sum().backward()
    np.testing.assert_allclose(_np(x.grad), [2.0, 4.0])


def test_hook_returning_none_keeps_grad(lib):
    x = lib.tensor([1.0, 2.0], requires_grad=True)
    y = x * 2
    calls = []
    y.register_hook(lambda g: calls.append(1))
    y.sum().backward()
    assert calls == [1]
    np.testing.assert_allclose(_np(x.grad), [2.0, 2.0])


@pytest.mark.parametrize("bad,words", [
    (lambda m, g: m.ones(3), "changed the size of value"),
    (lambda m, g: g.double(), "changed the type of value"),
])
def test_hook_changing_size_or_dtype_raises_naming_the_hook(lib, bad, words):
    x = lib.ones(2, requires_grad=True)
    y = x * 2

    def my_hook(g):
        return bad(lib, g)
    y.register_hook(my_hook)
    with pytest.raises(RuntimeError, match=f"hook 'my_hook' has {words}"):
        y.sum().backward()
    (x * 2).sum().backward()                 # the next call works
    np.testing.assert_allclose(_np(x.grad), [2.0, 2.0])


def test_hooks_run_in_registration_order_and_chain(lib):
    x = lib.tensor([1.0], requires_grad=True)
    y = x * 1
    y.register_hook(lambda g: g + 1)
    y.register_hook(lambda g: g * 10)
    y.sum().backward()
    np.testing.assert_allclose(_np(x.grad), [20.0])


def test_removed_hook_does_not_run(lib):
    x = lib.tensor([1.0, 2.0], requires_grad=True)
    h = x.register_hook(lambda g: g * 100)
    h.remove()
    (x * 3).sum().backward()
    np.testing.assert_allclose(_np(x.grad), [3.0, 3.0])


def test_retain_grad_sees_hooked_grad_regardless_of_order(lib):
    # PyTorch runs the retain_grad hook after all other tensor hooks.
    x = lib.tensor([1.0, 2.0], requires_grad=True)
    y = x * 1
    y.retain_grad()
    y.register_hook(lambda g: g * 2)
    y.sum().backward()
    np.testing.assert_allclose(_np(y.grad), [2.0, 2.0])
    np.testing.assert_allclose(_np(x.grad), [2.0, 2.0])


def test_register_hook_on_tensor_without_grad_raises(lib):
    with pytest.raises(RuntimeError, match="doesn't require gradient"):
        lib.ones(2).register_hook(lambda g: g)


# ---------------------------------------------------------------- detach, .data, requires_grad_

def test_detach_shares_storage_and_does_not_require_grad(lib):
    x = lib.tensor([1.0, 2.0], requires_grad=True)
    d = x.detach()
    assert not d.requires_grad and d.is_leaf and d.grad_fn is None
    d[0] = 5.0
    assert x[0].item() == 5.0


def test_detach_shares_version_counter(lib):
    x = lib.tensor([1.0, 2.0], requires_grad=True)
    d = x.detach()
    d.add_(1)
    assert x._version == 1 and d._version == 1


def test_inplace_on_detached_triggers_saved_tensor_error(lib):
    x = lib.tensor([1.0, 2.0], requires_grad=True)
    y = x * x
    x.detach().mul_(2)
    with pytest.raises(RuntimeError, match="modified by an inplace operation"):
        y.sum().backward()


def test_detach_stops_gradient(lib):
    x = lib.tensor([1.0, 2.0], requires_grad=True)
    y = x * x.detach()
    y.sum().backward()
    np.testing.assert_allclose(_np(x.grad), [1.0, 2.0])


def test_detach_in_place_makes_tensor_a_leaf(lib):
    x = lib.tensor([1.0, 2.0], requires_grad=True)
    y = x * 2
    y.detach_()
    assert y.is_leaf and not y.requires_grad and y.grad_fn is None


def test_data_shares_storage_but_not_version_counter(lib):
    x = lib.tensor([1.0, 2.0], requires_grad=True)
    d = x.data
    assert not d.requires_grad
    y = x * x
    d.mul_(3)
    assert x._version == 0
    np.testing.assert_allclose(_np(x), [3.0, 6.0])
    y.sum().backward()                      # no version error: .data bypasses the check
    np.testing.assert_allclose(_np(x.grad), [6.0, 12.0])


def test_data_assignment_replaces_values(lib):
    x = lib.tensor([1.0, 2.0], requires_grad=True)
    x.data = lib.tensor([7.0, 8.0])
    assert x.requires_grad and x.is_leaf
    np.testing.assert_allclose(_np(x), [7.0, 8.0])


def test_requires_grad_on_leaf_can_be_toggled(lib):
    x = lib.ones(2)
    assert x.requires_grad_() is x
    assert x.requires_grad
    x.requires_grad_(False)
    assert not x.requires_grad
    x.requires_grad = True
    assert x.requires_grad


def test_requires_grad_false_on_non_leaf_raises(lib):
    y = lib.ones(2, requires_grad=True) * 2
    with pytest.raises(RuntimeError, match="only change requires_grad flags of leaf"):
        y.requires_grad_(False)


def test_requires_grad_true_on_non_leaf_is_allowed(lib):
    y = lib.ones(2, requires_grad=True) * 2
    y.requires_grad_(True)
    assert y.requires_grad


@pytest.mark.parametrize("dtype", ["int64", "int32", "bool"])
def test_only_float_tensors_can_require_grad(lib, dtype):
    with pytest.raises(RuntimeError, match="floating point"):
        lib.ones(2, dtype=getattr(lib, dtype)).requires_grad_()
    with pytest.raises(RuntimeError, match="floating point"):
        lib.tensor([1, 2], dtype=getattr(lib, dtype), requires_grad=True)


def test_freezing_a_parameter_excludes_it_from_backward(lib):
    w = lib.tensor([1.0, 2.0], requires_grad=True)
    b = lib.tensor([3.0, 4.0], requires_grad=True)
    w.requires_grad_(False)
    out = (w * b).sum()
    out.backward()
    assert w.grad is None
    np.testing.assert_allclose(_np(b.grad), [1.0, 2.0])
