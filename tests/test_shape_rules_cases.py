"""Hand-written edge cases of the shape rules (Note [Shape rules]), one group per category.

Each case checks a rule against what the primitive's numpy kernel returns and, where the op's
semantics are PyTorch's, against PyTorch: 0-d operands, size-1 broadcasting, negative dims,
keepdim, empty reductions, 1-D and batched matmul, empty 1-D tensors in cat, numpy's
placement of advanced-index dims, einsum, convolution arithmetic, losses, RNG and constants.
"""
import random

import numpy as np
import pytest

import tracegrad as tg
from tracegrad.tracing import CONSTANT
from tracegrad.ops import shape_rules as SR
from tracegrad.ops.primitive import REGISTRY
from tracegrad.ops.shape import Slot
from tracegrad.ops.shape_rules import BoolShape

P = REGISTRY


def rule(name, shapes, **attrs):
    return P[name].shape_rule(list(shapes), attrs)


def kernel_shape(name, *operands, **attrs):
    return np.shape(P[name].kernel(*operands, **attrs))


def z(*shape):
    return np.zeros(shape)


# ---- elementwise: n-ary broadcasting, literals as 0-d ----

BROADCAST = [[(), ()], [(3,), ()], [(), (2, 3)], [(2, 1, 3), (4, 3)], [(4, 1), (1, 3)],
             [(1,), (0,)], [(2, 0, 1), (3,)], [(1, 1), (5,), (2, 1, 1)]]


@pytest.mark.parametrize("shapes", BROADCAST, ids=str)
def test_broadcast_matches_numpy_and_torch(shapes):
    torch = pytest.importorskip("torch")
    want = tuple(torch.broadcast_shapes(*shapes))
    assert SR.broadcast(shapes, {}) == want == np.broadcast_shapes(*shapes)
    if len(shapes) == 2:
        assert rule("add", shapes) == kernel_shape("add", z(*shapes[0]), z(*shapes[1])) == want
    if len(shapes) == 3:
        c = np.zeros(shapes[0], bool)
        assert rule("where", shapes) == kernel_shape("where", c, z(*shapes[1]), z(*shapes[2]))


def test_literals_broadcast_as_0d():
    assert rule("mul", [(2, 3), None]) == (2, 3)
    assert rule("pow_scalar_base", [None, (4,)]) == (4,)
    assert rule("where", [(2, 1), None, (3,)]) == (2, 3)
    assert rule("sub", [(), None]) == ()
    with pytest.raises(ValueError):
        rule("add", [(2, 3), (4,)])                  # invalid operands: the rule refuses


def test_unary_and_fused_backward_keep_or_broadcast_shapes():
    for name in ("exp", "relu", "gelu", "clamp", "round_decimals", "bitwise_not"):
        assert rule(name, [(2, 0, 3)]) == (2, 0, 3), name
    g, y = z(2, 3), z(3)
    assert rule("threshold_backward", [(2, 3), (3,)]) == kernel_shape("threshold_backward", g, y)
    assert rule("tanh_backward", [(), (2,)]) == kernel_shape("tanh_backward", z(), z(2))


# ---- reductions ----

REDUCE = [((), (), False), ((4,), (0,), False), ((4,), (-1,), True), ((2, 3), (0, 1), False),
          ((2, 3), (1,), True), ((2, 1, 3), (0, 2), True), ((2, 1, 3), (-2,), False),
          ((2, 0, 3), (1,), False), ((2, 3), (), False)]


@pytest.mark.filterwarnings("ignore:Degrees of freedom")          # var of no elements
@pytest.mark.parametrize("shape,dims,keepdim", REDUCE, ids=str)
def test_reduce_matches_kernels(shape, dims, keepdim):
    want = rule("sum", [shape], dims=dims, keepdim=keepdim)
    for name in ("sum", "mean", "prod", "any", "all", "var", "std", "logsumexp"):
        extra = {"correction": 0} if name in ("var", "std") else {}
        with np.errstate(all="ignore"):
            got = kernel_shape(name, np.ones(shape), dims=dims, keepdim=keepdim, **extra)
        assert rule(name, [shape], dims=dims, keepdim=keepdim, **extra) == got == want, name
    for p in (2, 1, 0, 3):                 # (inf has no empty reduction, as in PyTorch)
        with np.errstate(all="ignore"):
            got = kernel_shape("norm", np.ones(shape), p=p, dims=dims, keepdim=keepdim)
        assert rule("norm", [shape], p=p, dims=dims, keepdim=keepdim) == got == want, p
    if dims and min(shape, default=1):               # torch: a dims tuple; () reduces all
        torch = pytest.importorskip("torch")
        assert tuple(torch.ones(shape).sum(dims, keepdim=keepdim).shape) == want


