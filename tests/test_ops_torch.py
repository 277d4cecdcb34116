"""Differential test against PyTorch for every op-table entry: values, result dtypes,
`requires_grad`, whether `grad_fn` is None, grad_fn class names, `_version` of in-place
results, and gradients (float32 and float64) for the same cotangent."""
import zlib

import numpy as np
import pytest

import tracegrad as tg
from op_table import F32, F64, FLOATS, INDEX, OPS, SHAPE, call

torch = pytest.importorskip("torch")

CASES = [pytest.param(info, d, id=f"{info.name}-{d}") for info in OPS for d in info.dtypes]
TOL = {F32: (1e-5, 1e-6), F64: (1e-10, 1e-12)}
GRAD_TOL = {F32: (1e-4, 1e-5), F64: (1e-9, 1e-12)}

# grad_fn names we knowingly differ on (reported, not faked): (op, torch's name or None: any).
# PyTorch builds these from other kernels or a multi-output node; ours are one primitive.
KNOWN_NAME_DIFFS = {
    ("split", "SplitBackward0"), ("split", "SplitWithSizesBackward0"),   # ours: slices
    ("chunk", "SplitBackward0"),
    ("einsum", None),                        # torch: permute/mul/bmm/view decomposition
    ("getitem", "UnsqueezeBackward0"),       # x[..., None]: ours one slice view
    ("matmul", "MvBackward0"), ("matmul", "SqueezeBackward4"),  # 1-D and batched matmul
    ("matmul", "UnsafeViewBackward0"),
    ("remainder", "NotImplemented"),         # `2 % x`: torch has no derivative, we do
}
NAME_DIFFS = {}
CHECKED = set()


def _dname(t):
    return str(t.dtype).replace("torch.", "")


def _close(ours, theirs, dtype, tol, what):
    rtol, atol = tol.get(dtype, (0, 0))
    a = np.asarray(ours.detach().numpy(), dtype=np.float64)
    b = theirs.detach().double().numpy()
    np.testing.assert_allclose(a, b, rtol=rtol, atol=atol, equal_nan=True, err_msg=what)


def _loss(m, outs, ws):
    total = 0
    for o, w in zip(outs, ws):
        total = total + (o * m.tensor(w.astype(_dname(o)))).sum()
    return total


def _backward(m, info, outs, ws):
    """Returns the exception backward raised, or None."""
    try:
        _loss(m, outs, ws).backward()
    except RuntimeError as e:
        return e
    return None


def _compare_sample(info, sample, dtype, rng, rg):
    what = f"{info.name}{sample} requires_grad={rg}"
    t_args, t_outs = call(torch, info, sample, rg)
    o_args, o_outs = call(tg, info, sample, rg)
    assert len(o_outs) == len(t_outs), what
    for k, (o, t) in enumerate(zip(o_outs, t_outs)):
        w = f"{what} output {k}"
        assert o.dtype.name == _dname(t), f"{w}: dtype {o.dtype.name} vs torch {_dname(t)}"
        assert tuple(o.shape) == tuple(t.shape), w
        _close(o, t, _dname(t), TOL, w)
        assert o.requires_grad == t.requires_grad, f"{w}: requires_grad {o.requires_grad}"
        assert (o.grad_fn is None) == (t.grad_fn is None), f"{w}: grad_fn {o.grad_fn}"
        if o.grad_fn is not None and info.grad_fn:
            ours, theirs = type(o.grad_fn).__name__, type(t.grad_fn).__name__
            if ours != theirs:
                NAME_DIFFS.setdefault(info.name, set()).add((ours, theirs, repr(sample)))
        if info.inplace:
            assert o._version == t._version, f"{w}: _version {o._version} vs {t._version}"
    pairs = [(o, t) for o, t in zip(o_outs, t_outs) if t.requires_grad]
    if not pairs:
        return
    ws = [rng.standard_normal(tuple(t.shape)) for _, t in pairs]
    t_err = _backward(torch, info, [t for _, t in pairs], ws)
    o_err = _backward(tg, info, [o for o, _ in pairs], ws)
    if t_err is not None:
        # Where torch lacks a derivative (floor_divide; `2 % x`) we may raise or do better;
        # for any other backward error we must raise too.
        if "not implemented" not in str(t_err):
            assert isinstance(o_err, RuntimeError), f"{what}: torch backward raised {t_err!r}"
        return
    assert o_err is None, f"{what}: backward raised {o_err!r}"
    for i, (oa, ta) in enumerate(zip(o_args, t_args)):
        if isinstance(ta, torch.Tensor) and ta.requires_grad:
            assert (oa.grad is None) == (ta.grad is None), f"{what}: grad of arg {i}"
            if ta.grad is not None:
                assert oa.grad.dtype.name == _dname(ta.grad), what
                _close(oa.grad, ta.grad, dtype, GRAD_TOL, f"{what}: grad of arg {i}")


