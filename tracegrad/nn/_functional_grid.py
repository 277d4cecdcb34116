"""Spatial transformers: `F.affine_grid` (sampling grids from affine matrices) and
`F.grid_sample` (sample an image at grid positions: bilinear or nearest; padding modes
zeros, border, reflection; align_corners either way), composites of tracegrad ops with
gradients with respect to both the input and the grid.

grid_sample, per output position, PyTorch's order of steps:
1. unnormalize the grid's [-1, 1] coordinate to a pixel coordinate:
   align_corners: (g + 1) / 2 * (size - 1); else ((g + 1) * size - 1) / 2;
2. border: clip to [0, size - 1]; reflection: reflect about the edges (the pixel edges
   -0.5 and size - 0.5 without align_corners, the centres 0 and size - 1 with it), then
   clip. Clipping passes gradient only strictly inside (0, size - 1), as PyTorch's kernel;
3. bilinear: the four neighbours floor(x), floor(x) + 1 (and y) weighted by distance, each
   read through a gather, zero where outside the image (5-D input: trilinear, eight
   neighbours); nearest: the pixel at round-half-to-even(x), whose position has no gradient;
   bicubic (4-D only): the 4x4 integer taps around floor(x) of the unclipped position, each
   mapped through the padding mode, weighted by Keys' cubic convolution (A = -0.75).
4-D input (images) and 5-D input (volumes) are sampled.
"""
import warnings

import numpy as np

from .. import ops as O
from .._errors import (TracegradNotImplementedError, TracegradRuntimeError,
                       TracegradValueError, op_error)

_ALIGN_WARNING = ("Default grid_sample and affine_grid behavior has changed to "
                  "align_corners=False since 1.3.0. Please specify align_corners=True if the "
                  "old behavior is desired. See the documentation of grid_sample for details.")


def _linspace(n, align_corners):
    if n <= 1:
        return np.zeros(max(n, 0))
    r = np.linspace(-1.0, 1.0, n)
    return r if align_corners else r * (n - 1) / n


def affine_grid(theta, size, align_corners=None):
    """Sampling grid (N, H, W, 2) for `size` (N, C, H, W) from affine matrices theta
    (N, 2, 3) -- or (N, D, H, W, 3) for a 5-D size from (N, 3, 4) -- in [-1, 1] coordinates
    (x first), for `grid_sample`.

    >>> affine_grid(tracegrad.tensor([[[1., 0., 0.], [0., 1., 0.]]]), (1, 1, 2, 2),
    ...             align_corners=True)[0, 0]
    tensor([[-1., -1.],
            [ 1., -1.]])
    """
    if align_corners is None:
        warnings.warn(_ALIGN_WARNING, stacklevel=2)
        align_corners = False
    if not theta.dtype.is_floating_point:
        raise TracegradValueError(f"Expected theta to have floating point type, but got "
                                  f"{theta.dtype}")
    given, size = size, [int(s) for s in size]
    k = len(size) - 2
    if k not in (2, 3):
        raise TracegradNotImplementedError(
            "affine_grid only supports 4D and 5D sizes, for 2D and 3D affine transforms, "
            f"respectively. Got size {given}.")
    if theta.ndim != 3 or tuple(theta.shape[1:]) != (k, k + 1):
        raise TracegradValueError(f"Expected a batch of {k}D affine matrices of shape "
                                  f"Nx{k}x{k + 1} for size {given}. Got {theta.shape}.")
    spatial = size[2:]
    if align_corners and min(spatial) == 1:
        warnings.warn("Since version 1.3.0, affine_grid behavior has changed for unit-size "
                      "grids when align_corners=True. This is not an intended use case of "
                      "affine_grid. See the documentation of affine_grid for details.",
                      stacklevel=2)
    elif min(size) <= 0:
        raise TracegradValueError(f"Expected non-zero, positive output size. Got {given}")
    axes = [_linspace(n, align_corners) for n in reversed(spatial)]        # x, y(, z)
    mesh = list(np.meshgrid(*axes[::-1], indexing="ij"))[::-1]              # each (D,)H,W
    base = np.stack(mesh + [np.ones_like(mesh[0])], axis=-1).reshape(1, -1, k + 1)
    base = O.tensor(base.astype(theta.dtype.np))
    grid = O.matmul(base, O.transpose(theta, 1, 2))                         # (N, P, k)
    return O.reshape(grid, (size[0],) + tuple(spatial) + (k,))


def _unnormalize(g, size, align_corners):
    if align_corners:
        return O.mul(O.div(O.add(g, 1.0), 2.0), float(size - 1))
    return O.div(O.sub(O.mul(O.add(g, 1.0), float(size)), 1.0), 2.0)


