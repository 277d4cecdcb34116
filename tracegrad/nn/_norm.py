"""`nn.LayerNorm`: normalization over the trailing `normalized_shape` dims (PyTorch's
constructor, init -- weight ones, bias zeros -- state_dict keys and repr)."""
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
        dtype = dtype if dtype is not None else D.get_default_dtype()
        if elementwise_affine:
            self.weight = Parameter(C.empty(self.normalized_shape, dtype=dtype))
            if bias:
                self.bias = Parameter(C.empty(self.normalized_shape, dtype=dtype))
            else:
                self.register_parameter("bias", None)
        else:
            self.register_parameter("weight", None)
            self.register_parameter("bias", None)
        self.reset_parameters()

    def reset_parameters(self):
        from . import init
        if self.elementwise_affine:
            init.ones_(self.weight)
            if self.bias is not None:
                init.zeros_(self.bias)

    def forward(self, input):
        return FX.layer_norm(input, self.normalized_shape, self.weight, self.bias, self.eps)

    def extra_repr(self):
        return (f"{self.normalized_shape}, eps={self.eps}, "
                f"elementwise_affine={self.elementwise_affine}, bias={self.bias is not None}")
