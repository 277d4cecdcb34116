"""`tg.save` / `tg.load`: round trips of state_dicts and optimizer state, atomic writes
under simulated crashes, clear errors for truncated/corrupt/foreign files, and no pickle
ever executed; plus `Module.load_state_dict` error reporting against PyTorch."""
import builtins
import io
import json
import math
import os
import pickle
import zipfile
from collections import OrderedDict

import numpy as np
import pytest

import tracegrad as tg
from tracegrad.serialization import CheckpointError


def _model():
    tg.manual_seed(0)
    return tg.nn.Sequential(tg.nn.Linear(3, 4), tg.nn.BatchNorm1d(4), tg.nn.ReLU(),
                            tg.nn.Linear(4, 2))


def _train(model, opt, steps, seed=1):
    gen = tg.Generator().manual_seed(seed)
    for _ in range(steps):
        x = tg.randn(8, 3, generator=gen)
        opt.zero_grad()
        (model(x) ** 2).mean().backward()
        opt.step()


def _roundtrip(obj):
    buf = io.BytesIO()
    tg.save(obj, buf)
    buf.seek(0)
    return tg.load(buf)


def _same(a, b):
    assert type(a) is type(b), (a, b)
    if isinstance(a, tg.Tensor):
        assert a.dtype is b.dtype and a.shape == b.shape and a.requires_grad == b.requires_grad
        np.testing.assert_array_equal(a.detach().numpy(), b.detach().numpy())
    elif isinstance(a, dict):
        assert list(a) == list(b)
        for k in a:
            _same(a[k], b[k])
    elif isinstance(a, (list, tuple)):
        assert len(a) == len(b)
        for x, y in zip(a, b):
            _same(x, y)
    elif isinstance(a, float) and math.isnan(a):
        assert math.isnan(b)
    else:
        assert a == b


def test_nested_values_round_trip():
    obj = {
        "f32": tg.randn(2, 3), "f64": tg.randn(4, dtype=tg.float64),
        "f16": tg.ones(3, dtype=tg.float16), "i64": tg.arange(5), "i32": tg.arange(3, dtype=tg.int32),
        "b": tg.tensor([True, False]), "scalar": tg.tensor(2.5), "empty": tg.zeros(0, 3),
        "noncontig": tg.arange(12.0).reshape(3, 4).t(), "rg": tg.ones(2, requires_grad=True),
        "param": tg.nn.Parameter(tg.ones(2)), "frozen": tg.nn.Parameter(tg.ones(1), False),
        "nums": [1, 2.5, -0.0, float("inf"), float("-inf"), float("nan"), True, None, "s"],
        "tuple": (1, (2, "x"), []), 7: "int key", (1, 2): "tuple key", "nested": {"a": {"b": [{}]}},
        "dtype": tg.float64, "device": tg.device("cpu"), "np": np.arange(4, dtype=np.int16),
        "od": OrderedDict([("z", 1), ("a", 2)]),
    }
    back = _roundtrip(obj)
    assert isinstance(back["param"], tg.nn.Parameter) and back["param"].requires_grad
    assert isinstance(back["frozen"], tg.nn.Parameter) and not back["frozen"].requires_grad
    assert back["rg"].is_leaf and back["rg"].requires_grad
    np.testing.assert_array_equal(back.pop("np"), obj.pop("np"))
    _same(obj, back)


def test_same_tensor_twice_loads_as_one_object():
    t = tg.ones(3)
    a, b = _roundtrip([t, {"again": t}])
    assert a is b["again"]


def test_unsupported_object_is_a_type_error():
    with pytest.raises(TypeError, match="cannot store an object of type"):
        tg.save({"model": tg.nn.Linear(2, 2)}, io.BytesIO())
    with pytest.raises(TypeError):
        tg.save(lambda: 0, io.BytesIO())