def _clip(x, size):
    """clamp to [0, size - 1]; gradient 1 strictly inside, else 0; nan to 0 (PyTorch's
    kernel)."""
    hi = float(size - 1)
    inside = O.logical_and(O.gt(x, 0.0), O.lt(x, hi))
    clamped = O.clamp(x, 0.0, hi).detach()
    clamped = O.where(O.eq(clamped, clamped), clamped, O.zeros_like(clamped))
    return O.where(inside, x, clamped)


def _reflect(x, twice_low, twice_high):
    if twice_low == twice_high:
        return O.mul(x, 0.0).detach()
    lo, span = twice_low / 2.0, (twice_high - twice_low) / 2.0
    x = O.sub(x, lo)
    x = O.where(O.lt(x, 0.0), O.neg(x), x)
    extra = O.fmod(x, span)
    flips = O.floor(O.div(x, span)).detach()
    even = O.eq(O.fmod(flips, 2.0), 0.0)
    return O.where(even, O.add(extra, lo), O.add(O.sub(span, extra), lo))


def _source(g, size, padding_mode, align_corners):
    x = _unnormalize(g, size, align_corners)
    if padding_mode == "border":
        return _clip(x, size)
    if padding_mode == "reflection":
        x = _reflect(x, 0, 2 * (size - 1)) if align_corners else _reflect(x, -1, 2 * size - 1)
        return _clip(x, size)
    return x


def _read(flat, coords, sizes):
    """input values at integer positions `coords` (float tensors (N, *out), x first) of an
    image of `sizes` (W, H(, D)), zero outside it: (N, C, *out)."""
    n, c = flat.shape[0], flat.shape[1]
    valid, idx, stride = None, None, 1.0
    for x, size in zip(coords, sizes):
        x = O.where(O.isfinite(x), x, O.full_like(x, -1.0))   # nan/inf: outside, index 0
        inside = O.logical_and(O.ge(x, 0.0), O.le(x, float(size - 1)))
        valid = inside if valid is None else O.logical_and(valid, inside)
        term = O.mul(O.clamp(x, 0.0, float(size - 1)), stride)
        idx = term if idx is None else O.add(idx, term)
        stride *= size
    idx = idx.detach().long()
    out = tuple(idx.shape[1:])
    cells = idx.numel() // n
    idx = O.expand(O.reshape(idx, (n, 1, cells)), (n, c, cells))
    vals = O.reshape(O.gather(flat, 2, idx), (n, c) + out)
    return O.mul(vals, O.unsqueeze(valid, 1).to(flat.dtype))


_A = -0.75


def _cubic_weights(t):
    """Keys' cubic convolution weights (A = -0.75) of the taps at -1, 0, 1, 2 for the
    fraction t (a tensor: the grid's gradient flows through them)."""
    def near(x):
        return O.add(O.mul(O.mul(O.sub(O.mul(x, _A + 2), _A + 3), x), x), 1.0)

    def far(x):
        inner = O.add(O.mul(O.sub(O.mul(x, _A), 5 * _A), x), 8 * _A)
        return O.sub(O.mul(inner, x), 4 * _A)
    one_minus = O.rsub(t, 1.0)
    return [far(O.add(t, 1.0)), near(t), near(one_minus), far(O.add(one_minus, 1.0))]


def _tap(c, size, padding_mode, align_corners):
    """An integer tap coordinate after the padding mode (no gradient: PyTorch's
    compute_coordinates on the tap, then a bounds check in the read)."""
    if padding_mode == "border":
        return O.clamp(c, 0.0, float(size - 1))
    if padding_mode == "reflection":
        c = _reflect(c, 0, 2 * (size - 1)) if align_corners else _reflect(c, -1, 2 * size - 1)
        return O.clamp(c, 0.0, float(size - 1))
    return c


def _bicubic(flat, grid, sizes, padding_mode, align_corners):
    """4x4 taps around floor of the unnormalized (unclipped) position, each through the
    padding mode, weighted by cubic convolution in x and y."""
    x = _unnormalize(grid[..., 0], sizes[0], align_corners)
    y = _unnormalize(grid[..., 1], sizes[1], align_corners)
    x0, y0 = O.floor(x).detach(), O.floor(y).detach()
    wx, wy = _cubic_weights(O.sub(x, x0)), _cubic_weights(O.sub(y, y0))
    out = None
    for i in range(4):
        yi = _tap(O.add(y0, float(i - 1)), sizes[1], padding_mode, align_corners).detach()
        for j in range(4):
            xj = _tap(O.add(x0, float(j - 1)), sizes[0], padding_mode, align_corners).detach()
            term = O.mul(_read(flat, [xj, yi], sizes), O.unsqueeze(O.mul(wx[j], wy[i]), 1))
            out = term if out is None else O.add(out, term)
    return out


