"""The TracegradError family, and where in the user's program an error happened.

Every user-facing error subclasses `TracegradError` *and* the builtin PyTorch raises in the
same situation, so `except RuntimeError` code written for PyTorch keeps working. Messages
say what happened, in which op and at which user source line, and how to fix it.
"""
import contextlib
import os
import sys

_PKG_DIR = os.path.dirname(os.path.realpath(__file__))


class TracegradError(Exception):
    """Base class of all tracegrad errors."""


class TracegradRuntimeError(TracegradError, RuntimeError):
    """Raised where PyTorch raises RuntimeError (autograd misuse, shape mismatches, ...)."""


class TracegradTypeError(TracegradError, TypeError):
    """Raised where PyTorch raises TypeError (wrong argument kinds)."""


class TracegradIndexError(TracegradError, IndexError):
    """Raised where PyTorch raises IndexError (dimension or index out of range)."""


class TracegradValueError(TracegradError, ValueError):
    """Raised where PyTorch raises ValueError."""


class TracegradNotImplementedError(TracegradRuntimeError, NotImplementedError):
    """Raised where PyTorch raises NotImplementedError: an op has no kernel for a dtype
    (`"abs_cpu" not implemented for 'Bool'`)."""


class LinAlgError(TracegradRuntimeError):
    """A matrix could not be factored (torch.linalg.LinAlgError, a RuntimeError).

    Raised for a singular matrix given to `linalg.inv`/`linalg.solve`, or one that is not
    positive-definite given to `linalg.cholesky`."""


class InplaceError(TracegradRuntimeError):
    """An in-place operation invalidated a value autograd saved, or targeted a leaf."""


class CompileMismatchError(TracegradRuntimeError):
    """Check mode (`tracegrad.compile(fn, check=True)` or `TRACEGRAD_CHECK=1`): a compiled
    call gave a different output, gradient, `.grad`, input mutation or error than the same
    call run eagerly. The message names the first difference and the path's guards."""


class RerunEagerly(Exception):
    """Internal signal, never seen by users: a compiled forward program failed before it
    wrote into any input (Note [Errors inside compiled programs] in codegen.py), so the
    call runs again eagerly and raises eager's own error after eager's own partial effects.
    `error` is the translated error, raised instead where no eager run is possible."""

    def __init__(self, error):
        super().__init__(str(error))
        self.error = error


_inside = {}
# the standard library's `@contextmanager` machinery runs between a `with` line and
# tracegrad's own context managers (`fork_rng`): never the user's line
_CONTEXTLIB = os.path.realpath(contextlib.__file__)


def _is_internal(filename):
    r = _inside.get(filename)
    if r is None:
        real = "" if filename.startswith("<") else os.path.realpath(filename)
        r = filename.startswith("<tracegrad") or (
            bool(real) and (real.startswith(_PKG_DIR + os.sep) or real == _CONTEXTLIB))
        _inside[filename] = r
    return r


def user_site(skip_pkg=True):
    """`file:line in function` of the innermost frame outside tracegrad, or None.

    Cheap: walks frames with `sys._getframe`, no traceback objects; the inside/outside
    decision is cached per file (paths may reach the package as `bench/../tracegrad`).
    """
    f = sys._getframe(1)
    while f is not None:
        fn = f.f_code.co_filename
        if not (skip_pkg and _is_internal(fn)):
            return f"{fn}:{f.f_lineno} in {f.f_code.co_name}"
        f = f.f_back
    return None


def user_stacklevel():
    """The `stacklevel` that makes a `warnings.warn` in the caller of this function point
    at the innermost frame outside tracegrad: the user's line, however many of our frames
    (a compiled module's wrapper, `tg.func` transforms, check mode) lie between."""
    f, level = sys._getframe(1), 1
    while f is not None and _is_internal(f.f_code.co_filename):
        f, level = f.f_back, level + 1
    return level if f is not None else 1


def op_error(cls, op, msg, fix=None):
    """Build an error of class `cls` naming the op and the user's source line."""
    site = user_site()
    text = f"{op}: {msg}" if op else msg
    if fix:
        text += f" {fix}"
    if site:
        text += f"\n  (at {site})"
    return cls(text)
