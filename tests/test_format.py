"""Tests for tracegrad._format: golden PyTorch strings plus a differential check."""

import numpy as np
import pytest

import tracegrad as tg

from tracegrad._format import (
    default_suffixes,
    dtype_suffix_needed,
    format_tensor,
    torch_dtype_name,
)

NAN, INF = float("nan"), float("inf")
F32 = np.float32


def _a(values, dtype=F32):
    return np.array(values, dtype=dtype)


GOLDEN = [
    (_a(27.0), [], "tensor(27.)"),
    (_a(3, np.int64), [], "tensor(3)"),
    (_a(True, np.bool_), [], "tensor(True)"),
    (_a(NAN), [], "tensor(nan)"),
    (_a([4.5, 4.5]), [], "tensor([4.5000, 4.5000])"),
    (_a([1.024e2, 1.024e3, 1.024e-1]), [], "tensor([1.0240e+02, 1.0240e+03, 1.0240e-01])"),
    (_a([1e9, 2.0]), [], "tensor([1.0000e+09, 2.0000e+00])"),
    (_a([1e-5, 1.0]), [], "tensor([1.0000e-05, 1.0000e+00])"),
    (_a([NAN, INF, -INF, 1.5]), [], "tensor([   nan,    inf,   -inf, 1.5000])"),
    (_a([NAN, 2.0, -INF]), [], "tensor([nan, 2., -inf])"),
    (_a([-1.5, 20.25, 3.0]), [], "tensor([-1.5000, 20.2500,  3.0000])"),
    (_a([-0.0, 0.0]), [], "tensor([-0., 0.])"),
    (np.ones((2, 2), F32), [], "tensor([[1., 1.],\n        [1., 1.]])"),
    (
        np.arange(12, dtype=F32).reshape(2, 3, 2),
        [],
        "tensor([[[ 0.,  1.],\n         [ 2.,  3.],\n         [ 4.,  5.]],\n\n"
        "        [[ 6.,  7.],\n         [ 8.,  9.],\n         [10., 11.]]])",
    ),
    (
        np.arange(30, dtype=F32) * 1.5,
        [],
        "tensor([ 0.0000,  1.5000,  3.0000,  4.5000,  6.0000,  7.5000,  9.0000, 10.5000,\n"
        "        12.0000, 13.5000, 15.0000, 16.5000, 18.0000, 19.5000, 21.0000, 22.5000,\n"
        "        24.0000, 25.5000, 27.0000, 28.5000, 30.0000, 31.5000, 33.0000, 34.5000,\n"
        "        36.0000, 37.5000, 39.0000, 40.5000, 42.0000, 43.5000])",
    ),
    (np.arange(2000, dtype=np.int64), [], "tensor([   0,    1,    2,  ..., 1997, 1998, 1999])"),
    (
        np.arange(3000, dtype=F32).reshape(30, 100) / F32(7),
        [],
        "tensor([[0.0000e+00, 1.4286e-01, 2.8571e-01,  ..., 1.3857e+01, 1.4000e+01,\n"
        "         1.4143e+01],\n"
        "        [1.4286e+01, 1.4429e+01, 1.4571e+01,  ..., 2.8143e+01, 2.8286e+01,\n"
        "         2.8429e+01],\n"
        "        [2.8571e+01, 2.8714e+01, 2.8857e+01,  ..., 4.2429e+01, 4.2571e+01,\n"
        "         4.2714e+01],\n"
        "        ...,\n"
        "        [3.8571e+02, 3.8586e+02, 3.8600e+02,  ..., 3.9957e+02, 3.9971e+02,\n"
        "         3.9986e+02],\n"
        "        [4.0000e+02, 4.0014e+02, 4.0029e+02,  ..., 4.1386e+02, 4.1400e+02,\n"
        "         4.1414e+02],\n"
        "        [4.1429e+02, 4.1443e+02, 4.1457e+02,  ..., 4.2814e+02, 4.2829e+02,\n"
        "         4.2843e+02]])",
    ),
    (_a([]), [], "tensor([])"),
    (np.zeros((0, 3), F32), [], "tensor([], size=(0, 3))"),
    (np.zeros((0, 3), np.int64), ["dtype=torch.int64"], "tensor([], size=(0, 3), dtype=torch.int64)"),
    (_a([True, False], np.bool_), [], "tensor([ True, False])"),
    (_a([1, -20, 300], np.int32), ["dtype=torch.int32"], "tensor([  1, -20, 300], dtype=torch.int32)"),
    (_a([0.1, 2.0], np.float16), ["dtype=torch.float16"], "tensor([0.1000, 2.0000], dtype=torch.float16)"),
    (_a([1 / 3], np.float64), ["dtype=torch.float64"], "tensor([0.3333], dtype=torch.float64)"),
    (
        np.full((2, 2), 2.0, F32),
        ["grad_fn=<AddBackward0>"],
        "tensor([[2., 2.],\n        [2., 2.]], grad_fn=<AddBackward0>)",
    ),
    (
        np.arange(7, dtype=F32) * 1.5,
        ["grad_fn=<AddBackward0>"],
        "tensor([0.0000, 1.5000, 3.0000, 4.5000, 6.0000, 7.5000, 9.0000],\n"
        "       grad_fn=<AddBackward0>)",
    ),
    (
        np.arange(9, dtype=F32) * 1.5,
        ["grad_fn=<AddBackward0>"],
        "tensor([ 0.0000,  1.5000,  3.0000,  4.5000,  6.0000,  7.5000,  9.0000, 10.5000,\n"
        "        12.0000], grad_fn=<AddBackward0>)",
    ),
    (
        np.arange(6, dtype=np.float64) * 1.5,
        ["dtype=torch.float64", "grad_fn=<AddBackward0>"],
        "tensor([0.0000, 1.5000, 3.0000, 4.5000, 6.0000, 7.5000], dtype=torch.float64,\n"
        "       grad_fn=<AddBackward0>)",
    ),
]


