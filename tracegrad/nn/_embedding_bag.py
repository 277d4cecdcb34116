"""`F.embedding_bag` and `nn.EmbeddingBag`: sums, means or maxima of bags of embeddings
without materialising the bags.

Note [Bags as a membership matrix]: with `offsets`, element i belongs to bag
`searchsorted(offsets, i, right=True) - 1` (a comparison and a sum, so the bag layout is
data, never a Python loop or a data-dependent shape, and the function traces with no guard).
A (bags, elements) 0/1 matrix then reduces by one matmul (sum, mean) or a masked amax (max).
Entries equal to `padding_idx` belong to no bag; an empty bag gives zeros, as PyTorch.

Note [Past the last offset]: with `include_last_offset=True` the last offset should be
len(input). When it is smaller, PyTorch's CPU kernels disagree: its fast path ('sum' or
'mean', no padding_idx, weight not float64) drops the elements past it, the general path
puts them in the last bag. Both are reproduced.
"""
import math

from .. import ops as O
from .._mode import no_grad
from .._errors import TracegradRuntimeError, TracegradValueError, op_error
from . import init
from .module import Module
from .parameter import Parameter

__all__ = ["embedding_bag", "EmbeddingBag", "aten_embedding_bag"]


def _bags(input, offsets, include_last_offset, op="embedding_bag", with_bag_of=False,
          absorb=True):
    """(flat indices, membership (bags, n) bool) (and each element's bag). With
    `include_last_offset`, elements past the last offset join the last bag if `absorb`,
    else no bag (Note [Past the last offset])."""
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
        if include_last_offset and absorb:
            bag_of = O.clamp(bag_of, max=max(nbags - 1, 0))
    else:
        raise op_error(TracegradValueError, op, "input has to be 1D or 2D Tensor, but got "
                       f"Tensor of dimension {input.ndim}")
    member = O.eq(O.unsqueeze(bag_of, 0), O.unsqueeze(O.arange(nbags), 1))
    return (flat, member, bag_of) if with_bag_of else (flat, member)


def _fast_path(mode, padding_idx, weight):
    """Whether PyTorch's CPU kernel takes its fast path (Note [Past the last offset])."""
    return mode != "max" and padding_idx is None and weight.dtype.name != "float64"


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
    flat, member = _bags(input, offsets, include_last_offset, absorb=not _fast_path(
        mode, padding_idx, weight))
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

    @classmethod
    def from_pretrained(cls, embeddings, freeze=True, max_norm=None, norm_type=2.0,
                        scale_grad_by_freq=False, mode="mean", sparse=False,
                        include_last_offset=False, padding_idx=None):
        """An EmbeddingBag whose weight is `embeddings` (2-D), frozen unless `freeze=False`.

        >>> EmbeddingBag.from_pretrained(tracegrad.ones(4, 2), mode="sum")
        EmbeddingBag(4, 2, mode='sum')
        """
        if embeddings.ndim != 2:
            raise TracegradValueError("Embeddings parameter is expected to be 2-dimensional")
        rows, cols = embeddings.shape
        bag = cls(rows, cols, max_norm, norm_type, scale_grad_by_freq, mode, sparse,
                  embeddings, include_last_offset, padding_idx)
        bag.weight.requires_grad = not freeze
        return bag

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


_MODES = {0: "sum", 1: "mean", 2: "max"}


def aten_embedding_bag(weight, indices, offsets, scale_grad_by_freq=False, mode=0,
                       sparse=False, per_sample_weights=None, include_last_offset=False,
                       padding_idx=None):
    """`torch.embedding_bag`: the tuple (output, offset2bag, bag_size, max_indices) of
    PyTorch's CPU kernel, `mode` 0 / 1 / 2 for sum / mean / max. offset2bag is each index's
    bag (empty for 'sum' without padding_idx unless weight is float64: PyTorch's fast
    path); bag_size counts non-padding indices ('mean', 'max'; zeros for 'sum');
    max_indices is the row chosen per (bag, column) for 'max', bag_size for 'mean', zeros
    for 'sum'. Integer outputs take the indices' dtype.

    >>> out, *_ = aten_embedding_bag(tracegrad.ones(4, 2), tracegrad.tensor([0, 1, 3]),
    ...                              tracegrad.tensor([0, 2]))
    >>> out
    tensor([[2., 2.],
            [1., 1.]])
    """
    from .._tensor import Tensor
    if not isinstance(offsets, Tensor):
        raise TypeError("embedding_bag(): argument 'offsets' (position 3) must be Tensor, "
                        f"not {type(offsets).__name__}")
    if mode not in _MODES:
        raise op_error(TracegradRuntimeError, "embedding_bag", f"unknown mode {mode}")
    name = _MODES[mode]
    out = embedding_bag(indices, weight, offsets, None, 2, scale_grad_by_freq, name, sparse,
                        per_sample_weights, include_last_offset, padding_idx)
    with no_grad():
        flat, member, bag_of = _bags(O.reshape(indices, (-1,)), offsets,
                                     include_last_offset, with_bag_of=True,
                                     absorb=not _fast_path(name, padding_idx, weight))
        nbags = member.shape[0]
        if padding_idx is not None:
            member = O.logical_and(member, O.unsqueeze(
                O.ne(flat, padding_idx % weight.shape[0]), 0))
        zeros = O.zeros((nbags,), dtype=flat.dtype)
        bag_of = bag_of.to(flat.dtype)
        if name == "sum":            # PyTorch's fast path skips offset2bag
            fast = _fast_path(name, padding_idx, weight)
            return out, (O.zeros((0,), dtype=flat.dtype) if fast else bag_of), zeros, zeros
        bag_size = O.sum(member.to(flat.dtype), 1)
        if name == "mean":
            return out, bag_of, bag_size, bag_size
        rows = O.index_select(weight, 0, flat) if flat.shape[0] else None
        if rows is None:
            return out, bag_of, bag_size, O.zeros((nbags, weight.shape[1]), dtype=flat.dtype)
        masked = O.where(O.unsqueeze(member, -1), O.unsqueeze(rows, 0), -math.inf)
        first = O.argmax(masked, 1)                                     # (bags, D)
        chosen = O.gather(O.expand(O.unsqueeze(flat, -1), (flat.shape[0], weight.shape[1])),
                          0, O.reshape(first, (-1, weight.shape[1])))
        empty = O.unsqueeze(O.logical_not(O.any(member, 1)), -1)
        return out, bag_of, bag_size, O.where(empty, 0, chosen).to(flat.dtype)
