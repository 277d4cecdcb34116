"""Modified Bessel functions of the first kind: `i0` (torch.i0 / special.i0), `special.i1`,
and the exponentially scaled `special.i0e`, `special.i1e` (kernels in special_kernels.py).

PyTorch's derivatives, in tracegrad ops (so gradients of every order exist):
i0' = i1; i1' = i0 - i1 / x (1/2 at 0); i0e' = i1e - sign(x) i0e;
i1e' = i0e - i1e (sign(x) + 1 / x) (1/2 at 0).
"""
from .._dispatch import dispatch
from . import elementwise as E
from . import special_kernels_bessel as K
from .primitive import inplace_of

__all__ = ["i0", "i1", "i0e", "i1e"]


def _over_x_at_zero_half(g, x, main):
    """g * main(xs) with xs = x away from 0, and g / 2 where x == 0."""
    zero = E.eq(x, 0)
    xs = E.where(zero, 1.0, x)
    return E.mul(g, E.where(zero, 0.5, main(xs)))


def _i0_vjp(g, ins, out, n):
    return (E.mul(g, i1(ins[0])),)


def _i1_vjp(g, ins, out, n):
    x = ins[0]
    return (_over_x_at_zero_half(g, x, lambda xs: E.sub(i0(xs), E.div(i1(xs), xs))),)


def _i0e_vjp(g, ins, out, n):
    x = ins[0]
    return (E.mul(g, E.sub(i1e(x), E.mul(E.sign(x), out))),)


def _i1e_vjp(g, ins, out, n):
    x = ins[0]
    return (_over_x_at_zero_half(g, x, lambda xs: E.sub(
        i0e(xs), E.mul(i1e(xs), E.add(E.sign(xs), E.reciprocal(xs))))),)


def _kernel(f):
    def k(x):
        return f(x)
    k.__name__ = f.__name__
    return E._quiet(k)


I0 = E._unary("i0", _kernel(K.i0), _i0_vjp, saves=(0,))
I1 = E._unary("special_i1", _kernel(K.i1), _i1_vjp, saves=(0,),
              grad_fn_name="SpecialI1Backward0")
I0E = E._unary("special_i0e", _kernel(K.i0e), _i0e_vjp, saves=(0,), saves_out=True,
               grad_fn_name="SpecialI0EBackward0")
I1E = E._unary("special_i1e", _kernel(K.i1e), _i1e_vjp, saves=(0,),
               grad_fn_name="SpecialI1EBackward0")
I0_ = inplace_of(I0)


def i0(input):
    """The modified Bessel function of the first kind of order 0.

    >>> i0(tensor([0., 1.]))
    tensor([1.0000, 1.2661])
    """
    return dispatch(I0, (input,))


def i1(input):
    """The modified Bessel function of the first kind of order 1.

    >>> i1(tensor([1.]))
    tensor([0.5652])
    """
    return dispatch(I1, (input,))


def i0e(input):
    """`exp(-|x|) * i0(x)`, finite for large |x|.

    >>> i0e(tensor([100.]))
    tensor([0.0399])
    """
    return dispatch(I0E, (input,))


def i1e(input):
    """`exp(-|x|) * i1(x)`, finite for large |x|.

    >>> i1e(tensor([100.]))
    tensor([0.0397])
    """
    return dispatch(I1E, (input,))


def i0_(self):
    """In-place `i0` (bumps `_version`)."""
    return dispatch(I0_, (self,))
