"""More of `nn.functional`: layer_norm, silu, pooling, binary cross-entropy (PyTorch's
signatures, defaults, checks and error messages).

Each function checks its arguments the way PyTorch does, then calls one primitive
(`ops/normalization.py`, `ops/activation.py`, `ops/pool.py`, `ops/bce.py`), so a result prints the same
grad_fn as PyTorch's. Attention lives in `_attention_functional.py`.
"""
import numbers

import numpy as np

from .. import _mode
from .._dtype import scalar_type_name
from .. import ops as O
from .._errors import (TracegradNotImplementedError, TracegradRuntimeError, TracegradTypeError,
                       TracegradValueError, op_error)
from ..ops import activation as _act
from ..ops import bce as _bce
from ..ops import normalization as _norm
from ..ops import pool as _pool
from ._losses import _reduction


def _float_only(input, kernel):
    """PyTorch's NotImplementedError for a kernel that has no integer or bool version."""
    if not input.is_floating_point():
        raise op_error(TracegradNotImplementedError, kernel, f'"{kernel}" not implemented for '
                       f"'{scalar_type_name(input.dtype)}'")


# ---------------- normalization and activations ----------------

def layer_norm(input, normalized_shape, weight=None, bias=None, eps=1e-5):
    """Normalize over the trailing `normalized_shape` dims (biased variance), then
    `* weight + bias`; one NativeLayerNormBackward0 node.

    >>> layer_norm(tracegrad.tensor([[1.0, 3.0]]), (2,))
    tensor([[-1.0000,  1.0000]])
    """
    if isinstance(normalized_shape, numbers.Integral):
        raise TracegradTypeError("layer_norm(): argument 'normalized_shape' (position 2) must "
                                 "be tuple of ints, not int")
    shape = tuple(normalized_shape)
    _float_only(input, "LayerNormKernelImpl")
    k = len(shape)
    if tuple(input.shape[input.ndim - k:]) != shape or k > input.ndim or k == 0:
        raise op_error(TracegradRuntimeError, "layer_norm",
                       f"Given normalized_shape={list(shape)}, expected input with shape "
                       f"[*{''.join(f', {s}' for s in shape)}], but got input of size"
                       f"{list(input.shape)}")
    for name, t in (("weight", weight), ("bias", bias)):
        if t is None:
            continue
        if tuple(t.shape) != shape:
            raise op_error(TracegradRuntimeError, "layer_norm",
                           f"Expected {name} to be of same shape as normalized_shape, but got "
                           f"{name} of shape {list(t.shape)} and normalized_shape = "
                           f"{list(shape)}")
        if t.dtype is not input.dtype:
            raise op_error(TracegradRuntimeError, "layer_norm",
                           "mixed dtype (CPU): all inputs must share same datatype.")
    return _norm.layer_norm(input, k, weight, bias, eps)


def silu(input, inplace=False):
    """`input * sigmoid(input)` (SiluBackward0)."""
    _float_only(input, "silu_cpu")
    return _act.silu_(input) if inplace else _act.silu(input)


# ---------------- pooling ----------------

def _pair(v, name, op, allow_empty=False):
    t = tuple(v) if isinstance(v, (tuple, list)) else (v,)
    if allow_empty and len(t) == 0:
        return None
    if len(t) == 1:
        t = t * 2
    if len(t) != 2:
        raise op_error(TracegradRuntimeError, op, f"{op}: {name} must either be a single int, "
                       "or a tuple of two ints")
    return tuple(int(i) for i in t)