@pytest.mark.parametrize("make_opt", [
    lambda ps: tg.optim.Adam(ps, lr=0.01, amsgrad=True),
    lambda ps: tg.optim.AdamW(ps, lr=0.01),
    lambda ps: tg.optim.SGD(ps, lr=0.05, momentum=0.9, nesterov=True),
])
def test_resume_training_from_checkpoint_is_exact(tmp_path, make_opt):
    straight = _model()
    opt = make_opt(straight.parameters())
    _train(straight, opt, 6)

    model = _model()
    opt = make_opt(model.parameters())
    _train(model, opt, 3)
    path = tmp_path / "ckpt.pt"
    tg.save({"model": model.state_dict(), "opt": opt.state_dict(), "epoch": 3}, path)

    ckpt = tg.load(path)
    assert ckpt["epoch"] == 3 and set(ckpt["opt"]) == {"state", "param_groups"}
    assert ckpt["opt"]["param_groups"][0]["params"] == list(range(6))
    model2 = _model()
    model2.load_state_dict(ckpt["model"])
    opt2 = make_opt(model2.parameters())
    opt2.load_state_dict(ckpt["opt"])
    gen = tg.Generator().manual_seed(1)
    for _ in range(3):                     # replay the first 3 batches' randomness
        tg.randn(8, 3, generator=gen)
    for _ in range(3):
        x = tg.randn(8, 3, generator=gen)
        opt2.zero_grad()
        (model2(x) ** 2).mean().backward()
        opt2.step()
    for (k, a), b in zip(straight.state_dict().items(), model2.state_dict().values()):
        np.testing.assert_array_equal(a.numpy(), b.numpy(), err_msg=k)


def test_file_objects_and_paths(tmp_path):
    path = tmp_path / "a.tg"
    with open(path, "wb") as fh:
        tg.save({"x": tg.ones(2)}, fh)
    with open(path, "rb") as fh:
        assert tg.load(fh)["x"].tolist() == [1.0, 1.0]
    tg.save([1, 2], str(path))
    assert tg.load(str(path)) == [1, 2]
    # the format is an npz-style zip of .npy files plus a JSON manifest
    with zipfile.ZipFile(path) as zf:
        assert json.loads(zf.read("tracegrad_manifest.json"))["format"] == "tracegrad.checkpoint"
    tg.save(tg.arange(3), path)
    with np.load(path, allow_pickle=False) as npz:
        np.testing.assert_array_equal(npz["tensors/0"], [0, 1, 2])


def test_map_location():
    buf = io.BytesIO()
    tg.save({"w": tg.ones(2)}, buf)
    for loc in (None, "cpu", tg.device("cpu"), {"cuda:0": "cpu"}):
        buf.seek(0)
        assert tg.load(buf, map_location=loc)["w"].device == tg.device("cpu")
    buf.seek(0)
    assert tg.load(buf, map_location=lambda t, loc: t * 2)["w"].tolist() == [2.0, 2.0]
    buf.seek(0)
    with pytest.raises(RuntimeError, match="CUDA"):
        tg.load(buf, map_location="cuda")
    buf.seek(0)
    assert tg.load(buf, weights_only=False)["w"].shape == (2,)


# ---------------- atomic writes ----------------
def _leftovers(folder):
    return [p for p in os.listdir(folder) if p.endswith(".tmp")]


def test_crash_at_replace_leaves_old_file(tmp_path, monkeypatch):
    path = tmp_path / "ckpt.pt"
    tg.save({"v": 1}, path)

    def boom(src, dst):
        raise OSError("simulated crash before rename")
    monkeypatch.setattr(os, "replace", boom)
    with pytest.raises(OSError, match="simulated"):
        tg.save({"v": 2, "big": tg.ones(1000)}, path)
    monkeypatch.undo()
    assert tg.load(path) == {"v": 1}
    assert _leftovers(tmp_path) == []


