"""PyTorch's older spellings of decompositions, over `tracegrad.linalg`: `svd(input,
some=True, compute_uv=True)` returning (U, S, V) with V (not Vh), and `qr(input, some=True)`
(deprecated in PyTorch, which warns once). Gradients and limits are linalg.svd's and
linalg.qr's (ops/linalg_decomp.py). `lu`, `lu_solve` and `lu_unpack` live in
lu_factorization.py.
"""
from . import creation as C
from . import shape as S
from .return_types import copy_out, named

__all__ = []


def svd(input, some=True, compute_uv=True, *, out=None):
    """(U, S, V) with input = U diag(S) V^T; `some=False` gives full U and V; without
    `compute_uv`, U and V are zero-filled (m, m) and (n, n) matrices."""
    from .linalg_decomp import svd as linalg_svd, svdvals
    if not compute_uv:
        m, n = input.shape[-2:]
        batch = tuple(input.shape[:-2])
        s = svdvals(input)
        res = (C.zeros(batch + (m, m), dtype=input.dtype), s,
               C.zeros(batch + (n, n), dtype=input.dtype))
    else:
        U, s, Vh = linalg_svd(input, full_matrices=not some)
        res = (U, s, S.transpose(Vh, -2, -1))
    r = named("svd", ("U", "S", "V"), res)
    return copy_out(r, out)


def qr(input, some=True, *, out=None):
    """(Q, R) with input = QR ('reduced' when `some`, else 'complete'); deprecated in
    PyTorch for `linalg.qr`, with its warning (once)."""
    from .linalg_decomp import qr as linalg_qr
    from .linalg_more import _warn_once
    _warn_once("qr", "torch.qr is deprecated in favor of torch.linalg.qr and will be removed "
               "in a future PyTorch release.\nThe boolean parameter 'some' has been replaced "
               "with a string parameter 'mode'.\nQ, R = torch.qr(A, some)\nshould be replaced "
               "with\nQ, R = torch.linalg.qr(A, 'reduced' if some else 'complete')")
    Q, R = linalg_qr(input, "reduced" if some else "complete")
    r = named("qr", ("Q", "R"), (Q, R))
    return copy_out(r, out)
