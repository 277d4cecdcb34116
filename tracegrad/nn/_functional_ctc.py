"""Connectionist temporal classification: `F.ctc_loss` and `nn.CTCLoss`, as PyTorch.

A composite of differentiable ops: the CTC forward (alpha) recursion in log space over
the extended label sequence l' = (blank, l1, blank, l2, ..., blank), one step per time
frame, batched over N. Gradients (of any order), tracing and both backends come from the
ops. Per sample n the loss is -log p(target_n | log_probs[:input_lengths[n], n]).

Note [Safe log-sum-exp]: states no alignment reaches have alpha = -inf, and a plain
log-sum-exp over all -inf candidates has a NaN gradient, which `where` cannot mask (0 *
NaN). Each sum is taken against its detached, finite-clamped maximum, and states with a
zero sum are set to -inf by `where`, so unreachable states pass no gradient.

Note [PyTorch's CTC gradient]: PyTorch's CTC backward returns exp(log_probs) - gamma
(gamma the posterior of each (t, class)), which is the gradient with respect to the logits
of a `log_softmax` in front, not of `log_probs` themselves (-gamma). To be a drop-in we add
sum(exp(log_probs)) - its detached value over the frames used: zero in value, exp(log_probs)
in gradient; after a `log_softmax` it is sum(softmax) = 1, constant, so the composite is
then exact to every order. An infinite loss (no alignment) has a NaN gradient, as in
PyTorch, unless `zero_infinity=True` (zero loss and gradient).
"""
import numpy as np

from .. import _dtype as D
from .. import ops as O
from .._errors import TracegradRuntimeError, op_error
from ._losses import _reduction
from .loss import _Loss

_OP = "ctc_loss"


def _fail(msg):
    raise op_error(TracegradRuntimeError, _OP, msg)


def _lengths(v, n, name, limit=None):
    """Lengths as an int64 (n,) tensor; Python lengths are checked as PyTorch does."""
    if isinstance(v, O.Tensor):
        v = O.reshape(v, (-1,)).long()
        if v.shape[0] != n:
            _fail(f"{name} must be of size batch_size")
        return v
    vals = [int(x) for x in (v if isinstance(v, (tuple, list)) else (v,))]
    if len(vals) != n:
        _fail(f"{name} must be of size batch_size")
    for x in vals:
        if x < 0:
            _fail(f"Expected {name} to have value at least 0, but got value {x} (while "
                  "checking arguments for ctc_loss_allocate_outputs)")
        if limit is not None and x > limit:
            _fail(f"Expected {name} to have value at most {limit}, but got value {x} (while "
                  "checking arguments for ctc_loss_allocate_outputs)")
    return O.tensor(vals, dtype=D.int64)


def _padded_targets(targets, tg_len, target_lengths, n, blank):
    """Targets as (N, S) int64, entries past each target's length set to `blank`."""
    targets = targets.long()
    if targets.ndim == 2:
        if targets.shape[0] != n:
            _fail("targets must have batch_size rows")
        padded = targets
    else:                                      # concatenated: split by the Python lengths
        if isinstance(target_lengths, O.Tensor):
            target_lengths = target_lengths.tolist()
        lens = [int(x) for x in np.ravel(target_lengths)]
        offsets = np.concatenate([[0], np.cumsum(lens)[:-1]]).astype(np.int64)
        if sum(lens) > targets.shape[0]:
            _fail(f"Expected tensor to have size at least {sum(lens)} at dimension 0, but "
                  f"got size {targets.shape[0]} for argument #2 'targets' (while checking "
                  "arguments for ctc_loss_allocate_outputs)")
        s = max(lens, default=0)
        idx = np.minimum(offsets[:, None] + np.arange(s)[None, :], max(targets.shape[0] - 1, 0))
        padded = (O.reshape(O.index_select(targets, 0, O.tensor(idx.reshape(-1))), (n, s))
                  if s and targets.shape[0] else O.zeros((n, s), dtype=D.int64))
    valid = O.lt(O.arange(padded.shape[1]), O.unsqueeze(tg_len, 1))
    return O.where(valid, padded, O.full_like(padded, blank))


def _safe_logsumexp(x, dim):
    """log(sum(exp(x), dim)) whose gradient is 0, not NaN, where every entry is -inf
    (Note [Safe log-sum-exp])."""
    m = O.amax(x, dim, keepdim=True).detach()
    m = O.where(O.isfinite(m), m, O.zeros_like(m))
    total = O.sum(O.exp(O.sub(x, m)), dim)
    some = O.gt(total, 0)
    safe = O.where(some, total, O.ones_like(total))
    return O.where(some, O.add(O.log(safe), O.squeeze(m, dim)),
                   O.full_like(total, float("-inf")))


def _shift(alpha, k):
    """alpha moved k states right along the extended labels, -inf filling the first k."""
    pad = O.full((alpha.shape[0], k), float("-inf"), dtype=alpha.dtype)
    return O.cat([pad, alpha[:, :alpha.shape[1] - k]], 1)


