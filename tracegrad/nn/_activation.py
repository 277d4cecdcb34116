"""`nn.SiLU` (x * sigmoid(x)), PyTorch's constructor and repr."""
from . import _functional_extra as FX
from .module import Module


class SiLU(Module):
    """`SiLU(inplace=False)`: applies `silu` elementwise."""

    def __init__(self, inplace=False):
        super().__init__()
        self.inplace = inplace

    def forward(self, input):
        return FX.silu(input, inplace=self.inplace)

    def extra_repr(self):
        return "inplace=True" if self.inplace else ""
