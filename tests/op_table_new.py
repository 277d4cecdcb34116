"""Op-table rows for selection, ordering, scans and structure (issue 12): gather, scatter,
scatter_add, index_select, masked_fill, sort, argsort, topk, cumsum, cumprod, tril, triu, flip,
repeat_interleave, baddbmm. `op_table` appends `NEW` to `OPS`, so every op test runs them.

Index samples address each destination once where a write would otherwise race (scatter):
PyTorch leaves which duplicate wins unspecified. `src` here has the index's shape: for a
larger `src` PyTorch's backward raises (its gradient has the index's shape), ours pads the
gradient with zeros (tests/test_ops_new.py checks that case by finite differences).
"""
import numpy as np

from op_table import (ALL, B, F32, F64, I64, NUMERIC, A, OpInfo, _ax, _fn, _first_dtype,
                      _ip, _meth, _NONDIFF, _v, fixed)

FLOATS = (F32, F64)


def _idx(values):
    return A(None, dtype=I64, values=values)


def _mask(values):
    return A(None, dtype=B, values=values)


# ---------------- numpy references ----------------

def _np_along(index, dim):
    grid = list(np.indices(index.shape, sparse=True))
    grid[dim % index.ndim] = index
    return tuple(grid)


def _np_gather(x, dim, index):
    return x[_np_along(index, dim)]


def _np_scatter(x, dim, index, src=None, value=None):
    out = x.copy()
    v = value if src is None else src[tuple(slice(0, s) for s in index.shape)]
    out[_np_along(index, dim)] = v
    return out


def _np_scatter_add(x, dim, index, src):
    out = x.copy()
    np.add.at(out, _np_along(index, dim), src[tuple(slice(0, s) for s in index.shape)])
    return out


def _np_masked_fill(x, mask, value):
    return np.where(mask, value, x).astype(x.dtype)


def _np_order(x, dim, descending):
    if descending:
        n = x.shape[dim]
        return n - 1 - np.flip(np.argsort(np.flip(x, dim), axis=dim, kind="stable"), dim)
    return np.argsort(x, axis=dim, kind="stable")


def _np_sort(x, dim=-1, descending=False, stable=None):
    if x.ndim == 0:
        return x, np.zeros((), np.int64)
    idx = _np_order(x, dim, descending)
    return np.take_along_axis(x, idx, dim), idx


def _np_argsort(x, dim=-1, descending=False, stable=False):
    return _np_sort(x, dim, descending)[1]


def _np_topk(x, k, dim=-1, largest=True, sorted=True):
    if x.ndim == 0:
        return x, np.zeros((), np.int64)
    idx = np.take(_np_order(x, dim, largest), np.arange(k), axis=dim)
    return np.take_along_axis(x, idx, dim), idx


def _np_scan(f):
    def ref(x, dim):
        acc = np.int64 if x.dtype.kind in "biu" else x.dtype
        return f(x, axis=_ax(x, dim), dtype=acc).reshape(x.shape)
    return ref


def _np_baddbmm(input, b1, b2, beta=1, alpha=1):
    return beta * input + alpha * np.matmul(b1, b2)


def _np_repeat_interleave(x, repeats, dim=None):
    return np.repeat(x, repeats, axis=dim)


def _np_inplace(f):
    def ref(x, *a, **kw):
        return np.asarray(f(x, *a, **kw)).astype(x.dtype)
    return ref


# ---------------- samples ----------------
_COLS = _idx([[0, 1, 2, 0], [2, 0, 1, 1]])         # (2, 4): each column's entries distinct
_ROWS = _idx([[3, 0], [1, 1], [0, 2]])              # (3, 2) along dim 1 (repeats for gather)
_SMALL = _idx([[1, 0], [2, 1]])                     # (2, 2): smaller than x in both dims
_M23 = _mask([[True, False, True], [False, False, True]])
_ROWMASK = _mask([False, True, True])


def _ordered(name, ref, samples, out="same", **kw):
    return OpInfo(name, _fn(name), ref=ref, samples=fixed(*samples), dtypes=NUMERIC, out=out,
                  variants=_v(_meth(name)), **kw)


