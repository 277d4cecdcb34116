"""`stack_module_state`: the parameters and buffers of several models of one class, stacked
along a new leading dimension, for model ensembling with `vmap(functional_call(...))`.

Like `torch.func.stack_module_state`: each stacked parameter is a fresh leaf (detached from
the models, requiring grad when the models' tensors do), so training the ensemble updates the
stacked tensors, not the models; buffers are stacked as they are.
"""
from .._errors import TracegradRuntimeError


def stack_module_state(models):
    """`(params, buffers)`: dicts `{name: stacked tensor}` over `models` (a non-empty list of
    models of one class, all in training mode or all in eval mode).

    >>> params, buffers = tg.func.stack_module_state([make() for _ in range(5)])
    >>> out = tg.func.vmap(fmodel, in_dims=(0, 0, None))(params, buffers, x)
    """
    models = list(models)
    if not models:
        raise TracegradRuntimeError("stack_module_state: Expected at least one model, got 0.")
    if len({bool(m.training) for m in models}) > 1:
        raise TracegradRuntimeError(
            "stack_module_state: Expected all models to have the same training/eval mode.")
    if len({type(m) for m in models}) > 1:
        raise TracegradRuntimeError(
            "stack_module_state: Expected all models to be of the same class.")
    per_model = [dict(m.named_parameters()) for m in models]
    params = {k: _stacked_leaf([d[k] for d in per_model], k) for k in per_model[0]}
    per_model = [dict(m.named_buffers()) for m in models]
    buffers = {k: _stacked_leaf([d[k] for d in per_model], k) for k in per_model[0]}
    return params, buffers


def _stacked_leaf(tensors, name):
    from ..ops.shape import stack
    flags = {bool(t.requires_grad) for t in tensors}
    if len(flags) > 1:
        raise TracegradRuntimeError(
            f"Expected {name} from each model to have the same .requires_grad")
    out = stack(tensors)
    return out.detach().requires_grad_() if flags == {True} else out
