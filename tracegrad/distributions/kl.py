"""`kl_divergence(p, q)` and `register_kl`: closed forms by the pair of types, PyTorch's
formulas for Normal, Bernoulli, Categorical, OneHotCategorical, Uniform, Gamma, Poisson,
Beta, Dirichlet, MultivariateNormal, Independent and TransformedDistribution pairs (inf
where q has no mass)."""
from .. import ops as O
from ..nn import functional as F
from .bernoulli import Bernoulli
from .categorical import Categorical
from .dirichlet import Beta, Dirichlet
from .gamma import Gamma, Poisson
from .independent import Independent, _sum_rightmost
from .multivariate_normal import MultivariateNormal, kl_multivariate_normal
from .one_hot_categorical import OneHotCategorical
from .transformed_distribution import TransformedDistribution
from .normal import Normal
from .uniform import Uniform

_KL = {}


def register_kl(type_p, type_q):
    """Decorator: `@register_kl(P, Q) def kl(p, q): ...` adds a closed form."""
    def deco(fn):
        _KL[(type_p, type_q)] = fn
        return fn
    return deco


def kl_divergence(p, q):
    """KL(p || q), batched over the distributions' batch shape.

    >>> kl_divergence(Normal(0., 1.), Normal(1., 1.))
    tensor(0.5000)
    """
    for (tp, tq), fn in _KL.items():
        if isinstance(p, tp) and isinstance(q, tq):
            return fn(p, q)
    raise NotImplementedError(f"No KL(p || q) is implemented for p type {type(p).__name__} "
                              f"and q type {type(q).__name__}")


@register_kl(Normal, Normal)
def _kl_normal_normal(p, q):
    var_ratio = O.pow(O.div(p.scale, q.scale), 2)
    t1 = O.pow(O.div(O.sub(p.loc, q.loc), q.scale), 2)
    return O.mul(O.sub(O.sub(O.add(var_ratio, t1), 1), O.log(var_ratio)), 0.5)


@register_kl(Bernoulli, Bernoulli)
def _kl_bernoulli_bernoulli(p, q):
    t1 = O.mul(p.probs, O.sub(F.softplus(O.neg(q.logits)), F.softplus(O.neg(p.logits))))
    t1 = O.where(O.eq(p.probs, 0), 0.0, O.where(O.eq(q.probs, 0), float("inf"), t1))
    t2 = O.mul(O.rsub(p.probs, 1), O.sub(F.softplus(q.logits), F.softplus(p.logits)))
    t2 = O.where(O.eq(p.probs, 1), 0.0, O.where(O.eq(q.probs, 1), float("inf"), t2))
    return O.add(t1, t2)


@register_kl(Categorical, Categorical)
def _kl_categorical_categorical(p, q):
    t = O.mul(p.probs, O.sub(p.logits, q.logits))
    t = O.where(O.eq(p.probs, 0), 0.0, O.where(O.eq(q.probs, 0), float("inf"), t))
    return O.sum(t, -1)


@register_kl(Uniform, Uniform)
def _kl_uniform_uniform(p, q):
    result = O.log(O.div(O.sub(q.high, q.low), O.sub(p.high, p.low)))
    outside = O.logical_or(O.gt(q.low, p.low), O.lt(q.high, p.high))
    return O.where(outside, float("inf"), result)


@register_kl(Gamma, Gamma)
def _kl_gamma_gamma(p, q):
    t1 = O.mul(q.concentration, O.log(O.div(p.rate, q.rate)))
    t2 = O.sub(O.lgamma(q.concentration), O.lgamma(p.concentration))
    t3 = O.mul(O.sub(p.concentration, q.concentration), O.digamma(p.concentration))
    t4 = O.mul(O.sub(q.rate, p.rate), O.div(p.concentration, p.rate))
    return O.add(O.add(O.add(t1, t2), t3), t4)


@register_kl(Poisson, Poisson)
def _kl_poisson_poisson(p, q):
    return O.sub(O.mul(p.rate, O.sub(O.log(p.rate), O.log(q.rate))), O.sub(p.rate, q.rate))


@register_kl(Beta, Beta)
def _kl_beta_beta(p, q):
    sp = O.add(p.concentration1, p.concentration0)
    sq = O.add(q.concentration1, q.concentration0)
    t1 = O.add(O.add(O.lgamma(q.concentration1), O.lgamma(q.concentration0)), O.lgamma(sp))
    t2 = O.add(O.add(O.lgamma(p.concentration1), O.lgamma(p.concentration0)), O.lgamma(sq))
    t3 = O.mul(O.sub(p.concentration1, q.concentration1), O.digamma(p.concentration1))
    t4 = O.mul(O.sub(p.concentration0, q.concentration0), O.digamma(p.concentration0))
    t5 = O.mul(O.sub(sq, sp), O.digamma(sp))
    return O.add(O.add(O.add(O.sub(t1, t2), t3), t4), t5)


@register_kl(Dirichlet, Dirichlet)
def _kl_dirichlet_dirichlet(p, q):
    sp, sq = O.sum(p.concentration, -1), O.sum(q.concentration, -1)
    t1 = O.sub(O.lgamma(sp), O.lgamma(sq))
    t2 = O.sum(O.sub(O.lgamma(p.concentration), O.lgamma(q.concentration)), -1)
    t3 = O.sub(p.concentration, q.concentration)
    t4 = O.sub(O.digamma(p.concentration), O.unsqueeze(O.digamma(sp), -1))
    return O.add(O.sub(t1, t2), O.sum(O.mul(t3, t4), -1))


@register_kl(OneHotCategorical, OneHotCategorical)
def _kl_onehotcategorical_onehotcategorical(p, q):
    return _kl_categorical_categorical(p._categorical, q._categorical)


@register_kl(Independent, Independent)
def _kl_independent_independent(p, q):
    if p.reinterpreted_batch_ndims != q.reinterpreted_batch_ndims:
        raise NotImplementedError
    return _sum_rightmost(kl_divergence(p.base_dist, q.base_dist), p.reinterpreted_batch_ndims)


register_kl(MultivariateNormal, MultivariateNormal)(kl_multivariate_normal)


@register_kl(TransformedDistribution, TransformedDistribution)
def _kl_transformed_transformed(p, q):
    if p.transforms != q.transforms or p.event_shape != q.event_shape:
        raise NotImplementedError
    return kl_divergence(p.base_dist, q.base_dist)
