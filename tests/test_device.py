"""Devices, the CUDA namespace, `to`/`cpu`/`cuda`, and the legacy constructors, against
PyTorch's behaviour (checked with torch where it is installed)."""
import pickle

import numpy as np
import pytest

import tracegrad as tg


def test_device_object():
    d = tg.device("cpu")
    assert (d.type, d.index) == ("cpu", None)
    assert repr(d) == "device(type='cpu')" and str(d) == "cpu"
    assert repr(tg.device("cpu:0")) == "device(type='cpu', index=0)"
    assert tg.device("cpu", 0) == tg.device("cpu:0") != d
    assert tg.device(d) == d and hash(tg.device("cpu")) == hash(d)
    assert pickle.loads(pickle.dumps(d)) == d
    assert str(tg.device("cuda:1")) == "cuda:1"        # a valid name, even without CUDA


def test_device_vs_strings_like_torch():
    torch = pytest.importorskip("torch")
    for a, b in [("cpu", "cpu"), ("cpu:0", "cpu")]:
        assert (tg.device(a) == b) == (torch.device(a) == b)
        assert (tg.device(a) == tg.device(b)) == (torch.device(a) == torch.device(b))
    x = tg.zeros(2)
    assert str(x.device) == "cpu" and x.device.type == "cpu" and x.device == tg.device("cpu")


@pytest.mark.parametrize("bad", ["foo", "cpu:x", "cuda:-1", "cpu:01"])
def test_bad_device_strings(bad):
    with pytest.raises(RuntimeError):
        tg.device(bad)


def test_cuda_namespace():
    assert tg.cuda.is_available() is False and tg.cuda.device_count() == 0
    with pytest.raises(RuntimeError, match="not compiled with CUDA"):
        tg.cuda.current_device()
    tg.cuda.manual_seed_all(0)          # no-ops, as in PyTorch's CPU build


@pytest.mark.parametrize("dev", ["cuda", "cuda:0", "mps", tg.device("cuda")])
def test_gpu_placement_raises(dev):
    with pytest.raises(RuntimeError, match="tracegrad"):
        tg.zeros(2, device=dev)
    with pytest.raises(RuntimeError):
        tg.ones(2).to(dev)
    with pytest.raises(AssertionError):    # PyTorch raises AssertionError for CUDA
        tg.tensor([1.0], device=dev)


def test_cuda_method_raises():
    with pytest.raises(RuntimeError, match="CUDA"):
        tg.ones(2).cuda()
    with pytest.raises(RuntimeError, match="CUDA"):
        tg.nn.Linear(2, 2).cuda()


@pytest.mark.parametrize("fn,args", [
    (tg.tensor, ([1.0, 2.0],)), (tg.as_tensor, ([1.0],)), (tg.zeros, (2, 3)), (tg.ones, (2,)),
    (tg.empty, (2,)), (tg.full, ((2,), 3.0)), (tg.eye, (2,)), (tg.arange, (4,)),
    (tg.linspace, (0, 1, 5)), (tg.rand, (2,)), (tg.randn, (2,)), (tg.randint, (0, 5, (3,))),
])
def test_creation_accepts_cpu(fn, args):
    for dev in ("cpu", "cpu:0", tg.device("cpu"), None):
        assert fn(*args, device=dev).device == tg.device("cpu")


def test_like_functions_accept_device():
    x = tg.ones(2, 3)
    for f in (tg.zeros_like, tg.ones_like, tg.rand_like, tg.randn_like, tg.empty_like):
        assert f(x, device="cpu").shape == (2, 3)
    with pytest.raises(RuntimeError):
        tg.zeros_like(x, device="cuda")


def test_set_default_device():
    tg.set_default_device("cpu")
    assert tg.get_default_device() == tg.device("cpu")
    with pytest.raises(RuntimeError):
        tg.set_default_device("cuda")
    tg.set_default_device(None)
    assert tg.zeros(1).device.type == "cpu"


def test_tensor_to_forms():
    x = tg.ones(2)
    assert x.to("cpu") is x and x.to(tg.device("cpu")) is x and x.cpu() is x
    assert x.to("cpu", copy=True) is not x
    assert x.to("cpu", tg.float64).dtype is tg.float64
    assert x.to(device="cpu", dtype=tg.int64).dtype is tg.int64
    assert x.to(tg.zeros(1, dtype=tg.float64)).dtype is tg.float64
    assert x.to(tg.float64, non_blocking=True).dtype is tg.float64
    assert x.to(tg.float32, False, True) is not x          # (dtype, non_blocking, copy)
    with pytest.raises(TypeError):
        x.to("cpu", "cpu")


