"""`nn.functional`: stateless layer functions (PyTorch names, signatures and semantics).

Everything here is composed from tracegrad ops, so gradients (and gradients of gradients)
come from the primitives' VJP rules and a tracer records these functions like any other
code. Random masks come from `tracegrad.rand` (the seeded generator, recorded as an op).
Loss functions live in `_losses.py` and are re-exported here.
"""
import warnings

from .. import _dtype as D
from .. import _mode
from .. import ops as O
from ..ops import elementwise as E
from ..ops import dropout as _dropout
from ..ops import linear as _linear
from .._errors import TracegradRuntimeError, TracegradValueError, op_error
from ._conv_checks import check_conv_ranks
from ._losses import cross_entropy, mse_loss, nll_loss  # noqa: F401

__all__ = ["linear", "conv2d", "relu", "relu_", "leaky_relu", "tanh", "sigmoid", "gelu",
           "softmax", "log_softmax", "dropout", "batch_norm", "embedding", "one_hot", "mse_loss",
           "cross_entropy", "nll_loss"]


def linear(input, weight, bias=None):
    """`input @ weight.T + bias`, for input (*, in) and weight (out, in).

    >>> linear(tracegrad.ones(2, 3), tracegrad.ones(4, 3)).shape
    torch.Size([2, 4])
    """
    out = _linear.linear(input, weight, bias)     # one addmm/mm primitive (PyTorch's nodes)
    if out is not None:
        return out
    out = O.matmul(input, O.t(weight))
    return out if bias is None else O.add(out, bias)


