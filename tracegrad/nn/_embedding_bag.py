"""`F.embedding_bag` and `nn.EmbeddingBag`: sums, means or maxima of bags of embeddings
without materialising the bags.

Note [Bags as a membership matrix]: with `offsets`, element i belongs to bag
`searchsorted(offsets, i, right=True) - 1` (a comparison and a sum, so the bag layout is
data, never a Python loop or a data-dependent shape, and the function traces with no guard).
A (bags, elements) 0/1 matrix then reduces by one matmul (sum, mean) or a masked amax (max).
Entries equal to `padding_idx` belong to no bag; an empty bag gives zeros, as PyTorch.
"""
import math

from .. import ops as O
from .._mode import no_grad
from .._errors import TracegradRuntimeError, TracegradValueError, op_error
from . import init
from .module import Module
from .parameter import Parameter

__all__ = ["embedding_bag", "EmbeddingBag"]


def _bags(input, offsets, include_last_offset, op="embedding_bag"):
    """(flat indices, membership (bags, n) bool)."""
    if input.ndim == 2:
        if offsets is not None:
            raise op_error(TracegradValueError, op, "if input is 2D, then offsets has to be "
                           "None, as input is treated is a mini-batch of fixed length "
                           "sequences.")
        b, length = input.shape
        flat = O.reshape(input, (-1,))
        bag_of = O.floor_divide(O.arange(b * length), max(length, 1))
        nbags = b
    elif input.ndim == 1:
        if offsets is None:
            raise op_error(TracegradValueError, op, "offsets has to be a 1D Tensor but got "
                           "None")
        if offsets.ndim != 1:
            raise op_error(TracegradValueError, op, "offsets has to be a 1D Tensor")
        flat = input
        pos = O.arange(input.shape[0])
        bag_of = O.sub(O.searchsorted(offsets, pos, right=True), 1)
        nbags = offsets.shape[0] - (1 if include_last_offset else 0)
    else:
        raise op_error(TracegradValueError, op, "input has to be 1D or 2D Tensor, but got "
                       f"Tensor of dimension {input.ndim}")
    member = O.eq(O.unsqueeze(bag_of, 0), O.unsqueeze(O.arange(nbags), 1))
    return flat, member


def embedding_bag(input, weight, offsets=None, max_norm=None, norm_type=2,
                  scale_grad_by_freq=False, mode="mean", sparse=False, per_sample_weights=None,
                  include_last_offset=False, padding_idx=None):
    """Bags of rows of `weight` reduced by `mode` ('sum', 'mean' or 'max'): `input` (B, L)
    holds B bags of L indices, or 1-D `input` with bag starts `offsets` (Note [Bags as a
    membership matrix]); `per_sample_weights` scale each looked-up row ('sum' only)."""
    from .functional import embedding
    if mode not in ("sum", "mean", "max"):
        raise op_error(TracegradValueError, "embedding_bag", f"mode has to be one of sum, "
                       f"mean or max, but got {mode}")
    if per_sample_weights is not None and mode != "sum":
        raise op_error(NotImplementedError, "embedding_bag", "embedding_bag: "
                       "per_sample_weights was not None. per_sample_weights is only supported "
                       f"for mode='sum' (got mode='{mode}'). Please open a feature request on "
                       "GitHub.")
    if per_sample_weights is not None and tuple(per_sample_weights.shape) != \
            tuple(input.shape):
        raise op_error(TracegradValueError, "embedding_bag", "embedding_bag: If "
                       "per_sample_weights ({}) is not None, then it must have the same shape "
                       "as the input ({})".format(tuple(per_sample_weights.shape),
                                                  tuple(input.shape)))
    if scale_grad_by_freq and mode == "max":
        raise op_error(TracegradValueError, "embedding_bag", "max mode does not support "
                       "scaling the gradient by the frequency")
    if scale_grad_by_freq:
        # PyTorch 2.13's bag backward divides rows by counts that do not match their
        # indices (EmbeddingBag([1, 1, 4]) scales row 4 by 1/2): not reproduced here
        raise NotImplementedError("embedding_bag: scale_grad_by_freq=True is not supported")
    flat, member = _bags(input, offsets, include_last_offset)
    if padding_idx is not None:
        n = weight.shape[0]
        if not -n <= padding_idx < n:
            raise op_error(TracegradRuntimeError, "embedding_bag", "padding_idx must be within "
                           "the number of embeddings")
        member = O.logical_and(member, O.unsqueeze(O.ne(flat, padding_idx % n), 0))
    rows = embedding(flat, weight, max_norm=max_norm, norm_type=norm_type)
    if per_sample_weights is not None:
        rows = O.mul(rows, O.unsqueeze(O.reshape(per_sample_weights, (-1,)), -1))
    if mode == "max":
        masked = O.where(O.unsqueeze(member, -1), O.unsqueeze(rows, 0), -math.inf)
        best = O.amax(masked, 1) if flat.shape[0] else O.zeros((member.shape[0],
                                                                weight.shape[1]),
                                                               dtype=weight.dtype)
        empty = O.unsqueeze(O.logical_not(O.any(member, 1)), -1)
        return O.where(empty, 0.0, best)
    m = member.to(rows.dtype)
    out = O.matmul(m, rows)
    if mode == "mean":
        out = O.div(out, O.unsqueeze(O.clamp(O.sum(m, 1), min=1.0), -1))
    return out


