"""The `torch.*` spellings of `nn.functional` ops (`torch.conv2d`, `torch.layer_norm`,
`torch.dropout`, `torch.kl_div`, ...), each with the positional signature PyTorch's
top-level function has, delegating to this package's `functional` implementation.

Where torch's signature differs from F's it is torch's: `dropout(input, p, train)` with all
three required; `batch_norm(input, weight, bias, running_mean, running_var, training,
momentum, eps, cudnn_enabled)`; `embedding(weight, indices, padding_idx=-1, ...)` (weight
first, -1 for none); losses take `reduction` as the integer enum (0 none, 1 mean, 2 sum);
`adaptive_max_pool1d` returns `(values, indices)`. A loss's `reduction` defaults to 0 (none):
PyTorch's schema says 1 (mean) but its Python binding passes 0 when the argument is left
out, so `torch.kl_div(a, b)` is unreduced there, and here. The root package installs them.

>>> torch.layer_norm(x, (4,))         # is F.layer_norm(x, (4,))
"""
from .._errors import TracegradTypeError
from . import functional as F
from ._dropout_nd import _check_p, _feature_dropout

_REDUCTIONS = ("none", "mean", "sum")


def _reduction(op, value, position):
    if isinstance(value, bool) or not isinstance(value, int):
        raise TracegradTypeError(f"{op}(): argument 'reduction' (position {position}) must be "
                                 f"int, not {type(value).__name__}")
    return _REDUCTIONS[value]


def dropout(input, p, train):
    """`F.dropout(input, p, train)`."""
    return F.dropout(input, p, train)


def dropout_(input, p, train):
    """`F.dropout(input, p, train, inplace=True)`."""
    return F.dropout(input, p, train, inplace=True)


def alpha_dropout(input, p, train):
    """`F.alpha_dropout(input, p, train)`."""
    return F.alpha_dropout(input, p, train)


def alpha_dropout_(input, p, train):
    """`F.alpha_dropout(input, p, train, inplace=True)`."""
    return F.alpha_dropout(input, p, train, inplace=True)


def feature_alpha_dropout(input, p, train):
    """`F.feature_alpha_dropout(input, p, train)`."""
    return F.feature_alpha_dropout(input, p, train)


def feature_alpha_dropout_(input, p, train):
    """`F.feature_alpha_dropout(input, p, train, inplace=True)`."""
    return F.feature_alpha_dropout(input, p, train, inplace=True)


def feature_dropout(input, p, train):
    """Dropout of whole channels of an (N, C, ...) input (what `dropout2d` computes)."""
    _check_p(p)
    return _feature_dropout(input, p, train, False)


def feature_dropout_(input, p, train):
    """`feature_dropout` in place."""
    _check_p(p)
    return _feature_dropout(input, p, train, True)


def layer_norm(input, normalized_shape, weight=None, bias=None, eps=1e-05, cudnn_enable=True):
    """`F.layer_norm` (`cudnn_enable` is accepted and ignored)."""
    return F.layer_norm(input, normalized_shape, weight, bias, eps)


def group_norm(input, num_groups, weight=None, bias=None, eps=1e-05, cudnn_enabled=True):
    """`F.group_norm` (`cudnn_enabled` is accepted and ignored)."""
    return F.group_norm(input, num_groups, weight, bias, eps)


def batch_norm(input, weight, bias, running_mean, running_var, training, momentum, eps,
               cudnn_enabled):
    """`F.batch_norm` with torch's argument order (weight and bias first)."""
    return F.batch_norm(input, running_mean, running_var, weight, bias, training, momentum,
                        eps)


def instance_norm(input, weight, bias, running_mean, running_var, use_input_stats, momentum,
                  eps, cudnn_enabled):
    """`F.instance_norm` with torch's argument order (weight and bias first)."""
    return F.instance_norm(input, running_mean, running_var, weight, bias, use_input_stats,
                           momentum, eps)


def rms_norm(input, normalized_shape, weight=None, eps=None):
    """`F.rms_norm`."""
    return F.rms_norm(input, normalized_shape, weight, eps)


def embedding(weight, indices, padding_idx=-1, scale_grad_by_freq=False, sparse=False):
    """`F.embedding(indices, weight, ...)`: rows of `weight`; a `padding_idx` >= 0 gets no
    gradient (-1, the default, means none)."""
    return F.embedding(indices, weight, None if padding_idx < 0 else padding_idx,
                       scale_grad_by_freq=scale_grad_by_freq, sparse=sparse)


def celu(input, alpha=1.0):
    """`F.celu`."""
    return F.celu(input, alpha)


def selu(input):
    """`F.selu`."""
    return F.selu(input)


def threshold(input, threshold, value):
    """`F.threshold`."""
    return F.threshold(input, threshold, value)


def rrelu(input, lower=0.125, upper=1.0 / 3, training=False, generator=None):
    """`F.rrelu` (`generator` must be None: tracegrad draws from its default generator)."""
    if generator is not None:
        raise TracegradTypeError("rrelu(): a generator argument is not supported by tracegrad")
    return F.rrelu(input, lower, upper, training)


def max_pool1d(input, kernel_size, stride=(), padding=0, dilation=1, ceil_mode=False):
    """`F.max_pool1d` (an empty `stride` means the kernel size)."""
    return F.max_pool1d(input, kernel_size, stride or None, padding, dilation, ceil_mode)