def test_crash_mid_write_leaves_old_file(tmp_path, monkeypatch):
    path = tmp_path / "ckpt.pt"
    tg.save({"v": 1}, path)
    real = np.lib.format.write_array
    calls = []

    def flaky(fh, arr, **kw):
        calls.append(1)
        if len(calls) == 2:
            raise KeyboardInterrupt        # even a non-Exception interruption cleans up
        return real(fh, arr, **kw)
    monkeypatch.setattr(np.lib.format, "write_array", flaky)
    with pytest.raises(KeyboardInterrupt):
        tg.save({"a": tg.ones(3), "b": tg.ones(4)}, path)
    monkeypatch.undo()
    assert tg.load(path) == {"v": 1}
    assert _leftovers(tmp_path) == []


def test_save_fsyncs_before_replace(tmp_path, monkeypatch):
    order = []
    real_fsync, real_replace = os.fsync, os.replace
    monkeypatch.setattr(os, "fsync", lambda fd: (order.append("fsync"), real_fsync(fd))[1])
    monkeypatch.setattr(os, "replace", lambda a, b: (order.append("replace"),
                                                      real_replace(a, b))[1])
    tg.save({"x": tg.ones(2)}, tmp_path / "c.pt")
    assert order[:2] == ["fsync", "replace"]


def test_new_file_permissions_follow_umask(tmp_path):
    old = os.umask(0o022)
    try:
        tg.save([1], tmp_path / "p.pt")
    finally:
        os.umask(old)
    assert os.stat(tmp_path / "p.pt").st_mode & 0o777 == 0o644


# ---------------- damaged and foreign files ----------------
def _good_bytes():
    buf = io.BytesIO()
    tg.save({"w": tg.randn(50), "step": 3}, buf)
    return buf.getvalue()


@pytest.mark.parametrize("keep", [0, 1, 10, 100, 0.5, 0.9, -1])
def test_truncated_file_gives_clear_error(tmp_path, keep):
    data = _good_bytes()
    n = int(len(data) * keep) if isinstance(keep, float) else (keep % len(data))
    path = tmp_path / "trunc.pt"
    path.write_bytes(data[:n])
    with pytest.raises(RuntimeError, match="not a valid tracegrad checkpoint") as e:
        tg.load(path)
    assert str(path) in str(e.value) and isinstance(e.value, CheckpointError)


def test_flipped_byte_in_tensor_data_is_detected():
    data = bytearray(_good_bytes())
    i = data.index(b"\x93NUMPY") + 200             # inside the first array's payload
    data[i] ^= 0xFF
    with pytest.raises(CheckpointError, match="<BytesIO>"):
        tg.load(io.BytesIO(bytes(data)))


def test_not_a_checkpoint(tmp_path):
    path = tmp_path / "notes.txt"
    path.write_text("hello")
    with pytest.raises(RuntimeError, match="notes.txt"):
        tg.load(path)
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w") as zf:
        zf.writestr("other.json", "{}")
    buf.seek(0)
    with pytest.raises(CheckpointError, match="no tracegrad_manifest.json"):
        tg.load(buf)
    with pytest.raises(FileNotFoundError):
        tg.load(tmp_path / "missing.pt")


class _Evil:
    def __reduce__(self):
        return (exec, ("import builtins; builtins._tracegrad_pwned = True",))


def _zip_with(manifest, entries):
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w") as zf:
        zf.writestr("tracegrad_manifest.json", json.dumps(manifest))
        for name, data in entries.items():
            zf.writestr(name, data)
    buf.seek(0)
    return buf


def test_pickle_inside_is_never_executed(tmp_path):
    npy = io.BytesIO()
    np.save(npy, np.array([_Evil()], dtype=object), allow_pickle=True)
    manifest = {"format": "tracegrad.checkpoint", "version": 1,
                "root": {"tensor": 0, "dtype": "float32"}}
    buf = _zip_with(manifest, {"tensors/0.npy": npy.getvalue()})
    with pytest.raises(CheckpointError, match="tensors/0.npy"):
        tg.load(buf)
    path = tmp_path / "evil.pkl"                     # a plain pickle file
    path.write_bytes(pickle.dumps({"w": _Evil()}))
    with pytest.raises(CheckpointError):
        tg.load(path)
    assert not hasattr(builtins, "_tracegrad_pwned")


