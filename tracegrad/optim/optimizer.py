"""`Optimizer`: parameter groups, per-parameter state, zero_grad and (de)serialization.

The contract is PyTorch's: `param_groups` is a list of dicts (`params` plus every option,
filled from `defaults` where a group does not set it); `state` maps a parameter to its
state dict; `state_dict()` replaces parameters by their integer position across groups,
and `load_state_dict()` maps positions back onto this optimizer's parameters. Subclasses
implement `step(closure=None)`, which updates parameters in place under no_grad (so their
version counters bump, as in PyTorch).
"""
import warnings
from collections import defaultdict
from copy import deepcopy
from functools import wraps
from itertools import chain

from .. import _mode
from .. import ops as O
from .._errors import (TracegradError, TracegradRuntimeError, TracegradTypeError,
                       TracegradValueError)
from .._tensor import Tensor
from ..nn._module_helpers import _typename, _zero_grad
from ._hooks import (HookMethods, add_registries, load_state_dict_hooked,
                     register_optimizer_step_post_hook, register_optimizer_step_pre_hook,
                     state_dict_hooked, with_step_hooks)


def check_tensor_lr(lr):
    """PyTorch's first check of a tensor learning rate (Note [Tensor hyper-parameters])."""
    if isinstance(lr, Tensor) and lr.numel() != 1:
        raise TracegradValueError("Tensor lr must be 1-element")


def check_flags(capturable=False, differentiable=False, fused=None, foreach=None):
    """PyTorch's construction checks of the implementation flags. `foreach` and `fused`
    pick PyTorch's kernels, not the math: tracegrad computes every option with its one
    update (PyTorch's for-loop path), so both are accepted and kept in the groups.
    `capturable` is refused at `step()` (`check_step_flags`), `differentiable` runs the
    step with gradients recorded (`grad_mode_of_step`), as on PyTorch's CPU."""
    if fused:
        if differentiable:
            raise TracegradRuntimeError("`fused` does not support `differentiable`")
        if foreach:
            raise TracegradRuntimeError("`fused` and `foreach` cannot be `True` together.")


class StepFlagError(TracegradError, AssertionError):
    """A flag PyTorch's CPU step refuses with an assertion: `capturable=True` (CUDA graphs
    capture on other devices only) or `foreach=True` with `differentiable=True`."""


_CAPTURABLE_DEVICES = ["cuda", "xpu", "hpu", "privateuseone", "xla"]


def check_step_flags(opt, group, state_of=None):
    """Refuse at `step()`, as PyTorch does on CPU, a group that is `foreach` and
    `differentiable`, or `capturable` (and not `fused`): after making the state of its
    parameters that have gradients (PyTorch's `_init_group` runs first), before any
    update."""
    fused = group.get("fused")
    foreach = group.get("foreach") and not fused
    if foreach and group.get("differentiable") and not opt._foreach_differentiable:
        msg = "_foreach ops don't support autograd"
    elif group.get("capturable") and not fused:
        what = (foreach and opt._capturable_what_foreach) or opt._capturable_what
        msg = f"If capturable=True, {what} must be on supported devices: {_CAPTURABLE_DEVICES}."
    else:
        return
    params = [p for p in group["params"] if p.grad is not None]
    if state_of is not None:
        for p in params:
            state_of(p, group)
    if params:
        raise StepFlagError(msg)


def grad_mode_of_step(step):
    """`step` runs under no_grad, or with gradients recorded for `differentiable=True`
    (PyTorch's `_use_grad_for_differentiable`): in-place updates of leaf parameters that
    require grad then raise, as in PyTorch."""
    @wraps(step)
    def wrapper(self, *args, **kwargs):
        differentiable = bool(self.defaults.get("differentiable", False))
        if differentiable and not self._differentiable_graph:
            _refuse_differentiable_graph(self)
        with _mode.set_grad_enabled(differentiable):
            return step(self, *args, **kwargs)
    return wrapper