def test_empty_dims_reduce_nothing_in_the_kernel():
    """numpy's axis=() reduces nothing (PyTorch's dim=() would reduce everything); public
    ops turn dim=() into every dim first, so the rule follows the kernel."""
    assert rule("sum_dim", [(2, 3)], dims=(), keepdim=False) == (2, 3)
    assert np.shape(tg.sum(tg.ones(2, 3), ())) == ()


@pytest.mark.parametrize("shape,dim,keepdim", [((4,), 0, False), ((2, 3), -1, True),
                                               ((2, 3, 4), 1, False), ((), 0, True)], ids=str)
def test_single_dim_and_arg_reductions(shape, dim, keepdim):
    x = np.arange(float(np.prod(shape))).reshape(shape)
    for name in ("max_dim", "min_dim", "argmax", "argmin"):
        got = kernel_shape(name, x, dim=dim, keepdim=keepdim)
        assert rule(name, [shape], dim=dim, keepdim=keepdim) == got, name
    torch = pytest.importorskip("torch")
    t = torch.tensor(x)
    assert rule("max_dim", [shape], dim=dim, keepdim=keepdim) == tuple(
        t.max(dim, keepdim=keepdim).values.shape)
    for keepdim in (False, True):              # dim=None: over the flattened tensor
        assert rule("argmax", [shape], dim=None, keepdim=keepdim) == kernel_shape(
            "argmax", x, dim=None, keepdim=keepdim) == tuple(t.argmax(keepdim=keepdim).shape)


def test_softmax_family_and_prod_except_keep_the_shape():
    x = np.arange(1.0, 7.0).reshape(2, 3)
    assert rule("softmax", [(2, 3)], dim=1) == kernel_shape("softmax", x, dim=1)
    assert rule("log_softmax", [()], dim=0) == kernel_shape("log_softmax", np.ones(()), dim=0)
    assert rule("prod_except", [(2, 3)], dims=(1,)) == kernel_shape("prod_except", x, dims=(1,))


# ---- matrix products ----

MATMUL = [((3,), (3,)), ((3,), (3, 4)), ((2, 3), (3,)), ((2, 3), (3, 4)), ((5, 2, 3), (3, 4)),
          ((2, 1, 2, 3), (4, 3, 2)), ((3,), (2, 3, 4)), ((2, 3, 4), (4,)), ((1, 3), (3, 1)),
          ((0, 3), (3, 2))]


@pytest.mark.parametrize("a,b", MATMUL, ids=str)
def test_matmul_follows_numpy_and_torch(a, b):
    want = np.matmul(z(*a), z(*b)).shape
    assert rule("matmul", [a, b]) == rule("mm", [a, b]) == want
    torch = pytest.importorskip("torch")
    assert want == tuple(torch.matmul(torch.zeros(a), torch.zeros(b)).shape)
    if len(a) == len(b) == 1:
        assert rule("dot", [a, b]) == np.dot(z(*a), z(*b)).shape == ()


def test_matmul_and_dot_refuse_mismatched_inner_dims():
    with pytest.raises(ValueError):
        rule("matmul", [(2, 3), (4, 5)])
    with pytest.raises(ValueError):
        rule("dot", [(3,), (4,)])
    assert rule("dot", [(), (2, 3)]) == np.dot(z(), z(2, 3)).shape
    assert rule("dot", [(2, 3), (4, 3, 5)]) == np.dot(z(2, 3), z(4, 3, 5)).shape


EINSUM = [("ij,jk->ik", (2, 3), (3, 4)), ("bij,bjk->bik", (2, 2, 3), (2, 3, 4)),
          ("i,i->", (3,), (3,)), ("ij->ji", (2, 3)), ("ij", (2, 3)), ("ji", (2, 3)),
          ("ij,jk", (2, 3), (3, 4)), ("i,j->ij", (2,), (3,)), ("ii->i", (3, 3)),
          ("ij,ij->ij", (1, 3), (2, 3)), ("Ab,bc", (2, 3), (3, 1))]


@pytest.mark.parametrize("eq,shapes", [(c[0], c[1:]) for c in EINSUM], ids=str)
def test_einsum_output_subscripts(eq, shapes):
    ops = [z(*s) for s in shapes]
    assert rule("einsum", shapes, eq=eq) == kernel_shape("einsum", *ops, eq=eq)


# ---- shape ops ----

