"""Activation modules over `_functional_activations.py`: `ELU SELU CELU Mish Hardswish
Hardsigmoid ReLU6 Hardtanh Softsign LogSigmoid Tanhshrink Softshrink Hardshrink Threshold GLU
Softmin PReLU`, with PyTorch's constructors, attributes and `extra_repr`.
"""
from .. import ops as O
from .._mode import no_grad
from . import _functional_activations as A
from .module import Module
from .parameter import Parameter


class _Inplace(Module):
    """An activation with only `inplace`."""
    _fn = None

    def __init__(self, inplace=False):
        super().__init__()
        self.inplace = inplace

    def forward(self, input):
        return type(self)._fn(input, inplace=self.inplace)

    def extra_repr(self):
        return "inplace=True" if self.inplace else ""


class _Plain(Module):
    _fn = None

    def forward(self, input):
        return type(self)._fn(input)


class SELU(_Inplace):
    _fn = staticmethod(A.selu)


class Mish(_Inplace):
    _fn = staticmethod(A.mish)


class Hardswish(_Inplace):
    _fn = staticmethod(A.hardswish)


class Hardsigmoid(_Inplace):
    _fn = staticmethod(A.hardsigmoid)


class Softsign(_Plain):
    _fn = staticmethod(A.softsign)


class LogSigmoid(_Plain):
    _fn = staticmethod(A.logsigmoid)


class Tanhshrink(_Plain):
    _fn = staticmethod(A.tanhshrink)


class ELU(Module):
    def __init__(self, alpha=1.0, inplace=False):
        super().__init__()
        self.alpha, self.inplace = alpha, inplace

    def forward(self, input):
        return A.elu(input, self.alpha, self.inplace)

    def extra_repr(self):
        return f"alpha={self.alpha}" + (", inplace=True" if self.inplace else "")


class CELU(Module):                     # not an ELU, as in PyTorch (`isinstance` checks)
    def __init__(self, alpha=1.0, inplace=False):
        super().__init__()
        self.alpha, self.inplace = alpha, inplace

    def forward(self, input):
        return A.celu(input, self.alpha, self.inplace)

    def extra_repr(self):
        return f"alpha={self.alpha}" + (", inplace=True" if self.inplace else "")


class Hardtanh(Module):
    def __init__(self, min_val=-1.0, max_val=1.0, inplace=False):
        super().__init__()
        if min_val > max_val:
            raise ValueError("min_val cannot be greater than max_val")
        self.min_val, self.max_val, self.inplace = min_val, max_val, inplace

    def forward(self, input):
        return A.hardtanh(input, self.min_val, self.max_val, self.inplace)

    def extra_repr(self):
        return (f"min_val={self.min_val}, max_val={self.max_val}"
                + (", inplace=True" if self.inplace else ""))


class ReLU6(Hardtanh):
    def __init__(self, inplace=False):
        super().__init__(0.0, 6.0, inplace)

    def extra_repr(self):
        return "inplace=True" if self.inplace else ""


class Softshrink(Module):
    def __init__(self, lambd=0.5):
        super().__init__()
        self.lambd = lambd

    def forward(self, input):
        return A.softshrink(input, self.lambd)

    def extra_repr(self):
        return str(self.lambd)


class Hardshrink(Softshrink):
    def forward(self, input):
        return A.hardshrink(input, self.lambd)


class Threshold(Module):
    def __init__(self, threshold, value, inplace=False):
        super().__init__()
        self.threshold, self.value, self.inplace = threshold, value, inplace

    def forward(self, input):
        return A.threshold(input, self.threshold, self.value, self.inplace)

    def extra_repr(self):
        return (f"threshold={self.threshold}, value={self.value}"
                + (", inplace=True" if self.inplace else ""))


class GLU(Module):
    def __init__(self, dim=-1):
        super().__init__()
        self.dim = dim

    def forward(self, input):
        return A.glu(input, self.dim)

    def extra_repr(self):
        return f"dim={self.dim}"


class Softmin(Module):
    def __init__(self, dim=None):
        super().__init__()
        self.dim = dim

    def forward(self, input):
        return A.softmin(input, self.dim)

    def extra_repr(self):
        return f"dim={self.dim}"


class PReLU(Module):
    """`PReLU(num_parameters=1, init=0.25)`: a learned negative slope (one, or per channel)."""

    def __init__(self, num_parameters=1, init=0.25, device=None, dtype=None):
        super().__init__()
        self.num_parameters, self.init = num_parameters, init
        self.weight = Parameter(O.full((num_parameters,), float(init), dtype=dtype))

    def reset_parameters(self):
        with no_grad():
            self.weight.fill_(self.init)

    def forward(self, input):
        return A.prelu(input, self.weight)

    def extra_repr(self):
        return f"num_parameters={self.num_parameters}"
