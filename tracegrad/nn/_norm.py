"""`nn.LayerNorm`: normalization over the trailing `normalized_shape` dims (PyTorch's
constructor, init -- weight ones, bias zeros -- state_dict keys and repr), and the affine
parameters every normalization layer registers that way."""
import numbers

from .. import _dtype as D
from ..ops import creation as C
from . import _functional_extra as FX
from .module import Module
from .parameter import Parameter


class LayerNorm(Module):
    """`LayerNorm(normalized_shape, eps=1e-05, elementwise_affine=True, bias=True)`.

    >>> LayerNorm(4)
    LayerNorm((4,), eps=1e-05, elementwise_affine=True, bias=True)
    """

    def __init__(self, normalized_shape, eps=1e-5, elementwise_affine=True, bias=True,
                 device=None, dtype=None):
        super().__init__()
        if isinstance(normalized_shape, numbers.Integral):
            normalized_shape = (normalized_shape,)
        self.normalized_shape = tuple(int(s) for s in normalized_shape)
        self.eps = eps
        self.elementwise_affine = elementwise_affine
        affine_parameters(self, self.normalized_shape, elementwise_affine, bias, dtype)
        self.reset_parameters()

    def reset_parameters(self):
        reset_affine(self)

    def forward(self, input):
        return FX.layer_norm(input, self.normalized_shape, self.weight, self.bias, self.eps)

    def extra_repr(self):
        return (f"{self.normalized_shape}, eps={self.eps}, "
                f"elementwise_affine={self.elementwise_affine}, bias={self.bias is not None}")


def affine_parameters(module, shape, affine, bias, dtype):
    """Register a normalization's `weight` and `bias` of `shape` (None where `affine` or
    `bias` is off), as PyTorch's LayerNorm, GroupNorm and BatchNorm do; `reset_affine`
    initializes them."""
    dtype = dtype if dtype is not None else D.get_default_dtype()
    if affine:
        module.weight = Parameter(C.empty(shape, dtype=dtype))
        if bias:
            module.bias = Parameter(C.empty(shape, dtype=dtype))
        else:
            module.register_parameter("bias", None)
    else:
        module.register_parameter("weight", None)
        module.register_parameter("bias", None)


def reset_affine(module):
    """PyTorch's init of a normalization's affine: weight ones, bias zeros."""
    from . import init
    if module.weight is not None:
        init.ones_(module.weight)
    if module.bias is not None:
        init.zeros_(module.bias)
