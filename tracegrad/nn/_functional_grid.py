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
   read through a gather, zero where outside the image; nearest: the pixel at
   round-half-to-even(x), whose position has no gradient.
Only 4-D input (2-D images) is sampled; 'bicubic' and 5-D volumes raise.
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
    """clamp to [0, size - 1]; gradient 1 strictly inside, else 0 (PyTorch's kernel)."""
    hi = float(size - 1)
    inside = O.logical_and(O.gt(x, 0.0), O.lt(x, hi))
    return O.where(inside, x, O.clamp(x, 0.0, hi).detach())


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


def _read(flat, xi, yi, h, w):
    """input values at integer positions (xi, yi) (float tensors, (N, Ho, Wo)), zero
    outside the image: (N, C, Ho, Wo)."""
    n, c = flat.shape[0], flat.shape[1]
    valid = O.logical_and(O.logical_and(O.ge(xi, 0.0), O.le(xi, float(w - 1))),
                          O.logical_and(O.ge(yi, 0.0), O.le(yi, float(h - 1))))
    xc, yc = O.clamp(xi, 0.0, float(w - 1)), O.clamp(yi, 0.0, float(h - 1))
    idx = O.add(O.mul(yc, float(w)), xc).detach().long()
    ho, wo = idx.shape[1], idx.shape[2]
    idx = O.expand(O.reshape(idx, (n, 1, ho * wo)), (n, c, ho * wo))
    vals = O.reshape(O.gather(flat, 2, idx), (n, c, ho, wo))
    return O.mul(vals, O.unsqueeze(valid, 1).to(flat.dtype))


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
    if input.ndim == 5 or mode == "bicubic":
        raise TracegradNotImplementedError(
            "tracegrad grid_sample: only 2-D sampling (4-D input) in modes 'bilinear' and "
            "'nearest' is implemented")
    if input.ndim != 4 or grid.ndim != 4:
        raise op_error(TracegradRuntimeError, "grid_sampler",
                       "grid_sampler(): expected 4D or 5D input and grid with same number of "
                       f"dimensions, but got input with sizes {list(input.shape)} and grid "
                       f"with sizes {list(grid.shape)}")
    if grid.shape[-1] != 2:
        raise op_error(TracegradRuntimeError, "grid_sampler",
                       "grid_sampler(): expected grid to have size 2 in last dimension, but "
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
    (N, C, Ho, Wo). Differentiable in input and (bilinear) grid."""
    _check(input, grid, mode, padding_mode)
    if align_corners is None:
        warnings.warn(_ALIGN_WARNING, stacklevel=2)
        align_corners = False
    n, c, h, w = input.shape
    x = _source(grid[..., 0], w, padding_mode, align_corners)
    y = _source(grid[..., 1], h, padding_mode, align_corners)
    flat = O.reshape(input, (n, c, h * w))
    if mode == "nearest":
        out = _read(flat, O.round(x).detach(), O.round(y).detach(), h, w)
        return O.add(out, O.unsqueeze(_zero_through(grid), 1)) if grid.requires_grad else out
    x0, y0 = O.floor(x).detach(), O.floor(y).detach()
    x1, y1 = O.add(x0, 1.0), O.add(y0, 1.0)
    out = None
    for xi, yi, wx, wy in ((x0, y0, O.sub(x1, x), O.sub(y1, y)),
                           (x1, y0, O.sub(x, x0), O.sub(y1, y)),
                           (x0, y1, O.sub(x1, x), O.sub(y, y0)),
                           (x1, y1, O.sub(x, x0), O.sub(y, y0))):
        term = O.mul(_read(flat, xi, yi, h, w), O.unsqueeze(O.mul(wx, wy), 1))
        out = term if out is None else O.add(out, term)
    return out
