"""tracegrad.bfloat16: a storage dtype backed by ml_dtypes when it is installed (Note
[bfloat16] in tracegrad/_dtype.py), a clear error naming the fix when it is not."""
import os
import subprocess
import sys

import numpy as np
import pytest

import tracegrad as tg

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def test_without_ml_dtypes_the_name_exists_and_using_it_names_the_fix():
    code = """if True:
        import sys
        sys.modules["ml_dtypes"] = None               # as on a machine without it
        import tracegrad as tg
        assert repr(tg.bfloat16) == "torch.bfloat16" and tg.bfloat16.is_floating_point
        for use in (lambda: tg.zeros(2, dtype=tg.bfloat16), lambda: tg.ones(2).bfloat16(),
                    lambda: tg.finfo(tg.bfloat16), lambda: tg.ones(2).to(tg.bfloat16),
                    lambda: tg.promote_types(tg.bfloat16, tg.float32)):
            try:
                use()
            except RuntimeError as e:
                assert "pip install ml_dtypes" in str(e), e
            else:
                raise AssertionError("no error")
        print("ok")
    """
    env = dict(os.environ, PYTHONPATH=ROOT)
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env,
                         timeout=120)
    assert out.stdout.strip() == "ok", out.stderr


ml_dtypes = pytest.importorskip("ml_dtypes")
torch = pytest.importorskip("torch")


def _values():
    rng = np.random.default_rng(0)
    scale = np.float32(10.0) ** rng.integers(-40, 38, 200)
    v = rng.standard_normal(200).astype(np.float32) * scale
    special = [0.0, -0.0, np.inf, -np.inf, 1.0 + 2 ** -8, 1.0 + 3 * 2 ** -8, 3.3895e38,
               1e-40, -1e-45, 65504.0]
    return np.concatenate([v, np.array(special, np.float32)])


def test_conversion_rounds_like_torch():
    v = _values()
    t = torch.tensor(v).bfloat16()
    g = tg.tensor(v).bfloat16()
    assert g.dtype is tg.bfloat16 and g.element_size() == 2 and g.is_floating_point()
    np.testing.assert_array_equal(g.float().numpy(), t.float().numpy())
    np.testing.assert_array_equal(g.double().numpy(), t.double().numpy())
    ints = np.array([1.7, -2.5, 300.6], np.float32)
    assert tg.tensor(ints).bfloat16().long().tolist() == \
        torch.tensor(ints).bfloat16().long().tolist()
    assert repr(tg.tensor([1.5, 2.7, 3.14159], dtype=tg.bfloat16)) == \
        repr(torch.tensor([1.5, 2.7, 3.14159], dtype=torch.bfloat16))
    assert repr(tg.tensor(1.5, dtype=tg.bfloat16)) == repr(torch.tensor(1.5, dtype=torch.bfloat16))


def test_promotion_finfo_and_names_match_torch():
    for other in ("float16", "float32", "float64", "int8", "uint8", "int64", "bool"):
        assert repr(tg.promote_types(tg.bfloat16, getattr(tg, other))) == \
            repr(torch.promote_types(torch.bfloat16, getattr(torch, other)))
    f, tf = tg.finfo(tg.bfloat16), torch.finfo(torch.bfloat16)
    assert (f.eps, f.max, f.tiny, f.bits, f.resolution) == (tf.eps, tf.max, tf.tiny, tf.bits,
                                                             tf.resolution)
    assert tg.tensor([1.0], dtype=tg.bfloat16).type() == "torch.BFloat16Tensor"


def test_gradients_flow_through_conversions_views_and_cat():
    def run(m):
        x = m.tensor([1.3, 2.7, 3.1, -0.2], requires_grad=True)
        b, b2 = (x * 3).bfloat16(), (x * 2).to(m.bfloat16).reshape(2, 2)
        c = m.cat([b[:2], b2[1]]).float()      # each used once: see the test below
        (c * m.arange(4.0)).sum().backward()
        return c.detach().numpy(), x.grad.numpy()
    for got, want in zip(run(tg), run(torch)):
        np.testing.assert_array_equal(got, want)


def test_a_bfloat16_tensor_used_twice_in_a_graph_cannot_sum_its_gradients():
    x = tg.tensor([1.3, 2.7], requires_grad=True)
    b = x.bfloat16()
    y = tg.cat([b, b]).float().sum()
    with pytest.raises(RuntimeError, match="storage only"):     # known limit: loud
        y.backward()


def test_arithmetic_on_bfloat16_raises_instead_of_differing():
    b = tg.ones(3, dtype=tg.bfloat16)
    for op in (lambda: b * 3.5, lambda: b + b, lambda: b.sum(), lambda: b.exp(),
               lambda: b @ b, lambda: b == b, lambda: b.sigmoid(), lambda: b / 2):
        with pytest.raises(RuntimeError, match="bfloat16 tensors as storage only"):
            op()
    assert (b.float() * 3.5).dtype is tg.float32
    z = tg.zeros(3, dtype=tg.bfloat16)
    z[1] = 2.7                                     # writing values is storage: allowed
    assert z.float().tolist() == torch.tensor([0.0, 2.7, 0.0]).bfloat16().float().tolist()


def test_save_load_and_module_to(tmp_path):
    b = tg.tensor([1.3, -2.7], dtype=tg.bfloat16)
    tg.save({"b": b}, tmp_path / "b.pt")
    back = tg.load(tmp_path / "b.pt")["b"]
    assert back.dtype is tg.bfloat16 and tg.equal(back.float(), b.float())
    assert tg.nn.Linear(2, 2).to(tg.bfloat16).weight.dtype is tg.bfloat16


@pytest.mark.parametrize("backend", ["numpy", "jax"])
def test_compiled_conversions_equal_eager_and_arithmetic_raises(backend):
    if backend == "jax":
        pytest.importorskip("jax")

    def f(x, w):
        b = (x * 3).bfloat16()
        return (b.float() * w).sum(), b, b[1:].float()
    x, w = tg.tensor([1.3, 2.7, 3.1]), tg.tensor([1., 2., 3.], requires_grad=True)
    want = f(x, w)
    g = tg.compile(f) if backend == "numpy" else tg.compile(f, backend="jax")
    for _ in range(2):
        got = g(x, w)
        for a, b in zip(want, got):
            assert a.dtype is b.dtype
            np.testing.assert_array_equal(b.detach().float().numpy(), a.detach().float().numpy())
    got[0].backward()
    np.testing.assert_array_equal(w.grad.numpy(), want[1].float().numpy())
    h = tg.compile(lambda b: b * 2) if backend == "numpy" else \
        tg.compile(lambda b: b * 2, backend="jax")
    with pytest.raises(RuntimeError, match="storage only"):
        h(tg.ones(2, dtype=tg.bfloat16))
