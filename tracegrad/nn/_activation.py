"""`nn.SiLU` (x * sigmoid(x)) and `nn.Softplus`, PyTorch's constructors and reprs."""
from . import _functional_extra as FX
from . import _functional_more as FM
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


class Softplus(Module):
    """`Softplus(beta=1.0, threshold=20.0)`: applies `softplus` elementwise."""

    def __init__(self, beta=1.0, threshold=20.0):
        super().__init__()
        self.beta, self.threshold = beta, threshold

    def forward(self, input):
        return FM.softplus(input, self.beta, self.threshold)

    def extra_repr(self):
        return f"beta={self.beta}, threshold={self.threshold}"
