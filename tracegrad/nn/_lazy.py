"""Lazy modules: `nn.LazyLinear`, `nn.LazyConv1d/2d/3d`, `nn.LazyConvTranspose1d/2d/3d`,
`nn.LazyBatchNorm1d/2d/3d`, `nn.LazyInstanceNorm1d/2d/3d`, whose
input size (`in_features`, `in_channels`, `num_features`) is read from the first input, as
PyTorch's lazy modules do (d2l-style model code builds networks this way).

What users see, as in PyTorch: before the first call the parameters are
`UninitializedParameter`s (and running statistics `UninitializedBuffer`s), printed
`<UninitializedParameter>`, their shape unreadable, the size attribute 0; the first
forward materializes them in place -- the same objects, so references taken earlier stay
valid -- initializes them as the eager module does, and the module becomes that module
(`LazyConv2d` -> `Conv2d`). Loading a state_dict into an uninitialized module
materializes from the checkpoint's shapes. Build optimizers after a dry run, as PyTorch
advises.

Note [Lazy modules and compile]: a compiled call reads parameters as inputs fixed before
tracing starts, so materializing inside a trace cannot be recorded faithfully; it raises,
asking for one eager dry run first.
"""
from .. import _effects, _mode
from .. import _dtype as D
from .._errors import TracegradRuntimeError
from ..ops import creation as C
from .batchnorm import BatchNorm1d, BatchNorm2d, BatchNorm3d
from .layers import Conv2d, Linear
from ._conv_transpose import ConvTranspose2d
from ._conv_transpose_1d import ConvTranspose1d
from ._layers_1d import Conv1d
from ._layers_3d import Conv3d, ConvTranspose3d
from ._norm_more import InstanceNorm1d, InstanceNorm2d, InstanceNorm3d
from .module import Module
from .parameter import UninitializedBuffer, UninitializedParameter


class LazyModuleMixin:
    """Shared machinery: `has_uninitialized_params()`, the first-call materialization
    (subclasses define `initialize_parameters(input)` and `_lazy_size()`), checkpoint
    loading, and the class swap to `cls_to_become`."""

    cls_to_become = None

    def has_uninitialized_params(self):
        for reg in (self._parameters, self._buffers):
            for v in reg.values():
                if isinstance(v, (UninitializedParameter, UninitializedBuffer)):
                    return True
        return False

    def reset_parameters(self):
        if not self.has_uninitialized_params() and self._lazy_size() != 0:
            self.cls_to_become.reset_parameters(self)

    def forward(self, input, *args, **kwargs):
        if self.has_uninitialized_params():
            if _effects.active() is not None:          # Note [Lazy modules and compile]
                raise TracegradRuntimeError(
                    f"{type(self).__name__}: its parameters are created by the first call, "
                    "which cannot happen inside tracegrad.compile. Call the model once "
                    "eagerly (a dry run with an example batch) before compiling it.")
        with _mode.no_grad():
            self.initialize_parameters(input)
        if self.has_uninitialized_params():
            raise TracegradRuntimeError(f"module {type(self).__name__} has not been fully "
                                        "initialized")
        self.__class__ = self.cls_to_become
        return self.forward(input, *args, **kwargs)

    def _load_from_state_dict(self, state_dict, prefix, local_metadata, strict,
                              missing_keys, unexpected_keys, error_msgs):
        for reg in (self._parameters, self._buffers):
            for name, v in reg.items():
                key = prefix + name
                if isinstance(v, (UninitializedParameter, UninitializedBuffer)) \
                        and key in state_dict and hasattr(state_dict[key], "shape"):
                    v.materialize(tuple(state_dict[key].shape))
        super()._load_from_state_dict(state_dict, prefix, local_metadata, strict,
                                      missing_keys, unexpected_keys, error_msgs)


class LazyLinear(LazyModuleMixin, Linear):
    """`LazyLinear(out_features, bias=True)`: a Linear whose in_features is the last dim of
    the first input.

    >>> m = LazyLinear(3)
    >>> m(tracegrad.ones(2, 5)).shape, m
    (torch.Size([2, 3]), Linear(in_features=5, out_features=3, bias=True))
    """

    cls_to_become = Linear

    def __init__(self, out_features, bias=True, device=None, dtype=None):
        Module.__init__(self)
        self.in_features, self.out_features = 0, out_features
        self.weight = UninitializedParameter(dtype=dtype)
        if bias:
            self.bias = UninitializedParameter(dtype=dtype)
        else:
            self.register_parameter("bias", None)

    def _lazy_size(self):
        return self.in_features

    def initialize_parameters(self, input):
        if self.has_uninitialized_params():
            self.in_features = input.shape[-1]
            self.weight.materialize((self.out_features, self.in_features))
            if self.bias is not None:
                self.bias.materialize((self.out_features,))
            self.reset_parameters()
        if self.in_features == 0:        # loaded from a checkpoint: PyTorch reads it here
            if input.shape[-1] != self.weight.shape[-1]:
                raise TracegradRuntimeError(
                    f"The in_features inferred from input: {input.shape[-1]} is not equal to "
                    f"in_features from self.weight: {self.weight.shape[-1]}")
            self.in_features = input.shape[-1]


