"""`functional_call`: run a module with other tensors in place of its parameters and buffers.

Like `torch.func.functional_call`: the given tensors (by dotted name, e.g. `"0.weight"`) are
swapped into the owning submodules' `_parameters` / `_buffers` dicts (or set as plain
attributes), the module is called, and the originals are swapped back in a `finally`, so the
module's own parameters are untouched (same objects, same values) even when `forward`
raises. Because the substituted tensors are whatever the caller passes, the call is
differentiable with respect to them: `grad(lambda p: loss(functional_call(model, p, (x,))))`
is the per-sample / meta-learning idiom. Inside `tracegrad.compile` the traced values are
swapped in the same way, so the compiled program reads the substituted tensors.

On a compiled module (`tracegrad.compile(model)`) the tensors are swapped into the original
module; that module's compiled forward guards its parameters by identity, so each new set of
tensors re-traces. Compile the function that calls `functional_call` on the plain module
instead: there the tensors are arguments and one program serves them all.

Weight tying (`tie_weights=True`): a module that holds one tensor under several names (e.g.
an embedding shared with the output layer) sees the one given value under all of them.
"""
from .._errors import TracegradRuntimeError, TracegradTypeError, TracegradValueError
from .._tensor import Tensor

_MISSING = object()


def functional_call(module, parameter_and_buffer_dicts, args=None, kwargs=None, *,
                    tie_weights=True, strict=False):
    """`module(*args, **kwargs)` with the tensors of `parameter_and_buffer_dicts` (a dict
    `{dotted name: tensor}`, or a list/tuple of such dicts with distinct keys) used in place
    of the module's parameters and buffers; the module is restored afterwards.

    `args` that is not a tuple is passed as the single positional argument. `strict=True`
    requires the names to match the module's parameters and buffers exactly. If forward
    reassigns a substituted name (e.g. `self.count = self.count + 1`), the new value is
    written back into the given dict, as torch does.

    >>> out = tg.func.functional_call(model, {"weight": w, "bias": b}, (x,))
    """
    params = _merge(parameter_and_buffer_dicts)
    if kwargs is None:
        kwargs = {}
    if args is None:
        args = ()
    elif not isinstance(args, tuple):
        args = (args,)
    # a compiled module (`tracegrad.compile(model)`) names its original's tensors unprefixed
    owner = module.__dict__.get("_orig_mod", module)
    untied = _untie(owner, params) if tie_weights else params
    if strict:
        _check_strict(owner, untied)
    originals = {}
    try:
        for name, value in untied.items():
            originals[name] = _swap(owner, name, value)
        return module(*args, **kwargs)
    finally:
        current = {}
        for name, orig in reversed(list(originals.items())):
            current[name] = _swap(owner, name, orig)
        params.update({k: current[k] for k in params if k in current})


def _merge(dicts):
    if isinstance(dicts, dict):
        return dicts
    if isinstance(dicts, (list, tuple)):
        if not all(isinstance(d, dict) for d in dicts):
            raise TracegradValueError(
                "Expected all elements of parameter_and_buffer_dicts to be dictionaries")
        counts = {}
        for d in dicts:
            for k in d:
                counts[k] = counts.get(k, 0) + 1
        repeated = [k for k, n in counts.items() if n > 1]
        if repeated:
            raise TracegradValueError(
                f"{repeated} appeared in multiple dictionaries; behavior of functional call "
                "is ambiguous")
        return {k: v for d in dicts for k, v in d.items()}
    raise TracegradValueError(
        "Expected parameter_and_buffer_dicts to be a dict, or a list/tuple of dicts, but got "
        f"{type(dicts)}")


def _named_tensors(module):
    named = dict(module.named_parameters(remove_duplicate=False))
    named.update(module.named_buffers(remove_duplicate=False))
    return named


def _untie(module, params):
    """`params` plus, for each given name of a tied tensor, its other names."""
    by_tensor = {}
    for name, t in _named_tensors(module).items():
        by_tensor.setdefault(id(t), set()).add(name)
    tied = {n: names for names in by_tensor.values() if len(names) > 1 for n in names}
    given = [n for n in params if n in tied]
    for n in given:
        values = {id(params[m]) for m in tied[n] if m in params}
        if len(values) > 1:
            raise TracegradValueError(
                f"functional_call got multiple values for keys {sorted(tied[n])}, which are "
                "tied. Consider using tie_weights=False")
    out = dict(params)
    for n in given:
        for m in tied[n]:
            out[m] = params[n]
    return out


def _check_strict(module, params):
    valid = set(_named_tensors(module))
    keys = set(params)
    msgs = []
    unexpected, missing = sorted(keys - valid), sorted(valid - keys)
    if unexpected:
        msgs.append(f"Unexpected key(s): {', '.join(map(repr, unexpected))}.")
    if missing:
        msgs.append(f"Missing key(s): {', '.join(map(repr, missing))}.")
    if msgs:
        raise TracegradRuntimeError(
            "Error(s) in reparametrizing for {}:\n\t{}".format(module._get_name(),
                                                                "\n\t".join(msgs)))


def _swap(module, name, value):
    """Put `value` (or remove, for _MISSING) at dotted `name`; return what was there."""
    prefix, _, attr = name.rpartition(".")
    owner = module.get_submodule(prefix)
    if value is not _MISSING and value is not None and not isinstance(value, Tensor):
        raise TracegradTypeError(f"{value} is not an instance of torch.Tensor")
    for reg in ("_parameters", "_buffers"):
        slots = owner.__dict__[reg]
        if attr in slots:
            orig = slots[attr]
            if value is _MISSING:
                del slots[attr]
            else:
                slots[attr] = value
            return orig
    orig = getattr(owner, attr) if hasattr(owner, attr) else _MISSING
    if orig is not _MISSING and orig is not None and not isinstance(orig, Tensor):
        raise TracegradTypeError(f"attribute `{attr}`: {orig} is not an instance of torch.Tensor")
    if value is not _MISSING:
        setattr(owner, attr, value)
    elif hasattr(owner, attr):
        delattr(owner, attr)
    return orig
