"""`Module` methods that reach a descendant's member by a dotted path: `get_parameter`,
`get_buffer` and `set_submodule` (PyTorch's names, errors and messages), used by
fine-tuning code that swaps layers by name (`model.set_submodule("encoder.fc", new)`).
`get_submodule` lives in module.py."""
from .._errors import TracegradValueError


def _owner(module, target):
    """(the module holding the last atom of `target`, that atom)."""
    path, _, name = target.rpartition(".")
    return module.get_submodule(path), name


def get_parameter(self, target):
    """The parameter at dotted path `target` (`"fc.weight"`)."""
    from .parameter import Parameter
    mod, name = _owner(self, target)
    if not hasattr(mod, name):
        raise AttributeError(f"{mod._get_name()} has no attribute `{name}`")
    p = getattr(mod, name)
    if not isinstance(p, Parameter):
        raise AttributeError(f"`{name}` is not an nn.Parameter")
    return p


def get_buffer(self, target):
    """The buffer at dotted path `target` (`"bn.running_mean"`)."""
    mod, name = _owner(self, target)
    if not hasattr(mod, name):
        raise AttributeError(f"{mod._get_name()} has no attribute `{name}`")
    if name not in mod._buffers:
        raise AttributeError(f"`{name}` is not a buffer")
    return getattr(mod, name)


def set_submodule(self, target, module, strict=False):
    """Put `module` at dotted path `target`, replacing what is there (which must be a
    module); `strict=True`: the last atom must exist already."""
    from .module import Module
    if target == "":
        raise TracegradValueError("Cannot set the submodule without a target name!")
    if not isinstance(module, Module):
        raise TracegradValueError(f"`module` is not an nn.Module, found {type(module)}")
    parent, name = _owner(self, target)
    if strict and not hasattr(parent, name):
        raise AttributeError(f"{parent._get_name()} has no attribute `{name}`")
    if hasattr(parent, name) and not isinstance(getattr(parent, name), Module):
        raise AttributeError(f"`{name}` is not an nn.Module")
    setattr(parent, name, module)