class _LazyConvNd(LazyModuleMixin):
    _transposed = False

    def __init__(self, out_channels, kernel_size, stride=1, padding=0, dilation=1, groups=1,
                 bias=True, padding_mode="zeros", device=None, dtype=None):
        self.cls_to_become.__init__(self, 0, 0, kernel_size, stride, padding, dilation,
                                    groups, False, padding_mode, dtype=dtype)
        self._lazy_weight_and_bias(out_channels, bias, dtype)

    def _lazy_weight_and_bias(self, out_channels, bias, dtype):
        self.weight = UninitializedParameter(dtype=dtype)
        self.out_channels = out_channels
        if bias:
            self.bias = UninitializedParameter(dtype=dtype)

    def _lazy_size(self):
        return self.in_channels

    def initialize_parameters(self, input):
        if not self.has_uninitialized_params():
            return                       # loaded from a checkpoint (in_channels stays 0)
        n = self._dims
        if input.ndim not in (n + 1, n + 2):
            raise TracegradRuntimeError(
                f"Expected {n + 1}D (unbatched) or {n + 2}D (batched) input to "
                f"{type(self).__name__}, but got input of size: {input.shape}")
        self.in_channels = input.shape[1] if input.ndim == n + 2 else input.shape[0]
        if self.in_channels % self.groups:
            raise TracegradRuntimeError("in_channels must be divisible by groups")
        if self._transposed:             # (in, out / groups, *k)
            shape = (self.in_channels, self.out_channels // self.groups)
        else:                            # (out, in / groups, *k)
            shape = (self.out_channels, self.in_channels // self.groups)
        self.weight.materialize(shape + tuple(self.kernel_size))
        if self.bias is not None:
            self.bias.materialize((self.out_channels,))
        self.reset_parameters()


class LazyConv1d(_LazyConvNd, Conv1d):
    """`LazyConv1d(out_channels, kernel_size, ...)`: in_channels from the first input."""
    cls_to_become = Conv1d


class LazyConv2d(_LazyConvNd, Conv2d):
    """`LazyConv2d(out_channels, kernel_size, ...)`: in_channels from the first input."""
    cls_to_become = Conv2d


class LazyConv3d(_LazyConvNd, Conv3d):
    """`LazyConv3d(out_channels, kernel_size, ...)`: in_channels from the first input."""
    cls_to_become = Conv3d


class _LazyConvTransposeNd(_LazyConvNd):
    _transposed = True

    def __init__(self, out_channels, kernel_size, stride=1, padding=0, output_padding=0,
                 groups=1, bias=True, dilation=1, padding_mode="zeros", device=None,
                 dtype=None):
        self.cls_to_become.__init__(self, 0, 0, kernel_size, stride, padding, output_padding,
                                    groups, False, dilation, padding_mode, dtype=dtype)
        self._lazy_weight_and_bias(out_channels, bias, dtype)


class LazyConvTranspose1d(_LazyConvTransposeNd, ConvTranspose1d):
    """`LazyConvTranspose1d(out_channels, kernel_size, ...)`: in_channels from the input."""
    cls_to_become = ConvTranspose1d


class LazyConvTranspose2d(_LazyConvTransposeNd, ConvTranspose2d):
    """`LazyConvTranspose2d(out_channels, kernel_size, ...)`: in_channels from the input."""
    cls_to_become = ConvTranspose2d


class LazyConvTranspose3d(_LazyConvTransposeNd, ConvTranspose3d):
    """`LazyConvTranspose3d(out_channels, kernel_size, ...)`: in_channels from the input."""
    cls_to_become = ConvTranspose3d


class _LazyBatchNorm(LazyModuleMixin):
    def __init__(self, eps=1e-5, momentum=0.1, affine=True, track_running_stats=True,
                 device=None, dtype=None):
        self.cls_to_become.__init__(self, 0, eps, momentum, False, False, dtype=dtype)
        self.affine, self.track_running_stats = affine, track_running_stats
        if affine:
            self.weight = UninitializedParameter(dtype=dtype)
            self.bias = UninitializedParameter(dtype=dtype)
        if track_running_stats:
            self.running_mean = UninitializedBuffer(dtype=dtype)
            self.running_var = UninitializedBuffer(dtype=dtype)
            self.num_batches_tracked = C.tensor(0, dtype=D.int64)

    def _lazy_size(self):
        return self.num_features

    def initialize_parameters(self, input):
        if not self.has_uninitialized_params():
            return                       # loaded from a checkpoint (num_features stays 0)
        self.num_features = input.shape[1]
        shape = (self.num_features,)
        for t in (self.weight, self.bias, self.running_mean, self.running_var):
            if t is not None:
                t.materialize(shape)
        self.reset_parameters()


class LazyBatchNorm1d(_LazyBatchNorm, BatchNorm1d):
    """BatchNorm1d with num_features from the first input."""
    cls_to_become = BatchNorm1d


class LazyBatchNorm2d(_LazyBatchNorm, BatchNorm2d):
    """BatchNorm2d with num_features from the first input."""
    cls_to_become = BatchNorm2d


class LazyBatchNorm3d(_LazyBatchNorm, BatchNorm3d):
    """BatchNorm3d with num_features from the first input."""
    cls_to_become = BatchNorm3d


class _LazyInstanceNorm(_LazyBatchNorm):
    """As PyTorch's: the lazy norms' defaults (affine and running statistics on), and
    num_features from `input.shape[1]` (so an unbatched input is refused by the size
    check, as in PyTorch)."""


class LazyInstanceNorm1d(_LazyInstanceNorm, InstanceNorm1d):
    """InstanceNorm1d with num_features from the first input."""
    cls_to_become = InstanceNorm1d


class LazyInstanceNorm2d(_LazyInstanceNorm, InstanceNorm2d):
    """InstanceNorm2d with num_features from the first input."""
    cls_to_become = InstanceNorm2d


class LazyInstanceNorm3d(_LazyInstanceNorm, InstanceNorm3d):
    """InstanceNorm3d with num_features from the first input."""
    cls_to_become = InstanceNorm3d
