"""In-place random fills as Tensor methods: `normal_(mean=0, std=1)`, `uniform_(from=0,
to=1)`, what GPT-style init code writes (`module.weight.data.normal_(0.0, 0.02)`).

Each is `copy_` of a fresh draw from tracegrad's generator, so it is an ordinary in-place
op: it bumps the version, refuses a leaf that requires grad in grad mode (PyTorch's error),
and under `compile` draws anew on every call.
"""
from . import creation as C


def _check_leaf(self, op):
    """PyTorch names the fill itself (`normal_`), not the `copy_` it is built on."""
    from .._errors import InplaceError, op_error
    from .._mode import is_grad_enabled
    if self.requires_grad and self.is_leaf and is_grad_enabled():
        raise op_error(InplaceError, op, "a leaf Variable that requires grad is being used in "
                       "an in-place operation.", "Wrap the update in `with torch.no_grad():`, "
                       "or clone the tensor first.")


def normal_(self, mean=0.0, std=1.0, *, generator=None):
    """Fill with samples of N(mean, std^2).

    >>> tracegrad.empty(3).normal_(0.0, 0.02).shape
    torch.Size([3])
    """
    _check_leaf(self, "normal_")
    z = C.randn(tuple(self.shape), dtype=self.dtype, generator=generator)
    return self.copy_(z * std + mean)


def uniform_(self, *args, generator=None, **kwargs):
    """Fill with samples of U(from, to) (PyTorch's argument names `from` and `to`)."""
    _check_leaf(self, "uniform_")
    lo, hi = (list(args) + [None, None])[:2]
    lo = kwargs.pop("from", 0.0) if lo is None else lo
    hi = kwargs.pop("to", 1.0) if hi is None else hi
    if kwargs:
        raise TypeError(f"uniform_() got an unexpected keyword argument '{next(iter(kwargs))}'")
    u = C.rand(tuple(self.shape), dtype=self.dtype, generator=generator)
    return self.copy_(u * (hi - lo) + lo)
