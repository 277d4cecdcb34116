"""Channel dropout: `F.dropout1d/2d/3d` and `nn.Dropout1d/2d/3d` (PyTorch's
`feature_dropout`): zero whole channels `input[n, c]` with probability `p`, scale the rest by
`1 / (1 - p)`.

The noise has shape (N, C, 1, ...) and comes from tracegrad's generator through the same
random primitive as `F.dropout` (`ops/dropout.py`), so `manual_seed` reproduces it and a
compiled program draws it on every call as eager does; the product is the one
differentiable node (MulBackward0), as in PyTorch.
"""
import warnings

from .. import ops as O
from .._errors import TracegradRuntimeError, TracegradValueError
from ..ops import dropout as _dropout
from .layers import _DropoutNd


def _check_p(p):
    if p < 0.0 or p > 1.0:
        raise TracegradValueError(f"dropout probability has to be between 0 and 1, but got {p}")


def check_feature_dims(input):
    """PyTorch's feature dropout needs a channel dimension (raised only when it draws)."""
    if input.ndim < 2:
        raise TracegradRuntimeError("Feature dropout requires at least 2 dimensions in the "
                                    "input")


def _feature_dropout(input, p, training, inplace, batched=True):
    """One draw per channel: noise of shape (N, C, 1, ...), or (C, 1, ...) unbatched (what
    PyTorch computes on the input unsqueezed to a batch of one)."""
    if not training or p == 0 or input.numel() == 0:
        return input
    if p == 1:
        return input.mul_(0.0) if inplace else O.mul(input, 0.0)
    check_feature_dims(input)
    lead = 2 if batched else 1
    shape = tuple(input.shape[:lead]) + (1,) * (input.ndim - lead)
    noise = _dropout.dropout_noise(shape, input._data.dtype, p)
    return input.mul_(noise) if inplace else O.mul(input, noise)


def dropout1d(input, p=0.5, training=True, inplace=False):
    """Zero channels of (N, C, L) or unbatched (C, L) input with probability `p`."""
    _check_p(p)
    if input.dim() not in (2, 3):
        raise TracegradRuntimeError(
            f"dropout1d: Expected 2D or 3D input, but received a {input.dim()}D input. Note "
            "that dropout1d exists to provide channel-wise dropout on inputs with 1 spatial "
            "dimension, a channel dimension, and an optional batch dimension (i.e. 2D or 3D "
            "inputs).")
    if input.dim() == 2:
        return _feature_dropout(input, p, training, inplace, batched=False)
    return _feature_dropout(input, p, training, inplace)


def dropout2d(input, p=0.5, training=True, inplace=False):
    """Zero channels of (N, C, H, W) input with probability `p`. As in PyTorch, a 3-D input
    is taken as (N, C, L) (with a warning), not as an unbatched image."""
    _check_p(p)
    d = input.dim()
    if d not in (3, 4):
        warnings.warn(
            f"dropout2d: Received a {d}-D input to dropout2d, which is deprecated and will "
            "result in an error in a future release. To retain the behavior and silence this "
            "warning, please use dropout instead. Note that dropout2d exists to provide "
            "channel-wise dropout on inputs with 2 spatial dimensions, a channel dimension, "
            "and an optional batch dimension (i.e. 3D or 4D inputs).", stacklevel=2)
    if d == 3:
        warnings.warn(
            "dropout2d: Received a 3D input to dropout2d and assuming that channel-wise 1D "
            "dropout behavior is desired - input is interpreted as shape (N, C, L), where C is "
            "the channel dim. This behavior will change in a future release to interpret the "
            "input as one without a batch dimension, i.e. shape (C, H, W). To maintain the 1D "
            "channel-wise dropout behavior, please switch to using dropout1d instead.",
            stacklevel=2)
    return _feature_dropout(input, p, training, inplace)


def dropout3d(input, p=0.5, training=True, inplace=False):
    """Zero channels of (N, C, D, H, W) or unbatched (C, D, H, W) input with probability p."""
    _check_p(p)
    d = input.dim()
    if d not in (4, 5):
        warnings.warn(
            f"dropout3d: Received a {d}-D input to dropout3d, which is deprecated and will "
            "result in an error in a future release. To retain the behavior and silence this "
            "warning, please use dropout instead. Note that dropout3d exists to provide "
            "channel-wise dropout on inputs with 3 spatial dimensions, a channel dimension, "
            "and an optional batch dimension (i.e. 4D or 5D inputs).", stacklevel=2)
    if d != 5:
        return _feature_dropout(input, p, training, inplace, batched=False)
    return _feature_dropout(input, p, training, inplace)


class Dropout1d(_DropoutNd):
    """Channel dropout of (N, C, L) or (C, L) input; identity in eval mode."""

    def forward(self, input):
        return dropout1d(input, self.p, self.training, self.inplace)


class Dropout2d(_DropoutNd):
    """Channel dropout of (N, C, H, W) input; identity in eval mode."""

    def forward(self, input):
        return dropout2d(input, self.p, self.training, self.inplace)


class Dropout3d(_DropoutNd):
    """Channel dropout of (N, C, D, H, W) or (C, D, H, W) input; identity in eval mode."""

    def forward(self, input):
        return dropout3d(input, self.p, self.training, self.inplace)