def test_to_keeps_autograd():
    x = tg.ones(2, requires_grad=True)
    y = x.to("cpu", tg.float64)
    y.sum().backward()
    assert x.grad.dtype is tg.float32 and x.grad.tolist() == [1.0, 1.0]


def test_module_to():
    m = tg.nn.Linear(2, 2)
    assert m.to("cpu") is m and m.cpu() is m
    assert m.to(tg.float64).weight.dtype is tg.float64
    assert m.to("cpu", tg.float32).weight.dtype is tg.float32
    assert m.to(device="cpu", dtype=tg.float64).bias.dtype is tg.float64
    with pytest.raises(RuntimeError):
        m.to("cuda")
    with pytest.raises(TypeError, match="floating point"):
        m.to(tg.int64)


def test_legacy_constructors_like_torch():
    torch = pytest.importorskip("torch")
    for args in [(2, 3), ([1, 2],), ((2, 3),), (np.array([1, 2]),), ()]:
        a, b = tg.Tensor(*args), torch.Tensor(*args)
        assert tuple(a.shape) == tuple(b.shape) and str(a.dtype) == str(b.dtype)
        if args and not isinstance(args[0], int):
            np.testing.assert_array_equal(a.numpy(), b.numpy())
    for name in ("FloatTensor", "DoubleTensor", "LongTensor", "BoolTensor", "IntTensor"):
        a, b = getattr(tg, name)([1, 0]), getattr(torch, name)([1, 0])
        assert str(a.dtype) == str(b.dtype) and a.tolist() == b.tolist()
        assert getattr(tg, name)(3).shape == (3,)
    assert isinstance(tg.zeros(2), tg.FloatTensor) and not isinstance(tg.zeros(2), tg.LongTensor)
    assert isinstance(tg.zeros(2, dtype=tg.long), tg.LongTensor)
    with pytest.raises(TypeError):
        tg.Tensor(3.5)
    with pytest.raises(TypeError):
        tg.Tensor([1.0], dtype=tg.float64)


def test_legacy_tensor_of_tensor_aliases():
    x = tg.ones(2)
    y = tg.Tensor(x)
    y[0] = 5.0
    assert x.tolist() == [5.0, 1.0]
    assert isinstance(x, tg.Tensor) and isinstance(tg.nn.Parameter(x), tg.Tensor)


def test_legacy_follows_default_dtype():
    tg.set_default_dtype(tg.float64)
    try:
        assert tg.Tensor([1]).dtype is tg.float64
    finally:
        tg.set_default_dtype(tg.float32)


def test_new_constructors_take_device():
    x = tg.ones(2, dtype=tg.float64)
    for t in (x.new_zeros(3, device=x.device), x.new_ones((3,), device="cpu"),
              x.new_empty(3, device="cpu"), x.new_full((3,), 2.0, device="cpu"),
              x.new_tensor([1, 2, 3], device="cpu")):
        assert t.shape == (3,) and t.dtype is tg.float64
    with pytest.raises(RuntimeError):
        x.new_zeros(2, device="cuda")


def test_generator_device_argument():
    assert tg.Generator(device="cpu").manual_seed(1).initial_seed() == 1
    assert tg.Generator("cpu") is not None and tg.Generator(5).initial_seed() == 5
    with pytest.raises(RuntimeError):
        tg.Generator(device="cuda")


def test_backends_answer_like_a_cpu_only_torch():
    torch = pytest.importorskip("torch")
    assert tg.backends.mps.is_available() == torch.backends.mps.is_available() is False
    assert tg.backends.cudnn.is_available() == torch.backends.cudnn.is_available()
    tg.backends.cudnn.benchmark = True          # accepted, no effect
    tg.backends.cudnn.deterministic = True
    assert tg.backends.cuda.is_built() is False
    device = tg.device("cuda" if tg.cuda.is_available() else
                       "mps" if tg.backends.mps.is_available() else "cpu")
    assert tg.zeros(2).to(device).device == device


def test_type_with_legacy_names_like_torch():
    torch = pytest.importorskip("torch")
    x, y = tg.ones(2), torch.ones(2)
    assert x.type() == y.type() == "torch.FloatTensor"
    for a, b in [(tg.LongTensor, torch.LongTensor), ("torch.DoubleTensor", "torch.DoubleTensor"),
                 (tg.int32, torch.int32), (tg.BoolTensor, torch.BoolTensor)]:
        assert str(x.type(a).dtype) == str(y.type(b).dtype)
    with pytest.raises(ValueError, match="invalid type"):
        x.type("foo")
