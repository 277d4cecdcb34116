"""Grad mode and inference mode: thread-local switches, usable as context managers and decorators.

Modes live in `contextvars`, so every thread (and asyncio task) sees its own modes, as the
autograd mechanics note requires.
"""
import contextvars
import functools
import inspect

_grad_enabled = contextvars.ContextVar("tracegrad_grad_enabled", default=True)
_inference = contextvars.ContextVar("tracegrad_inference_mode", default=False)

grad_enabled = _grad_enabled.get       # fast accessors used by dispatch
inference_enabled = _inference.get


def is_grad_enabled():
    """True when operations record history for autograd."""
    return _grad_enabled.get()


def is_inference_mode_enabled():
    """True inside `inference_mode()`."""
    return _inference.get()


class _Mode:
    """Base: a context manager that is also a decorator (like torch.no_grad).

    As in PyTorch 2.x, `@no_grad` works bare as well as `@no_grad()`.
    """

    _bare_decorator = True

    def __new__(cls, *args, **kwargs):
        if cls._bare_decorator and len(args) == 1 and not kwargs and callable(args[0]):
            return cls()(args[0])
        return super().__new__(cls)

    def __call__(self, fn):
        if inspect.isgeneratorfunction(fn):
            return self._wrap_generator(fn)

        @functools.wraps(fn)
        def wrapper(*args, **kwargs):
            with self.__class__(*self._args):
                return fn(*args, **kwargs)
        return wrapper

    _args = ()

    def _wrap_generator(self, fn):
        """A decorated generator runs each step (up to its next yield) in the mode, as in
        PyTorch; the consumer's code between steps keeps its own mode."""
        mode = self.__class__

        def step(method, arg):
            with mode(*self._args):
                return method(arg)

        @functools.wraps(fn)
        def wrapper(*args, **kwargs):
            gen = fn(*args, **kwargs)
            try:
                response = step(gen.send, None)
                while True:
                    try:
                        request = yield response
                    except GeneratorExit:
                        step(lambda _: gen.close(), None)
                        raise
                    except BaseException as e:     # noqa: BLE001 -- forwarded to `gen`
                        response = step(gen.throw, e)
                    else:
                        response = step(gen.send, request)
            except StopIteration as stop:          # the generator returned
                return stop.value
        return wrapper

    def __exit__(self, *exc):
        for var, token in reversed(self._tokens):
            var.reset(token)
        return False


class no_grad(_Mode):
    """Disable gradient recording: results of operations have requires_grad=False."""

    def __enter__(self):
        self._tokens = [(_grad_enabled, _grad_enabled.set(False))]


class enable_grad(_Mode):
    """Re-enable gradient recording inside a no_grad block."""

    def __enter__(self):
        self._tokens = [(_grad_enabled, _grad_enabled.set(True))]


class set_grad_enabled(_Mode):
    """Set grad mode to `mode`; takes effect immediately, also as a plain call."""

    _bare_decorator = False

    def __init__(self, mode):
        self._args = (bool(mode),)
        self._prev = _grad_enabled.get()
        _grad_enabled.set(bool(mode))

    def __call__(self, fn):
        # Used as a decorator: creating it must not change the mode of the decorating code.
        _grad_enabled.set(self._prev)
        return super().__call__(fn)

    def __enter__(self):
        self._tokens = []

    def __exit__(self, *exc):
        _grad_enabled.set(self._prev)
        return False


class inference_mode(_Mode):
    """Inference mode: no grad recording, and new tensors are inference tensors."""

    def __init__(self, mode=True):
        self._args = (bool(mode),)
        self.mode = bool(mode)

    def __enter__(self):
        if self.mode:
            self._tokens = [(_inference, _inference.set(True)),
                            (_grad_enabled, _grad_enabled.set(False))]
        else:
            # PyTorch: leaving inference mode this way re-enables grad mode.
            self._tokens = [(_inference, _inference.set(False)),
                            (_grad_enabled, _grad_enabled.set(True))]

    def __call__(self, fn):
        if not callable(fn):
            raise TypeError("inference_mode() decorates a function; use it as inference_mode()")
        return super().__call__(fn)