class EmbeddingBag(Module):
    """`EmbeddingBag(num_embeddings, embedding_dim, max_norm=None, norm_type=2.0,
    scale_grad_by_freq=False, mode='mean', sparse=False, _weight=None,
    include_last_offset=False, padding_idx=None)`; weight ~ N(0, 1), the padding row zero."""

    def __init__(self, num_embeddings, embedding_dim, max_norm=None, norm_type=2.0,
                 scale_grad_by_freq=False, mode="mean", sparse=False, _weight=None,
                 include_last_offset=False, padding_idx=None, device=None, dtype=None):
        super().__init__()
        self.num_embeddings, self.embedding_dim = num_embeddings, embedding_dim
        self.max_norm, self.norm_type = max_norm, norm_type
        self.scale_grad_by_freq, self.mode, self.sparse = scale_grad_by_freq, mode, sparse
        self.include_last_offset = include_last_offset
        if padding_idx is not None:
            if not -num_embeddings <= padding_idx < num_embeddings:
                raise TracegradValueError("padding_idx must be within num_embeddings")
            padding_idx %= num_embeddings
        self.padding_idx = padding_idx
        if _weight is None:
            self.weight = Parameter(O.empty((num_embeddings, embedding_dim), dtype=dtype))
            self.reset_parameters()
        else:
            if tuple(_weight.shape) != (num_embeddings, embedding_dim):
                raise TracegradValueError("Shape of weight does not match num_embeddings and "
                                          "embedding_dim")
            self.weight = Parameter(_weight)

    def reset_parameters(self):
        init.normal_(self.weight)
        if self.padding_idx is not None:
            with no_grad():
                self.weight[self.padding_idx].fill_(0)

    def forward(self, input, offsets=None, per_sample_weights=None):
        return embedding_bag(input, self.weight, offsets, self.max_norm, self.norm_type,
                             self.scale_grad_by_freq, self.mode, self.sparse,
                             per_sample_weights, self.include_last_offset, self.padding_idx)

    def extra_repr(self):
        s = f"{self.num_embeddings}, {self.embedding_dim}"
        if self.max_norm is not None:
            s += f", max_norm={self.max_norm}"
        if self.norm_type != 2:
            s += f", norm_type={self.norm_type}"
        if self.scale_grad_by_freq:
            s += ", scale_grad_by_freq=True"
        s += f", mode='{self.mode}'"
        if self.padding_idx is not None:
            s += f", padding_idx={self.padding_idx}"
        return s
