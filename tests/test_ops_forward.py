"""Forward values of every op-table entry against its numpy reference: values, shapes, the
dtype PyTorch's promotion gives, other spellings (method/function/operator) agreeing, inputs
left untouched, and in-place entries bumping the version counter."""
import zlib

import numpy as np
import pytest

import tracegrad as tg
from op_table import F16, F32, F64, OPS, Raw, expected_dtype, flat_outputs, np_args, to_lib

CASES = [pytest.param(info, d, id=f"{info.name}-{d}") for info in OPS for d in info.dtypes]
TOL = {F16: (1e-3, 1e-3), F32: (1e-5, 1e-5), F64: (1e-12, 1e-12)}


def rng_for(info, dtype):
    return np.random.default_rng(zlib.crc32(f"{info.name}/{dtype}".encode()))


def assert_close(got, want, dtype, what):
    rtol, atol = TOL.get(dtype, (0, 0))
    got = np.asarray(got)
    want = np.asarray(want)
    assert got.shape == want.shape, f"{what}: shape {got.shape} != {want.shape}"
    if got.dtype.kind in "fc" or want.dtype.kind in "fc":
        np.testing.assert_allclose(got.astype(np.float64), want.astype(np.float64), rtol=rtol,
                                   atol=atol, equal_nan=True, err_msg=what)
    else:
        np.testing.assert_array_equal(got, want, err_msg=what)


def _variant_applies(f, sample):
    if not getattr(f, "needs_tensor_first", False):
        return True
    return isinstance(sample.args[0], np.ndarray) and not any(
        isinstance(a, Raw) for a in sample.args)


@pytest.mark.parametrize("info,dtype", CASES)
def test_forward_matches_numpy(info, dtype):
    for sample in info.samples(rng_for(info, dtype), dtype):
        what = f"{info.name}{sample}"
        args = [to_lib(tg, a) for a in sample.args]
        before = [a._data.copy() if isinstance(a, tg.Tensor) else None for a in args]
        out = info.op(tg, *args, **sample.kwargs)
        ref = info.reference(*np_args(sample), **sample.kwargs)
        outs, refs = flat_outputs(out), flat_outputs(ref)
        assert len(outs) == len(refs), what
        want_dtype = expected_dtype(info, sample)
        for k, (o, r) in enumerate(zip(outs, refs)):
            assert isinstance(o, tg.Tensor), f"{what}: output {k} is {type(o).__name__}"
            is_index = k == 1 and hasattr(out, "indices")
            want = "int64" if is_index else want_dtype
            assert o.dtype.name == want, f"{what}: output {k} dtype {o.dtype.name} != {want}"
            assert isinstance(o.shape, tuple) and o.shape == np.shape(r), what
            assert_close(o.numpy(), r, want, f"{what} output {k}")
        for a, b in zip(args, before):
            if b is not None:
                np.testing.assert_array_equal(a._data, b, err_msg=f"{what} mutated an input")
        for f in info.variants:
            if _variant_applies(f, sample):
                alt = flat_outputs(f(tg, *[to_lib(tg, a) for a in sample.args], **sample.kwargs))
                for o, v in zip(outs, alt):
                    assert v.dtype is o.dtype, f"{what}: variant dtype differs"
                    np.testing.assert_array_equal(v.numpy(), o.numpy(), err_msg=what)


INPLACE = [pytest.param(i, id=i.name) for i in OPS if i.inplace]


@pytest.mark.parametrize("info", INPLACE)
def test_inplace_bumps_version_once(info):
    """The op clones its target, so the returned tensor has seen exactly one in-place write."""
    dtype = info.dtypes[0]
    for sample in info.samples(rng_for(info, dtype), dtype):
        out = info.op(tg, *[to_lib(tg, a) for a in sample.args], **sample.kwargs)
        assert out._version == 1, f"{info.name}{sample}: _version {out._version}"


@pytest.mark.parametrize("name", ["max", "min"])
def test_max_min_with_dim_return_values_and_indices(name):
    x = tg.tensor([[1.0, 5.0, 3.0], [4.0, 2.0, 6.0]])
    r = getattr(x, name)(dim=1)
    values, indices = r
    assert r.values is values and r.indices is indices
    want = np.array([[1.0, 5.0, 3.0], [4.0, 2.0, 6.0]])
    assert values.tolist() == getattr(want, name)(axis=1).tolist()
    assert indices.tolist() == getattr(want, "arg" + name)(axis=1).tolist()
    assert indices.dtype is tg.int64


def test_setitem_bumps_version_and_views_see_it():
    x = tg.zeros(3, 4)
    row = x[1]
    x[1, 2] = 5.0
    assert x._version == 1 and row._version == 1
    assert row.tolist() == [0.0, 0.0, 5.0, 0.0]


def test_table_covers_api_section_1():
    """Every op named in API.md section 1 has a table entry (by op name)."""
    names = {i.name for i in OPS}
    api = ("add sub mul div floor_divide remainder pow neg abs eq ne lt le gt ge and or invert "
           "exp log log1p sqrt rsqrt sin cos tanh sigmoid relu sign reciprocal clamp maximum "
           "minimum where floor ceil round sum mean prod max min amax amin argmax argmin norm "
           "var std logsumexp softmax log_softmax matmul mm bmm dot outer einsum reshape view "
           "flatten squeeze unsqueeze transpose permute t expand broadcast_to repeat cat stack "
           "split chunk getitem getitem_int_array getitem_mask setitem add_ sub_ mul_ div_ pow_ "
           "zero_ fill_ copy_ clamp_ exp_ relu_ sigmoid_ tanh_ iadd isub imul itruediv").split()
    assert not [n for n in api if n not in names]