def _pool_args(op, input, kernel_size, stride, padding, dilation):
    """Checked (kernel, stride, padding, dilation) pairs, and whether input is unbatched."""
    if input.ndim not in (3, 4):
        raise op_error(TracegradRuntimeError, op, "Expected 3D or 4D (batch mode) tensor for "
                       f"input with possibly 0 batch size and non-zero dimensions for input, "
                       f"but got: {list(input.shape)}")
    k = _pair(kernel_size, "kernel_size", op)
    s = _pair(stride, "stride", op, allow_empty=True) if stride is not None else None
    s = k if s is None else s
    p, d = _pair(padding, "padding", op), _pair(dilation, "dilation", op)
    if min(k) <= 0:
        raise op_error(TracegradRuntimeError, op, "kernel size should be greater than zero, "
                       f"but got kH: {k[0]} kW: {k[1]}")
    if min(s) <= 0:
        raise op_error(TracegradRuntimeError, op, "stride should be greater than zero, but "
                       f"got dH: {s[0]} dW: {s[1]}")
    if min(d) <= 0:
        raise op_error(TracegradRuntimeError, op, "dilation should be greater than zero, but "
                       f"got dilationH: {d[0]} dilationW: {d[1]}")
    for kk, pp, dd in zip(k, p, d):
        if pp < 0 or pp > ((kk - 1) * dd + 1) // 2:
            raise op_error(TracegradRuntimeError, op, "pad should be at most half of effective "
                           f"kernel size, but got pad={pp}, kernel_size={kk} and dilation={dd}")
    return k, s, p, d


def _check_out(op, input, out_hw):
    if min(out_hw) < 1:
        c, h, w = input.shape[-3:]
        raise op_error(TracegradRuntimeError, op, f"Given input size: ({c}x{h}x{w}). "
                       f"Calculated output size: ({c}x{out_hw[0]}x{out_hw[1]}). Output size "
                       "is too small")


def max_pool2d(input, kernel_size, stride=None, padding=0, dilation=1, ceil_mode=False,
               return_indices=False):
    """Max over each kh x kw window of (N, C, H, W) or (C, H, W) input (-inf padding).

    `return_indices=True` also returns each maximum's flat index `h * W + w` in its plane.

    >>> max_pool2d(tracegrad.arange(16.).view(1, 1, 4, 4), 2)
    tensor([[[[ 5.,  7.],
              [13., 15.]]]])
    """
    k, s, p, d = _pool_args("max_pool2d", input, kernel_size, stride, padding, dilation)
    if input.dtype.name == "bool":
        raise op_error(TracegradNotImplementedError, "max_pool2d", "\"max_pool2d\" not "
                       "implemented for 'Bool'")
    out_hw = tuple(_pool.out_len(n, kk, ss, pp, dd, ceil_mode)
                   for n, kk, ss, pp, dd in zip(input.shape[-2:], k, s, p, d))
    _check_out("max_pool2d", input, out_hw)
    return _pool.max_pool2d(input, k, s, p, d, ceil_mode, return_indices)


def max_pool2d_with_indices(input, kernel_size, stride=None, padding=0, dilation=1,
                            ceil_mode=False, return_indices=True):
    return max_pool2d(input, kernel_size, stride, padding, dilation, ceil_mode, True)


def avg_pool2d(input, kernel_size, stride=None, padding=0, ceil_mode=False,
               count_include_pad=True, divisor_override=None):
    """Mean over each kh x kw window (zero padding counted when `count_include_pad`)."""
    k, s, p, _ = _pool_args("avg_pool2d", input, kernel_size, stride, padding, 1)
    if input.dtype.name not in ("float16", "float32", "float64", "int64"):
        raise op_error(TracegradNotImplementedError, "avg_pool2d", "\"avg_pool2d\" not "
                       f"implemented for '{scalar_type_name(input.dtype)}'")
    if divisor_override is not None and divisor_override == 0:
        raise op_error(TracegradRuntimeError, "avg_pool2d", "divisor must be not zero")
    out_hw = tuple(_pool.out_len(n, kk, ss, pp, 1, ceil_mode)
                   for n, kk, ss, pp in zip(input.shape[-2:], k, s, p))
    _check_out("avg_pool2d", input, out_hw)
    return _pool.avg_pool2d(input, k, s, p, ceil_mode, count_include_pad, divisor_override)