NEW = [
    OpInfo("gather", _fn("gather"), ref=_np_gather, dtypes=ALL, out="same",
           variants=_v(_meth("gather")),
           samples=fixed((A((3, 4)), 0, _COLS), (A((3, 4)), 1, _ROWS), (A((3, 4)), -1, _SMALL),
                         (A((2, 3, 2)), 1, _idx([[[2, 0]], [[1, 1]]])))),
    OpInfo("index_select", _fn("index_select"), ref=lambda x, d, i: np.take(x, i, axis=d),
           dtypes=ALL, out="same", variants=_v(_meth("index_select")),
           samples=fixed((A((3, 4)), 0, _idx([2, 0, 2, 1])), (A((3, 4)), 1, _idx([3, 3])),
                         (A((2, 3, 2)), -1, _idx([1])))),
    OpInfo("scatter", _fn("scatter"), ref=_np_scatter, dtypes=NUMERIC, out="same",
           variants=_v(_meth("scatter")),
           samples=fixed((A((3, 4)), 0, _COLS, A((2, 4))),
                         (A((3, 4)), 1, _idx([[3, 0], [1, 2]]), A((2, 2))))),
    OpInfo("scatter_value", lambda m, x, d, i, **kw: m.scatter(x, d, i, **kw), ref=_np_scatter,
           dtypes=NUMERIC, out="same", variants=_v(lambda m, x, d, i, **kw: x.scatter(d, i, **kw)),
           samples=fixed((A((3, 4)), 0, _COLS, {"value": -1.5}),
                         (A((3, 4)), 1, _idx([[3, 0], [1, 2]]), {"value": 2}))),
    OpInfo("scatter_add", _fn("scatter_add"), ref=_np_scatter_add, dtypes=NUMERIC, out="same",
           variants=_v(_meth("scatter_add")),
           samples=fixed((A((3, 4)), 0, _COLS, A((2, 4))), (A((3, 4)), 1, _ROWS, A((3, 2))),
                         (A((4,)), 0, _idx([1, 1, 3, 1]), A((4,))))),
    OpInfo("scatter_", _ip("scatter_"), ref=_np_inplace(_np_scatter), dtypes=NUMERIC,
           out=_first_dtype, inplace=True,
           samples=fixed((A((3, 4)), 0, _COLS, A((2, 4))),
                         (A((3, 4)), 1, _idx([[3, 0], [1, 2]]), {"value": 2.5}))),
    OpInfo("scatter_add_", _ip("scatter_add_"), ref=_np_inplace(_np_scatter_add),
           dtypes=NUMERIC, out=_first_dtype, inplace=True,
           samples=fixed((A((3, 4)), 0, _COLS, A((2, 4))), (A((3, 4)), 1, _ROWS, A((3, 2))))),
    OpInfo("masked_fill", _fn("masked_fill"), ref=_np_masked_fill, dtypes=NUMERIC, out="same",
           variants=_v(_meth("masked_fill")),
           samples=fixed((A((2, 3)), _M23, 2.5), (A((2, 3)), _mask([True, False, True]), -1),
                         (A((2, 3)), _M23, A(())), (A((3,)), _M23, A(())))),
    OpInfo("masked_fill_", _ip("masked_fill_"), ref=_np_inplace(_np_masked_fill),
           dtypes=NUMERIC, out=_first_dtype, inplace=True,
           samples=fixed((A((2, 3)), _M23, 2.5), (A((2, 3)), _ROWMASK, A(())))),
    _ordered("sort", _np_sort, [(A((5,), "distinct"),), (A((3, 4), "distinct"), 0),
                                (A((3, 4), "distinct"), {"descending": True}),
                                (A((2, 3, 4), "distinct"), 1, True),
                                (A((3, 4), "distinct"), {"dim": 0, "stable": True}),
                                (A((), "distinct"),)]),
    _ordered("argsort", _np_argsort, [(A((5,), "distinct"),), (A((3, 4), "distinct"), 0),
                                      (A((3, 4), "distinct"), {"descending": True})],
             out=I64, **_NONDIFF),
    _ordered("topk", _np_topk, [(A((5,), "distinct"), 2), (A((3, 4), "distinct"), 2, 0),
                                (A((3, 4), "distinct"), 3, {"largest": False}),
                                (A((2, 3, 4), "distinct"), 1, 1), (A((3, 4), "distinct"), 0),
                                (A((), "distinct"), 1)]),
    OpInfo("cumsum", _fn("cumsum"), ref=_np_scan(np.cumsum), dtypes=ALL, out="sum",
           variants=_v(_meth("cumsum")),
           samples=fixed((A((4,)), 0), (A((2, 3)), 1), (A((2, 3, 4)), -2), (A(()), 0))),
    OpInfo("cumprod", _fn("cumprod"), ref=_np_scan(np.cumprod), dtypes=NUMERIC, out="sum",
           variants=_v(_meth("cumprod")),
           samples=fixed((A((4,), "nokink"), 0), (A((2, 3), "nokink"), 1),
                         (A((2, 3, 2), "nokink"), -2), (A(()), 0),
                         (A(None, values=[[1.5, 0, -2, 0.5], [0, 1.25, 0, 2]]), 1),
                         (A(None, values=[[1.5, 0], [0, 1.25], [2, 0.5]]), 0))),
    OpInfo("tril", _fn("tril"), ref=lambda x, diagonal=0: np.tril(x, diagonal), dtypes=ALL,
           out="same", variants=_v(_meth("tril")),
           samples=fixed((A((3, 4)),), (A((2, 3, 4)), 1), (A((4, 3)), {"diagonal": -1}))),
    OpInfo("triu", _fn("triu"), ref=lambda x, diagonal=0: np.triu(x, diagonal), dtypes=ALL,
           out="same", variants=_v(_meth("triu")),
           samples=fixed((A((3, 4)),), (A((2, 3, 4)), -1), (A((4, 3)), {"diagonal": 2}))),
    OpInfo("tril_", _ip("tril_"), ref=_np_inplace(np.tril), dtypes=ALL, out=_first_dtype,
           inplace=True, samples=fixed((A((3, 4)),), (A((2, 3, 4)), -1))),
    OpInfo("triu_", _ip("triu_"), ref=_np_inplace(np.triu), dtypes=ALL, out=_first_dtype,
           inplace=True, samples=fixed((A((3, 4)),), (A((4, 3)), 1))),
    OpInfo("flip", _fn("flip"), ref=lambda x, dims: np.flip(x, dims), dtypes=ALL, out="same",
           variants=_v(lambda m, x, dims: x.flip(dims), lambda m, x, dims: x.flip(*dims)),
           samples=fixed((A((2, 3, 4)), (0,)), (A((2, 3, 4)), (0, 2)), (A((3,)), (-1,)),
                         (A((2, 3)), ()))),
    OpInfo("repeat_interleave", _fn("repeat_interleave"), ref=_np_repeat_interleave,
           dtypes=ALL, out="same", variants=_v(_meth("repeat_interleave")),
           samples=fixed((A((2, 3)), 2), (A((2, 3)), 2, {"dim": 1}), (A((2, 3)), 3, -2),
                         (A((2, 3)), _idx([1, 3]), {"dim": 0}), (A((3,)), _idx([0, 2, 1])))),
    OpInfo("baddbmm", _fn("baddbmm"), ref=_np_baddbmm, dtypes=FLOATS, out="same",
           variants=_v(_meth("baddbmm")),
           samples=fixed((A((2, 3, 5)), A((2, 3, 4)), A((2, 4, 5))),
                         (A((5,)), A((2, 3, 4)), A((2, 4, 5)), {"beta": 0.5, "alpha": 2}),
                         (A((3, 1)), A((2, 3, 4)), A((2, 4, 5)), {"beta": 0}),
                         (A((2, 3, 5)), A((2, 3, 4)), A((2, 4, 5)), {"alpha": -1.5}))),
]