@pytest.mark.parametrize("info,dtype", CASES)
def test_matches_torch(info, dtype):
    rng = np.random.default_rng(zlib.crc32(f"{info.name}/{dtype}".encode()))
    for sample in info.samples(rng, dtype):
        if not sample.torch:
            continue
        _compare_sample(info, sample, dtype, rng, dtype in FLOATS)
        floats = [i for i, a in enumerate(sample.args)
                  if isinstance(a, np.ndarray) and a.dtype.kind == "f"]
        if len(floats) > 1:             # only some inputs require grad
            _compare_sample(info, sample, dtype, rng, {floats[-1]})
    CHECKED.add((info.name, dtype))


VIEWS = [pytest.param(i, id=i.name) for i in SHAPE + INDEX if not i.name.startswith("set")]


@pytest.mark.parametrize("info", VIEWS)
def test_views_and_copies_match_torch(info):
    """An output aliases its input (sees a later in-place write, shares the version counter)
    exactly when torch's does."""
    rng = np.random.default_rng(zlib.crc32(info.name.encode()))
    for sample in info.samples(rng, F32):
        seen = []
        for m in (tg, torch):
            args, outs = call(m, info, sample)
            before = [o.numpy().copy() for o in outs]
            args[0].add_(1)
            seen.append([(not np.array_equal(o.numpy(), b), o._version)
                         for o, b in zip(outs, before)])
        assert seen[0] == seen[1], f"{info.name}{sample}: (aliases, _version) {seen}"


def test_grad_fn_names_match_torch():
    """grad_fn class names equal torch's (run after the differential tests collect them)."""
    for p in CASES:
        info, dtype = p.values
        if dtype == F64 and (info.name, dtype) not in CHECKED:
            test_matches_torch(info, dtype)
    unexpected = {(name, d) for name, diffs in NAME_DIFFS.items() for d in diffs
                  if (name, d[1]) not in KNOWN_NAME_DIFFS and (name, None) not in KNOWN_NAME_DIFFS}
    print("\ngrad_fn name differences (ours, torch, sample):")
    for name, diffs in sorted(NAME_DIFFS.items()):
        for d in sorted(diffs):
            print(f"  {name}: {d}")
    assert not unexpected


# Keys mixing integers (or None) with index tensors: PyTorch applies the integers as selects
# first, so an integer apart from the index tensors does not move their dimension to the
# front as numpy's rule would (x[:, 0, :, idx] is (2, 4, 2), not (2, 2, 4)).
MIXED_KEYS = ["[:, 0, :, i]", "[0, :, i]", "[i, :, 0]", "[0, i]", "[:, 0, i]",
              "[None, 0, :, i]", "[i, 1, None, j]", "[..., 1, i]", "[1, ..., i]",
              "[j[:, None], 0, :, i]"]


def _index_mixed(m, x, key):
    i, j = m.tensor([0, 1]), m.tensor([1, 0])      # noqa: F841 (read by the key)
    return eval("x" + key)


@pytest.mark.parametrize("key", MIXED_KEYS)
def test_integers_among_index_tensors_follow_torch(key):
    x0 = np.random.default_rng(zlib.crc32(key.encode())).standard_normal((2, 3, 4, 5))
    res = []
    for m in (torch, tg):
        x = m.tensor(x0, requires_grad=True)
        y = _index_mixed(m, x, key)
        (y * y).sum().backward()
        w = m.tensor(x0.copy())
        i, j = m.tensor([0, 1]), m.tensor([1, 0])  # noqa: F841 (read by the key)
        exec("w" + key + " = 7.0")
        res.append((tuple(y.shape), y.detach().numpy(), x.grad.numpy(),
                    type(y.grad_fn).__name__, w.numpy()))
    (ts, tv, tgx, tn, tw), (gs, gv, ggx, gn, gw) = res
    assert gs == ts and gn == tn
    np.testing.assert_array_equal(gv, tv)
    np.testing.assert_allclose(ggx, tgx, rtol=1e-12)
    np.testing.assert_array_equal(gw, tw)
    f = tg.compile(lambda x: _index_mixed(tg, x, key) * 2)
    xc = tg.tensor(x0)
    for _ in range(2):
        np.testing.assert_array_equal(f(xc).numpy(), gv * 2)
