"""Root-mean-square and instance normalization: `F.rms_norm` / `nn.RMSNorm` (the LLM
normalization: no mean subtraction, no bias) and `F.instance_norm` / `nn.InstanceNorm1d/2d/3d`
(per sample and channel over the spatial dims), with PyTorch's constructors, parameters,
buffers, state_dict keys, repr and errors.

Both are composites of tracegrad ops (their gradients come from the primitives' VJPs, the
tracer records them as any code). Note [Opmath eps]: `rms_norm(eps=None)` uses the machine
epsilon of the type PyTorch computes in -- float32 for float16 input, else the
input's own -- and computes half-precision input in float32, rounding the result back.
"""
import numbers
import warnings

import numpy as np

from .. import _dtype as D
from .. import _mode
from .. import ops as O
from .._errors import TracegradRuntimeError, TracegradTypeError, TracegradValueError, op_error
from .batchnorm import _BatchNorm
from .module import Module
from .parameter import Parameter


def rms_norm(input, normalized_shape, weight=None, eps=None):
    """`input / sqrt(mean(input**2 over the trailing normalized_shape dims) + eps) * weight`.

    >>> rms_norm(tracegrad.tensor([[3.0, 4.0]]), (2,), eps=0.0)
    tensor([[0.8485, 1.1314]])
    """
    if isinstance(normalized_shape, numbers.Integral):
        raise TracegradTypeError("rms_norm(): argument 'normalized_shape' (position 2) must be "
                                 "tuple of ints, not int")
    shape = tuple(int(s) for s in normalized_shape)
    k = len(shape)
    if k == 0:
        raise op_error(TracegradRuntimeError, "rms_norm",
                       "Expected normalized_shape to be at least 1-dimensional, i.e., containing "
                       f"at least one element, but got normalized_shape = {list(shape)}")
    if k > input.ndim or tuple(input.shape[input.ndim - k:]) != shape:
        raise op_error(TracegradRuntimeError, "rms_norm",
                       f"Given normalized_shape={list(shape)}, expected input with shape "
                       f"[*{', '.join(str(s) for s in shape)}], but got input of size"
                       f"{list(input.shape)}")
    if weight is not None and tuple(weight.shape) != shape:
        raise op_error(TracegradRuntimeError, "rms_norm",
                       "Expected weight to be of same shape as normalized_shape, but got weight "
                       f"of shape {list(weight.shape)} and normalized_shape = {list(shape)}")
    x = input
    half = input.dtype is D.float16
    if half:                                        # Note [Opmath eps]
        x = input.float()
    if eps is None:
        eps = float(np.finfo(x.dtype.np).eps)
    dims = tuple(range(input.ndim - k, input.ndim))
    out = O.mul(x, O.rsqrt(O.add(O.mean(O.mul(x, x), dims, keepdim=True), eps)))
    if half:
        out = out.to(input.dtype)
    return out if weight is None else O.mul(out, weight)


class RMSNorm(Module):
    """`RMSNorm(normalized_shape, eps=None, elementwise_affine=True)`: a `weight` of
    `normalized_shape` (ones), no bias; `eps=None` is the dtype's machine epsilon.

    >>> RMSNorm(4)
    RMSNorm((4,), eps=None, elementwise_affine=True)
    """

    def __init__(self, normalized_shape, eps=None, elementwise_affine=True, device=None,
                 dtype=None):
        super().__init__()
        if isinstance(normalized_shape, numbers.Integral):
            normalized_shape = (normalized_shape,)
        self.normalized_shape = tuple(normalized_shape)
        self.eps = eps
        self.elementwise_affine = elementwise_affine
        if elementwise_affine:
            from ..ops import creation as C
            dtype = dtype if dtype is not None else D.get_default_dtype()
            self.weight = Parameter(C.empty(self.normalized_shape, dtype=dtype))
        else:
            self.register_parameter("weight", None)
        self.reset_parameters()

    def reset_parameters(self):
        if self.elementwise_affine:
            from . import init
            init.ones_(self.weight)

    def forward(self, x):
        return rms_norm(x, self.normalized_shape, self.weight, self.eps)

    def extra_repr(self):
        return (f"{self.normalized_shape}, eps={self.eps}, "
                f"elementwise_affine={self.elementwise_affine}")


# ---------------- instance normalization ----------------

