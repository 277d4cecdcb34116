"""Basic layers: `Linear`, `Conv2d` (and `_ConvNd`, shared with Conv1d), `Embedding`,
`Dropout`, activations, `Identity`, `Flatten`.

Constructors, defaults, initialisation and `repr` follow PyTorch; forwards call
`nn.functional`. Parameters are initialised with `nn.init` from tracegrad's generator, so
`tracegrad.manual_seed(s)` makes models reproducible (the numbers differ from PyTorch's,
whose generator is different: copy weights via `state_dict` to compare).
"""
import math

from .. import _dtype as D
from .. import _mode
from .._errors import TracegradValueError
from ..ops import creation as C
from . import functional as F
from . import init
from .module import Module
from .parameter import Parameter


def _empty(*shape, dtype=None):
    return C.empty(*shape, dtype=dtype if dtype is not None else D.get_default_dtype())


class Identity(Module):
    """Returns its input unchanged (accepts and ignores constructor arguments)."""

    def __init__(self, *args, **kwargs):
        super().__init__()

    def forward(self, input):
        return input


class Linear(Module):
    """`y = x @ weight.T + bias`; weight (out_features, in_features).

    Init as PyTorch: weight ~ kaiming_uniform(a=sqrt(5)), i.e. U(-1/sqrt(in), 1/sqrt(in)),
    and bias ~ U(-1/sqrt(in), 1/sqrt(in)).
    """

    # its forward reads neither size (Note [Attributes only some methods read])
    _attribute_reads = {"in_features": {"extra_repr": None},
                        "out_features": {"extra_repr": None}}

    def __init__(self, in_features, out_features, bias=True, device=None, dtype=None):
        super().__init__()
        self.in_features = in_features
        self.out_features = out_features
        _add_weight_and_bias(self, (out_features, in_features), bias, dtype)

    def reset_parameters(self):
        _reset_weight_and_bias(self.weight, self.bias)

    def forward(self, input):
        return F.linear(input, self.weight, self.bias)

    def extra_repr(self):
        return (f"in_features={self.in_features}, out_features={self.out_features}, "
                f"bias={self.bias is not None}")


def _add_weight_and_bias(m, shape, bias, dtype):
    """`m.weight` of `shape` and `m.bias` of shape[0] (or None), initialised by
    `m.reset_parameters()`."""
    m.weight = Parameter(_empty(*shape, dtype=dtype))
    if bias:
        m.bias = Parameter(_empty(shape[0], dtype=dtype))
    else:
        m.register_parameter("bias", None)
    m.reset_parameters()


def _reset_weight_and_bias(weight, bias):
    """PyTorch's default init of Linear and Conv: weight ~ kaiming_uniform(a=sqrt(5)),
    bias ~ U(-1/sqrt(fan_in), 1/sqrt(fan_in))."""
    init.kaiming_uniform_(weight, a=math.sqrt(5))
    if bias is not None:
        fan_in, _ = init._calculate_fan_in_and_fan_out(weight)
        bound = 1 / math.sqrt(fan_in) if fan_in > 0 else 0
        init.uniform_(bias, -bound, bound)


def _ntuple(v, n):
    """An int or a sequence as a tuple of `n` (a 1-sequence repeated): what convolutions
    store and print (`_pair` for 2-D)."""
    t = tuple(v) if isinstance(v, (tuple, list)) else (v,)
    return t * n if len(t) == 1 else t


def _pair(v):
    return _ntuple(v, 2)


def _check_groups(in_channels, out_channels, groups):
    """A convolution's `groups` must be positive and divide both channel counts (PyTorch's
    ValueErrors)."""
    if groups <= 0:
        raise TracegradValueError("groups must be a positive integer")
    if in_channels % groups:
        raise TracegradValueError("in_channels must be divisible by groups")
    if out_channels % groups:
        raise TracegradValueError("out_channels must be divisible by groups")


