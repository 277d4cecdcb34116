"""What `module(*args, **kwargs)` does around `forward` when hooks are registered (PyTorch's
`Module._call_impl`): forward pre-hooks, full backward hooks and pre-hooks, forward hooks,
`with_kwargs=` and `always_call=` hooks.

Note [Module hook registries]
As in PyTorch, a module keeps one ordered dict per kind of hook, keyed by a handle id
(`_forward_pre_hooks`, `_forward_hooks`, `_backward_pre_hooks`, `_backward_hooks`), plus
dicts of the ids registered `with_kwargs=True` / `always_call=True`. The flag dicts follow
the hook dicts (a handle adds and removes both), so guarding the hook dicts (compiler/
state.py walks them, and the hooks' own state) covers them.

Note [Full backward hooks]
`register_full_backward_hook(hook)` calls `hook(module, grad_input, grad_output)` once the
gradients w.r.t. the module's positional tensor inputs are known; a pre-hook
`hook(module, grad_output)` runs when the gradients w.r.t. its outputs are. As in PyTorch
(torch/utils/hooks.py `BackwardHook`), the tensor inputs and outputs pass through an
identity `autograd.Function` (BackwardHookFunctionBackward) whose node hooks see those
gradients, and may replace them. When no input requires grad, the hooks run with all-None
`grad_input` as soon as the output gradients are known, with PyTorch's warning.
Inside a traced function a module whose backward hooks are set up makes the call run
eagerly, with a warning: what a backward hook does is arbitrary Python, run during
backward (Note [Effects]). A compiled module's own hooks run outside its compiled forward,
so its inputs and outputs are wrapped and the forward stays compiled.
"""
import warnings

from .. import _effects, _mode
from .._errors import TracegradRuntimeError
from .._tensor import Tensor
from . import _global_hooks as G


def has_hooks(module):
    d = module.__dict__
    try:                                # PyTorch's order of reads
        return bool(G.ACTIVE[0] or d["_backward_hooks"] or d["_backward_pre_hooks"]
                    or d["_forward_hooks"] or d["_forward_pre_hooks"])
    except KeyError as e:               # Module.__init__ never ran: PyTorch's error
        raise AttributeError(f"'{type(module).__name__}' object has no attribute "
                             f"{e.args[0]!r}") from None


def call_with_hooks(module, forward, args, kwargs):
    """`forward(*args, **kwargs)` with `module`'s hooks around it (what `module(...)` does;
    a compiled module runs its compiled forward this way)."""
    state = {"result": None, "called": set(), "args": args, "kwargs": kwargs}
    try:
        return _call(module, forward, state)
    except Exception:
        d = module.__dict__
        always, kw = d.get("_forward_hooks_always_called", ()), \
            d.get("_forward_hooks_with_kwargs", ())
        args, kwargs, result = state["args"], state["kwargs"], state["result"]
        for hid, hook in (*_global(module, G.FORWARD).items(), *d["_forward_hooks"].items()):
            if (hid in always or hid in G.FORWARD_ALWAYS_CALLED) \
                    and hid not in state["called"]:
                try:
                    r = hook(module, args, kwargs, result) \
                        if hid in kw or hid in G.FORWARD_WITH_KWARGS else \
                        hook(module, args, result)
                    if r is not None:
                        result = r
                except Exception as e:
                    warnings.warn("module forward hook with ``always_call=True`` raised an "
                                  "exception that was silenced as another error was raised "
                                  f"in forward: {e}", stacklevel=2)
        raise


def _call(module, forward, state):
    d = module.__dict__
    args, kwargs = state["args"], state["kwargs"]
    pre_kw = d.get("_forward_pre_hooks_with_kwargs", ())
    if G.ACTIVE[0] and _global(module, G.FORWARD_PRE) is G.FORWARD_PRE:
        _effects.note("hook", f"a global module hook (around {type(module).__name__})")
    for hid, hook in (*_global(module, G.FORWARD_PRE).items(),
                      *d["_forward_pre_hooks"].items()):
        if hid in pre_kw:
            res = hook(module, args, kwargs)
            if res is not None:
                if not (isinstance(res, tuple) and len(res) == 2):
                    raise TracegradRuntimeError("forward pre-hook must return None or a tuple "
                                                f"of (new_args, new_kwargs), but got {res}.")
                args, kwargs = res
        else:
            res = hook(module, args)
            if res is not None:
                args = res if isinstance(res, tuple) else (res,)
        state["args"], state["kwargs"] = args, kwargs
    bw_hooks = (*_global(module, G.BACKWARD).values(), *d.get("_backward_hooks", {}).values())
    bw_pre = (*_global(module, G.BACKWARD_PRE).values(),
              *d.get("_backward_pre_hooks", {}).values())
    bw = None
    if bw_hooks or bw_pre:
        bw = BackwardHook(module, bw_hooks, bw_pre)
        args = state["args"] = bw.setup_input_hook(args)
    result = state["result"] = forward(*args, **kwargs)
    fw_kw = d.get("_forward_hooks_with_kwargs", ())
    always = d.get("_forward_hooks_always_called", ())
    for hid, hook in (*_global(module, G.FORWARD).items(), *d["_forward_hooks"].items()):
        if hid in always or hid in G.FORWARD_ALWAYS_CALLED:
            state["called"].add(hid)
        res = hook(module, args, kwargs, result) if hid in fw_kw or hid in \
            G.FORWARD_WITH_KWARGS else hook(module, args, result)
        if res is not None:
            result = state["result"] = res
    if bw is not None:
        if not isinstance(result, (Tensor, tuple)):
            warnings.warn("For backward hooks to be called, module output should be a Tensor "
                          f"or a tuple of Tensors but received {type(result)}", stacklevel=3)
        result = bw.setup_output_hook(result)
    return result