def conv2d(input, weight, bias=None, stride=1, padding=0, dilation=1, groups=1):
    """2-D cross-correlation of input (N, C, H, W) or (C, H, W) with weight
    (out, C/groups, kh, kw): `im2col`, then one batched matmul per group, plus bias.

    `padding` is an int, a pair, "valid" (none) or "same" (output size = input size, stride 1
    only; an odd total puts the extra row/column at the bottom/right, as in PyTorch).

    >>> conv2d(tracegrad.ones(1, 3, 8, 8), tracegrad.ones(4, 3, 3, 3), padding=1).shape
    torch.Size([1, 4, 8, 8])
    """
    unbatched = check_conv_ranks("conv2d", input, weight, 2)
    if unbatched:
        input = O.unsqueeze(input, 0)
    stride, dilation = _conv_arg(stride, "stride"), _conv_arg(dilation, "dilation")
    kernel = tuple(weight.shape[2:])
    pads = _conv_padding(padding, kernel, stride, dilation)
    _check_conv(input, weight, bias, groups, pads, kernel, dilation)
    n, c = input.shape[:2]
    out_ch, k = weight.shape[0], weight.shape[1] * kernel[0] * kernel[1]
    oh, ow = O.conv.out_size(input.shape[2:], kernel, stride, pads, dilation)
    cols = O.im2col(input, kernel, stride, pads, dilation)
    # (groups, out/groups, k) @ (N, groups, k, L) broadcasts over the batch
    out = O.matmul(O.reshape(weight, (groups, out_ch // groups, k)),
                   O.reshape(cols, (n, groups, k, oh * ow)))
    out = O.reshape(out, (n, out_ch, oh, ow))
    if bias is not None:
        out = O.add(out, O.reshape(bias, (out_ch, 1, 1)))
    return O.squeeze(out, 0) if unbatched else out


def _conv_arg(v, name):
    """stride/padding/dilation as a pair of ints, checked as PyTorch checks them."""
    t = tuple(v) if isinstance(v, (tuple, list)) else (v,)
    if len(t) == 1:
        t = t * 2
    if len(t) != 2:
        raise op_error(TracegradRuntimeError, "conv2d",
                       f"expected {name} to be a single integer value or a list of 2 values to "
                       f"match the convolution dimensions, but got {name}={list(t)}")
    t = tuple(int(i) for i in t)
    if name == "padding" and min(t) < 0:
        raise op_error(TracegradRuntimeError, "conv2d", "negative padding is not supported")
    if name != "padding" and min(t) <= 0:
        raise op_error(TracegradRuntimeError, "conv2d", f"non-positive {name} is not supported")
    return t


def _conv_padding(padding, kernel, stride, dilation):
    """((top, bottom), (left, right)) zero padding for an int, pair, "valid" or "same"."""
    if not isinstance(padding, str):
        return tuple((p, p) for p in _conv_arg(padding, "padding"))
    if padding == "valid":
        return ((0, 0), (0, 0))
    if padding != "same":
        raise op_error(TracegradRuntimeError, "conv2d", f"Invalid padding string: {padding!r}",
                       "Use 'valid', 'same', an int or a pair of ints.")
    if stride != (1, 1):
        raise op_error(TracegradRuntimeError, "conv2d",
                       "padding='same' is not supported for strided convolutions")
    total = tuple(d * (k - 1) for k, d in zip(kernel, dilation))
    return tuple((t // 2, t - t // 2) for t in total)


def _check_conv(input, weight, bias, groups, pads, kernel, dilation):
    """PyTorch's shape checks for conv2d (input already batched), as RuntimeErrors."""
    def fail(msg, fix=None):
        raise op_error(TracegradRuntimeError, "conv2d", msg, fix)
    if groups <= 0:
        fail("non-positive groups is not supported")
    ws, xs = list(weight.shape), list(input.shape)
    if ws[0] % groups:
        fail(f"Given groups={groups}, expected weight to be divisible by {groups} at dimension "
             f"0, but got weight of size {ws} instead")
    if xs[1] != ws[1] * groups:
        fail(f"Given groups={groups}, weight of size {ws}, expected input{xs} to have "
             f"{ws[1] * groups} channels, but got {xs[1]} channels instead")
    if bias is not None and (bias.ndim != 1 or bias.shape[0] != ws[0]):
        fail(f"Given weight of size {ws}, expected bias to be 1-dimensional with {ws[0]} "
             f"elements, but got bias of size {list(bias.shape)} instead")
    padded = tuple(n + lo + hi for n, (lo, hi) in zip(xs[2:], pads))
    span = tuple(d * (k - 1) + 1 for k, d in zip(kernel, dilation))
    if padded[0] < span[0] or padded[1] < span[1]:
        fail(f"Calculated padded input size per channel: ({padded[0]} x {padded[1]}). Kernel "
             f"size: ({span[0]} x {span[1]}). Kernel size can't be greater than actual input "
             "size")
    for name, t in (("Input", input), ("Bias", bias)):
        if t is not None and t.dtype is not weight.dtype:
            fail(f"{name} type ({t.dtype.name}) and weight type ({weight.dtype.name}) should "
                 "be the same", f"Convert it, e.g. `{name.lower()}.to(weight.dtype)`.")


def relu(input, inplace=False):
    return input.relu_() if inplace else O.relu(input)


def relu_(input):
    return input.relu_()


def leaky_relu(input, negative_slope=0.01, inplace=False):
    """`x` where x > 0, else `negative_slope * x` (gradient at 0 is the slope, as in torch)."""
    if inplace:      # the factor in input's dtype (a Python-scalar where would be float32)
        return input.mul_(O.where(O.gt(input, 0), O.ones_like(input),
                                  O.full_like(input, negative_slope)))
    return O.where(O.gt(input, 0), input, O.mul(input, negative_slope))


def tanh(input):
    return O.tanh(input)


def sigmoid(input):
    return O.sigmoid(input)


def gelu(input, approximate="none"):
    """Gaussian error linear unit: exact `x * Phi(x)` (erf) or the 'tanh' approximation."""
    if approximate in ("none", "tanh"):
        return E._gelu(input, approximate)
    raise op_error(TracegradRuntimeError, "gelu",
                   "approximate argument must be either none or tanh.")


def _implicit_dim(name, ndim):
    warnings.warn(f"Implicit dimension choice for {name} has been deprecated. Change the call "
                  "to include dim=X as an argument.", stacklevel=3)
    return 0 if ndim in (0, 1, 3) else 1


def softmax(input, dim=None, _stacklevel=3, dtype=None):
    if dim is None:
        dim = _implicit_dim("softmax", input.ndim)
    return O.softmax(input, dim, dtype=dtype)


def log_softmax(input, dim=None, _stacklevel=3, dtype=None):
    if dim is None:
        dim = _implicit_dim("log_softmax", input.ndim)
    return O.log_softmax(input, dim, dtype=dtype)


def dropout(input, p=0.5, training=True, inplace=False):
    """Zero each element with probability `p` and scale the rest by `1 / (1 - p)`.

    Identity when `training` is False. The keep mask is `rand(...) < 1 - p`, drawn from
    tracegrad's generator (reproducible under `manual_seed`) by one primitive
    (`ops/dropout.py`); the product records MulBackward0, as PyTorch's CPU dropout does.
    """
    if p < 0.0 or p > 1.0:
        raise TracegradValueError(f"dropout probability has to be between 0 and 1, but got {p}")
    if not training or p == 0 or input.numel() == 0:
        return input
    if p == 1:
        return input.mul_(0.0) if inplace else O.mul(input, 0.0)
    noise = _dropout.dropout_noise(input._data.shape, input._data.dtype, p)
    return input.mul_(noise) if inplace else O.mul(input, noise)


def batch_norm(input, running_mean, running_var, weight=None, bias=None, training=False,
               momentum=0.1, eps=1e-5):
    """Normalize over all dims but 1 (channels): batch statistics when `training` (and then
    update the running statistics in place, under no_grad, with the unbiased variance),
    otherwise the running statistics."""
    if input.ndim < 2:
        raise op_error(TracegradValueError, "batch_norm",
                       f"expected at least 2D input (got {input.ndim}D input)")
    c = input.shape[1]
    for name, t in (("running_mean", running_mean), ("running_var", running_var),
                    ("weight", weight), ("bias", bias)):
        if t is not None and t.numel() != c:
            raise op_error(TracegradRuntimeError, "batch_norm",
                           f"{name} should contain {c} elements not {t.numel()}")
    dims = (0,) + tuple(range(2, input.ndim))
    shape = (1, c) + (1,) * (input.ndim - 2)
    if training:
        per_channel = input.numel() // c if c else 0
        if per_channel == 1:
            raise op_error(TracegradValueError, "batch_norm",
                           "Expected more than 1 value per channel when training, got input "
                           f"size {input.shape}")
        mean = O.mean(input, dims)
        var = O.var(input, dims, correction=0)
        if running_mean is not None or running_var is not None:
            _update_running(running_mean, running_var, mean, var, per_channel, momentum)
    else:
        if running_mean is None or running_var is None:
            raise op_error(TracegradRuntimeError, "batch_norm",
                           "running_mean must be defined in evaluation mode")
        mean, var = running_mean, running_var
    y = O.mul(O.sub(input, O.reshape(mean, shape)), O.rsqrt(O.add(O.reshape(var, shape), eps)))
    if weight is not None:
        y = O.mul(y, O.reshape(weight, shape))
    if bias is not None:
        y = O.add(y, O.reshape(bias, shape))
    return y


def _update_running(running_mean, running_var, mean, var, n, momentum):
    """running = (1 - momentum) * running + momentum * batch_stat (variance unbiased)."""
    with _mode.no_grad():
        if running_mean is not None:
            running_mean.mul_(1.0 - momentum).add_(O.mul(mean.detach(), momentum))
        if running_var is not None:
            unbiased = O.mul(var.detach(), n / (n - 1))
            running_var.mul_(1.0 - momentum).add_(O.mul(unbiased, momentum))


def embedding(input, weight, padding_idx=None, max_norm=None, norm_type=2.0,
              scale_grad_by_freq=False, sparse=False):
    """Rows of `weight` selected by the integer tensor `input` (shape `input.shape + (dim,)`).

    Repeated indices accumulate gradient; the `padding_idx` row receives none;
    `scale_grad_by_freq=True` divides each row's gradient by how often its index occurs in
    `input`.
    """
    if input.dtype is not D.int64 and input.dtype is not D.int32:
        # not left to indexing: a uint8 index would be read as a mask there
        got = ("CPUBoolType" if input.dtype is D.bool_
               else "torch." + D.tensor_type_name(input.dtype))
        raise op_error(TracegradRuntimeError, "embedding", "Expected tensor for argument #1 "
                       "'indices' to have one of the following scalar types: Long, Int; but got "
                       f"{got} instead (while checking arguments for embedding)",
                       "Convert the indices, e.g. `idx.long()`.")
    if weight.ndim != 2:
        raise op_error(TracegradRuntimeError, "embedding", "'weight' must be 2-D")
    n = weight.shape[0]
    if padding_idx is not None:
        padding_idx = _padding_index(padding_idx, n)
    if max_norm is not None:
        _renorm_rows(weight, input, max_norm, norm_type)
    out = weight[input]
    if scale_grad_by_freq:
        out = _scaled_by_frequency(out, input, n)
    if padding_idx is not None:
        # Route no gradient from positions that looked up the padding row.
        at_pad = O.unsqueeze(O.eq(input, padding_idx), -1)
        out = O.where(at_pad, out.detach(), out)
    return out


def _scaled_by_frequency(out, input, n):
    """`out` (rows looked up at `input`), each position's gradient divided by the number of
    times its index occurs in `input` (ops/grad_scale.py)."""
    from ..ops.grad_scale import grad_scaled
    with _mode.no_grad():
        flat = input.reshape(-1)
        counts = O.zeros(n, dtype=out.dtype).index_add(0, flat, O.ones(flat.shape,
                                                                       dtype=out.dtype))
        scale = O.unsqueeze(O.reciprocal(counts[input]), -1)
    return grad_scaled(out, scale)


class PaddingIndexError(TracegradValueError, AssertionError):
    """`padding_idx` outside `[-num_embeddings, num_embeddings)` (PyTorch asserts)."""


def _padding_index(padding_idx, n):
    if not -n <= padding_idx < n:
        raise PaddingIndexError("Padding_idx must be within num_embeddings")
    return padding_idx % n


def _renorm_rows(weight, input, max_norm, norm_type):
    """Rescale in place (no_grad) the looked-up rows whose norm exceeds `max_norm`."""
    with _mode.no_grad():
        rows = weight[input.reshape(-1)]
        norms = O.norm(rows, norm_type, dim=1, keepdim=True)
        scale = O.where(O.gt(norms, max_norm), O.div(max_norm, O.add(norms, 1e-7)), 1.0)
        weight[input.reshape(-1)] = O.mul(rows, scale)


def one_hot(tensor, num_classes=-1):
    """int64 tensor of shape `tensor.shape + (num_classes,)` with ones at the given classes."""
    if tensor.dtype is not D.int64:
        raise op_error(TracegradRuntimeError, "one_hot",
                       "one_hot is only applicable to index tensor of type LongTensor.")
    if tensor.numel() == 0:
        if num_classes <= 0:
            raise op_error(TracegradRuntimeError, "one_hot",
                           "Can not infer total number of classes from empty tensor.")
    else:
        # (compiled, each check is a guard on its outcome, not on the values: a batch with
        # other classes takes the same path; only an inferred num_classes is the value)
        if bool(O.amin(tensor) < 0):
            raise op_error(TracegradRuntimeError, "one_hot", "Class values must be non-negative.")
        if num_classes == -1:
            num_classes = O.amax(tensor).item() + 1
        elif bool(O.amax(tensor) >= num_classes):
            raise op_error(TracegradRuntimeError, "one_hot",
                           "Class values must be smaller than num_classes.")
    return O.eq(O.unsqueeze(tensor, -1), O.arange(num_classes)).long()
from ._functional_normalize import normalize  # noqa: E402,F401
from ._functional_extra import (adaptive_avg_pool2d, avg_pool2d, binary_cross_entropy,  # noqa
                                binary_cross_entropy_with_logits, layer_norm, max_pool2d,
                                max_pool2d_with_indices, silu)
from ._losses_regression import l1_loss, smooth_l1_loss, huber_loss  # noqa: E402,F401
from ._functional_more import softplus, cosine_similarity, pad  # noqa: E402,F401
from ._functional_training_more import kl_div, group_norm  # noqa: E402,F401
from ._attention_functional import (multi_head_attention_forward,  # noqa: F401
                                    scaled_dot_product_attention)
from ._functional_1d import (conv1d, max_pool1d, max_pool1d_with_indices,  # noqa: E402,F401
                             avg_pool1d)
from ._functional_interpolate import interpolate  # noqa: E402,F401
from ._conv_transpose import conv_transpose2d  # noqa: E402,F401
__all__ += ["conv_transpose2d", "conv1d", "max_pool1d", "max_pool1d_with_indices",
            "avg_pool1d", "interpolate"]
__all__ += ["normalize", "layer_norm", "silu", "max_pool2d", "max_pool2d_with_indices",
            "avg_pool2d", "adaptive_avg_pool2d", "binary_cross_entropy",
            "binary_cross_entropy_with_logits", "scaled_dot_product_attention",
            "multi_head_attention_forward", "l1_loss", "smooth_l1_loss", "huber_loss",
            "softplus", "cosine_similarity", "pad", "kl_div", "group_norm"]
from ._functional_activations import (elu, selu, celu, mish, hardswish,  # noqa: E402,F401
                                      hardsigmoid, relu6, hardtanh, softsign, logsigmoid,
                                      tanhshrink, softshrink, hardshrink, threshold, glu,
                                      prelu, softmin, elu_, selu_, celu_, hardtanh_,
                                      threshold_)
__all__ += ["elu", "selu", "celu", "mish", "hardswish", "hardsigmoid", "relu6", "hardtanh",
            "softsign", "logsigmoid", "tanhshrink", "softshrink", "hardshrink", "threshold",
            "glu", "prelu", "softmin", "elu_", "selu_", "celu_", "hardtanh_", "threshold_"]
from ._functional_metric_losses import (pairwise_distance, triplet_margin_loss,  # noqa
                                        margin_ranking_loss, cosine_embedding_loss,
                                        hinge_embedding_loss, soft_margin_loss,
                                        poisson_nll_loss, gaussian_nll_loss)
from ._functional_layers_more import (bilinear, pixel_shuffle, pixel_unshuffle,  # noqa
                                      adaptive_avg_pool1d)
__all__ += ["pairwise_distance", "triplet_margin_loss", "margin_ranking_loss",
            "cosine_embedding_loss", "hinge_embedding_loss", "soft_margin_loss",
            "poisson_nll_loss", "gaussian_nll_loss", "bilinear", "pixel_shuffle",
            "pixel_unshuffle", "adaptive_avg_pool1d"]
from ._conv_transpose_1d import conv_transpose1d  # noqa: E402,F401
__all__ += ["conv_transpose1d"]
from ._functional_3d import conv3d, conv_transpose3d, max_pool3d  # noqa: E402,F401
from ._functional_pool_3d import avg_pool3d, adaptive_avg_pool3d  # noqa: E402,F401
__all__ += ["conv3d", "conv_transpose3d", "max_pool3d", "avg_pool3d", "adaptive_avg_pool3d"]
from ._embedding_bag import embedding_bag  # noqa: E402,F401
from ._functional_ctc import ctc_loss  # noqa: E402,F401
__all__ += ["ctc_loss"]
__all__ += ["embedding_bag"]
from ._fold import fold, unfold  # noqa: E402,F401
from ._norm_more import rms_norm, instance_norm  # noqa: E402,F401
from ._dropout_nd import dropout1d, dropout2d, dropout3d  # noqa: E402,F401
__all__ += ["rms_norm", "instance_norm", "dropout1d", "dropout2d", "dropout3d"]


def leaky_relu_(input, negative_slope=0.01):
    """In-place `leaky_relu` (returns `input`)."""
    return leaky_relu(input, negative_slope, inplace=True)


__all__ += ["leaky_relu_"]
from ._functional_pool_more import (adaptive_max_pool1d, adaptive_max_pool2d,  # noqa: E402,F401
                                    adaptive_max_pool3d, adaptive_max_pool1d_with_indices,
                                    adaptive_max_pool2d_with_indices,
                                    adaptive_max_pool3d_with_indices, max_unpool1d, max_unpool2d,
                                    max_unpool3d)
from ._functional_grid import affine_grid, grid_sample  # noqa: E402,F401
from ._functional_misc_more import gumbel_softmax, pdist, local_response_norm  # noqa: E402,F401
from ._functional_margin_losses import (multi_margin_loss,  # noqa: E402,F401
                                        multilabel_margin_loss, multilabel_soft_margin_loss,
                                        triplet_margin_with_distance_loss)
__all__ += ["adaptive_max_pool1d", "adaptive_max_pool2d", "adaptive_max_pool3d",
            "adaptive_max_pool1d_with_indices", "adaptive_max_pool2d_with_indices",
            "adaptive_max_pool3d_with_indices", "max_unpool1d", "max_unpool2d", "max_unpool3d",
            "affine_grid", "grid_sample", "gumbel_softmax", "pdist", "local_response_norm",
            "multi_margin_loss", "multilabel_margin_loss", "multilabel_soft_margin_loss",
            "triplet_margin_with_distance_loss"]
from ._functional_pool_shuffle import (lp_pool1d, lp_pool2d, channel_shuffle,  # noqa: E402,F401
                                       upsample, upsample_nearest, upsample_bilinear)
__all__ += ["lp_pool1d", "lp_pool2d", "channel_shuffle", "upsample", "upsample_nearest",
            "upsample_bilinear"]
from ._random_layers import (alpha_dropout, feature_alpha_dropout, rrelu,  # noqa: E402,F401
                             rrelu_)
__all__ += ["alpha_dropout", "feature_alpha_dropout", "rrelu", "rrelu_"]
