"""The checkpoint format: a Python object <-> (JSON manifest, list of numpy arrays).

Note [Checkpoint format]
A checkpoint is a zip archive (stored, uncompressed, like numpy's `.npz`) holding
  - `tracegrad_manifest.json`: `{"format": "tracegrad.checkpoint", "version": 1,
    "root": <value>}`;
  - `tensors/<i>.npy`: one numpy `.npy` file per distinct tensor or array, read back with
    `allow_pickle=False`.
A <value> is JSON: `null`, `true`/`false`, an integer, a finite float, a string, or an
object with one tag:
  {"float": "inf" | "-inf" | "nan"}          non-finite floats
  {"list": [v...]}  {"tuple": [v...]}        sequences
  {"dict": [[k, v]...]}                       dict (keys are values too: str, int, tuple...)
  {"odict": [[k, v]...], "metadata": v?}      OrderedDict (a state_dict's `_metadata` kept)
  {"tensor": i, "dtype": "float32", "requires_grad": b, "parameter": b}
  {"ndarray": i, "dtype": "int64"}
  {"dtype": "float32"}  {"device": "cpu"}
Nothing in a checkpoint names code to run: loading only builds the types above.

Sharing: a tensor object reached twice is stored once and loads as one object; distinct
tensors that share memory (views) load as independent copies. `.grad` is not saved (as in
PyTorch). Dict subclasses other than OrderedDict load as plain dicts.
"""
import math
from collections import OrderedDict

import numpy as np

from . import _dtype as D
from ._device import device
from ._errors import TracegradRuntimeError, TracegradTypeError
from ._tensor import Tensor, from_array

FORMAT = "tracegrad.checkpoint"
VERSION = 1
MANIFEST = "tracegrad_manifest.json"


class CheckpointError(TracegradRuntimeError):
    """A file is not a readable tracegrad checkpoint (corrupt, truncated or foreign)."""


def tensor_entry(i):
    return f"tensors/{i}.npy"


class Encoder:
    """Walks an object, returning its JSON value and collecting arrays in `self.arrays`."""

    def __init__(self):
        self.arrays = []
        self._memo = {}

    def encode(self, obj):
        if obj is None or isinstance(obj, (bool, str)):
            return obj
        if isinstance(obj, (np.bool_,)):
            return bool(obj)
        if isinstance(obj, (int, np.integer)):
            return int(obj)
        if isinstance(obj, (float, np.floating)):
            x = float(obj)
            return x if math.isfinite(x) else {"float": repr(x)}
        if isinstance(obj, Tensor):
            return self._tensor(obj)
        if isinstance(obj, np.ndarray):
            return {"ndarray": self._array(obj, obj), "dtype": obj.dtype.name}
        return self._container(obj)

    def _container(self, obj):
        if isinstance(obj, D.dtype):
            return {"dtype": obj.name}
        if isinstance(obj, device):
            return {"device": str(obj)}
        if isinstance(obj, tuple):
            return {"tuple": [self.encode(v) for v in obj]}
        if isinstance(obj, list):
            return {"list": [self.encode(v) for v in obj]}
        if isinstance(obj, dict):
            pairs = [[self.encode(k), self.encode(v)] for k, v in obj.items()]
            if not isinstance(obj, OrderedDict):
                return {"dict": pairs}
            out = {"odict": pairs}
            meta = getattr(obj, "_metadata", None)
            if meta is not None:
                out["metadata"] = self.encode(meta)
            return out
        raise TracegradTypeError(
            f"tracegrad.save cannot store an object of type {type(obj).__qualname__}: the "
            "safe checkpoint format holds tensors, numpy arrays, numbers, strings, None, "
            "bools, dtypes, devices, and lists, tuples and dicts of them. Save "
            "`module.state_dict()` / `optimizer.state_dict()` rather than the objects.")

    def _tensor(self, t):
        from .nn.parameter import Parameter
        return {"tensor": self._array(t, t._data), "dtype": t.dtype.name,
                "requires_grad": bool(t.requires_grad),
                "parameter": isinstance(t, Parameter)}

    def _array(self, owner, arr):
        key = id(owner)
        if key in self._memo:
            return self._memo[key][0]
        i = len(self.arrays)
        self.arrays.append(arr if arr.flags.c_contiguous else arr.copy(order="C"))
        self._memo[key] = (i, owner)       # keep `owner` alive so ids stay unique
        return i