def max_pool2d(input, kernel_size, stride=(), padding=0, dilation=1, ceil_mode=False):
    """`F.max_pool2d` (an empty `stride` means the kernel size)."""
    return F.max_pool2d(input, kernel_size, stride or None, padding, dilation, ceil_mode)


def max_pool3d(input, kernel_size, stride=(), padding=0, dilation=1, ceil_mode=False):
    """`F.max_pool3d` (an empty `stride` means the kernel size)."""
    return F.max_pool3d(input, kernel_size, stride or None, padding, dilation, ceil_mode)


def adaptive_max_pool1d(input, output_size):
    """`F.adaptive_max_pool1d(..., return_indices=True)`: `(values, indices)`."""
    return F.adaptive_max_pool1d(input, output_size, return_indices=True)


def constant_pad_nd(input, pad, value=0):
    """`F.pad(input, pad, "constant", value)`."""
    return F.pad(input, pad, "constant", value)


def kl_div(input, target, reduction=0, *, log_target=False):
    """`F.kl_div` with `reduction` as torch's integer enum (its 'mean' is the mean over every
    element, without F's warning about 'batchmean')."""
    r = _reduction("kl_div", reduction, 3)
    out = F.kl_div(input, target, reduction="none" if r == "mean" else r,
                   log_target=log_target)
    return out.mean() if r == "mean" else out


def binary_cross_entropy_with_logits(input, target, weight=None, pos_weight=None, reduction=0):
    """`F.binary_cross_entropy_with_logits` with `reduction` as the integer enum."""
    r = _reduction("binary_cross_entropy_with_logits", reduction, 5)
    return F.binary_cross_entropy_with_logits(input, target, weight, reduction=r,
                                              pos_weight=pos_weight)


def poisson_nll_loss(input, target, log_input, full, eps, reduction):
    """`F.poisson_nll_loss` (every argument required, `reduction` the integer enum)."""
    return F.poisson_nll_loss(input, target, log_input, full, eps=eps,
                              reduction=_reduction("poisson_nll_loss", reduction, 6))


def margin_ranking_loss(input1, input2, target, margin=0.0, reduction=0):
    """`F.margin_ranking_loss` with `reduction` as the integer enum."""
    return F.margin_ranking_loss(input1, input2, target, margin,
                                 reduction=_reduction("margin_ranking_loss", reduction, 5))


def hinge_embedding_loss(input, target, margin=1.0, reduction=0):
    """`F.hinge_embedding_loss` with `reduction` as the integer enum."""
    return F.hinge_embedding_loss(input, target, margin,
                                  reduction=_reduction("hinge_embedding_loss", reduction, 4))


def triplet_margin_loss(anchor, positive, negative, margin=1.0, p=2, eps=1e-06, swap=False,
                        reduction=0):
    """`F.triplet_margin_loss` with `reduction` as the integer enum."""
    return F.triplet_margin_loss(anchor, positive, negative, margin, p, eps, swap,
                                 reduction=_reduction("triplet_margin_loss", reduction, 8))


def cosine_embedding_loss(input1, input2, target, margin=0.0, reduction=0):
    """`F.cosine_embedding_loss` with `reduction` as the integer enum."""
    return F.cosine_embedding_loss(input1, input2, target, margin,
                                   reduction=_reduction("cosine_embedding_loss", reduction, 5))


def ctc_loss(log_probs, targets, input_lengths, target_lengths, blank=0, reduction=0,
             zero_infinity=False):
    """`F.ctc_loss` with `reduction` as the integer enum."""
    return F.ctc_loss(log_probs, targets, input_lengths, target_lengths, blank,
                      _reduction("ctc_loss", reduction, 6), zero_infinity)


def embedding_bag(weight, indices, offsets, scale_grad_by_freq=False, mode=0, sparse=False,
                  per_sample_weights=None, include_last_offset=False, padding_idx=None):
    """PyTorch's `torch.embedding_bag`: (output, offset2bag, bag_size, max_indices)."""
    from ._embedding_bag import aten_embedding_bag
    return aten_embedding_bag(weight, indices, offsets, scale_grad_by_freq, mode, sparse,
                              per_sample_weights, include_last_offset, padding_idx)


# same signature as F's: the function itself
SAME = """conv1d conv2d conv3d conv_transpose1d conv_transpose2d conv_transpose3d pixel_shuffle pixel_unshuffle
channel_shuffle hardshrink prelu avg_pool1d adaptive_avg_pool1d cosine_similarity
pairwise_distance pdist bilinear""".split()
OWN = """dropout dropout_ alpha_dropout alpha_dropout_ feature_alpha_dropout
feature_alpha_dropout_ feature_dropout feature_dropout_ layer_norm group_norm batch_norm
instance_norm rms_norm embedding celu selu threshold rrelu max_pool1d max_pool2d max_pool3d
adaptive_max_pool1d constant_pad_nd kl_div binary_cross_entropy_with_logits poisson_nll_loss
margin_ranking_loss hinge_embedding_loss triplet_margin_loss cosine_embedding_loss ctc_loss
embedding_bag""".split()


def names():
    """{name: function} of the torch.* spellings."""
    out = {n: getattr(F, n) for n in SAME}
    out.update({n: globals()[n] for n in OWN})
    return out