@pytest.mark.parametrize("arr, suffixes, expected", GOLDEN)
def test_golden(arr, suffixes, expected):
    assert format_tensor(arr, suffixes) == expected


def test_dtype_rules():
    assert torch_dtype_name(np.float32) == "torch.float32"
    assert torch_dtype_name(np.dtype("int32")) == "torch.int32"
    assert torch_dtype_name(np.bool_) == "torch.bool"
    assert not dtype_suffix_needed(np.float32, np.float32)
    assert not dtype_suffix_needed(np.int64, np.float32)
    assert not dtype_suffix_needed(np.bool_, np.float32)
    assert dtype_suffix_needed(np.float64, np.float32)
    assert dtype_suffix_needed(np.float16, np.float32)
    assert dtype_suffix_needed(np.int32, np.float32)
    assert dtype_suffix_needed(np.float32, np.float64)
    assert not dtype_suffix_needed(np.float64, np.float64)
    assert dtype_suffix_needed(np.int64, np.float32, empty=True)
    assert dtype_suffix_needed(np.bool_, np.float32, empty=True)
    assert not dtype_suffix_needed(np.float32, np.float32, empty=True)


def test_default_suffixes():
    assert default_suffixes(_a([1.0]), np.float32, requires_grad=True) == ["requires_grad=True"]
    assert default_suffixes(_a([1], np.int32), np.float32, grad_fn_name="AddBackward0") == [
        "dtype=torch.int32", "grad_fn=<AddBackward0>"]
    assert default_suffixes(np.zeros(0, np.int64), np.float32) == ["dtype=torch.int64"]


def test_caller_size_suffix_not_duplicated():
    assert format_tensor(np.zeros((0, 3), F32), ["size=(0, 3)"]) == "tensor([], size=(0, 3))"


# ---------------------------------------------------------------------------
# Differential test against real PyTorch
# ---------------------------------------------------------------------------


