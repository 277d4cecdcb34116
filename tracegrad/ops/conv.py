"""Patch primitives for convolution: `im2col` (unfold image patches into columns) and its
adjoint `col2im` (sum columns back into an image).

Both are linear and each is the other's VJP, so gradients of any order of a convolution
built on them (see `nn.functional.conv2d`) come from these two declarations.
Attributes are tuples of ints: `kernel_size`, `stride`, `dilation` as (h, w), `padding` as
((top, bottom), (left, right)) zero padding (asymmetric for `padding="same"` with an even
kernel), and col2im's `output_size` as (H, W), the unpadded image size.
"""
import numpy as np

from .._dispatch import dispatch
from .elementwise import _quiet
from .primitive import Primitive


def out_size(size, kernel_size, stride, padding, dilation):
    """(OH, OW): how many kernel positions fit in the padded image of spatial `size`."""
    return tuple((n + lo + hi - d * (k - 1) - 1) // s + 1
                 for n, k, s, (lo, hi), d in zip(size, kernel_size, stride, padding, dilation))


def _im2col_kernel(x, kernel_size, stride, padding, dilation):
    n, c = x.shape[:2]
    (kh, kw), (sh, sw), (dh, dw) = kernel_size, stride, dilation
    oh, ow = out_size(x.shape[2:], kernel_size, stride, padding, dilation)
    xp = np.pad(x, ((0, 0), (0, 0)) + tuple(padding))
    span = (dh * (kh - 1) + 1, dw * (kw - 1) + 1)
    win = np.lib.stride_tricks.sliding_window_view(xp, span, axis=(2, 3))
    win = win[:, :, :sh * (oh - 1) + 1:sh, :sw * (ow - 1) + 1:sw, ::dh, ::dw]
    # (n, c, oh, ow, kh, kw) -> (n, c, kh, kw, oh, ow), copied: outputs own their memory
    cols = np.array(win.transpose(0, 1, 4, 5, 2, 3), order="C")
    return cols.reshape(n, c * kh * kw, oh * ow)


def _col2im_kernel(cols, output_size, kernel_size, stride, padding, dilation):
    (kh, kw), (sh, sw), (dh, dw) = kernel_size, stride, dilation
    (pt, pb), (pl, pr) = padding
    h, w = output_size
    oh, ow = out_size(output_size, kernel_size, stride, padding, dilation)
    n, c = cols.shape[0], cols.shape[1] // (kh * kw)
    cols = cols.reshape(n, c, kh, kw, oh, ow)
    out = np.zeros((n, c, h + pt + pb, w + pl + pr), dtype=cols.dtype)
    for i in range(kh):
        for j in range(kw):
            out[:, :, i * dh:i * dh + sh * (oh - 1) + 1:sh,
                j * dw:j * dw + sw * (ow - 1) + 1:sw] += cols[:, :, i, j]
    return np.ascontiguousarray(out[:, :, pt:pt + h, pl:pl + w])


def _im2col_vjp(g, ins, out, n):
    return (col2im(g, tuple(n.shapes[0][2:]), **n.attrs),)


def _col2im_vjp(g, ins, out, n):
    a = dict(n.attrs)
    del a["output_size"]
    return (im2col(g, **a),)


def _im2col_shape(shapes, attrs):
    """(N, C, H, W) -> (N, C*kh*kw, OH*OW)."""
    n, c, *size = shapes[0]
    kh, kw = attrs["kernel_size"]
    oh, ow = out_size(size, attrs["kernel_size"], attrs["stride"], attrs["padding"],
                      attrs["dilation"])
    return (n, c * kh * kw, oh * ow)


def _col2im_shape(shapes, attrs):
    """(N, C*kh*kw, L) -> (N, C, H, W) with (H, W) = `output_size`."""
    n, rows = shapes[0][:2]
    kh, kw = attrs["kernel_size"]
    return (n, rows // (kh * kw)) + tuple(attrs["output_size"])


IM2COL = Primitive("im2col", _im2col_kernel, vjp=_im2col_vjp, grad_fn_name="Im2ColBackward0",
                   shape_rule=_im2col_shape)
COL2IM = Primitive("col2im", _quiet(_col2im_kernel), vjp=_col2im_vjp,
                   grad_fn_name="Col2ImBackward0", shape_rule=_col2im_shape)


def _ints(v):
    """`v` (an int or a pair) as a pair of Python ints (attributes must repr round-trip)."""
    t = tuple(v) if isinstance(v, (tuple, list)) else (v, v)
    return tuple(int(i) for i in t)


def _pads(padding):
    """int, (ph, pw) or ((top, bottom), (left, right)) -> ((top, bottom), (left, right))."""
    if isinstance(padding, (tuple, list)) and isinstance(padding[0], (tuple, list)):
        return tuple(_ints(p) for p in padding)
    return tuple((p, p) for p in _ints(padding))


def im2col(input, kernel_size, stride=1, padding=0, dilation=1):
    """Image patches as columns: (N, C, H, W) -> (N, C*kh*kw, OH*OW), zero padded.

    Row `c*kh*kw + i*kw + j` holds channel c at kernel offset (i, j) for every output
    position, so a convolution is a matmul with the weight reshaped to (out, C*kh*kw).

    >>> im2col(tracegrad.ones(1, 2, 4, 4), (3, 3)).shape
    torch.Size([1, 18, 4])
    """
    return dispatch(IM2COL, (input,), {"kernel_size": _ints(kernel_size),
                                       "stride": _ints(stride), "padding": _pads(padding),
                                       "dilation": _ints(dilation)})


def col2im(input, output_size, kernel_size, stride=1, padding=0, dilation=1):
    """The adjoint of `im2col`: (N, C*kh*kw, OH*OW) -> (N, C, H, W), overlaps summed."""
    return dispatch(COL2IM, (input,), {"output_size": _ints(output_size),
                                       "kernel_size": _ints(kernel_size),
                                       "stride": _ints(stride), "padding": _pads(padding),
                                       "dilation": _ints(dilation)})
