"""The primitive table and the op functions built on it (one module per op family)."""
from .primitive import REGISTRY, Primitive  # noqa: F401
from .elementwise import *  # noqa: F401,F403
from .elementwise import abs, pow, round  # noqa: F401
from .reduction import (sum, mean, prod, amax, amin, max, min, argmax, argmin, norm,  # noqa
                        var, std, logsumexp, softmax, log_softmax, any, all)
from .linalg import matmul, mm, bmm, dot, outer, ger, einsum  # noqa: F401
from .shape import (sum_to, expand, broadcast_to, broadcast_tensors, view, reshape,  # noqa
                    flatten, squeeze, unsqueeze, permute, transpose, swapaxes, t, clone,
                    contiguous, to_dtype, cat, concat, concatenate, stack, repeat, getitem,
                    setitem, narrow, select, split, chunk, unbind, nonzero)
from .creation import *  # noqa: F401,F403
from .generator import Generator, default_generator, initial_seed, manual_seed, seed  # noqa: F401
from .conv import im2col, col2im  # noqa: F401
from . import loss as _loss  # noqa: F401  (primitives used by nn.functional's losses)
from .gather_scatter import (gather, scatter, scatter_add, index_select, masked_fill,  # noqa: F401
                     masked_fill_, scatter_, scatter_add_)
from .index_add import index_add, index_add_  # noqa: F401
from .sort import sort, argsort, topk  # noqa: F401
from .scan import cumsum, cumprod  # noqa: F401
from .structure import tril, triu, tril_, triu_, flip, repeat_interleave  # noqa: F401
from .baddbmm import baddbmm  # noqa: F401
from .sampling import multinomial, bernoulli  # noqa: F401
from .linear import addmm  # noqa: F401
from .compare import (equal, isclose, allclose, isinf, isfinite, isposinf,  # noqa: F401
                      isneginf)
from .composite_more import hstack, vstack, roll, diag, nan_to_num  # noqa: F401
from .diagonal_view import diagonal  # noqa: F401
from .index_writes import index_put, index_fill, index_copy  # noqa: F401
from .fmod_prim import fmod, trunc  # noqa: F401
from .counting import bincount  # noqa: F401
from .trig_prim import (tan, asin, acos, atan, sinh, cosh, asinh, acosh, atanh,  # noqa: F401
                        log10, atan2, arcsin, arccos, arctan, arcsinh, arccosh, arctanh,
                        arctan2)
from .composite_math import (logaddexp, logaddexp2, clamp_min, clamp_max,  # noqa: F401
                             var_mean, std_mean, nansum, nanmean, count_nonzero, addcmul,
                             addcdiv, logit, cdist, median, quantile, searchsorted, bucketize,
                             trapezoid)
from .composite_shape import (meshgrid, rot90, fliplr, flipud, movedim, moveaxis,  # noqa
                              tile, tensordot, kron, diff, block_diag, cartesian_prod)
from .composite_select import masked_select, unique  # noqa: F401
from .linalg_solvers import inverse, det, logdet, slogdet, cholesky_solve  # noqa: F401
from .linalg_solvers import cholesky_legacy as cholesky  # noqa: F401
from .linalg_functions import (matrix_exp, pinverse, matrix_power,  # noqa: F401
                               cholesky_inverse)
from .special_prim import lgamma, digamma, polygamma, erfc, erfinv, mvlgamma  # noqa: F401
from .special_more import sinc, exp2  # noqa: F401
from .mode import mode  # noqa: F401
from .random_dists import poisson, binomial  # noqa: F401
from .special_bessel import i0  # noqa: F401
from .householder import geqrf, householder_product as orgqr  # noqa: F401
from .shift_prim import bitwise_left_shift, bitwise_right_shift  # noqa: F401
from .composite_missing import sgn, frac, frac_, fmax, fmin, swapdims  # noqa: F401
from .scatter_reduce import scatter_reduce  # noqa: F401
from .as_strided import as_strided  # noqa: F401
from .linalg_more import (mv, addmv, addmv_, addr, addbmm, inner, vdot, dist, cov,  # noqa
                          corrcoef, diag_embed, diagflat, chain_matmul, cross, vander,
                          frobenius_norm, nuclear_norm)
from .elementwise_more import (hypot, copysign, heaviside, gcd, gcd_, lcm, lcm_,  # noqa
                               float_power, frexp, ldexp, ldexp_, nextafter, signbit, deg2rad,
                               deg2rad_, rad2deg, rad2deg_)
from .shape_more import (tensor_split, hsplit, vsplit, dsplit, atleast_1d,  # noqa: F401
                         atleast_2d, atleast_3d, column_stack, row_stack, dstack, take,
                         take_along_dim, unravel_index, slice_scatter, select_scatter,
                         diagonal_scatter, as_strided_scatter, combinations, aminmax,
                         cumulative_trapezoid, trapz)
from .scan_more import (cummax, cummin, logcumsumexp, kthvalue, nanmedian,  # noqa: F401
                        nanquantile)
from .index_more import put, masked_scatter, index_reduce, renorm  # noqa: F401
from .histograms import histc, histogram, unique_consecutive  # noqa: F401
from .linalg_legacy import svd, qr  # noqa: F401
from .igamma_prim import igamma, igammac  # noqa: F401
from .lu_factorization import lu, lu_unpack, lu_solve  # noqa: F401
# float16 kernels computed in float32 (Note [Half precision computed in float])
from . import half_precision as _half_precision  # noqa: F401,E402
from . import grad_scale as _grad_scale  # noqa: F401,E402  (nn.functional.embedding)
from . import static_loss as _static_loss  # noqa: F401,E402  (Note [Static kernels])
from . import static_layers as _static_layers  # noqa: F401,E402  (Note [Static kernels])