def _global(module, registry):
    """The global hooks of `registry` that run around `module`'s call (Note [Global module
    hooks] in _global_hooks.py): none around a compiled module's wrapper, which is not a
    module of the user's model (its original gets them, as eagerly)."""
    return {} if getattr(type(module), "_transparent_to_global_hooks", False) else registry


def _identity_function():
    from ..autograd.function import Function

    class BackwardHookFunction(Function):
        @staticmethod
        def forward(ctx, *args):
            ctx.mark_non_differentiable(*[a for a in args if not a.requires_grad])
            return args

        @staticmethod
        def backward(ctx, *grads):
            return grads
    return BackwardHookFunction


_IDENTITY = []


class BackwardHook:
    """Links a module call's output gradients to its input gradients and calls the user's
    full backward hooks and pre-hooks (Note [Full backward hooks])."""

    def __init__(self, module, user_hooks, user_pre_hooks):
        self.module, self.user_hooks, self.user_pre_hooks = module, user_hooks, user_pre_hooks
        self.grad_outputs = None
        self.n_outputs = self.n_inputs = -1
        self.output_index = self.input_index = None

    @staticmethod
    def _pack(indices, values, size):
        res = [None] * size
        for i, v in zip(indices, values):
            res[i] = v
        return tuple(res)

    def _apply(self, fn, args):
        """Pass the tensors of `args` through the identity Function; `fn(its node)`."""
        idx = [i for i, a in enumerate(args) if isinstance(a, Tensor)]
        tensors = [args[i] for i in idx]
        if not (any(t.requires_grad for t in tensors) and _mode.is_grad_enabled()):
            return args, None
        _effects.note("hook", f"a full backward hook (or pre-hook) of "
                              f"{type(self.module).__name__}")
        if not _IDENTITY:
            _IDENTITY.append(_identity_function())
        new = _IDENTITY[0].apply(*tensors)
        new = new if isinstance(new, tuple) else (new,)
        fn(next(t.grad_fn for t in new if t.grad_fn is not None))
        out = list(args)
        for i, t in zip(idx, new):
            out[i] = t
        return tuple(out), idx

    def setup_input_hook(self, args):
        res, self.input_index = self._apply(lambda node: node.register_hook(self._input_hook),
                                            args)
        self.n_inputs = len(args)
        return res

    def _input_hook(self, grad_input, _):
        if self.grad_outputs is None:     # reached without passing through the outputs
            return None
        res = self._pack(self.input_index, grad_input, self.n_inputs)
        for hook in self.user_hooks:
            out = hook(self.module, res, self.grad_outputs)
            if out is None:
                continue
            if len(out) != len(res):
                raise TracegradRuntimeError(
                    "Backward hook returned an invalid number of grad_input, got "
                    f"{len(out)}, but expected {len(res)}")
            res = out
        self.grad_outputs = None
        return tuple(res[i] for i in self.input_index)

    def setup_output_hook(self, result):
        single = not isinstance(result, tuple)
        args = (result,) if single else result
        res, self.output_index = self._apply(
            lambda node: node.register_hook(self._output_hook), args)
        self.n_outputs = len(args)
        return res[0] if single else res

    def _output_hook(self, _, grad_output):
        self.grad_outputs = self._pack(self.output_index, grad_output, self.n_outputs)
        for pre in self.user_pre_hooks:
            new = pre(self.module, self.grad_outputs)
            if new is None:
                continue
            if len(new) != len(self.grad_outputs):
                raise TracegradRuntimeError(
                    "Backward pre hook returned an invalid number of grad_output, got "
                    f"{len(new)}, but expected {len(self.grad_outputs)}")
            self.grad_outputs = new
        local = self.grad_outputs
        if self.input_index is None:          # no input requires grad: call them now
            warnings.warn("Full backward hook is firing when gradients are computed with "
                          "respect to module outputs since no inputs require gradients. See "
                          "https://docs.pytorch.org/docs/main/generated/torch.nn.Module.html"
                          "#torch.nn.Module.register_full_backward_hook for more details.",
                          stacklevel=5)
            grad_inputs = (None,) * self.n_inputs
            for hook in self.user_hooks:
                r = hook(self.module, grad_inputs, self.grad_outputs)
                if r is not None and not (isinstance(r, tuple) and all(x is None for x in r)):
                    raise TracegradRuntimeError(
                        "Backward hook for Modules where no input requires gradient should "
                        "always return None or None for all gradients.")
            self.grad_outputs = None
        return tuple(local[i] for i in self.output_index)
