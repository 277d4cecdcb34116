"""`tracegrad.special`: the functions of `torch.special`, under PyTorch's names.

Most are the same functions as at the top level (`special.gammaln is tracegrad.lgamma`,
`special.expit is tracegrad.sigmoid`); `entr`, `xlog1py`, `ndtr`, `ndtri`, `log_ndtr`
live in ops/special_more.py. All are differentiable, trace and compile like any other op.

>>> import tracegrad as tg
>>> tg.special.gammaln(tg.tensor([4.]))
tensor([1.7918])
"""
from .ops.elementwise import erf, expm1, log1p, xlogy, round  # noqa: F401
from . import sigmoid as expit  # noqa: F401,E402  (the package's: it takes `out=`)
from .ops.composite_math import logit  # noqa: F401
from .ops.reduction import logsumexp, softmax, log_softmax  # noqa: F401
from .ops.special_prim import (lgamma as gammaln, digamma, polygamma, erfc, erfinv,  # noqa: F401
                               mvlgamma as multigammaln)
from .ops.special_more import entr, xlog1py, ndtr, ndtri, log_ndtr, sinc, exp2  # noqa: F401
from .ops.special_bessel import i0, i1, i0e, i1e  # noqa: F401

psi = digamma

__all__ = ["gammaln", "digamma", "psi", "polygamma", "multigammaln", "erf", "erfc", "erfinv",
           "expit", "logit", "xlogy", "xlog1py", "entr", "ndtr", "ndtri", "log_ndtr", "log1p",
           "expm1", "exp2", "logsumexp", "softmax", "log_softmax", "sinc", "round", "i0", "i1",
           "i0e", "i1e"]
