"""The `Distribution` base class and the helpers every distribution shares: argument
broadcasting (`broadcast_all`), PyTorch's argument and support validation (ValueError with
PyTorch's message), and the probs <-> logits conversions.

Note [Validation under compile]
Like PyTorch (`validate_args` defaults to on), parameters are checked at construction and
values at `log_prob`. A check reads a tensor's values as a Python bool, which records a
guard when traced: a compiled program re-checks on every call at the cost of one guard;
`validate_args=False` (or `Distribution.set_default_validate_args(False)`) skips them; that
default is read on every compiled call (a guard), so switching it between calls is seen.
"""
import math
import weakref

from .. import _dtype as D
from .. import _effects, _mode
from .. import ops as O
from .._settings import finfo
from .._tensor import Size, Tensor

__all__ = ["Distribution", "broadcast_all"]


def broadcast_all(*values):
    """Tensors (numbers become tensors of the default dtype, or of the tensors' float
    dtype) broadcast to one shape."""
    tensors = [v for v in values if isinstance(v, Tensor)]
    dtype = tensors[0].dtype if tensors else D.get_default_dtype()
    vs = [v if isinstance(v, Tensor) else O.tensor(float(v), dtype=dtype) for v in values]
    return O.broadcast_tensors(*vs)


def clamp_probs(probs):
    eps = finfo(probs.dtype).eps
    return O.clamp(probs, min=eps, max=1 - eps)


def probs_to_logits(probs, is_binary=False):
    ps = clamp_probs(probs)
    return O.sub(O.log(ps), O.log1p(O.neg(ps))) if is_binary else O.log(ps)


def logits_to_probs(logits, is_binary=False):
    return O.sigmoid(logits) if is_binary else O.softmax(logits, -1)


class lazy_property:
    """Computed on first access, then stored on the instance (PyTorch's lazy_property).

    Note [Lazy parameters under compile]
    A distribution made outside a compiled function and first asked for `probs` (or
    `logits`) inside it keeps the value the first call computed: eagerly, later calls read
    that tensor even after the caller's parameter it came from changed in place (an
    optimizer step on the tensor the distribution holds, as PyTorch's, without a copy).
    A compiled path would compute it again from the parameter on every call, and it never
    reads the attribute the first call stored: after `d.probs = new` between calls (the
    cache overridden, as users of PyTorch's lazy attributes do) it would still compute the
    old value. So the path of such a trace is not kept (`Tracer.uncached`): the call itself
    ran eagerly, and the next trace finds the stored tensor and reads it like any
    attribute, guarded. A distribution made inside the traced function is the trace's own:
    caching on it is nothing to undo."""

    def __init__(self, fn):
        self.fn, self.__doc__ = fn, fn.__doc__

    def __get__(self, obj, cls=None):
        if obj is None:
            return self
        value = self.fn(obj)
        tracer = _effects.active()
        if tracer is not None and not _made_in(obj, tracer):
            tracer.uncached = (f"{type(obj).__name__}.{self.fn.__name__} computed and kept on "
                               "a distribution made before the call")
        setattr(obj, self.fn.__name__, value)
        return value


def _made_by():
    """A weak reference to the tracer recording now, or None."""
    tracer = _effects.active()
    return None if tracer is None else weakref.ref(tracer)


def holds(stored, given):
    """Whether tensor `stored` is (a view of) the caller's tensor `given`."""
    return isinstance(given, Tensor) and stored._vc is given._vc


def _made_in(obj, tracer):
    made = obj.__dict__.get("_made_by")
    return made is not None and made() is tracer


# The default of `validate_args`, as 0/1: inside a trace `hyper` reads it per call, and the
# `bool()` of that runtime value is a guard, so switching it between compiled calls takes
# the path traced under the new setting (Note [Validation under compile]).
_DEFAULT = {"validate": 1}


class Distribution:
    """Base class: `batch_shape`, `event_shape`, `sample`, `rsample`, `log_prob`, `entropy`,
    `mean`, `variance`, `stddev`; subclasses say which parameters they check (`_checks`)."""

    has_rsample = False

    @staticmethod
    def set_default_validate_args(value):
        _DEFAULT["validate"] = int(bool(value))

    def __init__(self, batch_shape=(), event_shape=(), validate_args=None):
        self._batch_shape, self._event_shape = D_size(batch_shape), D_size(event_shape)
        self._made_by = _made_by()              # Note [Lazy parameters under compile]
        self._validate_args = (bool(_effects.hyper(_DEFAULT, "validate"))
                               if validate_args is None else validate_args)
        if self._validate_args:
            for name, (ok, constraint) in self._checks().items():
                value = getattr(self, name)
                if not bool(O.all(ok(value))):
                    raise ValueError(
                        f"Expected parameter {name} ({type(value).__name__} of shape "
                        f"{tuple(value.shape)}) of distribution {self!r} to satisfy the "
                        f"constraint {constraint}, but found invalid values:\n{value}")

    def _checks(self):
        return {}

    @property
    def batch_shape(self):
        return self._batch_shape

    @property
    def event_shape(self):
        return self._event_shape

    def _extended_shape(self, sample_shape=()):
        return tuple(sample_shape) + tuple(self._batch_shape) + tuple(self._event_shape)

    def sample(self, sample_shape=()):
        with _mode.no_grad():
            return self.rsample(sample_shape)

    def rsample(self, sample_shape=()):
        raise NotImplementedError(f"{type(self).__name__} has no rsample")

    @property
    def mean(self):
        raise NotImplementedError

    @property
    def variance(self):
        raise NotImplementedError

    @property
    def stddev(self):
        return O.sqrt(self.variance)

    def expand(self, batch_shape, _instance=None):
        """The distribution with its parameters expanded (views, no copies) to
        `batch_shape`, which must broadcast from `batch_shape` as `Tensor.expand` does."""
        batch_shape = D_size(batch_shape)
        new = object.__new__(type(self)) if _instance is None else _instance
        new.__dict__.update(self.__dict__)
        new._made_by = _made_by()
        n = len(self._batch_shape)
        for name in self._params:
            t = self.__dict__.get(name)
            if t is not None:
                new.__dict__[name] = O.expand(t, tuple(batch_shape) + tuple(t.shape[n:]))
        new._batch_shape = batch_shape
        return new

    def perplexity(self):
        return O.exp(self.entropy())

    # what a distribution does not define raises as PyTorch's base class does
    def log_prob(self, value):
        raise NotImplementedError

    def entropy(self):
        raise NotImplementedError

    def cdf(self, value):
        raise NotImplementedError

    def icdf(self, value):
        raise NotImplementedError

    def _validate_sample(self, value, support_ok, support):
        if not isinstance(value, Tensor):
            raise ValueError("The value argument to log_prob must be a Tensor")
        if self._validate_args and not bool(O.all(support_ok(value))):
            raise ValueError(f"Expected value argument ({type(value).__name__} of shape "
                             f"{tuple(value.shape)}) to be within the support ({support}) of "
                             f"the distribution {self!r}, but found invalid values:\n{value}")

    def __repr__(self):
        names = [n for n in self._params if n in self.__dict__]
        args = ", ".join(f"{n}: {_param_repr(self.__dict__[n])}" for n in names)
        return f"{type(self).__name__}({args})"


def _param_repr(t):
    # PyTorch formats a 0-d tensor as its number (Tensor.__format__), one element as a tensor
    if t.ndim == 0:
        return format(t.item())
    return str(t) if t.numel() == 1 else str(t.size())


def D_size(shape):
    return Size(tuple(shape))


LOG_SQRT_2PI = math.log(math.sqrt(2 * math.pi))
