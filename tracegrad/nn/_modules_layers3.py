"""Modules over this round's functionals: `AdaptiveMaxPool1d/2d/3d`, `MaxUnpool1d/2d/3d`,
`LocalResponseNorm` and the losses `MultiMarginLoss`, `MultiLabelMarginLoss`,
`MultiLabelSoftMarginLoss`, `TripletMarginWithDistanceLoss`; PyTorch's constructors,
attributes, buffers (a loss's `weight`) and repr."""
from .._errors import TracegradValueError
from . import _functional_margin_losses as ML
from . import _functional_misc_more as MM
from . import _functional_pool_more as P
from ._modules_gaps2 import PairwiseDistance
from .loss import _Loss, _WeightedLoss
from .module import Module


class _AdaptiveMaxPoolNd(Module):
    def __init__(self, output_size, return_indices=False):
        super().__init__()
        self.output_size, self.return_indices = output_size, return_indices

    def extra_repr(self):
        return f"output_size={self.output_size}"


class AdaptiveMaxPool1d(_AdaptiveMaxPoolNd):
    """Max over adaptive windows to length `output_size`."""

    def forward(self, input):
        return P.adaptive_max_pool1d(input, self.output_size, self.return_indices)


class AdaptiveMaxPool2d(_AdaptiveMaxPoolNd):
    """Max over adaptive windows to `output_size` (int, or pair with None to keep a size).

    >>> AdaptiveMaxPool2d((2, None))
    AdaptiveMaxPool2d(output_size=(2, None))
    """

    def forward(self, input):
        return P.adaptive_max_pool2d(input, self.output_size, self.return_indices)


class AdaptiveMaxPool3d(_AdaptiveMaxPoolNd):
    """Max over adaptive windows of (N, C, D, H, W) input to `output_size`."""

    def forward(self, input):
        return P.adaptive_max_pool3d(input, self.output_size, self.return_indices)


class _MaxUnpoolNd(Module):
    _k = 1

    def __init__(self, kernel_size, stride=None, padding=0):
        super().__init__()
        k = self._k

        def tup(v):
            return tuple(v) if isinstance(v, (tuple, list)) else (v,) * k
        self.kernel_size = tup(kernel_size)
        self.stride = tup(stride if stride is not None else kernel_size)
        self.padding = tup(padding)

    def extra_repr(self):
        return f"kernel_size={self.kernel_size}, stride={self.stride}, padding={self.padding}"


class MaxUnpool1d(_MaxUnpoolNd):
    """Inverse of MaxPool1d: `forward(input, indices, output_size=None)`."""

    def forward(self, input, indices, output_size=None):
        return P.max_unpool1d(input, indices, self.kernel_size, self.stride, self.padding,
                              output_size)


class MaxUnpool2d(_MaxUnpoolNd):
    """Inverse of MaxPool2d: `forward(input, indices, output_size=None)`."""
    _k = 2

    def forward(self, input, indices, output_size=None):
        return P.max_unpool2d(input, indices, self.kernel_size, self.stride, self.padding,
                              output_size)


class LocalResponseNorm(Module):
    """`LocalResponseNorm(size, alpha=1e-4, beta=0.75, k=1.0)` across channels."""

    def __init__(self, size, alpha=1e-4, beta=0.75, k=1.0):
        super().__init__()
        self.size, self.alpha, self.beta, self.k = size, alpha, beta, k

    def forward(self, input):
        return MM.local_response_norm(input, self.size, self.alpha, self.beta, self.k)

    def extra_repr(self):
        return f"{self.size}, alpha={self.alpha}, beta={self.beta}, k={self.k}"


class MultiMarginLoss(_WeightedLoss):
    """`MultiMarginLoss(p=1, margin=1.0, weight=None, reduction='mean')`."""

    def __init__(self, p=1, margin=1.0, weight=None, size_average=None, reduce=None,
                 reduction="mean"):
        super().__init__(weight, size_average, reduce, reduction)
        if p not in (1, 2):
            raise TracegradValueError("only p == 1 and p == 2 supported")
        if weight is not None and weight.dim() != 1:
            raise TracegradValueError("MultiMarginLoss: expected weight to be None or 1D "
                                      f"tensor, got {weight.dim()}D instead")
        self.p, self.margin = p, margin

    def forward(self, input, target):
        return ML.multi_margin_loss(input, target, p=self.p, margin=self.margin,
                                    weight=self.weight, reduction=self.reduction)


class MultiLabelMarginLoss(_Loss):
    """Multi-label hinge loss over class-index targets (-1 terminated)."""

    def forward(self, input, target):
        return ML.multilabel_margin_loss(input, target, reduction=self.reduction)


class MultiLabelSoftMarginLoss(_WeightedLoss):
    """Multi-label one-versus-all logistic loss: `MultiLabelSoftMarginLoss(weight=None)`."""

    def forward(self, input, target):
        return ML.multilabel_soft_margin_loss(input, target, weight=self.weight,
                                              reduction=self.reduction)


class TripletMarginWithDistanceLoss(_Loss):
    """`TripletMarginWithDistanceLoss(*, distance_function=None, margin=1.0, swap=False,
    reduction='mean')`; the default distance is a `PairwiseDistance()` child module."""

    def __init__(self, *, distance_function=None, margin=1.0, swap=False, reduction="mean"):
        super().__init__(size_average=None, reduce=None, reduction=reduction)
        if margin <= 0:
            raise TracegradValueError("TripletMarginWithDistanceLoss: expected margin to be "
                                      f"greater than 0, got {margin} instead")
        self.distance_function = (distance_function if distance_function is not None
                                  else PairwiseDistance())
        self.margin, self.swap = margin, swap

    def forward(self, anchor, positive, negative):
        return ML.triplet_margin_with_distance_loss(
            anchor, positive, negative, distance_function=self.distance_function,
            margin=self.margin, swap=self.swap, reduction=self.reduction)


class MaxUnpool3d(_MaxUnpoolNd):
    """Inverse of MaxPool3d: `forward(input, indices, output_size=None)`."""
    _k = 3

    def forward(self, input, indices, output_size=None):
        return P.max_unpool3d(input, indices, self.kernel_size, self.stride, self.padding,
                              output_size)
