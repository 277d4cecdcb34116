"""PyTorch's numpy-compatible keyword names: `axis` for `dim` and `keepdims` for
`keepdim`, as PyTorch's argument parser accepts them (`y_hat.argmax(axis=1)`,
`X.sum(axis=0, keepdims=True)`, the way d2l writes them). The root package wraps the
functions named in `NAMES`, and the Tensor methods of the same names, once at import."""
import functools

from ._errors import TracegradTypeError

NAMES = """sum mean prod nansum nanmean amax amin argmax argmin max min std var logsumexp
softmax log_softmax any all norm count_nonzero median cumsum cumprod squeeze unsqueeze
""".split()


def accept_numpy_names(fn, name):
    """`fn` taking `axis=` as `dim=` and `keepdims=` as `keepdim=`; the same function
    (signature, docstring) otherwise."""
    @functools.wraps(fn)
    def call(*args, **kwargs):
        if kwargs and ("axis" in kwargs or "keepdims" in kwargs):
            for numpy_name, torch_name in (("axis", "dim"), ("keepdims", "keepdim")):
                if numpy_name in kwargs:
                    if torch_name in kwargs:
                        raise TracegradTypeError(f"{name}() got multiple values for argument "
                                                 f"'{torch_name}'")
                    kwargs[torch_name] = kwargs.pop(numpy_name)
        return fn(*args, **kwargs)
    return call


def install(namespace, tensor_class):
    """Wrap each of `NAMES` found in `namespace` (a module's globals) and on `tensor_class`."""
    for name in NAMES:
        if name in namespace:
            namespace[name] = accept_numpy_names(namespace[name], name)
        if name in tensor_class.__dict__:
            setattr(tensor_class, name, accept_numpy_names(tensor_class.__dict__[name], name))
