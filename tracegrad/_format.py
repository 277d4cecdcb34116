"""Render tensor data the way ``repr(torch.Tensor)`` does.

This module owns tracegrad's textual tensor representation.  It is a pure
function layer over numpy arrays: given the data and the already-chosen
``key=value`` suffixes (dtype, requires_grad, grad_fn, ...), it reproduces
PyTorch's default printing (precision 4, threshold 1000, edge items 3, line
width 80, automatic scientific notation) character for character.

Rules followed (re-derived from PyTorch's behaviour):

* One formatter is built for the whole tensor (from the summarized data when
  the tensor has more than ``THRESHOLD`` elements).  Integer and bool values
  print with ``str``; floats choose among three styles, looking only at the
  finite non-zero values:
  - scientific (``1.0240e+02``) when max/min > 1000, max > 1e8 or min < 1e-4;
  - "integer" style (``3.``) when every such value is integral;
  - fixed point with ``PRECISION`` decimals otherwise.
  Every element is right-aligned to the widest formatted value.
* 1-D rows wrap so that each line holds ``floor((80 - indent) / (width + 2))``
  elements; nested dimensions are joined with ``dim - 1`` newlines.
* Summarized dimensions keep ``EDGEITEMS`` items at each end around ``...``.
* Suffixes go on the same line unless that line would exceed the line width.

`set_printoptions` changes the four numbers and can force the scientific style, as
`torch.set_printoptions` does. Inside a compiled function a call is replayed on every call,
and formatting a tensor guards the options (Note [Settings read and set] in _effects.py).
"""

import math

import numpy as np

from . import _effects

PRECISION = 4
THRESHOLD = 1000
EDGEITEMS = 3
LINEWIDTH = 80
SCI_MODE = None          # None: chosen per tensor (above); True/False: forced
OPTIONS = ("PRECISION", "THRESHOLD", "EDGEITEMS", "LINEWIDTH", "SCI_MODE")
_PREFIX = "tensor("

# `set_printoptions(profile=...)`: (precision, threshold, edgeitems, linewidth)
_PROFILES = {"default": (4, 1000, 3, 80), "short": (2, 1000, 2, 80),
             "full": (4, math.inf, 3, 80)}


def set_printoptions(precision=None, threshold=None, edgeitems=None, linewidth=None,
                     profile=None, sci_mode=None):
    """Set how tensors print, as `torch.set_printoptions`: a `profile` ('default', 'short'
    or 'full') first, then each option given; `sci_mode` True/False forces scientific
    notation on or off, None (every call that does not pass it) lets each tensor choose."""
    global PRECISION, THRESHOLD, EDGEITEMS, LINEWIDTH, SCI_MODE
    _effects.setting_set(set_printoptions, (), {   # Note [Settings read and set]
        "precision": precision, "threshold": threshold, "edgeitems": edgeitems,
        "linewidth": linewidth, "profile": profile, "sci_mode": sci_mode}, globals(), OPTIONS)
    if profile in _PROFILES:
        PRECISION, THRESHOLD, EDGEITEMS, LINEWIDTH = _PROFILES[profile]
    PRECISION = PRECISION if precision is None else precision
    THRESHOLD = THRESHOLD if threshold is None else threshold
    EDGEITEMS = EDGEITEMS if edgeitems is None else edgeitems
    LINEWIDTH = LINEWIDTH if linewidth is None else linewidth
    SCI_MODE = sci_mode

__all__ = [
    "format_tensor",
    "dtype_suffix_needed",
    "torch_dtype_name",
    "default_suffixes",
]


def torch_dtype_name(np_dtype) -> str:
    """Return PyTorch's name for a numpy dtype, e.g. ``'torch.float32'``."""
    return "torch." + np.dtype(np_dtype).name


def dtype_suffix_needed(np_dtype, default_float_np_dtype, *, empty=False) -> bool:
    """Whether ``repr`` shows ``dtype=...`` for a tensor of ``np_dtype``.

    Non-empty tensors hide the default float dtype (and its complex partner),
    int64 and bool.  Empty tensors (``empty=True``) hide only the default float
    dtype, since no element hints at the type.
    """
    dt = np.dtype(np_dtype)
    default = np.dtype(default_float_np_dtype)
    if dt == default:
        return False
    if empty:
        return True
    complex_default = np.dtype(np.complex128 if default == np.float64 else np.complex64)
    return dt not in (complex_default, np.dtype(np.int64), np.dtype(np.bool_))


def default_suffixes(arr, default_float_np_dtype, *, requires_grad=False,
                     grad_fn_name=None) -> list:
    """Convenience: the suffix list PyTorch would build for a plain CPU tensor.

    The ``size=`` suffix of empty tensors is not included here because
    :func:`format_tensor` adds it itself.
    """
    arr = np.asarray(arr)
    suffixes = []
    if dtype_suffix_needed(arr.dtype, default_float_np_dtype, empty=arr.size == 0):
        suffixes.append("dtype=" + torch_dtype_name(arr.dtype))
    if grad_fn_name is not None:
        suffixes.append(f"grad_fn=<{grad_fn_name}>")
    elif requires_grad:
        suffixes.append("requires_grad=True")
    return suffixes