def instance_norm(input, running_mean=None, running_var=None, weight=None, bias=None,
                  use_input_stats=True, momentum=0.1, eps=1e-5):
    """Normalize each (sample, channel) of `input` (N, C, *) over its spatial dims, then
    `* weight[c] + bias[c]`. With `use_input_stats` and running statistics given, these are
    updated in place (no_grad) with the batch mean of the per-instance statistics (unbiased
    variance); with `use_input_stats=False` the running statistics normalize instead."""
    if use_input_stats:
        spatial = 1
        for s in input.shape[2:]:
            spatial *= s
        if spatial == 1:
            raise TracegradValueError("Expected more than 1 spatial element when training, got "
                                      f"input size {input.shape}")
    n, c = input.shape[0], input.shape[1]
    for name, t in (("running_mean", running_mean), ("running_var", running_var),
                    ("weight", weight), ("bias", bias)):
        if t is not None and t.numel() != c:
            # PyTorch runs batch_norm over (1, N*C, *) with the statistics repeated N times
            raise op_error(TracegradRuntimeError, "instance_norm",
                           f"{name} should contain {n * c} elements not {t.numel() * n}")
    dims = tuple(range(2, input.ndim))
    shape = (1, c) + (1,) * (input.ndim - 2)
    if use_input_stats:
        mean = O.mean(input, dims, keepdim=True)
        var = O.var(input, dims, correction=0, keepdim=True)
        if running_mean is not None or running_var is not None:
            _update_running(running_mean, running_var, mean, var, input.numel() // (n * c),
                            momentum, n, c)
    else:
        if running_mean is None or running_var is None:
            raise op_error(TracegradRuntimeError, "instance_norm",
                           "Expected running_mean and running_var to be defined when "
                           "use_input_stats is false")
        mean, var = O.reshape(running_mean, shape), O.reshape(running_var, shape)
    y = O.mul(O.sub(input, mean), O.rsqrt(O.add(var, eps)))
    if weight is not None:
        y = O.mul(y, O.reshape(weight, shape))
    if bias is not None:
        y = O.add(y, O.reshape(bias, shape))
    return y


def _update_running(running_mean, running_var, mean, var, count, momentum, n, c):
    """running = (1 - momentum) * running + momentum * (batch mean of the instance stats)."""
    with _mode.no_grad():
        if running_mean is not None:
            batch = O.mean(O.reshape(mean.detach(), (n, c)), 0)
            running_mean.mul_(1.0 - momentum).add_(O.mul(batch, momentum))
        if running_var is not None:
            unbiased = O.mul(var.detach(), count / (count - 1)) if count > 1 else var.detach()
            batch = O.mean(O.reshape(unbiased, (n, c)), 0)
            running_var.mul_(1.0 - momentum).add_(O.mul(batch, momentum))


class _InstanceNorm(_BatchNorm):
    """PyTorch's _InstanceNorm: BatchNorm's constructor and state (affine off and no
    running statistics by default), instance statistics in forward."""

    _no_batch_dim = None

    def __init__(self, num_features, eps=1e-5, momentum=0.1, affine=False,
                 track_running_stats=False, device=None, dtype=None, *, bias=True):
        super().__init__(num_features, eps, momentum, affine, track_running_stats, device,
                         dtype, bias=bias)

    def _check_input_dim(self, input):
        if input.dim() not in (self._no_batch_dim, self._no_batch_dim + 1):
            raise TracegradValueError(f"expected {self._no_batch_dim}D or "
                                      f"{self._no_batch_dim + 1}D input (got {input.dim()}D "
                                      "input)")

    def forward(self, input):
        self._check_input_dim(input)
        feature_dim = input.dim() - self._no_batch_dim
        if input.shape[feature_dim] != self.num_features:
            if self.affine:
                raise TracegradValueError(
                    f"expected input's size at dim={feature_dim} to match num_features"
                    f" ({self.num_features}), but got: {input.shape[feature_dim]}.")
            warnings.warn(f"input's size at dim={feature_dim} does not match num_features. You "
                          "can silence this warning by not passing in num_features, which is "
                          "not used because affine=False", stacklevel=2)
        if input.dim() == self._no_batch_dim:
            return O.squeeze(self._apply_instance_norm(O.unsqueeze(input, 0)), 0)
        return self._apply_instance_norm(input)

    def _apply_instance_norm(self, input):
        return instance_norm(input, self.running_mean, self.running_var, self.weight,
                             self.bias, self.training or not self.track_running_stats,
                             self.momentum if self.momentum is not None else 0.0, self.eps)

    def _load_from_state_dict(self, state_dict, prefix, local_metadata, strict,
                              missing_keys, unexpected_keys, error_msgs):
        # PyTorch refuses running statistics for a module that does not track them
        if local_metadata.get("version") is None and not self.track_running_stats:
            keys = [prefix + n for n in ("running_mean", "running_var")
                    if prefix + n in state_dict]
            if keys:
                klass = type(self).__name__
                error_msgs.append(
                    "Unexpected running stats buffer(s) {} for {} with track_running_stats="
                    "False. If state_dict is a checkpoint saved before 0.4.0, this may be "
                    "expected because {} does not track running stats by default since 0.4.0. "
                    "Please remove these keys from state_dict. If the running stats are "
                    "actually needed, instead set track_running_stats=True in {} to enable "
                    "them. See the documentation of {} for details.".format(
                        " and ".join(f'"{k}"' for k in keys), klass, klass, klass, klass))
                for k in keys:
                    state_dict.pop(k)
        super()._load_from_state_dict(state_dict, prefix, local_metadata, strict,
                                      missing_keys, unexpected_keys, error_msgs)


class InstanceNorm1d(_InstanceNorm):
    """Instance normalization of (N, C, L) or unbatched (C, L) input.

    >>> InstanceNorm1d(3)
    InstanceNorm1d(3, eps=1e-05, momentum=0.1, affine=False, bias=False, track_running_stats=False)
    """
    _no_batch_dim = 2


class InstanceNorm2d(_InstanceNorm):
    """Instance normalization of (N, C, H, W) or unbatched (C, H, W) input."""
    _no_batch_dim = 3


class InstanceNorm3d(_InstanceNorm):
    """Instance normalization of (N, C, D, H, W) or unbatched (C, D, H, W) input."""
    _no_batch_dim = 4

