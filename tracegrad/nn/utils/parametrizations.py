"""`tracegrad.nn.utils.parametrizations`: `weight_norm` and `spectral_norm` as
parametrizations (`nn.utils.parametrize`), with PyTorch's names, defaults and numbers.

- `weight_norm(module, name="weight", dim=0)`: weight = g * v / ||v|| (norm over every
  dimension but `dim`; `dim=None`: over all), with `original0` = g and `original1` = v.
- `spectral_norm(module, name="weight", n_power_iterations=1, eps=1e-12, dim=None)`:
  weight = W / sigma(W), sigma estimated by power iteration on the buffers `_u`, `_v`
  (15 iterations when registered, then `n_power_iterations` per access in training mode;
  updated in place, also on every compiled call). 1-D weights are just normalized.
- `orthogonal(module, name="weight", orthogonal_map=None, *, use_trivialization=True)`:
  an orthogonal weight through matrix_exp, cayley or householder (_orthogonal.py).
"""
from ... import ops as O
from ..._errors import TracegradIndexError, TracegradValueError
from ..._mode import no_grad
from ..._tensor import Tensor
from .. import functional as F
from ..module import Module
from . import parametrize
from ._norms import _weight_norm, norm_except_dim, power_iteration_, weight_to_matrix

from ._orthogonal import orthogonal

__all__ = ["weight_norm", "spectral_norm", "orthogonal"]


class _WeightNorm(Module):
    def __init__(self, dim=0):
        super().__init__()
        self.dim = -1 if dim is None else dim

    def forward(self, weight_g, weight_v):
        return _weight_norm(weight_v, weight_g, self.dim)

    def right_inverse(self, weight):
        return norm_except_dim(weight, 2, self.dim), weight


def weight_norm(module, name="weight", dim=0):
    """Reparametrize `module.<name>` as magnitude times direction (Salimans & Kingma)."""
    parametrize.register_parametrization(module, name, _WeightNorm(dim), unsafe=True)

    def old_keys(state_dict, prefix):
        """A checkpoint of the hook-based weight_norm loads too (`<name>_g`, `<name>_v`)."""
        g_key, v_key = f"{prefix}{name}_g", f"{prefix}{name}_v"
        if g_key in state_dict and v_key in state_dict:
            state_dict[f"{prefix}parametrizations.{name}.original0"] = state_dict.pop(g_key)
            state_dict[f"{prefix}parametrizations.{name}.original1"] = state_dict.pop(v_key)
    module.__dict__.setdefault("_state_dict_renames", []).append(old_keys)
    return module


class _SpectralNorm(Module):
    def __init__(self, weight, n_power_iterations=1, dim=0, eps=1e-12):
        super().__init__()
        ndim = weight.ndim
        if dim >= ndim or dim < -ndim:
            raise TracegradIndexError("Dimension out of range (expected to be in range of "
                                      f"[-{ndim}, {ndim - 1}] but got {dim})")
        if n_power_iterations <= 0:
            raise TracegradValueError("Expected n_power_iterations to be positive, but got "
                                      f"n_power_iterations={n_power_iterations}")
        self.dim = dim if dim >= 0 else dim + ndim
        self.eps = eps
        if ndim > 1:
            self.n_power_iterations = n_power_iterations
            with no_grad():
                weight_mat = weight_to_matrix(weight.detach(), self.dim)
                h, w = weight_mat.shape
                u = O.randn(h, dtype=weight.dtype)
                v = O.randn(w, dtype=weight.dtype)
                self.register_buffer("_u", F.normalize(u, dim=0, eps=self.eps))
                self.register_buffer("_v", F.normalize(v, dim=0, eps=self.eps))
                power_iteration_(weight_mat, self._u, self._v, 15, self.eps)

    def forward(self, weight):
        if weight.ndim == 1:
            return F.normalize(weight, dim=0, eps=self.eps)
        weight_mat = weight_to_matrix(weight, self.dim)
        if self.training:
            power_iteration_(weight_mat.detach(), self._u, self._v, self.n_power_iterations,
                             self.eps)
        u, v = self._u.clone(), self._v.clone()
        sigma = O.dot(u, O.matmul(weight_mat, v))
        return O.div(weight, sigma)

    def right_inverse(self, value):
        return value


def spectral_norm(module, name="weight", n_power_iterations=1, eps=1e-12, dim=None):
    """Divide `module.<name>` by its largest singular value (Miyato et al.), estimated by
    power iteration; `dim` defaults to 1 for transposed convolutions, else 0."""
    weight = getattr(module, name, None)
    if not isinstance(weight, Tensor):
        raise TracegradValueError(f"Module '{module}' has no parameter or buffer with name "
                                  f"'{name}'")
    if dim is None:
        dim = 1 if _is_conv_transpose(module) else 0
    parametrize.register_parametrization(
        module, name, _SpectralNorm(weight, n_power_iterations, dim, eps))
    return module


def _is_conv_transpose(module):
    from ... import nn
    kinds = tuple(getattr(nn, f"ConvTranspose{d}d", None) for d in (1, 2, 3))
    return isinstance(module, tuple(k for k in kinds if k is not None))
