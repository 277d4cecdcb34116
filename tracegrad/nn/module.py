"""`Module`: the base class of layers and models (PyTorch's `nn.Module` contract).

A module owns three ordered registries, filled by attribute assignment:
`_parameters` (Parameters), `_buffers` (Tensors such as running statistics) and `_modules`
(child modules). Everything else (`parameters()`, `state_dict()`, `train()`, `repr`...) is
a walk over those registries, in registration order, so names and orders match PyTorch:
`state_dict` keys are `prefix + name`, a module's own parameters before its own buffers
before its children.
"""
from collections import OrderedDict
from collections.abc import Mapping

from .. import _effects
from .._errors import TracegradRuntimeError, TracegradTypeError, TracegradValueError
from .._tensor import Tensor
from ._module_helpers import (_Handle, _IncompatibleKeys, _check_name, _copy_entry,  # noqa
                              _indent, _typename, _zero_grad)
from ._module_hooks import call_with_hooks, has_hooks  # noqa: F401
from ._global_hooks import (register_module_forward_hook,  # noqa: F401
                            register_module_forward_pre_hook,
                            register_module_full_backward_hook,
                            register_module_full_backward_pre_hook)
from ._buffer import is_buffer
from . import _module_paths, _state_dict_hooks as _sdh
from .parameter import Parameter


