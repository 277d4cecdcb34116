"""`nn.KLDivLoss` and `nn.GroupNorm` (PyTorch's constructors, checks, parameters,
state_dict keys and reprs) over `_functional_training_more`."""
from .._errors import TracegradValueError
from . import _functional_training_more as FT
from ._losses import _reduction
from ._norm import affine_parameters, reset_affine
from .module import Module


class KLDivLoss(Module):
    """`KLDivLoss(reduction='mean', log_target=False)(input, target)`: see `F.kl_div`
    ('batchmean' gives the KL divergence per sample)."""

    def __init__(self, size_average=None, reduce=None, reduction="mean", log_target=False):
        super().__init__()
        # as PyTorch's _Loss, the reduction is checked when used ('batchmean' is valid here)
        self.reduction = (_reduction(None, size_average, reduce)
                          if size_average is not None or reduce is not None else reduction)
        self.log_target = log_target

    def forward(self, input, target):
        return FT.kl_div(input, target, reduction=self.reduction, log_target=self.log_target)


class GroupNorm(Module):
    """`GroupNorm(num_groups, num_channels, eps=1e-05, affine=True, *, bias=True)`:
    per-sample normalization over groups of channels, with a per-channel affine."""

    def __init__(self, num_groups, num_channels, eps=1e-5, affine=True, device=None,
                 dtype=None, *, bias=True):
        super().__init__()
        if num_channels % num_groups != 0:
            raise TracegradValueError(f"num_channels ({num_channels}) must be divisible by "
                                      f"num_groups ({num_groups})")
        self.num_groups = num_groups
        self.num_channels = num_channels
        self.eps = eps
        self.affine = affine
        affine_parameters(self, (num_channels,), affine, bias, dtype)
        self.reset_parameters()

    def reset_parameters(self):
        reset_affine(self)

    def forward(self, input):
        return FT.group_norm(input, self.num_groups, self.weight, self.bias, self.eps)

    def extra_repr(self):
        return (f"{self.num_groups}, {self.num_channels}, eps={self.eps}, "
                f"affine={self.affine}, bias={self.bias is not None}")