def _refuse_differentiable_graph(opt):
    """A `differentiable=True` step that would record a graph through the update (a
    non-leaf parameter, or a gradient that requires grad) of an optimizer whose update is
    not written to be differentiated (its in-place state updates, its gradient at zero
    moments are not PyTorch's): refused rather than differentiated otherwise. Leaf
    parameters that require grad fail in the update as in PyTorch."""
    for group in opt.param_groups:
        for p in group["params"]:
            g = p.grad
            if g is not None and (not p.is_leaf or g.requires_grad and not p.requires_grad):
                raise NotImplementedError(
                    f"tracegrad's {type(opt).__name__} does not differentiate through its "
                    "step (differentiable=True); SGD does")


class _RequiredParameter:
    """Marks an option with no default (a group must set it)."""

    def __repr__(self):
        return "<required parameter>"


required = _RequiredParameter()


class Optimizer(HookMethods):
    """Base class of all optimizers: `Optimizer(params, defaults)`.

    `params` is an iterable of Tensors, of `(name, Tensor)` pairs, or of dicts defining
    parameter groups with their own options.
    """

    # what PyTorch's capturable assertion names (`check_step_flags`), in its for-loop and
    # its foreach path when they differ
    _capturable_what = "params and state_steps"
    _capturable_what_foreach = None
    # whether PyTorch's foreach path runs a `differentiable` step (SGD's does)
    _foreach_differentiable = False
    # whether a `differentiable=True` step records PyTorch's graph through the update
    _differentiable_graph = False
    # group options its traced step reads only through `_effects.hyper` (per call, never a
    # guard): Note [Hyper-parameters unread] in compiler/state_unread.py
    _runtime_keys = ()
    # What library code reads of the attributes below: the methods that read each (the
    # items listed, or all of it: None). A compiled function is guarded on them only where
    # the code its trace ran read them (Note [Attributes only some methods read] in
    # compiler/state_method_reads.py); any other code naming one reads all of it.
    _attribute_reads = {
        # the step reads only the flag choosing its grad mode (`grad_mode_of_step`)
        "defaults": {"step": ("differentiable",), "add_param_group": None,
                     "__getstate__": None},
        "_optimizer_step_pre_hooks": {"step": None, "register_step_pre_hook": None},
        "_optimizer_step_post_hooks": {"step": None, "register_step_post_hook": None},
        "_optimizer_state_dict_pre_hooks": {"state_dict": None,
                                            "register_state_dict_pre_hook": None},
        "_optimizer_state_dict_post_hooks": {"state_dict": None,
                                             "register_state_dict_post_hook": None},
        "_optimizer_load_state_dict_pre_hooks": {"load_state_dict": None,
                                                 "register_load_state_dict_pre_hook": None},
        "_optimizer_load_state_dict_post_hooks": {"load_state_dict": None,
                                                  "register_load_state_dict_post_hook": None},
    }

    def __init_subclass__(cls, **kwargs):
        super().__init_subclass__(**kwargs)
        # step hooks run around every subclass's step (optim/_hooks.py)
        if "step" in cls.__dict__:
            cls.step = with_step_hooks(cls.__dict__["step"])
        for name, hooked in (("state_dict", state_dict_hooked),
                             ("load_state_dict", load_state_dict_hooked)):
            if name in cls.__dict__:
                setattr(cls, name, hooked(cls.__dict__[name]))

    def __init__(self, params, defaults):
        add_registries(self)
        self.defaults = defaults
        self.state = defaultdict(dict)
        self.param_groups = []
        if isinstance(params, Tensor):
            raise TracegradTypeError("params argument given to the optimizer should be an "
                                     "iterable of Tensors or dicts, but got "
                                     + _typename(params))
        groups = list(params)
        if not groups:
            raise TracegradValueError("optimizer got an empty parameter list")
        if not isinstance(groups[0], dict):
            groups = [{"params": groups}]
        for g in groups:
            self.add_param_group(g)

    def add_param_group(self, param_group):
        """Add a group (a dict with `params` and any options overriding the defaults)."""
        if not isinstance(param_group, dict):
            raise TracegradTypeError(f"param_group must be a dict, but got {type(param_group)}")
        params = param_group["params"]
        if isinstance(params, Tensor):
            params = [params]
        elif isinstance(params, set):
            raise TracegradTypeError("optimizer parameters need to be organized in ordered "
                                     "collections, but the ordering of tensors in sets will "
                                     "change between runs. Please use a list instead.")
        params = list(params)
        names = [p[0] for p in params if isinstance(p, tuple)]
        params = [p[1] if isinstance(p, tuple) else p for p in params]
        param_group["params"] = params
        if names:
            if len(names) != len(params):
                raise TracegradValueError("all optimizer params should be with/without names. Some "
                                          "param names are missing")
            param_group["param_names"] = names
        for p in params:
            if not isinstance(p, Tensor):
                raise TracegradTypeError("optimizer can only optimize Tensors, but one of the "
                                         "params is " + _typename(p))
            if not (p.is_leaf or p.retains_grad):
                raise TracegradValueError("can't optimize a non-leaf Tensor")
        for name, default in self.defaults.items():
            if default is required and name not in param_group:
                raise TracegradValueError("parameter group didn't specify a value of required "
                                          f"optimization parameter {name}")
            param_group.setdefault(name, default)
        ids = [id(p) for p in params]
        if len(ids) != len(set(ids)):
            warnings.warn("optimizer contains a parameter group with duplicate parameters; in "
                          "future, this will cause an error; see "
                          "github.com/pytorch/pytorch/issues/40967 for more information",
                          stacklevel=3)
        seen = set()
        for g in self.param_groups:
            seen.update(id(p) for p in g["params"])
            if ("param_names" in param_group) != ("param_names" in g):
                txt = "with names" if "param_names" in param_group else "without names"
                raise TracegradValueError("all optimizer param groups should be with/without "
                                          f"names. cannot add param group {txt} to the "
                                          "optimizer")
        if not seen.isdisjoint(ids):
            raise TracegradValueError("some parameters appear in more than one parameter group")
        self.param_groups.append(param_group)

    def zero_grad(self, set_to_none=True):
        """Reset the gradients of all optimized parameters (to None by default)."""
        for g in self.param_groups:
            for p in g["params"]:
                _zero_grad(p, set_to_none)

    def step(self, closure=None):
        raise NotImplementedError

    def _update_each(self, closure):
        """`step` of an optimizer updating each parameter on its own: the closure's loss,
        then `self._update(p, group, self._state_of(p, group))` for every parameter that
        has a gradient (under no_grad: the caller's `step` is decorated)."""
        loss = self._closure_loss(closure)
        for group in self.param_groups:
            check_step_flags(self, group, self._state_of)
            for p in group["params"]:
                if p.grad is not None:
                    self._update(p, group, self._state_of(p, group))
        return loss

    def _closure_loss(self, closure):
        """Evaluate `closure` (which recomputes the loss) with grad enabled."""
        if closure is None:
            return None
        with _mode.enable_grad():
            return closure()

    # ---------------- serialization ----------------
    def state_dict(self):
        """`{'state': {index: state}, 'param_groups': [{..., 'params': [index, ...]}]}`."""
        index = {}
        groups = []
        for g in self.param_groups:
            for p in g["params"]:
                index.setdefault(id(p), len(index))
            packed = {k: v for k, v in g.items() if k != "params"}
            packed["params"] = [index[id(p)] for p in g["params"]]
            groups.append(packed)
        state = {(index[id(k)] if isinstance(k, Tensor) else k): v
                 for k, v in self.state.items()}
        return {"state": state, "param_groups": groups}

    def load_state_dict(self, state_dict):
        """Load a `state_dict()`: same group structure; state tensors are cast to each
        parameter's floating dtype (except `step`)."""
        state_dict = dict(state_dict)
        saved_groups = deepcopy(state_dict["param_groups"])
        groups = self.param_groups
        if len(groups) != len(saved_groups):
            raise TracegradValueError(
                "loaded state dict has a different number of parameter groups")
        if any(len(g["params"]) != len(s["params"]) for g, s in zip(groups, saved_groups)):
            raise TracegradValueError("loaded state dict contains a parameter group that "
                                      "doesn't match the size of optimizer's group")
        id_map = dict(zip(chain.from_iterable(s["params"] for s in saved_groups),
                          chain.from_iterable(g["params"] for g in groups)))
        state = defaultdict(dict)
        for k, v in state_dict["state"].items():
            if k in id_map:
                p = id_map[k]
                state[p] = _cast(p, v)
            else:
                state[k] = v
        new_groups = []
        for g, s in zip(groups, saved_groups):
            s["params"] = g["params"]
            if "param_names" in g and "param_names" not in s:
                s["param_names"] = g["param_names"]
            new_groups.append(s)
        self.state = state
        self.param_groups = new_groups

    def __repr__(self):
        text = type(self).__name__ + " ("
        for i, g in enumerate(self.param_groups):
            text += f"\nParameter Group {i}\n"
            for key in sorted(g):
                if key != "params":
                    text += f"    {key}: {g[key]}\n"
        return text + ")"

    def __getstate__(self):
        return {"defaults": self.defaults, "state": self.state,
                "param_groups": self.param_groups}

    def __setstate__(self, state):
        self.__dict__.update(state)
        add_registries(self)            # (hooks are not copied or pickled)