class Module:
    """Base class for all neural network modules; subclasses define `forward`.

    >>> class Net(Module):
    ...     def __init__(self):
    ...         super().__init__()
    ...         self.fc = Linear(3, 1)
    ...     def forward(self, x):
    ...         return self.fc(x)
    """

    training: bool
    _version = 1          # state_dict format version, saved in `state_dict()._metadata`
    # What library code reads of the attributes below, by method (Note [Attributes only
    # some methods read] in compiler/state_method_reads.py): `training` is read by the
    # forwards that name it (Dropout, BatchNorm, ...) and by train()/eval(); a compiled
    # function whose trace ran no code naming it is not guarded on it. Subclasses add
    # theirs (merged along the MRO).
    _attribute_reads = {"training": {"train": None}}

    def __init__(self, *args, **kwargs):
        if args or kwargs:
            raise TracegradTypeError(f"{type(self).__name__}.__init__() got unexpected arguments")
        d = self.__dict__
        d["training"] = True
        d["_parameters"] = {}
        d["_buffers"] = {}
        d["_non_persistent_buffers_set"] = set()
        d["_modules"] = {}
        # Note [Module hook registries] in _module_hooks.py
        d["_forward_pre_hooks"] = OrderedDict()
        d["_forward_hooks"] = OrderedDict()
        d["_backward_pre_hooks"] = OrderedDict()
        d["_backward_hooks"] = OrderedDict()
        d["_forward_pre_hooks_with_kwargs"] = {}
        d["_forward_hooks_with_kwargs"] = {}
        d["_forward_hooks_always_called"] = {}

    def forward(self, *input):
        raise NotImplementedError(
            f'Module [{type(self).__name__}] is missing the required "forward" function')

    def __call__(self, *args, **kwargs):
        compiled = self.__dict__.get("_compiled_call_impl")
        if compiled is not None:                     # `self.compile()` ran
            return compiled.forward(*args, **kwargs)
        if not has_hooks(self):
            return self.forward(*args, **kwargs)     # the common case: no hooks to run
        return call_with_hooks(self, self.forward, args, kwargs)

    def compile(self, *args, **kwargs):
        """Compile this module's calls in place, as PyTorch's `Module.compile`: from now on
        `self(...)` runs what `tracegrad.compile(self, *args, **kwargs)` returns (hooks
        included; parameters, names and `state_dict` unchanged). Returns None."""
        from ..compiler.entry import compile as _compile
        self.__dict__["_compiled_call_impl"] = _compile(self, *args, **kwargs)

    def register_forward_pre_hook(self, hook, *, prepend=False, with_kwargs=False):
        """`hook(module, args)` runs before forward; may return replacement args. With
        `with_kwargs=True`, `hook(module, args, kwargs)` may return `(args, kwargs)`."""
        d = self.__dict__
        return _Handle.add(d["_forward_pre_hooks"], hook, prepend,
                           d["_forward_pre_hooks_with_kwargs"] if with_kwargs else None)

    def register_forward_hook(self, hook, *, prepend=False, with_kwargs=False,
                              always_call=False):
        """`hook(module, args, output)` runs after forward; may return a new output. With
        `with_kwargs=True`, `hook(module, args, kwargs, output)`; with `always_call=True` it
        also runs when forward raises."""
        d = self.__dict__
        return _Handle.add(d["_forward_hooks"], hook, prepend,
                           d["_forward_hooks_with_kwargs"] if with_kwargs else None,
                           d["_forward_hooks_always_called"] if always_call else None)

    def register_full_backward_pre_hook(self, hook, prepend=False):
        """`hook(module, grad_output)` runs when the gradients w.r.t. the module's outputs
        are computed; may return a new grad_output (Note [Full backward hooks])."""
        return _Handle.add(self.__dict__["_backward_pre_hooks"], hook, prepend)

    def register_full_backward_hook(self, hook, prepend=False):
        """`hook(module, grad_input, grad_output)` runs when the gradients w.r.t. the
        module's inputs are computed; may return a new grad_input (Note [Full backward
        hooks])."""
        return _Handle.add(self.__dict__["_backward_hooks"], hook, prepend)

    # Note [State-dict hook registries] in _state_dict_hooks.py
    register_state_dict_pre_hook = _sdh.register_state_dict_pre_hook
    register_state_dict_post_hook = _sdh.register_state_dict_post_hook
    _register_state_dict_hook = _sdh._register_state_dict_hook
    register_load_state_dict_pre_hook = _sdh.register_load_state_dict_pre_hook
    _register_load_state_dict_pre_hook = _sdh._register_load_state_dict_pre_hook
    register_load_state_dict_post_hook = _sdh.register_load_state_dict_post_hook

    # ---------------- registration ----------------
    def register_parameter(self, name, param):
        """Add `param` (a Parameter, or None) under `name`."""
        if "_parameters" not in self.__dict__:
            raise AttributeError("cannot assign parameter before Module.__init__() call")
        _check_name("parameter", name, self, self._parameters)
        if param is not None and not isinstance(param, Parameter):
            raise TracegradTypeError(f"cannot assign '{_typename(param)}' object to parameter "
                                     f"'{name}' (torch.nn.Parameter or None required)")
        if param is not None and param.grad_fn is not None:
            raise TracegradValueError(
                f"Cannot assign non-leaf Tensor to parameter '{name}'. Model parameters must "
                f"be created explicitly. To express '{name}' as a function of another Tensor, "
                "compute the value in the forward() method.")
        self._parameters[name] = param

    def register_buffer(self, name, tensor, persistent=True):
        """Add a Tensor (or None) that is state but not a parameter, e.g. running stats.

        Persistent buffers appear in `state_dict()`.
        """
        if "_buffers" not in self.__dict__:
            raise AttributeError("cannot assign buffer before Module.__init__() call")
        _check_name("buffer", name, self, self._buffers)
        if tensor is not None and not isinstance(tensor, Tensor):
            raise TracegradTypeError(f"cannot assign '{_typename(tensor)}' object to buffer "
                                     f"'{name}' (torch Tensor or None required)")
        self._buffers[name] = tensor
        if persistent:
            self._non_persistent_buffers_set.discard(name)
        else:
            self._non_persistent_buffers_set.add(name)

    def add_module(self, name, module):
        """Add a child module (or None) under `name`."""
        if module is not None and not isinstance(module, Module):
            raise TracegradTypeError(f"{_typename(module)} is not a Module subclass")
        if not isinstance(name, str):
            raise TracegradTypeError(f"module name should be a string. Got {_typename(name)}")
        if hasattr(self, name) and name not in self._modules:
            raise KeyError(f"attribute '{name}' already exists")
        if "." in name:
            raise KeyError(f'module name can\'t contain ".", got: {name}')
        if name == "":
            raise KeyError('module name can\'t be empty string ""')
        self._modules[name] = module

    register_module = add_module

    def __getattr__(self, name):
        # Only called when normal lookup fails: look in the registries.
        d = self.__dict__
        for reg in ("_parameters", "_buffers", "_modules"):
            r = d.get(reg)
            if r is not None and name in r:
                return r[name]
        raise AttributeError(f"'{type(self).__name__}' object has no attribute '{name}'")

    def __setattr__(self, name, value):
        d = self.__dict__
        params = d.get("_parameters")
        if isinstance(value, Parameter):
            if params is None:
                raise AttributeError("cannot assign parameters before Module.__init__() call")
            self._forget(name, keep="_parameters")
            self.register_parameter(name, value)
        elif params is not None and name in params:
            if value is not None:
                raise TracegradTypeError(f"cannot assign '{_typename(value)}' as parameter "
                                         f"'{name}' (torch.nn.Parameter or None expected)")
            params[name] = None
        elif isinstance(value, Module):
            if d.get("_modules") is None:
                raise AttributeError("cannot assign module before Module.__init__() call")
            self._forget(name, keep="_modules")
            self._modules[name] = value
        elif d.get("_modules") is not None and name in self._modules:
            if value is not None:
                raise TracegradTypeError(f"cannot assign '{_typename(value)}' as child module "
                                         f"'{name}' (torch.nn.Module or None expected)")
            self._modules[name] = None
        elif is_buffer(value) or d.get("_buffers") is not None and name in self._buffers:
            if value is not None and not isinstance(value, Tensor):
                raise TracegradTypeError(f"cannot assign '{_typename(value)}' as buffer '{name}' "
                                         "(torch.nn.Buffer, torch.Tensor or None expected)")
            if is_buffer(value):                 # `self.x = nn.Buffer(t, persistent=...)`
                persistent = value.persistent
            else:
                persistent = name not in self._non_persistent_buffers_set
            self.register_buffer(name, value, persistent)
        else:
            object.__setattr__(self, name, value)

    def _forget(self, name, keep=None):
        """Remove `name` from every registry but `keep`, the one it is about to be assigned
        in: as in PyTorch, re-assigning a parameter or submodule keeps its place in the
        order of `parameters()`, `state_dict()` and `named_modules()`."""
        d = self.__dict__
        d.pop(name, None)
        for reg in ("_parameters", "_buffers", "_modules"):
            if reg != keep:
                d[reg].pop(name, None)
        d["_non_persistent_buffers_set"].discard(name)

    def __delattr__(self, name):
        d = self.__dict__
        for reg in ("_parameters", "_buffers", "_modules"):
            if name in d.get(reg, ()):
                del d[reg][name]
                d["_non_persistent_buffers_set"].discard(name)
                return
        object.__delattr__(self, name)

    def __dir__(self):
        extra = list(self._parameters) + list(self._buffers) + list(self._modules)
        return sorted(set(object.__dir__(self)) | set(extra))

    # ---------------- traversal ----------------
    def named_modules(self, memo=None, prefix="", remove_duplicate=True):
        """Yield `(name, module)` for this module and all descendants, depth first."""
        if memo is None:
            memo = set()
        if remove_duplicate:
            if id(self) in memo:
                return
            memo.add(id(self))
        yield prefix, self
        for name, child in self._modules.items():
            if child is None:
                continue
            sub = prefix + ("." if prefix else "") + name
            yield from child.named_modules(memo, sub, remove_duplicate)

    def modules(self):
        for _, m in self.named_modules():
            yield m

    def named_children(self):
        seen = set()
        for name, child in self._modules.items():
            if child is not None and id(child) not in seen:
                seen.add(id(child))
                yield name, child

    def children(self):
        for _, m in self.named_children():
            yield m

    def _named_members(self, registry, prefix, recurse, remove_duplicate=True):
        mods = self.named_modules(prefix=prefix, remove_duplicate=remove_duplicate) \
            if recurse else [(prefix, self)]
        seen = set()
        for mod_prefix, mod in mods:
            for name, v in getattr(mod, registry).items():
                if v is None or (remove_duplicate and id(v) in seen):
                    continue
                seen.add(id(v))
                yield mod_prefix + ("." if mod_prefix else "") + name, v

    def named_parameters(self, prefix="", recurse=True, remove_duplicate=True):
        """Yield `(qualified_name, Parameter)`; shared parameters appear once."""
        yield from self._named_members("_parameters", prefix, recurse, remove_duplicate)

    def parameters(self, recurse=True):
        for _, p in self.named_parameters(recurse=recurse):
            yield p

    def named_buffers(self, prefix="", recurse=True, remove_duplicate=True):
        yield from self._named_members("_buffers", prefix, recurse, remove_duplicate)

    def buffers(self, recurse=True):
        for _, b in self.named_buffers(recurse=recurse):
            yield b

    def get_submodule(self, target):
        """The descendant at dotted path `target` ('' is self)."""
        mod = self
        for atom in target.split(".") if target else ():
            if not hasattr(mod, atom):
                raise AttributeError(f"{mod._get_name()} has no attribute `{atom}`")
            mod = getattr(mod, atom)
            if not isinstance(mod, Module):
                raise AttributeError(f"`{atom}` is not an nn.Module")
        return mod

    get_parameter = _module_paths.get_parameter
    get_buffer = _module_paths.get_buffer
    set_submodule = _module_paths.set_submodule

    def apply(self, fn):
        """Call `fn` on every submodule (children first) and on self; returns self."""
        for child in self.children():
            child.apply(fn)
        fn(self)
        return self

    # ---------------- modes and gradients ----------------
    def train(self, mode=True):
        """Set training mode on this module and all descendants; returns self.

        Note [Mode set while tracing]
        A training step often starts with `model.train()` (validation ran in eval mode
        in between). Inside a trace the call is recorded: the compiled path keeps its
        guards on the training flags at their values on entry (reads before the call see
        those; reads after it see what it set, the same on every call that passes the
        guards), and runs `train(mode)` again after each compiled call so the flags end
        as eager leaves them. The trace's own change of a flag is then not a reason to
        run eagerly (compiler/trace_settle.py `settle_state`)."""
        if not isinstance(mode, bool):
            raise TracegradValueError("training mode is expected to be boolean")
        tracer = _effects.active()
        if tracer is not None and not tracer.setting_mode:   # Note [Mode set while tracing]
            tracer.mode_replays.append((self, Module.train, (mode,), {}))
            tracer.setting_mode = True
            try:
                return self.train(mode)
            finally:
                tracer.setting_mode = False
        self.training = mode
        for child in self.children():
            child.train(mode)
        return self

    def eval(self):
        return self.train(False)

    def requires_grad_(self, requires_grad=True):
        for p in self.parameters():
            p.requires_grad_(requires_grad)
        return self

    def zero_grad(self, set_to_none=True):
        """Reset `.grad` of every parameter: to None (default) or to zeros in place."""
        for p in self.parameters():
            _zero_grad(p, set_to_none)

    # ---------------- dtype conversion ----------------
    def _apply(self, fn):
        """Replace every parameter's and buffer's data by `fn(data)`, in place."""
        for child in self.children():
            child._apply(fn)
        for p in self._parameters.values():
            if p is None:
                continue
            p.data = fn(p.data)
            if p.grad is not None:
                p.grad = fn(p.grad)
        for k, b in self._buffers.items():
            if b is not None:
                self._buffers[k] = fn(b)
        return self

    def to(self, *args, **kwargs):
        """`to(device)`, `to(dtype)`, `to(device, dtype)`, `to(tensor)`: converts floating
        parameters and buffers in place; a non-CPU device raises (tracegrad is CPU only)."""
        from .. import _dtype as D
        from .._device import check_device
        from .._tensor_device import _parse_to
        dev, dtype, _, _ = _parse_to(args, kwargs)
        check_device(dev)
        if dtype is None:
            return self
        dtype = D.as_dtype(dtype)
        if not dtype.is_floating_point:
            raise TracegradTypeError("nn.Module.to only accepts floating point dtypes, but got "
                                     f"desired dtype={dtype}")
        return self._apply(lambda t: t.to(dtype) if t.is_floating_point() else t)

    def double(self):
        return self._apply(lambda t: t.double() if t.is_floating_point() else t)

    def float(self):
        return self._apply(lambda t: t.float() if t.is_floating_point() else t)

    def half(self):
        return self._apply(lambda t: t.half() if t.is_floating_point() else t)

    def cpu(self):
        return self

    def cuda(self, device=None):
        from .._device import DeviceUnavailableError, _unavailable
        raise DeviceUnavailableError(_unavailable("cuda"))

    # ---------------- state dict ----------------
    def state_dict(self, *, destination=None, prefix="", keep_vars=False):
        """An ordered dict of every parameter and persistent buffer, by qualified name.

        Values are detached tensors sharing storage with the module (`keep_vars=True`
        keeps the Parameters themselves).
        """
        if destination is None:
            destination = OrderedDict()
            destination._metadata = OrderedDict()
        local_metadata = {"version": self._version}
        meta = getattr(destination, "_metadata", None)
        if meta is not None:
            meta[prefix[:-1]] = local_metadata
        _sdh.run_state_dict_pre_hooks(self, prefix, keep_vars)
        for name, p in self._parameters.items():
            if p is not None:
                destination[prefix + name] = p if keep_vars else p.detach()
        for name, b in self._buffers.items():
            if b is not None and name not in self._non_persistent_buffers_set:
                destination[prefix + name] = b if keep_vars else b.detach()
        for name, child in self._modules.items():
            if child is not None:
                child.state_dict(destination=destination, prefix=prefix + name + ".",
                                 keep_vars=keep_vars)
        return _sdh.run_state_dict_post_hooks(self, destination, prefix, local_metadata)

    def _load_from_state_dict(self, state_dict, prefix, local_metadata, strict,
                              missing_keys, unexpected_keys, error_msgs):
        """Copy this module's own entries from `state_dict` (subclasses may adapt keys)."""
        _sdh.run_load_pre_hooks(self, state_dict, prefix, local_metadata, strict,
                                missing_keys, unexpected_keys, error_msgs)
        local = {k: v for k, v in self._parameters.items() if v is not None}
        local.update((k, v) for k, v in self._buffers.items()
                     if v is not None and k not in self._non_persistent_buffers_set)
        for name, param in local.items():
            key = prefix + name
            if key not in state_dict:
                if strict:
                    missing_keys.append(key)
                continue
            _copy_entry(key, param, state_dict[key], error_msgs,
                        (self, name) if local_metadata.get("assign_to_params_buffers")
                        else None)
        if strict:
            for key in state_dict:
                if key.startswith(prefix):
                    parts = key[len(prefix):].split(".", 1)
                    # a dotted name must go through a child module, a plain one be local
                    if parts[0] not in (self._modules if len(parts) > 1 else local):
                        unexpected_keys.append(key)

    def load_state_dict(self, state_dict, strict=True, assign=False):
        """Copy parameters and buffers from `state_dict` in place (under no_grad);
        `assign=True` puts the state dict's tensors themselves in the module instead (their
        dtype and storage; parameters keep the module's requires_grad).

        With `strict=True`, missing or unexpected keys raise a RuntimeError listing them.
        Returns `(missing_keys, unexpected_keys)`.
        """
        if not isinstance(state_dict, Mapping):
            raise TracegradTypeError(
                f"Expected state_dict to be dict-like, got {type(state_dict)}.")
        missing, unexpected, errors = [], [], []
        metadata = getattr(state_dict, "_metadata", None) or {}
        state_dict = OrderedDict(state_dict)

        def load(module, local, prefix):
            meta = dict(metadata.get(prefix[:-1], {}))
            if assign:
                meta["assign_to_params_buffers"] = True
            module._load_from_state_dict(local, prefix, meta, True, missing, unexpected,
                                         errors)
            for name, child in module._modules.items():
                if child is not None:
                    p = prefix + name + "."
                    load(child, {k: v for k, v in local.items() if k.startswith(p)}, p)
            _sdh.run_load_post_hooks(module, _IncompatibleKeys(missing, unexpected))

        load(self, state_dict, "")
        if strict:
            if unexpected:
                errors.insert(0, "Unexpected key(s) in state_dict: {}. ".format(
                    ", ".join(f'"{k}"' for k in unexpected)))
            if missing:
                errors.insert(0, "Missing key(s) in state_dict: {}. ".format(
                    ", ".join(f'"{k}"' for k in missing)))
        if errors:
            raise TracegradRuntimeError("Error(s) in loading state_dict for {}:\n\t{}".format(
                type(self).__name__, "\n\t".join(errors)))
        return _IncompatibleKeys(missing, unexpected)

    # ---------------- printing ----------------
    def _get_name(self):
        return type(self).__name__

    def extra_repr(self):
        """The text inside this module's parentheses in `repr` (override in layers)."""
        return ""

    def __repr__(self):
        extra = self.extra_repr()
        extra_lines = extra.split("\n") if extra else []
        child_lines = [f"({name}): " + _indent(repr(m), 2)
                       for name, m in self._modules.items()]
        lines = extra_lines + child_lines
        body = ""
        if len(extra_lines) == 1 and not child_lines:
            body = extra_lines[0]
        elif lines:
            body = "\n  " + "\n  ".join(lines) + "\n"
        return f"{self._get_name()}({body})"
