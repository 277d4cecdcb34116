"""`tracegrad.distributions`: the common distributions of `torch.distributions` (Normal,
Bernoulli, Categorical, OneHotCategorical, Uniform, Gamma, Poisson, Beta, Dirichlet,
MultivariateNormal, Independent, TransformedDistribution and LogNormal, with the
elementwise `transforms`) and `kl_divergence`, composed of tracegrad ops, so `log_prob`,
`entropy`, `rsample` and KL terms differentiate, trace and compile like any other code.
Samples come from tracegrad's generator (numbers differ from PyTorch's).
"""
from .distribution import Distribution  # noqa: F401
from .normal import Normal  # noqa: F401
from .bernoulli import Bernoulli  # noqa: F401
from .categorical import Categorical  # noqa: F401
from .uniform import Uniform  # noqa: F401
from .gamma import Gamma, Poisson  # noqa: F401
from .dirichlet import Beta, Dirichlet  # noqa: F401
from .independent import Independent  # noqa: F401
from .one_hot_categorical import OneHotCategorical  # noqa: F401
from .multivariate_normal import MultivariateNormal  # noqa: F401
from .transformed_distribution import LogNormal, TransformedDistribution  # noqa: F401
from . import transforms  # noqa: F401
from .kl import kl_divergence, register_kl  # noqa: F401

__all__ = ["Distribution", "Normal", "Bernoulli", "Categorical", "Uniform", "Gamma", "Poisson",
           "Beta", "Dirichlet", "Independent", "OneHotCategorical", "MultivariateNormal",
           "TransformedDistribution", "LogNormal", "transforms", "kl_divergence",
           "register_kl"]
