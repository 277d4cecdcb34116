"""Batch normalization: `BatchNorm1d` for (N, C) and (N, C, L) inputs, `BatchNorm2d` for
(N, C, H, W) and `BatchNorm3d` for (N, C, D, H, W), each per channel C.

Training normalizes with the batch statistics (biased variance) and updates the buffers
`running_mean` / `running_var` (unbiased variance) in place under no_grad, plus the
`num_batches_tracked` counter; eval mode normalizes with the running statistics. Buffers
and their state_dict keys are PyTorch's.
"""
from .. import _dtype as D
from .. import _mode
from .._effects import active
from .._errors import TracegradValueError
from ..ops import creation as C
from . import functional as F
from ._norm import affine_parameters, reset_affine
from .module import Module


class _BatchNorm(Module):
    """Shared machinery of the BatchNorm layers (subclasses check the input rank)."""

    _version = 2

    def __init__(self, num_features, eps=1e-5, momentum=0.1, affine=True,
                 track_running_stats=True, device=None, dtype=None, *, bias=True):
        super().__init__()
        dtype = dtype if dtype is not None else D.get_default_dtype()
        self.num_features = num_features
        self.eps = eps
        self.momentum = momentum
        self.affine = affine
        self.track_running_stats = track_running_stats
        affine_parameters(self, (num_features,), affine, bias, dtype)
        if track_running_stats:
            self.register_buffer("running_mean", C.zeros(num_features, dtype=dtype))
            self.register_buffer("running_var", C.ones(num_features, dtype=dtype))
            self.register_buffer("num_batches_tracked", C.tensor(0, dtype=D.int64))
        else:
            for name in ("running_mean", "running_var", "num_batches_tracked"):
                self.register_buffer(name, None)
        self.reset_parameters()

    def reset_running_stats(self):
        if self.track_running_stats:
            with _mode.no_grad():
                self.running_mean.zero_()
                self.running_var.fill_(1)
                self.num_batches_tracked.zero_()

    def reset_parameters(self):
        self.reset_running_stats()
        reset_affine(self)

    def _check_input_dim(self, input):
        raise NotImplementedError

    def forward(self, input):
        self._check_input_dim(input)
        factor = 0.0 if self.momentum is None else self.momentum
        if self.training and self.track_running_stats and self.num_batches_tracked is not None:
            with _mode.no_grad():
                self.num_batches_tracked.add_(1)
            if self.momentum is None:         # cumulative moving average
                factor = _cumulative_factor(self.num_batches_tracked)
        use_batch_stats = self.training or (self.running_mean is None
                                            and self.running_var is None)
        keep = not self.training or self.track_running_stats
        return F.batch_norm(input, self.running_mean if keep else None,
                            self.running_var if keep else None, self.weight, self.bias,
                            use_batch_stats, factor, self.eps)

    def extra_repr(self):
        return (f"{self.num_features}, eps={self.eps}, momentum={self.momentum}, "
                f"affine={self.affine}, bias={self.bias is not None}, "
                f"track_running_stats={self.track_running_stats}")

    def _load_from_state_dict(self, state_dict, prefix, local_metadata, strict,
                              missing_keys, unexpected_keys, error_msgs):
        # Checkpoints older than version 2 have no counter: keep ours (as PyTorch does).
        version = local_metadata.get("version")
        key = prefix + "num_batches_tracked"
        if (version is None or version < 2) and self.track_running_stats \
                and key not in state_dict:
            state_dict[key] = (self.num_batches_tracked if self.num_batches_tracked is not None
                               else C.tensor(0, dtype=D.int64))
        super()._load_from_state_dict(state_dict, prefix, local_metadata, strict,
                                      missing_keys, unexpected_keys, error_msgs)


def _cumulative_factor(count):
    """`1 / num_batches_tracked` (momentum=None). Inside a compiled call a 0-d float64
    tensor computed from the counter, so the counter's value is data, not a guard that
    fails on every call (the same float64 division as eager's Python number)."""
    if active() is None:
        return 1.0 / float(count)
    return 1.0 / count.to(D.float64)


class BatchNorm1d(_BatchNorm):
    """Batch normalization over (N, C) or (N, C, L) input, per channel C.

    >>> bn = BatchNorm1d(3)
    >>> bn(tracegrad.randn(8, 3)).shape
    torch.Size([8, 3])
    """

    def _check_input_dim(self, input):
        if input.dim() not in (2, 3):
            raise TracegradValueError(f"expected 2D or 3D input (got {input.dim()}D input)")


class BatchNorm2d(_BatchNorm):
    """Batch normalization over (N, C, H, W) input, per channel C (after a `Conv2d`)."""

    def _check_input_dim(self, input):
        if input.dim() != 4:
            raise TracegradValueError(f"expected 4D input (got {input.dim()}D input)")


class BatchNorm3d(_BatchNorm):
    """Batch normalization over (N, C, D, H, W) input, per channel C."""

    def _check_input_dim(self, input):
        if input.dim() != 5:
            raise TracegradValueError(f"expected 5D input (got {input.dim()}D input)")