def _differential_arrays():
    rng = np.random.default_rng(1234)
    arrays = []
    for scale in (1e-6, 1e-3, 1.0, 37.0, 1e4, 1e9):
        for shape in ((5,), (2, 3), (30,)):
            arrays.append((rng.standard_normal(shape) * scale).astype(F32))
    arrays += [
        np.array(2.5, F32), np.array(-7.0, np.float64), np.array(4, np.int32),
        np.array(False), np.zeros(0, F32), np.zeros((0, 3), np.int32),
        np.zeros((2, 0, 4), np.float64), np.zeros(0, np.bool_),
        rng.standard_normal((2, 3, 4)).astype(F32),
        rng.standard_normal((2, 3, 4)).astype(np.float64) * 1e5,
        rng.standard_normal(2000).astype(F32),
        rng.standard_normal((40, 40)).astype(F32) * 100,
        rng.standard_normal((3, 4, 5, 6)).astype(F32),
        rng.standard_normal((12, 10, 10)).astype(F32),
        rng.standard_normal(30).astype(np.float16),
        (rng.standard_normal((2, 3)) * 1e3).astype(np.float16),
        rng.standard_normal(30).astype(np.float64),
        rng.integers(-10**6, 10**6, size=(30,)).astype(np.int64),
        rng.integers(-5, 5, size=(2, 3, 4)).astype(np.int32),
        rng.integers(0, 10**9, size=(2000,)).astype(np.int64),
        rng.integers(0, 2, size=(40, 40)).astype(np.bool_),
        np.array([True, False, True]),
        np.array([NAN, INF, -INF, 0.0, 1.25], F32),
        np.array([NAN, INF, -INF, 0.0, 1e10], F32),
        np.array([NAN, -INF, 3.0, -4.0], np.float64),
        np.array([NAN, INF], F32), np.array([0.0, -0.0, 0.0], F32),
        np.array([1e-20, 1.0, 123.0], F32), np.array([1e8, 1.0], F32),
        np.array([1e9, 1.0], F32), np.array([-1000.0, 1.0, 999.0], F32),
        np.arange(100, dtype=F32).reshape(10, 10) * 1e3,
        np.arange(1001, dtype=np.float64) * 0.5,
    ]
    return arrays


DIFF_ARRAYS = _differential_arrays()


@pytest.mark.parametrize("index", range(len(DIFF_ARRAYS)))
@pytest.mark.parametrize("default_dtype", ["float32", "float64"])
def test_matches_torch(index, default_dtype):
    torch = pytest.importorskip("torch")
    arr = DIFF_ARRAYS[index]
    default_np = np.dtype(default_dtype)
    old_default = torch.get_default_dtype()
    torch.set_default_dtype(getattr(torch, default_dtype))
    try:
        t = torch.tensor(arr)
        assert format_tensor(arr, default_suffixes(arr, default_np)) == repr(t)
        if arr.dtype.kind != "f":
            return
        leaf = torch.tensor(arr, requires_grad=True)
        got = format_tensor(arr, default_suffixes(arr, default_np, requires_grad=True))
        assert got == repr(leaf)
        result = leaf * 1
        got = format_tensor(arr, default_suffixes(arr, default_np, grad_fn_name="MulBackward0"))
        assert got == repr(result)
    finally:
        torch.set_default_dtype(old_default)


@pytest.mark.parametrize("opts", [dict(precision=2), dict(threshold=5), dict(profile="short"),
                                  dict(profile="full"), dict(sci_mode=True),
                                  dict(sci_mode=False, precision=6),
                                  dict(edgeitems=1, threshold=3), dict(linewidth=30)])
def test_set_printoptions_prints_as_torch(opts):
    torch = pytest.importorskip("torch")
    datas = [np.array([1.12345, 2.5, -3.0]), np.arange(10), np.linspace(0, 1e-5, 7),
             np.random.default_rng(0).standard_normal((4, 12)) * 100,
             np.arange(2000.0).reshape(2, 1000), np.array([1e10, 1.0])]
    try:
        for lib in (torch, tg):
            lib.set_printoptions(**opts)
        for d in datas:
            assert repr(tg.tensor(d)) == repr(torch.tensor(d))
    finally:
        for lib in (torch, tg):
            lib.set_printoptions(profile="default")
    assert repr(tg.arange(10)) == "tensor([0, 1, 2, 3, 4, 5, 6, 7, 8, 9])"
