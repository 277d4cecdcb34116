"""Binary cross-entropy loss modules: `BCELoss`, `BCEWithLogitsLoss`. As in PyTorch,
`weight` and `pos_weight` are buffers (in `state_dict` when given)."""
from . import _functional_extra as FX
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
