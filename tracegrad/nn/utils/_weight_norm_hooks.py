"""The hook-based (legacy) `nn.utils.weight_norm` / `remove_weight_norm` and
`nn.utils.spectral_norm` / `remove_spectral_norm`, as PyTorch keeps them: the module gets
parameters `weight_g`, `weight_v` (or `weight_orig` and buffers `weight_u`, `weight_v`)
and a forward pre-hook that recomputes the plain attribute `weight` before every forward
(spectral norm runs its power iteration there in training mode). New code should use
`nn.utils.parametrizations`.
"""
import warnings

from ... import ops as O
from ..._errors import TracegradValueError
from ..._mode import no_grad
from .. import functional as F
from ..parameter import Parameter
from ._norms import _weight_norm, norm_except_dim, power_iteration_, weight_to_matrix

__all__ = ["weight_norm", "remove_weight_norm", "spectral_norm", "remove_spectral_norm"]


class WeightNorm:
    """The forward pre-hook of `weight_norm`: `weight = g * v / ||v||`."""

    def __init__(self, name, dim):
        self.name = name
        self.dim = -1 if dim is None else dim

    def compute_weight(self, module):
        return _weight_norm(getattr(module, self.name + "_v"),
                            getattr(module, self.name + "_g"), self.dim)

    @staticmethod
    def apply(module, name, dim):
        warnings.warn("`torch.nn.utils.weight_norm` is deprecated in favor of "
                      "`torch.nn.utils.parametrizations.weight_norm`.", FutureWarning,
                      stacklevel=3)
        for hook in module._forward_pre_hooks.values():
            if isinstance(hook, WeightNorm) and hook.name == name:
                raise RuntimeError("Cannot register two weight_norm hooks on the same "
                                   f"parameter {name}")
        fn = WeightNorm(name, dim)
        weight = getattr(module, name)
        del module._parameters[name]
        module.register_parameter(name + "_g", Parameter(norm_except_dim(weight, 2, fn.dim)
                                                         .detach()))
        module.register_parameter(name + "_v", Parameter(weight.detach()))
        setattr(module, name, fn.compute_weight(module))
        module.register_forward_pre_hook(fn)
        return fn

    def remove(self, module):
        weight = self.compute_weight(module)
        delattr(module, self.name)
        del module._parameters[self.name + "_g"]
        del module._parameters[self.name + "_v"]
        setattr(module, self.name, Parameter(weight.detach()))

    def __call__(self, module, inputs):
        setattr(module, self.name, self.compute_weight(module))


def weight_norm(module, name="weight", dim=0):
    """Hook-based weight normalization (deprecated in PyTorch for
    `parametrizations.weight_norm`): parameters `<name>_g` and `<name>_v`."""
    WeightNorm.apply(module, name, dim)
    return module


def remove_weight_norm(module, name="weight"):
    """Undo `weight_norm`: `<name>` becomes a parameter holding the current weight."""
    for k, hook in list(module._forward_pre_hooks.items()):
        if isinstance(hook, WeightNorm) and hook.name == name:
            hook.remove(module)
            del module._forward_pre_hooks[k]
            return module
    raise TracegradValueError(f"weight_norm of '{name}' not found in {module}")


class SpectralNorm:
    """The forward pre-hook of `spectral_norm`: `weight = weight_orig / sigma`."""

    def __init__(self, name="weight", n_power_iterations=1, dim=0, eps=1e-12):
        self.name = name
        self.dim = dim
        if n_power_iterations <= 0:
            raise TracegradValueError("Expected n_power_iterations to be positive, but got "
                                      f"n_power_iterations={n_power_iterations}")
        self.n_power_iterations = n_power_iterations
        self.eps = eps

    def compute_weight(self, module, do_power_iteration):
        weight = getattr(module, self.name + "_orig")
        u = getattr(module, self.name + "_u")
        v = getattr(module, self.name + "_v")
        weight_mat = weight_to_matrix(weight, self.dim)
        if do_power_iteration:
            power_iteration_(weight_mat.detach(), u, v, self.n_power_iterations, self.eps,
                             v_first=True)
            u, v = u.clone(), v.clone()
        sigma = O.dot(u, O.matmul(weight_mat, v))
        return O.div(weight, sigma)

    @staticmethod
    def apply(module, name, n_power_iterations, dim, eps):
        for hook in module._forward_pre_hooks.values():
            if isinstance(hook, SpectralNorm) and hook.name == name:
                raise RuntimeError("Cannot register two spectral_norm hooks on the same "
                                   f"parameter {name}")
        fn = SpectralNorm(name, n_power_iterations, dim, eps)
        weight = module._parameters[name]
        if weight is None:
            raise TracegradValueError(f"`SpectralNorm` cannot be applied as parameter `{name}` "
                                      "is None")
        with no_grad():
            h, w = weight_to_matrix(weight, dim).shape
            u = F.normalize(O.randn(h, dtype=weight.dtype), dim=0, eps=fn.eps)
            v = F.normalize(O.randn(w, dtype=weight.dtype), dim=0, eps=fn.eps)
        delattr(module, name)
        module.register_parameter(name + "_orig", weight)
        setattr(module, name, weight.detach())
        module.register_buffer(name + "_u", u)
        module.register_buffer(name + "_v", v)
        module.register_forward_pre_hook(fn)
        return fn

    def remove(self, module):
        with no_grad():
            weight = self.compute_weight(module, do_power_iteration=False)
        delattr(module, self.name)
        delattr(module, self.name + "_u")
        delattr(module, self.name + "_v")
        delattr(module, self.name + "_orig")
        module.register_parameter(self.name, Parameter(weight.detach()))

    def __call__(self, module, inputs):
        setattr(module, self.name, self.compute_weight(module, module.training))


def spectral_norm(module, name="weight", n_power_iterations=1, eps=1e-12, dim=None):
    """Hook-based spectral normalization: parameter `<name>_orig`, buffers `<name>_u`,
    `<name>_v`; `dim` defaults to 1 for transposed convolutions, else 0."""
    if dim is None:
        from .parametrizations import _is_conv_transpose
        dim = 1 if _is_conv_transpose(module) else 0
    SpectralNorm.apply(module, name, n_power_iterations, dim, eps)
    return module


def remove_spectral_norm(module, name="weight"):
    """Undo `spectral_norm`: `<name>` becomes a parameter holding the current weight."""
    for k, hook in list(module._forward_pre_hooks.items()):
        if isinstance(hook, SpectralNorm) and hook.name == name:
            hook.remove(module)
            del module._forward_pre_hooks[k]
            return module
    raise TracegradValueError(f"spectral_norm of '{name}' not found in {module}")