def _nll(lp, ext, skip, in_len, tg_len):
    """-log p(target | frames) per sample, by the alpha recursion (lp (T, N, C))."""
    t_len, n, _ = lp.shape
    width = ext.shape[1]
    lp_ext = O.gather(lp, 2, O.expand(O.unsqueeze(ext, 0), (t_len, n, width)))
    ninf = O.full((n, width), float("-inf"), dtype=lp.dtype)
    alpha = O.where(O.lt(O.arange(width), 2), lp_ext[0], ninf)
    for t in range(1, t_len):
        cand = O.stack([alpha, _shift(alpha, 1), O.where(skip, _shift(alpha, 2), ninf)], 0)
        new = O.add(_safe_logsumexp(cand, 0), lp_ext[t])
        alpha = O.where(O.unsqueeze(O.lt(t, in_len), 1), new, alpha)
    last = O.mul(tg_len, 2)
    ends = O.stack([last, O.clamp(O.sub(last, 1), min=0)], 1)
    final = O.gather(alpha, 1, ends)
    has_label = O.stack([O.ge(tg_len, 0), O.gt(tg_len, 0)], 1)
    final = O.where(has_label, final, O.full_like(final, float("-inf")))
    return O.neg(_safe_logsumexp(final, 1))


def _torch_gradient_term(lp, used):
    """Zero in value; exp(log_probs) in gradient on the frames used (Note [PyTorch's CTC
    gradient])."""
    e = O.where(used, O.exp(lp), O.zeros_like(lp))
    s = O.sum(e, (0, 2))
    return O.sub(s, s.detach())


def _nan_gradient_inf(lp, used, infinite):
    """+inf where `infinite`, with a NaN gradient for every log-prob of the frames those
    samples use (PyTorch's infinite loss); elsewhere 0 with a zero gradient."""
    finite = O.where(O.logical_and(O.isfinite(lp), used), lp, O.zeros_like(lp))
    zero = O.mul(O.sum(finite, (0, 2)), 0)
    return O.neg(O.log(O.where(infinite, zero, O.ones_like(zero))))


def ctc_loss(log_probs, targets, input_lengths, target_lengths, blank=0, reduction="mean",
             zero_infinity=False):
    """CTC loss of log_probs (T, N, C) or (T, C) against targets, padded (N, S) or
    concatenated (sum(target_lengths),); lengths as tensors or tuples of ints.
    `reduction='mean'` divides each loss by its target length, then averages.

    >>> lp = tracegrad.randn(6, 2, 4).log_softmax(2)
    >>> ctc_loss(lp, tracegrad.tensor([[1, 2], [3, 3]]), (6, 5), (2, 2)).shape
    torch.Size([])
    """
    reduction = _reduction(reduction)
    unbatched = log_probs.ndim == 2
    lp = O.unsqueeze(log_probs, 1) if unbatched else log_probs
    if lp.ndim != 3:
        _fail(f"ctc_loss(): Expected 2D or 3D log_probs, but got {list(log_probs.shape)}")
    t_len, n, c = lp.shape
    if not 0 <= blank < c:
        _fail("blank must be in label range")
    if unbatched and targets.ndim == 1:
        targets = O.unsqueeze(targets, 0)
    in_len = _lengths(input_lengths, n, "input_lengths", t_len)
    tg_len = _lengths(target_lengths, n, "target_lengths")
    if targets.ndim == 2 and not isinstance(target_lengths, O.Tensor):
        longest = max(int(x) for x in np.ravel(target_lengths))
        if longest > targets.shape[1]:
            _fail(f"Expected tensor to have size at least {longest} at dimension 1, but got "
                  f"size {targets.shape[1]} for argument #2 'targets' (while checking "
                  "arguments for ctc_loss_allocate_outputs)")
    tgt = _padded_targets(targets, tg_len, target_lengths, n, blank)
    s = tgt.shape[1]
    blanks = O.full((n, s), blank, dtype=D.int64)
    ext = O.cat([O.reshape(O.stack([blanks, tgt], 2), (n, 2 * s)),
                 O.full((n, 1), blank, dtype=D.int64)], 1)
    skip = O.logical_and(O.ne(ext, blank), O.ne(ext, _shift_labels(ext, blank)))
    used = O.unsqueeze(O.lt(O.unsqueeze(O.arange(t_len), 1), in_len), 2)      # (T, N, 1)
    loss = O.add(_nll(lp, ext, skip, in_len, tg_len), _torch_gradient_term(lp, used))
    infinite = O.isinf(loss).detach()
    if zero_infinity:
        loss = O.where(infinite, O.zeros_like(loss), loss)
    else:
        loss = O.where(infinite, _nan_gradient_inf(lp, used, infinite), loss)
    if reduction == "mean":
        return O.mean(O.div(loss, O.clamp(tg_len, min=1).to(loss.dtype)))
    if reduction == "sum":
        return O.sum(loss)
    return O.squeeze(loss, 0) if unbatched else loss


def _shift_labels(ext, blank):
    """The extended labels two states back (blank for the first two)."""
    pad = O.full((ext.shape[0], 2), blank, dtype=D.int64)
    return O.cat([pad, ext[:, :ext.shape[1] - 2]], 1)


class CTCLoss(_Loss):
    """`CTCLoss(blank=0, reduction='mean', zero_infinity=False)`;
    `forward(log_probs, targets, input_lengths, target_lengths)` is `F.ctc_loss`.

    >>> CTCLoss(blank=3)
    CTCLoss()
    """

    def __init__(self, blank=0, reduction="mean", zero_infinity=False):
        super().__init__(reduction=reduction)
        self.blank, self.zero_infinity = blank, zero_infinity

    def forward(self, log_probs, targets, input_lengths, target_lengths):
        return ctc_loss(log_probs, targets, input_lengths, target_lengths, self.blank,
                        self.reduction, self.zero_infinity)