class _ConvNd(Module):
    """What Conv1d, Conv2d and Conv3d share (`_dims` spatial dimensions), as PyTorch's `_ConvNd`:
    the constructor's checks and attributes, parameters and init, `forward` through
    `_conv_forward(input, weight, bias)` (which subclasses written for PyTorch call), and
    the repr.

    Note [Conv padding modes]
    As in PyTorch, a non-'zeros' `padding_mode` pads the input with `F.pad` first (by
    `_reversed_padding_repeated_twice`: for 'same', (total // 2, total - total // 2) with
    total = dilation * (kernel - 1)) and then convolves without padding."""
    _dims = 2

    def __init__(self, in_channels, out_channels, kernel_size, stride=1, padding=0,
                 dilation=1, groups=1, bias=True, padding_mode="zeros", device=None,
                 dtype=None):
        super().__init__()
        n = self._dims
        _check_groups(in_channels, out_channels, groups)
        self.stride, self.dilation = _ntuple(stride, n), _ntuple(dilation, n)
        if isinstance(padding, str):
            if padding not in ("valid", "same"):
                raise TracegradValueError(f"Invalid padding string {padding!r}, should be one "
                                          "of {'valid', 'same'}")
            if padding == "same" and self.stride != (1,) * n:
                raise TracegradValueError("padding='same' is not supported for strided "
                                          "convolutions")
        else:
            padding = _ntuple(padding, n)
        if padding_mode not in ("zeros", "reflect", "replicate", "circular"):
            raise TracegradValueError("padding_mode must be one of ['zeros', 'reflect', "
                                      f"'replicate', 'circular'], but got padding_mode="
                                      f"'{padding_mode}'")
        self.in_channels, self.out_channels = in_channels, out_channels
        self.kernel_size, self.padding = _ntuple(kernel_size, n), padding
        self.groups, self.padding_mode = groups, padding_mode
        self._reversed_padding_repeated_twice = _reversed_padding(
            padding, self.kernel_size, self.dilation)
        _add_weight_and_bias(self, (out_channels, in_channels // groups, *self.kernel_size),
                             bias, dtype)

    def reset_parameters(self):
        _reset_weight_and_bias(self.weight, self.bias)

    def _conv_forward(self, input, weight, bias):
        conv = {1: F.conv1d, 2: F.conv2d, 3: F.conv3d}[self._dims]
        if self.padding_mode != "zeros":         # Note [Conv padding modes]
            input = F.pad(input, self._reversed_padding_repeated_twice, mode=self.padding_mode)
            return conv(input, weight, bias, self.stride, 0, self.dilation, self.groups)
        return conv(input, weight, bias, self.stride, self.padding, self.dilation, self.groups)

    def forward(self, input):
        return self._conv_forward(input, self.weight, self.bias)

    def extra_repr(self):
        s = (f"{self.in_channels}, {self.out_channels}, kernel_size={self.kernel_size}, "
             f"stride={self.stride}")
        if self.padding != (0,) * self._dims:
            s += f", padding={self.padding}"     # a string prints bare: padding=same
        if self.dilation != (1,) * self._dims:
            s += f", dilation={self.dilation}"
        if self.groups != 1:
            s += f", groups={self.groups}"
        if self.bias is None:
            s += ", bias=False"
        if self.padding_mode != "zeros":
            s += f", padding_mode={self.padding_mode}"
        return s


class Conv2d(_ConvNd):
    """2-D convolution over (N, C, H, W) or (C, H, W) input: weight
    (out_channels, in_channels / groups, kh, kw), optional bias (out_channels,).

    Init, `repr` and argument checks as PyTorch; `padding_mode` 'zeros', 'reflect',
    'replicate' or 'circular' (the last three pad with `F.pad` first).

    >>> Conv2d(3, 8, 3)
    Conv2d(3, 8, kernel_size=(3, 3), stride=(1, 1))
    """


def _reversed_padding(padding, kernel, dilation):
    """F.pad's amounts (last dim first) for a non-'zeros' padding_mode: `padding` on both
    sides, or for 'same' (total // 2, total - total // 2), total = dilation * (k - 1)."""
    out = []
    for i in reversed(range(len(kernel))):
        if isinstance(padding, str):
            total = dilation[i] * (kernel[i] - 1) if padding == "same" else 0
            out += [total // 2, total - total // 2]
        else:
            out += [padding[i], padding[i]]
    return out


class _Activation(Module):
    """An elementwise activation with no state: `forward` applies `_fn`."""

    def forward(self, input):
        return type(self)._fn(input)


class ReLU(Module):
    def __init__(self, inplace=False):
        super().__init__()
        self.inplace = inplace

    def forward(self, input):
        return F.relu(input, inplace=self.inplace)

    def extra_repr(self):
        return "inplace=True" if self.inplace else ""


class Tanh(_Activation):
    _fn = staticmethod(F.tanh)


class Sigmoid(_Activation):
    _fn = staticmethod(F.sigmoid)


class LeakyReLU(Module):
    def __init__(self, negative_slope=0.01, inplace=False):
        super().__init__()
        self.negative_slope = negative_slope
        self.inplace = inplace

    def forward(self, input):
        return F.leaky_relu(input, self.negative_slope, self.inplace)

    def extra_repr(self):
        return f"negative_slope={self.negative_slope}" + (", inplace=True" if self.inplace
                                                          else "")


class GELU(Module):
    def __init__(self, approximate="none"):
        super().__init__()
        self.approximate = approximate

    def forward(self, input):
        return F.gelu(input, approximate=self.approximate)

    def extra_repr(self):
        return f"approximate={self.approximate!r}"


class Softmax(Module):
    def __init__(self, dim=None):
        super().__init__()
        self.dim = dim

    def forward(self, input):
        return F.softmax(input, self.dim)

    def extra_repr(self):
        return f"dim={self.dim}"


class LogSoftmax(Softmax):
    def forward(self, input):
        return F.log_softmax(input, self.dim)


class Flatten(Module):
    def __init__(self, start_dim=1, end_dim=-1):
        super().__init__()
        self.start_dim, self.end_dim = start_dim, end_dim

    def forward(self, input):
        return input.flatten(self.start_dim, self.end_dim)

    def extra_repr(self):
        return f"start_dim={self.start_dim}, end_dim={self.end_dim}"


class _DropoutNd(Module):
    """The base of the dropout layers (`p`, `inplace`), as PyTorch's: `Dropout2d`,
    `AlphaDropout`... are not `Dropout`s, so `isinstance(m, nn.Dropout)` (code that turns
    dropout off by setting `m.p = 0`) finds only `Dropout` layers, as it does in PyTorch."""

    def __init__(self, p=0.5, inplace=False):
        super().__init__()
        if p < 0 or p > 1:
            raise TracegradValueError(f"dropout probability has to be between 0 and 1, but got {p}")
        self.p = p
        self.inplace = inplace

    def extra_repr(self):
        return f"p={self.p}, inplace={self.inplace}"


class Dropout(_DropoutNd):
    """During training, zero each element with probability `p`, scale the rest by 1/(1-p);
    identity in eval mode."""

    def forward(self, input):
        return F.dropout(input, self.p, self.training, self.inplace)


class Embedding(Module):
    """A lookup table: `Embedding(num_embeddings, embedding_dim, padding_idx=None)`.

    weight ~ N(0, 1); the `padding_idx` row is zeroed at init and never receives gradient.
    """

    def __init__(self, num_embeddings, embedding_dim, padding_idx=None, max_norm=None,
                 norm_type=2.0, scale_grad_by_freq=False, sparse=False, _weight=None,
                 _freeze=False, device=None, dtype=None):
        super().__init__()
        self.num_embeddings = num_embeddings
        self.embedding_dim = embedding_dim
        if padding_idx is not None:
            padding_idx = F._padding_index(padding_idx, num_embeddings)
        self.padding_idx = padding_idx
        self.max_norm, self.norm_type = max_norm, norm_type
        self.scale_grad_by_freq, self.sparse = scale_grad_by_freq, sparse
        if _weight is None:
            self.weight = Parameter(_empty(num_embeddings, embedding_dim, dtype=dtype),
                                    requires_grad=not _freeze)
            self.reset_parameters()
        else:
            if tuple(_weight.shape) != (num_embeddings, embedding_dim):
                raise TracegradValueError("Shape of weight does not match num_embeddings and "
                                          "embedding_dim")
            self.weight = Parameter(_weight, requires_grad=not _freeze)

    def reset_parameters(self):
        init.normal_(self.weight)
        if self.padding_idx is not None:
            with _mode.no_grad():
                self.weight[self.padding_idx].fill_(0)

    def forward(self, input):
        return F.embedding(input, self.weight, self.padding_idx, self.max_norm,
                           self.norm_type, self.scale_grad_by_freq, self.sparse)

    def extra_repr(self):
        s = f"{self.num_embeddings}, {self.embedding_dim}"
        if self.padding_idx is not None:
            s += f", padding_idx={self.padding_idx}"
        if self.max_norm is not None:
            s += f", max_norm={self.max_norm}"
        if self.norm_type != 2:
            s += f", norm_type={self.norm_type}"
        if self.scale_grad_by_freq:
            s += ", scale_grad_by_freq=True"
        if self.sparse:
            s += ", sparse=True"
        return s

    @classmethod
    def from_pretrained(cls, embeddings, freeze=True, padding_idx=None, max_norm=None,
                        norm_type=2.0, scale_grad_by_freq=False, sparse=False):
        """An Embedding whose weight is `embeddings` (2-D), frozen by default."""
        if embeddings.dim() != 2:
            raise TracegradValueError("Embeddings parameter is expected to be 2-dimensional")
        rows, cols = embeddings.shape
        return cls(rows, cols, padding_idx, max_norm, norm_type, scale_grad_by_freq, sparse,
                   _weight=embeddings, _freeze=freeze)