def adaptive_avg_pool2d(input, output_size):
    """Average pooling to a fixed `output_size` (int, pair; None keeps that input size):
    output (i, j) averages rows floor(i*H/OH) .. ceil((i+1)*H/OH) and likewise columns."""
    if input.ndim not in (3, 4) or min(input.shape[-2:], default=0) == 0:
        raise op_error(TracegradRuntimeError, "adaptive_avg_pool2d",
                       "adaptive_avg_pool2d(): Expected 3D or 4D tensor, but got "
                       f"{list(input.shape)}")
    _float_only(input, "adaptive_avg_pool2d")
    size = tuple(output_size) if isinstance(output_size, (tuple, list)) else (output_size,) * 2
    if len(size) != 2:
        raise op_error(TracegradRuntimeError, "adaptive_avg_pool2d",
                       "adaptive_avg_pool2d: output_size must be 2")
    size = tuple(int(n if o is None else o) for o, n in zip(size, input.shape[-2:]))
    if size == (1, 1):              # PyTorch takes a mean here too (MeanBackward1)
        return O.mean(input, (-2, -1), keepdim=True)
    return _pool.adaptive_avg_pool2d(input, size)


# ---------------- binary cross-entropy ----------------

def _check_bce(op, input, target, weight, pos_weight=None):
    if tuple(target.shape) != tuple(input.shape):
        msg = (f"Using a target size ({target.shape}) that is different to the input size "
               f"({input.shape}) is deprecated. Please ensure they have the same size."
               if op == "binary_cross_entropy" else
               f"Target size ({target.shape}) must be the same as input size ({input.shape})")
        raise op_error(TracegradValueError, op, msg)
    for t in (target, weight, pos_weight):
        if t is not None and t.dtype is not input.dtype:
            raise op_error(TracegradRuntimeError, op, f"Found dtype {_scalar(t.dtype)} but "
                           f"expected {_scalar(input.dtype)}")
    for name, t in (("weight", weight), ("pos_weight", pos_weight)):
        if t is not None and t.requires_grad and _mode.is_grad_enabled():
            raise op_error(TracegradRuntimeError, op, f"The function '{op}' is not "
                           f"differentiable with respect to argument '{name}'. This input "
                           "cannot have requires_grad True.")
        if t is not None:
            try:
                if np.broadcast_shapes(tuple(t.shape), tuple(input.shape)) != tuple(input.shape):
                    raise ValueError
            except ValueError:
                raise op_error(TracegradRuntimeError, op, f"output with shape "
                               f"{list(input.shape)} doesn't match the broadcast shape "
                               f"{list(_broadcast_or(t.shape, input.shape))}") from None


def _broadcast_or(a, b):
    try:
        return np.broadcast_shapes(tuple(a), tuple(b))
    except ValueError:
        return tuple(a)


def _scalar(dtype):
    return scalar_type_name(dtype)


def binary_cross_entropy(input, target, weight=None, size_average=None, reduce=None,
                         reduction="mean"):
    """`-weight * (target * log(input) + (1 - target) * log(1 - input))`, logs clamped at
    -100; `input` must hold probabilities in [0, 1].

    >>> binary_cross_entropy(tracegrad.tensor([0.5]), tracegrad.tensor([1.0]))
    tensor(0.6931)
    """
    reduction = _reduction(reduction, size_average, reduce)
    _float_only(input, "binary_cross_entropy")
    _check_bce("binary_cross_entropy", input, target, weight)
    return _bce.binary_cross_entropy(input, target, weight, reduction)


def binary_cross_entropy_with_logits(input, target, weight=None, size_average=None,
                                     reduce=None, reduction="mean", pos_weight=None):
    """BCE of `sigmoid(input)` computed stably from logits; `pos_weight` scales the positive
    term per class (broadcast along the last dim)."""
    reduction = _reduction(reduction, size_average, reduce)
    _float_only(input, "log_sigmoid_cpu")
    _check_bce("binary_cross_entropy_with_logits", input, target, weight, pos_weight)
    return _bce.binary_cross_entropy_with_logits(input, target, weight, pos_weight, reduction)