def test_reshape_family_reads_its_shape_attribute():
    assert rule("view", [(2, 3, 4)], shape=(6, -1)) == (6, 4)
    assert rule("reshape_alias", [()], shape=(1, 1)) == (1, 1)
    assert rule("squeeze_dims", [(1, 3, 1)], shape=(3,)) == (3,)
    assert rule("expand", [(3, 1)], shape=(2, 3, 4)) == (2, 3, 4)
    assert rule("sum_to_size", [(2, 3, 4)], shape=(3, 1)) == (3, 1)
    assert rule("permute", [(2, 3, 4)], perm=(2, 0, 1)) == (4, 2, 3)
    assert rule("t", [(3,)], perm=(0,)) == (3,)
    assert rule("transpose", [()], perm=()) == ()


@pytest.mark.parametrize("shape,reps", [((2, 3), (2, 1)), ((3,), (2, 2)), ((2, 1), (1, 2, 3)),
                                        ((), (2,)), ((2, 3), (1, 1))], ids=str)
def test_repeat_matches_torch(shape, reps):
    torch = pytest.importorskip("torch")
    want = tuple(torch.zeros(shape).repeat(*reps).shape)
    assert rule("repeat", [shape], reps=reps) == kernel_shape("repeat", z(*shape), reps=reps)
    assert rule("repeat", [shape], reps=reps) == want


def test_cat_and_stack():
    assert rule("cat", [(2, 3), (1, 3)], dim=0) == (3, 3)
    assert rule("cat", [(2, 3), (2, 2), (2, 1)], dim=-1) == (2, 6)
    torch = pytest.importorskip("torch")
    assert rule("cat", [(0,), (2, 3), (0,)], dim=1) == tuple(
        torch.cat([torch.zeros(0), torch.zeros(2, 3), torch.zeros(0)], 1).shape)
    assert rule("cat", [(0,), (3,)], dim=0) == kernel_shape("cat", z(0), z(3), dim=0) == (3,)
    assert rule("cat", [(0,), (0,)], dim=0) == (0,)
    assert tg.cat([tg.zeros(0), tg.ones(2, 3)], 1).shape == (2, 3)      # as the public op
    for dim in (0, 1, -1, -3):
        want = tuple(torch.stack([torch.zeros(2, 3)] * 4, dim).shape)
        assert rule("stack", [(2, 3)] * 4, dim=dim) == want, dim
    assert rule("stack", [(), ()], dim=0) == (2,)


# ---- indexing: numpy's rules for the index kernels ----

def test_index_rule_matches_numpy_on_random_keys():
    rnd = random.Random(7)
    checked = 0
    for _ in range(3000):
        shape = tuple(rnd.randint(1, 3) for _ in range(rnd.randint(0, 4)))
        key, arrays = _random_key(rnd, len(shape))
        filled = tuple(arrays[k.k] if isinstance(k, Slot) else k for k in key)
        try:
            want = np.zeros(shape)[filled].shape
        except (IndexError, ValueError):
            continue
        assert SR.index_shape(shape, key, [a.shape for a in arrays]) == want, (shape, key)
        checked += 1
    assert checked > 1000


def _random_key(rnd, ndim):
    key, arrays, ell = [], [], False
    for _ in range(rnd.randint(0, 5)):
        c = rnd.random()
        if c < 0.15:
            key.append(None)
        elif c < 0.25 and not ell:
            key.append(Ellipsis)
            ell = True
        elif c < 0.45:
            key.append(slice(rnd.choice([None, 0, 1, -1]), rnd.choice([None, 2, -1, 5]),
                             rnd.choice([None, 1, 2])))
        elif c < 0.6:
            key.append(rnd.choice([0, -1]))
        else:
            shape = tuple(rnd.randint(1, 3) for _ in range(rnd.randint(0, 2)))
            arrays.append(np.zeros(shape, np.int64))
            key.append(Slot(len(arrays) - 1))
    return tuple(key), arrays


def test_advanced_index_dims_go_first_when_separated():
    x, i = z(2, 3, 4, 5), np.array([0, 1, 0, 1, 0, 1, 0])
    cases = [((slice(None), Slot(0), None, Slot(0)), x[:, i, None, i].shape),   # None splits
             ((slice(None), Slot(0), Ellipsis, Slot(0)), z(3, 4, 5)[:, i, ..., i].shape),
             ((slice(None), 0, slice(None), Slot(0)), x[:, 0, :, i].shape),     # ints join
             ((slice(None), 0, Slot(0)), x[:, 0, i].shape)]
    for key, want in cases:
        shape = (3, 4, 5) if Ellipsis in key else x.shape
        assert SR.index_shape(shape, key, [i.shape]) == want, key


