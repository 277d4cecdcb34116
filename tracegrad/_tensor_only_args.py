"""PyTorch's binary functions whose arguments must be Tensors: `torch.atan2(x, 1.5)`,
`x.maximum(0.5)` and `torch.eq(1.5, x)` raise TypeError in PyTorch (their schemas have
no Scalar overload), so they do here. Only Python numbers are refused: numpy arrays stay
accepted as tensor operands, as everywhere in tracegrad. The root package wraps the
public functions and Tensor methods named below once at import; internal code calls the
ops directly and may still pass numbers.

>>> tracegrad.atan2(tracegrad.ones(2), 1.5)
Traceback (most recent call last):
TypeError: atan2(): argument 'other' (position 2) must be Tensor, not float
"""
import functools

from ._errors import TracegradTypeError

# both `input` and `other` must be Tensors (function and method forms)
BOTH = """atan2 arctan2 maximum minimum igamma igammac logaddexp logaddexp2 dist logical_and
logical_or logical_xor hypot heaviside gcd lcm nextafter ldexp""".split()
BOTH_INPLACE = """atan2_ arctan2_ igamma_ igammac_ logical_and_ logical_or_
logical_xor_ hypot_ heaviside_ gcd_ lcm_ nextafter_ ldexp_""".split()
# the second argument's name where it is not `other`
_SECOND = {"heaviside": "values", "heaviside_": "values"}
# only `input` must be a Tensor (a number `other` is a Scalar overload)
FIRST = """eq ne lt le gt ge greater less greater_equal less_equal not_equal fmod clamp_min
clamp_max""".split()


def _check(name, value, arg, position):
    if isinstance(value, (bool, int, float, complex)):
        raise TracegradTypeError(f"{name}(): argument '{arg}' (position {position}) must be "
                                 f"Tensor, not {type(value).__name__}")


def tensor_only(fn, name, both, method):
    """`fn` raising PyTorch's TypeError for a non-Tensor `input` (or, with `both`,
    `other`); the same function otherwise."""
    arg = _SECOND.get(name, "other")

    @functools.wraps(fn)
    def call(*args, **kwargs):
        if not method:
            _check(name, args[0] if args else kwargs.get("input"), "input", 1)
        if both and (len(args) > 1 or arg in kwargs):
            _check(name, args[1] if len(args) > 1 else kwargs[arg], arg, 1 if method else 2)
        return fn(*args, **kwargs)
    return call


def install(namespace, tensor_class):
    """Wrap the functions of the tables found in `namespace` and the Tensor methods."""
    for names, both in ((BOTH, True), (FIRST, False), (BOTH_INPLACE, True)):
        for name in names:
            if name in namespace and callable(namespace[name]):
                namespace[name] = tensor_only(namespace[name], name, both, False)
            if both and name in tensor_class.__dict__:
                setattr(tensor_class, name,
                        tensor_only(tensor_class.__dict__[name], name, both, True))
