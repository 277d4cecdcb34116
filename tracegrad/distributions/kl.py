"""`kl_divergence(p, q)` and `register_kl`: closed forms by the pair of types, PyTorch's
formulas for Normal, Bernoulli, Categorical and Uniform pairs (inf where q has no mass)."""
from .. import ops as O
from ..nn import functional as F
from .bernoulli import Bernoulli
from .categorical import Categorical
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