_TAGS = ("float", "list", "tuple", "dict", "odict", "tensor", "ndarray", "dtype", "device")


class Decoder:
    """Rebuilds the object from a manifest value; `read(i)` returns array i (checked)."""

    def __init__(self, read, map_tensor, where):
        self._read = read
        self._map = map_tensor
        self._where = where
        self._memo = {}

    def bad(self, why):
        return CheckpointError(f"{self._where} is not a valid tracegrad checkpoint: {why}")

    def decode(self, v):
        if v is None or isinstance(v, (bool, int, float, str)):
            return v
        if isinstance(v, list):
            raise self.bad("the manifest holds a bare JSON list")
        if not isinstance(v, dict) or not v:
            raise self.bad(f"unexpected manifest value {v!r:.80}")
        tag = next((t for t in _TAGS if t in v), None)
        if tag is None:
            raise self.bad(f"unknown manifest entry with keys {sorted(v)}")
        return getattr(self, "_" + tag)(v)

    def _float(self, v):
        if v["float"] not in ("inf", "-inf", "nan"):
            raise self.bad(f"bad float {v['float']!r}")
        return float(v["float"])

    def _list(self, v):
        return [self.decode(x) for x in self._seq(v["list"])]

    def _tuple(self, v):
        return tuple(self.decode(x) for x in self._seq(v["tuple"]))

    def _seq(self, s):
        if not isinstance(s, list):
            raise self.bad("a sequence entry is not a JSON list")
        return s

    def _pairs(self, pairs):
        out = []
        for p in self._seq(pairs):
            if not isinstance(p, list) or len(p) != 2:
                raise self.bad("a dict entry is not a [key, value] pair")
            k = self.decode(p[0])
            try:
                hash(k)
            except TypeError:
                raise self.bad(f"unhashable dict key {k!r:.60}") from None
            out.append((k, self.decode(p[1])))
        return out

    def _dict(self, v):
        return dict(self._pairs(v["dict"]))

    def _odict(self, v):
        d = OrderedDict(self._pairs(v["odict"]))
        if "metadata" in v:
            d._metadata = self.decode(v["metadata"])
        return d

    def _dtype(self, v):
        try:
            return D._FROM_NP[np.dtype(v["dtype"])]
        except (KeyError, TypeError):
            raise self.bad(f"unknown dtype {v['dtype']!r}") from None

    def _device(self, v):
        return device(v["device"])

    def _ndarray(self, v):
        return self._array(v["ndarray"], v.get("dtype"))

    def _tensor(self, v):
        i = v["tensor"]
        if ("t", i) in self._memo:
            return self._memo[("t", i)]
        arr = self._array(i, v.get("dtype"))
        if arr.dtype not in D._FROM_NP:
            raise self.bad(f"tensor {i} has unsupported dtype {arr.dtype}")
        t = from_array(arr)
        rg = bool(v.get("requires_grad", False))
        if rg and not D.is_float_np(arr.dtype):
            raise self.bad(f"tensor {i} of dtype {arr.dtype} is marked requires_grad")
        if v.get("parameter"):
            from .nn.parameter import Parameter
            t = Parameter(t, requires_grad=rg)
        elif rg:
            t.requires_grad_(True)
        t = self._map(t)
        self._memo[("t", i)] = t
        return t

    def _array(self, i, dtype):
        if not isinstance(i, int) or isinstance(i, bool) or i < 0:
            raise self.bad(f"bad tensor index {i!r}")
        arr = self._read(i)
        if dtype == "bfloat16" and arr.dtype.kind == "V" and arr.dtype.itemsize == 2:
            arr = arr.view(D.bfloat16.np)  # .npy keeps ml_dtypes' bfloat16 as raw 2 bytes
        if dtype is not None and arr.dtype.name != dtype:
            raise self.bad(f"tensor {i} holds {arr.dtype.name} data but the manifest says "
                           f"{dtype}")
        return arr
