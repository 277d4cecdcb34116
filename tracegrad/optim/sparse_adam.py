"""`SparseAdam`: PyTorch's constructor, checks and state layout. PyTorch's SparseAdam only
updates with sparse gradients (`nn.Embedding(sparse=True)`); tracegrad's gradients are
always dense, so `step()` with a gradient raises PyTorch's error for a dense one, loudly
rather than updating rows PyTorch would leave alone.
"""
from .._errors import TracegradRuntimeError, TracegradValueError
from .optimizer import Optimizer, check_tensor_lr, grad_mode_of_step


class SparseAdam(Optimizer):
    """`SparseAdam(params, lr=1e-3, betas=(0.9, 0.999), eps=1e-8, maximize=False)`.

    >>> SparseAdam([tracegrad.nn.Parameter(tracegrad.ones(2))]).defaults["betas"]
    (0.9, 0.999)
    """

    def __init__(self, params, lr=1e-3, betas=(0.9, 0.999), eps=1e-8, maximize=False):
        check_tensor_lr(lr)
        if not 0.0 < lr:
            raise TracegradValueError(f"Invalid learning rate: {lr}")
        if not 0.0 < eps:
            raise TracegradValueError(f"Invalid epsilon value: {eps}")
        for i in (0, 1):
            if not 0.0 <= betas[i] < 1.0:
                raise TracegradValueError(f"Invalid beta parameter at index {i}: {betas[i]}")
        super().__init__(params, dict(lr=lr, betas=betas, eps=eps, maximize=maximize))

    @grad_mode_of_step
    def step(self, closure=None):
        """Raises for every (necessarily dense) gradient, as PyTorch does for a dense one."""
        loss = self._closure_loss(closure)
        for group in self.param_groups:
            for p in group["params"]:
                if p.grad is not None:
                    raise TracegradRuntimeError(
                        "SparseAdam does not support dense gradients, please consider Adam "
                        "instead (tracegrad has no sparse gradients: nn.Embedding(sparse="
                        "True) gives a dense one)")
        return loss