def _zero_through(grid):
    """A zero (N, Ho, Wo) that depends on `grid`: nearest sampling gives the grid a zero
    gradient (PyTorch's kernel), not none. Non-finite entries are masked first so the zero
    stays a zero (inf - inf would be nan)."""
    g = O.sum(O.where(O.isfinite(grid), grid, O.zeros_like(grid)), -1)
    return O.mul(O.sub(g, g.detach()), 0.0)


def _check(input, grid, mode, padding_mode):
    if mode not in ("bilinear", "nearest", "bicubic"):
        raise TracegradValueError("nn.functional.grid_sample(): expected mode to be 'bilinear', "
                                  f"'nearest' or 'bicubic', but got: '{mode}'")
    if padding_mode not in ("zeros", "border", "reflection"):
        raise TracegradValueError("nn.functional.grid_sample(): expected padding_mode to be "
                                  "'zeros', 'border', or 'reflection', but got: "
                                  f"'{padding_mode}'")
    if input.dtype is not grid.dtype:
        raise op_error(TracegradRuntimeError, "grid_sampler",
                       "grid_sampler(): expected input and grid to have same dtype, but input "
                       f"has {input.dtype} and grid has {grid.dtype}")
    if mode == "bicubic" and input.ndim == 5:
        raise op_error(TracegradRuntimeError, "grid_sampler",
                       "grid_sampler(): bicubic interpolation only supports 4D input")
    if input.ndim not in (4, 5) or grid.ndim != input.ndim:
        raise op_error(TracegradRuntimeError, "grid_sampler",
                       "grid_sampler(): expected 4D or 5D input and grid with same number of "
                       f"dimensions, but got input with sizes {list(input.shape)} and grid "
                       f"with sizes {list(grid.shape)}")
    k = input.ndim - 2
    if grid.shape[-1] != k:
        raise op_error(TracegradRuntimeError, "grid_sampler",
                       f"grid_sampler(): expected grid to have size {k} in last dimension, but "
                       f"got grid with sizes {list(grid.shape)}")
    if input.shape[0] != grid.shape[0]:
        raise op_error(TracegradRuntimeError, "grid_sampler",
                       "grid_sampler(): expected grid and input to have same batch size, but "
                       f"got input with sizes {list(input.shape)} and grid with sizes "
                       f"{list(grid.shape)}")
    if 0 in input.shape[2:]:
        raise op_error(TracegradRuntimeError, "grid_sampler",
                       "grid_sampler(): expected input to have non-empty spatial dimensions, "
                       f"but input has sizes {list(input.shape)}")


def grid_sample(input, grid, mode="bilinear", padding_mode="zeros", align_corners=None):
    """Sample input (N, C, H, W) at grid (N, Ho, Wo, 2) positions ([-1, 1], x first):
    (N, C, Ho, Wo); or input (N, C, D, H, W) at grid (N, Do, Ho, Wo, 3). Differentiable in
    input and (bilinear) grid."""
    _check(input, grid, mode, padding_mode)
    if align_corners is None:
        warnings.warn(_ALIGN_WARNING, stacklevel=2)
        align_corners = False
    n, c = input.shape[0], input.shape[1]
    sizes = tuple(reversed(input.shape[2:]))                   # (W, H(, D)): x first
    coords = [_source(grid[..., d], size, padding_mode, align_corners)
              for d, size in enumerate(sizes)]
    flat = O.reshape(input, (n, c, -1))
    if mode == "bicubic":
        return _bicubic(flat, grid, sizes, padding_mode, align_corners)
    if mode == "nearest":
        out = _read(flat, [O.round(x).detach() for x in coords], sizes)
        return O.add(out, O.unsqueeze(_zero_through(grid), 1)) if grid.requires_grad else out
    lows = [O.floor(x).detach() for x in coords]
    out = None
    for corner in range(2 ** len(coords)):              # (bi/tri)linear: 4 or 8 neighbours
        at, weight = [], None
        for d, (x, lo) in enumerate(zip(coords, lows)):
            if corner >> d & 1:
                at.append(O.add(lo, 1.0))
                wd = O.sub(x, lo)
            else:
                at.append(lo)
                wd = O.sub(O.add(lo, 1.0), x)
            weight = wd if weight is None else O.mul(weight, wd)
        term = O.mul(_read(flat, at, sizes), O.unsqueeze(weight, 1))
        out = term if out is None else O.add(out, term)
    return out
