"""When and how a compiled function runs a call eagerly instead of a compiled path, and the
warning that says why: past `cache_limit`, a trace that changed state it reads, an error
inside a program, arguments sharing memory, saved_tensors_hooks, global module hooks,
anomaly mode, a generator or coroutine function.

`EagerFallbacks` is a base of `CompiledFunction` (compiler/function.py): it uses its `fn`,
`name`, `stats`, `cache_limit` and `_warned`."""
import inspect
import re
import warnings

from .._errors import user_stacklevel
from ..tracing.forward_memo import next_attempt
from . import place_writes


class EagerFallbacks:
    def _rerun(self, rerun, args, kwargs):
        """Run the call eagerly after its program raised `rerun` (a RerunEagerly: Note
        [Errors inside compiled programs] in codegen.py); eager raising the same error
        gets the program's note."""
        self.stats.eager_calls += 1
        self._reruns += 1                # (not a fallback: Note [Full graph])
        next_attempt()
        try:
            return self.fn(*args, **kwargs)
        except Exception as e:
            err = rerun.error
            if type(e) is type(err) and str(e) == str(err):
                for note in getattr(err, "__notes__", ()):
                    e.add_note(note)
            raise

    fullgraph = False                    # Note [Full graph] in fullgraph.py
    _eager_said = _eager_last = None
    _reruns = 0

    def _say_eager(self, text):
        """Warn that calls run eagerly (`fullgraph=True`: remember why; the call raises)."""
        self._eager_said = self._eager_last = text
        if not self.fullgraph:
            warnings.warn(text, UserWarning, stacklevel=user_stacklevel())

    def _warn_alias(self, why):
        if not getattr(self, "_alias_warned", False):
            self._alias_warned = True
            self._say_eager(f"tracegrad.compile: '{self.name}' runs eagerly for arguments like "
                            f"these: {why}")

    def _over_limit(self, args, kwargs, reason):
        if not self._warned:
            hint = ("Raise cache_limit or make the control flow depend less on tensor "
                    "values.")
            if reason and re.match(r"argument [^ ]+( \('[^']*'\))? changed \(", reason):
                hint = ("A Python value passed as an argument is part of the path's key, so "
                        "each new value traces again (a float or an int is read per call "
                        "where it is only computed with; used as a range, an index, a shape "
                        "or formatted, its value is needed): pass a value that changes on "
                        "every call, such as a step counter, as a tensor "
                        "(`tracegrad.tensor(step)`), or compute what depends on it outside "
                        "the compiled function.")
            elif reason and re.match(r"(global|closure variable|attribute) .* changed", reason):
                hint = ("The function reads Python state that changed between calls, and "
                        "each new value traces again: pass a value that changes on every "
                        "call as an argument (a float argument is read per call) or as a "
                        "tensor.")
            elif reason and reason.startswith(("guard item(", "guard float(", "guard int(")):
                hint = ("A Python number taken from a tensor is a guard on its value, "
                        "which differs on every call, where Python needs that value: "
                        "formatting or printing it, float(t), int(t), a bool tensor's "
                        ".item(). A number tensor's .item() that is only returned, or "
                        "computed with (+ - * / // %, comparisons), is read per call: return "
                        "it (or the tensor) and format or store it outside the compiled "
                        "function.")
            self._say_eager(f"tracegrad.compile: '{self.name}' reached cache_limit="
                            f"{self.cache_limit} paths (last reason: {reason}); running "
                            f"eagerly from now on. {hint}")
            self._warned = True
        self.stats.eager_calls += 1
        next_attempt()
        return self.fn(*args, **kwargs)

    def _saved_hooks_call(self, args, kwargs):
        """saved_tensors_hooks are active: run eagerly, so saved tensors go through them."""
        return self._eager_while(args, kwargs, "_warned_saved_hooks", (
            "saved_tensors_hooks are active (a compiled program keeps its saved values as "
            "arrays, not through the hooks)"))

    def _global_hooks_call(self, args, kwargs):
        """Global module hooks are registered: run eagerly, so they run around every module
        call (Note [Global module hooks] in nn/_global_hooks.py)."""
        return self._eager_while(args, kwargs, "_warned_global_hooks", (
            "global module hooks are registered (nn.modules.module.register_module_*_hook: "
            "they run around every module call, which a compiled program cannot replay)"))

    def _anomaly_call(self, args, kwargs):
        """Anomaly detection is on: run eagerly, so every node's gradients are checked."""
        return self._eager_while(args, kwargs, "_warned_anomaly", (
            "anomaly detection is enabled (each backward node's gradients are checked)"))

    def _generator_call(self, args, kwargs):
        """Note [Generator functions]
        Calling a function containing `yield` (or an `async def`) runs none of its body: it
        returns a generator (a coroutine) whose body runs as the caller iterates, after the
        call returned. There is no call to trace, and a path would return the very object
        the first call made (exhausted after its first use); so such a function runs eagerly,
        as torch.compile skips it, with one warning: compile the function the generator
        calls, or one consuming it (`list(gen(x))` inside is traced as usual)."""
        return self._eager_while(args, kwargs, "_warned_generator", (
            "it is a generator or coroutine function: its body runs as the caller iterates "
            "the object the call returns, after the call. Compile a function the generator "
            "calls, or one that consumes it, instead"), verb="on every call: ")

    def _eager_while(self, args, kwargs, flag, why, verb="while "):
        """Run the call eagerly while a mode is on, warning once per function (`flag`)."""
        if not getattr(self, flag, False):
            setattr(self, flag, True)
            self._say_eager(f"tracegrad.compile: '{self.name}' runs eagerly {verb}{why}")
        self.stats.eager_calls += 1
        return self.fn(*args, **kwargs)

    def _not_cached(self, entry, changed, out, growth=False):
        """The trace changed Python state it reads (Note [Captured state]): replaying the
        path would skip that change, so it is not cached. The call itself ran eagerly. A
        second such trace in a row makes calls like these run eagerly, with a warning;
        an optimizer creating state for more parameters does not count (`growth`, Note
        [Optimizer state growth] in state.py) up to `cache_limit` times."""
        entry.growths = getattr(entry, "growths", 0) + growth
        widened = place_writes.widen(self._floats, changed)
        if widened is not None:          # Note [Numbers written to Python state]
            entry.unstable_reason = widened
            return out
        g = changed[0]
        if growth and entry.growths <= self.cache_limit:
            entry.unstable_reason = (f"the last trace created optimizer state ({g.where}), "
                                     "so it was not kept")
            return out
        why = (f"it changes {g.where} ({g.reason().split(': ', 1)[-1]}), which it also "
               "reads")
        entry.unstable = getattr(entry, "unstable", 0) + 1
        entry.unstable_reason = f"the last trace changed state it reads: {g.where}"
        if entry.unstable >= 2:
            entry.eager = why
            self._say_eager(f"tracegrad.compile: '{self.name}' runs eagerly for arguments like "
                            f"these: {why}")
        return out


def is_generator_function(fn):
    """Whether calling `fn` returns a generator, an async generator or a coroutine without
    running its body (Note [Generator functions]): a function, bound method, partial or
    callable object."""
    call = fn if inspect.isfunction(fn) or inspect.ismethod(fn) or not callable(fn) \
        else getattr(fn, "func", None) or getattr(type(fn), "__call__", None)
    return any(check(c) for c in (fn, call) if c is not None
               for check in (inspect.isgeneratorfunction, inspect.isasyncgenfunction,
                             inspect.iscoroutinefunction))
