"""Loss modules: `MSELoss`, `NLLLoss`, `CrossEntropyLoss` (wrappers of `nn.functional`).

As in PyTorch, a class `weight` is registered as a buffer (so it is in `state_dict`).
"""
from . import _losses
from .module import Module


class _Loss(Module):
    def __init__(self, size_average=None, reduce=None, reduction="mean"):
        super().__init__()
        self.reduction = _losses._reduction(reduction, size_average, reduce)


class _WeightedLoss(_Loss):
    def __init__(self, weight=None, size_average=None, reduce=None, reduction="mean"):
        super().__init__(size_average, reduce, reduction)
        self.register_buffer("weight", weight)


class MSELoss(_Loss):
    """Mean squared error: `MSELoss(reduction='mean')(input, target)`."""

    def forward(self, input, target):
        return _losses.mse_loss(input, target, reduction=self.reduction)


class NLLLoss(_WeightedLoss):
    """Negative log-likelihood of class indices given log-probabilities."""

    def __init__(self, weight=None, size_average=None, ignore_index=-100, reduce=None,
                 reduction="mean"):
        super().__init__(weight, size_average, reduce, reduction)
        self.ignore_index = ignore_index

    def forward(self, input, target):
        return _losses.nll_loss(input, target, self.weight, ignore_index=self.ignore_index,
                                reduction=self.reduction)


class CrossEntropyLoss(_WeightedLoss):
    """Softmax cross entropy from logits, with class-index or class-probability targets.

    >>> CrossEntropyLoss(label_smoothing=0.1)(logits, labels)      # doctest: +SKIP
    """

    def __init__(self, weight=None, size_average=None, ignore_index=-100, reduce=None,
                 reduction="mean", label_smoothing=0.0):
        super().__init__(weight, size_average, reduce, reduction)
        self.ignore_index = ignore_index
        self.label_smoothing = label_smoothing

    def forward(self, input, target):
        return _losses.cross_entropy(input, target, self.weight,
                                     ignore_index=self.ignore_index, reduction=self.reduction,
                                     label_smoothing=self.label_smoothing)
