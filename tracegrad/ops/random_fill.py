"""In-place random fills as Tensor methods: `normal_(mean=0, std=1)`, `uniform_(from=0,
to=1)`, what GPT-style init code writes (`module.weight.data.normal_(0.0, 0.02)`).

Each is `copy_` of a fresh draw from tracegrad's generator, so it is an ordinary in-place
op: it bumps the version, refuses a leaf that requires grad in grad mode (PyTorch's error),
and under `compile` draws anew on every call.
"""
from . import creation as C


def normal_(self, mean=0.0, std=1.0, *, generator=None):
    """Fill with samples of N(mean, std^2).

    >>> tracegrad.empty(3).normal_(0.0, 0.02).shape
    torch.Size([3])
    """
    z = C.randn(tuple(self.shape), dtype=self.dtype, generator=generator)
    return self.copy_(z * std + mean)


def uniform_(self, *args, generator=None, **kwargs):
    """Fill with samples of U(from, to) (PyTorch's argument names `from` and `to`)."""
    lo, hi = (list(args) + [None, None])[:2]
    lo = kwargs.pop("from", 0.0) if lo is None else lo
    hi = kwargs.pop("to", 1.0) if hi is None else hi
    if kwargs:
        raise TypeError(f"uniform_() got an unexpected keyword argument '{next(iter(kwargs))}'")
    u = C.rand(tuple(self.shape), dtype=self.dtype, generator=generator)
    return self.copy_(u * (hi - lo) + lo)
