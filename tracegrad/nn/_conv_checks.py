"""The input and weight rank checks every convolution shares (`conv1d/2d/3d`,
`conv_transpose1d/2d/3d`), with PyTorch's RuntimeError messages.

A convolution over `spatial` dimensions takes a (spatial + 1)-D unbatched or
(spatial + 2)-D batched input and a (spatial + 2)-D weight.

>>> check_conv_ranks("conv2d", tracegrad.ones(3, 5, 5), tracegrad.ones(4, 3, 3, 3), 2)
True
"""
from .._errors import TracegradRuntimeError, op_error

_LAYOUT = {1: "kW", 2: "kH, kW", 3: "kD, kH, kW"}


def check_conv_ranks(name, input, weight, spatial, transposed=False):
    """Raise PyTorch's RuntimeError unless `input` has spatial + 1 (unbatched) or
    spatial + 2 (batched) dims and `weight` spatial + 2; returns whether `input` is
    unbatched."""
    if input.ndim not in (spatial + 1, spatial + 2):
        raise op_error(TracegradRuntimeError, name,
                       f"Expected {spatial + 1}D (unbatched) or {spatial + 2}D (batched) input "
                       f"to {name}, but got input of size: {list(input.shape)}")
    if weight.ndim != spatial + 2:
        channels = ("in_channels, out_channels/groups" if transposed
                    else "out_channels, in_channels/groups")
        raise op_error(TracegradRuntimeError, name,
                       f"expected a {spatial + 2}D weight ({channels}, {_LAYOUT[spatial]}), "
                       f"but got weight of size {list(weight.shape)}")
    return input.ndim == spatial + 1