def test_masks_make_index_data_dependent():
    assert rule("index", [(2, 3), BoolShape((2, 3))], key=(Slot(0),)) is None
    assert rule("index", [(2, 3), (4,)], key=(Slot(0),)) == (4, 3)      # integer, same slot
    m = np.array([True, False, True])                                    # a literal mask
    assert rule("index", [(2, 3)], key=(slice(None), m)) == z(2, 3)[:, m].shape
    g = tg.tensor([True, False])
    assert SR.operand_shapes([tg.trace(lambda a: a * 1, g).inputs[0]]) == [BoolShape((2,))]


def test_basic_index_and_write_rules():
    assert rule("select", [(2, 3, 4)], key=(slice(None), -1)) == (2, 4)
    assert rule("slice", [(5,)], key=(slice(1, None, 2),)) == (2,)
    assert rule("slice", [(2, 3)], key=(None, Ellipsis, None)) == (1, 2, 3, 1)
    key = (Slot(0), slice(None))
    assert rule("index_backward", [(4, 3), (4,)], shape=(5, 3), key=key) == (5, 3)
    assert rule("index_put", [(5, 3), (), (4,)], key=key) == (5, 3)
    assert rule("index_put_", [(5, 3), None, (4,)], key=key) == (5, 3)
    assert rule("view_scatter", [(2, 3), (3,)], chain=()) == (2, 3)
    assert rule("nograd_write", [(2, 3), (2, 3)]) == (2, 3)


# ---- convolution patches, losses, creation ----

CONV = [((2, 3, 7, 6), (3, 2), 1, 0, 1), ((1, 2, 8, 8), (3, 3), 2, 1, 1),
        ((1, 1, 9, 7), (2, 3), (1, 2), (2, 0), 2), ((2, 2, 5, 5), (1, 1), 3, 0, 1)]


@pytest.mark.parametrize("shape,k,stride,pad,dil", CONV, ids=str)
def test_im2col_and_col2im_match_torch_unfold_and_fold(shape, k, stride, pad, dil):
    from tracegrad.ops.conv import _ints, _pads
    attrs = dict(kernel_size=_ints(k), stride=_ints(stride), padding=_pads(pad),
                 dilation=_ints(dil))
    cols = rule("im2col", [shape], **attrs)
    assert cols == kernel_shape("im2col", z(*shape), **attrs)
    tk = dict(kernel_size=k, stride=stride, padding=pad, dilation=dil)
    torch = pytest.importorskip("torch")
    assert cols == tuple(torch.nn.functional.unfold(torch.zeros(shape), **tk).shape)
    back = rule("col2im", [cols], output_size=shape[2:], **attrs)
    assert back == kernel_shape("col2im", z(*cols), output_size=shape[2:], **attrs) == shape
    assert back == tuple(torch.nn.functional.fold(torch.zeros(cols), shape[2:], **tk).shape)


@pytest.mark.parametrize("reduction", ["none", "mean", "sum"])
def test_losses(reduction):
    s, t = z(4, 3), np.array([0, 2, 1, 2])
    torch = pytest.importorskip("torch")
    want = tuple(torch.nn.functional.nll_loss(torch.zeros(4, 3), torch.tensor(t),
                                              reduction=reduction).shape)
    got = rule("nll_loss", [(4, 3), (4,), None], reduction=reduction, ignore_index=-100)
    assert got == want == kernel_shape("nll_loss", s, t, 1.0, reduction=reduction,
                                       ignore_index=-100)
    got = rule("mse_loss", [(2, 3), (3,)], reduction=reduction)
    assert got == kernel_shape("mse_loss", z(2, 3), z(3), reduction=reduction)
    if reduction != "none":
        assert got == ()


def test_creation_rng_and_constants():
    gen = tg.Generator(0)
    for name, extra in (("rand", {}), ("randn", {}), ("randint", {"low": 0, "high": 3})):
        for shape in ((), (0,), (2, 3)):
            attrs = dict(extra, shape=shape, dtype=np.float32)
            assert rule(name, [None], **attrs) == kernel_shape(name, gen, **attrs) == shape
    assert rule("full", [], shape=(2, 0), fill_value=1, dtype=np.float32) == (2, 0)
    assert rule("manual_seed", [None, None]) == kernel_shape("manual_seed", tg.Generator(0), 1)
    assert CONSTANT.shape_rule([], {"value": np.ones((3, 1))}) == (3, 1)
    assert CONSTANT.shape_rule([], {"value": np.float64(2.0)}) == ()
