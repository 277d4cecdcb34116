"""Binary cross-entropy loss modules: `BCELoss`, `BCEWithLogitsLoss` (as in PyTorch,
`weight` and `pos_weight` are buffers, in `state_dict` when given); the regression losses
`L1Loss`, `SmoothL1Loss`, `HuberLoss`."""
from . import _functional_extra as FX
from . import _losses_regression as R
from .loss import _Loss, _WeightedLoss


class BCELoss(_WeightedLoss):
    """Binary cross-entropy of probabilities: `BCELoss(weight=None, reduction='mean')`."""

    def forward(self, input, target):
        return FX.binary_cross_entropy(input, target, weight=self.weight,
                                       reduction=self.reduction)


class BCEWithLogitsLoss(_Loss):
    """Sigmoid + binary cross-entropy, stably: `BCEWithLogitsLoss(weight=None,
    reduction='mean', pos_weight=None)`."""

    def __init__(self, weight=None, size_average=None, reduce=None, reduction="mean",
                 pos_weight=None):
        super().__init__(size_average, reduce, reduction)
        self.register_buffer("weight", weight)
        self.register_buffer("pos_weight", pos_weight)

    def forward(self, input, target):
        return FX.binary_cross_entropy_with_logits(input, target, self.weight,
                                                   pos_weight=self.pos_weight,
                                                   reduction=self.reduction)


class L1Loss(_Loss):
    """Mean absolute error: `L1Loss(reduction='mean')(input, target)`."""

    def forward(self, input, target):
        return R.l1_loss(input, target, reduction=self.reduction)


class SmoothL1Loss(_Loss):
    """Quadratic below `beta`, linear above: `SmoothL1Loss(reduction='mean', beta=1.0)`."""

    def __init__(self, size_average=None, reduce=None, reduction="mean", beta=1.0):
        super().__init__(size_average, reduce, reduction)
        self.beta = beta

    def forward(self, input, target):
        return R.smooth_l1_loss(input, target, reduction=self.reduction, beta=self.beta)


class HuberLoss(_Loss):
    """Quadratic below `delta`, linear (slope `delta`) above: `HuberLoss(reduction='mean',
    delta=1.0)`."""

    def __init__(self, reduction="mean", delta=1.0):
        super().__init__(reduction=reduction)
        self.delta = delta

    def forward(self, input, target):
        return R.huber_loss(input, target, reduction=self.reduction, delta=self.delta)