def test_torch_checkpoint_is_refused_with_a_hint(tmp_path):
    torch = pytest.importorskip("torch")
    path = tmp_path / "torch.pt"
    torch.save({"w": torch.ones(2)}, path)
    with pytest.raises(CheckpointError, match="PyTorch pickle checkpoint"):
        tg.load(path)


@pytest.mark.parametrize("root,why", [
    ({"tensor": 3, "dtype": "float32"}, "missing"),
    ({"tensor": 0, "dtype": "int64"}, "manifest says"),
    ({"bogus": 1}, "unknown manifest entry"),
    ({"tensor": "0"}, "bad tensor index"),
    ({"dict": [[{"list": []}, 1]]}, "unhashable"),
    ({"tensor": 0, "dtype": "float32", "requires_grad": True, "parameter": False}, None),
])
def test_malformed_manifests(root, why):
    npy = io.BytesIO()
    np.save(npy, np.ones(2, np.float32))
    buf = _zip_with({"format": "tracegrad.checkpoint", "version": 1, "root": root},
                    {"tensors/0.npy": npy.getvalue()})
    if why is None:
        assert tg.load(buf).requires_grad
        return
    with pytest.raises(CheckpointError, match=why):
        tg.load(buf)


def test_wrong_format_and_version():
    for manifest, why in [({"format": "x", "version": 1, "root": 1}, "does not describe"),
                          ({"format": "tracegrad.checkpoint", "version": 99, "root": 1},
                           "version 99")]:
        with pytest.raises(CheckpointError, match=why):
            tg.load(_zip_with(manifest, {}))
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w") as zf:
        zf.writestr("tracegrad_manifest.json", "{not json")
    buf.seek(0)
    with pytest.raises(CheckpointError, match="not valid JSON"):
        tg.load(buf)


# ---------------- Module.load_state_dict reporting ----------------
def _load_report(lib, sd_edit, strict):
    nn = lib.nn
    m = nn.Sequential(nn.Linear(3, 4), nn.BatchNorm1d(4), nn.Linear(4, 2))
    sd = dict(m.state_dict())
    sd_edit(lib, sd)
    try:
        r = m.load_state_dict(sd, strict=strict)
        return ("ok", type(r).__name__, list(r.missing_keys), list(r.unexpected_keys), repr(r))
    except RuntimeError as e:
        return ("error", str(e))


def _drop_bias(lib, sd):
    del sd["0.bias"]


def _extra(lib, sd):
    sd["extra.w"] = lib.zeros(1)
    sd["0.weight.x"] = lib.zeros(1)


def _both_and_shape(lib, sd):
    _drop_bias(lib, sd)
    _extra(lib, sd)
    sd["2.weight"] = lib.zeros(5, 4)


@pytest.mark.parametrize("edit", [_drop_bias, _extra, _both_and_shape, lambda lib, sd: None])
@pytest.mark.parametrize("strict", [True, False])
def test_load_state_dict_reports_like_torch(edit, strict):
    torch = pytest.importorskip("torch")
    assert _load_report(tg, edit, strict) == _load_report(torch, edit, strict)


def test_every_single_byte_flip_is_detected_or_harmless():
    """Flip each byte of a small checkpoint in turn: loading either raises CheckpointError
    or gives back exactly the saved values (a flip in, say, a zip timestamp)."""
    buf = io.BytesIO()
    obj = {"w": tg.arange(6.0).reshape(2, 3), "n": 3, "s": "abc"}
    tg.save(obj, buf)
    data = buf.getvalue()
    detected = 0
    for i in range(len(data)):
        bad = bytearray(data)
        bad[i] ^= 0x5A
        try:
            back = tg.load(io.BytesIO(bytes(bad)))
        except CheckpointError:
            detected += 1
            continue
        _same(obj, back)
    assert detected > len(data) // 2


def test_every_truncation_is_detected():
    data = _good_bytes()
    for n in range(len(data)):
        with pytest.raises(CheckpointError):
            tg.load(io.BytesIO(data[:n]))