Optimizer.state_dict = state_dict_hooked(Optimizer.state_dict)
Optimizer.load_state_dict = load_state_dict_hooked(Optimizer.load_state_dict)


class PerParameter(Optimizer):
    """An optimizer updating each parameter on its own (`_update(p, group, state)`), with
    its per-parameter state declared: a step counter, `_scalars` ((name, initial value) of
    0-d state), then `_moments` (zero tensors like the parameter), PyTorch's key order (so
    state dicts compare equal). One whose state depends on the group overrides
    `_state_of`."""

    _scalars = ()
    _moments = ()

    def _state_of(self, p, group):
        state = self.state[p]
        if not state:
            state["step"] = step_counter()
            for k, v in self._scalars:
                state[k] = scalar_state(v)
            for k in self._moments:
                state[k] = O.zeros_like(p)
        return state

    @grad_mode_of_step
    def step(self, closure=None):
        """One update of every parameter that has a gradient; returns the closure's loss."""
        return self._update_each(closure)


def _cast(param, value, key=None):
    """A loaded state value for `param`: floating tensors take the parameter's dtype."""
    if isinstance(value, Tensor):
        if key == "step" or not param.is_floating_point():
            return value
        return value.to(param.dtype)
    if isinstance(value, dict):
        return {k: _cast(param, v, k) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return type(value)(_cast(param, v) for v in value)
    return value


def add_scaled_(p, g, alpha):
    """`p += alpha * g` in place, where `alpha` is a Python number (eager) or a 0-d tensor
    (a hyper-parameter a compiled step reads per call: `_effects.hyper`). Both round as
    PyTorch's `p.add_(g, alpha=alpha)`: the factor in p's dtype, times g, added to p."""
    if isinstance(alpha, Tensor):
        from .._effects import as_scalar_for     # (Note [Hyper-parameters meet zero-dim tensors])
        return p.add_(g * as_scalar_for(alpha, g))
    return p.add_(g, alpha=alpha)


def step_counter(fused=False):
    """A fresh `state["step"]`: a float tensor, float64 under a float64 default dtype and
    float32 otherwise (always float32 for a `fused` group), as PyTorch's optimizers keep it."""
    from .. import _dtype as D
    from .. import ops as O
    wide = D.get_default_dtype() is D.float64 and not fused
    return O.tensor(0.0, dtype=D.float64 if wide else D.float32)


def step_value(step_t, runtime):
    """The step count an update computes with: eagerly `step_t.item()`, a Python float; in a
    compiled step (`runtime`: its hyper-parameters are runtime values) the count as a 0-d
    float64 tensor, since its item() would be a guard failing on every call. Arithmetic on
    either rounds alike (float64), so the compiled update is eager's."""
    if runtime:
        from .. import _dtype as D
        return step_t.to(D.float64)
    return step_t.item()


def scalar_state(value):
    """A 0-d state tensor other than `step` (NAdam's `mu_product`, ASGD's `eta` and `mu`):
    float64 under a float64 default dtype and float32 otherwise, as PyTorch keeps them."""
    t = step_counter()
    t.fill_(value)
    return t