class _Formatter:
    """Chooses one number style and column width for a whole tensor."""

    def __init__(self, data: np.ndarray):
        self.floating = data.dtype.kind == "f"
        self.int_mode = True
        self.sci_mode = False
        self.width = 1
        flat = data.reshape(-1)
        if not self.floating:
            self.width = max([1] + [len(str(v)) for v in flat.tolist()])
            return
        vals = flat[np.isfinite(flat) & (flat != 0)]
        if vals.size == 0:
            return
        magnitudes = np.abs(vals.astype(np.float64))
        lo, hi = magnitudes.min(), magnitudes.max()
        self.int_mode = bool(np.all(vals == np.ceil(vals)))
        self.sci_mode = bool(hi / lo > 1000.0 or hi > 1.0e8 or lo < 1.0e-4) \
            if SCI_MODE is None else bool(SCI_MODE)
        # integer style later appends a '.', so reserve one extra column
        extra = 1 if self.int_mode and not self.sci_mode else 0
        widest = max(len(self._style(v)) for v in vals.tolist())
        self.width = max(1, widest + extra)

    def _style(self, value: float) -> str:
        if self.sci_mode:
            return f"{value:.{PRECISION}e}"
        if self.int_mode:
            return f"{value:.0f}"
        return f"{value:.{PRECISION}f}"

    def format(self, value) -> str:
        if not self.floating:
            text = str(value)
        elif self.int_mode and not self.sci_mode:
            text = f"{value:.0f}"
            if not (math.isinf(value) or math.isnan(value)):
                text += "."
        else:
            text = self._style(value)
        return text.rjust(self.width)


def _edges(n: int, summarize: bool):
    """Indices to show along a dimension of length ``n`` (None marks '...')."""
    if summarize and n > 2 * EDGEITEMS:
        return list(range(EDGEITEMS)) + [None] + list(range(n - EDGEITEMS, n))
    return list(range(n))


def _summarized(arr: np.ndarray) -> np.ndarray:
    """The sub-array of elements that a summarized print actually shows."""
    if arr.ndim == 0:
        return arr
    keep = [i for i in _edges(arr.shape[0], True) if i is not None]
    if arr.ndim == 1:
        return arr[keep]
    return np.stack([_summarized(arr[i]) for i in keep])


def _vector_str(vec, indent, summarize, fmt: _Formatter) -> str:
    per_line = max(1, math.floor((LINEWIDTH - indent) / (fmt.width + 2)))
    values = vec.tolist()
    items = [" ..." if i is None else fmt.format(values[i])
             for i in _edges(len(values), summarize)]
    lines = [", ".join(items[i:i + per_line]) for i in range(0, len(items), per_line)]
    return "[" + (",\n" + " " * (indent + 1)).join(lines) + "]"


def _tensor_str(arr, indent, summarize, fmt: _Formatter) -> str:
    if arr.ndim == 0:
        return fmt.format(arr.item())
    if arr.ndim == 1:
        return _vector_str(arr, indent, summarize, fmt)
    parts = ["..." if i is None else _tensor_str(arr[i], indent + 1, summarize, fmt)
             for i in _edges(arr.shape[0], summarize)]
    separator = "," + "\n" * (arr.ndim - 1) + " " * (indent + 1)
    return "[" + separator.join(parts) + "]"


def _add_suffixes(text: str, suffixes, indent: int) -> str:
    # PyTorch's running line length over-counts by 2 on the first line and by
    # 1 after a newline; reproduce that so the wrap points agree.
    pieces = [text]
    line_len = len(text) - text.rfind("\n") + 1
    for suffix in suffixes:
        if line_len + len(suffix) + 2 > LINEWIDTH:
            pieces.append(",\n" + " " * indent + suffix)
            line_len = indent + len(suffix)
        else:
            pieces.append(", " + suffix)
            line_len += len(suffix) + 2
    return "".join(pieces) + ")"


def _body(arr: np.ndarray, indent: int) -> str:
    if arr.size == 0:
        return "[]"
    summarize = arr.size > THRESHOLD
    fmt = _Formatter(_summarized(arr) if summarize else arr)
    return _tensor_str(arr, indent, summarize, fmt)


def format_tensor(arr: np.ndarray, suffixes: list) -> str:
    """Return the full PyTorch-style repr of ``arr``.

    ``suffixes`` are ``key=value`` strings (without the leading ', ') chosen
    by the caller, appended in order.  For empty tensors that are not 1-D the
    ``size=(...)`` suffix is prepended here, unless the caller already gave one.
    """
    arr = np.asarray(arr)
    if arr.dtype.kind == "V":              # bfloat16 (ml_dtypes): its values, as float32
        arr = arr.astype(np.float32)
    extra = []
    if arr.size == 0 and arr.ndim != 1 and not any(s.startswith("size=") for s in suffixes):
        extra.append("size=" + str(tuple(int(d) for d in arr.shape)))
    indent = len(_PREFIX)
    return _add_suffixes(_PREFIX + _body(arr, indent), extra + list(suffixes), indent)
